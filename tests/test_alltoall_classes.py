"""A uniform all-to-all as max-min classes (topo/alltoall_classes.py) against the same traffic routed pair by
pair: the same loads on every resource and the same max-min makespan, wherever both can run."""

import numpy as np
import pytest

from small_fabrics import SPECS, small_fabric
from topo.engine.allpairs import route_all_pairs
from topo.engine.alltoall_classes import alltoall_classes, classes_apply
from topo.engine.contention import flow_classes, max_min_makespan
from topo.engine.route import Router
from topo.engine.schedule import AllPairs, Transfers
from topo.errors import Unreachable

PXN = [name for name in sorted(SPECS) if Router(small_fabric(name)).pxn]


def _pairs(groups, nbytes):
    p = groups.shape[1]
    i, j = np.nonzero(~np.eye(p, dtype=bool))
    return Transfers(groups[:, i].ravel(), groups[:, j].ravel(), nbytes, split_nics=True)


@pytest.mark.parametrize("name", PXN)
@pytest.mark.parametrize("subflows", [1, 3])
def test_classes_equal_pair_by_pair(name, subflows):
    f = small_fabric(name)
    r = Router(f, "hash", subflows=subflows, salt=5)
    assert classes_apply(r)
    n = f.num_gpus
    rng = np.random.default_rng(1)
    for groups in (np.arange(n)[None, :],  # the whole cluster
                   rng.permutation(n).reshape(2, -1)):  # two communicators, ranks scattered over servers
        classes = alltoall_classes(r, AllPairs(groups, 3.0))
        flows = r.route_transfers(_pairs(groups, 3.0))
        assert classes.classes.num_flows == flows.num_flows
        assert classes.classes.num_classes < flows.num_flows  # something was merged
        assert np.allclose(r.loads(classes), r.loads(flows), rtol=1e-12, atol=0)
        cap = r.capacity_Bps * rng.uniform(0.5, 1.5, r.capacity_Bps.size)  # unequal links: unlike flows
        assert max_min_makespan(classes, cap) == pytest.approx(max_min_makespan(flows, cap), rel=1e-9)


def test_the_router_uses_classes_for_max_min_and_only_where_they_hold():
    f = small_fabric("rail_optimized-3")
    r = Router(f, "hash")
    a = AllPairs(np.arange(f.num_gpus)[None, :], 1.0)
    kept = route_all_pairs(r, a, keep_flows=True)
    assert kept.classes is not None and kept.classes.template is not None
    assert flow_classes(kept) is kept.classes
    # no PXN: every GPU sends through its own NIC, nothing to merge
    assert not classes_apply(Router(f, "hash", pxn=False))
    assert classes_apply(Router(f.with_failures("spine0"), "hash"))  # failures keep classes whole
    assert route_all_pairs(Router(f, "hash", pxn=False), a, keep_flows=True).classes is None


