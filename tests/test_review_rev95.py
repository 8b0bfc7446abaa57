"""rev95's review of the session's second half (80f0dd96..d54db5c3, findings section 399): each test here fails on a
mutation of that change no earlier test caught (the mutation named in each test's comment).

Sources: Megatron-FSDP's ``outer_dp_sharding_strategy = "optim"`` only with ``optim_grads_params`` (ZeRO-3),
NVIDIA/Megatron-LM@24bad8e6 ``megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py`` line 2497
(findings 391); the NVL72 placement at 64 of each rack's 72 GPUs (walk37, findings 393); the hot-spare rule,
``topo/data/catalog/reliability.toml`` ``hot_spare_fraction`` (an assumption: 1% of the servers, at most the whole
servers a job leaves; walk26, tidy94, findings 394); a region's share note (tidy89, findings 390)."""

import json
from dataclasses import replace

import pytest

import topo
from conftest import run_cli
from published_setups import published_setups
from small_regions import built_region, two_sites
from topo.errors import TopoError
from topo.plan import plan
from topo.plan.train_time import TrainingJob
from topo.spec import load_spec
from topo.training.model import load_model
from topo.training.multisite import _share_as_taken
from topo.training.multisite_layout import region_layout
from topo.training.parallel import check_layout, make_layout
from topo.training.step import duty_weighted_slowdowns, estimate_step, not_fit_note


def test_optim_outer_sharding_is_refused_with_hybrid_zero2():
    # mutation: the check's ``zero_stage < 3`` made ``< 2``. Megatron-FSDP shards the outer group's optimizer state
    # only with optim_grads_params (ZeRO-3; param_and_grad_buffer.py line 2497 at 24bad8e6): a hybrid ZeRO-2 layout
    # (weights whole, dp_shard 32 of dp 128) with ``optim`` is refused naming the sharding it got
    s = {x["run"]: x for x in published_setups() if "row" in x}["mb2608_gb200_nemotron3_ultra"]
    lay = s["lay"].model_copy(update={"dp_sharding": "zero2", "dp_shard": 32, "expert_dp_shard": 1,
                                      "dp_outer_sharding": "optim"})
    check_layout(s["model"], lay.model_copy(update={"dp_outer_sharding": "no_shard"}))  # hybrid ZeRO-2 itself is fine
    with pytest.raises(TopoError) as e:
        check_layout(s["model"], lay)
    assert e.value.key == "dp_outer_sharding" and "got dp_sharding zero2" in e.value.message


NVL = ("gb200-nvl72-superpod", "--set", "cluster.num_units=4", "--model", "llama3-8b")


def test_search_fills_64_of_each_rack():
    # mutation: ``topo train --search`` not passing gpus_per_domain_used to job_gpus. 4 NVL72 racks at 64 of each
    # rack's 72 GPUs: 4 x 64 = 256 GPUs searched, not the fabric's 288
    out = run_cli("train", *NVL, "--search", "--gpus-per-domain-used", "64", "--global-batch", "256", "--json",
                  check=True).stdout
    assert json.loads(out)["gpus"] == 4 * 64


def test_a_regions_filled_dp_takes_64_of_each_rack(tmp_path_factory):
    # mutation: share_gpus (a region's smallest site's GPUs) not passing gpus_per_domain_used. Two sites of one NVL72
    # rack each, at 32 of its 72 GPUs: dp = 2 sites x 32 (global batch 1,152 splits over each); no hint, the
    # production placement's 64 (tidy122, section 445: every GPU before); 72, every GPU
    region = built_region(tmp_path_factory, two_sites("rev95", "two NVL72 racks", "gb200-nvl72-superpod", 1), "rev95")
    assert region_layout(region, {"tp": 1, "global_batch": 1152, "gpus_per_domain_used": 32}).dp == 2 * 32
    assert region_layout(region, {"tp": 1, "global_batch": 1152}).dp == 2 * 64
    assert region_layout(region, {"tp": 1, "global_batch": 1152, "gpus_per_domain_used": 72}).dp == 2 * 72


JOB = dict(model="m", step_time_s=2.0, tokens_per_step=4_000_000)


def _relia(gpus, fraction):
    layers = [("--set", {"reliability": {"checkpoint": {"hot_spare_fraction": fraction}}})]
    return plan(load_spec("gb200-nvl72-superpod", overrides=["cluster.num_units=4"]), layers=layers,
                collectives=False, training=TrainingJob(gpus=gpus, **JOB)).reliability


