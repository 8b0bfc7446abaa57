"""FLOP conventions against their closed forms."""

import pytest

from topo.training.flops import model_flop_per_step, stage_flops
from topo.training.parallel import make_layout
from topo.training.model import load_model


@pytest.mark.parametrize("name", ["megatron-gpt-1.7b", "megatron-gpt-146b", "megatron-gpt-1t"])
def test_megatron_eq3(name):
    # data/reference/planner.md, "Training runs": 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration
    m = load_model(name)
    B, s, L, h, V = 512, m.seq_len, m.layers, m.hidden, m.vocab
    lay = make_layout(global_batch=B)
    eq3 = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    assert model_flop_per_step(m, lay, "megatron") == pytest.approx(eq3, rel=1e-12)


def test_six_n_plus_attention_llama():
    # PaLM appendix B / Llama 3: 6 N + 12 l h s per token, N without the input embedding
    m = load_model("llama3-405b")
    lay = make_layout(global_batch=16)
    n = m.total_params - m.vocab * m.hidden
    per_token = 6 * n + 12 * m.layers * m.hidden * m.seq_len
    assert model_flop_per_step(m, lay, "6n") == pytest.approx(16 * m.seq_len * per_token, rel=1e-12)


def test_recompute_adds_a_forward():
    m = load_model("megatron-gpt-18b")
    none = stage_flops(m, make_layout(global_batch=8, flash_attention=False))
    full = stage_flops(m, make_layout(global_batch=8, flash_attention=False, recompute="full"))
    assert none.recompute == 0 and none.backward == pytest.approx(2 * none.forward)
    # full recomputation: the layers' forward again (not the logits)
    f_logits = 2 * m.hidden * m.vocab * m.seq_len
    assert full.recompute == pytest.approx(none.forward - f_logits)


def test_tp_cp_split_the_work():
    m = load_model("llama3-70b")
    one = stage_flops(m, make_layout(global_batch=8))
    split = stage_flops(m, make_layout(global_batch=8, tp=8, cp=2, dp=1))
    assert split.total == pytest.approx(one.total / 16)


def test_six_n_counts_attention_in_a_hybrids_attention_layers_only_through_the_cli():
    """A hybrid model's ``layers`` counts every block (Nemotron-H 56B: 54 Mamba-2, 54 MLP, 10 attention): PaLM's
    ``6 N + 12 l h s`` (appendix B) takes ``l`` as the layers with attention, as Megatron-LM's
    num_floating_point_operations counts the hybrid pattern's ``*`` layers apart (megatron/training/training.py).
    Counting all 118 ran the reported TFLOPs/GPU and MFU 26% high (walk11)."""
    import json
    from conftest import run_cli

    m = load_model("nemotron-h-56b")
    attn = m.layer_pattern.count("*")
    assert attn == 10 and m.layers == 118
    out = run_cli("train", "dgx-h100-superpod", "--model", "nemotron-h-56b", "--gpus", "8", "--tp", "8",
                  "--global-batch", "8", "--json", check=True).stdout
    d = json.loads(out)
    s = m.seq_len
    per_token = 6 * (m.total_params - m.vocab * m.hidden) + 12 * attn * m.heads * m.head_dim * s
    assert d["model_flop_per_step"] == pytest.approx(8 * s * per_token, rel=1e-12)
    assert d["tflop_per_s_per_gpu"] == pytest.approx(d["model_flop_per_step"] / d["step_time_s"] / 8 / 1e12, rel=1e-9)


def test_megatron_convention_counts_a_hybrids_blocks_apart():
    # each block of a hybrid pattern once: 10 attention blocks (projections and the s x s scores), 54 MLP blocks,
    # 54 Mamba-2 mixers (2 x their projection weights), forward + backward x2 + recomputation: 4 passes
    m = load_model("nemotron-h-56b")
    s, h = m.seq_len, m.hidden
    att = 2 * m.attention_params + 2 * s * m.heads * (m.qk_dim + m.v_dim)
    layers = 10 * att + 54 * 2 * m.dense_mlp_params + 54 * 2 * m.mamba_params
    expected = 8 * s * (4 * layers + 3 * 2 * h * m.vocab)
    assert model_flop_per_step(m, make_layout(global_batch=8), "megatron") == pytest.approx(expected, rel=1e-12)
