"""DCP's save plan at scale (sizing.dcp_scale) gives exactly the item-by-item plan's files.

sizing.dcp_plan replays DCP's planner item by item (held to real saves by
tests/dcp/test_plan_fidelity.py); dcp_scale must give the same bytes for every file of every
rank, also where chunks are short or empty (world sizes above a tensor's rows), for FSDP and
replicated state, K = 12, 14, 16 and thread_count 1 to 8. Its speed is measured by
``python -m ckptgate.sizing.dcp_scale``, not here.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ckptgate.sizing.architecture import Architecture
from ckptgate.sizing.dcp_plan import dcp_save_layout, dedup_save_plans, local_plan
from ckptgate.sizing.dcp_scale import _fill_equal, dcp_chunk_count, dcp_rank_file_bytes

SMALL = Architecture(hidden=16, ffn_hidden=40, layers=3, heads=4, kv_heads=1, vocab=37)
"""K and V have 4 rows: from 5 ranks on, some chunks are empty (and dedup'd)."""
TEST_SHAPE = Architecture(hidden=64, ffn_hidden=128, layers=2, heads=4, kv_heads=2, vocab=250)
"""The shape the real saves of tests/dcp/test_plan_fidelity.py use."""


def _item_by_item(
    arch: Architecture, k: int, world_size: int, threads: int, layout: str
) -> tuple[tuple[int, ...], ...]:
    files = dcp_save_layout(arch, k, world_size, threads, layout).files
    return tuple(
        tuple(files[f"__{r}_{i}.distcp"] for i in range(threads)) for r in range(world_size)
    )


@settings(max_examples=60)
@given(
    arch=st.sampled_from([SMALL, TEST_SHAPE]),
    k=st.sampled_from([12, 14, 16]),
    world_size=st.integers(1, 70),
    threads=st.integers(1, 8),
    layout=st.sampled_from(["fsdp", "replicated"]),
)
@example(arch=TEST_SHAPE, k=14, world_size=8, threads=3, layout="fsdp")  # a real save's
@example(arch=SMALL, k=14, world_size=5, threads=2, layout="fsdp")  # first empty K/V chunks
@example(arch=SMALL, k=16, world_size=40, threads=8, layout="fsdp")  # empty norms too
@example(arch=TEST_SHAPE, k=14, world_size=2, threads=8, layout="replicated")
def test_the_scaled_plan_is_the_item_by_item_plan(
    arch: Architecture, k: int, world_size: int, threads: int, layout: str
) -> None:
    assert dcp_rank_file_bytes(arch, k, world_size, threads, layout) == _item_by_item(
        arch, k, world_size, threads, layout
    )


@given(
    filled=st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    storage=st.integers(1, 500),
    count=st.integers(0, 200),
)
def test_equal_items_in_closed_form_land_where_lpt_puts_them(
    filled: list[int], storage: int, count: int
) -> None:
    expected_filled, expected_bytes = list(filled), [0] * len(filled)
    for _ in range(count):
        b = min(range(len(filled)), key=lambda i: expected_filled[i])
        expected_filled[b] += storage
        expected_bytes[b] += 3
    got_filled, got_bytes = list(filled), [0] * len(filled)
    _fill_equal(got_filled, got_bytes, storage, 3, count)
    assert (got_filled, got_bytes) == (expected_filled, expected_bytes)


def test_a_bad_world_size_or_layout_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="world_size and thread_count"):
        dcp_rank_file_bytes(SMALL, 14, 0, 1, "fsdp")
    with pytest.raises(ValueError, match="layout: 'zero'"):
        dcp_rank_file_bytes(SMALL, 14, 2, 1, "zero")


@settings(max_examples=30)
@given(
    arch=st.sampled_from([SMALL, TEST_SHAPE]),
    k=st.sampled_from([12, 14, 16]),
    world_size=st.integers(1, 70),
    layout=st.sampled_from(["fsdp", "replicated"]),
)
@example(arch=SMALL, k=14, world_size=40, layout="fsdp")  # empty chunks, one kept per tensor
def test_the_chunk_count_is_what_the_dedup_keeps(
    arch: Architecture, k: int, world_size: int, layout: str
) -> None:
    plans = [local_plan(arch, k, world_size, r, layout) for r in range(world_size)]
    kept = sum(item.is_tensor for plan in dedup_save_plans(plans) for item in plan)
    assert dcp_chunk_count(arch, k, world_size, layout) == kept
