"""The result of planning one design (:class:`PlanResult`) and of comparing several (:class:`DesignComparison`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..units import format_count, format_in, whole_bytes
from .blast import BlastRadius
from .bom import BillOfMaterials
from .compute import ComputeBudget
from .capex import Capex
from .cost_range import CostRange
from .electrical import Electrical
from .floor import FloorPlan
from .network import NetworkFigures
from .phasing import Phasing
from .power import PowerBreakdown
from .reliability import Reliability
from .storage import StoragePlan
from .tco import OwnershipCost
from .budget import PowerFit
from .train_time import TrainingJob, cost_per_million_tokens_usd, job_energy, standing_fraction, time_to_train

__all__ = ["PlanResult", "DesignComparison", "RANGED"]

# headline figures that depend on prices: each also comes as <key>_low and <key>_high (every price at that end)
RANGED = ("capex_usd", "capex_per_gpu_usd", "network_capex_usd", "energy_cost_per_year_usd", "tco_usd",
          "cost_per_gpu_hour_usd")


@dataclass(frozen=True)
class PlanResult:
    """Everything ``topo plan`` reports for one design; ``to_dict()`` is its ``--json`` document."""

    name: str
    source: str
    gpu: str
    num_gpus: int
    num_servers: int
    server_model: str
    floor: FloorPlan
    bom: BillOfMaterials
    power: PowerBreakdown
    capex: Capex
    ownership: OwnershipCost
    costs: CostRange
    compute: ComputeBudget
    reliability: Reliability
    blast_radius: list[BlastRadius]
    network: NetworkFigures
    assumptions: list[dict]
    catalog_versions: dict[str, str]
    notes: list[str] = field(default_factory=list)
    failure_impact: list = field(default_factory=list)  # FailureImpact per part (topo.plan.blast)
    inputs: list[dict] = field(default_factory=list)  # the floor, economics, ... values used, with sources
    electrical: Electrical | None = None  # UPS and generators (topo.plan.electrical)
    spares: list = field(default_factory=list)  # SparePool per module type and servers (topo.plan.spares)
    price_sensitivity: list = field(default_factory=list)  # cost per GPU-hour, each price alone at its ends
    storage: StoragePlan | None = None  # storage servers sized from checkpoints and the dataset (topo.plan.storage)
    deployment: Phasing | None = None  # capex, GPUs and power by quarter as the halls come online (topo.plan.phasing)
    training: TrainingJob | None = None  # --model's job on this design (topo.plan.train_time)
    power_fit: PowerFit | None = None  # the design sized to an IT power budget (topo.plan.budget)
    spare_note: str | None = None  # with a job: what it leaves for hot spares (topo.plan.spare_note), also in notes

    @property
    def nic_modules(self) -> int:
        """NIC-side optical modules (a twin-port module counts once)."""
        return sum(t.count for t in self.bom.transceivers if t.at == "nic")

    @property
    def total_floor_m2(self) -> float:
        """The campus's area and the storage room's."""
        return self.floor.area_m2 + (self.storage.floor_m2 if self.storage is not None else 0.0)

    @property
    def effective_fraction(self) -> float:
        """The share of installed GPU-hours that trains: goodput x training GPUs / installed GPUs."""
        r = self.reliability
        return r.goodput * r.training_gpus / self.num_gpus

    def training_gpus_words(self) -> str:
        """Whose GPUs the effective figures count, in words, as ``plan`` and ``report --plan`` say them: " on the
        job's 512 GPUs (8 held as hot spares, 504 idle)" with a job (plan70), " on the 24,336 GPUs not held as hot
        spares (240)" without (walk24); "" where every GPU trains."""
        rel = self.reliability
        idle = self.num_gpus - rel.training_gpus
        if not idle:
            return ""
        if self.training is None:
            return f" on the {format_count(rel.training_gpus)} GPUs not held as hot spares ({format_count(idle)})"
        held = rel.hot_spare_servers * (self.num_gpus // self.num_servers)
        return (f" on the job's {format_count(rel.training_gpus)} GPUs ({format_count(held)} held as hot spares, "
                f"{format_count(idle - held)} idle)")

    def storage_model(self) -> str:
        """Whose checkpoints and data the storage priced in the capex and TCO holds, in a few words: the job's model
        (``training``, ``--model``), ``compute-optimal`` (for the compute budget), ``plan.workload.params``, each with
        its parameters; ``per GPU`` where storage.sizing says so; "" without storage."""
        st, rel = self.storage, self.reliability
        if st is None:
            return ""
        if st.sizing == "per_gpu":
            return "per GPU"
        if self.training is not None:
            who = self.training.model
        elif rel.params_source.startswith("derived: compute-optimal"):
            who = "compute-optimal"
        else:
            who = "plan.workload.params"
        return f"{who}, {rel.params:.3g} parameters"

    def storage_sized_for(self) -> str:
        """What the storage priced in the capex and TCO was sized for, in words, as ``plan`` and ``report --plan``
        say it beside their TCO (walk31: ``plan`` without a job and ``report --train`` gave one building two TCOs,
        $6.711B and $6.569B, for storage sized for two models): :meth:`storage_model` with its checkpoints and data,
        and how to size it for a job where no model was named; "" without storage."""
        st, who = self.storage, self.storage_model()
        if st is None:
            return ""
        if st.sizing == "per_gpu":
            return "storage sized per GPU (storage.sizing = \"per_gpu\"), not for a model's checkpoints"
        out = (f"storage sized for {who} ({st.checkpoints_kept} checkpoints of "
               f"{format_in(st.checkpoint_bytes, 'TB', ',.3g')} and {st.dataset_tokens:.3g} tokens of data)")
        if who.startswith("compute-optimal"):
            out += ": a model of the compute line's FLOP; --model M --layout L sizes it for a job's model"
        return out

    @property
    def cost_per_effective_gpu_hour_usd(self) -> float:
        """TCO per GPU-hour that trains (after goodput and hot spares): cost per GPU-hour / effective fraction."""
        f = self.effective_fraction
        return self.ownership.cost_per_gpu_hour_usd / f if f > 0 else float("inf")

    @property
    def cost_per_pflop_hour_usd(self) -> float:
        """TCO per delivered PFLOP/s-hour (3.6e18 model FLOP): the cost per effective GPU-hour over the model FLOP a
        GPU delivers in an hour, ``cost per effective GPU-hour x 1e15 / (peak per GPU x MFU)``, at the compute
        budget's precision and MFU. Unlike the cost per GPU-hour it compares GPU generations by the work done."""
        k = self.compute
        per_gpu = k.peak_flop_per_s[k.precision] / self.num_gpus * k.mfu
        return self.cost_per_effective_gpu_hour_usd * 1e15 / per_gpu if per_gpu > 0 else float("inf")

    @property
    def cost_per_million_tokens_usd(self) -> float | None:
        """With ``training``: its GPUs at the cost per effective GPU-hour per million tokens trained
        (:func:`~topo.plan.train_time.cost_per_million_tokens_usd`); None without a job."""
        t = self.training
        if t is None:
            return None
        return cost_per_million_tokens_usd(self.cost_per_effective_gpu_hour_usd, t.gpus, t.tokens_per_s)

    @property
    def time_to_train(self) -> dict | None:
        """With a job and its token budget: the time at the step, the time with the plan's goodput
        (:func:`~topo.plan.train_time.time_to_train_s`), the job's GPU-hours at the latter and, where the step has an
        interval, the time with the goodput at its ends (``time_to_train_interval_s``); None otherwise."""
        return time_to_train(self.training, self.reliability.goodput)

    @property
    def energy_to_train(self) -> dict | None:
        """With a job: its share of the plan's average facility power over its tokens with the goodput
        (:func:`~topo.plan.train_time.job_energy`): J per token, kWh per million tokens, their cost and, with its
        token budget, the energy to train, its GPUs at their idle draw while it stands; None without a job."""
        p, r, t = self.power, self.reliability, self.training
        return job_energy(t, r.goodput, p.average_facility_power_W, self.num_gpus, p.electricity_usd_per_kWh,
                          p.standing_drop_W(t.gpus) if t is not None else 0.0,
                          standing_fraction(r.lost_fraction_by_part))

    def headline(self) -> dict:
        """The figures designs are compared on (flat, JSON-ready)."""
        p, c, n, r, o, f = self.power, self.capex, self.network, self.reliability, self.ownership, self.floor
        return whole_bytes({
            "name": self.name, "num_gpus": self.num_gpus, "switches": self.bom.num_switches,
            "transceivers": self.bom.num_transceivers, "nic_modules": self.nic_modules, "cables": self.bom.num_cables,
            "halls": f.num_halls, "floor_area_m2": f.area_m2, "total_floor_m2": self.total_floor_m2,
            "cooling": f.cooling, "pue": p.pue, "average_facility_power_W": p.average_facility_power_W,
            "water_per_year_L": p.water_per_year_L,
            "longest_link_m": max(f.longest_m.values(), default=0.0),
            "it_power_W": p.it_power_W, "facility_power_W": p.facility_power_W,
            "network_power_W": p.network_W, "energy_per_year_Wh": p.energy_per_year_Wh,
            "energy_cost_per_year_usd": p.energy_cost_per_year_usd, "capex_usd": c.capex_usd,
            "network_capex_usd": c.network_capex_usd, "capex_per_gpu_usd": c.capex_per_gpu_usd,
            "network_share": c.network_share, "bisection_bandwidth_per_gpu_Bps": n.bisection_bandwidth_per_gpu_Bps,
            "crosspod_all_reduce_gpus": n.all_reduce_gpus, "crosspod_all_reduce_s": n.all_reduce_s,
            "crosspod_alltoall_gpus": n.alltoall_gpus, "crosspod_alltoall_s": n.alltoall_s,
            "storage_and_frontend_capex_usd": c.storage_usd + c.frontend_usd,
            "tco_usd": o.tco_usd, "tco_years": o.years, "cost_per_gpu_hour_usd": o.cost_per_gpu_hour_usd,
            "co2_per_year_kg": o.co2_per_year_kg,
            "peak_flop_per_s": self.compute.peak_flop_per_s[self.compute.precision], "mfu": self.compute.mfu,
            "flop": self.compute.flop,
            "first_optical_failure_s": r.first_optical_failure_s,
            "first_job_optics_failure_s": r.first_job_optics_failure_s,
            "first_nic_optics_failure_s": r.first_nic_optics_failure_s,
            "interruptions_per_day": r.interruptions_per_day, "goodput": r.goodput,
            "cost_per_effective_gpu_hour_usd": self.cost_per_effective_gpu_hour_usd,
            "cost_per_pflop_hour_usd": self.cost_per_pflop_hour_usd,
            "cost_per_million_tokens_usd": self.cost_per_million_tokens_usd,
            "time_to_train_s": (self.time_to_train or {}).get("time_to_train_s"),
            "generator_capacity_W": self.electrical.generator_capacity_W if self.electrical else None,
            "spares_usd": sum(x.price_usd for x in self.spares),
            "effective_flop": r.effective_flop,
            **({"storage_servers": self.storage.servers, "storage_capacity_bytes": self.storage.capacity_bytes,
                "storage_write_Bps": self.storage.write_Bps, "storage_power_W": self.storage.power_W,
                "storage_racks": self.storage.racks, "storage_floor_m2": self.storage.floor_m2,
                "checkpoint_write_s": r.checkpoint_write_s} if self.storage else {}),
            **({"deployment_quarters": self.deployment.num_quarters,
                "first_quarter_capex_usd": self.deployment.quarters[0].capex_usd,
                "first_quarter_gpus": self.deployment.quarters[0].gpus_online} if self.deployment else {}),
            **{f"{k}_{end}": getattr(self.costs, end)[k] for k in RANGED for end in ("low", "high")},
        })

    def to_dict(self) -> dict:
        h = self.headline()
        return {
            "name": self.name, "source": self.source, "gpu": self.gpu, "num_gpus": self.num_gpus,
            "num_servers": self.num_servers, "server_model": self.server_model,
            "it_power_W": h["it_power_W"], "facility_power_W": h["facility_power_W"],
            "energy_per_year_Wh": h["energy_per_year_Wh"], "energy_cost_per_year_usd": h["energy_cost_per_year_usd"],
            "capex_usd": h["capex_usd"], "network_capex_usd": h["network_capex_usd"],
            "transceivers": self.bom.num_transceivers, "nic_modules": self.nic_modules,
            "peak_flop_per_s": self.compute.peak_flop_per_s, "goodput": self.reliability.goodput,
            "tco_usd": h["tco_usd"], "storage_sized_for": self.storage_sized_for(),
            "cost_per_gpu_hour_usd": h["cost_per_gpu_hour_usd"],
            "cost_per_effective_gpu_hour_usd": h["cost_per_effective_gpu_hour_usd"],
            "co2_per_year_kg": h["co2_per_year_kg"],
            "cost_per_pflop_hour_usd": h["cost_per_pflop_hour_usd"],
            "cost_per_million_tokens_usd": h["cost_per_million_tokens_usd"],
            "training": self.training.to_dict() if self.training else None,
            "time_to_train": self.time_to_train,
            "energy_to_train": self.energy_to_train,
            "power_fit": self.power_fit.to_dict() if self.power_fit else None,
            "floor": self.floor.to_dict(), "bom": self.bom.to_dict(), "power": self.power.to_dict(),
            "capex": self.capex.to_dict(), "ownership": self.ownership.to_dict(), "cost_range": self.costs.to_dict(), "compute": self.compute.to_dict(),
            "reliability": self.reliability.to_dict(),
            "electrical": self.electrical.to_dict() if self.electrical else None,
            "spares": [x.to_dict() for x in self.spares],
            "storage": self.storage.to_dict() if self.storage else None,
            "deployment": self.deployment.to_dict() if self.deployment else None,
            "price_sensitivity": list(self.price_sensitivity), "blast_radius": [b.to_dict() for b in self.blast_radius],
            "failure_impact": [x.to_dict() for x in self.failure_impact],
            "network": self.network.to_dict(), "inputs": self.inputs, "assumptions": self.assumptions,
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
