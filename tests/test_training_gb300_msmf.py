"""GB300's sustained (power-saturated) GEMM rate of its own (kernels.toml [sustained_gemm]): Azure's cuBLASLt FP8
benchmark on ND GB300 v6 after 10,000 warm-up iterations, against the Blackwell generation's sustained-over-burst
ratio that GB200 and B200 keep."""

import tomllib
from dataclasses import replace

import pytest

from topo.resources import data_dir
from topo.training.gpus import gpu_compute
from topo.training.kernels import _measured_sustained, attention_rate_flops, gemm_s

KERNELS = tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))

# Azure AI-benchmarking-guide, Azure_Results/ND_GB300_v6_results.md (egmsft/AI-benchmarking-guide@18e80a218dc3):
# superbench cublaslt_gemm, FP8 e4m3, 10,000 warm-up and 1,000 timed iterations, TFLOP/s
AZURE_GB300_FP8 = {(8192, 8192, 8192): 3286.3, (16384, 16384, 16384): 3308.5, (32768, 32768, 32768): 3271.3,
                   (6144, 12288, 12288): 3279.5}
# the same benchmark on ND GB200 v6 (ND_GB200_v6_results.md@4c986ce24091, CUDA 12.8)
AZURE_GB200_FP8 = {(8192, 8192, 8192): 2781.5, (16384, 16384, 16384): 2819.5, (32768, 32768, 32768): 2755.3,
                   (6144, 12288, 12288): 2798.7}


def _sustained_rate(km, shape) -> float:
    """The model's large-GEMM FP8 rate at the sustained clock, before the training frameworks' fraction."""
    m, n, k = shape
    return 2.0 * m * n * k / gemm_s(km, m, n, k, "fp8", efficiency=km.burst["fp8"] * km.sustained)


def test_gb300_entry_is_azures_sustained_table():
    rows = KERNELS["sustained_gemm"]["GB300"]["fp8"]
    assert {tuple(r[1:]): r[0] for r in rows} == AZURE_GB300_FP8
    # a cloud's benchmark of its own VMs, committed to a fork of its guide: printed by someone other than the GPU's
    # vendor or the kernel's authors, so secondary (kernels.toml's header), as its own source says
    assert KERNELS["sustained_gemm"]["status"] == "secondary"
    assert "(secondary:" in KERNELS["sustained_gemm"]["source"]
    assert "ND_GB300_v6_results.md@18e80a218dc3" in KERNELS["sustained_gemm"]["source"]


def test_gb300_model_gives_azures_sustained_fp8_rates():
    # the ratio is the one at which the tile model gives Azure's rates at their own shapes, in the median: each
    # within 4% (the model's 32768^3 above, as on GB200); with Blackwell's ratio (GB200's) every one would be 11-16%
    # under
    gb300 = gpu_compute("GB300").kernels
    errors = sorted(_sustained_rate(gb300, s) / (r * 1e12) - 1 for s, r in AZURE_GB300_FP8.items())
    assert abs((errors[1] + errors[2]) / 2) < 1e-6  # the median of four
    assert all(abs(e) < 0.04 for e in errors), errors
    generic = replace(gb300, sustained=KERNELS["sustained"]["blackwell"])
    assert all(_sustained_rate(generic, s) < 0.89 * r * 1e12 for s, r in AZURE_GB300_FP8.items())
    # FP8's rate is pinned by the measurement, whatever MAMF GB300 borrows (GB200's): ratio x burst is what counts
    assert gb300.sustained * gb300.burst["fp8"] == pytest.approx(0.9557 * gb300.burst["fp8"], rel=1e-3)


def test_same_calibration_on_gb200_gives_blackwells_ratio():
    # Azure's GB200 table through the same calibration gives 0.812, Blackwell's published 0.815 (B200 all-8 MSMF /
    # MAMF, stas00 fast-mamf 1426.4 / 1751.2) within 0.5%: the benchmark and the model agree where both are known
    gb200 = gpu_compute("GB200").kernels
    rows = [[r, *s] for s, r in AZURE_GB200_FP8.items()]
    ratio = _measured_sustained(gb200, gb200.burst, "GB200", {"fp8": rows})
    assert ratio == pytest.approx(KERNELS["sustained"]["blackwell"], rel=0.005)
    assert gb200.sustained == KERNELS["sustained"]["blackwell"]  # GB200 itself keeps the generation's
    # GB300 / GB200 as the model has it: Azure's 1.17-1.19 at each shape
    gb300 = gpu_compute("GB300").kernels
    ratios = [AZURE_GB300_FP8[s] / AZURE_GB200_FP8[s] for s in AZURE_GB300_FP8]
    assert 1.17 < min(ratios) and max(ratios) < 1.19
    assert gb300.sustained / gb200.sustained == pytest.approx(sorted(ratios)[1], abs=0.01)


def test_gb300_sustained_clock_scales_its_attention_and_bf16():
    # one sustained clock for every kernel: GB300's cuDNN table (hdim 128 causal 4k forward 1,703 TFLOP/s of 2,500,
    # kernels.toml [attention.GB300]) and its BF16 GEMMs (the FP8 ratio: B200's saturated clocks 1,339 / 1,331 MHz)
    gb300, gb200 = gpu_compute("GB300").kernels, gpu_compute("GB200").kernels
    r = attention_rate_flops(gb300, 128, 4096, True, False)
    assert r == pytest.approx(1703 / 2500 * gb300.attention_scale * gb300.sustained * 2500e12, rel=1e-9)
    assert gb300.sustained > 0.95
    assert gb300.efficiency["bf16"] / gb200.efficiency["bf16"] == pytest.approx(
        gb300.sustained / gb200.sustained, rel=1e-9)


def test_measured_sustained_rejects_rates_beyond_the_burst():
    gb300 = gpu_compute("GB300").kernels
    with pytest.raises(ValueError, match="sustained_gemm.X.fp8: the measured rates are beyond"):
        _measured_sustained(gb300, gb300.burst, "X", {"fp8": [[5000.0, 16384, 16384, 16384]]})
    with pytest.raises(ValueError, match="no mamf.X.bf16"):
        _measured_sustained(gb300, {"fp8": 0.7}, "X", {"bf16": [[1000.0, 16384, 16384, 16384]]})
