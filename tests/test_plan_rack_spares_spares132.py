"""Hot spares on NVL72 as users keep them (spares132, docs/calibration-findings.md section 467; walk46's Left 1).

A job placed at 64 of each GB200 NVL72 rack's 72 GPUs (Megatron-Bridge's GB200 recipes; CoreWeave's Slurm segments of
at most 16 of a rack's 18 nodes, docs.coreweave.com/observability/managed-grafana/sunk/slurm-block-topology) leaves
(72 - 64) / 4 = 2 four-GPU compute trays idle inside each rack it uses. A GPU, NIC or host failure in a rack is met by
re-placing on that rack's own idle tray; a tray of another rack is off the job's NVLink. So those trays are the job's
hot spares, all of them, whatever ``hot_spare_fraction`` (1% of the servers, an assumption) says; the plan took
floor(1% x servers) of every idle tray instead. A whole rack's failure needs an idle whole rack, which the plan
counts (``idle_domains``) but does not price: the failure table (Llama 3's, 8-GPU servers) has no rack-level cause.

Closed forms: R racks, a job of 64 x J GPUs: J job domains, 2 J spare trays, R - J idle racks. An 8-GPU HGX server
is a whole NVLink domain, so a job there leaves no idle server inside its domains and the old rule holds."""

import json
from dataclasses import asdict

from conftest import run_cli

from topo.plan import plan
from topo.plan.reliability import _domain_spares
from topo.plan.train_time import TrainingJob
from topo.spec import load_spec

JOB = dict(model="m", step_time_s=2.0, tokens_per_step=4_000_000)


def _plan(spec, units, gpus, used=None, fraction=None):
    layers = []
    if fraction is not None:
        layers.append(("--set", {"reliability": {"checkpoint": {"hot_spare_fraction": fraction}}}))
    return plan(load_spec(spec, overrides=[f"cluster.num_units={units}"]), layers=layers, collectives=False,
                training=TrainingJob(gpus=gpus, gpus_per_domain_used=used, **JOB))


def test_the_closed_form_counts():
    assert _domain_spares(6 * 72, 4, 72, 4 * 64, 64) == {"job_domains": 4, "idle_domains": 2, "in_domains": 8}
    # a job not a whole number of racks: its last rack is partly used, still a job domain with 2 idle trays or more
    assert _domain_spares(6 * 72, 4, 72, 4 * 64 + 4, 64) == {"job_domains": 5, "idle_domains": 1, "in_domains": 10}
    assert _domain_spares(6 * 72, 4, 72, 4 * 72, 72)["in_domains"] == 0  # the job fills its racks
    assert _domain_spares(6 * 72, 4, 72, 4 * 64, None)["job_domains"] is None  # no placement given


def test_a_job_at_64_of_72_keeps_two_trays_a_rack_as_its_spares():
    r = _plan("gb200-nvl72-superpod", 6, 4 * 64, used=64).reliability
    assert (r.hot_spares_of, r.job_domains, r.idle_domains) == ("domains", 4, 2)
    assert r.hot_spare_servers == 4 * (72 - 64) // 4 == 8
    assert r.free_servers == (6 * 72 - 4 * 64) // 4 == 44  # the 2 idle racks' 36 trays and the 8 inside
    assert r.training_gpus == 256


def test_the_spare_fraction_does_not_count_them():
    # floor(1% x 108) = 1 and floor(50% x 108) = 54 would both be the old rule's figure; the placement keeps 8
    for fraction in (0.01, 0.5):
        assert _plan("gb200-nvl72-superpod", 6, 4 * 64, used=64, fraction=fraction).reliability.hot_spare_servers == 8


def test_the_spares_in_the_racks_keep_a_restart_from_waiting_for_a_repair():
    # 4 racks, 72 trays: the old rule's floor(1% x 72) = 0 spares leaves each hardware failure to wait repair_s
    # (4 h) in the restart (8 min); the 8 trays inside the racks cover the servers expected in repair
    placed = _plan("gb200-nvl72-superpod", 4, 4 * 64, used=64).reliability
    unplaced = _plan("gb200-nvl72-superpod", 4, 4 * 64).reliability
    assert unplaced.hot_spare_servers == 0 and not unplaced.spares_enough
    assert placed.hot_spare_servers == 8 >= placed.servers_in_repair and placed.spares_enough
    assert placed.restart_s == 480 and unplaced.restart_s == 480 + 14_400
    assert placed.goodput > unplaced.goodput


def test_an_hgx_job_is_unchanged():
    # DGX H100: an 8-GPU server is one NVLink domain; a job at 8 of each leaves none idle inside them
    placed = _plan("dgx-h100-superpod", 1, 128, used=8).reliability
    unplaced = _plan("dgx-h100-superpod", 1, 128).reliability
    assert placed.hot_spares_of == "fraction" and placed.job_domains == 16
    assert placed.hot_spare_servers == min(int(0.01 * 32), (256 - 128) // 8) == 0
    keep = {k: v for k, v in asdict(placed).items() if k not in ("job_domains", "idle_domains")}
    assert keep == {k: v for k, v in asdict(unplaced).items() if k not in ("job_domains", "idle_domains")}


def test_the_note_says_where_the_spares_are_and_that_a_rack_failure_is_not_priced():
    r = _plan("gb200-nvl72-superpod", 6, 4 * 64, used=64)
    note = r.spare_note
    assert note.startswith("m's job holds 256 of the 432 GPUs at 64 of each 72-GPU NVLink domain (4 domains): each "
                           "domain's 2 idle whole servers of 4 GPUs (8 in all) are its hot spares")
    assert "leaves 2 whole domains idle" in note and "not priced" in note and "no rack-level cause" in note
    assert "holds 0 of them" not in note
    full = _plan("gb200-nvl72-superpod", 4, 4 * 64, used=64).spare_note
    assert "leaves no whole domain idle" in full and "wait for its repair" in full


def test_the_cli_carries_the_placement_into_the_plan():
    args = ("plan", "gb200-nvl72-superpod", "--set", "cluster.num_units=6", "--model", "llama3-8b", "--layout",
            "tp=1,dp=256,global_batch=256", "--no-collectives")
    rel = json.loads(run_cli(*args, "--json", check=True).stdout)["reliability"]
    assert (rel["hot_spare_servers"], rel["hot_spares_of"], rel["job_domains"], rel["idle_domains"]) == (
        8, "domains", 4, 2)
    text = run_cli(*args, check=True).stdout
    assert "8 hot-spare servers (2 inside each of the job's 4 NVLink domains; 2 whole domains idle)" in text
