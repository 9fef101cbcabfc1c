"""DCP's save plan at thousands of ranks: sizing.dcp_plan's result without every rank's plan.

One job: the same per-rank, per-file bytes as ``sizing.dcp_plan.dcp_save_layout`` (which
builds W local plans of every tensor and dedups them item by item, W x items steps: minutes
for a 405B tensor list at thousands of ranks), in about items x (distinct chunk shapes) steps.
It relies on three facts of the plans the suite's state gives (``dcp_plan.local_plan``):

1. Every rank's plan lists the same keys in the same order; only a ``Shard(0)`` chunk's rows
   differ, and those take few distinct values: rank r holds ceil(rows / W) rows of a tensor
   up to one short chunk, then empty ones (torch.chunk). Ranks fall into *classes* (runs of
   ranks between the tensors' break points) whose chunks are alike.
2. The dedup (``dcp_plan.dedup_save_plans``) visits items in first-seen order. A rank's own
   non-empty chunks are unique to it and only add to its planned bytes; the choices are for
   items several ranks hold: the replicated ones (every rank; all first seen in rank 0's plan)
   and an empty chunk (ranks e .. W-1, all at the same offset, first seen in rank e's plan).
   Those choices are replayed with a heap over the ranks that have not had their turn yet,
   walking only rank 0's plan and the plans of the few ranks where some tensor's empty
   chunks start.
3. The buckets (``dcp_plan.split_by_size_and_type``, LPT on the global tensor sizes) depend
   only on the sequence of sizes, so one run per class serves every rank of it, and a rank
   with a few extra items restarts from the class's state just before the first of them. A
   stretch of equal sizes is placed in closed form: each bucket's next item lands at
   filled + j x size, and LPT takes the m smallest (value, bucket) pairs (``_fill_equal``).

Held item for item to dcp_plan.dcp_save_layout by tests/sizing/test_dcp_scale.py (which real
DCP saves in tests/dcp/test_plan_fidelity.py hold in turn); its speed is measured by
``python -m ckptgate.sizing.dcp_scale`` (a 405B tensor list at 2,048 to 16,384 ranks).
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass

from ckptgate.sizing.architecture import Architecture, model_state_shapes, parameter_shapes
from ckptgate.sizing.dcp_plan import (
    BYTE_ENTRY_BYTES,
    GROUP,
    KIND_ITEMSIZE_BYTES,
    LAYOUTS,
    STEP,
    TRAIN,
    names_entry_bytes,
    state_order,
    torch_save_bytes,
)

STEP_STORAGE_BYTES = 4
"""Adam's 0-dim fp32 ``step``: the storage the dedup and the buckets count for it."""


@dataclass(frozen=True)
class _Slot:
    """One position of every rank's local plan (dcp_plan.local_plan's order)."""

    storage_bytes: int
    """The whole tensor's bytes (what the dedup and the buckets count); 0 for BYTE_IO."""
    rows: int
    """The tensor's dim-0 rows; 0 for a replicated tensor or BYTE_IO (never chunked)."""
    row_bytes: int
    """Bytes of one row."""
    file_bytes: int
    """Bytes in a file of a replicated tensor or BYTE_IO item (chunked ones: per class)."""
    is_tensor: bool


def _slots(
    arch: Architecture, bytes_per_parameter: int, layout: str
) -> tuple[list[_Slot], list[int]]:
    """Every rank's plan positions, and which of them are chunked (fsdp's Shard(0) tensors)."""
    params, shapes = list(parameter_shapes(arch)), model_state_shapes(arch)
    sharded = layout == "fsdp"
    slots: list[_Slot] = []
    names = names_entry_bytes(params)
    for kind, name in state_order(params, bytes_per_parameter, list(shapes)):
        if kind == STEP:
            step_bytes = torch_save_bytes(STEP_STORAGE_BYTES)
            slots.append(_Slot(STEP_STORAGE_BYTES, 0, 0, step_bytes, True))
        elif kind in (GROUP, TRAIN):
            entry = names if kind == GROUP and name == "params" else BYTE_ENTRY_BYTES
            slots.append(_Slot(0, 0, 0, entry, False))
        else:
            shape = shapes[name]
            row = KIND_ITEMSIZE_BYTES[kind] * math.prod(shape[1:])
            whole = shape[0] * row
            if sharded:
                slots.append(_Slot(whole, shape[0], row, 0, True))
            else:
                slots.append(_Slot(whole, 0, row, torch_save_bytes(whole), True))
    chunked = [p for p, s in enumerate(slots) if s.rows]
    return slots, chunked


