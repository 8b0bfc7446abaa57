"""NVFP4 training (Transformer Engine's NVFP4BlockScaling, ``fp8_recipe = "nvfp4"``): the FP4 peaks of the
datasheets, the GEMM ratio from TE's B300 GEMM guide, the quantisation's bytes from TE's NVFP4 quantizer, the
refusal on GPUs without FP4 tensor cores, and Megatron-Bridge 26.04.01's four dense NVFP4 rows as printed
(docs/calibration-findings.md section 397)."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from published_setups import assert_printed_row
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.kernels import fp8_recipe_costs, gemm_s, recipe_gemm_ratio, recipe_precision
from topo.training.operators import Op, op_time_s, quantize_bytes

ROOT = Path(__file__).resolve().parents[1]
HOLDOUT = ROOT / "data" / "reference" / "training_runs_holdout.csv"


@pytest.mark.parametrize("name,dense_TFLOPs", [
    ("B200", 144e3 / 8 / 2),     # HGX B200: FP4 144 PFLOPS per 8 GPUs with sparsity
    ("GB200", 1440e3 / 72 / 2),  # GB200 NVL72: FP4 1,440 PFLOPS per 72 GPUs with sparsity
    ("B300", 105e3 / 8),         # HGX B300: 105 PFLOPS dense per 8 GPUs (glennklockwood.com's table)
    ("GB300", 1080e3 / 72),      # GB300 NVL72: 1,080 PFLOPS dense per 72 GPUs ('Inside NVIDIA Blackwell Ultra': 15)
])
def test_fp4_peaks_are_the_datasheets(name, dense_TFLOPs):
    """Each Blackwell GPU's dense FP4 peak is its datasheet's (sparse figures halved); Blackwell Ultra's is three
    times its FP8, Blackwell's twice."""
    gpu = gpu_compute(name)
    assert gpu.peak_flops("fp4") == pytest.approx(dense_TFLOPs * 1e12)
    assert gpu.peak_flops("fp4") / gpu.peak_flops("fp8") == pytest.approx(2.0 if name in ("B200", "GB200") else 3.0,
                                                                          rel=0.03)


def test_hopper_has_no_fp4_rate():
    with pytest.raises(TopoError, match="no FP4 tensor cores"):
        gpu_compute("H100").peak_flops("fp4")


def test_nvfp4_gemm_ratio_is_the_guides_b300_layer():
    """TE's GEMM guide (NVIDIA/TransformerEngine@8f2e63578e10 docs/examples/gemm_profiling/gemm_profiling.rst,
    B300, pre-quantized): NVFP4 3.764 ms a layer against current scaling's 6.812 ms, the layer's twelve GEMMs (its
    'Fprop Shapes' QKV 15872x4096x12288, Attn Out 15872x4096x4096, MLP Up 15872x4096x16384, MLP Down
    15872x16384x4096 as M x K x N, each also as dgrad and wgrad). Priced on the FP4 tiles at the FP4 peak, those
    twelve take 0.5526 of per-tensor FP8's time on every Blackwell GPU (walk39, section 407: at the limit's factor
    they took 0.615); a larger GEMM takes less than that share (the tiles' fixed cost a smaller part), a smaller
    one more."""
    share = 3.764 / 6.812
    fprop = [(15872, 12288, 4096), (15872, 4096, 4096), (15872, 16384, 4096), (15872, 4096, 16384)]  # M, N, K
    for name in ("B200", "GB200", "B300", "GB300"):
        k = gpu_compute(name).kernels
        ratio = recipe_gemm_ratio(k, "nvfp4", "blackwell")

        def layer_s(precision):
            return sum(gemm_s(k, *dims, precision) for m, n, kk in fprop for dims in ((m, n, kk), (m, kk, n), (n, kk, m)))

        assert ratio * layer_s("fp4") / layer_s("fp8") == pytest.approx(share, rel=1e-4), name  # the data file stores 0.5526
        big, small = 16384.0, 4096.0
        assert 0.9 * share < ratio * gemm_s(k, big, big, big, "fp4") / gemm_s(k, big, big, big, "fp8") < share, name
        assert share < ratio * gemm_s(k, small, small, small, "fp4") / gemm_s(k, small, small, small, "fp8"), name
    assert recipe_gemm_ratio(k, "mxfp8", "blackwell") == fp8_recipe_costs("mxfp8", "blackwell")[0]
    assert recipe_precision("nvfp4") == "fp4" and recipe_precision("mxfp8") == recipe_precision(None) == "fp8"


def test_nvfp4_quantisation_bytes():
    """One NVFP4 cast of a BF16 input (TE quantizer.cpp NVFP4Quantizer::quantize_impl): the amax kernel's read (2),
    then the fused cast's read (2) and both E2M1 copies (0.5 each) with an E4M3 scale per 16 (1/16 each)."""
    assert quantize_bytes("blackwell", "nvfp4") == pytest.approx(2 + 2 + 2 * (0.5 + 1 / 16))


