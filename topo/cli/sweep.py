"""``topo sweep STUDY``: a study's points on Dask, rows into a Parquet folder, a summary per design on stdout."""

from __future__ import annotations

import dataclasses
import signal
import sys
import threading
import time
from pathlib import Path

from ..atomic import SIGNATURE, STDOUT, check_output, open_output, safe_file_name
from ..errors import TopoError
from ..units import count_noun, format_in, format_time, format_usd, in_unit
from .output import emit, emit_json, note, table

REPORT_DEFAULT = "\0default"
"""--report given without a FILE (no argument holds a NUL byte, so no FILE is this); ``--report ''`` is refused as
empty (cli/main.py empty_option), not taken as the default name."""
FLAGS = {"scheduler": "--scheduler", "output": "-o", "batch_size": "--batch-size", "workers": "--workers",
         "scheduler_file": "--scheduler-file"}


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a study (axes over specs, options, failure draws, seeds) on Dask",
        description="Run every point of a study file (or a bundled study: "
        "failures-100k, designs-405b) and write one row per point to a Parquet folder, appended as each batch "
        "finishes; running it again computes only the points not yet there. Prints, per design, the mean, p50, "
        "p90, p99 and worst of the main figures, with the seed of the worst draw.")
    p.add_argument("study", metavar="STUDY", help="a study file (TOML) or a bundled study's name")
    p.add_argument("-o", "--output", metavar="FOLDER",
                   help="the results folder (default: STUDY-NAME.parquet); read with pandas.read_parquet")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="an existing Dask scheduler (tcp://host:8786); default: a local cluster with one worker "
                   "process per core (or Dask's configured scheduler-address); 'serial': this process, no Dask")
    p.add_argument("--scheduler-file", metavar="FILE",
                   help="the scheduler file of an existing Dask cluster (dask scheduler --scheduler-file FILE)")
    p.add_argument("--connect-timeout", default="10", metavar="SECONDS",
                   help="how long to wait for --scheduler to answer (default 10)")
    p.add_argument("--worker-timeout", default="60", metavar="SECONDS",
                   help="how long to wait for a first worker of a cluster that has none (default 60)")
    p.add_argument("--workers", metavar="N", help="worker processes of the local cluster (default: one per core, "
                   "at most one per point to compute)")
    p.add_argument("--seeds", metavar="N", help="only the study's first N seeds (a quick look; a later run of the "
                   "whole study skips them)")
    p.add_argument("--batch-size", metavar="N", help="points per task (default: guided, 1/(4 x workers) of the "
                   "points left, <= 32, down to 1)")
    p.add_argument("--csv", metavar="FILE", help="also write the rows as CSV (its first line says who wrote it)")
    p.add_argument("--report", nargs="?", const=REPORT_DEFAULT, default=None, metavar="FILE",
                   help="write the study's plotly page (default FILE: STUDY-NAME-report.html)")
    p.add_argument("--force", action="store_true", help="replace a --csv or --report file topo did not write")
    p.add_argument("--json", action="store_true", help="print one JSON document (counts and summaries) on stdout")
    p.set_defaults(func=run)


def _int(text, flag):
    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        raise TopoError(f"must be a whole number, got {text!r}", key=flag) from None
    if v < 1:
        raise TopoError(f"must be 1 or more, got {v}", key=flag)
    return v


