"""walk47: a lab's own fine-grained MoE end to end (issue 29): what a new user's model file gets wrong."""

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.model import model_from_dict

# 48 layers, hidden 4,096, 64 / 8 heads of 128, 256 experts of 1,536 (top 8, one shared), 3 dense layers
LAB = dict(name="lab-moe", source="walk47", layers=48, hidden=4096, ffn_hidden=12288, heads=64, kv_heads=8,
           vocab=151936, seq_len=8192, mlp="swiglu", attention=dict(head_dim=128),
           moe=dict(experts=256, active_experts=8, shared_experts=1, expert_ffn_hidden=1536, dense_layers=3))


def _toml(d):
    def val(v):
        return f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
    top = [f"{k} = {val(v)}" for k, v in d.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f"{kk} = {val(vv)}" for kk, vv in v.items())
              for k, v in d.items() if isinstance(v, dict)]
    return "\n".join(top) + "\n\n" + "\n\n".join(tables) + "\n"


def test_a_window_longer_than_the_models_sequence_is_refused():
    # a sliding window of 16,384 keys on an 8,192-token model bounds nothing: every "local" layer would be full
    # causal attention (attended_keys takes window >= seq as the whole prefix), silently a different model from
    # the one the file describes
    bad = {**LAB, "attention": dict(head_dim=128, window=16384, window_kind="sliding", full_every=2)}
    with pytest.raises(TopoError) as e:
        model_from_dict(bad, "lab.toml")
    assert "attention.window: 16384 is longer than seq_len (8192)" in e.value.message
    assert "allowed: 1 to 8192" in e.value.message
    # as long as the sequence is allowed (Llama 4's 8,192-token chunks at 8K: full causal attention)
    ok = model_from_dict({**LAB, "attention": dict(head_dim=128, window=8192, full_every=2)})
    assert ok.attended_keys("W", 8192) == ok.attended_keys("*", 8192) == 8192 / 2


def test_the_cli_names_the_file_key_and_value(tmp_path):
    f = tmp_path / "lab.toml"
    f.write_text(_toml({**LAB, "attention": dict(head_dim=128, window=16384, full_every=2)}))
    p = run_cli("train", "dgx-h100-superpod", "--model", str(f), "--gpus", "64", "--ep", "8", "--dp", "64",
                "--global-batch", "64")
    assert p.returncode == 2 and p.stdout == "", p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {f}: attention.window: 16384 "), lines


@pytest.mark.parametrize("moe, needle", [
    # top-k picks distinct experts: 300 of 256 cannot be chosen (was "active_experts (300) must be <= experts
    # (256)", no allowed range)
    (dict(active_experts=300), "active_experts: 300 is more than the 256 experts (a token's top-k picks distinct "
                               "experts); allowed: 1 to 256"),
    (dict(dense_layers=60), "moe.dense_layers: 60 is more than the 48 layers; allowed: 0 to 48"),
])
def test_moe_counts_beyond_the_model_name_key_value_and_range(tmp_path, moe, needle):
    f = tmp_path / "lab.toml"
    f.write_text(_toml({**LAB, "moe": {**LAB["moe"], **moe}}))
    p = run_cli("train", "dgx-h100-superpod", "--model", str(f), "--gpus", "64", "--ep", "8", "--dp", "64",
                "--global-batch", "64")
    assert p.returncode == 2 and p.stdout == "", p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {f}: ") and needle in lines[0], lines


@pytest.mark.parametrize("where, key, says", [
    # Hugging Face config.json's names (Qwen3MoeConfig, DeepseekV3Config arguments: the source in
    # topo/data/compute/framework_names.toml [model_keys]); num_experts_per_tok had been offered
    # "did you mean 'max_nodes_per_token'?", a different setting
    ("moe", "num_experts_per_tok", "Hugging Face's num_experts_per_tok is topo's active_experts in the [moe] table"),
    ("moe", "n_routed_experts", "Hugging Face's n_routed_experts is topo's experts in the [moe] table"),
    ("", "moe_intermediate_size", "is topo's expert_ffn_hidden in the [moe] table"),
    ("", "first_k_dense_replace", "is topo's dense_layers in the [moe] table"),
    ("attention", "sliding_window", "Hugging Face's sliding_window is topo's window in the [attention] table"),
    # topo's own key in the wrong table: a top-level head_dim had been offered "did you mean 'heads'?" (heads =
    # 128 would be a different model)
    ("", "head_dim", "(a key of the [attention] table)"),
    ("", "experts", "(a key of the [moe] table)"),
    ("moe", "window", "(a key of the [attention] table)"),
    ("moe", "layers", "(a top-level key, above the tables)"),
])
def test_a_key_from_elsewhere_says_where_it_belongs(where, key, says):
    d = {**LAB, "attention": dict(LAB["attention"]), "moe": dict(LAB["moe"])}
    (d[where] if where else d)[key] = 8
    with pytest.raises(TopoError) as e:
        model_from_dict(d, "lab.toml")
    assert f"unknown key {key!r} " in e.value.message and says in e.value.message, e.value.message
    assert "did you mean" not in e.value.message
