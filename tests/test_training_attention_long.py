"""Fused attention past 16K keys (issue 29, docs/calibration-findings.md section 169): topo's tables stop at 16,384 keys
and hold the 16K rate above it (``kernels.toml``: Hopper's ``[attention]``, Blackwell's ``[attention.blackwell]``
note). The published cuDNN figures past 16K do not rise above their 16K value by more than a few percent on Hopper and
fall on GB200, so the flat extension never prices a long block slower than cuDNN publishes it. These tests hold the
published long-length points and fail if topo's long-block rate moves off its 16K value (a rising extrapolation would
hide the long-context rows' residual in the kernel rate; a falling one would price them slower still).

Sources (TFLOP/s, hdim 128, bfloat16, FlashAttention's FLOP convention: causal counts half the square, backward
2.5 x forward; each checked on its own milliseconds below):

- cuDNN 9.1.0, NVIDIA/cudnn-frontend@b740542 ``benchmark/benchmark_results.csv`` (16 heads, batch x length = 16K or
  more, forward, causal): 586.8 / 577.3 / 567.0 at 16K / 32K / 64K.
- cuDNN 9.4.0, NVIDIA/cudnn-frontend@61100c8 ``benchmark/benchmark_results.csv`` (FE 1.7.0 release notes: "benchmark
  numbers with cudnn 9.4.0"): causal forward 649.99 / 636.08 / 631.20, backward 488.56 / 504.14 / 508.07 at 16K / 32K
  / 64K.
- cuDNN 9.19, H200, NVIDIA/cudnn-frontend@df73764 ``benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/
  llama3.1_20260227_034703.csv`` (64 / 8 heads, batch 1, causal): forward 673 / 688, backward 579 / 581 at 16K / 32K.
- cuDNN 9.22, GB200, NVIDIA/cudnn-frontend@3929da2ef4c1 ``benchmark/sdpa_benchmark_training/results/llama3.1/gb200/
  llama3.1_20260424_100750.csv`` (64 / 8 heads, batch 2, causal): forward 1,708 / 1,622, backward 1,328 / 1,226 at
  16K / 32K; full forward 1,697 / 1,634, backward 1,374 / 1,262.
"""

import tomllib
from pathlib import Path

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import attention_rate_flops

HOPPER_CAUSAL = {  # version: {pass: {keys: TFLOP/s}}
    "9.1.0": {"fwd": {16384: 586.8, 32768: 577.3, 65536: 567.0}},
    "9.4.0": {"fwd": {16384: 649.99, 32768: 636.08, 65536: 631.20},
              "bwd": {16384: 488.56, 32768: 504.14, 65536: 508.07}},
    "9.19": {"fwd": {16384: 673.0, 32768: 688.0}, "bwd": {16384: 579.0, 32768: 581.0}},
}
GB200 = {  # cuDNN 9.22: (causal, pass): {keys: TFLOP/s}
    (True, "fwd"): {16384: 1708.0, 32768: 1622.0}, (True, "bwd"): {16384: 1328.0, 32768: 1226.0},
    (False, "fwd"): {16384: 1697.0, 32768: 1634.0}, (False, "bwd"): {16384: 1374.0, 32768: 1262.0},
}
RISE = 0.05
"""The most any published Hopper set rises past its own 16K value (9.4.0's causal backward at 64K, +4.0%)."""


def flops(keys: int, heads: int, batch: int, causal: bool, backward: bool) -> float:
    """FlashAttention's convention (cudnn-frontend's ``benchmark_flash_attention.py`` ``flops``): ``4 b s^2 h d``,
    halved when causal, times 2.5 backward; hdim 128."""
    f = 4 * batch * keys ** 2 * heads * 128 / (2 if causal else 1)
    return f * (2.5 if backward else 1.0)


