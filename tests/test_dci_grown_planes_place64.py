"""The top tier a region's DCI grows (plan59, topo/plan/dci_ports.py) grows in whole planes (place64): the builder
lays a tier as ``num_groups x switches_per_group`` (topo/fabric/builders/clos.py), a top tier's group being a plane,
so the added switches are the same number in every plane, ``G ceil(missing / (G k))``; plan59 added
``ceil(missing / k)`` whole switches, one plane's worth."""

import math

from topo.fabric.builders import build_fabric
from topo.fabric.region import build_region
from topo.plan.region import plan_region
from topo.spec import load_spec

# two bundled GB200 NVL72 superpods (32 racks: 4 pods of 8, a core of 18 planes x 2 QM9700 of 64 ports, every port
# taken), 16 x 800G, attached at the top: InfiniBand, so border switches whose 1.6 TB/s lands on
# ceil(1.6e12 / 50e9) = 32 core ports of 400 Gb/s
REGION = """name = "two-gb200"
description = "two GB200 NVL72 superpods, 40 km apart (a test region)"
[[sites]]
name = "east"
spec = "gb200-nvl72-superpod"
[[sites]]
name = "west"
spec = "gb200-nvl72-superpod"
[interconnect]
topology = "mesh"
distance_km = 40
latency_per_km = "4.9 us"
equipment_latency = "50 us"
waves = 16
wave_rate = "800 Gb/s"
attach = "top"
"""


def test_a_tier_grows_by_the_same_count_in_each_group():
    core = build_fabric(load_spec("gb200-nvl72-superpod")).layout.tiers[-1]
    assert (core.name, core.num_groups, core.switches_per_group, core.radix) == ("core", 18, 2, 64)
    assert [core.switches_for_ports(p) for p in (0, 1, 32, 18 * 64, 18 * 64 + 1)] == [0, 18, 18, 18, 36]


def test_the_dci_grows_the_core_in_whole_planes(tmp_path):
    path = tmp_path / "two-gb200.toml"
    path.write_text(REGION)
    p = plan_region(build_region(str(path), []), collectives=False)
    for s in p.dci.site_ports:
        assert (s["ports_needed"], s["ports_idle"], s["ports_missing"], s["tier_planes"]) == (32, 0, 32, 18)
        assert s["tier_added"] == 18 * math.ceil(32 / (18 * 64)) == 18  # plan59: ceil(32 / 64) = 1
    assert sum("the DCI's bill adds 18 core switches of the site's model (QM9700, 747 W, $36,000 each, 1 in each of "
               "its 18 planes: " in n for n in p.notes) == 2
