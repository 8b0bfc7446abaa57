"""FP8 by scaling recipe: per-tensor (delayed / current), block-wise (1x128 / 128x128, Hopper) and MXFP8 (1x32,
Blackwell) GEMM time ratios and quantisation bytes (topo/data/compute/kernels.toml [fp8_recipe]), checked against
the figures they come from, Transformer Engine's own GEMM benchmark (NVIDIA/TransformerEngine@8f2e63578e10
docs/examples/gemm_profiling/gemm_profiling.rst), and each published run's recipe."""

import csv
import sys
from pathlib import Path

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import _table, fp8_recipe_costs, gemm_s, memory_s, quantize_s
from topo.training.operators import Op, op_time_s, quantize_bytes

ROOT = Path(__file__).resolve().parents[1]

# The guide's 5B layer: hidden 4,096, FFN 16,384, M = 31 x 512 = 15,872 tokens; its 12 GEMMs as (M, K, N)
_H, _F, _T = 4096, 16384, 15872
_FPROP = [(_T, _H, 3 * _H), (_T, _H, _H), (_T, _H, _F), (_T, _F, _H)]
_DGRAD = [(m, n, k) for m, k, n in _FPROP]
_WGRAD = [(k, m, n) for m, k, n in _FPROP]
# te.Linear under autocast, on an input that needs no gradient (benchmark_gemm.py: x = torch.randn(M, K)), quantises
# its input A (M x K) row- and column-wise (backward_needs_input: the weight needs a gradient) and its weight B
# (K x N) row-wise only (columnwise_usage = is_grad_enabled and inp.requires_grad, TE@8f2e63578e10
# transformer_engine/pytorch/module/linear.py)
_INPUTS = sum(m * k for m, k, n in _FPROP + _DGRAD + _WGRAD)
_WEIGHTS = sum(k * n for m, k, n in _FPROP + _DGRAD + _WGRAD)
_ELEMENTS = _INPUTS + _WEIGHTS
_H200_NVL_HBM_Bps = 4.8e12  # NVIDIA H200 NVL product brief: 4.8 TB/s


def _hbm_s(nbytes):
    return nbytes / (_H200_NVL_HBM_Bps * _table()["memory"]["memory_efficiency"])


def _row_wise_only_bytes(generation, recipe, amax_pass=False):
    """A weight quantised for fprop alone: the read, one FP8 copy and its scales (128x128 blocks block-wise)."""
    _, scale, _ = fp8_recipe_costs(recipe, generation)
    scale = 4 / 128**2 if recipe == "blockwise" else scale
    return 2 + (1 + scale) + (2 if amax_pass else 0)


def test_the_guide_layer_quantises_2p48e9_elements():
    """The element count the derivation uses, by hand: fprop A 15,872 x (3 x 4,096 + 16,384) and B
    4,096 x 49,152; dgrad A 15,872 x 36,864 and B the same weights; wgrad A 455M and B 585M."""
    assert _ELEMENTS == pytest.approx(2.483e9, rel=1e-3)
    assert (_INPUTS, _WEIGHTS) == (pytest.approx(1.495e9, rel=1e-3), pytest.approx(0.988e9, rel=1e-3))


def test_per_tensor_quantisation_bytes_reproduce_the_guide():
    """The byte model's check on Hopper (H200 NVL, the guide's worked example): current scaling's autocast minus its
    pre-quantized kernels, 20.285 - 16.785 = 3.50 ms a layer, against the inputs at 6 bytes (amax read 2, cast read
    2, FP8 data and transpose 2) and the weights at 5 (no transpose) at 90% of HBM: 3.22 ms, 8% under; delayed
    scaling (no amax read, 4 and 3 bytes) leaves kernels within 1% of current scaling's pre-quantized 16.785 ms."""
    cur = _hbm_s(quantize_bytes("hopper", "current", amax_pass=True) * _INPUTS
                 + _row_wise_only_bytes("hopper", "current", amax_pass=True) * _WEIGHTS)
    assert cur == pytest.approx(3.22e-3, rel=0.01) and cur == pytest.approx(20.285e-3 - 16.785e-3, rel=0.09)
    delayed = _hbm_s(quantize_bytes("hopper", "delayed") * _INPUTS + _row_wise_only_bytes("hopper", "delayed") * _WEIGHTS)
    assert 18.978e-3 - delayed == pytest.approx(16.785e-3, rel=0.01)
    assert quantize_bytes("hopper", "current", amax_pass=True) == 6.0
    assert quantize_bytes("hopper", "delayed") == quantize_bytes("hopper", None) == 4.0


