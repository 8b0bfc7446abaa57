"""plan68: what a capacity planner asks of `topo plan` (walk26's Left 1-4): a design sized to an IT power budget,
the time to train a token budget with the plan's goodput, the hot spares a job that fills every GPU leaves (none),
and the cost per delivered PFLOP-hour and per million tokens beside the cost per GPU-hour."""

import json
import math

import pytest

from conftest import run_cli
from topo.plan import plan
from topo.plan.budget import fit_it_power
from topo.plan.train_time import TrainingJob
from topo.spec import load_spec
from topo.units import UnitError, parse_power_W


def _err(*args):
    p = run_cli("plan", *args, "--no-collectives")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    return p.stderr.removeprefix("error: ").rstrip("\n")


# ---- 1. a power budget ------------------------------------------------------------------------------------------

def test_a_power_takes_its_unit():
    assert parse_power_W("50MW") == 50e6 and parse_power_W("800 kW") == 800e3 and parse_power_W("1.2GW") == 1.2e9
    for bad in ("50", "50mw", "-5MW", "0 MW", "abc"):
        with pytest.raises(UnitError):
            parse_power_W(bad)


def test_a_budget_fits_the_largest_count_of_whole_pods_closed_form():
    # a linear IT power of 1 MW a unit + 2 MW fixed: gb200-nvl72-superpod grows by pods of 8 racks (its 32 racks are
    # 4 pods), so 100 MW fits floor((100 - 2) / 8) = 12 pods = 96 racks = 96 x 72 = 6,912 GPUs
    spec = load_spec("gb200-nvl72-superpod")
    sized, fit = fit_it_power(spec, 100e6, lambda s: 2e6 + 1e6 * s.cluster.num_units)
    assert (fit.unit, fit.units_per_step, fit.count, fit.gpus) == ("pod", 8, 12, 6912)
    assert sized.cluster.num_units == 96
    assert fit.it_power_W == 98e6 and fit.next_it_power_W == 106e6 and fit.fabric_bound is None
    assert "the budget binds: 13 would draw 106.00 MW" in fit.note()


def test_a_budget_on_the_planner_fits_walk26s_bid_c():
    # walk26 (findings 282) by trial and error: 360 racks = 25,920 GB200 draw 49.47 MW of IT power, 368 draw 50.54
    fit = fit_it_power(load_spec("gb200-nvl72-superpod"), 50e6,
                       lambda s: plan(s, collectives=False).power.it_power_W)[1]
    assert (fit.count * fit.units_per_step, fit.gpus) == (360, 25_920)
    assert fit.it_power_W <= 50e6 < fit.next_it_power_W
    assert round(fit.it_power_W / 1e6, 2) == 49.47 and round(fit.next_it_power_W / 1e6, 2) == 50.54


