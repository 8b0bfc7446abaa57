"""Sliding-window attention from its tiles (topo/training/attention_tiles.py): the scores a tiled kernel computes
for a window against the band it needs, and the window's rate from a table's full and causal curves, checked
against cuDNN's published sliding-window measurements that the curves were not read from."""

import math
import tomllib
from pathlib import Path

import pytest

from topo.training.attention_tiles import computed_over_useful, fixed_keys, key_tiles, window_keys, window_rate
from topo.training.gpus import gpu_compute
from topo.training.kernels import attention_rate_flops
from topo.training.model import load_model
from topo.training.operators import block_ops, op_time_s
from topo.training.parallel import make_layout

ROOT = Path(__file__).resolve().parents[1]
ATTN = tomllib.loads((ROOT / "topo" / "data" / "compute" / "kernels.toml").read_text())["attention"]


def test_a_window_computes_the_key_tiles_it_enters():
    """A 128-key window with 128 x 128 tiles: each query tile enters its diagonal tile and the one before, so the
    kernel computes twice the band. Exact count at GPT-OSS's 4,096 tokens (the band as cudnn-frontend's benchmark
    counts it: 128 x 129 / 2 + 3,968 x 128 scores per head) against the closed form ``1 + (tq + tk - g) / w``.
    Other kernels' tiles: FlashAttention-3 at head dim 64 under a local mask runs 192 x 160
    (Dao-AILab/flash-attention@07602adc hopper/tile_size.h, "Benefits SWA when window length <= 128"): 3.5x;
    FlashAttention-4's two-stage SM100 forward, 256 query rows per CTA over 128-key tiles: 3x."""
    computed, useful = key_tiles(4096, 128, 128, 128)
    assert useful == 128 * 129 / 2 + (4096 - 128) * 128
    assert computed == 128 * 128 * (1 + 2 * 31)  # the first tile enters one key tile, the other 31 two
    assert computed / useful == pytest.approx(computed_over_useful(128, 128, 128), rel=1e-3)
    assert computed_over_useful(128, 128, 128) == 2.0
    for tq, tk, want in ((192, 160, 3.5), (256, 128, 3.0), (192, 128, 3.0)):
        c, u = key_tiles(1 << 16, 128, tq, tk)
        assert c / u == pytest.approx(want, rel=2e-3), (tq, tk)
        assert computed_over_useful(128, tq, tk) == pytest.approx(want)
    # wider windows waste less: 1,024 keys with 128 x 128 tiles, one tile in nine
    c, u = key_tiles(1 << 16, 1024, 128, 128)
    assert c / u == pytest.approx(1.125, rel=2e-3)


def test_fixed_keys_recover_a_curve_of_that_form():
    """The fit inverts ``rate = R s / (s + k)`` exactly."""
    seq = [512, 1024, 2048, 4096, 8192, 16384]
    r, k = fixed_keys(seq, [600.0 * s / (s + 300.0) for s in seq])
    assert (r, k) == (pytest.approx(600.0), pytest.approx(300.0))
    assert window_keys(seq, [600.0 * s / (s + 100.0) for s in seq], [600.0 * s / (s + 700.0) for s in seq]) \
        == pytest.approx(600.0)
    assert window_rate(600.0, 500.0, 600.0) == pytest.approx(250.0)
    assert window_rate(600.0, 0.0, 600.0, anchor=(200.0, 100.0)) == pytest.approx(100.0 * 0.5 / 0.25)


