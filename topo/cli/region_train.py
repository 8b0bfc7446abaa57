"""``topo train`` on a region of several sites (:mod:`topo.training.multisite`): the job's layout across the sites,
its step against one site's, ``throughput_vs_one_site`` and the DCI capacity for 95% of one site."""

from __future__ import annotations

import math

from ..engine.region_estimate import check_region_profile
from ..errors import TopoError
from ..inputs import is_input_file
from ..training.model import load_model
from ..training.multisite import (DEFAULT_SHARES, SPAN_RULE, AcrossSites, MultisiteStep, estimate_across_sites,
                                  site_shares)
from ..training.multisite_search import search_across_sites
from ..training.parallel import layout_fields
from ..units import format_bandwidth, format_in, format_size, format_suffixed_count, format_time
from ..dp_fill import UndividedGpus
from ..training.multisite_layout import largest_dp, region_layout, share_gpus, split_by_size
from .across import across_of, check_across
from .layout_dp import placed_by, sized_by, skip_offered, skip_way_dp
from .search_options import layout_for_search, search_options
from .output import emit, emit_json, mfu_text, note, table
from .train_text import (dispatcher_cell, dispatcher_searched, given_flags, model_flag, gpu_hours_text, memory_line,
                         not_fit_line, row_flags, recompute_cell, interval_head, uncertainty_line)
from .region import region_from_args
from .region_estimate import region_profile_notes

__all__ = ["run_region_train", "render_across_sites"]


_UNREACHABLE = "unreachable"
"""The DCI for 95% where no span capacity reaches it: the latency, a GPU's NICs or a flat ring's window alone take
longer than the budget (the bottleneck column names which; regpp73: it said "latency alone" for all three)."""