def test_when_merged_flows_would_move_apart_estimate_fills_them_one_by_one():
    """NVLink slower than the NIC: the GPUs of a server that PXN sends through one NIC are held back by their
    own NVLink hops, each differently, so their class cannot answer (maxmin raises ClassesDiverge); estimate then
    routes the all-to-all pair by pair and gets the flow-by-flow answer."""
    from conftest import spec_dict, tier
    from topo import build_fabric, spec_from_dict
    from topo.errors import TopoError
    from topo.engine.estimate import estimate
    from topo.engine.maxmin import ClassesDiverge, max_min_makespan_classes

    d = spec_dict(kind="rail_optimized", tiers=[tier("leaf", radix=16), tier("spine", radix=16)],
                  cluster={"num_units": 2}, server={"gpus": 4, "nics": 4, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": 4, "bandwidth_per_gpu": "5 GB/s"})
    f = build_fabric(spec_from_dict(d))
    r = Router(f, "hash")
    a = AllPairs(np.arange(f.num_gpus)[None, :], 1.0)
    with pytest.raises(ClassesDiverge):
        max_min_makespan_classes(alltoall_classes(r, a).classes, r.capacity_Bps)
    got = estimate(f, "alltoall", "64MiB", ecmp="hash", sharing="maxmin").results[0].time_s
    import topo.engine.alltoall_classes as ac
    old = ac.classes_apply
    ac.classes_apply = lambda router: False
    try:
        by_flow = estimate(f, "alltoall", "64MiB", ecmp="hash", sharing="maxmin").results[0].time_s
    finally:
        ac.classes_apply = old
    assert got == pytest.approx(by_flow, rel=1e-12)
    assert issubclass(ClassesDiverge, TopoError)


@pytest.mark.parametrize("name", ["rail_optimized-3", "rail_optimized-2-os2", "fat_tree-3"])
def test_hashed_alltoall_beyond_the_explicit_flows_keeps_the_hash(name, monkeypatch):
    # Review finding: under equal sharing a hashed all-to-all of more than EXPLICIT_FLOWS flows took the expected
    # loads over the hash, i.e. ideal ECMP's time: on h100-100k, 992 GPUs (983k flows) took 24.96 ms and 1,024
    # GPUs (1.05M flows) 24.06 ms, the ideal figure. Past the limit the loads must still be the hash's own (classes
    # with PXN, chunks without), equal to routing every flow; fat_tree-3 has no PXN (chunks).
    import topo.engine.allpairs as route
    from topo.engine.estimate import estimate

    f = small_fabric(name)
    one_by_one = estimate(f, "alltoall", "1G", ecmp="hash").results[0].time_s
    ideal = estimate(f, "alltoall", "1G", ecmp="ideal").results[0].time_s
    assert one_by_one > 1.2 * ideal  # the hash collides here: the test can tell them apart
    monkeypatch.setattr(route, "EXPLICIT_FLOWS", 10)
    past = estimate(f, "alltoall", "1G", ecmp="hash")
    assert past.results[0].time_s == pytest.approx(one_by_one, rel=1e-12)
    assert not past.notes
    # too many to route at all: the expected loads, and a note that says so
    monkeypatch.setattr(route, "MAX_HASHED_CLASS_PATHS", 0)
    monkeypatch.setattr(route, "MAX_HASHED_CHUNKED", 0)
    expected = estimate(f, "alltoall", "1G", ecmp="hash")
    assert expected.results[0].time_s == pytest.approx(ideal, rel=1e-12)
    assert any("expected loads over the hash" in n for n in expected.notes)


@pytest.mark.parametrize("name", ["rail_optimized-2", "rail_optimized-2-domain-of-2-servers"])
def test_an_alltoall_inside_one_domain_under_maxmin(name):
    # Review finding: every all-to-all inside one NVLink domain crashed under max-min ("internal error
    # (UFuncTypeError: Cannot cast ufunc 'add' output from dtype('float64') to dtype('int64') ...)"), e.g.
    # `topo estimate gb200-nvl72-superpod -c alltoall -g 72 --sharing maxmin`: no class leaves the domain.
    # Its flows are alike (NVLink only), so max-min ends when the busiest link drains, as equal sharing says.
    from topo.engine.estimate import estimate

    f = small_fabric(name)
    g = f.layout.gpus_per_domain
    t = {s: estimate(f, "alltoall", "1G", gpus=g, sharing=s).results[0].time_s for s in ("equal", "maxmin")}
    assert t["maxmin"] == pytest.approx(t["equal"], rel=1e-12) and t["equal"] > 0


def test_maxmin_refuses_an_alltoall_with_more_classes_than_memory_allows(monkeypatch):
    # Review finding: max-min of a PXN all-to-all built its classes whatever their number: 5.6 million took 3.3 GB
    # and 37 s, and `topo estimate -g 16384 -c alltoall --ecmp hash --sharing maxmin` (33.5 million) would have
    # needed about 20 GB. Past MAX_MAXMIN_CLASS_PATHS it is one error naming sharing, before any class is built.
    import topo.engine.allpairs as route
    from topo.errors import TopoError
    from topo.engine.estimate import estimate

    f = small_fabric("rail_optimized-3")
    ok = estimate(f, "alltoall", "1G", sharing="maxmin", ecmp="hash").results[0].time_s
    monkeypatch.setattr(route, "MAX_MAXMIN_CLASS_PATHS", 10)
    with pytest.raises(TopoError) as e:
        estimate(f, "alltoall", "1G", sharing="maxmin", ecmp="hash")
    assert e.value.key == "sharing" and "flow classes, more than the 10 topo keeps" in e.value.message
    assert estimate(f, "alltoall", "1G", sharing="equal", ecmp="hash").results[0].time_s == pytest.approx(ok)


@pytest.mark.parametrize("subflows", [1, 3])
def test_chunked_routing_and_filling_give_the_figures_of_one_pass(monkeypatch, subflows):
    # issue 30 item 10: the classes' network paths, their loads and the solver's demands and loads are gathered a
    # chunk of classes at a time (the 100k all-to-all's peak 2.95 -> 2.0 GB); chunks of a few classes must give the
    # classes, loads and makespan of one pass
    import topo.engine.alltoall_classes as ac
    import topo.engine.maxmin as mm

    f = small_fabric("rail_optimized-3")
    r = Router(f, "hash", subflows=subflows, salt=3)
    groups = np.random.default_rng(2).permutation(f.num_gpus).reshape(2, -1)
    whole = alltoall_classes(r, AllPairs(groups, 3.0))
    cap = r.capacity_Bps * np.random.default_rng(3).uniform(0.5, 1.5, r.capacity_Bps.size)
    t_whole = max_min_makespan(whole, cap)
    solver = mm._Solver(whole.classes, cap)
    every = np.arange(solver.C)
    rate = np.random.default_rng(4).uniform(1.0, 2.0, solver.C)
    load_whole = solver.loads(every, rate)
    monkeypatch.setattr(ac, "_CHUNK_CLASSES", 7)
    monkeypatch.setattr(mm, "_CHUNK", 5)
    parts = alltoall_classes(r, AllPairs(groups, 3.0))
    assert parts.classes.num_classes > 7 * 3  # several chunks
    for k in ("ptr", "res", "a", "size_bytes", "members", "template"):
        np.testing.assert_array_equal(getattr(parts.classes, k), getattr(whole.classes, k))
    assert np.allclose(r.loads(parts), r.loads(whole), rtol=1e-12, atol=0)
    assert max_min_makespan(parts, cap) == pytest.approx(t_whole, rel=1e-12)
    np.testing.assert_allclose(solver.loads(every, rate), load_whole, rtol=1e-12, atol=0)


def _one_gpu_per_domain(f):
    """Communicators of one GPU per NVLink domain, the same local index in each (the 100k all-to-all's placement
    of issue 30 item 10: --groups 1792, one GPU per pod): every pair leaves its domain."""
    gpd = f.layout.gpus_per_domain
    return np.arange(f.num_gpus).reshape(-1, gpd).T.copy()


@pytest.mark.parametrize("name", ["rail_optimized-3", "rail_optimized-3-two-nics-per-gpu", "rail_only-3"])
def test_classes_by_class_give_each_receiving_nic_its_peers_bytes(name):
    # issue 30 item 10: the 100k all-to-all's classes come by class (ptr, no class id per incidence), with one
    # broadcast weight, and the solver fills them as they are. Closed form: each rank of a communicator of p
    # receives B bytes from each of its p - 1 peers, split over its k NICs, so each receiving NIC link carries
    # (p - 1) B / k; with every other resource far faster, max-min ends when those drain: (p - 1) (B / k) / c.
    import topo.engine.maxmin as mm

    f = small_fabric(name)
    r = Router(f, "hash", salt=7)
    groups = _one_gpu_per_domain(f)
    G, p = groups.shape
    k = max(1, f.layout.nics_per_server // f.layout.gpus_per_server)
    B = 3.0e6
    out = alltoall_classes(r, AllPairs(groups, B))
    fc = out.classes
    assert fc.cls is None and fc.ptr is not None and fc.a.strides == (0,)  # by class, one broadcast weight
    np.testing.assert_array_equal(np.diff(fc.ptr), np.bincount(fc.class_of(), minlength=fc.num_classes))
    recv = 2 * r.paths.nic_link(f.gpu_nic(np.repeat(groups.ravel(), k), np.tile(np.arange(k), groups.size))) + 1
    loads = r.loads(out)
    np.testing.assert_allclose(loads[recv], (p - 1) * B / k, rtol=1e-12)
    assert loads[recv].sum() == pytest.approx(G * p * (p - 1) * B, rel=1e-12)  # every byte once into a NIC
    c_nic = 1.0e9
    cap = np.full(r.num_res, 1.0e15)
    cap[recv] = c_nic
    assert max_min_makespan(out, cap) == pytest.approx((p - 1) * (B / k) / c_nic, rel=1e-12)
    s = mm._Solver(fc, cap)
    assert s.c_a is fc.a and s.c_ptr is fc.ptr  # filled on the router's arrays, no copy


def test_classes_whose_parts_share_a_resource_count_it_once_with_their_weight():
    # two hashed parts of a flow cross the same NIC links: by class, each resource once, weighing the parts that
    # cross it (a member's bytes over K parts, times that count): the NIC hops weigh 1, a switch cable that only
    # one part takes 1/2; float32 (exact here), and the loads and makespan of the flows routed one by one
    f = small_fabric("rail_optimized-3")
    r = Router(f, "hash", subflows=2, salt=11)
    groups = _one_gpu_per_domain(f)
    out = alltoall_classes(r, AllPairs(groups, 5.0))
    fc = out.classes
    assert fc.a.dtype == np.float32 and fc.a.strides != (0,)
    ptr, res = fc.ptr, fc.res
    for c in range(fc.num_classes):  # each resource once in its class
        assert np.unique(res[ptr[c]:ptr[c + 1]]).size == ptr[c + 1] - ptr[c]
    nic = np.zeros(r.num_res, dtype=bool)
    nic[2 * r.paths.nic_link(np.arange(f.layout.num_servers * f.layout.nics_per_server))] = True
    nic[2 * r.paths.nic_link(np.arange(f.layout.num_servers * f.layout.nics_per_server)) + 1] = True
    np.testing.assert_array_equal(fc.a[nic[res]], 1.0)  # both parts cross the NIC links
    assert set(np.unique(fc.a[~nic[res]])) <= {0.5, 1.0} and np.any(fc.a[~nic[res]] == 0.5)
    flows = r.route_transfers(_pairs(groups, 5.0))
    assert np.allclose(r.loads(out), r.loads(flows), rtol=1e-12, atol=0)
    cap = r.capacity_Bps * np.random.default_rng(5).uniform(0.5, 1.5, r.capacity_Bps.size)
    assert max_min_makespan(out, cap) == pytest.approx(max_min_makespan(flows, cap), rel=1e-9)


@pytest.mark.parametrize("name", ["rail_optimized-3", "rail_optimized-2", "rail_optimized-4"])
def test_classes_put_no_byte_on_failed_links(name):
    # issue 30: "no bytes on failed links" as an invariant, here for the max-min classes (the by-class arrays of
    # item 10): no class, template or summed load touches a failed link, and the loads still sum to every byte
    from test_alltoall_failed import _failure_sets

    base = small_fabric(name)
    checked = 0
    for fails in _failure_sets(base):
        f = base.with_failures(*fails)
        dead = np.flatnonzero(f.failed)
        dead_res = np.r_[2 * dead, 2 * dead + 1]
        r = Router(f, "hash", subflows=2, salt=3)
        for groups in (_one_gpu_per_domain(f), np.arange(f.num_gpus)[None, :]):
            try:
                out = alltoall_classes(r, AllPairs(groups, 1e6))
            except Unreachable:
                continue
            fc = out.classes
            assert not np.isin(fc.res, dead_res).any(), f"{name} {fails}: a class crosses a failed link"
            if fc.t_res is not None:
                assert not np.isin(fc.t_res, dead_res).any(), f"{name} {fails}: a template crosses a failed link"
            loads = r.loads(out)
            assert not loads[dead_res].any(), f"{name} {fails}: {loads[dead_res].sum():.3g} B on failed links"
            flows = r.route_transfers(_pairs(groups, 1e6))
            assert np.allclose(loads, r.loads(flows), rtol=1e-12, atol=0)
            checked += 1
    assert checked >= 5


def test_few_classes_on_a_large_fabric_fill_on_the_resources_they_use():
    # the solver keeps resource ids as they are when the classes have at least as many incidences as there are
    # resources (the 100k all-to-all), and compacts them to the resources used otherwise: a communicator of two
    # GPUs in two domains (a handful of incidences on hundreds of resources) must still fill as its flows do
    import topo.engine.maxmin as mm

    f = small_fabric("rail_optimized-3-os2")
    r = Router(f, "hash", subflows=2, salt=1)
    groups = np.array([[0, f.layout.gpus_per_domain * 5 + 1]])
    out = alltoall_classes(r, AllPairs(groups, 2.0e6))
    fc = out.classes
    assert fc.ptr is not None and fc.res.size < r.num_res
    assert mm._Solver(fc, r.capacity_Bps).R < r.num_res  # compacted
    flows = r.route_transfers(_pairs(groups, 2.0e6))
    cap = r.capacity_Bps * np.random.default_rng(6).uniform(0.5, 1.5, r.capacity_Bps.size)
    assert max_min_makespan(out, cap) == pytest.approx(max_min_makespan(flows, cap), rel=1e-12)
    assert max_min_makespan(out, cap) > 0
