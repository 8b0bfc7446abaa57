"""Fabrics of any depth (issue 19): the islands design, a 5-tier fabric of more than 200,000 GPUs, and the 100k
default before and after the change.

Targets (issue 19, measured here, not in tests):

- h100-100k-islands: `describe` < 2 s; a 1 GiB all-to-all over all 98,304 GPUs < 6 s and < 500 MB peak, bound on the
  7:1 tier; `plan` < 3 s;
- a 5-tier spec of at least 200,000 GPUs builds, describes and estimates a 1 GiB all-reduce in < 5 s;
- the 100k default (h100-100k): `describe`, a 1 GiB all-reduce, a 1 GiB all-to-all and `plan` within 10% of the
  time and memory of the code before the change (``--before DIR``: a checkout of commit 60cb2ef, run in alternation
  with this one on the same machine). `plan` is measured like for like (its work without the estimates, and the
  two 2-pod estimates it ran before) and whole: its network figures now run over every GPU across the top tier,
  which is new work, not the same work done slower.

    python benchmarks/bench_tiers.py                          # prints the figures
    python benchmarks/bench_tiers.py --before /tmp/before     # and the before/after comparison at 100k
    python benchmarks/bench_tiers.py --before /tmp/before --write   # and updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import PY, ROOT, arguments, compile_bytecode, update_section

# 5 tiers of 64-port QM9700-class switches, non-blocking, rail-optimized: pods of 4 scalable units (1,024 GPUs),
# 8 pods per core block (8,192), 4 core blocks per 4th-tier block (32,768), 7 of those under the top: 229,376 GPUs
FIVE_TIER = """
name = "h100-229k-5tier"
description = "benchmark: 229,376 H100 on a non-blocking 5-tier rail-optimized fat tree of 64-port switches"
source = "benchmarks/bench_tiers.py"
gpu = "H100"
[server]
gpus = 8
nics = 8
nic_rate = "400 Gb/s"
[cluster]
num_gpus = 229_376
[fabric]
kind = "rail_optimized"
servers_per_unit = 32
[[fabric.tiers]]
name = "leaf"
radix = 64
port_rate = "400 Gb/s"
oversubscription = 1
latency = "130 ns"
[[fabric.tiers]]
name = "spine"
radix = 64
port_rate = "400 Gb/s"
oversubscription = 1
latency = "130 ns"
joins = 4
[[fabric.tiers]]
name = "core"
radix = 64
port_rate = "400 Gb/s"
oversubscription = 1
latency = "130 ns"
joins = 8
[[fabric.tiers]]
name = "super"
radix = 64
port_rate = "400 Gb/s"
oversubscription = 1
latency = "130 ns"
joins = 4
block_name = "hall"
[[fabric.tiers]]
name = "top"
radix = 64
port_rate = "400 Gb/s"
latency = "130 ns"
"""


def measure(args: list[str], code_dir: Path) -> tuple[float, float, str]:
    """Wall time, peak RSS and output of one run, measured by wait4 on the child alone (its CPU seconds, user +
    system, go to ``CPU``)."""
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=code_dir, env=env)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err}")
    CPU.setdefault((str(code_dir), tuple(args)), []).append(usage.ru_utime + usage.ru_stime)
    return wall, usage.ru_maxrss / 1024, out


CPU: dict[tuple, list[float]] = {}  # (code dir, command) -> CPU seconds of each run


def cpu(args, code_dir=ROOT) -> str:
    """The least CPU time of the runs of ``args`` so far, as text."""
    return f"{min(CPU[(str(code_dir), tuple(args))]):.2f} s CPU"


def best(args, code_dir, repeats=3):
    runs = [measure(args, code_dir) for _ in range(repeats)]
    return min(r[0] for r in runs), max(r[1] for r in runs), runs[0][2]


def five_tier_in_process(path: str) -> dict:
    sys.path.insert(0, str(ROOT))
    import topo

    t0, c0 = time.perf_counter(), time.process_time()
    fabric = topo.build_fabric(topo.load_spec(path))
    inv = topo.inventory(fabric)
    t1 = time.perf_counter()
    r = topo.estimate(fabric, "all_reduce", "1GiB")
    t2, c2 = time.perf_counter(), time.process_time()
    x = r.results[0]
    return {"gpus": inv.num_gpus, "tiers": len(inv.tiers), "switches": inv.num_switches,
            "build_describe_s": t1 - t0, "estimate_s": t2 - t1, "cpu_s": c2 - c0, "algorithm": x.algorithm,
            "time_s": x.time_s, "bottleneck": x.bottleneck.level if x.bottleneck else None}


def _args():
    ap = arguments(__doc__, write=False)
    ap.add_argument("--before", type=Path, help="a checkout of the code before the change (commit 60cb2ef)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    ap.add_argument("--stage-five", help=argparse.SUPPRESS)
    return ap.parse_args()


def _islands_estimate_rows(here: Path, n: int) -> list[str]:
    """The all-to-all over every GPU of h100-100k-islands, and the cross-island data-parallel all-reduce."""
    cmd = [PY, "-m", "topo", "estimate", "h100-100k-islands", "-c", "alltoall", "--size", "1GiB", "--json"]
    w, m, out = best(cmd, here, n)
    doc = json.loads(out)
    res = doc["results"][0]
    b = res["bottleneck"]
    bound = 0.75 * 2**30 / (50e9 / 7)
    lines = [f"- 1 GiB all-to-all over all {doc['num_ranks']:,} GPUs of h100-100k-islands, end to end "
             f"`topo estimate h100-100k-islands -c alltoall --size 1GiB`: **{w:.2f} s** ({cpu(cmd)}), peak RSS **{m:.0f} MiB** "
             f"(targets < 6 s, < 500 MB); modelled {res['time_s'] * 1e3:.1f} ms, bound on {b['level']} "
             f"({b['src']} -> {b['dst']}); closed-form bound (3/4 of the bytes across islands at 1/7 of 400 Gb/s) "
             f"{bound * 1e3:.1f} ms."]
    cmd = [PY, "-m", "topo", "estimate", "h100-100k-islands", "--size", "1GiB", "--gpus", "98304", "--groups",
           "24576", "--json"]
    w, m, out = best(cmd, here, n)
    res = json.loads(out)["results"][0]
    lines.append(f"- cross-island data-parallel 1 GiB all-reduce (24,576 communicators of 4, one GPU per island, "
                 f"every rail), `topo estimate h100-100k-islands --size 1GiB --gpus 98304 --groups 24576`: "
                 f"**{w:.2f} s** ({cpu(cmd)}) end to end, {m:.0f} MiB; modelled {res['time_s'] * 1e3:.1f} ms ({res['algorithm']}), "
                 f"bound on {res['bottleneck']['level']}.")
    return lines


def _islands_rows(here: Path, n: int) -> list[str]:
    """1. h100-100k-islands: describe, two estimates and plan, end to end."""
    cmd = [PY, "-m", "topo", "describe", "h100-100k-islands", "--json"]
    w, m, out = best(cmd, here, n)
    lines = [f"- `topo describe h100-100k-islands`: **{w:.2f} s** ({cpu(cmd)}), peak RSS {m:.0f} MiB "
             "(target < 2 s)."]
    lines += _islands_estimate_rows(here, n)
    cmd = [PY, "-m", "topo", "plan", "h100-100k-islands", "--json"]
    w, m, out = best(cmd, here, n)
    net = json.loads(out)["network"]
    lines.append(f"- `topo plan h100-100k-islands`: **{w:.2f} s** ({cpu(cmd)}), {m:.0f} MiB (target < 3 s); its "
                 f"network figures cross the {net['top_tier']}: 1 GiB all-reduce, one GPU per {net['block_name']} "
                 f"({net['all_reduce_s'] * 1e3:.1f} ms, bound on {net['all_reduce_bottleneck']}), 1 GiB all-to-all "
                 f"over all {net['alltoall_gpus']:,} GPUs ({net['alltoall_s'] * 1e3:.1f} ms, bound on "
                 f"{net['alltoall_bottleneck']}).")
    return lines


def _five_tier_rows(here: Path, n: int) -> list[str]:
    """2. five tiers, more than 200,000 GPUs: in one process by stages, and end to end."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h100-229k-5tier.toml"
        path.write_text(FIVE_TIER)
        dcmd = [PY, "-m", "topo", "describe", str(path), "--json"]
        ecmd = [PY, "-m", "topo", "estimate", str(path), "--size", "1GiB", "--json"]
        wd, md, _ = best(dcmd, here, n)
        we, me, out = best(ecmd, here, n)
        res = json.loads(out)["results"][0]
        stages = [json.loads(measure([PY, __file__, "--stage-five", str(path)], here)[2]) for _ in range(n)]
        st = min(stages, key=lambda x: x["build_describe_s"] + x["estimate_s"])
    return [f"- 5 tiers, {st['gpus']:,} GPUs ({st['switches']:,} switches; FIVE_TIER in this script): build + "
            f"describe + estimate a 1 GiB all-reduce over all GPUs in one process **"
            f"{st['build_describe_s'] + st['estimate_s']:.2f} s** (build the layout and describe "
            f"{st['build_describe_s']:.2f} s, the links made when the estimate needs them; "
            f"estimate {st['estimate_s']:.2f} s; {st['cpu_s']:.2f} s of CPU; target < 5 s); end to end "
            f"`topo describe` {wd:.2f} s ({cpu(dcmd)}, "
            f"{md:.0f} MiB), `topo estimate --size 1GiB` {we:.2f} s ({cpu(ecmd)}, {me:.0f} MiB); modelled "
            f"{res['time_s'] * 1e3:.1f} ms ({res['algorithm']})."]


