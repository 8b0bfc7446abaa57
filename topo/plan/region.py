"""``topo plan`` of a region: each site's own plan (power against its limit, floor, cost lines; alike sites planned
once), the DCI's bill (:mod:`topo.plan.dci`) and the DCI's share of the cost per GPU-hour."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..errors import TopoError
from ..units import format_in
from ..fabric.region import Region
from ..fabric.builders import build_fabric
from ..spec.model import ClusterSpec
from .catalog import load_catalog
from .dci import DciBill, beyond_reach, dci_bill, load_dci_catalog
from .dci_ports import port_notes, site_ports
from .planner import plan, workload_of
from .power import HOURS_PER_YEAR
from .reliability import Reliability, joint_reliability
from .spare_note import job_spare_note
from .train_time import TrainingJob, cost_per_million_tokens_usd, job_energy, standing_fraction, time_to_train

__all__ = ["SitePlan", "RegionPlan", "plan_region", "restore_exchange_s"]


@dataclass
class SitePlan:
    name: str
    num_gpus: int
    it_power_W: float
    facility_power_W: float
    power_limit_W: float | None
    capex_usd: float
    tco_usd: float
    cost_per_gpu_hour_usd: float
    floor: dict  # racks, rows, halls, the campus's size


@dataclass
class RegionPlan:
    name: str
    num_gpus: int
    sites: list[SitePlan]
    dci: DciBill
    facility_power_W: float  # the sites' and the DCI's
    capex_usd: float
    tco_usd: float
    cost_per_gpu_hour_usd: float
    dci_cost_per_gpu_hour_usd: float
    dci_share_of_cost: float
    years: float
    notes: list[str] = field(default_factory=list)
    job: dict = field(default_factory=dict)  # the region's training job every site's storage is sized for (_job)
    one_site: dict | None = None  # the same GPUs in one site (one_site=True): its power and cost, or why not
    reliability: Reliability | None = None  # the region's job across every site (joint_reliability), as one site's
    restore_exchange_s: float = 0.0  # of the reload: the shares each site did not read, sent over the DCI
    # each site's whole plan, in the order of sites (alike sites share one): its bill of materials for --bom-csv;
    # not in to_dict (the sites' figures above are the JSON's)
    site_plans: list = field(default_factory=list, repr=False)
    # a named job across every site (topo plan REGION --model): its step across the sites, GPUs and token budget
    training: TrainingJob | None = None
    # how the job spans the sites (topo.training.ACROSS_SITES: dp, pp, outer); it sets the reload's exchange
    across: str = "dp"

    @property
    def cost_per_million_tokens_usd(self) -> float | None:
        """With ``training``: its GPUs at the region's cost per effective GPU-hour per million tokens trained, as one
        site's plan (:func:`~topo.plan.train_time.cost_per_million_tokens_usd`); None without a job."""
        t = self.training
        if t is None:
            return None
        return cost_per_million_tokens_usd(self.cost_per_effective_gpu_hour_usd, t.gpus, t.tokens_per_s)

    @property
    def time_to_train(self) -> dict | None:
        """With a job and its token budget: one site's plan's figures (:func:`~topo.plan.train_time.time_to_train`)
        at the step across the sites with the region's goodput (:func:`~topo.plan.reliability.joint_reliability`)."""
        return time_to_train(self.training, self.reliability.goodput if self.reliability is not None else 1.0)

    @property
    def average_facility_power_W(self) -> float:
        """The sites' facility power at their servers' average draw (each site's plan's, :mod:`topo.plan.power`) and
        the DCI's power (the bill's, as its energy cost counts it: no PUE)."""
        return sum(p.power.average_facility_power_W for p in self.site_plans) + self.dci.power_W

    @property
    def energy_to_train(self) -> dict | None:
        """With a job: one site's plan's figures (:func:`~topo.plan.train_time.job_energy`) with the region's
        average facility power, GPUs, goodput and the first site's electricity price (the DCI bill's); while the job
        stands (its joint reliability's standing share) each site's share of its GPUs draws that site's idle."""
        if self.training is None or not self.site_plans:
            return None
        r = self.reliability
        drop = sum(p.power.standing_drop_W(p.training.gpus if p.training is not None else p.num_gpus)
                   for p in self.site_plans)  # each site's share of the job's GPUs, at its own GPUs' idle draw
        return job_energy(self.training, r.goodput if r is not None else 1.0, self.average_facility_power_W,
                          self.num_gpus, self.site_plans[0].power.electricity_usd_per_kWh, drop,
                          standing_fraction(r.lost_fraction_by_part) if r is not None else 0.0)

    @property
    def effective_fraction(self) -> float:
        """The share of the region's installed GPU-hours that trains: goodput x training GPUs / GPUs (as one site's
        :attr:`~topo.plan.result.PlanResult.effective_fraction`)."""
        r = self.reliability
        return r.goodput * r.training_gpus / self.num_gpus if r is not None else 1.0

    @property
    def cost_per_effective_gpu_hour_usd(self) -> float:
        """TCO per GPU-hour that trains: cost per GPU-hour / effective fraction."""
        f = self.effective_fraction
        return self.cost_per_gpu_hour_usd / f if f > 0 else math.inf

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (``topo plan REGION --json``): ``reliability`` and ``goodput`` with one site's keys."""
        d = asdict(replace(self, site_plans=[], reliability=None, training=None))
        del d["site_plans"]
        d["training"] = self.training.to_dict() if self.training else None
        d["cost_per_million_tokens_usd"] = self.cost_per_million_tokens_usd
        d["time_to_train"] = self.time_to_train
        d["energy_to_train"] = self.energy_to_train
        d["reliability"] = self.reliability.to_dict() if self.reliability is not None else None
        d["goodput"] = self.reliability.goodput if self.reliability is not None else None
        d["cost_per_effective_gpu_hour_usd"] = self.cost_per_effective_gpu_hour_usd
        return d


