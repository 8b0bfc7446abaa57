"""``topo report``: the self-contained interactive HTML report, or one figure as PNG/SVG."""

from __future__ import annotations

import importlib.util
import time

from ..atomic import check_output
from ..errors import TopoError
from ..units import UnitError, format_in, format_time, parse_count
from ..fabric.builders import build_fabric
from ..fabric.inventory import inventory
from ..plan import plan, read_plan_file
from ..plan.region import plan_region
from ..plan.train_time import job_layer
from ..spec import DEFAULT_SPEC, load_spec
from ..spec.load import resolve_spec_path
from ..training.mfu import parse_layout
from ..training.model import load_model
from ..training.parallel import check_layout
from ..training.comm import CommEngine
from ..training.step import estimate_step
from ..engine.region_estimate import check_region_profile, estimate_region
from ..fabric.region_inventory import cut_apart_text, region_inventory
from ..spec.region_load import is_region_file, site_spec_files
from .common import GivenOnce, add_output_arguments, add_override_arguments
from .design_sets import overrides_for
from .estimate_args import add_profile_argument, as_profile_flag, check_profile_flag, profile_notes
from .layout_dp import design_dp, on_design
from .output import note
from .output_suffix import check_output_suffix
from .region import region_from_args
from .plan import work_lines
from .across import add_across_arguments, check_across_use
from .region_plan import region_job, render_region_plan

PLAN_FIGURES = ("power", "capex", "ownership", "goodput")  # the planner's figures: one bar or line per SPEC
FIGURES = ("inventory", "fabric", "oversubscription", "loads", "heatmap", "curves", "comparison") + PLAN_FIGURES
SCENARIO_FIGURES = ("loads", "heatmap", "curves")  # the figures of one scope: the whole cluster or one pod



