"""Megatron-Core's unfused vocab-parallel cross-entropy (``cross_entropy = "megatron_unfused"``): what
``compute_language_model_loss`` runs without ``--cross-entropy-loss-fusion`` (NVIDIA/Megatron-LM@00611e6e
``megatron/core/tensor_parallel/cross_entropy.py``), counted pass by pass."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import MEGATRON_UNFUSED_CROSS_ENTROPY_BYTES, block_ops, op_time_s
from topo.training.parallel import make_layout


def _logits_ops(cross_entropy, tp=2):
    model = load_model("qwen3-235b-a22b")
    lay = make_layout(tp=tp, dp=4, ep=8, global_batch=32, micro_batch=1, seq_len=4096, cross_entropy=cross_entropy)
    return model, lay, {o.name: o for o in block_ops(model, lay, "logits")}


def test_the_unfused_loss_moves_the_fp32_logits_pass_by_pass():
    # forward: .float() (2 read + 4 written), max (4), in-place -= max (4 + 4), exp(out=) (4 + 4), sum (4),
    # div_ (4 + 4); backward: mul_ by the loss gradient (4 + 4), the cast back to bf16 (4 + 2)
    fwd_bytes = (2 + 4) + 4 + (4 + 4) + (4 + 4) + 4 + (4 + 4)
    bwd_bytes = (4 + 4) + (4 + 2)
    assert MEGATRON_UNFUSED_CROSS_ENTROPY_BYTES == ((fwd_bytes, 6), (bwd_bytes, 2))
    model, lay, ops = _logits_ops("megatron_unfused")
    logits = 4096 * model.vocab / 2  # one micro-batch's tokens x the rank's share of the vocabulary (TP 2)
    assert ops["cross_entropy"].bytes == pytest.approx(38 * logits)
    assert ops["cross_entropy_bwd"].bytes == pytest.approx(14 * logits)
    gpu = gpu_compute("H100")
    km = gpu.kernels
    fwd = op_time_s(ops["cross_entropy"], gpu, "bf16")
    bwd = op_time_s(ops["cross_entropy_bwd"], gpu, "bf16", backward=True)
    assert fwd == pytest.approx(memory_s(km, 38 * logits) + 6 * km.launch_gpu_s)
    assert bwd == pytest.approx(memory_s(km, 14 * logits) + 2 * km.launch_gpu_s)
    assert op_time_s(ops["cross_entropy"], gpu, "bf16", backward=True) == 0.0  # each a pass of its own
    assert op_time_s(ops["cross_entropy_bwd"], gpu, "bf16") == 0.0


def test_the_unfused_loss_costs_more_than_the_fused_one():
    # the fused path reads the bf16 logits once a pass (10 bytes a logit forward, twice that backward): 30 against 52
    gpu = gpu_compute("H100")
    _, _, fused = _logits_ops("fused")
    _, _, unfused = _logits_ops("megatron_unfused")
    t_fused = op_time_s(fused["cross_entropy"], gpu, "bf16") + op_time_s(fused["cross_entropy"], gpu, "bf16",
                                                                          backward=True)
    t_unfused = (op_time_s(unfused["cross_entropy"], gpu, "bf16")
                 + op_time_s(unfused["cross_entropy_bwd"], gpu, "bf16", backward=True))
    assert t_unfused / t_fused == pytest.approx(52 / 30, rel=0.02)
    # the logits GEMM and the final norm are the same either way
    assert op_time_s(fused["logits"], gpu, "bf16") == op_time_s(unfused["logits"], gpu, "bf16")
