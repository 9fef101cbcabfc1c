"""The scaling sweep: which points a sweep asks for, and one sweep run through the plugin on a
memory-backed directory (every point real, every byte verified, the projection its own line)."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from ckptgate.campaigns.sweep import (
    AUTO_RANKS,
    SweepError,
    SweepPlan,
    SweepPoint,
    SweepResult,
    doubling,
    more_streams_helped,
    plan_sweep,
    sweep_point_s,
    within_budget,
)
from ckptgate.projection.projected import Projection
from ckptgate.report.exitcodes import RunExit
from tests.fixtures.test_plugin import SMALL, run_pytest


@pytest.mark.parametrize(
    ("count", "expected"),
    [(1, (1,)), (2, (1, 2)), (8, (1, 2, 4, 8)), (12, (1, 2, 4, 8, 12))],
    ids=lambda v: f"{v}",
)
def test_node_counts_double_up_to_the_launched_count(count, expected):
    assert doubling(count) == expected


def test_a_node_sweep_always_measures_the_runs_own_ranks_per_node():
    plan = plan_sweep("nodes", (1, 2), 3, node_count=16, pool_ranks=8)
    assert plan is not None
    assert plan.node_counts == (1, 2, 4, 8, 16)
    assert plan.ranks_per_node == (1, 2, 8)
    assert plan.run_ranks == 8
    ranks_only = plan_sweep("none", (4, 1, 2), 2, node_count=4, pool_ranks=4)
    assert ranks_only is not None and ranks_only.node_counts == (4,)
    assert ranks_only.ranks_per_node == (1, 2, 4)
    assert plan_sweep("none", (), 3, node_count=4, pool_ranks=4) is None


def test_sweep_ranks_beyond_the_nodes_rank_processes_are_refused():
    refused = r"--sweep-ranks 1,16: 16 is not within 1 to this node's 8"
    with pytest.raises(SweepError, match=refused):
        plan_sweep("nodes", (1, 16), 3, node_count=2, pool_ranks=8)
    with pytest.raises(SweepError, match="--sweep-repeats 0: must be at least 1"):
        plan_sweep("nodes", (), 0, node_count=2, pool_ranks=8)


def test_a_bad_sweep_option_is_one_usage_line(tmp_path: Path) -> None:
    result = run_pytest(
        "--profile=tmpfs", f"--target={tmp_path}", "--sweep-ranks=1,x", "ckptgate/acceptance",
        *SMALL,
    )  # fmt: skip
    assert result.returncode == 4
    assert "--sweep-ranks 1,x: allowed: rank counts of at least 1" in result.stderr
    assert "Traceback" not in result.stderr


# A cluster of 64 nodes (4 ranks each) whose checkpoint no machine could persist in time
# (1 PB of state every 600 s), played by one node with shards capped: the sweep's points are
# real, and the projection can only be undetermined (one node count) or worse, never a pass.
HUGE = ["--set", "cluster.gpus=256", "--set", "cluster.parallelism.dp=128",
        "--set", "model.parameters=70e12"]  # fmt: skip


def test_a_sweep_on_2048_nodes_is_cut_to_its_budget_keeping_one_node_and_the_run():
    """12 node counts x 3 repeats at 100 s a repeat is an hour: within 1,400 s the counts are
    thinned to four; within 500 s one repeat each; below two points it is refused,
    naming the option and the least it needs."""
    plan = plan_sweep("nodes", (), 3, node_count=2048, pool_ranks=8)
    assert plan is not None and plan.runs() == 12 * 3
    assert within_budget(plan, 100.0, None) == plan
    cut = within_budget(plan, 100.0, 1400.0)
    assert cut.node_counts == (1, 16, 128, 2048)  # evenly spread in log2
    assert cut.repeats == 3 and cut.runs() * 100.0 <= 1400.0
    assert within_budget(plan, 100.0, 500.0).repeats == 1
    assert "4 point repeats, about 400 s" in within_budget(plan, 100.0, 500.0).time_words(
        100.0, 500.0
    )
    with pytest.raises(SweepError, match=r"--sweep-budget-s 150: .* about 200 s"):
        within_budget(plan, 100.0, 150.0)
    with pytest.raises(SweepError, match="--sweep-budget-s 0: allowed"):
        within_budget(plan, 100.0, 0.0)


def test_the_projection_reads_every_point_of_the_sweep_as_one_grid():
    # The ceiling needs every ranks-per-node point, not the run's own only: 2 node counts x
    # 2 ranks per node, 2 repeats each, arrive as metric -> nodes -> ranks -> repeats.
    result = SweepResult(SweepPlan((1, 2), (1, 4), 2, 4), cluster_nodes=64)
    for nodes in (1, 2):
        for ranks in (1, 4):
            for repeat in (1, 2):
                rate = float(nodes * ranks * 10 + repeat)
                result.points.append(
                    SweepPoint(nodes, ranks, repeat, 1, rate, 1, 2 * rate, 1, 3 * rate, 2)
                )
    grids = result.grids()
    assert sorted(grids) == ["create", "read", "write"]
    assert grids["write"] == {1: {1: [11.0, 12.0], 4: [41.0, 42.0]},
                              2: {1: [21.0, 22.0], 4: [81.0, 82.0]}}  # fmt: skip
    assert grids["read"][2][4] == [162.0, 164.0]
    assert {n: v[4] for n, v in grids["write"].items()} == result.series()["write"]


def test_a_sweep_points_time_is_its_four_windows():
    assert sweep_point_s(create_window_s=30.0, restart_read_s=60.0) == 180.0


@pytest.fixture
def sweep_target(tmp_path: Path) -> Path:
    """A new directory of the test's own (pytest removes it). Not under /dev/shm: the README's
    test command runs the checklist there in the same session, and a run inside another live
    run's target is refused (issue 22's overlapping targets)."""
    path = tmp_path / "target"
    path.mkdir()
    return path


def test_a_sweep_measures_every_point_and_projects_in_its_own_line(
    sweep_target: Path, tmp_path: Path
) -> None:
    report, target = tmp_path / "report.json", sweep_target
    result = run_pytest(
        "--profile=tmpfs", f"--target={target}", f"--report-json={report}", *SMALL, *HUGE,
        "--sweep-ranks=1,2", "--sweep-repeats=2",
        "ckptgate/acceptance", "-m", "write or sweep",
    )  # fmt: skip
    out = result.stdout
    assert report.is_file(), out[-3000:] + result.stderr[-2000:]
    # said in the header, before the sweep starts: its points and how long they take
    assert "ckptgate: sweep: 1 of " in out and ": 6 point repeats, about " in out, out[:3000]
    data = json.loads(report.read_text())
    scaling = data["scaling"]
    assert [(p["nodes"], p["ranks_per_node"], p["repeat"]) for p in scaling["points"]] == [
        (1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2), (1, 4, 1), (1, 4, 2)
    ]  # fmt: skip
    for point in scaling["points"]:  # every byte written was read back and verified
        assert point["read_bytes"] == point["write_bytes"] > 0
        assert point["verified_bytes"] >= point["write_bytes"] + point["created_files"]
        assert point["write_bytes_per_s"] > 0 and point["create_per_s"] > 0
    summary = [s for s in scaling["summary"] if s["metric"] == "write"]
    assert [(s["ranks_per_node"], s["repeats"]) for s in summary] == [(1, 2), (2, 2), (4, 2)]
    assert all(s["lower"] <= s["estimate"] <= s["upper"] for s in summary)
    one, two = scaling["points"][0], scaling["points"][2]
    assert two["write_bytes"] == 2 * one["write_bytes"]  # weak scaling: a shard per rank
    projection = scaling["projection"]
    assert projection["word"] in ("undetermined", "projected-fail")
    write = next(i for i in projection["items"] if i["metric"] == "write")
    assert write["word"] == "undetermined"
    # the ranks-per-node curve of the one node: three rank counts, described without a fit
    curves = {c["metric"]: c for c in scaling["ranks"]["curves"]}
    assert sorted(curves) == ["create", "read", "write"]
    assert curves["write"]["nodes"] == 1 and curves["write"]["ranks_per_node"] == [1, 2, 4]
    assert curves["write"]["fit"] is None and curves["write"]["efficiency"][0] == 1.0
    assert curves["write"]["note"].startswith("3 ranks-per-node count(s)")
    assert write["reason"].startswith("too few points: 1 client count(s)")
    # what limited the trial, said and kept: one node cannot show the storage's ceiling
    assert "; what limited the trial: " in write["reason"]
    assert write["ceiling"]["limiter"] in ("client", "none", "unknown")
    assert write["ceiling"]["saturated"] is False and write["ceiling"]["top_streams"] == 4
    # each node's own limits, measured and kept: the read's from /dev/zero (the sweep's own
    # null-source read, on every node), the write's from the write checklist's null sink
    limits = scaling["node_limits"]
    assert sorted(limits) == ["read", "write"], limits
    assert "/dev/zero" in limits["read"]["name"] and limits["read"]["per_node"] > 0
    assert "null sink" in limits["write"]["name"] and limits["write"]["per_node"] > 0
    # Its own line, right below the verdict, which it does not change.
    lines = out.splitlines()
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("VERDICT"))
    assert lines[verdict_at + 1].startswith(f"PROJECTION {projection['word']} (not a qualif")
    assert data["verdict"]["status"] in ("trial", "partial")
    assert "projected" not in data["verdict"]["line"]
    assert not list(target.iterdir()), "the sweep left files behind"


def test_a_projected_pass_never_exits_0(sweep_target: Path, tmp_path: Path) -> None:
    # 4 nodes of the toy profile, one played: every tmpfs requirement is met outright at one
    # node, so the projection passes; the run is still a trial (not accepted here: no
    # --accept), and exits as one.
    report = tmp_path / "report.json"
    unaccepted = [a for a in SMALL if not a.startswith("--accept")]
    result = run_pytest(
        "--profile=tmpfs", f"--target={sweep_target}", f"--report-json={report}", *unaccepted,
        "--set", "cluster.gpus=16", "--set", "cluster.parallelism.dp=8",
        "--sweep=nodes", "--sweep-repeats=1",
        "ckptgate/acceptance", "-m", "write or sweep",
    )  # fmt: skip
    assert report.is_file(), result.stdout[-3000:] + result.stderr[-2000:]
    data = json.loads(report.read_text())
    assert data["scaling"]["projection"]["word"] == "projected-pass"
    assert data["verdict"]["status"] == "trial"
    assert result.returncode == RunExit.TRIAL


def _point(nodes: int, ranks: int, write: float, read: float, create: float) -> SweepPoint:
    return SweepPoint(nodes, ranks, 1, 1, write, 1, read, 1, create, 1)


def test_more_streams_help_while_a_doubling_raises_any_metric_by_fifteen_percent() -> None:
    points = [
        _point(1, 1, 100.0, 100.0, 10.0),
        _point(1, 2, 180.0, 110.0, 10.0),  # the write still grew (x1.8)
        _point(1, 4, 190.0, 120.0, 11.0),  # nothing grew by 15 %
        _point(2, 1, 100.0, 100.0, 10.0),
        _point(2, 2, 100.0, 100.0, 11.5),  # the creates did (x1.15)
    ]
    assert more_streams_helped(points, 1, 1)  # nothing to compare with
    assert more_streams_helped(points, 1, 2)
    assert not more_streams_helped(points, 1, 4)
    assert more_streams_helped(points, 2, 2)


def test_sweep_ranks_auto_doubles_to_the_nodes_ranks_until_they_stop_helping() -> None:
    plan = plan_sweep("nodes", AUTO_RANKS, 3, node_count=8, pool_ranks=8)
    assert plan is not None and plan.until_flat
    assert (plan.node_counts, plan.ranks_per_node, plan.run_ranks) == ((1, 2, 4, 8),) * 2 + (8,)
    assert "until a doubling of ranks raises no metric by 15%" in plan.words(64)
    assert plan.time_words(10.0, None).startswith("at most 48 point repeats, about 480 s")
    cut = within_budget(plan, 10.0, 200.0)
    assert cut.until_flat and cut.runs() * 10.0 <= 200.0
    with pytest.raises(SweepError, match="--sweep-ranks most: allowed: auto or rank counts"):
        plan_sweep("nodes", "most", 3, node_count=8, pool_ranks=8)


def test_an_auto_sweep_stops_a_node_counts_ranks_where_they_stopped_helping(
    sweep_target: Path, tmp_path: Path
) -> None:
    """The real sweep with ``--sweep-ranks auto`` on a node of 8 ranks: the rank counts
    measured are 1, 2, 4 in order up to the first that raised no metric by 15 % (whatever
    this machine gives), the run's own 8 always; each one left out follows such a doubling,
    and each one measured follows one that still helped."""
    report = tmp_path / "report.json"
    result = run_pytest(
        "--profile=tmpfs", f"--target={sweep_target}", f"--report-json={report}", *SMALL,
        *HUGE, "--set", "cluster.gpus_per_node=8", "--sweep-ranks=auto", "--sweep-repeats=1",
        "ckptgate/acceptance", "-m", "write or sweep",
    )  # fmt: skip
    assert report.is_file(), result.stdout[-3000:] + result.stderr[-2000:]
    assert result.returncode == 0, result.stdout[-3000:]  # a trial, accepted: no item failed
    assert ": at most 4 point repeats, about " in result.stdout, result.stdout[:3000]
    scaling = json.loads(report.read_text())["scaling"]
    assert scaling["plan"]["until_flat"] is True
    points = [SweepPoint(**p) for p in scaling["points"]]
    measured = [p.ranks_per_node for p in points]
    skipped = [s["ranks_per_node"] for s in scaling["skipped"]]
    assert sorted(measured + skipped) == [1, 2, 4, 8] and measured[0] == 1 and measured[-1] == 8
    assert measured == sorted(measured)
    for ranks in measured[1:-1]:  # measured because the count before it still helped
        below = max(r for r in measured if r < ranks)
        assert more_streams_helped(points, 1, below), (ranks, points)
    if skipped:  # left out after the first doubling that helped no metric
        stop = max(r for r in measured if r < skipped[0])
        assert not more_streams_helped(points, 1, stop), (skipped, points)
    assert not list(sweep_target.iterdir()), "the sweep left files behind"


class _Node:
    """Enough of a pytest item for the acceptance test's properties."""

    def __init__(self) -> None:
        self.user_properties: list[tuple[str, object]] = []


