"""Residual audit of ``topo train``: which per-run features of topo's own step breakdown go with its signed error.

Every run of ``benchmarks/training_accuracy.py`` (loaded, fitted and scored by its own functions: ``_setups``,
``_engines``, ``_predictor``, ``_fit_and_score``) is predicted once more with the fitted values, and its step is
broken down as ``topo train --json --ops`` breaks it down (:func:`topo.training.step.estimate_step`'s
``breakdown_s`` and ``comm``, :func:`topo.training.op_table.block_op_table`'s operators). From that breakdown each run
gets numeric features (:data:`NUMERIC`): the shares of the operators' GPU time in GEMMs, expert GEMMs, fused
attention and memory-bound kernels (each block kind weighted by its count of layers in the model, the end units
once: the model's composition, not the busiest pipeline stage's), the host's launch time over the GPU time, the
kernels per second of GPU time, the step's exposed TP, CP, PP, DP and EP communication, bubble and optimizer
shares, the rows per local expert (:func:`topo.training.operators.expert_rows`), the hidden size, the EP degree and
the NVLink domains (nodes on DGX, racks on NVL72) one EP group spans; and categorical ones (:data:`CATEGORICAL`):
GPU generation, FP8 recipe, release, dispatcher.

The error is the out-of-family one for a fitted run (refitted without its model family: the headline) and the
in-sample one for a hold-out run (no fit reads it); runs measured under a filed software regression are left out.
Printed, each with the fitted runs and the hold-out apart (the hold-out may show a mechanism, but must not steer):

- per group, Spearman's rank correlation of the signed error with each numeric feature (:func:`spearman_rows`);
- over all MoE runs, how well each feature separates the runs topo gets too fast (signed error below
  ``-too_fast``) from those it gets right (``|error| <= right``): the area under the ROC curve (Mann-Whitney U over
  the product of the two counts; 0.5 separates nothing, 1 or 0 perfectly), fitted and hold-out apart
  (:func:`separation_rows`);
- per categorical value, the runs and their median signed error.

    python benchmarks/residual_audit.py                    # about as long as training_accuracy.py
    python benchmarks/residual_audit.py --too-fast 0.08 --right 0.04 --csv /tmp/audit.csv
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections import Counter

from scipy.stats import mannwhitneyu, spearmanr

import training_accuracy as ta  # also puts the repository on sys.path
from _results import arguments

from topo.training.gpus import gpu_compute  # noqa: E402
from topo.training.mapping import default_placement  # noqa: E402
from topo.training.op_table import block_op_table  # noqa: E402
from topo.training.operators import END_UNITS, expert_rows  # noqa: E402
from topo.training.step import estimate_step  # noqa: E402

OP_SHARES = ("gemm_share", "expert_gemm_share", "attention_share", "memory_share", "permute_share",
             "moe_memory_share")
STEP_SHARES = ("compute", "bubble", "optimizer", "tp", "cp", "pp", "dp", "ep")
NUMERIC = (*OP_SHARES, "memory_s_per_kernel", "host_over_gpu", "kernels_per_gpu_s",
           *(f"{k}_share" for k in STEP_SHARES),
           "rows_per_local_expert", "hidden", "ep", "ep_domains")
CATEGORICAL = ("gen", "fp8_recipe", "release", "dispatcher")
MEMORY_KINDS = ("memory", "kernel")
"""Operator kinds that are bandwidth-bound (:class:`topo.training.operators.Op`: ``memory``, and ``kernel``, the
longer of its dots and its bytes, which at these shapes is its bytes)."""
EXPERT_MODULE = "moe"
MOE_MODULES = ("moe", "moe_act")
"""An MoE block's modules beside its attention and norms (the router, dispatch, experts and their activation)."""


def block_counts(model) -> Counter:
    """How many times each block kind of ``model`` runs in one forward pass: its layers' blocks, the embedding and
    the output head once, and one ``mtp_head`` per multi-token-prediction module."""
    counts = Counter(k for layer in model.blocks for k in layer)
    counts.update(u for u in END_UNITS if u != "mtp_head")
    if model.mtp_layers:
        counts["mtp_head"] = model.mtp_layers
    return counts


