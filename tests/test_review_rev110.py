"""rev110: the mutations of sections 465-467 (walk46's input fixes, plan131's checkpoint interval and per-GPU shard,
spares132's hot spares inside a job's NVLink domains) that no test caught.

Closed forms: the renewal goodput at work T between checkpoints, stall C, recovery R, rate 1 / M (Bougeret et al.,
SC 2011, eq. 1 without downtime; Daly, FGCS 22(3), 2006) is T / M / (e^(R / M) (e^((T + C) / M) - 1)); a job at 64 of
each GB200 NVL72 rack's 72 GPUs leaves (72 - 64) / 4 = 2 four-GPU trays idle in each of its racks (Megatron-Bridge's
GB200 recipes; CoreWeave's Slurm segments of at most 16 of 18 nodes,
docs.coreweave.com/observability/managed-grafana/sunk/slurm-block-topology); an 8-GPU HGX server is a whole NVLink
domain, so a job there keeps ``hot_spare_fraction``'s floor(fraction x servers), at most the idle servers.
"""

import json
import math

import pytest

from topo.plan import plan
from topo.plan.reliability import joint_reliability
from topo.plan.train_time import TrainingJob
from topo.spec import load_spec
from topo.sweep.point import clear_cache, run_point

from conftest import ROOT, run_cli

JOB = dict(model="m", step_time_s=2.0, tokens_per_step=4_000_000)


def _renewal(T, C, R, M):
    return T / M / (math.exp(R / M) * math.expm1((T + C) / M))


def _placed(spec, units, gpus, used=None, fraction=None):
    layers = [] if fraction is None else [
        ("--set", {"reliability": {"checkpoint": {"hot_spare_fraction": fraction}}})]
    return plan(load_spec(spec, overrides=[f"cluster.num_units={units}"]), layers=layers, collectives=False,
                training=TrainingJob(gpus=gpus, gpus_per_domain_used=used, **JOB)).reliability


def _checkpoint(**checkpoint):
    return plan(layers=[("t", {"reliability": {"checkpoint": checkpoint}})], collectives=False).reliability


def test_an_hgx_job_placed_at_its_whole_servers_keeps_the_fraction_rule():
    # DGX H100, 32 servers of 8 GPUs (one NVLink domain each); a job of 128 GPUs leaves 16 idle: at 10%,
    # min(floor(0.1 x 32), 16) = 3 hot spares, placed or not (a placement that fills its domains keeps none inside)
    placed = _placed("dgx-h100-superpod", 1, 128, used=8, fraction=0.1)
    unplaced = _placed("dgx-h100-superpod", 1, 128, fraction=0.1)
    assert placed.hot_spares_of == unplaced.hot_spares_of == "fraction"
    assert placed.hot_spare_servers == unplaced.hot_spare_servers == min(math.floor(0.1 * 32), (256 - 128) // 8) == 3


def test_a_job_over_sites_keeps_its_spares_in_its_domains_only_where_every_site_does():
    inside = _placed("gb200-nvl72-superpod", 6, 4 * 64, used=64)
    fraction = _placed("gb200-nvl72-superpod", 6, 4 * 64)
    both = joint_reliability([inside, inside], [432, 432], [1.0, 1.0], 0.0)
    assert (both.hot_spares_of, both.job_domains, both.idle_domains) == ("domains", 8, 4)  # 4 + 4 racks, 2 + 2 idle
    mixed = joint_reliability([inside, fraction], [432, 432], [1.0, 1.0], 0.0)
    assert (mixed.hot_spares_of, mixed.job_domains, mixed.idle_domains) == ("domains/fraction", None, None)


def test_a_regions_shard_is_over_the_jobs_gpus_where_a_job_is_named():
    r = _placed("gb200-nvl72-superpod", 6, 4 * 64, used=64)
    assert r.interruptions_of == "job" and r.interrupting_gpus == 256
    joint = joint_reliability([r, r], [432, 432], [1.0, 1.0], 0.0)
    assert joint.checkpoint_per_gpu_bytes == pytest.approx(r.checkpoint_bytes / 512, rel=1e-12)  # not / 864


def test_the_goodput_curve_stays_centred_on_the_optimum_under_a_policy():
    r = _checkpoint(interval_s=1800.0)
    grid = r.goodput_vs_interval["interval_s"]
    assert grid[20] == pytest.approx(r.optimum_interval_s, rel=1e-12)  # optimum / 10 .. optimum x 10, 41 points
    assert max(r.goodput_vs_interval["goodput"]) <= r.goodput_at_optimum * (1 + 1e-12)


def test_a_policy_under_a_doubled_checkpoint_waits_for_the_doubled_write():
    # async: the next checkpoint waits for the background write; a checkpoint twice as big writes twice as long,
    # past a policy of 1.5 writes, so the sensitivity prices the doubled write as the interval
    write_s = _checkpoint(mode="async").checkpoint_write_s
    r = _checkpoint(mode="async", interval_s=1.5 * write_s)
    assert r.checkpoint_interval_s == 1.5 * write_s
    row = next(x for x in r.sensitivity if x["input"] == "checkpoint size")
    R = r.detection_s + r.restart_s + 2 * r.reload_s
    assert row["goodput_double"] == pytest.approx(_renewal(2 * write_s, 2 * r.checkpoint_stall_s, R, r.mtbf_s),
                                                  rel=1e-9)


def test_a_sweeps_plan_point_keeps_the_jobs_spares_in_its_racks():
    # 4 GB200 NVL72 racks (72 trays): floor(1% x 72) = 0 spares would make each hardware failure wait repair_s
    # (4 h); the job at 64 of each 72 (llama3-8b at dp 256, the placement topo train picks) keeps 2 trays a rack.
    # The sweep's plan point is topo plan's with that job: the same goodput, its spares in its racks
    spec = "gb200-nvl72-superpod"
    specs = {spec: (spec, (ROOT / "topologies" / f"{spec}.toml").read_text())}
    clear_cache()
    row = run_point({"spec": spec, "cluster.num_units": 4, "model": "llama3-8b", "layout": "tp=1,dp=256",
                     "global_batch": 256}, ["train", "plan"], specs)
    assert row["error"] is None, row
    doc = json.loads(run_cli("plan", spec, "--set", "cluster.num_units=4", "--model", "llama3-8b", "--layout",
                             "tp=1,dp=256,global_batch=256", "--no-collectives", "--json", check=True).stdout)
    rel = doc["reliability"]
    assert (rel["hot_spares_of"], rel["hot_spare_servers"], rel["restart_s"]) == ("domains", 8, 480)
    assert row["goodput"] == pytest.approx(rel["goodput"], rel=1e-12)
