"""The floor plan: racks per row from the spec or the hall's width, halls sized by power and rows, a campus grid
around a central network room, floor area and cooling per hall (issue 22). Hand arithmetic on the catalog's
floor.toml: 0.6 m racks, 2.4 m row pitch, 4 m slack, 60 x 50 m halls of 30 MW, 20 m apart."""

import math

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.plan import plan
from topo.spec import spec_from_dict
from topo.spec.load import load_spec


def _plan(*floor, spec="h100-100k", **kw):
    layers = [("t", {"floor": dict(floor)})] if floor else []
    return plan(spec, layers=layers + kw.pop("layers", []), collectives=False, **kw)


def test_racks_per_row_from_the_spec_or_the_hall_width():
    r = _plan()
    assert (r.floor.racks_per_row, r.floor.racks_per_row_source) == (100, "hall_width_m / rack_width_m")
    r = _plan(("racks_per_row", 20))
    # a unit is 8 server racks + its leaf rack = 9: 2 units per row; a pod is 7 units and 2 network racks (65
    # positions). Pods follow one another along the rows (issue 32: a pod took 4 rows + a network row of its own,
    # 280 rows, 32% of the positions used): at least 56 x 65 / 20 rows, fewer than the whole rows of old
    assert (r.floor.racks_per_row, r.floor.racks_per_row_source, r.floor.units_per_row) == (20, "floor.racks_per_row",
                                                                                          2)
    assert math.ceil(56 * 65 / 20) <= r.floor.rows < 56 * (4 + 1)
    r = _plan(("hall_width_m", 12))  # 20 racks per row from a 12 m hall
    assert r.floor.racks_per_row == 20 and r.floor.units_per_row == 2


def test_a_hall_narrower_than_a_unit_says_where_its_rows_come_from():
    # review finding: hall_width_m = 1 printed "9 racks per row (hall_width_m / rack_width_m), 1 units per row":
    # 1 m / 0.6 m holds 1 rack; the 9 are a unit's 8 server racks + its leaf rack, each unit in a row of its own
    r = _plan(("hall_width_m", 1))
    assert (r.floor.racks_per_row, r.floor.units_per_row) == (9, 1)
    assert r.floor.racks_per_row_source == "a unit's racks; hall_width_m / rack_width_m holds fewer"
    p = run_cli("plan", "dgx-h100-superpod", "--set", "plan.floor.hall_width_m=1")
    assert p.returncode == 0 and ", 1 unit of 9 racks per row (a pod: 4 units), 5 rows; " in p.stdout, p.stderr


def test_the_floor_line_names_a_units_racks():
    # walk13: gb200-nvl72-superpod's floor said "100 units per row" where its unit is one NVL72 rack and the README
    # speaks of scalable units of 8 racks (its pods: units_per_pod = 8, NVIDIA's DGX SuperPOD GB200 RA); a 100-rack
    # row (hall_width_m / rack_width_m = 60 / 0.6) holds 100 one-rack units, the leaves sitting with the spines
    p = run_cli("plan", "gb200-nvl72-superpod")
    assert p.returncode == 0, p.stderr
    assert "100 racks per row (hall_width_m / rack_width_m), 100 units of 1 rack per row (a pod: 8 units), 1 row; " \
        in p.stdout, p.stdout


