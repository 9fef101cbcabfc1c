"""The metadata storm (checklist item 6): a checkpoint commit, a restore's listing, a deletion.

A framework's checkpoint is many small-to-large files in one directory plus one global
``.metadata``. PyTorch DCP's FileSystemWriter names them ``__{rank}_{index}.distcp``, writes
them from every rank, and once all ranks are done the coordinator writes ``.metadata.tmp`` and
renames it to ``.metadata``: the rename is the commit, so a reader sees a whole checkpoint or
none. This package drives the metadata side of that at full rank count (every global rank's
files, spread over this node's rank processes), in four phases, each from a common start:

- ``create``: per file create (O_CREAT|O_EXCL), a small write of stamped data, fsync, close;
- ``commit``: one rank writes ``.metadata.tmp``, fsyncs and closes it, renames it to
  ``.metadata`` and fsyncs the directory (the rename is durable only then). The file is as
  large as DCP's would be (``metadata_bytes``: ckptgate.sizing.dcp_metadata_bytes, per
  tensor and per chunk of the profile's layout): a one-line JSON listing of the files (what
  DCP's pickle records), a newline, then stamped incompressible padding up to the size
  (``read_manifest`` reads the listing back);
- ``list`` and ``stat``: what a restore does first: list the directory (one rank), then stat
  every file (split over the ranks);
- ``unlink``: the retention delete storm: every file of an older checkpoint removed (on an
  object store in bulk delete requests, S3 DeleteObjects through s3fs, each request timed).

Every operation is timed on its own (``time.perf_counter``), so each phase reports its rate
over the common span and per-operation latency percentiles (``ckptgate.engine.latency``).

I/O path: every task is one loop written against the backend's operations
(``ckptgate.storage.operations``), and the target's spec chooses the backend: POSIX on a local
target, fsspec elsewhere, or fsspec forced with ``BackendSpec(..., backend="fsspec")``. The
POSIX backend's calls are thin ``os`` calls, bound to locals in the per-file loop: measured on
tmpfs with 2 ranks, fsspec's ``open``/``info``/``rm_file`` wrap each call in several Python
layers (``LocalFileOpener``, path normalisation, a ``dict`` per ``info``) and cut the create
rate to about half of the os loop's, which sets Python, not the filesystem, as the limit (the
benchmark asks for 0.8 of fio's filecreate on tmpfs). ``StormResult.io`` names the backend.

One module per phase, each with its rank task and its driver, plus the shared bits:
``files`` (the storm's files, the commit's paths, ``split``), ``phase`` (``Phase``, the
per-file timed loop and the split run), ``create`` (the create phase and the save it begins,
``run_metadata_storm``), ``commit``, ``listing`` (list, then stat), ``delete``, ``verify``.
Callers import from this package.
"""

from __future__ import annotations

from ckptgate.workloads.storm.commit import (
    COMMIT_OPS,
    commit_content,
    manifest_bytes,
    read_manifest,
    run_commit,
)
from ckptgate.workloads.storm.create import CREATE_OPS, StormResult, create_ops, run_metadata_storm
from ckptgate.workloads.storm.delete import run_delete_storm
from ckptgate.workloads.storm.files import (
    METADATA_NAME,
    METADATA_STAMP_RANK,
    METADATA_TMP_NAME,
    PADDING_TRANSFER_BYTES,
    WRITE_BYTES,
    StormFile,
    metadata_paths,
    planned_storm_files,
    register_storm,
    split,
    storm_files,
)
from ckptgate.workloads.storm.listing import RestoreListing, run_restore_listing
from ckptgate.workloads.storm.phase import Phase, combine_phases
from ckptgate.workloads.storm.verify import verify_storm

__all__ = [
    "COMMIT_OPS",
    "CREATE_OPS",
    "METADATA_NAME",
    "METADATA_STAMP_RANK",
    "METADATA_TMP_NAME",
    "PADDING_TRANSFER_BYTES",
    "WRITE_BYTES",
    "Phase",
    "RestoreListing",
    "StormFile",
    "StormResult",
    "combine_phases",
    "commit_content",
    "create_ops",
    "manifest_bytes",
    "metadata_paths",
    "planned_storm_files",
    "read_manifest",
    "register_storm",
    "run_commit",
    "run_delete_storm",
    "run_metadata_storm",
    "run_restore_listing",
    "split",
    "storm_files",
    "verify_storm",
]
