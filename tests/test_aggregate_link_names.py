"""The busiest link of an all-to-all across pods is a real cable (walk18, findings 193): it printed as
``spines_of_group_0->cores``, an ECMP aggregate no ``--fail`` or ``describe`` knows. Under ideal ECMP an aggregate's
working cables carry equal shares (topo.engine.ecmp.spread_over_cables), so its first working cable is as loaded as
any and stands for it."""

from conftest import run_cli
from topo import build_fabric, load_spec
from topo.engine.estimate import estimate
from topo.fabric.failures import node_id

# h100-100k's parts (QM9700, rail-optimized) at 2,048 GPUs: 2 pods of 4 scalable units, spine 2:1 above the pod
OVERRIDES = ["cluster.num_pods=", "cluster.num_gpus=2048", "fabric.units_per_pod=4",
             "fabric.tiers[spine].oversubscription=2"]


def _busiest(fabric):
    return estimate(fabric, "alltoall", [2**30], gpus=2048).results[0].bottleneck


def test_the_busiest_link_of_a_cross_pod_alltoall_is_a_cable_fail_can_name():
    fabric = build_fabric(load_spec("h100-100k", OVERRIDES))
    b = _busiest(fabric)
    assert b.level == "spine-core"
    node_id(fabric, b.src), node_id(fabric, b.dst)  # real node names, or TopoError
    assert (b.src, b.dst) in {("spine0", "core0"), ("core0", "spine0")}
    # 32 spines of pod 0 x 16 uplinks each = 512 cables
    assert b.num_links == 512
    assert "stands for the 512 spine-core cables of the spines of pod 0 (spine0 to spine31)" in b.aggregate
    failed = fabric.with_failures(f"{b.src}-{b.dst}")
    b2 = _busiest(failed)
    assert b2.src != b.src or b2.dst != b.dst  # the named cable is down: another working one stands for it
    # spine0-core0 is 16 cables: plane 0 has 2 spines x 16 uplinks = 32 ports, one core of 64 takes them all
    assert "(496 working)" in b2.aggregate


def test_estimate_prints_the_cable_and_what_it_stands_for(tmp_path):
    args = [a for o in OVERRIDES for a in ("--set", o)]
    out = run_cli("estimate", "h100-100k", *args, "-c", "alltoall", "-b", "1G", "-e", "1G", cwd=tmp_path).stdout
    assert "spine0->core0(spine-core)" in out and "of_group" not in out
    assert "spine0-core0 stands for the 512 spine-core cables of the spines of pod 0" in out
