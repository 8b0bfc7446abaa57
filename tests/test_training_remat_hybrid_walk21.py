"""A MaxText remat policy on a hybrid Mamba-2 model says what it leaves of the Mamba-2 layers (walk21).

A policy (topo/data/compute/remat_policies.toml, from MaxText's ``get_remat_policy``) is a set of the names MaxText's
attention and MLP code gives its tensors; topo turns it into recomputed attention and MLP modules and keeps a Mamba-2
layer's activations whole, which MaxText, having no Mamba-2 layer, cannot confirm or deny. The header said only
``remat save_qkv_proj``; full recomputation (every layer's input only) covers the Mamba-2 layers and says nothing.
"""

import pytest

from conftest import run_cli

ARGS = ("--model", "nemotron-h-56b", "--gpus", "64", "--global-batch", "64", "--jax-mesh", "ici_fsdp=8,dcn_data=8")


@pytest.mark.parametrize("policy", ["save_qkv_proj", "minimal"])
def test_a_named_policy_on_a_hybrid_says_the_mamba_layers_keep_their_activations(policy):
    head = run_cli("train", "dgx-h100-superpod", *ARGS, "--remat-policy", policy).stdout.splitlines()
    line = next(x for x in head if x.startswith("nemotron-h-56b on"))
    assert (f"remat {policy} (names MaxText's attention and MLP tensors; the 54 Mamba-2 layers keep every "
            f"activation") in line  # 54 M of the 118-layer pattern (topo/data/models/nemotron-h-56b.toml)


def test_full_remat_and_a_model_without_mamba_say_the_policy_alone():
    head = run_cli("train", "dgx-h100-superpod", *ARGS, "--remat-policy", "full").stdout
    assert "remat full, " in head and "Mamba-2 layers keep" not in head
    dense = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64",
                    "--jax-mesh", "ici_fsdp=8,dcn_data=8", "--remat-policy", "minimal").stdout
    assert "remat minimal, " in dense
