"""Storage's modules import in one direction: no circle, held off or not.

The static check reads every ``import`` of every ``ckptgate`` module, those inside functions
included (a function-level import only hides a circle until someone moves it), and walks the
arrows from each storage module; the runtime check imports each storage module first in an
interpreter that has imported nothing of ``ckptgate``, which is where a circle shows.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ckptgate"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of ``package`` to the modules of it that it imports anywhere in its text.

    ``from a.b import c`` is an arrow to a.b.c where c is a module, else to a.b (whose names it
    reads); a package's ``__init__`` runs before any of its modules whichever way they are
    imported, so ``from a.b import c`` of a module c is no arrow to a.b (an ``__init__`` that
    imports a.b.c is no circle with c: Python imports them in that order every time).
    Relative imports resolve against the importing module's package.
    """
    paths = {module_name(path, package.parent): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        imported: set[str] = set()
        home = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = home[: len(home) - node.level + 1] if node.level else []
                source = ".".join([*base, *([node.module] if node.module else [])])
                modules = {f"{source}.{alias.name}" for alias in node.names} & paths.keys()
                imported.update(modules)
                if len(modules) < len(node.names):
                    imported.add(source)
        graph[name] = {m for m in imported if m in paths and m != name}
    return graph


def circle_through(graph: Mapping[str, set[str]], start: str) -> list[str] | None:
    """A path of imports from ``start`` back to ``start``, or None where there is none."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        module, path = stack.pop()
        for imported in sorted(graph.get(module, ())):
            if imported == start:
                return [*path, start]
            if imported not in seen:
                seen.add(imported)
                stack.append((imported, [*path, imported]))
    return None


def storage_modules(graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(m for m in graph if m.startswith("ckptgate.storage."))


def test_no_storage_module_imports_itself_through_others() -> None:
    graph = import_graph()
    circles = {m: circle_through(graph, m) for m in storage_modules(graph)}
    assert {m: " -> ".join(c) for m, c in circles.items() if c} == {}


def test_the_check_finds_a_circle_held_off_by_a_function_level_import(tmp_path: Path) -> None:
    """The check sees what the old storage had: a.py imports b at module level, b.py imports
    a inside a function."""
    package = tmp_path / "ckptgate" / "storage"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from ckptgate.storage.b import helper\n")
    (package / "b.py").write_text(
        "def helper():\n    from ckptgate.storage import a\n    return a\n"
    )
    assert circle_through(import_graph(package.parent), "ckptgate.storage.a") == [
        "ckptgate.storage.a",
        "ckptgate.storage.b",
        "ckptgate.storage.a",
    ]


PROBE = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "ckptgate" or m.startswith("ckptgate.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:
        failed.append(f"{name}: {type(error).__name__}: {error}")
print("\\n".join(failed))
"""


def test_every_storage_module_imports_first() -> None:
    """Each storage module, imported before any other ``ckptgate`` module, imports whole."""
    modules = storage_modules(import_graph())
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *modules],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert result.stdout.strip() == ""
    assert "ckptgate.storage.registry" in modules  # the list is the real one