def _seconds(text: str, flag: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 < v < 3600:
        raise TopoError(f"must be a number of seconds between 0 and 3600, got {text!r}", key=flag)
    return v


def run(args) -> int:
    try:
        return _run(args)
    except TopoError as exc:
        if exc.key in FLAGS:  # the option as the user typed it (-o, not the library's "output"), its file kept
            raise TopoError(exc.message, source=exc.source, key=FLAGS[exc.key]) from None
        raise


class _Bar:
    """Points done, rate and time left on one line of a terminal's stderr."""

    def __init__(self):
        self.shown = False

    def __call__(self, done: int, total: int, elapsed_s: float) -> None:
        self.shown = True
        frac = done / total if total else 1.0
        width = 30
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        rate = done / elapsed_s if elapsed_s > 0 else 0.0
        left = (total - done) / rate if rate > 0 else float("nan")
        eta = _duration(left) if left == left else "?"
        sys.stderr.write(f"\r[{bar}] {done:,}/{total:,} points, {rate:.1f}/s, {eta} left   ")
        sys.stderr.flush()

    def close(self):
        if self.shown:
            sys.stderr.write("\n")


def _duration(seconds: float) -> str:
    """A time left as a person reads it: ``42 s``, ``40 min``, ``3.2 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return format_in(seconds, "min", ".0f")
    return format_in(seconds, "h", ".1f")


_FRACTIONS = ("mfu", "throughput_vs_one_site", "goodput", "network_share", "bottleneck_utilization")
"""Figures that are fractions, printed as percentages as topo train and topo plan print them (walk16: the region's
throughput_vs_one_site read 0.8008 beside mfu's 35.3%)."""


def _fmt(fig: str, v) -> str:
    if v is None or v != v:
        return "-"
    if fig.endswith("_s"):
        return format_time(v)
    if fig.endswith("_usd"):
        return format_usd(v)
    if fig.endswith("_W"):
        return format_in(v, "MW", ",.2f") if abs(in_unit(v, "MW")) >= 1 else format_in(v, "kW", ",.1f")
    if fig in _FRACTIONS:
        return f"{v:.1%}"
    return f"{v:.4g}"


def _stop_on_sigterm(terminated: list[int]):
    """Make SIGTERM (a batch system's or ``kill``'s stop) stop the study as Ctrl-C does: the local cluster closed and
    only whole parts left, with the line saying how many points are in (walk42: SIGTERM killed this process at
    once, leaving Python's "leaked semaphore objects" warning and no word of what was kept). Returns the handler
    it replaced (None off the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        terminated.append(signum)
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, stop)


def _run(args) -> int:
    from ..sweep import SweepRun, sweep

    study = _study_of(args)
    if args.output is not None and not args.output.strip():  # '' had silently been the default folder
        raise TopoError(f"an empty folder name, got {args.output!r}; give a folder, or leave -o out for "
                        f"{safe_file_name(study.name, '.parquet')}", key="-o")
    out = args.output or safe_file_name(study.name, ".parquet")
    workers, batch = _int(args.workers, "--workers"), _int(args.batch_size, "--batch-size")
    report = _check_outputs(args, study, out)
    scheduler = None if args.scheduler in (None, "local") else args.scheduler
    if (scheduler is not None and scheduler != "serial" or args.scheduler_file) and workers is not None:
        raise TopoError("sets the size of the local cluster; an existing cluster has its own workers",
                        key="--workers")
    timeout_s = _seconds(args.connect_timeout, "--connect-timeout")
    worker_timeout_s = _seconds(args.worker_timeout, "--worker-timeout")
    bar = _Bar() if sys.stderr.isatty() and not args.json else None
    info = SweepRun()
    start = time.perf_counter()
    terminated: list[int] = []
    previous = _stop_on_sigterm(terminated)
    try:
        df = sweep(study, out, scheduler=scheduler, workers=workers, batch_size=batch, progress=bar, run=info,
                   connect_timeout_s=timeout_s, inputs=[args.study, *study.files],
                   scheduler_file=args.scheduler_file,
                   notify=note, worker_timeout_s=worker_timeout_s)
    except KeyboardInterrupt:
        if bar:
            bar.close()
        how = "terminated (SIGTERM)" if terminated else "interrupted"
        note(f"{how}: {info.skipped + info.computed:,} of {info.total:,} points are in {out} (whole batches); "
             "run the same command again to compute the rest")
        return 128 + signal.SIGTERM if terminated else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if bar:
        bar.close()
    for line in info.notices:
        note(line)
    ran = (f"{info.computed:,} computed on {info.where}" if info.skipped < info.total
           else "nothing to compute")  # every point was in the output already
    note(f"topo sweep: {study.name}: {count_noun(info.total, 'point')}, {info.skipped:,} already in {out}, {ran} "
         f"in {format_time(time.perf_counter() - start)}; {count_noun(info.errors, 'error row')}")
    return _finish(args, study, df, info, out, report)


def _study_of(args):
    """The study ``args`` name, with only its first ``--seeds`` seeds when given."""
    from ..sweep import load_study

    study = load_study(args.study)
    if args.seeds is not None:
        n = _int(args.seeds, "--seeds")
        if not study.seeds:
            raise TopoError(f"{study.name} has no seeds to take the first {n} of", key="--seeds")
        if n > len(study.seeds):
            raise TopoError(f"{study.name} has {len(study.seeds)} seeds, not {n}", key="--seeds")
        study = dataclasses.replace(study, seeds=study.seeds[:n], file_seeds=study.seeds)
    return study


def _check_outputs(args, study, out) -> str | None:
    """Refuse a bad --report or --csv before the sweep runs, one written over another output among them (the
    output folder ``out`` too); the report's file name (None: no report)."""
    report = None
    if args.report is not None:
        report = safe_file_name(study.name, "-report.html") if args.report == REPORT_DEFAULT else args.report
    _refuse_shared_outputs((("--report", report), ("--csv", args.csv)), out)
    if report is not None:
        check_output(report, inputs=[args.study, *study.files], force=args.force, key="--report",
                     force_option="--force")
    if args.csv:
        check_output(args.csv, inputs=[args.study, *study.files], force=args.force, key="--csv",
                     force_option="--force")
    return report


def _refuse_shared_outputs(given, out) -> None:
    """Raise TopoError when a file option (``(flag, path)`` pairs, path None when not given) names the sweep's
    output folder ``out`` or another option's file: the later write would replace the earlier one."""
    seen = {Path(out).resolve(): "the sweep's output folder (-o)"}
    for flag, path in given:
        if not path or str(path) == STDOUT:
            continue
        where = Path(path).resolve()
        if where in seen:
            raise TopoError(f"is also {seen[where]}; one would be written over the other; give another file",
                            source=str(path), key=flag)
        seen[where] = f"{flag}'s file"


def _finish(args, study, df, info, out, report) -> int:
    """Write the CSV and the report asked for, then print the summaries (a table, or --json) and the errors."""
    from ..report.sweep import main_figures, write_sweep_page
    from ..sweep import summarize

    summary = summarize(df)
    shown = summary[summary["figure"].isin(main_figures(df))]
    if args.csv:
        with open_output(args.csv, "w", inputs=[args.study, *study.files], force=args.force, key="--csv",
                         force_option="--force") as fh:
            fh.write(f"# {SIGNATURE} sweep {study.name}: read with pandas.read_csv(path, skiprows=1)\n")
            df.to_csv(fh, index=False)
    if report:
        write_sweep_page(df, summary, study, report, force=args.force, inputs=[args.study, *study.files])
        note(f"wrote {report}")
    if args.json:
        emit_json({"study": study.name, "output": str(out), "points": info.total, "skipped": info.skipped,
                   "computed": info.computed, "errors": info.errors, "replaced": info.replaced, "where": info.where,
                   "summaries": shown.drop(columns=["design"]).to_dict("records")})
        return _status(info)
    rows = [[r.label, r.figure, r.draws, r.errors] + [_fmt(r.figure, getattr(r, s)) for s in
                                                      ("mean", "p50", "p90", "p99", "worst")]
            + ["-" if r.worst_seed is None or r.worst_seed != r.worst_seed else int(r.worst_seed)]
            for r in shown.itertuples()]
    emit(table(rows, ["design", "figure", "draws", "errors", "mean", "p50", "p90", "p99", "worst", "worst seed"],
               right=[False, False, True, True, True, True, True, True, True, True]))
    errors = df[df["error"].notna()]
    for msg, n in errors.groupby("error", sort=False).size().head(5).items():
        note(f"error at {n:,} point{'s' if n != 1 else ''}: {msg}")
    return _status(info)


def _status(info) -> int:
    """1 when every point of the study is an error row (nothing was learned: a script must notice), else 0."""
    if info.total and info.errors == info.total:
        note(f"every one of the {info.total:,} points is an error row")
        return 1
    return 0
