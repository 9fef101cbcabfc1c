"""How long headless Chromium takes to open a report page, less its own start on a blank page.

The scale harness's budget for the HTML report is that a 2,048-node run's page opens in a
browser in under 5 s; this is the measurement: Debian's ``chromium --headless --dump-dom``
(the whole page parsed, laid out and its DOM serialised) timed on the page and on a blank page,
alternated, ``repeats`` times each; the page's figure is the median of the differences.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time

TIMEOUT_S = 300.0
"""A hang guard for one load on a busy machine, not a bound on speed."""


def chromium() -> str | None:
    """Debian's chromium (``chromium`` or ``chromium-browser`` on PATH), if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _load_s(found: str, page: str) -> float:
    command = [found, "--headless", "--disable-gpu", "--no-first-run", "--dump-dom"]
    if os.geteuid() == 0:
        command.append("--no-sandbox")
    started = time.perf_counter()
    done = subprocess.run(
        [*command, f"file://{os.path.abspath(page)}"],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0 or "</html>" not in done.stdout.lower():
        raise RuntimeError(f"chromium did not load {page}: {done.stderr.strip()[-300:]}")
    return seconds


def open_seconds(page: str, repeats: int = 3) -> float | None:
    """The median seconds Chromium spends on ``page`` beyond a blank page (None: no chromium)."""
    found = chromium()
    if found is None:
        return None
    handle, blank = tempfile.mkstemp(suffix=".html")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write("<!doctype html><html><body></body></html>")
    try:
        extra: list[float] = []
        for repeat in range(repeats):
            order = (page, blank) if repeat % 2 == 0 else (blank, page)
            seconds = {path: _load_s(found, path) for path in order}
            extra.append(seconds[page] - seconds[blank])
        return statistics.median(extra)
    finally:
        os.remove(blank)
