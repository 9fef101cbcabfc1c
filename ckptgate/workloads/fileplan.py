"""The per-rank file plan: which files each rank writes per checkpoint, and how many bytes.

Every driver consumes the same plan (the write burst, the readback, the resharded restore, the
metadata storm), so the profile's DCP split and a replayed checkpoint directory
(``ckptgate.workloads.replay``) are one input:

- from the profile (``dcp_plan``): each played global rank's shard split over
  ``checkpoint.files_per_rank`` files by ``ckptgate.sizing.rank_file_bytes`` (DCP's
  FileSystemWriter per-thread split, taken to its even limit), named as DCP names them,
  ``__{rank}_{index}.distcp``, plus the coordinator's ``.metadata`` of
  ``ckptgate.sizing.dcp_metadata_bytes`` bytes;
- from the profile's writer where it names the files (``named_plan``: under
  ``cluster.layout.writer: dcp`` DCP's planner's ``__{rank}_{i}.distcp`` and their bytes,
  plus ``.metadata``; under ``dlio`` DLIO's ``layer_XX-model_YY-model_states.pt`` and
  ``zero_pp_rank_D_mp_rank_MM_optim_states.pt``, 1 to 6 a rank, and no ``.metadata``);
- from a directory (``replay.scan_checkpoint``): its files' relative paths and sizes, grouped
  per rank where the names say so, and its metadata file.

Stamps: file ``i`` of a rank continues the rank's stamps where file ``i - 1`` ended, rounded
up to the stamp grid (``ckptgate.engine.datagen.step_bytes``), so every block of every file
is unique and each file starts on the grid (the write loop fills whole steps as for one file).

Lanes: a local rank process writes one or more ranks' files (``lanes``): one rank per lane
while there are enough processes, else whole ranks dealt largest first to the lane with the
fewest bytes (LPT, the rule DCP uses for its buckets), so a replayed tree with more ranks
than local processes still writes every file once.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptgate.engine.datagen import RANDOM, StampKey, step_bytes
from ckptgate.sizing import rank_file_bytes

METADATA_NAME = ".metadata"
"""PyTorch DCP's global metadata file, written by the coordinator once every rank is done."""


@dataclass(frozen=True)
class ShardFile:
    """One file of one checkpoint on the target: who writes it, where, how many bytes, with
    what stamp (byte ``i`` is stamp byte ``stamp_offset + i`` of the rank's ``stamp``)."""

    global_rank: int
    path: str
    bytes: int
    run_id: int
    transfer_bytes: int
    index: int = 0
    """Its index among its rank's files."""
    stamp_offset: int = 0
    """Where the file's stamps start, on the stamp grid (0 for a rank's first file)."""
    payload: str = RANDOM
    """What its bytes are (``StampKey.payload``): ``random``, or ``realistic-K``."""
    generation: int = 0
    """Its checkpoint's stream (``generation_of`` its directory; ``StampKey.generation``)."""

    @property
    def stamp(self) -> StampKey:
        return StampKey(self.run_id, self.global_rank, self.generation, self.payload)


def shard_file_name(global_rank: int, index: int = 0) -> str:
    """PyTorch DCP's FileSystemWriter names: ``__{rank}_{index}.distcp``."""
    return f"__{global_rank}_{index}.distcp"


@dataclass(frozen=True)
class PlannedFile:
    """One shard file of the plan: its path inside the checkpoint directory, its writer."""

    name: str
    """Relative path inside the checkpoint directory (``__3_1.distcp``,
    ``mp_rank_00_001/model_optim_rng.pt``)."""
    bytes: int
    global_rank: int
    """The rank that writes it: the profile's global rank, or the replayed tree's rank."""
    index: int
    """Its index among that rank's files (DCP's ``{index}``)."""


