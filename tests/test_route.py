"""The router against networkx as an oracle, on small fabrics of every kind with 2 and 3 tiers.

- every routed flow is a chain of adjacent nodes from its source GPU to its destination GPU, as long as the
  shortest path networkx finds (PXN accounted: see ``test_paths_are_shortest``);
- the maximum flow between the two halves of the cluster equals ``inventory(fabric).bisection_bandwidth_Bps``;
- hashed ECMP uses every spine, core and cable evenly (chi-square), and is deterministic;
- the ideal-ECMP aggregates carry exactly what the real links carry in total.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from small_fabrics import SPECS, small_fabric
from topo import inventory
from topo.fabric.fabric import LEVEL_NVLINK
from topo.engine.route import Router

SMALL = sorted(SPECS)


def walks(router, routed):
    """For every flow, the node ids along it: ``(from, to, level)`` arrays of its hops, in order (real links)."""
    f = router.fabric
    res = routed.res
    assert np.all(res < router.num_real), "a hashed route names real links only"
    assert np.all(np.diff(routed.flow) >= 0)  # entries come flow by flow, hop by hop
    link, down = res // 2, res % 2
    a, b = f.links["src"][link].astype(int), f.links["dst"][link].astype(int)
    frm = np.where(down == 1, b, a)
    to = np.where(down == 1, a, b)
    cut = np.flatnonzero(np.diff(routed.flow)) + 1
    return zip(np.split(frm, cut), np.split(to, cut), np.split(f.links["level"][link], cut))


def all_pairs(n):
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    return i, j


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("pxn", [None, False])
def test_paths_are_shortest(name, pxn):
    """For all ordered pairs: a valid path from GPU to GPU, and a shortest one.

    PXN accounting: a flow that leaves its NVLink domain through another GPU's NIC first moves GPU -> NVSwitch ->
    proxy GPU (2 NVLink hops, the first two of its path, landing on the GPU beside the NIC it uses); the rest of
    its path must then be a shortest path from the proxy GPU to the destination in the graph *without* the
    NVSwitches (NVLink carries nothing else; the receiver takes its data from its own NIC over PCIe). Without
    that hop, the whole path is a shortest path without NVSwitches. Inside a domain: GPU -> NVSwitch -> GPU,
    the shortest path of the whole graph (2 hops). Every path is at most 2 hops longer than the shortest path
    of the whole graph.
    """
    f = small_fabric(name)
    r = Router(f, "hash", pxn=pxn)
    if pxn is False and f.layout.rail_groups > 1:
        pytest.skip("rail-only without PXN cannot route between rails (tested in test_alltoall.py)")
    if pxn is False and f.layout.num_tiers < 2:
        pytest.skip("no spine")
    names = f.node_names()
    g = f.graph
    net = g.subgraph([n for n, a in g.nodes(data=True) if a["role"] != "nvswitch"])
    n = f.num_gpus
    src, dst = all_pairs(n)
    routed = r.route(src, dst, 1.0)
    full = {s: nx.single_source_shortest_path_length(g, names[s]) for s in range(n)}
    net_len = {s: nx.single_source_shortest_path_length(net, names[s]) for s in range(n)}
    dom = f.gpu_domain(np.arange(n))
    hops_seen = 0
    assert np.array_equal(np.unique(routed.flow), np.arange(src.size))
    for k, (frm, to, level) in enumerate(walks(r, routed)):
        s, d = int(src[k]), int(dst[k])
        assert frm[0] == s and to[-1] == d, (name, s, d)
        assert np.array_equal(to[:-1], frm[1:]), f"{name}: path {s}->{d} is not a chain of adjacent nodes"
        for a, b in zip(frm, to):
            assert g.has_edge(names[a], names[b])
        length = frm.size
        if dom[s] == dom[d]:
            assert length == full[s][names[d]] == 2
            continue
        hop = level[0] == LEVEL_NVLINK
        start = int(to[1]) if hop else s
        if hop:
            hops_seen += 1
            assert level[1] == LEVEL_NVLINK and start != s and f.gpu_domain(start) == dom[s]
        assert length - 2 * hop == net_len[start][names[d]], (name, s, d, length)
        assert full[s][names[d]] <= length <= full[s][names[d]] + 2
        # the NVLink hop, when taken, is NCCL's PXN: the sender's server's NIC on the destination's rail
    if r.pxn and f.layout.leaves_per_unit > 1:
        assert hops_seen > 0


@pytest.mark.parametrize("name", SMALL)
def test_pxn_uses_the_destination_rail(name):
    f = small_fabric(name)
    r = Router(f, "hash", pxn=True)
    n = f.num_gpus
    src, dst = all_pairs(n)
    inter = f.gpu_domain(src) != f.gpu_domain(dst)
    src, dst = src[inter], dst[inter]
    routed = r.route(src, dst, 1.0)
    nic_up = routed.res[(routed.res // 2 >= f.link_offset["nic"]) & (routed.res // 2 < f.link_offset.get(
        "up:0", f.num_links)) & (routed.res % 2 == 0)] // 2 - f.link_offset["nic"]
    assert np.array_equal(f.nic_server(nic_up), f.gpu_server(src))
    assert np.array_equal(f.nic_rail(nic_up), f.nic_rail(f.gpu_nic(dst)))


def _max_flow_between_halves(f):
    """Max flow from the first half of the GPUs (by id: whole domains, units and pods) to the second half, with
    NVLink and PCIe unconstrained and every network edge at its summed cable bandwidth per direction."""
    g = f.graph.copy()
    for u, v, a in g.edges(data=True):
        if a["level"] not in ("nvlink", "pcie"):
            a["capacity"] = a["bandwidth_Bps"]
    names = f.node_names()
    half = f.num_gpus // 2
    for i in range(f.num_gpus):
        if i < half:
            g.add_edge("SOURCE", names[i])
        else:
            g.add_edge(names[i], "SINK")
    return nx.maximum_flow_value(g, "SOURCE", "SINK")


@pytest.mark.parametrize("name", SMALL)
def test_min_cut_is_the_bisection(name):
    """inventory's bisection (topo/inventory.py: half the smallest of the NIC, leaf-uplink and spine-uplink
    capacities) is the minimum cut between two halves of the cluster (max-flow min-cut theorem)."""
    f = small_fabric(name)
    inv = inventory(f)
    assert _max_flow_between_halves(f) == pytest.approx(inv.bisection_bandwidth_Bps, rel=1e-9)


def test_min_cut_sees_each_bottleneck():
    """The fabrics above include one where the leaf uplinks are the bottleneck and one where the spines' are:
    the bisection is then below the NIC boundary, and max-flow agrees."""
    for name, level in (("rail_optimized-2-os2", 0), ("rail_optimized-3-os2", 1)):
        f = small_fabric(name)
        L = f.layout
        nic_half = L.num_nics * L.nic_rate_Bps / 2
        tier_half = L.tiers[level].up_capacity_Bps / 2
        assert tier_half < nic_half
        assert _max_flow_between_halves(f) == pytest.approx(tier_half)


def _chi2_uniform(counts):
    counts = np.asarray(counts, float)
    e = counts.sum() / counts.size
    return float(((counts - e) ** 2 / e).sum())


# chi-square critical values at p = 0.001 (dof 1..15), from the chi-square table (NIST/SEMATECH e-Handbook 1.3.6.7.4)
_CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322, 8: 26.124, 9: 27.877,
             10: 29.588, 11: 31.264, 12: 32.909, 13: 34.528, 14: 36.123, 15: 37.697}


@pytest.mark.parametrize("name, subflows", [("rail_optimized-2", 1), ("rail_optimized-2", 4),
                                            ("rail_optimized-3", 1), ("rail_optimized-3-os2", 2)])
def test_hashed_ecmp_spreads_over_all_spines_and_cables(name, subflows):
    """Many flows leaving each leaf: every uplink cable of the leaf is used, the spines are chosen uniformly
    (chi-square at p = 0.001), and likewise the cores and cables above each spine group."""
    f = small_fabric(name)
    L = f.layout
    # one flow per ordered pair of NICs, from the GPU beside each (no PXN): each flow (each of its sub-flows) is
    # one independent hash decision, which the chi-square test needs
    r = Router(f, "hash", subflows=subflows, pxn=False)
    beside = f.nic_gpu(np.arange(L.num_nics))
    i, j = all_pairs(beside.size)
    assert L.nics_per_server <= L.gpus_per_server  # one NIC per GPU pair of ends: the pairs are distinct
    routed = r.route(beside[i], beside[j], 1.0)
    lo = f.link_offset
    u0 = L.tiers[0].up_ports
    m1 = L.tiers[1].links_from_below
    ids = routed.res // 2
    up = routed.res % 2 == 0
    leaf_up = up & (ids >= lo["up:0"]) & (ids < lo["up:0"] + L.tiers[0].num_switches * u0)
    within = (ids[leaf_up] - lo["up:0"]) % u0
    leaf = (ids[leaf_up] - lo["up:0"]) // u0
    for lf in np.unique(leaf):
        cables = np.bincount(within[leaf == lf], minlength=u0)
        assert np.all(cables > 0), f"leaf {lf} leaves an uplink unused: {cables}"
        spines = np.bincount(within[leaf == lf] // m1, minlength=u0 // m1)
        if spines.size > 1:
            assert _chi2_uniform(spines) < _CHI2_999[spines.size - 1], spines
    all_spines = np.bincount(within // m1, minlength=u0 // m1)
    assert all_spines.size > 1 and np.all(all_spines > 0)
    assert _chi2_uniform(all_spines) < _CHI2_999[all_spines.size - 1], all_spines
    if L.num_tiers > 2:
        t1 = L.tiers[1]
        u1, m2 = t1.up_ports, L.tiers[2].links_from_below
        spine_up = up & (ids >= lo["up:1"])
        w = (ids[spine_up] - lo["up:1"]) % u1
        assert np.all(np.bincount(w, minlength=u1) > 0)
        cores = np.bincount(w // m2, minlength=u1 // m2)
        if cores.size > 1:
            assert _chi2_uniform(cores) < _CHI2_999[cores.size - 1], cores


def test_hashed_ecmp_is_deterministic_and_salted():
    f = small_fabric("rail_optimized-3")
    src, dst = all_pairs(f.num_gpus)
    a = Router(f, "hash").route(src, dst, 1.0)
    b = Router(f, "hash").route(src, dst, 1.0)
    assert np.array_equal(a.res, b.res) and np.array_equal(a.flow, b.flow)
    c = Router(f, "hash", salt=12345).route(src, dst, 1.0)
    assert not np.array_equal(a.res, c.res)
    np.testing.assert_allclose(np.sort(a.weight), np.sort(c.weight))


@pytest.mark.parametrize("name", ["rail_optimized-2", "rail_optimized-3", "fat_tree-3", "rail_only-3",
                                  "rail_optimized-3-os2"])
def test_ideal_aggregates_equal_real_link_sums(name):
    """Ideal ECMP puts a leaf's (spine group's) up and down traffic on one aggregate resource: it must equal the
    total the hashed routing puts on that leaf's (group's) cables, and real_link_loads must spread it back
    without losing a byte. Every other link carries the same in both modes."""
    f = small_fabric(name)
    L = f.layout
    rng = np.random.default_rng(5)
    src = rng.integers(0, f.num_gpus, 3000)
    dst = rng.integers(0, f.num_gpus, 3000)
    nbytes = rng.uniform(1, 10, 3000)
    ideal = Router(f, "ideal")
    hashed = Router(f, "hash")
    li = ideal.loads(ideal.route(src, dst, nbytes))
    lh = hashed.loads(hashed.route(src, dst, nbytes))
    real = ideal.real_link_loads(li)
    assert real.sum() + 0 == pytest.approx(lh.sum())
    lo = f.link_offset
    u0 = L.tiers[0].up_ports
    nl = L.tiers[0].num_switches
    blk = lo["up:0"] + np.arange(nl * u0).reshape(nl, u0)
    for d, v in ((0, ideal.v_leaf_up), (1, ideal.v_leaf_down)):
        agg = li[v:v + nl]
        assert agg.sum() > 0
        np.testing.assert_allclose(lh[2 * blk + d].sum(axis=1), agg, rtol=1e-12)
        np.testing.assert_allclose(real[2 * blk + d].sum(axis=1), agg, rtol=1e-12)
    if L.num_tiers > 2:
        t1 = L.tiers[1]
        per = t1.switches_per_group * t1.up_ports
        ng = t1.num_groups
        blk = lo["up:1"] + np.arange(t1.num_switches * t1.up_ports).reshape(ng, per)
        for d, v in ((0, ideal.v_grp_up), (1, ideal.v_grp_down)):
            agg = li[v:v + ng]
            assert agg.sum() > 0
            np.testing.assert_allclose(lh[2 * blk + d].sum(axis=1), agg, rtol=1e-12)
            np.testing.assert_allclose(real[2 * blk + d].sum(axis=1), agg, rtol=1e-12)
    below = 2 * lo["up:0"]
    np.testing.assert_allclose(li[:below], lh[:below], rtol=1e-12)


def test_describe_resource_names_both_ends():
    f = small_fabric("rail_optimized-3")
    r = Router(f, "ideal")
    link = f.link_offset["nic"]
    up, down = r.describe_resource(2 * link), r.describe_resource(2 * link + 1)
    assert (up["src"], up["dst"]) == (down["dst"], down["src"])
    assert up["direction"] == "up" and down["direction"] == "down"
    agg = r.describe_resource(r.v_leaf_up)
    assert agg["link"] is None and agg["num_links"] == f.layout.tiers[0].up_ports
