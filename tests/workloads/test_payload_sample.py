"""How reducible the run's bytes are (issue 53): the sample is spread over every file and
reaches each file's last byte, and the payload a rank writes gives a compressor with a long
window, block dedup and a header-blind fold nothing to fold, for every writer layout, a file
smaller than one transfer and an uneven last transfer; the old reused pool is caught."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import fsspec
import numpy as np
import pytest

from ckptgate.campaigns.write import file_plan
from ckptgate.checks.payload import REDUCTION_LIMIT
from ckptgate.cluster.nodes import SingleNode
from ckptgate.cluster.plan import plan_node
from ckptgate.engine.datagen import BLOCK_BYTES, MAGIC, StampKey, write_stamped
from ckptgate.rundir.janitor import Janitor
from ckptgate.sizing import load_profile
from ckptgate.workloads.fileplan import ShardFile, shard_files
from ckptgate.workloads.payload_sample import (
    PIECE_BYTES,
    Piece,
    plan_sample,
    read_sample,
    reduction_ratios,
)

MiB = 2**20
RUN_ID = 53
TRANSFER_BYTES = 1 * MiB


def _written(tmp_path: Path, *overrides: str) -> list[ShardFile]:
    """This node's files of one round of the tmpfs profile's plan under ``overrides``, written
    as the ranks write them (each transfer ``fill``-ed on the stamp grid)."""
    profile = load_profile("tmpfs", overrides=list(overrides))
    ctx = SimpleNamespace(profile=profile, plan=plan_node(profile, 4), nodes=SingleNode())
    plan = file_plan(ctx)  # type: ignore[arg-type]
    for sub in plan.subdirectories():
        (tmp_path.joinpath(*sub)).mkdir(parents=True, exist_ok=True)
    files = shard_files(plan, str(tmp_path), RUN_ID, TRANSFER_BYTES)
    for f in files:
        write_stamped(f.path, f.stamp, TRANSFER_BYTES, f.bytes, f.stamp_offset)
    return files


def _measured(files: list[ShardFile], budget: int = 16 * MiB) -> list[float]:
    pieces = plan_sample(files, budget)
    janitor = Janitor(fsspec.filesystem("file"), stall_s=60.0)
    try:
        data = read_sample(janitor, pieces)
    finally:
        janitor.close()
    ratios = reduction_ratios(data, files=len(files))
    return [ratios.compress_long, ratios.dedup_4k, ratios.dedup_8k, ratios.fold_4k_headerless]


DCP = ("model.parameters=null", "cluster.layout.writer=dcp", "cluster.parallelism.pp=1",
       "cluster.parallelism.dp=4", "cluster.parallelism.zero_stage=3")  # fmt: skip
"""DCP's writer plans a data-parallel save (FSDP: every tensor Shard(0) over the ranks)."""
LAYOUTS = {
    "dcp": DCP,
    "megatron": ("cluster.layout.writer=megatron",),
    "dlio": ("cluster.layout.writer=dlio",),
    "dcp-files_per_rank=3": (*DCP, "checkpoint.files_per_rank=3"),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS), ids=lambda n: f"writer={n}")
def test_no_reduction_folds_a_round_of_any_writer_layout(tmp_path: Path, layout: str) -> None:
    cap = "run.shard_bytes_cap=2621440"  # 2.5 MiB: every file ends in an uneven transfer
    files = _written(tmp_path, *LAYOUTS[layout], cap)
    assert any(f.bytes % TRANSFER_BYTES for f in files)
    ratios = _measured(files)
    assert all(r <= REDUCTION_LIMIT for r in ratios), (layout, ratios)


def test_no_reduction_folds_a_replayed_trees_files(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "model").mkdir(parents=True)
    for name, size in (("model/__0_0.distcp", 3 * MiB + 100), ("__1_0.distcp", 700_000)):
        (tree / name).write_bytes(b"\0" * size)  # a replay takes names and sizes, never content
    (tree / ".metadata").write_bytes(b"m" * 1000)
    out = tmp_path / "out"
    out.mkdir()
    files = _written(out, f"checkpoint.replay={tree}")
    assert len(files) >= 2
    assert all(r <= REDUCTION_LIMIT for r in _measured(files))


