"""Uncertainty per design: over the draws of a design (its failure or hash seeds), the mean, p50, p90, p99 and
worst of each figure, with the seed of the worst draw so that it can be replayed (``topo estimate --fail ...``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .point import FIGURES

__all__ = ["summarize", "STATS", "figure_direction"]

STATS = ("mean", "p50", "p90", "p99", "worst")


def figure_direction(name: str) -> str | None:
    """``"high"`` when a larger value of the figure is worse (times, cost, power), ``"low"`` when a smaller one is
    (bandwidth, MFU, goodput), None for a figure that is not a goal (counts)."""
    for figs in FIGURES.values():
        if name in figs:
            return figs[name][1]
    return None


def summarize(df: pd.DataFrame, figures=None) -> pd.DataFrame:
    """One row per design and figure: ``draws`` (points), ``errors``, then over the points without an error
    ``mean``, ``p50``, ``p90``, ``p99`` (percentiles, linear interpolation as :func:`numpy.percentile`), ``worst``
    (the largest of a figure where higher is worse, the smallest where lower is), and ``worst_seed`` (the seed
    of the worst draw; missing for a design without seeds).

    Parameters
    ----------
    df : pandas.DataFrame
        Rows as :func:`topo.sweep.sweep` returns them (``design``, ``label``, ``error``, figures).
    figures : list of str, optional
        The figures to summarize (default: every figure column with a direction, see :func:`figure_direction`).
    """
    if figures is None:
        figures = [c for c in df.columns if figure_direction(c) is not None and df[c].notna().any()]
    rows = []
    for design, g in df.groupby("design", sort=False):
        ok = g[g["error"].isna()]
        for fig in figures:
            vals = ok[fig].astype(float).to_numpy()
            keep = ~np.isnan(vals)
            vals, sub = vals[keep], ok[keep]
            row = {"design": design, "label": g["label"].iat[0], "figure": fig, "draws": len(g),
                   "errors": int(g["error"].notna().sum())}
            if vals.size:
                worst = int(np.argmax(vals) if figure_direction(fig) == "high" else np.argmin(vals))
                p50, p90, p99 = np.percentile(vals, [50, 90, 99])
                row.update(mean=float(vals.mean()), p50=float(p50), p90=float(p90), p99=float(p99),
                           worst=float(vals[worst]))
                seed = sub["seed"].iat[worst] if "seed" in sub else None
                row["worst_seed"] = None if seed is None or pd.isna(seed) else int(seed)
            else:
                row.update({s: np.nan for s in STATS}, worst_seed=None)
            rows.append(row)
    cols = ["design", "label", "figure", "draws", "errors", *STATS, "worst_seed"]
    return pd.DataFrame(rows, columns=cols)
