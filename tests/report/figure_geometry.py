"""What a drawn figure's SVG says about its layout: the figure's size, each axes' plot area
(the axes background patch matplotlib writes first in each axes group) and its tick count."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SVG = re.compile(r'<svg class="figure" data-figure="([^"]+)".*?</svg>', re.S)
_VIEWBOX = re.compile(r'viewBox="0 0 ([\d.]+) ([\d.]+)"')
_AXES = re.compile(
    r'<g id="[^"]*-axes_\d+">\s*<g id="[^"]*-patch_\d+">\s*<path d="M ([\d.]+) ([\d.]+) \s*'
    r"L ([\d.]+) ([\d.]+) \s*L ([\d.]+) ([\d.]+)"
)


@dataclass(frozen=True)
class Geometry:
    """One figure: its size and its plot areas (x0, y0, x1, y1), all in points."""

    name: str
    width_pt: float
    height_pt: float
    plot_areas: tuple[tuple[float, float, float, float], ...]
    xticks: int
    yticks: int

    @property
    def plot_fraction(self) -> float:
        """The plot areas' share of the figure's area."""
        area = sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in self.plot_areas)
        return area / (self.width_pt * self.height_pt)


def figures_of(page: str) -> dict[str, str]:
    """Each inline figure's SVG by its name (``data-figure``)."""
    return {m.group(1): m.group(0) for m in _SVG.finditer(page)}


def geometry(name: str, svg: str) -> Geometry:
    size = _VIEWBOX.search(svg)
    assert size, f"{name}: no viewBox"
    areas = []
    for m in _AXES.finditer(svg):
        xa, ya, xb, _, _, yc = (float(v) for v in m.groups())
        areas.append((min(xa, xb), min(ya, yc), max(xa, xb), max(ya, yc)))
    return Geometry(
        name=name,
        width_pt=float(size.group(1)),
        height_pt=float(size.group(2)),
        plot_areas=tuple(areas),
        xticks=_labelled(svg, "xtick"),
        yticks=_labelled(svg, "ytick"),
    )


def _labelled(svg: str, kind: str) -> int:
    """Ticks of ``kind`` (xtick, ytick) that carry a label (a log axis' minor ticks have none)."""
    pieces = re.split(rf'<g id="[^"]*-{kind}_\d+">', svg)[1:]
    return sum("<text" in piece.split("</g>\n   </g>")[0] for piece in pieces)
