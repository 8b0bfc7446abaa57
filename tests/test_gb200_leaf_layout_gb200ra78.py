"""gb200ra78: the bundled GB200 NVL72 spec puts one leaf per rail per rack (18 of a QM9700's 64 ports: 18 down, 18
up), an assumption; NVIDIA's DGX SuperPOD GB200 RA (network-fabrics.html) provisions "the full SU, including leaf
switches and leaf-spine cables", and its GB300 sister RA (dgx-spod-gb300-ra.pdf, as quoted in a public write-up)
wires a leaf across 4 racks of a rail (8 leaves on 4 rails per 8-rack SU, every port of a 144-port Q3400 used). The
GB200 RA's own leaf/spine counts per SU could not be read, so the default stays; the spec documents the rack-crossing,
every-port layout as ``--set fabric.servers_per_unit=32``. These tests pin that alternative's closed forms and the
tier it saves at the scale walk34 compared (findings 355 Left 3, 361)."""

from topo.fabric.builders import build_fabric
from topo.fabric.inventory import inventory
from topo.spec import load_spec


def _gb200(num_gpus: int, **fabric):
    spec = load_spec("gb200-nvl72-superpod")
    return spec.model_copy(update={
        "cluster": spec.cluster.model_copy(update={"num_units": None, "num_gpus": num_gpus}),
        "fabric": spec.fabric.model_copy(update=fabric)})


def test_a_leaf_of_32_trays_uses_every_port_and_holds_46080_gpus_in_three_tiers():
    # 46,080 GPUs = 640 racks = 11,520 trays; 4 rails of 400G NICs, one per GPU: 46,080 NIC ports. A non-blocking
    # 64-port leaf takes 32 down + 32 up, so 46,080 / 32 = 1,440 leaves with no idle port; spines as many (32 down
    # from 32 leaves of a pod of 8 groups x 4 rails = 1,024 GPUs, 32 up); 45 pods x 32 spines x 32 up = 46,080 links
    # to 46,080 / 45 = 1,024 cores. A 3-tier fat tree of 64-port switches holds 64^3 / 4 = 65,536 ports
    # (SemiAnalysis' rule, planner.md), so 3 tiers.
    inv = inventory(build_fabric(_gb200(46_080, servers_per_unit=32)))
    assert [t.num_switches for t in inv.tiers] == [46_080 // 32, 46_080 // 32, 46_080 // 45]
    assert [t.ports_idle for t in inv.tiers[:2]] == [0, 0]


def test_one_leaf_per_rail_per_rack_needs_a_fourth_tier_at_the_same_size():
    # 18 trays per leaf per rail: 46,080 / 18 = 2,560 leaves, 18 down + 18 up of 64 ports used, 28 idle each
    # (71,680 idle); 64-port spines then join 64 / 2 = 32 leaves = 8 racks (a pod of 576 GPUs), and 80 pods need more
    # than the 32 a 64-port core tier joins: a fourth tier.
    inv = inventory(build_fabric(_gb200(46_080)))
    assert len(inv.tiers) == 4
    assert inv.tiers[0].num_switches == 46_080 // 18 and inv.tiers[0].ports_idle == 2_560 * (64 - 36)
