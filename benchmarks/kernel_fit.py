"""Fit the GEMM tile model's two free values on a published kernel table (never on step times).

``data/reference/kernels_gemm.csv``: DeepGEMM's dense FP8 GEMMs on H800 (deepseek-ai/DeepGEMM
README.md@989c9e36). Fitted by a grid search of the mean absolute log error over the dense rows: the tile's fixed
prologue/epilogue ``tile_overhead_k`` (steps of K at the FP8 rate) and the HBM share of a GEMM's operand stream
``gemm_memory_efficiency``, with DeepGEMM's own large-GEMM efficiency free (it is DeepGEMM's, not cuBLAS's: the
training model takes cuBLAS's from the MAMF table), on DeepGEMM's own tiles (``kernels.toml``
``[gemm.kernel_tiles.deepgemm_sm90]``, its heuristic's BLOCK_M x BLOCK_N candidates; ``--tiles hopper`` fits on the
training model's Hopper FP8 tiles instead), each tile no faster than shared memory feeds it (``[gemm.feed]``, not
fitted). The grouped rows are scored, not fitted.

    python benchmarks/kernel_fit.py            # the fit and each row's error
    python benchmarks/kernel_fit.py --tiles hopper  # the same on the training model's Hopper FP8 tiles
    python benchmarks/kernel_fit.py --write    # also writes the two values into topo/data/compute/kernels.toml
    python benchmarks/kernel_fit.py --b200     # a check on Blackwell: the prologue OpenXLA's B200 table implies

``--b200`` fits, per precision, the tile prologue on ``data/reference/kernels_gemm_b200_xla.csv`` (OpenXLA's
measured B200 GEMMs, XLA's kernels) with XLA's efficiency and a per-kernel floor (XLA's fixed time per kernel) free;
it writes nothing: the prologue in use stays the one fitted above (docs/calibration-findings.md, 'A Blackwell GEMM
model').
"""

from __future__ import annotations

import csv
import itertools
import math
import re
import sys
from dataclasses import replace

from _results import ROOT, arguments

sys.path.insert(0, str(ROOT))


def rows():
    with open(ROOT / "data" / "reference" / "kernels_gemm.csv") as f:
        return [dict(r, m=float(r["m"]), n=float(r["n"]), k=float(r["k"]), groups=float(r["groups"]),
                     tflops=float(r["tflops"])) for r in csv.DictReader(f)]


def errors(km, table, e):
    from topo.training.kernels import gemm_s
    out = []
    for r in table:
        t = gemm_s(km, r["m"], r["n"], r["k"], "fp8", r["groups"], efficiency=e)
        out.append(math.log(2 * r["m"] * r["n"] * r["k"] * r["groups"] / t / 1e12 / r["tflops"]))
    return out


def b200_check() -> None:
    """Fit (prologue, efficiency, per-kernel floor) on OpenXLA's B200 table, per precision; print the fit."""
    from topo.training.gpus import gpu_compute
    from topo.training.kernels import gemm_s
    base = gpu_compute("B200").kernels
    with open(ROOT / "data" / "reference" / "kernels_gemm_b200_xla.csv") as f:
        table = [{k: float(v) for k, v in r.items() if k not in ("source", "gpu")} for r in csv.DictReader(f)]
    for precision in ("bf16", "fp8"):
        def errs(k0, e, floor_s):
            km = replace(base, tile_overhead_k=float(k0))
            return [math.log(2 * r["m"] * r["n"] * r["k"] / (gemm_s(km, r["m"], r["n"], r["k"], precision,
                                                                     efficiency=e) + floor_s)
                             / 1e12 / r[f"{precision}_tflops"]) for r in table]
        grid = itertools.product(range(0, 1537, 64), [x / 100 for x in range(60, 101, 2)],
                                 [x * 1e-6 for x in range(7)])
        loss, k0, e, floor_s = min((sum(abs(x) for x in errs(*g)) / len(table), *g) for g in grid)
        print(f"B200 {precision}: tile_overhead_k {k0} (FP8 steps), XLA's efficiency {e:.2f}, per-kernel floor "
              f"{floor_s * 1e6:.0f} us: mean |log error| {loss:.1%} over {len(table)} shapes")


def main() -> None:
    ap = arguments(__doc__, write=False)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--b200", action="store_true", help="fit the prologue on OpenXLA's B200 table (writes nothing)")
    ap.add_argument("--tiles", choices=("deepgemm_sm90", "hopper"), default="deepgemm_sm90",
                    help="the tile set the fit runs on: DeepGEMM's own (default) or the training model's "
                    "Hopper FP8 set")
    args = ap.parse_args()
    if args.b200:
        b200_check()
        return
    from topo.training.gpus import gpu_compute
    from topo.training.kernels import tile_set
    base = gpu_compute("H800").kernels
    tiles = tile_set("hopper", "fp8", "" if args.tiles == "hopper" else args.tiles)
    base = replace(base, tile_shapes={**base.tile_shapes, "fp8": tiles})
    table = rows()
    dense = [r for r in table if r["kernel"] == "dense"]
    best = None
    for k0, mem, e in itertools.product(range(0, 1025, 64), (0.5, 0.6, 0.7, 0.8, 0.9, 0.95),
                                        (0.7, 0.74, 0.78, 0.8, 0.82, 0.84, 0.86, 0.9)):
        km = replace(base, tile_overhead_k=float(k0), gemm_memory_efficiency=mem)
        loss = sum(abs(x) for x in errors(km, dense, e)) / len(dense)
        if best is None or loss < best[0]:
            best = (loss, k0, mem, e)
    loss, k0, mem, e = best
    km = replace(base, tile_overhead_k=float(k0), gemm_memory_efficiency=mem)
    print(f"tiles {args.tiles}: tile_overhead_k {k0}, gemm_memory_efficiency {mem}, DeepGEMM's efficiency {e}: "
          f"mean |log error| "
          f"{loss:.1%} over {len(dense)} dense rows")
    for r, x in zip(table, errors(km, table, e)):
        print(f"{r['kernel']:>18} {int(r['groups']):>2} x {int(r['m']):>5} x {int(r['n']):>5} x {int(r['k']):>5}: "
              f"published {r['tflops']:>6.0f}, model {r['tflops'] * math.exp(x):>6.0f} TFLOP/s ({x:+.1%})")
    if args.write and args.tiles != "deepgemm_sm90":
        sys.exit("error: kernel_fit.py: --write: writes the fit on DeepGEMM's own tiles only (--tiles deepgemm_sm90)")
    if args.write:
        path = ROOT / "topo" / "data" / "compute" / "kernels.toml"
        text = path.read_text()
        text = re.sub(r"\ntile_overhead_k = [0-9.]+", f"\ntile_overhead_k = {float(k0)}", text)
        text = re.sub(r"\ngemm_memory_efficiency = [0-9.]+", f"\ngemm_memory_efficiency = {mem}", text)
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
