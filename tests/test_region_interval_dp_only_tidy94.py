"""A region's job gets the step's interval (and days at its ends) the dp way only (tidy94, walk37's Left 2;
findings 369 Left 2): ``topo/training/multisite_interval.py`` builds the band from the dp gradient bucket's call
size; with ``--across pp`` ``step_interval_s`` is null, and the output now says so (the step's ``assumed:`` line,
the plan's work line) and the README says the dp way's, not every region's job."""

import json
from pathlib import Path

from conftest import run_cli

README = Path(__file__).resolve().parents[1] / "README.md"
JOB = ["two-site-h100", "--model", "nemotron-3-super-120b-a12b", "--layout",
       'tp=2,pp=4,ep=8,global_batch=1536,precision="fp8"', "--across", "pp"]


def test_a_pp_job_across_the_sites_says_it_has_no_interval():
    doc = json.loads(run_cli("train", *JOB, "--json", check=True).stdout)
    assert doc["step_interval"] == {}
    assert any(a.startswith("no interval on the step across the sites the pp way") for a in doc["assumptions"])
    plan = run_cli("plan", *JOB, "--tokens", "25e12", check=True).stdout
    work = next(line for line in plan.splitlines() if line.startswith("work "))
    assert "no time to train at the step's interval ends: given for --across dp only" in work


def test_the_readme_says_the_interval_is_the_dp_ways():
    text = " ".join(README.read_text().split())
    assert "A region's job gets the interval too" not in text
    assert "the dp way (`--across dp`) gets the interval too" in text
    assert "`--across pp` or `outer` gets none" in text
