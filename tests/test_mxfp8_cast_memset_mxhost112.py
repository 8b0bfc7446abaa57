"""An MXFP8 cast that writes GEMM-ready (swizzled) scales zeroes its two scale buffers (cudaMemsetAsync, row-wise and
column-wise) before its kernel when the tensor does not fill whole 128 x 128 tiles: every dropless expert's cast
(its rows a run-time token count), a dense cast only where its rows or columns miss a multiple of 128.

Source: NVIDIA/TransformerEngine ``transformer_engine/common/cast/mxfp8/quantize_mxfp8.cuh`` ("Zero out swizzled
scales if padding is needed", ``cols % 128 != 0 || rows % 128 != 0``) at v2.12 5671fd36 lines 759-775, v2.14
f031cf87 759-775, v2.16 4220403e 778-794, v2.17.1 4329ff84 777-793; ``module/grouped_linear.py`` /
``module/linear.py`` ``_get_quantizers`` (``optimize_for_gemm = True``); ``pytorch/csrc/extensions/cast.cpp``
``multi_tensor_quantize_impl`` (each expert quantised alone). ``topo/data/compute/mxfp8_weight_swizzle.toml``
``[cast_memset]``.
"""

from dataclasses import replace

from topo.training.gpus import gpu_compute
from topo.training.kernels import quantize_kernels
from topo.training.model import load_model
from topo.training.operators import block_ops, host_launch_s, kernels_launched, launch_calls, op_time_s
from topo.training.parallel import make_layout
from topo.training.weight_swizzle import cast_memsets


def _ops(kind="E", model="qwen3-30b-a3b", **kw):
    """Qwen3-30B-A3B at EP8 (16 local experts), FP8: the block's ops by name."""
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, precision="fp8", **kw)
    return lay, {op.name: op for op in block_ops(load_model(model), lay, kind)}


def test_the_count_from_source():
    from topo.training.weight_swizzle import _file
    t = _file()["cast_memset"]
    assert (t["memsets_per_cast"], t["tile_rows"], t["tile_cols"]) == (2, 128, 128)  # row-wise + column-wise scales


def test_each_dropless_experts_mxfp8_cast_adds_two_memsets_launched_from_cpp():
    """GroupedLinear, 16 local experts, MXFP8: forward 16 GEMMs + 16 x (1 cast + 2 memsets) + 1 weight swizzle,
    backward 32 GEMMs + 16 x 3 + 1; the memsets are issued by split_quantize's C++ (no Python call of their own)."""
    _, mx = _ops(fp8_recipe="mxfp8")
    q = quantize_kernels()["cast"]
    for name in ("fc1", "fc2"):
        op = mx[name]
        assert op.m_sd > 0  # dropless: the rows are a run-time count
        assert cast_memsets(op, "fp8") == cast_memsets(op, "fp8", True) == 2
        assert kernels_launched(op, "fp8") == 16 + 16 * (q + 2) + 1
        assert kernels_launched(op, "fp8", True) == 32 + 16 * (q + 2) + 1
        # calls: the GEMM pass and the split_quantize; C++: 15 GEMMs; C++ kernels: 15 casts, 32 memsets, 1 swizzle
        assert launch_calls(op, "fp8") == (2.0, 15.0, 16 * q - 1 + 32 + 1)


def test_the_memsets_cost_a_gap_and_a_cpp_launch_each(monkeypatch):
    """On GB200 (Grace host), fc1's 16 experts: the 32 memsets a pass add 32 eager gaps (kernels.toml [launch]
    gpu_s) to the pass's GPU seconds and 32 C++ launches (cpp_launch_s x Grace's factor) to its host seconds,
    against the same op with the count set to 0."""
    from topo.training.weight_swizzle import _file
    lay, mx = _ops(fp8_recipe="mxfp8")
    gpu = gpu_compute("GB200")
    km = gpu.kernels
    op = mx["fc1"]
    aligned = replace(op, m_sd=0.0, m=16384.0)  # a static count of whole tiles (K 2,048 = 16 x 128): none
    assert cast_memsets(aligned, "fp8") == 0
    kw = dict(amax_pass=lay.fp8_amax_pass, fp8_recipe=lay.fp8_recipe)

    def priced():
        return ([op_time_s(op, gpu, "fp8", backward=b, **kw) for b in (False, True)],
                [host_launch_s(op, gpu, backward=b, precision="fp8") for b in (False, True)])
    (t_fwd, t_bwd), (h_fwd, h_bwd) = priced()
    monkeypatch.setitem(_file()["cast_memset"], "memsets_per_cast", 0)
    (t0_fwd, t0_bwd), (h0_fwd, h0_bwd) = priced()
    n = 16 * 2
    for on, off in ((t_fwd, t0_fwd), (t_bwd, t0_bwd)):
        assert abs((on - off) - n * km.launch_gpu_s) < 1e-12
    for on, off in ((h_fwd, h0_fwd), (h_bwd, h0_bwd)):
        assert abs((on - off) - n * km.launch_cpp_s) < 1e-12
    assert abs(km.launch_cpp_s - 1.3e-6 * 2.75) < 1e-8  # 1.3 us (tritonbench PR #1016) x Grace's 2.75


def test_dense_casts_memset_only_off_whole_tiles_and_not_a_gathered_operand():
    """A dense MXFP8 linear: Qwen3-30B's QKV (rows 4,096, K 2,048) fills whole tiles, none; GPT-OSS 120B's hidden
    2,880 (22.5 x 128) does not: its forward cast memsets. An operand a sequence-parallel gather makes keeps
    compact scales (optimize_for_gemm off): none. BF16 and other recipes: none."""
    _, dense = _ops("*", fp8_recipe="mxfp8")
    qkv = dense["qkv"]
    assert qkv.m % 128 == 0 and qkv.k % 128 == 0 and cast_memsets(qkv, "fp8") == 0
    odd = replace(qkv, k=2880.0)
    assert cast_memsets(odd, "fp8") == 2
    assert cast_memsets(replace(odd, sp_gather="ag"), "fp8") == 0
    assert cast_memsets(replace(odd, sp_gather="ag"), "fp8", True) == (0 if qkv.n % 128 == 0 else 2)
    assert cast_memsets(odd, "bf16") == 0
    _, delayed = _ops()
    assert cast_memsets(delayed["fc1"], "fp8") == 0  # per-tensor scales: no swizzled scale buffers


def test_the_fused_grouped_mlp_casts_in_one_grouped_kernel_without_memsets():
    _, fused = _ops(fp8_recipe="mxfp8", moe_expert_kernels="fused_mlp")
    op = fused["fc1"]
    assert kernels_launched(op, "fp8") == kernels_launched(replace(op, m_sd=0.0, m=16384.0), "fp8")