def test_long_sequence_tables_predict_cudnns_measured_windows():
    """No anchor: the tile model on a table's long-sequence curves against cuDNN's sliding-window benchmarks of
    GPT-OSS's head dim 64 (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results, 4,096 tokens, batch 2).
    - Blackwell: the B200 hdim-64 forward table (flash-attention PR #2605's cuDNN column, against 2,250) predicts
      GB200's 128-key window (gpt_oss/gb200 @3929da2ef4c1, cuDNN 9.22, 128 heads: 0.210 ms = 161 TFLOP/s of
      2,500) within 3%, and the 1,024-key window (gb200_919_only_cudnn @df73764, cuDNN 9.19, 64 / 8 heads: 574)
      within 7%;
    - Hopper: the FA3 paper's cuDNN hdim-64 forward table predicts H200's 1,024-key window
      (h200_919_only_cudnn, cuDNN 9.19: 336) within 3%. Its backward has one (full-mask) curve: on that curve's
      own fixed cost (350 keys) plus the forward's masked tiles (k_causal - 2 k_full = 138) it predicts the
      measured 289 within 7% (307); on the forward's window keys alone (265, the backward's fixed cost taken as
      the forward's 127) it was 25% fast (360), faster than the table's own full mask over 1,024 keys (348)."""
    bw = ATTN["blackwell"]
    full, causal = bw["fwd_full"]["64"], bw["fwd_causal"]["64"]
    r, _ = fixed_keys(bw["seq"], full)
    k = window_keys(bw["seq"], full, causal)
    assert window_rate(128, r, k) * 2500 / 2250 == pytest.approx(161, rel=0.03)
    assert window_rate(1024, r, k) * 2500 / 2250 == pytest.approx(574, rel=0.07)
    # the line topo read before, through 2,048 on the causal curve down to the measured point, had nothing to say
    # at 128 without the measurement: the causal curve read at 128 keys falls to the 1/16 floor
    hop = ATTN
    full, causal = hop["fwd_full"]["64"], hop["fwd_causal"]["64"]
    r, _ = fixed_keys(hop["seq"], full)
    k = window_keys(hop["seq"], full, causal)
    assert window_rate(1024, r, k) == pytest.approx(336, rel=0.03)
    rb, _ = fixed_keys(hop["seq"], hop["bwd"]["64"])
    kb = window_keys(hop["seq"], full, causal, pass_full=hop["bwd"]["64"])
    assert kb == pytest.approx(350 + 138, abs=5)
    assert window_rate(1024, rb, kb) == pytest.approx(289, rel=0.07)
    assert window_rate(1024, rb, kb) < 348  # below the full mask over as many keys (the table's 1,024 point)


def test_sm120_backward_windows_follow_one_fixed_cost():
    """Within one source the window's cost is ``w / (w + k)`` with one ``k``: cuDNN's SM120 backward (NVIDIA/
    cudnn-frontend PR #505, B1 H16 D64 causal, 'cudnn' column, us): S 4,096 558.2, S 16,384 6,447.7; at 16,384
    window 511 (512 keys) 791.8, window 1,023 1,169.2. The causal pair gives the steady time per score; the
    1,024-key window's k then predicts the 512-key window's time within 7%."""
    def causal_scores(s):
        return s * (s + 1) / 2

    def band(s, w):
        return w * (w + 1) / 2 + (s - w) * w

    rate = {s: causal_scores(s) / t for s, t in ((4096, 558.2), (16384, 6447.7))}  # scores per us
    r_inf, _ = fixed_keys(list(rate), list(rate.values()))
    r1024 = band(16384, 1024) / 1169.2
    k = 1024 * (r_inf / r1024 - 1)  # r = r_inf w / (w + k)
    predicted_us = band(16384, 512) / window_rate(512, r_inf, k)
    assert predicted_us == pytest.approx(791.8, rel=0.07)
    assert 500 < k < 1000  # keys: several 128-key tiles' worth, as the B200 forward's (~690)


