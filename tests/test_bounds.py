"""The lower bound on a schedule's bandwidth part (topo.engine.bounds) and the pruning it allows
(``evaluate(..., at_sizes=...)``).

The bound must never exceed the routed and costed figure, or a candidate that would be the fastest could go
unrouted: it is checked here against routing on every small fabric kind and depth (tests/small_fabrics.py), with
ideal and hashed ECMP, sharing equal and max-min, PXN on and off, and a failed NIC, leaf and spine. Pruning must
never change what an estimate answers: the chosen algorithm, protocol, time and bottleneck are compared with and
without it, at sizes where the tree wins (latency-bound) and where the ring does.
"""

from __future__ import annotations

import math

import pytest

from small_fabrics import SPECS, small_fabric
from topo import build_fabric, load_spec
from topo.engine.bounds import seconds_per_byte_bound
from topo.engine.cost import usable_capacity
from topo.engine.estimate import evaluate, size_result
from topo.errors import TopoError

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv")


def _placements(f):
    n = f.num_gpus
    per_server = f.layout.gpus_per_server
    return [dict(), dict(gpus=n // 2), dict(placement="one_per_server", gpus=n // per_server),
            dict(gpus=n, groups=per_server)]


def _check(ev):
    cap = usable_capacity(ev.router, ev.profile)
    for name, c in ev.costed.items():
        bound = seconds_per_byte_bound(c.schedule, ev.router, cap)
        assert bound <= c.seconds_per_byte, (name, bound, c.seconds_per_byte)
    return cap


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("ecmp", ["ideal", "hash"])
def test_bound_never_above_the_routed_cost(name, ecmp):
    f = small_fabric(name)
    T = f.layout.tiers
    fabrics = [f] + [f.with_failures(part) for part in ("nic0.0", f"{T[0].name}0", f"{T[-1].name}0")]
    checked = 0
    for fab in fabrics:
        for coll in COLLECTIVES:
            for kw in _placements(fab):
                for pxn in (None, False):
                    try:
                        ev = evaluate(fab, coll, ecmp=ecmp, pxn=pxn, **kw)
                    except TopoError:  # cut off by the failure, or cross-rail without PXN on a rail-only fabric
                        continue
                    _check(ev)
                    checked += len(ev.costed)
    assert checked > 50


@pytest.mark.parametrize("name", ["rail_optimized-3-os2", "rail_optimized-4-os2", "fat_tree-3"])
def test_bound_under_max_min_sharing(name):
    f = small_fabric(name)
    for coll in ("all_reduce", "all_gather"):
        ev = evaluate(f, coll, sharing="maxmin", gpus=f.num_gpus, groups=f.layout.gpus_per_server)
        _check(ev)


def test_bound_is_the_routed_cost_across_the_oversubscribed_tier():
    # one GPU per pod in each communicator (the planner's data-parallel all-reduce): every ring edge crosses the
    # 2:1 tier, every pod's cables into it are equally loaded, so the cut's bound is the routed figure itself
    f = small_fabric("rail_optimized-3-os2")
    L = f.layout
    per_pod = L.servers_per_unit * L.units_per_pod * L.gpus_per_server
    ev = evaluate(f, "all_reduce", algorithm="ring", gpus=f.num_gpus, groups=per_pod)
    c = ev.costed["ring"]
    bound = seconds_per_byte_bound(c.schedule, ev.router, usable_capacity(ev.router, ev.profile))
    assert bound == pytest.approx(c.seconds_per_byte, rel=1e-6)
    assert size_result(ev, 2**30).bottleneck.level == "spine-core"


@pytest.mark.parametrize("name", ["rail_optimized-3-os2", "rail_optimized-4-os2", "fat_tree-3", "rail_only-3",
                                  "rail_optimized-2-domain-of-2-servers"])
@pytest.mark.parametrize("size", [1024, 64 * 2**10, 2**30])
def test_pruning_changes_no_answer(name, size):
    f = small_fabric(name)
    L = f.layout
    per_block = L.servers_per_unit * L.units_per_block(L.num_tiers - 2) * L.gpus_per_server
    for coll in ("all_reduce", "all_gather", "broadcast"):
        for kw in (dict(), dict(gpus=f.num_gpus, groups=per_block)):
            full = evaluate(f, coll, **kw)
            fast = evaluate(f, coll, at_sizes=[size], **kw)
            a, b = size_result(full, size), size_result(fast, size)
            assert (b.algorithm, b.protocol, b.time_s, b.bottleneck) == (a.algorithm, a.protocol, a.time_s,
                                                                        a.bottleneck), (coll, kw)
            # a pruned candidate is one routing would have costed, or found unable to run (e.g. SHARP where no
            # switch reduces: it fails only when routed)
            assert set(fast.pruned).isdisjoint(fast.costed)
            assert set(fast.pruned) <= set(full.costed) | set(full.unavailable)


def test_pruning_skips_the_tree_across_the_islands_top_tier():
    # the planner's cross-island all-reduce (one GPU per island in each of 24,576 communicators): the ring is
    # costed first, and the tree's bound at 1 GiB is above the ring's time, so the tree is not routed
    f = build_fabric(load_spec("h100-100k-islands"))
    size = 2**30
    ev = evaluate(f, "all_reduce", gpus=98_304, groups=24_576, at_sizes=[size])
    assert list(ev.costed) == ["ring"] and "tree" in ev.pruned
    r = size_result(ev, size)
    assert r.algorithm == "ring" and r.bottleneck.level == "core-super-spine"
    # the evaluation answers for its sizes only, and cannot be re-costed under another profile
    with pytest.raises(ValueError, match="evaluate again"):
        ev.time(2**20)
    with pytest.raises(ValueError, match="evaluate again"):
        ev.with_profile(ev.profile)
    assert math.isfinite(ev.time(size)[0])


def test_nccl_choice_is_never_pruned():
    # choose=nccl runs what NCCL's tuner picks, not the fastest: every candidate must be costed
    f = small_fabric("rail_optimized-3-os2")
    ev = evaluate(f, "all_reduce", choose="nccl", gpus=f.num_gpus, groups=8, at_sizes=[2**30])
    assert not ev.pruned and len(ev.costed) >= 2


# --- mutations no test caught (issue 30): the domain-size guard, the entering cut ----------------------------------

def _domain_spanning_units():
    # 4 GPUs per server, NVLink domains of 8 (2 servers), units of 3 servers: domain 1 = servers 2 and 3, one in
    # each unit, so a transfer inside it crosses from unit 0 to unit 1 over NVLink, never over the leaf uplinks
    from small_fabrics import _two
    from topo import spec_from_dict

    f = build_fabric(spec_from_dict(_two("rail_optimized", gpus=4, nics=4, spu=3, gpd=8)))
    L = f.layout
    assert (L.servers_per_unit * L.gpus_per_server) % L.gpus_per_domain  # the case the guard exists for
    return f


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "broadcast", "reduce"])
def test_bound_on_a_domain_that_spans_units(coll):
    # without the guard (`if size % L.gpus_per_domain: continue` in _cuts), the units' cut counts NVLink traffic
    # as crossing the leaves' uplinks and the ring's bound is 1.25x the routed figure: unsound
    ev = evaluate(_domain_spanning_units(), coll)
    _check(ev)