def plan_region(region: Region, one_site: bool = False, training: TrainingJob | None = None,
                site_gpus: dict[str, int] | None = None, across: str = "dp",
                site_gpus_per_domain_used: dict[str, int | None] | None = None, **plan_options) -> RegionPlan:
    """Plan every site (once per distinct fabric) and the DCI.

    Parameters
    ----------
    region : Region
    one_site : bool
        Also plan the same GPUs as one site of the first site's design (more tiers where it needs them), for the
        side-by-side comparison of one big site against the region's sites.
    training : TrainingJob, optional
        A named job across every site (:func:`~topo.plan.train_time.region_job_layer`): its token budget gets a
        time to train with the region's goodput, its GPUs a cost per million tokens.
    site_gpus : dict, optional
        The job's GPUs at each site (:attr:`~topo.training.multisite.MultisiteStep.site_gpus`): each site is planned
        with its share as its job (its interruptions the share's GPUs', its hot spares what the share leaves).
    across : str
        How the job spans the sites (``dp``, ``pp``, ``outer``): its reload's exchange (:func:`restore_exchange_s`).
    site_gpus_per_domain_used : dict, optional
        Each site's share's placement, the GPUs it uses of each NVLink domain
        (:attr:`~topo.training.multisite.MultisiteStep.site_gpus_per_domain_used`; None: ``training``'s at every
        site): where it leaves whole servers idle inside its domains, those are the site's hot spares
        (:func:`topo.plan.reliability.reliability`), as one site's plan keeps them (plan134).
    **plan_options
        Passed to :func:`topo.plan.planner.plan` for each site (``pue``, ``layers``); no site's collectives run.

    Returns
    -------
    RegionPlan

    Raises
    ------
    TopoError
        A site whose facility power is over its own limit (the key names the site's ``power_limit_MW``).
    """
    plan_options = {**plan_options, "collectives": False}  # nothing shown reads them (tidy68)
    job = _job(region, plan_options)
    if training is not None:  # its parameters came in the --model layer: said as one site's plan says them
        job["params_source"] = f"--model {training.model}'s parameters"
    sites, plans = _plan_sites(region, job, training, site_gpus, site_gpus_per_domain_used, plan_options)
    first, eco = plans[0], load_catalog().economics
    years = first.ownership.years
    spans = [(n, float(d), int(w)) for n, d, w in zip(region.span_names(), region.spans["distance_km"],
                                                       region.spans["waves"])]
    quotes = region.spec.plan.dci
    cat = load_dci_catalog(quotes, region.spec.source_of)
    ports = site_ports(region, plans, cat)
    bill = dci_bill(spans, years=years, network_life_years=float(eco.network_life_years.value),
                    electricity_usd_per_kWh=first.power.electricity_usd_per_kWh, cat=cat, site_ports=ports)
    gpu_hours = region.num_gpus * years * HOURS_PER_YEAR
    tco = sum(s.tco_usd for s in sites) + bill.cost_over_years_usd
    out = RegionPlan(name=region.name, num_gpus=region.num_gpus, sites=sites, dci=bill,
                      facility_power_W=sum(s.facility_power_W for s in sites) + bill.power_W,
                      capex_usd=sum(s.capex_usd for s in sites) + bill.equipment_usd + bill.fibre_usd, tco_usd=tco,
                      cost_per_gpu_hour_usd=tco / gpu_hours, dci_cost_per_gpu_hour_usd=bill.cost_over_years_usd / gpu_hours,
                      dci_share_of_cost=bill.cost_over_years_usd / tco, years=years, site_plans=plans,
                      training=training, across=across, notes=_dci_notes(spans, cat, ports, quotes))
    _say_job(out, job, region.site_names)
    _join_reliability(out, region, plans)
    if one_site:
        out.one_site = _one_site(region, plan_options)
    return out


