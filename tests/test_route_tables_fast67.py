"""fast67: :class:`topo.engine.paths.Paths` looks up each flow's NIC, the GPU beside a NIC, a NIC's leaf and a
leaf's aggregates in tables the fabric's own index arithmetic filled once, instead of dividing per flow. The tables
must give the very integers the arithmetic gives, so a routed schedule is the same bit for bit.

Checked two ways, on small fabrics of every shape (shared NICs, two NICs per GPU, rail-only, 4 and 5 tiers, an
NVLink domain of two servers) with and without asymmetric failures (one NIC of one server, one leaf, a random tenth of
the leaf-spine cables): every table entry against the fabric's arithmetic, and whole routes (the path table, and
each flow's resources, bytes and latency) against a router whose lookups are the arithmetic itself.
"""

import numpy as np
import pytest

from small_fabrics import small_fabric
from topo.engine.loads import PhaseLoads, ScheduleLoads, total_loads
from topo.engine.paths import Paths
from topo.engine.route import Router
from topo.errors import Unreachable

SHAPES = ["rail_optimized-2-shared-nic", "rail_optimized-3-two-nics-per-gpu", "fat_tree-3-two-nics-per-gpu",
          "rail_only-3", "rail_optimized-4", "rail_optimized-5", "rail_optimized-2-domain-of-2-servers"]
FAILURES = [(), ("nic1.1",), ("leaf1",), ("random:leaf-spine:0.1:3",)]


class _Arithmetic(Paths):
    """The lookups as the fabric computes them, per call (what the tables replaced)."""

    def gpu_nic(self, gpu, choice=0):
        return self.fabric.gpu_nic(gpu, choice)

    def nic_gpu(self, nic):
        return self.fabric.nic_gpu(nic)

    def nic_leaf(self, nic):
        return self.fabric.nic_leaf(nic)

    def aggregates(self, leaf):
        L = self.fabric.layout
        return [L.leaf_aggregate(k, leaf) for k in range(L.num_tiers - 1)]

    def top_aggregate(self, leaf):
        return self.fabric.layout.leaf_aggregate(self.fabric.layout.num_tiers - 1, leaf)


def _fabric(name, failures):
    f = small_fabric(name)
    return f.with_failures(*failures) if failures else f


@pytest.mark.parametrize("name", SHAPES)
def test_tables_equal_the_fabric_arithmetic(name):
    f = small_fabric(name)
    L = f.layout
    p, a = Paths(f, True), _Arithmetic(f, True)
    gpus, nics, leaves = np.arange(L.num_gpus), np.arange(L.num_nics), np.arange(L.tiers[0].num_switches)
    for c in range(3):
        assert np.array_equal(p.gpu_nic(gpus, c), a.gpu_nic(gpus, c))
    choice = np.arange(L.num_gpus) % 3
    assert np.array_equal(p.gpu_nic(gpus, choice), a.gpu_nic(gpus, choice))
    assert np.array_equal(p.nic_gpu(nics), a.nic_gpu(nics))
    assert np.array_equal(p.nic_leaf(nics), a.nic_leaf(nics))
    for mine, theirs in zip(p.aggregates(leaves), a.aggregates(leaves), strict=True):
        assert np.array_equal(mine, theirs)
    assert np.array_equal(p.top_aggregate(leaves), a.top_aggregate(leaves))


def _routed(router, src, dst, choice):
    try:
        cols, inter = router.path_table(src, dst, choice, np.zeros_like(src))
        r = router.route(src, dst, np.linspace(1.0, 2.0, src.size), choice)
    except Unreachable as e:
        return str(e)
    return cols, inter, r.res, r.weight, r.flow, r.latency_s, r.network


@pytest.mark.parametrize("failures", FAILURES)
@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("ecmp", ["ideal", "hash"])
def test_routes_equal_those_of_the_arithmetic(name, failures, ecmp):
    """Every ordered pair of GPUs, NIC choice by pair, on a fabric with failures that break its symmetry."""
    f = _fabric(name, failures)
    fast = Router(f, ecmp=ecmp, subflows=2 if ecmp == "hash" else 1)
    slow = Router(f, ecmp=ecmp, subflows=2 if ecmp == "hash" else 1)
    slow.paths = _Arithmetic(f, slow.pxn)
    n = f.layout.num_gpus
    src, dst = np.divmod(np.arange(n * n), n)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    choice = (src + 2 * dst) % 3
    a, b = _routed(fast, src, dst, choice), _routed(slow, src, dst, choice)
    if isinstance(b, str):  # a cut-off GPU: the same refusal
        assert a == b
        return
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("failures", [(), ("nic1.1",)])
def test_one_part_per_flow_needs_no_lookup(failures):
    """Without sub-flows a routed entry's flow is its row of the path table and a flow's latency is the sum of its
    hops' latencies in slot order (what ``bincount`` over the rows gives), bit for bit."""
    f = _fabric("rail_optimized-3-two-nics-per-gpu", failures)
    r = Router(f)
    n = f.layout.num_gpus
    src, dst = np.divmod(np.arange(n * n), n)
    choice = src % 2
    got = r.route(src, dst, 3.0, choice)
    cols, _ = r.path_table(src, dst, choice, np.zeros_like(src))
    rows, slot = np.nonzero(cols >= 0)
    assert np.array_equal(got.res, cols[rows, slot]) and got.flow.dtype == np.int32
    assert np.array_equal(got.flow, rows)
    lat = np.zeros(src.size)
    for c in range(cols.shape[1]):  # the hops of each flow, in slot order
        on = cols[:, c] >= 0
        lat[on] = lat[on] + r.res_latency_s[cols[on, c]]
    assert np.array_equal(got.latency_s, lat)
    assert got.latency_s[src == dst].max() == 0.0 and got.latency_s.min() >= 0.0


def test_summed_phases_equal_their_bincount():
    """``total_loads`` adds each phase at its resource ids (each once): the sum ``bincount`` gives, bit for bit,
    and a list that repeats an id still sums both."""
    rng = np.random.default_rng(7)
    n = 1000
    phases = []
    for k in range(6):
        res = np.unique(rng.integers(0, n, 300 + 100 * k))
        phases.append(PhaseLoads(f"p{k}", 1.0 + k / 3, res.size, res, rng.random(res.size) / 7))
    sl = ScheduleLoads(None, phases, 0.0, n)
    ref = np.zeros(n)
    for ph in phases:
        ref += np.bincount(ph.res, weights=ph.bytes * (ph.repeat * 0.3), minlength=n)
    assert np.array_equal(total_loads([sl], [0.3]), ref)
    twice = PhaseLoads("twice", 1.0, 2, np.array([5, 5, 9]), np.array([1.0, 2.0, 4.0]))
    out = total_loads([ScheduleLoads(None, [twice], 0.0, n)])
    assert out[5] == 3.0 and out[9] == 4.0 and out.sum() == 7.0
