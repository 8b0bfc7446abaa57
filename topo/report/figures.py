"""The report's figures, one function each, for the HTML page and for Jupyter.

Each takes the library's results (:class:`topo.Fabric`, :class:`topo.Inventory`,
:class:`topo.engine.result.EstimateResult`, a link-load frame or its :class:`~topo.report.link_summary.LoadSummary`)
and returns a ``plotly.graph_objects.Figure``.
None of them computes a load or a time: they draw what the results hold (busbw of a candidate curve is its time
read through nccl-tests' bus-bandwidth factor, as the results' own rows are).

>>> import topo
>>> from topo.report import figures
>>> inv = topo.inventory(topo.build_fabric(topo.load_spec("dgx-h100-superpod")))
>>> [t.name for t in figures.oversubscription_figure(inv).data]
['downlink capacity', 'uplink capacity']
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..engine.collectives import busbw_factor
from ..fabric.fabric import Fabric
from ..fabric.inventory import Inventory, inventory
from ..engine.result import EstimateResult
from ..units import format_bandwidth, format_count, format_size, format_time, in_unit
from .fabric_layers import LayerDrawing, layer_drawing
from .link_summary import LoadSummary, summarize_loads
from .style import ALERT_COLOR, GPU_COLOR, base_layout, esc, level_color, size_ticks, tier_color

__all__ = ["inventory_figure", "fabric_figure", "oversubscription_figure", "link_load_heatmap", "link_load_distribution",
           "collective_curves", "busbw_comparison", "ALGORITHM_COLORS"]

ALGORITHM_COLORS = {
    "ring": "#1b9e77", "tree": "#d95f02", "nvls": "#7570b3", "nvls_tree": "#e7298a", "sharp": "#66a61e",
    "hierarchical": "#a6761d", "halving_doubling": "#e6ab02", "recursive_doubling": "#666666",
    "recursive_halving": "#1f78b4", "chain": "#b15928", "direct": "#1b9e77", "pairwise": "#d95f02",
}
_SERIES = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def _hover_trace(**kw) -> dict:
    return dict(hoverinfo="text", hoverlabel=dict(namelength=0), **kw)


# --- the fabric as layers --------------------------------------------------------------------------------

def fabric_figure(fabric: Fabric, inv: Inventory | None = None, drawing: LayerDrawing | None = None) -> go.Figure:
    """The fabric drawn as layers (GPUs, then each switch tier) of aggregated groups.

    Traces: one ``lines`` trace per link level (named after the level, width growing with the capacity of one
    drawn bundle, so a thin tier looks thin), one ``markers`` trace of bundle mid-points per level (hover: cables
    and capacity), one ``markers`` trace per layer (hover: counts and capacities), and ``text`` traces for the
    groups left out.
    """
    inv = inv or inventory(fabric)
    d = drawing or layer_drawing(fabric)
    fig = go.Figure()
    _add_bundles(fig, d, fabric.level_names)
    _add_layers(fig, d, inv)
    _add_gaps_and_labels(fig, d)
    _add_tier_notes(fig, inv)
    n = len(d.layer_names)
    fig.update_layout(**base_layout(f"Fabric of {esc(inv.name)}: layers, aggregated", height=140 + 95 * n))
    fig.update_layout(margin=dict(l=80, r=190, t=60, b=30), showlegend=False, hovermode="closest")
    fig.update_xaxes(visible=False, range=list(d.x_range))
    fig.update_yaxes(tickvals=list(range(n)), ticktext=[esc(x) for x in d.layer_names], range=[-0.85, n - 0.5],
                     showgrid=False, zeroline=False, title=None)
    return fig


def _add_bundles(fig: go.Figure, d: LayerDrawing, levels: list[str]) -> None:
    """Per link level: its bundles as lines (width growing with one bundle's capacity) and their mid-points."""
    max_cap = max((b.capacity_Bps for b in d.bundles), default=1.0)
    for lv in sorted({b.level for b in d.bundles}):
        bs = [b for b in d.bundles if b.level == lv]
        xs, ys = [], []
        for b in bs:
            xs += [b.x0, b.x1, None]
            ys += [b.y0, b.y1, None]
        width = 0.6 + 3.4 * math.sqrt(bs[0].capacity_Bps / max_cap)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"{esc(levels[lv])} cables",
                                 line=dict(color=level_color(lv), width=width), hoverinfo="skip", opacity=0.55,
                                 legendgroup=f"level{lv}", showlegend=False))
        fig.add_trace(go.Scatter(
            x=[(b.x0 + b.x1) / 2 for b in bs], y=[(b.y0 + b.y1) / 2 for b in bs], mode="markers",
            name=f"{esc(levels[lv])} bundles", marker=dict(color=level_color(lv), size=5, symbol="diamond"),
            opacity=0.6, text=[b.hover for b in bs], legendgroup=f"level{lv}", showlegend=False,
            **_hover_trace()))


