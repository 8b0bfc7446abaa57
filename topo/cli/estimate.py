"""``topo estimate``: collective times in an nccl-tests-like table, or one JSON document."""

from __future__ import annotations

import math
import re
from contextlib import contextmanager

import numpy as np

from ..engine.algorithms.across_sites import CROSS_SITE_ALGORITHMS
from ..engine.bottleneck_text import utilization_factors
from ..engine.collectives import ALGORITHMS, COLLECTIVES, DATA_TYPES, REDUCTION_OPS
from ..engine.cost import LIMITS
from ..engine.estimate import estimate, size_sweep
from ..engine.interval import regime_of
from ..engine.options import CHOICES, EstimateOptions
from ..engine.result import EstimateResult
from ..engine.traffic import MixResult, run_mix
from ..engine.traffic_file import bundled_traffic, load_traffic
from ..errors import TopoError, Unreachable
from ..fabric.cut import cut_message
from ..fabric.failures import failures_summary
from ..training.gpus import gpu_compute
from ..units import UnitError, format_bytes_exact, format_in, parse_size_bytes, parse_size_fraction
from .region import is_region_args
from .region_estimate import run_estimate as run_region_estimate
from .common import add_spec_arguments, fabric_from_args, technology_note
from .estimate_args import add_placement_arguments, check_placement_flags, parse_ranks, profile_mismatch
from .flags import FLAGS
from .output import emit, emit_json, note, safe_text


def flag_error(exc: TopoError) -> TopoError:
    """The library's error with its option name replaced by the command-line flag."""
    if exc.key in FLAGS and not exc.source:
        return TopoError(exc.message, key=FLAGS[exc.key])
    return exc


# flags whose option a traffic mix sets per member, in its file
MEMBER_OPTIONS = ("collective", "sizes", "min_bytes", "max_bytes", "factor", "step_bytes", "gpus", "ranks",
                  "rank_order", "placement", "rail", "groups", "group_layout", "algorithm", "choose", "protocol", "channels",
                  "chunks", "stages")


def _dest(flag: str) -> str:
    """The argparse attribute a flag sets."""
    return {"-b": "minbytes", "-e": "maxbytes", "-f": "stepfactor", "-i": "stepbytes"}.get(
        flag, flag.lstrip("-").replace("-", "_"))


def _default(option: str) -> str:
    """``default X`` for a flag's help, from :class:`EstimateOptions` (the one place defaults are declared)."""
    return f"default {EstimateOptions.default(option)}"


def register(sub) -> None:
    p = sub.add_parser(
        "estimate", help="estimate a collective's time, algbw and busbw (nccl-tests style)",
        description="Estimate a collective on the fabric: alpha-beta over the routed links with contention. "
        "Sizes as nccl-tests takes them (8, 64K, 1M, 16G, or 1GiB). Default: all_reduce on every GPU, "
        "8 B to 16 GiB by factors of 2. Below 64 MiB, where the model is weaker, the range(us) column gives where "
        "80% of measured times fell around such a model time on clusters the model was not fitted on "
        "(topo/data/accuracy/collective_interval.toml; --json time_low_s and time_high_s, --csv time_low_us and "
        "time_high_us).")
    # a value such as -1G reads as the value of --size (so its sign is what the error names), not as an option
    p._negative_number_matcher = re.compile(r"^-\d[\w.+/ ]*$|^-\.\d[\w.+/ ]*$")
    add_spec_arguments(p)
    _nccl_tests_arguments(p)
    _placement_arguments(p)
    _model_arguments(p)
    _output_arguments(p)
    p.set_defaults(func=run)


