"""plan80 (plan79's Left 1 and 4): a planned job's energy per token and to train (one formula for one site's plan
and a region's, `topo.plan.train_time.job_energy`), and the time-to-train interval of a region's job from the step
across the sites' interval (`topo.training.multisite_interval`: the share's step at the step model's out-of-family
error, step_uncertainty.toml; the DCI's exposed part at the collective model's held-out error,
collective_interval.toml)."""

import json
import tomllib

import pytest

from conftest import run_cli
from small_regions import TWO_SITE_JOB_LAYOUT, two_site_job_plan
from topo.fabric.region import build_region
from topo.plan.region import plan_region
from topo.plan.train_time import TrainingJob, job_energy, region_job_layer, standing_fraction
from topo.resources import data_dir
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_layout import region_layout
from topo.training.parallel import dp_bucket_params

LAYOUT = TWO_SITE_JOB_LAYOUT


@pytest.fixture(scope="module")
def planned():
    return two_site_job_plan()


@pytest.fixture(scope="module")
def step():
    region = build_region("two-site-h100")
    lay = region_layout(region, {"tp": 8, "pp": 4, "global_batch": 576})
    return lay, estimate_across_sites(region, load_model("llama3-70b"), lay, across="dp")


def test_job_energy_closed_form():
    # half of 1,000 GPUs on 2 MW average facility power: 1 MW; 2 M tokens/s at goodput 0.8 -> 1e6 / 1.6e6 J a token
    e = job_energy(TrainingJob("m", 500, 2.0, 4_000_000, tokens=1e12, step_interval_s=(1.0, 4.0)), 0.8, 2e6, 1000,
                   0.1)
    assert e["job_power_W"] == 1e6
    assert e["energy_per_token_J"] == pytest.approx(0.625)
    assert e["energy_per_million_tokens_kWh"] == pytest.approx(0.625 * 1e6 / 3.6e6)
    assert e["energy_cost_per_million_tokens_usd"] == pytest.approx(0.625 / 3.6 * 0.1)
    wall_s = 1e12 / 2e6 / 0.8  # 625,000 s
    assert e["energy_to_train_J"] == pytest.approx(1e6 * wall_s) == 0.625 * 1e12
    assert e["energy_to_train_kWh"] == pytest.approx(1e6 * wall_s / 3.6e6)
    assert e["energy_cost_to_train_usd"] == pytest.approx(e["energy_to_train_kWh"] * 0.1)
    assert e["energy_to_train_interval_kWh"] == pytest.approx([1e6 * wall_s / 2 / 3.6e6, 1e6 * wall_s * 2 / 3.6e6])
    assert job_energy(None, 0.8, 2e6, 1000, 0.1) is None
    assert "energy_to_train_J" not in job_energy(TrainingJob("m", 500, 2.0, 4_000_000), 0.8, 2e6, 1000, 0.1)


def test_region_energy_is_its_share_of_the_sites_and_dci_average_power(planned, step):
    # the library's region plan of the same job: each site's plan's average facility power (power.py: IT at the
    # servers' average draw x PUE) and the DCI bill's power; the job holds all 3,072 GPUs, so all of it
    lay, ms = step
    layer, job = region_job_layer("llama3-70b", ms, lay.precision, float(load_model("llama3-70b").total_params),
                                  15e12)
    r = plan_region(build_region("two-site-h100"), training=job, site_gpus=dict(ms.site_gpus), layers=[layer])
    avg_W = sum(p.power.average_facility_power_W for p in r.site_plans) + r.dci.power_W
    assert r.dci.power_W > 0 and len(r.site_plans) == 2
    t, e = planned["time_to_train"], planned["energy_to_train"]
    assert planned["training"]["gpus"] == planned["num_gpus"] == 3072
    assert e["job_power_W"] == pytest.approx(avg_W, rel=1e-12)
    # plan81: while the job stands (the lost time's stall, detection, restart, reload) its GPUs draw their idle
    drop_W = sum(p.power.standing_drop_W(p.training.gpus) for p in r.site_plans)
    mean_W = avg_W - standing_fraction(planned["reliability"]["lost_fraction_by_part"]) * drop_W
    assert 0 < drop_W < avg_W and e["job_mean_power_W"] == pytest.approx(mean_W, rel=1e-12)
    tps, g = planned["training"]["tokens_per_s"], planned["goodput"]
    assert e["energy_per_token_J"] == pytest.approx(mean_W / (tps * g), rel=1e-12)
    assert e["energy_to_train_J"] == pytest.approx(mean_W * t["time_to_train_s"], rel=1e-12)
    assert e["energy_to_train_J"] == pytest.approx(e["energy_per_token_J"] * 15e12, rel=1e-9)
    assert e["energy_to_train_kWh"] == pytest.approx(e["energy_to_train_J"] / 3.6e6, rel=1e-12)
    price = r.site_plans[0].power.electricity_usd_per_kWh
    assert e["energy_cost_to_train_usd"] == pytest.approx(e["energy_to_train_kWh"] * price, rel=1e-12)
    assert e["energy_to_train_interval_kWh"] == pytest.approx([mean_W * x / 3.6e6
                                                               for x in t["time_to_train_interval_s"]])