@dataclass(frozen=True)
class FilePlan:
    """One checkpoint's files: the shard files in (rank, index) order and the metadata file."""

    files: tuple[PlannedFile, ...]
    metadata_name: str | None
    """The coordinator's metadata file (``.metadata``), or None where the tree has none."""
    metadata_bytes: int
    rule: str
    """How the files were planned, in words (the split rule, or the replay's naming rule)."""
    source: str | None = None
    """The replayed directory, or None for the profile's own split."""
    ranks: int = 0
    """Ranks of the whole checkpoint (the coordinator's stamp is global rank ``ranks``)."""
    coordinator_files: tuple[tuple[str, int], ...] = ()
    """Further coordinator files (path, bytes) of a replayed tree besides the metadata file
    (another directory's ``.metadata``, Megatron's tracker), written with it at commit."""

    @property
    def shard_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def commits(self) -> list[tuple[str, int]]:
        """Every coordinator file (path, bytes) in the order the commit writes them, after
        every shard: the deepest directory's first (a nested ``ckpt/.metadata`` before the
        tracker beside ``ckpt/``), then by path."""
        named = list(self.coordinator_files)
        if self.metadata_name:
            named.append((self.metadata_name, self.metadata_bytes))
        return sorted(named, key=lambda c: (-c[0].count("/"), c[0]))

    @property
    def total_bytes(self) -> int:
        """Shard files and the coordinator files."""
        return self.shard_bytes + sum(size for _, size in self.commits)

    @property
    def file_count(self) -> int:
        """Shard files and the coordinator files."""
        return len(self.files) + len(self.commits)

    @property
    def coordinator_rank(self) -> int:
        """The stamp rank of the metadata file: one past the last rank, so its bytes are
        unique too."""
        return self.ranks

    def subdirectories(self) -> list[tuple[str, ...]]:
        """The directories the files sit in below the checkpoint directory, as path parts,
        each parent before its children (a replayed Megatron tree's ``mp_rank_XX_YYY/``)."""
        names = [f.name for f in self.files] + [name for name, _ in self.commits]
        parts = {tuple(n.split("/")[:depth]) for n in names for depth in range(1, n.count("/") + 1)}
        return sorted(parts, key=lambda p: (len(p), p))

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rule": self.rule,
            "ranks": self.ranks,
            "files": self.file_count,
            "bytes": self.total_bytes,
            "shard_files": len(self.files),
            "shard_bytes": self.shard_bytes,
            "metadata": self.metadata_name,
            "metadata_bytes": self.metadata_bytes,
            "commit_order": [name for name, _ in self.commits],
        }


def dcp_plan(
    global_ranks: Sequence[int],
    shard_bytes: Sequence[int],
    files_per_rank: int,
    *,
    ranks: int,
    metadata_bytes: int,
) -> FilePlan:
    """The profile's files for the played ``global_ranks``: each rank's ``shard_bytes`` split
    by ``rank_file_bytes`` into ``__{rank}_{index}.distcp``, and ``.metadata``."""
    files = tuple(
        PlannedFile(shard_file_name(g, i), size, g, i)
        for g, total in zip(global_ranks, shard_bytes, strict=True)
        for i, size in enumerate(rank_file_bytes(total, files_per_rank))
    )
    rule = (
        f"DCP split: each rank's shard in {files_per_rank} file"
        f"{'s' if files_per_rank != 1 else ''} __{{rank}}_{{index}}.distcp of equal size "
        "(the extra bytes one each to the lowest indices), plus .metadata"
    )
    return FilePlan(files, METADATA_NAME, metadata_bytes, rule, None, ranks)


def named_plan(
    global_ranks: Sequence[int],
    rank_files: Sequence[Sequence[tuple[str, int]]],
    *,
    ranks: int,
    metadata_name: str | None,
    metadata_bytes: int,
    rule: str,
) -> FilePlan:
    """The profile's files for the played ``global_ranks`` where its writer names them
    (``cluster.layout.writer`` dcp or dlio: each rank's (name, bytes) from the sizing), and
    the coordinator's metadata file where the writer writes one."""
    files = tuple(
        PlannedFile(name, size, g, i)
        for g, named in zip(global_ranks, rank_files, strict=True)
        for i, (name, size) in enumerate(named)
    )
    return FilePlan(files, metadata_name, metadata_bytes if metadata_name else 0, rule, None, ranks)


