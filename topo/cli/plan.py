"""``topo plan``: power, energy, cost, optics and cables, compute and goodput of one design, or several side by
side."""

from __future__ import annotations

from dataclasses import replace

from .. import training
from ..atomic import check_output, open_output
from ..errors import TopoError, Unreachable
from ..fabric.cut import cut_message
from ..plan import DesignComparison, PlanResult, plan
from ..plan.budget import fit_it_power
from ..plan.phasing import build_days
from ..plan.train_time import TrainingJob, job_layer
from ..plan.result import RANGED
from ..spec import DEFAULT_SPEC
from ..spec.load import resolve_spec_path
from ..units import (UnitError, count_noun, format_bandwidth, format_count, format_in, format_time, format_usd, in_unit,
                     parse_count, parse_power_W)
from .across import REGION_ONLY, add_across_arguments, check_across_use
from .bom_csv import write_bom_csv
from .common import GivenOnce, add_spec_arguments, fabric_from_args, spec_from_args
from .estimate_args import add_profile_argument, check_profile_flag, profile_notes
from .layout_dp import design_dp, on_design
from .output import emit, emit_json, note, table
from .plan_words import time_to_first, failure_lines, goodput_lines, job_lines
from .region_plan import is_region_file, refuse_region_flags, run_region_plan


def register(sub) -> None:
    p = sub.add_parser("plan", help="power, energy, cost, optics and cables, compute and goodput",
                       description="Plan a cluster from its spec and the catalog (topo/data/catalog): bill of "
                       "materials (switches, transceivers, cables by length), power and energy, capex and TCO (each "
                       "with its low-high range over the catalog's price ranges), peak and "
                       "delivered compute, failures and goodput, blast radius. Several SPECs are compared side by "
                       "side; --set SPEC:KEY=VALUE sets a key on one of them (SPEC as given, or a file's name "
                       "without .toml), --set KEY=VALUE on every one. Override any catalog value in the spec's [plan] table, a --plan-file, or "
                       "--set plan.<kind>.<key>=VALUE (e.g. --set plan.switches.QM9700.price_usd=40000).")
    add_spec_arguments(p, many=True)
    p.add_argument("--plan-file", metavar="FILE", help="a TOML file of catalog overrides (the keys of [plan])")
    p.add_argument("--days", type=float, metavar="N", help="training days for the compute budget (default: 100, "
                   "SemiAnalysis' 100 days; catalog workload.days)")
    p.add_argument("--mfu", type=float, metavar="X", help="model FLOPs utilisation, 0-1 (default 0.35: SemiAnalysis' "
                   "6e26 FLOP in 100 days at FP8; catalog workload.mfu)")
    p.add_argument("--pue", type=float, metavar="X", help="facility power / IT power, >= 1 (default: the halls' "
                   "cooling type's, cooling.<type>.pue in cooling.toml; catalog facility.pue)")
    p.add_argument("--model", metavar="M", help="take the MFU from `topo train` for this model (with --layout), each "
                   "SPEC's from its own step; a region: the job's step across its sites, data parallel across them")
    p.add_argument("--layout", action=GivenOnce, metavar="L",
                   help="parallel layout for --model, e.g. tp=8,pp=16,global_batch=2048 (without dp, each SPEC's "
                   "GPUs fill it: dp = GPUs / (tp x cp x pp), from its first_gpu past its skip_domains, as topo train "
                   "fills the fabric); placement fields too: first_gpu=N, skip_domains=[5,17] (NVLink domains passed "
                   "over, as topo train --skip-domains; "
                   "the step runs on the fabric as installed)")
    p.add_argument("--it-power", metavar="POWER",
                   help="an IT power budget (50MW, 800kW): size each SPEC to the most whole pods (scalable units "
                   "where it has no pods) whose IT power at nameplate fits it, and say what bounds it")
    p.add_argument("--tokens", metavar="N", help="with --model and --layout: the time to train N tokens (15T, 2.5B, "
                   "15e12) at the step and with the plan's goodput (failures, restarts, checkpoints), the job's "
                   "GPU-hours and, with the goodput, the days at the step's uncertainty interval's ends (--json: "
                   "time_to_train_interval_s); topo train --tokens gives the time at the step alone")
    p.add_argument("--no-collectives", action="store_true",
                   help="skip the estimates (the all-reduce and all-to-all across the top tier, over every GPU, and "
                   "the blast radius's collectives): the plan in about half the time at 100k GPUs")
    add_profile_argument(p, "the plan's collectives (across the top tier, the blast radius's) and --model's step")
    p.add_argument("--one-site", action="store_true",
                   help="a region of several sites: also plan its GPUs as one site of its first site's design")
    p.add_argument("--shares", metavar="S",
                   help="a region with --model: how its job's replicas split over the sites (by-size, the default, or "
                   "equal), as topo train REGION --shares; refused without a job or on one site's spec")
    add_across_arguments(p, "; with --model on a region: how the planned job spans its sites, its reload too (dp, "
                         "outer: every site holds whole replicas and receives the others' checkpoint shares over the "
                         "DCI; pp: each site reads its own stages' and sends nothing)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--bom-csv", metavar="FILE",
                   help="also write the bill of materials of every SPEC as CSV (switches, transceivers, cables by "
                   "length class; one row per line, with counts, power and prices; a region: every site's and every "
                   "DCI span's lines), written whole or not at all; "
                   "'-' prints it on stdout instead of the tables")
    p.add_argument("--force", action="store_true",
                   help="with --bom-csv: replace an existing file topo did not write (never a SPEC or plan file)")
    p.set_defaults(func=run)