def _plan_sites(region: Region, job: dict, training: TrainingJob | None, site_gpus: dict[str, int] | None,
                site_gpus_per_domain_used: dict[str, int | None] | None, plan_options: dict) -> tuple[list, list]:
    """Each site's plan (once per distinct fabric and job share) and its :class:`SitePlan` row, in site order."""
    done, sites, plans = {}, [], []
    entries = [(i, e) for i, e in enumerate(region.spec.sites) for _ in range(e.count)]
    for k, f in enumerate(region.fabrics):
        share = (job["params"], job["params_source"], f.num_gpus / region.num_gpus)
        mine = _site_job(training, site_gpus, region.site_names[k], site_gpus_per_domain_used)
        key = (id(f), (mine.gpus, mine.gpus_per_domain_used) if mine is not None else None)
        r = done.get(key) or plan(f, job=share, training=mine, **plan_options)
        done[key] = r
        limit = _site_power_limit_W(region, k, entries[k], r)
        plans.append(r)
        sites.append(SitePlan(name=region.site_names[k], num_gpus=r.num_gpus, it_power_W=r.power.it_power_W,
                              facility_power_W=r.power.facility_power_W, power_limit_W=limit,
                              capex_usd=r.capex.capex_usd, tco_usd=r.ownership.tco_usd,
                              cost_per_gpu_hour_usd=r.ownership.cost_per_gpu_hour_usd, floor=_floor(r.floor)))
    return sites, plans


def _join_reliability(out: RegionPlan, region: Region, plans: list) -> None:
    """The job across the sites: the restart's exchange over the DCI and the sites' reliability joined (plan78)."""
    out.restore_exchange_s = restore_exchange_s(region, [p.storage.checkpoint_bytes for p in plans], out.across)
    out.reliability = joint_reliability([p.reliability for p in plans], [p.num_gpus for p in plans],
                                        [p.compute.flop for p in plans], out.restore_exchange_s)
    if out.training is not None and out.reliability.free_servers is not None:  # every site runs a part of the job
        out.notes.append(_spare_note(out, region, plans))


def _spare_note(out: RegionPlan, region: Region, plans: list) -> str:
    """The region's job's hot-spare note in one site's plan's words (:func:`~topo.plan.spare_note.job_spare_note`):
    every site's idle whole servers and spares joined (:func:`~topo.plan.reliability.joint_reliability`), each site's
    counted by its own rule (tidy96, findings 399 Left 4: the region plan said its spares with no note); inside the
    NVLink domains where the sites' shares are placed so (plan134: a region's job at 64 of each NVL72 rack's 72 was
    worded by the fraction rule). Sites placed or built apart (their rules, placements, domains or servers differ)
    are each said with their own figures."""
    rel, job = out.reliability, out.training
    shapes = {(p.training.gpus_per_domain_used, f.layout.gpus_per_domain, f.layout.gpus_per_server)
              for p, f in zip(plans, region.fabrics)}
    each = ", ".join(f"{n} {p.reliability.hot_spare_servers:,} of {p.num_servers:,} servers"
                     for n, p in zip(region.site_names, plans))
    rule = f"reliability.checkpoint.hot_spare_fraction of each site's servers, floored, at most its idle: {each}"
    if len(shapes) == 1 and "/" not in rel.hot_spares_of:
        used, domain_gpus, per_server = shapes.pop()
        return job_spare_note(job.model, job.gpus, out.num_gpus, rel, used, domain_gpus, per_server, rule)
    return "; ".join(
        f"site {n}: " + job_spare_note(job.model, p.training.gpus, p.num_gpus, p.reliability,
                                       p.training.gpus_per_domain_used, f.layout.gpus_per_domain,
                                       f.layout.gpus_per_server,
                                       f"reliability.checkpoint.hot_spare_fraction of its {p.num_servers:,} servers, "
                                       "floored, at most its idle")
        for n, p, f in zip(region.site_names, plans, region.fabrics))