def test_the_spares_are_at_most_the_idle_servers_and_those_are_whole():
    # mutations: _hot_spares not capped by the idle servers; _free_servers rounding up. 4 racks = 72 four-GPU trays;
    # a job of 256 GPUs leaves (288 - 256) // 4 = 8 trays, and at hot_spare_fraction 0.5, floor(0.5 x 72) = 36 is
    # capped at those 8; a job of 254 leaves 34 GPUs: 8 whole trays (not 9)
    rel = _relia(256, 0.5)
    assert (rel.free_servers, rel.hot_spare_servers) == ((288 - 256) // 4, 8)
    rel = _relia(254, 0.5)
    assert (rel.free_servers, rel.hot_spare_servers) == ((288 - 254) // 4, 8) == (8, 8)


def test_a_regions_idle_servers_are_every_sites():
    # mutation: joint_reliability's free servers the largest site's, not the sum. two-site-h100: 2 x 1,536 H100 of 8
    # a server; the job's 512 GPUs, 256 a site, leave (1,536 - 256) / 8 = 160 servers a site, 320 in all; the spares
    # floor(1% x 192) = 1 a site
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=16,global_batch=512",
                "--tokens", "15T", "--no-collectives", "--json", check=True)
    rel = json.loads(p.stdout)["reliability"]
    assert (rel["free_servers"], rel["hot_spare_servers"], rel["training_gpus"]) == (2 * (1536 - 256) // 8, 2, 512)


def test_a_taken_forms_note_goes_first_where_the_share_fits():
    # mutation: the taken form's does-not-fit note appended, not put first, where the share's own step fits
    # (``_share_as_taken``'s docstring: "in the share's own note's place, else first")
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    lay = make_layout(tp=1, dp=8, global_batch=64, seq_len=4096, dp_sharding="zero3", recompute="full")
    one = estimate_step(fabric, load_model("llama3-8b"), lay, contention=False)
    assert one.memory.fits
    one = replace(one, notes=["first note", "second note"])
    taken = replace(one.memory, capacity_bytes=one.memory.total_bytes / 2)
    got = _share_as_taken(one, taken)
    assert got.notes == [not_fit_note(taken, one.gpu), "first note", "second note"]


FAIL = ("train", *NVL, "--fail", "nvswitch3", "--gpus-per-domain-used", "64", "--tp", "8")


def test_a_failed_racks_skip_counts_the_gpus_at_64_of_each():
    # rev95's fix (topo/cli/layout_dp.py skip_way_dp, at the job's gpus_per_domain_used): 4 NVL72 racks at 64 of each,
    # rack 3 failed; past it a filled dp takes 3 x 64 = 192 GPUs, not 3 x 72 = 216. tp 8 x pp 16 = 128 does not divide
    # 192: the skip names --dp floor(192 / 128) = 1 and says 192; tp 8 x pp 4 = 32 divides 192 (dp 6, the pair runs),
    # so no dp is named (it was told "216 ... which 32 does not divide")
    err = run_cli(*FAIL, "--pp", "16", "--global-batch", "16").stderr
    assert "--skip-domains [3] with --dp 1 (a dp left to fill the GPUs would take the 192 past" in err, err
    err = run_cli(*FAIL, "--pp", "4", "--global-batch", "48").stderr
    assert err.startswith("error: --fail: nvswitch3 failed") and "216 past" not in err and "with --dp" not in err, err
    out = run_cli(*FAIL, "--pp", "4", "--global-batch", "48", "--skip-domains", "3", "--json", check=True).stdout
    assert json.loads(out)["layout"]["dp"] == 3 * 64 // 32


def test_optim_needs_replica_groups_not_a_shard_group_of_every_rank():
    # mutation: hybrid_sharded's ``dp_shard < dp`` made ``<=``. A shard group of every DP rank (dp_shard = dp, the
    # experts' of all their replicas) leaves one replica group: Megatron-FSDP's HSDP needs
    # num_distributed_optimizer_instances > 1 (Megatron-Bridge@4ab94dfa perf_recipes/nemotronh/common.py sets
    # "optim" only for n > 1, findings 392), so ``optim`` is refused
    s = {x["run"]: x for x in published_setups() if "row" in x}["mb2608_gb200_nemotron3_ultra"]
    lay = s["lay"].model_copy(update={"dp_shard": s["lay"].dp, "expert_dp_shard": s["lay"].expert_dp,
                                      "dp_outer_sharding": "optim"})
    with pytest.raises(TopoError) as e:
        check_layout(s["model"], lay)
    assert e.value.key == "dp_outer_sharding" and f"dp_shard {lay.dp}," in e.value.message


def test_a_steady_collective_is_slowed_at_most_its_whole_mix_slowdown():
    # mutation: duty_weighted_slowdowns without its min(1, f). Sharers busy 3 s in a 2 s window meet x at most all
    # of it: 1 + (s - 1) min(1, 3 / 2) = s (section 391's closed form), not 1 + 1.5 (s - 1)
    w = duty_weighted_slowdowns({"x": 2.0}, {"x": 0.5, "a": 1.5, "b": 1.5}, 2.0, {"x": ("a", "b")})
    assert w["x"] == pytest.approx(2.0)


def test_a_search_filled_at_n_of_each_domain_is_refused_naming_that_flag():
    # rev95's fix (topo/cli/layout_dp.py placed_by): 4 racks at 61 of each = 244 GPUs = 4 x 61, a global batch of 7:
    # dp divides gcd(244, 7) = 1, so tp x cp x pp = 244, which no layout of llama3-8b (32 layers, 32 heads) takes. The
    # refusal named --gpus, which was not given; it names the flag that sized the job
    bad = run_cli("train", *NVL, "--search", "--gpus-per-domain-used", "61", "--global-batch", "7")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith("error: --gpus-per-domain-used: no layout of llama3-8b on 244 GPUs"), bad.stderr
