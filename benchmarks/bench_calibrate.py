"""Speed of calibration and comparison on nccl-tests logs (targets: calibrate one 32-size sweep < 10 s,
compare < 2 s, end to end through the command line).

The log is a real 32-size sweep: nccl-tests issue #309's 2 x 8 H100 all-reduce (8 B - 16 GiB) from
data/reference/nccl_tests_measurements.csv, rendered in nccl-tests' own layout.

    python benchmarks/bench_calibrate.py     # prints the table and with --write updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import csv
import statistics
import sys
import tempfile
from pathlib import Path

import os
import subprocess
import time

from _results import PY, ROOT, arguments, update_section

sys.path.insert(0, str(ROOT / "tests"))
from nccl_text import render  # noqa: E402

RUNS = 3


def timed(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system of the command) and peak RSS (MiB) of one run. CPU time is
    reported because the benchmark machine is shared: wall time grows with the load average, CPU time does not."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.read()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    arguments(__doc__).parse_args()
    rows = [r for r in csv.DictReader((ROOT / "data/reference/nccl_tests_measurements.csv").open())
            if r["setup_id"] == "ncclt309_h100_2n_xe9680"]
    sizes = [int(r["size_bytes"]) for r in rows]
    times = [float(r["time_us"]) * 1e-6 for r in rows]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "h100-2n.txt"
        log.write_text(render("all_reduce", ["node1", "node2"], 8, "NVIDIA H100 80GB HBM3", sizes, times))
        out = Path(tmp) / "my-cluster.toml"
        load = os.getloadavg()[0]
        cal = [timed([PY, "-m", "topo", "calibrate", str(log), "-o", str(out)]) for _ in range(RUNS)]
        cmp_ = [timed([PY, "-m", "topo", "compare", str(log)]) for _ in range(RUNS)]
        cmp_cal = [timed([PY, "-m", "topo", "compare", str(log), "--profile", str(out)]) for _ in range(RUNS)]
        base = [timed([PY, "-m", "topo", "describe", "--json"]) for _ in range(RUNS)]
    lines = [f"Log: {len(sizes)}-size all-reduce sweep of 2 x 8 H100 (nccl-tests issue #309), median of {RUNS} runs; "
             f"load average {load:.1f} on the machine's {os.cpu_count()} cores when it started (shared machine: "
             "CPU seconds are the comparable figure).", "",
             "| command | wall (s) | CPU (s) | peak RSS (MiB) | target |", "|---|---:|---:|---:|---|"]
    for name, runs, target in (("topo calibrate LOG -o my-cluster.toml", cal, "< 10 s"),
                               ("topo compare LOG", cmp_, "< 2 s"),
                               ("topo compare LOG --profile my-cluster.toml", cmp_cal, "< 2 s"),
                               ("topo describe --json (start-up reference)", base, "-")):
        lines.append(f"| `{name}` | {statistics.median(r[0] for r in runs):.2f} | "
                     f"{statistics.median(r[1] for r in runs):.2f} | {statistics.median(r[2] for r in runs):.0f} | "
                     f"{target} |")
    text = "\n".join(lines)
    print(text)
    update_section("Calibration and comparison: speed", text, "python benchmarks/bench_calibrate.py")  # --write


if __name__ == "__main__":
    main()
