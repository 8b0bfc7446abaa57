"""``plan``: a spec (+ the catalog + a floor layout) -> bill of materials, power, energy, cost, compute, goodput
and blast radius; ``compare``: several designs side by side."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ..fabric.bisection import bisection
from ..fabric.builders import build_fabric
from ..errors import TopoError
from ..fabric.fabric import Fabric
from ..fabric.inventory import inventory
from ..spec import Spec, load_spec
from .blast import blast_radius, collective_times_with_failures
from .bom import SwitchLine, bill_of_materials
from .catalog import Catalog, load_catalog
from .compute import compute_budget
from .capex import capex_breakdown
from .floor import floor_plan
from .network import crosspod_collectives
from .power import power_breakdown
from .reliability import reliability
from .result import DesignComparison, PlanResult

__all__ = ["plan", "compare_designs", "read_plan_file"]


def read_plan_file(path: str | Path) -> tuple[str, dict]:
    """A plan file: a TOML file whose tables are the spec's ``[plan]`` keys (or one ``[plan]`` table)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TopoError(f"cannot read the plan file: {exc}", source=str(path)) from None
    return str(path), data.get("plan", data)


def _locate(exc: TopoError, spec: Spec, cat: Catalog | None) -> TopoError:
    """Name the file (and the ``--set``) behind a planner error about ``plan.<kind>.<key>``."""
    key = exc.key or ""
    if exc.source and exc.source != spec._origin:
        return exc
    if cat is not None and key.startswith("plan.") and not exc.source:
        origin, overridden = cat.origin_of(key[5:])
        if not overridden:
            return TopoError(exc.message, source=origin, key=key.split(".", 2)[-1])
        if origin != spec._origin:
            return TopoError(exc.message, source=origin, key=key)
    return TopoError(exc.message, source=spec.error_source(key), key=key or None)


def _as_fabric(spec) -> Fabric:
    if isinstance(spec, Fabric):
        return spec
    if isinstance(spec, Spec):
        return build_fabric(spec)
    return build_fabric(load_spec(spec))