def register(sub) -> None:
    p = sub.add_parser(
        "report", help="write an interactive HTML report (fabric, oversubscription, link loads, curves)",
        description="Write one self-contained HTML file that works offline: a summary of each cluster, its fabric "
        "drawn as layers, oversubscription per tier, link loads under a data-parallel all_reduce (whole cluster "
        "and one pod) and time/busbw curves per algorithm from 8 B to 16 GiB. With several SPECs, the same views "
        "side by side and a comparison table. --format png|svg writes one figure instead (needs kaleido and a "
        "Chromium).")
    p.add_argument("specs", nargs="*", metavar="SPEC",
                   help=f"spec files or bundled names (default: {DEFAULT_SPEC}); see 'topo list'")
    add_override_arguments(p, "a field of every SPEC (SPEC:KEY=VALUE: of that SPEC alone, as topo plan takes it)")
    p.add_argument("--fail", dest="failures", action="append", default=[], metavar="PART",
                   help="fail a part of every SPEC (as for describe and estimate: spine3, nic12.3, leaf3-spine0, "
                   "rail:K, plane:J, pod:N, random:LEVEL_OR_TIER:FRACTION[:SEED], random:link:F)")
    add_output_arguments(p, "topo-report.html, or topo-<figure>.<format>")
    add_profile_argument(p, "every collective of the report (curves, link loads, traffic mixes, the collectives "
                         "across the top tier) and of its --train job")
    p.add_argument("--plan", action="store_true",
                   help="add the planner's section: power, capex, bill of materials, goodput (see topo plan)")
    p.add_argument("--plan-file", metavar="FILE",
                   help="with --plan (implied): a TOML file of catalog overrides, as topo plan --plan-file takes it")
    p.add_argument("--train", "--model", dest="train", metavar="MODEL",
                   help="add a training job's section: step breakdown, memory, bytes per tier of MODEL laid out as "
                   "--layout on each SPEC (see topo train; --model, as topo train and topo plan name it, is the same)")
    p.add_argument("--layout", action=GivenOnce, metavar="L",
                   help="with --train: tp=8,pp=16,dp=...,global_batch=... or a layout TOML (without dp, each SPEC's "
                   "GPUs fill it from its first_gpu past its skip_domains, as topo train fills the fabric); placement "
                   "fields too: first_gpu=N, skip_domains=[5,17] (NVLink domains passed over, as topo train "
                   "--skip-domains)")
    p.add_argument("--tokens", metavar="N",
                   help="with --plan, --train and --layout (one site or a region): the time to train N tokens (15T, "
                   "2.5B, 15e12) and its energy in the plan's section, as topo plan --model M --layout L --tokens N "
                   "gives them")
    p.add_argument("--shares", metavar="S",
                   help="a region with --train: how its job's replicas split over the sites (by-size, the default, "
                   "or equal), as topo plan REGION --shares")
    add_across_arguments(p, "; with --train on a region: how its job spans the sites in the plan's section, as "
                         "topo plan REGION --across")
    p.add_argument("--format", default="html", choices=("html", "png", "svg"),
                   help="html: the whole report (default); png or svg: the one figure named by --figure")
    p.add_argument("--figure", choices=FIGURES,
                   help="with --format png|svg: which figure (default fabric; comparison needs several SPECs; "
                   f"{', '.join(PLAN_FIGURES)} are the planner's, one bar or line per SPEC, with --plan-file's "
                   "overrides)")
    p.add_argument("--scenario", choices=("cluster", "pod"),
                   help="with --figure loads|heatmap|curves: the whole cluster (default) or one pod")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..report import write_page
    from ..report.files import sign_image, write_bytes

    specs = args.specs or [None]
    start = time.perf_counter()
    _check_figure_options(args)
    # Refuse a bad output before minutes of work: a folder, an input, a file that is not ours (checked again
    # when writing).
    default = "topo-report.html" if args.format == "html" else f"topo-{args.figure}.{args.format}"
    out = args.output if args.output is not None else default
    check_output_suffix(out, args.format, {".html": "html", ".htm": "html", ".png": "png", ".svg": "svg"},
                        default="html")
    # every file the report reads (a bundled name or a layout string is no file, and matches no output)
    _check_job_numbers(args)
    inputs = [resolve_spec_path(s) for s in specs] + [f for f in (args.plan_file, args.train, args.layout) if f]
    output = dict(inputs=inputs, force=args.force, key="-o", force_option="--force")
    if len(specs) == 1 and is_region_file(specs[0]):  # checked with its sites' files, which are inputs too
        return run_region_report(args, out, output, start)
    check_output(out, **output)
    if args.plan_file and args.format != "html" and args.figure not in PLAN_FIGURES:
        raise TopoError(f"--plan-file applies to the planner's figures ({', '.join(PLAN_FIGURES)}) and the HTML "
                        f"report; --figure {args.figure} does not use it", key="--plan-file")
    if args.plan_file:  # a bad plan file fails before the report
        read_plan_file(args.plan_file)
    job = _job(args, specs) if args.train or args.layout else None  # a bad model or layout fails before the report
    if args.format == "html":
        reports = _reports(specs, args)
        for r in reports:  # tidy67: the page is written, the cut named on it (the region's report does the same)
            if r.cut:
                plan_too = ("; its plan without the all-reduce and all-to-all over every GPU (as topo plan "
                            "--no-collectives)") if args.plan or args.plan_file else ""
                note(f"note: {r.fabric.name}: {r.cut}: the page names the cut and draws the fabric, its degraded "
                     f"bisection and the collectives that still run{plan_too}")
        for msg in profile_notes(args.profile, [r.fabric for r in reports]):
            note(msg)
        trains = _trains(job, reports, args.layout, specs, args.profile) if job else None
        plans = _plans(args, reports, job, trains) if args.plan or args.plan_file else None
        works = [_work_text(p) for p in plans] if plans else None
        size = write_page(reports, out, plans=plans, trains=trains, works=works, **output)
        note(f"wrote {_where(out)} ({format_in(size, 'MB', '.1f')}) in {format_time(time.perf_counter() - start)}")
        return 0
    fig = _one_figure(args, specs)
    data = sign_image(_image(fig, args.format), args.format)
    write_bytes(out, data, **output)
    note(f"wrote {_where(out)} ({format_in(len(data), 'kB', '.0f')}) in {format_time(time.perf_counter() - start)}")
    return 0


