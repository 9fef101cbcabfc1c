"""The HTML report from a saved JSON (no plugin): self-contained, every section, a figure per
plot; and the same page in a real headless browser (Debian's chromium) where it is installed."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ckptgate.checks.table import report_parts
from ckptgate.report import figures
from ckptgate.report.html import render_report
from ckptgate.report.schema import load_saved
from tests.report.browser import browser, chromium, probed_figures
from tests.report.saved_runs import saved_report, saved_run

FIGURES = ("margins", "timeline-write", "timeline-read", "timeline-contention-writers",
           "node-bandwidth", "bandwidth-over-time", "metadata-latency", "contention",
           "sizing-sweep")  # fmt: skip


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def test_the_page_fetches_nothing_and_runs_nothing() -> None:
    page = render_report(saved_report(), parts=report_parts())
    tags = _tags(page)
    assert not [t for t, _ in tags if t in ("script", "link", "img", "iframe", "object")]
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert "VERDICT trial" in page and "verdict-trial" in page


def test_the_page_has_the_gate_table_with_both_requirements_and_each_section() -> None:
    page = render_report(saved_report(), parts=report_parts())
    for words in ("this run requires", "the cluster requires", "margin", "async persist bandwidth",
                  "9.33 MB/s", "Bursts: per-rank phases", "Bandwidth per node", "Metadata",
                  "Readers and writers under contention", "Sizing sweep", "Young"):  # fmt: skip
        assert words in page, words


def test_the_burst_summary_shows_per_transfer_latency() -> None:
    page = render_report(saved_report(), parts=report_parts())
    assert "per transfer p50 / p99 / max" in page
    assert "write 12.0 ms / 30.1 ms / 41.0 ms" in page


@pytest.mark.skipif(not figures.available(), reason="matplotlib (the report extra) not installed")
def test_every_plot_is_an_inline_svg_figure() -> None:
    page = render_report(saved_report(), parts=report_parts())
    drawn = [a.get("data-figure") for t, a in _tags(page) if t == "svg"]
    assert drawn == list(FIGURES)
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "element ids repeat across figures"


def test_without_matplotlib_the_page_says_how_and_keeps_the_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(figures, "available", lambda: False)
    page = render_report(saved_report(), parts=report_parts())
    assert "pip install &#x27;ckptgate[report]&#x27;" in page
    assert "<svg" not in page and page.count("<table>") >= 8


def test_a_report_without_a_sweep_section_uses_the_shipped_profile_it_matches() -> None:
    data = saved_run()
    del data["sweep"]
    assert "recomputed from the shipped profile tmpfs" in render_report(
        load_saved(data, "run.json"), parts=report_parts()
    )
    data["sizing"]["interval_s"] = 1.0
    assert "has no sweep section" in render_report(
        load_saved(data, "run.json"), parts=report_parts()
    )


@pytest.mark.skipif(chromium() is None, reason="no chromium: apt-get install chromium")
@pytest.mark.skipif(not figures.available(), reason="matplotlib (the report extra) not installed")
def test_a_headless_browser_loads_the_page_and_draws_every_figure(tmp_path: Path) -> None:
    page = render_report(saved_report(), parts=report_parts())
    sizes = probed_figures(page, tmp_path)
    assert [name for name, _, _, _ in sizes] == list(FIGURES)
    assert all(width > 100 and height > 50 for _, width, height, _ in sizes), sizes
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    shot = tmp_path / "report.png"
    result = browser(report, f"--screenshot={shot}")
    assert result.returncode == 0 and shot.stat().st_size > 10_000, result.stderr[-2000:]


def test_the_writer_a_dcp_profile_gets_is_in_the_run_table() -> None:
    """Issue 35 item 3 in the HTML: the report's profile_notes (the header's line on the
    writer a DCP profile got by default) is a row of the run's table; none, no row."""
    data = saved_run()
    note = "writer: megatron (the default): the burst is laid out as Megatron's, though x"
    data["profile_notes"] = [note]
    page = render_report(load_saved(data, "run.json"), parts=report_parts())
    assert f"<td>profile&#x27;s default</td><td>{note.replace(chr(39), '&#x27;')}</td>" in page
    del data["profile_notes"]
    assert "profile&#x27;s default" not in render_report(
        load_saved(data, "run.json"), parts=report_parts()
    )