def generation_of(directory: str) -> int:
    """A checkpoint's generation: CRC-32 of its directory (the same string on every node), so
    that each checkpoint of a run has bytes of its own (``StampKey.generation``); 0 for none
    (the generator-only burst, which writes nowhere)."""
    return zlib.crc32(directory.encode()) if directory else 0


def shard_files(
    plan: FilePlan, directory: str, run_id: int, transfer_bytes: int, payload: str = RANDOM
) -> list[ShardFile]:
    """The plan's shard files in ``directory``, each with its stamp offset (module docstring),
    the run's ``payload`` (``StampKey.payload``) and the directory's generation."""
    generation = generation_of(directory)
    grid = step_bytes(transfer_bytes)
    next_offset: dict[int, int] = {}
    out = []
    for f in plan.files:
        offset = next_offset.get(f.global_rank, 0)
        next_offset[f.global_rank] = offset + -(-f.bytes // grid) * grid
        out.append(
            ShardFile(
                global_rank=f.global_rank,
                path=f"{directory}/{f.name}",
                bytes=f.bytes,
                run_id=run_id,
                transfer_bytes=transfer_bytes,
                index=f.index,
                stamp_offset=offset,
                payload=payload,
                generation=generation,
            )
        )
    return out


def commit_files(
    plan: FilePlan, directory: str, run_id: int, transfer_bytes: int
) -> list[ShardFile]:
    """The coordinator's files in ``directory`` in commit order (``FilePlan.commits``), all
    stamped as rank ``plan.ranks``, each continuing the stamps where the previous ended."""
    grid = step_bytes(transfer_bytes)
    out, offset = [], 0
    for index, (name, size) in enumerate(plan.commits):
        out.append(
            ShardFile(
                plan.coordinator_rank,
                f"{directory}/{name}",
                size,
                run_id,
                transfer_bytes,
                index=index,
                stamp_offset=offset,
            )
        )
        offset += -(-size // grid) * grid
    return out


def lanes(files: Sequence[ShardFile], count: int) -> list[list[ShardFile]]:
    """``files`` grouped by rank, the groups dealt onto at most ``count`` lanes (one local rank
    process each): one rank per lane while ``count`` allows, else largest rank first onto the
    lane with the fewest bytes (ties to the lowest lane). Each lane keeps (rank, index) order;
    lanes are ordered by their first rank. Deterministic: the write and every read agree."""
    if count < 1:
        raise ValueError(f"lanes need at least one rank process, got {count}")
    groups: dict[int, list[ShardFile]] = {}
    for f in files:
        groups.setdefault(f.global_rank, []).append(f)
    ordered = [sorted(g, key=lambda f: f.index) for _, g in sorted(groups.items())]
    if len(ordered) <= count:
        return ordered
    loads = [0] * count
    dealt: list[list[list[ShardFile]]] = [[] for _ in range(count)]
    by_size = sorted(ordered, key=lambda g: (-sum(f.bytes for f in g), g[0].global_rank))
    for group in by_size:
        lane = min(range(count), key=lambda i: (loads[i], i))
        dealt[lane].append(group)
        loads[lane] += sum(f.bytes for f in group)
    out = [[f for group in sorted(d, key=lambda g: g[0].global_rank) for f in group] for d in dealt]
    return sorted(out, key=lambda lane: lane[0].global_rank)


NULL_BURST_MIN_BYTES = 64 * 2**20
"""Each rank of a burst with no storage behind it (the generator's null sink, the null-source
read) moves at least this much: a trial's capped lane of a few megabytes would last
milliseconds, which a busy moment of the machine decides, not the path measured."""


def null_burst_files(groups: Sequence[Sequence[ShardFile]]) -> list[ShardFile]:
    """One file per lane (``lanes``) for a burst with no storage behind it: the lane's first
    file (its rank, stamp and transfer size) holding the whole lane's bytes, at least
    ``NULL_BURST_MIN_BYTES``, stamped from offset 0."""
    return [
        dataclasses.replace(
            lane[0],
            bytes=max(sum(f.bytes for f in lane), NULL_BURST_MIN_BYTES),
            stamp_offset=0,
        )
        for lane in groups
    ]