def _add_layers(fig: go.Figure, d: LayerDrawing, inv: Inventory) -> None:
    """One trace of markers per layer: the GPUs' units, then each tier's switches, groups or planes."""
    names = ["GPUs (by " + esc(inv.unit_name) + ")"]
    for i, t in enumerate(inv.tiers):
        names.append(esc(t.name) + (" switches", " groups", " planes")[min(i, 2)])
    for layer in range(len(d.layer_names)):
        ms = [m for m in d.markers if m.layer == layer]
        if not ms:
            continue
        color = GPU_COLOR if layer == 0 else tier_color(layer - 1)
        size = 13 if layer != 1 else (9 if len(ms) <= 64 else 7)
        fig.add_trace(go.Scatter(
            x=[m.x for m in ms], y=[layer] * len(ms), mode="markers", name=names[layer],
            marker=dict(color=color, size=size, symbol="square" if layer == 0 else "circle",
                        line=dict(color="white", width=1)),
            text=[m.hover for m in ms], **_hover_trace()))


def _add_gaps_and_labels(fig: go.Figure, d: LayerDrawing) -> None:
    """An ellipsis for each group left out (with its label below), and the pods' labels."""
    for g in d.gaps:
        ys = list(range(g.y0, g.y1 + 1))
        fig.add_trace(go.Scatter(x=[g.x] * len(ys), y=ys, mode="text", text=["⋯"] * len(ys),
                                 textfont=dict(size=20, color="#555"), showlegend=False, name="left out",
                                 hovertext=[g.hover] * len(ys), hoverinfo="text"))
        if g.text != "…":
            fig.add_annotation(x=g.x, y=-0.55, text=g.text, showarrow=False, font=dict(size=11, color="#555"))
    for x, text in d.pod_labels:
        if text:
            fig.add_annotation(x=x, y=-0.55, text=text, showarrow=False, font=dict(size=11, color="#333"))


def _add_tier_notes(fig: go.Figure, inv: Inventory) -> None:
    """Right of each layer: its counts and its oversubscription (in the alert colour when above 1:1)."""
    right = [f"{format_count(inv.num_gpus)} GPUs, {format_count(inv.num_servers)} servers"]
    for t in inv.tiers:
        text = f"{format_count(t.num_switches)} switches, "
        if t.oversubscription is None:
            text += "top tier"
        elif t.oversubscription > 1 + 1e-9:
            text += f"<b>{t.oversubscription:.3g}:1 up</b>"
        else:
            text += f"{t.oversubscription:.3g}:1 up"
        right.append(text)
    for i, text in enumerate(right):
        hot = i > 0 and (inv.tiers[i - 1].oversubscription or 1) > 1 + 1e-9
        fig.add_annotation(x=1.0, xref="paper", xanchor="left", xshift=8, y=i, text=text, showarrow=False,
                           align="left", font=dict(size=11, color=ALERT_COLOR if hot else "#333"))


