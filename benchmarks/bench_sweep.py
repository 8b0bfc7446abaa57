"""Speed of ``topo sweep`` (issue 21 targets, measured here, not in tests):

- scaling on this machine: the bundled failure study (``failures-100k``: 1% of spine-core links failed on the
  100k default, a cross-pod all-reduce and all-to-all per draw) on 1 worker against 2 workers (target >= 1.7x);
  ``--draws N`` runs the first N draws of the 1,000 (clearly labelled; the full study is
  ``--draws 1000``), and the full study's time on 2 workers is projected from the measured rate;
- the cost of one failure draw at 100k GPUs: deriving the failed fabric from the cached intact one, and the
  points it feeds (target: a draw well under 2 s);
- the per-point overhead of the sweep machinery (study, batches, Dask tasks, Parquet parts) against calling the
  same function in a plain loop (target < 20 ms per point);
- the figures of the 1-worker and 2-worker runs equal bit for bit.

    python benchmarks/bench_sweep.py [--draws 4] [--write]    # --write updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import tomllib

from _results import ROOT, update_section

sys.path.insert(0, str(ROOT))


def _cluster(n: int):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.CRITICAL)
    return cluster, Client(cluster, set_as_default=False)


def _cpu_s() -> float:
    """CPU seconds (user + system) this process has used."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _workers_cpu_s(client) -> float:
    return sum(client.run(_cpu_s).values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=4, help="failure draws of the 1,000 to run (default 4)")
    ap.add_argument("--points", type=int, default=300, help="cheap points for the overhead measurement")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = ap.parse_args()

    import topo
    from topo.sweep import SweepRun, study_from_dict, sweep
    from topo.sweep.compute import run_point
    from topo.sweep.study import bundled_studies

    load0 = os.getloadavg()[0]
    lines = ["| what | measured | target |", "|---|---|---|"]

    def timed(fn):
        t0, c0 = time.perf_counter(), _cpu_s()
        out = fn()
        return out, time.perf_counter() - t0, _cpu_s() - c0

    # --- one failure draw at 100k -------------------------------------------------------------------------
    fabric = topo.build_fabric(topo.load_spec("h100-100k"))
    topo.estimate(fabric, "all_reduce", "1GiB", gpus=64)  # the fabric's lazy tables, as a worker's cache has them
    _, derive_w, derive_c = timed(lambda: [fabric.with_failures(f"random:spine-core:0.01:{s}") for s in range(5)])
    failed = fabric.with_failures("random:spine-core:0.01:0")
    _, ar_w, ar_c = timed(lambda: topo.estimate(failed, "all_reduce", "1GiB", groups=1792))
    _, a2a_w, a2a_c = timed(lambda: topo.estimate(failed, "alltoall", "1GiB", groups=1792))
    # steady state: the study's points one after another in this process, the intact fabric cached (as on a
    # worker after its first point)
    warm = tomllib.loads(bundled_studies()["failures-100k"].read_text())
    warm["seeds"] = max(args.draws, 10)
    warm_study = study_from_dict(warm, source="failures-100k (first draws)")
    warm_pts = [p["inputs"] for p in warm_study.points()]
    run_point(warm_pts[0], warm_study.compute, warm_study.specs)
    _, steady_w, steady_c = timed(lambda: [run_point(p, warm_study.compute, warm_study.specs) for p in warm_pts[1:]])
    steady = steady_c / (len(warm_pts) - 1)
    lines += [f"| a failure draw at 100k: the failed fabric derived from the cached intact one (1% of the 12,544 "
              f"spine-core links) | {derive_c / 5 * 1e3:.1f} ms CPU ({derive_w / 5 * 1e3:.1f} ms wall) | well under "
              "2 s |",
              f"| the draw's cross-pod all-reduce (1,792 groups of 56, 1 GiB) on the failed fabric | {ar_c:.2f} s CPU "
              f"({ar_w:.2f} s wall) | |",
              f"| the draw's cross-pod all-to-all (1,792 groups of 56, 1 GiB) on the failed fabric | {a2a_c:.2f} s "
              f"CPU ({a2a_w:.2f} s wall) | |"]

    # --- 1 vs 2 workers on the failure study ------------------------------------------------------------------
    data = tomllib.loads(bundled_studies()["failures-100k"].read_text())
    data["seeds"] = args.draws
    study = study_from_dict(data, source="failures-100k (first draws)")
    n_points = len(study.points())
    res = {}
    for n in (1, 2):
        cluster, client = _cluster(n)
        try:
            client.submit(sum, [1]).result()  # workers up
            with tempfile.TemporaryDirectory() as tmp:
                run = SweepRun()
                w0 = _workers_cpu_s(client)
                df, wall, _ = timed(lambda: sweep(study, os.path.join(tmp, "out.parquet"), client=client, run=run))
                cpu = _workers_cpu_s(client) - w0
            busy = float(df["compute_s"].sum())
            res[n] = (df, wall, cpu, busy / (n * wall))
        finally:
            client.close()
            cluster.close()
    same = res[1][0].drop(columns="compute_s").equals(res[2][0].drop(columns="compute_s"))
    cpu_per_point = res[2][2] / n_points
    full_points = 2 * (1 + 1000)
    for n in (1, 2):
        _, wall, cpu, util = res[n]
        lines.append(f"| `failures-100k`, its first {args.draws} draws of 1,000 ({n_points} points: all-reduce and "
                     f"all-to-all, intact and per draw), {n} worker{'s' if n > 1 else ''} | {wall:.1f} s wall, "
                     f"{cpu:.1f} s worker CPU; workers busy {util:.0%} of the time | |")
    lines += [f"| speedup, 2 workers against 1 (wall) | {res[1][1] / res[2][1]:.2f}x (at this load); workers busy "
              f"{res[2][3]:.0%}: {2 * res[2][3]:.2f}x on two idle cores | >= 1.7x |",
              f"| the full study ({full_points:,} points) on 2 idle cores, from the CPU per point of the 2-worker run "
              f"({cpu_per_point:.2f} s, worker start-up and fabric builds spread over only {n_points} points) | "
              f"{full_points * cpu_per_point / 2 / 60:.0f} min | < 20 min |",
              f"| the same, from the steady CPU per point ({steady:.2f} s: the study's first {len(warm_pts) - 1} points "
              f"after the first, in one process, the intact fabric cached) | {full_points * steady / 2 / 60:.0f} min "
              "| < 20 min |",
              f"| figures of the 1-worker and 2-worker runs equal bit for bit | {'yes' if same else 'NO'} | yes |"]

    # --- per-point overhead -----------------------------------------------------------------------------------
    cheap = study_from_dict({"spec": "dgx-h100-superpod", "seeds": args.points,
                             "axes": {"collective": "alltoall", "gpus": 64, "placement": "one_per_server",
                                      "size": "64MiB", "fabric.tiers[0].oversubscription": 2,
                                      "fail": "random:leaf-spine:0.2:{seed}"}})
    pts = cheap.points()
    n = len(pts)
    run_point(pts[0]["inputs"], cheap.compute, cheap.specs)  # the fabric cached, as on a worker
    small = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["fabric.tiers[0].oversubscription=2"]))

    def loop():  # the plain loop: the same estimate on a fabric built once
        for p in pts:
            topo.estimate(small.with_failures(p["inputs"]["fail"]), "alltoall", "64MiB", gpus=64,
                          placement="one_per_server")

    _, loop_w, loop_c = timed(loop)
    with tempfile.TemporaryDirectory() as tmp:
        _, ser_w, ser_c = timed(lambda: sweep(cheap, os.path.join(tmp, "serial.parquet"), scheduler="serial"))
        cluster, client = _cluster(1)
        try:
            client.submit(run_point, pts[0]["inputs"], cheap.compute, cheap.specs).result()  # warm worker
            w0 = _workers_cpu_s(client)
            _, dask_w, dask_c = timed(lambda: sweep(cheap, os.path.join(tmp, "dask.parquet"), client=client))
            dask_c += _workers_cpu_s(client) - w0  # the driver's CPU and the worker's
        finally:
            client.close()
            cluster.close()
    lines += [f"| plain loop: `topo.estimate` on a failed superpod (64-GPU all-to-all), {n} points | "
              f"{loop_c / n * 1e3:.1f} ms CPU per point ({loop_w / n * 1e3:.1f} ms wall) | |",
              f"| `sweep(..., scheduler='serial')`, the same points, written to Parquet | {ser_c / n * 1e3:.1f} ms CPU "
              f"per point: overhead {(ser_c - loop_c) / n * 1e3:.1f} ms | < 20 ms |",
              f"| `sweep` on a 1-worker LocalCluster started beforehand (driver + worker CPU) | {dask_c / n * 1e3:.1f} "
              f"ms CPU per point: overhead {(dask_c - loop_c) / n * 1e3:.1f} ms ({dask_w / n * 1e3:.1f} ms wall) | "
              "< 20 ms |"]
    load1 = os.getloadavg()[0]
    head = (f"Load average {load0:.1f} at the start and {load1:.1f} at the end on {os.cpu_count()} cores: other "
            "engineers' jobs share them, so wall times are inflated and CPU times (user + system, of every process "
            "involved) are the figures to compare; the 2-worker speedup on idle cores is the workers' busy share "
            "(sum of the points' compute time over workers x wall time) times 2.")
    body = head + "\n\n" + "\n".join(lines)
    print(body)
    if args.write:
        update_section("Sweeps on Dask (topo sweep)", body, f"python benchmarks/bench_sweep.py --draws {args.draws}")


if __name__ == "__main__":
    main()
