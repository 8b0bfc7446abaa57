"""rev111's review of sections 469-474: tests that catch the mutations the sections' own tests let through.

Sources as the sections cite them: Megatron-Core's ``overlap_param_gather_with_optimizer_step``
(NVIDIA/Megatron-LM@14346b65a2d0790e451919858f7771078105c5f0 ``megatron/core/optimizer/__init__.py`` lines 1056-1062:
chunk 0's dense optimizer apart; lines 1207-1243: the expert optimizer over every chunk, appended last;
``optimizer.py`` lines 1667-1675: chunk 0's gather dispatched after optimizer 0's step; ``megatron/training/
arguments.py`` lines 1032-1040: only with the distributed optimizer); a region's NVL72 spares (plan134).
"""

import pytest

import topo
from topo.errors import TopoError
from topo.fabric.region import build_region
from topo.plan.region import plan_region
from topo.plan.reliability import joint_reliability, reliability
from topo.plan.train_time import TrainingJob
from topo.training.comm import CommEngine
from topo.training.dp_overlap import interleaved_gather_exposed_s
from topo.training.gpus import gpu_compute
from topo.training.mapping import map_layout
from topo.training.memory import busiest_stage, stage_params
from topo.training.model import load_model
from topo.training.operators import optimizer_step_s, stage_compute
from topo.training.parallel import check_layout, make_layout
import topo.training.step as step_mod
from topo.training.step import estimate_step, exposed_routed, gather_lead_s, optimizer_params

COL = "overlap_param_gather_with_optimizer_step"


def test_a_lead_longer_than_chunk_zeros_gather_waits_nothing_not_less():
    # chunk 0's 1 s gather dispatched 5 s before the step's first forward: done 4 s early, no wait (not -4 s);
    # chunk 1's 1 s gather, dispatched at the step's start, ends at 1 s, before its first forward at 2 x 1 s
    assert interleaved_gather_exposed_s(1.0, 1.0, 1, 2, 2, 1.0, 5.0) == 0.0


def test_the_lead_steps_every_expert_of_the_stage_after_chunk_zero():
    # the expert optimizer holds every chunk's experts and steps after chunk 0's dense one (__init__.py lines
    # 1207-1243), so the lead is the later chunks' dense shard and the whole expert shard, at the step's rate
    m = load_model("mixtral-8x7b")
    lay = make_layout(tp=2, ep=4, pp=4, vpp=2, dp=8, global_batch=256, dp_sharding="zero1", **{COL: True})
    gpu = gpu_compute("h100")
    rows = stage_params(m, lay)
    dense, expert, _ = rows[busiest_stage(rows)]
    d_div, e_div = lay.shard_divisors(1)
    assert expert > 0
    want = (dense * (2 - 1) / 2 / d_div + expert / e_div) / (dense / d_div + expert / e_div)
    full = optimizer_step_s(optimizer_params(m, lay), gpu, lay)
    assert gather_lead_s(m, lay, gpu) == pytest.approx(want * full, rel=1e-12)
    assert want > 1 / 2  # more than chunk 1's dense half: the experts' step counts


@pytest.mark.parametrize("sharding, allowed", [("zero1", True), ("zero2", True), ("zero3", False), ("fsdp", False)])
def test_only_the_distributed_optimizer_runs_it(sharding, allowed):
    # Megatron-LM asserts use_distributed_optimizer (arguments.py line 1033): topo's ZeRO-1/2; Megatron-FSDP
    # (ZeRO-3, fsdp) has no ChainedOptimizer chunk split
    lay = make_layout(tp=4, pp=4, vpp=4, dp=16, global_batch=1024, dp_sharding=sharding, **{COL: True})
    if allowed:
        check_layout(load_model("llama3-70b"), lay)
        return
    with pytest.raises(TopoError, match=COL) as err:
        check_layout(load_model("llama3-70b"), lay)
    assert "distributed optimizer" in str(err.value) and sharding in str(err.value)


