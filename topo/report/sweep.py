"""The page of a study (``topo sweep --report``): self-contained like ``topo report``, from the study's rows only.

Sections, after one sentence on what each point computes, the settings every point shares and the axes that vary
(:func:`study_text`): the summary per design (mean, p50, p90, p99, worst and the seed of the worst draw);
distributions per design of each main figure (a box per design: every draw, so a tail of bad failure draws shows);
a Pareto view (a cost such as capex or power against a time, the designs no other beats on both marked); a heatmap
of the main figure over the first two dimensions with several values (a zipped group of axes is one dimension; a
failure axis counts by its unexpanded values), the mean over the other dimensions and the draws.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly
import plotly.graph_objects as go

from .. import __version__
from .files import write_bytes
from .html import _Figures, html_page

__all__ = ["render_sweep_page", "write_sweep_page", "main_figures", "pareto_front", "dimensions",
           "dimension_values", "study_text"]

_MAIN = ("throughput_vs_one_site", "time_s", "busbw_GBps", "step_time_s", "mfu", "capex_usd", "it_power_W", "bisection_bandwidth_per_gpu_Bps")
_COSTS = ("capex_usd", "it_power_W", "facility_power_W", "network_capex_usd", "switch_power_W", "num_switches")
_TIMES = ("step_time_s", "time_s")


def e(text) -> str:
    return html.escape(str(text), quote=True)


def main_figures(df: pd.DataFrame) -> list[str]:
    """The figures a study's page and table lead with: those of :data:`_MAIN` that have a value."""
    return [c for c in _MAIN if c in df and df[c].notna().any()]


def pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mask of the points no other point beats on both ``x`` and ``y`` (both: lower is better).

    >>> pareto_front(np.array([1.0, 2.0, 3.0, 2.0]), np.array([3.0, 1.0, 2.0, 4.0])).tolist()
    [True, True, False, False]
    """
    keep = np.ones(len(x), dtype=bool)
    for i in range(len(x)):
        dominated = (x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i]))
        keep[i] = not dominated.any()
    return keep


def _box(df: pd.DataFrame, fig_name: str) -> go.Figure:
    """A box per design, on the x axis by its number (D1, D2, ...) and in the legend by its full label."""
    fig = go.Figure()
    ok = df[df["error"].isna()]
    numbers = {d: i + 1 for i, d in enumerate(df["design"].unique())}  # the same numbers in every figure
    for design, g in ok.groupby("design", sort=False):
        short = f"D{numbers[design]}"
        fig.add_trace(go.Box(x=[short] * len(g), y=g[fig_name], name=f"{short}: {g['label'].iat[0]}",
                             boxmean=True, boxpoints="outliers" if len(g) > 50 else "all",
                             customdata=g["seed"] if "seed" in g else None,
                             hovertemplate=f"{e(short)}: %{{y:.4g}}" + (" (seed %{customdata})" if "seed" in g else "")
                             + "<extra></extra>"))
    fig.update_layout(title=f"{fig_name} per design (every draw)", showlegend=True, height=380 + 18 * len(numbers),
                      legend=dict(orientation="h", yanchor="top", y=-0.15, xanchor="left", x=0),
                      margin=dict(l=60, r=20, t=50, b=60), yaxis_title=fig_name, xaxis_title="design")
    return fig


def _pareto(means: pd.DataFrame, xcol: str, ycol: str) -> go.Figure:
    x, y = means[xcol].to_numpy(float), means[ycol].to_numpy(float)
    front = pareto_front(x, y)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x[~front], y=y[~front], mode="markers", name="dominated",
                             text=means["label"][~front], marker=dict(color="#9aa5b1", size=9),
                             hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<extra></extra>"))
    order = np.argsort(x[front])
    fig.add_trace(go.Scatter(x=x[front][order], y=y[front][order], mode="markers+lines", name="Pareto front",
                             text=means["label"][front].to_numpy()[order], marker=dict(color="#B2182B", size=11),
                             hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<extra></extra>"))
    fig.update_layout(title=f"{ycol} against {xcol} (mean per design; lower is better on both)", height=420,
                      xaxis_title=xcol, yaxis_title=ycol, margin=dict(l=60, r=20, t=50, b=50))
    return fig


def dimensions(study) -> list[list[str]]:
    """The study's independent dimensions with more than one value, in its order: an axis alone, or a zipped
    group of axes as one dimension (its axes vary together: a heatmap over two of them would be a diagonal); an
    axis whose value holds ``{seed}`` counts by its unexpanded values (with and without failures)."""
    zipped = {k: list(g) for g in study.zip for k in g}
    out: list[list[str]] = []
    for k, vs in study.axes.items():
        g = zipped.get(k, [k])
        if g not in out and len(vs) > 1:
            out.append(g)
    return out


def dimension_values(df: pd.DataFrame, study, group: list[str]) -> pd.Series:
    """Each row's value of a dimension as text (``a / b`` for a zipped group), a seeded value unexpanded."""
    seeds = df["seed"] if "seed" in df else pd.Series([None] * len(df), index=df.index)
    parts = []
    for k in group:
        parts.append([_unexpanded(study.axes[k], v, s) for v, s in zip(df[k], seeds)])
    return pd.Series([" / ".join(map(str, t)) for t in zip(*parts)], index=df.index)


