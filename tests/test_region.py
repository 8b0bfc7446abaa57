"""Regions of several sites joined by a DCI (issue 31): the spec, its errors, the DCI level, routes and cuts."""

import numpy as np
import pytest

from conftest import spec_dict
from topo import TopoError
from topo.errors import Unreachable
from topo.fabric.levels import Level, LevelKind
from topo.fabric.region import region_from_specs
from topo.spec.region_load import region_from_dict, site_specs
from topo.spec.sites import FIBRE_LATENCY_PER_KM_S


def region_dict(count=2, **interconnect):
    ic = {"distance_km": 1000, "waves": 16, "wave_rate": "800 Gb/s", **interconnect}
    return {"name": "r", "sites": [{"name": "s", "fabric": spec_dict(), "count": count}], "interconnect": ic}


def build(d, tmp_path=None):
    rs = region_from_dict(d, "r.toml")
    return region_from_specs(rs, site_specs(rs, tmp_path or ".", "r.toml"), "r.toml")


def test_the_dci_is_a_typed_level_above_every_tier():
    assert Level.DCI.kind is LevelKind.DCI and Level.DCI.name_in(["leaf", "spine"]) == "dci"
    assert Level.DCI.lower_tier is None and Level.DCI.upper_tier is None and Level.DCI.is_network
    assert Level.DCI not in Level.all(8) and Level.uplink(6).kind is LevelKind.UPLINK


def test_cross_site_latency_is_distance_times_per_km_plus_equipment():
    # multisite.md section 4: 4.897 us/km in fibre at 1550 nm (mapyourtech.com, secondary); 1,000 km -> 4.9 ms one way
    r = build(region_dict(equipment_latency="100 us"))
    n = r.gpus_per_site[0]
    lat = r.cross_site_latency_s(np.array([0, 5]), np.array([n, n + 17]))
    tiers = r.fabrics[0].layout.tiers
    in_site = 2 * sum(t.latency_s for t in tiers)  # up to the top tier and down, once per switch
    assert FIBRE_LATENCY_PER_KM_S == 4.9e-6
    np.testing.assert_allclose(lat, 1000 * 4.9e-6 + 100e-6 + in_site)
    r2 = build(region_dict(equipment_latency="100 us", latency_per_km="5 us"))
    np.testing.assert_allclose(r2.cross_site_latency_s(np.array([0]), np.array([n])), 5e-3 + 100e-6 + in_site)


def test_span_capacity_is_waves_times_rate_and_sites_share_one_fabric():
    r = build(region_dict(count=3, topology="ring"))
    assert r.fabrics[0] is r.fabrics[1] is r.fabrics[2]
    np.testing.assert_allclose(r.span_bandwidth_Bps, 16 * 100e9)  # 16 x 800 Gb/s per direction
    assert r.num_gpus == 3 * r.fabrics[0].num_gpus
    np.testing.assert_array_equal(r.site_of(r.gpu_offset[:-1]), [0, 1, 2])


def test_alike_sites_share_one_inventory(monkeypatch):
    # the module's promise (each distinct fabric's inventory made once): rev38 found it made once a site
    import topo.fabric.region_inventory as ri

    calls = []
    real = ri.inventory
    monkeypatch.setattr(ri, "inventory", lambda f: calls.append(f) or real(f))
    r = build(region_dict(count=3, topology="ring"))
    inv = ri.region_inventory(r)
    assert len(calls) == 1 and len(inv.sites) == 3
    assert len({s.bisection_bandwidth_Bps for s in inv.sites}) == 1


def test_a_failed_span_reroutes_around_a_ring_and_halves_the_cut():
    r = build(region_dict(count=4, topology="ring"))
    assert r.cut_Bps() == (2 * 1.6e12, 2 * 1.6e12)  # any split of a ring cuts two spans
    cut = r.with_failures("dci:s-0-s-1")
    assert cut.cut_Bps()[0] == 1.6e12
    lat = r.spans["latency_s"][0]
    assert cut.route_latency_s(0, 1) == pytest.approx(3 * lat)  # the other way round: three spans
    loads = cut.route_loads(np.array([0]), np.array([1]), 1.0)
    assert loads[0:2].sum() == 0 and loads.sum() == 3