def _collective_band(call_bytes):
    doc = tomllib.loads((data_dir("accuracy") / "collective_interval.toml").read_text())
    return next(r for r in doc["regime"] if call_bytes <= r["max_bytes"])


def test_region_step_interval_adds_the_shares_and_the_dcis_bands(step):
    # low = T_s / (1 + p90) + exposed / (1 + e90), high = T_s / (1 - p90) + exposed / (1 + e10)
    lay, ms = step
    dp = next(s for s in ms.strategies if s.strategy == "dp")
    Ts, exposed, p90 = ms.one_site_step_s, dp.exposed_s, ms.uncertainty["p90"]
    assert dp.step_time_s == pytest.approx(Ts + exposed, rel=1e-12) and exposed > 0
    site_lay = lay.model_copy(update={"dp": 48, "global_batch": 288})
    call = dp_bucket_params(site_lay) * site_lay.reduce_bytes  # Megatron-Core's bucket: max(40M, 1M x dp) params
    band = _collective_band(call)
    u = ms.step_interval
    assert u["bounds"] == "step_time_s" and u["regime"] == band["name"]
    assert u["low_s"] == pytest.approx(Ts / (1 + p90) + exposed / (1 + band["error_p90"]), rel=1e-12)
    assert u["high_s"] == pytest.approx(Ts / (1 - p90) + exposed / (1 + band["error_p10"]), rel=1e-12)
    # one site's share's interval is still there, said of the step it bounds
    assert ms.uncertainty["bounds"] == "one_site_step_s"


def test_region_time_to_train_interval_is_the_step_intervals(planned, step):
    _, ms = step
    t, g = planned["time_to_train"], planned["goodput"]
    per_step = planned["training"]["tokens_per_step"]
    assert planned["training"]["step_interval_s"] == pytest.approx([ms.step_interval["low_s"],
                                                                    ms.step_interval["high_s"]], rel=1e-12)
    assert t["time_to_train_interval_s"] == pytest.approx(
        [15e12 / per_step * ms.step_interval[k] / g for k in ("low_s", "high_s")], rel=1e-9)
    assert t["time_to_train_interval_s"][0] < t["time_to_train_s"] < t["time_to_train_interval_s"][1]


def test_the_plans_text_says_the_energy_and_the_interval():
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", LAYOUT, "--tokens", "15T",
                "--no-collectives")
    assert p.returncode == 0, p.stderr
    assert "J per token" in p.stdout and "kWh per million tokens" in p.stdout and "GWh" in p.stdout
    assert "at the uncertainty's ends" in p.stdout


def test_one_sites_plan_has_the_energy_of_its_jobs_share():
    # a job of 128 of dgx-h100-superpod's GPUs: its share of the plan's average facility power
    p = run_cli("plan", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=4,global_batch=32",
                "--tokens", "1T", "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    e, t = d["energy_to_train"], d["time_to_train"]
    share = d["training"]["gpus"] / d["num_gpus"]
    assert 0 < share < 1
    assert e["job_power_W"] == pytest.approx(share * d["power"]["average_facility_power_W"], rel=1e-12)
    assert e["energy_to_train_J"] == pytest.approx(e["job_mean_power_W"] * t["time_to_train_s"], rel=1e-12)
    assert e["electricity_usd_per_kWh"] == d["power"]["electricity_usd_per_kWh"]
