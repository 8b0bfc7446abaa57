"""Per-tensor FP8 on Blackwell against Transformer Engine's own GEMM profile of a 5B layer on B300.

Source: NVIDIA/TransformerEngine@1609c890e (PR #2863, 2026-06-01; unchanged at d0067d0d)
docs/examples/gemm_profiling/gemm_profiling.rst, "GEMM Benchmark (Model Config Mode) on NVIDIA B300 SXM6 AC" and
"Worked Example: 5B Model on B300" (CUDA events, 10 warm-up and 100 timed iterations, benchmarks/gemm/benchmark_gemm.py
at the same commit): hidden 4,096, intermediate 16,384, M = 31 x 512 = 15,872 tokens; the twelve GEMMs of a layer
(Fprop ``(M, K, N)``, Dgrad ``(M, N, K)``, Wgrad ``(K, M, N)``), per layer:

- pre-quantised (``--pre-quantize``, the GEMM kernels only): BF16 13.102 ms, FP8 current scaling 6.812 ms (the
  per-tensor kernel, which delayed scaling runs too: "recipes that differ only in how scaling factors are computed
  ... collapse to the same kernel");
- FP8 delayed scaling, which always casts (its amax history needs dynamic quantisation): 7.802 ms (autocast run)
  and 8.123 ms (the pre-quantised run), against BF16's 12.758 ms in autocast.

The same guide's H200 layer is ``test_training_fp8_hopper_te_profile.py``'s. On Blackwell a per-tensor FP8 input
keeps no transposed copy (``non_tn_fp8_gemm_supported``: compute capability 10 and up, NVIDIA/TransformerEngine@bee4649c
``transformer_engine/pytorch/csrc/extensions/util.cpp`` and ``quantizer.cpp`` line 106), so a delayed cast reads BF16
and writes one FP8 copy, as does the weight's, which the benchmark casts every call (``te.Linear`` without
``is_first_microbatch``) and a training step caches (``fp8_weight_cast``): calibration-findings section 451.
"""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import gemm_s, memory_s
from topo.training.operators import Op, op_time_s

M, H, QKV, FFN = 31 * 512, 4096, 3 * 4096, 16384
CALLS = [(M, H, QKV), (M, H, H), (M, H, FFN), (M, FFN, H),     # Fprop (M, K, N)
         (M, QKV, H), (M, H, H), (M, FFN, H), (M, H, FFN),     # Dgrad
         (H, M, QKV), (H, M, H), (H, M, FFN), (FFN, M, H)]     # Wgrad
PREQUANT_MS = {"bf16": 13.102, "fp8": 6.812}
DELAYED_MS = (7.802, 8.123)  # autocast run, "pre-quantised" run (delayed scaling casts in both)
WEIGHT_CAST_BYTES = 2 + 1  # BF16 read, one FP8 copy written (no transpose from sm_100)


def _layer_ms(gpu, precision, delayed_cast):
    km = gpu.kernels
    total = 0.0
    for m, k, n in CALLS:
        if precision == "bf16" or not delayed_cast:
            total += gemm_s(km, m, n, k, precision) + km.launch_gpu_s
            continue
        op = Op("linear", "mlp", "gemm", 2.0 * m * n * k, 0.0, m=m, n=n, k=k, linear=True)
        total += op_time_s(op, gpu, "fp8", fp8_recipe="delayed")  # the GEMM and its input's cast
        total += memory_s(km, WEIGHT_CAST_BYTES * k * n) + km.launch_gpu_s  # the weight's, every call here
    return total * 1e3


def test_delayed_scaling_casts_of_a_b300_layer_are_within_te_s_two_runs():
    """A delayed-scaling layer's casts (its FP8 time with the input and weight casts less the kernels alone) lie
    between the guide's two delayed runs less the per-tensor kernels: 0.990 and 1.311 ms."""
    g = gpu_compute("B300")
    casts = _layer_ms(g, "fp8", True) - _layer_ms(g, "fp8", False)
    lo, hi = (t - PREQUANT_MS["fp8"] for t in DELAYED_MS)
    assert lo <= casts <= hi


@pytest.mark.xfail(strict=True, reason="calibration-findings section 451: topo's Blackwell FP8 GEMMs gain 1.984x "
                   "over BF16 at this layer, TE measured 1.923x on B300 (+3.2%); the gain is set by the fitted "
                   "blackwell_bf16 / blackwell_fp8 fractions and the MAMF table, which no source here replaces")
def test_fp8_gemms_gain_over_bf16_the_ratio_te_measured_on_blackwell():
    """The layer's BF16 / FP8 GEMM time ratio within 3% of the pre-quantised 13.102 / 6.812 = 1.923."""
    g = gpu_compute("B300")
    bf16, fp8 = _layer_ms(g, "bf16", False), _layer_ms(g, "fp8", False)
    assert bf16 / fp8 == pytest.approx(PREQUANT_MS["bf16"] / PREQUANT_MS["fp8"], rel=0.03)


def test_fp8_gemms_gain_over_bf16_on_blackwell_no_less_than_te_measured():
    """topo's Blackwell FP8 gain at the layer is not below TE's (the miss is one-sided: the pair tables' Blackwell
    FP8 runs come out faster against their BF16 twins than measured), and within 5% of it."""
    g = gpu_compute("B300")
    ratio = _layer_ms(g, "bf16", False) / _layer_ms(g, "fp8", False)
    measured = PREQUANT_MS["bf16"] / PREQUANT_MS["fp8"]
    assert measured <= ratio <= measured * 1.05