def plan(spec: str | Path | Spec | Fabric | None = None, *, layers: Sequence[tuple[str, dict]] = (),
         plan_file: str | Path | None = None, days: float | None = None, mfu: float | None = None,
         pue: float | None = None, collectives: bool = True, catalog: Catalog | None = None) -> PlanResult:
    """Plan one design.

    Parameters
    ----------
    spec : a bundled name, a spec file, a :class:`~topo.spec.Spec` or a built :class:`~topo.fabric.Fabric`
        (default: the bundled 100k-GPU cluster).
    layers : ``(origin, plan table)`` overrides applied after the spec's ``[plan]`` and the plan file.
    plan_file : a TOML file of overrides (the same keys as a spec's ``[plan]`` table).
    days, mfu, pue : shortcuts for ``workload.days``, ``workload.mfu``, ``facility.pue``.
    collectives : run the cross-pod all-reduce and all-to-all estimates (a fraction of a second each).

    >>> r = plan("dgx-h100-superpod", collectives=False)
    >>> r.bom.num_switches, round(r.power.it_power_W / 1e6, 2)
    (48, 1.44)
    """
    fabric = _as_fabric(spec)
    s = fabric.spec
    origin = s.error_source("plan")
    all_layers = [(origin, dict(s.plan))]
    if plan_file is not None:
        all_layers.append(read_plan_file(plan_file))
    all_layers += list(layers)
    shortcut = {}
    if days is not None:
        shortcut.setdefault("workload", {})["days"] = days
    if mfu is not None:
        shortcut.setdefault("workload", {})["mfu"] = mfu
    if pue is not None:
        shortcut.setdefault("facility", {})["pue"] = pue
    if shortcut:
        all_layers.append(("argument", shortcut))
    try:
        cat = catalog or load_catalog(all_layers)
    except TopoError as exc:
        raise _locate(exc, s, None) from None
    plan_tables = {}
    for _, table in all_layers:
        for k, v in (table or {}).get("tiers", {}).items():
            plan_tables.setdefault("tiers", {})[k] = v

    L = fabric.layout
    try:
        gpu = cat.gpu(s.gpu)
        server_name, server = cat.server_for(s.gpu)
    except TopoError as exc:
        raise TopoError(exc.message, source=s.error_source("gpu"), key="gpu") from None
    if int(server.gpus.value) != L.gpus_per_server:
        raise TopoError(f"the catalog's {server_name!r} holds {int(server.gpus.value)} GPUs, the spec's server "
                        f"{L.gpus_per_server}; add a matching server under plan.servers", source=s.error_source(
                            "server.gpus"), key="server.gpus")
    server_W = L.gpus_per_server * (gpu.tdp_W.value + server.non_gpu_power_per_gpu_W.value)
    spr = int(server.servers_per_rack.value) if server.servers_per_rack is not None else None
    rsw = server.rack_switches
    try:
        floor = floor_plan(fabric, cat, server_W, servers_per_rack=spr,
                           rack_power_W=server.rack_power_W.value if server.rack_power_W is not None else None,
                           rack_extra_W=rsw.per_rack.value * rsw.power_W.value if rsw is not None else 0.0,
                           leaf_in_rack=server.leaf_in_rack)
        bom = bill_of_materials(fabric, cat, floor, plan_tables, source=origin)
    except TopoError as exc:
        raise _locate(exc, s, cat) from None
    if rsw is not None:
        # a rack-scale system's own switches (NVL72: 9 NVLink switch trays per rack of 18 compute trays), one set
        # per full or partial rack of servers; counted with the switches (power and price)
        racks = math.ceil(L.num_servers / (spr or int(cat.layout.servers_per_rack.value)))
        n = racks * int(rsw.per_rack.value)
        bom = replace(bom, switches=bom.switches + [SwitchLine("scale-up (in rack)", rsw.model, n, n,
                                                               rsw.power_W.value, rsw.price_usd.value)])
    fac, wl, rel = cat.facility, cat.workload, cat.reliability
    pw = power_breakdown(
        L.num_gpus, gpu.tdp_W.value, server.non_gpu_power_per_gpu_W.value,
        switches_W=sum(x.count * x.power_W_each for x in bom.switches),
        optics_W=sum(x.count * x.power_W_each for x in bom.transceivers) + sum(c.power_W for c in bom.cables),
        storage_frontend_fraction=fac.storage_frontend_fraction.value, pue=fac.pue.value,
        load_factor=fac.load_factor.value, electricity_usd_per_kWh=fac.electricity_usd_per_kWh.value)
    capex = capex_breakdown(L.num_gpus, L.num_servers, server.price_usd.value, bom, pw.facility_power_W,
                            fac.capex_usd_per_W.value)
    ref = wl.reference
    ref_gpu = cat.gpu(ref.gpu)
    comp = compute_budget(
        L.num_gpus, {k: v.value for k, v in gpu.peak_flops.items()}, precision=wl.precision, mfu=wl.mfu.value,
        days=wl.days.value, mfu_source=wl.mfu.source, reference_name=ref.name, reference_flop=ref.flop.value,
        reference_gpus=int(ref.gpus.value), reference_peak_per_gpu=ref_gpu.peak_flops[ref.precision].value)
    ck = rel.checkpoint
    relia = reliability(
        L.num_gpus, L.gpus_per_server, causes={k: v.value for k, v in rel.causes.items()},
        observed_gpus=rel.observed_gpus.value, observed_days=rel.observed_days.value,
        modules=[(x.count, x.mttf_years) for x in bom.transceivers], params=wl.params.value,
        bytes_per_param=ck.bytes_per_param.value, write_Bps=ck.write_Bps.value, restart_s=ck.restart_s.value,
        repair_s=ck.repair_s.value, hot_spare_fraction=ck.hot_spare_fraction.value, flop=comp.flop)
    inv = inventory(fabric)
    bis, bis_per_gpu = inv.bisection_bandwidth_Bps, inv.bisection_bandwidth_per_gpu_Bps
    if fabric.failures:  # the network figures run on the failed fabric: so does its bisection
        b = bisection(fabric)
        bis, bis_per_gpu = b.bandwidth_Bps, b.bandwidth_per_gpu_Bps
    net = crosspod_collectives(fabric, bis, bis_per_gpu, collectives=collectives)
    notes = list(inv.notes)
    if fabric.failures:
        notes.append(f"with failed parts ({', '.join(fabric.failures)}): the network figures (bisection, cross-pod "
                     "collectives) are those of the failed fabric; the bill of materials, power and cost are the "
                     "installed ones")
    if spr is not None:
        notes.append(f"{server_name} is a tray of a rack-scale system: {spr} per rack and a "
                     f"{floor.rack_power_W / 1e3:,.0f} kW rack from its catalog entry (plan.servers), not plan.layout"
                     + (f"; its {rsw.model}s ({int(rsw.per_rack.value)} per rack) are counted with the switches"
                        if rsw is not None else ""))
    impact = collective_times_with_failures(fabric) if collectives else []
    if any(t.get("stages", 2) == 2 for t in plan_tables.get("tiers", {}).values()):
        notes.append("a multi-stage tier is one non-blocking logical switch to the cost model (one switch hop short "
                     "in latency); the bill of materials counts its physical switches and internal links")
    return PlanResult(name=s.name, source=s._origin, gpu=s.gpu, num_gpus=L.num_gpus, num_servers=L.num_servers,
                      server_model=server_name, floor=floor.to_dict(), bom=bom, power=pw, capex=capex, compute=comp,
                      reliability=relia, blast_radius=blast_radius(fabric), network=net, failure_impact=impact,
                      assumptions=cat.assumptions(), catalog_versions=dict(cat.versions), notes=notes)


def compare_designs(specs: Sequence, **kwargs) -> DesignComparison:
    """Plan several designs with the same options (see :func:`plan`)."""
    return DesignComparison([plan(s, **kwargs) for s in specs])