def _layers(args, design: str | None = None, fabric=None) -> tuple[list[tuple[str, dict]], TrainingJob | None]:
    """The catalog layers of the flags and ``--model``'s job; with ``--model``, the MFU of its step on ``design`` (a
    SPEC as given) built as ``fabric``, each design its own."""
    layers, job = _flag_layers(args), None
    if args.model or args.layout:
        step, precision, params = train_step(args, design, fabric)
        layer, job = job_layer(args.model, step, precision, params, args.tokens)
        layers.insert(0, layer)
    return layers, job


def _flag_layers(args) -> list[tuple[str, dict]]:
    """The catalog layers of ``--days``, ``--mfu`` and ``--pue``."""
    layers = []
    for flag, kind, key in (("days", "workload", "days"), ("mfu", "workload", "mfu"), ("pue", "facility", "pue")):
        value = getattr(args, flag)
        if value is not None:
            layers.append((f"--{flag}", {kind: {key: value}}))
    return layers


def train_step(args, design: str | None = None, fabric=None):
    """``(step, precision, parameters)``: the step `topo train` predicts for ``--model`` laid out as ``--layout`` on ``design`` (a SPEC as given; None:
    the first) built as ``fabric``: a layout without dp fills its GPUs from the layout's first GPU past its skipped
    domains (:func:`~topo.cli.layout_dp.design_dp`), as `topo train` fills the fabric; an error names ``--layout``
    and, of several designs, the design."""
    name = design if design is not None else (args.specs or [None])[0]
    try:
        dp = None
        if args.layout and fabric is not None and args.model:
            training.parse_layout(args.layout)  # a field no design can take: named once, before any design's dp
            dp = design_dp(args.layout, fabric, name or DEFAULT_SPEC)
        spec = fabric.spec if fabric is not None else spec_from_args(args, name)  # sized to --it-power, if given
        return training.predict_step(spec, args.model, args.layout, dp=dp, profile=args.profile)
    except TopoError as exc:
        if exc.key not in ("model", "layout") and exc.source in ("layout", args.layout) and len(args.specs) > 1:
            raise on_design(exc, args.layout, name) from None  # which design of several the layout does not fit
        # a bad field of --layout's pairs is named by the flag, as topo train and topo report name it
        source = "--layout" if exc.source == "layout" else exc.source
        raise TopoError(exc.message, source=source, key=f"--{exc.key}" if exc.key in ("model", "layout")
                        else exc.key) from None


def run(args) -> int:
    names = args.specs or [None]
    if len(names) == 1 and is_region_file(names[0]):
        refuse_region_flags(args)  # --it-power too, before reading it (rev68)
        _check_numbers(args)
        return run_region_plan(args, names[0], _flag_layers(args))
    _check_numbers(args)
    if args.shares is not None:
        raise TopoError(f"{args.shares!r}: splits a region's job over its sites, and a plan of one site times no "
                        "job across sites; allowed: topo train REGION --model M --shares by-size|equal",
                        key="--shares")
    if args.one_site:
        raise TopoError(REGION_ONLY, key="--one-site")
    check_across_use(args, region=False, job=bool(args.model))
    if args.bom_csv is not None:  # a bad output fails before the plan
        if args.bom_csv == "-" and args.json:
            raise TopoError("--json and --bom-csv - both print on stdout; give --bom-csv a file", key="--bom-csv")
        check_output(args.bom_csv, inputs=_inputs(args), force=args.force, key="--bom-csv", force_option="--force")
    if args.profile is not None and args.no_collectives and not args.model:  # rev67: it was silently unused
        raise TopoError("prices the plan's collectives and --model's step; --no-collectives without --model prices "
                        "none (drop --profile, or give --model)", key="--profile")
    sized = [_sized(args, n) for n in names]
    fabrics = [fabric_from_args(args, n, spec) for n, (spec, _) in zip(names, sized)]
    check_profile_flag(args.profile, fabrics)  # rev67: an unknown name said by its flag, as train and report do
    for msg in profile_notes(args.profile, fabrics):
        note(msg)
    layers = [_layers(args, n, f) for n, f in zip(names, fabrics)]
    results = []
    for f, (lay, job), (_, fit) in zip(fabrics, layers, sized):
        try:
            results.append(plan(f, layers=lay, plan_file=args.plan_file, collectives=not args.no_collectives,
                                profile=args.profile, training=job, power_fit=fit))
        except Unreachable as exc:  # place64: the plan's own collectives over every GPU, cut by a failed part
            raise _cut_refusal(f, exc) from None
    train_notes = []
    if args.model and results[0].compute.mfu_source.startswith("--model"):
        for n, r, f in zip(names, results, fabrics):
            r.notes.append(_train_mfu_note(args, r, n, f))
            train_notes.append(r.notes[-1])
    if args.bom_csv is not None:
        with open_output(args.bom_csv, inputs=_inputs(args), force=args.force, key="--bom-csv",
                         force_option="--force") as fh:
            write_bom_csv(results, fh)
        if args.bom_csv == "-":
            return 0
        note(f"wrote {args.bom_csv}")
    if args.json:
        emit_json(results[0].to_dict() if len(results) == 1 else DesignComparison(results).to_dict())
    elif len(results) == 1:
        emit(render(results[0]))
    else:
        emit(render_comparison(results))
        fits = [f"{n or DEFAULT_SPEC}: {r.power_fit.note()}" for n, r in zip(names, results) if r.power_fit]
        # walk43: the job's hot spares, which set each design's goodput (none: each failure waits for its repair)
        spares = [f"{n or DEFAULT_SPEC}: {r.spare_note}" for n, r in zip(names, results) if r.spare_note]
        for text in fits + spares + train_notes:  # no row of notes; each names its design (rev68)
            emit(f"note: {text}")
        priced = [f"{n or DEFAULT_SPEC} {r.network.profile}" for n, r in zip(names, results) if r.network.profile]
        if priced:  # tidy67: as one design's text says it
            emit(f"collectives priced with profile (--profile to change): {', '.join(priced)}")
    return 0


