"""The documentation holds (issue 56): every relative link in the README, CONTRIBUTING, the
CHANGELOG and ``docs/`` reaches a file, every ``#anchor`` names a heading there, and every
``ckptgate`` and ``pytest`` command line in their code blocks parses with the real parsers.

Nothing is fetched and nothing is run: an external link is only checked to be well formed, and
a command line goes through the parser its command would use (``ckptgate``'s own argparse
parsers, reached through its dispatch with parsing stopped before any work; pytest's parser
with every installed plugin's options, the ckptgate plugin's included, for ``pytest`` and
``ckptgate run``)."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock
from urllib.parse import urlsplit

import pytest
from _pytest.config import get_config  # pytest's own parser, built without running pytest

from ckptgate import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = (
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
)
"""The pages checked: the user's and the contributor's, the changelog and every doc."""

LAUNCHERS = frozenset({"srun", "mpirun", "mpiexec"})
"""Commands whose arguments end in the command they start (``srun ... ckptgate run ...``)."""

SHELL_OPERATORS = frozenset("();<>|&")
"""What shlex's ``punctuation_chars`` splits off: a token made of these ends a command."""


@dataclass(frozen=True)
class Line:
    """One line of a page (a command line joined over its ``\\`` continuations)."""

    page: Path
    number: int
    text: str

    def where(self) -> str:
        """``README.md:14``: the page, relative to the checkout, and the line number."""
        return f"{shown(self.page)}:{self.number}"


def shown(path: Path) -> str:
    """``path`` relative to the checkout where it lies inside it."""
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


# -- Markdown, as far as links, headings and code blocks go ------------------------------------

FENCE = re.compile(r" {0,3}(```|~~~)")
HEADING = re.compile(r" {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")


def split_code(text: str) -> tuple[list[str], list[str]]:
    """The page's lines as prose and as code: each list holds every line, blank where the line
    belongs to the other kind. Code is a fenced block (``` or ~~~) or an indented one (four
    spaces, after a blank line or another code line)."""
    prose: list[str] = []
    code: list[str] = []
    fence: str | None = None
    indented = False
    previous_blank = True
    for line in text.split("\n"):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1) == fence:
                fence = None
            prose.append("")
            code.append("" if fence is None else line)
            continue
        if opened:
            fence = opened.group(1)
            prose.append("")
            code.append("")
            previous_blank = False
            continue
        blank = not line.strip()
        if line.startswith(("    ", "\t")) and (previous_blank or indented):
            indented = True
        elif not blank:
            indented = False
        if indented and not blank:
            prose.append("")
            code.append(line)
        else:
            prose.append(line)
            code.append("")
        previous_blank = blank
    return prose, code


def slug(heading: str) -> str:
    """A heading's anchor under GitHub's rules: a link's text kept, lowercase, every character
    other than a letter, a digit, a space, '-' or '_' dropped, each space a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor in ``page``; a repeated one gets ``-1``, ``-2``... as on GitHub."""
    prose, _ = split_code(page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for line in prose:
        match = HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path, text: str) -> Iterator[tuple[Line, str]]:
    """Each Markdown link's target in the prose (not in code blocks or code spans)."""
    prose, _ = split_code(text)
    joined = "\n".join(prose)
    # A code span may run over a line break; blank it, keeping the line numbers.
    joined = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), joined)
    for match in LINK.finditer(joined):
        number = joined.count("\n", 0, match.start()) + 1
        yield Line(page, number, match.group(0)), match.group(1)


def link_problem(page: Path, target: str) -> str | None:
    """What is wrong with a link from ``page`` to ``target``, or None."""
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            ok = bool(parts.netloc) and not re.search(r"\s", target)
            return None if ok else f"malformed URL {target!r}"
        return None if parts.scheme == "mailto" else f"unexpected scheme in {target!r}"
    if not target:
        return "empty link"
    path, _, anchor = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    if not linked.exists():
        return f"{path} does not exist (from {shown(page.parent)}/)"
    if anchor:
        if linked.suffix != ".md":
            return f"#{anchor} in {path}, which is not a Markdown page"
        if anchor not in anchors(linked):
            return f"#{anchor} names no heading of {shown(linked)}"
    return None


# -- command lines ----------------------------------------------------------------------------


def command_lines(page: Path, text: str) -> Iterator[Line]:
    """Each line of the page's code blocks, joined over its ``\\`` continuations."""
    _, code = split_code(text)
    start, held = 0, ""
    for number, line in enumerate(code, start=1):
        if not held:
            start = number
        if line.rstrip().endswith("\\"):
            held += line.rstrip()[:-1] + " "
            continue
        whole = (held + line).strip()
        held = ""
        if whole:
            yield Line(page, start, whole.removeprefix("$ "))


