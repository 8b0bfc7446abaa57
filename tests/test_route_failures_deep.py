"""Hashed ECMP on failed fabrics of 4 and 5 tiers: a dead end several boundaries up is routed around whenever a
working up/down path exists (a switch re-hashes over the next hops that still lead to the destination), and a pair
is unreachable exactly when no working path joins it.

The oracle is independent of the router's index arithmetic: the fabric's own link list (endpoints, level, alive),
as a directed graph of working uplinks in networkx. Two leaves are joined when some switch of the lowest tier whose
aggregate holds both is reached going up from each (a path in a folded Clos goes up to the lowest tier that joins its
ends, then down; going higher only comes back through the same plane).
"""

import networkx as nx
import numpy as np
import pytest

from small_fabrics import small_fabric
from topo.engine.estimate import estimate
from topo.engine.route import Router
from topo.errors import Unreachable
from topo.fabric.levels import Level


def _up_graph(f):
    """Working uplinks (leaf and above) as a directed graph lower -> upper switch node."""
    L = f.layout
    g = nx.DiGraph()
    alive = f.link_alive
    for k in range(L.num_tiers - 1):
        sl = f.level_slice(Level.uplink(k))
        src, dst = f.links["src"][sl], f.links["dst"][sl]
        ok = alive[sl]
        g.add_edges_from(zip(src[ok].tolist(), dst[ok].tolist()))
    return g


def _turn_tier(f, a, b):
    """The lowest tier whose aggregate holds both leaves."""
    L = f.layout
    for t in range(1, L.num_tiers):
        if t == L.num_tiers - 1 or L.leaf_aggregate(t, a) == L.leaf_aggregate(t, b):
            return t
    raise AssertionError


def _joined(f, up, a, b):
    """Some switch of the tier that joins leaves a and b is reached going up from both (``up``: per leaf, the
    switches it reaches through working uplinks)."""
    t = _turn_tier(f, a, b)
    lo, hi = f.switch_node(t, 0), f.switch_node(t, f.layout.tiers[t].num_switches)
    return any(lo <= w < hi for w in up[a] & up[b])


def _hops(r, a, b, sub=0):
    """The hashed hops between leaves a and b as (up link, down link) per boundary, or None if unreachable."""
    one = np.array([a]), np.array([b])
    try:
        return [(int(u[0]) // 2, int(d[0]) // 2) for _, _, u, d in
                r.hashed_hops(*one, np.array([2 * a + 1]), np.array([2 * b + 1]), np.array([sub]), *one)]
    except Unreachable:
        return None


def _check_path(f, a, b, hops):
    """The hops form one up/down path from leaf a to leaf b over working links only."""
    src, dst = f.links["src"], f.links["dst"]
    x, y = f.switch_node(0, a), f.switch_node(0, b)
    for up, down in hops:
        assert f.link_alive[up] and f.link_alive[down]
        assert src[up] == x and src[down] == y  # links are stored lower -> upper
        x, y = dst[up], dst[down]
    assert x == y  # the two halves meet at one switch


def _dead_end_above_spine0(f):
    """Every uplink of the switches one tier below the top that spine 0 of leaf 0's pod reaches going up: a dead
    end ``num_tiers - 3`` boundaries above the spine."""
    L = f.layout
    xs = np.array([L.upper_switch(0, 0, 0)])
    for t in range(1, L.num_tiers - 2):
        xs = np.unique(L.upper_switch(t, xs[:, None], np.arange(L.tiers[t + 1].switches_per_group)))
    top_t = L.num_tiers - 2
    names = L.tiers[top_t].name, L.tiers[top_t + 1].name
    tops = L.upper_switch(top_t, xs[:, None], np.arange(L.tiers[top_t + 1].switches_per_group))
    return [f"{names[0]}{x}-{names[1]}{y}" for x, row in zip(xs, tops) for y in np.unique(row)]


@pytest.mark.parametrize("name", ["rail_optimized-4", "rail_optimized-5"])
def test_a_dead_end_two_or_more_boundaries_up_is_routed_around(name):
    f0 = small_fabric(name)
    L = f0.layout
    f = f0.with_failures(*_dead_end_above_spine0(f0))
    r = Router(f, "hash")
    leaves = L.tiers[0].num_switches
    far = [b for b in range(leaves) if _turn_tier(f, 0, b) == L.num_tiers - 1]
    near = [b for b in range(leaves) if 1 < _turn_tier(f, 0, b) < L.num_tiers - 1]
    assert far and near
    spine0 = f.switch_node(1, L.upper_switch(0, 0, 0))
    via_spine0 = {"far": 0, "near": 0}
    for which, targets in (("far", far), ("near", near)):
        for b in targets:
            for sub in range(8):
                hops = _hops(r, 0, b, sub)
                assert hops is not None, f"leaf 0 -> leaf {b} has a working path through spine 1 but was refused"
                _check_path(f, 0, b, hops)
                via_spine0[which] += int(f.links["dst"][hops[0][0]] == spine0)
    assert via_spine0["far"] == 0  # spine 0 leads only to the dead end for pairs that cross the top
    assert via_spine0["near"] > 0  # but still carries its share of the pairs that turn below the dead end
    # the whole collective: an all-to-all over every GPU routes (it crossed the dead end before)
    t = estimate(f, "alltoall", "64M", ecmp="hash").results[0].time_s
    assert t >= estimate(f0, "alltoall", "64M", ecmp="hash").results[0].time_s * (1 - 1e-12)


@pytest.mark.parametrize("name,fails", [("rail_optimized-4", ["spine-core:0.7"]),
                                        ("rail_optimized-5", ["core-super:0.7"]),
                                        ("rail_optimized-5", ["core:0.3", "super-hyper:0.5"]),
                                        ("rail_optimized-5", ["spine:0.3"])])
def test_unreachable_exactly_when_no_working_path_joins_two_leaves(name, fails):
    f0 = small_fabric(name)
    leaves = f0.layout.tiers[0].num_switches
    pairs = refused = 0
    for seed in range(2):
        f = f0.with_failures(*[f"random:{x}:{seed}" for x in fails])
        r = Router(f, "hash")
        g = _up_graph(f)
        up = [nx.descendants(g, n) if n in g else set() for n in (f.switch_node(0, x) for x in range(leaves))]
        for a in range(seed, leaves, 2):  # half the sources per draw: a few seconds
            for b in range(leaves):
                if a == b or _turn_tier(f, a, b) == 0:
                    continue
                hops = _hops(r, a, b)
                ok = _joined(f, up, a, b)
                assert (hops is not None) == ok, (seed, a, b, ok)
                if hops is not None:
                    _check_path(f, a, b, hops)
                pairs += 1
                refused += hops is None
    assert pairs > 0 and 0 < refused < pairs  # the draws cut some pairs off, and only some