def run_region_report(args, out, output, start) -> int:
    """A region of several sites: the sites and the DCI with their loads under a 1 GiB all-reduce, as HTML."""
    from ..report import write_region_page

    _refuse_region_flags(args)
    args.spec = args.specs[0]
    region = region_from_args(args)
    output = {**output, "inputs": [*output["inputs"], *site_spec_files(region.spec)]}  # its sites' files too
    check_output(out, **output)
    inv = region_inventory(region)
    check_profile_flag(args.profile, region.fabrics)  # rev67: an unknown name said by its flag
    check_region_profile(region, args.profile)  # a calibrated file of no site's network, before any note
    for msg in profile_notes(args.profile, region.fabrics):
        note(msg)
    est = None if inv.cut_apart else estimate_region(region, "all_reduce", [2 ** 30], profile=args.profile)
    if est is None:  # describe draws the cut; the page does too, without a collective no route can carry
        note(f"note: {cut_apart_text(inv)}: the page draws the sites and spans without a collective over every GPU")
    for n in est.notes if est is not None else []:
        note(f"note: {n}")
    # walk29 Left 2: the region's plan as topo plan REGION gives it (a region's plan runs no site's collectives);
    # report81: with --train's job across the sites as topo plan REGION --model times it (region_job)
    planned = render_region_plan(_region_plan(args, region)) if args.plan else None
    size = write_region_page(region, inv, est, out, plan_text=planned, **output)
    note(f"wrote {_where(out)} ({format_in(size, 'MB', '.1f')}) in {format_time(time.perf_counter() - start)}")
    return 0


def _refuse_region_flags(args) -> None:
    """The one line for a flag a region's report does not take: its page is HTML (no one figure of a region's is
    drawn alone), a region's plan takes no plan file (as ``topo plan REGION``), and a job across the sites needs
    its model and layout both, in the plan's section (``--plan``)."""
    if args.format != "html":
        raise TopoError("a region's report is the HTML page of its sites and DCI (with --plan, its plan); no one "
                        "figure of a region is drawn alone", key="--format")
    if args.plan_file:
        raise TopoError("a region's plan takes no plan file (as topo plan REGION); allowed: --plan, with the "
                        "region file's own [plan] keys or --set", key="--plan-file")
    if bool(args.train) != bool(args.layout):  # a region's job needs both: its step across the sites
        given, missing = ("--train", "--layout L") if args.train else ("--layout", "--train M")
        raise TopoError(f"times a job across the region's sites, which needs its model and its layout; allowed: "
                        f"{given} with {missing} and --plan (e.g. --train llama3-70b --layout "
                        f"tp=8,pp=4,global_batch=576: dp fills every site's GPUs)", key=given)
    if args.train and not args.plan:
        raise TopoError("a region's page shows its job in the plan's section (its step across the sites, time to "
                        "train, goodput, energy); allowed: --train with --plan (its step's breakdown: topo train "
                        f"{args.specs[0]} --model M)", key="--train")


def _region_plan(args, region):
    """The region's plan, with ``--train``'s job across its sites where given, as ``topo plan REGION --model``
    plans it (:func:`~topo.cli.region_plan.region_job`: the same layout, step, time to train and energy)."""
    if not args.train:
        return plan_region(region)
    args.model = args.train  # region_job reads topo plan's names
    layer, job = region_job(args, region)
    return plan_region(region, layers=[layer], **job)


def _check_job_numbers(args) -> None:
    """``--tokens`` read (one line naming it), and ``--tokens`` and ``--shares`` refused where nothing uses them."""
    region = len(args.specs) == 1 and is_region_file(args.specs[0])
    if args.tokens is not None:  # plan81: one site's page too, its plan's work block (topo plan's)
        if not (args.plan and args.train and args.layout):
            raise TopoError("the time to train is that of the plan's job; allowed: --tokens with --plan, --train M "
                            "and --layout L", key="--tokens")
        try:
            args.tokens = parse_count(args.tokens, "number of tokens")
        except UnitError as exc:
            raise TopoError(str(exc), key="--tokens") from None
    check_across_use(args, region, bool(args.train))  # tidy84: topo plan REGION --across's flags and words
    if args.shares is not None and not (region and args.train):
        raise TopoError(f"{args.shares!r}: splits a region's job over its sites; allowed: --shares by-size|equal "
                        "with a region of several sites and --train M --layout L", key="--shares")


