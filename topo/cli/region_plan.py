"""``topo plan`` of a region of several sites (:mod:`topo.plan.region`): each site's power against its limit and its
cost lines, the DCI's bill, and the DCI's share of the cost per GPU-hour."""

from __future__ import annotations

import json

from ..atomic import check_output, open_output
from ..dp_fill import UndividedGpus
from ..engine.region_estimate import check_region_profile
from ..errors import TopoError
from ..fabric.region import build_region
from ..plan.region import RegionPlan, plan_region
from ..plan.train_time import region_job_layer
from ..spec.region_load import is_region_file
from .. import training  # lazy (PEP 562): topo plan imports no step model (test_startup)
from ..units import format_count, format_in, format_time, format_usd
from .across import across_of, check_across_use
from .bom_csv import write_region_bom_csv
from .design_sets import overrides_for
from .layout_dp import layout_source
from .output import emit, emit_json, note, table
from .plan_words import failure_lines, goodput_lines, job_lines
from .region import region_inputs
from .region_estimate import region_profile_notes

__all__ = ["is_region_file", "refuse_region_flags", "run_region_plan", "render_region_plan"]


def refuse_region_flags(args) -> None:
    """The one-line error for a flag of ``topo plan`` a region's plan does not take (before any work).

    Parameters
    ----------
    args : argparse.Namespace
        ``topo plan``'s parsed flags.

    Raises
    ------
    TopoError
        For ``--model`` without ``--layout`` or the reverse, ``--shares`` or ``--profile`` without a job,
        ``--it-power``, ``--plan-file`` or ``--fail``.
    """
    if bool(args.model) != bool(args.layout):  # a region's job needs both: its step across the sites
        given, missing = ("--model", "--layout L") if args.model else ("--layout", "--model M")
        raise TopoError(f"times a job across the region's sites, which needs its model and its layout; allowed: "
                        f"{given} with {missing} (e.g. --model llama3-70b --layout tp=8,pp=4,global_batch=576: dp "
                        f"fills every site's GPUs, the replicas data parallel across the sites)", key=given)
    if getattr(args, "shares", None) is not None and not args.model:  # regpp73: said, not an unknown flag
        raise TopoError(f"{args.shares!r}: a region's plan without --model times no job (its MFU is --mfu's or the "
                        f"catalog's), so it splits no replicas over the sites; allowed: --shares "
                        f"{'|'.join(training.SHARES)} with --model M --layout L", key="--shares")
    if getattr(args, "it_power", None) is not None:  # each site has its own power_limit_MW
        raise TopoError("sizes one site's design; a region's sites are sized by their specs and checked against "
                        "their own power_limit_MW; allowed: --it-power on one site's spec", key="--it-power")
    check_across_use(args, region=True, job=bool(args.model))
    if args.profile and not args.model:  # tidy68: nothing it shows depends on a collective; plan79: a job's step does
        raise TopoError(f"{args.profile}: a region's plan without --model prices no collective (its sites' power, "
                        "capex and TCO and the DCI's bill; the MFU is --mfu's or the catalog's), so a profile has "
                        "nothing to price; allowed: --profile with --model M --layout L (the job's step across the sites), on "
                        "topo estimate, train or report of the region, or on one site's plan", key="--profile")
    given = [f for f, v in (("--plan-file", args.plan_file), ("--fail", args.failures)) if v]
    if given:
        raise TopoError(f"a region's plan takes --set, --days, --mfu, --pue, --no-collectives, --one-site, --json and "
                        f"--bom-csv; not {given[0]} yet", key=given[0])


def run_region_plan(args, name: str, layers) -> int:
    region = build_region(name, overrides_for(args, name))
    bom = args.bom_csv
    if bom is not None:  # a bad output fails before the plan
        if bom == "-" and args.json:
            raise TopoError("--json and --bom-csv - both print on stdout; give --bom-csv a file", key="--bom-csv")
        check_output(bom, inputs=region_inputs(name, region), force=args.force, key="--bom-csv", force_option="--force")
    if region.default_waves_note():
        note(f"note: {region.default_waves_note()}")
    job = {}
    if args.model:
        layer, job = region_job(args, region)
        layers = [layer, *layers]
    r = plan_region(region, one_site=args.one_site, layers=layers, collectives=not args.no_collectives, **job)
    if bom is not None:
        with open_output(bom, inputs=region_inputs(name, region), force=args.force, key="--bom-csv",
                         force_option="--force") as fh:
            write_region_bom_csv(r, fh)
        if bom == "-":
            return 0
        note(f"wrote {bom}")
    if args.json:
        emit_json(r.to_dict())
    else:
        emit(render_region_plan(r))
    return 0


