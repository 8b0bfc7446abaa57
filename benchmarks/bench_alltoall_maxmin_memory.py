"""Peak memory of the 100k hashed all-to-all under max-min (issue 30, item 10: under 1 GB).

``topo estimate --groups 1792 -c alltoall --ecmp hash --sharing maxmin`` on the default h100-100k: 1,792
communicators of 56 (one GPU per pod), 5.5 million flows kept as 5.5 million max-min classes of 7 network hops
each (39 million incidences). Each run is a fresh process; its peak resident set (``ru_maxrss`` of the child, in
MB of 10^6 bytes) and CPU time are printed.

    python benchmarks/bench_alltoall_maxmin_memory.py            # 1 GiB and the issue's sweep (8 B to 16 GiB)
    python benchmarks/bench_alltoall_maxmin_memory.py --write    # and record them in benchmarks/RESULTS.md
"""

from __future__ import annotations

import os

from _results import PY, ROOT, arguments, measured_run, update_section

SECTION = "Max-min all-to-all memory at 100k GPUs (issue 30 item 10)"
COMMAND = [PY, "-m", "topo", "estimate", "--groups", "1792", "-c", "alltoall", "--ecmp", "hash", "--sharing",
           "maxmin"]
LIMIT_MB = 1000.0  # the target: 1 GB


def run(size: str | None) -> dict:
    """One fresh run (``size`` None: the default sweep), its peak RSS (MB), CPU and wall time and last row."""
    argv = COMMAND + ([] if size is None else ["--size", size])
    r = measured_run(argv, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    last = [line for line in r["out"].splitlines() if line and not line.startswith("#")][-1].split()
    return {"size": size or "8 B - 16 GiB", "peak_MB": r["rss_MiB"] * 1024 * 1024 / 1e6, "cpu_s": r["cpu_s"],
            "wall_s": r["wall_s"], "last_row": " ".join(last[:8])}


def main() -> None:
    write = arguments(__doc__).parse_args().write
    load = os.getloadavg()[0]
    rows = [run("1GiB"), run(None)]
    lines = ["| sizes | peak RSS (MB) | under 1 GB | CPU (s) | wall (s) | last row (size, count, type, redop, root, "
             "time us, algbw, busbw) |", "|---|---|---|---|---|---|"]
    for r in rows:
        print(f"{r['size']}: peak {r['peak_MB']:,.0f} MB, CPU {r['cpu_s']:.1f} s, wall {r['wall_s']:.1f} s; "
              f"last row: {r['last_row']}")
        lines.append(f"| {r['size']} | {r['peak_MB']:,.0f} | {'yes' if r['peak_MB'] < LIMIT_MB else 'NO'} | "
                     f"{r['cpu_s']:.1f} | {r['wall_s']:.1f} | `{r['last_row']}` |")
    lines += ["", f"Load average (1 min) when started: {load:.2f} (a shared machine: wall time is inflated, peak RSS "
              "and CPU time are not). Command: `topo estimate --groups 1792 -c alltoall --ecmp hash --sharing "
              "maxmin [--size 1GiB]` on the bundled h100-100k, each a fresh process (peak = `ru_maxrss`). Before "
              "issue 30 it peaked at 2.95 GB, then 2.0 GB; the solver no longer copies the classes (they come by "
              "class, as `FlowClasses.ptr`, and the solver fills them on those arrays), ids and scratch are int32, "
              "and the equal weights of these classes are one broadcast value (where weights differ, an array of "
              "float32 adds 4 bytes per incidence: 155 MB here)."]
    if write:
        update_section(SECTION, "\n".join(lines), "python benchmarks/bench_alltoall_maxmin_memory.py")


if __name__ == "__main__":
    main()
