"""Object stores: the upload part tied to the transfer size, and what each POSIX phase is
called there (no fsync, a copy-and-delete commit, batch deletes)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from ckptgate.fixtures.run.header import object_store_lines
from ckptgate.rundir.target import Target
from ckptgate.storage.fsspec_backend import FsspecBackend
from ckptgate.storage.object_store import OBJECT_STORES, object_store, part_size
from tests.s3server import S3Server

s3fs = pytest.importorskip("s3fs", reason="s3fs is in the test extra")

MiB = 2**20


def test_the_registry_knows_s3_and_gcs_and_no_filesystem() -> None:
    assert object_store("s3") is object_store("s3a") is OBJECT_STORES["s3"]
    assert object_store("gs") is object_store("gcs")
    for protocol in ("file", "local", "memory", "hdfs"):
        assert object_store(protocol) is None


def test_the_part_size_is_the_transfer_size_when_not_set() -> None:
    options, chosen = part_size("s3", {"anon": False}, 16 * MiB)
    assert options == {"anon": False, "default_block_size": 16 * MiB}
    assert chosen is not None and chosen.chosen and chosen.part_bytes == 16 * MiB
    assert "tied to the transfer size 16.8 MB (run.transfer_bytes)" in chosen.words()


def test_a_transfer_below_s3s_minimum_part_is_raised_to_it_and_says_so() -> None:
    """s3fs refuses a block under 5 MiB ("Block size must be >=5MB")."""
    options, chosen = part_size("s3", {}, 1 * MiB)
    assert options["default_block_size"] == 5 * MiB
    assert chosen is not None
    assert "raised to the s3fs minimum 5.24 MB" in chosen.words()


def test_gcs_parts_are_rounded_up_to_256_kib() -> None:
    options, chosen = part_size("gs", {}, 1_000_000)
    assert options["block_size"] == 4 * 256 * 2**10
    assert chosen is not None and "multiple of 262144 B" in chosen.words()


def test_a_part_size_the_user_set_is_kept_and_named_as_theirs() -> None:
    options, chosen = part_size("s3", {"default_block_size": 64 * MiB}, 16 * MiB)
    assert options == {"default_block_size": 64 * MiB}
    assert chosen is not None and not chosen.chosen
    assert chosen.words() == (
        "upload part size 67.1 MB (s3fs default_block_size), set by --storage-option"
    )


def test_a_filesystem_gets_its_options_as_given() -> None:
    assert part_size("file", {"auto_mkdir": True}, 16 * MiB) == ({"auto_mkdir": True}, None)


def test_the_labels_say_what_each_posix_phase_is_on_s3() -> None:
    store = object_store("s3")
    assert store is not None
    assert store.fsync_words.startswith("fsync not applicable on object store / no fsync")
    assert "copy and delete (s3fs mv: CopyObject then DeleteObject)" in store.commit_words
    assert "atomic commit not qualified" in store.commit_words
    assert "directory fsync not applicable" in store.commit_words
    assert "up to 1000 keys per request (S3 DeleteObjects" in store.batch_delete_words
    assert store.batch_label(2049, 4) == "batch delete, 512 keys per request"
    assert "atomic commit not qualified" in store.caveat()


def test_a_target_on_s3_ties_the_part_and_the_header_says_so(s3: S3Server) -> None:
    target = Target(f"s3://{s3.bucket}/prefix", s3.storage_options, transfer_bytes=8 * MiB)
    try:
        assert target.spec.storage_options["default_block_size"] == 8 * MiB
        assert target.fs.default_block_size == 8 * MiB  # what s3fs's open() will use
        assert target.store is object_store("s3")
        lines = object_store_lines(target)
        assert any("upload part size 8.39 MB (s3fs default_block_size), tied to" in x
                   for x in lines)  # fmt: skip
        assert any(
            x.startswith("object store S3 through s3fs: fsync not applicable") for x in lines
        )
        assert any("atomic commit not qualified" in x for x in lines)
        assert any(x.startswith("no lease protects the target") for x in lines)
    finally:
        target.close()


def test_a_target_on_a_directory_has_no_object_store_lines(
    tmp_path: Path,
) -> None:
    target = Target(str(tmp_path), transfer_bytes=8 * MiB)
    try:
        assert target.store is None and target.part is None
        assert object_store_lines(target) == []
    finally:
        target.close()


def test_a_failed_write_discarded_on_s3_leaves_no_object_and_no_upload(s3: S3Server) -> None:
    """A rank whose write fails mid-file discards its handle (``Writer.discard``): s3fs aborts
    the multipart upload, and nothing commits the partial object later. Closing it instead
    (what the write burst once did on every failure) makes the partial bytes an object."""
    fs = s3fs.S3FileSystem(**s3.storage_options, default_block_size=5 * MiB)
    backend = FsspecBackend(fs)
    path = f"{s3.bucket}/discard/__0_0.distcp"
    handle = backend.create(path)
    backend.write_all(handle, b"x" * (12 * MiB))  # two 5 MiB parts uploaded, 2 MiB buffered
    assert _uploads(fs, s3.bucket, "discard/")  # the upload the failure interrupts
    backend.discard(handle)
    del handle
    gc.collect()  # fsspec files close (and commit) when collected unless discarded
    assert _uploads(fs, s3.bucket, "discard/") == []
    fs.invalidate_cache()
    assert not fs.exists(path)


def _uploads(fs: Any, bucket: str, prefix: str) -> list[str]:
    listed = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
    return [upload["Key"] for upload in listed.get("Uploads", [])]
