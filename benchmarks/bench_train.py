"""Speed of ``topo train`` (issue 20 and 23 targets, measured here, not in tests):

- one evaluation of a 16,384-GPU layout (Llama 3 405B, tp 8, pp 16, dp 128 on meta-llama3-24k) under 1 s in
  process (fabric built once; with the step's traffic mix);
- a search over >= 2,000 layouts on 16,384 GPUs under 30 s (in process, fabric built once; two rank orders);
- the 100k search of issue 23 (DeepSeek-V3 on 100,352 GPUs, three rank orders, top 3), end to end from the shell,
  with its peak memory (the target: well under a minute).

    python benchmarks/bench_train.py            # prints
    python benchmarks/bench_train.py --write    # also updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _results import PY, ROOT, arguments, update_section

sys.path.insert(0, str(ROOT))

SEARCH_100K = ["-m", "topo", "train", "h100-100k", "--model", "deepseek-v3-671b", "--gpus", "100352",
               "--global-batch", "100352", "--search", "--top", "3", "--rank-orders",
               "tp-cp-ep-dp-pp,tp-cp-ep-pp-dp,tp-dp-cp-ep-pp", "--json"]


def main() -> None:
    ap = arguments(__doc__, write=False)
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed for the 100k search")
    args = ap.parse_args()

    import topo
    from topo.training.comm import CommEngine
    from topo.training.parallel import make_layout
    from topo.training.model import load_model
    from topo.training.search import search_layouts
    from topo.training.step import estimate_step

    load = os.getloadavg()[0]
    lines = [f"Load average when measured: {load:.1f} on {os.cpu_count()} cores (other engineers' jobs).", "",
             "| what | measured | target |", "|---|---|---|"]
    fabric = topo.build_fabric(topo.load_spec("meta-llama3-24k"))
    m = load_model("llama3-405b")
    lay = make_layout(tp=8, pp=16, dp=128, vpp=4, global_batch=2048, dp_sharding="fsdp_grad_op")
    best = None
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        estimate_step(fabric, m, lay, engine=CommEngine(fabric))
        run = (time.perf_counter() - t0, time.process_time() - c0)
        best = run if best is None or run[0] < best[0] else best
    lines.append(f"| one evaluation, 16,384 GPUs (llama3-405b tp8 pp16x4 dp128, fresh engine, with the traffic "
                 f"mix), best of 3 | {best[0]:.2f} s wall, {best[1]:.2f} s CPU | < 1 s |")
    t0, c0 = time.perf_counter(), time.process_time()
    res = search_layouts(fabric, m, 16384, 2048, rank_orders=("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"))
    t_s, c_s = time.perf_counter() - t0, time.process_time() - c0
    lines.append(f"| `search_layouts` llama3-405b on 16,384 GPUs, two rank orders: {res.considered:,} considered, "
                 f"{res.rejected_memory:,} do not fit, {res.evaluated} evaluated, {res.pruned:,} pruned, "
                 f"{res.engine_calls} engine calls | {t_s:.1f} s wall, {c_s:.1f} s CPU | < 30 s for >= 2,000 |")
    t0 = time.perf_counter()
    proc = subprocess.Popen([PY, *SEARCH_100K], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        _, status, usage = os.wait4(proc.pid, 0) if args.timeout <= 0 else _wait(proc, args.timeout)
        wall = time.perf_counter() - t0
        what = f"{wall:.0f} s wall, {usage.ru_maxrss / 1024:.0f} MiB peak" if status == 0 else \
            f"failed or stopped after {wall:.0f} s"
    except TimeoutError:
        what = f"stopped at the {args.timeout:.0f} s limit (not finished)"
    lines.append(f"| issue 23's 100k search (deepseek-v3-671b, 100,352 GPUs, 3 rank orders, top 3), end to end "
                 f"| {what} | well under 60 s |")
    body = "\n".join(lines)
    print(body)
    if args.write:
        update_section("Training-step speed (topo train)", body, "python benchmarks/bench_train.py")


def _wait(proc, timeout):
    """wait4 with a deadline: kill the child (only it) and raise TimeoutError when it runs past ``timeout``."""
    deadline = time.perf_counter() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return pid, os.waitstatus_to_exitcode(status), usage
        if time.perf_counter() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            raise TimeoutError
        time.sleep(0.5)


if __name__ == "__main__":
    main()