def _nccl_tests_arguments(p) -> None:
    """The collective and its sizes, and nccl-tests' own flags, as its scripts pass them."""
    p.add_argument("--collective", default=None, metavar="NAME",
                   help=f"{', '.join(COLLECTIVES)} (hyphens accepted; default all_reduce)")
    p.add_argument("-c", dest="c", default=None, metavar="NAME|0|1",
                   help="a collective's name, as --collective; or 0 or 1, nccl-tests' -c (--check), as its scripts "
                   "pass it")
    p.add_argument("--check", default=None, metavar="0|1",
                   help="nccl-tests' result check: accepted for its scripts; nothing is computed, so #wrong is N/A")
    p.add_argument("-b", "--minbytes", default=None, metavar="MIN", help="smallest size (default 8)")
    p.add_argument("-e", "--maxbytes", default=None, metavar="MAX", help="largest size (default 16G)")
    p.add_argument("-f", "--stepfactor", default=None, metavar="FACTOR", help="size multiplier (default 2)")
    p.add_argument("-i", "--stepbytes", default=None, metavar="STEP",
                   help="bytes between sizes instead of a factor, as nccl-tests' -i")
    p.add_argument("-n", "--iters", default=None, metavar="N",
                   help="nccl-tests' timed iterations: accepted for its scripts; the model times one call")
    p.add_argument("-w", "--warmup-iters", default=None, metavar="N",
                   help="nccl-tests' warm-up iterations: accepted for its scripts; the model has no warm-up")
    p.add_argument("-r", "--root", default=None, metavar="0",
                   help="root rank of broadcast, reduce, scatter and gather: 0, the rank the model times")
    p.add_argument("--size", default=None, metavar="S", help="one size instead of a sweep, e.g. 1GiB")
    p.add_argument("-d", "--datatype", default="float", metavar="TYPE",
                   help=f"nccl-tests' data type, for the count column: {', '.join(DATA_TYPES)} (default float)")
    p.add_argument("-o", "--op", default=None, metavar="OP",
                   help=f"nccl-tests' reduction op, for the redop column: {', '.join(CHOICES['op'])} ({_default('op')}; "
                   "the time does not depend on it, but NCCL leaves PAT out of a reduce-scatter with avg or mulsum)")


def _placement_arguments(p) -> None:
    """Where the collective runs: the GPUs, and the communicators over them."""
    add_placement_arguments(p)
    p.add_argument("--groups", default=None, metavar="G",
                   help="run G identical communicators at once over the chosen GPUs (data/tensor parallelism; "
                   f"{_default('groups')})")
    p.add_argument("--group-layout", default=None, choices=CHOICES["group_layout"],
                   help="strided: group j = GPUs j, j+G, ... (data-parallel replicas); blocked: consecutive blocks "
                   f"({_default('group_layout')})")


def _model_arguments(p) -> None:
    """How the collective is timed: algorithm, protocol, channels, ECMP, contention, profile."""
    algos = sorted({a for v in ALGORITHMS.values() for a in v})
    p.add_argument("-a", "--algorithm", default=None, metavar="NAME",
                   help=f"auto (one of NCCL's per size, see --choose), one of: {', '.join(algos)}; or, as NCCL_ALGO "
                        f"reads them, a list to choose among (ring,tree) or to leave out (^nvls,nvls_tree); across "
                        f"sites, {', '.join(CROSS_SITE_ALGORITHMS)} in the same forms ({_default('algorithm')})")
    p.add_argument("--choose", default=None, choices=CHOICES["choose"],
                   help="how auto picks: fastest on the routed fabric, or as NCCL's tuner does by its own "
                        f"cost model (topo.engine.tuner), then timed on the routed fabric ({_default('choose')})")
    p.add_argument("--protocol", default=None, metavar="PROTO",
                   help=f"pin NCCL's protocol as NCCL_PROTO does: {', '.join(CHOICES['protocol'])} (default: "
                   "fastest)")
    p.add_argument("--channels", default=None, metavar="N",
                   help="pin NCCL's channel count as NCCL_MIN/MAX_NCHANNELS do (default: one per NIC)")
    p.add_argument("--gpus-per-process", default=None, metavar="N",
                   help="GPUs one process and thread launches in turn, as nccl-tests' -g N: no collective takes less "
                        f"than N host launches ({_default('gpus_per_process')}: one GPU per process, as MPI runs)")
    p.add_argument("--ecmp", default=None, choices=CHOICES["ecmp"], help=f"ECMP model ({_default('ecmp')})")
    p.add_argument("--subflows", default=None, metavar="K",
                   help=f"with --ecmp hash: parts each flow is hashed as ({_default('subflows')})")
    p.add_argument("--hash-seed", default=None, metavar="N",
                   help="with --ecmp hash: a whole number mixed into the hash, to draw other collisions "
                   f"({_default('hash_seed')}: the hash without a seed)")
    p.add_argument("--sharing", default=None, choices=CHOICES["sharing"],
                   help=f"contention model: equal-share bottleneck or max-min fair ({_default('sharing')})")
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help="nccl: NCCL-derived efficiencies and latencies of the fabric's GPU and network (default); "
                   "ideal: textbook alpha-beta; a bundled profile (topo profile list) or a file topo calibrate wrote")
    p.add_argument("--no-pxn", action="store_true", help="each GPU uses its own NIC (no hop over NVLink)")
    p.add_argument("--chunks", default=None, metavar="K", help="store-and-forward chunks for tree/broadcast (>= 1)")
    p.add_argument("--stages", default=None, metavar="N",
                   help=f"pipeline stages for -c pipeline ({_default('stages')})")