def region_job(args, region) -> tuple:
    """``(layer, {"training": job, "site_gpus": ...})``: ``--model`` laid out as ``--layout`` across the region's
    sites (dp filled, :func:`topo.training.multisite_layout.region_layout`; across them as ``--across`` says, data
    parallel by default: the way sets the reload's exchange, :func:`topo.plan.region.restore_exchange_s`), its step (:func:`topo.training.multisite.estimate_across_sites`) as the
    plan's job (:func:`topo.plan.train_time.region_job_layer`); a bad layout, or one whose share does not fit in GPU
    memory (as one site's, :func:`topo.training.mfu.predict_step`), is refused naming ``--layout``."""
    shares = args.shares or training.DEFAULT_SHARES
    across = across_of(args)
    try:
        check_region_profile(region, args.profile)  # a calibrated file of no site's network, before any note
        fields, source = training.layout_fields(args.layout)
        model = training.load_model(args.model)
        for msg in region_profile_notes(region, args.profile):
            note(msg)
        lay = training.region_layout(region, fields, shares=shares, across=across, source=source)
        step = training.estimate_across_sites(region, model, lay, across=across, shares=shares, profile=args.profile,
                                              outer_every=getattr(args, "outer_every", None))
    except UndividedGpus as exc:
        raise exc.named({}, dp_as="dp=N in the layout", dp_name="dp", source=layout_source(args.layout)) from None
    except TopoError as exc:  # a field's error (the layout's, or the split's of one: source None) names --layout
        ours = exc.source == "layout" or (exc.source is None and (exc.key or "").split(".")[0] in fields)
        source = layout_source(args.layout) if ours else exc.source
        flag = exc.key in ("model", "layout", "shares", "profile")
        raise TopoError(exc.message, source=source, key=f"--{exc.key}" if flag else exc.key) from None
    if not step.fits:  # walk37: a share that cannot start was planned (time, energy, cost); one site's is refused
        mem = step.one_site["memory"]
        raise TopoError(f"{args.model} with this layout does not fit in GPU memory across the sites (one site's "
                        f"share: {format_in(mem['total_bytes'], 'GB', '.1f')} per GPU of "
                        f"{format_in(mem['capacity_bytes'], 'GB', '.1f')}); "
                        "the MFU of a run that cannot start is not a planning figure", key="--layout")
    layer, job = region_job_layer(args.model, step, lay.precision, float(model.total_params), args.tokens)
    return layer, {"training": job, "site_gpus": dict(step.site_gpus), "across": across,
                   "site_gpus_per_domain_used": dict(step.site_gpus_per_domain_used)}


def _MW(w: float) -> str:
    return format_in(w, "MW", ",.1f")


def render_region_plan(r: RegionPlan) -> str:
    lines = [f"{r.name}: {format_count(r.num_gpus)} GPUs in {len(r.sites)} sites, over {r.years:g} years", ""]
    rows = [[s.name, format_count(s.num_gpus), _MW(s.facility_power_W),
             _MW(s.power_limit_W) if s.power_limit_W else "-", format_usd(s.capex_usd), format_usd(s.tco_usd),
             f"${s.cost_per_gpu_hour_usd:.3f}"] for s in r.sites]
    lines.append(table(rows, ["site", "GPUs", "facility power", "power limit", "capex", "TCO", "per GPU-hour"],
                       right=[False] + [True] * 6))
    lines.append(f"TCO: over {r.years:g} years, the depreciation those years charge (each asset class over its own "
                 "life, topo/data/catalog/economics.toml: the facility's is longer, so a TCO can be below the capex) "
                 "+ energy, maintenance, staff and site opex; per GPU-hour = TCO / the site's GPU-hours; a site's "
                 "whole plan: topo plan on its spec")
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
        lines.append(f"                             ({o['reach']}: e.g. --set 'sites[0].set={_set_list(o)}')")
    elif o:
        lines.append(f"as one site                  {format_count(o['num_gpus'])} GPUs in {o['tiers']} tiers: "
                     f"{_MW(o['facility_power_W'])}, capex {format_usd(o['capex_usd'])}, "
                     f"${o['cost_per_gpu_hour_usd']:.3f} per GPU-hour (the region: ${r.cost_per_gpu_hour_usd:.3f})")
    lines += _goodput_block(r)
    lines += _job_block(r)
    lines += [f"note: {n}" for n in r.notes]
    return "\n".join(lines)


