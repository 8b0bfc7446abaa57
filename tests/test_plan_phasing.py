"""Phased deployment (issue 32 "Cost"): capex, GPUs and power by quarter as the halls come online."""

import json
import math

import numpy as np
import pytest

from topo.plan import plan
from topo.plan.phasing import DAYS_PER_QUARTER, hall_schedule, phased_deployment
from conftest import run_cli


@pytest.fixture(scope="module")
def default():
    return plan("h100-100k", collectives=False)


@pytest.fixture(scope="module")
def llama():
    # two halls of 5 and 3 pods, as scheduled: one hall in each of two quarters
    return plan("meta-llama3-24k", collectives=False,
                layers=[("test", {"deployment": {"halls_per_quarter": [1, 1]}})])


def test_the_quarters_add_up_to_the_plan(default):
    d = default.deployment
    q = d.quarters
    assert sum(x.capex_usd for x in q) == pytest.approx(default.capex.capex_usd, rel=1e-12)
    assert q[-1].capex_to_date_usd == pytest.approx(default.capex.capex_usd, rel=1e-12)
    assert q[-1].gpus_online == default.num_gpus and sum(x.gpus for x in q) == default.num_gpus
    assert q[-1].halls_online == default.floor.num_halls == sum(x.halls for x in q)
    assert q[-1].it_power_W == pytest.approx(default.power.it_power_W, rel=1e-12)
    for x in q:
        assert x.facility_power_W == pytest.approx(x.it_power_W * default.power.pue)
    online = [x.gpus_online for x in q]
    assert online == sorted(online) and all(x.capex_usd >= 0 for x in q)


def test_the_default_ramp_is_colossus_pace(default):
    # xAI Colossus: 100,000 H100 "from start to finish ... in 122 days" (Musk on X, 2 Sep 2024; catalog
    # deployment.toml): hall k comes online in the first quarter by whose end that pace has built halls 1..k
    pace = 100_000 / 122 * (365.25 / 4)
    assert DAYS_PER_QUARTER == 365.25 / 4
    gpus_per_pod = default.num_gpus // sum(h.pods for h in default.floor.halls)
    cum, quarter_of = 0, []
    for h in default.floor.halls:
        cum += h.pods * gpus_per_pod
        quarter_of.append(max(1, math.ceil(cum / pace)))
    want = [quarter_of.count(k) for k in range(1, max(quarter_of) + 1)]
    d = default.deployment
    assert [x.halls for x in d.quarters] == want
    assert d.schedule == "ramp" and d.ramp_gpus_per_quarter == pytest.approx(pace)
    assert len(want) == 2  # 100,352 GPUs at ~74,846 per quarter: two quarters


def test_capex_follows_gpus_and_facility_follows_power(llama):
    # closed form: servers, network, storage and front-end by the GPUs coming online; cooling and facility by the
    # IT power coming online, the rooms outside the halls with the first hall
    r, c = llama, llama.capex
    h0, h1 = r.floor.halls
    g0 = h0.pods / (h0.pods + h1.pods)
    by_gpus = c.servers_usd + c.network_capex_usd + c.storage_usd + c.frontend_usd
    rest_W = r.power.it_power_W - h0.it_power_W - h1.it_power_W
    p0 = (h0.it_power_W + rest_W) / r.power.it_power_W
    q1, q2 = r.deployment.quarters
    assert q1.capex_usd == pytest.approx(by_gpus * g0 + (c.cooling_usd + c.facility_usd) * p0, rel=1e-12)
    assert q2.capex_usd == pytest.approx(c.capex_usd - q1.capex_usd, rel=1e-12)
    assert q1.gpus_online == r.num_gpus * g0 and q1.it_power_W == pytest.approx(h0.it_power_W + rest_W)
    assert r.deployment.schedule == "halls_per_quarter" and r.deployment.ramp_gpus_per_quarter is None


def test_hall_schedule_closed_forms():
    # hall k in quarter ceil(GPUs of halls 1..k / pace): 10 / 15 -> 1, 20 / 15 -> 2, 30 / 15 -> 2
    assert hall_schedule([10, 10, 10], gpus_per_quarter=15) == [1, 2]
    assert hall_schedule([10, 10, 10], gpus_per_quarter=5) == [0, 1, 0, 1, 0, 1]  # 2, 4, 6: idle quarters between
    assert hall_schedule([10, 10, 10], [0, 3]) == [0, 3]


