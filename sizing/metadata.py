"""The size of PyTorch DCP's global ``.metadata``, written by the coordinator at commit.

A minimal local model until the layout model (branch ``layout``) brings chunks from the
layout: ``DCP_METADATA_BYTES_PER_CHUNK`` bytes per tensor chunk, measured on real DCP saves
(issue 15: 278 KB for 1,275 chunks, 547 KB for 2,499: about 219 B per chunk), and one chunk
per shard file, the fewest a checkpoint can have (every file holds at least one chunk).
"""

from __future__ import annotations

from ckptgate.sizing.schema import Profile

DCP_METADATA_BYTES_PER_CHUNK = 219
"""Bytes of ``.metadata`` per tensor chunk, measured on DCP saves (issue 15)."""


def dcp_metadata_bytes(profile: Profile) -> int:
    """``.metadata`` bytes = 219 B x chunks, chunks = gpus x files_per_rank (a lower bound:
    at least one chunk per file). Source: PyTorch DCP saves measured in issue 15."""
    chunks = profile.cluster.gpus * profile.checkpoint.files_per_rank
    return DCP_METADATA_BYTES_PER_CHUNK * chunks
