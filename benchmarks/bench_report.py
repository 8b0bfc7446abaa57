"""Time and size of the report (issue 4 target: the default 100k-GPU report in under 10 s, under 10 MB).

    python benchmarks/bench_report.py       # prints and with --write updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import os
import tempfile

from _results import PY, peak_rss_of, arguments, update_section


def main() -> None:
    arguments(__doc__).parse_args()
    rows = []
    for specs in (["h100-100k"], ["dgx-h100-superpod"], ["h100-100k", "meta-llama3-24k"]):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.html")
            runs = [peak_rss_of([PY, "-m", "topo", "report", *specs, "-o", out]) for _ in range(3)]
            size = os.path.getsize(out)
        wall = min(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        rows.append((specs, wall, rss, size))
        print(f"{' '.join(specs)}: {wall:.2f} s, {size / 1e6:.1f} MB, {rss:.0f} MiB", flush=True)
    lines = ["| `topo report ...` | wall, end to end (s, best of 3) | file size (MB) | peak RSS (MiB) |",
             "|---|---:|---:|---:|"]
    for specs, wall, rss, size in rows:
        lines.append(f"| {' '.join(specs)} | {wall:.2f} | {size / 1e6:.1f} | {rss:.0f} |")
    d = rows[0]
    lines += ["", f"Default 100k-GPU report: {d[1]:.1f} s and {d[3] / 1e6:.1f} MB (targets < 10 s, < 10 MB)."]
    update_section("Report: time and size", "\n".join(lines), "python benchmarks/bench_report.py")


if __name__ == "__main__":
    main()