def _goodput_block(r: RegionPlan) -> list[str]:
    """The region's job's failures, checkpoint and goodput, in one site's plan's words, and what makes them a
    region's: the sites' interruptions added, the reload's exchange over the DCI."""
    rel = r.reliability
    if rel is None:
        return []
    each = ", ".join(f"{s.name} {p.reliability.interruptions_per_day:.3g}/day"
                     for s, p in zip(r.sites, r.site_plans))
    read = max(p.reliability.reload_s for p in r.site_plans)
    out = [""] + failure_lines(rel, r.num_gpus)
    out += goodput_lines(rel, r.cost_per_effective_gpu_hour_usd)
    if r.across == "pp":
        reload = (f"each site reading its own share ({format_time(read)}, the slowest) and sending nothing over the "
                  "DCI, for pipeline stages across the sites (each site holds its own stages' state)")
    else:
        way = ("data parallel across the sites (topo train REGION's default; pipeline stages across them would send "
               "nothing)") if r.across == "dp" else "an outer synchronisation across the sites (whole replicas a site)"
        reload = (f"each site reading its own share ({format_time(read)}, the slowest) then receiving the other "
                  f"sites' over the DCI ({format_time(r.restore_exchange_s)}), for the job {way}")
    out.append(f"          one job across the {len(r.sites)} sites: any site's failure stops it (the rates add: "
               f"{each}); its reload is {reload}")
    return out


# the job's way across the sites in the plan's work line (RegionPlan.across)
_WAY_WORDS = {"dp": "data parallel", "pp": "pipeline stages across them", "outer": "an outer synchronisation"}


def _no_ends_words(r: RegionPlan) -> str:
    """Why a job across the sites the outer way has no days at the step's ends (tidy94): the interval is built for
    --across dp and pp only (:data:`topo.training.multisite_interval.NO_INTERVAL_NOTE`; regions83: pp's); "" where it
    has one."""
    if r.training.step_interval_s is not None or r.across in ("dp", "pp"):
        return ""
    return (f"; no time to train at the step's interval ends: given for --across dp and pp only (the {r.across} "
            "way's crossing has no source for its call size, at which the collective model's band is given)")


def _job_block(r: RegionPlan) -> list[str]:
    """The named job's cost per million tokens and time to train, in one site's plan's words (its step the step
    across the sites)."""
    t = r.training
    if t is None:
        return []
    out = [f"work      {t.model} across the {len(r.sites)} sites, {_WAY_WORDS[r.across]}: step {format_time(t.step_time_s)}, "
           f"{format_count(t.tokens_per_step)} tokens a step (topo train {r.name} --model {t.model} with the layout"
           f"{'' if r.across == 'dp' else ' and --across ' + r.across})" + _no_ends_words(r)]
    return out + job_lines(t, r.cost_per_million_tokens_usd, r.time_to_train, at_step="at the step across the sites",
                           energy=r.energy_to_train, parts="network and storage (and the DCI's, no PUE)")


def _set_list(one_site: dict) -> str:
    """The first site's ``set`` list as a TOML array with a KEY=VALUE placeholder after its own overrides (a
    ``--set sites[0].set=`` replaces the list, so they are kept)."""
    return "[" + ", ".join(json.dumps(x) for x in [*one_site["site_set"], "KEY=VALUE"]) + "]"
