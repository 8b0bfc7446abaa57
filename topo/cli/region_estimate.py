"""``estimate`` over every GPU of a region of several sites (:mod:`topo.engine.region_estimate`)."""

from __future__ import annotations

from ..engine.region_estimate import TREE_ROOT_RULE, RegionEstimate, estimate_region, site_profile
from ..errors import TopoError
from ..units import count_noun, format_count, format_size, format_time, in_unit
from .estimate_args import profile_mismatch
from .output import emit, emit_json, note, table
from .region import region_from_args

__all__ = ["run_estimate", "render_estimate", "region_profile_notes"]


# flags of estimate that a single fabric's engine takes and a region does not (yet): named in the error
_SITE_ONLY = ("gpus", "ranks", "rank_order", "placement", "rail", "groups", "group_layout", "choose", "protocol",
              "channels", "ecmp", "subflows", "hash_seed", "sharing", "chunks", "stages", "traffic")


def run_estimate(args, sizes, notes=()) -> int:
    given = [k for k in (*_SITE_ONLY, "no_pxn", "csv") if getattr(args, k, None) not in (None, False)]
    if given:  # the flag given is the one named (walk9: --detail was refused as "not --csv")
        flag = "--" + given[0].replace("_", "-")
        raise TopoError(f"across sites, estimate takes -c, sizes (--size, -b/-e/-f), -d, -a, --set, --fail, "
                        f"--profile, --detail and --json; not {flag} (it runs on one site's spec)", key=flag)
    region = region_from_args(args)
    result = estimate_region(region, args.collective or "all_reduce", sizes, args.algorithm or "auto",
                             datatype=args.datatype, profile=args.profile)  # a file of no site's network refused
    for msg in region_profile_notes(region, args.profile):
        note(msg)
    result.notes.extend(notes)
    if args.json:  # the document carries tree_roots with or without --detail (RegionEstimate.to_dict)
        emit_json({**result.to_dict(), **(_detail(result) if args.detail else {})})
    else:
        emit(render_estimate(result) + ("\n" + render_detail(result) if args.detail else ""))
    return 0


def region_profile_notes(region, profile) -> list[str]:
    """:func:`~topo.cli.estimate_args.profile_mismatch`'s note for each site priced with a profile of another GPU
    generation (or a file fitted on another cluster), each note once: ``profile`` where a command gives one, else
    the site's own ``profile`` key (:func:`~topo.engine.region_estimate.site_profile`; rev70: a Blackwell key on an
    H100 site was taken without the note ``--profile`` gives).

    Parameters
    ----------
    region : Region
    profile : optional
        The command's ``--profile`` (None: each site's key).

    Returns
    -------
    list of str
    """
    notes = []
    for i, (name, fabric) in enumerate(zip(region.site_names, region.fabrics)):
        msg = profile_mismatch(site_profile(region, profile, i), fabric)
        if msg and profile is None:  # a site's key: the site and the key named
            msg = f"note: site {name}'s profile key: " + msg.removeprefix("note: ")
        notes.append(msg)
    return list(dict.fromkeys(n for n in notes if n))


def _detail(r: RegionEstimate) -> dict:
    """``--detail`` across sites: the chosen algorithm's phases at the largest size (the order the tree chains the
    sites' roots in is the document's ``tree_roots``, with or without ``--detail``)."""
    last = r.results[-1]
    phases = [{"phase": k, **v} for k, v in last.phases.items() if isinstance(v, dict)]
    return {"detail_size_bytes": last.size_bytes, "detail_algorithm": last.algorithm, "phases": phases}


def render_detail(r: RegionEstimate) -> str:
    """The ``--detail`` lines across sites: the chosen algorithm's phases at the largest size, and the order the tree
    chains the sites' roots in where a tree is priced (chosen or not; NCCL's tree runs all_reduce only), with the
    rule that sets it."""
    d = _detail(r)
    lines = ["#", f"# {d['detail_algorithm']} at {format_size(d['detail_size_bytes'])}: phases"]
    lines += [f"#   {p['phase']}: latency {format_time(p['latency_s'])}, bandwidth {format_time(p['bandwidth_s'])}, "
              f"bound {p['bound']}" for p in d["phases"]]
    if not any(t is not None for t in r.candidates.get("tree", [])):
        return "\n".join(lines)
    hops = ", ".join(format_time(h) for h in r.tree_hop_s)
    lines.append(f"# tree across sites: {' - '.join(r.tree_roots)}, {TREE_ROOT_RULE}; each hop one way: {hops}")
    return "\n".join(lines)


def render_estimate(r: RegionEstimate) -> str:
    lines = [f"# topo estimate: {r.collective} on {r.spec}: {format_count(r.num_ranks)} GPUs over "
             f"{count_noun(r.num_sites, 'site')}, every GPU" + (f", algorithm {r.algorithm}" if r.algorithm != "auto"
                                                                 else ""),
             _candidates(r.results[-1]) if r.results else "#"]
    for name, why in r.unavailable.items():
        lines.append(f"# {name} not considered: {why}")
    lines += [f"# note: {n}" for n in r.notes]
    lines.append(f"# collectives priced with profile {', '.join(r.profile)} (--profile to change): {r.profile_prices}")
    rows = [[format_size(x.size_bytes), format_time(x.time_s), f"{in_unit(x.algbw_Bps, 'GB/s'):.2f}", f"{in_unit(x.busbw_Bps, 'GB/s'):.2f}",
             x.algorithm + (f" ({x.phases['chunks']} chunks)" if "chunks" in x.phases else ""), format_time(x.latency_s), format_time(x.bandwidth_s), x.bottleneck_name] for x in r.results]
    lines.append(table(rows, ["size", "time", "algbw (GB/s)", "busbw (GB/s)", "algorithm", "latency part",
                              "bandwidth part", "bottleneck"], right=[True] * 4 + [False, True, True, False]))
    return "\n".join(lines)


def _candidates(row) -> str:
    """The candidates' times at the largest size, so the ones not chosen are seen too (walk9: only their names)."""
    times = ", ".join(f"{name} {format_time(t)}" for name, t in row.candidates.items())
    return f"# candidates across sites at {format_size(row.size_bytes)}: {times}"
