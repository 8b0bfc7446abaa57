"""Capital cost (capex): servers, network (switches + optics + cables) and facility (per watt of facility
power); per GPU and the network's share. Every price is a catalog assumption a user overrides."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .bom import BillOfMaterials

__all__ = ["Capex", "capex_breakdown"]


@dataclass(frozen=True)
class Capex:
    servers_usd: float
    switches_usd: float
    optics_usd: float
    cables_usd: float
    network_capex_usd: float
    facility_usd: float
    capex_usd: float
    capex_per_gpu_usd: float
    network_share: float  # of capex

    def parts(self) -> dict[str, float]:
        return {"servers": self.servers_usd, "switches": self.switches_usd, "optics": self.optics_usd,
                "cables": self.cables_usd, "facility": self.facility_usd}

    def to_dict(self) -> dict:
        return asdict(self)


def capex_breakdown(num_gpus: int, num_servers: int, server_price_usd: float, bom: BillOfMaterials,
                    facility_power_W: float, facility_usd_per_W: float) -> Capex:
    servers = num_servers * server_price_usd
    switches = sum(s.count * s.price_usd_each for s in bom.switches)
    optics = sum(t.count * t.price_usd_each for t in bom.transceivers)
    cables = sum(c.price_usd for c in bom.cables)
    network = switches + optics + cables
    facility = facility_power_W * facility_usd_per_W
    total = servers + network + facility
    return Capex(servers_usd=servers, switches_usd=switches, optics_usd=optics, cables_usd=cables,
                 network_capex_usd=network, facility_usd=facility, capex_usd=total,
                 capex_per_gpu_usd=total / num_gpus, network_share=network / total if total else 0.0)
