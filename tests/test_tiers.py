"""Fabrics of any depth: closed forms at 4 and 5 tiers, the islands design against its published figures, hashed
ECMP's independent up and down cables, and bad input at any tier (one line, exit 2).

The small 4- and 5-tier fabrics of tests/small_fabrics.py also run every oracle test of test_route.py,
test_alltoall.py, test_alltoall_classes.py and test_bisection.py (routing against networkx, all-to-all counts against
per-pair routing, max-flow bisection against the closed form and networkx)."""

import json

import numpy as np
import pytest

from conftest import run_cli, spec_dict, tier
from small_fabrics import small_fabric
from topo import build_fabric, estimate, inventory, load_spec, spec_from_dict
from topo.engine.route import Router
from topo.errors import TopoError
from topo.fabric.bisection import bisection
from topo.fabric.levels import Level, PathSlots

NIC_Bps = 50e9  # 400 Gb/s


def full_fat_tree(num_tiers: int, k: int = 8, os_tier=None, os=1):
    """A fat tree of ``k``-port switches, every port used: 2 (k/2)^T hosts of one GPU and one NIC each; tiers
    1 .. T-2 join k/2 blocks, the top joins k."""
    tiers = []
    for i in range(num_tiers):
        t = tier(("leaf", "spine", "core", "super", "hyper")[i], radix=k)
        if i < num_tiers - 1:
            t["oversubscription"] = os if i == os_tier else 1
        if 0 < i < num_tiers - 1:
            t["joins"] = k // 2
        tiers.append(t)
    hosts = 2 * (k // 2) ** num_tiers
    d = spec_dict(kind="fat_tree", tiers=tiers, cluster={"num_gpus": hosts},
                  server={"gpus": 1, "nics": 1, "nic_rate": "400 Gb/s"}, scale_up={"gpus_per_domain": 1})
    d["fabric"]["servers_per_unit"] = k // 2
    return build_fabric(spec_from_dict(d))


@pytest.mark.parametrize("num_tiers", [4, 5])
def test_a_full_fat_tree_of_any_depth_has_the_closed_form_counts_capacity_and_bisection(num_tiers):
    # k-ary fat tree (Leiserson 1985; Al-Fares et al. 2008 for 3 tiers): 2 (k/2)^T hosts, 2 (k/2)^T / (k/2) switches
    # in every tier below the top and half as many at the top, one cable per host at every level, non-blocking:
    # bisection = hosts x rate / 2
    k = 8
    f = full_fat_tree(num_tiers, k)
    hosts = 2 * (k // 2) ** num_tiers
    inv = inventory(f)
    assert inv.num_gpus == hosts
    assert [t.num_switches for t in inv.tiers] == [hosts // (k // 2)] * (num_tiers - 1) + [hosts // k]
    assert all(t.ports_idle == 0 for t in inv.tiers)
    assert [x.num_links for x in inv.links[2:]] == [hosts] * num_tiers
    for t in inv.tiers:
        assert t.down_capacity_Bps == pytest.approx(hosts * NIC_Bps, rel=1e-12)
    assert [t.oversubscription for t in inv.tiers] == [1.0] * (num_tiers - 1) + [None]
    assert inv.bisection_bandwidth_Bps == pytest.approx(hosts * NIC_Bps / 2, rel=1e-12)
    assert bisection(f).bandwidth_Bps == pytest.approx(hosts * NIC_Bps / 2, rel=1e-12)
    assert inv.largest_nonblocking_gpus == hosts
    # the levels are named by Level, one per boundary
    assert f.levels == Level.all(num_tiers) and len(f.levels) == 3 + num_tiers - 1
    assert f.level_names[-1] == f"{inv.tiers[-2].name}-{inv.tiers[-1].name}"


@pytest.mark.parametrize("num_tiers, os_tier", [(4, 2), (5, 3), (5, 1)])
def test_oversubscription_at_any_tier_has_its_closed_form(num_tiers, os_tier):
    # a tier oversubscribed 2:1 (8-port switch: 4 down... the builder keeps whole ports: 12-port switches, 8 down
    # and 4 up) carries half of what enters it upwards, and the bisection is half the NICs' over 2
    k, os = 12, 2
    tiers = []
    for i in range(num_tiers):
        t = tier(("leaf", "spine", "core", "super", "hyper")[i], radix=k)
        if i < num_tiers - 1:
            t["oversubscription"] = os if i == os_tier else 1
        if 0 < i < num_tiers - 1:
            t["joins"] = 2
        tiers.append(t)
    d = spec_dict(kind="fat_tree", tiers=tiers, cluster={"num_units": 2 ** (num_tiers - 1)},
                  server={"gpus": 2, "nics": 2, "nic_rate": "400 Gb/s"}, scale_up={"gpus_per_domain": 2})
    d["fabric"]["servers_per_unit"] = 2
    f = build_fabric(spec_from_dict(d))
    inv = inventory(f)
    nics = inv.num_nics * NIC_Bps
    t = inv.tiers[os_tier]
    assert t.oversubscription == pytest.approx(os, rel=1e-12)
    assert t.up_capacity_Bps == pytest.approx(t.down_capacity_Bps / os, rel=1e-12)
    assert t.down_capacity_Bps == pytest.approx(nics, rel=1e-12)  # everything below is non-blocking
    assert inv.bisection_bandwidth_Bps == pytest.approx(nics / os / 2, rel=1e-12)
    assert bisection(f).bandwidth_Bps == pytest.approx(nics / os / 2, rel=1e-12)
    # the largest non-blocking group is one block under that tier
    gpus_per_block = inv.num_gpus // t.num_blocks
    assert inv.largest_nonblocking_gpus == gpus_per_block
    assert inv.largest_nonblocking_group == t.block_name


def _figures(reference, cluster_id):
    data = json.loads((reference / "clusters.json").read_text())
    cluster = next(c for c in data["clusters"] if c["id"] == cluster_id)
    return {fig["name"]: fig["value"] for fig in cluster["figures"]}


@pytest.fixture(scope="module")
def islands():
    return build_fabric(load_spec("h100-100k-islands"))


def test_islands_match_the_published_100k_design(reference, islands):
    # SemiAnalysis, "100,000 H100 Clusters" (2024-06-17), as recorded in clusters.json semianalysis_100k_h100:
    # 4 islands of 24,576 H100, 7:1 at the tier above them; 98,304 GPU-to-leaf links; an island is below the
    # 65,536 GPUs a non-blocking 3-tier Quantum-2 fat tree can hold
    fig = _figures(reference, "semianalysis_100k_h100")
    assert fig["islands_in_100k_design"] == 4
    assert fig["four_tier_ib_option"] == "4 pods x 24,576 H100, 7:1 oversubscribed at top tier"
    inv = inventory(islands)
    core = inv.tiers[2]
    assert core.block_name == "island" and core.num_blocks == fig["islands_in_100k_design"]
    assert core.gpus_per_block == 24_576 < fig["quantum2_max_fully_interconnected"]
    assert inv.num_gpus == 4 * 24_576
    assert inv.links[2].num_links == fig["gpu_leaf_transceivers_replaceable_by_DAC"] == 98_304
    # non-blocking inside an island, 7:1 above it (48 down : 7 up, the whole-port split nearest 7)
    assert [t.oversubscription for t in inv.tiers[:2]] == [1.0, 1.0]
    assert core.oversubscription == pytest.approx(7, rel=0.025) and core.oversubscription == 48 / 7
    assert inv.largest_nonblocking_gpus == 24_576 and inv.largest_nonblocking_group == "island"
    assert len(inv.tiers) == 4
    # every island's share of the 4th tier: its NIC capacity over 48/7
    assert inv.tiers[3].down_capacity_Bps == pytest.approx(98_304 * NIC_Bps * 7 / 48, rel=1e-12)
    assert inv.bisection_bandwidth_Bps == pytest.approx(98_304 * NIC_Bps * 7 / 48 / 2, rel=1e-12)


def test_islands_all_to_all_is_bound_by_the_7_to_1_tier_and_never_beats_its_closed_form(islands):
    # 1 GiB all-to-all over all 98,304 GPUs: each GPU sends S/p to every peer, 3/4 of them in other islands, so
    # 3/4 of its S bytes leave its island at the island's uplink share of its NIC: 1/7 of 400 Gb/s as published,
    # 7/48 as built (whole ports); the time is never below either bound
    S = 2**30
    r = estimate(islands, "alltoall", S).results[0]
    assert r.bottleneck.level == "core-super-spine"
    published = 0.75 * S / (NIC_Bps / 7)
    built = 0.75 * S / (NIC_Bps * 7 / 48)
    assert r.time_s >= published and r.time_s >= built


def test_a_cross_island_data_parallel_all_reduce_is_bound_by_the_same_tier(islands):
    # one GPU per island in each communicator (strided groups: GPU i, i + 24,576, ...), every position, so every
    # rail: a ring of 4 moves 2 (p-1)/p S = 1.5 S per GPU across islands, at 7/48 of the NIC rate
    S = 2**30
    r = estimate(islands, "all_reduce", S, gpus=islands.num_gpus, groups=24_576).results[0]
    assert r.bottleneck.level == "core-super-spine"
    assert r.time_s >= 1.5 * S / (NIC_Bps * 7 / 48)
    # the same job inside one island runs at the NIC rate: much faster
    inside = estimate(islands, "all_reduce", S, gpus=4 * 6_144, groups=6_144).results[0]
    assert inside.time_s < r.time_s / 3


def test_plan_compares_collectives_that_cross_the_top_tier(islands):
    # `topo plan`'s network figures cross the tier that joins the largest blocks (issue 19): on the islands design
    # the 4th tier (7:1) above the 4 islands, not two pods inside island 0. The all-reduce has one GPU per island in
    # each of 24,576 communicators (a ring of 4 moves 1.5 S per GPU across islands, at 7/48 of the NIC rate as built);
    # the all-to-all is over all 98,304 GPUs (3/4 of S leaves the island). Both bind on core-super-spine.
    from topo.plan.network import crosspod_collectives

    S = 2**30
    n = crosspod_collectives(islands, 1.0, 1.0)
    assert (n.top_tier, n.block_name, n.num_blocks, n.gpus_per_block) == ("super-spine", "island", 4, 24_576)
    assert n.all_reduce_gpus == n.alltoall_gpus == 98_304
    assert n.all_reduce_bottleneck == n.alltoall_bottleneck == "core-super-spine"
    ring = 1.5 * S / (NIC_Bps * 7 / 48)
    assert ring <= n.all_reduce_s <= ring / 0.9  # the usable fraction of a link is 0.9 to 1
    assert n.alltoall_s >= 0.75 * S / (NIC_Bps * 7 / 48)
    # a 3-tier fabric: the top tier (core) joins pods; a 2-tier one has no tier joining blocks of blocks
    pods = crosspod_collectives(small_fabric("rail_optimized-3"), 1.0, 1.0, collectives=False)
    assert (pods.top_tier, pods.block_name, pods.num_blocks) == ("core", "pod", 2)
    assert crosspod_collectives(small_fabric("rail_optimized-2"), 1.0, 1.0).top_tier is None


def test_the_4tier_design_is_a_true_4_tier_fat_tree():
    inv = inventory(build_fabric(load_spec("h100-100k-4tier")))
    assert len(inv.tiers) == 4 and all(t.model == "QM9700" for t in inv.tiers)
    assert [t.oversubscription for t in inv.tiers] == [1.0, 1.0, 1.0, None]
    assert inv.largest_nonblocking_gpus == inv.num_gpus == 98_304
    assert inv.bisection_bandwidth_per_gpu_Bps == pytest.approx(NIC_Bps, rel=1e-12)


def test_latency_counts_every_switch_hop():
    # across the top of a 5-tier fabric a path crosses 2 x 5 - 1 = 9 switches; each link carries half the latency
    # of each switch it joins, so the path's latency is 9 switch latencies (NIC and NVSwitch latencies are 0 here)
    d = spec_dict(kind="fat_tree", cluster={"num_units": 16}, server={"gpus": 2, "nics": 2, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": 2},
                  tiers=[tier(n, radix=8, latency="100 ns", **({"oversubscription": 1} if n != "hyper" else {}),
                              **({"joins": 2} if n in ("spine", "core", "super") else {}))
                         for n in ("leaf", "spine", "core", "super", "hyper")])
    d["fabric"]["servers_per_unit"] = 2
    f = build_fabric(spec_from_dict(d))
    r = Router(f, "hash").route([0], [f.num_gpus - 1], 1.0)
    assert r.latency_s[0] == pytest.approx(9 * 100e-9, rel=1e-12)
    near = Router(f, "hash").route([0], [2], 1.0)  # another server under the same leaf
    assert near.latency_s[0] == pytest.approx(100e-9, rel=1e-12)


@pytest.mark.parametrize("name", ["rail_optimized-4", "rail_optimized-5", "fat_tree-4"])
def test_hashed_ecmp_picks_the_up_and_the_down_cable_independently(name):
    # Mutation-review finding: with the up and the down cable of a boundary hashed from the same value, a flow
    # always takes cable c up and cable c down. Between two leaves joined by m parallel cables per switch pair,
    # independent hashes agree on about 1/m of the flows, never on all of them.
    f = small_fabric(name)
    L = f.layout
    r = Router(f, "hash", subflows=64)
    slots = r.slots
    src = np.arange(f.num_gpus)
    dst = (src + f.num_gpus // 2) % f.num_gpus  # across the top: every boundary is crossed
    cols, _ = r.path_table(np.repeat(src, 64), np.repeat(dst, 64), np.zeros(64 * src.size, dtype=np.int64),
                           np.tile(np.arange(64), src.size))
    checked = 0
    for k in range(L.num_tiers - 1):
        m = L.tiers[k + 1].links_from_below
        up, down = cols[:, slots.up(k)] // 2, cols[:, slots.down(k)] // 2
        sel = (up >= 0) & (down >= 0)
        assert sel.any()
        if m == 1:
            continue
        cable_up = (up[sel] - f.level_start(Level.uplink(k))) % m
        cable_down = (down[sel] - f.level_start(Level.uplink(k))) % m
        same = np.mean(cable_up == cable_down)
        assert same < 0.75, f"boundary {k}: up and down cables agree on {same:.0%} of the flows"
        checked += 1
    assert checked >= 1


def test_path_slots_grow_with_the_tiers():
    s3, s5 = PathSlots(3), PathSlots(5)
    assert s3.width == 12 and s5.width == 16
    assert [s3.up(0), s3.up(1), s3.down(1), s3.down(0), s3.recv_nic] == [4, 5, 6, 7, 8]
    assert s5.down(0) == s5.recv_nic - 1 and s5.up(3) + 1 == s5.down(3)


def test_level_names_and_kinds():
    assert Level.into_tier(0) == Level.NIC and Level.into_tier(2) == Level.uplink(1)
    assert Level.uplink(3).lower_tier == 3 and Level.uplink(3).upper_tier == 4
    assert Level.uplink(1).name_in(["leaf", "spine", "core"]) == "spine-core"
    assert not Level.PCIE.is_network and Level.NIC.is_network


def test_failures_at_every_tier_are_routed_around():
    f = small_fabric("rail_optimized-5")
    base = estimate(f, "alltoall", "64M").results[0].time_s
    for t in f.layout.tiers:
        g = f.with_failures(f"{t.name}0")
        for ecmp in ("ideal", "hash"):
            slower = estimate(g, "alltoall", "64M", ecmp=ecmp).results[0].time_s
            assert slower >= base * (1 - 1e-9)
    # a whole plane: spine 0 of every pod and everything above it
    g = f.with_failures("plane:0")
    dead = ~g.link_alive
    top = f.level_slice(Level.uplink(3))
    assert dead[top].sum() == dead[top].size // 2  # half of the top boundary's cables are in plane 0
    assert estimate(g, "all_reduce", "64M").results[0].time_s > 0


def test_sharp_reduces_up_to_the_tier_that_joins_the_gpus():
    d = spec_dict(kind="rail_optimized", cluster={"num_units": 8}, server={"gpus": 2, "nics": 2, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": 2},
                  tiers=[tier(n, radix=8, sharp=True, **({"oversubscription": 1} if n != "super" else {}),
                              **({"joins": 2} if n in ("spine", "core") else {}))
                         for n in ("leaf", "spine", "core", "super")])
    d["fabric"]["servers_per_unit"] = 2
    f = build_fabric(spec_from_dict(d))
    r = estimate(f, "all_reduce", "1G", algorithm="sharp").results[0]
    assert r.algorithm == "sharp" and r.time_s > 0


BAD = [
    # a tier whose oversubscription its ports cannot make: 48 down at 7:1 needs 6.86 up ports
    (["fabric.tiers[core].oversubscription=7", "fabric.tiers[core].up_ports="],
     "fabric.tiers[2].oversubscription: core: 48 down ports at oversubscription 7 need 6.857 up ports, not a whole "
     "number"),
    # an island size the pods do not fill
    (["fabric.tiers[core].joins=25"], "cluster.num_gpus: 96 pods do not fill whole islands of 25"),
    # an island larger than the core's ports: 96 pods need 96 down ports on each core even with one cable each
    (["fabric.tiers[core].joins=96"], "fabric.tiers[2].radix: core: 96 spine switches x 32 uplinks per plane need "
                                      "96 down + 7 up ports on each core switch even with one link to each, but the "
                                      "radix is 64"),
    # more than the radix allows
    (["fabric.tiers[super-spine].radix=5000"], "fabric.tiers[3].radix: "),
    # joins on the leaves
    (["fabric.tiers[leaf].joins=2"], "fabric.tiers[0].joins: leaf is the leaf tier: it joins servers"),
    # a tier name ending in a digit: switch "spine10" would be both spine1's switch 0 and spine's switch 10
    (["fabric.tiers[spine].name=spine1"], "fabric.tiers[1].name: a tier name must not end in a digit, got 'spine1'"),
    # names --set fabric.tiers[NAME] and --fail cannot write, or that print as two words ("core  switches")
    (["fabric.tiers[core].name=x[1]"], "fabric.tiers[2].name: a tier name is a letter then letters, digits, '-' or "
                                       "'_', got 'x[1]' ('[' in it)"),
    (["fabric.tiers[core].name=core a"], "fabric.tiers[2].name: a tier name is a letter then letters, digits, '-' "
                                         "or '_', got 'core a' (' ' in it)"),
    (["fabric.tiers[core].name=a.b"], "got 'a.b' ('.' in it)"),
    (["fabric.tiers[core].name=-core"], "got '-core' (not starting with a letter)"),
    # a joins on the top tier was ignored without a word (the top joins everything below it)
    (["fabric.tiers[super-spine].joins=2"], "fabric.tiers[3].joins: super-spine is the top tier: it joins all 4 "
                                            "islands, not 2; remove fabric.tiers[3].joins, add a tier above it or "
                                            "set fabric.grow_tiers = true"),
    (["fabric.tiers[super-spine].joins=8"], "fabric.tiers[3].joins: super-spine: a zone of 8 islands needs more "
                                            "than the 4 the cluster has"),
    # "a island" (issue 19 walk-through): the article follows the block's name
    (["fabric.tiers[core].joins=200"], "fabric.tiers[2].joins: core: an island of 200 pods needs more than the 96 "
                                       "the cluster has"),
    # two levels of blocks under one name printed "pod = 24 pods (24,576 GPUs), 4 pods"
    (["fabric.tiers[core].block_name=pod"], "fabric.tiers[2].block_name: 'pod' names the blocks of two tiers "
                                            "(spine's default block name and the blocks of core)"),
    (["fabric.unit_name=island"], "fabric.tiers[2].block_name: 'island' names the blocks of two tiers "
                                  "(fabric.unit_name and the blocks of core)"),
]


@pytest.mark.parametrize("sets, expected", BAD)
def test_bad_tiers_are_one_line_and_exit_2(sets, expected):
    args = ["describe", "h100-100k-islands"]
    for s in sets:
        args += ["--set", s]
    p = run_cli(*args)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]


def test_an_empty_tier_name_says_so_in_words():
    # pydantic's own "value should have at least 1 item after validation" was the message before
    with pytest.raises(TopoError, match=r"fabric.tiers\[1\].name: a tier name is a letter then .* got '' \(empty\)"):
        spec_from_dict(spec_dict(tiers=[tier("leaf", oversubscription=1), tier("")]))


def test_too_many_tiers_is_one_short_line():
    # review finding: pydantic's "list should have at most 8 items after validation, not 9, got [...]" printed
    # every tier of the spec on the error line
    names = ["leaf", "spine", "core", "aa", "bb", "cc", "dd", "ee", "ff"]
    with pytest.raises(TopoError) as e:
        spec_from_dict(spec_dict(tiers=[tier(n) for n in names]))
    assert str(e.value).endswith("fabric.tiers: a fabric has 1 to 8 tiers, got 9 [[fabric.tiers]] entries; with "
                                 "more, raise the radix (fewer tiers hold as many GPUs)")
    assert "{" not in str(e.value)


def test_units_per_pod_and_tier_joins_must_agree():
    with pytest.raises(TopoError, match="two pod sizes"):
        build_fabric(load_spec("h100-100k-4tier", ["fabric.tiers[spine].joins=8"]))
    same = inventory(build_fabric(load_spec("h100-100k-4tier", ["fabric.tiers[spine].joins=4"])))
    assert same.units_per_pod == 4


def _grown(units: int):
    # fat-tree leaves of radix 8 under 2 servers of 2 NICs each (4 down, 4 up), a spine like it, grow_tiers on
    d = spec_dict(kind="fat_tree", cluster={"num_units": units}, server={"gpus": 2, "nics": 2, "nic_rate": "400 Gb/s"},
                  scale_up={"gpus_per_domain": 2}, tiers=[tier("leaf", radix=8, oversubscription=1), tier("spine", radix=8)])
    d["fabric"].update(servers_per_unit=2, grow_tiers=True)
    return spec_from_dict(d)


@pytest.mark.parametrize("units, tiers", [(4, 2), (16, 3), (64, 4), (256, 5), (1024, 6)])
def test_grow_tiers_grows_to_any_depth(units, tiers):
    # A non-blocking folded Clos of radix-k switches and T tiers connects 2 (k/2)^T end ports (Al-Fares, Loukissas
    # and Vahdat, "A Scalable, Commodity Data Center Network Architecture", SIGCOMM 2008: k^3/4 hosts at 3 tiers):
    # k = 8 takes 32, 128, 512, 2,048, 8,192 NIC ports at 2 to 6 tiers. grow_tiers adds tiers like the top one
    # until everything fits, so it stops at the smallest T with 2 * 4^T >= the NIC ports (4 units per 2^4 ports).
    f = build_fabric(_grown(units))
    L = f.layout
    ports = units * 2 * 2
    assert 2 * 4 ** tiers >= ports > 2 * 4 ** (tiers - 1)
    assert L.num_tiers == tiers
    assert [t.name for t in L.tiers] == ["leaf", "spine", "core", "super-spine", "super-core", "hyper-spine"][:tiers]
    inv = inventory(f)
    assert inv.bisection_bandwidth_per_gpu_Bps == pytest.approx(NIC_Bps, rel=1e-12)  # non-blocking at every depth
    assert all(t.oversubscription in (1.0, None) for t in inv.tiers)


def test_a_grown_tier_joins_what_divides_the_blocks_below():
    # Review finding: 40 units (160 NIC ports) grew a core that joined 4 of the 10 pods, then failed with "10 pods
    # do not fill whole islands of 4; ... or set fabric.tiers[2].joins", a tier the spec does not have. A grown
    # tier now joins the most blocks that fit and divide the blocks below (2 of 10), and the tree still has the
    # fewest tiers a non-blocking radix-8 Clos needs: 2 * 4^3 = 128 < 160 <= 2 * 4^4 = 512 (Al-Fares et al., above)
    f = build_fabric(_grown(40))
    assert [(t.name, t.joins, t.num_blocks) for t in f.layout.tiers] == [
        ("leaf", 1, 40), ("spine", 4, 10), ("core", 2, 5), ("super-spine", 5, 1)]
    assert all(t.oversubscription == 1 for t in inventory(f).tiers[:-1])
    # 11 pods (a prime) divide into no block of 2 to 4: one line that says why and what to change, no key to set
    with pytest.raises(TopoError, match="11 pods do not fill whole islands of 2 to 4, the most that fit under core "
                                        r"\(a tier fabric.grow_tiers added, whose joins cannot be set\)") as e:
        build_fabric(_grown(44))
    assert "tiers[2]" not in str(e.value)


def test_a_top_tier_joins_is_kept_by_growing_a_tier_above_it():
    # with grow_tiers, zones of 2 islands under the super-spines get a super-core above them joining the 2 zones
    f = build_fabric(load_spec("h100-100k-islands", ["fabric.tiers[super-spine].joins=2", "fabric.grow_tiers=true"]))
    assert [(t.name, t.joins, t.num_blocks) for t in f.layout.tiers][3:] == [("super-spine", 2, 2),
                                                                              ("super-core", 2, 1)]


def test_grow_tiers_stops_at_the_most_tiers_a_spec_may_have():
    from topo.spec.model import MAX_TIERS

    with pytest.raises(TopoError, match=f"grow_tiers stops at {MAX_TIERS} tiers") as e:
        build_fabric(_grown(4 ** MAX_TIERS))  # 4 x 4^8 NIC ports need 9 tiers (2 x 4^9 >= 4^9), MAX_TIERS is 8
    assert "\n" not in str(e.value)


def test_describe_counts_every_switch_hop_as_estimate_does():
    """Issue 19: latency counts every switch hop. describe said nothing about it (issue 19 walk-through: no tier
    latency in the text or --json); it now gives the farthest pair's switch hops and switch latency, and a
    message's time grows by exactly those hops' latency from GPUs under one leaf to GPUs in different islands:
    h100-100k-islands, 130 ns per switch, 1 hop (leaf) to 7 (leaf, spine, core, super-spine, core, spine, leaf)."""
    fabric = build_fabric(load_spec("h100-100k-islands"))
    inv = inventory(fabric)
    assert [t.latency_s for t in inv.tiers] == [130e-9] * 4
    assert inv.farthest_switch_hops == 7 and inv.farthest_switch_latency_s == pytest.approx(7 * 130e-9)
    near = estimate(fabric, "sendrecv", [8], ranks=[0, 8]).results[0].time_s  # two servers under leaf0
    far = estimate(fabric, "sendrecv", [8], ranks=[0, 24_576]).results[0].time_s  # island 0 to island 1
    assert far - near == pytest.approx(inv.farthest_switch_latency_s - 130e-9, rel=1e-6)
    text = run_cli("describe", "h100-100k-islands", check=True).stdout
    assert ("farthest GPUs               7 switch hops (up to super-spine and down), 910.0 ns of switch latency one "
            "way") in text.splitlines()
    doc = json.loads(run_cli("describe", "h100-100k-islands", "--json", check=True).stdout)
    assert doc["farthest_switch_hops"] == 7 and doc["tiers"][3]["latency_s"] == pytest.approx(130e-9)



def test_describe_says_no_switch_latency_is_given_rather_than_0_ns():
    # walk6: four bundled specs (meta-llama3-24k, alibaba-hpn-plane, ...) and any spec without tier latencies said
    # "0 ns of switch latency one way", which reads as free switches; a message still pays the profile's per-step
    # network latency, and a tier's latency is added per switch hop only when given
    fabric = build_fabric(load_spec("meta-llama3-24k"))
    inv = inventory(fabric)
    # json52: not given is None (JSON null), not 0.0, which a JSON reader takes for a free switch
    assert inv.farthest_switch_latency_s is None and inv.farthest_switch_hops == 5
    assert [t.latency_s for t in inv.tiers] == [None, None, None]
    doc = json.loads(run_cli("describe", "meta-llama3-24k", "--json", check=True).stdout)
    assert doc["farthest_switch_latency_s"] is None and [t["latency_s"] for t in doc["tiers"]] == [None] * 3
    zero = json.loads(run_cli("describe", "meta-llama3-24k", "--json", "--set", "fabric.tiers[0].latency=0ns",
                              check=True).stdout)  # a latency the spec gives, even 0, stays a number
    assert zero["farthest_switch_latency_s"] == 0.0 and [t["latency_s"] for t in zero["tiers"]] == [0.0, None, None]
    assert inventory(fabric).to_frame()["latency_s"].isna().all()
    assert estimate(fabric, "sendrecv", [8], ranks=[0, 16]).results[0].latency_s > 0  # two racks: network steps
    text = run_cli("describe", "meta-llama3-24k", check=True).stdout
    assert ("farthest GPUs               5 switch hops (up to atsw and down), no switch latency given (the tiers' "
            "latency), only the cost profile's per-step network latency") in text.splitlines()
    given = run_cli("describe", "meta-llama3-24k", "--set", "fabric.tiers[0].latency=500ns", check=True).stdout
    assert "(up to atsw and down), 1.000 us of switch latency one way" in given  # the leaf twice on the farthest path
