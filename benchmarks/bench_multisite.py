"""Regions of several sites (issue 31): build + describe + a 1 GiB all-reduce over every GPU of region-1m
(1,003,520 GPUs in ten alike sites), in one process and end to end; the two-site-h100 all-reduce beside it.

Target (issue 31): region-1m build, describe and a 1 GiB all-reduce over every GPU in < 10 s and < 2 GB end to end.

    python benchmarks/bench_multisite.py [--write]    # prints the figures; --write updates benchmarks/RESULTS.md

The tree's ``topo`` is compiled to bytecode first (:func:`_results.compile_bytecode`), as ``pip install`` does.
"""

from __future__ import annotations

import json
import os
import sys
import time

from _results import ROOT, compile_bytecode, measured_run, arguments, update_section

sys.path.insert(0, str(ROOT))
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def in_process(name: str) -> dict:
    from topo.engine.region_estimate import estimate_region
    from topo.fabric.region import build_region
    from topo.fabric.region_inventory import region_inventory

    w, c = time.perf_counter(), time.process_time()
    region = build_region(name)
    inv = region_inventory(region)
    t_describe = time.perf_counter() - w
    row = estimate_region(region, "all_reduce", [2 ** 30]).results[0]
    return {"gpus": inv.num_gpus, "sites": inv.num_sites, "describe_s": t_describe, "wall_s": time.perf_counter() - w,
            "cpu_s": time.process_time() - c, "row": row}


def main() -> None:
    arguments(__doc__).parse_args()
    lines = []
    runs = {}
    compile_bytecode(ROOT)  # as an installed package has it: a checkout under PYTHONDONTWRITEBYTECODE recompiles
    for name in ("region-1m", "two-site-h100"):  # end to end first: a child forked after in_process counts its RSS
        d = measured_run([PY, "-m", "topo", "describe", name, "--json"], env=ENV)
        e = measured_run([PY, "-m", "topo", "estimate", name, "--size", "1GiB", "--json"], env=ENV)
        runs[name] = (d, e)
    for name in ("region-1m", "two-site-h100"):
        d, e = runs[name]
        p = in_process(name)
        r = p["row"]
        doc = json.loads(e["out"])
        cands = ", ".join(f"{k} {v[0] * 1e3:.1f} ms" for k, v in doc["candidate_time_s"].items())
        lines.append(f"- `{name}` ({p['gpus']:,} GPUs, {p['sites']} sites): build + describe + 1 GiB all-reduce over "
                     f"every GPU in one process **{p['wall_s']:.2f} s** ({p['cpu_s']:.2f} s CPU; build and describe "
                     f"{p['describe_s']:.2f} s); end to end `topo describe {name}` {d['wall_s']:.2f} s "
                     f"({d['cpu_s']:.2f} s CPU, {d['rss_MiB']:.0f} MiB), `topo estimate {name} --size 1GiB` "
                     f"**{e['wall_s']:.2f} s** ({e['cpu_s']:.2f} s CPU, peak RSS **{e['rss_MiB']:.0f} MiB**); "
                     f"modelled {r.time_s * 1e3:.1f} ms ({r.algorithm}, bound on {r.bottleneck_name}); candidates: {cands}.")
    train = [PY, "-m", "topo", "train", "region-1m", "--model", "llama3-405b", "--tp", "8", "--pp", "16",
             "--global-batch", "15680", "--json"]
    for extra in ([], ["--no-contention"]):
        t = measured_run(train + extra, env=ENV)
        doc = json.loads(t["out"])
        lines.append(f"- one training step across region-1m (Llama 3 405B, TP 8, PP 16, DP 7,840 over ten sites, "
                     f"global batch 15,680), `topo train region-1m ... {' '.join(extra)}`: **{t['wall_s']:.2f} s** "
                     f"({t['cpu_s']:.2f} s CPU, {t['rss_MiB']:.0f} MiB); one site's share steps in "
                     f"{doc['one_site_step_s']:.2f} s, across sites (dp) {doc['throughput_vs_one_site']:.1%} of it "
                     "(the time is the one-site step's on a 100k fabric: `topo train h100-100k` alone takes as long).")
    lines += ["", f"Targets (issue 31): region-1m build + describe + 1 GiB all-reduce < 10 s and < 2 GB end to end; "
              "one training step < 2 s. Load average when measured: "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times stretch with it; CPU times do not)."]
    body = "\n".join(lines)
    print(body)
    update_section("Several sites (regions joined by a DCI)", body, "python benchmarks/bench_multisite.py")


if __name__ == "__main__":
    main()
