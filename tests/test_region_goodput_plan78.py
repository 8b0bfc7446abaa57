"""A region's plan has one site's reliability / goodput block (plan78, findings 360): the job across the sites is
stopped by any site's interruptions (the rates add) and its reload is each site's read of its own checkpoint share,
then the other sites' shares over the DCI (Megatron's fully_parallel_load: read, then exchange,
NVIDIA/Megatron-LM@008e9cdb53e75bbf9733d0089a5c9bf14553ca1c
megatron/core/dist_checkpointing/strategies/fully_parallel.py, FullyParallelLoadStrategyWrapper.load steps 3-4)."""

import json
import math
import subprocess
import sys

import pytest

from topo.fabric.region import build_region
from topo.plan import plan
from topo.plan.region import plan_region


@pytest.fixture(scope="module")
def two_site():
    return plan_region(build_region("two-site-h100"), collectives=False)


@pytest.fixture(scope="module")
def chain():
    return plan_region(build_region("three-site-chain"), collectives=False)


def test_the_sites_rates_add(two_site):
    sites = [p.reliability for p in two_site.site_plans]
    rel = two_site.reliability
    assert rel.interruptions_per_day == pytest.approx(sum(r.interruptions_per_day for r in sites))
    assert 1 / rel.mtbf_s == pytest.approx(sum(1 / r.mtbf_s for r in sites))
    assert rel.interrupting_gpus == two_site.num_gpus == 3072


def test_the_reload_adds_the_exchange_over_the_dci(two_site):
    # two-site-h100: 16 waves x 800 Gb/s = 1.6 TB/s per direction; each site receives the other's half
    share_bytes = two_site.site_plans[0].storage.checkpoint_bytes
    assert share_bytes == pytest.approx(two_site.job["checkpoint_bytes"] / 2)
    exchange = share_bytes / (16 * 800e9 / 8)
    assert two_site.restore_exchange_s == pytest.approx(exchange)
    rel, site = two_site.reliability, two_site.site_plans[0].reliability
    assert rel.reload_s == pytest.approx(site.reload_s + exchange)
    assert rel.reload_s > site.reload_s


def test_a_chain_sends_two_shares_over_an_end_span(chain):
    # three-site-chain (line A - B - C, 8 x 800 Gb/s a span): each end site receives two shares over its one span
    share_bytes = chain.site_plans[0].storage.checkpoint_bytes
    assert chain.restore_exchange_s == pytest.approx(2 * share_bytes / (8 * 800e9 / 8))


def test_goodput_is_the_renewal_closed_form(two_site):
    # Daly 2006 / Bougeret 2011: goodput = lambda T / (e^(lambda R) (e^(lambda (T + C)) - 1))
    rel = two_site.reliability
    lam, T, C = 1 / rel.mtbf_s, rel.checkpoint_interval_s, rel.checkpoint_stall_s
    R = rel.detection_s + rel.restart_s + rel.reload_s
    assert rel.goodput == pytest.approx(lam * T / (math.exp(lam * R) * math.expm1(lam * (T + C))))
    # one job across both sites is interrupted twice as often as either site alone: lower goodput
    assert rel.goodput < two_site.site_plans[0].reliability.goodput
    assert rel.young_interval_s == pytest.approx(math.sqrt(2 * C * rel.mtbf_s))


def test_json_has_one_sites_reliability_keys(two_site):
    one = plan("dgx-h100-superpod", collectives=False).to_dict()
    d = two_site.to_dict()
    assert set(d["reliability"]) == set(one["reliability"])
    assert d["goodput"] == d["reliability"]["goodput"] == two_site.reliability.goodput
    assert d["cost_per_effective_gpu_hour_usd"] > d["cost_per_gpu_hour_usd"]
    json.dumps(d)


def test_the_cli_prints_the_block():
    out = subprocess.run([sys.executable, "-m", "topo", "plan", "two-site-h100", "--no-collectives"],
                         capture_output=True, text=True, check=True).stdout
    assert "goodput   " in out and "interruptions/day" in out
    assert "one job across the 2 sites" in out and "over the DCI" in out


def test_tokens_on_a_region_asks_for_the_job():
    # plan79: --tokens on a region is timed with --model and --layout (tests/test_region_plan_job_plan79.py); alone it
    # is one line asking for them, as on one site
    p = subprocess.run([sys.executable, "-m", "topo", "plan", "two-site-h100", "--tokens", "1T"], capture_output=True,
                       text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("error: --tokens: the time to train is that of a named job's step; allowed: --tokens "
                               "with --model M and --layout L"), p.stderr


def test_an_async_sites_copy_is_its_share_over_its_gpus():
    # async: the stall is the copy to host memory of a GPU's part, size / GPUs / snapshot rate (25 GB/s, catalog).
    # A site of a region holds half the checkpoint over its 1,536 GPUs: C / 2 / 1,536 / 25e9, the same per GPU as
    # the whole over the region's 3,072 (it copied C / 1,536 before, twice a GPU's part)
    layer = [("test", {"reliability": {"checkpoint": {"mode": "async"}}})]
    r = plan_region(build_region("two-site-h100"), collectives=False, layers=layer)
    C = r.job["checkpoint_bytes"]
    for p in r.site_plans:
        assert p.reliability.checkpoint_stall_s == pytest.approx(C / 2 / 1536 / 25e9)
    assert r.reliability.checkpoint_stall_s == pytest.approx(C / 3072 / 25e9)
    assert r.reliability.checkpoint_mode == "async"
