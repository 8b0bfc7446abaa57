"""Read nccl-tests' own text output, as users paste it.

Understood: every ``*_perf`` binary's table (all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce,
sendrecv, scatter, gather, hypercube), current and older column layouts (``redop``/``root`` present or not,
``#wrong`` counts or the older ``error`` magnitudes), the header (``nThread ... nGpus ... iters``), the
``# Using devices`` rank lines (ranks, hosts, devices), the NCCL version (``NCCL version 2.20.5+cuda12.4`` or
``nccl-library=23102``), out-of-place and in-place columns, ``# Avg bus bandwidth``, ``# Out of bounds values``,
and ``NCCL_DEBUG=INFO`` lines naming channels and, with ``NCCL_DEBUG_SUBSYS=TUNING``, the algorithm and protocol
per size. Tags that launchers add (``[0]``, ``[1,0]<stdout>:``) are removed wherever they appear, and at the start
of a line srun's ``--label`` prefix (``0:``) and Ray's / SkyPilot's ``(head, rank=0, pid=3808)``.

One file may hold several runs (one per header); :func:`parse_text` returns them in order. When a log has no
binary name, the collective and the rank count are inferred from the table: busbw / algbw is 2(n-1)/n for
all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, and 1 for the rest (nccl-tests'
doc/PERFORMANCE.md); ``redop`` and ``root`` tell the rest apart where they can. All-gather and all-to-all print
their count per rank, so size / (count x type size) is the rank count where busbw / algbw is too coarse. Rank
lines that list fewer ranks than the run had (a paste cut short, one line of rank 127, ``mpirun -np 1024`` above 16
lines, or busbw / algbw of another count) do not set the rank count nor the hosts.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import TopoError
from ..inputs import MAX_LOG_BYTES, STDIN, read_input_bytes
from ..resources import example_logs
from ..units import count_noun

__all__ = ["Row", "RankLine", "NcclRun", "parse_text", "parse_file", "COLLECTIVES_PERF"]

# nccl-tests binary -> topo collective name (None: nccl-tests has it, topo does not model it)
COLLECTIVES_PERF = {
    "all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf": "reduce_scatter",
    "alltoall_perf": "alltoall", "broadcast_perf": "broadcast", "reduce_perf": "reduce",
    "sendrecv_perf": "sendrecv", "scatter_perf": "scatter", "gather_perf": "gather", "hypercube_perf": "hypercube",
}
_ALGOS = {"0": "tree", "1": "ring", "2": "collnet_direct", "3": "collnet_chain", "4": "nvls", "5": "nvls_tree",
          "6": "pat"}
_PROTOS = {"0": "LL", "1": "LL128", "2": "Simple"}
_TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
               "half": 2, "float16": 2, "bfloat16": 2, "bf16": 2, "int32": 4, "uint32": 4, "int": 4, "float": 4,
               "float32": 4, "int64": 8, "uint64": 8, "double": 8, "float64": 8}
_REDOPS = {"sum", "prod", "max", "min", "avg", "mulsum", "none", "all"}
_TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "fp8_e4m3",
          "fp8_e5m2", "f8e4m3", "f8e5m2", "char", "int", "float16", "float32", "float64", "bf16"}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # terminal colour and cursor codes (ECMA-48 CSI sequences)
_TAG = re.compile(r"\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?")
_SRUN_LABEL = re.compile(r"^\s*\d+:(?=\s)")  # srun --label: "0: " before every line of task 0
_RAY_PREFIX = re.compile(r"^\s*\([\w.-]+, rank=\d+, pid=\d+(?:, ip=[\d.]+)?\)")  # Ray / SkyPilot worker prefix
_HEADER = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_ITERS = re.compile(r"(?<![a-z] )iters:\s*(\d+)")
_WARMUP = re.compile(r"warmup iters:\s*(\d+)")
_RANK = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_LIBVER = re.compile(r"nccl-library=(\d{5,})")
_TESTS_VER = re.compile(r"nccl-tests version (\S+)")
_BINARY = re.compile(r"\b(\w+_perf)(?:_mpi)?\b")
_STARTING = re.compile(r"Collective test starting:\s*(\w+_perf)")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
_CHANNELS = re.compile(r"NCCL INFO (\d+) coll channels")
_TUNING = re.compile(r"NCCL INFO (?:(\w+): )?(\d+) Bytes -> Algo (\w+) proto (\w+)(?:.*?time ([0-9.]+))?")
_NRANKS = re.compile(r"NCCL INFO .*\bnranks (\d+)\b")
_LAUNCH_NP = re.compile(  # mpirun -np N, srun -n N: the processes launched
    r"\b(?:mpirun|mpiexec|srun)\b.*?\s(?:-np|--np|-n|--ntasks)(?:=|\s+)(\d+)\b")
_ENV_SET = re.compile(r"(NCCL_(?:ALGO|PROTO|MIN_NCHANNELS|MAX_NCHANNELS|NCHANNELS|MIN_CTAS|MAX_CTAS|NVLS_ENABLE|"
                      r"IB_DISABLE|NET))"
                      r"(?:=| set by environment to )(\S+)")


@dataclass
class Row:
    """One size of the table. Times in seconds, bandwidths in GB/s (1e9 bytes/s) as nccl-tests prints them."""

    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: float | None  # '#wrong' count (or the older 'error' magnitude); None for N/A
    inplace_time_s: float | None = None
    inplace_algbw_GBps: float | None = None
    inplace_busbw_GBps: float | None = None
    inplace_wrong: float | None = None


@dataclass
class RankLine:
    rank: int
    host: str
    device: int
    bus_id: str
    gpu: str
    group: int | None = None
    pid: int | None = None


@dataclass
class NcclRun:
    """One nccl-tests run: header facts, result rows and what NCCL_DEBUG=INFO lines said."""

    source: str
    rows: list[Row] = field(default_factory=list)
    binary: str | None = None
    collective: str | None = None
    collective_from: str = "unknown"  # binary, command, or inferred (from busbw/algbw, redop, root)
    collective_candidates: list[str] = field(default_factory=list)  # what the table fits, when it cannot tell
    nthread: int | None = None
    ngpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    warmup_iters: int | None = None
    iters: int | None = None
    ranks: list[RankLine] = field(default_factory=list)
    nranks: int | None = None
    nranks_from: str = "unknown"  # rank lines, NCCL INFO, launcher, or inferred (busbw/algbw)
    nranks_at_least: int | None = None  # when the rank lines are cut short: the highest rank they name + 1
    rank_lines_complete: bool = True  # False when the '# Using devices' lines list only some of the ranks
    launcher_processes: int | None = None  # mpirun -np / srun -n on the log's command line
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    wrong_is_count: bool = True  # False for the older 'error' column (max error, not a count)
    avg_busbw_GBps: float | None = None
    out_of_bounds: int | None = None
    channels: int | None = None
    tuning: list[dict] = field(default_factory=list)  # {size_bytes, collective, algorithm, protocol, time_us}
    env: dict[str, str] = field(default_factory=dict)  # NCCL_ALGO, NCCL_PROTO, ... as the log shows them
    sha256: str = ""
    notes: list[str] = field(default_factory=list)  # rows left out and why, a log that looks cut short
    left_out: list[str] = field(default_factory=list)  # the rows left out, each why (also in notes)

    @property
    def hosts(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.ranks:
            seen.setdefault(r.host, None)
        return list(seen)

    @property
    def gpus_per_host(self) -> int | None:
        """Ranks per host when every host has the same number (None otherwise, without rank lines, or when the
        rank lines list only some of the ranks)."""
        hosts = self.hosts
        if not hosts or not self.rank_lines_complete:
            return None
        counts = {h: 0 for h in hosts}
        for r in self.ranks:
            counts[r.host] += 1
        vals = set(counts.values())
        return vals.pop() if len(vals) == 1 else None

    @property
    def gpu_name(self) -> str | None:
        return self.ranks[0].gpu if self.ranks else None

    @property
    def looks_cut_short(self) -> bool:
        """True when the table stops below the header's maxBytes and the run's closing '# Avg bus bandwidth' line
        is missing (a log cut short, or a paste of its first rows)."""
        return bool(self.rows) and self.avg_busbw_GBps is None and self.max_bytes is not None and (
            max(r.size_bytes for r in self.rows) < self.max_bytes)

    @property
    def failed_validation(self) -> bool:
        return self.wrong_is_count and any((r.wrong or 0) > 0 for r in self.rows)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(hosts=self.hosts, gpus_per_host=self.gpus_per_host, gpu_name=self.gpu_name,
                 failed_validation=self.failed_validation, looks_cut_short=self.looks_cut_short)
        return d

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([asdict(r) for r in self.rows])


def _num(tok: str) -> float | None:
    if tok.upper() == "N/A":
        return None
    return float(tok)


def _is_num(tok: str) -> bool:
    if tok.upper() == "N/A":
        return True
    try:
        float(tok)
        return True
    except ValueError:
        return False


def _row(tokens: list[str]) -> Row | None:
    """A table row, or None if the tokens are not one."""
    if len(tokens) < 7 or not tokens[0].isdecimal() or not tokens[1].isdecimal() or tokens[2].lower() not in _TYPES:
        return None
    rest = tokens[3:]
    n_tail = 8 if len(rest) >= 8 and all(_is_num(t) for t in rest[-8:]) else 4
    if len(rest) < n_tail or not all(_is_num(t) for t in rest[-n_tail:]):
        return None
    prefix, tail = rest[:-n_tail], rest[-n_tail:]
    if n_tail == 8 and len(prefix) > 2:  # only 4 values after redop/root: no in-place columns
        return None
    redop, root = None, None
    for t in prefix:
        if t.lower() in _REDOPS:
            redop = t.lower()
        elif re.fullmatch(r"-?\d+", t):
            root = int(t)
        else:
            return None
    vals = [_num(t) for t in tail]
    if vals[0] is None or vals[1] is None or vals[2] is None:
        return None
    row = Row(int(tokens[0]), int(tokens[1]), tokens[2], redop, root, vals[0] * 1e-6, vals[1], vals[2], vals[3])
    if n_tail == 8 and vals[4] is not None:
        row.inplace_time_s, row.inplace_algbw_GBps, row.inplace_busbw_GBps, row.inplace_wrong = (
            vals[4] * 1e-6, vals[5], vals[6], vals[7])
    return row


def _row_start(tokens: list[str], final: bool) -> bool:
    """Whether ``tokens`` look like the start of a table row (size, count, type, ...): on the last line, any
    leading number (a row cut mid-line)."""
    if len(tokens) >= 3 and tokens[2].lower() in _TYPES and (tokens[0].isdigit() or tokens[1].isdigit()):
        return True  # the size or the count garbled ('104857b', '-1'), the rest a row's
    if not tokens or not tokens[0].isdigit():
        return False
    if final and len(tokens) == 1:
        return True
    return len(tokens) >= 2 and tokens[1].isdigit() and len(tokens) == 2


def _clean(line: str) -> str:
    line = _ANSI.sub("", line)  # a log coloured by a launcher or a CI system
    return _TAG.sub(" ", _SRUN_LABEL.sub(" ", _RAY_PREFIX.sub(" ", line))).replace("\t", " ")


def _keep_row(row: Row, run: "NcclRun") -> bool:
    """Whether a row is a measurement: its out-of-place time positive and finite, or else its in-place time,
    which then stands for it (nccl-tests times both on the same buffers and sizes); a note says which rows were
    read from their in-place columns and which were left out."""
    if math.isfinite(row.time_s) and row.time_s > 0:
        return True
    t = row.inplace_time_s
    if t is not None and math.isfinite(t) and t > 0:
        run.notes.append(f"the row of size {row.size_bytes} B has an out-of-place time of {row.time_s * 1e6:g} us: its "
                     f"in-place time ({t * 1e6:g} us) is used")
        row.time_s, row.algbw_GBps, row.busbw_GBps = t, row.inplace_algbw_GBps, row.inplace_busbw_GBps
        return True
    _leave_out(run, f"the row of size {row.size_bytes} B has a time of {row.time_s * 1e6:g} us (a time is positive "
               "and finite) and no in-place time to use instead")
    return False


def _leave_out(run: "NcclRun", why: str) -> None:
    """Note a row left out of ``run`` and why (walk36: a log whose every row was left out said it had none)."""
    run.left_out.append(why)
    run.notes.append(f"{why}: left out")


def _version_from_code(code: str) -> str:
    n = int(code)  # NCCL_VERSION_CODE: major*10000 + minor*100 + patch (2.9 on)
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}"


def parse_text(text: str, source: str = "<text>", require_rows: bool = True) -> list[NcclRun]:
    """Every run in ``text`` (one per nccl-tests header, or one for a bare table).

    Raises :class:`TopoError` (``source`` names the file) when the text is empty or holds no nccl-tests table, or, with
    ``require_rows``, a header without a single result row.
    """
    if not text.strip():  # walk32: an empty file was called "not an nccl-tests log"
        raise TopoError(f"the log is empty ({'no bytes' if not text else 'only blank lines'}): paste the output of "
                        "an nccl-tests *_perf binary", source=source)
    reader = _Reader(text, source)
    lines = text.splitlines()
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    index = 0
    while index < len(lines):
        line = _clean(lines[index])
        joined = _wrapped_row(reader, line, _clean(lines[index + 1])) if index < last else None
        if joined is not None:  # a row a terminal wrapped: both lines are one row
            reader.cur.notes.append(f"a row (size {joined.split()[0]} B) wrapped over two lines: read as one")
            line, index = joined, index + 1
        reader.line(line, final=index == last)
        index += 1
    return reader.runs_found(require_rows)


def _wrapped_row(reader: "_Reader", line: str, following: str) -> str | None:
    """``line`` and ``following`` as one row, when ``line`` starts a row of the current table without being one
    and the two, joined as a terminal wraps a long line (no character lost or added), are a row of the table's
    width (walk32: a paste from an 80-column terminal split '283.9' over two lines); else None."""
    tokens = line.split()
    if reader.width is None or len(tokens) >= reader.width or not _row_start(tokens, final=False):
        return None
    joined = line.rstrip("\r\n") + following.rstrip("\r\n")
    both = joined.split()
    return joined if len(both) == reader.width and _row(both) is not None else None


class _Reader:
    """The state of reading one log: the run being read, the runs before it, and the table's shape. Each kind of
    line has its step (:meth:`line` dispatches); a line is the first kind it matches."""

    def __init__(self, text: str, source: str):
        self.source = source
        self.sha = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
        self.runs: list[NcclRun] = []
        self.cur = NcclRun(source=source, sha256=self.sha)
        self.pending_binary: str | None = None  # a "Collective test starting" line before its header
        self.saw_anything = False
        self.table_seen = False
        self.width: int | None = None  # the number of values in the current table's rows (the first row's)
        self.cut_at_end = not text.endswith(("\n", "\r"))  # the last line may stop mid-row

    def start_new(self) -> None:
        """Close the run being read (if it has anything) and start the next, which keeps its version and env."""
        self.table_seen = False
        self.width = None
        cur = self.cur
        if cur.rows or cur.nthread is not None:
            self.runs.append(cur)
            self.cur = NcclRun(source=self.source, sha256=self.sha, nccl_version=cur.nccl_version,
                               env=dict(cur.env))

    def line(self, line: str, final: bool) -> None:
        s = line.strip().lstrip("#").strip()
        if not s:
            return
        for step in (self.starting, self.header, self.launch_and_versions, self.rank, self.nccl_info,
                     self.footer, self.table_heading, self.binary_name):
            if step(s):
                return
        self.row(s, final)

    def starting(self, s: str) -> bool:
        m = _STARTING.search(s)
        if m:
            self.pending_binary = m.group(1)
        return m is not None

    def header(self, s: str) -> bool:
        m = _HEADER.search(s)
        if not m:
            return False
        cur = self.cur
        if cur.rows or cur.nthread is not None:
            if not cur.rows:  # a header repeated by a second process is ignored
                return True
            self.start_new()  # a second run
            cur = self.cur
        cur.nthread, cur.ngpus, cur.min_bytes, cur.max_bytes = map(int, m.groups())
        w = _WARMUP.search(s)
        cur.warmup_iters = int(w.group(1)) if w else None
        it = re.search(r"(?<!warmup )iters:\s*(\d+)", s)
        cur.iters = int(it.group(1)) if it else None
        if self.pending_binary:
            cur.binary, self.pending_binary = self.pending_binary, None
        self.saw_anything = True
        return True

    def launch_and_versions(self, s: str) -> bool:
        """The launcher's process count and NCCL_* settings (read from any line, which then goes on to the other
        steps), then nccl-tests' and NCCL's versions."""
        cur = self.cur
        m = _LAUNCH_NP.search(s)
        if m and cur.launcher_processes is None:
            cur.launcher_processes = int(m.group(1))
        for m in _ENV_SET.finditer(s):
            cur.env[m.group(1)] = m.group(2).strip("\"'")
        m = _TESTS_VER.search(s)
        if m:
            cur.nccl_tests_version = m.group(1)
            lv = _LIBVER.search(s)
            if lv:
                cur.nccl_version = _version_from_code(lv.group(1))
            return True
        m = _VERSION.search(s)
        if m:
            cur.nccl_version = m.group(1)
        return m is not None

    def rank(self, s: str) -> bool:
        m = _RANK.search(s)
        if not m or "NCCL INFO" in s:
            return False
        rank, group, pid, host, dev, bus, gpu = m.groups()
        self.cur.ranks.append(RankLine(int(rank), host, int(dev), bus, gpu.strip(), int(group) if group else None,
                                       int(pid)))
        return True

    def nccl_info(self, s: str) -> bool:
        if "NCCL INFO" not in s:
            return False
        cur = self.cur
        m = _CHANNELS.search(s)
        if m:
            cur.channels = int(m.group(1))
        m = _TUNING.search(s)
        if m:
            coll, size, algo, proto, t = m.groups()
            cur.tuning.append({"size_bytes": int(size), "collective": coll,
                               "algorithm": _ALGOS.get(algo, algo.lower()),
                               "protocol": _PROTOS.get(proto, {"SIMPLE": "Simple"}.get(proto.upper(), proto)),
                               "time_us": float(t) if t else None})
        m = _NRANKS.search(s)
        if m and cur.nranks is None:
            cur.nranks, cur.nranks_from = int(m.group(1)), "NCCL INFO"
        return True

    def footer(self, s: str) -> bool:
        m = _AVG.search(s)
        if m:
            self.cur.avg_busbw_GBps = float(m.group(1))
            return True
        m = _OOB.search(s)
        if m:
            self.cur.out_of_bounds = int(m.group(1))
        return m is not None

    def table_heading(self, s: str) -> bool:
        if not ("size" in s and "count" in s and "type" in s):
            return False
        self.cur.wrong_is_count = "#wrong" in s or "wrong" in s
        self.saw_anything = self.table_seen = True
        self.width = None
        return True

    def binary_name(self, s: str) -> bool:
        m = _BINARY.search(s)
        if not (m and m.group(1) in COLLECTIVES_PERF and not s[0].isdigit()):
            return False
        if self.cur.rows:
            self.start_new()
        self.cur.binary = self.cur.binary or m.group(1)
        return True

    def row(self, s: str, final: bool) -> None:
        """A result row (kept, or left out with a note), or a row cut short or garbled (a note)."""
        cur = self.cur
        tokens = s.split(" #", 1)[0].split()  # a row may carry a trailing comment (topo estimate's columns)
        row = _row(tokens)
        if row is not None and self.width in (None, len(tokens)):
            self.width = len(tokens)
            self.saw_anything = True
            if _keep_row(row, cur):
                cur.rows.append(row)
            return
        if (cur.rows or self.table_seen) and _row_start(tokens, final=final):
            size = f"size {tokens[0]} B" if len(tokens) > 1 else "its size cut too"
            if not tokens[0].isdigit():  # walk32: a garbled size was left out without a note
                size = f"after size {cur.rows[-1].size_bytes} B" if cur.rows else "the table's first"
            if final and (self.cut_at_end or self.width is None or len(tokens) < self.width):
                _leave_out(cur, f"the last row ({size}) is cut mid-line")
            elif self.width == len(tokens):
                bad = [f"{t!r} where the {what} (a whole number) belongs"
                       for t, what in zip(tokens, ("size", "count")) if not t.isdigit()]
                values = ", ".join(repr(t) for t in tokens[3:] if not _is_num(t) and t.lower() not in _REDOPS)
                bad += [f"{values or 'a value'} where a number belongs"] if values or not bad else []
                _leave_out(cur, f"a row ({size}) cannot be read: {'; '.join(bad)} (garbled)")
            else:
                _leave_out(cur, f"a row ({size}) cannot be read: {len(tokens)} values where the table's rows have "
                                f"{self.width or 'more'} (cut short or garbled)")

    def runs_found(self, require_rows: bool) -> list[NcclRun]:
        """The runs read, finished (:func:`_finish`); a TopoError when the text held none."""
        cur = self.cur
        if cur.rows or cur.nthread is not None or self.table_seen:
            self.runs.append(cur)
        source = self.source
        if not self.saw_anything or not self.runs:
            raise TopoError("not an nccl-tests log: no result table and no 'nThread ... nGpus' header found "
                            "(paste the output of an nccl-tests *_perf binary)", source=source)
        if require_rows and not any(r.rows or r.nthread is not None for r in self.runs):
            raise TopoError("not an nccl-tests log: a table heading but no 'nThread ... nGpus' header and no result "
                            "rows", source=source)
        for run in self.runs:
            _finish(run)
            _check_time_column(run)
            if require_rows and not run.rows and run.left_out:
                first = "" if len(run.left_out) == 1 else ", the first"
                raise TopoError(f"no result row can be used ({count_noun(len(run.left_out), 'row')} left out{first}: "
                                f"{run.left_out[0]}); allowed: "
                                "rows as nccl-tests prints them, each with a positive, finite time", source=source)
            if require_rows and not run.rows:
                raise TopoError("the log has an nccl-tests header but no result rows (did the run finish or fail "
                                "before its first size?)", source=source)
        return self.runs


def _finish(run: NcclRun) -> None:
    if run.binary:
        run.collective, run.collective_from = COLLECTIVES_PERF.get(run.binary), "binary"
    launched = (run.launcher_processes * (run.nthread or 1) * (run.ngpus or 1)) if run.launcher_processes else None
    if run.ranks:
        listed = len({r.rank for r in run.ranks})
        highest = max(r.rank for r in run.ranks) + 1
        if highest > listed or (launched and launched > listed) or not ratio_allows(run, listed):
            # the rank lines were cut short (a post that stops at rank 99 of 1,024, one line of rank 127):
            # their count is not the run's, nor are their hosts the run's
            run.rank_lines_complete = False
            run.nranks_at_least = max(highest, listed)
            if run.nranks_from == "NCCL INFO" and run.nranks < run.nranks_at_least:
                run.nranks, run.nranks_from = None, "unknown"
        else:
            run.nranks, run.nranks_from = listed, "rank lines"
    if launched and run.nranks is None and launched >= (run.nranks_at_least or 1):
        run.nranks, run.nranks_from = launched, "launcher (-np x nThread x nGpus)"
    if run.rows and (run.collective is None or run.nranks is None):
        _infer(run)
    if run.looks_cut_short:
        run.notes.append(f"the log stops at size {run.rows[-1].size_bytes} B, below its header's maxBytes "
                         f"{run.max_bytes}, without the '# Avg bus bandwidth' line that ends a run: it looks cut "
                         "short; only the sizes it has are used")


# nccl-tests computes algbw = size / time from the very time it prints (src/common.cu, BenchTime: getBw(...,
# deltaSec, ...) and timeUsec = deltaSec * 1e6); printed with 2 decimals, the two agree within 1% wherever algbw is
# 0.5 GB/s or more (every log in tests/data/nccl_logs: within 0.3%), so a median 10% off is another time column
_TIME_ALGBW_CHECKED_GBPS = 0.5
_TIME_ALGBW_TOLERANCE = 0.10


def _check_time_column(run: NcclRun) -> None:
    """Refuse a table whose time column is not the time its algbw was computed from: times converted to ms or s
    (read as microseconds they would be 1,000x too fast), or a run with ``-C 1``, which prints CPU time."""
    rows = [r for r in run.rows if r.algbw_GBps >= _TIME_ALGBW_CHECKED_GBPS]
    if not rows:
        return
    ratio = statistics.median(r.size_bytes / r.time_s / 1e9 / r.algbw_GBps for r in rows)
    if abs(ratio - 1.0) <= _TIME_ALGBW_TOLERANCE:
        return
    big = max(rows, key=lambda r: r.size_bytes)
    raise TopoError(f"the time column does not give the algbw column: at {big.size_bytes} B the log prints "
                    f"{big.time_s * 1e6:g} us and algbw {big.algbw_GBps:g} GB/s, but size / time is "
                    f"{big.size_bytes / big.time_s / 1e9:,.2f} GB/s ({ratio:,.4g}x its algbw, the median over the "
                    "sizes); nccl-tests prints times in microseconds (us) and computes algbw from them: a time "
                    "column converted to another unit (ms?) or a run with -C 1 (CPU time) cannot be compared; "
                    "allowed: the table as nccl-tests printed it", source=run.source)


_RATIO_COLLECTIVES = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                      "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}


def ratio_allows(run: NcclRun, n: int) -> bool:
    """Whether busbw / algbw of the largest size (nccl-tests' factor of the rank count, printed with 2 decimals)
    is that of ``n`` ranks; True when the table cannot tell."""
    factor = _RATIO_COLLECTIVES.get(run.collective or "")
    if factor is None or not run.rows:
        return True
    big = max(run.rows, key=lambda r: r.algbw_GBps)
    if big.algbw_GBps < 0.5 or big.busbw_GBps <= 0:
        return True
    ratio = big.busbw_GBps / big.algbw_GBps
    d_ratio = 0.005 / big.algbw_GBps * (1.0 + ratio) + 0.005 / big.busbw_GBps * ratio
    return abs(ratio - factor(n)) <= 2 * d_ratio + 0.002


def _infer(run: NcclRun) -> None:
    """Collective and rank count from busbw / algbw of the largest size (values have 2 decimals)."""
    big = max(run.rows, key=lambda r: r.algbw_GBps)
    if big.algbw_GBps < 0.5:
        return
    ratio = big.busbw_GBps / big.algbw_GBps
    tol = 0.02 + 0.01 / big.algbw_GBps
    redop = big.redop
    if abs(ratio - 1.0) <= tol:
        coll = ("broadcast" if redop in (None, "none") else "reduce") if (big.root or -1) >= 0 else (
            "sendrecv" if redop != "none" else None)
        if run.collective is None and coll:
            run.collective, run.collective_from = coll, "inferred (busbw = algbw, redop, root)"
        return
    d_ratio = 0.005 / big.algbw_GBps * (1.0 + ratio) + 0.005 / big.busbw_GBps * ratio  # 2-decimal rounding
    if ratio > 1.0:  # 2(n-1)/n: all-reduce; dn/dratio = n^2 / 2
        n = 2.0 / (2.0 - ratio) if ratio < 2.0 else None
        d_n = d_ratio * n * n / 2 if n else None
        coll = "all_reduce"
    else:  # (n-1)/n; dn/dratio = n^2
        n = 1.0 / (1.0 - ratio)
        d_n = d_ratio * n * n
        coll = "reduce_scatter" if redop not in (None, "none", "all") and run.rows[0].root is not None else None
        if coll is None:
            run.collective_candidates = ["all_gather", "alltoall"] + (["reduce_scatter"] if redop is None else [])
        # all-gather, reduce-scatter and all-to-all print the count per rank: size / (count x type size) = n
        per = _TYPE_BYTES.get(big.type.lower())
        k = big.size_bytes / (big.count * per) if per and big.count else 0
        if run.nranks is None and k >= 2 and k == int(k) and abs(k - n) <= d_n + 0.5 and k >= (
                run.nranks_at_least or 1):
            run.nranks, run.nranks_from = int(k), "inferred (size / count per rank, busbw / algbw)"
    # a rank count only when the rounding of the printed values leaves a single whole number (at or above the
    # highest rank that cut-short rank lines name)
    if run.nranks is None and n:
        low = run.nranks_at_least or 1
        fits = [k for k in range(max(low, math.ceil(n - d_n - 0.05)), math.floor(n + d_n + 0.05) + 1)]
        if d_n < 0.45 and abs(n - round(n)) < 0.5 - d_n + 0.05 and round(n) >= low:
            run.nranks, run.nranks_from = int(round(n)), "inferred (busbw / algbw)"
        elif len(fits) == 1:
            run.nranks, run.nranks_from = fits[0], "inferred (busbw / algbw)"
    if run.collective is None and coll:
        run.collective, run.collective_from = coll, "inferred (busbw / algbw)"


def _bundled_example(path: str | Path) -> tuple[str | Path, str]:
    """The file to read and the name messages give it: a bundled example log (:func:`topo.resources.example_logs`)
    where ``path`` names one and no file of that name exists; else ``path`` itself."""
    if str(path) == STDIN:
        return path, "<stdin>"
    if Path(path).exists() or Path(path).is_symlink():
        return path, str(path)
    examples = example_logs()
    if str(path) in examples:
        return examples[str(path)], f"example log {path}"
    raise TopoError(f"no such log file; bundled example logs: {', '.join(examples) or 'none'}", source=str(path))


def parse_file(path: str | Path, require_rows: bool = True) -> list[NcclRun]:
    """Every run in one log file (see :func:`parse_text`); ``-`` is standard input (named ``<stdin>``); the name of
    a bundled example log (``nccl1453-h100-allreduce``: :func:`topo.resources.example_logs`) where no file has it.

    Raises :class:`TopoError` for a missing file, one that is not a regular file (a directory, a device, a named
    pipe: never read, so nothing hangs), one larger than :data:`topo.inputs.MAX_LOG_BYTES`, or a binary file.
    """
    path, source = _bundled_example(path)
    data = read_input_bytes(path, "log file", MAX_LOG_BYTES, allow_stdin=True)
    if b"\x00" in data[:4096]:
        raise TopoError("not an nccl-tests log: a binary file", source=source)
    return parse_text(data.decode("utf-8", errors="replace"), source, require_rows=require_rows)
