"""What a GPU holds per parameter with ``fp8_param_gather`` (wlk57; walk20's leftover: weights stayed 2 B/param).

Megatron-Core keeps the layers' weights as Transformer Engine quantized tensors, no BF16 copy
(NVIDIA/Megatron-LM@d98e8a64 megatron/core/distributed/distributed_data_parallel_config.py:78-80; the param buffer
holds them as uint8, param_and_grad_buffer.py:919-923), and after each gather TE keeps what the backward reads
(megatron/core/fp8_utils.py:687-707 -> NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/tensor/utils.py
:1422-1436): a per-tensor Float8Tensor its 1-byte transpose where the GPU has no non-TN FP8 GEMM (Hopper;
utils.py:658-663: compute capability 10.x, Blackwell, has them), a blockwise tensor its column-wise copy (plus one fp32
scale per 128 x 128 block and direction), an MXFP8 tensor both directions (plus one E8M0 byte per 32 elements and
direction). So per layer parameter: 1 + 1 on Hopper, 1 on Blackwell, 2 + 8 / 16,384 blockwise, 2 + 2 / 32 MXFP8;
what is not a linear's weight (the embedding, the untied output layer, the norms: small29,
``topo.training.unit_params.unit_bf16_params``) stays at ``weight_bytes`` (2).

Llama 3 8B at tp 1, dp 8, ZeRO-1: n parameters, ends = 2 x 128,256 x 4,096 + 4,096 + 32 x 2 x 4,096 (the two tables,
the final norm and the 32 layers' two norms, as tests/test_training_fp8_param_gather.py counts them; vocab 128,256 from Meta's config.json,
https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json: vocab_size 128256), every weight on each GPU."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from topo.training.fp8_params import fp8_param_bytes
from topo.training.memory import memory_per_gpu, stage_params, state_convention
from topo.training.model import load_model
from topo.training.parallel import make_layout

M = load_model("llama3-8b")
ENDS = 2 * 128_256 * 4_096 + 4_096 + 32 * 2 * 4_096
KW = dict(tp=1, dp=8, global_batch=64, seq_len=8192, precision="fp8")


def _weights(generation, **kw):
    return memory_per_gpu(M, make_layout(**{**KW, **kw}), 200e9, generation=generation).weights_bytes


@pytest.mark.parametrize("recipe, generation, per_layer_param", [
    (None, "hopper", 2.0), ("delayed", "hopper", 2.0), ("current", "hopper", 2.0),
    (None, "blackwell", 1.0), ("current", "blackwell", 1.0),
    ("blockwise", "hopper", 2 + 2 * 4 / (128 * 128)),
    ("mxfp8", "blackwell", 2 + 2 / 32),
    ("blockwise", "blackwell", 2 + 2 * 4 / (128 * 128)),  # tidy71: TE keeps the blockwise tensor there (MXFP8 GEMMs only)
    (None, None, 2.0),  # the GPU unknown: the transpose counted
])
def test_the_layers_weights_at_their_kept_bytes_the_ends_at_two(recipe, generation, per_layer_param):
    (dense, expert, _), = stage_params(M, make_layout(**KW))
    n = dense + expert
    assert 7.9e9 < n < 8.1e9  # Llama 3 8B: 8.03B parameters (Meta's model card)
    assert fp8_param_bytes(make_layout(**KW, fp8_recipe=recipe), generation) == pytest.approx(per_layer_param)
    on = _weights(generation, fp8_recipe=recipe, fp8_param_gather=True)
    assert on == pytest.approx((n - ENDS) * per_layer_param + ENDS * 2, rel=1e-12)
    assert _weights(generation, fp8_recipe=recipe) == pytest.approx(2 * n, rel=1e-12)  # BF16 weights without it


def test_zero3_keeps_its_sharded_weights_as_before():
    """Under ZeRO-3 the weights are sharded and gathered per unit (Megatron-FSDP's own FP8 path): unchanged here."""
    kw = dict(fp8_param_gather=True, dp_sharding="zero3")
    assert _weights("blackwell", **kw) == _weights("blackwell", dp_sharding="zero3")


def test_the_memory_line_says_the_weights_are_fp8():
    assert state_convention(make_layout(**KW, fp8_param_gather=True)).endswith(
        "; the layers' weights in FP8 instead (fp8_param_gather: no BF16 copy)")
    assert "FP8" not in state_convention(make_layout(**KW))


def test_the_step_prices_the_gpu_it_runs_on():
    """topo train on GB200 (Blackwell): Llama 3 8B at tp 1 dp 8 on one NVL72 rack, 1 byte a layer parameter."""
    out = run_cli("train", "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--precision", "fp8", "--json",
                  "--layout", "global_batch=64,seq_len=8192,fp8_param_gather=true", "gb200-nvl72-superpod",
                  check=True)
    mem = json.loads(out.stdout)["memory"]
    (dense, expert, _), = stage_params(M, make_layout(**KW))
    assert mem["weights_bytes"] == pytest.approx((dense + expert - ENDS) * 1 + ENDS * 2, abs=1)