def _cut_refusal(fabric, exc: Unreachable) -> TopoError:
    """The plan's collectives over every GPU cut apart by failed parts: the cut named as describe, train, estimate
    and the report name it (:func:`topo.fabric.cut.cut_message`; rev69: it said only the router's two GPUs), and the
    ways past it."""
    return TopoError(f"{cut_message(fabric, exc.message)}; the plan's all-reduce and all-to-all run over every GPU, "
                     "which the failed parts cut apart; allowed: --no-collectives (the plan of the failed fabric "
                     "without them: its degraded bisection, power and cost), or failed parts that leave every GPU a "
                     "path", key="--fail")


def _check_numbers(args) -> None:
    """``--it-power`` and ``--tokens`` read, or one line naming the flag; ``--tokens`` needs ``--model``."""
    for flag, parse in (("it_power", parse_power_W), ("tokens", lambda t: parse_count(t, "number of tokens"))):
        value = getattr(args, flag)
        if value is not None:
            try:
                setattr(args, flag, parse(value))
            except UnitError as exc:
                raise TopoError(str(exc), key=f"--{flag.replace('_', '-')}") from None
    if args.tokens is not None and not (args.model and args.layout):
        raise TopoError("the time to train is that of a named job's step; allowed: --tokens with --model M and "
                        "--layout L", key="--tokens")
    if args.it_power is not None and args.one_site:
        raise TopoError("sizes one design; allowed: --it-power on a spec, not with --one-site", key="--it-power")


def _sized(args, name: str | None):
    """``(spec, power fit)``: the design ``name`` sized to ``--it-power`` (:func:`topo.plan.budget.fit_it_power`,
    the IT power the planner computes with the flags' and plan file's overrides and the workload), or ``(None,
    None)`` without a budget. With ``--model`` each candidate count is planned as the final plan is: with the job's
    step on that count (:func:`_layers`: its MFU, parameters and precision, which size the dataset and the
    checkpoint, hence the storage), so the fit's IT power is the final plan's (plan70; tidy69 Left d). A count the
    job's layout does not fit is planned with the job's parameters and precision and the catalog's MFU (or
    ``--mfu``), kept in the fit (``no_step_units``), whose note says it where that count is the one past the fit
    (plan70 Left d); the final plan refuses such a count by the layout's words."""
    if args.it_power is None:
        return None, None
    flags = _flag_layers(args)
    if args.model and args.layout:
        flags.insert(0, ("--model", {"workload": _job_workload(args)}))

    no_step: dict[int, str] = {}  # unit counts the job's layout does not fit -> the MFU they were sized with

    def it_power_W(spec) -> float:
        layers = flags
        if args.model and args.layout:
            try:
                layers = _layers(args, name, fabric_from_args(args, name, spec))[0]
            except TopoError:  # the job's layout does not fit this count (or its fabric): no step to size with
                layers = None
        r = plan(spec, layers=layers or flags, plan_file=args.plan_file, collectives=False)
        if layers is None:
            key = "--mfu" if args.mfu is not None else "plan.workload.mfu"
            no_step[spec.cluster.num_units] = f"{r.compute.mfu:.3g}, {key}"
        return r.power.it_power_W

    sized, fit = fit_it_power(spec_from_args(args, name), args.it_power, it_power_W)
    return sized, replace(fit, no_step_units=tuple(sorted(no_step)), no_step_mfu=next(iter(no_step.values()), ""))


def _job_workload(args) -> dict:
    """``--model``'s parameters and ``--layout``'s precision as catalog workload fields (no step: neither depends on
    the design); a bad model or layout is named by its flag, as :func:`train_step` names it."""
    try:
        return {"params": float(training.load_model(args.model).total_params),
                "precision": training.parse_layout(args.layout).precision}
    except TopoError as exc:
        source = "--layout" if exc.source == "layout" else exc.source
        raise TopoError(exc.message, source=source, key=f"--{exc.key}" if exc.key in ("model", "layout")
                        else exc.key) from None


def _train_mfu_note(args, r: PlanResult, name: str | None, fabric) -> str:
    """Where the plan's MFU came from: `topo train`'s step of ``--model`` as ``--layout`` on this design, a job of
    the layout's GPUs (dp filled from the design's when the layout gives none), whose MFU the compute budget takes
    for every GPU of the design."""
    dp = design_dp(args.layout, fabric, name or DEFAULT_SPEC)
    lay = training.parse_layout(args.layout, dp=dp)
    filled = f" (dp {dp:,} fills its GPUs: the layout gives none)" if dp is not None else ""
    # tidy122: the placement the step ran, said as topo train says it (the step's own default_placement)
    _, placed = training.default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    text = (f"MFU {r.compute.mfu:.3g} is topo train's step of {args.model} as --layout {args.layout} on "
            f"{name or DEFAULT_SPEC}, a job of {format_count(lay.gpus)} of its {format_count(r.num_gpus)} GPUs{filled}"
            f"{f'; {placed}' if placed else ''}; the compute budget takes that MFU for every GPU")
    if args.failures:  # predict_mfu builds the spec's fabric as installed: a failed part is repaired within the days
        text += (f"; the step runs on the fabric as installed, without {', '.join(args.failures)} (topo train "
                 f"--fail gives the step with them)")
    return text


