"""Spare pools from failure and restock rates (topo.plan.spares, issue 32)."""

import math

import pytest

from topo.plan import plan
from topo.plan.spares import poisson_quantile, spare_pool


def test_poisson_quantile_by_hand():
    # P(Poisson(1) <= k) = e^-1 (1, 2, 2.5, 2.667, 2.708): 0.368, 0.736, 0.920, 0.981, 0.996
    assert [poisson_quantile(1.0, q) for q in (0.3, 0.5, 0.9, 0.95, 0.99)] == [0, 1, 2, 3, 4]
    assert poisson_quantile(0.0, 0.99) == 0
    # a large mean (no underflow): the normal approximation m + 2.326 sqrt(m) within a couple of units
    m = 800.0
    assert abs(poisson_quantile(m, 0.99) - (m + 2.326 * math.sqrt(m))) < 3


def test_the_default_plans_pools():
    r = plan(collectives=False)
    pools = {x.item: x for x in r.spares}
    # 100,352 x 400G-SR4 at a 5-year MTTF over a 14-day restock: 100,352 x 14 / (5 x 365) = 769.8 expected
    sr4 = pools["400G-SR4"]
    assert sr4.installed == 100_352 and sr4.expected_in_lead_time == pytest.approx(100_352 * 14 / (5 * 365))
    assert sr4.spares == poisson_quantile(sr4.expected_in_lead_time, 0.99) > sr4.expected_in_lead_time
    # servers: the failure table's hardware causes at 100,352 GPUs over a 4-hour repair
    hw_per_day = (262 + 7 + 46) / 54 * 100_352 / 16_384
    srv = pools["HGX H100"]
    assert srv.expected_in_lead_time == pytest.approx(hw_per_day * 4 / 24)
    assert r.to_dict()["spares"][0]["spares"] == r.spares[0].spares
    assert r.headline()["spares_usd"] == pytest.approx(sum(x.spares * x.price_usd_each for x in r.spares))
    assert spare_pool("x", 10, 0.0, lead_time_days=14, service_level=0.99).spares == 0
