"""plan79 (plan78's Left 1): `topo plan REGION --model M --layout L --tokens N`. The job's layout across the sites is
the library's (`topo.training.multisite_layout.region_layout`, dp filled as `topo train REGION` fills it), its step
`estimate_across_sites`' (data parallel across the sites, the layout the region's goodput's reload assumes), its
time to train and cost per token one site's plan's formulas (`topo.plan.train_time`) with the region's goodput
(`joint_reliability`, plan78)."""

import json

import pytest

from conftest import run_cli
from small_regions import TWO_SITE_JOB_LAYOUT, two_site_job_plan
from topo.dp_fill import UndividedGpus
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_layout import region_layout

LAYOUT = TWO_SITE_JOB_LAYOUT


@pytest.fixture(scope="module")
def planned():
    return two_site_job_plan()


def test_time_to_train_is_tokens_over_batch_x_seq_x_step_over_goodput(planned):
    # closed form (topo/plan/train_time.py): t = tokens / (global batch x seq) x step / goodput, the step the job's
    # across the sites from the library directly, the goodput the region's (any site's failure stops the job)
    region, model = build_region("two-site-h100"), load_model("llama3-70b")
    lay = region_layout(region, {"tp": 8, "pp": 4, "global_batch": 576})
    assert lay.dp == 96
    step = estimate_across_sites(region, model, lay, across="dp")
    g = planned["goodput"]
    t = planned["time_to_train"]
    per_step = 576 * model.seq_len
    assert planned["training"]["tokens_per_step"] == per_step == step.tokens_per_step
    assert planned["training"]["step_time_s"] == pytest.approx(step.step_time_s, rel=1e-12)
    assert t["time_at_step_s"] == pytest.approx(15e12 / per_step * step.step_time_s, rel=1e-9)
    assert t["time_to_train_s"] == pytest.approx(15e12 / per_step * step.step_time_s / g, rel=1e-9)
    assert t["goodput"] == g == planned["reliability"]["goodput"] and 0 < g < 1
    assert t["gpu_hours_to_train"] == pytest.approx(3072 * t["time_to_train_s"] / 3600, rel=1e-9)
    # the cost per million tokens: the job's GPUs at the cost per effective GPU-hour over an hour's tokens
    tokens_per_hour = per_step / step.step_time_s * 3600
    assert planned["cost_per_million_tokens_usd"] == pytest.approx(
        planned["cost_per_effective_gpu_hour_usd"] * 3072 / tokens_per_hour * 1e6, rel=1e-9)


def test_the_json_has_one_sites_training_keys(planned):
    one = run_cli("plan", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", "tp=8,pp=4,global_batch=32",
                  "--tokens", "1T", "--no-collectives", "--json")
    assert one.returncode == 0, one.stderr
    mine = json.loads(one.stdout)
    for key in ("training", "time_to_train", "cost_per_million_tokens_usd"):
        assert key in planned
    assert set(planned["training"]) == set(mine["training"])
    assert set(planned["time_to_train"]) <= set(mine["time_to_train"])  # no interval: see region_job_layer


def test_a_job_of_part_of_the_sites_counts_its_own_gpus():
    # dp 32 = 16 replicas of 32 GPUs a site: each site's share 512 of its 1,536 GPUs is its job (interruptions of its
    # GPUs' parts, hot spares from the GPUs it leaves), as one site's plan with a job of part of the fabric
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=32,global_batch=64",
                "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["training"]["gpus"] == 1024 and d["reliability"]["training_gpus"] == 1024
    whole = json.loads(run_cli("plan", "two-site-h100", "--no-collectives", "--json").stdout)
    # Llama 3's rates scale with the GPUs: the job's 1,024 of 3,072 GPUs interrupt a third as often
    assert d["reliability"]["interruptions_per_day"] == pytest.approx(
        whole["reliability"]["interruptions_per_day"] / 3, rel=1e-9)


