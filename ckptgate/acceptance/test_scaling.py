"""The scaling sweep (``--sweep=nodes``, ``--sweep-ranks``): the write burst, the restart read
and the create storm at 1, 2, 4, ... of the launched nodes, each point repeated and every byte
verified; then the projection to the profile's node count, in words that are never
``qualified`` (its own line below the verdict; the run's verdict and exit status stand).
"""

from __future__ import annotations

import pytest

from ckptgate.campaigns.sweep import SweepResult
from ckptgate.report.junit import projection_properties

pytestmark = pytest.mark.sweep


def test_scaling_sweep(scaling: SweepResult | None, request: pytest.FixtureRequest) -> None:
    """Every sweep point the plan measures ran and verified its bytes (with ``--sweep-ranks
    auto``, all but those it left out where more ranks stopped helping: ``skipped``); the
    projection is reported, not judged. Its numbers go to the JUnit XML as the items' do, through
    ``user_properties``: pytest's ``record_property`` fixture warns under the default
    ``junit_family`` (xunit2), and the warning, an error where warnings are errors, failed the
    run."""
    if scaling is None:
        pytest.skip("no --sweep=nodes or --sweep-ranks: no scaling sweep asked for")
    if scaling.projection is not None:  # node 0
        request.node.user_properties.extend(projection_properties(scaling.projection.to_json()))
        planned = len(scaling.plan.node_counts) * len(scaling.plan.ranks_per_node)
        expected = planned - len(scaling.skipped)
        assert len(scaling.points) == expected * scaling.plan.repeats
