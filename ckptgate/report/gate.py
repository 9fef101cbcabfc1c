"""The gate report: every checklist answer, the run's one verdict, the table and the JSON.

The table opens with the verdict line; each row shows the requirement at this run's scale
beside the full cluster's, and every failed or errored test is a row (FAIL or ERROR) with its
message and node: no item vanishes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ckptgate.report.checklist import Checklist
from ckptgate.report.items import Item, format_margin, format_value, judge
from ckptgate.report.schema import SCHEMA_KEY, SCHEMA_VERSION, transfer_latency
from ckptgate.report.text import columns
from ckptgate.report.verdict import RunScale, Verdict, decide
from ckptgate.sizing.as_run import ProfileAsRun

__all__ = [
    "GateReport",
    "Item",
    "json_text",
    "judge",
    "plain",
    "write_json_text",
    "write_report_json",
]


@dataclass
class GateReport:
    """Everything the run found; the plugin prints it and writes it as JSON."""

    meta: dict[str, Any] = field(default_factory=dict)
    items: list[Item] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)
    scale: RunScale | None = None
    as_run: ProfileAsRun | None = None
    """The profile as run, which the verdict line names."""
    interrupted: str | None = None
    """What stopped the run (``Ctrl-C``, ``SIGTERM``), once it did."""
    not_measured: dict[str, str] = field(default_factory=dict)
    """Tests an earlier failure stopped: test name -> "not measured: <cause>"."""
    checklist: Checklist = field(kw_only=True)
    """The check table's rows (``ckptgate.checks.table``), which the plugin hands over: they
    title, number and order the items, and say which rows the verdict misses. Required: a
    report without them could not say what a run left out, and would fail open."""

    def record(self, item: Item) -> Item:
        """Keep ``item`` (a later item with the same id replaces the earlier) and return it,
        titled and numbered from its checklist row where it answers one."""
        row = self.checklist.get(item.id)
        if row is not None:
            item.checklist = row.number
            if item.title in ("", item.id):
                item.title = row.title
        self.items = [i for i in self.items if i.id != item.id] + [item]
        return item

    def ordered_items(self) -> list[Item]:
        """The items in checklist order: by question, then in the table's order."""
        return sorted(self.items, key=lambda i: self.checklist.sort_key(i.id))

    def record_error(self, id: str, title: str, error: str, node: int | None = None) -> Item:
        """A test that errored or failed before it judged anything: an ERROR row."""
        item = Item(
            id=id,
            title=title,
            required=None,
            measured=None,
            unit="",
            passed=False,
            detail="",
            error=error,
            node=node,
        )
        return self.record(item)

    def has(self, id: str) -> bool:
        return any(item.id == id for item in self.items)

    def section(self, name: str, data: dict[str, Any]) -> None:
        self.sections[name] = data

    def verdict(self) -> Verdict:
        scale = self.scale or RunScale(1, 1, 1, 1, True)
        return decide(self.items, scale, self.as_run, self.interrupted, checklist=self.checklist)

    def to_json(self) -> dict[str, Any]:
        return {
            SCHEMA_KEY: SCHEMA_VERSION,
            **self.meta,
            "verdict": self.verdict().to_json(),
            "items": [i.to_json() for i in self.ordered_items()],
            "not_measured": dict(self.not_measured),
            **self.sections,
        }

    def json_data(self) -> dict[str, Any]:
        """The report as the JSON file holds it (plain values only), which the CSV and HTML
        outputs render, so that a saved file re-rendered later says the same."""
        return plain(self.to_json())

    def write_json(self, path: str) -> None:
        write_report_json(self.to_json(), path)

    def latency_lines(self) -> list[str]:
        """One line per burst section that timed its transfers: p50, p99 and max per
        operation (``transfer_latency_s``), for the terminal beside the table. Reads only
        those summaries, through the schema: never the ranks' records (a run of 16,384 ranks
        holds 65,536 of them), which a whole-report read would convert for nothing."""
        lines = []
        for name in ("write", "read", "reshard"):
            raw = self.sections.get(name)
            if not isinstance(raw, dict) or not raw.get("transfer_latency_s"):
                continue
            latency = plain(raw["transfer_latency_s"])
            for op, stats in transfer_latency(latency, f"{name}.transfer_latency_s").items():
                values = " / ".join(format_value(seconds, "s") for _, seconds in stats.marks_s())
                lines.append(
                    f"per-transfer latency, {name} burst: {op} p50 / p99 / max {values} "
                    f"({stats.count} transfers)"
                )
        return lines

    def projection_lines(self) -> list[str]:
        """The scaling sweep's projection line, where a sweep ran: its own line below the
        verdict, never a part of it (``ckptgate.projection.projected``)."""
        scaling = self.sections.get("scaling")
        projection = scaling.get("projection") if isinstance(scaling, dict) else None
        return [projection["line"]] if projection else []

    def table(self) -> list[str]:
        """The verdict line, then one line per checklist item, then scope notes and failures."""
        ordered = self.ordered_items()
        lines = [self.verdict().line, *self.projection_lines(), "", *item_table(ordered)]
        scopes = list(dict.fromkeys(i.scope for i in self.items if i.scope))
        lines.extend(f"scope: {scope}" for scope in scopes)
        lines.extend(
            f"{item.status}: {item.message}" for item in ordered if item.status in ("FAIL", "ERROR")
        )
        lines.extend(f"NOT MEASURED: {name}: {words}" for name, words in self.not_measured.items())
        return lines


