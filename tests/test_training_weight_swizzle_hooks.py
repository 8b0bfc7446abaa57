"""The MXFP8 weight-scale swizzle every fprop / dgrad GEMM call runs (Transformer Engine ``gemm.cpp``) and
Megatron-Core DDP's per-parameter backward hook: counts in closed form, their GPU bytes and host prices.

Sources (``topo/data/compute/mxfp8_weight_swizzle.toml``, ``megatron_ddp_grad_hook.toml``):
NVIDIA/TransformerEngine v2.12 5671fd36, v2.14 f031cf87, v2.16 4220403e ``pytorch/csrc/extensions/gemm.cpp``
(``te_general_grouped_gemm``: ``multi_tensor_swizzle_scales_for_gemm(te_A_wrappers, ...)``, lines 544-547 at v2.14;
``gemm``: ``swizzle_scales_for_gemm(A_tensor, ...)``, lines 281-282), ``swizzle.cpp`` (one
``nvte_multi_tensor_swizzle_scaling_factors`` / ``nvte_swizzle_scaling_factors`` launch and one ``allocateSpace``);
NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/distributed/distributed_data_parallel.py`` ``_make_backward_post_hook``.
"""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.grad_hooks import grad_hook_host_s, hook_python_calls
from topo.training.kernels import memory_s, quantize_kernels
from topo.training.model import load_model
from topo.training.operators import block_ops, host_launch_s, kernels_launched, launch_calls, op_time_s
from topo.training.parallel import make_layout
from topo.training.weight_swizzle import swizzle_bytes, weight_swizzles


def _ops(kind="E", model="qwen3-30b-a3b", **kw):
    """Qwen3-30B-A3B at EP8 (16 local experts), FP8: the block's ops by name."""
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, precision="fp8", **kw)
    return {op.name: op for op in block_ops(load_model(model), lay, kind)}


def test_the_counts_from_source():
    """One swizzle kernel a GEMM call that reads the weight (fprop, dgrad), none in wgrad; 1 / 32 byte of E8M0
    scale an element (OCP MX v1.0: blocks of 32), read and written; a hook's 13 Python-level calls and 2 objects
    from C++ (the list in the TOML's comments)."""
    from topo.training.weight_swizzle import _table
    t = _table()
    assert t["kernels_per_call"] == {"fprop": 1, "dgrad": 1, "wgrad": 0}
    assert t["scale_bytes_per_element"] == 1 / 32 and t["passes_over_scales"] == 2
    assert hook_python_calls() == (3 + 2 + 3 + 5, 0, 2)


def test_a_grouped_mxfp8_pass_swizzles_every_experts_weight_scales_in_one_kernel():
    """GroupedLinear under MXFP8, 16 local experts: forward 16 GEMMs + 16 casts + 1 swizzle, backward 32 GEMMs +
    16 casts + 1 swizzle (dgrad's; wgrad reads no weight); the swizzle is launched by the GEMM call's C++. Delayed
    scaling, BF16 and the fused grouped MLP swizzle nothing here."""
    mx = _ops(fp8_recipe="mxfp8")
    q = quantize_kernels()["cast"]
    for name in ("fc1", "fc2"):
        op = mx[name]
        assert op.mxfp8 and op.groups == 16
        assert weight_swizzles(op, "fp8") == weight_swizzles(op, "fp8", True) == 1
        m = 2 * 16  # each dropless expert's cast zeroes its two swizzled scale buffers (tests/test_mxfp8_cast_memset_mxhost112.py)
        assert kernels_launched(op, "fp8") == 16 + 16 * q + m + 1
        assert kernels_launched(op, "fp8", True) == 32 + 16 * q + m + 1
        assert launch_calls(op, "fp8") == (2.0, 15.0, 16 * q - 1 + m + 1)  # GEMM and cast calls; C++ GEMMs, kernels
        assert weight_swizzles(op, "bf16") == 0
    assert weight_swizzles(_ops()["fc1"], "fp8") == 0  # delayed scaling: per-tensor scales, no swizzle
    fused = _ops(fp8_recipe="mxfp8", moe_expert_kernels="fused_mlp")["fc1"]
    assert weight_swizzles(fused, "fp8") == 0


