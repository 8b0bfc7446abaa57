"""GPT-OSS's BF16 sliding-window layers on Blackwell run cuDNN's band, not the causal square (section 185).

What runs (read at the 26.02-26.06 pins, section 185): Transformer Engine v2.12-v2.16 turns FlashAttention off for
``softmax_type = "learnable"`` and keeps FusedAttention (its sliding-window filter refuses only FP8 attention,
dropout and s_q > s_kv); ``fused_attn_f16_arbitrary_seqlen.cu`` hands the window to cuDNN as
``set_diagonal_band_left_bound(window + 1)`` (cuDNN >= 9.2) beside the causal mask and the sink as
``set_sink_token`` / ``set_dsink_token``. Only FP8 attention's backward computes the square (section 173).

Published: cuDNN's own GPT-OSS attention benchmark, bfloat16 rows (NVIDIA/cudnn-frontend@3929da2ef4c1
benchmark/sdpa_benchmark_training/results/gpt_oss/gb200/gpt_oss_20260424_100011.csv, cuDNN 9.22.0, GB200, hdim 64,
128 / 128 heads, batch 2, 128-key window): backward 0.237 / 0.465 / 0.911 / 1.818 ms at 2,048 / 4,096 / 8,192 /
16,384 tokens (x1.96-2.03 a doubling: the band), forward 0.210 ms at 4,096; fp8 backward 1.731 / 6.176 ms at 4,096 /
8,192 (x3.57: the square)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_ops, op_time_s
from topo.training.parallel import make_layout

# the 26.02-26.04 GB200 BF16 presets' micro-batch: 4 x 64 query heads = the benchmark's 2 x 128 head-rows
KW = dict(ep=64, dp=64, global_batch=1280, micro_batch=4, etp=1, moe_imbalance=1.0)
BF16_BWD_MS = {2048: 0.237, 4096: 0.465, 8192: 0.911, 16384: 1.818}


def _window_op(seq_len):
    lay = make_layout(**KW, seq_len=seq_len)
    return {op.name: op for op in block_ops(load_model("gpt-oss-120b"), lay, "W")}["core_attention"]


def test_the_bf16_window_backward_grows_as_the_band_not_the_square():
    """Each doubling of the length costs what cuDNN's bfloat16 rows do (x1.92-2.03), far from fp8's square (x3.57)."""
    g = gpu_compute("GB200")
    t = {s: op_time_s(_window_op(s), g, "bf16", backward=True) for s in BF16_BWD_MS}
    for lo, hi in ((2048, 4096), (4096, 8192), (8192, 16384)):
        assert t[hi] / t[lo] == pytest.approx(BF16_BWD_MS[hi] / BF16_BWD_MS[lo], rel=0.05)
        assert t[hi] / t[lo] < 0.6 * 6.176 / 1.731


def test_the_bf16_window_layer_is_priced_near_cudnns_own_milliseconds():
    """At 4,096 tokens topo's window backward is within 25% of the published 0.465 ms and its forward of 0.210 ms
    (topo above: the sustained clock and the attention scale every table carries), and under a third of a full
    causal layer's backward: pricing the window layers over the square would fail here."""
    g = gpu_compute("GB200")
    w = _window_op(4096)
    full = {op.name: op for op in block_ops(load_model("gpt-oss-120b"), make_layout(**KW, seq_len=4096), "*")}
    assert op_time_s(w, g, "bf16", backward=True) == pytest.approx(BF16_BWD_MS[4096] * 1e-3, rel=0.25)
    assert op_time_s(w, g, "bf16") == pytest.approx(0.210e-3, rel=0.25)
    assert op_time_s(w, g, "bf16", backward=True) < op_time_s(full["core_attention"], g, "bf16", backward=True) / 3
