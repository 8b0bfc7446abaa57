"""Kernels that one C++ call launches in a loop pay the C++ side only, not a framework call each.

``kernels.toml`` ``[launch] host_s`` is one framework call (a module's or a small op's Python, dispatcher and its
launch). Transformer Engine's ``GroupedLinear`` makes one Python call a GEMM pass (``general_grouped_gemm``) and
one a cast (``tex.split_quantize``), and their C++ loops over the local experts
(NVIDIA/TransformerEngine v2.14, f031cf87: ``common/gemm/cublaslt_gemm.cu`` ``multi_stream_cublas_gemm``, one
``cuBLASLt`` GEMM per expert, each with descriptors and a heuristic query made in ``cublas_gemm``;
``pytorch/csrc/extensions/cast.cpp`` ``multi_tensor_quantize_impl``, each expert quantised alone under current
scaling; ``csrc/quantizer.cpp`` ``Float8CurrentScalingQuantizer::quantize_impl``, four kernels from one call).
Those kernels cost ``cpp_launch_s`` (a raw ``cuLaunchKernel``, ~1.3 us: meta-pytorch/tritonbench PR #1016 and
NVlabs/cutile-rs PR #265) and the GEMMs ``cpp_gemm_s`` (~10 us a cuBLASLt GEMM with per-call descriptors and
heuristic: NVIDIA/raft PR #1736), both times the host CPU's factor.
"""

import tomllib

import pytest

from topo.resources import data_dir
from topo.training.gpus import gpu_compute
from topo.training.host_cpu import host_time_factor
from topo.training.model import load_model
from topo.training.operators import block_ops, host_launch_s, kernels_launched, launch_calls
from topo.training.parallel import make_layout

LAUNCH = tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))["launch"]


def _qwen_experts(recipe="current", **kw):
    """Qwen3-30B-A3B at EP8 (128 / 8 = 16 local experts), FP8 under ``recipe``: its ops by name."""
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, precision="fp8", fp8_recipe=recipe, **kw)
    return {op.name: op for op in block_ops(load_model("qwen3-30b-a3b"), lay, "E")}


def _llama(recipe="current"):
    lay = make_layout(tp=1, dp=8, global_batch=8, precision="fp8", fp8_recipe=recipe)
    model = load_model("llama3-8b")
    return {op.name: op for kind in ("*", "-") for op in block_ops(model, lay, kind)}


def test_the_figures_are_sourced_and_below_a_call():
    """1.3 us a C++ launch and 10 us a C++ cuBLASLt GEMM, each with a status and a source, both below one call
    (the top of host_s's published 5-20 us); Grace's factor on 1.3 us lands within 20% of the GB200 figure, 3.0 us (no
    arguments) to 3.3 us (19 arguments) a cuLaunchKernel through ctypes (tritonbench PR #1017)."""
    assert LAUNCH["cpp_launch_s"] == pytest.approx(1.3e-6) and LAUNCH["cpp_gemm_s"] == pytest.approx(1.0e-5)
    for key in ("cpp_launch", "cpp_gemm"):
        assert LAUNCH[f"{key}_status"] == "secondary" and "PR #" in LAUNCH[f"{key}_source"]
    assert LAUNCH["cpp_launch_s"] < LAUNCH["cpp_gemm_s"] < LAUNCH["host_s_range"][1]
    grace = LAUNCH["cpp_launch_s"] * host_time_factor("grace")
    assert abs(grace / 3.0e-6 - 1) < 0.2 and abs(grace / 3.3e-6 - 1) < 0.2
    for gpu in ("H100", "GB200"):
        km = gpu_compute(gpu).kernels
        f = host_time_factor(km.host_cpu)
        assert km.launch_cpp_s == pytest.approx(LAUNCH["cpp_launch_s"] * f)
        assert km.launch_cpp_gemm_s == pytest.approx(LAUNCH["cpp_gemm_s"] * f)


