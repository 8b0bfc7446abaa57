"""plan81 (plan80's Left 3): while a job stands -- the checkpoint's stall, the hang until detection, the restart (and
any repair's wait), the reload: the goodput's lost time but the catch-up -- its GPUs draw their idle power
(topo/data/catalog/gpus.toml idle_W, sourced), not their working draw; the rest of their servers, the network,
storage and the DCI keep theirs, all at the site's PUE. One formula (`topo.plan.train_time.job_energy`, the drop
`PowerBreakdown.standing_drop_W`) for one site's plan and a region's. Closed forms from the data files:

    drop        = job GPUs x (TDP x server average fraction - idle) x PUE
    mean power  = job's power - standing share x drop
    J per token = mean power / (tokens/s x goodput);  energy to train = mean power x t_wall
"""

import json
import tomllib

import pytest

from conftest import run_cli
from small_regions import two_site_job_plan
from topo.plan.train_time import STANDING_PARTS, TrainingJob, job_energy
from topo.resources import data_dir

STANDS = ("checkpoint_stall", "detection", "restart", "reload")  # not catch_up: the lost work ran at the working draw


def _h100() -> dict:
    return tomllib.loads((data_dir("catalog") / "gpus.toml").read_text())["H100"]


def _average_fraction() -> float:
    return tomllib.loads((data_dir("catalog") / "facility.toml").read_text())["server_average_fraction"]["value"]


def test_the_job_energy_closed_form_by_hand():
    # 500 of 1,000 GPUs of a 2 MW plan: 1 MW at work; standing 15% of the wall time with a 400 kW drop: 940 kW mean
    e = job_energy(TrainingJob("m", 500, 2.0, 4_000_000, tokens=1e12), 0.8, 2e6, 1000, 0.1, 400e3, 0.15)
    assert e["job_power_W"] == 1e6 and e["job_standing_power_W"] == 600e3
    assert e["job_mean_power_W"] == pytest.approx(940e3)
    assert e["energy_per_token_J"] == pytest.approx(940e3 / (2e6 * 0.8))  # 0.5875 J
    assert e["energy_to_train_J"] == pytest.approx(940e3 * 1e12 / 2e6 / 0.8)


def test_the_parts_that_stand_are_the_lost_time_but_the_catch_up():
    assert STANDING_PARTS == STANDS


def test_one_sites_job_stands_at_its_gpus_idle_draw():
    p = run_cli("plan", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=4,global_batch=32",
                "--tokens", "1T", "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    e, pw, gpu = d["energy_to_train"], d["power"], _h100()
    assert pw["gpu_idle_W"] == gpu["idle_W"]["value"] == 80 and gpu["idle_W"]["status"] == "secondary"
    drop_W = 128 * (gpu["tdp_W"]["value"] * _average_fraction() - gpu["idle_W"]["value"]) * pw["pue"]
    share = sum(d["reliability"]["lost_fraction_by_part"][k] for k in STANDS)
    assert e["standing_fraction"] == pytest.approx(share, rel=1e-12) and 0 < share < 1
    assert e["job_standing_power_W"] == pytest.approx(e["job_power_W"] - drop_W, rel=1e-9)
    mean_W = e["job_power_W"] - share * drop_W
    assert e["job_mean_power_W"] == pytest.approx(mean_W, rel=1e-9)
    tps = d["training"]["tokens_per_s"]
    assert e["energy_per_token_J"] == pytest.approx(mean_W / (tps * d["reliability"]["goodput"]), rel=1e-9)
    assert e["energy_to_train_J"] == pytest.approx(mean_W * d["time_to_train"]["time_to_train_s"], rel=1e-9)


def test_a_regions_job_stands_at_every_sites_gpus_idle_draw():
    # two-site-h100's job holds its 3,072 H100 (1,536 a site); each site's PUE its facility / IT power
    d = two_site_job_plan()
    e, gpu = d["energy_to_train"], _h100()
    per_gpu = gpu["tdp_W"]["value"] * _average_fraction() - gpu["idle_W"]["value"]  # 576.8 - 80 = 496.8 W
    drop_W = sum(s["num_gpus"] * per_gpu * s["facility_power_W"] / s["it_power_W"] for s in d["sites"])
    assert d["training"]["gpus"] == sum(s["num_gpus"] for s in d["sites"]) == 3072
    share = sum(d["reliability"]["lost_fraction_by_part"][k] for k in STANDS)
    assert share > 0.2  # no hot spare left: every restart waits the repair (section 366)
    assert e["job_power_W"] - e["job_standing_power_W"] == pytest.approx(drop_W, rel=1e-9)
    mean_W = e["job_power_W"] - share * drop_W
    assert e["energy_to_train_J"] == pytest.approx(mean_W * d["time_to_train"]["time_to_train_s"], rel=1e-9)
    assert e["energy_per_token_J"] == pytest.approx(
        mean_W / (d["training"]["tokens_per_s"] * d["goodput"]), rel=1e-9)


def test_every_catalog_gpu_has_a_sourced_idle_draw_below_its_tdp():
    for name, gpu in tomllib.loads((data_dir("catalog") / "gpus.toml").read_text()).items():
        if isinstance(gpu, dict):
            idle = gpu["idle_W"]
            assert 0 < idle["value"] < gpu["tdp_W"]["value"] and idle["source"], name
            assert idle["status"] in ("published", "secondary", "assumption"), name
