"""The floor plan: racks per row from the spec or the hall's width, halls sized by power and rows, a campus grid
around a central network room, floor area and cooling per hall (issue 22). Hand arithmetic on the catalog's
floor.toml: 0.6 m racks, 2.4 m row pitch, 4 m slack, 60 x 50 m halls of 30 MW, 20 m apart."""

import math

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.plan import plan


def _plan(*floor, spec="h100-100k", **kw):
    layers = [("t", {"floor": dict(floor)})] if floor else []
    return plan(spec, layers=layers + kw.pop("layers", []), collectives=False, **kw)


def test_racks_per_row_from_the_spec_or_the_hall_width():
    r = _plan()
    assert (r.floor.racks_per_row, r.floor.racks_per_row_source) == (100, "hall_width_m / rack_width_m")
    r = _plan(("racks_per_row", 20))
    # a unit is 8 server racks + its leaf rack = 9: 2 units per row, a 7-unit pod takes 4 rows + its network row
    assert (r.floor.racks_per_row, r.floor.racks_per_row_source, r.floor.units_per_row) == (20, "floor.racks_per_row",
                                                                                          2)
    assert r.floor.rows == 56 * (4 + 1)
    r = _plan(("hall_width_m", 12))  # 20 racks per row from a 12 m hall
    assert r.floor.racks_per_row == 20 and r.floor.units_per_row == 2


def test_a_hall_narrower_than_a_unit_says_where_its_rows_come_from():
    # review finding: hall_width_m = 1 printed "9 racks per row (hall_width_m / rack_width_m), 1 units per row":
    # 1 m / 0.6 m holds 1 rack; the 9 are a unit's 8 server racks + its leaf rack, each unit in a row of its own
    r = _plan(("hall_width_m", 1))
    assert (r.floor.racks_per_row, r.floor.units_per_row) == (9, 1)
    assert r.floor.racks_per_row_source == "a unit's racks; hall_width_m / rack_width_m holds fewer"
    p = run_cli("plan", "dgx-h100-superpod", "--set", "plan.floor.hall_width_m=1")
    assert p.returncode == 0 and ", 1 unit per row, " in p.stdout, p.stderr


def test_halls_hold_as_many_pods_as_their_power_allows():
    # a pod: 224 servers x 10.2 kW + 32 spines + 56 leaves at 1,291 W with optics (747 W + 32 cages x 17 W,
    # switches.toml) = 2.398 MW; 5 MW halls hold 2
    pod_W = 224 * 10_200 + (32 + 56) * (747 + 32 * 17)
    r = _plan(("hall_power_W", 5e6))
    assert r.floor.halls[0].it_power_W == pytest.approx(2 * pod_W)
    assert (r.floor.pods_per_hall, r.floor.pods_per_hall_limit, r.floor.num_halls) == (2, "power", 28)
    # ... and as many as their rows allow: 50 m / 2.4 m = 20 rows, 2 rows per pod
    r = _plan()
    assert (r.floor.pods_per_hall, r.floor.pods_per_hall_limit, r.floor.num_halls) == (10, "rows", 6)
    assert r.floor.halls[-1].pods == 56 - 5 * 10


def test_a_pod_bigger_than_a_hall_gets_a_hall_of_its_own_and_a_note():
    r = _plan(("hall_power_W", 1e6))
    assert r.floor.pods_per_hall == 1 and r.floor.num_halls == 56
    assert any("bigger than a hall" in n for n in r.notes)


