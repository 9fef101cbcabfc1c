"""Debian's headless chromium for the report tests: where it is, and one page loaded in it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``page`` loaded headless with ``args`` (``--dump-dom``, ``--screenshot=PATH``); the
    generous timeout is a hang guard on a busy machine, not a check of speed."""
    found = chromium()
    assert found is not None
    options = ["--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               "--window-size=1200,2000", "--virtual-time-budget=5000"]  # fmt: skip
    command = [found, *options, *args, page.as_uri()]
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")
    return subprocess.run(command, capture_output=True, text=True, timeout=120)