def test_blockwise_gemm_ratio_on_hopper_is_the_guides():
    """Block-wise FP8's GEMM time over per-tensor's on Hopper: the guide's H200 NVL block-wise autocast layer,
    22.882 ms, less its one-kernel quantisations at HBM rate (the inputs: read 2, row- and column-wise FP8 2, FP32
    scales 4/128 a copy; the weights row-wise only, 128x128 scales), over current scaling's pre-quantized 16.785 ms.
    Counting a column-wise weight copy the benchmark does not write gave 1.224 (fp8blk35; rev42)."""
    q = _hbm_s(quantize_bytes("hopper", "blockwise") * _INPUTS + _row_wise_only_bytes("hopper", "blockwise") * _WEIGHTS)
    assert q == pytest.approx(2.09e-3, rel=0.01)
    assert fp8_recipe_costs("blockwise", "hopper")[0] == pytest.approx((22.882e-3 - q) / 16.785e-3, rel=1e-3)
    # cross-check: cuBLAS 12.9's post gives block-scaled FP8 1.75x BF16 on large matmuls, the guide per-tensor
    # 31.968 / 16.785 = 1.90x: block-scaled is slower than per-tensor, by less on large shapes than at these
    assert 1.0 < (31.968 / 16.785) / 1.75 < fp8_recipe_costs("blockwise", "hopper")[0]


def test_mxfp8_gemm_ratio_on_blackwell_is_the_guides():
    """MXFP8's GEMM time over per-tensor's on Blackwell: the guide's B300 pre-quantized layer, 7.161 ms MXFP8 against
    6.812 ms current scaling; TE emulates block-wise FP8 on Blackwell with MXFP8 GEMMs (PR #2157)."""
    assert fp8_recipe_costs("mxfp8", "blackwell")[0] == pytest.approx(7.161 / 6.812, rel=1e-3)
    assert fp8_recipe_costs("blockwise", "blackwell")[0] == fp8_recipe_costs("mxfp8", "blackwell")[0]
    for recipe in (None, "delayed", "current"):
        for gen in ("hopper", "blackwell"):
            assert fp8_recipe_costs(recipe, gen)[0] == 1.0


def test_quantisation_copies_by_recipe_and_generation():
    """Hopper's FP8 GEMMs are TN only: every recipe writes a transposed copy; from sm_100 a per-tensor tensor keeps
    its data alone (TE quantizer.cpp create_tensor), block-scaled recipes both copies with their scales (MXFP8 one
    E8M0 byte per 32, block-wise one FP32 per 128)."""
    assert quantize_bytes("blackwell", "current") == 3.0
    assert quantize_bytes("blackwell", "mxfp8") == pytest.approx(2 + 2 * (1 + 1 / 32))
    assert quantize_bytes("hopper", "blockwise") == pytest.approx(2 + 2 * (1 + 4 / 128))