def test_the_published_rates_are_the_sources_own_milliseconds():
    """The figures above are what the sources' times give (cuDNN 9.19 on H200: 6.531 / 19.002 ms at 16K causal and
    25.566 / 75.688 ms at 32K; 9.22 on GB200: 5.150 / 16.554 ms at 16K causal, 21.692 / 71.756 ms at 32K)."""
    h200 = {(16384, False): 6.531, (16384, True): 19.002, (32768, False): 25.566, (32768, True): 75.688}
    for (keys, bwd), ms in h200.items():
        rate = flops(keys, 64, 1, True, bwd) / (ms * 1e-3) / 1e12
        assert rate == pytest.approx(HOPPER_CAUSAL["9.19"]["bwd" if bwd else "fwd"][keys], rel=0.002)
    gb200 = {(16384, False): 5.150, (16384, True): 16.554, (32768, False): 21.692, (32768, True): 71.756}
    for (keys, bwd), ms in gb200.items():
        rate = flops(keys, 64, 1, True, bwd) / (ms * 1e-3) / 1e12  # 64 heads x batch 2 = 128 x batch 1 / 2
        assert 2 * rate == pytest.approx(GB200[(True, "bwd" if bwd else "fwd")][keys], rel=0.002)


@pytest.mark.parametrize("keys", [32768, 65536, 131072])
@pytest.mark.parametrize("gpu", ["H100", "GB200"])
def test_a_long_block_runs_at_the_16k_rate(gpu, keys):
    """Flat past the table: a 32K-128K block (a CP rank's causal diagonal, a long sequence without CP) runs at
    16K's rate, every mask and pass, at the table's own cuDNN and at an older one."""
    k = gpu_compute(gpu).kernels
    for causal in (True, False):
        for backward in (False, True):
            for cudnn in ("", "9.11"):
                long = attention_rate_flops(k, 128, keys, causal, backward, cudnn=cudnn)
                at16 = attention_rate_flops(k, 128, 16384, causal, backward, cudnn=cudnn)
                assert long == pytest.approx(at16, rel=1e-12), (causal, backward, cudnn)


def test_no_published_hopper_set_rises_past_16k_by_more_than_a_few_percent():
    """Every published Hopper cuDNN set (9.1.0, 9.4.0, 9.19) stays within :data:`RISE` of its own 16K rate up to
    64K: the flat extension is within their spread."""
    for version, passes in HOPPER_CAUSAL.items():
        for pss, curve in passes.items():
            for keys, rate in curve.items():
                assert abs(rate / curve[16384] - 1) <= RISE, (version, pss, keys)


def test_gb200_past_16k_is_no_faster_than_topo_prices_it():
    """cuDNN 9.22 on GB200 at 32K runs 4-8% under its 16K rate, each mask and pass: topo's flat rate is at or
    above it, so a long block on Blackwell is not priced slower than published."""
    k = gpu_compute("GB200").kernels
    for (causal, pss), curve in GB200.items():
        backward = pss == "bwd"
        published = curve[32768] / curve[16384]
        assert 0.90 < published < 0.97, (causal, pss)
        mine = attention_rate_flops(k, 128, 32768, causal, backward) / attention_rate_flops(k, 128, 16384, causal,
                                                                                               backward)
        assert mine >= published, (causal, pss)


CAUSAL_OVER_FULL_BWD_94 = {4096: 438.45 / 535.06, 8192: 461.89 / 536.95, 16384: 488.56 / 546.53}
"""cuDNN 9.4.0's causal over full backward, hdim 128 (NVIDIA/cudnn-frontend@61100c8 benchmark_results.csv): 0.8194,
0.8602, 0.8939; it keeps rising past 16K (504.14 / 546.31 = 0.923 at 32K, 508.07 / 549.29 = 0.925 at 64K), where
topo holds 16K's rate flat."""


