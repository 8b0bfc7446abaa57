"""The ``megatron-bridge`` FLOP convention against Megatron-Bridge's own ``num_floating_point_operations`` and the
figures Megatron-Bridge publishes with it.

Source: NVIDIA-NeMo/Megatron-Bridge v0.6.0 (2026-08-19) ``src/megatron/bridge/training/utils/flop_utils.py``
``transformer_flops``: a sliding-window layer's core attention is ``query_projection_size x swa_context x 2`` with
``swa_context = W - W (W - 1) / (2 s)`` (``W < s``), a full layer's ``query_projection_size x s / 2 x 2``; every
other term is Megatron-LM's (tests/test_training_flops_megatron_lm.py). ``docs/performance-summary.md`` at v0.6.0
(the 26.08 container) publishes each run's ``Tokens / sec / GPU`` beside its ``Model TFLOP / sec / GPU``, so their
ratio is the count per token that Megatron-Bridge logged.
"""

import pytest

from topo.training.flops import model_flop_per_step
from topo.training.flops_megatron_lm import swa_context
from topo.training.model import load_model
from topo.training.parallel import make_layout


def _per_token(name: str, convention: str, seq: int, tp: int = 1) -> float:
    lay = make_layout(tp=tp, dp=1, global_batch=1, seq_len=seq)
    return model_flop_per_step(load_model(name), lay, convention) / seq


def test_swa_context_is_the_mean_causal_window():
    # keys of s queries under a W-token causal window: W (W + 1) / 2 for the first W, W for each of the s - W others
    for w, s in ((128, 4096), (129, 4096), (128, 8192), (7, 20)):
        assert swa_context(w, s) == pytest.approx((w * (w + 1) / 2 + (s - w) * w) / s, rel=1e-12)
    assert swa_context(4096, 4096) == swa_context(8192, 4096) == 2048  # no shorter than full attention's s / 2


def test_gpt_oss_120b_term_by_term():
    # gpt-oss-120b (config.json): 36 layers, h 2,880, 64 x 64 queries, 8 KV heads, 128 experts of 2,880 (SwiGLU),
    # top 4, vocabulary 201,088 (a multiple of 128), window 128 on layers 1, 3, ... (window_attn_skip_freq 2)
    L, h, q, kv, ffn, k, V, W, s = 36, 2880, 64 * 64, 8 * 64, 2880, 4, 201088, 128, 4096
    proj = h * (q + 2 * kv) + q * h
    ctx = W - W * (W - 1) / (2 * s)
    attn = 18 * (proj + q * s / 2 * 2) + 18 * (proj + q * ctx * 2)
    per_token = 3 * 2 * h * (ffn * k * 3) * L + 3 * 2 * attn + 3 * 2 * h * V
    assert _per_token("gpt-oss-120b", "megatron-bridge", s) == pytest.approx(per_token, rel=1e-12)
    # megatron-lm counts the window layers as full: 18 x 3 x 2 x q (s - 2 ctx) more
    more = 18 * 6 * q * (s - 2 * ctx)
    assert _per_token("gpt-oss-120b", "megatron-lm", s) == pytest.approx(per_token + more, rel=1e-12)


@pytest.mark.parametrize("system,tflops,tokens", [("DGX-GB200", 934, 28672), ("DGX-GB300", 1077, 33024)])
def test_gpt_oss_published_tflops_per_token_is_the_bridge_count(system, tflops, tokens):
    """26.08, GPT OSS 120B, MXFP8, seq 4096, TP 1 (docs/performance-summary.md at v0.6.0): 934 / 28,672 and
    1,077 / 33,024 give 32.58 and 32.61 GFLOPs a token; the figures are rounded (TFLOP/s to 1 in ~1,000, tokens/s
    to a multiple of 128), hence 0.3%. megatron-lm's count is 5.3% above it."""
    published = tflops * 1e12 / tokens
    assert _per_token("gpt-oss-120b", "megatron-bridge", 4096) == pytest.approx(published, rel=3e-3)
    assert _per_token("gpt-oss-120b", "megatron-lm", 4096) / published - 1 > 0.04


@pytest.mark.parametrize("name,tflops,tokens", [("deepseek-v3-671b", 1276, 4912), ("deepseek-v3-671b", 1635, 6288),
                                                ("qwen3-235b-a22b", 1077, 7280), ("qwen3-235b-a22b", 1306, 8816)])
def test_without_sliding_windows_the_bridge_count_is_megatron_lms(name, tflops, tokens):
    """Same page: DeepSeek-V3 (MLA, MTP) and Qwen3-235B at seq 4096, TP 1, within the figures' rounding."""
    bridge = _per_token(name, "megatron-bridge", 4096)
    assert bridge == _per_token(name, "megatron-lm", 4096)
    assert bridge == pytest.approx(tflops * 1e12 / tokens, rel=3e-3)


def test_chunked_attention_counts_as_full():
    # Llama 4's chunked layers set no window_size in Megatron-Bridge (models/llama4): counted as full attention.
    # At 8,192 tokens the 8,192-token chunk is the whole sequence, where a window's context is s / 2 too and the
    # check could not tell a chunk from a window: at 16,384 and 32,768 a window of 8,192 would count
    # W - W (W - 1) / (2 s) keys a query (6,144.25 and 7,168.1) where full attention counts s / 2 (8,192, 16,384)
    scout = load_model("llama4-scout")
    assert (scout.attention.window, scout.attention.window_kind) == (8192, "chunked")
    for s in (16384, 32768):
        assert swa_context(scout.attention.window, s) < s / 2
        assert _per_token("llama4-scout", "megatron-bridge", s) == _per_token("llama4-scout", "megatron-lm", s)


def test_cli_takes_the_convention():
    from conftest import run_cli

    assert "megatron-bridge" in run_cli("train", "--help", check=True).stdout
    args = ("train", "gb200-nvl72-superpod", "--model", "gpt-oss-120b", "--gpus", "64", "--ep", "64", "--dp", "64",
            "--global-batch", "1280", "--json")
    import json
    got = {c: json.loads(run_cli(*args, "--flops", c, check=True).stdout) for c in ("megatron-lm", "megatron-bridge")}
    assert got["megatron-lm"]["step_time_s"] == got["megatron-bridge"]["step_time_s"]
    lm, br = (_per_token("gpt-oss-120b", c, 4096) for c in ("megatron-lm", "megatron-bridge"))
    for k in ("model_flop_per_step", "tflop_per_s_per_gpu", "mfu"):
        assert got["megatron-bridge"][k] / got["megatron-lm"][k] == pytest.approx(br / lm, rel=1e-9)
