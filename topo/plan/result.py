"""The result of planning one design (:class:`PlanResult`) and of comparing several (:class:`DesignComparison`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .blast import BlastRadius
from .bom import BillOfMaterials
from .compute import ComputeBudget
from .capex import Capex
from .network import NetworkFigures
from .power import PowerBreakdown
from .reliability import Reliability

__all__ = ["PlanResult", "DesignComparison"]


@dataclass(frozen=True)
class PlanResult:
    """Everything ``topo plan`` reports for one design; ``to_dict()`` is its ``--json`` document."""

    name: str
    source: str
    gpu: str
    num_gpus: int
    num_servers: int
    server_model: str
    floor: dict
    bom: BillOfMaterials
    power: PowerBreakdown
    capex: Capex
    compute: ComputeBudget
    reliability: Reliability
    blast_radius: list[BlastRadius]
    network: NetworkFigures
    assumptions: list[dict]
    catalog_versions: dict[str, str]
    notes: list[str] = field(default_factory=list)
    failure_impact: list = field(default_factory=list)  # FailureImpact per part (topo.plan.blast)

    def headline(self) -> dict:
        """The figures designs are compared on (flat, JSON-ready)."""
        p, c, n, r = self.power, self.capex, self.network, self.reliability
        return {
            "name": self.name, "num_gpus": self.num_gpus, "switches": self.bom.num_switches,
            "transceivers": self.bom.num_transceivers, "cables": self.bom.num_cables,
            "it_power_W": p.it_power_W, "facility_power_W": p.facility_power_W,
            "network_power_W": p.network_W, "energy_per_year_Wh": p.energy_per_year_Wh,
            "energy_cost_per_year_usd": p.energy_cost_per_year_usd, "capex_usd": c.capex_usd,
            "network_capex_usd": c.network_capex_usd, "capex_per_gpu_usd": c.capex_per_gpu_usd,
            "network_share": c.network_share, "bisection_bandwidth_per_gpu_Bps": n.bisection_bandwidth_per_gpu_Bps,
            "crosspod_all_reduce_gpus": n.all_reduce_gpus, "crosspod_all_reduce_s": n.all_reduce_s,
            "crosspod_alltoall_gpus": n.alltoall_gpus, "crosspod_alltoall_s": n.alltoall_s,
            "peak_flops": self.compute.peak_flops[self.compute.precision], "flop": self.compute.flop,
            "first_optical_failure_s": r.first_optical_failure_s, "goodput": r.goodput,
            "effective_flop": r.effective_flop,
        }

    def to_dict(self) -> dict:
        h = self.headline()
        return {
            "name": self.name, "source": self.source, "gpu": self.gpu, "num_gpus": self.num_gpus,
            "num_servers": self.num_servers, "server_model": self.server_model,
            "it_power_W": h["it_power_W"], "facility_power_W": h["facility_power_W"],
            "energy_per_year_Wh": h["energy_per_year_Wh"], "energy_cost_per_year_usd": h["energy_cost_per_year_usd"],
            "capex_usd": h["capex_usd"], "network_capex_usd": h["network_capex_usd"],
            "transceivers": self.bom.num_transceivers, "peak_flops": self.compute.peak_flops,
            "goodput": self.reliability.goodput,
            "floor": self.floor, "bom": self.bom.to_dict(), "power": self.power.to_dict(),
            "capex": self.capex.to_dict(), "compute": self.compute.to_dict(),
            "reliability": self.reliability.to_dict(), "blast_radius": [b.to_dict() for b in self.blast_radius],
            "failure_impact": [x.to_dict() for x in self.failure_impact],
            "network": self.network.to_dict(), "assumptions": self.assumptions,
            "catalog_versions": self.catalog_versions, "notes": self.notes,
        }

    def to_frame(self):
        """The headline figures as a one-row pandas DataFrame (``pd.concat`` several to compare)."""
        import pandas as pd

        return pd.DataFrame([self.headline()])


@dataclass(frozen=True)
class DesignComparison:
    """Several designs side by side."""

    plans: list[PlanResult]

    def to_dict(self) -> dict:
        return {"designs": [p.to_dict() for p in self.plans]}

    def to_frame(self):
        """One column per design, one row per headline figure."""
        import pandas as pd

        return pd.DataFrame({p.name: p.headline() for p in self.plans}).drop(index="name")