def test_a_dense_mxfp8_linear_swizzles_its_weight_each_call():
    """TE Linear's gemm() swizzles A, the weight, in fprop and dgrad: one kernel a call; the router (a BF16 GEMM)
    and the fused attention are no MXFP8 linears."""
    mx = _ops("*", fp8_recipe="mxfp8")
    qkv = mx["qkv"]
    assert weight_swizzles(qkv, "fp8") == weight_swizzles(qkv, "fp8", True) == qkv.launches == 1
    assert kernels_launched(qkv, "fp8") == 1 + 1 + 1 and kernels_launched(qkv, "fp8", True) == 2 + 1 + 1
    assert weight_swizzles(mx["core_attention"], "fp8") == 0
    assert weight_swizzles(_ops(fp8_recipe="mxfp8")["router"], "fp8") == 0


def test_the_swizzle_costs_a_gap_its_bytes_and_a_buffer():
    """Against the same op without MXFP8's swizzle: GPU a launch gap and 2 x N x K x G / 32 bytes at HBM rate,
    forward and backward; host one C++ launch and one tensor made from C++."""
    from dataclasses import replace
    g = gpu_compute("B200")
    km = g.kernels
    for name in ("fc1", "fc2"):
        op = _ops(fp8_recipe="mxfp8")[name]
        bare = replace(op, mxfp8=False)
        nbytes = 2 * op.n * op.k * op.groups / 32
        memsets = 2 * op.groups  # MXFP8's swizzled-scale casts zero their two scale buffers (cast_memsets)
        assert swizzle_bytes(op, "fp8") == swizzle_bytes(op, "fp8", True) == pytest.approx(nbytes)
        for backward in (False, True):
            assert op_time_s(op, g, "fp8", backward, fp8_recipe="mxfp8") == pytest.approx(
                op_time_s(bare, g, "fp8", backward, fp8_recipe="mxfp8") + memory_s(km, nbytes) + km.launch_gpu_s
                + memsets * km.launch_gpu_s, rel=1e-12)
        assert host_launch_s(op, g, precision="fp8") == pytest.approx(
            host_launch_s(bare, g, precision="fp8") + km.launch_cpp_s + km.launch_torch_cpp_op_s
            + memsets * km.launch_cpp_s, rel=1e-12)


def test_megatron_ddp_runs_one_hook_a_weight_in_the_backward():
    """Each expert's weight is its own Parameter (weight0..weight15): 16 hooks a grouped module's backward, one a
    dense linear's, none forward, each 13 Python calls and 2 Python objects at the host's prices; a layout off
    Megatron-Core DDP (FSDP2's gradients, ZeRO-3) runs none."""
    g = gpu_compute("GB200")
    py_call, _, py_object = g.kernels.launch_py_s
    one = 13 * py_call + 2 * py_object
    ops = _ops()
    assert grad_hook_host_s(ops["fc1"], g.kernels.launch_py_s, True) == pytest.approx(16 * one, rel=1e-12)
    assert grad_hook_host_s(ops["fc1"], g.kernels.launch_py_s) == 0.0
    attn = _ops("*")
    assert grad_hook_host_s(attn["qkv"], g.kernels.launch_py_s, True) == pytest.approx(one, rel=1e-12)
    assert not attn["core_attention"].grad_hooks  # no weight
    assert ops["router"].grad_hooks  # the router's weight is a Parameter too
    from dataclasses import replace
    fc1 = ops["fc1"]
    assert host_launch_s(fc1, g, True, precision="fp8") == pytest.approx(
        host_launch_s(replace(fc1, grad_hooks=False), g, True, precision="fp8") + 16 * one, rel=1e-12)
    assert not _ops(wgrad_output="fsdp2", dp_sharding="zero3")["fc1"].grad_hooks
    assert not _ops(dp_sharding="zero3")["fc1"].grad_hooks


