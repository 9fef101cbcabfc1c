"""What one comparison of ``ckptgate bench`` runs: ``BenchSettings`` (the shape both sides
share and how the pairs are timed), the peers and variants each kind allows, and the size
parser of the command line (fio's binary suffixes and decimal ones).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from ckptgate.sizing.units import GB, KB, MB, GiB, KiB, MiB
from ckptgate.workloads.storm import (
    WRITE_BYTES,
)

_UNITS = {
    # fio's own suffixes (k, m, g) are binary; the constants are ckptgate.sizing.units'
    "": 1,
    "b": 1,
    "k": KiB,
    "kib": KiB,
    "m": MiB,
    "mib": MiB,
    "g": GiB,
    "gib": GiB,
    "kb": KB,
    "mb": MB,
    "gb": GB,
}


def parse_size(text: str) -> int:
    """``256MiB`` / ``4m`` (binary, as fio reads ``bs=4m``) / ``1GB`` (decimal) -> bytes."""
    found = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = found.group(2).lower() if found else None
    if found is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: use an integer with B, KiB, MiB, GiB (or k, m, g), KB, MB, GB"
        )
    return int(found.group(1)) * _UNITS[unit]


@dataclass(frozen=True)
class BenchSettings:
    """What one comparison runs: the shape both sides share and how the pairs are timed.

    ``main`` builds it once from the command line (each field is the option of the same name,
    ``--bytes-per-rank`` as ``bytes_per_rank``); a test or a script builds it directly. The
    defaults are the command line's. Sizes are bytes, times seconds.
    """

    ranks: int = 4
    """Rank processes on the suite's side, fio jobs on the other."""
    bytes_per_rank: int = 256 * MiB
    """write and read: each rank's file, in bytes."""
    transfer: int = 4 * MiB
    """write and read: the size of each write or read call, in bytes."""
    files: int = 20000
    """create: files in all (rounded up to a whole number per rank)."""
    repeats: int = 5
    """Timed pairs."""
    warmup: int = 1
    """Untimed pairs before the timed ones."""
    settle_s: float = 0.0
    """Idle seconds before every run, either side."""
    shift: int = 1
    """read: rank i reads the file rank i + shift wrote."""
    direct: bool = False
    """read: O_DIRECT on both sides."""
    timeout_s: float = 600.0
    """The suite's deadline for each burst."""
    fio_processes: bool = False
    """fio's jobs as processes (fio's default) instead of threads (``fio.SCHEDULING``)."""
    fio: str = "fio"
    """fio's name on PATH, or its path (``--fio``)."""
    peer: str | None = None
    """The tool on the other side (``--peer``): fio or ior for write and read, fio for
    create, mdtest for metadata; None: the kind's first (``PEERS``)."""
    ior: str | None = None
    """IOR's path (``--ior``); None: ior on PATH."""
    mdtest: str | None = None
    """mdtest's path (``--mdtest``); None: mdtest on PATH."""
    variant: str = "pure"
    """metadata: ``pure`` (create+close, mdtest ``-C``) or ``checklist`` (create, a 4 KiB
    stamped write, fsync, close, as ``checks/metadata.py`` runs the storm; mdtest
    ``-C -w 4096 -y``), ``VARIANTS``."""
    storm_loop: str = "auto"
    """metadata: the storm's per-file loop (``--storm-loop``: auto, native, python;
    ``ckptgate.workloads.storm.loops``), to set the C loop and the Python loop side by side."""
    file_names: str = "dcp"
    """create and metadata: the suite's storm files' names (``--file-names``, ``FILE_NAMES``):
    ``dcp``, DCP's shard names as the checklist's storm makes them (``__R_I.distcp``), or
    ``peer``, the peer's own (mdtest's ``file.mdtest.R.I``, fio's ``create.R.I``), so that both
    sides create the same names (a file system's create rate can depend on the names:
    benchmarks/README.md, issue 33)."""

    def __post_init__(self) -> None:
        if self.ranks < 1 or self.repeats < 1 or self.warmup < 0:
            raise ValueError("--ranks and --repeats must be positive, --warmup not negative")
        if self.variant not in VARIANTS:
            raise ValueError(f"--variant {self.variant}: use {' or '.join(VARIANTS)}")
        if self.file_names not in FILE_NAMES:
            raise ValueError(f"--file-names {self.file_names}: use {' or '.join(FILE_NAMES)}")

    @property
    def files_per_rank(self) -> int:
        """create and metadata: each rank's files, ``files`` over the ranks rounded up (both
        sides make ``files_per_rank * ranks``)."""
        return -(-self.files // self.ranks)

    @property
    def storm_write_bytes(self) -> int:
        """Bytes each storm file gets written (both sides): 0, or the checklist's 4 KiB."""
        return WRITE_BYTES if self.variant == "checklist" else 0

    @property
    def storm_fsync(self) -> bool:
        """Whether each storm file is fsynced after its write (both sides)."""
        return self.variant == "checklist"

    def peer_for(self, kind: str) -> str:
        """The peer tool this comparison runs against; ``ValueError`` for one the kind lacks
        (or a variant other than pure for a kind without variants)."""
        allowed = PEERS[kind]
        peer = self.peer or allowed[0]
        if peer not in allowed:
            raise ValueError(f"--peer {peer}: {kind} compares with {' or '.join(allowed)}")
        if self.variant != "pure" and kind != "metadata":
            raise ValueError(f"--variant {self.variant}: only metadata has variants, not {kind}")
        if self.file_names != "dcp" and kind not in ("create", "metadata"):
            raise ValueError(
                f"--file-names {self.file_names}: only create and metadata name a storm's "
                f"files, not {kind}"
            )
        return peer

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchSettings:
        """The settings that ``build_parser``'s parsed arguments ask for; ``ValueError`` when
        they are out of range."""
        return cls(
            ranks=args.ranks,
            bytes_per_rank=args.bytes_per_rank,
            transfer=args.transfer,
            files=args.files,
            repeats=args.repeats,
            warmup=args.warmup,
            settle_s=args.settle_s,
            shift=args.shift,
            direct=args.direct,
            timeout_s=args.timeout_s,
            fio_processes=args.fio_processes,
            fio=args.fio or "fio",
            peer=args.peer,
            ior=args.ior,
            mdtest=args.mdtest,
            variant=args.variant,
            storm_loop=args.storm_loop,
            file_names=args.file_names,
        )


PEERS: dict[str, tuple[str, ...]] = {
    "write": ("fio", "ior"),
    "read": ("fio", "ior"),
    "create": ("fio",),
    "metadata": ("mdtest",),
}
"""Each kind's peer tools; the first is the default."""

VARIANTS = ("pure", "checklist")
"""The metadata storm's variants (``--variant``): no write and no fsync, or the checklist's."""

FILE_NAMES = ("dcp", "peer")
"""The storm files' names (``--file-names``): DCP's, as the checklist makes them, or the peer's."""