def _output_arguments(p) -> None:
    """A traffic file in place of one collective, and what is printed."""
    p.add_argument("--traffic", default=None, metavar="FILE",
                   help="run the collectives of a traffic file at once (TOML; bundled: "
                   + ", ".join(bundled_traffic()) + "); see the README's Traffic mixes")
    p.add_argument("--detail", action="store_true",
                   help="also show the chosen plan's phases and the 10 most utilized links at the largest size (across "
                   "sites: the chosen algorithm's phases and the order the tree chains the sites' roots in)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--csv", action="store_true",
                   help="print the table as CSV: nccl-tests' columns (in place repeated), then topo's")


def _int(text, key):
    try:
        v = int(text)
    except (TypeError, ValueError):
        raise TopoError(f"must be a whole number, got {text!r}", key=key) from None
    return v


_WHOLE = ("gpus", "rail", "channels", "subflows", "hash_seed", "chunks", "stages", "groups", "gpus_per_process")  # flags read as whole numbers
_NAMES = ("placement", "algorithm", "op", "choose", "protocol", "ecmp", "sharing", "profile", "group_layout", "rank_order")


def options_from_args(args) -> EstimateOptions:
    """The estimate options the flags describe: only the flags given; every other option keeps the default
    :class:`EstimateOptions` declares (whole numbers checked here, the rest by the options)."""
    check_placement_flags(args)
    given = {k: _int(getattr(args, k), FLAGS[k]) for k in _WHOLE if getattr(args, k) is not None}
    given.update({k: getattr(args, k) for k in _NAMES if getattr(args, k) is not None})
    if args.ranks is not None:
        given["ranks"] = parse_ranks(args.ranks)
    if args.no_pxn:
        given["pxn"] = False
    opts = EstimateOptions.from_kwargs(**given)
    _check_hash_seed(args, opts.ecmp)
    return opts


def _check_hash_seed(args, ecmp: str) -> None:
    """``--hash-seed`` draws other hash collisions: with ideal ECMP it would change nothing, so it is refused."""
    if args.hash_seed is not None and ecmp != "hash":
        raise TopoError(f"draws other ECMP hash collisions, and ECMP is {ecmp!r} here: the seed would change "
                        "nothing; add --ecmp hash, or leave --hash-seed out", key="--hash-seed")


def run(args) -> int:
    try:
        return _run(args)
    except TopoError as exc:
        raise flag_error(exc) from None


def nccl_tests_flags(args) -> list[str]:
    """Read nccl-tests' flags that do not change the model (``-c 0|1``, ``--check``, ``-n``, ``-w``, ``-r 0``):
    each checked as nccl-tests reads it, and the notes that say what they mean here."""
    if args.c in ("0", "1"):  # nccl-tests' -c is --check; no collective is named 0 or 1
        if args.check is not None:
            raise TopoError("-c 0|1 is nccl-tests' --check; give it once", key="--check")
        args.check = args.c
    elif args.c is not None:
        if args.collective is not None:
            raise TopoError("-c NAME names the collective, as --collective; give it once", key="-c")
        args.collective = args.c
    notes = []
    if args.check is not None and args.check not in ("0", "1"):
        raise TopoError(f"must be 0 or 1 (nccl-tests' --check), got {args.check!r}", key="--check")
    if args.check == "1":
        notes.append("--check 1: nothing is computed, so no result is checked (#wrong N/A)")
    for flag, value, least in (("-n", args.iters, 1), ("-w", args.warmup_iters, 0)):
        if value is not None and _int(value, flag) < least:
            raise TopoError(f"must be {least} or more, got {value!r}", key=flag)
    if args.iters is not None or args.warmup_iters is not None:
        notes.append("-n/-w: the model times one call; iterations and warm-up change nothing")
    if args.root is not None and _int(args.root, "-r") != 0:
        raise TopoError(f"topo times root 0 (the rank its broadcast, reduce, scatter and gather start or end at), "
                        f"got {args.root!r}; on a fabric without failures every root of a packed placement is alike",
                        key="-r")
    return notes