def _block_ops(kind, generation, **kw):
    """Qwen3-30B-A3B at EP8 (16 local experts), FP8 block-wise, on a GPU of ``generation``: the block's ops by name."""
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, precision="fp8", fp8_recipe="blockwise", **kw)
    return {op.name: op for op in block_ops(load_model("qwen3-30b-a3b"), lay, kind, generation)}


def test_blockwise_conversion_counts_from_source():
    """TE's gemm() on sm_arch() >= 100 converts A and B of every GEMM (fprop: W, X; dgrad: W, dY; wgrad: X, dY);
    Float8BlockScaling's defaults put 128x128 blocks on W, 1x128 on X and dY (TE v2.14 f031cf87
    ``common/recipe/__init__.py`` lines 345-347); one FP32 scale (4 B) read a block, one E8M0 byte written a 1x32
    block (``swizzle_block_scaling.cu``)."""
    from topo.training.weight_swizzle import _convert, converts
    t = _convert()
    assert t["operands"] == {"fprop": ["weight", "input"], "dgrad": ["weight", "output_grad"],
                             "wgrad": ["input", "output_grad"]}
    assert t["block_dims"] == {"weight": 2, "input": 1, "output_grad": 1}
    assert t["read_bytes_per_element"] == {"1": 4 / 128, "2": 4 / 128 ** 2} and t["write_bytes_per_element"] == 1 / 32
    assert converts("blackwell") and not converts("hopper") and not converts("")


def test_a_grouped_blockwise_pass_on_blackwell_converts_both_operands_of_every_expert():
    """te_general_grouped_gemm converts each tensor of te_A_wrappers and te_B_wrappers (gemm.cpp lines 564-575 at
    v2.14): 16 local experts, forward 16 x 2 conversions, backward 16 x 4, all launched by the call's C++ (no MXFP8
    swizzle: block-wise scales are not swizzled); bytes in closed form; one buffer a conversion. None on Hopper
    (cuBLASLt runs block scaling natively there), none in BF16."""
    from dataclasses import replace
    from topo.training.weight_swizzle import block_conversions, conversion_bytes
    g = gpu_compute("B200")
    km = g.kernels
    q = quantize_kernels()["cast"]
    bw, hop = _block_ops("E", "blackwell"), _block_ops("E", "hopper")
    for name in ("fc1", "fc2"):
        op = bw[name]
        assert op.block_convert and not op.mxfp8 and op.groups == 16
        assert weight_swizzles(op, "fp8") == 0
        assert block_conversions(op, "fp8") == 32 and block_conversions(op, "fp8", True) == 64
        assert kernels_launched(op, "fp8") == 16 + 16 * q + 32
        assert kernels_launched(op, "fp8", True) == 32 + 16 * q + 64
        assert launch_calls(op, "fp8") == (2.0, 15.0, 16 * q - 1 + 32)
        m, n, k, G = op.m, op.n, op.k, op.groups
        w, a = n * k * (4 / 128 ** 2 + 1 / 32), 4 / 128 + 1 / 32
        fwd, bwd = (w + a * m * k) * G, (w + a * m * n + a * m * k + a * m * n) * G
        assert conversion_bytes(op, "fp8") == pytest.approx(fwd, rel=1e-12)
        assert conversion_bytes(op, "fp8", True) == pytest.approx(bwd, rel=1e-12)
        bare = replace(op, block_convert=False)
        for backward, kernels, nbytes in ((False, 32, fwd), (True, 64, bwd)):
            assert op_time_s(op, g, "fp8", backward, fp8_recipe="blockwise") == pytest.approx(
                op_time_s(bare, g, "fp8", backward, fp8_recipe="blockwise") + memory_s(km, nbytes)
                + kernels * km.launch_gpu_s, rel=1e-12)
        assert host_launch_s(op, g, precision="fp8") == pytest.approx(
            host_launch_s(bare, g, precision="fp8") + 32 * (km.launch_cpp_s + km.launch_torch_cpp_op_s), rel=1e-12)
        assert not hop[name].block_convert and block_conversions(hop[name], "fp8") == 0
        assert block_conversions(op, "bf16") == 0
    assert block_conversions(bw["router"], "fp8") == 0  # a BF16 GEMM
