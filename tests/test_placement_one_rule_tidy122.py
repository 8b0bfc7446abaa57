"""A job that gives no dp is sized and placed by one rule in ``topo train``, ``topo plan`` and ``topo report``: the
production placement, 64 of each 72-GPU NVL72 rack (tidy122, docs/calibration-findings.md section 445; walk43's
section 440, Left 6; tidy121's section 443, Left 1).

Before, ``topo train --gpus 512`` placed 64 of each rack (``mapping.default_placement``), but a layout without dp
(``topo plan``, ``topo report``, ``topo train`` without ``--gpus``) filled all 72 of each: on 8 racks a 576-GPU job
whose EP-64 all-to-all straddled two racks over the NICs. Now the fill (``mapping.job_gpus``) takes
``recipe_gpus_used``: 8 racks x 64 = 512 GPUs, dp 512 at tp 1, and each EP-64 group is one rack's NVLink domain.
Source of the 64: Megatron-Bridge's GB200 recipes run 64 GPUs of each NVL72 rack (the power-of-two TP/EP/DP groups
inside a rack; ``topo.training.mapping.default_placement``'s docstring and README "Placement").
"""

from __future__ import annotations

import json

import pytest

import topo
from conftest import run_cli
from topo.training.mapping import job_gpus, recipe_gpus_used
from topo.units import format_time

SPEC = ("gb200-nvl72-superpod", "--set", "cluster.num_units=8")  # 8 NVL72 racks, 576 GPUs
JOB = ("--model", "nemotron-3-nano-30b-a3b", "--layout", "tp=1,ep=64,global_batch=4608")
RACKS, RACK_GPUS = 8, 72
PLACED = "placement: 64 of each 72-GPU NVLink domain"


def test_the_fill_is_the_production_placement():
    fabric = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=8"]))
    assert fabric.layout.num_gpus == RACKS * RACK_GPUS
    assert job_gpus(fabric) == (RACKS * recipe_gpus_used(RACK_GPUS),
                                "at 64 of each 72-GPU NVLink domain to the fabric's last")
    assert recipe_gpus_used(RACK_GPUS) == 64
    dgx = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))  # 8-GPU domains: every GPU, as before
    assert job_gpus(dgx) == (dgx.layout.num_gpus, "")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    train = json.loads(run_cli("train", *SPEC, *JOB, "--json", check=True).stdout)
    plan = json.loads(run_cli("plan", *SPEC, *JOB, "--json", check=True).stdout)
    page = tmp_path_factory.mktemp("report") / "page.html"
    run_cli("report", *SPEC, *JOB, "-o", str(page), check=True)
    return train, plan, page.read_text()


def test_train_places_64_of_each_rack_and_keeps_ep_on_nvlink(runs):
    train, _, _ = runs
    lay = train["layout"]
    assert (lay["dp"], lay["gpus_per_domain_used"]) == (RACKS * 64, 64)
    ep = [c for c in train["comm"] if c["dim"] == "ep"]
    assert ep and all(c["level"] == "nvlink" and c["domains_per_group"] == 1 for c in ep)
    assert any(n.startswith(PLACED) for n in train["notes"])


def test_plan_runs_the_same_job_and_says_its_placement(runs):
    train, plan, _ = runs
    assert plan["training"]["gpus"] == train["gpus"] == RACKS * 64
    assert plan["training"]["step_time_s"] == pytest.approx(train["step_time_s"], rel=1e-12)  # the same step
    note = next(n for n in plan["notes"] if n.startswith("MFU "))
    assert f"a job of 512 of its 576 GPUs (dp 512 fills its GPUs: the layout gives none); {PLACED}" in note


def test_report_runs_the_same_job_and_says_its_placement(runs):
    train, _, page = runs
    assert "tp1 cp1 pp1 dp512 ep64</td><td>" + format_time(train["step_time_s"]) in page
    assert f"tp1 cp1 pp1 dp512 ep64: {PLACED}" in page