def test_a_regions_job_says_its_interruptions_are_its_gpus_not_every_gpus():
    # walk38: the region's joint reliability summed the sites' job-scoped rates but called them every GPU's ("from
    # all 3,072 GPUs' parts (no job named)") and priced the network row's MTTF per GPU link over every GPU. One
    # site's rule (reliability.py, _scope): a named job's own GPUs interrupt it, the cluster's rate beside; the
    # table's MTTF per GPU link is a property of a link, the same whatever the job's size (Llama 3's network row,
    # per GPU: the rate scales with the GPUs, so GPUs / rate does not move)
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=32,global_batch=64",
                "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    rel = json.loads(p.stdout)["reliability"]
    whole = json.loads(run_cli("plan", "two-site-h100", "--no-collectives", "--json").stdout)["reliability"]
    assert rel["interruptions_of"] == "job" and rel["interrupting_gpus"] == 1024
    assert whole["interruptions_of"] == "cluster" and whole["interrupting_gpus"] == 3072
    assert rel["cluster_interruptions_per_day"] == pytest.approx(whole["interruptions_per_day"], rel=1e-9)
    assert rel["table_network_mttf_years_per_gpu_link"] == pytest.approx(
        whole["table_network_mttf_years_per_gpu_link"], rel=1e-9)
    text = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=8,pp=4,dp=32,global_batch=64",
                   "--no-collectives").stdout
    line = next(x for x in text.splitlines() if x.startswith("failures"))
    assert "from the job's 1,024 GPUs' parts" in line and "no job named" not in line


def test_the_cli_text_has_the_job_block():
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", LAYOUT, "--tokens", "15T",
                "--no-collectives")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "work      llama3-70b across the 2 sites, data parallel: step" in out
    assert "per million tokens (3,072 GPUs at the cost per effective GPU-hour" in out
    line = next(x for x in out.splitlines() if "time to train 15T tokens" in x)
    assert "with goodput" in line and "at the step across the sites, as topo train --tokens gives it" in line


def test_a_bad_layout_on_a_region_names_plans_own_flag_in_one_line():
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", "tp=7,global_batch=576",
                "--no-collectives")
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1
    assert p.stderr.startswith("error: --layout: tp: 7 makes tp x cp x pp = 7, which does not divide the 1,536 GPUs "
                               "of each site"), p.stderr
    assert "or dp=N in the layout (N a multiple of the 2 sites" in p.stderr and "--dp" not in p.stderr


def test_the_librarys_error_names_the_layouts_keys():
    with pytest.raises(UndividedGpus) as e:
        region_layout(build_region("two-site-h100"), {"tp": 7, "global_batch": 576})
    assert e.value.key == "tp" and "(dp not given)" in e.value.message and "or dp=N (" in e.value.message
    assert "--" not in e.value.message
    named = e.value.named({"tp": "--tp", "dp": "--dp"}, dp_as="--dp N", dp_name="--dp")
    assert named.key == "--tp" and "(--dp not given)" in named.message and "or --dp N (" in named.message


def test_a_bad_shares_on_a_regions_job_names_the_flag():
    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", LAYOUT, "--shares", "foo",
                "--no-collectives")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith("error: --shares: unknown split of the replicas over the sites 'foo'; allowed: "
                               "by-size, equal"), p.stderr


def test_profile_prices_the_regions_job_as_train_prices_it():
    # --profile with a job: the step across the sites is topo train REGION's with that profile (ideal: the
    # collectives at the links' rates), named by the flag when unknown; without a job it stays refused
    flags = ["--model", "llama3-70b", "--layout", LAYOUT, "--profile", "ideal"]
    p = run_cli("plan", "two-site-h100", *flags, "--no-collectives", "--json")
    t = run_cli("train", "two-site-h100", *flags, "--json")
    assert p.returncode == 0 and t.returncode == 0, p.stderr + t.stderr
    trained = json.loads(t.stdout)
    step = next(s["step_time_s"] for s in trained["strategies"] if s["strategy"] == trained["chosen"])
    assert json.loads(p.stdout)["training"]["step_time_s"] == pytest.approx(step, rel=1e-12)
    bad = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", LAYOUT, "--profile", "nope",
                  "--no-collectives")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --profile: 'nope': unknown profile")
    alone = run_cli("plan", "two-site-h100", "--profile", "ideal", "--no-collectives")
    assert alone.returncode == 2 and alone.stderr.startswith("error: --profile: ideal: a region's plan without --model")
