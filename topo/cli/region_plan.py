"""``topo plan`` of a region of several sites (:mod:`topo.plan.region`): each site's power against its limit and its
cost lines, the DCI's bill, and the DCI's share of the cost per GPU-hour."""

from __future__ import annotations

from ..errors import TopoError
from ..fabric.region import build_region
from ..plan.region import RegionPlan, plan_region
from ..spec.region_load import is_region_file
from ..units import format_count, format_in, format_usd
from .output import emit, emit_json, table

__all__ = ["is_region_file", "run_region_plan", "render_region_plan"]


def run_region_plan(args, name: str, layers) -> int:
    given = [f for f, v in (("--plan-file", args.plan_file), ("--model", args.model), ("--bom-csv", args.bom_csv),
                            ("--fail", args.failures)) if v]
    if given:
        raise TopoError(f"a region's plan takes --set, --days, --mfu, --pue, --no-collectives and --json; not "
                        f"{given[0]} yet", key=given[0])
    region = build_region(name, args.overrides or [])
    r = plan_region(region, one_site=args.one_site, layers=layers, collectives=not args.no_collectives)
    if args.json:
        emit_json(r.to_dict())
    else:
        emit(render_region_plan(r))
    return 0


def _MW(w: float) -> str:
    return format_in(w, "MW", ",.1f")


def render_region_plan(r: RegionPlan) -> str:
    lines = [f"{r.name}: {format_count(r.num_gpus)} GPUs in {len(r.sites)} sites, over {r.years:g} years", ""]
    rows = [[s.name, format_count(s.num_gpus), _MW(s.facility_power_W),
             _MW(s.power_limit_W) if s.power_limit_W else "-", format_usd(s.capex_usd), format_usd(s.tco_usd),
             f"${s.cost_per_gpu_hour_usd:.3f}"] for s in r.sites]
    lines.append(table(rows, ["site", "GPUs", "facility power", "power limit", "capex", "TCO", "per GPU-hour"],
                       right=[False] + [True] * 6))
    lines.append("")
    rows = [[b.name, f"{b.distance_km:,.0f} km", b.waves, b.fibre_pairs, b.modules, b.amplifier_huts,
             format_in(b.power_W, "kW", ",.1f"), format_usd(b.equipment_usd), format_usd(b.fibre_usd)] for b in r.dci.spans]
    lines.append(table(rows, ["DCI span", "distance", "waves", "fibre pairs", "modules", "amp huts", "power",
                              "equipment", "fibre"], right=[False] + [True] * 8))
    lines.append("")
    lines.append(f"DCI cost over {r.years:g} years    {format_usd(r.dci.cost_over_years_usd)}: "
                 f"${r.dci_cost_per_gpu_hour_usd:.4f} per GPU-hour, {r.dci_share_of_cost:.1%} of the region's "
                 f"${r.cost_per_gpu_hour_usd:.3f}")
    lines.append(f"facility power              {_MW(r.facility_power_W)} (sites and DCI)")
    o = r.one_site
    if o and "error" in o:
        lines.append(f"as one site                  cannot be built: {o['error']}")
    elif o:
        lines.append(f"as one site                  {format_count(o['num_gpus'])} GPUs in {o['tiers']} tiers: "
                     f"{_MW(o['facility_power_W'])}, capex {format_usd(o['capex_usd'])}, "
                     f"${o['cost_per_gpu_hour_usd']:.3f} per GPU-hour (the region: ${r.cost_per_gpu_hour_usd:.3f})")
    lines += [f"note: {n}" for n in r.notes]
    return "\n".join(lines)
