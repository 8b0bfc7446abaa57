"""The report of a region of several sites: the sites and the DCI spans drawn with their loads under a collective,
the describe tables, and the collective's candidates across sites; a self-contained page as the other reports."""

from __future__ import annotations

import numpy as np
import plotly
import plotly.graph_objects as go

from .. import __version__
from ..engine.region_estimate import RegionEstimate
from ..fabric.region import Region
from ..fabric.region_inventory import RegionInventory, cut_apart_text
from ..units import format_bandwidth, format_size, format_time
from .files import write_bytes
from .html import _Figures, e, html_page
from .style import ALERT_COLOR, FONT, GPU_COLOR, esc, tier_color

__all__ = ["region_figure", "render_region_page", "write_region_page"]


def region_figure(region: Region, est: RegionEstimate | None) -> go.Figure:
    """Sites on a circle (marker area by GPUs), DCI spans as lines: width by capacity, colour by the busier
    direction's utilization under the estimate's first size (its bytes over capacity x the collective's time);
    without an estimate (sites cut apart: no collective runs over every GPU) the spans carry no load."""
    S = region.num_sites
    angle = np.pi / 2 - 2 * np.pi * np.arange(S) / S
    x, y = np.cos(angle), np.sin(angle)
    row = est.results[0] if est is not None else None
    cap = region.span_bandwidth_Bps
    loads = np.asarray(row.span_bytes).reshape(-1, 2) if row else np.zeros((len(cap), 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(cap > 0, loads.max(axis=1) / (cap * row.time_s), 0.0) if row else np.zeros(len(cap))
    fig = go.Figure()
    widest = max(float(cap.max()), 1.0)
    for k, (a, b) in enumerate(zip(region.spans["a"].tolist(), region.spans["b"].tolist())):
        color = "#BBBBBB" if region.failed[k] else (ALERT_COLOR if util[k] >= 0.5 else tier_color(0))
        text = (f"{esc(region.span_names()[k])}<br>{region.spans['distance_km'][k]:,.0f} km, "
                f"{format_time(region.spans['latency_s'][k])} one way<br>{format_bandwidth(cap[k])} per direction"
                + (" (failed)" if region.failed[k] else "")
                + (f"<br>{format_size(loads[k, 0])} / {format_size(loads[k, 1])} each way, {util[k]:.0%} busy"
                   if row else ""))
        fig.add_trace(go.Scatter(x=[x[a], x[b]], y=[y[a], y[b]], mode="lines", hoverinfo="text", text=text,
                                 line={"width": 2 + 10 * float(cap[k]) / widest, "color": color,
                                       "dash": "dot" if region.failed[k] else "solid"}, showlegend=False))
        fig.add_trace(go.Scatter(x=[(x[a] + x[b]) / 2], y=[(y[a] + y[b]) / 2], mode="markers", hoverinfo="text",
                                 text=text, marker={"size": 12, "opacity": 0}, showlegend=False))
    gpus = region.gpus_per_site.astype(float)
    fig.add_trace(go.Scatter(
        x=x, y=y, mode="markers+text", text=[esc(n) for n in region.site_names], textposition="top center",
        hovertext=[f"{esc(n)}: {int(g):,} GPUs" for n, g in zip(region.site_names, gpus)], hoverinfo="text",
        marker={"size": 20 + 30 * np.sqrt(gpus / gpus.max()), "color": GPU_COLOR}, showlegend=False))
    title = (f"{esc(region.name)}: {format_size(row.size_bytes)} {est.collective} ({row.algorithm}), bound on "
             f"{esc(row.bottleneck_name)}" if row else f"{esc(region.name)}: sites cut apart, no collective over every GPU")
    fig.update_layout(title=title, font={"family": FONT}, xaxis={"visible": False},
                      yaxis={"visible": False, "scaleanchor": "x"}, height=520, margin={"l": 20, "r": 20, "t": 60, "b": 20})
    return fig


def _table(headers, rows) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_region_page(region: Region, inv: RegionInventory, est: RegionEstimate | None,
                       plan_text: str | None = None) -> str:
    """The HTML document of a region's report; ``est`` None when the sites are cut apart (``inv.cut_apart``): the
    sites and spans drawn, the cut said, the collective not run; ``plan_text``: the region's plan, as text."""
    figs = _Figures()
    sites = _table(["site", "spec", "GPUs", "attach", "bisection", "to DCI"],
                   [[s.name, s.spec, f"{s.num_gpus:,}", s.attach_tier, format_bandwidth(s.bisection_bandwidth_Bps)
                     + (f" ({format_bandwidth(s.bisection_without_failures_Bps)} without failures)" if s.failures
                        else ""), format_bandwidth(s.dci_Bps)] for s in inv.sites])
    spans = _table(["span", "distance", "capacity", "latency one way"],
                   [[s.name, f"{s.distance_km:,.0f} km", format_bandwidth(s.bandwidth_Bps), format_time(s.latency_s)]
                    for s in inv.spans])
    title = f"topo report: {e(region.name)}"
    return html_page(title, [
        f"<header><h1>{title}</h1><p>{e(inv.description)}</p><p>{inv.num_gpus:,} GPUs in {inv.num_sites} sites; "
        f"cut between sites {e(format_bandwidth(inv.min_cut_Bps))} per direction</p>"
        + (f"<p>With failures: {e(', '.join(inv.failures))}.</p>" if inv.failures else "")
        + (f"<p>Cut apart: {e(cut_apart_text(inv))}.</p>" if inv.cut_apart else "")
        + f"<p>Modelled by topo {e(__version__)}; units: GB = 1e9 bytes, GiB = 2<sup>30</sup> bytes, bandwidths "
        "per direction.</p></header><main>",
        f'<section id="dci"><h2>Sites and DCI</h2><p class="caption">{e(_DCI_CAPTION)}</p>'
        f'<div class="cell">{figs.div(region_figure(region, est), "region")}</div>{sites}{spans}</section>',
        _collective_section(inv, est),
        _plan_section(plan_text),
        "<section id=\"assumed\"><h2>Assumptions</h2><p class=\"caption\">What the region file assumes where "
        "nothing is published (its <code>assumptions</code>).</p><ul>"
        + ("".join(f"<li>{e(a)}</li>" for a in inv.assumptions) or "<li>none given</li>") + "</ul></section></main>",
        f"<footer>Self-contained; made with topo {e(__version__)} and plotly {e(plotly.__version__)}.</footer>"],
        figs)


def _plan_section(plan_text: str | None) -> str:
    """The region's plan (``topo report REGION --plan``) as ``topo plan REGION`` says it; "" without one."""
    if plan_text is None:
        return ""
    return ('<section id="plan"><h2>Plan</h2><p class="caption">Every site\'s power, capex and TCO and the DCI\'s '
            "bill, as topo plan on the region gives them.</p>"
            f'<pre style="overflow-x: auto">{e(plan_text)}</pre></section>')


def _collective_section(inv: RegionInventory, est: RegionEstimate | None) -> str:
    if est is None:
        return (f'<section id="collective"><h2>all_reduce over every GPU</h2><p class="caption">Not run: '
                f"{e(cut_apart_text(inv))}, so no collective reaches every GPU (describe draws the same cut).</p>"
                "</section>")
    cands = _table(["size", "chosen", "time", "bottleneck"] + list(est.results[0].candidates),
                   [[format_size(r.size_bytes), r.algorithm, format_time(r.time_s), r.bottleneck_name]
                    + [format_time(t) for t in r.candidates.values()] for r in est.results])
    notes = "".join(f"<p>Note: {e(n)}</p>" for n in est.notes)  # the split's path bound, as the estimate says it
    priced = f"<p>Cost profile: {e(', '.join(est.profile))}, which prices {e(est.profile_prices)}.</p>"
    return (f'<section id="collective"><h2>{e(est.collective)} over every GPU</h2><p class="caption">'
            f"{e(_CANDIDATES_CAPTION)}</p>{cands}{priced}{notes}</section>")


_DCI_CAPTION = ("The sites on a circle (marker area by GPUs) and the DCI spans between them: line width by capacity, "
                "colour by the busier direction's utilization (bytes over capacity x the collective's time, red from "
                "50%; grey dotted: failed) under the all-reduce below at its first size; hover a span for its "
                "distance, latency and bytes. The tables: each site's GPUs, the tier the DCI attaches to, its "
                "bisection and its DCI capacity; each span's distance, capacity and one-way latency.")
_CANDIDATES_CAPTION = ("Time of each way to run the collective over every GPU of every site (the hierarchical "
                       "reduction inside and across the sites, its pipelined form, NCCL's flat ring and tree); "
                       "chosen: the fastest, and the link that bounds it (dci:A-B, border:SITE, or the slowest site's "
                       "busiest link, SITE:SRC->DST).")


def write_region_page(region: Region, inv: RegionInventory, est: RegionEstimate | None, path,
                      plan_text: str | None = None, **output) -> int:
    """Write the page whole or not at all (:func:`topo.atomic.open_output`); returns its size in bytes;
    ``plan_text``: the region's plan as ``topo plan REGION`` says it, in its own section (None: none)."""
    return write_bytes(path, render_region_page(region, inv, est, plan_text).encode("utf-8"), **output)
