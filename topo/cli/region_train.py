"""``topo train`` on a region of several sites (:mod:`topo.training.multisite`): the job's layout across the sites,
its step against one site's, ``throughput_vs_one_site`` and the DCI capacity for 95% of one site."""

from __future__ import annotations

import math

from ..errors import TopoError
from ..training.model import load_model
from ..training.multisite import MultisiteStep, estimate_across_sites
from ..training.parallel import make_layout
from ..units import format_bandwidth, format_size, format_time
from .common import data_parallel
from .output import emit, emit_json, table
from .region import region_from_args

__all__ = ["run_region_train", "render_across_sites"]


def run_region_train(args, options: dict) -> int:
    if args.search or args.layout:
        flag = "--search" if args.search else "--layout"
        raise TopoError(f"across sites, train takes the layout as flags (--tp --pp --dp --vpp --global-batch); not "
                        f"{flag} yet", key=flag)
    if args.global_batch is None:
        raise TopoError("is required (a step needs a global batch): sequences per optimizer step, e.g. "
                        "--global-batch 2304", key="--global-batch")
    if args.outer_every is not None and args.outer_every < 1:
        raise TopoError(f"must be a whole number >= 1, got {args.outer_every}", key="--outer-every")
    region = region_from_args(args)
    model = load_model(args.model)
    sizes = {d: getattr(args, d) for d in ("tp", "cp", "pp", "dp", "ep", "vpp")}
    if sizes["dp"] is None:
        sizes["dp"] = data_parallel((sizes["tp"] or 1) * (sizes["cp"] or 1) * (sizes["pp"] or 1), region.num_gpus)
    lay = make_layout(global_batch=args.global_batch, **sizes, **{k: v for k, v in options.items() if v is not None})
    across = args.across or ("outer" if args.outer_every else "dp")
    r = estimate_across_sites(region, model, lay, across=across, outer_every=args.outer_every,
                              convention=args.flops, efficiency=args.efficiency, contention=not args.no_contention)
    if args.json:
        emit_json(r.to_dict())
    else:
        emit(render_across_sites(r))
    return 0


def render_across_sites(r: MultisiteStep) -> str:
    one = r.one_site
    lines = [f"{r.model} on {r.region}: {r.gpus:,} GPUs over {r.num_sites} sites; one site's share "
             f"({one['gpus']:,} GPUs) steps in {format_time(r.one_site_step_s)} (MFU {one['mfu']:.1%})", ""]
    rows = [[s.strategy + (f" every {s.outer_every}" if s.outer_every else ""), format_time(s.step_time_s),
             f"{s.throughput_vs_one_site:.1%}", format_time(s.dci_time_s), format_time(s.exposed_s),
             format_size(s.dci_bytes_per_step),
             "latency alone is too much" if math.isinf(s.dci_Bps_for_95pct) else format_bandwidth(s.dci_Bps_for_95pct),
             s.bottleneck] for s in r.strategies]
    lines.append(table(rows, ["across sites", "step", "vs one site", "DCI phase", "exposed", "DCI bytes/step",
                              "DCI for 95%", "bottleneck"], right=[False] + [True] * 6 + [False]))
    lines.append("")
    lines.append(f"throughput_vs_one_site ({r.chosen}): {r.throughput_vs_one_site:.1%}")
    lines += [f"assumed: {a}" for a in r.assumptions]
    return "\n".join(lines)
