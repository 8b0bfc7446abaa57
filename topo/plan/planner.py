"""``plan``: a spec (+ the catalog + a floor layout) -> bill of materials, power, energy, cost, compute, goodput
and blast radius; ``compare_designs``: several designs side by side."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ..fabric.bisection import bisection
from ..fabric.builders import build_fabric
from ..fabric.cut import cut_words
from ..engine.profiles import resolve_profile
from ..errors import TopoError
from ..inputs import read_toml
from ..fabric.fabric import Fabric
from ..fabric.inventory import inventory
from ..spec import Spec, load_spec
from ..units import format_in
from .blast import blast_radius, collective_times_with_failures, with_interruptions
from .bom import RACK_TIER, SwitchLine, bill_of_materials, reprice, logical_tiers, tier_switch_models, two_stage_switches
from .catalog import Catalog, load_catalog
from .catalog_schema import COOLING
from .compute import compute_budget
from .cost_range import CostRange, cost_lines
from .capex import capex_breakdown
from .electrical import electrical
from .spares import spare_pool
from .phasing import phased_deployment, ramp_gpus_per_quarter
from .inputs import inputs_used, used_assumptions
from .floor import SwitchRacking, floor_plan, rack_position_area_m2
from .storage import StoragePlan, StorageServerSpec, size_storage
from .switch_counts import switch_count_notes
from .tco import ownership_cost
from .network import crosspod_collectives
from .power import power_breakdown
from .power_notes import cooling_note, power_notes, storage_scale_note
from .reliability import HARDWARE_CAUSES, reliability
from .result import DesignComparison, PlanResult
from .spare_note import job_spare_note
from .budget import PowerFit
from .train_time import TrainingJob

__all__ = ["plan", "compare_designs", "read_plan_file", "workload_of"]


def read_plan_file(path: str | Path) -> tuple[str, dict]:
    """A plan file: a TOML file whose tables are the spec's ``[plan]`` keys (or one ``[plan]`` table).

    A file with a ``[plan]`` table and other keys beside it is refused, naming the first: those keys would
    otherwise be dropped unread (``[plan]`` then ``[facility] pue = 1.3`` planned at the cooling's PUE), and a
    spec file given as a plan file would plan as if it were the spec's own ``[plan]`` alone.
    """
    data = read_toml(path, "plan file")
    if "plan" not in data:
        return str(path), data
    if not isinstance(data["plan"], dict):
        raise TopoError(f"must be a table ([plan]), got {data['plan']!r}; allowed: the plan's keys inside [plan], or "
                        "no [plan] table and the plan's keys at the top", source=str(path), key="plan")
    outside = [k for k in data if k != "plan"]
    if outside:
        spec_like = {"fabric", "cluster"} & set(data)
        hint = ("; this is a spec file: give it as the SPEC argument, its [plan] table is read from there" if spec_like
                else f" (write [plan.{outside[0]}]), or no [plan] table and the plan's keys at the top")
        raise TopoError(f"outside the [plan] table, where a plan file that has one reads nothing; allowed: the plan's "
                        f"keys inside [plan]{hint}", source=str(path), key=outside[0])
    return str(path), data["plan"]


def _locate(exc: TopoError, spec: Spec, cat: Catalog | None, tier_sources: dict[str, str] | None = None
            ) -> TopoError:
    """Name the file (and the ``--set``) behind a planner error about ``plan.<kind>.<key>``; a
    ``plan.tiers.<name>`` key names the layer its table came from (``tier_sources``)."""
    key = exc.key or ""
    if exc.source and exc.source != spec._origin:
        return exc
    if key.startswith("plan.tiers.") and tier_sources:
        where = tier_sources.get(key.split(".")[2])
        if where is not None and where != spec.error_source("plan"):
            return TopoError(exc.message, source=where, key=key)
    if cat is not None and key.startswith("plan.") and not exc.source:
        origin, overridden = cat.origin_of(key[5:])
        if not overridden:  # the catalog's value does not suit this spec: the user's to change, in their input
            return TopoError(f"{exc.message} (the catalog's value, from {origin}; set {key} to change it)",
                             source=spec.error_source(key), key=key)
        if origin != spec._origin:
            return TopoError(exc.message, source=origin, key=key)
    return TopoError(exc.message, source=spec.error_source(key), key=key or None)


def _spec_layers(s: Spec) -> list[tuple[str, dict]]:
    """The spec's ``[plan]`` table as override layers: the file's own values, then one layer per ``--set plan.<key>``
    named by it, so that a value's source (and an error about it) names the ``--set``, not the file."""
    own = copy.deepcopy(dict(s.plan))
    sets = []
    for path, _ in s._set_paths.items():
        if not path.startswith("plan."):
            continue
        keys, node = path.split(".")[1:], own
        for k in keys[:-1]:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, dict) and keys[-1] in node:
            value = node.pop(keys[-1])
            nested = value
            for k in reversed(keys):
                nested = {k: nested}
            sets.append((s.error_source(path), nested))
    return [(s.error_source("plan"), own)] + sets