def _run(args) -> int:
    if args.json and args.csv:
        raise TopoError("give either --json or --csv, not both", key="--csv")
    parity_notes = nccl_tests_flags(args)
    if args.traffic is not None:
        return _run_mix(args)
    if args.size is not None and (args.minbytes is not None or args.maxbytes is not None):
        raise TopoError("give either --size or -b/-e, not both", key="--size")
    if args.size is not None and args.stepbytes is not None:
        raise TopoError("give either --size or a sweep's -i, not both", key="-i")
    if args.stepbytes is not None and args.stepfactor is not None:
        raise TopoError("give either -f (a factor) or -i (bytes) between sizes, not both", key="-i")
    if args.size is not None:
        sizes = [nccl_tests_bytes(args.size, "--size", parity_notes)]
    else:
        try:
            factor = float(args.stepfactor or "2")
        except ValueError:
            factor = math.nan
        if not (math.isfinite(factor) and factor > 1):  # inf (or 1e400) would run the first size alone, silently
            raise TopoError(f"must be a finite number > 1, got {args.stepfactor!r}", key="-f")
        step = None if args.stepbytes is None else nccl_tests_bytes(args.stepbytes, "-i", parity_notes)
        sizes = size_sweep(nccl_tests_bytes(args.minbytes or "8", "-b", parity_notes),
                           nccl_tests_bytes(args.maxbytes or "16G", "-e", parity_notes), factor, step_bytes=step)
    if args.datatype not in DATA_TYPES:
        raise TopoError(f"unknown data type {args.datatype!r}; allowed: {', '.join(DATA_TYPES)}", key="-d")
    if args.op is not None and args.op not in REDUCTION_OPS:  # before the region path, which reads no op
        raise TopoError(f"unknown reduction op {args.op!r}; allowed: {', '.join(REDUCTION_OPS)}", key="-o")
    sizes, rounded = whole_elements(sizes, args.datatype, "--size" if args.size is not None else "-b")
    parity_notes.extend(rounded)
    if is_region_args(args):
        with _sizes_flag(args):
            return run_region_estimate(args, sizes, parity_notes)
    opts = options_from_args(args)
    fabric = fabric_from_args(args)
    with _sizes_flag(args):
        try:
            result = estimate(fabric, args.collective or "all_reduce", sizes, opts, datatype=args.datatype)
        except Unreachable as exc:  # the cut named as describe, train and the report name it (rev69)
            raise Unreachable(cut_message(fabric, exc.message), key=exc.key, source=exc.source) from None
    memory_note(result, fabric)
    failures_note(result.notes, fabric)
    result.notes.extend(parity_notes)
    for msg in (profile_mismatch(args.profile, fabric), technology_note(fabric)):
        if msg:
            note(msg)
    detail = _detail(result, fabric) if args.detail else None
    if args.json:
        doc = result.to_dict()
        if detail:
            doc.update(detail)
        emit_json(doc)
    elif args.csv:
        emit(render_csv(result))
    else:
        emit(render(result))
        if detail:
            emit(render_detail(detail))
    return 0


@contextmanager
def _sizes_flag(args):
    """Every size 0 bytes a rank (key ``sizes``, :func:`topo.engine.estimate.nccl_tests_sizes`) named by the flag
    it came from: the sweep's largest (``-e``) or ``--size``; on one site and across sites alike."""
    try:
        yield
    except TopoError as exc:
        if exc.key != "sizes" or exc.source:
            raise
        raise TopoError(exc.message, key="--size" if args.size is not None else "-e") from None


