"""Speed of ``topo sweep`` (issue 21 targets, measured here, not in tests):

- scaling on this machine: the bundled failure study (``failures-100k``: 1% of spine-core links failed on the
  100k default, a cross-pod all-reduce and all-to-all per draw) on 1 worker against 2 workers (target >= 1.7x), on
  its first ``--draws N`` draws of the 1,000 (default 50: 102 points, enough that worker start-up and each worker's
  first fabric build are spread as thinly as in the full study's 2,002 points). Each worker count runs
  ``--repeat`` times, alternating (1, 2, 1, 2, ...) so that the other users of the machine load both alike. Two
  speedups: end to end (``topo sweep``'s own LocalCluster started and closed inside the timing, as the command
  does), and steady state (points per second between the 10th and the 90th percent of the points done: start-up
  and the tail excluded); the full study's time on 2 workers is projected from the steady rate;
- the cost of one failure draw at 100k GPUs: deriving the failed fabric from the cached intact one, and the
  points it feeds, with ideal and with hashed ECMP (target: a draw well under 2 s);
- the per-point overhead of the sweep machinery (study, batches, Dask tasks, Parquet parts) against calling the
  same function in a plain loop (target < 20 ms per point);
- the figures of the 1-worker and 2-worker runs equal bit for bit.

    python benchmarks/bench_sweep.py [--draws 50] [--repeat 2] [--write]   # --write updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tomllib

import numpy as np

from _results import ROOT, arguments, update_section

sys.path.insert(0, str(ROOT))


def _cluster(n: int):
    from distributed import Client

    from topo.sweep.run import local_cluster

    cluster = local_cluster(n)  # as topo sweep starts it (worker environment included)
    return cluster, Client(cluster, set_as_default=False)


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of the child processes that have ended (a closed cluster's workers)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu_s() -> float:
    """CPU seconds (user + system) this process has used."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _workers_cpu_s(client) -> float:
    return sum(client.run(_cpu_s).values())


def _args():
    ap = arguments(__doc__, write=False)
    ap.add_argument("--draws", type=int, default=50, help="failure draws of the 1,000 to run (default 50)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per worker count, alternating (default 2)")
    ap.add_argument("--points", type=int, default=300, help="cheap points for the overhead measurement")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    return ap.parse_args()


def timed(fn):
    """``fn()``'s result, wall seconds and this process's CPU seconds."""
    t0, c0 = time.perf_counter(), _cpu_s()
    out = fn()
    return out, time.perf_counter() - t0, _cpu_s() - c0


def _steady_point_cpu_s() -> tuple[float, int]:
    """CPU seconds per point of the failure study's first points run one after another in this process, the
    intact fabric cached (as on a worker after its first point), and how many points that mean is over."""
    from topo.sweep import study_from_dict
    from topo.sweep.point import run_point
    from topo.sweep.study import bundled_studies

    warm = tomllib.loads(bundled_studies()["failures-100k"].read_text())
    warm["seeds"] = 10
    warm_study = study_from_dict(warm, source="failures-100k (first draws)")
    warm_pts = [p["inputs"] for p in warm_study.points()]
    run_point(warm_pts[0], warm_study.compute, warm_study.specs)
    _, _, steady_c = timed(lambda: [run_point(p, warm_study.compute, warm_study.specs) for p in warm_pts[1:]])
    return steady_c / (len(warm_pts) - 1), len(warm_pts) - 1