def _fit_default_rack(cat: Catalog, server, server_W: float) -> int | None:
    """Servers per rack when the catalog's default floor cannot hold its default count of this server (an HGX
    B200 of 14.3 kW, four to a 45 kW rack): as many as fit, at least one. None when the default fits or the user
    set ``plan.floor.servers_per_rack`` (their value is then checked as given)."""
    fl = cat.floor
    if cat.origin_of("floor.servers_per_rack")[1] or server_W <= 0:
        return None
    if fl.servers_per_rack.value * server_W <= fl.rack_power_W.value:
        return None
    return max(1, int(fl.rack_power_W.value // server_W))


def _as_fabric(spec) -> Fabric:
    if isinstance(spec, Fabric):
        return spec
    if isinstance(spec, Spec):
        return build_fabric(spec)
    return build_fabric(load_spec(spec))


def plan(spec: str | Path | Spec | Fabric | None = None, *, layers: Sequence[tuple[str, dict]] = (),
         plan_file: str | Path | None = None, days: float | None = None, mfu: float | None = None,
         pue: float | None = None, collectives: bool = True, catalog: Catalog | None = None,
         job: tuple[float, str, float] | None = None, profile=None, training: TrainingJob | None = None,
         power_fit: PowerFit | None = None) -> PlanResult:
    """Plan one design.

    Parameters
    ----------
    spec : a bundled name, a spec file, a Spec or a built Fabric (default: the bundled 100k-GPU cluster).
    layers : ``(origin, plan table)`` overrides applied after the spec's ``[plan]`` and the plan file.
    plan_file : a TOML file of overrides (the same keys as a spec's ``[plan]`` table).
    days, mfu, pue : shortcuts for ``workload.days``, ``workload.mfu``, ``facility.pue``.
    collectives : run the estimates (the 1 GiB all-reduce and all-to-all across the top tier over every GPU, about
        0.5 s together at 100k GPUs, and the blast radius's collectives on the failed fabric).
    job : ``(parameters, source, share)``: a region's job, this site holding ``share`` of its checkpoint (plan_region).
    profile : the estimates' cost profile (:func:`topo.engine.profiles.resolve_profile`'s; None: the fabric's own).
    training, power_fit : a job's step (:class:`~topo.plan.train_time.TrainingJob`: its GPUs bound the hot spares,
        its tokens get a time to train) and an IT power fit (:func:`topo.plan.budget.fit_it_power`), reported.

    >>> r = plan("dgx-h100-superpod", collectives=False); r.bom.num_switches, round(r.power.it_power_W / 1e6, 2)
    (48, 1.64)
    """
    fabric = _as_fabric(spec)
    s, job_gpus = fabric.spec, training.gpus if training is not None else None
    all_layers = _layers(s, plan_file, layers, days=days, mfu=mfu, pue=pue)
    try:
        cat = catalog or load_catalog(all_layers)
    except TopoError as exc:
        raise _locate(exc, s, None) from None
    plan_tables, tier_sources = _tier_tables(all_layers)
    L = fabric.layout
    gpu, server_name, server, server_W, spr, fitted = _server_and_rack(cat, s, L)
    floor, bom, logical = _floor_and_bom(fabric, cat, server, server_W, spr, plan_tables, tier_sources)
    comp, params, params_source = _compute(cat, s, L, gpu)
    params, params_source, share = job if job is not None else (params, params_source, 1.0)
    try:
        store = _storage(cat, params, comp.flop, L.num_gpus, share)
    except TopoError as exc:
        raise _locate(exc, s, cat) from None
    pw, capex, tco = _money(cat, server, bom, gpu, L, floor.cooling, store)
    costs, tornado = _cost_ends(cat, server_name, server, bom, gpu, L, floor, store, pw, capex, tco)
    try:
        relia = _reliability(L, cat.reliability, cat.reliability.checkpoint, bom, params, params_source, comp.flop,
                             store, share, job_gpus, training.gpus_per_domain_used if training is not None else None)
    except TopoError as exc:
        raise _locate(exc, s, cat) from None
    inv, net, impact = _network(fabric, collectives, profile, relia.interruptions_per_day_by_cause)
    notes = _notes(fabric, cat, inv, floor, bom, gpu, relia, store, pw, tco, server_name, server, server_W, spr,
                   fitted, logical)
    elec = _electrical(cat.facility, floor, pw)
    notes += _site_notes(cat, store, pw, L, floor, server.cooling, elec)
    pools = _spare_pools(cat, bom, relia, L.num_servers, server_name, server.price_usd.value)
    try:
        phases = _phasing(cat, floor, L, pw, capex)
    except TopoError as exc:
        raise _locate(exc, s, cat) from None
    return PlanResult(name=s.name, source=s._origin, storage=store, electrical=elec, spares=pools, deployment=phases,
                      price_sensitivity=tornado, gpu=s.gpu, num_gpus=L.num_gpus, num_servers=L.num_servers,
                      server_model=server_name, floor=floor, bom=bom, power=pw, capex=capex, ownership=tco,
                      costs=costs, compute=comp, reliability=relia, blast_radius=blast_radius(fabric), network=net,
                      failure_impact=impact, inputs=inputs_used(cat, fabric, server_name, floor.cooling),
                      assumptions=used_assumptions(cat.assumptions(), _items_used(s, cat, server, server_name, bom)),
                      catalog_versions=dict(cat.versions),
                      notes=(job_notes := _job_notes(training, relia, L, notes, fit := _refit(power_fit, pw),
                                                     cat.reliability.checkpoint.hot_spare_fraction.value)),
                      spare_note=job_notes[-1] if training is not None else None, training=training, power_fit=fit)


def _server_and_rack(cat: Catalog, s, L):
    """The design's GPU and server (:func:`_gpu_and_server`), a server's power (its GPUs' TDP and the rest) and its
    servers per rack: the catalog's, else the default rack's fit (:func:`_fit_default_rack`, returned as ``fitted``;
    None when the catalog gives the count)."""
    gpu, server_name, server = _gpu_and_server(cat, s, L)
    server_W = L.gpus_per_server * (gpu.tdp_W.value + server.non_gpu_power_per_gpu_W.value)
    spr = int(server.servers_per_rack.value) if server.servers_per_rack is not None else None
    fitted = _fit_default_rack(cat, server, server_W) if spr is None else None
    return gpu, server_name, server, server_W, spr or fitted, fitted


def _network(fabric: Fabric, collectives: bool, profile=None, per_day_by_cause: dict[str, float] | None = None):
    """The fabric's inventory, its network figures (the bisection, of the failed fabric when parts failed, and the
    collectives across the top tier) and the blast radius's collectives (:func:`collective_times_with_failures`,
    a part the failure table counts as an interruption marked with its rate, ``per_day_by_cause``:
    :func:`with_interruptions`), the collectives priced with ``profile`` resolved once."""
    prof = resolve_profile(profile, fabric) if collectives else None
    impact = collective_times_with_failures(fabric, profile=prof) if collectives else []
    impact = with_interruptions(impact, per_day_by_cause or {})
    inv = inventory(fabric)
    bis, bis_per_gpu = inv.bisection_bandwidth_Bps, inv.bisection_bandwidth_per_gpu_Bps
    if fabric.failures:  # the network figures run on the failed fabric: so does its bisection
        b = bisection(fabric)
        bis, bis_per_gpu = b.bandwidth_Bps, b.bandwidth_per_gpu_Bps
    return inv, crosspod_collectives(fabric, bis, bis_per_gpu, collectives=collectives, profile=prof), impact


def _site_notes(cat, store, pw, L, floor, server_cooling: str, elec) -> list[str]:
    """The notes on the storage's sizing, the PUE, the halls' cooling, a plant of generators larger than its load
    and more storage servers than compute servers (walk28)."""
    return (power_notes(cat, store, pw, L.num_gpus, floor.cooling)
            + cooling_note(cat, floor.cooling, floor.rack_load_W, server_cooling)
            + [n for n in [elec.oversized_note()] if n] + storage_scale_note(cat, store, L.num_servers))


def _electrical(fac, floor, pw):
    """The UPS and generators of each hall, and of the rest of the IT load (storage, front-end, ...)."""
    halls_W = [h.it_power_W for h in floor.halls]
    return electrical(halls_W + [pw.it_power_W - sum(halls_W)], pw.pue, redundancy=fac.redundancy,
                      ups_module_W=fac.ups_module_W.value, generator_W=fac.generator_W.value)


def _layers(s, plan_file, layers, **shortcuts) -> list:
    """Every override layer in order: the spec's ``[plan]``, the plan file, ``layers``, then one layer per keyword
    given (``days``, ``mfu``, ``pue``), named by the keyword so that an error says which one."""
    all_layers = _spec_layers(s)
    if plan_file is not None:
        all_layers.append(read_plan_file(plan_file))
    all_layers += list(layers)
    tables = {"days": "workload", "mfu": "workload", "pue": "facility"}
    for name, value in shortcuts.items():
        if value is not None:
            all_layers.append((name, {tables[name]: {name: value}}))
    return all_layers


def _tier_tables(all_layers) -> tuple[dict, dict]:
    """The layers' ``tiers`` tables merged (the later wins), and the layer each tier's table came from."""
    plan_tables, tier_sources = {}, {}
    for where, table in all_layers:
        for k, v in (table or {}).get("tiers", {}).items():
            plan_tables.setdefault("tiers", {})[k] = v
            tier_sources[k] = where
    return plan_tables, tier_sources


def _gpu_and_server(cat, s, L):
    """The catalog's GPU and server for the spec (errors name the spec's key, or the plan key that picked them)."""
    try:
        gpu = cat.gpu(s.gpu)
    except TopoError as exc:
        raise TopoError(exc.message, source=s.error_source("gpu"), key="gpu") from None
    try:
        server_name, server = cat.server_for(s.gpu)
    except TopoError as exc:
        if cat.server_model is not None:
            raise _locate(exc, s, cat) from None
        raise TopoError(exc.message, source=s.error_source("gpu"), key="gpu") from None
    if int(server.gpus.value) != L.gpus_per_server:
        raise TopoError(f"the catalog's {server_name!r} holds {int(server.gpus.value)} GPUs, the spec's server "
                        f"{L.gpus_per_server}; add a matching server under plan.servers", source=s.error_source(
                            "server.gpus"), key="server.gpus")
    return gpu, server_name, server


def _floor_and_bom(fabric, cat, server, server_W, spr, plan_tables, tier_sources):
    """The floor plan and the bill of materials (a rack-scale system's own switches among the switches), and the
    logical tiers they were built with."""
    s, L = fabric.spec, fabric.layout
    origin = s.error_source("plan")
    rsw = server.rack_switches
    try:
        logical = logical_tiers(fabric, plan_tables, origin, tier_sources)
        models = tier_switch_models(fabric, cat, logical)
        racking = []
        for t, sw in zip(L.tiers, models):
            lt = logical.get(t.index)
            n = sum(two_stage_switches(t.down_ports + t.up_ports, int(sw.ports.value))) if (
                lt is not None and lt.stages == 2) else 1
            racking.append(SwitchRacking(sw.rack_units.value, sw.power_with_optics_W.value, n))
        floor = floor_plan(fabric, cat, server_W, racking, servers_per_rack=spr,
                           rack_power_W=server.rack_power_W.value if server.rack_power_W is not None else None,
                           rack_extra_W=rsw.per_rack.value * rsw.power_W.value if rsw is not None else 0.0,
                           leaf_in_rack=server.leaf_in_rack, server_cooling=_least_cooling(cat, server),
                           rack_scale=server.servers_per_rack is not None)
        bom = bill_of_materials(fabric, cat, floor, plan_tables, source=origin,
                                nic_module_ports=int(server.nic_module_ports.value), sources=tier_sources)
    except TopoError as exc:
        raise _locate(exc, s, cat, tier_sources) from None
    if rsw is not None:
        # a rack-scale system's own switches (NVL72: 9 NVLink switch trays per rack of 18 compute trays), one set
        # per full or partial rack of servers; counted with the switches (power and price)
        racks = math.ceil(L.num_servers / floor.servers_per_rack)
        n = racks * int(rsw.per_rack.value)
        bom = replace(bom, switches=bom.switches + [SwitchLine(RACK_TIER, rsw.model, n, n,
                                                               rsw.power_W.value, rsw.price_usd.value)])
    return floor, bom, logical


def _least_cooling(cat: Catalog, server) -> str:
    """The least cooling the halls may have: the servers' need, or ``floor.cooling`` when the spec names a more
    capable type (the racks' load may call for more still: :func:`topo.plan.floor.floor_plan`)."""
    named = cat.floor.cooling
    return server.cooling if named == "auto" else max(server.cooling, named, key=COOLING.index)


def workload_of(spec, *, layers: Sequence[tuple[str, dict]] = (), plan_file=None, days: float | None = None,
                mfu: float | None = None, pue: float | None = None, catalog: Catalog | None = None,
                **_) -> tuple[float, float | None, float, str]:
    """What :func:`plan` would train on a design, without planning it: ``(FLOP in the workload's days, the
    workload's given parameters or None, tokens per parameter, its source)``; the other keywords of :func:`plan`
    are taken and ignored.

    Parameters
    ----------
    spec : as :func:`plan` takes it.

    Returns
    -------
    tuple of (float, float or None, float, str)
    """
    fabric = _as_fabric(spec)
    s = fabric.spec
    try:
        cat = catalog or load_catalog(_layers(s, plan_file, layers, days=days, mfu=mfu, pue=pue))
    except TopoError as exc:
        raise _locate(exc, s, None) from None
    gpu = _gpu_and_server(cat, s, fabric.layout)[0]
    comp, _, _ = _compute(cat, s, fabric.layout, gpu)
    wl = cat.workload
    return comp.flop, (wl.params.value if wl.params is not None else None), wl.tokens_per_param.value, \
        wl.tokens_per_param.source


def _compute(cat, s, L, gpu):
    """The compute budget and the checkpointed model's size (the workload's, or compute-optimal for the budget)."""
    wl = cat.workload
    ref = wl.reference
    ref_gpu = cat.gpu(ref.gpu)
    try:
        comp = compute_budget(
            L.num_gpus, {k: v.value for k, v in gpu.peak_flops.items()}, precision=wl.precision, mfu=wl.mfu.value,
            days=wl.days.value, mfu_source=wl.mfu.source, reference_name=ref.name, reference_flop=ref.flop.value,
            reference_gpus=int(ref.gpus.value), reference_peak_per_gpu=ref_gpu.peak_flops[ref.precision].value)
    except TopoError as exc:
        raise _locate(exc, s, cat) from None
    if wl.params is not None:
        return comp, wl.params.value, wl.params.source
    # compute-optimal for this cluster's budget: 6 N D FLOP with D = tokens_per_param x N
    params = math.sqrt(comp.flop / (6 * wl.tokens_per_param.value))
    return comp, params, (f"derived: compute-optimal for {comp.flop:.3g} FLOP, sqrt(FLOP / (6 x "
                          f"{wl.tokens_per_param.value:g} tokens per parameter)) ({wl.tokens_per_param.source})")


def _cost_ends(cat, server_name, server, bom, gpu, L, floor, store, pw, capex, tco):
    """The cost lines with every price at its expected, low and high end, and the price tornado."""
    ends = {"expected": cost_lines(capex, pw, tco)}
    for end in ("low", "high"):  # every price at its low (high) end together: the same counts at other prices
        c_end = cat.at(end)
        s_end = c_end.servers[server_name]
        b_end = reprice(bom, c_end, s_end.rack_switches.price_usd.value if s_end.rack_switches else None)
        p_end, capex_end, tco_end = _money(c_end, s_end, b_end, gpu, L, floor.cooling, store)
        ends[end] = cost_lines(capex_end, p_end, tco_end)
    used = _priced_keys(bom, server_name, server, floor.cooling, cat.storage.kind)
    tornado = _price_sensitivity(cat, server_name, bom, gpu, L, floor.cooling, store, used,
                                 ends["expected"]["cost_per_gpu_hour_usd"])
    costs = CostRange(low=ends["low"], expected=ends["expected"], high=ends["high"],
                      prices=[row for row in cat.prices() if row["key"] in used])
    return costs, tornado


def _notes(fabric, cat, inv, floor, bom, gpu, relia, store, pw, tco, server_name, server, server_W, spr, fitted,
           logical) -> list[str]:
    """What a plan says beside its figures: the inventory's and floor's notes, surplus switches, a model too large
    for the HBM, storage beyond its power share, a default rack refitted, refreshes, failed parts, rack-scale
    systems and multi-stage tiers."""
    L = fabric.layout
    rsw = server.rack_switches
    each = {x.tier: (x.power_W_each, x.price_usd_each) for x in bom.switches}
    notes = list(inv.notes) + list(floor.notes) + switch_count_notes(fabric, each)
    hbm = L.num_gpus * gpu.hbm_bytes.value
    if relia.checkpoint_bytes > hbm:
        notes.append(f"the checkpointed model's training state ({format_in(relia.checkpoint_bytes, 'TB', ',.1f')}) is more than "
                     f"the cluster's HBM ({format_in(hbm, 'TB', ',.1f')}): it cannot train here; give plan.workload.params or "
                     "--model")
    if fitted:
        notes.append(f"{fitted} {server_name} servers of {server_W:,.0f} W per rack: the catalog's default "
                     f"{int(cat.floor.servers_per_rack.value)} exceed its {cat.floor.rack_power_W.value:,.0f} W "
                     "rack (set plan.floor.servers_per_rack or rack_power_W to plan another floor)")
    refreshed = {k: n for k, n in tco.refreshes.items() if n > 0}
    if refreshed:
        notes.append(f"over {tco.years:g} years, past their lives: " + ", ".join(
            f"{k} bought {n + 1} times" for k, n in refreshed.items())
            + " (each refresh at today's prices; the TCO depreciates capex x years / life)")
    if fabric.failures:  # the GPUs they cut off in topo.fabric.cut's words (rev69: --no-collectives said none)
        cut = "".join(f"{w}; " for w in cut_words(fabric))
        notes.append(f"with failed parts ({', '.join(fabric.failures)}): {cut}the network figures (bisection, cross-pod "
                     "collectives) are those of the failed fabric; the bill of materials, power and cost are the "
                     "installed ones")
    if server.servers_per_rack is not None:
        notes.append(f"{server_name} is a tray of a rack-scale system: {spr} per rack and a "
                     f"{format_in(floor.rack_power_W, 'kW', ',.0f')} rack from its catalog entry (plan.servers), not plan.floor"
                     + (f"; its {rsw.model}s ({int(rsw.per_rack.value)} per rack) are counted with the switches"
                        if rsw is not None else ""))
    if any(t.stages == 2 for t in logical.values()):
        notes.append("a multi-stage tier is one non-blocking logical switch to the cost model (one switch hop short "
                     "in latency); the bill of materials counts its physical switches and internal links")
    return notes


def _refit(power_fit: PowerFit | None, pw) -> PowerFit | None:
    """The power fit at this plan's own IT power: equal to the sizing's where the sizing planned each count with
    this plan's workload (``topo plan --model`` does, with the job's step on each count: plan70); a library caller
    sizing with another workload sees the difference here."""
    return replace(power_fit, it_power_W=pw.it_power_W) if power_fit is not None else None


def _job_notes(training: TrainingJob | None, relia, L, notes: list[str], fit: PowerFit | None,
               spare_fraction: float) -> list[str]:
    """``notes`` after the power fit's, then what a named job leaves for hot spares: none when it holds every GPU
    (walk26 Left 2); the whole servers it leaves idle and how many of them the failure model's rule holds as hot
    spares (``spare_fraction`` of the servers, at most those idle) when it leaves some (tidy94: a job at 64 of each
    NVL72 rack's 72 GPUs leaves 2 trays a rack, and the note said no whole server was left)."""
    notes = ([fit.note()] if fit is not None else []) + notes
    if training is None:
        return notes
    rule = (f"reliability.checkpoint.hot_spare_fraction: floor({spare_fraction * 100:.3g}% x "
            f"{L.num_servers:,} servers), at most the idle")
    return notes + [job_spare_note(training.model, training.gpus, L.num_gpus, relia, training.gpus_per_domain_used,
                                   L.gpus_per_domain, L.gpus_per_server, rule) + _goodput_scope_words(relia, L)]


def _goodput_scope_words(relia, L) -> str:
    """What a job's goodput stands on when the job is smaller than the cluster: its GPUs' interruptions, taken for
    the cluster's compute budget and cost per effective GPU-hour too (as if it ran jobs of this size)."""
    if relia.interrupting_gpus >= L.num_gpus:
        return ""
    return (f"; the goodput is the job's (its {relia.interrupting_gpus:,} GPUs' parts interrupt it, "
            f"{relia.interruptions_per_day:.3g}/day; all {L.num_gpus:,}: {relia.cluster_interruptions_per_day:.3g}/day)"
            ", and the effective compute and the cost per effective GPU-hour count the job's GPUs only: the "
            "cluster's cost falls on the job's work")


def _reliability(L, rel, ck, bom, params: float, params_source: str, flop: float, store: StoragePlan,
                 share: float = 1.0, job_gpus: int | None = None, placed: int | None = None):
    """The reliability model on this plan's failure table, optics and checkpoint (:mod:`topo.plan.reliability`):
    the checkpoint is written and read back at the plan's storage servers' aggregate rates, the ones its storage
    lines report, however the servers are counted (one rate source: storage.toml's per-server rates); a site
    holding ``share`` of a region's checkpoint writes and reads its share while the others do theirs: the whole
    at its rates over ``share``; its GPUs copy their part of that share to host memory (async, in_memory), the
    whole over its GPUs at the snapshot rate over ``share`` (plan78: it copied the whole checkpoint's part); ``placed``
    is the job's GPUs of each NVLink domain (its hot spares inside its domains: spares132)."""
    return reliability(
        L.num_gpus, L.gpus_per_server, causes={k: v.value for k, v in rel.causes.items()},
        observed_gpus=rel.observed_gpus.value, observed_days=rel.observed_days.value,
        modules=[(x.count, x.mttf_years) for x in bom.transceivers],
        nic_modules=[(x.count, x.mttf_years) for x in bom.transceivers if x.at == "nic"],
        job_modules=[(x.on_gpu_links, x.mttf_years) for x in bom.transceivers if x.on_gpu_links],
        optics=rel.optics, params=params, params_source=params_source, bytes_per_param=ck.bytes_per_param.value,
        write_Bps=store.write_Bps / share, detection_s=ck.detection_s.value, restart_s=ck.restart_s.value,
        repair_s=ck.repair_s.value, hot_spare_fraction=ck.hot_spare_fraction.value, flop=flop, mode=ck.mode,
        snapshot_Bps=ck.snapshot_Bps.value / share, reload_Bps=store.read_Bps / share, job_gpus=job_gpus,
        rate_scale=rel.rate_scale.value, interval_s=None if ck.interval_s is None else ck.interval_s.value,
        gpus_per_domain=L.gpus_per_domain, gpus_per_domain_used=placed)


def _storage(cat: Catalog, params: float, flop: float, num_gpus: int, share: float = 1.0) -> StoragePlan:
    """The plan's storage (:mod:`topo.plan.storage`) from the catalog's storage table and checkpoint size (``share``
    of it: a region's site)."""
    st, fl = cat.storage, cat.floor
    sv = st.server
    rack_W = sv.servers_per_rack.value * sv.power_W.value
    if rack_W > fl.rack_power_W.value:
        raise TopoError(f"{sv.servers_per_rack.value:g} storage servers of {sv.power_W.value:,.0f} W draw "
                        f"{rack_W:,.0f} W, more than a {fl.rack_power_W.value:,.0f} W rack (plan.floor.rack_power_W); "
                        "allowed: servers per rack x power each <= the rack's power",
                        key=f"plan.storage.kinds.{st.kind}.servers_per_rack")
    server = StorageServerSpec(capacity_bytes=sv.capacity_bytes.value, write_Bps=sv.write_Bps.value,
                               read_Bps=sv.read_Bps.value, power_W=sv.power_W.value,
                               servers_per_rack=int(sv.servers_per_rack.value),
                               price_usd=sv.price_usd.value)
    return size_storage(params=params, bytes_per_param=cat.reliability.checkpoint.bytes_per_param.value, flop=flop,
                        bytes_per_token=st.bytes_per_token.value, checkpoints_kept=int(st.checkpoints_kept.value),
                        write_budget_s=st.write_budget_s.value, server=server,
                        area_per_rack_m2=rack_position_area_m2(fl.rack_width_m.value, fl.row_pitch_m.value,
                                                               fl.rack_area_fraction.value),
                        sizing=st.sizing, num_gpus=num_gpus,
                        servers_per_gpu=cat.economics.storage_servers_per_gpu.value, kind=st.kind,
                        checkpoint_share=share)


def _price_sensitivity(cat: Catalog, server_name: str, bom, gpu, L, cooling: str, store: StoragePlan, used: set[str],
                       expected: float) -> list[dict]:
    """Cost per GPU-hour with each price alone at its low and its high end (the rest expected): a tornado's bars,
    widest first. A price without a range (a quote) gives no bar."""
    rows = []
    for row in cat.prices():
        if row["key"] not in used or row["low"] == row["high"]:
            continue
        out = {"key": row["key"], "expected": expected}
        for end in ("low", "high"):
            c_end = cat.at(end, keys={row["key"]})
            s_end = c_end.servers[server_name]
            b_end = reprice(bom, c_end, s_end.rack_switches.price_usd.value if s_end.rack_switches else None)
            out[end] = _money(c_end, s_end, b_end, gpu, L, cooling, store)[2].cost_per_gpu_hour_usd
        rows.append(out)
    return sorted(rows, key=lambda r: -(r["high"] - r["low"]))


def _phasing(cat: Catalog, floor, L, pw, capex):
    """Capex, GPUs and power by quarter as the halls come online (the catalog's ``deployment`` schedule)."""
    dep, gpus_per_pod = cat.deployment, L.num_gpus // L.num_pods
    hall_gpus = [h.pods * gpus_per_pod for h in floor.halls]
    hall_gpus[-1] += L.num_gpus - sum(hall_gpus)  # a partial pod, if any, in the last hall
    return phased_deployment(hall_gpus, [h.it_power_W for h in floor.halls], pw.it_power_W, pw.pue, capex,
                             dep.halls_per_quarter, ramp_gpus_per_quarter(dep.ramp_gpus.value, dep.ramp_days.value),
                             dep.start_quarter)


def _spare_pools(cat: Catalog, bom, relia, num_servers: int, server_name: str, server_price_usd: float) -> list:
    """Spare pools of every module type (at its catalog MTTF, over the restock lead time) and of servers (the failure
    table's hardware rate, over a repair)."""
    sp = cat.reliability.spares
    kw = dict(lead_time_days=sp.lead_time_days.value, service_level=sp.service_level.value)
    by_type: dict[str, list] = {}
    for t in bom.transceivers:
        cur = by_type.setdefault(t.type, [0, t.mttf_years, t.price_usd_each])
        cur[0] += t.count
    pools = [spare_pool(name, n, n / mttf, price_usd_each=price, **kw) for name, (n, mttf, price) in by_type.items()]
    # a failed server is repaired in place (reliability.checkpoint.repair_s), not restocked: its pool covers a repair
    hw_per_day = sum(v for k, v in relia.cluster_interruptions_per_day_by_cause.items() if k in HARDWARE_CAUSES)
    kw["lead_time_days"] = cat.reliability.checkpoint.repair_s.value / 86_400
    pools.append(spare_pool(server_name, num_servers, hw_per_day * 365, price_usd_each=server_price_usd, **kw))
    return pools


def _money(cat: Catalog, server, bom, gpu, L, cooling: str, store: StoragePlan):
    """Power (for its energy cost), capex and the cost of ownership at ``cat``'s prices. The PUE is
    ``facility.pue`` if given, else the halls' cooling type's; the water use is that type's WUE."""
    fac, eco = cat.facility, cat.economics
    cool = getattr(cat.cooling, cooling)
    pw = power_breakdown(
        L.num_gpus, gpu.tdp_W.value, server.non_gpu_power_per_gpu_W.value,
        switches_W=sum(x.count * x.power_W_each for x in bom.switches),
        optics_W=(sum(x.count * x.power_W_each for x in bom.transceivers if x.at != "nic")
                  + sum(c.power_W for c in bom.cables)),
        nic_optics_in_servers_W=sum(x.count * x.power_W_each for x in bom.transceivers if x.at == "nic"),
        storage_W=store.power_W, frontend_fraction=fac.frontend_fraction.value,
        pue=(fac.pue or cool.pue).value, load_factor=fac.load_factor.value,
        electricity_usd_per_kWh=fac.electricity_usd_per_kWh.value,
        server_average_fraction=fac.server_average_fraction.value, wue_L_per_kWh=cool.wue_L_per_kWh.value,
        gpu_idle_W=gpu.idle_W.value if gpu.idle_W is not None else None,
        pue_source="facility.pue" if fac.pue is not None else f"cooling.{cooling}.pue")
    capex = capex_breakdown(L.num_gpus, L.num_servers, server.price_usd.value, bom, it_power_W=pw.it_power_W,
                            facility_power_W=pw.facility_power_W, facility_usd_per_W=fac.capex_usd_per_W.value,
                            facility_basis=fac.capex_basis, storage_servers=store.servers,
                            storage_server_price_usd=cat.storage.server.price_usd.value,
                            frontend_usd_per_server=eco.frontend_usd_per_server.value,
                            cooling_usd_per_W=getattr(cat.cooling, cooling).capex_usd_per_W.value)
    tco = ownership_cost(L.num_gpus, capex, pw, years=eco.years.value, server_life_years=eco.server_life_years.value,
                         network_life_years=eco.network_life_years.value,
                         facility_life_years=eco.facility_life_years.value,
                         maintenance_fraction_per_year=eco.maintenance_fraction_per_year.value,
                         opex_usd_per_MW_year=eco.opex_usd_per_MW_year.value,
                         grid_kg_co2_per_kWh=eco.grid_kg_co2_per_kWh.value)
    return pw, capex, tco


def _items_used(s: Spec, cat: Catalog, server, server_name: str, bom) -> dict[str, set[str]]:
    """The catalog's named parts a plan uses: its GPU (and the workload's reference GPU), server, switch models,
    transceivers and cables (DAC and AEC too: their reach picks each link's medium)."""
    cables = {c.type for c in bom.cables} | {"DAC"} | ({"AEC"} if cat.floor.copper == "dac_aec" else set())
    return {"gpus": {s.gpu, cat.workload.reference.gpu}, "servers": {server_name},
            "switches": {x.model for x in bom.switches if x.tier != RACK_TIER},
            "transceivers": {t.type for t in bom.transceivers},
            "cables": cables, "storage.kinds": {cat.storage.kind}}


def _priced_keys(bom, server_name: str, server, cooling: str, storage_kind: str) -> set[str]:
    """The catalog's price keys a plan uses: its server (and its rack switches), the switches, transceivers and
    cables of its bill of materials, the facility, its cooling, the economics and its storage server's kind."""
    keys = {f"servers.{server_name}.price_usd", "facility.electricity_usd_per_kWh", "facility.capex_usd_per_W",
            f"cooling.{cooling}.capex_usd_per_W", "economics.opex_usd_per_MW_year",
            f"storage.kinds.{storage_kind}.price_usd", "economics.frontend_usd_per_server"}
    if server.rack_switches is not None:
        keys.add(f"servers.{server_name}.rack_switches.price_usd")
    keys |= {f"switches.{s.model}.price_usd" for s in bom.switches if s.tier != RACK_TIER}
    keys |= {f"transceivers.{t.type}.price_usd" for t in bom.transceivers}
    keys |= {f"cables.{c.type}.{k}" for c in bom.cables for k in ("price_usd", "price_per_m_usd")}
    return keys


def compare_designs(specs: Sequence, **kwargs) -> DesignComparison:
    """Plan several designs with the same options (see :func:`plan`)."""
    return DesignComparison([plan(s, **kwargs) for s in specs])
