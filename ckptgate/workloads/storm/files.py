"""The storm's files: their names and paths in one directory, the commit's two paths, and how
the files are split over the ranks (shared by every phase of ``ckptgate.workloads.storm``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.engine.datagen import BLOCK_BYTES
from ckptgate.engine.records import RankDetail
from ckptgate.rundir.manifest import FileStamp, Writer
from ckptgate.rundir.target import Target
from ckptgate.workloads.fileplan import FilePlan, generation_of, shard_file_name

METADATA_NAME = ".metadata"
METADATA_TMP_NAME = ".metadata.tmp"
METADATA_STAMP_RANK = 2**63 - 1
"""The stamp key's rank for the .metadata padding: no global rank's shard bytes repeat it."""
PADDING_TRANSFER_BYTES = 16 * 2**20
"""The padding is written in transfers of this size (the default run.transfer_bytes)."""
WRITE_BYTES = BLOCK_BYTES
"""The small write per file: one stamped 4 KiB block (a tiny shard, as small ranks save)."""


@dataclass(frozen=True)
class FilesDetail(RankDetail):
    """A metadata rank's files (or listings) done."""

    files: int


@dataclass(frozen=True)
class StormFile:
    """One file of the storm: which global rank writes it, its index, and its path."""

    global_rank: int
    index: int
    path: str

    @property
    def generation(self) -> int:
        """Its storm's stream (``generation_of`` its directory): the older and the newer storm
        of a check are on the target at once, and hold no bytes in common."""
        return generation_of(self.path.rpartition("/")[0])


def storm_files(
    directory: str,
    files: int,
    files_per_rank: int,
    rank_names: Sequence[Sequence[str]] | None = None,
) -> list[StormFile]:
    """The first ``files`` files of the checkpoint in global order (rank, index), one directory.

    At full count (``gpus x files_per_rank``) that is every rank's files, as DCP lays them out;
    with ``rank_names`` (each rank's file names, where the profile's writer names them: DLIO's
    1 to 6 a rank, DCP's planner's; or a benchmark's peer's, ``benchmarks.storms.storm_names``)
    those names, in the same order.
    """
    if files < 1 or files_per_rank < 1:
        raise ValueError(f"a storm needs files >= 1 and files_per_rank >= 1, got {files}")
    if rank_names is not None:
        named = [
            StormFile(rank, index, join(directory, name))
            for rank, names in enumerate(rank_names)
            for index, name in enumerate(names)
        ]
        return named[:files]
    return [
        StormFile(
            n // files_per_rank,
            n % files_per_rank,
            join(directory, shard_file_name(n // files_per_rank, n % files_per_rank)),
        )
        for n in range(files)
    ]


def planned_storm_files(directory: str, plan: FilePlan) -> list[StormFile]:
    """A file plan's shard files as storm files in ``directory`` (a replayed tree's relative
    paths and ranks; ``.metadata`` is the commit's)."""
    return [StormFile(f.global_rank, f.index, join(directory, f.name)) for f in plan.files]


def metadata_paths(directory: str) -> tuple[str, str]:
    """The commit's two paths: ``.metadata.tmp`` (written) and ``.metadata`` (renamed to)."""
    return join(directory, METADATA_TMP_NAME), join(directory, METADATA_NAME)


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """``items`` in ``parts`` contiguous chunks whose sizes differ by at most one."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for part in range(parts):
        end = start + size + (1 if part < extra else 0)
        chunks.append(list(items[start:end]))
        start = end
    return chunks


def join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def register_storm(target: Target, files: Sequence[StormFile], run_id: int) -> None:
    """Register a storm's files before they exist. Each is one stamped block at its (rank,
    index) offset, so the manifest can re-verify it (``ckptgate verify``)."""
    target.register(
        [f.path for f in files],
        stamps=[FileStamp(run_id, f.global_rank, WRITE_BYTES, f.index * WRITE_BYTES,
                           f.generation) for f in files],
        sizes=[WRITE_BYTES] * len(files),
        writer=Writer.STORM,
    )  # fmt: skip
