"""A tied head (``model.architecture.tied_embeddings``) as a real model and DCP hold it.

A real ``nn.Module`` with the suite's parameter names and its head tied to the embedding,
trained one AdamW step, gives ``get_state_dict(model, optimizer)`` (torch 2.13): the model's
state lists the tied weight under both names, the optimizer's state and param group once. The
suite's DCP state (``dcp.model.build_state``) must list the same keys in the same order, the
copy holding the embedding's values; the sizing counts Ψ once and the DCP plan the copy's bytes.
Real saves of tied shapes: tests/dcp/test_plan_every_world_size.py (slow).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip(
    "torch",
    reason="DCP tests need PyTorch: pip install 'ckptgate[torch]' (the CPU build torch==2.13.0)",
)

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict

from ckptgate.dcp.model import architecture_from, build_state
from ckptgate.sizing import load_profile
from ckptgate.sizing.architecture import Architecture, count_parameters, parameter_shapes
from ckptgate.sizing.dcp_plan import (
    dcp_save_layout,
    names_entry_bytes,
    tied_copy_bytes,
    torch_save_bytes,
)
from ckptgate.sizing.reader import ProfileError
from ckptgate.sizing.schema import Profile
from ckptgate.sizing.shards import shard_distribution

SHAPE = {"hidden": 32, "ffn_hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "vocab": 97}


def real_model(arch: Architecture) -> nn.Module:
    """A module tree with the suite's parameter names (torchtitan's Llama), in model order, the
    output head's weight the embedding's own Parameter where tied."""
    root = nn.Module()
    for fqn, shape in parameter_shapes(arch).items():
        *path, leaf = fqn.split(".")
        module = root
        for part in path:
            if not hasattr(module, part):
                module.add_module(part, nn.Module())
            module = getattr(module, part)
        module.register_parameter(leaf, nn.Parameter(torch.zeros(shape)))
    if arch.tied_embeddings:
        output, embedding = nn.Module(), root.get_parameter("tok_embeddings.weight")
        output.register_parameter("weight", embedding)
        root.add_module("output", output)
    return root


def trained_state(arch: Architecture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``get_state_dict`` of the real model after one AdamW step (the state exists then)."""
    model = real_model(arch)
    optimizer = torch.optim.AdamW(model.parameters())
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    return get_state_dict(model, optimizer)


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_the_suites_state_lists_what_a_real_models_get_state_dict_lists(tied: bool) -> None:
    arch = architecture_from({**SHAPE, "tied_embeddings": tied})
    model_state, optim_state = trained_state(arch)
    suite = build_state(arch, 12, fill=True)
    assert list(suite["model"]) == list(model_state)
    assert list(suite["optim"]["state"]) == list(optim_state["state"])
    assert suite["optim"]["param_groups"][0]["params"] == optim_state["param_groups"][0]["params"]
    for name, tensor in model_state.items():
        assert tuple(suite["model"][name].shape) == tuple(tensor.shape), name
    if tied:
        assert "output.weight" in model_state and "output.weight" not in optim_state["state"]
        assert torch.equal(suite["model"]["output.weight"], suite["model"]["tok_embeddings.weight"])


def test_a_tied_head_is_counted_once_and_saved_twice() -> None:
    untied = architecture_from(SHAPE)
    tied = architecture_from({**SHAPE, "tied_embeddings": True})
    head = SHAPE["vocab"] * SHAPE["hidden"]
    assert count_parameters(untied) - count_parameters(tied) == head
    assert tied_copy_bytes(tied, 12) == 4 * head and tied_copy_bytes(tied, 14) == 2 * head
    assert tied_copy_bytes(untied, 14) == 0
    files = dcp_save_layout(tied, 14, 1, 1, "replicated").files["__0_0.distcp"]
    untied_files = dcp_save_layout(untied, 14, 1, 1, "replicated").files["__0_0.distcp"]
    # gone: the head's optimizer state (step, exp_avg, exp_avg_sq and the fp32 master at
    # K = 14, each a torch.save) and its name in the param group; its bf16 weight stays, under
    # output.weight
    names = names_entry_bytes(list(parameter_shapes(untied)))
    names -= names_entry_bytes(list(parameter_shapes(tied)))
    assert untied_files - files == torch_save_bytes(4) + 3 * torch_save_bytes(4 * head) + names


def _tied_profile(*extra: str) -> Profile:
    shape = ", ".join(f"{k}: {v}" for k, v in SHAPE.items())
    return load_profile("tmpfs", [
        "model.parameters=", f"model.architecture={{{shape}, tied_embeddings: true}}", *extra,
    ])  # fmt: skip


def test_a_tied_head_under_megatrons_layout_is_refused_naming_both_keys() -> None:
    with pytest.raises(ProfileError) as refused:
        _tied_profile()
    said = str(refused.value)
    assert "model.architecture.tied_embeddings = True" in said
    assert "cluster.layout.writer: megatron" in said and "cluster.layout.writer: dcp" in said


def test_a_tied_dcp_profile_sizes_the_copy_in_words() -> None:
    profile = _tied_profile(
        "cluster.layout.writer=dcp", "cluster.gpus=2", "cluster.gpus_per_node=2",
        "cluster.parallelism={tp: 1, pp: 1, dp: 2, zero_stage: 3}",
    )  # fmt: skip
    distribution = shard_distribution(profile)
    head = SHAPE["vocab"] * SHAPE["hidden"]
    assert profile.parameters == count_parameters(
        architecture_from({**SHAPE, "tied_embeddings": True})
    )
    assert distribution.tied_copy_bytes == 2 * head  # bf16 at the profile's K = 14
    assert "the tied head's second copy" in distribution.written_parts()
