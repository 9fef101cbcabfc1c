"""SPEC.md's checklist as data: every item the suite answers, in one registry.

Each entry says which checklist question an item answers (1 to 8; ``c`` is the test plan's
concurrency item), its title in the gate report, the acceptance module that measures it, and
the check that judges it (``module:function`` in ``ckptgate.checks``, named as fsspec's
``registry.py`` names classes: the acceptance module calls that function, and a test checks
that every name resolves). The report numbers and orders its rows from here, the plugin orders
the acceptance modules and derives a marker per check module from here, and the sizing table
says from here which module measures a requirement; nothing else lists the checklist.

Pure data: no imports beyond the standard library (the sizing package stays pure).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChecklistItem:
    """One answer of the checklist: its id, question number, title, module and check."""

    id: str
    number: str
    title: str
    module: str
    """The acceptance module (file name in ``ckptgate/acceptance``) whose test answers it."""
    check: str
    """``module:function`` in ``ckptgate.checks`` that measures and judges it."""
    optional: bool = False
    """Answered only where an optional part is installed (PyTorch for DCP): a run without it
    can still qualify, and its verdict says what did not run."""


CHECKLIST: tuple[ChecklistItem, ...] = (
    ChecklistItem("checkpoint-bytes", "1", "checkpoint bytes",
                  "test_write_burst.py", "write:checkpoint_bytes"),
    ChecklistItem("dcp-bytes", "1", "DCP bytes per parameter (du)",
                  "test_dcp.py", "dcp:bytes_on_disk", optional=True),
    ChecklistItem("interval-from-failure-rate", "2", "interval from failure rate",
                  "test_profile_decisions.py", "decisions:interval_from_failure_rate"),
    ChecklistItem("sync-stall", "3", "sync save stall",
                  "test_write_burst.py", "write:sync_stall"),
    ChecklistItem("stall-budget", "3", "stall budget holds the largest shard",
                  "test_profile_decisions.py", "decisions:stall_budget"),
    ChecklistItem("dcp-async-block", "3", "DCP async save blocking",
                  "test_dcp.py", "dcp:async_blocking", optional=True),
    ChecklistItem("sync-vs-async", "4", "sync vs async",
                  "test_profile_decisions.py", "decisions:sync_vs_async"),
    ChecklistItem("load-generator", "5", "load generator vs target",
                  "test_write_burst.py", "write:load_generator"),
    ChecklistItem("async-persist", "5", "async persist bandwidth",
                  "test_write_burst.py", "write:async_persist"),
    ChecklistItem("dcp-async-complete", "5", "DCP async save completion",
                  "test_dcp.py", "dcp:async_completion", optional=True),
    ChecklistItem("metadata-create-rate", "6", "metadata storm create rate",
                  "test_metadata.py", "metadata:create_rate"),
    ChecklistItem("metadata-restore-stat", "6", "restore listing and stat rate",
                  "test_metadata.py", "metadata:restore_stat"),
    ChecklistItem("metadata-delete", "6", "retention delete storm",
                  "test_metadata.py", "metadata:delete_storm"),
    ChecklistItem("restart-read", "7", "restart read bandwidth",
                  "test_restart_read.py", "restart:readback"),
    ChecklistItem("resharded-restore", "7", "resharded restore bandwidth",
                  "test_restart_read.py", "restart:resharded"),
    ChecklistItem("dcp-reshard-load", "7", "DCP resharded load verified",
                  "test_dcp.py", "dcp:resharded_load", optional=True),
    ChecklistItem("retention-capacity", "8", "retention tier capacity",
                  "test_retention.py", "retention:capacity"),
    ChecklistItem("contention-persist", "c", "persist under read contention",
                  "test_contention.py", "contention:persist"),
    ChecklistItem("reader-slowdown", "c", "dataloader slowdown during a save",
                  "test_contention.py", "contention:reader_slowdown"),
)  # fmt: skip

BY_ID: dict[str, ChecklistItem] = {entry.id: entry for entry in CHECKLIST}

MODULE_ORDER: tuple[str, ...] = (
    "test_write_burst.py",
    "test_restart_read.py",
    "test_metadata.py",
    "test_contention.py",
    "test_profile_decisions.py",
    "test_retention.py",
    "test_dcp.py",
    "test_scaling.py",
)
"""The order the plugin runs the acceptance modules in: the write rounds first (the others
read their files and rates), then the checklist's order; the scaling sweep (not a checklist
item: its projection is never a verdict) last."""


def required_ids() -> tuple[str, ...]:
    """The items every qualifying run answers (all but the optional ones)."""
    return tuple(entry.id for entry in CHECKLIST if not entry.optional)


def checklist_item(item_id: str) -> ChecklistItem:
    """The registry entry for ``item_id``; a KeyError names the known ids."""
    try:
        return BY_ID[item_id]
    except KeyError:
        raise KeyError(f"no checklist item {item_id!r}; known: {', '.join(BY_ID)}") from None


def sort_key(item_id: str) -> tuple[int, int]:
    """Rows in checklist order: by question, then by the registry's order within it."""
    order = list(BY_ID)
    if item_id not in BY_ID:
        return (len(order), 0)
    numbers = sorted({e.number for e in CHECKLIST}, key=lambda n: (not n.isdigit(), n))
    return (numbers.index(BY_ID[item_id].number), order.index(item_id))


def modules_measuring(*item_ids: str) -> str:
    """The acceptance modules that answer these items, as the sizing table names them."""
    modules = dict.fromkeys(f"acceptance/{checklist_item(i).module}" for i in item_ids)
    return ", ".join(modules)
