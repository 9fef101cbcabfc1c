"""What this node plays of the cluster: which global ranks, how many bytes, at what scale.

The node runs ``ranks`` local rank processes; each plays one global rank of the profile's
shard distribution (``sizing.played_ranks`` chooses them: the node's own ranks when every node
takes part, else a representative set that always holds the largest shard). A trial run may
cap every shard (``run.shard_bytes_cap``); the plan says so and the report repeats it.

Requirements at this scale are windows of time, not shares of bandwidth: the full cluster's
nodes all save at once, so each node must move its own bytes within the same window
(stall budget, interval / headroom, restart read time). The projection to the full cluster
assumes the storage scales with the number of clients, which only a full-scale run proves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptgate.sizing import (
    Profile,
    ShardDistribution,
    played_ranks,
    scale_exact,
    shard_distribution,
)


@dataclass(frozen=True)
class NodePlan:
    """The global ranks this node plays and the bytes each writes."""

    profile_name: str
    node_index: int
    nodes: int
    cluster_nodes: int
    cluster_ranks: int
    gpus_per_node: int
    global_ranks: tuple[int, ...]
    shard_bytes: tuple[int, ...]
    uncapped_shard_bytes: tuple[int, ...]
    largest_shard_bytes: int
    rank_files: tuple[tuple[tuple[str, int], ...], ...] | None = None
    """Each played rank's files (name, bytes) where the profile's writer names them (``dcp``,
    ``dlio``), cut in proportion to a trial's cap; None for an even split of each shard."""

    @property
    def ranks(self) -> int:
        return len(self.global_ranks)

    @property
    def played_bytes(self) -> int:
        return sum(self.shard_bytes)

    @property
    def capped(self) -> bool:
        return self.shard_bytes != self.uncapped_shard_bytes

    @property
    def full_cluster(self) -> bool:
        """Every global rank of the profile is played: every node, each with gpus_per_node
        ranks (fewer ranks per node play a representative share, not the cluster)."""
        return self.nodes >= self.cluster_nodes and self.ranks == self.gpus_per_node

    def scale(self) -> str:
        """The run's scale in words, for every failure message."""
        words = f"{self.nodes} of {self.cluster_nodes} nodes, {self.ranks} ranks"
        words += " on this node" if self.nodes == 1 else " per node"
        words += "; per-node share" if not self.full_cluster else "; full cluster"
        if self.capped:
            words += f"; shards capped at {max(self.shard_bytes) / 1e6:.3g} MB for a trial run"
        return words

    def scope(self) -> str:
        """What a run at this scale proves, and does not prove, for the full cluster."""
        if self.full_cluster:
            return f"full cluster played ({self.cluster_ranks} ranks): the result holds as measured"
        return (
            f"{self.nodes} of {self.cluster_nodes} nodes played: proves the played nodes' share; "
            "the full cluster needs the storage to scale with clients, which only a larger run "
            "shows"
        )


def plan_node(
    profile: Profile,
    ranks: int,
    node_index: int = 0,
    nodes: int = 1,
    distribution: ShardDistribution | None = None,
) -> NodePlan:
    """The node plan for ``ranks`` local ranks on node ``node_index`` of ``nodes``."""
    dist = distribution or shard_distribution(profile)
    chosen = tuple(played_ranks(dist, ranks, node_index, nodes))
    uncapped = tuple(dist.per_rank_bytes[g] for g in chosen)
    cap = profile.run.shard_bytes_cap
    capped = tuple(min(b, cap) for b in uncapped) if cap else uncapped
    files = None
    if dist.rank_files is not None:
        files = tuple(
            _capped(dist.rank_files[g], total) for g, total in zip(chosen, capped, strict=True)
        )
    return NodePlan(
        profile_name=profile.name,
        node_index=node_index,
        nodes=nodes,
        cluster_nodes=profile.nodes,
        cluster_ranks=profile.cluster.gpus,
        gpus_per_node=profile.cluster.gpus_per_node,
        global_ranks=chosen,
        shard_bytes=capped,
        uncapped_shard_bytes=uncapped,
        largest_shard_bytes=dist.largest_bytes,
        rank_files=files,
    )


def _capped(files: tuple[tuple[str, int], ...], total: int) -> tuple[tuple[str, int], ...]:
    """A rank's files with their bytes scaled to sum to ``total`` (its shard, capped)."""
    sizes = [size for _, size in files]
    if sum(sizes) == total:
        return files
    scaled = scale_exact(sizes, total)
    return tuple((name, size) for (name, _), size in zip(files, scaled, strict=True))
