"""The host work Transformer Engine's ``GroupedLinear`` does for each local expert outside its launches.

Counted from source (``topo/data/compute/te_grouped_linear_host.toml``: NVIDIA/TransformerEngine v2.12 5671fd36,
v2.14 f031cf87, v2.16 4220403e, ``pytorch/module/grouped_linear.py``, ``csrc/extensions/cast.cpp`` ``split_quantize``,
``csrc/extensions/gemm.cpp`` ``te_general_grouped_gemm``, ``csrc/quantizer.cpp`` ``create_tensor``) and priced
by pytorch/pytorch issue #41383 (ngimel, 2020-07-14: a simple op ~2 us from Python, ~1 us through the C++ API),
times the host CPU's factor; the pure-Python and pybind calls by kind, priced by nanobind's runtime benchmark
(wjakob/nanobind@e9e163ec docs/benchmark.rst and docs/images/perf.svg: AMD Ryzen 9 7950X, Python 3.10.6; a Python
call 92 ns, a pybind11-bound call 180 ns, a Python object built 328 ns), times the 7950X-to-reference clock ratio
4.5 / 3.8 and the host CPU's factor.
"""

import tomllib

import pytest

from topo.resources import data_dir
from topo.training.gpus import gpu_compute
from topo.training.grouped_gemm import expert_host_ops, expert_python_calls
from topo.training.host_cpu import host_time_factor
from topo.training.model import load_model
from topo.training.operators import block_ops, expert_host_s, host_launch_s
from topo.training.parallel import make_layout

LAUNCH = tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))["launch"]
TABLE = tomllib.loads((data_dir("compute") / "te_grouped_linear_host.toml").read_text(encoding="utf-8"))


def _experts(**kw):
    """Qwen3-30B-A3B at EP8 (128 / 8 = 16 local experts): its MoE block's ops by name."""
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, **kw)
    return {op.name: op for op in block_ops(load_model("qwen3-30b-a3b"), lay, "E")}


def test_the_counts_from_source():
    """Each expert's work by kind, as the table's comments list it at v2.14 (lines for v2.12 and v2.16 alongside):
    BF16 forward: torch.split's view (grouped_linear.py 162) and the output's at::from_blob (gemm.cpp 494); per-tensor
    FP8: split_quantize's create_tensor (three at::empty: data, transpose, scale_inv) for the split's view; MXFP8: four
    at::from_blob of the bulk allocation. Backward adds clear_tensor_data's swap and get_dummy_wgrad's detach (one
    more swap for MXFP8's two column-wise buffers)."""
    per = TABLE["per_expert"]
    assert per["bf16"] == {"forward": [0, 2, 8], "backward": [2, 2, 11]}
    assert per["fp8_per_tensor"] == {"forward": [0, 1 + 3, 21], "backward": [1 + 1, 1 + 3, 17]}
    assert per["fp8_block"] == {"forward": [0, 1 + 4, 22], "backward": [2 + 1, 1 + 4, 18]}
    assert per["status"] == "counted from source"
    assert all(pin in TABLE["lines"][v] for v, pin in (("v2.12", "5671fd36"), ("v2.14", "f031cf87"),
                                                       ("v2.16", "4220403e")))
    assert expert_host_ops("multi_stream", "fp8_block", backward=True) == (3.0, 5.0, 18.0)
    assert expert_host_ops("fused_mlp", "fp8_block") == (0.0, 0.0, 0.0)
    assert expert_host_ops("", "bf16") == (0.0, 0.0, 0.0)


def test_the_prices_and_their_source():
    assert LAUNCH["torch_py_op_s"] == 2.0e-6 and LAUNCH["torch_cpp_op_s"] == 1.0e-6
    assert LAUNCH["torch_py_op_status"] == LAUNCH["torch_cpp_op_status"] == "secondary"
    assert "#41383" in LAUNCH["torch_py_op_source"] and "#41383" in LAUNCH["torch_cpp_op_source"]
    # Grace cross-check: TE issue #2897 (GB200, 64 experts): wgrad allocations 350 us, 2.7 us for each of fc1's and
    # fc2's 128, between the C++ price (1 us x 2.75) less 10% and the Python price (2 us x 2.75)
    grace = host_time_factor("grace")
    assert 0.9 * LAUNCH["torch_cpp_op_s"] * grace <= 350e-6 / 128 <= LAUNCH["torch_py_op_s"] * grace


# nanobind's runtime benchmark (wjakob/nanobind@e9e163ec docs/images/perf.svg bar labels; the loop counts of
# docs/microbenchmark.ipynb): a Python call 0.92 s / 10 M, a pybind11-bound call ("opt") 1.80 s / 10 M, a Python
# object of six fields built and a method called 0.82 s / 2.5 M; on the reference Xeon 8480C x 4.5 / 3.8 GHz
PY_CALL, PYBIND, PY_OBJECT = (t * 4.5 / 3.8 for t in (0.92 / 10e6, 1.80 / 10e6, 0.82 / 2.5e6))


def test_the_python_calls_by_kind():
    """The python column split by kind (te_grouped_linear_host.toml's comments): forward FP8 14 Python-level calls
    (weight getattr, five quantizer attribute sets, two set_usage, the weight workspace, update_usage, three
    prepare_for_saving, the main_grad lambda), 3 conversions to C++ (A and B, the quantizer), 3 + 1 (per-tensor) or
    4 + 1 (block) objects from C++ (py::cast of each tensor, the storage object); BF16 6 / 2 / 0. Each row sums to
    the python count."""
    kinds = TABLE["python_kinds"]
    assert kinds["fp8_block"] == {"forward": [14, 3, 4 + 1], "backward": [8, 4 + 1, 4 + 1]}
    assert kinds["fp8_per_tensor"] == {"forward": [14, 3, 3 + 1], "backward": [8, 4 + 1, 3 + 1]}
    assert kinds["bf16"] == {"forward": [1 + 1 + 3 + 1, 2, 0], "backward": [7, 4, 0]}
    for cast, passes in TABLE["per_expert"].items():
        if cast in ("status", "source"):
            continue
        for name, counts in passes.items():
            assert sum(kinds[cast][name]) == counts[2], (cast, name)
    assert expert_python_calls("multi_stream", "fp8_block", backward=True) == (8.0, 5.0, 5.0)
    assert expert_python_calls("fused_mlp", "fp8_block") == (0.0, 0.0, 0.0)