def test_a_grouped_linear_is_one_call_a_gemm_pass_and_one_a_cast():
    """16 local experts on the multi-stream path, current scaling: forward one GEMM call (15 more GEMMs from C++)
    and one split_quantize (16 x 4 kernels, 63 after its first); backward the dgrad and wgrad calls (30 more
    GEMMs) and the output gradient's split_quantize. The counts sum to the kernels launched."""
    ops = _qwen_experts()
    for name in ("fc1", "fc2"):
        op = ops[name]
        assert op.expert_kernels == "multi_stream" and op.groups == 16
        assert launch_calls(op, "fp8") == (2.0, 15.0, 63.0)
        assert launch_calls(op, "fp8", True) == (3.0, 30.0, 63.0)
        for backward in (False, True):
            assert sum(launch_calls(op, "fp8", backward)) == kernels_launched(op, "fp8", backward)
    bf16 = {op.name: op for op in block_ops(load_model("qwen3-30b-a3b"),
                                             make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1), "E")}
    assert launch_calls(bf16["fc1"], "bf16") == (1.0, 15.0, 0.0)
    assert launch_calls(bf16["fc1"], "bf16", True) == (2.0, 30.0, 0.0)


def test_a_python_loop_of_experts_and_the_fused_mlp_stay_a_call_a_kernel():
    """``moe_grouped_gemm = false`` (SequentialMLP: one TE Linear per expert from Python): every GEMM and every
    expert's cast is a call, its other three kernels from C++; the fused grouped MLP's kernels are a call each."""
    seq = _qwen_experts(moe_grouped_gemm=False)["fc1"]
    assert not seq.expert_kernels and seq.groups == 16
    assert launch_calls(seq, "fp8") == (32.0, 0.0, 48.0)
    fused = _qwen_experts("mxfp8", moe_expert_kernels="fused_mlp")["fc1"]
    assert launch_calls(fused, "fp8") == (kernels_launched(fused, "fp8"), 0.0, 0.0)


def test_a_dense_linear_casts_in_one_call_and_a_norm_casts_in_its_own():
    """llama3-8b under current scaling: out_proj forward is the GEMM call and the quantise call (3 more kernels
    from C++); QKV's forward cast (scale and cast) is launched by the norm's call, so QKV is one call and two C++
    kernels; backward the dgrad and wgrad calls and the output gradient's cast call with three C++ kernels.
    Delayed scaling's one cast kernel is its own call."""
    cur, dly = _llama(), _llama("delayed")
    assert launch_calls(cur["out_proj"], "fp8") == (2.0, 0.0, 3.0)
    assert launch_calls(cur["qkv"], "fp8") == (1.0, 0.0, 2.0)
    assert launch_calls(cur["qkv"], "fp8", True) == (3.0, 0.0, 3.0)
    assert launch_calls(dly["out_proj"], "fp8") == (2.0, 0.0, 0.0)
    assert launch_calls(cur["core_attention"], "fp8") == (kernels_launched(cur["core_attention"], "fp8"), 0.0, 0.0)


def test_host_seconds_price_each_kind_of_launch():
    """Closed form on H100 (Xeon 8480C, the reference host): the experts' fc1 forward under current scaling is
    2 calls x host_s + 15 GEMMs x cpp_gemm_s + 63 kernels x cpp_launch_s = 2 x 19.2 + 150 + 81.9 = 270.3 us, where
    a call a kernel was 80 x 19.2 = 1,536 us, plus each of the 16 experts' four tensors made in C++ at
    torch_cpp_op_s and its 14 Python-level calls, 3 conversions to C++ and 4 Python objects from C++ at their prices
    (launch_py_s, on the reference host; tests/test_training_expert_host.py); on GB200 (Grace) 2.75 times that."""
    op = _qwen_experts()["fc1"]
    h100, gb200 = gpu_compute("H100"), gpu_compute("GB200")
    python = sum(n * LAUNCH[k] * LAUNCH["python_calls_host_factor"]
                 for n, k in zip((14, 3, 4), ("py_call_s", "pybind_call_s", "py_object_s")))
    expected = (2 * LAUNCH["host_s"] + 15 * LAUNCH["cpp_gemm_s"] + 63 * LAUNCH["cpp_launch_s"]
                + 16 * (4 * LAUNCH["torch_cpp_op_s"] + python))
    assert host_launch_s(op, h100, precision="fp8") == pytest.approx(expected, rel=1e-12)
    assert host_launch_s(op, gb200, precision="fp8") == pytest.approx(expected * host_time_factor("grace"))
    assert host_launch_s(op, h100, graphs=("full_iteration",), precision="fp8") == 0.0
