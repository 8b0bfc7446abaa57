"""report81 (plan80's Left 1, findings section 375): `topo report REGION --plan --train M --layout L --tokens N`
takes the job as `topo plan REGION --model M --layout L --tokens N` takes it (`topo.cli.region_plan.region_job`: dp
filled across the sites, the step across them data parallel), so the page's plan section shows the job's step, time
to train with goodput and energy per token: the same figures as `topo plan REGION --json`."""

import html
import json

import pytest

from conftest import run_cli
from topo.cli import report as report_cli
from topo.cli.main import main

JOB = ("--layout", "tp=8,pp=4,global_batch=576", "--tokens", "15T")  # plan79's and plan80's job on two-site-h100


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """The region plan the report renders (captured as the page's section is drawn) and the page's text."""
    out = tmp_path_factory.mktemp("r81") / "r.html"
    seen = []
    render = report_cli.render_region_plan
    report_cli.render_region_plan = lambda r: seen.append(r) or render(r)
    try:
        assert main(["report", "two-site-h100", "--plan", "--train", "llama3-70b", *JOB, "-o", str(out)]) == 0
    finally:
        report_cli.render_region_plan = render
    return seen[0], html.unescape(out.read_text())


def test_the_reports_region_plan_has_plans_job_figures(reported):
    planned = json.loads(run_cli("plan", "two-site-h100", "--model", "llama3-70b", *JOB, "--json", check=True).stdout)
    mine = json.loads(json.dumps(reported[0].to_dict()))
    for key in ("training", "time_to_train", "energy_to_train", "goodput", "cost_per_million_tokens_usd"):
        assert mine[key] == planned[key], key
    assert mine["training"]["step_time_s"] > 0 and mine["energy_to_train"]["energy_per_token_J"] > 0


def test_the_page_says_the_job_lines_plan_prints(reported):
    text = run_cli("plan", "two-site-h100", "--model", "llama3-70b", *JOB, check=True).stdout
    block = text[text.index("work      llama3-70b"):].split("\nnote: ")[0].splitlines()
    assert any("J per token" in line for line in block) and any("time to train 15T" in line for line in block)
    for line in block:
        assert line in reported[1], line


@pytest.mark.parametrize("flags, key, said", [
    (("--plan", "--train", "llama3-70b"), "--train", "--layout L"),
    (("--plan", "--layout", "tp=8"), "--layout", "--train M"),
    (("--train", "llama3-70b", "--layout", "tp=8"), "--train", "--plan"),
    (("--plan", "--train", "llama3-70b", "--layout", "tp=7,pp=4"), "--layout", "tp"),
    (("--plan", "--train", "no-such-model", "--layout", "tp=8"), "--model", "no-such-model"),
    (("--plan", "--train", "llama3-70b", "--layout", "tp=8", "--tokens", "lots"), "--tokens", "lots"),
    (("--plan", "--train", "llama3-70b", "--layout", JOB[1], "--shares", "halves"), "--shares", "halves"),
    (("--plan", "--tokens", "15T"), "--tokens", "--train M"),
])
def test_a_bad_job_flag_on_a_regions_report_is_one_line(tmp_path, flags, key, said):
    bad = run_cli("report", "two-site-h100", *flags, "-o", str(tmp_path / "r.html"))
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert key in bad.stderr and said in bad.stderr, bad.stderr
    assert not (tmp_path / "r.html").exists()


def test_shares_on_one_sites_report_is_refused(tmp_path):
    bad = run_cli("report", "dgx-h100-superpod", "--plan", "--train", "llama3-8b", "--layout",
                  "tp=8,dp=64,global_batch=256", "--shares", "equal", "-o", str(tmp_path / "r.html"))
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "--shares" in bad.stderr, bad.stderr


# plan81: one site's page now shows its plan's job with --tokens (tests/test_report_plan_job_plan81.py)
