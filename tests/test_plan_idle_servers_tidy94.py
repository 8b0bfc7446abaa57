"""The whole servers a named job leaves idle, and how many of them the failure model holds as hot spares, in one
rule for the note and ``--json`` (tidy94, walk37's Left 3): a job at 64 of each GB200 NVL72 rack's 72 GPUs (the
production recipes' placement, Megatron-Bridge's GB200 recipes, as the README describes) on four racks holds
4 x 64 = 256 of the 288 GPUs and leaves 32 = 8 whole four-GPU compute trays (2 of each rack's 18) idle; the note
said "no whole server is left as a hot spare" beside "(0 held as hot spares, 32 idle)".

The rule (``topo/data/catalog/reliability.toml`` ``hot_spare_fraction``, an assumption of 1% of the servers, at most
the whole servers the job leaves, ``topo/plan/reliability.py``): floor(0.01 x 72 servers) = 0 of the 8 idle, so no
hot spare and each hardware failure waits for its repair; with ``hot_spare_fraction`` 0.05, floor(0.05 x 72) = 3."""

import json

from conftest import run_cli

from topo.plan import plan
from topo.plan.train_time import TrainingJob
from topo.spec import load_spec

JOB = dict(model="m", step_time_s=2.0, tokens_per_step=4_000_000)
NVL = ("gb200-nvl72-superpod",)


def _plan(gpus, fraction=None):
    layers = []
    if fraction is not None:
        layers.append(("--set", {"reliability": {"checkpoint": {"hot_spare_fraction": fraction}}}))
    return plan(load_spec(NVL[0], overrides=["cluster.num_units=4"]), layers=layers, collectives=False, training=TrainingJob(gpus=gpus, **JOB))


def _note(r):
    return next(n for n in r.notes if n.startswith("m's job holds"))


def test_a_job_at_64_of_each_nvl72_rack_leaves_8_idle_trays_none_held_as_spares_at_1_percent():
    r = _plan(4 * 64)
    rel = r.reliability
    assert r.num_gpus == 4 * 72 and r.num_servers == 4 * 18
    assert rel.free_servers == (4 * 72 - 4 * 64) // 4 == 8
    assert rel.hot_spare_servers == 0  # floor(0.01 x 72) = 0
    note = _note(r)
    assert "leaves 8 whole servers of 4 GPUs idle" in note
    assert "holds 0 of them as hot spares" in note and "floor(1% x 72 servers)" in note
    assert "no whole server is left" not in note
    assert "waits for its repair" in note


def test_a_larger_spare_fraction_takes_its_spares_from_the_idle_trays():
    r = _plan(4 * 64, fraction=0.05)
    assert r.reliability.free_servers == 8 and r.reliability.hot_spare_servers == 3  # floor(0.05 x 72)
    note = _note(r)
    assert "holds 3 of them as hot spares" in note and "waits for its repair" not in note


def test_a_job_of_every_gpu_leaves_no_whole_server():
    r = _plan(4 * 72)
    assert r.reliability.free_servers == 0 and r.reliability.hot_spare_servers == 0
    assert "no whole server is left as a hot spare" in _note(r)


def test_json_gives_the_idle_servers_beside_the_spares():
    out = run_cli("plan", *NVL, "--set", "cluster.num_units=4", "--model", "llama3-8b", "--layout",
                  "tp=1,global_batch=256,gpus_per_domain_used=64", "--no-collectives", "--json", check=True).stdout
    rel = json.loads(out)["reliability"]
    # spares132: the CLI's job carries its placement (64 of each 72), so its 8 idle trays, 2 inside each of its 4
    # racks, are its hot spares (each for its own rack), not floor(1% x 72) = 0 of them
    assert (rel["free_servers"], rel["hot_spare_servers"], rel["training_gpus"]) == (8, 8, 256)
    assert (rel["hot_spares_of"], rel["job_domains"], rel["idle_domains"]) == ("domains", 4, 0)
