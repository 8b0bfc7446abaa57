"""tidy96's leftovers of sections 399 and 400 (findings section 401).

Sources: the NVL72 placement at 64 of each rack's 72 GPUs (walk37, findings 393; Megatron-Bridge's GB200 recipes); a
filled dp is the job's GPUs over tp x cp x pp (``topo.cli.layout_dp.filled_dp``)."""

import json

import pytest

from conftest import run_cli

NVL = ("gb200-nvl72-superpod", "--set", "cluster.num_units=4", "--model", "llama3-8b")
FAIL = ("train", *NVL, "--fail", "nvswitch3", "--gpus-per-domain-used", "64", "--tp", "8", "--pp", "4")


def test_a_filled_jobs_failed_rack_is_told_the_skip_alone_and_its_dp():
    # findings 399 Left 1: 4 NVL72 racks at 64 of each, rack 3's NVLink switch failed, dp filled (256 / 32 = 8). The
    # refusal offered the skip only "with 1 more NVLink domain"; with the skip alone the filled dp takes 3 x 64 = 192
    # GPUs past rack 3, dp = 192 / (tp 8 x pp 4) = 6, which divides the global batch of 48, and runs
    err = run_cli(*FAIL, "--global-batch", "48").stderr
    dp = 3 * 64 // (8 * 4)
    assert err.count("\n") == 1 and err.startswith("error: --fail: nvswitch3 failed"), err
    assert f"allowed: --skip-domains [3] (a dp left to fill the GPUs is then {dp}: tp x cp x pp = 32 into the 192 " \
           "GPUs at 64 of each 72-GPU NVLink domain past skipped NVLink domain 3" in err, err
    assert "), or --skip-domains [3] with 1 more NVLink domain" in err, err
    out = run_cli(*FAIL, "--global-batch", "48", "--skip-domains", "3", "--json", check=True).stdout
    assert json.loads(out)["layout"]["dp"] == dp


def test_a_filled_region_jobs_failed_rack_is_told_the_skip_alone_and_its_dp(tmp_path):
    # the same on a region of two 8-rack NVL72 sites under equal shares (every site runs the smallest site's share):
    # east's rack 3 failed; with the skip on every share the smallest holds 7 x 64 = 448 GPUs, 448 / 32 = 14 replicas
    # a site, dp 28, which divides the global batch of 224 (as dp 32 does), and runs at 14 a site
    from small_regions import two_sites
    path = tmp_path / "nvl.toml"
    path.write_text(two_sites("nvl", "two NVL72 sites", "gb200-nvl72-superpod", 8, 8))
    job = ("train", str(path), "--model", "llama3-8b", "--tp", "8", "--pp", "4", "--fail", "east:nvswitch3",
           "--shares", "equal", "--gpus-per-domain-used", "64", "--global-batch", "224")
    err = run_cli(*job).stderr
    assert "allowed: --skip-domains [3] (a dp left to fill the GPUs is then 28: tp x cp x pp = 32 into the 448 GPUs " \
           "of the smallest site (every site runs that share) at 64 of each" in err, err
    assert "), or --skip-domains [3] with 1 more NVLink domain" in err, err
    out = run_cli(*job, "--skip-domains", "3", "--json", check=True).stdout
    assert json.loads(out)["site_dp"] == {"east": 14, "west": 14}


def test_the_skip_alone_is_not_offered_where_its_dp_does_not_divide_the_batch():
    # global batch 40: dp 8 (every rack) divides it, the refilled dp 6 does not, so only the spare rack is offered
    err = run_cli(*FAIL, "--global-batch", "40").stderr
    assert "--skip-domains [3] with 1 more NVLink domain" in err and "is then 6" not in err, err


