"""Plain-text tables for the terminal: columns padded to their widest cell, a rule under the
header. The gate table and ``ckptgate compare`` both print through here."""

from __future__ import annotations

from collections.abc import Sequence


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows[0]`` is the header; every column as wide as its widest cell, two spaces apart."""
    if not rows:
        return []
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(widths[c]) for c, cell in enumerate(row)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
