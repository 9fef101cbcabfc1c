"""The rank processes the workload tests share, one pool per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ckptgate.engine.pool import RankPool


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Two rank processes for the module (one pool per module: a module's tasks may leave
    state in its ranks); stopped at its end. A module that needs another pool defines its
    own ``pool``."""
    with RankPool(2) as ranks:
        yield ranks
