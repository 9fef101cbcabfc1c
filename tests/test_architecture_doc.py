"""docs/ARCHITECTURE.md names the package as it is (issue 56): every module the page names
exists, and every module of ``ckptgate`` is named on the page.

A module is named by its path, from the checkout (``ckptgate/rundir/manifest.py``,
``tests/beds/ceph.py``) or from the package, as the page's tables write it
(``rundir/manifest.py``), or by its dotted name (``ckptgate.rundir.manifest``). A dotted name
that runs past its module (``ckptgate.engine.pool.RankPool``) must name something the module
defines or imports at its top level. The C source of an extension module is a module
(``workloads/storm/_loops.c``, imported as ``ckptgate.workloads.storm._loops``).

What must be named: every ``ckptgate/**/*.py`` and ``ckptgate/**/*.c`` except the
``__init__.py`` files (the page's heading for a folder says what it holds). Short dotted
names (``engine.pool.inline_context``) are not checked: ``cluster.layout.writer`` is a profile
key, not a module. Nothing is imported; the modules are read with ``ast``.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE = ROOT / "ckptgate"

FROM_ROOT = ("ckptgate", "tests")
"""A named path that starts with one of these is from the checkout; any other, from the
package (``rundir/manifest.py`` is ``ckptgate/rundir/manifest.py``)."""

PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w-]*/)+[A-Za-z_]\w*\.(?:py|c))\b")
"""A module path with at least one folder: ``rundir/manifest.py``, not ``registry.py`` (which,
alone, may be fsspec's) nor a piece of a longer path."""

DOTTED = re.compile(r"(?<![\w./-])ckptgate(?:\.[A-Za-z_]\w*)+")
"""A dotted name in the package: ``ckptgate.rundir.manifest``, ``ckptgate.cli`` (of
``ckptgate.cli:main``), not a file's name (``examples/slurm/ckptgate.sbatch``)."""


@dataclass(frozen=True)
class Name:
    """One module name on the page, where it is, and the file it names (None: no such file)."""

    line: int
    text: str
    file: Path | None

    def where(self) -> str:
        return f"docs/ARCHITECTURE.md:{self.line}: {self.text}"


def shown(path: Path) -> str:
    """``path`` from the checkout: ``ckptgate/rundir/manifest.py``."""
    return path.relative_to(ROOT).as_posix()


def path_file(text: str, root: Path = ROOT) -> Path | None:
    """The file a named path is, from the checkout or the package; None where there is none."""
    first = text.split("/", 1)[0]
    candidate = root / text if first in FROM_ROOT else root / "ckptgate" / text
    return candidate if candidate.is_file() else None


def module_file(parts: list[str], root: Path = ROOT) -> Path | None:
    """The source of the module ``parts`` (``["ckptgate", "rundir", "manifest"]``): its
    ``.py``, its package's ``__init__.py``, or an extension module's ``.c``; None if none."""
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base.with_suffix(".c")):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def top_level_names(source: Path) -> frozenset[str]:
    """What a module defines or imports at its top level (``if`` and ``try`` blocks
    included), and what its ``__all__`` lists; for a package, its modules too."""
    names: set[str] = set()
    statements = list(ast.parse(source.read_text(encoding="utf-8")).body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try):
            statements += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            statements += [s for h in getattr(node, "handlers", []) for s in h.body]
    if source.name == "__init__.py":
        names.update(p.stem for p in source.parent.iterdir() if p.suffix in (".py", ".c"))
        names.update(p.name for p in source.parent.iterdir() if (p / "__init__.py").is_file())
    return frozenset(names)


def dotted_file(text: str, root: Path = ROOT) -> Path | None:
    """The module a dotted name is or runs past; None where the module, or the name past it,
    is not there."""
    parts = text.split(".")
    for end in range(len(parts), 0, -1):
        source = module_file(parts[:end], root)
        if source is None:
            continue
        if end == len(parts) or source.suffix == ".c":
            return source
        return source if parts[end] in top_level_names(source) else None
    return None


def names(text: str, root: Path = ROOT) -> Iterator[Name]:
    """Every module path and dotted name in ``text``, each with the file it names."""
    for number, line in enumerate(text.splitlines(), start=1):
        for match in PATH.finditer(line):
            yield Name(number, match.group(1), path_file(match.group(1), root))
        for match in DOTTED.finditer(line):
            yield Name(number, match.group(0), dotted_file(match.group(0), root))


def modules(root: Path = ROOT) -> set[Path]:
    """Every module the page must name: the package's ``.py`` and ``.c`` files but the
    ``__init__.py`` files."""
    package = root / "ckptgate"
    found = {*package.rglob("*.py"), *package.rglob("*.c")}
    return {path for path in found if path.name != "__init__.py"}


def dead(text: str, root: Path = ROOT) -> list[str]:
    """The names on the page that name no file, or nothing in their module."""
    return [name.where() for name in names(text, root) if name.file is None]


def unnamed(text: str, root: Path = ROOT) -> list[str]:
    """The package's modules the page does not name."""
    named = {name.file for name in names(text, root)}
    return sorted(p.relative_to(root).as_posix() for p in modules(root) - named)


def test_every_module_the_page_names_exists() -> None:
    gone = dead(PAGE.read_text(encoding="utf-8"))
    assert not gone, "docs/ARCHITECTURE.md names what is not there:\n" + "\n".join(gone)


def test_every_module_of_the_package_is_named_on_the_page() -> None:
    missing = unnamed(PAGE.read_text(encoding="utf-8"))
    assert not missing, (
        "docs/ARCHITECTURE.md does not name these modules (a row in their folder's table: "
        "its path and its one job):\n" + "\n".join(missing)
    )


def test_the_page_names_the_real_package() -> None:
    """The check reads the real tree: it finds the modules and the page's names of them."""
    found = {shown(p) for p in modules()}
    assert {"ckptgate/cli.py", "ckptgate/workloads/storm/_loops.c"} <= found
    assert not any(p.endswith("__init__.py") for p in found)
    assert len(list(names(PAGE.read_text(encoding="utf-8")))) > len(found)


def test_a_dead_name_and_an_unnamed_module_are_caught(tmp_path: Path) -> None:
    """A page that names a module that is gone, a name its module lacks, and a path under
    ``tests/`` that is gone fails, line by line; a module it leaves out is listed."""
    package = tmp_path / "ckptgate"
    (package / "rundir").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "rundir" / "__init__.py").write_text("")
    (package / "rundir" / "manifest.py").write_text("class ManifestWriter: ...\n")
    (package / "rundir" / "lease.py").write_text("")
    (package / "cli.py").write_text("from ckptgate.rundir import manifest as m\n")
    page = "\n".join(
        [
            "| `rundir/manifest.py` | the manifest |",
            "`ckptgate.rundir.manifest.ManifestWriter`, `ckptgate.cli:main`, `ckptgate.cli.m`",
            "`ckptgate/rundir/manfest.py` and `ckptgate.rundir.manifest.Gone`",
            "`tests/beds/gone.py`, fsspec's `registry.py`, `ckptgate.*`, `slurm/ckptgate.sbatch`",
        ]
    )
    assert dead(page, tmp_path) == [
        "docs/ARCHITECTURE.md:3: ckptgate/rundir/manfest.py",
        "docs/ARCHITECTURE.md:3: ckptgate.rundir.manifest.Gone",
        "docs/ARCHITECTURE.md:4: tests/beds/gone.py",
    ]
    assert unnamed(page, tmp_path) == ["ckptgate/rundir/lease.py"]