def test_the_kernel_model_prices_a_sliding_window_from_its_tiles():
    """``attention_rate_flops(..., seq=tokens, window=w)``: at a measured window over its measured 4,096 tokens the
    measurement (GB200 / GB300 128 keys: 161 / 182 and 167 / 191 TFLOP/s; H200 1,024 keys: 336 / 289). Elsewhere
    the band moves along ``w / (w + k)`` (k from the table's forward curves: 265 keys, the FA3 paper's cuDNN
    hdim-64 table) and the first ``w`` rows run at the causal rate at ``w``. The H200 band alone: its 1,024-row
    triangle (524,800 of 3,670,528 scores) at the table's causal 288 leaves 3,145,728 / (3,670,528 / 336 - 524,800
    / 288) = 345.6 for the band; at 128 keys 345.6 x (128 / 393) / (1,024 / 1,289) = 141.7, and over 4,096 tokens
    (8,256 triangle scores at the line below the table's 99, 507,904 of band) 140.7, where the line alone gave 99.
    Backward (the full backward curve's own 350 fixed keys plus the forward's 138, 488; its triangle at the causal
    backward, 348 x 0.8194 = 285 at 1,024 keys and 84 at 128 on the line below the table): band 3,145,728 /
    (3,670,528 / 289 - 524,800 / 285) = 289.7 at 1,024, 289.7 x (128 / 616) / (1,024 / 1,512) = 88.9 at 128, and
    516,160 / (8,256 / 84 + 507,904 / 88.9) = 88.8 over 4,096 tokens."""
    gb, g3, h = (gpu_compute(g).kernels for g in ("GB200", "GB300", "H100"))
    assert attention_rate_flops(gb, 64, 4096, True, False, 128) == pytest.approx(161e12 * gb.sustained)
    assert attention_rate_flops(gb, 64, 4096, True, True, 128) == pytest.approx(182e12 * gb.sustained)
    assert attention_rate_flops(g3, 64, 4096, True, False, 128) == pytest.approx(167e12 * g3.sustained)
    assert attention_rate_flops(g3, 64, 4096, True, True, 128) == pytest.approx(191e12 * g3.sustained)
    assert attention_rate_flops(h, 64, 4096, True, False, 1024) == pytest.approx(336e12 * h.sustained)
    assert attention_rate_flops(h, 64, 4096, True, True, 1024) == pytest.approx(289e12 * h.sustained)
    k = window_keys(ATTN["seq"], ATTN["fwd_full"]["64"], ATTN["fwd_causal"]["64"])
    assert k == pytest.approx(265, abs=5)
    assert attention_rate_flops(h, 64, 1 << 30, True, False, 128) / h.sustained == pytest.approx(141.7e12, rel=2e-3)
    assert attention_rate_flops(h, 64, 4096, True, False, 128) / h.sustained == pytest.approx(140.7e12, rel=2e-3)
    assert attention_rate_flops(h, 64, 1 << 30, True, True, 128) / h.sustained == pytest.approx(88.9e12, rel=2e-3)
    assert attention_rate_flops(h, 64, 4096, True, True, 128) / h.sustained == pytest.approx(88.8e12, rel=2e-3)
    # a causal block of 128 (no window) still reads the line below the table
    assert attention_rate_flops(h, 64, 128, True, False) / h.sustained == pytest.approx(99e12, rel=0.01)
    # between head dims linear in log2: halfway between 64 (anchored) and 128 (the tile model alone)
    mid = attention_rate_flops(gb, 90.5, 1 << 30, True, False, 128)
    lo = attention_rate_flops(gb, 64, 1 << 30, True, False, 128)
    hi = attention_rate_flops(gb, 128, 1 << 30, True, False, 128)
    assert mid == pytest.approx(lo + (hi - lo) * (math.log2(90.5) - 6), rel=1e-3)