def _check_figure_options(args) -> None:
    """Refuse --figure, --scenario, --plan, --train, --layout and --profile where they would be ignored; fill the
    defaults.

    The HTML report holds every figure, so ``--figure capex`` without ``--format png|svg`` would silently write
    the whole report (without the planner's figures unless ``--plan``), not the figure asked for.
    """
    if args.format == "html" and args.figure is not None:
        raise TopoError(f"--figure {args.figure} picks the one figure of --format png or svg; add --format png or "
                        "--format svg (the HTML report, the default format, holds every figure; the planner's with "
                        "--plan)", key="--figure")
    args.figure = args.figure or "fabric"
    if args.format != "html" and (args.train or args.layout):
        raise TopoError(f"--train and --layout add a section to the HTML report; --format {args.format} writes one "
                        "figure, which does not use them (topo train prints the job)",
                        key="--train" if args.train else "--layout")
    if args.format != "html" and args.plan and args.figure not in PLAN_FIGURES:
        raise TopoError(f"--plan adds the planner's section to the HTML report; --figure {args.figure} does not use "
                        f"it (the planner's figures: {', '.join(PLAN_FIGURES)})", key="--plan")
    if args.scenario is not None and (args.format == "html" or args.figure not in SCENARIO_FIGURES):
        raise TopoError(f"--scenario applies to --format png|svg with --figure {'|'.join(SCENARIO_FIGURES)} "
                        "(the HTML report shows both scopes)", key="--scenario")
    args.scenario = args.scenario or "cluster"
    priced = SCENARIO_FIGURES + ("comparison",)  # the figures of collectives priced with a profile
    if args.format != "html" and args.profile is not None and args.figure not in priced:
        raise TopoError(f"prices the report's collectives; --figure {args.figure} shows none (the figures that do: "
                        f"{', '.join(priced)}, and the HTML report)", key="--profile")


def _reports(specs, args):
    """``build_reports`` for the CLI: an unknown ``--profile`` name said by its flag (rev66; a file's own errors name
    the file)."""
    from ..report import build_reports
    try:
        return build_reports(specs, {s: overrides_for(args, s) for s in specs}, failures=args.failures,
                             profile=args.profile)
    except TopoError as exc:
        raise as_profile_flag(exc) from None


def _where(out: str) -> str:
    return "standard output" if out == "-" else out


def _one_figure(args, specs):
    from ..report import figures

    if args.figure in PLAN_FIGURES:
        from ..report import plan_figures

        if args.failures:
            raise TopoError(f"--figure {args.figure} shows the planner's power, cost and goodput, which failed parts do "
                            "not change; leave out --fail (topo plan --fail gives the network figures of the failed "
                            "fabric)", key="--fail")
        results = [plan(build_fabric(load_spec(s, overrides_for(args, s))), plan_file=args.plan_file,
                        collectives=False)
                   for s in specs]
        return getattr(plan_figures, f"{args.figure}_figure")(results)
    if args.figure == "comparison":
        if len(specs) < 2:
            raise TopoError("the comparison figure needs two or more SPECs", key="--figure")
        reports = _reports(specs, args)
        curves = {}
        for r in reports:
            for s in r.scenarios:
                curves[f"{r.inventory.name}, {s.key}"] = s.result
        return figures.busbw_comparison(curves)
    if len(specs) > 1:
        raise TopoError(f"--format {args.format} writes one figure of one SPEC, got {len(specs)} SPECs "
                        "(use --format html to see them side by side)", key="--format")
    if args.figure in ("inventory", "fabric", "oversubscription"):
        fabric = build_fabric(load_spec(specs[0], overrides_for(args, specs[0])))
        inv = inventory(fabric)
        if args.figure == "fabric":
            return figures.fabric_figure(fabric, inv)
        return figures.inventory_figure(inv) if args.figure == "inventory" else figures.oversubscription_figure(inv)
    (report,) = _reports(specs, args)
    s = next((x for x in report.scenarios if (x.key == "cluster") == (args.scenario == "cluster")), None)
    if s is None and report.cut:
        raise TopoError(f"{', '.join(args.failures)} cut the {args.scenario} scope's GPUs apart ({report.cut}), so "
                        f"--figure {args.figure} has no collective to draw; allowed: --format html (the page names "
                        "the cut and draws the rest) or --figure fabric|inventory|oversubscription", key="--fail")
    if s is None:
        raise TopoError(f"{report.inventory.name} has a single scope, no pod to show", key="--scenario")
    if args.figure == "curves":
        return figures.collective_curves(s.result, s.extra, s.label)
    fn = figures.link_load_distribution if args.figure == "loads" else figures.link_load_heatmap
    return fn(s.loads, report.fabric, s.label)


