"""A DCP rank's bytes as they go, reported into its progress slot for the live line.

One job: count what PyTorch DCP writes and reads on this rank while ``dcp.save`` /
``dcp.load`` run, and hand the running total to ``RankContext.progress`` (the engine's slot,
the one the write burst's ranks report into; the parent's sampler reads it). DCP itself
reports nothing during a save or a load. torch's ``filesystem.py`` (2.x) gives two hooks:

- writes: ``FileSystemWriter.fs``, the ``FileSystem`` whose ``create_stream(path, "wb")``
  every data file is written through (``_write_files_from_queue``, one or ``thread_count``
  threads). ``CountingFileSystem`` opens the same buffered file over a ``FileIO`` that counts
  each ``write`` as it reaches the OS: the bytes of the ``.distcp`` files, which are what the
  driver measures on disk (``.metadata`` is not counted: it is not in any rank's total).
- reads: ``FileSystemReader.read_data(plan, planner)`` knows the rank's whole read plan (each
  item's stored length), and calls ``_slice_file`` once per item before it loads it.
  ``CountingReader`` reports the plan's bytes as the rank's total (``total_bytes``: only the
  rank knows it, once DCP has planned) and counts an item done when the next one begins or
  the plan ends: item by item, never past the total (a count of raw reads would include
  buffered read-ahead and torch.load's seeks). A load step then verifies every block it
  loaded (``ckptgate.dcp.verify``), which takes longer than the read on a page-cache target;
  those bytes are counted too, in the same total (``ByteCounter.more_bytes``), so the line
  does not stand at 100 % through the verification.

Chosen over polling the checkpoint directory's file sizes from the parent: that would be a
second way for progress to reach the live line beside the slots, sees no reads, and cannot tell
whose file a byte is in. The one case the counting stream cannot see is the process-based async
save, whose files torch writes from a checkpoint process it spawns (no slot there); for it
``wait_polling_files`` has the rank stat its own ``__{rank}_*.distcp`` files while it waits for
the save to complete, reporting through the same slot.

Imports torch: imported only by ``ckptgate.dcp.worker``'s steps, inside the rank processes.
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from typing import IO, TYPE_CHECKING, Any

from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.filesystem import FileSystem
from torch.futures import Future as TorchFuture

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

DATA_SUFFIX = ".distcp"
"""DCP's data files (``__{rank}_{i}.distcp``); the driver's per-rank bytes count these."""
POLL_S = 0.2
"""How often a rank waiting for a process-based async save stats its files (the pool's watch
loop reads the slots as often)."""


class ByteCounter:
    """A rank's bytes done in one step, from any of DCP's writer threads, reported as a total
    (``report(bytes=...)``, under a lock so that a later total never lands before an earlier)."""

    def __init__(self, report: Callable[..., None]) -> None:
        self._report = report
        self._lock = threading.Lock()
        self.done_bytes = 0
        self.more_bytes = 0
        """What the step counts beyond DCP's own I/O (a load's verification), in its total."""

    def add(self, nbytes: int) -> None:
        with self._lock:
            self.done_bytes += nbytes
            self._report(bytes=self.done_bytes)

    def set(self, done_bytes: int) -> None:
        with self._lock:
            self.done_bytes = done_bytes
            self._report(bytes=done_bytes)

    def expect(self, dcp_bytes: int) -> None:
        """This step's total, known only here: DCP's (a load's plan) and ``more_bytes``."""
        self._report(total_bytes=dcp_bytes + self.more_bytes)


_COUNTER: ByteCounter | None = None
"""The running step's counter in this rank process (``counting``); None elsewhere, as in the
checkpoint process of a process-based async save, where the streams count nothing."""


@contextlib.contextmanager
def counting(report: Callable[..., None]) -> Iterator[ByteCounter]:
    """Count the DCP I/O of this rank process into ``report`` (``RankContext.progress``)
    for the duration of one step."""
    global _COUNTER
    counter = _COUNTER = ByteCounter(report)
    try:
        yield counter
    finally:
        _COUNTER = None


class _CountingFileIO(io.FileIO):
    """A file whose writes are counted as the OS takes them."""

    def __init__(self, path: str, mode: str, counter: ByteCounter) -> None:
        super().__init__(path, mode)
        self._counter = counter

    def write(self, b: ReadableBuffer, /) -> int:
        written = super().write(b)
        self._counter.add(written)
        return written


class CountingFileSystem(FileSystem):
    """torch's ``FileSystem`` whose data files count their bytes (module docstring). Holds no
    state, so a writer that carries it still pickles (the process-based async save sends its
    writer to torch's checkpoint process, where nothing is counted)."""

    @contextlib.contextmanager
    def create_stream(
        self, path: str | os.PathLike[str], mode: str
    ) -> Generator[io.IOBase, None, None]:
        counter = _COUNTER
        if counter is None or "w" not in mode or not os.fspath(path).endswith(DATA_SUFFIX):
            with super().create_stream(path, mode) as stream:
                yield stream
            return
        # what Path.open("wb") gives torch, a BufferedWriter over a FileIO, counting
        with io.BufferedWriter(_CountingFileIO(os.fspath(path), "wb", counter)) as stream:
            yield stream


class CountingReader(FileSystemReader):
    """torch's ``FileSystemReader`` that reports its plan's bytes and counts each item read."""

    _pending_bytes = 0

    def read_data(self, plan: Any, planner: Any) -> TorchFuture[None]:
        counter = _COUNTER
        if counter is not None:
            counter.expect(sum(self.storage_data[i.storage_index].length for i in plan.items))
        self._pending_bytes = 0
        result = super().read_data(plan, planner)
        self._count_pending()
        return result

    def _slice_file(self, file: Any, sinfo: Any) -> IO[bytes]:
        self._count_pending()  # the item before this one is loaded
        self._pending_bytes = int(sinfo.length)
        return super()._slice_file(file, sinfo)

    def _count_pending(self) -> None:
        counter, pending = _COUNTER, self._pending_bytes
        self._pending_bytes = 0
        if counter is not None and pending:
            counter.add(pending)


def rank_file_bytes(path: str, rank: int) -> int:
    """The bytes of rank ``rank``'s data files in checkpoint directory ``path`` so far."""
    total = 0
    for name in glob.glob(os.path.join(glob.escape(path), f"__{rank}_*{DATA_SUFFIX}")):
        with contextlib.suppress(FileNotFoundError):
            total += os.stat(name).st_size
    return total


def wait_polling_files(future: Future[Any], path: str, rank: int, counter: ByteCounter) -> None:
    """Wait for a save written by another process (``future``), reporting this rank's files'
    bytes every ``POLL_S`` and once more at the end."""
    while True:
        try:
            future.result(timeout=POLL_S)
        except TimeoutError:
            counter.set(rank_file_bytes(path, rank))
            continue
        counter.set(rank_file_bytes(path, rank))
        return
