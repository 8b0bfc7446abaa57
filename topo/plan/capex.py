"""Capital cost: servers, network (switches + optics + cables), storage and front-end network, cooling equipment
and the facility; per GPU and the network's share. Every price comes from the catalog with its source and status, a
user overrides it with a quote, and :mod:`topo.plan.cost_range` prices the same lines at every price's low and high
end.

    servers    = servers x server price
    network    = switches + transceivers + cables (the bill of materials)
    storage    = storage servers x storage server price   (the count from :mod:`topo.plan.storage`)
    front-end  = servers x front-end network per server
    cooling    = IT power x the hall cooling's capex per W (rear-door, direct liquid; air is in the facility)
    facility   = capex_usd_per_W x (IT power if capex_basis = "it", the default: Cushman & Wakefield's $ per MW of
                 critical load; facility power if "facility")
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .bom import BillOfMaterials

__all__ = ["Capex", "capex_breakdown"]


@dataclass(frozen=True)
class Capex:
    """What building the cluster costs, by part (USD)."""

    servers_usd: float
    switches_usd: float
    optics_usd: float
    cables_usd: float
    network_capex_usd: float
    storage_servers: int
    storage_usd: float
    frontend_usd: float
    cooling_usd: float
    facility_usd: float
    facility_basis: str  # "facility" (per W of IT x PUE) or "it" (per W of IT load)
    facility_basis_W: float
    capex_usd: float
    capex_per_gpu_usd: float
    network_share: float  # of capex

    def parts(self) -> dict[str, float]:
        return {"servers": self.servers_usd, "switches": self.switches_usd, "optics": self.optics_usd,
                "cables": self.cables_usd, "storage": self.storage_usd, "front-end network": self.frontend_usd,
                "cooling equipment": self.cooling_usd, "facility": self.facility_usd}

    PART_KEYS = {"servers": "servers_usd", "switches": "switches_usd", "optics": "optics_usd",
                 "cables": "cables_usd", "storage": "storage_usd", "front-end network": "frontend_usd",
                 "cooling equipment": "cooling_usd", "facility": "facility_usd"}
    """The key of each of :meth:`parts` in :meth:`to_dict` (``--json``), by its label."""

    def to_dict(self) -> dict:
        return asdict(self)


def capex_breakdown(num_gpus: int, num_servers: int, server_price_usd: float, bom: BillOfMaterials, *,
                 it_power_W: float, facility_power_W: float, facility_usd_per_W: float, facility_basis: str,
                 storage_servers: int, storage_server_price_usd: float, frontend_usd_per_server: float,
                 cooling_usd_per_W: float) -> Capex:
    """Add up the capital cost (see the module doc for each line).

    >>> from topo.plan.bom import BillOfMaterials
    >>> c = capex_breakdown(8, 1, 100.0, BillOfMaterials([], [], [], {}), it_power_W=10.0, facility_power_W=12.0,
    ...                  facility_usd_per_W=1.0, facility_basis="it", storage_servers=2,
    ...                  storage_server_price_usd=10.0, frontend_usd_per_server=5.0, cooling_usd_per_W=0.5)
    >>> c.capex_usd, c.storage_servers
    (140.0, 2)
    """
    servers = num_servers * server_price_usd
    switches = sum(s.count * s.price_usd_each for s in bom.switches)
    optics = sum(t.count * t.price_usd_each for t in bom.transceivers)
    cables = sum(c.price_usd for c in bom.cables)
    network = switches + optics + cables
    n_storage = storage_servers
    storage = n_storage * storage_server_price_usd
    frontend = num_servers * frontend_usd_per_server
    cooling = it_power_W * cooling_usd_per_W
    basis_W = facility_power_W if facility_basis == "facility" else it_power_W
    facility = basis_W * facility_usd_per_W
    total = servers + network + storage + frontend + cooling + facility
    return Capex(servers_usd=servers, switches_usd=switches, optics_usd=optics, cables_usd=cables,
                       network_capex_usd=network, storage_servers=n_storage, storage_usd=storage,
                       frontend_usd=frontend, cooling_usd=cooling, facility_usd=facility,
                       facility_basis=facility_basis, facility_basis_W=basis_W, capex_usd=total,
                       capex_per_gpu_usd=total / num_gpus, network_share=network / total if total else 0.0)
