"""The checklist: the write rounds, then one test per row of the check table.

The rows come from ``ckptgate.checks.table`` (the plugin parametrises ``answer`` and its
check's ``measured`` from it, with the check's marker: ``pytest -m contention``, or ``-k
reader-slowdown`` for one row). Each check measures once for all its rows and cleans up when
its last row is done; the write rounds come first, because the other checks read their files
and rates.
"""

from __future__ import annotations

from typing import Any

import pytest

from ckptgate.campaigns.write import WriteCampaign
from ckptgate.checks.check import Answer
from ckptgate.fixtures.provided import Gate


@pytest.mark.write  # the write check's rounds: -m write selects them with its rows
def test_write_rounds(benchmark, campaign: WriteCampaign) -> None:
    """The rounds, run through pytest-benchmark so its JSON and compare work across targets.

    pytest-benchmark times each burst (dispatch to the last rank's result); retiring the
    previous checkpoint (verified, then removed) and making the next directory run untimed in
    its setup. The plugin runs this test first, so these are the profile's rounds.
    """
    missing = campaign.ctx.profile.run.rounds - len(campaign.bursts)
    if missing > 0:
        benchmark.pedantic(
            campaign.write_round,
            setup=lambda: ((campaign.prepare_round(),), {}),
            rounds=missing,
            iterations=1,
            warmup_rounds=0,
        )
    benchmark.extra_info.update(
        total_bytes=campaign.worst().total_bytes,
        worst_aggregate_bytes_per_s=campaign.worst().aggregate_bytes_per_s,
        span_s=[b.span_s for b in campaign.rounds()],
    )


def test_checklist(measured: Any, answer: Answer, gate: Gate) -> None:
    """One checklist row: its check's measurement judged against the profile's requirement."""
    gate.answer(answer.judge(measured), row=answer.row.id, unless=answer.unless)
