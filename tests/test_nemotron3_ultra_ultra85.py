"""Nemotron 3 Ultra 550B-A55B (ultra85): the model file against its published totals and the closed form of its
LatentMoE block, and the two 26.08 Megatron-Bridge rows as the table prints them and as the benchmark builds them.

Sources: the shape, NVIDIA/Megatron-LM@d98e8a64 examples/post_training/modelopt/conf/nvidia/
NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.sh; the totals, the model card ("550B parameters in total", 55B active) and
the Hugging Face page's 561B (its tensors, MTP included); the rows, NVIDIA-NeMo/Megatron-Bridge@4ab94dfa
docs/performance-summary.md (26.08, Model: Nemotron_3_Ultra) and perf_recipes/nemotronh/{common,gb200/nemotronh,
gb300/nemotronh}.py at that commit."""

import pytest

from published_setups import assert_printed_row, published_rows, published_setups, training_accuracy
from topo.training.model import Block, load_model

H, L, F, K, E, FS = 8192, 2048, 5120, 22, 512, 10240  # hidden, latent, expert FFN, top-k, experts, shared FFN


@pytest.fixture(scope="module")
def ultra():
    return load_model("nemotron-3-ultra-550b-a55b")


def test_the_parameter_count_is_the_published_totals(ultra):
    # the model card's "550B parameters in total" (without the MTP layer, as the Super file's 120.7B) and Hugging
    # Face's 561B for the checkpoint (its one MTP layer of "*E" included), each to the figure's printed precision
    assert round(ultra.total_params / 1e10) == 55  # 549.3B: "550B"
    assert round((ultra.total_params + ultra.mtp_params) / 1e9) == 561  # 560.5B: "561B"
    assert round(ultra.active_params / 1e9) in (55, 56)  # "A55B"; 56.06B with the embeddings counted


def test_an_moe_blocks_weights_are_the_latent_shapes(ultra):
    # routed experts 2 l f each, the shared expert 2 h fs, the two latent projections 2 h l, the router h E and its
    # E expert biases, the norm h (NVIDIA/Megatron-LM@d98e8a64 theoretical_memory_usage.py lines 104-126)
    assert ultra.block_params(Block.MOE) == E * 2 * L * F + 2 * H * FS + 2 * H * L + H * E + E + H
    assert ultra.layers == 108 and ultra.layer_pattern.count("E") == 48 and ultra.layer_pattern.count("*") == 12


# the 26.08 section's two Nemotron_3_Ultra rows: GPUs, GBS, MBS, sequence, TP/PP/CP/VP/EP, tokens/s/GPU, TFLOP/s/GPU
TABLE = {"mb2608_gb200_nemotron3_ultra": ("DGX-GB200", 256, 256, 1, 8192, "2/1/1/1/64", 2528, 923),
         "mb2608_gb300_nemotron3_ultra": ("DGX-GB300", 256, 256, 1, 8192, "1/1/1/1/64", 3552, 1281)}


def test_the_rows_are_the_table_and_the_gb200_one_is_fitted():
    rows = published_rows()
    for rid, (system, gpus, gbs, mbs, seq, layout, tokens, tflops) in TABLE.items():
        assert_printed_row(rows[rid], rid, "nemotron-3-ultra-550b-a55b", system, "NeMo 26.08", (gpus, gbs, mbs, seq),
                           layout, tokens, tflops, 1e-4)
    # the table's own FLOPs a token: 923e12 / 2,528 = 365 GFLOP on GB200, 1,281e12 / 3,552 = 361 on GB300 (both
    # runs count the same model: the two agree to 1.3%)
    assert 923e12 / 2528 == pytest.approx(1281e12 / 3552, rel=0.013)
    fitted = {s["run"]: s for s in published_setups() if "row" in s}
    assert not fitted["mb2608_gb200_nemotron3_ultra"]["holdout"] and fitted["mb2608_gb300_nemotron3_ultra"]["holdout"]


def test_the_recipe_is_built_as_its_publishing_commit_sets_it():
    # _apply_nemotron_3_ultra_perf_defaults / _fsdp_hsdp at @4ab94dfa: Megatron-FSDP (ZeRO-3; its HSDP below), no CUDA graphs,
    # the CuteDSL fused grouped MLP, selective recompute of moe_act, the native loss, router fusion and padding,
    # gradient_accumulation_fusion off (each weight gradient written new and copied into the FSDP gradient buffer)
    setups = {s["run"]: s for s in published_setups() if "row" in s}
    for rid in TABLE:
        lay = setups[rid]["lay"]
        assert lay.dp_sharding == "zero3" and lay.cuda_graph_scope == () and lay.recompute_modules == ("moe_act",)
        assert lay.moe_expert_kernels == "fused_mlp" and lay.cross_entropy == "fused"
        assert lay.moe_router_fusion and lay.moe_counts_aligned and lay.fp8_recipe == "mxfp8"
        assert lay.wgrad_output == "copied", rid
        assert training_accuracy.family(setups[rid]["model"].name) == "nemotron-3-ultra"
    assert setups["mb2608_gb200_nemotron3_ultra"]["lay"].tp == 2 and setups["mb2608_gb200_nemotron3_ultra"]["lay"].sequence_parallel


def test_the_rows_run_the_recipes_hsdp_with_an_optimizer_sharded_outer_group():
    # NVIDIA-NeMo/Megatron-Bridge@4ab94dfa perf_recipes/nemotronh/common.py _apply_nemotron_3_ultra_fsdp_hsdp:
    # num_distributed_optimizer_instances = max(1, num_gpus // _GB300_NVLINK_DOMAIN_GPUS) = 256 // 64 and
    # outer_dp_sharding_strategy = "optim" (n > 1); the inner groups are Megatron-LM@24bad8e6 parallel_state.py's
    # intra_partial_data_parallel_size = dp * cp // n and intra_partial_expert_data_parallel_size = expert_dp // n
    # (ultracol91, findings 392)
    n = 256 // 64
    setups = {s["run"]: s for s in published_setups() if "row" in s}
    for rid in TABLE:
        lay = setups[rid]["lay"]
        assert lay.cp == 1 and lay.expert_dp == 256 // (lay.ep * lay.expert_tp) == 4, rid
        assert (lay.dp_shard, lay.expert_dp_shard, lay.dp_outer_sharding) == (lay.dp // n, lay.expert_dp // n, "optim")
        dense, experts = lay.shard_divisors(1)  # the optimizer state over every DP rank, as ZeRO-3's (findings 391)
        assert (dense, experts) == (lay.dp, lay.expert_dp), rid
    assert setups["mb2608_gb200_nemotron3_ultra"]["lay"].dp_shard == 32
    assert setups["mb2608_gb300_nemotron3_ultra"]["lay"].dp_shard == 64
