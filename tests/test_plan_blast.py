"""Blast radius, read from the fabric's links: what one NIC, leaf, spine or core switch takes out."""

import pytest

import topo
from topo.plan.blast import blast_radius, collective_times_with_failures
from conftest import spec_dict, tier


def _by_part(fabric):
    return {b.part: b for b in blast_radius(fabric)}


def test_rail_optimized_default():
    f = topo.build_fabric(topo.load_spec())
    b = _by_part(f)
    L = f.layout
    # a NIC: its one GPU (8 NICs for 8 GPUs); the job loses the server
    assert (b["nic"].gpus_disconnected, b["nic"].gpus_in_affected_servers) == (1, 8)
    # a rail leaf: one GPU from each of the unit's 32 servers, so all 32 servers (256 GPUs) lose a rail
    assert b["leaf"].gpus_disconnected == L.servers_per_unit == 32
    assert (b["leaf"].servers_affected, b["leaf"].gpus_in_affected_servers) == (32, 256)
    # a spine: nobody cut off; 1 of the pod's 32 spines: 1/32 of the pod's leaf uplinks; below it the pod
    assert b["spine"].gpus_disconnected == 0 and b["spine"].gpus_below == 1792
    assert b["spine"].capacity_lost_fraction == 1 / L.tiers[1].switches_per_group == 1 / 32
    # a core: one of 256, each spine sends 8 cables up, one to each core of its plane
    assert b["core"].capacity_lost_fraction == 1 / 256 and b["core"].gpus_below == f.num_gpus


def test_fat_tree_leaf_takes_out_its_whole_unit():
    d = spec_dict(kind="fat_tree", tiers=[tier("leaf", radix=64, down_ports=32, up_ports=32), tier("spine")],
                  cluster={"num_units": 4}, fabric={"servers_per_unit": 4})
    b = _by_part(topo.build_fabric(topo.spec_from_dict(d)))
    assert b["leaf"].gpus_disconnected == 32 and b["leaf"].servers_affected == 4
    assert b["leaf"].capacity_lost_fraction == 1.0


def test_collective_times_with_one_part_failed():
    # The default: the cross-pod all-reduce is bound by the spine-core uplinks of each pod (7:1). A failed spine
    # takes 1 of the 32 spines' uplinks of pod 0 away: that pod's aggregate has 31/32 of its capacity, so the
    # bandwidth part grows by 32/31 (the latency part, about 0.1% of the time here, stays).
    f = topo.build_fabric(topo.load_spec("h100-100k"))
    by = {x.part: x for x in collective_times_with_failures(f)}
    assert by["spine"].slowdown == pytest.approx(32 / 31, rel=2e-3)
    assert by["spine"].bottleneck.endswith("(spine-core)")
    # one NIC or one leaf (one rail of one unit) does not slow the spine-bound job: its traffic moves to the
    # server's next NIC, which has room
    assert by["nic"].slowdown == pytest.approx(1.0) and by["leaf"].slowdown == pytest.approx(1.0)
    # a one-pod, NIC-bound cluster: a failed leaf moves rail 0 of unit 0 onto rail 1's NICs, which then carry
    # two channels each
    small = {x.part: x for x in collective_times_with_failures(topo.build_fabric(topo.load_spec("dgx-h100-superpod")))}
    assert small["leaf"].slowdown > 1.5 and small["leaf"].bottleneck.startswith("nic")
    assert small["spine"].slowdown == pytest.approx(1.0)
    r = __import__("topo.plan", fromlist=["plan"]).plan(f, collectives=False)
    assert r.failure_impact == []


def test_the_plan_says_what_the_failed_part_collective_runs_over():
    # walk6: `topo plan dgx-h100-superpod` (one pod) said "a 1 GiB all_reduce over two pods (one GPU of each)"
    # where the collective runs over every GPU of the cluster in one communicator
    from conftest import run_cli

    one = collective_times_with_failures(topo.build_fabric(topo.load_spec("dgx-h100-superpod")))
    assert {x.over for x in one} == {"every GPU (1,024: the cluster is one pod)"}
    two = collective_times_with_failures(topo.build_fabric(topo.load_spec("meta-llama3-24k")))
    assert {x.over for x in two} == {"two pods (one GPU of each)"}
    text = run_cli("plan", "dgx-h100-superpod", check=True).stdout
    assert "with one part failed, a 1 GiB all_reduce over every GPU (1,024: the cluster is one pod): " in text
    assert "two pods" not in text

def test_a_part_that_cuts_gpus_off_stops_the_collective_instead_of_failing_the_plan():
    # Review finding: `topo plan meta-llama3-24k` failed with "error: --fail: GPU 0 is cut off: every NIC of server 0
    # failed (failures: rtsw0)" (no --fail given): with one leaf per rack, the failed-leaf figure has no all-reduce.
    # fat_tree-2 has one leaf per unit of 2 servers and a single spine: the leaf and the spine each cut GPUs off.
    import math
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from small_fabrics import small_fabric

    impact = {x.part: x for x in collective_times_with_failures(small_fabric("fat_tree-2"))}
    assert impact["nic"].stops is None and math.isfinite(impact["nic"].slowdown)
    for part in ("leaf", "spine"):
        x = impact[part]
        assert math.isinf(x.all_reduce_s) and math.isinf(x.slowdown) and x.bottleneck is None
        assert "cut off" in x.stops or "cannot reach" in x.stops


def test_the_router_raises_unreachable_when_a_flow_has_no_path():
    # Issue 19: code tells "no path" apart by type (topo.errors.Unreachable), never by key or text. Three ways a
    # healthy fabric has no path: a rail-only fabric between rails without PXN; one tier between two leaves; and
    # (failures) every NIC of a server gone. blast.py catches only Unreachable, so the plan's failed-part figure
    # says "stops" for these and nothing else.
    import numpy as np

    from small_fabrics import small_fabric
    from topo.engine.route import Router
    from topo.errors import Unreachable

    f = small_fabric("rail_only-2")  # 4 GPUs and 4 rails per server
    with pytest.raises(Unreachable, match="different rails"):
        Router(f, pxn=False).route(np.array([0]), np.array([5]), 1.0)  # GPU 0 (rail 0) -> server 1's rail 1
    # one tier of rail leaves (one leaf per rail): GPU 0 (rail 0) -> GPU 5 (server 1, rail 1) without PXN
    one = topo.build_fabric(topo.spec_from_dict(spec_dict(kind="rail_optimized", tiers=[tier("leaf", radix=8)],
                                                          server={"gpus": 4, "nics": 4}, scale_up={"gpus_per_domain": 4},
                                                          cluster={"num_units": 1},
                                                          fabric={"servers_per_unit": 2})))
    with pytest.raises(Unreachable, match="no spine"):
        Router(one, pxn=False).route(np.array([0]), np.array([5]), 1.0)
    with pytest.raises(Unreachable, match="no NIC of server 0 reaches a switch"):
        failed = f.with_failures(*[f"nic0.{k}" for k in range(4)])
        Router(failed).route(np.array([0]), np.array([5]), 1.0)
    # the all-to-all loaded from counts (topo.engine.alltoall) says the same, by the same type
    from topo.engine.estimate import estimate

    with pytest.raises(Unreachable, match="different rails"):
        estimate(f, "alltoall", "1M", pxn=False)