def nccl_tests_bytes(text: str, flag: str, notes: list[str]) -> int:
    """A size as nccl-tests' ``-b``/``-e``/``-i`` read it: a fraction of a byte dropped, with a note saying so.

    nccl-tests (NVIDIA/nccl-tests@a0b82b22 src/common.cu ``parsesize``, lines 227-260, and lines 1217-1240) reads
    a size as a double times its unit and keeps ``(size_t)parsed``: ``-b 205.2M`` runs 215,167,795 bytes. So a
    size ``topo train`` prints to four digits (205.2 MiB) is taken back, its fraction of a byte dropped.

    Parameters
    ----------
    text : str
        The size given.
    flag : str
        The flag it came from, named in a note or an error.
    notes : list of str
        Where the note goes when a fraction of a byte was dropped.

    Returns
    -------
    int
        Whole bytes, at least 1.

    Raises
    ------
    TopoError
        Not a positive size (keyed ``flag``), or one below one byte.
    """
    try:
        exact = parse_size_fraction(text)
    except UnitError as exc:
        raise TopoError(str(exc), key=flag) from None
    whole = math.floor(exact)
    if whole == exact:
        return whole
    if whole < 1:
        raise TopoError(f"{text!r} is {format_bytes_exact(exact)} bytes, less than one byte; allowed: 1 byte or more",
                        key=flag)
    notes.append(f"{flag} {text} is {format_bytes_exact(exact)} bytes, run as {whole:,}: the fraction of a byte "
                 "dropped, as nccl-tests drops it (a size read as a double, cast to whole bytes)")
    return whole


def whole_elements(sizes, datatype: str, flag: str) -> tuple[list[int], list[str]]:
    """Each size as nccl-tests runs it for ``-d datatype``: a whole number of elements, rounded down.

    nccl-tests (NVIDIA/nccl-tests@a0b82b22 src/common.cu ``setupArgs``, unchanged since the initial commit b188a15)
    takes ``count = size / wordSize(type)`` in integer arithmetic and runs and prints ``count x wordSize`` bytes,
    so ``-b 6`` of floats runs 4 bytes. A size below one element leaves a count of 0: a collective of nothing, which
    NCCL discards without running it, so it is refused here rather than timed.

    Parameters
    ----------
    sizes : list of int or str
        The sizes asked (``--size``, or the ``-b/-e`` sweep).
    datatype : str
        A key of :data:`topo.engine.collectives.DATA_TYPES`.
    flag : str
        The flag the sizes came from, named in the error.

    Returns
    -------
    sizes : list of int
    notes : list of str
        One note naming the sizes rounded, or none.

    Raises
    ------
    TopoError
        A size that is not a positive number of bytes, or one below one element.
    """
    word = DATA_TYPES[datatype]
    out, moved = [], []
    for s in sizes:
        try:
            n = parse_size_bytes(s)
        except UnitError as exc:
            raise TopoError(str(exc), key=flag) from None
        if n < word:
            raise TopoError(f"{n:,} byte{'s' if n != 1 else ''} is less than one {datatype} ({word} bytes): nccl-tests "
                            f"rounds the count down (size / {word}) to 0 elements, a collective of nothing; "
                            f"allowed: {word} bytes or more for -d {datatype}", key=flag)
        out.append(n // word * word)
        if out[-1] != n:
            moved.append(f"{n:,} -> {out[-1]:,}")
    if not moved:
        return out, []
    return out, [f"sizes rounded down to whole {datatype}s ({word} bytes), as nccl-tests runs them (count = size / "
                 f"{word}): {', '.join(moved[:4])}{' ...' if len(moved) > 4 else ''} bytes"]


def failures_note(notes: list[str], fabric) -> None:
    """A note in ``notes`` naming the failed parts (``--fail``) the estimate routed around, so that the output (text
    and ``--json``) says what was modelled; nothing on a fabric without failures."""
    text = failures_summary(fabric)
    if text:
        notes.append(text)


def memory_note(result: EstimateResult, fabric) -> None:
    """A note in ``result`` when its largest size is more than one GPU's memory (topo/data/compute/gpus.toml):
    nccl-tests could not allocate the buffer."""
    try:
        mem = gpu_compute(fabric.spec.gpu).memory_bytes
    except TopoError:  # a GPU without compute facts: nothing to compare with
        return
    big = max(x.size_bytes for x in result.results)
    if big > mem:
        result.notes.append(f"{big:,} bytes is more than one {fabric.spec.gpu}'s {format_in(mem, 'GB', ',.1f')} "
                            f"({format_in(mem, 'GiB', ',.0f')}) of memory: "
                            "nccl-tests could not allocate that buffer; the time is the model's extrapolation")


def _cable(fabric, link: int, src: int, dst: int) -> tuple[int, int]:
    """Which of the parallel cables between two nodes ``link`` is, and how many there are: the ``#k`` that
    ``--fail a-b#k`` takes (:mod:`topo.fabric.failures` numbers them in link order)."""
    links = fabric.links
    sel = np.flatnonzero(((links["src"] == src) & (links["dst"] == dst))
                         | ((links["src"] == dst) & (links["dst"] == src)))
    return int(np.searchsorted(sel, link)), int(sel.size)


def _detail(result: EstimateResult, fabric) -> dict:
    last = result.results[-1]
    top = result.top_links(10, names=fabric.node_names)
    rows = []
    for r in top.itertuples():
        cable, cables = _cable(fabric, int(r.link), int(r.src_id), int(r.dst_id))
        rows.append({"src": r.src, "dst": r.dst, "cable": cable, "cables": cables, "level": str(r.level),
                     "direction": r.direction, "bytes": float(r.bytes), "utilization": float(r.utilization)})
    return {"detail_size_bytes": last.size_bytes, "phases": result.steps_frame(last.algorithm).to_dict("records"),
            "top_links": rows}


def render_detail(d: dict) -> str:
    lines = ["#", f"# plan at {d['detail_size_bytes']} B: phases (run one after the other)"]
    for p in d["phases"]:
        lines.append(f"#   {p['phase']}: {p['flows']:,} flows x {p['repeat']:g}, bottleneck {p['bottleneck']} "
                     f"({p['bottleneck_level']})")
    lines.append("# most utilized links:")
    for t in d["top_links"]:
        cable = f" #{t['cable']} of {t['cables']} cables" if t["cables"] > 1 else ""
        lines.append(f"#   {t['src']} -> {t['dst']}{cable} ({t['level']}, {t['direction']}): {t['utilization']:.0%} of "
                     f"line rate, {format_in(t['bytes'], 'MB', ',.1f')}")
    return "\n".join(lines)


def nccl_float(value: float, width: int) -> str:
    """A number as nccl-tests prints it in a column of ``width`` (src/util.cu getFloatStr): two decimals while they
    fit, then one, then none, then an exponent."""
    if not math.isfinite(value):
        return f"{'inf' if value > 0 else 'nan':>{width}}"
    power, val = 0, 1
    while value >= val:
        power += 1
        val *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def _token(text: str) -> str:
    """One whitespace-free column value (names such as 'spines of group 0' keep their words joined by _)."""
    return "_".join(safe_text(text).split()) or "-"


def _us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:.1f}" if us < 1e4 else f"{us:.0f}"


