"""Google's published MaxText runs (data50): each row's step time is the one its source prints or its own FLOP count
gives, and the fit reads each with its script's JAX mesh, remat policy and FP8 recipe."""

import sys

import pytest

from conftest import ROOT
from published_setups import published_rows, published_setups


def maxtext_2404_tflop_per_device_step(params, heads, layers, head_dim, seq, batch):
    """AI-Hypercomputer/maxtext@efb6d9e4 MaxText/maxtext_utils.py lines 94-101,
    ``calculate_tflops_training_per_device``: 6 x parameters x tokens plus causal attention, half of
    12 x heads x layers x head_dim x seq^2 x batch."""
    return (6 * params * seq * batch + 12 * heads * layers * head_dim * seq ** 2 * batch / 2) / 1e12


def maxtext_2503_gflop_per_token(hidden, mlp, heads, kv_heads, head_dim, layers, vocab, seq):
    """AI-Hypercomputer/maxtext@5e891cbf (2025-03-17, the A4 container's date) MaxText/maxtext_utils.py lines 183-241:
    three passes of the SwiGLU FFN, QKV, output projection and logits GEMMs, plus non-causal attention 4 s q d."""
    ffn, qkv, proj = 2 * hidden * mlp * 3, 2 * hidden * (heads + 2 * kv_heads) * head_dim, 2 * hidden * heads * head_dim
    weights = 3 * ((ffn + qkv + proj) * layers + 2 * hidden * vocab)
    return (weights + 3 * 4 * seq * heads * head_dim * layers) / 1e9


# the README's table (MaxText/configs/a3/llama_2_7b/README.md at efb6d9e4): VMs of 8 H100 -> TFLOP/sec/chip
A3_TABLE = {1: 492, 2: 422, 4: 407, 8: 409, 16: 375}
LLAMA2_7B_PARAMS = 6_738_415_616  # the checkpoint's tensors (MaxText counts its parameter pytree)


@pytest.mark.parametrize("vms", sorted(A3_TABLE))
def test_a3_rows_convert_the_readmes_tflops_with_maxtexts_2024_count(vms):
    row = published_rows()[f"maxtext_a3_llama2_7b_{8 * vms}"]
    per_step = maxtext_2404_tflop_per_device_step(LLAMA2_7B_PARAMS, 32, 32, 128, 4096, 4)
    assert per_step == pytest.approx(715.19, abs=0.01)
    assert float(row["step_time_s"]) == pytest.approx(per_step / A3_TABLE[vms], rel=1e-4)
    assert (int(row["num_gpus"]), int(row["global_batch_seqs"]), int(row["micro_batch"])) == (8 * vms, 32 * vms, 4)


def test_a4_log_lines_are_the_configs_they_are_read_as():
    # the README lines' TFLOP/s over tokens/s is MaxText's count for the model at 8,192 tokens: 70B and 405B
    rows = published_rows()
    for rid, tflops, dims in (
            ("maxtext_a4_llama31_70b_fp8_256", 1507.142, (8192, 28672, 64, 8, 128, 80, 128256, 8192)),
            ("maxtext_a4_llama31_405b_fp8_256", 1520.276, (16384, 53248, 128, 8, 128, 126, 128256, 8192))):
        r = rows[rid]
        assert tflops * 1e3 / float(r["value"]) == pytest.approx(maxtext_2503_gflop_per_token(*dims), rel=2e-3)
        tokens = int(r["global_batch_seqs"]) * int(r["seq_len"])
        assert tokens / (float(r["value"]) * int(r["num_gpus"])) == pytest.approx(float(r["step_time_s"]), rel=1e-4)


def test_maxtext_rows_take_their_scripts_mesh_remat_and_fp8_recipe(monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))

    setups = {s["run"]: s for s in published_setups() if s["run"].startswith("maxtext_")}
    assert set(setups) == {rid for rid, r in published_rows().items() if r["jax_mesh"]}
    want = {  # run: (dp, dp_shard, recompute, fp8 recipe), from each script's mesh and remat policy
        "maxtext_h100_llama2_7b": (8, None, "none", None),
        "maxtext_a3_llama2_7b_8": (8, None, "none", None),
        "maxtext_a3_llama2_7b_128": (128, 8, "none", None),  # dcn_data 16 x ici_fsdp 8
        "maxtext_a4_llama31_70b_fp8_256": (256, None, "full", "delayed"),  # dcn_fsdp 32 x ici_fsdp 8
        "maxtext_a4_llama31_405b_fp8_256": (256, 128, "full", "delayed"),  # dcn_data 2 x (16 x 8)
    }
    for rid, (dp, shard, recompute, fp8) in want.items():
        lay = setups[rid]["lay"]
        assert (lay.dp, lay.dp_shard, lay.recompute, lay.fp8_recipe) == (dp, shard, recompute, fp8), rid
        assert lay.dp_sharding == "zero3" and lay.weight_bytes == 4.0 and lay.gather_bytes == 2.0