def _inputs(args) -> list[str]:
    paths = []
    for name in args.specs or [None]:
        try:
            paths.append(str(resolve_spec_path(name)))
        except TopoError:
            pass  # named again, with its error, when the plan loads it
    return paths + [f for f in (args.plan_file, args.model, args.layout) if f]  # a name or layout string: no file


def _mw(w: float) -> str:
    return format_in(w, "MW", ",.2f")


def _usd(x: float) -> str:
    return format_usd(x, smallest="M")


def _t(x) -> str:
    return "-" if x is None else format_time(x)


def _litres(x: float) -> str:
    return format_in(x, "million L", ",.1f") if in_unit(x, "million L") >= 1 else f"{x:,.0f} L"


def _storage_lines(st, mark) -> list[str]:
    """The storage section: what it must hold and write, the servers (of their kind) that do it, and how it is
    sized."""
    kind = st.kind
    sized = ("Llama 3's servers per GPU (storage.sizing = \"per_gpu\")" if st.sizing == "per_gpu" else
             f"from its needs (storage.sizing = \"needs\"; limit: {st.limit})")
    return [f"storage   {format_count(st.servers)} servers ({kind}, storage.kind), {sized}"
            + mark("storage.checkpoints_kept", "storage.bytes_per_token", "storage.write_budget_s",
                   f"storage.kinds.{kind}.power_W"),
            f"          needs {format_in(st.capacity_needed_bytes, 'PB')} ({st.checkpoints_kept} checkpoints of "
            f"{format_in(st.checkpoint_bytes, 'TB')} + dataset {format_in(st.dataset_bytes, 'PB')}, "
            f"{st.dataset_tokens:.3g} tokens) -> {count_noun(st.servers_for_capacity, 'server')}; a checkpoint in "
            f"{format_time(st.write_budget_s)} needs {format_bandwidth(st.write_needed_Bps)} -> "
            f"{count_noun(st.servers_for_bandwidth, 'server')}",
            f"          provides {format_in(st.capacity_bytes, 'PB')}, write {format_bandwidth(st.write_Bps)} (a "
            f"checkpoint in {format_time(st.checkpoint_write_s)}), read "
            f"{format_bandwidth(st.read_Bps)}; "
            f"{_mw(st.power_W)} (in IT power), {format_count(st.racks)} racks, {st.floor_m2:,.0f} m2 (a storage "
            f"room in the floor's total), {_usd(st.capex_usd)}"]


def _deployment_lines(r: PlanResult, mark) -> list[str]:
    """The build quarter by quarter: halls, GPUs and power online, capex spent (topo.plan.phasing)."""
    d = r.deployment
    if d.schedule == "ramp":
        used = {i["key"]: i["value"] for i in r.inputs}
        gpus, paced = d.quarters[-1].gpus_online, used["deployment.ramp_gpus"]
        days = build_days(gpus, d.ramp_gpus_per_quarter)
        how = (f"at a pace of {format_count(round(d.ramp_gpus_per_quarter))} GPUs per quarter (plan.deployment: "
               f"ramp_gpus in ramp_days, {format_count(round(paced))} GPUs in "
               f"{used['deployment.ramp_days']:g} days): its {format_count(gpus)} GPUs in {days:{_small_spec(days)}} "
               f"days" + (f", a pace published for a {format_count(round(paced))}-GPU build" if gpus < paced else ""))
    else:
        how = "as scheduled (plan.deployment.halls_per_quarter)"
    rows = [[q.label, f"{q.halls} ({q.halls_online})", f"{format_count(q.gpus_online)}", _usd(q.capex_usd),
             _usd(q.capex_to_date_usd), _mw(q.it_power_W), _mw(q.facility_power_W)] for q in d.quarters]
    head = (f"deployment: {count_noun(d.num_quarters, 'quarter')} {how}; capex booked as each hall comes online "
            "(servers, network, storage by GPUs; facility and cooling by IT power)"
            + mark("deployment.ramp_gpus", "deployment.ramp_days"))
    return [head, table(rows, ["quarter", "halls (online)", "GPUs online", "capex", "to date", "IT power",
                               "facility power"], right=[False] + [True] * 6)]


def _marker(r: PlanResult):
    """A function of catalog keys: ' *' when any of them rests on a placeholder (status assumption)."""
    guess = {a["key"] for a in r.assumptions if a["status"] == "assumption"}

    def mark(*keys):
        return " *" if any(k in guess for k in keys) else ""

    return mark


def _ends(cr, line, fmt=_usd) -> list[str]:
    """A cost line's expected, low and high figures, formatted."""
    low, expected, high = cr.line(line)
    return [fmt(expected), fmt(low), fmt(high)]