def op_features(ops: dict, counts: dict) -> dict:
    """The operator features of one run from its op table (``block kind -> rows`` as
    :func:`topo.training.op_table.block_op_table` returns) and its :func:`block_counts`.

    Returns
    -------
    dict
        Shares of the GPU time (forward plus backward, launch gaps included): ``gemm_share``,
        ``expert_gemm_share`` (GEMMs of the ``moe`` module but the router's), ``attention_share``, ``memory_share``
        (``memory`` and ``kernel`` operators), and of it ``permute_share`` (operators named ``*permute*``) and
        ``moe_memory_share`` (the other memory-bound operators of the :data:`MOE_MODULES`: router top-k, activation,
        padding, dispatch preprocessing, expert bias); ``memory_s_per_kernel``: the memory-bound operators' GPU
        seconds per kernel they launch; ``host_over_gpu``: the host's launch seconds of the operators no CUDA graph
        captures over the GPU time; ``kernels_per_gpu_s``: kernels launched per second of it.
    """
    gpu = dict.fromkeys(("gemm", "expert_gemm", "attention", "memory", "permute", "moe_memory"), 0.0)
    total = host = kernels = memory_kernels = 0.0
    for kind, rows in ops.items():
        n = counts.get(kind, 0)
        for r in rows:
            t, k = n * (r["forward_s"] + r["backward_s"]), n * (r["kernels_forward"] + r["kernels_backward"])
            total, kernels = total + t, kernels + k
            if not r["captured"]:
                host += n * (r["host_forward_s"] + r["host_backward_s"])
            for part in _parts(r):
                gpu[part] += t
            memory_kernels += k if r["kind"] in MEMORY_KINDS else 0.0
    out = {f"{k}_share": v / total for k, v in gpu.items()}
    return {**out, "memory_s_per_kernel": gpu["memory"] / memory_kernels if memory_kernels else math.nan,
            "host_over_gpu": host / total, "kernels_per_gpu_s": kernels / total}


def _parts(r: dict) -> tuple[str, ...]:
    """The parts of :func:`op_features` an op-table row's time counts in."""
    if r["kind"] == "gemm":
        return ("gemm", "expert_gemm") if r["module"] == EXPERT_MODULE and r["op"] != "router" else ("gemm",)
    if r["kind"] == "attention":
        return ("attention",)
    if r["kind"] not in MEMORY_KINDS:
        return ()
    if "permute" in r["op"]:
        return "memory", "permute"
    return ("memory", "moe_memory") if r["module"] in MOE_MODULES else ("memory",)


def step_features(result) -> dict:
    """A step's features from its :class:`topo.training.result.StepResult`: each breakdown component's share of the
    step (``tp_share``: exposed TP communication, ...) and the NVLink domains one EP group spans (0 without EP)."""
    out = {f"{k}_share": result.breakdown_s.get(k, 0.0) / result.step_time_s for k in STEP_SHARES}
    out["ep_domains"] = max((c.domains_per_group for c in result.comm if c.dim == "ep"), default=0)
    return out


def model_features(model, lay) -> dict:
    """The model's and layout's own features: hidden size, EP degree and rows per local expert (NaN without
    experts)."""
    rows = expert_rows(model, lay) if model.moe is not None else math.nan
    return {"hidden": model.hidden, "ep": lay.ep, "rows_per_local_expert": rows}


def run_features(s, fabric, engine, values) -> dict:
    """Every feature of run ``s`` (a setup of ``training_accuracy._setups``) predicted with ``values``."""
    over = ta.kernel_overrides(s, values)
    result = estimate_step(fabric, s["model"], s["lay"], engine=engine, check=False, contention=s["contention"],
                           kernel_overrides=over)
    spec = fabric.spec
    placed, _ = default_placement(s["lay"], spec.gpus_per_domain, fabric.layout.num_gpus)
    gpu = gpu_compute(spec.gpu, None, over, spec.host_cpu[0])
    row = s.get("row") or {}
    cat = {"gen": s["gen"], "fp8_recipe": ta.fp8_recipe_label(row) if s["lay"].precision == "fp8" else "-",
           "release": ta._release(row) if row else "paper", "dispatcher": row.get("moe_dispatcher") or "-"}
    return {**op_features(block_op_table(s["model"], placed, gpu), block_counts(s["model"])),
            **step_features(result), **model_features(s["model"], placed), **cat}


def signed_error(s) -> float | None:
    """The run's signed error: out of family for a scored run (None where it has none), in-sample for a hold-out
    run."""
    if s["holdout"]:
        return s["pred"] / s["step_s"] - 1
    return s["lofo"] / s["step_s"] - 1 if s.get("lofo") else None


def _finite(pairs):
    return [(x, e) for x, e in pairs if x is not None and not (isinstance(x, float) and math.isnan(x))]


def spearman(runs, feature: str) -> tuple[float, int]:
    """Spearman's rho of ``feature`` against the signed error over ``runs`` (dicts with ``err`` and the feature) and
    the count used; NaN with fewer than five runs or a constant feature."""
    pairs = _finite((r[feature], r["err"]) for r in runs)
    if len(pairs) < 5 or len({x for x, _ in pairs}) < 2:
        return math.nan, len(pairs)
    return float(spearmanr([x for x, _ in pairs], [e for _, e in pairs]).statistic), len(pairs)


def auc(runs, feature: str, too_fast: float, right: float) -> tuple[float, int, int]:
    """The area under the ROC curve of ``feature`` telling the runs with ``err < -too_fast`` from those with
    ``|err| <= right`` (above 0.5: the too-fast runs have the larger values), and the two counts."""
    fast = [r[feature] for r in runs if r["err"] < -too_fast]
    ok = [r[feature] for r in runs if abs(r["err"]) <= right]
    fast, ok = [x for x in fast if not math.isnan(x)], [x for x in ok if not math.isnan(x)]
    if not fast or not ok:
        return math.nan, len(fast), len(ok)
    return float(mannwhitneyu(fast, ok).statistic) / (len(fast) * len(ok)), len(fast), len(ok)


