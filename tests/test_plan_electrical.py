"""Electrical redundancy: UPS modules and generators per block for N, N+1, 2N (topo.plan.electrical, issue 32)."""

import math

import pytest

from topo.plan import plan
from topo.plan.electrical import electrical


def test_n_n_plus_1_and_2n_by_hand():
    # two blocks of 4.0 and 2.2 MW of IT, PUE 1.25, 1.5 MW UPS modules, 3 MW generators:
    # UPS N = ceil(4/1.5) + ceil(2.2/1.5) = 3 + 2; generators N = ceil(5/3) + ceil(2.75/3) = 2 + 1
    kw = dict(ups_module_W=1.5e6, generator_W=3e6)
    n = electrical([4.0e6, 2.2e6], 1.25, redundancy="N", **kw)
    assert (n.ups_modules, n.generators, n.blocks) == (5, 3, 2)
    n1 = electrical([4.0e6, 2.2e6], 1.25, redundancy="N+1", **kw)
    assert (n1.ups_modules, n1.generators) == (5 + 2, 3 + 2)  # one spare per block
    two = electrical([4.0e6, 2.2e6], 1.25, redundancy="2N", **kw)
    assert (two.ups_modules, two.generators) == (10, 6)
    assert two.ups_capacity_W == 10 * 1.5e6 and two.generator_capacity_W == 6 * 3e6


def test_the_default_plan_carries_its_load_with_a_spare_per_hall():
    r = plan(collectives=False)
    e, p = r.electrical, r.power
    assert e.redundancy == "N+1" and e.blocks == r.floor.num_halls + 1  # each hall, and the rest of the site
    halls = [h.it_power_W for h in r.floor.halls] + [p.it_power_W - sum(h.it_power_W for h in r.floor.halls)]
    assert e.ups_modules == sum(math.ceil(x / 1.5e6) + 1 for x in halls)
    assert e.generators == sum(math.ceil(x * p.pue / 3e6) + 1 for x in halls)
    assert e.ups_capacity_W >= p.it_power_W and e.generator_capacity_W >= p.facility_power_W
    two = plan(layers=[("t", {"facility": {"redundancy": "2N"}})], collectives=False).electrical
    assert two.generator_capacity_W >= 2 * p.facility_power_W
    assert r.to_dict()["electrical"]["generators"] == e.generators
    assert r.headline()["generator_capacity_W"] == pytest.approx(e.generator_capacity_W)