def _unexpanded(values: list, v, seed):
    for x in values:
        if x == v or (isinstance(x, str) and "{seed}" in x and seed is not None and not pd.isna(seed)
                      and (x == "{seed}" and v == seed or x.replace("{seed}", str(int(seed))) == v)):
            return x
    return v


def _heatmap(ok: pd.DataFrame, a: pd.Series, b: pd.Series, names: tuple[str, str], fig_name: str) -> go.Figure:
    t = ok.assign(_a=a, _b=b).groupby(["_a", "_b"], sort=False)[fig_name].mean().unstack("_b")
    an, bn = names
    fig = go.Figure(go.Heatmap(z=t.to_numpy(float), x=[str(c) for c in t.columns], y=[str(i) for i in t.index],
                               colorscale="RdBu_r", colorbar=dict(title=fig_name),
                               hovertemplate=f"{e(an)}=%{{y}}<br>{e(bn)}=%{{x}}<br>{fig_name}=%{{z:.4g}}"
                               "<extra></extra>"))
    fig.update_layout(title=f"mean {fig_name} over {an} and {bn}", height=420, xaxis_title=bn, yaxis_title=an,
                      margin=dict(l=80, r=20, t=50, b=60))
    return fig


def _table(summary: pd.DataFrame) -> str:
    head = "".join(f"<th{' class=l' if c in ('label', 'figure') else ''}>{e(c)}</th>" for c in
                   ("label", "figure", "draws", "errors", "mean", "p50", "p90", "p99", "worst", "worst_seed"))
    rows = []
    for r in summary.itertuples():
        cells = [f'<td class="l">{e(r.label)}</td>', f'<td class="l">{e(r.figure)}</td>', f"<td>{r.draws}</td>",
                 f'<td{" class=hot" if r.errors else ""}>{r.errors}</td>']
        cells += [f"<td>{getattr(r, s):.4g}</td>" for s in ("mean", "p50", "p90", "p99", "worst")]
        cells.append(f"<td>{'' if r.worst_seed is None or pd.isna(r.worst_seed) else int(r.worst_seed)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def render_sweep_page(df: pd.DataFrame, summary: pd.DataFrame, study) -> str:
    """The HTML document for a study's rows ``df`` and its :func:`topo.sweep.summarize` table."""
    figs = _Figures()
    mains = main_figures(df)
    sections = []
    shown = summary[summary["figure"].isin(mains)]
    errors = df[df["error"].notna()]
    err_html = ""
    if len(errors):
        firsts = errors.groupby("error", sort=False).size().head(10)
        err_html = ("<h3>Error rows</h3><table><tr><th>points</th><th class=l>error</th></tr>"
                    + "".join(f'<tr><td>{n}</td><td class="l">{e(msg)}</td></tr>' for msg, n in firsts.items())
                    + "</table>")
    sections.append(_section("summary", "Summary per design",
                             "Over the draws of each design (its seeds): mean, percentiles and the worst draw, with "
                             "its seed to replay it.", _table(shown) + err_html))
    multi = df.groupby("design")["point"].count().max() > 1 if len(df) else False
    if mains:
        body = "".join(f'<div class="cell">{figs.div(_box(df, m), "distribution")}</div>' for m in mains)
        sections.append(_section("distributions", "Distributions", "Every draw of each design" +
                                 ("" if multi else " (one draw each: the study has no seeds)") + ".", body))
    ok = df[df["error"].isna()]
    xcol = next((c for c in _COSTS if c in ok and ok[c].notna().any()), None)
    ycol = next((c for c in _TIMES if c in ok and ok[c].notna().any()), None)
    if xcol and ycol and len(ok):
        means = ok.groupby("design", sort=False).agg({xcol: "mean", ycol: "mean", "label": "first"})
        sections.append(_section("pareto", "Pareto view", f"Designs by {xcol} and {ycol}; red: no other design "
                                 "is better on both.", f'<div class="cell">{figs.div(_pareto(means, xcol, ycol), "pareto")}</div>'))
    dims = dimensions(study)
    if len(dims) >= 2 and mains and len(ok):
        a, b = (" / ".join(g) for g in dims[:2])
        rest = ", ".join(" / ".join(g) for g in dims[2:])
        hm = _heatmap(ok, dimension_values(ok, study, dims[0]), dimension_values(ok, study, dims[1]), (a, b), mains[0])
        sections.append(_section("heatmap", "Heatmap", f"Mean {mains[0]} over {e(a)} and {e(b)}"
                                 + (f" (averaged over {e(rest)} and the draws)" if rest else " (averaged over the draws)"),
                                 f'<div class="cell">{figs.div(hm, "heatmap")}</div>'))
    title = f"topo sweep: {e(study.name)}"
    header = (f"<header><h1>{title}</h1><p>{e(study.description)}</p><p>{e(study_text(study))}</p><p>{len(df):,} points, "
              f"{int(df['error'].notna().sum()):,} error rows; modelled by topo {e(__version__)}</p></header>")
    return html_page(title, [header, "<main>", "".join(sections), "</main>",
                             f"<footer>Self-contained; made with topo {e(__version__)} and plotly "
                             f"{e(plotly.__version__)}.</footer>"], figs)


def study_text(study) -> str:
    """What a study's page shows, in one sentence: what each point computes, the settings every point shares
    (the axes of one value, the spec among them), the axes that vary and the draws, so the page stands alone
    without its study file.

    Parameters
    ----------
    study : topo.sweep.study.Study
        The study.

    Returns
    -------
    str
        Plain text (the caller escapes it).

    >>> from topo.sweep import study_from_dict
    >>> study_text(study_from_dict({"spec": "dgx-h100-superpod", "seeds": 2, "axes": {"size": "1GiB",
    ...     "collective": ["all_reduce", "alltoall"], "fail": ["", "random:spine:0.1:{seed}"]}}))
    'Each point computes estimate. Every point: spec = dgx-h100-superpod, size = 1GiB. Varied: collective (2 values), fail (2 values); seeds 0 to 1 (2 draws of each design whose values hold {seed}).'
    """
    fixed = [f"{k} = {vs[0] if vs[0] != '' else chr(34) * 2}" for k, vs in study.axes.items() if len(vs) == 1]
    varied = [" / ".join(g) + f" ({len(study.axes[g[0]])} values{' together' if len(g) > 1 else ''})"
              for g in dimensions(study)]
    out = f"Each point computes {', '.join(study.compute)}."
    if fixed:
        out += " Every point: " + ", ".join(fixed) + "."
    if varied:
        out += " Varied: " + ", ".join(varied)
    if study.seeds:
        out += ("; " if varied else " ") + (f"seeds {min(study.seeds):,} to {max(study.seeds):,} ({len(study.seeds):,} "
                                            "draws of each design whose values hold {seed})")
    return out + ("." if varied or study.seeds else "")


def _section(sid: str, title: str, lead: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{title}</h2><p class="lead">{lead}</p>{body}</section>'


def write_sweep_page(df, summary, study, path, *, force: bool = False, inputs=()) -> int:
    """Write the page whole or not at all (:func:`topo.atomic.open_output`); returns its size in bytes."""
    return write_bytes(path, render_sweep_page(df, summary, study).encode("utf-8"), inputs=inputs, force=force,
                       key="--report", force_option="--force")
