"""plan81 (plan79's Left 2, report81's Left 3): `topo plan REGION --model M --layout L --across pp|outer` plans the
job in the form `topo train REGION --across` takes (the same flag, words, allowed values and errors, topo/cli/
across.py); the way sets the step (`estimate_across_sites`' chosen way) and the reload's exchange over the DCI
(`topo.plan.region.restore_exchange_s`: pipeline stages across the sites hold each stage's state where it runs, so a
restart sends nothing; dp and outer hold whole replicas at every site and receive the other sites' shares)."""

import json

import pytest

from conftest import run_cli
from small_regions import TWO_SITE_JOB_LAYOUT, two_site_job_plan

JOB = ("two-site-h100", "--model", "llama3-70b", "--layout", TWO_SITE_JOB_LAYOUT)


def _json(*args) -> dict:
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def pp_plan():
    return _json("plan", *JOB, "--tokens", "15T", "--no-collectives", "--across", "pp", "--json")


def test_the_plans_time_to_train_is_train_across_pps_step_over_the_goodput(pp_plan):
    # closed form: t = tokens / (global batch x seq) x step / goodput, the step `topo train REGION --across pp`'s
    train = _json("train", *JOB, "--across", "pp", "--json")
    assert train["chosen"] == "pp"
    step_s = next(s["step_time_s"] for s in train["strategies"] if s["strategy"] == "pp")
    t, g = pp_plan["time_to_train"], pp_plan["goodput"]
    assert pp_plan["across"] == "pp"
    assert pp_plan["training"]["step_time_s"] == pytest.approx(step_s, rel=1e-12)
    assert pp_plan["training"]["tokens_per_step"] == train["tokens_per_step"] == 576 * 8192
    assert t["time_at_step_s"] == pytest.approx(15e12 / (576 * 8192) * step_s, rel=1e-9)
    assert t["time_to_train_s"] == pytest.approx(15e12 / (576 * 8192) * step_s / g, rel=1e-9)
    dp = two_site_job_plan()  # the default way: data parallel across the sites, a different step
    assert dp["across"] == "dp" and dp["training"]["step_time_s"] != pytest.approx(step_s, rel=1e-3)


def test_pipeline_stages_across_the_sites_reload_without_the_exchange(pp_plan):
    # the joint reload is the slowest site's read plus the exchange (plan78's joint_reliability): pp's exchange is 0,
    # so its reload is dp's less dp's exchange (the same sites, shares and checkpoint)
    dp = two_site_job_plan()
    assert pp_plan["restore_exchange_s"] == 0.0 < dp["restore_exchange_s"]
    assert pp_plan["reliability"]["reload_s"] == pytest.approx(
        dp["reliability"]["reload_s"] - dp["restore_exchange_s"], rel=1e-9)


def test_outer_is_whole_replicas_a_site_and_says_its_way():
    p = run_cli("plan", *JOB, "--no-collectives", "--across", "outer", "--outer-every", "10")
    assert p.returncode == 0, p.stderr
    assert "an outer synchronisation:" in p.stdout and "--across outer)" in p.stdout
    assert "then receiving the other sites' over the DCI" in p.stdout


@pytest.mark.parametrize("extra, line", [
    (("--across", "x"), "argument --across: invalid choice: 'x' (choose from 'dp', 'pp', 'outer')"),
    (("--across", "outer"), "error: --outer-every: --across outer needs the outer synchronisation's period"),
    (("--across", "outer", "--outer-every", "0"), "error: --outer-every: must be a whole number >= 1, got 0"),
])
def test_train_and_plan_refuse_a_bad_way_in_one_and_the_same_line(extra, line):
    for command in ("train", "plan"):
        p = run_cli(command, *JOB, *extra)
        assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert line in p.stderr


@pytest.mark.parametrize("args, line", [
    (("two-site-h100", "--across", "pp"), "error: --across: pp: a region's plan without --model times no job"),
    (("dgx-h100-superpod", "--across", "pp"), "error: --across: applies to a region of several sites"),
    (("dgx-h100-superpod", "--outer-every", "5"), "error: --outer-every: applies to a region of several sites"),
])
def test_a_plan_with_no_job_across_sites_refuses_the_way(args, line):
    p = run_cli("plan", *args)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and line in p.stderr, p.stderr
