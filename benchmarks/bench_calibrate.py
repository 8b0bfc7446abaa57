"""Speed of calibration and comparison on nccl-tests logs (targets: calibrate one 32-size sweep < 10 s,
compare < 2 s, end to end through the command line).

The log is a real 32-size sweep: nccl-tests issue #309's 2 x 8 H100 all-reduce (8 B - 16 GiB) from
data/reference/nccl_tests_measurements.csv, rendered in nccl-tests' own layout.

    python benchmarks/bench_calibrate.py     # prints the table and updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import csv
import statistics
import sys
import tempfile
from pathlib import Path

from _results import PY, ROOT, peak_rss_of, update_section

sys.path.insert(0, str(ROOT / "tests"))
from nccl_text import render  # noqa: E402

RUNS = 3


def main() -> None:
    rows = [r for r in csv.DictReader((ROOT / "data/reference/nccl_tests_measurements.csv").open())
            if r["setup_id"] == "ncclt309_h100_2n_xe9680"]
    sizes = [int(r["size_bytes"]) for r in rows]
    times = [float(r["time_us"]) * 1e-6 for r in rows]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "h100-2n.txt"
        log.write_text(render("all_reduce", ["node1", "node2"], 8, "NVIDIA H100 80GB HBM3", sizes, times))
        out = Path(tmp) / "my-cluster.toml"
        cal = [peak_rss_of([PY, "-m", "topo", "calibrate", str(log), "-o", str(out)]) for _ in range(RUNS)]
        cmp_ = [peak_rss_of([PY, "-m", "topo", "compare", str(log)]) for _ in range(RUNS)]
        cmp_cal = [peak_rss_of([PY, "-m", "topo", "compare", str(log), "--profile", str(out)]) for _ in range(RUNS)]
    lines = [f"Log: {len(sizes)}-size all-reduce sweep of 2 x 8 H100 (nccl-tests issue #309), median of {RUNS} runs.",
             "", "| command | wall (s) | peak RSS (MiB) | target |", "|---|---:|---:|---|"]
    for name, runs, target in (("topo calibrate LOG -o my-cluster.toml", cal, "< 10 s"),
                               ("topo compare LOG", cmp_, "< 2 s"),
                               ("topo compare LOG --profile my-cluster.toml", cmp_cal, "< 2 s")):
        lines.append(f"| `{name}` | {statistics.median(r[0] for r in runs):.2f} | "
                     f"{statistics.median(r[1] for r in runs):.0f} | {target} |")
    text = "\n".join(lines)
    print(text)
    if "--no-write" not in sys.argv:
        update_section("Calibration and comparison: speed", text, "python benchmarks/bench_calibrate.py")


if __name__ == "__main__":
    main()