def test_campus_grid_keeps_inter_hall_links_short():
    # 6 halls in a 3 x 2 grid (220 x 120 m), the core room at its centre: the longest spine-core link is the corner
    # pod's, 80 + 60 m + 4 m of slack; halls in a line 60 m apart (the old layout) made 850 m
    r = _plan()
    assert (r.floor.campus_columns, r.floor.campus_width_m, r.floor.campus_depth_m) == (3, 220, 120)
    assert r.floor.longest_m["spine-core"] == pytest.approx(144)
    assert r.floor.longest_m["spine-core"] <= (r.floor.campus_width_m + r.floor.campus_depth_m) / 2 + 4
    assert not [t for t in r.bom.transceivers if "FR4" in t.type]  # no 2 km optics left
    # the 4-tier design (10 halls in a 4 x 3 grid) stays within a few hundred metres too
    four = _plan(spec="h100-100k-4tier")
    assert max(four.floor.longest_m.values()) < 300


def test_floor_area_is_the_halls_and_the_central_room():
    # 6 halls of 60 x 50 m, and the central room: 256 cores at 19 per 25 kW rack (1,291 W each) = 14 racks, one
    # 100-rack row of 0.6 m x 2.4 m: 144 m2
    r = _plan()
    assert r.floor.core_room_racks == math.ceil(256 / (25_000 // 1_291)) == 14
    assert r.floor.area_m2 == pytest.approx(6 * 60 * 50 + 100 * 0.6 * 2.4)
    assert r.headline()["floor_area_m2"] == r.floor.area_m2


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
    d = _plan().to_dict()
    assert d["floor"]["area_m2"] == pytest.approx(18_144)
    assert len(d["floor"]["halls"]) == 6 and d["floor"]["halls"][0]["cooling"] == "rear_door"
    assert {f["key"] for f in d["inputs"]} >= {"floor.hall_power_W", "floor.hall_width_m", "cooling.rear_door.max_rack_W"}
    assert all(f["status"] in ("published", "secondary", "derived", "assumption", "override") and f["source"]
               for f in d["inputs"])
    assert math.isfinite(d["floor"]["campus_width_m"])


def test_islands_have_their_own_halls_and_network_rooms():
    # h100-100k-islands (SemiAnalysis' 4 islands of 24,576 GPUs, 7:1 above): 24 pods an island, 10 fit a hall by
    # rows, so each island takes 3 halls of 8 pods; its 3 halls (60 x 50 m, 20 m apart) stand in a 2 x 2 block of
    # 140 x 120 m around its network room (the island's cores); the 4 blocks in a 2 x 2 grid of 300 x 260 m around
    # the central room (the 4th tier only)
    r = _plan(spec="h100-100k-islands")
    f = r.floor
    assert (f.islands, f.island_tier, f.num_halls, f.pods_per_hall) == (4, "core", 12, 8)
    assert [h.pods for h in f.halls] == [8] * 12
    assert (f.campus_width_m, f.campus_depth_m) == (300, 260)
    # intra-island: the farthest spine row (a hall's corner pod at x = 30 m, y = 0) to its island room at the
    # block's centre (70, 60): 40 + 60 + 4 m of slack; before islands had rooms, spine-core ran 219 m to the centre
    assert f.longest_m["spine-core"] == pytest.approx(abs(30 - 70) + abs(0 - 60) + 4)
    assert f.longest_m["leaf-spine"] <= 50  # inside a hall
    # cross-island: every core-super-spine link runs from an island room, e.g. (70, 60), to the central room
    # (150, 130): 80 + 70 + 4 = 154 m, all of them
    up = f.levels == f.levels.max()
    assert f.lengths_m[up] == pytest.approx(abs(70 - 150) + abs(60 - 130) + 4)
    # 512 cores per island at 19 per 25 kW network rack (1,291 W each with optics): 27 racks, one 100-rack row of
    # 0.6 x 2.4 m (144 m2) per island room; the central room's 512 super-spines the same
    assert (f.island_room_racks, f.core_room_racks) == (27, 27)
    assert f.area_m2 == pytest.approx(12 * 60 * 50 + 4 * 144 + 144)


def test_a_fabric_without_islands_keeps_every_tier_above_the_pods_in_the_central_room():
    r = _plan()
    assert (r.floor.islands, r.floor.island_tier, r.floor.island_room_racks) == (1, None, 0)
