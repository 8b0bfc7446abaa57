"""`topo plan` end to end: the 100k-GPU default, and three 100k designs side by side.

Targets (issue 11): `topo plan` on the 100k default under 3 s end to end (interpreter start-up included);
comparing three 100k designs under 10 s. Both include the cross-pod all-reduce (1 GiB over two pods) and
all-to-all (1 GiB over 16 servers in each of two pods) estimates of each design.

    python benchmarks/bench_plan.py          # prints the table and with --write updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import json
import os
import time

from _results import PY, fastest_run, update_section

RUNS = [
    ("default (h100-100k)", ["plan", "--json"]),
    ("three 100k designs", ["plan", "h100-100k", "h100-100k-4tier", "h100-100k-eth51t", "--json"]),
]
TARGETS = {"default (h100-100k)": 3.0, "three 100k designs": 10.0}


def stages() -> dict:
    """Library stage timings for the default, in one process."""
    import topo
    from topo.plan import plan

    t0 = time.perf_counter()
    fabric = topo.build_fabric(topo.load_spec())
    t1 = time.perf_counter()
    plan(fabric, collectives=False)
    t2 = time.perf_counter()
    plan(fabric)
    t3 = time.perf_counter()
    return {"fabric_s": t1 - t0, "plan_without_collectives_s": t2 - t1, "plan_s": t3 - t2}


def main() -> None:
    rows = []
    for label, args in RUNS:
        best = fastest_run([PY, "-m", "topo", *args])
        doc = json.loads(best[2])
        n = len(doc.get("designs", [doc]))
        ok = "yes" if best[0] < TARGETS[label] else "NO"
        rows.append(f"| {label} | {n} | {best[0]:.2f} | {TARGETS[label]:.0f} | {ok} | {best[1]:.0f} |")
        print(f"{label}: {best[0]:.2f} s (target {TARGETS[label]:.0f} s), {best[1]:.0f} MiB", flush=True)
    st = stages()
    print(st)
    body = ["| run | designs | wall (s, best of 3) | target (s) | met | peak RSS (MiB) |", "|---|---|---|---|---|---|",
            *rows, "",
            f"In one process (default spec): fabric {st['fabric_s']:.2f} s; plan without collectives "
            f"{st['plan_without_collectives_s']:.2f} s (floor layout, bill of materials over ~315k scale-out links, "
            f"power, cost, reliability, blast radius); plan with the two cross-pod estimates {st['plan_s']:.2f} s.",
            "", f"Load average when measured: {os.getloadavg()[0]:.1f} (the machine is shared; a quiet machine is "
            "faster)."]
    update_section("topo plan", "\n".join(body), "python benchmarks/bench_plan.py")


if __name__ == "__main__":
    main()