def test_halls_hold_as_many_pods_as_their_power_allows():
    # a pod: 224 servers x 10.2 kW + 32 spines + 56 leaves at 1,291 W with optics (747 W + 32 cages x 17 W,
    # switches.toml) = 2.398 MW; 5 MW halls hold 2
    pod_W = 224 * 10_200 + (32 + 56) * (747 + 32 * 17)
    r = _plan(("hall_power_W", 5e6))
    assert r.floor.halls[0].it_power_W == pytest.approx(2 * pod_W)
    assert (r.floor.pods_per_hall, r.floor.pods_per_hall_limit, r.floor.num_halls) == (2, "power", 28)
    # the default: 30 MW // 2.398 MW = 12 pods a hall, 5 halls, the last with 56 - 4 x 12 = 8
    r = _plan()
    assert (r.floor.pods_per_hall, r.floor.pods_per_hall_limit, r.floor.num_halls) == (30e6 // pod_W, "power", 5)
    assert r.floor.halls[-1].pods == 56 - 4 * 12
    # ... and as many as their rows allow: a 20 m deep hall has 20 x 0.55 (rack_area_fraction) / 2.4 = 4 rows of 100
    # positions, at most 400 / 65 = 6 pods of 65 racks (5 once no unit is split across two rows)
    r = _plan(("hall_depth_m", 20))
    assert r.floor.pods_per_hall_limit == "rows" and 4 * 100 // 65 - 1 <= r.floor.pods_per_hall <= 4 * 100 // 65
    assert max(h.rows for h in r.floor.halls) <= 4


def test_a_pod_bigger_than_a_hall_gets_a_hall_of_its_own_and_a_note():
    r = _plan(("hall_power_W", 1e6))
    assert r.floor.pods_per_hall == 1 and r.floor.num_halls == 56
    assert any("bigger than a hall" in n for n in r.notes)


def test_campus_grid_keeps_inter_hall_links_short():
    # 5 halls in a 3 x 2 grid, 20 m apart: 3 x 60 + 2 x 20 = 220 m wide; each full hall's 9 rows at 2.4 m take 55%
    # of its depth (rack_area_fraction): 2 x 9 x 2.4 / 0.55 + 20 m deep. The core room at the centre: the longest
    # spine-core link is at most half the width plus half the depth, plus 4 m of slack; halls in a line 60 m apart
    # (an older layout) made 850 m
    r = _plan()
    assert r.floor.halls[0].rows == 9
    assert (r.floor.campus_columns, r.floor.campus_width_m) == (3, 220)
    assert r.floor.campus_depth_m == pytest.approx(2 * 9 * 2.4 / 0.55 + 20)
    assert r.floor.longest_m["spine-core"] <= (r.floor.campus_width_m + r.floor.campus_depth_m) / 2 + 4
    assert not [t for t in r.bom.transceivers if "FR4" in t.type]  # no 2 km optics left
    # the 4-tier design (10 halls in a 4 x 3 grid) stays within a few hundred metres too
    four = _plan(spec="h100-100k-4tier")
    assert max(four.floor.longest_m.values()) < 300


def test_floor_area_is_the_halls_and_the_central_room():
    # halls as deep as their rows need: rows x 2.4 m / 0.55 (rows take 55% of the floor, the rest cross aisles,
    # cooling and power); 4 halls of 9 rows and one of 6, 60 m wide; the central room: 256 cores at 19 per 25 kW
    # rack (1,291 W each) = 14 racks in a row of 14 x 0.6 m
    r = _plan()
    assert r.floor.core_room_racks == math.ceil(256 / (25_000 // 1_291)) == 14
    assert [h.rows for h in r.floor.halls] == [9, 9, 9, 9, 6]
    assert r.floor.area_m2 == pytest.approx((4 * 9 + 6) * 60 * 2.4 / 0.55 + 14 * 0.6 * 2.4 / 0.55)
    assert r.headline()["floor_area_m2"] == r.floor.area_m2


def test_every_bundled_floor_takes_2_5_to_4_m2_per_rack():
    # issue 32: typical halls take 2.5-3.5 m2 per rack, aisles included; whole rows per pod gave 4.96 m2 on the
    # default, 9.6 on the islands design, 81 on the SuperPOD and 42 on GB200
    from topo.spec import bundled_specs

    for name in bundled_specs():
        f = _plan(spec=name).floor
        assert 2.5 <= f.area_m2 / (f.server_racks + f.network_racks) <= 4, name


def test_spine_racks_sit_among_their_pods_units():
    # issue 32: spine racks at the hall's centre gave one scalable unit 31.6 m leaf-spine cables; among the pod's
    # units (in the middle of its 65 positions, rows running back and forth) no leaf is more than a row's half and
    # a row away
    r = _plan(spec="dgx-h100-superpod")  # one pod of 4 units in one row: 4 x 9 + 2 racks
    assert r.floor.longest_m["leaf-spine"] <= (2 * 9 + 1) * 0.6 + 4
    assert _plan().floor.longest_m["leaf-spine"] <= 60 / 2 + 2.4 + 4


def test_cooling_follows_rack_power_and_the_servers_needs():
    # cooling.toml: air to 25 kW, rear door to 50 kW, direct liquid to 140 kW
    assert _plan().floor.cooling == "rear_door"  # 4 x 10.2 kW = 40.8 kW
    assert _plan(("servers_per_rack", 2)).floor.cooling == "air"  # 20.4 kW
    assert _plan(spec="meta-llama3-24k").floor.cooling == "air"  # Llama 3's 2-server racks
    nvl = _plan(spec="gb200-nvl72-superpod")
    assert nvl.floor.cooling == "direct_liquid" and all(h.cooling == "direct_liquid" for h in nvl.floor.halls)
    # an NVL72 rack needs liquid whatever its load (servers.toml cooling = "direct_liquid")
    light = _plan(layers=[("t", {"servers": {"GB200 NVL72 compute tray": {"rack_power_W": 132000}},
                                 "cooling": {"air": {"max_rack_W": 200000}}})], spec="gb200-nvl72-superpod")
    assert light.floor.cooling == "direct_liquid"
    # cooling equipment is a capex line: IT power x its $/W
    r = _plan()
    assert r.capex.cooling_usd == pytest.approx(r.power.it_power_W * 0.3)


def test_a_rack_beyond_every_cooling_type_is_an_error():
    with pytest.raises(TopoError, match="beyond every cooling type") as e:
        _plan(("servers_per_rack", 16), ("rack_power_W", 200_000))
    assert e.value.key == "plan.floor.servers_per_rack"


def test_network_racks_by_space_and_power():
    # 8 leaves of a rail-optimized unit at 1,291 W: one 25 kW rack each unit; a pod's 32 spines at 19 per rack: 2;
    # 256 cores: 14; 72 Arista 7800 at 20.2 kW: one each
    r = _plan()
    assert r.floor.network_racks == 392 * 1 + 56 * 2 + 14
    with pytest.raises(TopoError, match="does not fit a network rack"):
        _plan(("network_rack_power_W", 10_000), spec="meta-llama3-24k")


def test_top_of_rack_only_where_a_unit_fits_a_rack():
    with pytest.raises(TopoError, match="cannot sit on top of the rack") as e:
        _plan(("leaf_placement", "top_of_rack"))
    assert e.value.key == "plan.floor.leaf_placement"
    r = _plan(("leaf_placement", "middle_of_row"))
    # the leaf rack between server racks 3 and 4: at most 4 racks away
    assert r.floor.longest_m["nic-leaf"] == pytest.approx(4 * 0.6 + 4)
    assert _plan().floor.longest_m["nic-leaf"] == pytest.approx(8 * 0.6 + 4)


def test_floor_is_in_the_json_document():
    r = _plan()
    d = r.to_dict()
    assert d["floor"]["area_m2"] == pytest.approx(r.floor.area_m2) and r.floor.area_m2 > 0
    assert len(d["floor"]["halls"]) == 5 and d["floor"]["halls"][0]["cooling"] == "rear_door"
    assert {f["key"] for f in d["inputs"]} >= {"floor.hall_power_W", "floor.hall_width_m", "cooling.rear_door.max_rack_W"}
    assert all(f["status"] in ("published", "secondary", "derived", "assumption", "override") and f["source"]
               for f in d["inputs"])
    assert math.isfinite(d["floor"]["campus_width_m"])


def test_islands_have_their_own_halls_and_network_rooms():
    # h100-100k-islands (SemiAnalysis' 4 islands of 24,576 GPUs, 7:1 above): 24 pods an island, 12 fit a hall by
    # power (30 MW // 2.33 MW), so each island takes 2 halls of 12 pods, 5 rows each (12 pods of 4 units x 9 racks +
    # 2 spine racks = 456 positions); its 2 halls (60 m wide, 5 x 2.4 / 0.55 = 21.8 m deep, 20 m apart) stand in a
    # 140 m block around its network room (the island's cores); the 4 blocks in a 2 x 2 grid around the central
    # room (the 4th tier only)
    r = _plan(spec="h100-100k-islands")
    f = r.floor
    assert (f.islands, f.island_tier, f.num_halls, f.pods_per_hall) == (4, "core", 8, 12)
    assert [h.pods for h in f.halls] == [12] * 8 and [h.rows for h in f.halls] == [5] * 8
    hall_d = 5 * 2.4 / 0.55
    assert f.campus_width_m == 2 * (2 * 60 + 20) + 20
    assert f.campus_depth_m == pytest.approx(2 * hall_d + 20)
    # intra-island: every spine-core link stays inside the island's block (before islands had rooms, spine-core ran
    # 219 m to the campus's centre)
    assert f.longest_m["spine-core"] <= 140 / 2 + hall_d / 2 + 4
    assert f.longest_m["leaf-spine"] <= 30 + 2.4 + 4  # among the pod's own units
    # cross-island: every core-super-spine link runs from an island room, e.g. (70, hall_d / 2), to the central
    # room (150, hall_d + 10), all of the same length
    up = f.levels == f.levels.max()
    assert f.lengths_m[up] == pytest.approx(abs(70 - 150) + abs(hall_d / 2 - (hall_d + 10)) + 4)
    # 512 cores per island at 19 per 25 kW network rack (1,291 W each with optics): 27 racks in a row per island
    # room; the central room's 256 super-spines (tier73: each hosts 2 planes' switches) ceil(256 / 19) = 14
    assert (f.island_room_racks, f.core_room_racks) == (27, 14)
    room = 27 * 0.6 * 2.4 / 0.55
    assert f.area_m2 == pytest.approx(8 * 60 * hall_d + 4 * room + 14 * 0.6 * 2.4 / 0.55)


def test_a_fabric_without_islands_keeps_every_tier_above_the_pods_in_the_central_room():
    r = _plan()
    assert (r.floor.islands, r.floor.island_tier, r.floor.island_room_racks) == (1, None, 0)


def test_nvl72_leaves_share_network_racks_with_the_spines():
    # issue 32: GB200 had one network rack per compute rack (each rack's 4 leaves alone in a 42U, 25 kW rack).
    # NVIDIA's DGX SuperPOD GB200 RA builds the compute fabric for a whole SU of 8 racks, leaf switches included,
    # laid out in one row (network-fabrics and dgx-superpod-architecture pages): a pod's (SU's) leaves share network
    # racks beside its spines, packed by the network rack's space and power (floor.toml, switches.toml)
    from topo.plan.catalog import load_catalog

    cat = load_catalog()
    sw, fl = cat.switches["QM9700"], cat.floor
    per_rack = min(int(fl.network_rack_units.value // sw.rack_units.value),
                   int(fl.network_rack_power_W.value // sw.power_with_optics_W.value))
    r = _plan(spec="gb200-nvl72-superpod")
    f = r.floor
    pods, racks_per_pod = 4, 8  # 32 racks in SUs of 8 (the spec)
    leaves, spines, cores = (next(s.count for s in r.bom.switches if s.tier == t) for t in ("leaf", "spine", "core"))
    want = pods * (math.ceil(leaves / pods / per_rack) + math.ceil(spines / pods / per_rack)) \
        + math.ceil(cores / per_rack)
    assert f.leaf_placement == "with_spines" and f.network_racks == want < f.server_racks
    assert any(n.startswith("leaves beside the spines") and "GB200 RA" in n for n in f.notes)
    # the NIC cables run from a rack to the middle of its SU's row: at most half the SU's racks and the network
    # racks' half away, plus the slack
    pod_net = (want - math.ceil(cores / per_rack)) // pods
    assert f.longest_m["nic-leaf"] <= (racks_per_pod / 2 + pod_net) * fl.rack_width_m.value + fl.slack_m.value
    # the old placement, one leaf rack per compute rack, is still there to ask for
    old = _plan(("leaf_placement", "end_of_row"), spec="gb200-nvl72-superpod").floor
    assert old.network_racks == f.server_racks + pods * math.ceil(spines / pods / per_rack) + math.ceil(
        cores / per_rack)


def test_nvl72_units_that_cross_racks_share_them():
    # walk22: units of 32 compute trays under a leaf per rail, pods of 9 units (2:1 above them): 288 trays fill 16
    # NVL72 racks of 18 (a rack is one 72-GPU NVLink domain: gb200-nvl72-superpod.toml, DGX GB200 RA), so 2 pods
    # take 32 racks; the floor gave each unit ceil(32 / 18) = 2 racks of its own, 36 racks for 576 trays (56 racks
    # too many at 32k GPUs). The NVLink switch trays (9 a rack) already counted the domains.
    def tier(name, **kw):
        return {"name": name, "model": "SN5600 (64 x 800G)", "radix": 64, "port_rate": "800 Gb/s", **kw}
    spec = spec_from_dict({
        "name": "nvl72-32-tray-units", "gpu": "GB200", "scale_up": {"gpus_per_domain": 72},
        "server": {"gpus": 4, "nics": 4, "nic_rate": "800 Gb/s", "nic_model": "ConnectX-8"},
        "cluster": {"num_units": 18},
        "fabric": {"kind": "rail_optimized", "technology": "roce", "servers_per_unit": 32, "units_per_pod": 9,
                   "tiers": [tier("leaf", oversubscription=1), tier("spine", oversubscription=2), tier("core")]}})
    r = plan(spec, collectives=False)
    assert r.floor.servers_per_rack == 18
    assert r.floor.server_racks == 18 * 32 // 18 == 32
    assert sum(h.server_racks for h in r.floor.halls) == 32
    assert any("units of 32 servers share racks of 18" in n for n in r.floor.notes)
    # the bundled layout (a unit = one rack) is unchanged: 32 racks for 32 units
    assert plan("gb200-nvl72-superpod", collectives=False).floor.server_racks == 32


def test_nvl72_units_share_racks_across_pods_that_do_not_fill_whole_racks():
    # walk22's leftover (plan59): the bundled spec's own rack-crossing alternative (gb200-nvl72-superpod.toml:
    # --set fabric.servers_per_unit=24 --set cluster.num_units=24) has pods of 8 x 24 = 192 trays, 10.67 NVL72 racks
    # of 18 (a rack is one 72-GPU NVLink domain, DGX GB200 RA); each unit kept ceil(24 / 18) = 2 racks of its own:
    # 48 racks for 576 trays. A rack is one domain whichever pod its trays reach, so the cluster's racks are
    # ceil(576 / 18) = 32 (the 288 NVLink switch trays at 9 a rack), a rack standing in the pod of its first tray:
    # pods of ceil(192 / 18) = 11, ceil(384 / 18) - 11 = 11 and 32 - 22 = 10 racks
    r = plan(load_spec("gb200-nvl72-superpod", ["fabric.servers_per_unit=24", "cluster.num_units=24"]),
             collectives=False)
    f = r.floor
    assert f.server_racks == math.ceil(576 / 18) == 32
    assert sum(h.server_racks for h in f.halls) == 32
    trays = next(s for s in r.bom.switches if s.model == "NVLink switch tray")
    assert trays.count == 9 * f.server_racks
    # units of 24 trays take 2, 1, 1, 2, ... racks and their leaf rack: the floor line names both lengths
    assert (f.unit_racks_least, f.unit_racks) == (2, 3)
    assert any("across pods too" in n and "every pod keeps 11 positions" in n for n in f.notes)
    p = run_cli("plan", "gb200-nvl72-superpod", "--no-collectives", "--set", "fabric.servers_per_unit=24", "--set",
                "cluster.num_units=24")
    assert p.returncode == 0 and "32 server racks of 18 servers" in p.stdout and "units of 2-3 racks per row" \
        in p.stdout, p.stdout