def _image(fig, fmt: str) -> bytes:
    if importlib.util.find_spec("kaleido") is None:  # plotly's image export imports it; said before it tries
        raise TopoError(f"writing {fmt} needs the kaleido package and a Chromium: pip install kaleido, and "
                        "apt-get install chromium (or use --format html)", key="--format")
    width = 1400 if fig.layout.height and fig.layout.height > 500 else 1100
    for attempt in (1, 2):
        try:
            return fig.to_image(format=fmt, width=width, scale=1 if fmt == "svg" else 2)
        except Exception as exc:  # kaleido reports a missing or broken browser in several ways
            # once more: on a loaded machine kaleido can call its page's script before the page defined it
            # ("ReferenceError: kaleido_scopes is not defined", seen in a CI dry run); a missing browser fails twice
            if attempt == 2:
                raise TopoError(f"kaleido could not render the figure ({type(exc).__name__}: {exc}); it needs a "
                                "Chromium, e.g. apt-get install chromium", key="--format") from None


def _job(args, specs):
    """The model of ``--train`` and its layout ``--layout`` on each SPEC: a layout without dp fills the SPEC's GPUs
    (:func:`~topo.cli.layout_dp.design_dp`), as `topo train` fills the fabric's (plan65: without dp every design
    ran dp 1, and one dp fitted one design only); an error names ``--layout`` and, of several, the SPEC."""
    if not (args.train and args.layout):
        raise TopoError("give both --train MODEL and --layout L", key="--train" if not args.train else "--layout")
    lays = []
    try:
        model = load_model(args.train)
        parse_layout(args.layout)  # a field no design can take is named once, without a design
    except TopoError as exc:
        raise TopoError(exc.message, source=exc.source if exc.source not in (None, "layout") else "--layout",
                        key=None if exc.key == "layout" else exc.key) from None  # walk41: "--layout: layout: ..."
    for name in specs:
        design = name or DEFAULT_SPEC
        dp = design_dp(args.layout, build_fabric(load_spec(name, overrides_for(args, name))), design)
        try:
            lay = parse_layout(args.layout, dp=dp)
            check_layout(model, lay)
        except TopoError as exc:
            raise _named(exc, args.layout, design, len(specs)) from None
        lays.append(lay)
    return model, lays


def _named(exc: TopoError, layout: str, design: str, designs: int) -> TopoError:
    """A layout's error on ``design``: named by ``--layout`` (or its file), and the design of several."""
    if designs > 1:
        return on_design(exc, layout, design)
    return TopoError(exc.message, source="--layout" if exc.source in (None, "layout") else exc.source,
                     key=None if exc.key == "layout" else exc.key)


def _plans(args, reports, job, trains) -> list:
    """Each report's plan: without the plan's own collectives (rev67, as topo plan --no-collectives: the page's plan
    section draws none of them, its network figures are the report's, priced with --profile, and a cut fabric's
    plan would stop at them with the page's note already printed); with ``--train``'s job where its step fits, as
    ``topo plan --model`` plans it (:func:`~topo.plan.train_time.job_layer`: its MFU, and the goodput and effective
    figures on the job's GPUs, the rest idle; plan70 Left c)."""
    out = []
    for i, r in enumerate(reports):
        layers, training = [], None
        if trains is not None and trains[0][i].fits:
            model, lays = job
            layer, training = job_layer(model.name, trains[0][i], lays[i].precision, float(model.total_params),
                                        args.tokens)
            layers = [layer]
        out.append(plan(r.fabric, layers=layers, plan_file=args.plan_file, collectives=False, training=training))
    return out


def _work_text(r) -> str:
    """A plan's work block as ``topo plan SPEC --model M --layout L [--tokens N]`` prints it
    (:func:`topo.cli.plan.work_lines`: the cost per million tokens, the time to train, the energy); "" without a
    job."""
    return "\n".join(work_lines(r)) if r.training is not None else ""


def _trains(job, reports, layout: str, specs, profile=None):
    """The training job on every report's fabric, each with its own layout: step results and the bytes per
    tier, the collectives priced with ``profile`` (None: each fabric's own)."""
    import pandas as pd

    from ..training.tier_bytes import tier_bytes  # pulls pandas: only when a report asks for a training job

    model, lays = job
    results, frames = [], []
    for r, lay, name in zip(reports, lays, specs):
        engine = CommEngine(r.fabric, profile=profile)  # the step and its bytes per tier alike
        try:
            results.append(estimate_step(r.fabric, model, lay, engine=engine))
        except TopoError as exc:  # a layout field the fabric refuses (skip_domains past its domains), as _job names it
            raise _named(exc, layout, name or DEFAULT_SPEC, len(specs)) from None
        frames.append(tier_bytes(r.fabric, model, lay, engine).assign(spec=name or DEFAULT_SPEC))  # a bar per design
    return results, pd.concat(frames, ignore_index=True)