def _floor_lines(r: PlanResult) -> list[str]:
    """The header and the floor: racks, rows, halls, campus, longest links."""
    fl = r.floor
    out = [f"{r.name}: {format_count(r.num_gpus)} x {r.gpu} in {format_count(r.num_servers)} x {r.server_model}", ""]
    out.append(f"floor     {format_count(fl.server_racks)} server racks of {fl.servers_per_rack} servers "
               f"({in_unit(fl.rack_load_W, 'kW'):.1f} of {format_in(fl.rack_power_W, 'kW', '.0f')}, {fl.cooling.replace('_', ' ')} "
               f"cooling), {format_count(fl.network_racks)} network racks ("
               + (f"{format_count(fl.island_room_racks)} in each of {fl.islands} island rooms ({fl.island_tier}), "
                  if fl.islands > 1 else "")
               + f"{format_count(fl.core_room_racks)} in the central room); leaves "
               f"{fl.leaf_placement.replace('_', ' ')}")
    # a unit is the layout's (cluster.num_units): one rack on an NVL72 spec (its pod is the published scalable
    # unit of 8 racks), 8 server racks and a leaf rack on dgx-h100-superpod: the line names its racks
    out.append(f"          {fl.racks_per_row} racks per row ({fl.racks_per_row_source}), "
               f"{count_noun(fl.units_per_row, 'unit')} of "
               + (f"{fl.unit_racks_least}-{fl.unit_racks} racks" if fl.unit_racks_least < fl.unit_racks
                  else count_noun(fl.unit_racks, 'rack')) + " per row (a pod: "
               f"{count_noun(fl.units_per_pod, 'unit')}), {count_noun(fl.rows, 'row')}; "
               f"{fl.num_halls} hall{'s' if fl.num_halls > 1 else ''} of up to "
               f"{fl.pods_per_hall} pod{'s' if fl.pods_per_hall > 1 else ''} (limit: {fl.pods_per_hall_limit}"
               + (f"; {fl.num_halls // fl.islands} per island" if fl.islands > 1 else "") + ") in a "
               f"{fl.campus_columns}-column campus of {fl.campus_width_m:,.0f} x {fl.campus_depth_m:,.0f} m; "
               f"floor area {fl.area_m2:,.0f} m2" + (
                   f" + a storage room of {format_count(r.storage.racks)} racks, {r.storage.floor_m2:,.0f} m2 = "
                   f"{r.total_floor_m2:,.0f} m2" if r.storage is not None else ""))
    longest = ", ".join(f"{name} {m:,.0f} m" for name, m in fl.longest_m.items())
    out.append(f"          longest link: {longest}")
    return out


def _bom_lines(r: PlanResult, mark) -> list[str]:
    """The bill of materials: switches, transceivers and cables, with their power and cost."""
    rows = [[s.tier, s.model, format_count(s.count), f"{s.power_W_each:,.0f}",
             _usd(s.count * s.price_usd_each) + mark(f"switches.{s.model}.price_usd")] for s in r.bom.switches]
    rows += [[f"at {t.at}", t.type + (f" ({t.links // max(t.count, 1)} links)" if t.at == "nic" and t.links != t.count
                                      else ""), format_count(t.count), f"{t.power_W_each:,.0f}",
              _usd(t.count * t.price_usd_each) + mark(f"transceivers.{t.type}.price_usd")] for t in r.bom.transceivers]
    rows += [[cb.level, f"{cb.type} {cb.length_class}", format_count(cb.count),
              f"{cb.power_W / cb.count:,.0f}" if cb.power_W else "-",
              _usd(cb.price_usd) + mark(f"cables.{cb.type}.price_usd", f"cables.{cb.type}.price_per_m_usd")]
             for cb in r.bom.cables]
    return [table(rows, ["where", "item", "count", "W each", "cost"], right=[False, False, True, True, True]),
            f"total: {format_count(r.bom.num_switches)} switches, {format_count(r.bom.num_transceivers)} "
            f"transceivers ({format_count(r.nic_modules)} at NICs), {format_count(r.bom.num_cables)} cables"]


def _power_lines(r: PlanResult, mark) -> list[str]:
    """Power by part, facility power, energy, its cost, CO2, water, and the electrical plant."""
    p, fl, o = r.power, r.floor, r.ownership
    rows = [[name, _mw(w)] for name, w in p.parts().items()]
    if p.nic_optics_in_servers_W:  # shown inside the servers' power, not added (topo.plan.power)
        rows.insert(2, ["  of which NIC-side optics", _mw(p.nic_optics_in_servers_W)])
    cooled = fl.cooling.replace("_", " ") + " cooling"
    rows += [["IT power (nameplate)", _mw(p.it_power_W)],
             [f"facility (PUE {p.pue:g}: {cooled if p.pue_source.startswith('cooling') else p.pue_source})"
              + mark(p.pue_source), _mw(p.facility_power_W)],
             [f"facility average (servers at {100 * p.server_average_fraction:.1f}% of nameplate, x PUE {p.pue:g})"
              + mark("facility.server_average_fraction"), _mw(p.average_facility_power_W)],
             ["energy per year (facility average)", format_in(p.energy_per_year_Wh, "TWh", ",.3f")],
             [f"energy cost per year (${p.electricity_usd_per_kWh:g}/kWh)", _usd(p.energy_cost_per_year_usd)],
             ["  low - high (every price at its end)", "{} - {}".format(
                 *(_usd(x) for x in r.costs.line("energy_cost_per_year_usd")[::2]))],
             [f"CO2 per year ({o.grid_kg_co2_per_kWh:g} kg/kWh)", format_in(o.co2_per_year_kg, "Mt", ",.3f")],
             [f"water per year (WUE {p.wue_L_per_kWh:g} L/kWh of IT energy)"
              + mark(f"cooling.{fl.cooling}.wue_L_per_kWh"), _litres(p.water_per_year_L)]]
    out = [table(rows, ["power", ""], right=[False, True])]
    if r.electrical is not None:
        e = r.electrical
        out.append(f"electrical ({e.redundancy}, {e.blocks} blocks): {format_count(e.ups_modules)} UPS modules of "
                   f"{format_in(e.ups_module_W, 'MW', 'g')} ({_mw(e.ups_capacity_W)}), {format_count(e.generators)} generators of "
                   f"{format_in(e.generator_W, 'MW', 'g')} ({_mw(e.generator_capacity_W)})"
                   + mark("facility.ups_module_W", "facility.generator_W"))
    return out


