"""One verdict per run: qualified, partial, trial, failed; or no verdict when nothing was
measured. Nothing but qualified says the storage qualified for the profile."""

from __future__ import annotations

from ckptgate.checks.table import checklist
from ckptgate.report.items import Item
from ckptgate.report.verdict import RunScale, Verdict
from ckptgate.report.verdict import decide as decide_with
from ckptgate.sizing import derive, load_profile
from ckptgate.sizing.as_run import ProfileAsRun, profile_as_run

FULL = RunScale(nodes=2048, cluster_nodes=2048, ranks=16384, cluster_ranks=16384,
                full_cluster=True)  # fmt: skip


CHECKLIST = checklist()


def required_ids() -> tuple[str, ...]:
    return CHECKLIST.required_ids()


def decide(
    items: list[Item],
    scale: RunScale,
    as_run: ProfileAsRun | None = None,
    interrupted: str | None = None,
) -> Verdict:
    """The verdict with the check table's rows, as the plugin's report decides it."""
    return decide_with(items, scale, as_run, interrupted, checklist=CHECKLIST)


def _number(id: str) -> str | None:
    row = CHECKLIST.get(id)
    return row.number if row else None


def _items(passed: bool | None = True, ids: tuple[str, ...] | None = None) -> list[Item]:
    return [
        Item(id=i, required=1.0, measured=2.0, unit="B", passed=passed, detail="d",
             checklist=_number(i))
        for i in (ids if ids is not None else tuple(r.id for r in CHECKLIST.rows))
    ]  # fmt: skip


def test_every_item_passed_at_full_scale_is_qualified() -> None:
    verdict = decide(_items(), FULL)
    assert verdict.status == "qualified"
    assert verdict.line.startswith("VERDICT qualified: every item passed")
    assert "2,048 of 2,048 nodes" in verdict.line


def test_report_only_items_do_not_block_a_qualification() -> None:
    items = _items()
    items[0].passed = None
    assert decide(items, FULL).status == "qualified"


def test_fewer_nodes_than_the_profile_is_partial_and_says_what_it_does_not_prove() -> None:
    scale = RunScale(nodes=64, cluster_nodes=2048, ranks=512, cluster_ranks=16384,
                     full_cluster=False)  # fmt: skip
    verdict = decide(_items(), scale)
    assert verdict.status == "partial"
    assert "64 of 2,048 nodes (3.12 % of the cluster)" in verdict.line
    assert "only a full-scale run shows the storage scales to every client" in verdict.line


def test_capped_shards_are_a_trial_not_a_qualification() -> None:
    scale = RunScale(2048, 2048, 16384, 16384, True, trial_settings=("shards capped at 1 GB",))
    verdict = decide(_items(), scale)
    assert verdict.status == "trial"
    assert "shards capped at 1 GB" in verdict.line and "not a qualification" in verdict.line


def test_a_required_item_that_did_not_run_makes_a_trial() -> None:
    ids = tuple(i for i in required_ids() if i != "metadata-create-rate")
    verdict = decide(_items(ids=ids), FULL)
    assert verdict.status == "trial"
    assert "metadata storm create rate" in verdict.missing


def test_optional_dcp_items_that_did_not_run_are_named_but_do_not_block() -> None:
    verdict = decide(_items(ids=required_ids()), FULL)
    assert verdict.status == "qualified"
    assert "DCP bytes per parameter (du)" in verdict.not_run


def test_one_failed_item_fails_the_run_naming_it() -> None:
    items = _items()
    items[3].passed = False
    verdict = decide(items, FULL)
    assert verdict.status == "failed"
    assert items[3].title in verdict.line


def test_a_run_that_answered_nothing_is_no_verdict() -> None:
    verdict = decide([], FULL)
    assert verdict.status == "error"
    assert "measured nothing" in verdict.line


def test_on_an_object_store_a_passing_verdict_says_atomic_commit_was_not_qualified() -> None:
    """An object store has no fsync and commits by copy and delete: green must not claim an
    atomic commit, whatever the status."""
    caveat = "object store (S3 through s3fs): no fsync, commit by copy and delete: atomic commit not qualified"  # noqa: E501
    full = RunScale(2048, 2048, 16384, 16384, True, caveats=(caveat,))
    partial = RunScale(64, 2048, 512, 16384, False, caveats=(caveat,))
    trial = RunScale(2048, 2048, 16384, 16384, True, ("shards capped at 1 GB",), caveats=(caveat,))
    for scale, status in ((full, "qualified"), (partial, "partial"), (trial, "trial")):
        verdict = decide(_items(), scale)
        assert verdict.status == status
        assert verdict.line.endswith(f"; {caveat}"), verdict.line
    assert "atomic commit" not in decide(_items(), FULL).line


def test_every_verdict_line_names_the_profile_as_run_and_its_size() -> None:
    """Before: a bare "VERDICT qualified" whatever the profile (the toy one, a shrunk one)."""
    run = load_profile("7b", ["cluster.gpus=4", "cluster.gpus_per_node=4",
                              "cluster.parallelism.dp=4", "model.parameters=16e6"])  # fmt: skip
    as_run = profile_as_run(load_profile("7b"), run, derive(run))
    failing = _items()
    failing[0].passed = False
    for items in (_items(), failing):
        verdict = decide(items, FULL, as_run)
        assert verdict.line.startswith(
            f"VERDICT {verdict.status} for 7b modified (cluster.gpus 64 -> 4; "
        ), verdict.line
        assert "Ψ 16.0 M parameters, checkpoint 224 MB, 4 GPUs on 1 node: " in verdict.line
        assert verdict.to_json()["profile"]["modified"] is True


def test_an_interrupted_run_is_interrupted_not_a_trial() -> None:
    """Before: Ctrl-C after some items read ``trial`` (the items not run)."""
    ids = tuple(i for i in required_ids() if i != "metadata-create-rate")
    verdict = decide(_items(ids=ids), FULL, interrupted="SIGTERM")
    assert verdict.status == "interrupted"
    assert verdict.line.startswith("VERDICT interrupted: SIGTERM stopped the run after ")
    assert "nothing qualified" in verdict.line
    assert decide([], FULL, interrupted="Ctrl-C").status == "interrupted"