def words(line: str) -> list[str]:
    """The shell words of ``line``: quotes removed, operators (``|``, ``&&``, ``>``...) split
    off as words of their own, and a comment (a word that starts with ``#``) dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # a '#' starts a comment only at a word's start, as in the shell
    found = []
    for word in lexer:
        if word.startswith("#"):
            break
        found.append(word)
    return found


def commands(line: str) -> Iterator[list[str]]:
    """The ``ckptgate``/``pytest`` commands in a shell line: each simple command (split at the
    operators) that is one, or that a launcher (``srun``, ``mpirun``) starts."""
    segment: list[str] = []
    for word in [*words(line), ";"]:
        if word and set(word) <= SHELL_OPERATORS:
            if word[0] in "<>" and segment and segment[-1].isdigit():
                segment.pop()  # 2>&1: the 2 is a file descriptor, not an argument
            if segment and segment[0] in ("ckptgate", "pytest"):
                yield segment
            elif segment and segment[0] in LAUNCHERS:
                for i, launched in enumerate(segment):
                    if launched in ("ckptgate", "pytest"):
                        yield segment[i:]
                        break
            elif segment[:3] in (["python", "-m", "pytest"], ["python3", "-m", "pytest"]):
                yield segment[2:]
            segment = []
        else:
            segment.append(word)


class _Parsed(Exception):
    """Raised in place of a command's work once its arguments parsed."""


def _argparse_only(command: Callable[[], int]) -> str | None:
    """Run ``command`` (a ``ckptgate`` subcommand's entry) only as far as argparse: its parser
    is built and used as in a real run, then the command stops. The parser's message where it
    rejected the arguments, else None. A command that does not parse with argparse fails."""
    parse_args = argparse.ArgumentParser.parse_args
    parse_known_args = argparse.ArgumentParser.parse_known_args
    depth = [0]
    entered = [False]

    def parse_then_stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        entered[0] = True
        depth[0] += 1
        try:
            parse_args(self, *args, **kwargs)
        finally:
            depth[0] -= 1
        raise _Parsed

    def parse_known_then_stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        entered[0] = True
        known = parse_known_args(self, *args, **kwargs)
        if depth[0] == 0:  # called by the command itself, not from within parse_args
            raise _Parsed
        return known

    stderr = io.StringIO()
    with (
        mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop),
        mock.patch.object(argparse.ArgumentParser, "parse_known_args", parse_known_then_stop),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(stderr),
    ):
        try:
            status: object = command()
        except _Parsed:
            return None
        except SystemExit as stop:
            status = stop.code
    said = " ".join(stderr.getvalue().split())
    if not entered[0]:
        return f"the command did not parse its arguments with argparse (exit status {status})"
    if status in (0, None):  # --help, which a command's own parse wrapper may have caught
        return None
    return said or f"exit status {status}"


def _pytest_parser() -> Callable[[Sequence[str]], argparse.Namespace]:
    """pytest's command-line parser with the options of pytest's own plugins and of every
    installed plugin (``pytest11`` entry points: ckptgate's, pytest-benchmark's, ...), as
    ``pytest`` builds it: parsing raises ``pytest.UsageError`` for an unknown option or a bad
    choice."""
    config = get_config()
    config.pluginmanager.load_setuptools_entrypoints("pytest11")
    parser = config._parser
    parser.prog = "pytest"
    return lambda args: parser.parse(list(args), namespace=argparse.Namespace())


def command_problem(
    command: Sequence[str], parse_pytest: Callable[[Sequence[str]], argparse.Namespace]
) -> str | None:
    """The parser's message where ``command`` (``ckptgate ...`` or ``pytest ...``) does not
    parse, else None."""
    name, args = command[0], list(command[1:])
    if name == "ckptgate":
        if not args or args[0] in ("-h", "--help"):
            return None if args else "no command given"
        if args[0] not in cli.COMMANDS:
            return f"unknown command {args[0]!r}; allowed: {', '.join(cli.COMMANDS)}"
        if args[0] == "run":  # ckptgate run execs pytest with these arguments
            return _pytest_problem(cli.run_argv(args[1:]), parse_pytest, check_paths=False)
        subcommand = cli.COMMANDS[args[0]]
        return _argparse_only(lambda: subcommand(args[1:]))
    return _pytest_problem(args, parse_pytest, check_paths=True)


def _pytest_problem(
    args: Sequence[str],
    parse_pytest: Callable[[Sequence[str]], argparse.Namespace],
    check_paths: bool,
) -> str | None:
    try:
        namespace = parse_pytest(args)
    except pytest.UsageError as error:
        lines = str(error).splitlines()
        return " ".join(line for line in lines if not line.startswith("usage:"))
    if check_paths:  # a test path of the checkout must exist (a placeholder, FOLDER, need not)
        for given in namespace.file_or_dir:
            path = given.split("::")[0]
            named = path.startswith(("tests", "ckptgate/")) and path == path.lower()
            if named and not (ROOT / path).exists():
                return f"file or directory not found: {given}"
    return None


