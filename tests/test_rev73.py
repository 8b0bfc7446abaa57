"""rev73 (review of the 2026-12-07b merges): what tier73's hosted top switches must keep.

A ``plane:J`` failure cuts the plane's switches below the top and so every cable of theirs; at a top tier whose
physical switches host several planes' switches (tier73, ``TierPlan.logical_per_switch``) it must cut the plane's
cables to them and no other plane's (the switch itself stays up for its other planes).
"""

import numpy as np
import pytest

from topo import build_fabric, load_spec


@pytest.mark.parametrize("name, plane, switches_below, uplinks", [
    # h100-100k-islands: 32 planes (32 spines a pod); a plane's cores: 2,048 / 32 = 64, 7 uplinks each = 448
    ("h100-100k-islands", 1, 64, 7),
    # alibaba-hpn-plane: 60 planes (one aggregation switch a pod and plane, 2 pods), 8 uplinks each = 16
    ("alibaba-hpn-plane", 5, 2, 8),
])
def test_a_plane_failure_cuts_its_cables_to_a_hosted_top_switch_and_no_other(name, plane, switches_below, uplinks):
    f = build_fabric(load_spec(name))
    top = f.layout.tiers[-1]
    assert top.logical_per_switch > 1  # the case guarded: one physical top switch hosts several planes' switches
    g = f.with_failures(f"plane:{plane}")
    level = g.levels[-1]
    up = g.level_slice(level)
    dead = ~g.link_alive[up]
    assert int(dead.sum()) == switches_below * uplinks
    # exactly the uplinks of the plane's switches of the tier below (their nodes' plane column), none of another's
    below = f.layout.tiers[-2]
    src = f.links["src"][up]
    plane_of_src = f.nodes["plane"][src]
    assert np.array_equal(dead, plane_of_src == plane)
    assert np.unique(src[dead]).size == switches_below and below.up_ports == uplinks
