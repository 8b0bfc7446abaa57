"""The host wait's line says what each launch is priced at (wlk57, walk20's leftover: Qwen3-235B at EP4 on H100 ran
26% slower under FP8 current scaling than BF16 in topo).

That difference is the host term: Transformer Engine's GroupedLinear quantises each local expert's rows alone under
current scaling, four kernels a quantisation (section 204: NVIDIA/TransformerEngine v2.12-v2.16
pytorch/csrc/extensions/cast.cpp ``multi_tensor_quantize_impl``, "Quantize kernels individually"), so at EP4 (128
experts, 32 local) an expert GEMM's forward launches 32 GEMMs + 4 x 32 casts where BF16 launches 32, each charged
``kernels.toml [launch] host_s`` (20 us, status fitted: an average framework call, section 186), though TE issues
the casts from one C++ call (a raw launch ~1.3 us, section 215: priced so with the per-expert module work since
hostx57 and hostpy70).
The line now names that price and its status, read from the data file, so a reader can weigh a host-bound figure."""

from __future__ import annotations

import pytest

from conftest import run_cli
from topo.training.gpus import gpu_compute
from topo.training.kernels import host_launch_price
from topo.training.model import Block, load_model
from topo.training.operators import block_ops, expert_host_s, host_launch_s
from topo.training.parallel import make_layout

MOE = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "256",
       "--seq", "2048", "--precision", "fp8", "--dp", "8", "--ep", "8", "--etp", "1"]


def test_the_host_bound_line_names_the_fitted_price():
    price_s, status = host_launch_price()
    assert status == "fitted" and 5e-6 <= price_s <= 2e-5  # kernels.toml host_s_range
    out = run_cli(*MOE, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("host-bound: ")]
    assert line.endswith(f"; each launch is priced at an average framework call, {price_s * 1e6:.2f} us x the "
                         f"host CPU's factor (kernels.toml [launch] host_s, fitted)")


@pytest.mark.parametrize("precision, recipe, casts", [("bf16", None, 0), ("fp8", "current", 4)])
def test_an_expert_gemm_forward_launches_its_casts_per_local_expert(precision, recipe, casts):
    """Qwen3-235B-A22B (128 experts) at EP4: 32 local experts; fc1's forward on the reference CPU (H100's default,
    factor 1) is one GEMM call and, under FP8, one ``split_quantize`` call at host_s, the other 31 experts'
    cuBLASLt GEMMs and the 4 x 32 - 1 other cast kernels from TE's C++ (host56, findings section 215), and each
    expert's module work outside its launches (hostx57 / hostpy70: ``expert_host_s``)."""
    m = load_model("qwen3-235b-a22b")
    lay = make_layout(tp=2, pp=16, vpp=4, dp=256, ep=4, global_batch=4096, precision=precision, fp8_recipe=recipe)
    (fc1,) = [o for o in block_ops(m, lay, Block.MOE) if o.grouped and o.name == "fc1"]
    gpu = gpu_compute("H100")
    km = gpu.kernels
    assert km.launch_host_s == host_launch_price()[0]
    calls = 1 + (1 if casts else 0)
    want = calls * km.launch_host_s + 31 * km.launch_cpp_gemm_s + (casts * 32 - 1 if casts else 0) * km.launch_cpp_s
    assert host_launch_s(fc1, gpu, False, (), precision) == pytest.approx(
        want + expert_host_s(fc1, gpu, precision), rel=1e-12)