def row_fields(x) -> dict:
    """topo's columns of one row: algorithm, protocol, what limits it, the bottleneck's utilization and name, and
    the likely range of a measured time where the model is weaker."""
    b = x.bottleneck
    limit = b.limit if b else ("latency" if x.latency_s > x.bandwidth_s else "-")
    shown = x.time_low_s is not None and regime_of(x.size_bytes).in_table
    return {"range": f"{_us(x.time_low_s)}-{_us(x.time_high_s)}" if shown else "-",
            "algorithm": x.algorithm, "protocol": x.protocol, "limit": limit,
            "util": f"{b.utilization:.0%}" if b else "-",
            "link": _token(f"{b.src}->{b.dst}") + f"({b.level})" if b else "-"}


# nccl-tests' table (src/common.cu, src/util.cu): five columns, then time, algbw, busbw, #wrong out of place and
# again in place; topo's own columns follow after a '#', each one word
_HEAD = ("#                                                              out-of-place                       in-place",
         "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
         "busbw  #wrong",
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
         "(GB/s)        ")
_TOPO_HEAD = f"  # {'algorithm':<16} {'proto':<6} {'limit':<15} {'util':>5}  busiest_link  range(us)"


def legend(limits, ranged: bool = False) -> list[str]:
    """What the topo columns mean (printed under every table), with the ``limits`` the table shows."""
    lines = ["# in place = out of place (the model does not tell them apart); #wrong N/A: nothing is computed",
             "# busiest_link: the most loaded link; util: the bytes it carries / (its line rate x the whole time), "
             "below 100% where its class's efficiency, a protocol's efficiency, the pipeline fill, latency or a cap "
             "leaves it idle"]
    if ranged:
        lines.append("# range(us): where 80% of measured times fell for this model time on clusters the model was not "
                     "fitted on (leave-one-setup-out, benchmarks/accuracy.py), at sizes where the model is weaker")
    lines += [f"# limit {k}: {v}" for k, v in LIMITS.items() if k in limits]
    return lines


