"""Compute against SemiAnalysis' figures: 15-31x GPT-4's cluster, 6e26 FLOP in 100 days at FP8 and 35%."""

import pytest

from topo.errors import TopoError
from topo.plan import plan
from topo.plan.compute import compute_budget


def _lines(reference):
    return (reference / "planner.md").read_text().splitlines()


def test_15_to_31_times_gpt4s_cluster_and_6e26_in_100_days(reference):
    # planner.md line 23: 100,000 x 989 TFLOP/s BF16 = 98.9 EFLOP/s, FP8 197.9, vs 20,000 A100 x 312 = 6.24
    # planner.md line 24: 197.9 EFLOP/s x 0.35 x 100 days = 5.99e26 (about 6e26 FLOP)
    lines = _lines(reference)
    assert "15-31x" in lines[22] and "6e26 FLOP" in lines[23] and "0.35 x 100 days" in lines[23]
    r = plan(collectives=False)  # defaults: FP8, MFU 0.35, 100 days (catalog workload, sourced to line 24)
    k = compute_budget(100_000, {p: f / r.num_gpus for p, f in r.compute.peak_flop_per_s.items()}, precision="fp8",
                       mfu=0.35, days=100, mfu_source="", reference_name="GPT-4", reference_flop=2.15e25,
                       reference_gpus=20_000, reference_peak_per_gpu=312e12)
    assert k.peak_flop_per_s["bf16"] == pytest.approx(98.9e18) and k.peak_flop_per_s["fp8"] == pytest.approx(197.9e18)
    assert k.reference_cluster_flop_per_s == pytest.approx(6.24e18)
    assert 15 <= k.peak_ratio_to_reference_cluster["bf16"] < 16 and 31 <= k.peak_ratio_to_reference_cluster["fp8"] < 32
    assert k.flop == pytest.approx(5.99e26, rel=1e-3)
    # the default plan (100,352 GPUs) uses the same defaults
    assert r.compute.precision == "fp8" and r.compute.mfu == 0.35 and r.compute.days == 100
    assert r.compute.flop == pytest.approx(5.99e26 * r.num_gpus / 1e5, rel=1e-3)
    assert r.compute.reference_ratio == pytest.approx(r.compute.flop / 2.15e25)


def test_mfu_and_days_options_scale_the_budget():
    a = plan("dgx-h100-superpod", collectives=False)
    b = plan("dgx-h100-superpod", mfu=0.5, days=30, collectives=False)
    assert b.compute.flop == pytest.approx(a.compute.flop * (0.5 / 0.35) * (30 / 100))


def test_unknown_precision_is_an_error():
    with pytest.raises(TopoError, match="no peak for precision 'fp4'"):
        plan("dgx-h100-superpod", layers=[("t", {"workload": {"precision": "fp4"}})], collectives=False)
