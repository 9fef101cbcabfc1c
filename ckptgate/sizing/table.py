"""The sizing as text: the requirements table, its header, and the interval sweep table.

Tables are Markdown pipe tables, so that they paste into a procurement document as they are
and still read aligned in a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ckptgate.sizing.distribution import ShardDistribution
from ckptgate.sizing.requirements import DEFINITIONS, SWEEP_COLUMNS, Sizing, format_value
from ckptgate.sizing.schema import Profile
from ckptgate.sizing.units import (
    format_bytes,
    format_count,
    format_fraction,
    format_seconds,
    plural,
)
from ckptgate.sizing.writer_default import profile_notes


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows under a header, columns padded to their widest cell."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def profile_header(profile: Profile, sizing: Sizing) -> str:
    par = profile.cluster.parallelism
    dist = sizing.distribution
    lines = [
        f"Cluster profile {profile.name}: {profile.description}",
        f"source: {profile.source}",
        f"Ψ = {format_count(sizing.parameters)} parameters x {sizing.bytes_per_parameter} "
        f"B/parameter = {format_bytes(sizing.checkpoint_bytes)}; "
        f"{plural(sizing.gpus, 'GPU')} on {plural(sizing.nodes, 'node')} of "
        f"{profile.cluster.gpus_per_node}; tp {par.tp} pp {par.pp} dp {par.dp}, "
        f"ZeRO-{par.zero_stage}; {sizing.mode} checkpoints every "
        f"{format_seconds(sizing.interval_s)}",
        f"shard distribution: {sizing.shard_policy}",
    ]
    if dist is not None:
        lines += distribution_lines(dist)
        if sizing.written_bytes != sizing.checkpoint_bytes:
            lines.append(
                f"written per checkpoint: {format_bytes(sizing.written_bytes)} "
                f"({dist.written_parts()})"
            )
    basis = replay_basis(profile)
    if basis is not None:
        replay = profile.checkpoint.replay
        lines.append(f"checkpoint.replay {replay}: the run plays that tree's own files; {basis}")
    lines += profile_notes(profile)
    return "\n".join(lines)


def replay_basis(profile: Profile) -> str | None:
    """Which requirements a replay (``checkpoint.replay``) is judged by, in one sentence for
    the sizing output and the verdict's caveat; None without a replay."""
    replay = profile.checkpoint.replay
    if not replay:
        return None
    return (
        "async persist requires the replayed bytes / interval x headroom and the save's stall "
        "is the replayed save's measured time against the stall budget; every other figure "
        "(the sizing table, the per-node and cluster-wide rates) is the profile's"
    )


def distribution_lines(dist: ShardDistribution, histogram: bool = True) -> list[str]:
    """The per-rank shard distribution: summary with the largest node, the quantiles, and
    (``histogram``) ranks per log-spaced size bin as text bars."""
    lines = [
        f"shards: {dist.summary()}",
        f"shard quantiles (nearest rank): {dist.quantile_text()}",
    ]
    if histogram:
        spacing = "log-spaced" if dist.histogram_log_spaced else "evenly spaced"
        lines.append(f"shard sizes, ranks per bin ({spacing}):")
        lines += [f"  {line}" for line in dist.histogram_lines()]
    return lines


def requirements_table(sizing: Sizing) -> str:
    """requirement | value | formula | derived or measured by."""
    rows = [
        (
            r.title,
            r.display(),
            r.formula,
            f"measured by {r.measured_by}" if r.measured_by else "derived",
        )
        for r in sizing.requirements.values()
    ]
    return markdown_table(("requirement", "value", "formula", "derived / measured"), rows)


def render(profile: Profile, sizing: Sizing) -> str:
    footer = (
        "Values are derived from the profile (decimal units, 3 significant digits); "
        "the acceptance tests named in the last column measure them on the target."
    )
    return "\n\n".join([profile_header(profile, sizing), requirements_table(sizing), footer])


# The sweep's column headings, one per definition in requirements.SWEEP_COLUMNS.
SWEEP_HEADINGS = {
    "lost_work_fraction": "lost work",
    "stall_budget_s": "stall budget",
    "goodput_loss_fraction": "goodput loss",
    "waste_at_fixed_stall_fraction": "waste at fixed stall",
    "sync_write_bytes_per_s": "sync write",
    "async_persist_min_bytes_per_s": "async persist min",
    "async_persist_planned_bytes_per_s": "async persist planned",
    "create_rate_per_s": "create rate",
}


def sweep_table(rows: Sequence[dict[str, Any]]) -> str:
    """interval | label | one column per swept definition, each shown in its own unit."""
    header = ("interval", "", *(SWEEP_HEADINGS[name] for name in SWEEP_COLUMNS))
    cells = [
        (
            format_seconds(r["interval_s"]),
            r["label"],
            *(format_value(r[name], DEFINITIONS[name].unit) for name in SWEEP_COLUMNS),
        )
        for r in rows
    ]
    return markdown_table(header, cells)


def render_sweep(profile: Profile, sizing: Sizing, rows: Sequence[dict[str, Any]]) -> str:
    stall = format_seconds(sizing.stall_budget_s)
    intro = (
        f"Cluster profile {profile.name}: interval sweep at overhead budget "
        f"{format_fraction(profile.checkpoint.overhead_budget)}, MTBF "
        f"{format_seconds(sizing.mtbf_s)}, {format_bytes(sizing.written_bytes)} per checkpoint, "
        f"{format_seconds(sizing.restart_cost_s)} restart per failure; Young's optimum "
        f"{format_seconds(sizing.optimal_interval_s)} and Daly's "
        f"{format_seconds(sizing.daly_interval_s)} for a {stall} stall (the stall budget at the "
        f"chosen {format_seconds(sizing.interval_s)}).\n"
        "goodput loss: lost work + restart + the overhead budget (the stall budget scales with "
        f"the interval); waste at fixed stall: lost work + restart + a {stall} stall per "
        "checkpoint (Young 1974)"
    )
    return intro + "\n\n" + sweep_table(rows)