def test_hopper_causal_backward_is_the_full_curve_times_cudnns_causal_ratio():
    """Hopper's table backward is the full mask's (FlashAttention-3's release ran no causal backward:
    Dao-AILab/flash-attention@74b0761f ``hopper/flash_bwd_launch_template.h``); the causal backward is that curve
    times cuDNN 9.4.0's causal / full at the same length, 4K's below 4K, every head dim alike. Closed form at
    hdim 128, 16K: 516 x 0.8939 = 461 TFLOP/s; 8K: 518 x 0.8602 = 446; 2K: 465 x 0.8194 = 381."""
    attn = tomllib.loads((Path(__file__).resolve().parents[1] / "topo" / "data" / "compute" / "kernels.toml")
                        .read_text())["attention"]
    assert attn["bwd_causal_status"] == "derived"
    for d, full in attn["bwd"].items():
        for keys, f, c in zip(attn["seq"], full, attn["bwd_causal"][d]):
            ratio = CAUSAL_OVER_FULL_BWD_94[max(4096, keys)]
            assert c == round(f * ratio), (d, keys)
    h = gpu_compute("H100").kernels
    for keys, rate in ((16384, 461), (8192, 446), (2048, 381), (131072, 461)):
        assert attention_rate_flops(h, 128, keys, True, True) == pytest.approx(rate * 1e12 * h.sustained)
    assert attention_rate_flops(h, 128, 16384, False, True) == pytest.approx(516e12 * h.sustained)
    # the causal backward runs slower than the full one at every published length, less so as the length grows
    ratios = [CAUSAL_OVER_FULL_BWD_94[k] for k in sorted(CAUSAL_OVER_FULL_BWD_94)]
    assert all(r < 1 for r in ratios) and ratios == sorted(ratios)


B200_9102 = {  # cuDNN 9.10.2 on B200 through PyTorch's SDPA, causal, hdim 128, 128 / 8 heads, batch 1: keys -> ms
    "fwd": {16384: 6.517, 32768: 24.611, 65536: 97.192, 131072: 423.196},
    "bwd": {16384: 20.498, 32768: 78.227, 65536: 332.507, 131072: 1375.057},
}
"""NVIDIA/cudnn-frontend@9793df5 ``benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv``
(``pyt_cudnn`` rows; README: PyTorch 25.06 container, cuDNN 9.10.2; the harness pauses a hundredth of each pass's
time, at most 1 s, after it, "to avoid GPU throttling"): the one published causal hdim-128 set that reaches 128K keys.
Its file's rates: forward 1,350 / 1,430 / 1,448 / 1,330, backward 1,073 / 1,124 / 1,058 / 1,024 TFLOP/s."""


def test_b200_to_128k_keeps_its_16k_training_rate_within_a_few_percent():
    """The 128K point on Blackwell: each pass from its milliseconds (closed form, FlashAttention's convention) is the
    file's rate, and a training step's attention (forward + backward, 1 : 2.5 in FLOPs) runs within 6% of its 16K rate
    at 32K-128K (+5.2% / +0.6% / -3.9%), the flat extension topo prices, though the single passes move -5% to +7%
    (backward 0.954 at 128K, forward 1.073 at 64K)."""
    file_rates = {"fwd": {16384: 1349.763, 32768: 1429.616, 65536: 1448.032, 131072: 1330.234},
                  "bwd": {16384: 1072.799, 32768: 1124.432, 65536: 1058.154, 131072: 1023.503}}
    rate = {p: {k: flops(k, 128, 1, True, p == "bwd") / (ms * 1e-3) / 1e12 for k, ms in c.items()}
            for p, c in B200_9102.items()}
    for p, curve in rate.items():
        for k, r in curve.items():
            assert r == pytest.approx(file_rates[p][k], rel=1e-3), (p, k)
    step = {k: 3.5 * flops(k, 128, 1, True, False) / ((B200_9102["fwd"][k] + B200_9102["bwd"][k]) * 1e-3)
            for k in B200_9102["fwd"]}
    moves = {k: step[k] / step[16384] - 1 for k in step}
    assert moves == pytest.approx({16384: 0.0, 32768: 0.052, 65536: 0.006, 131072: -0.039}, abs=0.002)
    assert max(abs(m) for m in moves.values()) < 0.06
    k = gpu_compute("B200").kernels
    for keys in (32768, 65536, 131072):
        assert attention_rate_flops(k, 128, keys, True, True) == attention_rate_flops(k, 128, 16384, True, True)