def spearman_rows(runs) -> str:
    """Markdown: per group, Spearman's rho of each numeric feature with the signed error, fitted | hold-out."""
    lines = ["| group | feature | rho fitted (n) | rho hold-out (n) |", "|---|---|---|---|"]
    for g in ta.GROUPS:
        fit = [r for r in runs if r["group"] == g and not r["holdout"]]
        held = [r for r in runs if r["group"] == g and r["holdout"]]
        for f in NUMERIC:
            (a, na), (b, nb) = spearman(fit, f), spearman(held, f)
            if not (math.isnan(a) and math.isnan(b)):
                lines.append(f"| {g} | {f} | {a:+.2f} ({na}) | {b:+.2f} ({nb}) |")
    return "\n".join(lines)


def separation_rows(runs, too_fast: float, right: float, top: int = 10) -> str:
    """Markdown: over the MoE runs, the ``top`` features by the fitted runs' ``|AUC - 0.5|`` (:func:`auc`), with
    the hold-out's AUC beside it."""
    moe = [r for r in runs if r["group"].startswith("moe")]
    fit, held = [r for r in moe if not r["holdout"]], [r for r in moe if r["holdout"]]
    rows = [(f, auc(fit, f, too_fast, right), auc(held, f, too_fast, right)) for f in NUMERIC]
    rows.sort(key=lambda x: -abs(x[1][0] - 0.5) if not math.isnan(x[1][0]) else 0.0)
    lines = ["| feature | AUC fitted (too fast / right) | AUC hold-out (too fast / right) | median too fast | "
             "median right |", "|---|---|---|---|---|"]
    for f, (a, nf, no), (b, hf, ho) in rows[:top]:
        med = [statistics.median([r[f] for r in moe if cond(r["err"]) and not math.isnan(r[f])] or [math.nan])
               for cond in (lambda e: e < -too_fast, lambda e: abs(e) <= right)]
        lines.append(f"| {f} | {a:.2f} ({nf} / {no}) | {b:.2f} ({hf} / {ho}) | {med[0]:.3g} | {med[1]:.3g} |")
    return "\n".join(lines)


def categorical_rows(runs, groups=("moe_fine", "moe_coarse", "dense_fp8")) -> str:
    """Markdown: per group in ``groups`` and categorical feature value, the runs and their median signed error,
    fitted | hold-out."""
    lines = ["| group | feature | value | fitted runs | median | hold-out runs | median |",
             "|---|---|---|---|---|---|---|"]
    for g in groups:
        for f in CATEGORICAL:
            for v in sorted({r[f] for r in runs if r["group"] == g}):
                fit = [r["err"] for r in runs if r["group"] == g and r[f] == v and not r["holdout"]]
                held = [r["err"] for r in runs if r["group"] == g and r[f] == v and r["holdout"]]
                lines.append(f"| {g} | {f} | {v} | {len(fit)} | {ta._median(fit):+.1%} | {len(held)} | "
                             f"{ta._median(held):+.1%} |")
    return "\n".join(lines)


def audit_runs(setups, fabrics, engines, values) -> list[dict]:
    """One dict per run with a signed error (but those no fit reads, ``training_accuracy.NOT_FITTED``: their error
    is a filed regression's or their cluster's): run, group, family, holdout, err and every
    feature."""
    out = []
    for s in setups:
        err = signed_error(s)
        if err is None or s["run"] in ta.NOT_FITTED:
            continue
        feats = run_features(s, fabrics[s["spec"]], ta.engine_of(engines, s), values)
        out.append({"run": s["run"], "group": s["group"], "family": s["family"], "holdout": s["holdout"],
                    "err": err, **feats})
    return out


def main() -> None:
    ap = arguments(__doc__, write=False)
    ap.add_argument("--too-fast", type=float, default=0.08, help="a run is too fast below this signed error "
                    "(fraction, default 0.08)")
    ap.add_argument("--right", type=float, default=0.04, help="a run is right within this |error| (default 0.04)")
    ap.add_argument("--csv", help="also write every run's error and features to this CSV file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    setups = ta._setups()
    fabrics, engines = ta._engines(setups)
    values, _ = ta._fit_and_score(setups, ta._predictor(fabrics, engines))
    runs = audit_runs(setups, fabrics, engines, values)
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(runs[0]))
            w.writeheader()
            w.writerows(runs)
    print("Spearman's rho of the signed error (out of family; hold-out in-sample) with each feature:\n")
    print(spearman_rows(runs))
    print(f"\nMoE runs: too fast (< -{args.too_fast:.0%}) against right (|e| <= {args.right:.0%}), by AUC:\n")
    print(separation_rows(runs, args.too_fast, args.right))
    print("\nMedian signed error by categorical feature:\n")
    print(categorical_rows(runs))
    print(f"\nWall time {time.perf_counter() - t0:.0f} s.")


if __name__ == "__main__":
    main()