def test_the_entering_cut_bounds_converging_traffic():
    # a gather: every rank sends its part to the root, so the bytes converge on the root's NVLink domain and the
    # binding cut is the one *entering* it (leaving, each domain sends only its own GPUs' parts)
    f = small_fabric("rail_optimized-2")
    L = f.layout
    ev = evaluate(f, "gather", gpus=f.num_gpus)
    cap = usable_capacity(ev.router, ev.profile)
    c = next(iter(ev.costed.values()))
    got = seconds_per_byte_bound(c.schedule, ev.router, cap)
    # the closed form: bytes entering the root's domain from the others over that domain's NIC-to-leaf capacity in
    import numpy as np

    parts = [p for ph in c.schedule.phases for p in ph.parts]
    src = np.concatenate([np.ravel(p.src) for p in parts])
    dst = np.concatenate([np.ravel(p.dst) for p in parts])
    nbytes = np.concatenate([np.broadcast_to(np.asarray(p.per_msg_byte, float), (p.num_flows,)) for p in parts])
    root_dom = 0
    into = (dst // L.gpus_per_domain == root_dom) & (src // L.gpus_per_domain != root_dom)
    nics = np.arange(L.gpus_per_domain // L.gpus_per_server * L.nics_per_server)  # the root domain's servers' NICs
    cap_in = cap[2 * ev.router.paths.nic_link(nics) + 1].sum()
    assert into.any() and got == pytest.approx(nbytes[into].sum() / cap_in * (1 - 1e-9), rel=1e-12)
