"""The real checkpoint the realistic payload is calibrated on (issue 53): a small model trained
a few hundred steps on CPU with AdamW, its state saved with PyTorch DCP the way a mixed-precision
job keeps it (bf16 weights, fp32 master weights, fp32 Adam moments).

``ckptgate.engine.realistic`` holds, per kind of tensor, the distribution of each value's top 9
bits (sign and exponent) measured here; ``tests/dcp/test_realistic_payload.py`` makes the save
again and holds the realistic payload's zstd and lz4 ratios within 5 % of it. Run as a script,
this module prints the tables to paste into ``ckptgate/engine/realistic.py``::

    python -m tests.dcp.payload_calibration
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

STEPS = 200
SEED = 0
VOCAB, WIDTH, CONTEXT, HIDDEN = 2048, 96, 8, 384


def trained_state() -> dict[str, Any]:
    """The model's and the optimiser's state after ``STEPS`` of AdamW on a toy task, as a
    mixed-precision job checkpoints it: ``bf16`` weights, ``master`` fp32 weights, and the
    fp32 moments ``exp_avg`` and ``exp_avg_sq``, each a flat list of tensors."""
    import torch

    torch.manual_seed(SEED)
    model = torch.nn.Sequential(
        torch.nn.Embedding(VOCAB, WIDTH),
        torch.nn.Flatten(),
        torch.nn.Linear(WIDTH * CONTEXT, HIDDEN),
        torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, VOCAB),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(SEED)
    for _ in range(STEPS):
        tokens = torch.randint(0, VOCAB, (32, CONTEXT), generator=generator)
        labels = (tokens.sum(1) * 7) % VOCAB
        loss = torch.nn.functional.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    moments = list(optimizer.state_dict()["state"].values())
    return {
        "bf16": [p.detach().to(torch.bfloat16) for p in model.parameters()],
        "master": [p.detach().clone() for p in model.parameters()],
        "exp_avg": [m["exp_avg"] for m in moments],
        "exp_avg_sq": [m["exp_avg_sq"] for m in moments],
    }


def save_with_dcp(state: dict[str, Any], directory: Path) -> list[Path]:
    """``state`` saved by PyTorch DCP's ``save`` into ``directory`` (one process, no process
    group); the files it wrote, ``.metadata`` included."""
    import torch.distributed.checkpoint as dcp

    flat = {f"{kind}.{i}": t for kind, tensors in state.items() for i, t in enumerate(tensors)}
    with warnings.catch_warnings():
        # DCP says it assumes one process where no process group exists: that is the intent
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        dcp.save(flat, storage_writer=dcp.FileSystemWriter(str(directory)))
    return sorted(p for p in directory.iterdir() if p.is_file())


def top9_table(tensors: list[Any]) -> list[tuple[int, float]]:
    """The distribution of the values' top 9 bits (sign and 8 exponent bits), largest first."""
    values = np.concatenate([t.detach().float().numpy().ravel() for t in tensors])
    top = values.view(np.uint32) >> np.uint32(23)
    found, counts = np.unique(top, return_counts=True)
    order = np.argsort(-counts)
    total = counts.sum()
    return [(int(found[i]), round(float(counts[i] / total), 6)) for i in order]


if __name__ == "__main__":
    trained = trained_state()
    for kind in ("master", "exp_avg", "exp_avg_sq"):
        print(f"    {kind!r}: {tuple(top9_table(trained[kind]))},")
