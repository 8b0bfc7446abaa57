"""A recomputed ``moe`` module syncs with the host again: Megatron-Core's MoELayer with ``"moe"`` in
``recompute_modules`` checkpoints its whole forward (router, dispatch, experts, shared experts, combine:
NVIDIA/Megatron-LM@00119989 megatron/core/transformer/moe/moe_layer.py ``MoELayer.forward``), so in the backward a
dropless router hands its tokens per expert to the host again (the device-to-host sync of Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization sec. 2.3) before the experts' GEMMs are launched, and the GPU waits
for the host's launches of that forward beyond its own time, as in the forward pass. Nemotron 3 Nano's H100 FP8
recipe recomputes ``moe`` eagerly (Megatron-Bridge NEMOTRON_3_NANO_PRETRAIN_CONFIG_H100_FP8_CS_V1,
zidanehuang001/Megatron-Bridge@8e0fe90)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import MOE_MODULE, block_ops, host_launch_s, op_time_s, stage_compute
from topo.training.parallel import make_layout

NANO_H100 = dict(tp=1, ep=8, dp=16, micro_batch=1, global_batch=1024, seq_len=8192, precision="fp8", etp=1,
                 moe_imbalance=1.0)
# exact balance: at a uniform router's expected busiest-rank load (1.008 x the mean) this forward is 0.8% GPU-bound
# (host 3.15 ms, GPU 3.18 ms), and the test is of the recomputed forward's host wait, which needs a host-bound one


def _moe_forward_host_and_gpu_s(model, lay, gpu):
    """The MoELayer forward's host launch seconds and GPU seconds, from its operators (one MoE block)."""
    ops = [op for op in block_ops(model, lay, "E") if op.module in MOE_MODULE and op.passes != "backward"]
    host = sum(host_launch_s(op, gpu, precision=lay.precision) for op in ops)
    return host, sum(op_time_s(op, gpu, lay.precision) for op in ops)


def test_recomputed_moe_module_waits_for_the_host_in_the_backward():
    """Nano (23 MoE layers, one stage): recomputing ``moe`` adds to each micro-batch's backward, per MoE layer, the
    host's launches of the MoELayer forward minus that forward's GPU time (eager, 8 local experts launched one
    by one) and the replayed sync's round trip (``sync_s``); the other recomputed modules add no wait. At the top of
    the host's published 5-20 us a launch, every kernel priced as a call (the kernels Transformer Engine's C++ launches
    in a loop cost less, ``launch_calls``, and leave this forward GPU-bound: a mechanism test needs a host-bound one). The permutation is
    priced here as a contiguous copy (90% of HBM): at the permute kernels' measured rates (kernels.toml
    ``permute_TBps``) the forward is GPU-bound (host 3.30 ms, GPU 3.69 ms) and has no wait to test."""
    contiguous = {"permute_TBps": 0.9 * 4.8, "unpermute_TBps": 0.9 * 4.8}  # 90% of the measuring H200's 4.8 TB/s
    nano = load_model("nemotron-3-nano-30b-a3b")
    every = {"host_s": 2e-5, "cpp_launch_s": 2e-5, "cpp_gemm_s": 2e-5,  # a kernel from C++ priced as a call,
             "torch_py_op_s": 0.0, "torch_cpp_op_s": 0.0}  # no per-expert module work (operators.expert_host_s)
    gpu = gpu_compute("H100", overrides={"launch": every, "memory": contiguous})
    others = ("layernorm", "core_attn", "moe_act")
    base = stage_compute(nano, make_layout(**NANO_H100, recompute_modules=others), gpu)
    lay = make_layout(**NANO_H100, recompute_modules=("moe", *others))
    moe = stage_compute(nano, lay, gpu)
    host, gpu_s = _moe_forward_host_and_gpu_s(nano, lay, gpu)
    assert host > gpu_s  # the eager MoE forward is host-bound on H100
    assert moe.backward_s - base.backward_s == pytest.approx(23 * (host - gpu_s + gpu.kernels.sync_s), rel=1e-9)
    assert moe.forward_s == pytest.approx(base.forward_s, rel=1e-12)
    plain = stage_compute(nano, make_layout(**NANO_H100), gpu)
    assert base.backward_s == pytest.approx(plain.backward_s, rel=1e-12)


def test_no_sync_no_recomputed_wait():
    """A padded router (capacity factor) or a full-iteration CUDA graph has no device-to-host sync: recomputing
    ``moe`` then adds no host wait to the backward."""
    nano, gpu = load_model("nemotron-3-nano-30b-a3b"), gpu_compute("H100")
    for kw in ({"moe_capacity_factor": 1.0}, {"cuda_graph_scope": ("full_iteration",)}):
        with_moe = stage_compute(nano, make_layout(**NANO_H100, recompute_modules=("moe",), **kw), gpu)
        without = stage_compute(nano, make_layout(**NANO_H100, **kw), gpu)
        assert with_moe.backward_s == pytest.approx(without.backward_s, rel=1e-12)
