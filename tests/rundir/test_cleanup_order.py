"""The manifest is the last of a run's things to go: while a directory it lists stays, it stays.

On the Slurm bed, a node whose slurmd died ended the job as NODE_FAIL: node 0 had removed its
files and, with them, its manifest, then waited for the other nodes before removing the
directories, and the wait failed. The run directory stayed with empty ``write/step-*``
directories and no manifest: nothing named it, and ``ckptgate clean`` did not see it.
"""

from __future__ import annotations

from pathlib import Path

from ckptgate.rundir.runs import find_runs
from ckptgate.rundir.target import Target


def _run_with_a_step(tmp_path: Path) -> tuple[Target, str, str]:
    target = Target(str(tmp_path))
    run_dir = target.create_run_dir()
    target.new_dir("write")
    step = target.new_dir("write", "step-1")
    shard = f"{step}/__0_0.distcp"
    target.register([shard])
    Path(shard).write_bytes(b"x")
    return target, run_dir, step


def test_files_removed_but_directories_not_yet_keep_the_manifest(tmp_path: Path) -> None:
    target, run_dir, step = _run_with_a_step(tmp_path)
    target.cleanup(directories=False)  # node 0's first phase; the barrier after it fails
    assert list(Path(run_dir).glob(".ckptgate-manifest.node0.jsonl"))
    assert Path(step).is_dir() and not list(Path(step).iterdir())
    (found,) = find_runs(str(tmp_path))  # what the next run and ckptgate clean look at
    assert found.run_dir == run_dir
    (manifest,) = found.manifests
    assert set(manifest.dirs) == {".", "write", "write/step-1"}  # what ckptgate clean removes


def test_the_directory_phase_after_the_files_phase_removes_everything(tmp_path: Path) -> None:
    target, _, _ = _run_with_a_step(tmp_path)
    target.cleanup(directories=False)
    report = target.cleanup(files=False)
    assert (report.removed_dirs, report.left, report.unremovable) == (3, [], [])
    assert list(tmp_path.iterdir()) == []


def test_a_directory_still_holding_another_nodes_file_keeps_the_manifest(tmp_path: Path) -> None:
    target, run_dir, step = _run_with_a_step(tmp_path)
    Path(step, "__1_0.distcp").write_bytes(b"a killed node's shard")
    report = target.cleanup()
    assert step in report.left
    assert list(Path(run_dir).glob(".ckptgate-manifest.node0.jsonl"))
    assert Path(step, "__1_0.distcp").exists()


def test_a_directory_another_node_removed_first_counts_as_gone(tmp_path: Path) -> None:
    """Node 1 registers the shared step directories too and removes them before node 0 does:
    node 0 found them missing, kept them as still to remove, and so kept its manifest and
    the run directory (a two-node run left its run directory behind)."""
    target, _, step = _run_with_a_step(tmp_path)
    target.cleanup(directories=False)
    Path(step).rmdir()  # another node's directory phase
    report = target.cleanup(files=False)
    assert (report.left, report.unremovable) == ([], [])
    assert list(tmp_path.iterdir()) == []


def test_another_nodes_manifest_goes_after_its_directory_phase(tmp_path: Path) -> None:
    """Node 1's directories still held node 0's (removed last, by node 0): node 1 kept its
    manifest and lease, and a two-node run left its run directory behind."""
    owner, run_dir, _ = _run_with_a_step(tmp_path)
    other = Target(str(tmp_path))
    other.adopt_run_dir(run_dir, node=1, run_id=1, nodes=2)
    other.new_dir("write")
    other.cleanup(directories=False)
    assert Path(run_dir, ".ckptgate-manifest.node1.jsonl").exists()  # until its own try
    owner.cleanup(directories=False)
    other.cleanup(files=False)  # write/ still holds node 0's step-1: node 0's to remove
    assert not Path(run_dir, ".ckptgate-manifest.node1.jsonl").exists()
    owner.cleanup(files=False)
    assert list(tmp_path.iterdir()) == []


def test_node_0_keeps_its_part_while_a_killed_nodes_part_stays(tmp_path: Path) -> None:
    """CI's Slurm bed: node 0 removed its own files and its part, then found the run directory
    not empty (a node still cleaning, or killed): the run directory stayed without node 0's
    part, which names the node count ``ckptgate clean`` reads the other parts by."""
    target, run_dir, _ = _run_with_a_step(tmp_path)
    other = Path(run_dir, ".ckptgate-manifest.node1.jsonl")
    other.write_bytes(b'{"kind": "run"}\n')
    report = target.cleanup()
    assert report.left == [run_dir]
    assert Path(run_dir, ".ckptgate-manifest.node0.jsonl").exists()
    assert other.exists()


def test_with_only_its_own_part_left_node_0_removes_the_run_directory(tmp_path: Path) -> None:
    target, _, _ = _run_with_a_step(tmp_path)
    report = target.cleanup()
    assert report.left == [] and list(tmp_path.iterdir()) == []