def utilization_line(x) -> str | None:
    """The ``# util`` line of a row its busiest link bounds (limit ``link`` or ``link+protocol``): the factors
    whose product is the link's utilization (:func:`topo.engine.bottleneck_text.utilization_factors`, which
    ``topo report``'s caption also shows). None for a row another limit bounds."""
    b = x.bottleneck
    text = utilization_factors(x, _token(f"{b.src}->{b.dst}")) if b else None
    return f"# {text}" if text else None


def avg_busbw_line(r: EstimateResult) -> str:
    """nccl-tests' closing line, which CI scripts grep: the mean bus bandwidth over every size, in GB/s, printed
    as its ``%g`` (src/common.cu; the in-place rows equal the out-of-place ones here, so they do not move it)."""
    avg = sum(x.busbw_GBps for x in r.results) / len(r.results)
    return f"# Avg bus bandwidth    : {avg:g}"


def render(r: EstimateResult) -> str:
    lines = [f"# topo estimate: {r.collective} on {safe_text(r.spec)}: {safe_text(r.placement)}",
             f"# algorithm {r.algorithm}" + (" as NCCL's tuner chooses (--choose nccl)" if r.choose == "nccl" else "")
             + f", ecmp {r.ecmp}, sharing {r.sharing}, profile {safe_text(r.profile)}"
             + (f", protocol {r.protocol}" if r.protocol != "auto" else "")
             + (f", {r.channels} channels" if r.channels else ""),
             "#", _HEAD[0], _HEAD[1] + _TOPO_HEAD, _HEAD[2]]
    limits, ranged = [], False
    for x in r.results:
        f = row_fields(x)
        limits.append(f["limit"])
        ranged |= f["range"] != "-"
        body = (f"  {nccl_float(x.time_s * 1e6, 7)}  {nccl_float(x.algbw_GBps, 6)}  {nccl_float(x.busbw_GBps, 6)}"
                "    N/A")
        lines.append(f"{x.size_bytes:>12}  {'-' if x.count is None else x.count:>12}  {x.type:>8}  {x.redop:>6}  {x.root:>6}{body}{body}"
                     f"  # {f['algorithm']:<16} {f['protocol']:<6} {f['limit']:<15} {f['util']:>5}  "
                     f"{f['link']}  {f['range']}")
    lines.append(avg_busbw_line(r))
    lines += legend(limits, ranged)
    util = utilization_line(r.results[-1])  # the largest size's, the table's bus bandwidth
    if util:
        lines.append(util)
    for name, why in r.unavailable.items():
        lines.append(f"# {name} not considered: {safe_text(why)}")
    for n in r.notes:
        lines.append(f"# note: {safe_text(n)}")
    return "\n".join(lines)


CSV_COLUMNS = ("size_bytes", "count", "type", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps", "wrong",
               "in_place_time_us", "in_place_algbw_GBps", "in_place_busbw_GBps", "in_place_wrong", "algorithm",
               "protocol", "limit", "utilization", "busiest_link", "busiest_link_level", "time_low_us",
               "time_high_us")


def render_csv(r: EstimateResult) -> str:
    """One header line and one line per size: nccl-tests' columns (in-place repeated, #wrong empty: nothing is
    computed), then topo's."""
    import csv
    import io

    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for x in r.results:
        b = x.bottleneck
        t, a, bb = f"{x.time_s * 1e6:.6g}", f"{x.algbw_GBps:.6g}", f"{x.busbw_GBps:.6g}"
        w.writerow([x.size_bytes, x.count, x.type, x.redop, x.root, t, a, bb, "", t, a, bb, "", x.algorithm,
                    x.protocol, row_fields(x)["limit"], f"{b.utilization:.4f}" if b else "",
                    safe_text(f"{b.src}->{b.dst}") if b else "", b.level if b else "",
                    f"{x.time_low_s * 1e6:.6g}" if x.time_low_s is not None else "",
                    f"{x.time_high_s * 1e6:.6g}" if x.time_high_s is not None else ""])
    return out.getvalue().rstrip("\n")


