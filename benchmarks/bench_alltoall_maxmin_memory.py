"""Peak memory of the 100k hashed all-to-all under max-min (issue 30, item 10).

``topo estimate --groups 1792 -c alltoall --ecmp hash --sharing maxmin`` on the default h100-100k: 1,792
communicators of 56 (one GPU per pod), 5.5 million flows kept as 5.5 million max-min classes of ~6 network hops
each (33 million incidences). Each run is a fresh process; its peak resident set (``ru_maxrss`` of the child) and
CPU time are printed.

    python benchmarks/bench_alltoall_maxmin_memory.py            # one size, 1 GiB
    python benchmarks/bench_alltoall_maxmin_memory.py --sweep    # the issue's command: 8 B to 16 GiB
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(sweep: bool) -> dict:
    argv = [sys.executable, "-m", "topo", "estimate", "--groups", "1792", "-c", "alltoall", "--ecmp", "hash",
            "--sharing", "maxmin"] + ([] if sweep else ["--size", "1GiB"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = [line for line in proc.stdout.splitlines() if line and not line.startswith("#")][-1].split()
    return {"peak_MB": after.ru_maxrss / 1e3, "cpu_s": (after.ru_utime + after.ru_stime)
            - (before.ru_utime + before.ru_stime), "wall_s": wall, "last_row": " ".join(last[:8])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true", help="every size from 8 B to 16 GiB, as the issue ran it")
    r = run(ap.parse_args().sweep)
    print(f"peak {r['peak_MB']:,.0f} MB, CPU {r['cpu_s']:.1f} s, wall {r['wall_s']:.1f} s; last row: {r['last_row']}")


if __name__ == "__main__":
    main()
