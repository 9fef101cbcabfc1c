"""What a check needs from the run: the profile and its sizing, the plan, the target, the ranks.

One object handed to every check, so a check is tested by building one (no pytest session) and
the acceptance modules never reach into the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckptgate.cluster.nodes import Nodes, SingleNode
from ckptgate.cluster.plan import NodePlan
from ckptgate.engine.pool import RankPool
from ckptgate.rundir.target import Target
from ckptgate.sizing import Profile, Sizing

TIMEOUT_WINDOWS = 10.0
"""How many budget windows a burst may take before its ranks count as hung."""


def timeout_for(profile: Profile, window_s: float) -> float:
    """How long a burst may take before its ranks count as hung: ten of its budget windows,
    or ``run.timeout_floor_s``, whichever is longer."""
    return max(profile.run.timeout_floor_s, TIMEOUT_WINDOWS * window_s)


@dataclass
class CheckContext:
    """The run's collaborators, as every check sees them."""

    profile: Profile
    sizing: Sizing
    plan: NodePlan
    target: Target
    pool: RankPool
    run_id: int
    nodes: Nodes = field(default_factory=SingleNode)
    direct: bool = False
    """Read back with O_DIRECT where the filesystem allows (``--direct`` or run.direct_io)."""

    @property
    def save_timeout_s(self) -> float:
        """A save burst's deadline: ten save windows (the sizing's create window: the stall
        budget in sync mode, interval / headroom in async mode; SPEC.md), or the floor."""
        return timeout_for(self.profile, self.sizing.create_window_s)

    @property
    def restart_timeout_s(self) -> float:
        """A restart read's deadline: ten restart.read_s windows, or the floor."""
        return timeout_for(self.profile, self.profile.restart.read_s)

    @property
    def interval_timeout_s(self) -> float:
        """A retention delete storm's deadline: ten checkpoint intervals, or the floor."""
        return timeout_for(self.profile, self.profile.checkpoint.interval_s)