# the 100k default's commands, before and after: plan like for like, what both trees compute (the plan without
# its estimates; the two estimates the plan ran before the change, over two pods), and the whole plan, whose
# network figures now cross the top tier over every GPU (different work: before, two pods)
BEFORE_AFTER = [
    ("describe", [PY, "-m", "topo", "describe", "--json"]),
    ("1 GiB all-reduce", [PY, "-m", "topo", "estimate", "--size", "1GiB", "--json"]),
    ("1 GiB all-to-all", [PY, "-m", "topo", "estimate", "-c", "alltoall", "--size", "1GiB", "--json"]),
    ("plan without its estimates", [PY, "-m", "topo", "plan", "--no-collectives", "--json"]),
    ("before's plan all-reduce, 2 pods", [PY, "-m", "topo", "estimate", "--size", "1GiB", "--gpus", "3584",
                                          "--groups", "1792", "--json"]),
    ("before's plan all-to-all, 2 pods", [PY, "-m", "topo", "estimate", "-c", "alltoall", "--size", "1GiB",
                                          "--gpus", "3584", "--json"]),
    ("plan; after: its estimates over all GPUs", [PY, "-m", "topo", "plan", "--json"])]


def _compare_row(label: str, cmd: list[str], before: Path, here: Path, n: int) -> str:
    """One command run ``n`` times in each tree, in alternation: best wall, least CPU, largest peak RSS."""
    rb, ra = [], []
    for _ in range(n):
        rb.append(measure(cmd, before))
        ra.append(measure(cmd, here))
    tb, ta = min(r[0] for r in rb), min(r[0] for r in ra)
    mb, ma = max(r[1] for r in rb), max(r[1] for r in ra)
    cb, ca = min(CPU[(str(before), tuple(cmd))]), min(CPU[(str(here), tuple(cmd))])
    return (f"| `topo {' '.join(cmd[3:])}` ({label}) | {tb:.2f} | {ta:.2f} | {ta / tb - 1:+.0%} | "
            f"{cb:.2f} | {ca:.2f} | {mb:.0f} | {ma:.0f} | {ma / mb - 1:+.0%} |")