def _capex_lines(r: PlanResult, mark) -> list[str]:
    """Capex by part with its low-high range, and the build quarter by quarter."""
    c, cr = r.capex, r.costs
    rows = [[name] + _ends(cr, f"capex.{c.PART_KEYS[name]}") for name in c.parts()]
    rows[-1][0] = (f"facility (per W of {'IT x PUE' if c.facility_basis == 'facility' else 'IT load'}: "
                   f"{format_in(c.facility_basis_W, 'MW', ',.1f')})")
    rows += [["capex"] + _ends(cr, "capex_usd"), ["per GPU"] + _ends(cr, "capex_per_gpu_usd", lambda v: f"${v:,.0f}"),
             ["network share", f"{100 * c.network_share:.1f}%", "", ""]]
    out = [table(rows, ["capex", "expected", "low", "high"], right=[False, True, True, True])]
    if r.deployment is not None:
        out += _deployment_lines(r, mark)
    return out


def _ownership_lines(r: PlanResult) -> list[str]:
    """The TCO by part, per GPU-hour, the prices it is most sensitive to, and how the ranges are made."""
    o, cr = r.ownership, r.costs
    rows = [[name] + _ends(cr, f"ownership.{o.PART_KEYS[name]}") for name in o.parts()]
    rows += [[f"TCO over {o.years:g} years"] + _ends(cr, "tco_usd"),
             ["per GPU-hour (every installed GPU)"] + _ends(cr, "cost_per_gpu_hour_usd", lambda v: f"${v:,.2f}")]
    if r.price_sensitivity:
        rows += [[f"  {x['key']} alone", "", f"${x['low']:,.2f}", f"${x['high']:,.2f}"]
                 for x in r.price_sensitivity[:5]]
    return [table(rows, [f"ownership over {o.years:g} years", "expected", "low", "high"],
                  right=[False, True, True, True]),
            *([f"note: the capex and TCO price the {r.storage_sized_for()}"] if r.storage is not None else []),
            f"note: low and high put every price at its low or high end together ({len(cr.prices)} prices; "
            "ends and their sources under --json 'cost_range'); a price you override is a quote, without a range"]


def _compute_lines(r: PlanResult) -> list[str]:
    """Peak compute and the training budget against the reference run."""
    k = r.compute
    peaks = ", ".join(f"{prec} {format_in(f, 'EFLOP/s', _small_spec(f / 1e18))}"
                      for prec, f in k.peak_flop_per_s.items())
    return [f"compute   peak {peaks}",
            f"          {k.days:,g} days at {k.precision} and MFU {k.mfu:.3g}: {k.flop:.3g} FLOP = "
            f"{k.reference_ratio:{_small_spec(k.reference_ratio)}}x {k.reference_name} "
            f"({k.reference_flop:.3g} FLOP); peak "
            + ", ".join(f"{v:{_small_spec(v)}}x ({prec})" for prec, v in k.peak_ratio_to_reference_cluster.items())
            + " its cluster"]


def _small_spec(value: float) -> str:
    """The format of a compute line's figure: one decimal from 1 up, two significant digits below, so a small
    cluster's peak or ratio is not printed 0.0 or as two precisions alike (walk33: 64 H100, bf16 and fp8 peaks
    both "0.1 EFLOP/s", "peak 0.0x ... its cluster")."""
    return ",.1f" if abs(value) >= 1 else ".2g"


def _goodput_lines(r: PlanResult, mark) -> list[str]:
    """Goodput with what is lost to each part, its sensitivity, the storage and the spares."""
    # walk24's hot spares, plan70's job's idle GPUs
    out = goodput_lines(r.reliability, r.cost_per_effective_gpu_hour_usd, r.training_gpus_words(), mark)
    out += work_lines(r)
    if r.storage is not None:
        out += _storage_lines(r.storage, mark)
    if r.spares:
        out.append("spares    " + ", ".join(f"{x.item} {format_count(x.spares)}" for x in r.spares)
                   + f" ({_usd(sum(x.price_usd for x in r.spares))}, not in capex): each pool lasts a restock lead "
                   "time with the catalog's probability (reliability.spares)"
                   + mark("reliability.spares.lead_time_days", "reliability.spares.service_level"))
    return out


def work_lines(r: PlanResult) -> list[str]:
    """The cost of the work done (per delivered PFLOP-hour; per million tokens of --model's job) and the time to
    train --tokens at the step and with the goodput: ``topo plan``'s work block, and one site's report page's
    (``topo report SPEC --plan --train M --layout L --tokens N``)."""
    k = r.compute
    out = [f"work      ${r.cost_per_pflop_hour_usd:,.2f} per delivered PFLOP-hour (3.6e18 model FLOP at {k.precision}, "
           f"MFU {k.mfu:.3g}): the cost per effective GPU-hour x 1e15 / (peak per GPU x MFU)"]
    return out + job_lines(r.training, r.cost_per_million_tokens_usd, r.time_to_train, energy=r.energy_to_train)


