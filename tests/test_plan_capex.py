"""Capex: the facility priced per watt of critical IT load (Cushman & Wakefield's basis, the default) or, with
capex_basis = "facility", per watt of facility power (IT power x PUE)."""

import pytest

from topo.plan import load_catalog, plan


def test_facility_capex_is_per_watt_of_it_load_by_default():
    # Cushman & Wakefield's Data Center Development Cost Guide 2025 quotes $ per MW of critical load: the IT load
    a = plan("dgx-h100-superpod", collectives=False, pue=1.0)
    b = plan("dgx-h100-superpod", collectives=False, pue=1.5)
    assert b.capex.facility_basis == "it"
    assert b.capex.facility_usd == pytest.approx(a.capex.facility_usd, rel=1e-12)  # PUE does not move it
    assert b.capex.facility_usd == pytest.approx(11.7 * b.power.it_power_W, rel=1e-12)


def test_facility_capex_is_per_watt_of_facility_power():
    layer = [("t", {"facility": {"capex_basis": "facility"}})]
    a = plan("dgx-h100-superpod", collectives=False, pue=1.0, layers=layer)
    b = plan("dgx-h100-superpod", collectives=False, pue=1.5, layers=layer)
    assert b.power.it_power_W == pytest.approx(a.power.it_power_W, rel=1e-12)  # the same IT load
    assert b.power.facility_power_W == pytest.approx(1.5 * b.power.it_power_W, rel=1e-12)
    assert b.capex.facility_usd == pytest.approx(1.5 * a.capex.facility_usd, rel=1e-12)
    per_W = load_catalog().facility.capex_usd_per_W.value
    assert b.capex.facility_usd == pytest.approx(b.power.facility_power_W * per_W, rel=1e-12)
    parts = b.capex
    # capex also holds storage, the front-end network and cooling equipment (issue 22)
    assert parts.capex_usd == pytest.approx(parts.servers_usd + parts.network_capex_usd + parts.storage_usd
                                            + parts.frontend_usd + parts.cooling_usd + parts.facility_usd)
    assert b.capex.facility_basis == "facility"
