"""plan70: the planner's leftovers a capacity planner meets first (findings section 300).

1. A named job smaller than the cluster: the effective compute and the cost per effective GPU-hour count the job's
   GPUs at its goodput; the GPUs it leaves (hot spares, idle) deliver none of its work.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli
from topo.plan import plan
from topo.plan.train_time import TrainingJob
from topo.training.memory import fragmentation_margin_bytes

SPEC = "dgx-h100-superpod"  # 1,024 H100 in 128 DGX H100 (the bundled spec)


@pytest.fixture(scope="module")
def half_job():
    """A 512-GPU job (half the cluster) of a made-up step: 1 s for 1M tokens."""
    job = TrainingJob(model="m", gpus=512, step_time_s=1.0, tokens_per_step=1_000_000, tokens=1e12)
    return plan(SPEC, collectives=False, training=job)


def test_a_half_cluster_jobs_effective_compute_is_its_own_gpus_at_its_goodput(half_job):
    r, rel = half_job, half_job.reliability
    assert r.num_gpus == 1024 and rel.hot_spare_servers >= 1
    assert rel.training_gpus == 512  # not 1,024 - the spares' GPUs
    assert rel.effective_flop == pytest.approx(r.compute.flop * rel.goodput * 512 / 1024, rel=1e-12)


def test_a_half_cluster_jobs_tokens_carry_the_whole_clusters_cost(half_job):
    r, rel = half_job, half_job.reliability
    per_cluster_hour = r.ownership.cost_per_gpu_hour_usd * r.num_gpus  # the TCO an hour, every installed GPU
    assert r.cost_per_effective_gpu_hour_usd == pytest.approx(per_cluster_hour / (rel.goodput * 512), rel=1e-12)
    tokens_per_hour = 1e6 * 3600 * rel.goodput  # 1M tokens a 1 s step, at the job's goodput
    assert r.cost_per_million_tokens_usd == pytest.approx(per_cluster_hour / tokens_per_hour * 1e6, rel=1e-12)


# 2. --it-power with --model: each candidate count is planned with the job's own step on it (its MFU sizes the
#    dataset, hence the storage), as the final plan is. Llama 3 8B (dp 2,048 x tp 8 = 16,384 GPUs) on h100-100k
#    at 49.5 MW: the catalog's MFU 0.35 put 20 pods at 49.53 MW (19 fitted); the job's step (MFU 0.243) draws
#    49.48 MW at 20 pods, which fit.
JOB_8B = ("--model", "llama3-8b", "--layout", "tp=8,dp=2048,global_batch=4096", "--no-collectives", "--json")


def test_the_power_fit_sizes_each_count_with_the_jobs_own_step():
    fit = json.loads(run_cli("plan", "h100-100k", "--it-power", "49.5MW", *JOB_8B, check=True).stdout)["power_fit"]
    assert fit["count"] == 20 and fit["it_power_W"] <= 49.5e6
    at_21 = json.loads(run_cli("plan", "h100-100k", "--set", "cluster.num_pods=21", *JOB_8B, check=True).stdout)
    assert fit["next_it_power_W"] == pytest.approx(at_21["power"]["it_power_W"], rel=1e-12)


# 3. walk28 Left 1: a layout that fits within the caching allocator's fragmentation is said so (a note; the ranking
#    and "fits" are unchanged: the margin is GMLake's mean over its runs, 9.2 GB on A100-80GB, arXiv 2401.08156's
#    abstract, not a bound a published run had to leave free).
TIGHT_8B = ("train", "dgx-h100-superpod", "--gpus", "256", "--model", "llama3-8b", "--global-batch", "512",
            "--tp", "1", "--dp", "256", "--micro-batch", "2", "--dp-sharding", "zero3")


def test_the_fragmentation_margin_is_gmlakes_mean():
    assert fragmentation_margin_bytes() == 9.2e9  # GMLake, arXiv 2401.08156: 9.2 GB saved on average


def test_a_layout_that_fits_within_the_margin_is_said_to_risk_running_out():
    out = run_cli(*TIGHT_8B, check=True).stdout
    total, cap = (float(x) for x in re.search(r"total ([\d.]+) GB of ([\d.]+) GB: fits", out).groups())
    assert cap - total < 9.2
    assert re.search(r"note: free memory per GPU under 9\.2 GB \(this layout [\d.]+ GB\).*fragmentation", out)


def test_a_layout_with_room_gets_no_such_note():
    out = run_cli(*TIGHT_8B[:-6], "--tp", "8", "--dp", "32", check=True).stdout
    assert "fits" in out and "free memory per GPU under" not in out


# 4. walk28 Left 2 and 3: a plant of generators larger than the load, and more storage than compute servers, said
#    with the key that changes them.
@pytest.fixture(scope="module")
def superpod():
    return plan(SPEC, collectives=False)


def test_generators_larger_than_every_blocks_load_are_said(superpod):
    e = superpod.electrical
    # N+1 over 2 blocks, each under one 3 MW set (facility.toml's assumption): 2 x (1 + 1) sets = 12 MW
    assert e.generators == 4 and e.generator_capacity_W == 12e6 and e.largest_block_facility_W < 3e6
    said = [n for n in superpod.notes if n.startswith("each electrical block's facility load")]
    assert len(said) == 1 and "plan.facility.generator_W" in said[0] and "12.00 MW" in said[0]
    assert not plan("h100-100k", collectives=False).electrical.oversized_note()  # blocks of many sets


def test_more_storage_servers_than_compute_servers_are_said(superpod):
    st = superpod.storage
    assert st.servers > superpod.num_servers == 128
    said = [n for n in superpod.notes if f"{st.servers} storage servers for 128 compute servers" in n]
    assert len(said) == 1 and "plan.storage.kind" in said[0]
    fewer = plan(SPEC, collectives=False, layers=[("t", {"storage": {"kind": "ddn_ai400x2"}})])
    assert fewer.storage.servers <= 128 and not any("storage servers for" in n for n in fewer.notes)


# 5. walk28 Left 5: an unknown key of two words is offered the keys of its first word; a GPU count that fills no
#    whole server gets the nearest counts that build, as a server count does.
def test_nic_speed_is_offered_the_nic_keys_not_nics():
    err = run_cli("describe", SPEC, "--set", "server.nic_speed=400").stderr
    assert "did you mean one of 'nic_rate', 'nic_model', 'nic_latency'?" in err and "Traceback" not in err
    assert "did you mean 'nic_rate'?" in run_cli("describe", SPEC, "--set", "server.nic_rat=400").stderr


def test_a_gpu_count_of_no_whole_server_gets_the_nearest_counts():
    err = run_cli("describe", SPEC, "--unset", "cluster.num_units", "--set", "cluster.num_gpus=250").stderr
    assert "250 GPUs do not fill whole servers of 8 GPUs (nearest: 256 GPUs)" in err  # 32-server units: 256 GPUs
    err = run_cli("describe", SPEC, "--unset", "cluster.num_units", "--set", "cluster.num_gpus=1020").stderr
    assert "(nearest: 768 or 1,024 GPUs)" in err