def _blast_lines(r: PlanResult) -> list[str]:
    """What one failed part of each kind cuts off, and how much it slows a collective across two pods (or over every
    GPU of a one-pod cluster)."""
    rows = [[b.part, format_count(b.gpus_disconnected), format_count(b.gpus_in_affected_servers),
             format_count(b.gpus_below), f"{100 * b.capacity_lost_fraction:.3g}%"] for b in r.blast_radius]
    out = [table(rows, ["one failed", "GPUs cut off", "GPUs in servers hit", "GPUs below", "uplink capacity lost"],
                 right=[False, True, True, True, True])]
    if r.failure_impact:
        out.append(f"with one part failed, a 1 GiB all_reduce over {r.failure_impact[0].over}: " + "; ".join(
            _impact_words(x) for x in r.failure_impact))
    return out


def _impact_words(x) -> str:
    """One part's row: a cut-off stops the collective; a part the failure table counts as an interruption (a NIC)
    stops the job, counted in the goodput, then runs at its slowdown after the restart; else its slowdown."""
    if x.stops:
        return f"{x.name} stops it ({x.stops})"
    if x.interrupts_as is not None:
        return (f"{x.name} stops the job (the failure table's '{x.interrupts_as}' interruptions, "
                f"{x.interruptions_per_day:.3g}/day here, counted in the goodput), then {x.slowdown:.2f}x after the "
                f"restart on the parts left ({x.bottleneck})")
    return f"{x.name} {x.slowdown:.2f}x ({x.bottleneck})"


def _network_lines(r: PlanResult) -> list[str]:
    """Bisection bandwidth, the top tier's collectives, and the plan's notes."""
    n = r.network
    out = [f"network   bisection {format_bandwidth(n.bisection_bandwidth_Bps)} "
           f"({format_bandwidth(n.bisection_bandwidth_per_gpu_Bps)} per GPU)"]
    if n.all_reduce_s is not None:
        out.append(f"          across the {n.top_tier} ({n.num_blocks} {n.block_name}s of "
                   f"{format_count(n.gpus_per_block)} GPUs): 1 GiB all_reduce, {format_count(n.all_reduce_gpus)} GPUs "
                   f"in communicators of one GPU per {n.block_name}: {_t(n.all_reduce_s)} (bottleneck "
                   f"{n.all_reduce_bottleneck}); 1 GiB alltoall, all {format_count(n.alltoall_gpus)} GPUs: "
                   f"{_t(n.alltoall_s)} (bottleneck {n.alltoall_bottleneck})")
    what = ["the top tier's"] * (n.all_reduce_s is not None) + ["the blast radius's"] * bool(r.failure_impact)
    if n.profile is not None and what:  # tidy67: --profile priced them, unsaid; train's line
        out.append(f"          collectives priced with profile {n.profile} (--profile to change): {', '.join(what)}")
    out += [f"note: {text}" for text in r.notes]
    out.append(f"note: {len(r.assumptions)} values this plan uses are assumptions or overrides (see --json "
               "'assumptions'); a figure marked * rests on a placeholder (status assumption); the floor, economics "
               "and reliability inputs with their sources are under --json 'inputs'")
    return out


def render(r: PlanResult) -> str:
    """The text of one plan: its sections in order, a blank line between them.

    Parameters
    ----------
    r : PlanResult
        The plan of one design.

    Returns
    -------
    str
        The lines ``topo plan`` prints; a figure marked ``*`` rests on a placeholder (status assumption).
    """
    mark = _marker(r)
    sections = [_floor_lines(r), _bom_lines(r, mark), _power_lines(r, mark), _capex_lines(r, mark),
                _ownership_lines(r), _compute_lines(r) + failure_lines(r.reliability, r.num_gpus) + _goodput_lines(r, mark),
                _blast_lines(r), _network_lines(r)]
    return "\n\n".join("\n".join(s) for s in sections)


