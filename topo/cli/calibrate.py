"""``topo calibrate LOG... -o FILE``: fit a cost profile to nccl-tests logs of one cluster and write it."""

from __future__ import annotations

from pathlib import Path

from ..atomic import check_output
from ..calibrate.calibrate import calibrate_logs, spec_inputs
from ..errors import TopoError
from ..units import count_noun, format_time
from .compare import add_cluster_arguments, cluster_flag_error, cluster_from_args
from .output import emit, emit_json, note
from .output_suffix import check_output_suffix

# suffixes of formats other than the TOML profile calibrate writes (walk36: -o p.json wrote TOML under a JSON name)
SUFFIXES = {".toml": "toml", ".json": "json", ".html": "html", ".htm": "html", ".csv": "csv", ".parquet": "parquet",
            ".graphml": "graphml", ".png": "png", ".svg": "svg"}


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="fit a cost profile to nccl-tests logs of one cluster",
                       description="Fit the profile's free parameters (per-protocol base latency, per-hop latency, "
                       "usable NVLink and network fractions, NVLS efficiency, pipeline window) to the measured "
                       "times with scipy's bounded least squares, and write a profile TOML that 'topo estimate "
                       "--profile FILE' and 'topo compare --profile FILE' load.")
    p.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests output files of the same cluster (- for standard input, once; a bundled "
                   "example's name, e.g. nccl1453-h100-allreduce)")
    add_cluster_arguments(p)
    p.add_argument("--profile", default="nccl", metavar="NAME",
                   help="bundled profile to start from (default nccl: the fabric's)")
    p.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="profile file to write (default: print it on stdout); never written over a LOG or --spec, and an "
                   "existing file topo did not write is kept unless --force")
    p.add_argument("--force", action="store_true", help="replace an existing output file topo did not write")
    p.add_argument("--name", default=None, help="the profile's name (default: the output file's stem)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document on stdout: the fit, and the profile as TOML text (profile_toml)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.json and args.output == "-":  # walk36: the profile's TOML then the JSON document, on one stdout
        raise TopoError("--json and -o - both print on stdout; give -o a file (the document's profile_toml holds "
                        "the profile)", key="-o")
    if args.output is not None:  # a bad -o fails before the fit (an empty one too)
        check_output_suffix(args.output, "toml", SUFFIXES, default="toml", writer="topo calibrate")
        check_output(args.output, inputs=[*args.logs, *spec_inputs(args.spec)], force=args.force, key="-o",
                     force_option="--force")
    try:
        res = calibrate_logs(args.logs, output=args.output, profile=args.profile, name=args.name, force=args.force,
                             output_key="-o", force_option="--force", collective=args.collective,
                             **cluster_from_args(args))
    except TopoError as exc:
        if exc.key == "name":
            raise TopoError(exc.message, key="--name") from None
        raise cluster_flag_error(exc) from None
    for log in res.logs:
        for a in log["notes"]:
            note(f"note ({log['path']}): {a}")
        for a in log["assumptions"]:
            note(f"assumption ({log['path']}): {a}")
    if args.json:
        if res.warning:
            note(f"warning: {res.warning}")
        emit_json(res.to_dict())
        return 0
    if args.output is None:
        emit(res.text)
    note(f"calibrated {res.base} on {count_noun(len(res.logs), 'run')}: median error {res.fit.mdape_before_pct:.1f}% -> "
         f"{res.fit.mdape_after_pct:.1f}% ({res.fit.nfev} model evaluations, {format_time(res.fit.seconds)})")
    note(f"fitted {count_noun(len(res.fit.values), 'parameter')} to {count_noun(res.fit.sizes, 'measured size')} (the error above is on "
         "those sizes: in sample; topo compare of a log left out of the fit, with --profile, gives its held-out error)")
    multipliers = res.fit.multipliers()
    for k, v in res.fit.values.items():
        # a multiplier is not the quantity: 'base_latency_LL128 = 0.70' read as 0.70 us (walk8)
        note(f"  {k} = x{v:.4g} (times the base profile's values)" if k in multipliers else f"  {k} = {v:.4g}")
        if k in res.fit.at_bound:
            note(f"    {k} is {res.fit.at_bound[k]}")
    for k, why in res.fit.not_identified.items():
        note(f"  not fitted, kept at the base profile's value: {k}: {why}")
    if res.warning:
        note(f"warning: {res.warning}")
    if args.output and args.output != "-":
        note(f"wrote {args.output}")
    if args.output and args.output != "-" and Path(args.output).is_file():  # not for /dev/null or a pipe
        note(f"it describes the cluster it was fitted on ({_fitted_on(res.logs)}): use it with that cluster's spec "
             f"(topo estimate SPEC --profile {args.output}) or the same flags (topo compare LOG ... --profile "
             f"{args.output})")
    return 0


def _fitted_on(logs: list[dict]) -> str:
    """The clusters the logs were fitted on, and "under the assumptions above" only when :func:`run` printed an
    assumption (walk32: ``--spec`` prints none, yet the line pointed at them)."""
    specs = ", ".join(sorted({log["spec"] for log in logs}))
    return f"{specs}, under the assumptions above" if any(log["assumptions"] for log in logs) else specs
