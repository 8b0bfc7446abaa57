"""Failures and goodput: Llama 3's failure table, SemiAnalysis' optical-link figures, Young's interval."""

import math

import pytest

from topo.plan import plan
from topo.plan.reliability import (SECONDS_PER_YEAR, first_failure_s, interruption_rate_per_gpu_h, lost_fraction,
                                   young_interval_s)


def _lines(reference):
    return (reference / "planner.md").read_text().splitlines()


def test_first_link_failure_after_26_28_minutes(reference):
    # planner.md line 26: 5-year MTTF per link, 100,000 links -> 26.28 min; twin-port 4 years / 50,000 -> 42.05
    line = _lines(reference)[25]
    assert "26.28 minutes" in line and "42.05 minutes" in line
    assert first_failure_s(5 * SECONDS_PER_YEAR, 100_000) / 60 == pytest.approx(26.28, rel=1e-12)
    assert first_failure_s(4 * SECONDS_PER_YEAR, 50_000) / 60 == pytest.approx(42.048, rel=1e-12)  # 42.05
    # the plan's optics: every module of the bill of materials, each with its catalog MTTF
    r = plan(collectives=False)
    rate = sum(t.count / (t.mttf_years * SECONDS_PER_YEAR) for t in r.bom.transceivers)
    assert r.reliability.optical_modules == r.bom.num_transceivers
    assert r.reliability.first_optical_failure_s == pytest.approx(1 / rate, rel=1e-12)


def test_one_interruption_every_30_minutes_at_100k_gpus(reference):
    # planner.md lines 50, 56-57: 419 unexpected interruptions in 54 days on 16,384 H100 -> ~30 min at 100,000
    lines = _lines(reference)
    assert "419 unexpected" in lines[49] and "every ~30 minutes" in lines[56]
    r = plan(collectives=False)
    causes = r.reliability.interruptions_per_day_by_cause
    assert sum(causes.values()) == pytest.approx(r.reliability.interruptions_per_day)
    # the catalog's causes add up to Table 5's 419
    per_gpu_h = interruption_rate_per_gpu_h({"all": 419}, 16_384, 54)["all"]
    assert r.reliability.interruptions_per_day == pytest.approx(per_gpu_h * r.num_gpus * 24, rel=1e-12)
    assert 1 / (per_gpu_h * 100_000) * 60 == pytest.approx(30.4, abs=0.1)
    assert r.reliability.mtbf_s / 60 == pytest.approx(30.4 * 100_000 / r.num_gpus, abs=0.1)


def test_checkpoint_and_young_interval_closed_forms():
    r = plan(layers=[("t", {"workload": {"params": 1.8e12}})], collectives=False).reliability
    # 1.8e12 parameters x 14 bytes (planner.md lines 25, 61) at 2 TB/s (line 64), read back at 7 TB/s
    assert r.checkpoint_bytes == pytest.approx(1.8e12 * 14)
    assert r.checkpoint_write_s == r.checkpoint_stall_s == pytest.approx(1.8e12 * 14 / 2e12)
    assert r.reload_s == pytest.approx(1.8e12 * 14 / 7e12)
    assert r.checkpoint_interval_s == pytest.approx(math.sqrt(2 * r.checkpoint_write_s * r.mtbf_s))
    per_failure = r.detection_s + r.restart_s + r.reload_s
    assert (r.detection_s, r.restart_s) == (120, 480)
    assert r.lost_fraction == pytest.approx(r.checkpoint_write_s / r.checkpoint_interval_s
                                            + r.checkpoint_interval_s / (2 * r.mtbf_s) + per_failure / r.mtbf_s)
    # Young's interval minimises the first two terms
    t0 = young_interval_s(10, 1000)
    assert lost_fraction(t0, 10, 0, 1000) < lost_fraction(0.8 * t0, 10, 0, 1000)
    assert lost_fraction(t0, 10, 0, 1000) < lost_fraction(1.25 * t0, 10, 0, 1000)


def test_llama3_scale_keeps_goodput_above_90_percent(reference):
    # planner.md line 51: effective training time above 90% at 16K H100 (Llama 3 405B)
    assert "effective training time above 90%" in _lines(reference)[50]
    r = plan("h100-100k", layers=[("t", {"workload": {"params": 405e9}})], collectives=False)
    small = plan(__import__("topo").load_spec("h100-100k", ["cluster.num_pods=9"]),
                 layers=[("t", {"workload": {"params": 405e9}})], collectives=False)
    assert small.num_gpus == 16_128
    assert small.reliability.goodput > 0.9 > r.reliability.goodput


def test_too_few_hot_spares_add_the_repair_time():
    ok = plan(collectives=False).reliability
    assert ok.spares_enough and ok.restart_s == 480
    short = plan(layers=[("t", {"reliability": {"checkpoint": {"hot_spare_fraction": 0}}})],
                 collectives=False).reliability
    assert not short.spares_enough and short.restart_s == 480 + 14_400 and short.goodput == 0
    assert short.training_gpus == plan(collectives=False).num_gpus
    assert ok.training_gpus == plan(collectives=False).num_gpus - ok.hot_spare_servers * 8
    assert ok.effective_flop == pytest.approx(plan(collectives=False).compute.flop * ok.goodput
                                              * ok.training_gpus / 100_352)