def _before_after_rows(before: Path, here: Path, n: int) -> list[str]:
    """3. the 100k default, before and after, in alternation."""
    lines = ["", "The 100k default (h100-100k), before (commit 60cb2ef) and after, run in alternation, best wall "
             f"time, least CPU time and largest peak RSS of {n} runs each:", "",
             "| command | before (s) | after (s) | change | before CPU (s) | after CPU (s) | before (MiB) | "
             "after (MiB) | change |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    return lines + [_compare_row(label, cmd, before, here, n) for label, cmd in BEFORE_AFTER]


def main() -> None:
    a = _args()
    if a.stage_five:
        print(json.dumps(five_tier_in_process(a.stage_five)))
        return
    here = ROOT
    n = a.repeats
    compile_bytecode(here, *([a.before] if a.before else []))  # both trees as an installed package runs them
    lines = _islands_rows(here, n) + _five_tier_rows(here, n)
    if a.before:
        lines += _before_after_rows(a.before, here, n)
    load = os.getloadavg()[0]
    lines.append("")
    lines.append(f"Load average when measured: {load:.1f} on {os.cpu_count()} cores (other sessions share the "
                 "machine: wall times above include their contention; the CPU time does not).")
    body = "\n".join(lines)
    print(body)
    if a.write:
        update_section("Fabrics of any depth (islands, 5 tiers)", body,
                       "python benchmarks/bench_tiers.py" + (" --before DIR" if a.before else "") + " --write")


if __name__ == "__main__":
    main()