class _Request:
    """Enough of a ``FixtureRequest``: its ``node``."""

    def __init__(self) -> None:
        self.node = _Node()


class _Projection:
    """Enough of a ``Projection`` for the acceptance test's properties."""

    def to_json(self) -> dict[str, object]:
        return {"word": "undetermined", "line": "PROJECTION undetermined", "items": []}


def test_the_sweeps_acceptance_test_counts_the_points_an_auto_sweep_left_out() -> None:
    """``ckptgate/acceptance/test_scaling.py`` asks for every planned point but those
    ``skipped``: an auto sweep that left one out is not a failed item, and one that lost a
    point it planned still is."""
    from ckptgate.acceptance.test_scaling import test_scaling_sweep as acceptance

    plan = plan_sweep("none", AUTO_RANKS, 2, node_count=1, pool_ranks=8)
    assert plan is not None and plan.ranks_per_node == (1, 2, 4, 8)
    result = SweepResult(plan, cluster_nodes=4)
    result.points = [_point(1, r, 1.0, 1.0, 1.0) for r in (1, 2, 8) for _ in range(2)]
    result.skipped = [(1, 4)]
    result.projection = typing.cast(Projection, _Projection())
    request = typing.cast(pytest.FixtureRequest, _Request())
    acceptance(result, request)  # passes: 4 was left out, and listed
    assert ("projection.word", "undetermined") in request.node.user_properties
    result.skipped = []
    with pytest.raises(AssertionError):
        acceptance(result, request)  # a planned point missing