def _chunk_rows(rows: int, world_size: int, rank: int) -> int:
    """Rows of ``rank``'s Shard(0) chunk: torch.chunk's ceil(rows / W) each, the last short."""
    per = -(-rows // world_size)
    return max(0, min(rows, per * (rank + 1)) - per * rank)


def _first_empty_rank(rows: int, world_size: int) -> int:
    """The lowest rank whose chunk is empty (W when none is)."""
    return min(world_size, -(-rows // -(-rows // world_size)))


def _fill_equal(
    filled: list[int], bucket_bytes: list[int], storage: int, file_bytes: int, count: int
) -> None:
    """``count`` items of ``storage`` bytes placed by LPT (each into the bucket with the
    fewest storage bytes, lowest on ties), in place: item j of a bucket lands at value
    filled + j x storage, and LPT takes the ``count`` smallest (value, bucket) pairs, so a
    binary search for the count-th value replaces the count steps."""
    bins = len(filled)
    if count <= 2 * bins or storage == 0:
        for _ in range(count):
            b = min(range(bins), key=filled.__getitem__)
            filled[b] += storage
            bucket_bytes[b] += file_bytes
        return

    def taken(value: int) -> int:
        """Pairs with a value at most ``value``."""
        return sum((value - f) // storage + 1 for f in filled if f <= value)

    low, high = min(filled), min(filled) + count * storage
    while low < high:
        mid = (low + high) // 2
        if taken(mid) >= count:
            high = mid
        else:
            low = mid + 1
    below = [(low - 1 - f) // storage + 1 if f <= low - 1 else 0 for f in filled]
    left = count - sum(below)
    for b in range(bins):
        at = filled[b] <= low and (low - filled[b]) % storage == 0
        extra = 1 if at and left > 0 else 0
        left -= extra
        n = below[b] + extra
        filled[b] += n * storage
        bucket_bytes[b] += n * file_bytes


Run = tuple[int, int, int]
"""(storage bytes, file bytes, count): a stretch of equal tensor items in LPT order."""


@dataclass
class _ClassPlan:
    """One class's tensor items in LPT order (largest first, stable), as runs, with the
    buckets' state before each run and at the end."""

    keys: list[tuple[int, int]]
    """(-storage, plan position) of each item, LPT order (for bisect)."""
    runs: list[tuple[int, Run]]
    """(index of the run's first item, the run)."""
    states: list[tuple[list[int], list[int]]]
    """(filled, bucket bytes) before each run, and after the last."""


def _class_plan(items: list[tuple[int, int, int]], bins: int) -> _ClassPlan:
    """LPT over ``items`` (storage, plan position, file bytes) into ``bins`` buckets."""
    ordered = sorted(items, key=lambda it: (-it[0], it[1]))
    runs: list[tuple[int, Run]] = []
    for i, (storage, _, file_bytes) in enumerate(ordered):
        if runs and runs[-1][1][:2] == (storage, file_bytes):
            first, (s, f, n) = runs[-1]
            runs[-1] = (first, (s, f, n + 1))
        else:
            runs.append((i, (storage, file_bytes, 1)))
    filled, bucket_bytes = [0] * bins, [0] * bins
    states = []
    for _, (storage, file_bytes, count) in runs:
        states.append((list(filled), list(bucket_bytes)))
        _fill_equal(filled, bucket_bytes, storage, file_bytes, count)
    states.append((filled, bucket_bytes))
    return _ClassPlan([(-s, p) for s, p, _ in ordered], runs, states)


def _rank_buckets(plan: _ClassPlan, extras: list[tuple[int, int, int]]) -> list[int]:
    """Bucket bytes of a rank that keeps the class's items plus ``extras`` (storage, plan
    position, file bytes): the class's state before the run where the first extra falls,
    then LPT on, each extra placed where the stable sort puts it."""
    if not extras:
        return list(plan.states[-1][1])
    ordered = sorted(extras, key=lambda it: (-it[0], it[1]))
    at = [bisect.bisect_left(plan.keys, (-s, p)) for s, p, _ in ordered]
    firsts = [first for first, _ in plan.runs]
    g = max(0, bisect.bisect_right(firsts, at[0]) - 1)
    filled, bucket_bytes = (list(v) for v in plan.states[g])
    j = 0
    for first, (storage, file_bytes, count) in plan.runs[g:]:
        pos, end = first, first + count
        while j < len(ordered) and at[j] < end:
            if at[j] > pos:
                _fill_equal(filled, bucket_bytes, storage, file_bytes, at[j] - pos)
                pos = at[j]
            _fill_equal(filled, bucket_bytes, ordered[j][0], ordered[j][2], 1)
            j += 1
        if end > pos:
            _fill_equal(filled, bucket_bytes, storage, file_bytes, end - pos)
    for storage, _, file_bytes in ordered[j:]:
        _fill_equal(filled, bucket_bytes, storage, file_bytes, 1)
    return bucket_bytes


class _Turns:
    """The dedup's choices: each shared item to the holder with the fewest planned bytes,
    ties to the lowest rank, among the current rank (its running total) and the ranks after
    it (a heap, stale entries skipped: planned bytes only grow)."""

    def __init__(self, world_size: int) -> None:
        self.planned = [0] * world_size
        self.heap = [(0, r) for r in range(1, world_size)]
        self.kept: dict[int, list[int]] = {}

    def give(self, current: int, running: int, position: int, size: int) -> int:
        """The rank that keeps the item at ``position`` (held by ``current`` and every later
        rank); ``running`` is ``current``'s planned bytes so far."""
        heap = self.heap
        while heap and (heap[0][1] <= current or heap[0][0] != self.planned[heap[0][1]]):
            heapq.heappop(heap)
        if not heap or running <= heap[0][0]:
            chosen = current
        else:
            chosen = heapq.heappop(heap)[1]
            self.planned[chosen] += size
            heapq.heappush(heap, (self.planned[chosen], chosen))
        self.kept.setdefault(chosen, []).append(position)
        return chosen


def dcp_rank_file_bytes(
    arch: Architecture, bytes_per_parameter: int, world_size: int, thread_count: int, layout: str
) -> tuple[tuple[int, ...], ...]:
    """Bytes of every rank's files ``__{rank}_{i}.distcp`` (i < thread_count): exactly
    dcp_plan.dcp_save_layout's, computed as the module docstring says."""
    if world_size < 1 or thread_count < 1:
        raise ValueError(
            f"world_size and thread_count must be >= 1, got {world_size} and {thread_count}"
        )
    if layout not in LAYOUTS:
        raise ValueError(f"layout: {layout!r} is not one of {LAYOUTS}")
    slots, chunked = _slots(arch, bytes_per_parameter, layout)
    turns = _Turns(world_size)
    # Rank 0's turn: its own chunks add to it, every shared item is chosen for.
    own = 0
    for p, slot in enumerate(slots):
        if slot.rows:
            own += slot.storage_bytes
        else:
            size = slot.storage_bytes or 1
            if turns.give(0, own, p, size) == 0:
                own += size
    # Empty chunks: first seen in the plan of the rank where they start (ranks e .. W-1 hold
    # them); only those ranks' turns hold choices.
    empties: dict[int, list[int]] = {}
    for p in chunked:
        e = _first_empty_rank(slots[p].rows, world_size)
        if 0 < e < world_size:
            empties.setdefault(e, []).append(p)
    for e in sorted(empties):
        starts = set(empties[e])
        running = turns.planned[e]
        for p, slot in enumerate(slots):
            if p in starts:
                size = slot.storage_bytes
                if turns.give(e, running, p, size) == e:
                    running += size
            elif slot.rows and _chunk_rows(slot.rows, world_size, e):
                running += slot.storage_bytes
    # Classes: ranks between break points hold alike chunks.
    breaks = {0, world_size}
    for p in chunked:
        rows, per = slots[p].rows, -(-slots[p].rows // world_size)
        breaks.update(b for b in (rows // per, rows // per + 1) if b < world_size)
    bounds = sorted(breaks)
    plans: dict[int, _ClassPlan] = {}
    out: list[tuple[int, ...]] = []
    for rank in range(world_size):
        start = bounds[bisect.bisect_right(bounds, rank) - 1]
        if start not in plans:
            items = []
            for p in chunked:
                rows = _chunk_rows(slots[p].rows, world_size, start)
                if rows:
                    data = rows * slots[p].row_bytes
                    items.append((slots[p].storage_bytes, p, torch_save_bytes(data)))
            plans[start] = _class_plan(items, thread_count)
        kept = turns.kept.get(rank, [])
        extras = [
            (slots[p].storage_bytes, p, slots[p].file_bytes or torch_save_bytes(0))
            for p in kept
            if slots[p].is_tensor
        ]
        bucket_bytes = _rank_buckets(plans[start], extras)
        for j, p in enumerate(q for q in kept if not slots[q].is_tensor):
            bucket_bytes[j % thread_count] += slots[p].file_bytes
        out.append(tuple(bucket_bytes))
    return tuple(out)


def dcp_chunk_count(
    arch: Architecture, bytes_per_parameter: int, world_size: int, layout: str
) -> int:
    """Tensor chunks the save keeps after the dedup, as its ``.metadata`` lists them: per
    ``Shard(0)`` tensor its non-empty chunks plus one for all its empty ones (one offset,
    deduplicated), one per replicated tensor (Adam's steps included)."""
    slots, _ = _slots(arch, bytes_per_parameter, layout)
    count = 0
    for slot in slots:
        if slot.rows:
            empty = _first_empty_rank(slot.rows, world_size)
            count += empty + (1 if empty < world_size else 0)
        elif slot.is_tensor:
            count += 1
    return count


def _main() -> None:
    """Time the plan of a 405B tensor list (Llama 3, K = 14) at 2,048 to 16,384 ranks, FSDP
    and replicated, thread_count 1 and 8 (CPU seconds of this process)."""
    import time

    arch = Architecture(
        hidden=16384, ffn_hidden=53248, layers=126, heads=128, kv_heads=8, vocab=128256
    )
    print("ranks  threads  layout      cpu_s   largest rank")
    for world_size in (2048, 3000, 4096, 16384):
        for threads in (1, 8):
            for layout in LAYOUTS:
                began = time.process_time()
                files = dcp_rank_file_bytes(arch, 14, world_size, threads, layout)
                spent_s = time.process_time() - began
                largest = max(sum(f) for f in files)
                print(f"{world_size:>5}  {threads:>7}  {layout:<10}  {spent_s:5.3f}  {largest:,} B")


if __name__ == "__main__":
    _main()
