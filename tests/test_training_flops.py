"""FLOP conventions against their closed forms."""

import pytest

from topo.training.flops import model_flops_per_step, stage_flops
from topo.training.parallel import make_layout
from topo.training.model import load_model


@pytest.mark.parametrize("name", ["megatron-gpt-1.7b", "megatron-gpt-146b", "megatron-gpt-1t"])
def test_megatron_eq3(name):
    # data/reference/planner.md, "Training runs": 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration
    m = load_model(name)
    B, s, L, h, V = 512, m.seq_len, m.layers, m.hidden, m.vocab
    lay = make_layout(global_batch=B)
    eq3 = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    assert model_flops_per_step(m, lay, "megatron") == pytest.approx(eq3, rel=1e-12)


def test_six_n_plus_attention_llama():
    # PaLM appendix B / Llama 3: 6 N + 12 l h s per token, N without the input embedding
    m = load_model("llama3-405b")
    lay = make_layout(global_batch=16)
    n = m.total_params - m.vocab * m.hidden
    per_token = 6 * n + 12 * m.layers * m.hidden * m.seq_len
    assert model_flops_per_step(m, lay, "6n") == pytest.approx(16 * m.seq_len * per_token, rel=1e-12)


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
