"""The package's folders import in layers: each folder imports only from the layers below it
(docs/ARCHITECTURE.md draws them), function-level imports included."""

from __future__ import annotations

from tests.storage.test_layout import import_graph

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"pipes"}),  # the entry points' manners on a closed pipe: imports nothing
    frozenset({"sizing"}),  # pure arithmetic
    frozenset({"engine", "projection"}),
    frozenset({"storage", "cluster", "dcp", "report"}),
    frozenset({"workloads"}),
    frozenset({"checks"}),
    frozenset({"fixtures"}),
    frozenset({"acceptance", "benchmarks"}),
    frozenset({"cli", "__init__"}),
    frozenset({"__main__"}),
)
"""Lowest first. ``cli``, ``pipes``, ``__main__`` and ``__init__`` are the top package's own
modules; every other name is a folder of ``ckptgate``."""


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(folder: str) -> int:
    (place,) = [n for n, layer in enumerate(LAYERS) if folder in layer]
    return place


def test_every_folder_is_in_a_layer() -> None:
    assert {_folder(m) for m in import_graph()} <= set().union(*LAYERS)


def test_no_folder_imports_from_a_layer_above_its_own() -> None:
    upward = sorted(
        f"{module} -> {imported}"
        for module, imports in import_graph().items()
        for imported in imports
        if _folder(imported) != _folder(module)
        and _layer(_folder(imported)) >= _layer(_folder(module))
        and _folder(imported) != "__init__"  # ckptgate/__init__.py: the version, lazily
    )
    assert upward == []