def _failure_draw_rows() -> list[str]:
    """The cost of one failure draw at 100k GPUs: the failed fabric derived, and the points it feeds."""
    import topo

    fabric = topo.build_fabric(topo.load_spec("h100-100k"))
    topo.estimate(fabric, "all_reduce", "1GiB", gpus=64)  # the fabric's lazy tables, as a worker's cache has them
    _, derive_w, derive_c = timed(lambda: [fabric.with_failures(f"random:spine-core:0.01:{s}") for s in range(5)])
    failed = fabric.with_failures("random:spine-core:0.01:0")
    _, ar_w, ar_c = timed(lambda: topo.estimate(failed, "all_reduce", "1GiB", groups=1792))
    _, a2a_w, a2a_c = timed(lambda: topo.estimate(failed, "alltoall", "1GiB", groups=1792))
    _, har_w, har_c = timed(lambda: topo.estimate(failed, "all_reduce", "1GiB", groups=1792, ecmp="hash"))
    _, ha2a_w, ha2a_c = timed(lambda: topo.estimate(failed, "alltoall", "1GiB", groups=1792, ecmp="hash"))
    steady, n_steady = _steady_point_cpu_s()
    return [f"| a failure draw at 100k: the failed fabric derived from the cached intact one (1% of the 12,544 "
            f"spine-core links) | {derive_c / 5 * 1e3:.1f} ms CPU ({derive_w / 5 * 1e3:.1f} ms wall) | well under "
            "2 s |",
            f"| the draw's cross-pod all-reduce (1,792 groups of 56, 1 GiB) on the failed fabric | {ar_c:.2f} s CPU "
            f"({ar_w:.2f} s wall) | |",
            f"| the draw's cross-pod all-to-all (1,792 groups of 56, 1 GiB) on the failed fabric | {a2a_c:.2f} s "
            f"CPU ({a2a_w:.2f} s wall) | |",
            f"| the same all-reduce with hashed ECMP (`ecmp = \"hash\"`: a re-hash around the failed links) | "
            f"{har_c:.2f} s CPU ({har_w:.2f} s wall) | well under 2 s |",
            f"| the same all-to-all with hashed ECMP: 5.5 million flows, each one's switch hops hashed (exact "
            f"collisions), the rest from counts | {ha2a_c:.2f} s CPU ({ha2a_w:.2f} s wall) | well under 2 s |",
            f"| a point of the study in steady state: its first {n_steady} points after the first, in one "
            f"process, the intact fabric cached | {steady:.2f} s CPU per point: the full study's 2,002 points "
            f"in {2002 * steady / 2 / 60:.0f} min on 2 idle cores | < 20 min |"]


def _one_sweep(study, n: int, n_points: int):
    """One run of ``study`` on ``n`` workers: its frame, and its wall, CPU, steady rate and start-up figures."""
    from topo.sweep import SweepRun, sweep

    marks = []
    with tempfile.TemporaryDirectory() as tmp:
        run = SweepRun()
        c0, l0 = _children_cpu_s(), os.getloadavg()[0]
        df, wall, own = timed(lambda: sweep(study, os.path.join(tmp, "out.parquet"), workers=n, run=run,
                                            progress=lambda done, total, t: marks.append((done, t))))
        cpu = _children_cpu_s() - c0 + own
    done = np.array([m[0] for m in marks])  # points done after each batch, and when
    at = np.array([m[1] for m in marks])
    lo, hi = np.searchsorted(done, 0.1 * n_points), np.searchsorted(done, 0.9 * n_points)
    hi = max(hi, lo + 1) if lo + 1 < done.size else hi
    rate = (done[hi] - done[lo]) / (at[hi] - at[lo])  # points per second, steady state
    print(f"{n} worker(s): {wall:.1f} s wall, steady {rate:.2f} points/s, load {l0:.1f}", flush=True)
    return df, {"wall": wall, "cpu": cpu, "own": own, "rate": rate, "first": at[0], "load": l0,
                "busy": float(df["compute_s"].sum()) / (n * wall)}


def _scaling_rows(draws: int, repeat: int) -> list[str]:
    """1 against 2 workers on the failure study's first ``draws`` draws, ``repeat`` runs each, alternating."""
    from topo.sweep import study_from_dict
    from topo.sweep.study import bundled_studies

    data = tomllib.loads(bundled_studies()["failures-100k"].read_text())
    data["seeds"] = draws
    study = study_from_dict(data, source="failures-100k (first draws)")
    n_points = len(study.points())
    runs: dict = {1: [], 2: []}
    frames = {}
    for _ in range(repeat):
        for n in (1, 2):
            frames[n], r = _one_sweep(study, n, n_points)
            runs[n].append(r)
    same = frames[1].drop(columns="compute_s").equals(frames[2].drop(columns="compute_s"))
    return _run_rows(runs, draws, n_points) + _speedup_rows(runs, same)


def _run_rows(runs: dict, draws: int, n_points: int) -> list[str]:
    lines = []
    for n in (1, 2):
        for i, r in enumerate(runs[n]):
            lines.append(f"| `failures-100k`, its first {draws} draws ({n_points} points), {n} "
                         f"worker{'s' if n > 1 else ''}, run {i + 1} (load {r['load']:.1f} at its start) | "
                         f"{r['wall']:.1f} s wall with the cluster's start-up (first batch done at "
                         f"{r['first']:.1f} s), {r['cpu']:.1f} s CPU of its processes ({r['own']:.1f} s of it in the "
                         f"scheduler and client's process); steady {r['rate']:.2f} points/s"
                         f"; workers busy {r['busy']:.0%} | |")
    return lines