def test_a_linear_layer_runs_its_gemms_at_fp4():
    """Under nvfp4 a linear layer's forward is its FP4 GEMM at the recipe's ratio plus its cast at HBM rate; an
    attention matmul (not linear) stays BF16."""
    gpu = gpu_compute("GB300")
    k = gpu.kernels
    M, N, K = 8192.0, 8192.0, 8192.0
    lin = Op("fc", "mlp", "gemm", 2 * M * N * K, 0.0, M, N, K, 1.0, True)
    t = op_time_s(lin, gpu, "fp8", fp8_recipe="nvfp4")
    gemm = recipe_gemm_ratio(k, "nvfp4", "blackwell") * gemm_s(k, M, N, K, "fp4")
    assert gemm < t < gemm * 1.5
    assert t < op_time_s(lin, gpu, "fp8", fp8_recipe="mxfp8")
    attn = Op("scores", "attention", "gemm", 2 * M * N * K, 0.0, M, N, K, 1.0, False)
    assert op_time_s(attn, gpu, "fp8", fp8_recipe="nvfp4") == op_time_s(attn, gpu, "fp8", fp8_recipe="mxfp8")


def test_nvfp4_refused_on_hopper():
    """One line, non-zero exit, naming the key, the value and what is allowed."""
    out = subprocess.run([sys.executable, "-m", "topo", "train", "dgx-h100-superpod", "--model", "llama3-8b",
                          "--tp", "1", "--global-batch", "2048", "--precision", "fp8", "--layout",
                          'fp8_recipe="nvfp4"'], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "nvfp4 needs FP4 tensor cores" in out.stderr and "allowed: delayed, current, blockwise" in out.stderr


NVFP4_2604_01 = {  # run id: (model, system, GPUs, GBS, MBS, seq, TP/PP/CP/VP/EP, tokens/s/GPU, model TFLOP/s/GPU)
    "mb260401_gb300_llama3_70b_nvfp4": ("llama3-70b", "DGX-GB300", 64, 256, 1, 8192, "1/4/1/5/1", 7296, 3253),
    "mb260401_gb200_llama3_70b_nvfp4": ("llama3-70b", "DGX-GB200", 64, 256, 1, 8192, "2/4/1/5/1", 4864, 2202),
    "mb260401_gb300_llama31_405b_nvfp4": ("llama3-405b", "DGX-GB300", 256, 1536, 1, 8192, "4/8/1/4/1", 1440, 3653),
    "mb260401_gb200_llama31_405b_nvfp4": ("llama3-405b", "DGX-GB200", 256, 1536, 1, 8192, "4/16/1/8/1", 1184, 2960),
}


def test_megatron_bridge_nvfp4_rows_are_the_table():
    """The 26.04.01 section's four dense NVFP4 rows (performance-summary-archive.md @4ab94dfa) are held out with
    their printed layout and throughput and ``fp8_recipe = nvfp4``, FP8 weights not gathered."""
    with open(HOLDOUT, newline="", encoding="utf-8") as f:
        rows = {r["run_id"]: r for r in csv.DictReader(f)}
    # nvfp4c (section 405) added Nemotron 3 Super's 15 NVFP4 rows (tests/test_module_recipes_nvfp4c.py)
    # data128 added Together AI's B200 Llama 3.1 70B NVFP4 run of dgxc v26.02 (tests/test_training_runs_data.py
    # test_data128_together_llama_rows_are_its_table)
    assert {k for k, r in rows.items() if r["fp8_recipe"] == "nvfp4" and r["model"].startswith("llama")
            and not k.startswith("together")} == set(NVFP4_2604_01)
    for rid, (model, system, gpus, gbs, mbs, seq, layout, tokens, tflops) in NVFP4_2604_01.items():
        r = rows[rid]
        assert_printed_row(r, rid, model, system, "NeMo 26.04.01", (gpus, gbs, mbs, seq), layout, tokens, tflops,
                           6e-4)
        assert r["precision"] == "fp8" and r["fp8_param_gather"] == "0", rid


@pytest.mark.parametrize("extra,message", [
    ("fp8_param_gather=true", "fp8_param_gather: true gathers FP8 weights, which fp8_recipe nvfp4 keeps in BF16"),
    ('attention_fp8="fp8"', "attention_fp8: fp8 quantises attention, which Transformer Engine's NVFP4 recipe"),
])
def test_nvfp4_refuses_what_te_does_not_run(extra, message):
    """TE's NVFP4BlockScaling sets fp8_dpa False (attention BF16); an FP4 weight gather is not modelled."""
    out = subprocess.run([sys.executable, "-m", "topo", "train", "gb200-nvl72-superpod", "--model", "llama3-8b",
                          "--tp", "1", "--global-batch", "2048", "--precision", "fp8", "--layout",
                          f'fp8_recipe="nvfp4",{extra}'], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
