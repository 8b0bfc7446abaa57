"""Bundled model files: they load, and their shapes give the parameter counts their sources print."""

import pytest

from topo.errors import TopoError
from topo.training.model import bundled_models, load_model, model_from_dict

EXPECTED = {"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "deepseek-v3-671b", "gpt4-1.8t-moe",
            "megatron-gpt-1.7b", "megatron-gpt-1t", "megatron-gpt-530b", "gpt-oss-120b", "gpt-oss-20b",
            "llama4-scout", "llama4-maverick", "kimi-k2", "nemotron-3-nano-30b-a3b"}


def test_bundled_models_present():
    assert EXPECTED <= set(bundled_models())


@pytest.mark.parametrize("name", bundled_models())
def test_parameter_count_matches_source(name):
    # each file's published_params_B is the figure its source prints (Megatron SC21 Table 1, GPT-3 Table 2.1,
    # Llama 3 Table 3, DeepSeek-V3 671B, the rumoured ~1.8T)
    m = load_model(name)
    assert m.sources and m.published_params_B
    # within 4%: the sources round (1.7B is 1.65B by the shape, printed with two digits)
    assert m.total_params / 1e9 == pytest.approx(m.published_params_B, rel=0.04)


def test_moe_active_parameters():
    # DeepSeek-V3 report: 671B total, 37B activated per token
    m = load_model("deepseek-v3-671b")
    assert m.active_params / 1e9 == pytest.approx(37, rel=0.03)
    # Mixtral of Experts (arXiv 2401.04088): 46.7B total, 12.9B active (2 of 8 experts)
    m = load_model("mixtral-8x7b")
    assert m.active_params / 1e9 == pytest.approx(12.9, rel=0.01)
    assert m.total_params / 1e9 == pytest.approx(46.7, rel=0.01)


@pytest.mark.parametrize("name, total_B, active_B", [
    # gpt-oss model card (arXiv 2508.10925) Table 1: total and active, the active without the input embedding
    ("gpt-oss-120b", 116.83, 5.13), ("gpt-oss-20b", 20.91, 3.61),
    # Kimi K2 (arXiv 2507.20534): 1.04T total, 32.6B activated
    ("kimi-k2", 1040, 32.6),
    # Llama 4 (Meta's model card): 17B active; Scout 109B total, Maverick 400B total
    ("llama4-scout", 109, 17), ("llama4-maverick", 400, 17),
    # Nemotron 3 Nano model card: 31.6B total, 3.2B active without embeddings
    ("nemotron-3-nano-30b-a3b", 31.6, 3.2),
])
def test_2025_moe_models_match_their_cards(name, total_B, active_B):
    m = load_model(name)
    no_input_embedding = (m.active_params - m.vocab * m.hidden) / 1e9
    assert m.total_params / 1e9 == pytest.approx(total_B, rel=0.015)
    # gpt-oss within 0.5% (the card's own convention); the others print two or three digits
    assert no_input_embedding == pytest.approx(active_B, rel=0.005 if name.startswith("gpt-oss") else 0.06)
    if name.startswith("nemotron"):  # 23 Mamba-2, 23 MoE and 6 attention layers (Megatron-Bridge's model page)
        assert (m.num_mamba_layers, m.num_moe_layers, m.num_attention_layers) == (23, 23, 6)


def test_unpublished_is_marked():
    assert "unpublished" in load_model("gpt4-1.8t-moe").status
    assert load_model("llama3-405b").status == "published"


def test_bad_model_names_file_and_key():
    base = load_model("llama3-8b").model_dump()
    with pytest.raises(TopoError) as e:
        model_from_dict({**base, "layerz": 3}, "my.toml")
    assert e.value.source == "my.toml" and "did you mean 'layers'" in e.value.message
    with pytest.raises(TopoError) as e:
        model_from_dict({**base, "kv_heads": 5}, "my.toml")
    assert "kv_heads" in e.value.message
    with pytest.raises(TopoError) as e:
        load_model("llama3-450b")
    assert "did you mean 'llama3-405b'" in str(e.value)