def test_the_python_prices_and_their_source():
    """The three prices as nanobind's benchmark publishes them, on the Ryzen 9 7950X at Python 3.10.6; the
    reference host's prices on H100 (factor 1) are those x 4.5 / 3.8 (an assumption: the clock ratio)."""
    assert (LAUNCH["py_call_s"], LAUNCH["pybind_call_s"], LAUNCH["py_object_s"]) == (92e-9, 180e-9, 328e-9)
    for key in ("py_call", "pybind_call", "py_object"):
        assert LAUNCH[f"{key}_status"] == "published"
        assert "nanobind@e9e163ec" in LAUNCH[f"{key}_source"] and "7950X" in LAUNCH[f"{key}_source"]
    assert LAUNCH["python_calls_host_factor"] == pytest.approx(4.5 / 3.8, abs=1e-4)
    assert LAUNCH["python_calls_host_factor_status"] == "assumption"
    assert gpu_compute("H100").kernels.launch_py_s == pytest.approx((PY_CALL, PYBIND, PY_OBJECT), rel=1e-4)


def test_expert_host_seconds_closed_form():
    """16 local experts, each kind at its price: BF16 on H100 (the reference host) forward 16 x (2 x 1 us + 6 x
    PY_CALL + 2 x PYBIND), backward 16 x (2 x 2 + 2 x 1 us + 7 x PY_CALL + 4 x PYBIND); MXFP8 on GB200 (Grace)
    forward 16 x (5 x 1 us + 14 x PY_CALL + 3 x PYBIND + 5 x PY_OBJECT) x 2.75, backward 16 x (3 x 2 + 5 x 1 us + 8
    x PY_CALL + 5 x PYBIND + 5 x PY_OBJECT) x 2.75; per-tensor current scaling on H100 forward 16 x (4 x 1 us + 14 x
    PY_CALL + 3 x PYBIND + 4 x PY_OBJECT)."""
    h100, gb200 = gpu_compute("H100"), gpu_compute("GB200")
    py, cpp, grace = LAUNCH["torch_py_op_s"], LAUNCH["torch_cpp_op_s"], host_time_factor("grace")
    bf16 = _experts()["fc1"]
    assert expert_host_s(bf16, h100, "bf16") == pytest.approx(16 * (2 * cpp + 6 * PY_CALL + 2 * PYBIND), rel=1e-4)
    assert expert_host_s(bf16, h100, "bf16", backward=True) == pytest.approx(
        16 * (2 * py + 2 * cpp + 7 * PY_CALL + 4 * PYBIND), rel=1e-4)
    mx = _experts(precision="fp8", fp8_recipe="mxfp8")["fc2"]
    assert mx.block_scaled and not mx.current_scaling
    assert expert_host_s(mx, gb200, "fp8") == pytest.approx(
        16 * (5 * cpp + 14 * PY_CALL + 3 * PYBIND + 5 * PY_OBJECT) * grace, rel=1e-4)
    assert expert_host_s(mx, gb200, "fp8", backward=True) == pytest.approx(
        16 * (3 * py + 5 * cpp + 8 * PY_CALL + 5 * PYBIND + 5 * PY_OBJECT) * grace, rel=1e-4)
    cur = _experts(precision="fp8", fp8_recipe="current")["fc1"]
    assert not cur.block_scaled
    assert expert_host_s(cur, h100, "fp8") == pytest.approx(
        16 * (4 * cpp + 14 * PY_CALL + 3 * PYBIND + 4 * PY_OBJECT), rel=1e-4)
    # the Python part of an MXFP8 expert's forward on the reference host: 4.1 us, against the 5 us its tensors cost
    assert 14 * PY_CALL + 3 * PYBIND + 5 * PY_OBJECT == pytest.approx(4.107e-6, rel=1e-3)


def test_only_the_grouped_linear_path_pays_it():
    """A dense GEMM, Megatron-Core's SequentialMLP (a Python loop of Linear: launches priced per call), the fused
    grouped MLP (one kernel a pass) and the router pay none; a CUDA graph that captures the experts leaves none."""
    h100 = gpu_compute("H100")
    ops = _experts(precision="fp8", fp8_recipe="mxfp8", moe_expert_kernels="fused_mlp")
    assert expert_host_s(ops["fc1"], h100, "fp8") == 0.0
    assert expert_host_s(_experts(moe_grouped_gemm=False)["fc1"], h100, "bf16") == 0.0
    assert all(expert_host_s(op, h100, "bf16") == 0.0 for name, op in _experts().items() if name not in ("fc1", "fc2"))
    lay = make_layout(global_batch=8, seq_len=8192)
    dense = {op.name: op for op in block_ops(load_model("llama3-8b"), lay, "-")}["fc1"]
    assert expert_host_s(dense, h100, "bf16") == 0.0
    fc1 = _experts()["fc1"]
    assert host_launch_s(fc1, h100, graphs=("full_iteration",)) == 0.0
    assert host_launch_s(fc1, h100) > expert_host_s(fc1, h100) > 0.0
