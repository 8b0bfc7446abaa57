"""Local attention (sliding windows, chunks) and interleaved MoE layers: shapes, FLOPs and their closed forms."""

import numpy as np
import pytest

from topo.errors import TopoError
from topo.training.flops import layer_flops, model_flop_per_step
from topo.training.memory import block_activation_bytes
from topo.training.model import load_model, model_from_dict
from topo.training.operators import block_ops, block_time
from topo.training.gpus import gpu_compute
from topo.training.parallel import make_layout
from topo.training.step import step_traffic

BASE = dict(name="t", source="test", layers=4, hidden=1024, ffn_hidden=4096, heads=16, kv_heads=4, vocab=1000,
            seq_len=4096, mlp="swiglu")


def _model(**attention):
    return model_from_dict({**BASE, "attention": attention})


def _core_flops(model, kind, seq, mb=1):
    lay = make_layout(global_batch=mb, micro_batch=mb, seq_len=seq)
    return next(o.flops for o in block_ops(model, lay, kind) if o.name == "core_attention")


def _mask_pairs(seq, window, kind):
    """Brute force: (query, key) pairs a causal local mask keeps."""
    q = np.arange(seq)[:, None]
    k = np.arange(seq)[None, :]
    keep = k <= q
    keep &= (q - k < window) if kind == "sliding" else (q // window == k // window)
    return int(keep.sum())


def test_sliding_window_flops_closed_form():
    # a sliding window of w keys at sequence s: the mask's area s w - w^2 / 2 (the continuous form of
    # sum_i min(i, w), as the full layer's s^2 / 2), times 2 FLOPs x (d_qk + d_v) x heads
    s, w = 4096, 128
    m = _model(window=w)
    d, n = m.head_dim, m.heads
    assert _core_flops(m, "W", s) == pytest.approx(2 * n * 2 * d * (s * w - w * w / 2), rel=1e-12)
    # the full layer beside it: half the square
    assert _core_flops(m, "*", s) == pytest.approx(2 * n * 2 * d * s * s / 2, rel=1e-12)
    # against a brute-force count of the mask (the diagonal's w/2 is the difference)
    assert s * m.attended_keys("W", s) == pytest.approx(_mask_pairs(s, w, "sliding"), rel=1e-3)


def test_chunked_attention_closed_form():
    # chunks of c at s = n c + r: n c^2 / 2 + r^2 / 2 pairs (Llama 4's attention_chunk_size)
    c = 512
    m = _model(window=c, window_kind="chunked")
    for s in (2048, 2048 + 100):
        n, r = divmod(s, c)
        assert s * m.attended_keys("W", s) == pytest.approx((n * c * c + r * r) / 2, rel=1e-12)
        assert s * m.attended_keys("W", s) == pytest.approx(_mask_pairs(s, c, "chunked"), rel=1.5 / c)  # the diagonal: s / 2
    # a chunk as long as the sequence is full causal attention (Llama 4 at 8K)
    assert m.attended_keys("W", c) == m.attended_keys("*", c) == c / 2
    assert _core_flops(m, "W", c) == _core_flops(m, "*", c)


def test_full_every_pattern_and_moe_every():
    oss = load_model("gpt-oss-120b")
    # config.json layer_types: sliding, full, sliding, full, ...
    assert [oss.attention_kind(i) for i in range(4)] == ["W", "*", "W", "*"]
    assert oss.count("W") == oss.count("*") == 18
    mav = load_model("llama4-maverick")
    # every 4th layer global (no RoPE), MoE on layers 1, 3, 5, ... (interleave_moe_layer_step 2)
    assert mav.blocks[:4] == ("W-", "WE", "W-", "*E")
    assert mav.num_moe_layers == 24 and mav.num_dense_layers == 24 and mav.count("*") == 12
    assert load_model("llama4-scout").num_moe_layers == 48


def test_megatron_flops_count_the_window_band():
    # Megatron-Bridge's GPT-OSS FLOP count takes min(window, s) keys per query on a local layer (swa_context)
    oss = load_model("gpt-oss-120b")
    s = 4096
    f = layer_flops(oss, s)
    keys = (s + 128) / 2  # half the layers full (s), half local (128)
    assert f.scores == pytest.approx(2 * keys * oss.heads * (oss.qk_dim + oss.v_dim), rel=1e-12)
    # without a window nothing changes: the full square
    plain = _model()
    assert layer_flops(plain, s).scores == 2 * s * plain.heads * 2 * plain.head_dim
    # 6N + attention per token, with the same band
    lay = make_layout(global_batch=2)
    n = oss.active_params - oss.vocab * oss.hidden
    per_token = 6 * n + 3 * oss.layers * f.scores
    assert model_flop_per_step(oss, lay, "6n") == pytest.approx(2 * s * per_token, rel=1e-12)


def test_local_block_is_cheaper_and_stores_the_same():
    oss = load_model("gpt-oss-120b")
    lay = make_layout(global_batch=1, ep=8, seq_len=32768)
    gpu = gpu_compute("H100")
    assert block_time(oss, lay, gpu, "W").forward_s < 0.5 * block_time(oss, lay, gpu, "*").forward_s
    # a fused kernel stores Q, K, V and the output whatever the mask
    assert block_activation_bytes(oss, lay, "W") == block_activation_bytes(oss, lay, "*")


def test_context_parallel_exchanges_every_attention_layer():
    oss = load_model("gpt-oss-20b")
    lay = make_layout(global_batch=2, cp=2, ep=1)
    ag = [t for t in step_traffic(oss, lay.model_copy(update={"cp_comm_type": "all_gather"}))
          if t["dim"] == "cp" and t["collective"] == "all_gather"]
    assert ag and ag[0]["calls"] == lay.microbatches * oss.num_attention_layers == lay.microbatches * 24
    # the ring (cp - 1 = 1 send forward per layer) too
    ring = [t for t in step_traffic(oss, lay) if t["dim"] == "cp" and t["phase"] == "cp_ring_forward"]
    assert ring and ring[0]["calls"] == lay.microbatches * 24


@pytest.mark.parametrize("bad, needle", [
    (dict(attention=dict(full_every=2)), "needs attention.window"),
    (dict(attention=dict(window=64, window_kind="banded")), "window_kind"),
    (dict(attention=dict(window=64), layers=2, layer_pattern="*-"), "layer_pattern"),
    (dict(moe=dict(experts=4, active_experts=1, expert_ffn_hidden=64, every=2), layers=2, layer_pattern="*E"),
     "layer_pattern"),
])
def test_bad_local_attention_is_one_line(bad, needle):
    with pytest.raises(TopoError) as e:
        model_from_dict({**BASE, **bad})
    assert needle in str(e.value)
