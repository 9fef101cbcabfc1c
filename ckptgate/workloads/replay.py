"""Replay a real checkpoint: its file names and sizes, read without reading its content.

``checkpoint.replay: DIR`` (or ``--set checkpoint.replay=DIR``) points at an existing
checkpoint directory; ``scan_checkpoint`` walks it with ``os.scandir`` and ``lstat`` only
(no file is opened, nothing in it is changed) and returns the ``FilePlan`` that the write
burst, readback, resharded restore and metadata storm then play on the target, inside the run
directory, under the same relative paths and with the same sizes. The suite measures the
user's own layout instead of the profile's model of it.

Naming rules, first match wins, for each regular file (relative path ``p``):

1. a ``.metadata`` (PyTorch DCP's, which the coordinator writes at commit) or a
   ``latest_checkpointed_iteration.txt`` (Megatron's tracker, written by rank 0 once the save
   is done), in any directory: a coordinator file, written at commit after every rank's
   files, the deepest directory's first (``FilePlan.commits``). The shallowest ``.metadata``,
   else the shallowest tracker, is the plan's metadata file (the storm's ``.metadata``), so a
   tracker never takes a nested ``.metadata``'s place;
2. ``__{rank}_{index}.distcp`` (DCP's FileSystemWriter): rank ``rank`` of its directory,
   file ``index``;
3. DeepSpeed's files: ``[bf16_]zero_pp_rank_D_mp_rank_M_optim_states.pt`` is written by the
   rank at data-parallel rank D of model-parallel rank M, and ``mp_rank_M_model_states.pt`` by
   data-parallel rank 0 of M, so it joins ``zero_pp_rank_0_mp_rank_M``'s rank (DeepSpeed's
   ``engine.py`` checkpoint naming); ranks in (M, D) order;
4. a path through a directory named ``mp_rank_XX`` or ``mp_rank_XX_YYY`` (Megatron: tensor
   rank ``XX``, pipeline rank ``YYY``, an optional expert rank after): that directory's rank,
   its files in name order;
5. anything else: a rank of its own (one writer per file; ``fileplan.lanes`` deals such files
   over the local ranks, largest first).

Ranks are numbered in the order of (directory, kind, the numbers in their names), so a DCP
tree's ``__r_i`` keeps rank ``r``. Symbolic links are not followed and not replayed (counted
in ``skipped``).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from ckptgate.workloads.fileplan import FilePlan, PlannedFile

REPLAY_KEY = "checkpoint.replay"
ALLOWED = (
    "an existing, readable directory holding a checkpoint's files (DCP __{rank}_{index}.distcp "
    "and .metadata, Megatron mp_rank_XX_YYY/..., or any tree of files)"
)
METADATA_NAMES = (".metadata", "latest_checkpointed_iteration.txt")
_DCP = re.compile(r"__(\d+)_(\d+)\.distcp")
_MEGATRON = re.compile(r"mp_rank_(\d+)(?:_(\d+))*")
_DEEPSPEED_OPTIM = re.compile(r"(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt")
_DEEPSPEED_MODEL = re.compile(r"mp_rank_(\d+)_model_states\.pt")


class ReplayError(ValueError):
    """The replay directory cannot be replayed; one line naming the key, value and what is
    allowed."""


@dataclass(frozen=True)
class _Scanned:
    path: str
    """Relative path, ``/``-separated."""
    bytes: int


def _walk(root: str, relative: str = "") -> Iterator[_Scanned | str]:
    """Every regular file under ``root`` (lstat only), and the relative path of each symbolic
    link or other non-regular entry that is skipped."""
    with os.scandir(os.path.join(root, relative) if relative else root) as entries:
        listed = sorted(entries, key=lambda e: e.name)
    for entry in listed:
        path = f"{relative}/{entry.name}" if relative else entry.name
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            yield from _walk(root, path)
        elif stat.S_ISREG(info.st_mode):
            yield _Scanned(path, info.st_size)
        else:
            yield path


def _rank_key(path: str) -> tuple[tuple[object, ...], int] | None:
    """(the rank's sort key, the file's index within it) by rules 2 to 4, or None."""
    parts = path.split("/")
    directory, name = "/".join(parts[:-1]), parts[-1]
    dcp = _DCP.fullmatch(name)
    if dcp:
        return (directory, 0, int(dcp.group(1))), int(dcp.group(2))
    optim = _DEEPSPEED_OPTIM.fullmatch(name)
    if optim:
        return (directory, 1, int(optim.group(2)), int(optim.group(1))), 1
    model = _DEEPSPEED_MODEL.fullmatch(name)
    if model:
        return (directory, 1, int(model.group(1)), 0), 0
    for depth, part in enumerate(parts[:-1]):
        if _MEGATRON.fullmatch(part):
            numbers = tuple(int(n) for n in re.findall(r"\d+", part))
            # Megatron's global order: pipeline stage, then tensor rank
            order = (numbers[1:2] or (0,)) + numbers[:1] + numbers[2:]
            return ("/".join(parts[:depth]), 1, *order), -1
    return None


def scan_checkpoint(directory: str) -> FilePlan:
    """The ``FilePlan`` of the checkpoint in ``directory`` (module docstring for the rules).

    Raises ``ReplayError`` when ``directory`` is missing, not a directory, unreadable, or
    holds no regular file.
    """
    where = f"{REPLAY_KEY} {directory!r}"
    if not directory:
        raise ReplayError(f"{where}: empty; allowed: {ALLOWED}")
    if not os.path.exists(directory):
        raise ReplayError(f"{where}: no such directory; allowed: {ALLOWED}")
    if not os.path.isdir(directory):
        raise ReplayError(f"{where}: not a directory; allowed: {ALLOWED}")
    try:
        found = list(_walk(directory))
    except OSError as error:
        raise ReplayError(
            f"{where}: cannot be read ({error.strerror}: {error.filename}); allowed: {ALLOWED}"
        ) from None
    files = [f for f in found if isinstance(f, _Scanned)]
    skipped = [f for f in found if isinstance(f, str)]
    if not files:
        raise ReplayError(f"{where}: holds no regular file; allowed: {ALLOWED}")
    metadata = min(
        (f for f in files if f.path.rsplit("/", 1)[-1] in METADATA_NAMES),
        key=lambda f: (METADATA_NAMES.index(f.path.rsplit("/", 1)[-1]), f.path.count("/"), f.path),
        default=None,
    )
    coordinators = [f for f in files if f.path.rsplit("/", 1)[-1] in METADATA_NAMES]
    groups: dict[tuple[object, ...], list[tuple[int, _Scanned]]] = {}
    for f in files:
        if f in coordinators:
            continue
        key = _rank_key(f.path)
        if key is None:
            groups[(f.path.rsplit("/", 1)[0] if "/" in f.path else "", 2, f.path)] = [(0, f)]
        else:
            groups.setdefault(key[0], []).append((key[1], f))
    planned: list[PlannedFile] = []
    kinds = {0: 0, 1: 0, 2: 0}
    for rank, group in enumerate(sorted(groups, key=_sortable)):
        kinds[int(str(group[1]))] += 1
        members = sorted(groups[group], key=lambda m: (m[0], m[1].path))
        planned.extend(
            PlannedFile(f.path, f.bytes, rank, index) for index, (_, f) in enumerate(members)
        )
    rule = (
        f"replay of {directory}: {kinds[0]} DCP rank(s) (__{{rank}}_{{index}}.distcp), "
        f"{kinds[1]} DeepSpeed/Megatron rank(s) (zero_pp_rank_D_mp_rank_M_*, mp_rank_XX_YYY/), "
        f"{kinds[2]} other file(s) (a "
        f"rank each); metadata {metadata.path if metadata else 'none'}"
        + (
            f"; {len(coordinators)} coordinator files written last, deepest directory first"
            if len(coordinators) > 1
            else ""
        )
        + (f"; {len(skipped)} symbolic link(s) or special file(s) skipped" if skipped else "")
    )
    return FilePlan(
        files=tuple(planned),
        metadata_name=metadata.path if metadata else None,
        metadata_bytes=metadata.bytes if metadata else 0,
        rule=rule,
        source=os.path.abspath(directory),
        ranks=len(groups),
        coordinator_files=tuple((f.path, f.bytes) for f in coordinators if f is not metadata),
    )


def _sortable(key: tuple[object, ...]) -> tuple[object, ...]:
    """Group keys in rank order: directory, kind (DCP, Megatron, other), then the numbers."""
    return (
        str(key[0]),
        key[1],
        *[(0, k, "") if isinstance(k, int) else (1, 0, k) for k in key[2:]],
    )


def node_share(plan: FilePlan, node_index: int, nodes: int) -> FilePlan:
    """The part of a replayed plan that node ``node_index`` of ``nodes`` plays: ranks dealt
    round-robin (rank ``r`` to node ``r mod nodes``); node 0 keeps the metadata file."""
    if nodes == 1:
        return plan
    files = tuple(f for f in plan.files if f.global_rank % nodes == node_index)
    keep = node_index == 0
    return FilePlan(
        files,
        plan.metadata_name if keep else None,
        plan.metadata_bytes if keep else 0,
        plan.rule,
        plan.source,
        plan.ranks,
        plan.coordinator_files if keep else (),
    )