@pytest.mark.parametrize("gpu_name,recipe", [("H100", "blockwise"), ("B200", "mxfp8"), ("GB200", "mxfp8")])
def test_a_linear_gemm_pays_its_recipe(gpu_name, recipe):
    """An FP8 linear layer's forward under a block-scaled recipe against per-tensor current scaling on the same GPU:
    its GEMM at the recipe's time ratio, its input's quantisation at the recipe's bytes (and, MXFP8 on Blackwell,
    at its cast kernel's measured HBM rate: test_mxfp8_quantisation_runs_at_its_measured_rate); the backward the
    same for both GEMMs and the output gradient's quantisation. BF16 is untouched."""
    gpu = gpu_compute(gpu_name)
    k, gen = gpu.kernels, gpu.generation
    M, N, K = 8192.0, 4096.0, 2048.0
    g = Op("fc", "mlp", "gemm", 2 * M * N * K, 0.0, M, N, K, 1.0, True)
    ratio = fp8_recipe_costs(recipe, gen)[0]
    q, q_cur = quantize_bytes(gen, recipe), quantize_bytes(gen, "current")

    def dq(elements):  # the recipe's quantisation less current scaling's
        return quantize_s(k, q * elements, recipe, gen) - memory_s(k, q_cur * elements)
    fwd = op_time_s(g, gpu, "fp8", fp8_recipe=recipe) - op_time_s(g, gpu, "fp8", fp8_recipe="current")
    assert fwd == pytest.approx((ratio - 1) * gemm_s(k, M, N, K, "fp8") + dq(M * K), rel=1e-9)
    bwd = (op_time_s(g, gpu, "fp8", backward=True, fp8_recipe=recipe)
           - op_time_s(g, gpu, "fp8", backward=True, fp8_recipe="current"))
    dgemm = gemm_s(k, M, K, N, "fp8") + gemm_s(k, K, N, M, "fp8")
    assert bwd == pytest.approx((ratio - 1) * dgemm + dq(M * N), rel=1e-9)
    assert fwd > 0 and bwd > 0
    assert op_time_s(g, gpu, "bf16", fp8_recipe=recipe) == op_time_s(g, gpu, "bf16")


def test_mxfp8_quantisation_runs_at_its_measured_rate():
    """Transformer Engine's MXFP8 cast of a BF16 8192 x 8192 tensor into its row- and column-wise copies took
    52.34 us on a B200 (ROCm/TransformerEngine PR #598, 2026-05-27, CAST_ONLY table, B200 column): 272.6 MB at
    5.21 TB/s, 0.679 of B200's 7.672 TB/s (its device query, gpus.toml; 0.651 of the page's 8 TB/s), where an
    elementwise kernel runs at 0.90. Section 85's B300 figure (the
    TE GEMM guide: quantisation 45% above its bytes at the HBM rate, 0.69) lies beside it. Other recipes and
    generations keep the elementwise rate."""
    b200 = gpu_compute("B200").kernels
    elements = 8192.0 ** 2
    nbytes = quantize_bytes("blackwell", "mxfp8") * elements
    assert nbytes == pytest.approx(272.6e6, rel=1e-3)
    assert quantize_s(b200, nbytes, "mxfp8", "blackwell") == pytest.approx(52.34e-6, rel=1e-3)
    assert 1 / 1.45 == pytest.approx(0.679, abs=0.05)  # the B300 guide's overhead, as a fraction of the HBM rate
    assert quantize_s(b200, nbytes, "current", "blackwell") == memory_s(b200, nbytes)
    h100 = gpu_compute("H100").kernels
    assert quantize_s(h100, nbytes, "blockwise", "hopper") == memory_s(h100, nbytes)


def _benchmark():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    return training_accuracy