def test_a_hub_cut_off_is_unreachable():
    r = build(region_dict(count=3, topology="hub")).with_failures("dci:0-1")
    with pytest.raises(Unreachable, match="no working DCI route"):
        r.route_latency_s(1, 2)


@pytest.mark.parametrize("edit, key, message", [
    ({"distance_km": 0}, "interconnect.distance_km", "must be > 0"),
    ({"distance_km": -5}, "interconnect.distance_km", "must be > 0"),
    ({"waves": 0}, "interconnect.waves", "must be >= 1, got 0"),
    ({"wave_rate": "0 Gb/s"}, "interconnect.wave_rate", "positive"),
    ({"topology": "star"}, "interconnect.topology", "must be one of mesh, ring, hub, line, spans, got 'star'"),
    ({"hub": "nowhere"}, None, "interconnect.hub names no site: 'nowhere'"),
    # small50: read under one topology or attachment only, refused under another (a silently different model)
    ({"hub": "s-1", "topology": "line"}, None, 'interconnect.hub: \'s-1\' is read with topology "hub" only, got '
                                               'topology "line"; allowed: no hub, or topology = "hub"'),
    ({"hub": "s-1"}, None, 'got topology "mesh"'),
    ({"border_oversubscription": 4}, None, 'interconnect.border_oversubscription: 4 is read with attach "border" '
                                           'only (border leaves), got attach "top"'),
])
def test_bad_interconnects_are_one_line_errors(edit, key, message):
    with pytest.raises(TopoError) as err:
        region_from_dict(region_dict(**edit), "r.toml")
    assert err.value.key == key and message in err.value.message and "\n" not in err.value.line()


def test_hub_and_border_oversubscription_where_they_are_read_are_taken():
    r = build(region_dict(count=3, topology="hub", hub="s-1"))
    assert r.spec.pairs() == [(0, 1), (1, 2)]
    assert build(region_dict(attach="border", border_oversubscription=4)).border_Bps(0) == pytest.approx(16 * 100e9 / 4)


def test_an_attach_tier_that_does_not_exist_and_one_site_are_errors():
    with pytest.raises(TopoError, match="site s-0 has no tier 'core'; allowed: leaf, spine") as err:
        build(region_dict(attach_tier="core"))
    assert err.value.key == "interconnect.attach_tier"
    with pytest.raises(TopoError, match="at least 2 sites"):
        region_from_dict(region_dict(count=1))
    with pytest.raises(TopoError, match="unknown DCI|no such sites"):
        build(region_dict()).with_failures("dci:s-0-x")


def test_sites_of_different_gpus_cannot_be_joined():
    d = region_dict(count=1)
    d["sites"].append({"name": "t", "fabric": spec_dict(gpu="H200")})
    with pytest.raises(TopoError, match="site t has H200 GPUs and site s H100"):
        build(d)


