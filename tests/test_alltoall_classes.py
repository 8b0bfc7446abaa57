"""A uniform all-to-all as max-min classes (topo/alltoall_classes.py) against the same traffic routed pair by
pair: the same loads on every resource and the same max-min makespan, wherever both can run."""

import numpy as np
import pytest

from small_fabrics import SPECS, small_fabric
from topo.alltoall_classes import alltoall_classes, classes_apply
from topo.contention import flow_classes, max_min_makespan
from topo.route import Router
from topo.schedule import AllPairs, Transfers

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
    kept = r.route_all_pairs(a, keep_flows=True)
    assert kept.classes is not None and kept.classes.template is not None
    assert flow_classes(kept) is kept.classes
    # no PXN: every GPU sends through its own NIC, nothing to merge; a failure: stand-in NICs per GPU
    assert not classes_apply(Router(f, "hash", pxn=False))
    assert not classes_apply(Router(f.with_failures("spine0"), "hash"))
    assert Router(f, "hash", pxn=False).route_all_pairs(a, keep_flows=True).classes is None


def test_when_merged_flows_would_move_apart_estimate_fills_them_one_by_one():
    """NVLink slower than the NIC: the GPUs of a server that PXN sends through one NIC are held back by their
    own NVLink hops, each differently, so their class cannot answer (maxmin raises ClassesDiverge); estimate then
    routes the all-to-all pair by pair and gets the flow-by-flow answer."""
    from conftest import spec_dict, tier
    from topo import build_fabric, spec_from_dict
    from topo.errors import TopoError
    from topo.estimate import estimate
    from topo.maxmin import ClassesDiverge, max_min_makespan_classes

    d = spec_dict(kind="rail_optimized", tiers=[tier("leaf", radix=16), tier("spine", radix=16)],
                  cluster={"num_units": 2}, server={"gpus": 4, "nics": 4, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": 4, "bandwidth_per_gpu": "5 GB/s"})
    f = build_fabric(spec_from_dict(d))
    r = Router(f, "hash")
    a = AllPairs(np.arange(f.num_gpus)[None, :], 1.0)
    with pytest.raises(ClassesDiverge):
        max_min_makespan_classes(alltoall_classes(r, a).classes, r.capacity_Bps)
    got = estimate(f, "alltoall", "64MiB", ecmp="hash", sharing="maxmin").results[0].time_s
    import topo.alltoall_classes as ac
    old = ac.classes_apply
    ac.classes_apply = lambda router: False
    try:
        by_flow = estimate(f, "alltoall", "64MiB", ecmp="hash", sharing="maxmin").results[0].time_s
    finally:
        ac.classes_apply = old
    assert got == pytest.approx(by_flow, rel=1e-12)
    assert issubclass(ClassesDiverge, TopoError)
