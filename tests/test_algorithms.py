"""Schedules checked structurally: double binary trees (even and odd rank counts) and ring channel orders."""

from __future__ import annotations

import numpy as np
import pytest

from topo.engine.schedule import NodeShape

from small_fabrics import small_fabric
from topo.engine.algorithms.ring import channels_for, ring_orders
from topo.engine.algorithms.tree import double_binary_tree
from topo.engine.placement import place
from topo.engine.profiles import profile_for

SIZES = list(range(2, 41)) + [63, 64, 65, 127, 128, 129, 1000, 1001]


def tree_facts(parent):
    """(number of roots, every node reaches the root, max children, interior nodes, actual depth)."""
    n = parent.size
    assert np.all((parent >= -1) & (parent < n))
    roots = int(np.sum(parent < 0))
    depth = np.zeros(n, dtype=int)
    cur = parent.copy()
    for _ in range(n):
        live = cur >= 0
        if not live.any():
            break
        depth[live] += 1
        cur[live] = parent[cur[live]]
    reaches = not np.any(cur >= 0)  # no cycle: every walk up ends at a root within n steps
    children = np.bincount(parent[parent >= 0], minlength=n)
    return roots, reaches, int(children.max()), set(np.flatnonzero(children > 0).tolist()), int(depth.max())


@pytest.mark.parametrize("n", SIZES)
def test_both_trees_are_binary_trees_over_every_node(n):
    p0, p1, depth = double_binary_tree(n)
    assert p0.shape == p1.shape == (n,)
    actual = []
    for p in (p0, p1):
        roots, reaches, max_children, _, d = tree_facts(p)
        assert roots == 1, "each tree is rooted once"
        assert reaches, "every node hangs under the root (no cycle, nobody left out)"
        assert max_children <= 2
        actual.append(d)
    assert depth == max(actual)
    assert depth <= int(np.ceil(np.log2(n))) + 1  # in-order trees are balanced: log depth


def _interior_in_both(n):
    p0, p1, _ = double_binary_tree(n)
    return tree_facts(p0)[3] & tree_facts(p1)[3]


@pytest.mark.parametrize("n", [s for s in SIZES if s % 2 == 0])
def test_even_counts_interior_in_at_most_one_tree(n):
    assert _interior_in_both(n) == set()


@pytest.mark.parametrize("n", [s for s in SIZES if s % 2 == 1 and s > 1])
def test_odd_counts_interior_in_at_most_one_tree(n):
    assert _interior_in_both(n) == set()


@pytest.mark.parametrize("n", SIZES)
def test_no_rank_moves_more_than_an_interior_rank(n):
    """What the bandwidth depends on: with each tree carrying half the data h = S/2, a rank with c children
    and a parent in a tree receives (c + 1) h and sends (c + 1) h over reduce + broadcast (a root: c h each
    way). Interior in one tree (2 children) and a leaf in the other gives 4h = 2S, the most any rank may move."""
    p0, p1, _ = double_binary_tree(n)
    load = np.zeros(n)
    for p in (p0, p1):
        children = np.bincount(p[p >= 0], minlength=n)
        load += 0.5 * (children + (p >= 0))
    assert load.max() <= 2.0 + 1e-12
    assert load.sum() == pytest.approx(2 * (n - 1))  # every edge of both trees, half the data each way


def rails(f, gpus):
    return f.nic_rail(f.gpu_nic(gpus))


