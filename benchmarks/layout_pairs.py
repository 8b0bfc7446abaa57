"""Layout pairs: how ``topo train`` prices one parallel layout against another for the same model, release, GPU
and precision, against the published runs (issue 29).

Every two runs of ``data/reference/training_runs*.csv`` with the same model, release (the run id's prefix: a
Megatron-Bridge / NeMo release, an MLPerf round, a source), system and precision but a different layout shape
(TP, CP, PP, VPP, EP, micro-batch, FSDP; runs that differ only by DP and global batch are scale pairs, not layout
pairs) give a measured step ratio B / A and topo's; their quotient is the pair's error,
``(1 + e_B) / (1 + e_A) - 1`` of the two rows' errors ``e``: what a fitted GEMM fraction cannot move, since it
scales both rows alike. Pairs are scored in-sample and out of family (both rows refitted without their model
family, :mod:`training_accuracy`); a pair with a hold-out row is reported apart (no fit reads it).

``--cross-recipe`` pairs FP8 runs whose scaling recipes differ too (current scaling against MXFP8: the Llama 3
70B and 405B Megatron-Bridge presets change layout and recipe together); topo's MXFP8 price at one layout is
checked apart (docs/calibration-findings.md section 145, lead 2).

    python benchmarks/layout_pairs.py                 # same-recipe layout pairs
    python benchmarks/layout_pairs.py --cross-recipe  # FP8 pairs whose recipe differs as well
"""

from __future__ import annotations

import itertools
import statistics
import sys

from _results import ROOT, arguments

sys.path.insert(0, str(ROOT))

from training_accuracy import pair_ratio_error  # noqa: E402  (one formula for both pair tables)


def release(run_id: str) -> str:
    """The run's release or source: its id's prefix (``mb260401``, ``nemo2504dgxc``, ``mlperf51``, ``mcore``)."""
    return run_id.split("_")[0]


def shape(lay) -> tuple:
    """A layout's shape: what changes the work of one GPU's step, not its scale (DP and the global batch)."""
    return (lay.tp, lay.cp, lay.pp, lay.vpp, lay.ep, lay.micro_batch, lay.dp_sharding)


def shape_text(sh: tuple) -> str:
    tp, cp, pp, vpp, ep, mb, sharding = sh
    return (f"tp{tp} cp{cp} pp{pp}" + (f"v{vpp}" if vpp > 1 else "") + (f" ep{ep}" if ep > 1 else "")
            + f" mb{mb}" + (" fsdp" if sharding == "zero3" else ""))


def layout_pairs(rows: list[dict], cross_recipe: bool = False) -> list[dict]:
    """Every pair of ``rows`` in one group (model, release, system, precision and, unless ``cross_recipe``, FP8
    recipe) whose shapes differ; ``cross_recipe`` keeps only the pairs whose recipes differ.

    Parameters
    ----------
    rows : list of dict
        One per run: ``run``, ``model``, ``system``, ``precision``, ``recipe``, ``shape``, ``measured_s``,
        ``topo_s``, ``lofo_s`` (None where not scored out of family), ``holdout``.
    cross_recipe : bool

    Returns
    -------
    list of dict
        ``a``, ``b`` (the rows, in run-id order), ``measured`` and ``topo`` (B / A), ``error`` (topo / measured
        - 1), ``error_lofo`` (None without both rows' out-of-family predictions), ``holdout`` (either row).
    """
    groups: dict[tuple, list] = {}
    for r in rows:
        key = (r["model"], release(r["run"]), r["system"], r["precision"]) + (() if cross_recipe else (r["recipe"],))
        groups.setdefault(key, []).append(r)
    out = []
    for members in groups.values():
        for a, b in itertools.combinations(sorted(members, key=lambda r: r["run"]), 2):
            if a["shape"] == b["shape"] or (cross_recipe and a["recipe"] == b["recipe"]):
                continue
            ms = (a["measured_s"], b["measured_s"])
            out.append(dict(a=a, b=b, measured=ms[1] / ms[0], topo=b["topo_s"] / a["topo_s"],
                            error=pair_ratio_error(*ms, a["topo_s"], b["topo_s"]),
                            error_lofo=(pair_ratio_error(*ms, a["lofo_s"], b["lofo_s"])
                                        if a["lofo_s"] and b["lofo_s"] else None),
                            holdout=a["holdout"] or b["holdout"]))
    return out


def summary(pairs: list[dict]) -> str:
    """Median |pair error| of the fitted pairs in-sample and out of family (and signed), and of the hold-out's."""
    def med(xs):
        return f"{statistics.median(xs):.1%}" if xs else "-"
    fit = [p for p in pairs if not p["holdout"]]
    held = [p for p in pairs if p["holdout"]]
    return (f"{len(fit)} fitted pairs: median |pair error| in-sample {med([abs(p['error']) for p in fit])}, out of "
            f"family {med([abs(p['error_lofo']) for p in fit if p['error_lofo'] is not None])}, signed in-sample "
            f"{statistics.median([p['error'] for p in fit]):+.1%}" if fit else "no fitted pairs") + \
        f"; {len(held)} hold-out pairs: median |pair error| {med([abs(p['error']) for p in held])}"


def table(pairs: list[dict]) -> str:
    lines = ["| model | release | system | run A | layout A | run B | layout B | measured B/A | topo B/A | pair error"
             " | out of family | hold-out |", "|---|---|---|---|---|---|---|---:|---:|---:|---:|---|"]
    for p in pairs:
        a, b = p["a"], p["b"]
        lofo = f"{p['error_lofo']:+.1%}" if p["error_lofo"] is not None else "-"
        lines.append(f"| {a['model']} | {release(a['run'])} | {a['system']} | {a['run']} | {shape_text(a['shape'])}"
                     f" {a['recipe'] or ''} | {b['run']} | {shape_text(b['shape'])} {b['recipe'] or ''} | "
                     f"{p['measured']:.3f} | {p['topo']:.3f} | {p['error']:+.1%} | {lofo} | "
                     f"{'yes' if p['holdout'] else ''} |")
    return "\n".join(lines)


def _rows() -> list[dict]:
    """Every run predicted in-sample and out of family by :mod:`training_accuracy`'s fit, as :func:`layout_pairs`
    reads it."""
    import training_accuracy as ta

    csv_rows = {r["run_id"]: r for r, _ in ta._published_rows()}
    setups = ta._setups()
    predict = ta._predictor(*ta._engines(setups))
    ta._fit_and_score(setups, predict)
    out = []
    for s in setups:
        row = csv_rows.get(s["run"])
        out.append(dict(run=s["run"], model=s["model"].name, system=row["system"] if row else s["gpu"],
                        precision=s["lay"].precision, recipe=(ta.fp8_recipe(row) if row else None) or "",
                        shape=shape(s["lay"]), measured_s=s["step_s"], topo_s=s["pred"], lofo_s=s.get("lofo"),
                        holdout=s["holdout"]))
    return out


def main() -> None:
    ap = arguments(__doc__, write=False)
    ap.add_argument("--cross-recipe", action="store_true", help="pair FP8 runs whose scaling recipes differ")
    args = ap.parse_args()
    pairs = layout_pairs(_rows(), cross_recipe=args.cross_recipe)
    print(table(pairs) + "\n\n" + summary(pairs))


if __name__ == "__main__":
    main()
