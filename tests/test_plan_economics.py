"""Storage and front-end capex, the facility's capex basis, TCO with its parts, cost per GPU-hour and CO2, by hand
from the catalog's economics.toml (every rate an assumption with its source; issue 22)."""

import math

import pytest

from topo.plan import plan
from topo.plan.power import HOURS_PER_YEAR


@pytest.fixture(scope="module")
def default():
    return plan(collectives=False)


def test_storage_and_frontend_capex_follow_llama3(default, reference):
    # planner.md line 63: Llama 3 stores 240 PB on 7,500 servers (its 24,576-GPU cluster): 0.3052 per GPU
    assert "240 PB on 7,500 servers" in (reference / "planner.md").read_text()
    c = plan(layers=[("t", {"storage": {"sizing": "per_gpu"}})], collectives=False).capex  # Llama 3's ratio
    assert c.storage_servers == math.ceil(100_352 * 0.3052) == 30_628
    assert c.storage_usd == 30_628 * 25_000
    assert c.frontend_usd == 12_544 * 5_000
    # the default sizes storage from its needs (issue 32): its servers are priced the same
    assert default.capex.storage_usd == default.storage.servers * 25_000


def test_facility_capex_basis_is_stated_and_switchable(default):
    # Cushman & Wakefield, Data Center Development Cost Guide 2025, pp. 8-9: $11.7M per MW of critical load (IT)
    c = default.capex
    assert c.facility_basis == "it" and c.facility_basis_W == default.power.it_power_W
    assert c.facility_usd == pytest.approx(11.7 * default.power.it_power_W)
    fac = plan(layers=[("t", {"facility": {"capex_basis": "facility"}})], collectives=False).capex
    assert fac.facility_basis == "facility" and fac.facility_usd == pytest.approx(11.7 * default.power.facility_power_W)


def test_tco_parts_by_hand(default):
    # 5 years; servers, storage and front-end over 5-year lives, the network over 5, facility and cooling over 20;
    # maintenance 4% of hardware a year; $150k per MW of IT a year
    c, p, o = default.capex, default.power, default.ownership
    hardware = c.servers_usd + c.storage_usd + c.frontend_usd + c.network_capex_usd
    assert o.depreciation_usd == pytest.approx(hardware + (c.facility_usd + c.cooling_usd) * 5 / 20)
    assert o.energy_usd == pytest.approx(5 * p.energy_cost_per_year_usd)
    assert o.maintenance_usd == pytest.approx(5 * 0.04 * hardware)
    assert o.staff_opex_usd == pytest.approx(5 * 150_000 * p.it_power_W / 1e6)
    assert o.tco_usd == pytest.approx(sum(o.parts().values()))
    assert o.cost_per_gpu_hour_usd == pytest.approx(o.tco_usd / (100_352 * 5 * 8_760))
    # 10 years: the servers and the network are bought twice (refreshed after their 5-year lives; issue 32: they
    # were written off once, $0.80 per GPU-hour at 20 years with no word), energy and opex twice as long
    r10 = plan(layers=[("t", {"economics": {"years": 10}})], collectives=False)
    o10 = r10.ownership
    assert o10.depreciation_usd == pytest.approx(2 * hardware + (c.facility_usd + c.cooling_usd) * 10 / 20)
    assert o10.refreshes == {"servers": 1, "network": 1, "facility": 0} and o.refreshes["servers"] == 0
    assert any("servers bought 2 times" in n for n in r10.notes)
    assert o10.energy_usd == pytest.approx(2 * o.energy_usd)


def test_network_and_server_lives_are_not_swapped(default):
    # issue 30: the only test of plan/tco.py used equal lives; with 4-year servers and an 8-year network over 8 years
    # the servers are depreciated twice over, the network once; swapping the lives changes the figure
    c = default.capex
    r = plan(layers=[("t", {"economics": {"years": 8, "server_life_years": 4, "network_life_years": 8}})],
             collectives=False)
    server_class = c.servers_usd + c.storage_usd + c.frontend_usd
    facility = (c.facility_usd + c.cooling_usd) * 8 / 20
    assert r.ownership.depreciation_usd == pytest.approx(2 * server_class + c.network_capex_usd + facility)
    assert r.ownership.depreciation_usd != pytest.approx(server_class + 2 * c.network_capex_usd + facility)


def test_co2_per_year_at_the_stated_grid_intensity(default):
    # EIA FAQ id=74: 2023 U.S. generation 4,183,271 million kWh, 1,532 million t of CO2 -> 0.366 kg/kWh (issue 32)
    o, p = default.ownership, default.power
    assert o.co2_per_year_kg == pytest.approx(p.energy_per_year_Wh / 1e3 * 1532e3 / 4_183_271, rel=1e-3)
    assert o.co2_per_year_kg == pytest.approx(p.energy_per_year_Wh / 1e3 * 0.366)
    assert o.co2_per_year_kg / 1e9 == pytest.approx(p.energy_per_year_Wh / 1e12 * 0.3662, abs=0.001)
    clean = plan(layers=[("t", {"economics": {"grid_kg_co2_per_kWh": 0.02}})], collectives=False).ownership
    assert clean.co2_per_year_kg == pytest.approx(o.co2_per_year_kg * 0.02 / 0.366)
    # at the servers' average draw (issue 32), not the nameplate facility power
    assert p.energy_per_year_Wh == pytest.approx(p.average_facility_power_W * HOURS_PER_YEAR)


def test_new_figures_reach_json_and_the_comparison(default):
    d = default.to_dict()
    assert d["ownership"]["cost_per_gpu_hour_usd"] == default.ownership.cost_per_gpu_hour_usd
    assert d["capex"]["storage_usd"] > 0 and d["capex"]["facility_basis"] == "it"
    keys = {f["key"]: f for f in d["inputs"]}
    for k in ("economics.years", "economics.grid_kg_co2_per_kWh", "economics.storage_servers_per_gpu",
              "economics.opex_usd_per_MW_year", "facility.capex_basis", "servers.HGX H100.nic_module_ports"):
        assert keys[k]["source"] and keys[k]["status"]
    h = default.headline()
    for k in ("tco_usd", "cost_per_gpu_hour_usd", "co2_per_year_kg", "storage_and_frontend_capex_usd",
              "floor_area_m2", "first_job_optics_failure_s", "nic_modules"):
        assert h[k] == h[k] and h[k] is not None
