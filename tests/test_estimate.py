"""Behaviour of the cost model on realistic fabrics: invariants (property-based), oversubscription, rails,
routing, contention and the result objects."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import spec_dict, tier
from topo import TopoError, build_fabric, load_spec, spec_from_dict
from topo.engine.estimate import estimate, size_sweep
from topo.engine.profiles import profile_for

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def small(kind="rail_optimized", leaf_os=1, units=4, nics=8, nvlink="450 GB/s", rate="400 Gb/s", ecmp_tiers=2):
    tiers = [tier("leaf", radix=32, rate=rate, oversubscription=leaf_os), tier("spine", radix=32, rate=rate)]
    d = spec_dict(kind=kind, tiers=tiers, cluster={"num_units": units},
                  server={"gpus": 8, "nics": nics, "nic_rate": rate})
    d["scale_up"] = {"bandwidth_per_gpu": nvlink}
    if kind == "fat_tree":  # 2 servers x 8 NICs fill a 32-port leaf's 16 down ports
        d["fabric"]["servers_per_unit"] = 2
        d["cluster"]["num_units"] = 2 * units
    else:
        d["fabric"]["servers_per_unit"] = 4
    return build_fabric(spec_from_dict(d))


COLLS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"]


@SETTINGS
@given(kind=st.sampled_from(["fat_tree", "rail_optimized", "rail_only"]), coll=st.sampled_from(COLLS),
       gpus=st.sampled_from([2, 8, 16, 64, 128]), ecmp=st.sampled_from(["ideal", "hash"]))
def test_time_grows_with_size(kind, coll, gpus, ecmp):
    f = small(kind)
    r = estimate(f, coll, size_sweep(8, "4G", 4), gpus=gpus, ecmp=ecmp)
    times = [x.time_s for x in r.results]
    assert all(b >= a for a, b in zip(times, times[1:]))
    assert all(x.algbw_GBps > 0 for x in r.results)


@SETTINGS
@given(gpus=st.sampled_from([8, 16, 32, 128]), kind=st.sampled_from(["fat_tree", "rail_optimized"]))
def test_ring_busbw_never_exceeds_the_links(gpus, kind):
    f = small(kind)
    prof = profile_for("hopper", "infiniband_ndr")
    r = estimate(f, "all_reduce", "16G", gpus=gpus, algorithm="ring")
    busbw = r.results[0].busbw_GBps * 1e9
    nvlink = 450e9 * prof.nvlink_efficiency
    if gpus <= 8:  # one NVLink domain: a ring's busbw is at most the usable NVLink bandwidth per GPU
        assert busbw <= nvlink * (1 + 1e-9)
    else:  # a server can push no more than its NICs' usable bandwidth into the network
        assert busbw <= 8 * 50e9 * prof.network_efficiency * (1 + 1e-9)


@SETTINGS
@given(coll=st.sampled_from(["all_reduce", "all_gather", "alltoall"]), ecmp=st.sampled_from(["ideal", "hash"]),
       os_pair=st.sampled_from([(1, 3), (1, 7), (3, 7)]))
def test_more_oversubscription_never_faster(coll, ecmp, os_pair):
    lo, hi = os_pair

    def fab(k):
        # fat tree: 2 servers x 8 NICs = 16 ports down per leaf; 16, 5 or 2 ports up
        d = spec_dict(kind="fat_tree", tiers=[tier("leaf", radix=32, up_ports={1: 16, 3: 5, 7: 2}[k]),
                                              tier("spine", radix=64)],
                      cluster={"num_units": 8}, server={"gpus": 8, "nics": 8})
        d["fabric"]["servers_per_unit"] = 2
        return build_fabric(spec_from_dict(d))

    a = estimate(fab(lo), coll, ["1M", "1G"], gpus=128, ecmp=ecmp).results
    b = estimate(fab(hi), coll, ["1M", "1G"], gpus=128, ecmp=ecmp).results
    for x, y in zip(a, b):
        assert y.time_s >= x.time_s * (1 - 1e-12)


@SETTINGS
@given(coll=st.sampled_from(COLLS), change=st.sampled_from(["nvlink", "pcie", "rate"]))
def test_removing_capacity_never_faster(coll, change):
    full = small()
    if change == "nvlink":
        cut = small(nvlink="200 GB/s")
    elif change == "rate":
        cut = small(rate="200 Gb/s")
    else:
        d = spec_dict(kind="rail_optimized", tiers=[tier("leaf", radix=32, oversubscription=1),
                                                    tier("spine", radix=32)],
                      cluster={"num_units": 4}, server={"gpus": 8, "nics": 8, "pcie_bandwidth": "20 GB/s"})
        d["fabric"]["servers_per_unit"] = 4
        cut = build_fabric(spec_from_dict(d))
    for gpus in (8, 32):
        a = estimate(full, coll, ["64K", "1G"], gpus=gpus).results
        b = estimate(cut, coll, ["64K", "1G"], gpus=gpus).results
        for x, y in zip(a, b):
            assert y.time_s >= x.time_s * (1 - 1e-12)


def spine_bytes(result, size):
    frame = result.link_loads(size)
    return frame.loc[frame["level"].astype(str).str.contains("spine"), "bytes"].sum()


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "alltoall", "broadcast", "sendrecv"])
def test_one_rail_of_one_unit_never_loads_a_spine(coll):
    f = build_fabric(load_spec("dgx-h100-superpod"))
    # GPU 3 of each of the 32 servers of scalable unit 0: all on the leaf of rail 3
    r = estimate(f, coll, "1G", gpus=32, placement="one_per_server", rail=3)
    assert spine_bytes(r, 2**30) == 0
    # and a whole scalable unit, all rails: rings, trees and PXN keep every network hop on its rail's leaf
    r = estimate(f, coll, "1G", gpus=256)
    assert spine_bytes(r, 2**30) == 0
    # across scalable units the spines carry traffic
    r = estimate(f, coll, "1G", gpus=512)
    assert spine_bytes(r, 2**30) > 0


def pods_fabric(spine_up):
    """Two pods of 14 racks (2 servers = 16 GPUs each), full bisection inside the pod; spine_up uplinks per spine
    of 14 downlinks: 14 = 1:1, 2 = 7:1 between the pods."""
    d = spec_dict(kind="fat_tree", cluster={"num_pods": 2}, server={"gpus": 8, "nics": 8},
                  tiers=[tier("leaf", radix=32, oversubscription=1),
                         tier("spine", radix=64, down_ports=14, up_ports=spine_up),
                         tier("core", radix=64)])
    d["fabric"].update(servers_per_unit=2, units_per_pod=14)
    return build_fabric(spec_from_dict(d))


@pytest.mark.parametrize("algo", ["ring", "tree", "auto"])
def test_seven_to_one_slows_cross_pod_data_parallel_all_reduce_sevenfold(algo):
    # Data parallelism across 2 pods: every GPU all-reduces its gradients with its peer in the other pod, all at
    # once. All that traffic crosses the spine-core tier, which carries 1/7 of what the pod injects, so the
    # bandwidth part takes exactly 7 times as long, and the spine-core tier is the bottleneck.
    fast, slow = pods_fabric(14), pods_fabric(2)
    assert fast.layout.tiers[1].oversubscription == 1 and slow.layout.tiers[1].oversubscription == 7
    n = 224  # GPUs per pod
    a = estimate(fast, "all_reduce", "1G", gpus=2 * n, groups=n, algorithm=algo).results[0]
    b = estimate(slow, "all_reduce", "1G", gpus=2 * n, groups=n, algorithm=algo).results[0]
    assert b.bandwidth_s / a.bandwidth_s == pytest.approx(7.0, rel=1e-9)
    assert b.bottleneck.level == "spine-core" and a.bottleneck.level != "spine-core"
    # busy for the bandwidth part at the usable fraction (0.94 for InfiniBand; trees run at 0.92 of that)
    assert b.bottleneck.utilization == pytest.approx(0.94 * (1 if b.algorithm == "ring" else 0.92), rel=0.05)


def test_default_cluster_cross_pod_bottleneck_is_the_core():
    f = build_fabric(load_spec())
    pod = 1792
    r = estimate(f, "all_reduce", "1G", gpus=2 * pod, groups=pod, algorithm="ring")
    assert r.results[0].bottleneck.level == "spine-core"
    # inside one pod the same job never touches the cores
    r = estimate(f, "all_reduce", "1G", gpus=pod, groups=pod // 2, algorithm="ring")
    assert r.results[0].bottleneck.level != "spine-core"


def test_hashed_ecmp_collides_ideal_does_not():
    f = build_fabric(load_spec("dgx-h100-superpod"))
    # one GPU per server across all 4 SUs on rail 0: ring hops between SUs cross the spines
    ideal = estimate(f, "alltoall", "1G", gpus=128, placement="one_per_server", ecmp="ideal").results[0]
    hashed = estimate(f, "alltoall", "1G", gpus=128, placement="one_per_server", ecmp="hash").results[0]
    assert hashed.time_s >= ideal.time_s
    many = estimate(f, "alltoall", "1G", gpus=128, placement="one_per_server", ecmp="hash", subflows=16).results[0]
    assert ideal.time_s <= many.time_s <= hashed.time_s * (1 + 1e-12)


def test_maxmin_is_never_below_equal_share():
    f = build_fabric(load_spec("dgx-h100-superpod"))
    for coll in ("alltoall", "all_reduce", "sendrecv"):
        eq = estimate(f, coll, "1G", gpus=64, ecmp="hash", algorithm="auto").results[0]
        mm = estimate(f, coll, "1G", gpus=64, ecmp="hash", sharing="maxmin", algorithm=eq.algorithm).results[0]
        assert mm.time_s >= eq.time_s * (1 - 1e-9)


def test_maxmin_equals_equal_share_for_alike_flows():
    # GPUs 0 and 1 send to GPUs 8 and 9 on the next server, each over its own rail: alike, independent flows.
    f = build_fabric(load_spec("dgx-h100-superpod"))
    eq = estimate(f, "pipeline", "1G", ranks=[0, 1, 8, 9], algorithm="direct").results[0]
    mm = estimate(f, "pipeline", "1G", ranks=[0, 1, 8, 9], algorithm="direct", sharing="maxmin").results[0]
    assert mm.time_s == pytest.approx(eq.time_s, rel=1e-9)


def test_auto_picks_like_nccl():
    f = build_fabric(load_spec("dgx-h100-superpod"))
    one = estimate(f, "all_reduce", ["8", "1G"], gpus=8).results
    # inside one H100 domain: a latency-bound size picks a ring/tree with LL, a large one NVLS
    assert one[0].protocol == "LL" and one[1].algorithm == "nvls"
    two = estimate(f, "all_reduce", ["8", "1G"], gpus=16).results
    assert two[0].algorithm == "tree" and two[1].algorithm in ("nvls_tree", "tree", "ring")


def test_result_objects():
    f = build_fabric(load_spec("dgx-h100-superpod"))
    r = estimate(f, "all_reduce", size_sweep(8, "1G", 8), gpus=32)
    d = r.to_dict()
    assert {"collective", "num_ranks", "algorithm", "results"} <= set(d)
    assert {"size_bytes", "time_s", "algbw_Bps", "busbw_Bps", "algorithm", "bottleneck"} <= set(d["results"][0])
    frame = r.to_frame()
    assert list(frame["size_bytes"]) == [x.size_bytes for x in r.results]
    for x in r.results:  # nccl-tests' conventions
        assert x.algbw_GBps == pytest.approx(x.size_bytes / x.time_s / 1e9)
        assert x.busbw_GBps == pytest.approx(x.algbw_GBps * 2 * 31 / 32)
        assert x.time_s == pytest.approx(x.latency_s + x.bandwidth_s)
    loads = r.link_loads()
    assert set(loads["level"].astype(str)) >= {"nvlink", "nic-leaf", "leaf-spine"}
    assert (loads["utilization"] <= 1 + 1e-9).all()
    cand = r.candidates_frame()
    assert "ring" in cand and "tree" in cand
    assert len(r.steps_frame()) >= 1


@pytest.mark.parametrize("kwargs, key, fragment", [
    (dict(collective="allreduce2"), "collective", "unknown collective 'allreduce2'; allowed: all_reduce"),
    (dict(algorithm="bogus"), "algorithm", "unknown algorithm 'bogus' for all_reduce; allowed: auto, ring"),
    (dict(algorithm="nvls", gpus=16), "algorithm", "nvls cannot run here"),
    (dict(algorithm="tree", gpus=1), "gpus", "all_reduce needs at least 2 ranks, got 1"),
    (dict(gpus=2048), "gpus", "2,048 GPUs asked, but the fabric has 1,024"),
    (dict(sizes="-1"), "sizes", "a size must be a positive number of bytes, got '-1' (the sign is wrong)"),
    (dict(sizes="12 apples"), "sizes", "expected a size"),
    (dict(ranks=[0, 4096]), "ranks", "GPU id 4096 does not exist; this fabric has GPUs 0 to 1023"),
    (dict(ranks=[3, 3]), "ranks", "GPU 3 is listed twice"),
    (dict(algorithm="halving_doubling", gpus=24), "algorithm", "power-of-two number of ranks, got 24"),
    (dict(groups=3, gpus=16), "groups", "16 GPUs do not split into 3 equal groups"),
    (dict(ecmp="random"), "ecmp", "unknown ECMP mode 'random'"),
])
def test_bad_requests(kwargs, key, fragment):
    f = build_fabric(load_spec("dgx-h100-superpod"))
    args = {"collective": "all_reduce", "sizes": "1M", **kwargs}
    with pytest.raises(TopoError) as info:
        estimate(f, args.pop("collective"), args.pop("sizes"), **args)
    assert info.value.key == key
    assert fragment in info.value.message


def test_nvls_needs_hopper():
    f = build_fabric(load_spec("dgx-h100-superpod", ["gpu=A100"]))
    with pytest.raises(TopoError, match="A100 NVSwitches cannot reduce in the switch"):
        estimate(f, "all_reduce", "1M", gpus=8, algorithm="nvls")
    assert estimate(f, "all_reduce", "1G", gpus=8).results[0].algorithm != "nvls"


def test_rail_only_needs_pxn_for_cross_rail_traffic():
    f = build_fabric(load_spec("rail-only-h100-16k"))
    r = estimate(f, "alltoall", "1G", gpus=64)  # PXN: cross-rail traffic hops over NVLink first
    assert r.results[0].time_s > 0
    with pytest.raises(TopoError, match="different rails"):
        estimate(f, "alltoall", "1G", gpus=64, pxn=False)


def test_given_rank_order_changes_the_ring():
    f = build_fabric(load_spec("dgx-h100-superpod"))
    ranks = [0, 8, 1, 9, 2, 10, 3, 11]  # alternate between two servers
    nccl = estimate(f, "all_reduce", "1G", ranks=ranks, algorithm="ring").results[0]
    given = estimate(f, "all_reduce", "1G", ranks=ranks, algorithm="ring", rank_order="given").results[0]
    # NCCL's order crosses the network twice per ring; the given order at every hop
    assert given.time_s > nccl.time_s
    assert given.bottleneck.level in ("nic-leaf", "pcie")


def test_large_all_to_all_is_routed_in_chunks_with_the_same_loads(monkeypatch):
    # Above a million flows only the summed loads are kept; they must equal the flow-by-flow result.
    import topo.engine.allpairs as p2p  # all-to-all flows are kept one by one up to EXPLICIT_FLOWS

    f = build_fabric(load_spec("dgx-h100-superpod"))
    one = estimate(f, "alltoall", "1G", gpus=256).results[0]
    old = p2p.EXPLICIT_FLOWS
    p2p.EXPLICIT_FLOWS = 1000
    try:
        chunked = estimate(f, "alltoall", "1G", gpus=256).results[0]
        # max-min merges the flows of a server that PXN sends through one NIC (topo/alltoall_classes.py) ...
        merged = estimate(f, "alltoall", "1G", gpus=256, sharing="maxmin").results[0]
        # ... and without PXN there is nothing to merge: every flow is needed, and there are too many
        with pytest.raises(TopoError, match="max-min sharing needs every flow"):
            estimate(f, "alltoall", "1G", gpus=256, sharing="maxmin", pxn=False)
    finally:
        p2p.EXPLICIT_FLOWS = old
    assert chunked.time_s == pytest.approx(one.time_s, rel=1e-12)
    assert chunked.bottleneck == one.bottleneck
    import topo.engine.alltoall_classes

    monkeypatch.setattr(topo.engine.alltoall_classes, "classes_apply", lambda router: False)  # flow by flow (65,280)
    by_flow = estimate(f, "alltoall", "1G", gpus=256, sharing="maxmin").results[0]
    assert merged.time_s == pytest.approx(by_flow.time_s, rel=1e-9)
    assert merged.time_s >= one.time_s * (1 - 1e-12)  # never faster than the bottleneck bound


def test_sharp_sends_one_stream_per_leaf_and_beats_the_ring_across_units():
    f = build_fabric(load_spec("dgx-h100-superpod", ["fabric.tiers[0].sharp=true", "fabric.tiers[1].sharp=true"]))
    S = 2**30
    r = estimate(f, "all_reduce", S, gpus=512, algorithm="sharp")  # 2 scalable units: leaves and spines
    loads = r.link_loads(S)
    up = loads[(loads["level"].astype(str) == "leaf-spine") & (loads["direction"] == "up")]
    busy = up[up["bytes"] > 0]
    # each of the 16 leaves (2 SUs x 8 rails) sends one reduced stream of S/8 (each GPU's share) to its tree's spine
    assert len(busy) == 16
    assert np.allclose(busy["bytes"], S / 8)
    nic_up = loads[(loads["level"].astype(str) == "nic-leaf") & (loads["direction"] == "up")]
    used = nic_up[nic_up["bytes"] > 0]
    assert len(used) == 512 and np.allclose(used["bytes"], S / 8)  # a NIC carries its GPU's share once each way
    ring = estimate(f, "all_reduce", "16G", gpus=512, algorithm="ring").results[0]
    sharp = estimate(f, "all_reduce", "16G", gpus=512, algorithm="sharp").results[0]
    assert sharp.time_s < ring.time_s
    with pytest.raises(TopoError, match="cannot reduce in the network"):
        estimate(build_fabric(load_spec("dgx-h100-superpod")), "all_reduce", S, gpus=512, algorithm="sharp")


def test_link_loads_name_nodes_as_every_other_output():
    f = build_fabric(load_spec("dgx-h100-superpod"))
    r = estimate(f, "all_reduce", "1G", gpus=64)
    frame = r.link_loads()
    assert frame["src"].iat[0] == "gpu0" and frame["dst"].iat[0] == "nvswitch0"
    assert list(frame["src"].astype(str)) == f.node_names(frame["src_id"].to_numpy())
    assert list(frame["dst"].astype(str)) == f.node_names(frame["dst_id"].to_numpy())
    top = r.top_links(1)
    b = r.results[0].bottleneck
    assert (top["src"].iat[0], top["level"].iat[0]) == (b.src, b.level)


@pytest.mark.parametrize("factor", [math.inf, math.nan, 1.0, True])
def test_size_sweep_refuses_a_factor_that_is_not_a_finite_number_above_1(factor):
    # tidy11: an infinite factor stepped past every size after the first: one size, silently
    with pytest.raises(TopoError) as e:
        size_sweep(8, "1G", factor)
    assert e.value.key == "factor" and "finite number > 1" in e.value.message
