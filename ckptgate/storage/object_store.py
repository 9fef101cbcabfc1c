"""Object stores: what the POSIX-shaped checkpoint phases are on them, and their upload part.

A checkpoint on an object store through fsspec is not a file: an object becomes visible whole
when its upload completes (on ``close``), there is no ``fsync`` and no directory to sync, and a
"rename" is a server-side copy followed by a delete (s3fs's ``mv`` is ``CopyObject`` then
``DeleteObject``; gcsfs's is a rewrite then a delete), so the commit that PyTorch DCP makes
atomic by renaming ``.metadata.tmp`` is not atomic there: a reader can see both names, or,
between the two calls, neither. This module is the one registry of those facts per protocol
(fsspec's ``registry.py`` is the model: one table, looked up by protocol name), and the words
the report uses for them, so a checks module labels a phase for what it is instead of
reporting a zero-time fsync.

The upload part: s3fs writes an object larger than its block size as a multipart upload whose
parts are that block size (``S3FileSystem(default_block_size=...)``, built-in default 50 MiB,
"the default block size value used for open()"; ``S3File`` refuses a block under 5 MiB: "Block
size must be >=5MB", the S3 multipart minimum for every part but the last, per AWS's
"Amazon S3 multipart upload limits"). gcsfs's ``GCSFileSystem(block_size=...)`` is its
resumable upload's chunk, which GCS wants in multiples of 256 KiB. The suite ties that part
size to its own transfer size (``run.transfer_bytes``), so that each transfer the driver times
is one part on the wire, unless the user set the option; the run header says which.

Batch deletes: s3fs's ``rm`` of a list of keys sends ``DeleteObjects`` requests of at most 1000
keys each (``S3FileSystem._bulk_delete``: "Must have 0 < len <= 1000"); the retention delete
storm deletes through it and the report names the batch size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ckptgate.sizing import format_bytes

__all__ = [
    "OBJECT_STORES",
    "ObjectStore",
    "PartSize",
    "object_store",
    "part_size",
]


@dataclass(frozen=True)
class ObjectStore:
    """One object store's facts, as its fsspec implementation exposes them."""

    name: str
    """How the report names the service (``S3``)."""
    library: str
    """The fsspec implementation (``s3fs``)."""
    part_option: str
    """The storage option that sets the upload part (multipart chunk) size."""
    min_part_bytes: int
    """The smallest part the library accepts for a multipart upload."""
    part_multiple_bytes: int
    """Parts must be a multiple of this (1: any size)."""
    batch_delete_keys: int
    """Keys per bulk delete request through the library's ``rm`` of a list."""
    batch_delete_call: str
    """The service call a bulk delete makes (``DeleteObjects``)."""
    rename_calls: str
    """What fsspec's ``mv`` makes on this store (a copy, then a delete)."""

    @property
    def fsync_words(self) -> str:
        return "fsync not applicable on object store / no fsync (an object is committed on close)"

    @property
    def commit_words(self) -> str:
        return (
            f"commit is copy and delete ({self.library} mv: {self.rename_calls}), not an atomic "
            "rename: atomic commit not qualified; directory fsync not applicable"
        )

    @property
    def batch_delete_words(self) -> str:
        return (
            f"batch delete, up to {self.batch_delete_keys} keys per request ({self.name} "
            f"{self.batch_delete_call} through {self.library} rm)"
        )

    def batch_label(self, keys: int, requests: int) -> str:
        """The delete row's label: the keys per request this run sent (its mean)."""
        return f"batch delete, {round(keys / max(requests, 1))} keys per request"

    def caveat(self) -> str:
        """What a green verdict on this store does not claim (the verdict line carries it)."""
        return (
            f"object store ({self.name} through {self.library}): no fsync (objects commit on "
            "close), commit by copy and delete: atomic commit not qualified"
        )


_S3 = ObjectStore(
    name="S3",
    library="s3fs",
    part_option="default_block_size",
    min_part_bytes=5 * 2**20,
    part_multiple_bytes=1,
    batch_delete_keys=1000,
    batch_delete_call="DeleteObjects",
    rename_calls="CopyObject then DeleteObject",
)
_GCS = ObjectStore(
    name="GCS",
    library="gcsfs",
    part_option="block_size",
    min_part_bytes=256 * 2**10,
    part_multiple_bytes=256 * 2**10,
    batch_delete_keys=100,
    batch_delete_call="JSON API batch",  # 100 calls per batch: cloud.google.com/storage/docs/batch
    rename_calls="rewrite then delete",
)

OBJECT_STORES: Mapping[str, ObjectStore] = {
    "s3": _S3,
    "s3a": _S3,
    "gs": _GCS,
    "gcs": _GCS,
}
"""Protocol name (fsspec's) to the store's facts."""


def object_store(protocol: str) -> ObjectStore | None:
    """The object store behind an fsspec protocol, or None for a filesystem."""
    return OBJECT_STORES.get(protocol)


@dataclass(frozen=True)
class PartSize:
    """The upload part size a run uses, and whether the suite chose it."""

    store: ObjectStore
    part_bytes: int | None
    """None: the user's value was not a number of bytes the suite can state."""
    chosen: bool
    """True when the suite tied it to the transfer size; False when the user set it."""
    transfer_bytes: int

    def words(self) -> str:
        """The run header's line."""
        option = f"{self.store.library} {self.store.part_option}"
        if not self.chosen:
            shown = format_bytes(self.part_bytes) if self.part_bytes is not None else "as given"
            return f"upload part size {shown} ({option}), set by --storage-option"
        tied = f"tied to the transfer size {format_bytes(self.transfer_bytes)}"
        if self.part_bytes != self.transfer_bytes:
            tied += (
                f" and raised to the {self.store.library} minimum "
                f"{format_bytes(self.store.min_part_bytes)}"
                if self.transfer_bytes < self.store.min_part_bytes
                else f" and rounded up to a multiple of {self.store.part_multiple_bytes} B"
            )
        return (
            f"upload part size {format_bytes(self.part_bytes or 0)} ({option}), {tied} "
            f"(run.transfer_bytes); --storage-option {self.store.part_option}=N sets it"
        )


def part_size(
    protocol: str, storage_options: Mapping[str, Any], transfer_bytes: int
) -> tuple[dict[str, Any], PartSize | None]:
    """The storage options with the upload part size tied to ``transfer_bytes`` (raised to the
    store's minimum and rounded up to its multiple) unless the user set it; and what was done
    (None where the protocol is not an object store, and the options are returned as given)."""
    options = dict(storage_options)
    store = object_store(protocol)
    if store is None:
        return options, None
    if store.part_option in options:
        given = options[store.part_option]
        known = given if isinstance(given, int) and not isinstance(given, bool) else None
        return options, PartSize(store, known, False, transfer_bytes)
    chosen = max(transfer_bytes, store.min_part_bytes)
    multiple = store.part_multiple_bytes
    chosen = -(-chosen // multiple) * multiple
    options[store.part_option] = chosen
    return options, PartSize(store, chosen, True, transfer_bytes)
