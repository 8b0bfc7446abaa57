"""regions83 (section 394 Left 3 / 400): a job across the sites the pp way gets the step's interval, built as the dp
way's (topo/training/multisite_interval.py): the slowest share's step ``T_s`` at the step model's error (``p90``) plus
the DCI's exposed time at the collective model's error for the crossing's call size, here one rank's send of a
micro-batch's activations to the next stage (Megatron-Core's ``isend`` a rank pair): ``micro_batch x seq_len x
hidden x 2 bytes / tp`` with sequence parallelism (Nemotron 3 Super: hidden 4,096; seq 8,192; tp 2: 32 MiB, the
collective_interval.toml ``middle`` regime, e10 -0.5383, e90 0.1732).

    low  = T_s / (1 + p90) + exposed / (1 + e90)
    high = T_s / (1 - p90) + exposed / (1 + e10)
"""

import json

import pytest

from conftest import run_cli

JOB = ["two-site-h100", "--model", "nemotron-3-super-120b-a12b", "--layout",
       'tp=2,pp=4,ep=8,global_batch=1536,precision="fp8"', "--across", "pp"]


@pytest.fixture(scope="module")
def doc():
    return json.loads(run_cli("train", *JOB, "--json", check=True).stdout)


def test_the_pp_ways_interval_is_at_its_stage_sends_call_size(doc):
    i = doc["step_interval"]
    assert i["call_bytes"] == 1 * 8192 * 4096 * 2 // 2 == 33_554_432
    assert i["regime"] == "middle" and i["error_p10_fraction"] == -0.5383 and i["error_p90_fraction"] == 0.1732
    pp = next(s for s in doc["strategies"] if s["strategy"] == "pp")
    Ts, ex, p90 = pp["step_time_s"] - pp["exposed_s"], pp["exposed_s"], i["p90"]
    assert Ts == pytest.approx(doc["one_site_step_s"], rel=1e-12) and ex > 0
    assert i["low_s"] == pytest.approx(Ts / (1 + p90) + ex / 1.1732, rel=1e-12)
    assert i["high_s"] == pytest.approx(Ts / (1 - p90) + ex / (1 - 0.5383), rel=1e-12)
    assert not any(a.startswith("no interval on the step across the sites") for a in doc["assumptions"])


def test_the_plan_gives_days_at_its_ends():
    plan = run_cli("plan", *JOB, "--tokens", "25e12", check=True).stdout
    work = next(line for line in plan.splitlines() if line.startswith("work "))
    assert "no time to train at the step's interval ends" not in work
    doc = json.loads(run_cli("plan", *JOB, "--tokens", "25e12", "--json", check=True).stdout)
    assert doc["training"]["step_interval_s"] is not None
