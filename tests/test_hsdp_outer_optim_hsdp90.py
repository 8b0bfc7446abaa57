"""Megatron-FSDP's HSDP with ``outer_dp_sharding_strategy = "optim"`` (layout ``dp_outer_sharding``, findings
section 391): the optimizer state over every data-parallel rank, the replicas' gradient reduce-scatter and weight
all-gather once a step (NVIDIA/Megatron-LM@24bad8e6 megatron/core/distributed/fsdp/src/megatron_fsdp/
param_and_grad_buffer.py lines 2389-2424, 4127-4206; megatron_fsdp.py lines 482-489, 768-770)."""

import pytest

from conftest import run_cli
from published_setups import published_setups
from topo.errors import TopoError
from topo.training.memory import memory_per_gpu, stage_params, busiest_stage, units_holding
from topo.training.parallel import check_layout
from topo.training.step import optimizer_params, step_traffic

RUN = "mb2608_gb200_nemotron3_ultra"  # 256 GB200, TP2 EP64 DP128: the recipe's 4 instances, inner groups dp/4


@pytest.fixture(scope="module")
def ultra():
    s = {x["run"]: x for x in published_setups() if "row" in x}[RUN]
    # the row carries its recipe's HSDP since ultracol91 (runs columns); ZeRO-3 over every DP rank rebuilt beside it
    zero3 = s["lay"].model_copy(update={"dp_shard": None, "expert_dp_shard": None, "dp_outer_sharding": "no_shard"})
    hsdp = zero3.model_copy(update={"dp_shard": 32, "expert_dp_shard": 1})  # dp 128 / 4, expert_dp 4 / 4
    return s["model"], zero3, hsdp, hsdp.model_copy(update={"dp_outer_sharding": "optim"})


def test_the_optimizer_state_is_sharded_over_every_rank(ultra):
    model, zero3, hsdp, optim = ultra
    check_layout(model, optim)
    # the Adam step and its 12 B/param state: over all 128 DP ranks and the experts' 4 replicas, ZeRO-3's figure
    assert optimizer_params(model, optim) == pytest.approx(optimizer_params(model, zero3), rel=1e-12)
    dense, expert, _ = stage_params(model, optim)[0]
    assert optimizer_params(model, optim) == pytest.approx(dense / 128 + expert / 4, rel=1e-12)
    assert optimizer_params(model, hsdp) == pytest.approx(dense / 32 + expert / 1, rel=1e-12)  # no_shard
    cap = 198.7e9
    mem = {k: memory_per_gpu(model, lay, cap, generation="blackwell") for k, lay in
           (("zero3", zero3), ("hsdp", hsdp), ("optim", optim))}
    assert mem["optim"].optimizer_bytes == pytest.approx(mem["zero3"].optimizer_bytes, rel=1e-12)
    assert mem["optim"].weights_bytes == pytest.approx(mem["hsdp"].weights_bytes, rel=1e-12)  # weights: inner shards
    assert mem["optim"].gradients_bytes == pytest.approx(mem["hsdp"].gradients_bytes, rel=1e-12)  # gradients: inner shards


def test_the_replicas_reduce_scatter_and_gather_once_a_step(ultra):
    model, _, hsdp, optim = ultra
    m = optim.microbatches
    assert m == 2  # GBS 256 / (MBS 1 x DP 128)
    dense, expert, _ = stage_params(model, optim)[busiest_stage(stage_params(model, optim))]
    held_dense, held_expert = units_holding(model, optim)[0]

    def across(lay, groups):
        return [it for it in step_traffic(model, lay) if it["dim"] == "dp" and it["groups"] == groups]

    for groups, n, width, units, rb in (("dpr", dense, 32, held_dense, optim.reduce_bytes),
                                        ("edpr", expert, 1, held_expert, optim.expert_reduce_bytes)):
        shard = n / width * rb  # a replica's gradient shard, bytes
        plain = across(hsdp, groups)  # no_shard: an all-reduce of each unit's shard every micro-batch
        assert [it["collective"] for it in plain] == ["all_reduce"]
        assert plain[0]["size_bytes"] * plain[0]["calls"] == pytest.approx(m * shard, rel=1e-12)
        rs, ag = across(optim, groups)
        assert (rs["collective"], rs["phase"], ag["collective"], ag["phase"]) == \
            ("reduce_scatter", "reduce", "all_gather", "gather")
        assert rs["calls"] == ag["calls"] == units  # one a unit, once a step
        assert rs["size_bytes"] * rs["calls"] == pytest.approx(shard, rel=1e-12)  # the shard, once
        assert ag["size_bytes"] * ag["calls"] == pytest.approx(shard / rb * ag["elem_bytes"], rel=1e-12)


@pytest.mark.parametrize("update, said", [
    ({"dp_shard": None, "expert_dp_shard": None}, "dp_shard None, expert_dp_shard None"),
    ({"dp_sharding": "zero1"}, "got dp_sharding zero1"),
])
def test_optim_needs_hybrid_zero3(ultra, update, said):
    model, _, _, optim = ultra
    with pytest.raises(TopoError) as e:
        check_layout(model, optim.model_copy(update=update))
    assert e.value.key == "dp_outer_sharding" and said in e.value.message and "allowed otherwise: no_shard" in \
        e.value.message


def test_the_flag_is_in_train_help_and_a_bad_value_is_one_line():
    out = run_cli("train", "--help")
    assert "dp_outer_sharding=optim" in " ".join(out.stdout.split())
    bad = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "16", "--tp", "8",
                  "--layout", 'dp_outer_sharding="full"', check=False)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "dp_outer_sharding: must be one of 'no_shard' or 'optim', got 'full'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