def test_a_window_as_long_as_its_sequence_is_the_causal_mask():
    """Its first ``w`` rows are a causal block of ``w`` (one masked tile per query tile, not the band's two): as the
    window reaches the sequence its rate goes to the causal table's, with no step (the band's rate alone ran 2-14%
    faster forward than causal attention over the same tokens at ``w = s - 1``); a third of a 4,096-key window over
    8,192 tokens is that triangle."""
    for gpu in ("H100", "GB200"):
        km = gpu_compute(gpu).kernels
        for d in (64, 128):
            for backward in (False, True):
                for s in (4096, 8192):
                    causal = attention_rate_flops(km, d, s, True, backward)
                    assert attention_rate_flops(km, d, s, True, backward, s) == pytest.approx(causal)
                    assert attention_rate_flops(km, d, s, True, backward, s - 1) == pytest.approx(causal, rel=0.01)


def test_gpt_oss_window_layers_run_the_window_rate_and_chunks_do_not():
    """GPT-OSS's local layers (sliding, 128 keys) carry their window to the kernel model; its full layers and
    Llama 4's chunked layers (each chunk a causal block) do not; the H100 window layer's core attention takes
    its FLOPs at the window's rate."""
    lay = make_layout(tp=1, dp=8, global_batch=64, micro_batch=1, seq_len=4096)
    oss = load_model("gpt-oss-120b")
    local = next(o for o in block_ops(oss, lay, "W") if o.name == "core_attention")
    full = next(o for o in block_ops(oss, lay, "*") if o.name == "core_attention")
    assert (local.window, local.block_seq, full.window) == (128, 4096, 0.0)
    scout = load_model("llama4-scout")
    lay8k = make_layout(tp=1, dp=8, global_batch=64, micro_batch=1, seq_len=16384)
    chunk = next(o for o in block_ops(scout, lay8k, "W") if o.name == "core_attention")
    assert chunk.window == 0.0 and chunk.block_seq == 8192
    gpu = gpu_compute("H100")
    rate = attention_rate_flops(gpu.kernels, 64, 4096, True, False, 128)
    assert op_time_s(local, gpu, "bf16") == pytest.approx(local.flops / rate + gpu.kernels.launch_gpu_s)


TABLES = {"H100": "the FA3 paper's cuDNN table (one backward curve)", "GB200": "cuDNN 9.22 on GB200 and B200",
          "GB300": "cuDNN 9.22 on GB300, head dims it lacks from GB200's"}


@pytest.mark.parametrize("gpu", TABLES)
def test_a_window_never_outruns_the_full_mask_over_as_many_keys(gpu):
    """A query tile of a ``w``-key window enters the key tiles a full-mask block of ``w`` keys does plus one, and
    masks two of them: it cannot run faster than full attention over ``w`` keys, in either pass, at any head dim
    (1,024 and 4,096 keys: inside every table, below the lengths where the measured full-mask curves dip under
    their own steady rate by up to 3%). Before the backward took its own fixed cost, Hopper's hdim-128 backward
    window ran 5% faster than the full mask at 1,024 keys (15% at 512)."""
    km = gpu_compute(gpu).kernels
    for d in (64, 128, 192, 256):
        for backward in (False, True):
            for w in (1024, 4096):
                full = attention_rate_flops(km, d, w, False, backward)
                band = attention_rate_flops(km, d, 1 << 30, True, backward, w)  # far from the start
                assert band <= full * 1.005, (d, backward, w)


@pytest.mark.parametrize("gpu", TABLES)
def test_a_wide_window_runs_at_the_full_masks_rate(gpu):
    """A window of 16,384 keys is a full-mask band but for its two edge tiles per query tile (under 2% of its
    keys): at the head dims without a measured window (128 and up) it runs within 4% of the table's full-mask
    rate at that length, in both passes. (A measured 64-wide window must not set the wider heads' rate, nor the
    causal curve's steady rate the full mask's.)"""
    km = gpu_compute(gpu).kernels
    for d in (128, 192, 256):
        for backward in (False, True):
            ratio = attention_rate_flops(km, d, 1 << 30, True, backward, 16384) / attention_rate_flops(
                km, d, 16384, False, backward)
            assert 0.96 <= ratio <= 1.04, (d, backward, ratio)