_ROWS = [
    ("GPUs", "num_gpus", lambda v: format_count(v)),
    ("switches", "switches", lambda v: format_count(v)),
    ("transceivers", "transceivers", lambda v: format_count(v)),
    ("cables", "cables", lambda v: format_count(v)),
    ("network power", "network_power_W", _mw),
    ("network capex", "network_capex_usd", _usd),
    ("network share of capex", "network_share", lambda v: f"{100 * v:.1f}%"),
    ("bisection per GPU", "bisection_bandwidth_per_gpu_Bps", format_bandwidth),
    ("top-tier all_reduce: GPUs (communicators of one per block)", "crosspod_all_reduce_gpus",
     lambda v: "-" if v is None else format_count(v)),
    ("top-tier all_reduce 1 GiB", "crosspod_all_reduce_s", _t),
    ("top-tier alltoall: GPUs", "crosspod_alltoall_gpus", lambda v: "-" if v is None else format_count(v)),
    ("top-tier alltoall 1 GiB", "crosspod_alltoall_s", _t),
    ("NIC-side optical modules", "nic_modules", lambda v: format_count(v)),
    ("first job-stopping optics failure (both ends)", "first_job_optics_failure_s", time_to_first),
    ("first NIC-side optics failure", "first_nic_optics_failure_s", time_to_first),
    ("first optical failure (any module)", "first_optical_failure_s", time_to_first),
    ("halls", "halls", lambda v: format_count(v)),
    ("floor area", "floor_area_m2", lambda v: f"{v:,.0f} m2"),
    ("floor with storage", "total_floor_m2", lambda v: f"{v:,.0f} m2"),
    ("cooling", "cooling", lambda v: v.replace("_", " ")),
    ("longest link", "longest_link_m", lambda v: f"{v:,.0f} m"),
    ("IT power", "it_power_W", _mw),
    ("facility power", "facility_power_W", _mw),
    ("PUE (cooling type, or facility.pue)", "pue", lambda v: f"{v:g}"),
    ("average facility draw", "average_facility_power_W", _mw),
    ("energy cost per year", "energy_cost_per_year_usd", _usd),
    ("capex", "capex_usd", _usd),
    ("capex per GPU", "capex_per_gpu_usd", lambda v: f"${v:,.0f}"),
    ("quarters to build (plan.deployment)", "deployment_quarters", lambda v: "-" if v is None else format_count(v)),
    ("GPUs online after the first quarter", "first_quarter_gpus", lambda v: "-" if v is None else format_count(v)),
    ("capex in the first quarter", "first_quarter_capex_usd", lambda v: "-" if v is None else _usd(v)),
    ("storage and front-end capex", "storage_and_frontend_capex_usd", _usd),
    ("storage servers", "storage_servers", lambda v: format_count(v)),
    ("storage capacity", "storage_capacity_bytes", lambda v: format_in(v, "PB")),
    ("storage write", "storage_write_Bps", format_bandwidth),
    ("checkpoint write (goodput model)", "checkpoint_write_s", format_time),
    ("storage power", "storage_power_W", _mw),
    ("storage racks", "storage_racks", lambda v: format_count(v)),
    ("storage floor", "storage_floor_m2", lambda v: f"{v:,.0f} m2"),
    ("TCO", "tco_usd", _usd),
    ("cost per GPU-hour", "cost_per_gpu_hour_usd", lambda v: f"${v:,.2f}"),
    ("CO2 per year", "co2_per_year_kg", lambda v: format_in(v, "Mt", ",.3f")),
    ("water per year", "water_per_year_L", _litres),
    ("MFU (compute budget)", "mfu", lambda v: f"{v:.3g}"),
    ("training FLOP (peak x MFU x days)", "flop", lambda v: f"{v:.3g}"),
    ("interruptions per day", "interruptions_per_day", lambda v: f"{v:.1f}"),
    ("goodput", "goodput", lambda v: f"{100 * v:.1f}%"),
    ("effective FLOP (goodput, hot spares idle)", "effective_flop", lambda v: f"{v:.3g}"),
    ("cost per effective GPU-hour", "cost_per_effective_gpu_hour_usd", lambda v: f"${v:,.2f}"),
    ("cost per delivered PFLOP-hour", "cost_per_pflop_hour_usd", lambda v: f"${v:,.2f}"),
    ("cost per million tokens (--model)", "cost_per_million_tokens_usd", lambda v: "-" if v is None else f"${v:,.3f}"),
    ("time to train --tokens (with goodput)", "time_to_train_s",
     lambda v: "-" if v is None else format_in(v, "days", ",.1f")),
    ("generator capacity", "generator_capacity_W", lambda v: "-" if v is None else _mw(v)),
    ("spare pools", "spares_usd", _usd),
]


def _cell(h: dict, key: str, fmt) -> str:
    """A figure, and its low-high range when it depends on prices."""
    if key in RANGED:
        return f"{fmt(h[key])} ({fmt(h[key + '_low'])}-{fmt(h[key + '_high'])})"
    return fmt(h[key])


def _by(lines, key, what) -> dict:
    """Counts (and the switch models) summed per ``key`` of bill-of-materials lines, in their order."""
    out: dict = {}
    for x in lines:
        count, models = out.get(key(x), (0, []))
        out[key(x)] = (count + x.count, models + ([what(x)] if what(x) and what(x) not in models else []))
    return out


def _breakdown(per_design: list[dict]) -> list[list[str]]:
    """One indented row per name any design has (tiers, transceiver types), "-" where a design has none."""
    names = list(dict.fromkeys(n for d in per_design for n in d))
    return [[f"  {n}"] +
            [(format_count(d[n][0]) + (f" {'/'.join(d[n][1])}" if d[n][1] else "")) if n in d else "-"
             for d in per_design] for n in names]


def render_comparison(results: list[PlanResult]) -> str:
    """The designs side by side: the headline figures, with the switches per tier (and model), the transceivers
    per type and the level each top-tier collective is bound by."""
    heads = [r.headline() for r in results]
    rows = []
    for label, key, fmt in _ROWS:
        rows.append([label] + [_cell(h, key, fmt) for h in heads])
        if key == "switches":
            rows += _breakdown([_by(r.bom.switches, lambda x: x.tier, lambda x: x.model) for r in results])
        elif key == "transceivers":
            rows += _breakdown([_by(r.bom.transceivers, lambda x: x.type, lambda x: None) for r in results])
        elif key == "tco_usd":  # walk31: two TCOs for one building, their storage sized for two models
            rows.append(["  storage sized for"] + [r.storage_model() or "-" for r in results])
        elif key in ("crosspod_all_reduce_s", "crosspod_alltoall_s"):
            which = "all_reduce_bottleneck" if key == "crosspod_all_reduce_s" else "alltoall_bottleneck"
            rows.append(["  bound by"] + [getattr(r.network, which) or "-" for r in results])
    return table(rows, [""] + [h["name"] for h in heads], right=[False] + [True] * len(heads))