def _dci_notes(spans: list, cat, ports, quotes: dict) -> list[str]:
    """What the DCI's bill rests on: its placeholder prices, spans beyond a module's reach, the sites' ports and the
    figures the region quotes."""
    quoted = ", ".join(f"{s}.{k} = {v:g}" for s, kv in quotes.items() for k, v in kv.items())
    return (["DCI prices were not found (no published price of a ZR module, amplifier, hut, mux or fibre pair): "
             "placeholders with status 'assumption' in topo/data/dci/interconnect.toml; quote them in the region's "
             "[plan.dci] (e.g. plan.dci.module.price_usd)"]
            + beyond_reach(spans, cat) + port_notes(ports) + ([f"DCI figures quoted: {quoted}"] if quotes else []))


def _site_power_limit_W(region: Region, k: int, entry: tuple, r) -> float | None:
    """Site ``k``'s facility power limit (None: none set), refusing a plan ``r`` that draws more."""
    i, e = entry
    limit = e.power_limit_MW * 1e6 if e.power_limit_MW else None
    if limit is not None and r.power.facility_power_W > limit:
        drawn = format_in(r.power.facility_power_W, 'MW', '.1f')
        raise TopoError(f"site {region.site_names[k]} draws {drawn} (facility, PUE {r.power.pue:g}), over its limit "
                        f"of {e.power_limit_MW:g} MW; allowed: a limit of at least {drawn}, or fewer GPUs at that "
                        f"site", source=region.spec.source_of(f"sites[{i}].power_limit_MW") or None,
                        key=f"sites[{i}].power_limit_MW")
    return limit


def _site_job(training: TrainingJob | None, site_gpus: dict | None, name: str, placed: dict | None = None
              ) -> TrainingJob | None:
    """One site's part of the region's job: its GPUs there, its placement there (``placed``'s, else the job's), no
    token budget (the region's job has it)."""
    if training is None or not site_gpus:
        return None
    used = placed[name] if placed else training.gpus_per_domain_used
    return replace(training, gpus=int(site_gpus[name]), tokens=None, gpus_per_domain_used=used)


def _job(region: Region, plan_options: dict) -> dict:
    """The region's training job: one model over every site's GPUs (the job ``topo train REGION`` runs), its
    parameters the workload's where a site's plan gives them (the first that does), else compute-optimal for the
    sites' FLOP together, ``sqrt(FLOP / (6 x tokens per parameter))`` as one site's plan derives its own
    (:func:`topo.plan.planner.plan`; walk19: each site sized storage for a model of its own 100 days alone, a
    1,024-GPU site 423 storage servers)."""
    works = {id(f): workload_of(f, **plan_options) for f in region.fabrics}
    flop = sum(works[id(f)][0] for f in region.fabrics)
    given = [(region.site_names[k], works[id(f)][1]) for k, f in enumerate(region.fabrics) if works[id(f)][1]]
    if given:
        return {"params": given[0][1], "params_source": f"plan.workload.params of site {given[0][0]}", "flop": flop}
    tpp, source = works[id(region.fabrics[0])][2:]
    return {"params": math.sqrt(flop / (6 * tpp)), "flop": flop,
            "params_source": f"derived: compute-optimal for the region's {flop:.3g} FLOP (every site's), sqrt(FLOP "
                             f"/ (6 x {tpp:g} tokens per parameter)) ({source})"}


def _say_job(out: RegionPlan, job: dict, names) -> None:
    """The region's job into ``out`` (its checkpoint, each site's share of it) and the storage's note last."""
    first = out.site_plans[0]
    out.job = {**job, "checkpoint_bytes": round(first.reliability.checkpoint_bytes),
               "site_checkpoint_bytes": {n: round(p.storage.checkpoint_bytes) for n, p in zip(names, out.site_plans)}}
    out.notes.append(_storage_note(out.job, first.storage.checkpoints_kept, out.across))