def test_the_search_floor_of_the_flex_groups_gather_spans_its_ep_x_etp_ranks():
    # findings 399 Left 2 (m40): HybridEP gathers the routing map over Megatron-Core's tp_ep group, ep x etp ranks
    # (mapping.FLEX_GROUP; NVIDIA/Megatron-LM@d98e8a64 token_dispatcher.py, findings 390). Qwen3 30B-A3B, HybridEP, tp
    # = etp = 2, ep 8 on 8-GPU H100 nodes: the group is 16 ranks, so the search's floor of an S-byte gather is
    # S (16 - 1) / 16 over NVLink's 450 GB/s (a ring's share a rank), not ep alone's S 7/8; not overlapped (microbatch)
    import topo
    from topo.training.comm import CommEngine
    from topo.training.gpus import gpu_compute
    from topo.training.mapping import FLEX_GROUP, default_placement
    from topo.training.model import load_model
    from topo.training.parallel import ParallelLayout
    from topo.training.search import _comm_floor_s, _keys, _Search
    from topo.training.step import step_traffic, traffic_stage
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    lay = ParallelLayout(tp=2, etp=2, dp=32, ep=8, global_batch=64, micro_batch=1, dp_sharding="zero1",
                         ep_dispatcher="deepep", ep_flex_backend="hybridep")
    lay, _ = default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    s = _Search(fabric, m, CommEngine(fabric), gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0]), 5,
                dict(convention="6n", efficiency=None), None, None)
    s.bound_of(lay, _keys(lay))
    sc = s.bound_cache[_keys(lay)[1]][1]
    flex = [it for it in step_traffic(m, lay, traffic_stage(lay, sc)) if it["groups"] == FLEX_GROUP]
    assert flex and all(it["dim"] == "ep" and it["phase"] == "microbatch" and it["collective"] == "all_gather"
                        for it in flex) and not lay.overlap_ep
    assert fabric.spec.nvlink_Bps == 450e9
    floor = sum(it["calls"] * it["size_bytes"] * 15 / 16 / 450e9 for it in flex)
    got = _comm_floor_s(fabric.spec, lay, flex, sc, None, tp_overlap=False)[1]
    assert got == pytest.approx(floor, rel=1e-12)


def test_a_shard_group_wider_than_a_sites_share_is_refused_in_the_jobs_figures(tmp_path):
    # findings 400 Left 4: east 2 SUs (512 H100), west 1 (256), by size: tp 8 fills dp 96, east 64 replicas, west 32.
    # The region's step keeps each hybrid shard group inside one site (multisite._stays_in_site); dp_shard 48 divides
    # the job's 96 but neither share: refused naming the site's share and the job's dp, allowed gcd(64, 32) = 32 (the
    # share's own check said "48 does not divide dp 64", the job's dp being 96); 32 runs
    from small_regions import two_sites
    path = tmp_path / "r.toml"
    path.write_text(two_sites("r2", "two unlike sites", "dgx-h100-superpod", 2, 1))
    job = ("train", str(path), "--model", "llama3-8b", "--tp", "8", "--shares", "by-size", "--global-batch", "96")
    err = run_cli(*job, "--layout", "dp_sharding=zero3,dp_shard=48").stderr
    assert err == ("error: --layout: dp_shard: 48 does not divide site east's share of dp (64 of the job's 96): a "
                   "shard group runs inside one site (one crossing the sites every micro-batch is not priced); "
                   "allowed: a divisor of every site's share (32)\n"), err
    out = run_cli(*job, "--layout", "dp_sharding=zero3,dp_shard=32", "--json", check=True).stdout
    assert json.loads(out)["site_dp"] == {"east": 64, "west": 32}


def test_a_region_plan_says_its_jobs_idle_servers_and_spares_as_one_sites_plan_does():
    # findings 399 Left 4: two-site-h100, 2 x 1,536 H100 of 8 a server (192 servers a site); the job's 512 GPUs, 256 a
    # site, leave (1,536 - 256) / 8 = 160 whole servers a site idle, 320 in all; the rule (reliability.toml
    # hot_spare_fraction, an assumption of 1%) holds floor(0.01 x 192) = 1 a site, 2 in all. The words are one site's
    # plan's (topo.plan.spare_note.hot_spare_note)
    out = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=16,global_batch=512",
                  "--tokens", "15T", "--no-collectives", check=True).stdout
    idle, spares = 2 * (1536 - 256) // 8, 2 * int(0.01 * 192)
    assert (f"note: llama3-70b's job holds 512 of the 3,072 GPUs and leaves {idle} whole servers of 8 GPUs idle; the "
            f"failure model's rule holds {spares} of them as hot spares (reliability.checkpoint.hot_spare_fraction of "
            "each site's servers, floored, at most its idle: east 1 of 192 servers, west 1 of 192 servers)\n") in out, out
