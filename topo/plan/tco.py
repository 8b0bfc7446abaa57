"""Owning and running the cluster: total cost of ownership over N years, cost per GPU-hour, CO2 per year.

    depreciation = sum over asset classes of capex x N / life   (straight line; servers + storage + front-end on
                   the server life, network (switches, optics, cables) on its own, cooling equipment and the
                   facility on the facility's); past its life a class is refreshed (bought again at today's
                   prices), so N / life can exceed 1: ``refreshes`` counts the purchases after the first
    energy       = N x energy cost per year
    maintenance  = N x maintenance fraction x hardware capex (servers, network, storage, front-end)
    staff/opex   = N x opex per MW-year x IT power (MW)
    TCO          = depreciation + energy + maintenance + staff/opex
    cost per GPU-hour = TCO / (GPUs x N x 8,760 h)   (every installed GPU, every hour)
    CO2 per year = energy per year (kWh) x grid intensity (kg CO2 per kWh)

Every rate is an assumption from ``topo/data/catalog/economics.toml`` (with its source).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .capex import Capex
from .power import HOURS_PER_YEAR, PowerBreakdown

__all__ = ["OwnershipCost", "depreciation_usd", "ownership_cost"]


@dataclass(frozen=True)
class OwnershipCost:
    """TCO over ``years`` by part, cost per GPU-hour and operational CO2 (USD, kg)."""

    years: float
    depreciation_usd: float
    energy_usd: float
    maintenance_usd: float
    staff_opex_usd: float
    tco_usd: float
    gpu_hours: float
    cost_per_gpu_hour_usd: float
    grid_kg_co2_per_kWh: float
    co2_per_year_kg: float
    refreshes: dict[str, int] = field(default_factory=dict)  # per asset class: purchases after the first in N years

    def parts(self) -> dict[str, float]:
        return {"depreciation": self.depreciation_usd, "energy": self.energy_usd,
                "maintenance": self.maintenance_usd, "staff and site opex": self.staff_opex_usd}

    PART_KEYS = {"depreciation": "depreciation_usd", "energy": "energy_usd", "maintenance": "maintenance_usd",
                 "staff and site opex": "staff_opex_usd"}
    """The key of each of :meth:`parts` in :meth:`to_dict` (``--json``), by its label."""

    def to_dict(self) -> dict:
        return asdict(self)


def depreciation_usd(capex_usd: float, years: float, life_years: float) -> float:
    """Straight-line depreciation of ``capex_usd`` charged in ``years`` over a ``life_years`` life: capex x years / life,
    more than the capex past its life (a refresh bought again at today's price; see the module doc).

    >>> depreciation_usd(100.0, 5, 20), depreciation_usd(100.0, 10, 5)
    (25.0, 200.0)
    """
    return capex_usd * years / life_years


def ownership_cost(num_gpus: int, capex: Capex, power: PowerBreakdown, *, years: float,
                   server_life_years: float, network_life_years: float, facility_life_years: float,
                   maintenance_fraction_per_year: float, opex_usd_per_MW_year: float,
                   grid_kg_co2_per_kWh: float) -> OwnershipCost:
    """TCO over ``years`` with its parts, the cost per GPU-hour and CO2 per year (see the module doc).

    >>> from topo.plan.capex import capex_breakdown
    >>> from topo.plan.bom import BillOfMaterials
    >>> from topo.plan.power import power_breakdown
    >>> p = power_breakdown(1, 1000.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.1)   # 1 kW all year: 8,760 kWh, $876
    >>> c = capex_breakdown(1, 1, 8760.0, BillOfMaterials([], [], [], {}), it_power_W=1000.0, facility_power_W=1000.0,
    ...                  facility_usd_per_W=0.0, facility_basis="it", storage_servers=0,
    ...                  storage_server_price_usd=0.0, frontend_usd_per_server=0.0, cooling_usd_per_W=0.0)
    >>> t = ownership_cost(1, c, p, years=1, server_life_years=2, network_life_years=2, facility_life_years=20,
    ...                    maintenance_fraction_per_year=0.0, opex_usd_per_MW_year=0.0, grid_kg_co2_per_kWh=0.5)
    >>> t.tco_usd, t.cost_per_gpu_hour_usd, t.co2_per_year_kg
    (5256.0, 0.6, 4380.0)
    """
    lives = {"servers": server_life_years, "network": network_life_years, "facility": facility_life_years}
    server_class = capex.servers_usd + capex.storage_usd + capex.frontend_usd
    depreciation = (depreciation_usd(server_class, years, server_life_years)
                    + depreciation_usd(capex.network_capex_usd, years, network_life_years)
                    + depreciation_usd(capex.facility_usd + capex.cooling_usd, years, facility_life_years))
    refreshes = {k: math.ceil(years / life - 1e-9) - 1 for k, life in lives.items()}
    energy = years * power.energy_cost_per_year_usd
    maintenance = years * maintenance_fraction_per_year * (server_class + capex.network_capex_usd)
    staff = years * opex_usd_per_MW_year * power.it_power_W / 1e6
    tco = depreciation + energy + maintenance + staff
    gpu_hours = num_gpus * years * HOURS_PER_YEAR
    return OwnershipCost(years=years, depreciation_usd=depreciation, energy_usd=energy, maintenance_usd=maintenance,
                         staff_opex_usd=staff, tco_usd=tco, gpu_hours=gpu_hours,
                         cost_per_gpu_hour_usd=tco / gpu_hours, grid_kg_co2_per_kWh=grid_kg_co2_per_kWh,
                         co2_per_year_kg=power.energy_per_year_Wh / 1e3 * grid_kg_co2_per_kWh,
                         refreshes=refreshes)
