"""The DCP layout model held to real DCP saves at every world size from 1 to 8 (issue 35).

Real ``dcp.save`` runs of the suite's DCP state at K = 14 (gloo ranks on loopback), FSDP-style
``Shard(0)`` DTensors and replicated plain tensors, on a multi-head and a grouped-query shape
whose row counts do not divide by most world sizes (torch.chunk leaves the last ranks short or
empty), each with untied and tied embeddings, at thread counts 1 to 8: the model
(``sizing.dcp_plan``) and the scaled plan the profiles use (``sizing.dcp_scale``) must give
every file's bytes exactly, or the test names each world size, layout, shape, thread count,
file and difference. test_plan_fidelity.py holds the same at two world sizes in the fast tier;
this one is ``slow`` (about 130 s on 2 cores: 36 rank processes start, 1,024 saves).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip(
    "torch",
    reason="DCP tests need PyTorch: pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)

from ckptgate.dcp import worker as w
from ckptgate.dcp.model import architecture_from
from ckptgate.dcp.ranks import DcpRanks
from ckptgate.sizing.dcp_plan import dcp_save_layout
from ckptgate.sizing.dcp_scale import dcp_rank_file_bytes
from tests.dcp.rank_steps import saved_files

pytestmark = pytest.mark.slow

K = 14
MHA = {"hidden": 64, "ffn_hidden": 160, "layers": 2, "heads": 4, "kv_heads": 4, "vocab": 250}
GQA = {"hidden": 48, "ffn_hidden": 128, "layers": 3, "heads": 6, "kv_heads": 2, "vocab": 301}
SHAPES: dict[str, dict[str, int | bool]] = {
    "mha": MHA,
    "gqa": GQA,
    "mha-tied": {**MHA, "tied_embeddings": True},
    "gqa-tied": {**GQA, "tied_embeddings": True},
}
"""Dense multi-head attention and grouped-query attention, each with its head untied and tied
to the embedding; vocabularies 250 and 301 and FFN rows 160 and 128 leave torch.chunk's pieces
uneven at most world sizes."""
LAYOUTS = {"fsdp": "rows", "replicated": "replicated"}
"""The model's layout name -> the DCP state's build layout."""
WORLD_SIZES = range(1, 9)
THREAD_COUNTS = range(1, 9)

Key = tuple[int, str, str, int]
"""(world size, layout, shape, thread count)."""


@pytest.fixture(scope="module")
def saves() -> Iterator[dict[Key, dict[str, int]]]:
    """Every save's {file name: bytes}, made in a tmpfs directory removed at the end; each
    rank pool is stopped before the next starts."""
    parent = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    base = tempfile.mkdtemp(prefix="ckptgate-dcp-every-w-", dir=parent)
    out: dict[Key, dict[str, int]] = {}
    try:
        for world_size in WORLD_SIZES:
            with DcpRanks(world_size) as pool:
                for layout, build in LAYOUTS.items():
                    for shape, arch in SHAPES.items():
                        pool.run(w.step_build, architecture=arch, bytes_per_parameter=K,
                                 layout=build)  # fmt: skip
                        for threads in THREAD_COUNTS:
                            path = os.path.join(base, f"w{world_size}-{layout}-{shape}-t{threads}")
                            key = (world_size, layout, shape, threads)
                            out[key] = saved_files(pool, path, threads)
        yield out
    finally:
        shutil.rmtree(base)


def _differences(real: dict[str, int], model: dict[str, int]) -> list[str]:
    """One line per file whose bytes differ, or that only one side names."""
    return [
        f"{name}: real {real.get(name)} B, model {model.get(name)} B"
        for name in sorted(real.keys() | model.keys())
        if real.get(name) != model.get(name)
    ]


def _wrong(saves: dict[Key, dict[str, int]], files: Callable[..., dict[str, int]]) -> list[str]:
    """Every file, of every save, whose bytes ``files(arch, K, world_size, threads, layout)``
    does not give exactly."""
    wrong = []
    for (world_size, layout, shape, threads), real in saves.items():
        arch = architecture_from(SHAPES[shape])
        for line in _differences(real, files(arch, K, world_size, threads, layout)):
            wrong.append(f"W={world_size} {layout} {shape} thread_count={threads}: {line}")
    return wrong


def _scaled_files(*plan: Any) -> dict[str, int]:
    """``sizing.dcp_scale``'s files by name."""
    return {
        f"__{rank}_{i}.distcp": size
        for rank, sizes in enumerate(dcp_rank_file_bytes(*plan))
        for i, size in enumerate(sizes)
    }


def test_the_model_gives_every_file_of_every_real_save_exactly(
    saves: dict[Key, dict[str, int]],
) -> None:
    assert len(saves) == len(WORLD_SIZES) * len(LAYOUTS) * len(SHAPES) * len(THREAD_COUNTS)
    wrong = _wrong(saves, lambda *plan: dcp_save_layout(*plan).files)
    assert not wrong, "\n".join(wrong[:40])


def test_the_scaled_plan_the_profiles_use_gives_every_file_exactly(
    saves: dict[Key, dict[str, int]],
) -> None:
    """``sizing.dcp_scale``: what ``cluster.layout.writer: dcp`` sizes and the burst writes."""
    wrong = _wrong(saves, _scaled_files)
    assert not wrong, "\n".join(wrong[:40])
