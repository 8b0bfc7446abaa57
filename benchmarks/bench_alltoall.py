"""All-to-all loads from the structure (topo.alltoall) over whole clusters: router construction + loads.

Target (issue 7): an all-to-all over all 24,576 GPUs of meta-llama3-24k and all 100,352 of the default h100-100k,
each under 2 s (the fabric is built beforehand; timed: ``Router(...)`` plus ``uniform_alltoall_loads``). Routing
the same traffic pair by pair would be 6.0e8 and 1.0e10 flows.

Hashed ECMP with its own collisions (issue 21): the 100k default's expert all-to-all (1,792 communicators of 56, one
GPU per pod: 5.5 million flows, each with its own pair of NICs, so its own hash), intact and with 1% of the
spine-core links failed, from ``hashed_alltoall_loads`` (switch hops hashed flow by flow, the rest from counts)
against every flow routed by ``Router.route`` (in chunks, loads summed): time, and the loads equal to 1e-9.

    python benchmarks/bench_alltoall.py [--write]    # prints the tables; --write updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import time

import numpy as np

from _results import arguments, update_section


def run(name: str, ecmp: str, per_pod: bool, repeats: int = 3) -> dict:
    import topo
    from topo.engine.alltoall import uniform_alltoall_loads
    from topo.engine.route import Router

    t0 = time.perf_counter()
    fabric = topo.build_fabric(topo.load_spec(name))
    n = fabric.num_gpus
    groups = (np.arange(n).reshape(fabric.layout.num_pods, -1) if per_pod else np.arange(n)[None, :])
    uniform_alltoall_loads(Router(fabric, ecmp), groups, 1.0)
    cold_s = time.perf_counter() - t0  # spec, fabric and its link arrays, router, loads: end to end
    best = float("inf")
    for _ in range(repeats):
        t1 = time.perf_counter()
        router = Router(fabric, ecmp)
        loads = uniform_alltoall_loads(router, groups, 1.0)
        best = min(best, time.perf_counter() - t1)
    G, p = groups.shape
    # every byte leaves its GPU once: NVLink inside the domain, else the NIC (a PXN hop adds NVLink bytes)
    lo = fabric.link_offset
    nic_up = loads[2 * (lo["nic"] + np.arange(fabric.layout.num_nics))].sum()
    return {"spec": name, "gpus": n, "groups": f"{G} x {p:,}", "ecmp": ecmp, "cold_s": cold_s, "loads_s": best,
            "pairs": G * p * (p - 1), "nic_bytes": nic_up}


def run_hashed(fails: str) -> dict:
    import topo
    from topo.engine.alltoall import hashed_alltoall_loads
    from topo.engine.route import Router
    from topo.engine.schedule import AllPairs

    fabric = topo.build_fabric(topo.load_spec("h100-100k"))
    if fails:
        fabric = fabric.with_failures(fails)
    groups = np.arange(fabric.num_gpus).reshape(-1, 1792).T.copy()  # strided: one GPU per pod
    router = Router(fabric, "hash")
    hashed_alltoall_loads(router, groups, 1.0)  # warm: the fabric's lazy tables

    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        return out, time.perf_counter() - w, time.process_time() - c

    fast, fast_w, fast_c = timed(lambda: hashed_alltoall_loads(Router(fabric, "hash"), groups, 1.0))
    a = AllPairs(groups, 1.0)
    chunks = ((t.src, t.dst, t.per_msg_byte, 0) for t in a.transfers(1_000_000))
    routed, slow_w, slow_c = timed(lambda: router.loads(router.route_summed(chunks)))
    equal = np.allclose(fast, routed, rtol=1e-9, atol=1e-9 * routed.max())
    return {"fails": fails or "none", "flows": a.num_flows, "fast_w": fast_w, "fast_c": fast_c, "slow_w": slow_w,
            "slow_c": slow_c, "equal": equal, "max": routed.max()}


def main() -> None:
    ap = arguments(__doc__, write=False)
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = ap.parse_args()
    rows = [run(s, e, per_pod) for s in ("meta-llama3-24k", "h100-100k") for per_pod in (False, True)
            for e in ("ideal", "hash")]
    lines = ["| spec | GPUs | communicators | ECMP | GPU pairs | end to end, cold (s) | router + loads (s) | target |",
             "|---|---:|---|---|---:|---:|---:|---|"]
    for r in rows:
        ok = "< 2 s: met" if max(r["loads_s"], r["cold_s"]) < 2 else "< 2 s: MISSED"
        lines.append(f"| {r['spec']} | {r['gpus']:,} | {r['groups']} | {r['ecmp']} | {r['pairs']:.2e} | "
                     f"{r['cold_s']:.2f} | {r['loads_s']:.3f} | {ok} |")
        print(lines[-1])
    lines.append("")
    lines.append("End to end, cold: load the spec, build the fabric and its link arrays, the router and the loads, "
                 "once. Router + loads: best of 3 on the built fabric. `uniform_alltoall_loads(router, groups, bytes_per_pair)` counts GPUs per "
                 "(communicator, rail, NVLink domain, leaf, spine group) instead of routing the pairs; "
                 "tests/test_alltoall.py checks it equals per-pair routing exactly on small fabrics of every kind.")
    import os

    lines += ["", "Hashed ECMP, exactly: h100-100k, 1,792 communicators of 56 (one GPU per pod), 1 byte per pair.", "",
              "| failed | flows | `hashed_alltoall_loads` CPU (wall) | every flow routed, CPU (wall) | per flow | "
              "loads equal (1e-9) |", "|---|---:|---:|---:|---:|---|"]
    for fails in ("", "random:spine-core:0.01:0"):
        h = run_hashed(fails)
        lines.append(f"| {h['fails']} | {h['flows']:,} | {h['fast_c']:.2f} s ({h['fast_w']:.2f} s) | "
                     f"{h['slow_c']:.1f} s ({h['slow_w']:.1f} s) | {h['fast_c'] / h['flows'] * 1e9:.0f} ns against "
                     f"{h['slow_c'] / h['flows'] * 1e9:.0f} ns | {'yes' if h['equal'] else 'NO'} |")
        print(lines[-1])
    lines.append(f"Load average during the run: {os.getloadavg()[0]:.1f} (machine shared; times scale with it).")
    print(lines[-1])
    if not args.write:
        return
    update_section("All-to-all loads from the structure (topo.alltoall)", "\n".join(lines),
                   "python benchmarks/bench_alltoall.py")


if __name__ == "__main__":
    main()
