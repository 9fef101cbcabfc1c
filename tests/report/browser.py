"""Debian's headless chromium for the report tests: where it is, a page loaded in it, and what
it drew of each figure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any


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


# The browser sees the page's own markup; a probe (a script the test adds to a copy) writes what
# it measured into the DOM that --dump-dom prints. The report itself has no script.
_PROBE = """<script>
window.addEventListener("load", () => {
  const out = [...document.querySelectorAll("svg.figure")].map((svg) => {
    const box = svg.getBoundingClientRect();
    %s
  });
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""

# Each figure's rendered size and the share of it its plot areas (the axes background patches)
# cover.
PLOT_AREAS = """const patches = 'g[id*="-axes_"] > g[id*="-patch_"]:first-child path';
    const areas = [...svg.querySelectorAll(patches)]
      .map((p) => p.getBoundingClientRect()).map((r) => r.width * r.height);
    return [svg.dataset.figure, box.width, box.height,
            areas.reduce((a, b) => a + b, 0) / (box.width * box.height)];"""

# Each figure's texts that reach past its edges, as the browser laid out their glyphs.
CUT_TEXTS = """const cut = [...svg.querySelectorAll("text")].map((t) => {
      const r = t.getBoundingClientRect();
      const over = Math.max(box.left - r.left, r.right - box.right, box.top - r.top,
                            r.bottom - box.bottom);
      return [t.textContent.trim(), over];
    }).filter(([text, over]) => text && over > 0.5);
    return [svg.dataset.figure, cut];"""


def _probe(page: str, directory: Path, measure: str) -> list[list[Any]]:
    probed = directory / "probed.html"
    probed.write_text(page.replace("</body>", _PROBE % measure + "</body>"), encoding="utf-8")
    dom = browser(probed, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S)
    assert found, "the page did not finish loading"
    drawn: list[list[Any]] = json.loads(found.group(1).replace("&quot;", '"'))
    return drawn


def probed_figures(page: str, directory: Path) -> list[list[Any]]:
    """``[name, width_px, height_px, plot_fraction]`` of each figure of ``page`` as headless
    chromium laid it out (the page written to ``directory`` with the probe added)."""
    return _probe(page, directory, PLOT_AREAS)


def cut_texts(page: str, directory: Path) -> list[list[Any]]:
    """``[name, [[text, px past the figure's edge], ...]]`` of each figure of ``page``: the texts
    headless chromium drew (partly) outside their figure, where a reader cannot see them."""
    return _probe(page, directory, CUT_TEXTS)