def test_a_file_smaller_than_one_transfer_and_one_block_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "small.distcp"
    write_stamped(str(path), StampKey(RUN_ID, 3), TRANSFER_BYTES, 3000)
    small = ShardFile(3, str(path), 3000, RUN_ID, TRANSFER_BYTES)
    assert [(p.offset, p.length) for p in plan_sample([small], 64 * MiB)] == [(0, 3000)]
    assert all(r <= REDUCTION_LIMIT for r in _measured([small]))


def test_the_sample_is_spread_over_every_file_to_its_last_byte_within_the_budget() -> None:
    files = [ShardFile(r, f"/f{r}", 40 * MiB + 12345, RUN_ID, 16 * MiB) for r in range(4)]
    pieces = plan_sample(files, 16 * MiB)
    assert sum(p.length for p in pieces) <= 16 * MiB + 4 * 12345
    for f in files:
        mine = [p for p in pieces if p.path == f.path]
        assert len(mine) == 4 and all(p.length <= PIECE_BYTES + 12345 for p in mine)
        assert mine[0].offset == 0 and mine[-1].offset + mine[-1].length == f.bytes
        assert all(p.offset % BLOCK_BYTES == 0 for p in mine)


def test_the_old_reused_pool_is_caught_by_the_long_window_and_the_header_blind_fold() -> None:
    """The payload before issue 53: one transfer-sized random pool per rank, reused for every
    transfer, stamped at the head of each 4 KiB block. No two blocks are equal (block dedup
    finds nothing), but a long window folds the repeats and so does a fold past the stamps."""
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 2**64, size=TRANSFER_BYTES // 8, dtype=np.uint64)
    blocks = pool.reshape(-1, BLOCK_BYTES // 8)
    blocks[:, 0], blocks[:, 1], blocks[:, 2] = MAGIC, RUN_ID, 0
    pieces = []
    for transfer in range(16):
        blocks[:, 3] = (
            np.arange(len(blocks), dtype=np.uint64) * BLOCK_BYTES + transfer * TRANSFER_BYTES
        )
        pieces.append(pool.tobytes())
    ratios = reduction_ratios(pieces)
    assert ratios.dedup_4k == 1.0
    assert ratios.compress_long > 10 and ratios.fold_4k_headerless > 10


def test_a_file_read_in_one_piece_is_read_at_its_end() -> None:
    """Where a file's share holds one piece, that piece ends at the file's last byte (the
    review found the head read and the uneven last transfer never sampled)."""
    files = [ShardFile(r, f"/f{r}", 100 * MiB + 5000, RUN_ID, 16 * MiB) for r in range(64)]
    pieces = plan_sample(files, 8 * MiB)
    assert len(pieces) == 64
    assert all(p.offset + p.length == 100 * MiB + 5000 for p in pieces)
    assert all(p.offset % BLOCK_BYTES == 0 for p in pieces)


def test_many_tiny_files_are_sampled_within_the_budget_first_and_last_included() -> None:
    files = [ShardFile(r, f"/f{r}", 10_000, RUN_ID, 16 * MiB) for r in range(1000)]
    pieces = plan_sample(files, 1 * MiB)
    assert sum(p.length for p in pieces) <= 1 * MiB + len(pieces) * BLOCK_BYTES
    assert len(pieces) == 256 and pieces[0].path == "/f0" and pieces[-1].path == "/f999"


def test_a_short_read_names_the_file_and_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "short.distcp"
    path.write_bytes(b"x" * 5000)
    janitor = Janitor(fsspec.filesystem("file"), stall_s=60.0)
    try:
        with pytest.raises(OSError, match="short read: 904 of 8192 bytes at offset 4096"):
            read_sample(janitor, [Piece(str(path), 4096, 8192)])
    finally:
        janitor.close()
