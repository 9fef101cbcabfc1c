"""The DCP driver, run for real: 2 gloo ranks on loopback, a ~20M-parameter model, a temp dir.

One rank pool serves the measuring tests (ranks start once, as in the acceptance run); the
failure tests share a second one, which each failure restarts (the ranks join a new group). The full
run (sync save, both async checkpointer types, three verified loads, the flipped byte) is done
once at K = 14; K = 12 and 16 only save and measure. About 35 s on an idle 2-core machine
(75 s measured while other jobs kept the load average at 8).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

pytest.importorskip(
    "torch",
    reason="DCP tests need PyTorch: pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)

from ckptgate.dcp import model as m
from ckptgate.dcp import worker as w
from ckptgate.dcp.driver import DcpConfig, DcpResult, run_dcp
from ckptgate.dcp.ranks import DcpRankFailure, DcpRanks
from ckptgate.dcp.records import DcpStep
from ckptgate.engine.sampler import NodeProgress, ProgressSampler
from tests.dcp.rank_steps import step_die_on, step_hang_on, step_ready

# 20.5M parameters: big enough that DCP's fixed costs (the .metadata pickle, torch.save framing
# per tensor, ~0.7 MB here) stay near 0.03 bytes per parameter, small enough for 2 cores.
ARCH = {"hidden": 512, "ffn_hidden": 1536, "layers": 4, "heads": 8, "kv_heads": 2, "vocab": 8192}
WORLD_SIZE = 2
TINY_ARCH = {"hidden": 64, "ffn_hidden": 128, "layers": 1, "heads": 2, "kv_heads": 1, "vocab": 256}

#: Measured bytes per parameter must be within this of K (the Ks are 2 apart).
K_TOLERANCE = 0.1


@pytest.fixture(scope="module")
def recorded() -> list[NodeProgress]:
    """Every progress snapshot the module's ranks' sampler took (the live line's input)."""
    return []


@pytest.fixture(scope="module")
def ranks(recorded: list[NodeProgress]) -> Iterator[DcpRanks]:
    """Two DCP rank processes for the module, sampled as the session samples its ranks;
    stopped (and only they) at the end."""
    with DcpRanks(WORLD_SIZE, sampler=ProgressSampler(on_sample=recorded.append)) as pool:
        yield pool


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A module directory on tmpfs when there is one (as CI runs it), else under pytest's
    tmp_path; removed, with everything the runs wrote in it, at the end of the module."""
    parent = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(tmp_path_factory.getbasetemp())
    path = tempfile.mkdtemp(prefix="ckptgate-dcp-test-", dir=parent)
    yield path
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def full_run(ranks: DcpRanks, base_dir: str) -> DcpResult:
    """Every step at K = 14."""
    cfg = DcpConfig(ARCH, 14, os.path.join(base_dir, "k14"), world_size=WORLD_SIZE)
    return run_dcp(cfg, ranks=ranks)


def test_parameter_count_follows_the_spec_rule_for_llama3_8b() -> None:
    # Llama 3 8B: 8,030,261,248 parameters (embedding and output head untied).
    arch = m.architecture_from(
        {
            "hidden": 4096,
            "ffn_hidden": 14336,
            "layers": 32,
            "heads": 32,
            "kv_heads": 8,
            "vocab": 128256,
        }
    )
    assert m.parameter_count(arch) == 8_030_261_248


def test_the_tensors_dcp_saves_count_what_sizing_counts() -> None:
    """Two routes to Ψ agree: the DCP model's real tensor shapes and sizing's formula."""
    from ckptgate.sizing import count_parameters, load_profile

    for name in ("7b", "70b", "405b", "tmpfs"):
        profile = load_profile(name)
        for arch in (profile.dcp.architecture, profile.model.architecture):
            if arch is not None and arch.hidden % arch.heads == 0:
                assert m.parameter_count(m.architecture_from(arch)) == count_parameters(arch)


def test_expected_blocks_tile_the_full_tensor() -> None:
    import torch

    full = m.expected_block(7, (6, 10), (0, 0), (6, 10), torch.float32)
    assert torch.equal(m.expected_block(7, (6, 10), (2, 3), (3, 4), torch.float32), full[2:5, 3:7])
    bf16 = m.expected_block(7, (6, 10), (0, 4), (6, 6), torch.bfloat16)
    assert torch.equal(bf16, full[:, 4:].to(torch.bfloat16))


def test_save_writes_a_file_per_rank_and_metadata(full_run: DcpResult) -> None:
    names = [f.name for f in full_run.file_list]
    assert ".metadata" in names
    for rank in range(WORLD_SIZE):
        assert any(n.startswith(f"__{rank}_") and n.endswith(".distcp") for n in names), names
    assert full_run.files == len(names)
    assert all(b > 0 for b in full_run.per_rank_bytes)


@pytest.mark.parametrize("k", [12, 14, 16], ids=lambda k: f"K={k}")
def test_bytes_on_disk_match_k(k: int, full_run: DcpResult, ranks: DcpRanks, base_dir: str) -> None:
    if k == 14:
        result = full_run
    else:
        cfg = DcpConfig(
            ARCH, k, os.path.join(base_dir, f"k{k}"), world_size=WORLD_SIZE, async_types=()
        )
        result = run_dcp(cfg, ranks=ranks, loads=False)
    assert result.matched_k == k
    assert abs(result.bytes_per_parameter - k) <= K_TOLERANCE, result.bytes_per_parameter
    assert result.overhead_bytes == result.bytes_on_disk - k * result.parameters
    assert result.metadata_bytes > 0


def test_async_saves_time_both_checkpointer_types(full_run: DcpResult) -> None:
    kinds = {a.checkpointer: a for a in full_run.async_runs}
    assert set(kinds) == {"thread", "process"}
    for timing in kinds.values():
        assert 0 < timing.block_s <= timing.complete_s
    assert kinds["process"].first_complete_s is not None
    assert full_run.async_block_s == kinds["thread"].block_s


def test_every_load_verifies_exactly(full_run: DcpResult) -> None:
    assert full_run.verified, full_run.mismatches
    assert full_run.reshard_ranks == 1
    for seconds in (full_run.load_s, full_run.reshard_load_s, full_run.single_process_load_s):
        assert math.isfinite(seconds) and seconds > 0


def test_a_flipped_byte_is_caught_and_named(full_run: DcpResult) -> None:
    assert full_run.corruption_detected is True, full_run.corruption_detail
    assert ".distcp" in full_run.corruption_detail


def test_result_json_has_the_report_keys(full_run: DcpResult) -> None:
    out = full_run.to_json()
    for key in (
        "save_s",
        "async_block_s",
        "async_complete_s",
        "load_s",
        "reshard_load_s",
        "single_process_load_s",
        "bytes_on_disk",
        "apparent_bytes",
        "bytes_per_parameter",
        "matched_k",
        "overhead_bytes",
        "files",
        "file_list",
        "parameters",
        "world_size",
        "verified",
    ):
        assert key in out
    json.dumps(out)


def test_a_step_returns_one_typed_record_per_rank(full_run: DcpResult, ranks: DcpRanks) -> None:
    steps = ranks.run(w.step_release, timeout_s=60)
    assert [s.rank for s in steps] == list(range(WORLD_SIZE))
    assert all(isinstance(s, DcpStep) for s in steps)
    assert all(len(r) == WORLD_SIZE for r in (full_run.per_rank_save_s,))


@pytest.fixture(scope="module")
def doomed() -> Iterator[DcpRanks]:
    """Two DCP ranks for the failure tests (each failure restarts them); stopped at the end."""
    with DcpRanks(WORLD_SIZE) as pool:
        yield pool


def test_a_failing_rank_is_named_with_its_step(doomed: DcpRanks, base_dir: str) -> None:
    doomed.run(w.step_build, timeout_s=120, architecture=TINY_ARCH, bytes_per_parameter=12)
    missing = os.path.join(base_dir, "no-such-checkpoint")
    with pytest.raises(DcpRankFailure, match=r"(?s)DCP step 'load'.*: DCP rank [01]: .*no-such-ch"):
        doomed.run(w.step_load, path=missing, timeout_s=120)


def test_a_rank_that_dies_is_named_and_its_peers_stopped(doomed: DcpRanks) -> None:
    """Rank 0 waits at a barrier for rank 1, which died: the collective pool ends the step
    when rank 1's process exits (not at the 600 s deadline, nor gloo's 30 min) and names it."""
    with pytest.raises(DcpRankFailure, match=r"DCP rank 1: died \(exit code 3\)") as failed:
        doomed.run(step_die_on, timeout_s=600, rank=1)
    assert 1 in failed.value.ranks
    assert not failed.value.hung


def test_a_rank_that_hangs_is_named_at_the_deadline(doomed: DcpRanks) -> None:
    """The step's deadline bounds it: rank 1 never returns and is named hung, in its step.
    The ranks restarted after the previous test's failure join a new group first, in a step
    of their own (the restart's torch import is not what the deadline times)."""
    doomed.run(step_ready, timeout_s=120)
    with pytest.raises(
        DcpRankFailure, match=r"DCP rank 1: did not finish within 2 s \(in hang_on"
    ) as failed:
        doomed.run(step_hang_on, timeout_s=2, rank=1)
    assert 1 in failed.value.hung


def test_every_save_and_load_reports_its_bytes_to_the_live_progress(
    full_run: DcpResult, recorded: list[NodeProgress], ranks: DcpRanks
) -> None:
    """Each DCP save and load reaches the sampler as the write burst does: released at a
    common start, its bytes done against a total, ending at that total (a save: the bytes of
    its files; a load: its ranks' read plans, then the blocks they verify); each has a
    bandwidth series."""
    ended = {p.phase: p for p in recorded if not p.running and p.nth == 0}
    files = sum(full_run.per_rank_bytes)
    saves = ["DCP save", "DCP async save (thread)", "DCP async save (process)"]
    for phase in saves:
        last = ended[phase]
        assert last.released and last.bytes == files, (phase, last)
        assert math.isclose(last.total_bytes, files, rel_tol=0.02), (phase, last)
    loads = [f"DCP {load} and verify" for load in ("load", "resharded load", "single-process load")]
    for phase in loads:  # read, then verified: more than the files hold
        last = ended[phase]
        assert last.released and last.bytes == last.total_bytes > files, (phase, last)
    build = ended["DCP build"]
    assert build.bytes == build.total_bytes > 0
    sampler = ranks.pool.sampler
    assert sampler is not None
    series = {s.phase: s for s in sampler.series if s.nth == 0}
    for phase in saves + loads:
        assert series[phase].done_bytes[-1] == ended[phase].bytes, phase
