"""Test beds: environments that misbehave on purpose, for testing the suite under faults.

Every test in this folder is marked ``beds`` (the bed tier: ``pytest -m beds``; the fast tier is
``pytest -m "not beds"``), and with a marker for each bed it builds (``pytest -m ceph``), read
from the bed modules its module imports (``tests/beds/conftest.py``).

A bed that cannot run here skips its test with one line naming what is missing
(``bed_missing``), except for the beds named in ``$CKPTGATE_BEDS_REQUIRED`` (CI sets it to the
beds whose packages it installed), where the same line fails the test: a bed that skipped
itself proves nothing.
"""

import os
from typing import NoReturn

import pytest

REQUIRED_ENV = "CKPTGATE_BEDS_REQUIRED"
"""Space-separated bed markers that must run (``fuse hosts ceph slurm gluster moosefs``), or
unset."""


def bed_missing(marker: str, reason: str) -> NoReturn:
    """Skip the calling test, naming what the bed ``marker`` lacks; fail it instead where the
    bed is required (``$CKPTGATE_BEDS_REQUIRED``)."""
    if marker in os.environ.get(REQUIRED_ENV, "").split():
        pytest.fail(f"{reason} ({REQUIRED_ENV} names the {marker} bed: it must run here)")
    pytest.skip(reason)


BED_MARKERS: dict[str, tuple[str, str]] = {
    # bed module (tests/beds/<module>.py) -> (marker, help text)
    "faultfs": ("fuse", "builds the fault-injecting FUSE bed (tests/beds/faultfs.py: fuse3)"),
    "hosts": (
        "hosts",
        "builds the host bed: network namespaces on a bridge, sshfs, MPI (tests/beds/hosts.py)",
    ),
    "ceph": (
        "ceph",
        "builds the Ceph bed: CephFS through ceph-fuse and RADOS Gateway's S3 on the host bed "
        "(tests/beds/ceph.py)",
    ),
    "slurm": (
        "slurm",
        "builds the Slurm bed: slurmctld and slurmds on the host bed (tests/beds/slurm.py)",
    ),
    "gluster": (
        "gluster",
        "builds the GlusterFS bed: glusterd, its bricks and the glusterfs FUSE client on the "
        "host bed (tests/beds/gluster.py)",
    ),
    "moosefs": (
        "moosefs",
        "builds the MooseFS bed: mfsmaster, two mfschunkservers and mfsmount on the host bed "
        "(tests/beds/moosefs.py)",
    ),
}
"""One marker per bed, by the module that builds it."""

BEDS_MARKER = "beds"
BEDS_HELP = (
    "needs a test bed (tests/beds: FUSE, host namespaces, Ceph, RGW, Slurm, GlusterFS, MooseFS; "
    "root and Debian packages, skipped naming what is missing): the bed tier, pytest -m beds"
)