# --- the bill of materials --------------------------------------------------------------------------------

def inventory_figure(inv: Inventory) -> go.Figure:
    """Switches per tier and cables per link level, side by side: two ``bar`` traces (``switches``, ``cables``),
    one bar per tier or level in its tier's colour, log y so that 256 cores and 100k NICs both show."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=("switches per tier", "links (cables) per level"))
    fig.add_trace(go.Bar(
        x=[esc(t.name) for t in inv.tiers], y=[t.num_switches for t in inv.tiers], name="switches",
        marker=dict(color=[tier_color(i) for i in range(len(inv.tiers))]),
        text=[format_count(t.num_switches) for t in inv.tiers], textposition="outside", cliponaxis=False,
        hovertext=[f"<b>{esc(t.name)}</b>: {format_count(t.num_switches)} x {esc(t.model or 'switch')}, radix "
                   f"{t.radix}<br>{t.down_ports_per_switch} ports down, {t.up_ports_per_switch} up"
                   for t in inv.tiers], hoverinfo="text"), row=1, col=1)
    fig.add_trace(go.Bar(
        x=[esc(x.name) for x in inv.links], y=[x.num_links for x in inv.links], name="cables",
        marker=dict(color=[level_color(i) for i in range(len(inv.links))]),
        text=[format_count(x.num_links) for x in inv.links], textposition="outside", cliponaxis=False,
        hovertext=[f"<b>{esc(x.name)}</b>: {format_count(x.num_links)} links x {format_bandwidth(x.link_bandwidth_Bps)}"
                   f"<br>{format_bandwidth(x.capacity_Bps)} in all, per direction" for x in inv.links],
        hoverinfo="text"), row=1, col=2)
    fig.update_layout(**base_layout(f"Switches and links: {esc(inv.name)}", height=360))
    fig.update_layout(showlegend=False, margin=dict(t=80))
    top = max([t.num_switches for t in inv.tiers] + [x.num_links for x in inv.links] + [1])
    fig.update_yaxes(type="log", dtick=1, range=[0, math.log10(top) + 0.6])
    fig.update_yaxes(title="switches", row=1, col=1)
    fig.update_yaxes(title="links", row=1, col=2)
    return fig


# --- oversubscription per tier ---------------------------------------------------------------------------

def oversubscription_figure(inv: Inventory) -> go.Figure:
    """Downlink vs uplink capacity per tier (TB/s, per direction), with the ratio written above each tier.

    Traces: ``downlink capacity`` and ``uplink capacity`` (one bar per tier each, coloured by tier, the uplink
    bar hatched), y in TB/s; the top tier has no uplink bar.
    """
    names = [esc(t.name) for t in inv.tiers]
    down = [in_unit(t.down_capacity_Bps, "TB/s") for t in inv.tiers]
    up = [in_unit(t.up_capacity_Bps, "TB/s") if t.up_ports_per_switch else None for t in inv.tiers]
    colors = [tier_color(i) for i in range(len(inv.tiers))]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=names, y=down, name="downlink capacity", marker=dict(color=colors),
        text=[f"{t.num_switches:,} x {t.down_ports_per_switch} x {format_bandwidth(t.down_port_rate_Bps)}"
              for t in inv.tiers],
        hovertext=[f"<b>{esc(t.name)} down</b>: {format_bandwidth(t.down_capacity_Bps)}<br>{t.num_switches:,} "
                   f"switches x {t.down_ports_per_switch} ports x {format_bandwidth(t.down_port_rate_Bps)}"
                   for t in inv.tiers], hoverinfo="text", textposition="none"))
    fig.add_trace(go.Bar(
        x=names, y=up, name="uplink capacity",
        marker=dict(color=colors, pattern=dict(shape="/", fgcolor="white", solidity=0.35)),
        hovertext=[f"<b>{esc(t.name)} up</b>: {format_bandwidth(t.up_capacity_Bps)}<br>{t.num_switches:,} "
                   f"switches x {t.up_ports_per_switch} ports x {format_bandwidth(t.up_port_rate_Bps)}"
                   if t.up_ports_per_switch else f"{esc(t.name)}: top tier, no uplinks" for t in inv.tiers],
        hoverinfo="text"))
    top = max(down) if down else 1.0
    for name, t, dn in zip(names, inv.tiers, down):
        if t.oversubscription is None:
            text, color = "top tier", "#555"
        elif t.oversubscription > 1 + 1e-9:
            text, color = f"<b>{t.oversubscription:.3g}:1</b> oversubscribed", ALERT_COLOR
        else:
            text, color = f"{t.oversubscription:.3g}:1 non-blocking", "#333"
        fig.add_annotation(x=name, y=dn, yshift=14, text=text, showarrow=False, font=dict(size=13, color=color))
    fig.update_layout(**base_layout(f"Oversubscription per tier: {esc(inv.name)}", height=420))
    fig.update_layout(barmode="group", bargap=0.3,
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0))
    fig.update_yaxes(title="capacity per direction (TB/s)", range=[0, top * 1.18], rangemode="tozero")
    fig.update_xaxes(title="switch tier")
    return fig


# --- link loads ------------------------------------------------------------------------------------------

def _summary(loads, fabric) -> LoadSummary:
    if isinstance(loads, LoadSummary):
        return loads
    if fabric is None:
        raise ValueError("a link-load frame needs its fabric to be grouped; pass fabric=")
    return summarize_loads(loads, fabric)


def _level_colors(summary: LoadSummary, fabric_levels: Sequence[str] | None = None) -> list[str]:
    order = list(fabric_levels) if fabric_levels else summary.levels
    return [level_color(order.index(lv)) if lv in order else "#555" for lv in summary.levels]


def _load_title(summary: LoadSummary, what: str, label: str | None) -> str:
    a = summary.attrs
    parts = [what]
    if label:
        parts.append(esc(label))
    if "size_bytes" in a:
        parts.append(f"{format_size(a['size_bytes'])}, {esc(a.get('algorithm', ''))}")
    return ": ".join(parts[:2]) + (f" ({parts[2]})" if len(parts) > 2 else "")


def link_load_distribution(loads, fabric: Fabric | None = None, label: str | None = None) -> go.Figure:
    """Utilization of the directed links that carry traffic, per level, as a box of percentiles (min, 25%,
    median, 75%, max; the mean dashed): one ``box`` trace per level, coloured by the tier it leads to, y in
    percent of line rate; a level with no traffic gets an empty box and a "no traffic" note."""
    s = _summary(loads, fabric)
    colors = _level_colors(s, fabric.level_names if fabric is not None else None)
    fig = go.Figure()
    for (_, r), color in zip(s.percentiles.iterrows(), colors):
        lv = esc(r["level"])
        if r["loaded"] == 0:
            fig.add_annotation(x=lv, y=0, yshift=10, text="no traffic", showarrow=False,
                               font=dict(size=11, color="#777"))
        fig.add_trace(go.Box(
            x=[lv], q1=[100 * r["p25"]], median=[100 * r["p50"]], q3=[100 * r["p75"]],
            lowerfence=[100 * r["p0"]], upperfence=[100 * r["p100"]], mean=[100 * r["mean"]], name=lv,
            marker=dict(color=color), line=dict(color=color), fillcolor=color, opacity=0.85, boxmean=True,
            hoverinfo="text",
            hovertext=[f"<b>{lv}</b>: {r['loaded']:,} of {r['links']:,} directed links carry traffic<br>"
                       f"of those: max {r['p100']:.1%}, 95% {r['p95']:.1%}, median {r['p50']:.1%}, "
                       f"mean {r['mean']:.1%}, min {r['p0']:.1%}"]))
    top = max(100.0, 100 * float(s.percentiles["p100"].max()) * 1.05) if len(s.percentiles) else 100.0
    fig.update_layout(**base_layout(_load_title(s, "Link utilization per tier", label), height=420))
    fig.update_layout(showlegend=False)
    fig.update_yaxes(title="utilization of loaded links (%)", range=[0, top])
    fig.update_xaxes(title="link level")
    return fig


def link_load_heatmap(loads, fabric: Fabric | None = None, label: str | None = None) -> go.Figure:
    """The most utilized link of each level in each pod (or unit): one ``heatmap`` trace, x = group index,
    y = level, z = the maximum utilization in percent (blank where no link of the cell carries traffic)."""
    s = _summary(loads, fabric)
    grid = s.grid
    levels = [esc(c) for c in grid.columns]
    groups = [f"{s.group_name} {g}" for g in grid.index]
    z = (grid.T.to_numpy() * 100).round(2)
    mean = (s.grid_mean.T.to_numpy() * 100).round(2)
    count = s.grid_links.T.to_numpy()

    def cell(i, j):
        if not z[i][j] == z[i][j]:  # NaN: the group has no link of this level
            return f"{groups[j]}: no {levels[i]} links"
        if z[i][j] == 0:
            return f"<b>{groups[j]}, {levels[i]}</b><br>no traffic on its {count[i][j]:,} directed links"
        return (f"<b>{groups[j]}, {levels[i]}</b><br>max {z[i][j]:.1f}%, mean {mean[i][j]:.1f}%<br>"
                f"{count[i][j]:,} directed links")

    text = [[cell(i, j) for j in range(len(groups))] for i in range(len(levels))]
    shown = [[None if not v > 0 else float(v) for v in row] for row in z]  # idle cells stay blank
    zmax = max(100.0, float(grid.max().max() * 100)) if grid.size else 100.0
    fig = go.Figure(go.Heatmap(
        x=list(range(len(groups))), y=levels, z=shown, zmin=0, zmax=zmax, colorscale="YlOrRd",
        colorbar=dict(title=dict(text="max util. (%)", side="right"), thickness=14), xgap=1, ygap=1,
        text=text, hoverinfo="text", name="max utilization"))
    fig.update_layout(**base_layout(_load_title(s, f"Hottest link per {esc(s.group_name)} and tier", label),
                                    height=380))
    ticks = list(range(len(groups)))
    step = max(1, math.ceil(len(groups) / 16))
    fig.update_xaxes(title=f"{esc(s.group_name)} (of the link's lower end)", tickvals=ticks[::step],
                     ticktext=[str(g) for g in list(grid.index)[::step]], showgrid=False)
    fig.update_yaxes(title="link level", showgrid=False, autorange="reversed")
    return fig


# --- collective curves -----------------------------------------------------------------------------------

def _curves(result: EstimateResult, extra: Sequence[EstimateResult]):
    sizes = [r.size_bytes for r in result.results]
    factor = busbw_factor(result.collective, result.num_ranks)
    out: dict[str, list[tuple[int, float, float]]] = {}
    for name, times in result.candidates.items():
        pts = [(s, t, in_unit(s / t, "GB/s") * factor) for s, t in zip(sizes, times) if t]
        if pts:
            out[name] = pts
    for r in extra:
        if r.algorithm in out or r.algorithm == "auto":
            continue
        out[r.algorithm] = [(x.size_bytes, x.time_s, x.busbw_GBps) for x in r.results]
    return out


def collective_curves(result: EstimateResult, extra: Sequence[EstimateResult] = (),
                      label: str | None = None) -> go.Figure:
    """Time and busbw against message size, per algorithm, as nccl-tests users read them.

    Left: time (us, log) against size (bytes, log); right: busbw (GB/s) against size. One ``lines`` trace per
    algorithm in ``result.candidates`` and per explicit-algorithm result in ``extra``, plus ``auto`` (the
    fastest per size, NCCL's choice: the rows of ``result``) dashed in black. Algorithms that could not run have
    no trace (``result.unavailable`` says why).
    """
    curves = _curves(result, extra)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("time per collective", "bus bandwidth (busbw)"))
    k = 0
    for name, pts in curves.items():
        color = ALGORITHM_COLORS.get(name) or _SERIES[k % len(_SERIES)]
        k += 1
        hover = [f"<b>{esc(name)}</b>, {format_size(s)}<br>time {format_time(t)}<br>busbw {b:.2f} GB/s"
                 for s, t, b in pts]
        for col, ys in ((1, [t * 1e6 for _, t, _ in pts]), (2, [b for _, _, b in pts])):
            fig.add_trace(go.Scatter(x=[s for s, _, _ in pts], y=ys, mode="lines", name=esc(name),
                                     legendgroup=name, showlegend=col == 1, line=dict(color=color, width=2),
                                     text=hover, hoverinfo="text"), row=1, col=col)
    rows = result.results
    hover = [f"<b>auto: {esc(x.algorithm)}/{esc(x.protocol)}</b>, {format_size(x.size_bytes)}<br>time "
             f"{format_time(x.time_s)}<br>busbw {x.busbw_GBps:.2f} GB/s" for x in rows]
    for col, ys in ((1, [x.time_s * 1e6 for x in rows]), (2, [x.busbw_GBps for x in rows])):
        fig.add_trace(go.Scatter(x=[x.size_bytes for x in rows], y=ys, mode="lines+markers",
                                 name="auto (fastest)", legendgroup="auto", showlegend=col == 1,
                                 line=dict(color="black", width=1.5, dash="dash"), marker=dict(size=4),
                                 text=hover, hoverinfo="text"), row=1, col=col)
    sizes = [x.size_bytes for x in rows]
    vals, texts = size_ticks(min(sizes), max(sizes))
    title = f"{esc(result.collective)} on {format_count(result.num_ranks)} GPUs"
    if label:
        title = f"{esc(label)}: {title}"
    fig.update_layout(**base_layout(title, height=440))
    fig.update_layout(hovermode="closest", legend=dict(orientation="h", yanchor="top", y=-0.2, x=0.0),
                      margin=dict(l=70, r=30, t=80, b=110))
    for col in (1, 2):
        fig.update_xaxes(type="log", tickvals=vals, ticktext=texts, title="message size (bytes)", row=1, col=col)
    fig.update_yaxes(type="log", dtick=1, title="time (us)", row=1, col=1)
    fig.update_yaxes(title="busbw (GB/s)", rangemode="tozero", row=1, col=2)
    return fig


def busbw_comparison(results: Mapping[str, EstimateResult]) -> go.Figure:
    """busbw against message size of several estimates (one ``lines`` trace per entry, named by its key), for
    comparing clusters: the rows of each result, i.e. the fastest algorithm per size."""
    fig = go.Figure()
    sizes = []
    for k, (label, r) in enumerate(results.items()):
        rows = r.results
        sizes += [x.size_bytes for x in rows]
        fig.add_trace(go.Scatter(
            x=[x.size_bytes for x in rows], y=[x.busbw_GBps for x in rows], mode="lines+markers", name=esc(label),
            line=dict(color=_SERIES[k % len(_SERIES)], width=2, dash="dash" if "pod" in label else "solid"),
            marker=dict(size=4),
            text=[f"<b>{esc(label)}</b>, {format_size(x.size_bytes)}<br>busbw {x.busbw_GBps:.2f} GB/s "
                  f"({esc(x.algorithm)}/{esc(x.protocol)})" for x in rows], hoverinfo="text"))
    vals, texts = size_ticks(min(sizes), max(sizes)) if sizes else ([], [])
    fig.update_layout(**base_layout("busbw of all_reduce, fastest algorithm per size", height=440))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0.0), margin=dict(b=110))
    fig.update_xaxes(type="log", tickvals=vals, ticktext=texts, title="message size (bytes)")
    fig.update_yaxes(title="busbw (GB/s)", rangemode="tozero")
    return fig
