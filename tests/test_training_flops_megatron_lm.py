"""The ``megatron-lm`` FLOP convention against Megatron-LM's own ``num_floating_point_operations``.

Source: NVIDIA/Megatron-LM@d98e8a64 megatron/training/training.py. Each test writes the source's expression for one
model with that model's published shapes (numbers, not topo's derived attributes), so a model file or a term
that drifts fails here.
"""

import pytest

from topo.training.flops import model_flop_per_step
from topo.training.flops_megatron_lm import padded_vocab
from topo.training.model import load_model
from topo.training.parallel import make_layout


def test_padded_vocab_is_megatron_lms():
    # build_tokenizer.py vocab_size_with_padding: ceil(V / (128 x tp)) x 128 x tp
    assert padded_vocab(128256, 8) == 129024 and padded_vocab(128256, 1) == 128256
    assert padded_vocab(51200, 8) == 51200 and padded_vocab(129280, 4) == 129536


@pytest.mark.parametrize("name", ["megatron-gpt-1.7b", "megatron-gpt-146b"])
def test_gpt_is_eq3_without_recomputation_and_with_causal_scores(name):
    # transformer_flops for a GPT (MHA, GeLU, ffn 4h): per token and layer 3 x 2 x (4 h^2 + 8 h^2) projections and
    # MLP, 3 x 2 x h / 2 x 2 x s core attention, 3 x 2 x h V logits: 72 B s l h^2 (1 + s/(12h) + V/(12 l h))
    m = load_model(name)
    B, s, L, h, V = 512, m.seq_len, m.layers, m.hidden, m.vocab
    assert V % (128 * 8) == 0  # no padding at tp 8
    expected = 72 * B * s * L * h * h * (1 + s / (12 * h) + V / (12 * L * h))
    lay = make_layout(global_batch=B, tp=8, dp=1)
    assert model_flop_per_step(m, lay, "megatron-lm") == pytest.approx(expected, rel=1e-12)
    # 3 passes where SC21's eq. 3 counts 4 (rev47): the ratio a user sees between the two logs
    assert model_flop_per_step(m, lay, "megatron-lm") < 0.76 * model_flop_per_step(m, lay, "megatron")


def test_llama3_405b_gqa_swiglu():
    # Llama 3 405B (arXiv 2407.21783 Table 3): l 126, h 16384, ffn 53248, 128 heads, 8 KV heads, head dim 128,
    # V_pad 129,024: Meta's config.json's vocab_size 128,256 (https://huggingface.co/meta-llama/Llama-3.1-405B/blob/
    # main/config.json; Table 3 rounds it to 128,000) padded to a multiple of 128 x tp 8 = 1,024 (126 x 1,024). transformer_flops: 3 x 2 x [h (q + k + v) + q h] attention projections,
    # 3 x 2 x h x ffn x 3 SwiGLU MLP, 3 x 2 x q / 2 x 2 x s core attention, 3 x 2 x h x V_pad logits
    m = load_model("llama3-405b")
    L, h, ffn, q, kv, s, V = 126, 16384, 53248, 128 * 128, 8 * 128, 8192, 129024
    per_token = (3 * 2 * L * (h * (q + 2 * kv) + q * h) + 3 * 2 * L * h * ffn * 3 + 3 * 2 * L * q / 2 * 2 * s
                 + 3 * 2 * h * V)
    lay = make_layout(global_batch=16, seq_len=s, tp=8, dp=1)
    assert model_flop_per_step(m, lay, "megatron-lm") == pytest.approx(16 * s * per_token, rel=1e-12)


def test_deepseek_v3_mla_moe_mtp():
    # DeepSeek-V3 (HF config.json): 61 layers, the first 3 dense (ffn 18,432), 58 MoE (top-8 of 2,048, one shared
    # of 2,048), h 7,168, 128 heads, q_lora 1,536, kv_lora 512, qk 128 + rope 64, v 128, V 129,280, one MTP layer
    # (an MoE layer: the last layer is MoE). transformer_flops' MLA branch: q_term = q_lora (h + n (qk + rope) + 1);
    # kv_lora (h + n (qk + v) + 1) + h rope + n v h; core n (qk + rope) / 2 + n v / 2 per s; MTP 3 h + 2 h^2.
    m = load_model("deepseek-v3-671b")
    h, n, ql, kvl, qk, rope, v, s = 7168, 128, 1536, 512, 128, 64, 128, 4096
    mtp, layers, dense, moe = 1, 61 + 1, 3, 58 + 1
    V = padded_vocab(129280, 1)
    mlp = h * (18432 * 3 * dense + 2048 * 8 * 3 * moe + 2048 * 3 * moe)
    attn = ql * (h + n * (qk + rope) + 1) + kvl * (h + n * (qk + v) + 1) + h * rope + n * v * h
    core = n * (qk + rope) / 2 + n * v / 2
    per_token = 3 * 2 * (mlp + layers * attn + mtp * (3 * h + 2 * h * h) + h * V * (mtp + 1)) + 3 * 2 * s * layers * core
    lay = make_layout(global_batch=4, seq_len=s)
    assert model_flop_per_step(m, lay, "megatron-lm") == pytest.approx(4 * s * per_token, rel=1e-12)