def restore_exchange_s(region: Region, share_bytes: list[float], across: str = "dp") -> float:
    """Seconds to send every site the checkpoint shares the other sites read, over the DCI, after each read its own.

    The job placed with data parallelism across the sites (``across="dp"``, the default) or with an outer
    synchronisation between them (``outer``, DiLoCo-like: each site trains whole replicas): every site holds whole
    replicas, so each needs the whole checkpoint; each site's storage holds its GPUs' share (``share_bytes``, as
    fully_parallel_save wrote it) and sends it to every other site (fully_parallel_load's exchange,
    :func:`topo.plan.reliability.joint_reliability`). The flows go on their routes
    (:meth:`~topo.fabric.region.Region.route_loads`); the time is the busiest directed span's bytes over its
    capacity, or a site's inbound bytes over what its border takes (:meth:`~topo.fabric.region.Region.border_Bps`),
    whichever is longer. With pipeline stages across the sites (``across="pp"``) each site holds its own stages'
    state, saved and read by its own data-parallel ranks (the sites' replicas paired one to one), and sends
    nothing: 0 s.
    """
    if across == "pp":
        return 0.0
    S = region.num_sites
    src, dst = (a.ravel() for a in np.meshgrid(np.arange(S), np.arange(S), indexing="ij"))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    nbytes = np.asarray(share_bytes, dtype=float)[src]
    if not nbytes.any():
        return 0.0
    loads = region.route_loads(src, dst, nbytes)
    bw = np.repeat(region.span_bandwidth_Bps, 2)
    spans_s = float(np.max(np.where(loads > 0, loads / np.where(bw > 0, bw, np.nan), 0.0)))
    inbound = np.bincount(dst, weights=nbytes, minlength=S)
    border_s = max(inbound[k] / region.border_Bps(k) for k in range(S))
    return max(spans_s, border_s)


def _storage_note(job: dict, kept: int, across: str = "dp") -> str:
    """What each site's storage holds, and what a restart reads (:func:`restore_exchange_s`)."""
    return (f"storage: one checkpoint of the region's job ({job['params'] / 1e9:,.0f}B parameters, "
            f"{format_in(job['checkpoint_bytes'], 'TB', ',.2f')}, {kept} kept), each site holding and writing its "
            f"GPUs' share of it in parallel, as Megatron's distributed checkpoint spreads one save over the data-"
            f"parallel ranks (fully_parallel_save, on by default), and the tokens its own GPUs train (its FLOP "
            f"over 6 x parameters); " + RELOAD_WORDS[across])


# what a restart of the region's job reads, by the way it spans the sites (restore_exchange_s)
RELOAD_WORDS = {
    "dp": "a restart reads its own share, then receives the other sites' over the DCI (the reload's exchange: the "
          "job data parallel across the sites, topo train REGION's default)",
    "outer": "a restart reads its own share, then receives the other sites' over the DCI (the reload's exchange: "
             "every site trains whole replicas between the outer synchronisations)",
    "pp": "a restart reads its own share and sends nothing over the DCI (pipeline stages across the sites: each "
          "site holds its own stages' state)"}


def _one_site(region: Region, plan_options: dict) -> dict:
    """The region's GPUs as one site of its first site's design (grown by tiers as needed), planned."""
    spec = region.fabrics[0].spec
    big = spec.model_copy(update={"name": f"{spec.name} as one site", "cluster": ClusterSpec(num_gpus=region.num_gpus),
                                  "fabric": spec.fabric.model_copy(update={"grow_tiers": True})})
    try:
        fabric = build_fabric(big)
        r = plan(fabric, **plan_options)
    except TopoError as exc:  # its fabric keys are the first site's: the region reaches them through sites[0]
        site = region.spec.sites[0]
        where = f"{site.spec!r}" if site.spec else "its inline [sites.fabric] table"
        return {"error": exc.message, "site": site.name, "site_set": list(site.set),
                "reach": f"the one site is the first site's design ({site.name}: {where}) with all "
                         f"{region.num_gpus:,} GPUs: a fabric key it names is set in that spec or in the region's "
                         "sites[0].set list (which sets that site's own fabric too), its size by the sites' sizes"}
    return {"num_gpus": r.num_gpus, "tiers": len(fabric.layout.tiers),
            "facility_power_W": r.power.facility_power_W, "capex_usd": r.capex.capex_usd,
            "tco_usd": r.ownership.tco_usd, "cost_per_gpu_hour_usd": r.ownership.cost_per_gpu_hour_usd}


def _floor(f) -> dict:
    """The site's floor in a few figures (the plan's own ``floor`` holds arrays)."""
    return {"server_racks": f.server_racks, "network_racks": f.network_racks, "rows": f.rows, "halls": len(f.halls),
            "campus_width_m": f.campus_width_m, "campus_depth_m": f.campus_depth_m}
