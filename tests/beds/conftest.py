"""The beds' fixtures, for the tests in this folder (elsewhere, import them from the bed)."""

from tests.beds.faultfs import faultfs_mount

__all__ = ["faultfs_mount"]