def test_an_idle_first_quarter_spends_nothing_and_labels_roll_over_the_year(llama):
    c = llama.capex
    d = phased_deployment([4, 4], [1.0, 1.0], 2.5, 1.25, c, [0, 2], start_quarter="2026Q4")
    assert [q.label for q in d.quarters] == ["2026Q4", "2027Q1"]
    assert d.quarters[0].capex_usd == 0 and d.quarters[0].it_power_W == 0 and d.quarters[0].gpus_online == 0
    assert d.quarters[1].it_power_W == 2.5 and d.quarters[1].facility_power_W == 2.5 * 1.25


@pytest.mark.parametrize("value, says", [
    ("[1,1]", "plan.deployment.halls_per_quarter: adds up to 2 halls, the plan has "),
    ("[3,-1,3]", "plan.deployment.halls_per_quarter: must be a list of the halls coming online in each quarter, "
                 "whole numbers >= 0"),
    ("[0,0]", "with at least one hall"),
    ("3", "got 3"),
    ("[2.5,2.5]", "got [2.5, 2.5]"),
])
def test_a_schedule_that_does_not_add_up_is_one_line(value, says):
    p = run_cli("plan", "h100-100k", "--no-collectives", "--set", f"plan.deployment.halls_per_quarter={value}")
    assert p.returncode == 2 and says in p.stderr and p.stderr.startswith("error: ")
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


@pytest.mark.parametrize("key, value, says", [
    ("ramp_days", "0", "plan.deployment.ramp_days: must be > 0, got 0"),
    ("ramp_gpus", "-5", "plan.deployment.ramp_gpus: must be > 0, got -5"),
    ("start_quarter", '"2026Q5"', "must be a calendar quarter YYYYQn"),
    # a number (unquoted) was "Input should be a valid string", without the value or what is allowed (walk2)
    ("start_quarter", "2026", 'start_quarter: must be a calendar quarter YYYYQn in quotes with n from 1 to 4 '
                              '(e.g. "2026Q3"), got 2026\n'),
])
def test_a_bad_ramp_is_one_line(key, value, says):
    p = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--set", f"plan.deployment.{key}={value}")
    assert p.returncode == 2 and says in p.stderr and p.stderr.count("\n") == 1


def test_text_json_and_comparison_show_the_build():
    p = run_cli("plan", "meta-llama3-24k", "--no-collectives", "--set", "plan.deployment.halls_per_quarter=[1,1]",
                "--set", 'plan.deployment.start_quarter="2027Q1"', check=True)
    assert "deployment: 2 quarters as scheduled" in p.stdout and "2027Q2" in p.stdout
    p = run_cli("plan", "dgx-h100-superpod", "gb200-nvl72-superpod", "--no-collectives", "--json", check=True)
    docs = json.loads(p.stdout)["designs"]
    for d in docs:
        q = d["deployment"]["quarters"]
        assert np.isclose(sum(x["capex_usd"] for x in q), d["capex_usd"]) and q[-1]["gpus_online"] == d["num_gpus"]
    p = run_cli("plan", "dgx-h100-superpod", "gb200-nvl72-superpod", "--no-collectives", check=True)
    assert "quarters to build (plan.deployment)" in p.stdout and "capex in the first quarter" in p.stdout


def test_a_number_for_a_named_choice_shows_the_number_not_its_wrapping():
    """``--set plan.floor.cooling=5`` showed the override's internal table ``{'value': 5, 'source': ...}`` (walk2)."""
    p = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--set", "plan.floor.cooling=5")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.rstrip().endswith("plan.floor.cooling: must be one of auto, air, rear_door, direct_liquid, got 5")


def test_the_pace_line_shows_the_ramp_used_not_the_default_written_in_code():
    """walk2: the line said "xAI Colossus' 100,000 in 122 days unless overridden", a catalog value written in the
    CLI, also when ramp_days was overridden; 100,000 GPUs in 200 days is 100,000 x (365.25 / 4) / 200 = 45,656 a
    quarter."""
    p = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--set", "plan.deployment.ramp_days=200", check=True)
    line = next(x for x in p.stdout.splitlines() if x.startswith("deployment:"))
    assert "at a pace of 45,656 GPUs per quarter" in line and "100,000 GPUs in 200 days" in line
    assert "122" not in line