def _speedup_rows(runs: dict, same: bool) -> list[str]:
    full_points = 2 * (1 + 1000)
    walls = [a["wall"] / b["wall"] for a, b in zip(runs[1], runs[2])]
    rates = [b["rate"] / a["rate"] for a, b in zip(runs[1], runs[2])]
    rate2 = float(np.median([r["rate"] for r in runs[2]]))
    return [f"| speedup, 2 workers against 1, end to end (start-up included), run by run | "
            f"{', '.join(f'{x:.2f}x' for x in walls)} | >= 1.7x |",
            f"| speedup, 2 workers against 1, steady state (points/s), run by run | "
            f"{', '.join(f'{x:.2f}x' for x in rates)} | >= 1.7x |",
            f"| the full study ({full_points:,} points) on 2 workers, from the median steady rate ({rate2:.2f} "
            f"points/s at this load) | {full_points / rate2 / 60:.0f} min | < 20 min |",
            f"| figures of the 1-worker and 2-worker runs equal bit for bit | {'yes' if same else 'NO'} | yes |"]


def _cheap_study(points: int):
    from topo.sweep import study_from_dict

    return study_from_dict({"spec": "dgx-h100-superpod", "seeds": points,
                            "axes": {"collective": "alltoall", "gpus": 64, "placement": "one_per_server",
                                     "size": "64MiB", "fabric.tiers[0].oversubscription": 2,
                                     "fail": "random:leaf-spine:0.2:{seed}"}})


def _dask_cpu_s(cheap, pts, path: str) -> tuple[float, float]:
    """Wall and CPU seconds (driver and worker) of ``sweep`` on a 1-worker LocalCluster started and warmed
    beforehand."""
    from topo.sweep import sweep
    from topo.sweep.point import run_point

    cluster, client = _cluster(1)
    try:
        client.submit(run_point, pts[0]["inputs"], cheap.compute, cheap.specs).result()  # warm worker
        w0 = _workers_cpu_s(client)
        _, dask_w, dask_c = timed(lambda: sweep(cheap, path, client=client))
        return dask_w, dask_c + _workers_cpu_s(client) - w0  # the driver's CPU and the worker's
    finally:
        client.close()
        cluster.close()


def _overhead_rows(points: int) -> list[str]:
    """The per-point overhead of the sweep machinery against the same estimates in a plain loop."""
    import topo
    from topo.sweep import sweep
    from topo.sweep.point import run_point

    cheap = _cheap_study(points)
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
        dask_w, dask_c = _dask_cpu_s(cheap, pts, os.path.join(tmp, "dask.parquet"))
    return [f"| plain loop: `topo.estimate` on a failed superpod (64-GPU all-to-all), {n} points | "
            f"{loop_c / n * 1e3:.1f} ms CPU per point ({loop_w / n * 1e3:.1f} ms wall) | |",
            f"| `sweep(..., scheduler='serial')`, the same points, written to Parquet | {ser_c / n * 1e3:.1f} ms CPU "
            f"per point: overhead {(ser_c - loop_c) / n * 1e3:.1f} ms | < 20 ms |",
            f"| `sweep` on a 1-worker LocalCluster started beforehand (driver + worker CPU) | {dask_c / n * 1e3:.1f} "
            f"ms CPU per point: overhead {(dask_c - loop_c) / n * 1e3:.1f} ms ({dask_w / n * 1e3:.1f} ms wall) | "
            "< 20 ms |"]


def _head(load0: float, load1: float) -> str:
    return (f"Load average {load0:.1f} at the start and {load1:.1f} at the end on {os.cpu_count()} cores: other "
            "jobs that share them inflate wall times, and a 2-worker speedup needs both cores idle; CPU times "
            "(user + system, of every process involved) are the figures that the load inflates least. Workers "
            "run without Dask's default `MALLOC_TRIM_THRESHOLD_` (`topo.sweep.run.WORKER_ENV`: with it, every "
            "large array was a fresh mmap and a 100k point took ~1.8x the CPU).")


def main() -> None:
    args = _args()
    load0 = os.getloadavg()[0]
    lines = ["| what | measured | target |", "|---|---|---|"]
    lines += _failure_draw_rows()
    lines += _scaling_rows(args.draws, args.repeat)
    lines += _overhead_rows(args.points)
    body = _head(load0, os.getloadavg()[0]) + "\n\n" + "\n".join(lines)
    print(body)
    if args.write:
        update_section("Sweeps on Dask (topo sweep)", body,
                       f"python benchmarks/bench_sweep.py --draws {args.draws} --repeat {args.repeat}")


if __name__ == "__main__":
    main()