def _groups(f, how):
    L = f.layout
    return {"all": place(f).groups, "strided": place(f, groups=L.gpus_per_domain).groups,
            "blocked": place(f, groups=2, group_layout="blocked").groups,
            "spread": place(f, f.num_gpus // 2, kind="spread_pods").groups}[how]


_RING_RAIL_CASES = [(name, how) for name in ("rail_optimized-2", "rail_only-3", "fat_tree-3",
                                             "rail_optimized-2-domain-of-2-servers", "rail_optimized-2-shared-nic")
                    for how in ("all", "strided", "blocked", "spread")]


@pytest.mark.parametrize("name, how", [
    (n, h)
    for n, h in _RING_RAIL_CASES])
def test_ring_channels_keep_network_hops_on_one_rail(name, how):
    """Every ring edge that leaves an NVLink domain joins two GPUs on the same rail, in every channel, and the
    orders are permutations of their group (topo/algorithms/ring.py's module doc), including the wrap-around edge
    when the domain count is not a multiple of the ranks per domain (2 domains of 8)."""
    f = small_fabric(name)
    L = f.layout
    groups = _groups(f, how)
    C = L.nics_per_server
    orders = ring_orders(NodeShape.of(f), groups, C)
    assert orders.shape == (C, *groups.shape)
    for c in range(C):
        assert np.array_equal(np.sort(orders[c], axis=1), np.sort(groups, axis=1))
    src, dst = orders, np.roll(orders, -1, axis=2)
    net = f.gpu_domain(src) != f.gpu_domain(dst)
    assert net.any()
    assert np.array_equal(rails(f, src[net]), rails(f, dst[net]))


@pytest.mark.parametrize("name", ["rail_optimized-2", "rail_only-3", "fat_tree-3",
                                  "rail_optimized-2-shared-nic",
                                  "rail_optimized-2-domain-of-2-servers"])
def test_ring_channels_use_every_nic_once(name):
    """Over the C channels of a ring over whole domains, every NIC of every domain sends exactly once and
    receives exactly once (ring.py's module doc): the rings share the NICs evenly."""
    f = small_fabric(name)
    C = channels_for(NodeShape.of(f), place(f).groups)
    orders = ring_orders(NodeShape.of(f), place(f).groups, C)
    src, dst = orders, np.roll(orders, -1, axis=2)
    net = f.gpu_domain(src) != f.gpu_domain(dst)
    n_nics = f.layout.num_nics
    sends = np.bincount(f.gpu_nic(src[net]), minlength=n_nics)
    recvs = np.bincount(f.gpu_nic(dst[net]), minlength=n_nics)
    assert np.all(sends == 1) and np.all(recvs == 1), (sends, recvs)


def test_ring_channels_over_unequal_domains_leave_through_different_nics():
    """Ranks spread unequally over domains (128 ranks on two 72-GPU NVL72 racks, as OCI's GB200 two-rack run,
    oci-hpc-oke README): every channel leaves every domain through its own rank, so no NIC carries two channels
    (it was one NIC for all of them, a 14x slower ring), and the ring is as fast as over 144 ranks."""
    from topo import build_fabric, spec_from_dict
    from topo.calibrate.setup import node_spec
    from topo.engine.estimate import estimate

    fab = build_fabric(spec_from_dict(node_spec("GB200", 4, "400 Gb/s", "infiniband_ndr", 36, 4, 72)))
    shape = NodeShape.of(fab)
    groups = place(fab, 128).groups
    C = channels_for(shape, groups)
    orders = ring_orders(shape, groups, C)
    assert C == 56  # one per NIC of the smaller domain (56 GPUs, one NIC each)
    for c in range(C):
        assert np.array_equal(np.sort(orders[c], axis=1), np.sort(groups, axis=1))
    src, dst = orders, np.roll(orders, -1, axis=2)
    net = fab.gpu_domain(src) != fab.gpu_domain(dst)
    sends = np.bincount(fab.gpu_nic(src[net]), minlength=fab.layout.num_nics)
    assert net.sum() == 2 * C and sends.max() == 1
    full, part = (estimate(fab, "all_reduce", [2**34], gpus=g, algorithm="ring").results[0].busbw_GBps
                  for g in (144, 128))
    assert part == pytest.approx(full, rel=0.05)


def test_tree_over_unequal_domains_chains_every_rank_and_spreads_heads():
    """128 ranks on two 72-GPU NVL72 racks (72 + 56): NCCL's tree runs a chain of each node's ranks of whatever
    length (topo/algorithms/tree.py); every rank but a head sends once up its chain per tree and channel, each
    channel's chain starts at another rank (so at another NIC), and the latency counts the longest chain:
    6.8 + e + 2 x (71 x (0.6 + b + x) + 1 x 5.0) us with NCCL's tree/LL constants and the bundled terms: b per
    Blackwell NVLink step, e once per collective and x per NVLink step in a rack (blackwell.toml
    nvlink_hop_extra_us, mnnvl_extra_us, mnnvl_hop_extra_us)."""
    from topo import build_fabric, spec_from_dict
    from topo.engine.algorithms.tree import tree_flows
    from topo.calibrate.setup import node_spec
    from topo.engine.estimate import estimate

    fab = build_fabric(spec_from_dict(node_spec("GB200", 4, "400 Gb/s", "infiniband_ndr", 36, 4, 72)))
    pl = place(fab, 128)
    C = channels_for(NodeShape.of(fab), pl.groups)
    (src, dst, _), g, D, depth = tree_flows(pl, C, NodeShape.of(fab))
    assert (g, D, depth) == (72, 2, 1)
    intra = fab.gpu_domain(src) == fab.gpu_domain(dst)
    sends = np.bincount(src[intra], minlength=128)
    assert sends.sum() == 2 * C * (128 - 2) and set(np.unique(sends)) <= {2 * C - 2, 2 * C}
    heads = src[~intra]
    # each channel has a head per domain, the child of one of the two trees: 2 C sends, all from different ranks
    assert heads.size == 2 * C and np.unique(heads).size == heads.size
    r = estimate(fab, "all_reduce", [8], gpus=128, algorithm="tree").results[0]
    p = profile_for("blackwell", "infiniband_ndr")
    b, x, e = p.nvlink_hop_extra_s * 1e6, p.mnnvl_hop_extra_s * 1e6, p.mnnvl_extra_s * 1e6
    assert b > 0 and e > 0
    # + the kernel launch once (gpu/blackwell.toml launch_us: Hopper's 2.433 us, assumed)
    assert r.latency_s * 1e6 == pytest.approx(6.8 + e + 2 * (71 * (0.6 + b + x) + 5.0) + 2.433, rel=1e-9)
    full = estimate(fab, "all_reduce", [2**30], gpus=144, algorithm="tree").results[0].busbw_GBps
    part = estimate(fab, "all_reduce", [2**30], gpus=128, algorithm="tree").results[0].busbw_GBps
    assert part == pytest.approx(full, rel=0.15)


def test_nvls_tree_halves_beyond_two_nodes_as_nccl_prices_it():
    """NCCL's tuner (src/graph/tuning.cc, 2.20.3): NVLSTree's inter-node bandwidth is bwInter at 2 nodes and
    bwInter/2 beyond (a tree node exchanges with a parent and two children); the published H100 runs fall from
    466-487 GB/s busbw at 2 nodes to 240-306 at 16-32 (docs/calibration-findings.md section 10)."""
    from topo import build_fabric, load_spec
    from topo.engine.estimate import estimate
    fab = build_fabric(load_spec("dgx-h100-superpod"))
    bw = {n: estimate(fab, "all_reduce", [2**33], gpus=8 * n, algorithm="nvls_tree").results[0].busbw_GBps
          for n in (2, 4, 16)}
    assert 440 < bw[2] < 500
    for n in (4, 16):
        assert 0.5 < bw[n] / bw[2] < 0.65, bw


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter"])
def test_nvls_all_gather_and_reduce_scatter_in_one_domain(collective):
    """NCCL runs NVLS all-gather/reduce-scatter inside one NVLink domain (src/graph/tuning.cc, src/enqueue.cc):
    each GPU's NVLink carries (g-1)/g S the busy way, in one step; across domains it is not available."""
    from topo import TopoError, build_fabric, load_spec
    from topo.engine.estimate import estimate
    fab = build_fabric(load_spec("dgx-h100-superpod"))
    r = estimate(fab, collective, [2**30], gpus=8, algorithm="nvls", profile="ideal").results[0]
    assert r.time_s == pytest.approx(7 / 8 * 2**30 / 450e9, rel=1e-12)
    pick = estimate(fab, collective, [2**30], gpus=8, algorithm="ring,nvls")
    assert pick.candidates["nvls"][0] is not None
    with pytest.raises(TopoError, match="inside one NVLink domain only"):
        estimate(fab, collective, [2**30], gpus=16, algorithm="nvls")