def test_each_published_fp8_rows_recipe():
    """The recipe each FP8 row ran, as the fit reads it. Megatron-Bridge's 25.09 DeepSeek-V3 H100 row prints 1,297
    tokens/s and '338 (330)' TFLOP/s: the parenthesised figure is the 1x128 / 128x128 block-scaled run (the table's
    footnote), so the row's tokens/s is current scaling's (NVIDIA-NeMo/Megatron-Bridge@0a25f911
    docs/performance-summary-archive.md, 25.09 DGX-H100 table). The Megatron-MoE-ModelZoo Mixtral row ran
    --fp8-recipe blockwise; every MXFP8 row says so in its note and runs on Blackwell."""
    ta = _benchmark()
    rows = {r["run_id"]: r for r in csv.DictReader(open(ROOT / "data/reference/training_runs_published.csv"))}
    assert ta.fp8_recipe(rows["mb2509_h100_deepseekv3"]) == "current"
    assert ta.fp8_recipe(rows["mcore_h100_mixtral_8x22b_fp8blockwise"]) == "blockwise"
    gens = {"H100": "hopper", "H200": "hopper", "H800": "hopper", "B200": "blackwell", "B300": "blackwell",
            "GB200": "blackwell", "GB300": "blackwell"}
    for f in ("training_runs_published.csv", "training_runs_holdout.csv"):
        for r in csv.DictReader(open(ROOT / "data/reference" / f)):
            rec = ta.fp8_recipe(r) if r["precision"] == "fp8" else None
            if rec == "mxfp8":
                assert gens[r["gpu"]] == "blackwell", r["run_id"]
            if rec == "blockwise":
                assert gens[r["gpu"]] == "hopper", r["run_id"]


def test_the_tp_overlapped_gemms_pay_the_recipe_too():
    """The GEMM seconds a column-parallel layer's TP collectives overlap with (tp_paired_gemm_s) are the same GEMMs
    at the recipe's time ratio: block-wise on H100 1.239 x current scaling's, BF16 alike either way."""
    from dataclasses import replace
    from topo.training.operators import tp_paired_gemm_s
    gpu = gpu_compute("H100")
    M, N, K = 8192.0, 4096.0, 2048.0
    g = replace(Op("qkv", "attention", "gemm", 2 * M * N * K, 0.0, M, N, K, 1.0, True), tp_role="ag")
    cur, blk = (tp_paired_gemm_s(g, gpu, "fp8", r) for r in ("current", "blockwise"))
    assert set(cur) == {"ag_fprop", "ag_dgrad", "ag_wgrad"} and cur.keys() == blk.keys()
    ratio = fp8_recipe_costs("blockwise", "hopper")[0]
    assert all(blk[k] == pytest.approx(ratio * cur[k], rel=1e-12) for k in cur)
    assert tp_paired_gemm_s(g, gpu, "bf16", "blockwise") == tp_paired_gemm_s(g, gpu, "bf16")


def test_a_grouped_gemms_amax_pass_is_charged_in_bytes_and_kernels_alike():
    """Per-tensor current scaling before TE 2.7 (``fp8_amax_pass``; the recipe unrecorded or ``current``): each
    expert's cast reads its rows once more for the amax in kernels of its own. The bytes (:func:`op_time_s`) carried
    the read for a grouped GEMM whatever its ``current_scaling`` flag; the kernels counted one cast per expert
    unless the flag was set (rev42): now the amax, scale and cast kernels either way, and the read once."""
    from dataclasses import replace
    from topo.training.kernels import quantize_kernels
    from topo.training.operators import kernels_launched
    gpu = gpu_compute("H100")
    experts, M, N, K = 8.0, 1024.0, 4096.0, 2048.0
    fc1 = Op("fc1", "moe", "gemm", 2 * M * N * K * experts, 0.0, M, N, K, experts, True, grouped=True,
             launches=experts)
    cur = quantize_kernels()["current"]
    assert cur > 1
    for b in (False, True):
        gemms = 2 if b else 1
        assert kernels_launched(fc1, "fp8", b, amax_pass=True) == experts * gemms + experts * cur
        assert kernels_launched(replace(fc1, current_scaling=True), "fp8", b) == experts * gemms + experts * cur
        assert kernels_launched(fc1, "fp8", b) == experts * gemms + experts
        # the amax read is charged once: the flag and amax_pass together read the rows as often as amax_pass alone
        both = op_time_s(replace(fc1, current_scaling=True), gpu, "fp8", backward=b, amax_pass=True)
        assert both == pytest.approx(op_time_s(fc1, gpu, "fp8", backward=b, amax_pass=True), rel=1e-12)
