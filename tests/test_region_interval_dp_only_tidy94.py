"""A region's job gets the step's interval (and days at its ends) the dp and pp ways only (tidy94, walk37's Left 2;
findings 369 Left 2; regions83 built pp's, section 400): ``topo/training/multisite_interval.py`` builds the band from
the call size of the crossing (dp: the gradient bucket; pp: one rank's stage send); with ``--across outer``
``step_interval_s`` is null, and the output says so (the step's ``assumed:`` line, the plan's work line) and the
README says which ways have it."""

import json
from pathlib import Path

from conftest import run_cli

README = Path(__file__).resolve().parents[1] / "README.md"
JOB = ["two-site-h100", "--model", "nemotron-3-super-120b-a12b", "--layout",
       'tp=2,pp=4,ep=8,global_batch=1536,precision="fp8"', "--across", "outer", "--outer-every", "16"]


def test_an_outer_job_across_the_sites_says_it_has_no_interval():
    doc = json.loads(run_cli("train", *JOB, "--json", check=True).stdout)
    assert doc["step_interval"] == {}
    assert any(a.startswith("no interval on the step across the sites the outer way") for a in doc["assumptions"])
    plan = run_cli("plan", *JOB, "--tokens", "25e12", check=True).stdout
    work = next(line for line in plan.splitlines() if line.startswith("work "))
    assert "no time to train at the step's interval ends: given for --across dp and pp only" in work


def test_the_readme_says_which_ways_have_the_interval():
    text = " ".join(README.read_text().split())
    assert "A region's job gets the interval too" not in text
    assert "the dp way (`--across dp`) gets the interval too" in text
    assert "the pp way (`--across pp`) likewise at one rank's stage send's call size" in text
    assert "`--across outer` gets none" in text