def test_a_budget_past_what_the_fabric_builds_says_the_fabric_binds():
    # dgx-h100-superpod's 2 tiers of 64-port QM9700: 8 units of 32 leaves... 9 need 72 down ports on a spine
    p = run_cli("plan", "dgx-h100-superpod", "--it-power", "50MW", "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["num_gpus"] == 2048 and d["power_fit"]["count"] == 8 and d["power_fit"]["next_it_power_W"] is None
    assert "radix" in d["power_fit"]["fabric_bound"] and d["it_power_W"] <= 50e6
    assert any(n.startswith("sized to 50.00 MW of IT power (--it-power): 8 scalable units (2,048 GPUs)")
               and "the fabric binds, not the budget: 9 cannot be built" in n for n in d["notes"])


@pytest.mark.parametrize("value, msg", [
    ("=-3MW", "--it-power: a power must be positive and finite, got '-3MW'"),
    ("=50", "--it-power: expected a power with its unit, such as '50MW', '50 MW', '800 kW' or '1.2GW', got '50' "
            "(a bare number has no unit)"),
    ("=100kW", "--it-power: 0.1 MW is less than one scalable unit of dgx-h100-superpod draws (0.47 MW of IT power "
               "at nameplate); allowed: a budget of at least that"),
])
def test_a_bad_budget_is_one_line(value, msg):
    assert _err("dgx-h100-superpod", "--it-power" + value) == msg


def test_a_region_refuses_a_budget():
    assert _err("two-site-h100", "--it-power", "50MW").startswith("--it-power: sizes one site's design")


# ---- 2. time to train with goodput; 3. hot spares; 4. cost per work --------------------------------------------

JOB = dict(model="m", step_time_s=2.0, tokens_per_step=4_000_000, tokens=1e12)


def test_time_to_train_is_the_step_time_over_the_goodput():
    r = plan("dgx-h100-superpod", collectives=False, training=TrainingJob(gpus=512, **JOB))
    t, g = r.time_to_train, r.reliability.goodput
    at_step = 1e12 / (4e6 / 2.0)  # 500,000 s
    assert t["time_at_step_s"] == pytest.approx(at_step, rel=1e-12)
    assert t["time_to_train_s"] == pytest.approx(at_step / g, rel=1e-12)
    assert t["gpu_hours_to_train"] == pytest.approx(512 * at_step / g / 3600, rel=1e-12)
    # the job's 512 GPUs at the cost per effective GPU-hour over the 7.2e9 tokens of an hour at the step
    assert r.cost_per_million_tokens_usd == pytest.approx(
        r.cost_per_effective_gpu_hour_usd * 512 / (2e6 * 3600) * 1e6, rel=1e-12)


def test_a_job_of_every_gpu_leaves_no_hot_spare_and_waits_for_repairs():
    free = plan("dgx-h100-superpod", collectives=False)
    half = plan("dgx-h100-superpod", collectives=False, training=TrainingJob(gpus=512, **JOB))
    full = plan("dgx-h100-superpod", collectives=False, training=TrainingJob(gpus=1024, **JOB))
    assert free.reliability.hot_spare_servers > 0
    assert half.reliability.hot_spare_servers == free.reliability.hot_spare_servers  # 64 servers left: enough
    assert full.reliability.hot_spare_servers == 0 and full.reliability.training_gpus == 1024
    rel = full.reliability  # no spare: a hardware failure's restart waits for the repair (catalog repair_s)
    assert not rel.spares_enough and rel.restart_s > free.reliability.restart_s
    assert full.reliability.goodput < free.reliability.goodput
    assert any("no whole server is left as a hot spare" in n for n in full.notes)


def test_the_cost_per_delivered_pflop_hour_closed_form():
    # H100 SXM: 1,979 TFLOP/s dense FP8 (NVIDIA H100 datasheet); the catalog's default MFU 0.35 at FP8
    r = plan("dgx-h100-superpod", collectives=False)
    assert r.compute.precision == "fp8" and r.compute.mfu == 0.35
    per_gpu = r.compute.peak_flop_per_s["fp8"] / r.num_gpus
    assert per_gpu == pytest.approx(1979e12, rel=1e-3)
    assert r.cost_per_pflop_hour_usd == pytest.approx(r.cost_per_effective_gpu_hour_usd * 1e15 / (per_gpu * 0.35),
                                                      rel=1e-12)
    assert math.isfinite(r.cost_per_pflop_hour_usd)


def test_plan_tokens_cli_matches_train_and_says_what_it_adds():
    args = ("dgx-h100-superpod", "--model", "llama3-8b", "--layout", "tp=8,global_batch=256")
    p = run_cli("plan", *args, "--tokens", "1T", "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    q = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch", "256",
                "--tokens", "1T", "--json")
    t = json.loads(q.stdout)
    assert d["time_to_train"]["time_at_step_s"] == pytest.approx(t["time_to_train_s"], rel=1e-9)
    assert d["time_to_train"]["time_to_train_s"] == pytest.approx(t["time_to_train_s"] / d["goodput"], rel=1e-9)
    assert d["reliability"]["hot_spare_servers"] == 0  # dp 128 fills the 1,024 GPUs
    text = run_cli("plan", *args, "--tokens", "1T", "--no-collectives").stdout
    assert "time to train 1T tokens: 2.1 days with goodput" in text and "per delivered PFLOP-hour" in text


def test_tokens_without_a_job_is_one_line():
    assert _err("dgx-h100-superpod", "--tokens", "15T") == (
        "--tokens: the time to train is that of a named job's step; allowed: --tokens with --model M and --layout L")
    assert _err("dgx-h100-superpod", "--model", "llama3-8b", "--layout", "tp=8", "--tokens", "15X").startswith(
        "--tokens: expected")


def test_side_by_side_shows_the_cost_of_work():
    p = run_cli("plan", "dgx-h100-superpod", "gb200-nvl72-superpod", "--no-collectives")
    assert p.returncode == 0, p.stderr
    assert "cost per delivered PFLOP-hour" in p.stdout and "cost per million tokens (--model)" in p.stdout


# ---- 5. the one-wave DCI default ---------------------------------------------------------------------------------

ONE_WAVE = ('name = "one-wave"\n[[sites]]\nname = "a"\nspec = "dgx-h100-superpod"\n[[sites]]\nname = "b"\n'
            'spec = "dgx-h100-superpod"\n[interconnect]\ndistance_km = 40\n')


def test_a_region_on_the_default_wave_count_says_so_where_it_is_used(tmp_path):
    f = tmp_path / "one-wave.toml"
    f.write_text(ONE_WAVE)
    # 1 x 800ZR = 100 GB/s a direction (sites.py: wave_rate default "800 Gb/s")
    line = ("note: the DCI takes the default interconnect.waves = 1 (1 x 800 Gb/s, 100 GB/s a direction between a "
            "site pair, for 1,024 GPUs a site): set interconnect.waves")
    for args in (("describe", str(f)), ("plan", str(f), "--no-collectives"),
                 ("train", str(f), "--model", "llama3-8b", "--tp", "8", "--global-batch", "256")):
        p = run_cli(*args)
        assert p.returncode == 0 and line in p.stderr, (args, p.stderr)
    p = run_cli("describe", str(f), "--set", "interconnect.waves=1")  # chosen, not left in
    assert p.returncode == 0 and "default interconnect.waves" not in p.stderr