def test_describe_a_bundled_region_shows_sites_spans_and_cut():
    from conftest import run_cli
    import json

    doc = json.loads(run_cli("describe", "two-site-h100", "--json", check=True).stdout)
    assert doc["num_sites"] == 2 and doc["num_gpus"] == 2 * 1536
    span = doc["spans"][0]
    assert span["name"] == "dci:east-west"
    assert span["latency_s"] == pytest.approx(1000 * 4.9e-6 + 50e-6)  # the file's distance, per-km and equipment
    assert span["bandwidth_Bps"] == 16 * 100e9 == doc["min_cut_Bps"]
    assert all(s["bisection_bandwidth_Bps"] > doc["min_cut_Bps"] for s in doc["sites"])
    cut = json.loads(run_cli("describe", "two-site-h100", "--fail", "dci:east-west", "--json", check=True).stdout)
    assert cut["spans"][0]["failed"] and cut["min_cut_Bps"] == 0 and cut["cut_apart"] == [["east", "west"]]
    bad = run_cli("describe", "two-site-h100", "--set", "interconnect.distance_km=-1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "interconnect.distance_km: must be > 0" in bad.stderr
    bad = run_cli("describe", "two-site-h100", "--fail", "dci:east-north")
    assert bad.returncode == 2 and "no such sites" in bad.stderr and "Traceback" not in bad.stderr


def test_a_sites_failed_part_lowers_its_bisection_in_describe():
    # walk6: `describe two-site-h100 --fail east:spine0` showed east's bisection as 38.4 TB/s, the figure without
    # the failure, where `describe dgx-h100-superpod --set cluster.num_units=6 --fail spine0` says 37.2 TB/s
    from conftest import run_cli
    import json

    from topo import build_fabric, load_spec
    from topo.fabric.bisection import bisection

    one = build_fabric(load_spec("dgx-h100-superpod", overrides=["cluster.num_units=6"]))
    whole, hit = bisection(one).bandwidth_Bps, bisection(one.with_failures("spine0")).bandwidth_Bps
    assert hit < whole == 38.4e12  # 1,536 GPUs x 50 GB/s / 2: non-blocking
    doc = json.loads(run_cli("describe", "two-site-h100", "--fail", "east:spine0", "--json", check=True).stdout)
    east, west = doc["sites"]
    assert east["bisection_bandwidth_Bps"] == hit and east["bisection_without_failures_Bps"] == whole
    assert east["failures"] == ["spine0"] and west["failures"] == [] and west["bisection_bandwidth_Bps"] == whole
    text = run_cli("describe", "two-site-h100", "--fail", "east:spine0", check=True).stdout
    assert f"{hit / 1e12:.1f} TB/s (38.4 TB/s without failures)" in text, text


def test_border_leaves_add_a_leaf_hop_and_their_oversubscription_binds():
    from topo.engine.region_estimate import estimate_region

    top = build(region_dict(waves=1, equipment_latency="20 us"))
    border = build(region_dict(waves=1, equipment_latency="20 us", attach="border", border_oversubscription=4))
    leaf = top.fabrics[0].layout.tiers[0].latency_s
    assert border.up_latency_s(0) == pytest.approx(top.up_latency_s(0) + leaf)
    assert border.border_Bps(0) == pytest.approx(100e9 / 4)
    row = estimate_region(border, "all_reduce", [2 ** 30], "hierarchical").results[0]
    assert row.bottleneck_name == "border:s-0" and row.phases["dci"]["bandwidth_s"] == pytest.approx(2 ** 30 / 25e9)


def test_a_campus_is_the_same_construct_with_short_distances():
    campus = build(region_dict(count=3, distance_km=2, topology="mesh"))
    n = campus.gpus_per_site[0]
    lat = campus.cross_site_latency_s(np.array([0]), np.array([2 * n]))[0]
    assert lat == pytest.approx(2 * 4.9e-6 + 2 * sum(t.latency_s for t in campus.fabrics[0].layout.tiers))


def test_spans_give_pairs_their_own_distance_and_waves():
    d = region_dict(count=3, topology="mesh", spans=[{"sites": ["s-0", "s-2"], "distance_km": 300, "waves": 4}])
    r = build(d)
    names = r.span_names()
    k = names.index("dci:s-0-s-2")
    assert r.spans["distance_km"][k] == 300 and r.spans["waves"][k] == 4
    assert r.spans["latency_s"][k] == pytest.approx(300 * 4.9e-6)
    other = names.index("dci:s-0-s-1")
    assert r.spans["distance_km"][other] == 1000 and r.spans["waves"][other] == 16
    # 0 -> 2 directly (1.47 ms) rather than through 1 (9.8 ms)
    assert r.route_latency_s(0, 2) == pytest.approx(300 * 4.9e-6)
    ring = region_dict(count=4, topology="ring", spans=[{"sites": ["s-0", "s-2"], "distance_km": 5}])
    with pytest.raises(TopoError, match="no ring span joins s-0-s-2"):
        build(ring)


def test_routes_are_shortest_paths_by_latency_as_scipys_dijkstra_finds_them():
    # the region's own Dijkstra (no scipy import on the training path) against scipy's on random graphs
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    from topo.fabric.region import _shortest_paths

    rng = np.random.default_rng(3)
    for _ in range(100):
        S = int(rng.integers(2, 12))
        pairs = [(i, j) for i in range(S) for j in range(i + 1, S) if rng.random() < 0.4] or [(0, 1)]
        a, b = np.array(pairs).T
        lat = rng.random(a.size) * 1e-3
        g = csr_matrix((np.r_[lat, lat], (np.r_[a, b], np.r_[b, a])), shape=(S, S))
        want, pred = shortest_path(g, directed=True, return_predecessors=True)
        np.fill_diagonal(want, 0.0)
        dist, mine = _shortest_paths(S, a, b, lat)
        assert np.allclose(dist, want, rtol=1e-12, atol=0) and np.array_equal(np.isinf(dist), np.isinf(want))
        assert np.array_equal(mine, np.where(pred < 0, -1, pred))


def test_of_two_equal_routes_round_a_ring_the_one_through_the_lower_site_is_kept():
    # a ring of 4 equal spans: 0 -> 2 is two spans either way; site 1 is settled before site 3
    from topo.fabric.region import _shortest_paths

    dist, pred = _shortest_paths(4, np.array([0, 1, 2, 0]), np.array([1, 2, 3, 3]), np.full(4, 1e-3))
    assert dist[0, 2] == pytest.approx(2e-3) and pred[0, 2] == 1 and pred[2, 0] == 1 and pred[1, 3] == 0


def test_describe_says_gpu_to_dci_is_not_given_rather_than_0_ns():
    # tidy11: a site whose spec gives no NIC or tier latency (meta-llama3-24k) printed "0 ns" GPU to DCI, which reads
    # as free switches; describe of the spec says "no switch latency given" since walk6. dgx-h100-superpod gives
    # 130 ns per QM9700 tier: leaf and spine up to the attach tier are 260 ns
    from conftest import run_cli
    import json

    cmd = ["describe", "two-site-h100", "--set", "sites[0].spec=meta-llama3-24k", "--set", "sites[0].set=[]"]
    east, west = json.loads(run_cli(*cmd, "--json", check=True).stdout)["sites"]
    assert east["up_latency_s"] == 0 and west["up_latency_s"] == pytest.approx(2 * 130e-9)
    lines = run_cli(*cmd, check=True).stdout.splitlines()
    row = {ln.split()[0]: ln.split() for ln in lines if ln.startswith(("east ", "west "))}
    assert row["east"][-3:] == ["not", "given", "-"] and row["west"][-3:] == ["260.0", "ns", "-"]
    assert any(ln.startswith("GPU to DCI: one way from a GPU up to its DCI port") and "not given: the site's spec "
               "gives no NIC or tier latency" in ln for ln in lines)
    plain = run_cli("describe", "two-site-h100", check=True).stdout
    assert "not given" not in plain and "GPU to DCI:" not in plain  # every site gives its latency: no note


def test_ring_traffic_on_three_equal_spans_gets_the_direct_span_plus_half_the_two_hop_path():
    # each site sends V to the next round a 3-site ring of spans of capacity C: routed, each forward span carries
    # V (time V/C). Split: x on the direct span, 1 - x on the 2-hop path, whose two reverse hops each carry two
    # pairs' 2-hop shares, so x = 2(1 - x): x = 2/3, time 2V/(3C), a rate of C + C/2 (direct + half the 2-hop).
    r = build(region_dict(count=3, topology="ring"))
    C = r.span_bandwidth_Bps[0]
    a, b = np.arange(3), (np.arange(3) + 1) % 3
    loads, lat = r.split_loads(a, b, 1e9)
    assert (loads / np.repeat(r.span_bandwidth_Bps, 2)).max() == pytest.approx(1e9 / (1.5 * C), rel=1e-6)
    assert loads.sum() == pytest.approx(3 * 1e9 * (2 / 3 + 2 * 1 / 3), rel=1e-6)  # 2/3 one hop, 1/3 two hops
    assert lat == pytest.approx(2 * r.spans["latency_s"][0])  # the 2-hop path carries a share: its latency
    # one span cut: its pair has only the other path left, as the route has
    cut = r.with_failures("dci:0-1")
    loads, lat = cut.split_loads(np.array([0]), np.array([1]), 1e9)
    assert loads[0:2].sum() == 0 and loads.sum() == pytest.approx(2e9)
    assert lat[0] == pytest.approx(2 * r.spans["latency_s"][0])


def test_one_pair_alone_fills_its_direct_span_and_every_two_hop_path_of_a_mesh():
    # max-flow of one pair over a 4-site mesh of equal spans C: the direct span and two 2-hop paths, 3C
    r = build(region_dict(count=4, topology="mesh"))
    C = r.span_bandwidth_Bps[0]
    loads, _ = r.split_loads(np.array([0]), np.array([1]), 1e9)
    assert (loads / np.repeat(r.span_bandwidth_Bps, 2)).max() == pytest.approx(1e9 / (3 * C), rel=1e-6)


def test_a_small_pair_beside_a_large_one_keeps_its_idle_direct_span():
    # 4-site mesh of equal spans C: s-0 sends 10 GB to s-1 over its direct span and both 2-hop paths (10/3 GB each,
    # the least busiest span); s-1 sends 1 GB back, which its idle direct span or either idle 2-hop path carries
    # without raising that time: the least latency-weighted bytes is the direct span, one span's latency. A
    # one-objective programme with the latency as a tie-break 1e-7 below the time sent it over a 2-hop path (HiGHS
    # stops within its tolerance), doubling the pair's latency.
    r = build(region_dict(count=4, topology="mesh"))
    assert r.span_names()[0] == "dci:s-0-s-1"
    loads, lat = r.split_loads(np.array([0, 1]), np.array([1, 0]), np.array([10e9, 1e9]))
    assert loads.max() == pytest.approx(10e9 / 3, rel=1e-6)
    assert loads[1] == pytest.approx(1e9, rel=1e-6)  # span 0's back direction: s-1 -> s-0, the whole 1 GB
    assert loads.sum() == pytest.approx(10e9 / 3 * (1 + 2 + 2) + 1e9, rel=1e-6)  # no 2-hop share for the 1 GB
    assert lat == pytest.approx([2 * r.spans["latency_s"][0], r.spans["latency_s"][0]])


def test_a_long_direct_span_still_carries_its_share_and_small_transfers_keep_the_short_route():
    from topo.engine.region_estimate import dci_phase

    # walk12's case: a 3-site ring with one span at 800 km: routed by latency it carried nothing
    d = region_dict(count=3, topology="ring", distance_km=100)
    d["interconnect"]["spans"] = [{"sites": ["s-0", "s-2"], "distance_km": 800}]
    r = build(d)
    a, b = np.arange(3), (np.arange(3) + 1) % 3
    routed = r.route_loads(a, b, 1e9)
    assert r.span_names()[1] == "dci:s-0-s-2" and routed[2:4].sum() == 0  # the long span carried nothing
    big, loads = dci_phase(r, a, b, 1e12, 4)
    assert loads[2:4].sum() > 0
    assert big.bandwidth_s == pytest.approx(1e12 / (1.5 * r.span_bandwidth_Bps[0]), rel=1e-6)
    small, loads = dci_phase(r, a, b, 1e3, 4)
    assert np.array_equal(loads, r.route_loads(a, b, 1e3))  # latency-bound: the route alone is faster