def run_region_train(args, options: dict, say=str) -> int:
    """``topo train REGION``: one layout across the sites, or ``--search``; ``say`` words a library note for the
    CLI (``train``'s ``note_flags``: a layout field as its flag)."""
    check_across(args)
    if args.search and args.layout:  # its fields held in every layout tried, as on one site; its batch if no flag
        options, layout_batch = layout_for_search(args.layout, options)
        args.global_batch = args.global_batch or layout_batch
    fields = layout_fields(args.layout)[0] if args.layout and not args.search else {}
    if args.global_batch is None and "global_batch" not in fields:
        also = " (or global_batch in --layout)" if args.layout else ""
        raise TopoError("is required (a step needs a global batch): sequences per optimizer step, e.g. "
                        f"--global-batch 2304{also}", key="--global-batch")
    region = region_from_args(args)
    check_region_profile(region, args.profile)  # a calibrated file of no site's network, before any note
    for msg in region_profile_notes(region, args.profile):
        note(msg)
    if region.default_waves_note():  # walk26: one wave between two big sites, left in by omission
        note(f"note: {region.default_waves_note()}")
    model = load_model(args.model)
    if args.search:
        return _search(args, region, model, options, say)
    if args.gpus is not None and args.gpus > region.num_gpus:
        raise TopoError(f"{args.gpus:,} GPUs asked, but the {len(region.site_names)} sites have {region.num_gpus:,}",
                        key="--gpus")
    lay = _job_layout(args, region, fields, options)
    if args.gpus is not None and lay.gpus != args.gpus:
        raise TopoError(f"{args.gpus:,} GPUs, but tp x cp x pp x dp = {lay.gpus:,}; give one of --gpus and --dp, "
                        f"or both agreeing", key="--gpus")
    across = across_of(args)
    try:
        r = estimate_across_sites(region, model, lay, across=across, outer_every=args.outer_every,
                                  shares=getattr(args, "shares", DEFAULT_SHARES),
                                  convention=args.flops, efficiency=args.efficiency, contention=not args.no_contention,
                                  profile=args.profile)
    except TopoError as exc:  # a share larger than its site: named by --gpus or --dp when that flag sized it
        if args.dp is None and args.gpus is None and "dp" not in fields and _by_size(args, region):
            exc = _skip_way_by_size(exc, region, lay, args, fields)  # skip72: the split refilled past the skip
        elif args.dp is None and args.gpus is None and "dp" not in fields:  # a filled dp: walk29 Left 6
            exc = skip_way_dp(exc, min(region.fabrics, key=lambda f: f.num_gpus), lay.tp * lay.cp * lay.pp,
                              lay.first_gpu, region.num_sites, lay.gpus_per_domain_used,
                              lay.global_batch // lay.micro_batch)
        raise _named_by_layout(args, fields, sized_by(exc, args.gpus, args.dp)) from None
    if args.json:
        emit_json(r.to_dict(train_tokens=args.tokens))
    else:
        emit(render_across_sites(r, say, args.tokens))
        emit(f"each site's collectives priced with {_profiles_text(r.site_profile)} (--profile to change): "
             f"{r.profile_prices}; a site's own profile: its profile key in the region file")
    return 0


def _profiles_text(site_profile: dict[str, str]) -> str:
    """``profile NAME`` where every site priced with one, else each site's (reg70)."""
    names = set(site_profile.values())
    if len(names) == 1:
        return f"profile {names.pop()}"
    return "its own profile: " + ", ".join(f"{s} {p}" for s, p in site_profile.items())


_FLAGS = {"tp": "--tp", "cp": "--cp", "pp": "--pp", "dp": "--dp"}  # a layout key -> train's flag


def _job_layout(args, region, fields: dict, options: dict):
    """The whole job's layout from the flags over ``--layout``'s fields (flags win), dp filled by the library when
    neither gives it (:func:`topo.training.multisite_layout.region_layout`), its errors worded by train's flags."""
    given = _request(args, fields, options)
    named = [d for d in ("tp", "cp", "pp") if getattr(args, d) is not None]
    try:
        return region_layout(region, given, gpus=args.gpus, shares=getattr(args, "shares", DEFAULT_SHARES),
                             across=args.across, named=named, source=args.layout if fields else "layout")
    except UndividedGpus as exc:
        raise exc.named(_FLAGS, dp_as="--dp N", dp_name="--dp") from None
    except TopoError as exc:
        raise _named_by_layout(args, fields, exc) from None


def _request(args, fields: dict, options: dict) -> dict:
    """The layout asked: ``--layout``'s fields, then the options and the size flags given over them."""
    sizes = {d: getattr(args, d) for d in ("tp", "cp", "pp", "dp", "ep", "vpp")}
    flags = {k: v for k, v in {**options, **sizes, "global_batch": args.global_batch}.items() if v is not None}
    return {**fields, **flags}


def _by_size(args, region) -> bool:
    """Whether the job's replicas split over the sites by their size (``--shares by-size`` on sites of different
    sizes, not ``--across pp``)."""
    return split_by_size(region, getattr(args, "shares", DEFAULT_SHARES), args.across)


def _skip_way_by_size(exc: TopoError, region, lay, args, fields: dict) -> TopoError:
    """A failure's refusal whose way past it skips NVLink domains (:func:`~topo.cli.layout_dp.skip_offered`), for a
    job split by size whose dp was filled from the GPUs: with the skip, dp is filled again from what each site's
    placement then holds (:func:`~topo.training.multisite_layout.largest_dp`), so the skip alone is the way, said
    with the dp and the shares it
    runs (skip72: tidy70's ``--dp N``, the smallest site's share on every site, was the equal split's); ``exc`` as it
    is where no dp past the skip splits the global batch."""
    found, skip = skip_offered(exc)
    if found is None:
        return exc
    placement = {"first_gpu": lay.first_gpu, "skip_domains": skip, "gpus_per_domain_used": lay.gpus_per_domain_used}
    dp = largest_dp(region, lay.tp * lay.cp * lay.pp, {**_request(args, fields, {}), **placement})
    if lay.global_batch % (dp * lay.micro_batch):
        return exc
    dps = site_shares(region, lay.model_copy(update={"dp": dp, "skip_domains": skip}), "by-size")
    each = ", ".join(f"{n} {d:,}" for n, d in zip(region.site_names, dps))
    way = (f"skip_domains = [{found[1]}] (a dp left to fill the GPUs is then {dp:,}, the replicas split by what "
           f"each site holds past the skipped domain{'s' if len(skip) > 1 else ''}: {each})")
    if exc.message[found.end():].startswith(" with "):  # the skip that keeps the job's dp on spare domains
        way += f", or {found[0]}"
    return TopoError(exc.message.replace(found[0], way, 1), source=exc.source, key=exc.key)


def _named_by_layout(args, fields: dict, exc: TopoError) -> TopoError:
    """An error about a field ``--layout`` gave (and no flag overrode), named by ``--layout`` (pairs) or its file; one
    about a value a flag gave, left for ``train``'s flag naming (source ``layout``)."""
    name = (exc.key or "").split(".")[0]
    if fields and exc.source == args.layout and getattr(args, name, None) is not None:  # walk14: was "error: tp=8:"
        return TopoError(exc.message, source="layout", key=exc.key)
    if not fields or exc.source not in (None, "layout", args.layout) or name not in fields or \
            getattr(args, name, None) is not None:
        return exc
    pairs = "=" in args.layout and not (args.layout.endswith(".toml") or is_input_file(args.layout))
    return TopoError(exc.message, source="--layout" if pairs else args.layout, key=exc.key)


def _search(args, region, model, options: dict, say=str) -> int:
    across = across_of(args)
    gpus, filled = args.gpus, ""
    if gpus is None and not _by_size(args, region):  # a share from its first GPU past its skipped domains, as one
        # site's search and step fill it (by-size: every GPU the placement holds on the sites, the library's default)
        share, filled = share_gpus(region, options)
        gpus = share * region.num_sites if filled else None
    try:
        res = search_across_sites(region, model, args.global_batch, gpus=gpus, top=args.top or 5, across=across,
                                  outer_every=args.outer_every, convention=args.flops, efficiency=args.efficiency,
                                  contention=not args.no_contention, profile=args.profile,
                                  shares=getattr(args, "shares", DEFAULT_SHARES), **search_options(args, options))
    except TopoError as exc:  # GPUs the placement sized: named by its flag, not --gpus (rev66)
        raise sized_by(exc, args.gpus, None, placed_by(args, filled)) from None
    if args.json:
        emit_json(res.to_dict())
        return 0
    s = res.search
    split = (f"{res.global_batch // res.num_sites:,} per site); one site's share searched" if res.shares == "equal"
             else "each site's share by its size); the job's layouts searched, each site's share timed on its own "
                  "fabric")
    lines = [f"{res.model} on {res.region}: {res.num_sites} sites, global batch {res.global_batch:,} "
             f"({split}: {s['considered']:,} layouts considered, {s['evaluated']} evaluated; ranked by the step "
             f"across the sites ({across})", ""]
    rows = []
    for i, r in enumerate(res.ranked, 1):
        L, pick = r.one_site["layout"], next(x for x in r.strategies if x.strategy == r.chosen)
        rows.append([i, L["tp"], L["cp"], L["pp"], L["vpp"], sum(r.site_dp.values()), L["ep"], L["micro_batch"],
                     recompute_cell(L), L["dp_sharding"],
                     format_time(r.one_site_step_s), format_time(pick.step_time_s), f"{pick.throughput_vs_one_site:.1%}",
                     _UNREACHABLE if math.isinf(pick.dci_Bps_for_95pct)
                     else format_bandwidth(pick.dci_Bps_for_95pct)])
    layouts = [r.one_site["layout"] for r in res.ranked]
    extra = ["dispatcher"] if dispatcher_searched(layouts, {k: v for k, v in options.items() if v is not None},
                                                  model.moe is not None) else []
    for row, L in zip(rows, layouts):  # walk24: without it two rows read alike and a row's sizes gave another step
        row[10:10] = [dispatcher_cell(L)] * len(extra)
    lines.append(table(rows, ["#", "tp", "cp", "pp", "vpp", "dp (job)", "ep", "mb", "recompute", "sharding", *extra,
                              "one site", "across sites", "vs one site", "DCI for 95%"],
                       right=[True] * 8 + [False] * (2 + len(extra)) + [True] * 4))
    lines += [f"not across sites by {across}: the search's #{k}: {why}" for k, why in res.skipped.items()]
    lines.append(f"DCI for 95%: the largest span's, per direction; each span's in --json, or train the layout: "
                 f"{SPAN_RULE}")
    if res.ranked:  # walk26: the job's flags of #1, its dp the whole job's (dp x sites) as the flags take it
        first = {**layouts[0], "dp": sum(res.ranked[0].site_dp.values())}
        # walk29: the region itself and the command's own options (--seq, --set, --fail, ...), not "REGION"
        lines.append(f"#1 across sites: topo train {' '.join(given_flags(args) + [''])}{model_flag(args)} "
                     f"--global-batch {res.global_batch} "
                     f"{row_flags(first, bool(extra))}" + (f" --across {across}" if across != "dp" else "")
                     + (f" --outer-every {args.outer_every}" if args.outer_every else ""))
    line = uncertainty_line(res.ranked[0].uncertainty, " of #1's one-site step")  # walk23: the search said none
    lines += [line] if line else []
    sites = res.notes_sites  # rev66: a failed site's notes named no site; the step's say "west's paces the job"
    whose = "" if len(sites) == res.num_sites else f" ({sites[0]}'s)" if len(sites) == 1 else \
        f" (that of {', '.join(sites)}, alike)"
    lines += [f"note: one site's share{whose}: {say(n)}" for n in res.notes]
    lines += [f"note: one site's share ({', '.join(x['sites'])}'s): {say(n)}" for x in res.other_notes
              for n in x["notes"]]  # rev68: a second failed site's notes were said as the first's
    emit("\n".join(lines))
    return 0


def _per_span_line(s: AcrossSites) -> str:
    """Each span's DCI for 95% of one site, and their total, for one way across the sites (ms55)."""
    def bw(x):
        return "unreachable" if math.isinf(x) else "none (no route uses it)" if x == 0 else format_bandwidth(x)

    spans = ", ".join(f"{n.removeprefix('dci:')} {bw(x)}" for n, x in s.dci_Bps_for_95pct_by_span.items())
    return (f"DCI for 95% per span and direction ({s.strategy}): {spans}; total "
            f"{bw(s.dci_total_Bps_for_95pct)}")


def _step_interval_line(r: MultisiteStep) -> str:
    """The interval of the step across the sites (:func:`~topo.training.multisite_interval.across_sites_interval`,
    ``step_interval``), begun as one site's ``topo train`` begins its interval (:func:`.train_text.interval_head`),
    each part at its own model's error (plan80)."""
    i = r.step_interval
    return (interval_head(i["low_s"], i["high_s"], f" of the step across the sites ({r.chosen})")
            + f"the share's step {format_time(i['share_low_s'])} - {format_time(i['share_high_s'])} (its interval "
              f"above, p90 {i['p90']:.1%}) plus the exposed DCI time {format_time(i['dci_low_s'])} - "
              f"{format_time(i['dci_high_s'])} (topo's collective model's held-out error at a "
              f"{format_size(i['call_bytes'])} call, {i['regime']} regime: {i['error_p10_fraction']:+.1%} to "
              f"{i['error_p90_fraction']:+.1%}), ends added end to end")


def render_across_sites(r: MultisiteStep, say=str, tokens: float | None = None) -> str:
    """The text of one layout across the sites; ``say`` words each note (:func:`run_region_train`); with
    ``tokens``, the time to train them at the step across the sites."""
    one = r.one_site
    mfu = mfu_text(one["mfu"], one.get("peak_precision") or one["precision"], one["peak_flop_per_s_per_gpu"])
    short = not_fit_line(r.memory or one["memory"], one["gpu"])
    paced = f", {r.slowest_site}'s, the slowest site's" if len(set(r.site_step_s.values())) > 1 else ""
    lines = ([short] if short else []) + [f"{r.model} on {r.region}: {r.gpus:,} GPUs over {r.num_sites} sites; one site's share "
             f"({one['gpus']:,} GPUs{paced}) steps in {format_time(r.one_site_step_s)}, {mfu}"]
    line = uncertainty_line(r.uncertainty, " of one site's share's step")
    lines += [line, ""] if line else [""]
    rows = [[s.strategy + (f" every {s.outer_every}" if s.outer_every else ""), format_time(s.step_time_s),
             f"{s.throughput_vs_one_site:.1%}", f"{r.mfu(s):.1%}", format_time(s.dci_time_s), format_time(s.exposed_s),
             format_size(s.dci_bytes_per_step),
             _UNREACHABLE if math.isinf(s.dci_Bps_for_95pct) else format_bandwidth(s.dci_Bps_for_95pct),
             s.bottleneck] for s in r.strategies]
    lines.append(table(rows, ["across sites", "step", "vs one site", "MFU", "DCI phase", "exposed",
                              "DCI bytes/step", "DCI for 95%", "bottleneck"], right=[False] + [True] * 7 + [False]))
    lines.append("MFU: the job's across the sites, one site's share's x vs one site (the same model FLOP per GPU "
                 "in the longer step)")
    lines.append("vs one site: one site's share's step (above; unlike sites: the slowest share's, what the job "
                 "steps at over a free DCI) / the step across sites; DCI bytes/step: on the busiest span, per "
                 "direction (outer: per inner step on average); DCI for 95%: the capacity per span and direction "
                 "at which the step across sites is one site's share's / 0.95, the largest span's (each span's "
                 "below)")
    lines += [_per_span_line(s) for s in r.strategies]
    lines.append(f"DCI for 95% per span: {SPAN_RULE}")
    lines.append("")
    lines.append(f"throughput_vs_one_site ({r.chosen}): {r.throughput_vs_one_site:.1%}")
    if r.step_interval:
        lines.append(_step_interval_line(r))
    if tokens:
        lines.append(f"time to train {format_suffixed_count(tokens)} tokens: {format_in(r.time_to_train_s(tokens), 'days', '.1f')}, "
                     f"{gpu_hours_text(r.gpu_hours_to_train(tokens))} GPU-hours on {r.gpus:,} GPUs "
                     f"(at the step across sites, {r.chosen}: {format_time(r.step_time_s)}, "
                     f"{r.tokens_per_step:,} tokens)")
    lines.append(f"one site's share: {memory_line(r.memory or one['memory'], one['layout'])}"
                 + (f"; {r.memory_sharding}" if r.memory_sharding else ""))
    lines += [f"assumed: {a}" for a in r.assumptions]
    lines += [f"note: {say(n)}" for n in r.notes]
    return "\n".join(lines)