def item_table(items: Sequence[Item]) -> list[str]:
    """The gate table's lines (header, rule, one line per item in the given order)."""
    rows = [("#", "item", "required", "cluster needs", "measured", "margin", "verdict")]
    for item in items:
        node = f" (node {item.node})" if item.node is not None else ""
        rows.append(
            (
                item.checklist or "",
                item.title,
                format_value(item.required, item.unit),
                format_value(item.cluster_required, item.unit),
                format_value(item.measured, item.unit),
                format_margin(item.margin),
                item.status + node,
            )
        )
    return columns(rows)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "to_json"):
        return value.to_json()
    return str(value)


def plain(data: Any) -> Any:
    """``data`` with plain JSON values only, as the JSON file would give it back."""
    return json.loads(json.dumps(data, default=_json_default))


def json_text(data: dict[str, Any]) -> str:
    """The JSON report's text, compact (no indentation; ``jq .`` shows it indented): a run of
    16,384 ranks writes every rank's record of every burst, and two-space indentation made
    the file a third whitespace (``ckptgate bench scale``). One ``json.dumps``: ``json.dump``
    to a file encodes in Python, ``dumps`` in the C encoder (about a fifth of the time for
    65,536 records; the text is the file's size in memory, tens of MB).

    A string that is a path inside the run directory (``data["run_dir"]``) is written relative
    to it (``write/step-1/__0_0.distcp``): the records name every file of every rank, and the
    run directory's prefix repeated in each (45 to 90 characters, by the target's path) was a
    fifth of a 16,384-rank report and made its size depend on where the target is mounted."""
    text = json.dumps(data, separators=(",", ":"), default=_json_default)
    return relative_to_run_dir(text, data.get("run_dir"))


def relative_to_run_dir(text: str, run_dir: object) -> str:
    """``text`` (JSON) with every string value that begins with ``run_dir`` and a slash
    written without them. Matched on the encoded text, at a string's opening quote only (a
    quote inside a string is encoded ``\\"``: one after a backslash is never matched), with
    ``run_dir`` encoded as ``json.dumps`` encodes it (escapes included), and only where a name
    follows the slash: a path elsewhere in a string (an item's message, quoted or not),
    ``run_dir`` itself with or without its trailing slash, and ``run_dir//x`` stay whole."""
    if not isinstance(run_dir, str) or not run_dir.strip("/"):
        return text
    encoded = json.dumps(run_dir.rstrip("/"))[1:-1]  # the escaped path, without its quotes
    prefix = f'"{encoded}/'
    if f"\\{prefix}" in text or f'{prefix}"' in text or f"{prefix}/" in text:
        # the rare cases the plain replacement would get wrong (it is 6 times faster, and
        # node 0 runs this over the whole report: about 50 MB at 2,048 nodes)
        return re.sub(r'(?<!\\)"' + re.escape(encoded) + r'/(?=[^"/])', '"', text)
    return text.replace(prefix, '"')


def write_report_json(data: dict[str, Any], path: str) -> None:
    """The JSON report file of ``data`` (``json_text``)."""
    write_json_text(json_text(data), path)


def write_json_text(text: str, path: str) -> None:
    """The JSON report file of ``json_text``'s ``text``: one write, a newline at its end."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.write("\n")
