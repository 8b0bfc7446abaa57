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


def _worst_seed(rows: pd.DataFrame, is_worst: np.ndarray) -> int | None:
    """The smallest seed among the draws that tie for the worst value (so that it does not depend on the order
    of the rows), None for a design without seeds."""
    if "seed" not in rows:
        return None
    seeds = rows["seed"][is_worst].dropna()
    return int(seeds.min()) if len(seeds) else None


def summarize(df: pd.DataFrame, figures=None) -> pd.DataFrame:
    """One row per design and figure: ``draws`` (points), ``errors``, then over the points without an error
    ``mean``, ``p50``, ``p90``, ``p99`` (percentiles on the bad tail, linear interpolation as
    :func:`numpy.percentile`: the value that 90% or 99% of draws are no worse than, so the 10th and 1st percentiles
    of a figure where lower is worse, a bandwidth or an MFU), ``worst``
    (the largest of a figure where higher is worse, the smallest where lower is), and ``worst_seed`` (the seed
    of the worst draw, the smallest of those that tie; missing for a design without seeds).

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
                worst = float(vals.max() if figure_direction(fig) == "high" else vals.min())
                bad_tail = [50, 10, 1] if figure_direction(fig) == "low" else [50, 90, 99]
                p50, p90, p99 = np.percentile(vals, bad_tail)
                row.update(mean=float(vals.mean()), p50=float(p50), p90=float(p90), p99=float(p99), worst=worst)
                row["worst_seed"] = _worst_seed(sub, vals == worst)
            else:
                row.update({s: np.nan for s in STATS}, worst_seed=None)
            rows.append(row)
    cols = ["design", "label", "figure", "draws", "errors", *STATS, "worst_seed"]
    return pd.DataFrame(rows, columns=cols)