def _run_mix(args) -> int:
    settings, members = load_traffic(args.traffic)
    for flag in (FLAGS[k] for k in MEMBER_OPTIONS):
        if getattr(args, _dest(flag)) is not None:
            raise TopoError("collectives, sizes, placements and algorithms of a traffic mix are set per member in "
                            "its file", key=flag)
    if args.detail:
        raise TopoError("a traffic mix has no --detail view; its links are in the table and in --json", key="--detail")
    fabric = fabric_from_args(args)
    sharing = args.sharing or settings["sharing"]
    ecmp = args.ecmp or settings["ecmp"]
    subflows = _int(args.subflows, "--subflows") if args.subflows is not None else settings["subflows"]
    hash_seed = _int(args.hash_seed, "--hash-seed") if args.hash_seed is not None else EstimateOptions.default(
        "hash_seed")
    EstimateOptions.from_kwargs(ecmp=ecmp, subflows=subflows, hash_seed=hash_seed, sharing=sharing)  # as flags
    _check_hash_seed(args, ecmp)
    try:
        result = run_mix(fabric, members, sharing=sharing, ecmp=ecmp, subflows=subflows, hash_seed=hash_seed,
                         pxn=False if args.no_pxn else None, profile=args.profile, name=settings["name"])
    except TopoError as exc:
        raise TopoError(exc.message, source=exc.source or args.traffic, key=exc.key) from None
    failures_note(result.notes, fabric)
    if args.json:
        emit_json(result.to_dict())
    elif args.csv:
        emit(render_mix_csv(result))
    else:
        emit(render_mix(result))
    return 0


MIX_CSV_COLUMNS = ("member", "collective", "size_bytes", "groups", "ranks", "alone_us", "mix_us", "slowdown",
                   "algorithm", "protocol", "held_back_by", "held_back_by_level")


def render_mix_csv(r: MixResult) -> str:
    """A traffic mix's table as CSV: one header line, one line per member (the text table's columns)."""
    import csv
    import io

    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(MIX_CSV_COLUMNS)
    for m in r.members:
        w.writerow([m.name, m.collective, m.size_bytes, m.num_groups, m.num_ranks, f"{m.alone_s * 1e6:.6g}",
                    f"{m.mix_s * 1e6:.6g}", f"{m.slowdown:.6g}", m.algorithm, m.protocol,
                    safe_text(m.bottleneck_mix) if m.bottleneck_mix else "", m.bottleneck_mix_level or ""])
    return out.getvalue().rstrip("\n")


def render_mix(r: MixResult) -> str:
    lines = [f"# topo estimate: traffic mix {r.name!r} on {r.spec}: {len(r.members)} collectives at once",
             f"# sharing {r.sharing}, ecmp {r.ecmp}, profile {r.profile}", "#",
             f"#{'member':>9} {'collective':>12} {'size':>12} {'groups':>8} {'ranks':>7} {'alone':>10} {'mix':>10} "
             f"{'slowdown':>8}  {'algorithm':<10} {'proto':<6} held back by",
             f"#{'':>9} {'':>12} {'(B)':>12} {'':>8} {'':>7} {'(us)':>10} {'(us)':>10}"]
    for m in r.members:
        held = f"{m.bottleneck_mix} ({m.bottleneck_mix_level})" if m.bottleneck_mix else "-"
        lines.append(f"{m.name:>10} {m.collective:>12} {m.size_bytes:>12} {m.num_groups:>8} {m.num_ranks:>7} "
                     f"{m.alone_s * 1e6:>10.1f} {m.mix_s * 1e6:>10.1f} {m.slowdown:>8.2f}  {m.algorithm:<10} "
                     f"{m.protocol:<6} {held}")
    if r.contested:
        lines.append("# links they fight over (demand: summed utilization when each runs alone):")
        for c in r.contested:
            parts = ", ".join(f"{k} {v:.0%}" for k, v in c.members.items())
            more = f" and {c.alike - 1:,} more alike" if c.alike > 1 else ""
            lines.append(f"#   {c.src} -> {c.dst} ({c.level}, {c.direction}){more}: demand {c.demand:.0%} = {parts}")
    else:
        lines.append("# no link is asked for more than its capacity: the members do not slow each other")
    lines += [f"# note: {n}" for n in r.notes]
    return "\n".join(lines)
