"""Pure arithmetic from a cluster profile to storage requirements (SPEC.md).

No I/O beyond reading the profile file, and no pytest, fsspec or numpy imports.
"""

from ckptgate.sizing.apportion import scale_exact
from ckptgate.sizing.architecture import Architecture, count_parameters
from ckptgate.sizing.distribution import ShardDistribution
from ckptgate.sizing.metadata import (
    dcp_metadata_bytes,
    dcp_metadata_chunks,
    dcp_metadata_tensors,
)
from ckptgate.sizing.profile import (
    SHIPPED_PROFILES,
    dump_profile,
    load_profile,
    profile_from_dict,
    profile_to_dict,
)
from ckptgate.sizing.reader import ProfileError
from ckptgate.sizing.requirements import (
    Requirement,
    Sizing,
    derive,
    first_order_waste,
    lost_work_fraction,
    mtbf_s,
    sweep,
    young_interval_s,
)
from ckptgate.sizing.schema import (
    CheckpointSpec,
    ClusterSpec,
    DcpSpec,
    FailureSpec,
    ModelSpec,
    Parallelism,
    Profile,
    RestartSpec,
    RetentionSpec,
    RunSpec,
)
from ckptgate.sizing.shards import (
    played_ranks,
    rank_file_bytes,
    shard_distribution,
    shard_file_count,
    storm_file_count,
)
from ckptgate.sizing.units import (
    UnitError,
    format_bytes,
    format_count,
    format_rate,
    format_seconds,
    parse_bytes,
    parse_count,
    parse_seconds,
)

__all__ = [
    "SHIPPED_PROFILES",
    "Architecture",
    "CheckpointSpec",
    "ClusterSpec",
    "DcpSpec",
    "FailureSpec",
    "ModelSpec",
    "Parallelism",
    "Profile",
    "ProfileError",
    "Requirement",
    "RestartSpec",
    "RetentionSpec",
    "RunSpec",
    "ShardDistribution",
    "Sizing",
    "UnitError",
    "count_parameters",
    "dcp_metadata_bytes",
    "dcp_metadata_chunks",
    "dcp_metadata_tensors",
    "derive",
    "dump_profile",
    "first_order_waste",
    "format_bytes",
    "format_count",
    "format_rate",
    "format_seconds",
    "load_profile",
    "lost_work_fraction",
    "mtbf_s",
    "parse_bytes",
    "parse_count",
    "parse_seconds",
    "played_ranks",
    "profile_from_dict",
    "profile_to_dict",
    "rank_file_bytes",
    "scale_exact",
    "shard_distribution",
    "shard_file_count",
    "storm_file_count",
    "sweep",
    "young_interval_s",
]
