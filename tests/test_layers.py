"""The package's folders import in layers: each folder imports only from the layers below it
(docs/ARCHITECTURE.md draws them), and no module imports itself through others, function-level
and ``TYPE_CHECKING`` imports included (one only hides a circle until someone moves it)."""

from __future__ import annotations

from pathlib import Path

from tests.storage.test_layout import circle_through, import_graph

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"pipes"}),  # the entry points' manners on a closed pipe: imports nothing
    frozenset({"sizing"}),  # pure arithmetic
    frozenset({"engine", "projection"}),
    frozenset({"storage"}),  # the backends: the I/O operations table
    frozenset({"rundir", "cluster", "dcp", "report"}),
    frozenset({"workloads"}),
    frozenset({"campaigns"}),  # the runs several checks share: the write rounds, the sweep
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


def test_no_module_imports_itself_through_others() -> None:
    graph = import_graph()
    circles = {m: circle_through(graph, m) for m in sorted(graph)}
    assert {m: " -> ".join(c) for m, c in circles.items() if c} == {}


def test_the_circle_check_sees_a_name_read_from_a_package_that_imports_the_reader(
    tmp_path: Path,
) -> None:
    """``from pkg import name`` of a name the package's ``__init__`` takes from the importing
    module is a circle (as sizing's architecture.py and schema.py had, behind TYPE_CHECKING);
    ``from pkg import module`` is not, and a relative import counts as an absolute one."""
    package = tmp_path / "ckptgate" / "sizing"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from ckptgate.sizing.a import A\n")
    (package / "a.py").write_text("from ckptgate.sizing import b\nA = 1\n")
    (package / "b.py").write_text("def f():\n    from . import A\n    return A\n")
    graph = import_graph(package.parent)
    assert graph["ckptgate.sizing.a"] == {"ckptgate.sizing.b"}
    assert graph["ckptgate.sizing.b"] == {"ckptgate.sizing"}
    assert circle_through(graph, "ckptgate.sizing.a") == [
        "ckptgate.sizing.a",
        "ckptgate.sizing.b",
        "ckptgate.sizing",
        "ckptgate.sizing.a",
    ]
