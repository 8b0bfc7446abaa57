"""plan134: a region's job keeps its hot spares where its placement leaves them (findings 467 Left 5, 468 Left 1),
each NVLink domain's spares checked against that domain's own repairs (468 Left 2), a job that fills its domains
said so (467 Left 1), and the spares a domain computed in one place (468's house-rules point).

Closed forms: a job at 64 of each GB200 NVL72 rack's 72 GPUs leaves (72 - 64) / 4 = 2 four-GPU trays idle in each of
its ceil(job GPUs / 64) racks (Megatron-Bridge's GB200 recipes, topo/training/mapping.py recipe_gpus_used; CoreWeave's
Slurm segments of at most 16 of an NVL72 rack's 18 nodes,
docs.coreweave.com/observability/managed-grafana/sunk/slurm-block-topology). A rack's trays spare only that rack, so
its servers expected in repair at once, the hardware causes' interruptions per GPU-hour x its job GPUs x the repair
time in hours (Little's law: arrivals x time in repair), must be at most its 2.
"""

import json
import math

from topo.plan import plan
from topo.plan.reliability import reliability
from topo.plan.spare_note import job_spare_note
from topo.plan.train_time import TrainingJob
from topo.spec import load_spec

from conftest import run_cli
from small_regions import two_sites

REGION = two_sites("two-nvl72", "two GB200 NVL72 superpods of 6 racks, 40 km apart (plan134)",
                   "gb200-nvl72-superpod", 6)


def test_a_regions_job_keeps_its_spares_inside_its_racks(tmp_path):
    # rev110: llama3-8b dp 512 over two sites of 6 NVL72 racks kept "1 of 108 servers" a site (the fraction rule);
    # each site's 256 GPUs at 64 a rack: 4 racks, 2 trays each, 2 racks idle
    path = tmp_path / "two-nvl72.toml"
    path.write_text(REGION)
    args = ("plan", str(path), "--model", "llama3-8b", "--layout", "tp=1,dp=512,global_batch=512", "--no-collectives")
    rel = json.loads(run_cli(*args, "--json", check=True).stdout)["reliability"]
    assert (rel["hot_spares_of"], rel["job_domains"], rel["idle_domains"]) == ("domains", 2 * 256 // 64, 2 * (6 - 4))
    assert rel["hot_spare_servers"] == 8 * (72 - 64) // 4 == 16
    text = run_cli(*args, check=True).stdout
    assert "16 hot-spare servers (2 inside each of the job's 8 NVLink domains; 4 whole domains idle)" in text
    assert ("llama3-8b's job holds 512 of the 864 GPUs at 64 of each 72-GPU NVLink domain (8 domains): each domain's "
            "2 idle whole servers of 4 GPUs (16 in all)") in text
    assert "floored, at most its idle" not in text  # the fraction rule's words are not said of it


def _six_racks(job_gpus, repair_s):
    """6 NVL72 racks, a job at 64 a rack, a hardware rate of 1e-4 GPU failures per GPU-hour (no other cause)."""
    return reliability(6 * 72, 4, causes={"gpu": 1e-4}, observed_gpus=1, observed_days=1 / 24, modules=[],
                       nic_modules=[], params=1e9, bytes_per_param=14, write_Bps=1e10, restart_s=60.0,
                       repair_s=repair_s, hot_spare_fraction=0.01, flop=1e20, job_gpus=job_gpus,
                       gpus_per_domain=72, gpus_per_domain_used=64)


def test_each_racks_spares_cover_its_own_repairs():
    # 260 GPUs at 64 a rack: 5 racks (4 full, one of 4 GPUs), 10 trays. At 350 h of repair a full rack expects
    # 1e-4 x 64 x 350 = 2.24 servers in repair, more than its 2; the job as a whole 1e-4 x 260 x 350 = 9.1, under
    # its 10 (the sum said "enough")
    repair_s = 350 * 3600
    r = _six_racks(260, repair_s)
    assert (r.job_domains, r.hot_spare_servers) == (5, 10)
    assert math.isclose(r.servers_in_repair_per_domain, 1e-4 * 64 * 350, rel_tol=1e-12)
    assert math.isclose(r.servers_in_repair, 1e-4 * 260 * 350, rel_tol=1e-12) and r.servers_in_repair < 10
    assert not r.spares_enough and r.restart_s == 60.0 + repair_s
    note = job_spare_note("m", 260, 432, r, 64, 72, 4, "rule")
    assert ("too few: each of its 4 full domains (64 of the job's GPUs) expects 2.24 servers in repair at once"
            in note) and "more than its 2" in note
    # at 300 h: 1e-4 x 64 x 300 = 1.92 <= 2, enough, nothing waits
    ok = _six_racks(260, 300 * 3600)
    assert ok.spares_enough and ok.restart_s == 60.0 and "too few" not in job_spare_note("m", 260, 432, ok, 64, 72, 4,
                                                                                          "rule")


def test_a_job_that_fills_its_racks_is_told_it_keeps_no_tray_inside_them():
    # llama3-8b on 288 GPUs at 72 of each 72: 4 racks full, 2 idle; no tray idle inside the job's racks, so the
    # fraction rule's min(floor(1% x 108), 144 // 4) = 1 stands and the note says why
    args = ("plan", "gb200-nvl72-superpod", "--set", "cluster.num_units=6", "--model", "llama3-8b", "--layout",
            "tp=1,dp=288,global_batch=288,gpus_per_domain_used=72", "--no-collectives")
    rel = json.loads(run_cli(*args, "--json", check=True).stdout)["reliability"]
    assert (rel["hot_spares_of"], rel["hot_spare_servers"], rel["job_domains"], rel["idle_domains"]) == (
        "fraction", min(math.floor(0.01 * 108), (432 - 288) // 4), 4, 2)
    text = run_cli(*args, check=True).stdout
    assert ("it fills each of its 4 NVLink domains (72 of 72 GPUs): no idle server inside them, so a failed server "
            "leaves its domain short and the job re-places on one of the 2 whole domains it leaves idle") in text


def test_the_spares_a_domain_are_one_figure():
    job = dict(model="m", step_time_s=2.0, tokens_per_step=4_000_000)
    spec = load_spec("gb200-nvl72-superpod", overrides=["cluster.num_units=6"])
    placed = plan(spec, collectives=False, training=TrainingJob(gpus=256, gpus_per_domain_used=64, **job)).reliability
    assert placed.spares_per_domain == (72 - 64) // 4 == placed.hot_spare_servers // placed.job_domains
    unplaced = plan(spec, collectives=False, training=TrainingJob(gpus=256, **job)).reliability
    assert unplaced.spares_per_domain is None