def test_nemotron_h_56b_hybrid():
    # hybrid_flops: 54 M, 54 -, 10 * (Megatron-Bridge nemotronh recipe's pattern), h 8192, relu2 ffn 32,768
    # (mlp_layer_flops: 4 x expansion x h^2, no SwiGLU), 64 heads, 8 groups, kv_channels 128 (attn_layer_flops:
    # 4 t h p (h + h g / n) + 2 L^2 h p, p = 128 x 64 / h), Mamba d_in = 2 h, state 256, 8 groups, 256 heads
    # (mamba_layer_flops: 2 h (2 d_in + 2 G N + H) + 7 d_in N + 2 d_in h), V 131,072: all x 3
    m = load_model("nemotron-h-56b")
    h, s, V = 8192, 8192, 131072
    p = 128 * 64 / h
    attn = 4 * h * p * (h + h * 8 / 64) + 2 * s * h * p
    mlp = 4 * (32768 / h) * h * h
    d_in = 2 * h
    mamba = 2 * h * (2 * d_in + 2 * 8 * 256 + 256) + 7 * d_in * 256 + 2 * d_in * h
    per_token = 3 * (10 * attn + 54 * mlp + 54 * mamba + 2 * h * V)
    lay = make_layout(global_batch=8, tp=8, dp=1)
    assert model_flop_per_step(m, lay, "megatron-lm") == pytest.approx(8 * s * per_token, rel=1e-12)


def test_nemotron_3_nano_hybrid_moe_takes_d_in_as_2h():
    # hybrid_flops with MoE blocks: moe_layer_flops 4 t h ffn_e k + 4 t h shared (relu2, no router), 23 E,
    # 23 M, 6 *; the Mamba term takes d_in = 2 h = 5,376 though the mixer's 64 heads x 64 are 4,096
    m = load_model("nemotron-3-nano-30b-a3b")
    h, s, V = 2688, 8192, 131072
    assert m.mamba_inner == 4096
    p = 128 * 32 / h
    attn = 4 * h * p * (h + h * 2 / 32) + 2 * s * h * p
    moe = 4 * h * 1856 * 6 + 4 * h * 3712
    d_in = 2 * h
    mamba = 2 * h * (2 * d_in + 2 * 8 * 128 + 64) + 7 * d_in * 128 + 2 * d_in * h
    per_token = 3 * (6 * attn + 23 * moe + 23 * mamba + 2 * h * V)
    lay = make_layout(global_batch=8)
    assert model_flop_per_step(m, lay, "megatron-lm") == pytest.approx(8 * s * per_token, rel=1e-12)


def test_cli_names_and_checks_the_convention():
    from conftest import run_cli

    help_text = run_cli("train", "--help", check=True).stdout
    assert "megatron-lm" in help_text
    bad = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--flops", "megatron-3")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "megatron-lm" in bad.stderr
    ok = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8",
                 "--flops", "megatron-lm", check=True).stdout
    assert "(megatron-lm)" in ok


def test_the_logits_count_the_padded_vocabulary_through_the_step():
    # rev48: the models above need no padding at the tp they are counted at, so a count ignoring the padding passed
    # them all. DeepSeek-V3's 129,280 (HF config.json) is 1,010 x 128: unpadded at tp 1, 130,048 = 127 x 1,024 at
    # tp 8 (vocab_size_with_padding); its logits term 3 x 2 x h x V_pad x (1 + mtp) per token grows by that much
    m = load_model("deepseek-v3-671b")
    assert (m.vocab, m.hidden, m.mtp_layers) == (129280, 7168, 1)
    tp1, tp8 = (make_layout(global_batch=4, seq_len=4096, tp=tp, dp=1) for tp in (1, 8))
    grown = model_flop_per_step(m, tp8, "megatron-lm") - model_flop_per_step(m, tp1, "megatron-lm")
    assert grown == pytest.approx(4 * 4096 * 3 * 2 * 7168 * (130048 - 129280) * 2, rel=1e-9)
