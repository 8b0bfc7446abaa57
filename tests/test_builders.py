"""Builders against fat-tree arithmetic: closed forms, structural invariants, property-based designs."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import spec_dict, tier
from topo import TopoError, build_fabric, inventory, spec_from_dict
from topo.fabric.fabric import ROLE_SWITCH


def degrees(fabric):
    L = fabric.links
    return np.bincount(np.r_[L["src"], L["dst"]], minlength=fabric.num_nodes)


def check_structure(fabric):
    """Every switch uses exactly the ports its tier plan says, every NIC has one leaf link, uplinks are even."""
    deg = degrees(fabric)
    for t in fabric.layout.tiers:
        ids = fabric.switch_node(t.index, np.arange(t.num_switches))
        assert np.all(deg[ids] == t.down_ports + t.up_ports), t.name
        assert t.down_ports + t.up_ports <= t.radix
    L = fabric.links
    nic_lvl = L["level"] == 2
    assert nic_lvl.sum() == fabric.layout.num_nics
    assert np.unique(L["src"][nic_lvl]).size == fabric.layout.num_nics
    # Each lower switch reaches each switch of its group over the same number of parallel links.
    for lvl in range(3, 3 + fabric.layout.num_tiers - 1):
        sel = L["level"] == lvl
        pairs, counts = np.unique(np.c_[L["src"][sel], L["dst"][sel]], axis=0, return_counts=True)
        assert np.all(counts == counts[0])
        below = fabric.layout.tiers[lvl - 3]
        upper = fabric.layout.tiers[lvl - 2]
        per_lower = np.bincount(pairs[:, 0] - pairs[:, 0].min())
        assert np.all(per_lower == upper.switches_per_group)
        assert counts[0] * upper.switches_per_group == below.up_ports


@pytest.mark.parametrize("k", [4, 8, 16, 32, 64])
def test_k_ary_fat_tree_closed_form(k):
    """Al-Fares et al. (SIGCOMM 2008): a k-ary fat tree has k pods of k/2 edge and k/2 aggregation switches,
    (k/2)^2 core switches and k^3/4 hosts, all non-blocking."""
    d = spec_dict(kind="fat_tree", gpu="H100", scale_up={"gpus_per_domain": 1}, server={"gpus": 1, "nics": 1},
                  cluster={"num_pods": k},
                  tiers=[tier("edge", radix=k, oversubscription=1), tier("agg", radix=k, oversubscription=1),
                         tier("core", radix=k)])
    d["fabric"]["units_per_pod"] = k // 2
    f = build_fabric(spec_from_dict(d))
    counts = [t.num_switches for t in f.layout.tiers]
    assert counts == [k * k // 2, k * k // 2, (k // 2) ** 2]
    assert f.num_gpus == k**3 // 4
    assert all(t.ports_idle == 0 for t in inventory(f).tiers)
    check_structure(f)


@pytest.mark.parametrize("units, leaf, spine, m", [(1, 8, 4, 8), (2, 16, 8, 4), (3, 24, 16, 2), (4, 32, 16, 2)])
def test_superpod_table(units, leaf, spine, m):
    """NVIDIA DGX SuperPOD H100 RA, Table 4 (compute fabric, 1-4 SUs): leaf and spine counts and the
    spine-leaf cables (256, 512, 768, 1,024)."""
    from topo import load_spec

    f = build_fabric(load_spec("dgx-h100-superpod", [f"cluster.num_units={units}"]))
    t = f.layout.tiers
    assert (t[0].num_switches, t[1].num_switches, t[1].links_from_below) == (leaf, spine, m)
    assert inventory(f).links[3].num_links == 256 * units
    check_structure(f)


def test_default_unit_is_the_largest_whole_port_split():
    # radix 64 at 3.5:1: d + d/3.5 <= 64 gives d <= 49.8; 49 down and 14 up is the largest whole split
    d = spec_dict(tiers=[tier("leaf", oversubscription=3.5), tier("spine")], cluster={"num_units": 1})
    f = build_fabric(spec_from_dict(d))
    assert (f.layout.servers_per_unit, f.layout.tiers[0].up_ports) == (49, 14)


def test_oversubscription_sets_uplinks():
    d = spec_dict(tiers=[tier("leaf", oversubscription=3), tier("spine")], cluster={"num_units": 4})
    f = build_fabric(spec_from_dict(d))
    leaf = f.layout.tiers[0]
    # radix 64 at 3:1: 48 down (48 servers, one NIC each per rail leaf), 16 up
    assert (leaf.down_ports, leaf.up_ports, leaf.oversubscription) == (48, 16, 3.0)
    inv = inventory(f)
    assert inv.tiers[0].down_capacity_Bps == pytest.approx(3 * inv.tiers[0].up_capacity_Bps)
    check_structure(f)


def test_rail_kinds_keep_rails_apart():
    for kind in ("rail_optimized", "rail_only"):
        f = build_fabric(spec_from_dict(spec_dict(kind=kind, cluster={"num_units": 2})))
        L, N = f.links, f.nodes
        nic = L["level"] == 2
        # NIC r goes to a leaf of rail r
        assert np.all(N["rail"][L["src"][nic]] == N["rail"][L["dst"][nic]])
        up = L["level"] == 3
        spine_rails = N["rail"][L["dst"][up]]
        leaf_rails = N["rail"][L["src"][up]]
        if kind == "rail_only":
            assert np.all(spine_rails == leaf_rails)  # no spine joins two rails
            assert f.layout.tiers[1].num_groups == 8
        else:
            # a rail-optimized spine hears every rail
            for s in np.unique(L["dst"][up]):
                assert np.unique(leaf_rails[L["dst"][up] == s]).size == 8
        check_structure(f)


def test_fat_tree_puts_a_servers_nics_on_one_leaf():
    f = build_fabric(spec_from_dict(spec_dict(kind="fat_tree", cluster={"num_servers": 8},
                                              fabric={"servers_per_unit": 2})))
    L, N = f.links, f.nodes
    nic = L["level"] == 2
    servers = N["server"][L["src"][nic]]
    leaves = L["dst"][nic]
    for s in range(8):
        assert np.unique(leaves[servers == s]).size == 1
    assert f.layout.num_units == 4
    check_structure(f)


@pytest.mark.parametrize("edit, key, fragment", [
    ({"cluster": {"num_servers": 33}}, "cluster.num_servers", "33 servers do not fill whole scalable units of 32"),
    ({"cluster": {"num_gpus": 12}}, "cluster.num_gpus", "12 GPUs do not fill whole servers of 8"),
    ({"cluster": {"num_units": 3}, "tiers": [tier("leaf", oversubscription=1)]}, "fabric.tiers",
     "one tier holds a single scalable unit"),
    ({"cluster": {"num_units": 9}}, "fabric.tiers[1].radix", "72 leaf switches x 32 uplinks need 72 down"),
    ({"tiers": [tier("leaf", oversubscription=3.5), tier("spine")], "fabric": {"servers_per_unit": 32}},
     "fabric.tiers[0].oversubscription", "32 down ports at oversubscription 3.5 need 9.143 up ports, not a whole "
     "number; set up_ports instead (up_ports = 9 gives 3.56:1, up_ports = 10 gives 3.2:1)"),
    ({"tiers": [tier("leaf", oversubscription=1), tier("spine", oversubscription=2)]},
     "fabric.tiers[1].oversubscription", "top tier"),
    ({"tiers": [tier("leaf", oversubscription=1, rate="800 Gb/s"), tier("spine")]}, "fabric.tiers[0].port_rate",
     "cannot take links of 50 GB/s"),
    ({"fabric": {"servers_per_unit": 40}}, "fabric.servers_per_unit", "room for 32"),
])
def test_impossible_designs(edit, key, fragment):
    d = spec_dict(cluster=edit.get("cluster"), tiers=edit.get("tiers"))
    if "fabric" in edit:
        d["fabric"].update(edit["fabric"])
    spec = spec_from_dict(d, source="t.toml")
    with pytest.raises(TopoError) as info:
        build_fabric(spec)
    assert info.value.key == key
    assert fragment in info.value.message
    assert info.value.source == "t.toml"


def test_grow_tiers_adds_a_core():
    # 16 SUs x 8 rails = 128 leaves: more than a 64-port spine can join (8 SUs is the 2-tier maximum)
    d = spec_dict(cluster={"num_units": 16})
    with pytest.raises(TopoError):
        build_fabric(spec_from_dict(d))
    d["fabric"]["grow_tiers"] = True
    f = build_fabric(spec_from_dict(d))
    assert [t.name for t in f.layout.tiers] == ["leaf", "spine", "core"]
    assert f.layout.units_per_pod == 4  # 32 leaves x 32 uplinks fill 32 non-blocking spines of 32 down + 32 up
    assert f.layout.num_pods == 4
    check_structure(f)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["fat_tree", "rail_optimized", "rail_only"]),
    radix=st.sampled_from([8, 16, 24, 32, 48, 64, 128]),
    nics=st.sampled_from([1, 2, 4, 8]),
    leaf_os=st.sampled_from([1, 2, 3, 4, 7]),
    spine_os=st.sampled_from([1, 2, 3, 7]),
    ntiers=st.sampled_from([1, 2, 3]),
    units=st.integers(1, 40),
)
def test_any_design_builds_consistently_or_fails_cleanly(kind, radix, nics, leaf_os, spine_os, ntiers, units):
    tiers = [tier("leaf", radix=radix, oversubscription=leaf_os if ntiers > 1 else None)]
    if ntiers >= 2:
        tiers.append(tier("spine", radix=radix, oversubscription=spine_os if ntiers == 3 else None))
    if ntiers == 3:
        tiers.append(tier("core", radix=radix))
    d = spec_dict(kind=kind, tiers=tiers, cluster={"num_units": units},
                  server={"gpus": 8, "nics": nics})
    try:
        f = build_fabric(spec_from_dict(d))
    except TopoError as exc:
        assert exc.key and "\n" not in exc.line()
        return
    check_structure(f)
    inv = inventory(f)
    assert inv.num_gpus == units * f.layout.servers_per_unit * 8
    for t in inv.tiers:
        if t.oversubscription is not None:
            assert t.down_capacity_Bps == pytest.approx(t.oversubscription * t.up_capacity_Bps)
    assert 0 < inv.bisection_bandwidth_Bps <= inv.num_nics * inv.nic_rate_Bps / 2 + 1e-6
    roles = f.nodes["role"]
    assert (roles == ROLE_SWITCH).sum() == inv.num_switches


def test_oversubscription_error_suggests_up_ports_that_build_it():
    # walk22: a 3:1 spine above pods of 4 units of 32 servers (32 leaves x 32 uplinks, 64-port spines). The split
    # 64 down (2 links a leaf) cannot take 21 or 22 up ports within 64 ports, so the error must not offer them:
    # following "up_ports = 21 gives 3.05:1" built 32 down / 21 up, 1.52:1. It names the split that fits.
    tiers = [tier("leaf", oversubscription=1), tier("spine", oversubscription=3), tier("core")]
    d = spec_dict(cluster={"num_units": 8}, tiers=tiers, fabric={"units_per_pod": 4})
    with pytest.raises(TopoError) as info:
        build_fabric(spec_from_dict(d))
    msg = info.value.message
    assert "32 down ports at oversubscription 3 need 10.67 up ports" in msg
    assert "up_ports = 10 gives 3.2:1, up_ports = 11 gives 2.91:1" in msg
    for up, ratio in ((10, 3.2), (11, 32 / 11)):  # the suggestion, followed, builds what it said
        tiers[1] = tier("spine", up_ports=up)
        layout = build_fabric(spec_from_dict(spec_dict(cluster={"num_units": 8}, tiers=tiers,
                                                       fabric={"units_per_pod": 4}))).layout
        spine = layout.tiers[1]
        assert (spine.down_ports, spine.up_ports) == (32, up)
        assert spine.down_ports / spine.up_ports == pytest.approx(ratio)


def test_a_size_that_misses_whole_units_or_domains_names_the_nearest_that_fit():
    # walk22: 32,768 GB200 (72-GPU NVL72 domains of 18 four-GPU trays) in units of 32 trays: a multiple of 32
    # trays (8,192) misses whole domains, a multiple of 18 (8,208) misses whole units; both hold every
    # lcm(32, 18) = 288 trays = 1,152 GPUs: 28 x 1,152 = 32,256 and 29 x 1,152 = 33,408
    d = spec_dict(gpu="GB200", scale_up={"gpus_per_domain": 72}, server={"gpus": 4, "nics": 4},
                  cluster={"num_gpus": 32768}, fabric={"servers_per_unit": 32}, tiers=[tier("leaf")])
    for n in (32768, 32832):
        d["cluster"] = {"num_gpus": n}
        with pytest.raises(TopoError) as info:
            build_fabric(spec_from_dict(d))
        assert info.value.key == "cluster.num_gpus"
        assert ("come in steps of 1,152 GPUs; nearest: 32,256 or 33,408 GPUs)") in info.value.message
    d["cluster"] = {"num_servers": 8200}
    with pytest.raises(TopoError) as info:
        build_fabric(spec_from_dict(d))
    assert "steps of 288 servers; nearest: 8,064 or 8,352 servers)" in info.value.message
    # HGX servers hold whole domains: the step is the unit (64 servers of 8 GPUs = 512 GPUs)
    h = spec_dict(cluster={"num_gpus": 16000}, fabric={"servers_per_unit": 64},
                  tiers=[tier("leaf", radix=128), tier("spine", radix=128)])
    with pytest.raises(TopoError) as info:
        build_fabric(spec_from_dict(h))
    assert info.value.message.endswith("(nearest: 15,872 or 16,384 GPUs)")