def command_problems(
    page: Path, text: str, parse_pytest: Callable[[Sequence[str]], argparse.Namespace]
) -> Iterator[str]:
    """One line per command line of the page that does not parse: where, what, and why."""
    for line in command_lines(page, text):
        try:
            found = list(commands(line.text))
        except ValueError as error:  # shlex: an unclosed quote
            if line.text.split(" ")[0] in {"ckptgate", "pytest", *LAUNCHERS}:
                yield f"{line.where()}: {line.text!r}: {error}"
            continue
        for command in found:
            problem = command_problem(command, parse_pytest)
            if problem is not None:
                yield f"{line.where()}: {shlex.join(command)!r}: {problem}"


# -- the tests --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def parse_pytest() -> Callable[[Sequence[str]], argparse.Namespace]:
    """pytest's parser with every installed plugin's options, built once for the module."""
    return _pytest_parser()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_a_heading(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    problems = [
        f"{line.where()}: {line.text}: {problem}"
        for line, target in links(page, text)
        if (problem := link_problem(page, target)) is not None
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_line_parses(
    page: Path, parse_pytest: Callable[[Sequence[str]], argparse.Namespace]
) -> None:
    problems = list(command_problems(page, page.read_text(encoding="utf-8"), parse_pytest))
    assert not problems, "\n".join(problems)


def test_the_readme_runs_its_set_up_and_the_test_command() -> None:
    """The README keeps the two set-up commands: the main job and the test command."""
    found = {
        " ".join(c)
        for line in command_lines(PAGES[0], PAGES[0].read_text())
        for c in commands(line.text)
    }
    assert "ckptgate run --profile=tmpfs --target=/dev/shm" in found
    assert "pytest --profile=tmpfs --target=/dev/shm" in found


BAD_PAGE = """\
# A page

See [the options](#the-options), [nowhere](no-such-page.md) and [a heading](#no-such-heading);
`[in code](nowhere.md)` is not a link. [A site](https://example.org/x) is well formed,
[this one](https:///x) is not.

## The options

    ckptgate run --profile=tmpfs --target=/dev/shm --no-such-option
    pytest --profile=tmpfs --accept=sometimes
    srun -N 2 --mpi=pmix ckptgate verify
    ckptgate sizing 405b --no-such-option && echo done
    ckptgate frobnicate
    pytest tests/no_such_folder -m fuse
    ckptgate bench write --target DIR    # fine
    srun -N 2 ckptgate run --set checkpoint.interval_s='10 min
"""


def test_a_bad_page_is_caught_line_by_line(
    tmp_path: Path, parse_pytest: Callable[[Sequence[str]], argparse.Namespace]
) -> None:
    page = tmp_path / "bad.md"
    page.write_text(BAD_PAGE)
    dead = {target: link_problem(page, target) for _, target in links(page, BAD_PAGE)}
    assert dead["#the-options"] is None and dead["https://example.org/x"] is None
    assert "does not exist" in str(dead["no-such-page.md"])
    assert "names no heading" in str(dead["#no-such-heading"])
    assert "nowhere.md" not in dead
    assert "malformed URL" in str(dead["https:///x"])
    problems = list(command_problems(page, BAD_PAGE, parse_pytest))
    assert len(problems) == 7, "\n".join(problems)
    run, accept, verify, sizing, unknown, folder, quote = problems
    assert run.startswith(f"{page}:9: ") and "unrecognized arguments: --no-such-option" in run
    assert "argument --accept: invalid choice: 'sometimes'" in accept
    assert "'ckptgate verify'" in verify and "RUN_DIR" in verify
    assert "'ckptgate sizing 405b --no-such-option'" in sizing and "--no-such-option" in sizing
    assert "unknown command 'frobnicate'" in unknown
    assert "not found: tests/no_such_folder" in folder
    assert quote.startswith(f"{page}:16: ") and "No closing quotation" in quote


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("What `ckptgate verify` checks", "what-ckptgate-verify-checks"),
        ("The storm's loop: C or Python", "the-storms-loop-c-or-python"),
        ("Interrupted runs, and report files that cannot be written",
         "interrupted-runs-and-report-files-that-cannot-be-written"),
        ("MLPerf Storage's checkpointing profiles (`writer: dlio`)",
         "mlperf-storages-checkpointing-profiles-writer-dlio"),
        ("2026-12-07", "2026-12-07"),
        ("snake_case and [a link](x.md)", "snake_case-and-a-link"),
    ],
)  # fmt: skip
def test_anchors_follow_github_slugs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_shell_words_split_at_operators_and_comments() -> None:
    line = "srun -N 2 ckptgate run --set k='10 min' 2>&1 | tee log  # a comment"
    assert list(commands(line)) == [["ckptgate", "run", "--set", "k=10 min"]]
    assert words("ckptgate run --target=/x#y") == ["ckptgate", "run", "--target=/x#y"]