def test_the_searchs_routed_dp_term_takes_the_lead_as_the_step_does(monkeypatch):
    # exposed_routed is the search's refinement: once the DP groups are routed, exactly the step's DP term (the SM
    # cost of hidden collectives aside, as test_training_search.py's test_dp_exposed_from_routed_collectives_is_the_steps)
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("llama3-70b")
    lay = make_layout(tp=8, pp=4, vpp=2, dp=8, global_batch=64, dp_sharding="zero1", **{COL: True})
    mapping = map_layout(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    sc = stage_compute(m, lay, gpu_compute(fabric.spec.gpu))
    eng = CommEngine(fabric)
    monkeypatch.setattr(step_mod, "sm_loss_s", lambda hidden_s, full_s, reduced_s: 0.0)
    r = estimate_step(fabric, m, lay, engine=eng, contention=False)
    assert r.gather_lead_s > 0
    assert exposed_routed(eng, m, lay, mapping, sc)["dp"] == pytest.approx(r.breakdown_s["dp"], rel=1e-12)


def _rack_site(repair_s):
    """6 NVL72 racks, a job of 256 GPUs at 64 a rack, 1e-4 GPU failures per GPU-hour (no other cause)."""
    return reliability(6 * 72, 4, causes={"gpu": 1e-4}, observed_gpus=1, observed_days=1 / 24, modules=[],
                       nic_modules=[], params=1e9, bytes_per_param=14, write_Bps=1e10, restart_s=60.0,
                       repair_s=repair_s, hot_spare_fraction=0.01, flop=1e20, job_gpus=256,
                       gpus_per_domain=72, gpus_per_domain_used=64)


def test_a_regions_repairs_a_rack_are_its_busiest_sites():
    # two sites whose repairs differ (350 h and 100 h): a rack of the first expects 1e-4 x 64 x 350 = 2.24 servers
    # in repair, more than its 2 trays; the region's figure is that one, which is why it falls short
    slow, fast = _rack_site(350 * 3600), _rack_site(100 * 3600)
    joint = joint_reliability([slow, fast], [432, 432], [1e20, 1e20], 0.0)
    assert not joint.spares_enough
    assert joint.servers_in_repair_per_domain == pytest.approx(1e-4 * 64 * 350, rel=1e-12)


def test_a_regions_sites_placed_apart_keep_their_own_spares(tmp_path):
    # the region's job names no one placement; east's share at 64 of each rack's 72 keeps 2 trays a rack, west's at
    # 72 of 72 none inside its racks (the fraction rule), each said with its own figures
    from test_plan_region_spares_plan134 import REGION
    path = tmp_path / "two-nvl72.toml"
    path.write_text(REGION)
    job = TrainingJob(model="llama3-8b", gpus=544, step_time_s=1.0, tokens_per_step=10**6)
    r = plan_region(build_region(str(path), []), training=job, site_gpus={"east": 256, "west": 288},
                    site_gpus_per_domain_used={"east": 64, "west": 72}, collectives=False)
    assert [p.reliability.hot_spares_of for p in r.site_plans] == ["domains", "fraction"]
    assert r.reliability.hot_spares_of == "domains/fraction"
    (note,) = [n for n in r.notes if n.startswith("site east: llama3-8b's job")]
    assert "at 64 of each 72-GPU NVLink domain (4 domains): each domain's 2 idle whole servers" in note
    assert "site west: " in note and "it fills each of its 4 NVLink domains (72 of 72 GPUs)" in note


def test_a_job_on_one_server_domains_is_not_told_it_fills_them():
    # HGX: a domain is one 8-GPU server (_domain_spares: none idle inside it), so a failed server is the whole domain
    # and the fraction rule's spares are the job's, as before plan134: no "it fills each of its domains" clause
    from topo.plan.spare_note import job_spare_note
    r = reliability(64 * 8, 8, causes={"gpu": 1e-4}, observed_gpus=1, observed_days=1 / 24, modules=[],
                    nic_modules=[], params=1e9, bytes_per_param=14, write_Bps=1e10, restart_s=60.0,
                    repair_s=3600.0, hot_spare_fraction=0.05, flop=1e20, job_gpus=256, gpus_per_domain=8,
                    gpus_per_domain_used=8)
    assert (r.hot_spares_of, r.job_domains, r.hot_spare_servers) == ("fraction", 32, 3)  # floor(5% x 64) = 3
    note = job_spare_note("m", 256, 512, r, 8, 8, 8, "rule")
    assert "leaves 32 whole servers of 8 GPUs idle" in note and "it fills" not in note
