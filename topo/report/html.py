"""The self-contained page: sections of figures and tables, plotly.js inlined once, no network request.

Every string that comes from a spec (cluster, tier and file names, descriptions, sources) goes through
:func:`html.escape` before it enters the page, and figure JSON cannot close its ``<script>`` (plotly writes
``<``, ``>`` and ``/`` as ``\\u`` escapes; ``</`` is escaped again here). A Content-Security-Policy forbids every
fetch, so the page stays offline even if a figure asked for something. Several specs are shown side by side,
one column each, with a comparison table on top.
"""

from __future__ import annotations

import html
import json
from typing import Sequence

import plotly
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from .. import __version__
from ..atomic import SIGNATURE
from ..engine.bottleneck_text import utilization_factors
from ..units import count_noun, format_bandwidth, format_count, format_rate, format_size, format_time
from . import figures as F
from .build import MixScenario, Scenario, SpecReport
from .fabric_layers import layer_drawing
from .files import write_bytes
from .plan_figures import plan_section
from .style import ALERT_COLOR, GPU_COLOR, HOT_SLOWDOWN, HOT_UTILIZATION, PCIE_COLOR, tier_color
from .train_figures import train_section

__all__ = ["html_page", "render_page", "write_page"]

_CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:")
_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False,
           "toImageButtonOptions": {"format": "png", "scale": 2}}

_CSS = """
body { font-family: "Helvetica Neue", Arial, sans-serif; color: #222; margin: 0; background: #fafafa; }
header { background: #1d2b3a; color: #fff; padding: 18px 28px 12px; }
header h1 { margin: 0 0 4px; font-size: 22px; font-weight: 600; }
header p { margin: 2px 0; color: #cfd8e3; font-size: 13px; }
nav { padding: 8px 28px; background: #eef1f5; font-size: 13px; position: sticky; top: 0; z-index: 10; }
nav a { margin-right: 16px; color: #1d4e89; text-decoration: none; }
main { padding: 4px 28px 28px; }
section { margin: 22px 0 30px; }
section > h2 { font-size: 18px; border-bottom: 2px solid #d9dee5; padding-bottom: 4px; margin-bottom: 6px; }
p.lead { margin: 4px 0 10px; font-size: 13px; color: #444; max-width: 1100px; }
.grid { display: grid; gap: 14px; }
.grid > * { min-width: 0; }
.cell { background: #fff; border: 1px solid #e1e5ea; border-radius: 4px; padding: 8px 10px; min-width: 0; }
.cell h3 { font-size: 14px; margin: 2px 0 6px; color: #1d2b3a; }
.plot { width: 100%; min-height: 300px; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0 8px; }
th, td { border-bottom: 1px solid #e3e7ec; padding: 3px 9px; text-align: right; vertical-align: top; }
th { background: #f2f4f7; font-weight: 600; }
td.l, th.l { text-align: left; }
.hot { color: #B2182B; font-weight: 600; }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 8px; border: 1px solid #fff; }
.caption { font-size: 12px; color: #555; margin: 4px 0 2px; }
.tables { display: flex; flex-wrap: wrap; gap: 0 28px; align-items: flex-start; }
.sources { font-size: 12px; color: #444; word-break: break-all; }
footer { font-size: 12px; color: #666; padding: 10px 28px 24px; }
"""

_SCRIPT = """
(function () {
  var figs = JSON.parse(document.getElementById("topo-figures").textContent);
  var config = %s;
  var done = Object.keys(figs).map(function (id) {
    return Plotly.newPlot(id, figs[id].data, figs[id].layout, config);
  });
  Promise.all(done).then(function () { document.body.setAttribute("data-plots-ready", String(done.length)); });
})();
"""


def e(text) -> str:
    return html.escape(str(text), quote=True)


class _Figures:
    """Collects figures; each becomes a ``<div class="plot">`` and one entry of the page's figure JSON."""

    def __init__(self):
        self.items: dict[str, str] = {}

    def div(self, fig: go.Figure, kind: str) -> str:
        fid = f"fig{len(self.items) + 1}"
        self.items[fid] = fig.to_json()
        return f'<div class="plot" id="{fid}" data-figure="{e(kind)}"></div>'

    def json(self) -> str:
        body = ",".join(f'"{k}":{v}' for k, v in self.items.items())
        return ("{" + body + "}").replace("</", "<\\/")


def _link(url: str) -> str:
    if url.startswith(("https://", "http://")):
        return f'<a href="{e(url)}" rel="noreferrer">{e(url)}</a>'
    return e(url)


def _ratio(x) -> str:
    if x is None:
        return "top"
    cls = ' class="hot"' if x > 1 + 1e-9 else ""
    return f"<span{cls}>{x:.3g}:1</span>"


def _bisection(r: SpecReport) -> str:
    inv, b = r.inventory, r.degraded_bisection
    text = (f"{format_bandwidth(inv.bisection_bandwidth_Bps)} per direction "
            f"({format_bandwidth(inv.bisection_bandwidth_per_gpu_Bps)} per GPU)")
    if b is None:
        return text
    return (f"<b>{format_bandwidth(b.bandwidth_Bps)}</b> per direction ({format_bandwidth(b.bandwidth_per_gpu_Bps)} "
            f"per GPU) with the failed parts out; {text} without failures")


# what the page leaves out when failed parts cut GPUs apart (SpecReport.cut), said where it is left out
_CUT_LEFT_OUT = ("no route carries a collective over the GPUs it names, so their all_reduce, link loads and curves "
                 "are not drawn; the fabric, its degraded bisection and what still runs are")


def _summary(r: SpecReport) -> str:
    inv = r.inventory
    su = inv.scale_up
    gpu_unit = inv.servers_per_unit * inv.gpus_per_server
    rows = [
        ("GPUs", f"{format_count(inv.num_gpus)} x {e(inv.gpu)}"),
        ("servers", f"{count_noun(inv.num_servers, 'server')} of {count_noun(inv.gpus_per_server, 'GPU')}"),
        ("NVLink domains", f"{count_noun(su.num_domains, 'domain')} of {count_noun(su.gpus_per_domain, 'GPU')}, "
                           f"{format_bandwidth(su.bandwidth_per_gpu_Bps)} per GPU ({e(su.technology)}"
                           f"{', NVLS' if su.nvls else ''})"),
        ("NICs", f"{format_count(inv.num_nics)} x {format_rate(inv.nic_rate_Bps)}, host link "
                 f"{format_bandwidth(inv.host_link_Bps)} ({e(inv.host_link)})"),
        ("fabric", f"{e(inv.kind)}, {e(inv.technology)}, {count_noun(len(inv.tiers), 'tier')}; {e(inv.unit_name)} = "
                   f"{count_noun(inv.servers_per_unit, 'server')} ({count_noun(gpu_unit, 'GPU')}) x "
                   f"{format_count(inv.num_units)}"
                   + (f"; {inv.num_pods} pods of {count_noun(inv.units_per_pod, e(inv.unit_name), e(inv.unit_name) + 's')}"
                      if inv.num_pods > 1 else "")),
        ("switches", f"{format_count(inv.num_switches)} ({e(inv.power_text())})"),
        ("scale-out cables", format_count(inv.num_scale_out_links)),
        ("bisection bandwidth", _bisection(r)),
        ("largest non-blocking group", f"{count_noun(inv.largest_nonblocking_gpus, 'GPU')} "
                                       f"({e(inv.largest_nonblocking_group)})"),
        *(("note", e(n)) for n in inv.notes),
        ("spec", e(r.source)),
    ]
    if r.profile:
        rows.append(("cost profile", e(r.profile) + " (every collective below; topo report --profile to change)"))
    if r.fabric.failures:
        rows.append(("failed parts", "<b>" + e(", ".join(r.fabric.failures)) + "</b> (every estimate below routes "
                     "around them)"))
    if r.cut:
        rows.append(("cut apart", f"<b>{e(r.cut)}</b>: {_CUT_LEFT_OUT} drawn"))
    out = ['<table class="summary">'] + [f'<tr><th class="l">{k}</th><td class="l">{v}</td></tr>' for k, v in rows]
    out.append("</table>")
    tiers = ['<table><tr><th class="l">tier</th><th class="l">model</th><th>switches</th><th>radix</th>'
             '<th>down/up ports</th><th>down capacity</th><th>up capacity</th><th>oversub.</th></tr>']
    for t in inv.tiers:
        tiers.append(f'<tr><td class="l">{e(t.name)}</td><td class="l">{e(t.model or "-")}</td>'
                     f"<td>{format_count(t.num_switches)}</td><td>{t.radix}</td>"
                     f"<td>{t.down_ports_per_switch}/{t.up_ports_per_switch}</td>"
                     f"<td>{format_bandwidth(t.down_capacity_Bps)}</td>"
                     f"<td>{format_bandwidth(t.up_capacity_Bps) if t.up_ports_per_switch else '-'}</td>"
                     f"<td>{_ratio(t.oversubscription)}</td></tr>")
    tiers.append("</table>")
    links = ['<table><tr><th class="l">links</th><th>count</th><th>each</th><th>total</th></tr>']
    for x in inv.links:
        links.append(f'<tr><td class="l">{e(x.name)}</td><td>{format_count(x.num_links)}</td>'
                     f"<td>{format_bandwidth(x.link_bandwidth_Bps)}</td><td>{format_bandwidth(x.capacity_Bps)}</td></tr>")
    links.append("</table>")
    src = ""
    if inv.sources:
        src = '<div class="sources">sources: ' + "<br>".join(_link(s) for s in inv.sources) + "</div>"
    desc = f'<p class="caption">{e(inv.description)}</p>' if inv.description else ""
    tables = f'<div class="tables">{"".join(tiers)}{"".join(links)}</div>'
    return desc + "".join(out) + tables + src


def _bottleneck_table(s: Scenario) -> str:
    if s.loads is None:
        return ""
    size = s.loads.attrs.get("size_bytes")
    row = next((x for x in s.result.results if x.size_bytes == size), None)
    head = ""
    if row and row.bottleneck:
        b = row.bottleneck
        head = (f'<p class="caption">Bottleneck of the estimate at {format_size(size)} ({e(row.algorithm)}/'
                f'{e(row.protocol)}): <b>{e(b.src)} &rarr; {e(b.dst)}</b> ({e(b.level)}, {e(b.direction)}, '
                f'{b.num_links} link{"s" * (b.num_links > 1)}, {b.utilization:.0%} utilized)</p>')
        why = utilization_factors(row, f"{b.src} -> {b.dst}")
        head += f'<p class="caption">{e(why)}</p>' if why else ""
    out = [head, '<table class="hottest"><tr><th class="l">level</th><th class="l">hottest link</th>'
                 '<th>utilization</th><th>bytes carried</th><th>line rate</th><th>links this hot</th></tr>']
    for _, h in s.loads.hottest.iterrows():
        cls = ' class="hot"' if h["utilization"] >= HOT_UTILIZATION else ""
        where = f'{e(h["src"])} &rarr; {e(h["dst"])}' if h["utilization"] > 0 else "(no traffic)"
        out.append(f'<tr><td class="l">{e(h["level"])}</td><td class="l">{where}</td>'
                   f'<td{cls}>{h["utilization"]:.1%}</td><td>{format_size(h["bytes"])}</td>'
                   f'<td>{format_bandwidth(h["bandwidth_Bps"])}</td><td>{format_count(h["tied"])}</td></tr>')
    out.append("</table>")
    return "".join(out)


def _mix_tables(m: MixScenario) -> str:
    r = m.result
    out = ['<table class="hottest"><tr><th class="l">member</th><th class="l">collective</th><th>size</th>'
           '<th>groups x ranks</th><th>alone</th><th>in the mix</th><th>slowdown</th><th class="l">held back by</th></tr>']
    for x in r.members:
        cls = ' class="hot"' if x.slowdown >= HOT_SLOWDOWN else ""
        held = f"{e(x.bottleneck_mix)} ({e(x.bottleneck_mix_level)})" if x.bottleneck_mix else "-"
        out.append(f'<tr><td class="l">{e(x.name)}</td><td class="l">{e(x.collective)} ({e(x.algorithm)})</td>'
                   f"<td>{format_size(x.size_bytes)}</td><td>{format_count(x.num_groups)} x {x.num_ranks}</td>"
                   f"<td>{format_time(x.alone_s)}</td><td>{format_time(x.mix_s)}</td><td{cls}>{x.slowdown:.2f}x</td>"
                   f'<td class="l">{held}</td></tr>')
    out.append("</table>")
    if r.contested:
        out.append('<p class="caption">Links they fight over (summed utilization each would make alone):</p><ul>')
        for c in r.contested[:4]:
            parts = ", ".join(f"{e(k)} {v:.0%}" for k, v in c.members.items())
            more = f" and {c.alike - 1:,} more alike" if c.alike > 1 else ""
            out.append(f"<li>{e(c.src)} &rarr; {e(c.dst)} ({e(c.level)}, {e(c.direction)}){more}: "
                       f"<b>{c.demand:.0%}</b> = {parts}</li>")
        out.append("</ul>")
    else:
        out.append('<p class="caption">No link is asked for more than its capacity: the members do not slow each '
                   "other.</p>")
    return "".join(out)


def _grid(cells: Sequence[str], columns: int, template: str | None = None) -> str:
    style = f"grid-template-columns: {template or f'repeat({max(columns, 1)}, minmax(0, 1fr))'};"
    return f'<div class="grid" style="{style}">' + "".join(cells) + "</div>"


def _cell(title: str, body: str) -> str:
    return f'<div class="cell"><h3>{title}</h3>{body}</div>'


def _comparison(reports: Sequence[SpecReport], figs: _Figures) -> str:
    head = ('<table><tr><th class="l">spec</th><th>GPUs</th><th>switches</th><th>scale-out cables</th>'
            '<th>bisection per GPU</th><th>top oversub.</th><th>busbw, cluster, 1 GiB</th>'
            '<th>busbw, cluster, 16 GiB</th><th>busbw, pod or unit, 1 GiB</th>'
            '<th>all_reduce across the top tier, 1 GiB</th><th>alltoall, all GPUs, 1 GiB</th></tr>')
    rows = [head]

    def busbw(s: Scenario | None, size: int) -> str:
        if s is None:
            return "-"
        row = next((x for x in s.result.results if x.size_bytes == size), None)
        return f"{row.busbw_GBps:.1f} GB/s" if row else "-"

    curves = {}
    for r in reports:
        inv = r.inventory
        cl = next((s for s in r.scenarios if s.key == "cluster"), None)  # None: cut apart (SpecReport.cut)
        second = next((s for s in r.scenarios if s.key != "cluster"), None)
        worst = max((t.oversubscription or 1 for t in inv.tiers), default=1)
        rows.append(f'<tr><td class="l">{e(inv.name)}</td><td>{format_count(inv.num_gpus)}</td>'
                    f"<td>{format_count(inv.num_switches)}</td><td>{format_count(inv.num_scale_out_links)}</td>"
                    f"<td>{format_bandwidth(r.bisection_per_gpu_Bps)}</td><td>{_ratio(worst)}</td>"
                    f"<td>{busbw(cl, 2**30)}</td><td>{busbw(cl, 16 * 2**30)}</td><td>{busbw(second, 2**30)}</td>"
                    f"{_top_tier_cells(r)}</tr>")
        if cl:
            curves[f"{inv.name}, cluster"] = cl.result
        if second:
            curves[f"{inv.name}, {second.key}"] = second.result
    rows.append("</table>")
    rows.append('<p class="caption">Across the top tier, as <code>topo plan</code> compares designs: an all_reduce '
                "over every GPU in communicators of one GPU per block under the top tier (pod, island), so every ring "
                "edge crosses it, and one all-to-all over every GPU, 1 - 1/blocks of whose bytes cross it; each with "
                "the level that binds it. The cluster's own all_reduce is often bound at the NICs, so two designs "
                "that differ only above the pods differ here and in the bisection. &quot;-&quot;: fewer than three "
                "tiers or a single block.</p>")
    return "".join(rows) + figs.div(F.busbw_comparison(curves), "comparison")


def _top_tier_cells(r: SpecReport) -> str:
    """The busbw of the all_reduce and the all-to-all across the top tier, with the level bounding each."""
    n = r.top_tier
    if n is None or n.all_reduce_busbw_GBps is None:
        return "<td>-</td><td>-</td>"
    blocks = f"{count_noun(n.num_blocks, n.block_name)} of {format_count(n.gpus_per_block)} GPUs"
    return (f"<td>{n.all_reduce_busbw_GBps:.1f} GB/s<br>bound by {e(n.all_reduce_bottleneck)}<br>{e(blocks)}</td>"
            f"<td>{n.alltoall_busbw_GBps:.1f} GB/s<br>bound by {e(n.alltoall_bottleneck)}</td>")


def _section(sid: str, title: str, lead: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{title}</h2><p class="lead">{lead}</p>{body}</section>'


def render_page(reports: Sequence[SpecReport], plans: Sequence | None = None, trains: tuple | None = None,
                works: Sequence[str] | None = None) -> str:
    """The whole HTML document for one or more specs; ``plans`` (:class:`topo.plan.PlanResult`, one per spec)
    add the planner's section (:func:`topo.report.plan_figures.plan_section`), ``works`` each plan's job's text
    in it (the caller's words: its cost per million tokens, time to train and energy; "" for none)."""
    figs = _Figures()  # figures are numbered in the order they are made: the sections' order below
    names = [e(r.inventory.name) for r in reports]
    nav, sections = _fabric_sections(reports, names, figs)
    load_cells, curve_cells = _scenario_cells(reports, names, figs)
    load_cells += _mix_cells(reports, names, figs)
    sections += _load_and_curve_sections(load_cells, curve_cells, len(reports))
    nav += [("fabric", "Fabric"), ("oversubscription", "Oversubscription"), ("loads", "Link loads"),
            ("curves", "Collective curves")]
    if plans:
        sections.append(plan_section(plans, figs.div, works))
        nav.append(("plan", "Plan"))
    if trains:
        sections.append(train_section(trains[0], trains[1], figs.div))
        nav.append(("train", "Training job"))
    return _document(reports, names, nav, sections, figs)


def _fabric_sections(reports: Sequence[SpecReport], names: list[str], figs) -> tuple[list, list[str]]:
    """The navigation so far, and the summary, comparison (of several specs), fabric and oversubscription sections."""
    n = len(reports)
    sections = []
    nav = [("summary", "Summary")]
    if n > 1:
        nav.append(("comparison", "Comparison"))
        sections.append(_section("comparison", "Comparison",
                                 "Switches, cables, bisection and the busbw of a data-parallel all_reduce "
                                 "(fastest algorithm per size) on each cluster, and of an all_reduce and an "
                                 "all-to-all across the tier above the pods.", _comparison(reports, figs)))
    sections.insert(0, _section("summary", "Summary", "What each cluster is made of, as <code>topo describe</code> "
                                "prints it.", _grid([_cell(nm, _summary(r) + figs.div(F.inventory_figure(r.inventory), "inventory"))
                                       for nm, r in zip(names, reports)], n)))
    sections.append(_section(
        "fabric", "Fabric", "The fabric as layers: GPUs grouped by unit, leaf switches one per rail, a spine group "
        "per pod, core planes above, then the groups of every further tier (islands' top tier, a 5th); line width grows with the capacity of one bundle, so a thin tier looks thin. "
        "Large clusters show a few pods and stand for the rest with an ellipsis. Hover a group or a bundle's "
        "diamond for its counts and capacities.",
        _grid([_cell(nm, figs.div(F.fabric_figure(r.fabric, r.inventory,
                                                   layer_drawing(r.fabric, max_pods=3 if n == 1 else 2)), "fabric"))
               for nm, r in zip(names, reports)], n)))
    sections.append(_section(
        "oversubscription", "Oversubscription per tier", "Downlink against uplink capacity of each switch tier "
        "(per direction). A ratio above 1:1 (in red) means the tier can send up only that fraction of what "
        "arrives from below.",
        _grid([_cell(nm, figs.div(F.oversubscription_figure(r.inventory), "oversubscription"))
               for nm, r in zip(names, reports)], n)))
    return nav, sections


def _scenario_cells(reports: Sequence[SpecReport], names: list[str], figs) -> tuple[list[str], list[str]]:
    """The link-load and curve cells of each scenario: one row per scenario, one column per spec (the same view
    side by side)."""
    n = len(reports)
    load_cells, curve_cells = [], []
    for i in range(max(len(r.scenarios) for r in reports)):
        for nm, r in zip(names, reports):
            if i >= len(r.scenarios):
                load_cells.append('<div class="cell"></div>')
                curve_cells.append('<div class="cell"></div>')
                continue
            s = r.scenarios[i]
            label = f"{nm}, {e(s.label)}" if n > 1 else e(s.label)
            if s.loads is not None:
                plots = [figs.div(F.link_load_distribution(s.loads, r.fabric), "loads"),
                         figs.div(F.link_load_heatmap(s.loads, r.fabric), "heatmap")]
                plots = _grid(plots, 2, "2fr 3fr") if n == 1 else "".join(plots)
                load_cells.append(_cell(f"{label}: all_reduce of {format_size(s.loads.attrs['size_bytes'])}",
                                        plots + _bottleneck_table(s)))
            else:
                load_cells.append(_cell(label, '<p class="caption">No link loads kept for this scenario.</p>'))
            note = ""
            if s.unavailable:
                note = ('<p class="caption">Not drawn: ' + "; ".join(f"<b>{e(k)}</b>: {e(v)}"
                                                                    for k, v in s.unavailable.items()) + "</p>")
            curve_cells.append(_cell(f"{label}: {e(s.result.placement)}",
                                     figs.div(F.collective_curves(s.result, s.extra), "curves") + note))
    for nm, r in zip(names, reports):  # a row of its own: the scopes failed parts cut apart
        if any(x.cut for x in reports):
            cut = _cell(f"{nm}: cut apart", f'<p class="caption">{e(r.cut)}: {_CUT_LEFT_OUT} drawn.</p>') \
                if r.cut else '<div class="cell"></div>'
            load_cells.append(cut)
            curve_cells.append(cut)
    return load_cells, curve_cells


def _mix_cells(reports: Sequence[SpecReport], names: list[str], figs) -> list[str]:
    """The link-load cells of the traffic mixes, one row each."""
    n = len(reports)
    cells = []
    for i in range(max(len(r.mixes) for r in reports)):
        for nm, r in zip(names, reports):
            if i >= len(r.mixes):
                cells.append(_cell(nm, f'<p class="caption">{e(r.mix_note)}</p>') if i == 0 and r.mix_note
                             else '<div class="cell"></div>')
                continue
            m = r.mixes[i]
            label = f"{nm}, traffic mix {e(m.name)}" if n > 1 else f"traffic mix {e(m.name)}"
            plots = [figs.div(F.link_load_distribution(m.loads, r.fabric), "loads"),
                     figs.div(F.link_load_heatmap(m.loads, r.fabric), "heatmap")]
            plots = _grid(plots, 2, "2fr 3fr") if n == 1 else "".join(plots)
            cells.append(_cell(f"{label}: {len(m.result.members)} collectives at once", plots + _mix_tables(m)))
    return cells


def _load_and_curve_sections(load_cells: list[str], curve_cells: list[str], n: int) -> list[str]:
    """The link loads and collective curves sections around their cells."""
    return [_section(
        "loads", "Link loads", "Utilization of every directed link (bytes carried over the collective's time, as a "
        "fraction of its line rate) under a data-parallel all_reduce with NCCL's algorithm choice: on the whole "
        "cluster, and on the first pod's GPUs; then under traffic mixes, several collectives at once (bundled "
        "<code>topo estimate --traffic</code> files): tensor parallelism in every NVLink domain with data "
        "parallelism and pipeline sends across pods, and an all-to-all across pods, where a tier oversubscribed "
        "above the pods shows. Boxes: min, quartiles, max and mean (dashed) per link level; the grid: the hottest "
        "link of each level in each pod; the tables name the hottest links, each mix member's time alone and in "
        "the mix, and the links they fight over.", _grid(load_cells, n)),
        _section(
        "curves", "Collective curves", "Time and bus bandwidth against message size, 8 B to 16 GiB, per algorithm "
        "(best protocol for each), as nccl-tests prints them; <i>auto</i> is the fastest per size. busbw = "
        "size / time x 2(n-1)/n for all_reduce.", _grid(curve_cells, n))]


def _document(reports: Sequence[SpecReport], names: list[str], nav: list, sections: list[str], figs) -> str:
    """The HTML document around the sections: head (plotly.js inlined), header, navigation, footer, figures."""
    title = "topo report: " + " vs ".join(names)
    header = (f"<header><h1>{title}</h1><p>{' | '.join(e(r.inventory.description or r.inventory.name) for r in reports)}"
              f"</p><p>Modelled by topo {e(__version__)}; units: GB = 1e9 bytes, GiB = 2<sup>30</sup> bytes, "
              f"bandwidths per direction.</p>{colour_legend(reports)}</header>")
    navbar = "<nav>" + "".join(f'<a href="#{k}">{v}</a>' for k, v in nav) + "</nav>"
    footer = (f"<footer>Self-contained: plotly.js {e(_plotlyjs_version())} is inlined, the page makes no network "
              f"request. Made with topo {e(__version__)} and plotly {e(plotly.__version__)}.</footer>")
    return html_page(title, [header, navbar, "<main>", "".join(sections), "</main>", footer], figs)


def html_page(title: str, body: Sequence[str], figs) -> str:
    """A self-contained HTML document of topo's (the report's, a region's and a sweep's page): the signed head with
    its content security policy, viewport, ``title`` (escaped already), the page's CSS and plotly.js inlined; then
    ``body``'s parts; then ``figs``' figures and the script that draws them.

    Parameters
    ----------
    title : str
        The page's title, HTML-escaped.
    body : sequence of str
        The body's HTML, in order (header, sections, footer).
    figs : _Figures
        The page's figures, drawn into their ``div`` elements by the closing script.

    Returns
    -------
    str
    """
    return "".join([
        f"<!DOCTYPE html>\n<!-- {SIGNATURE} {e(__version__)} -->\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title><style>{_CSS}</style>",
        f"<script>{get_plotlyjs()}</script></head><body>",
        *body,
        f'<script type="application/json" id="topo-figures">{figs.json()}</script>',
        f"<script>{_SCRIPT % json.dumps(_CONFIG)}</script>",
        "</body></html>\n",
    ])


def colour_legend(reports: Sequence[SpecReport]) -> str:
    """What the page's colours mean, one line: a colour per tier (the same in every figure, the cables into a tier
    from below in its colour, :mod:`topo.report.style`), and red for what needs a look (its thresholds).

    Parameters
    ----------
    reports : sequence of SpecReport
        The page's specs: a tier's swatch names the tiers of that depth in each (``leaf/spine`` where they differ).

    Returns
    -------
    str
        One HTML paragraph (``<p class="legend">``).
    """
    depth = max(len(r.inventory.tiers) for r in reports)
    tiers = []
    for i in range(depth):
        names = dict.fromkeys(r.inventory.tiers[i].name for r in reports if i < len(r.inventory.tiers))
        tiers.append((tier_color(i), "/".join(e(n) for n in names)))
    swatches = [(GPU_COLOR, "GPUs and NVLink"), (PCIE_COLOR, "PCIe"), *tiers]
    items = ", ".join(f'<span class="swatch" style="background:{c}"></span>{label}' for c, label in swatches)
    return (f'<p class="legend">Colours: {items}: a switch tier and the cables into it from below share one '
            f'colour in every figure; <span class="swatch" style="background:{ALERT_COLOR}"></span>red marks what '
            f"needs a look: a tier oversubscribed above 1:1, a link at {HOT_UTILIZATION:.0%} utilization or more, a "
            f"traffic-mix member slowed {HOT_SLOWDOWN:g}x or more; the heatmaps' colour is the utilization on "
            f"the scale beside each.</p>")


def _plotlyjs_version() -> str:
    head = get_plotlyjs()[:200]
    start = head.find("plotly.js v")
    return head[start + 11:].split()[0] if start >= 0 else "?"


def write_page(reports: Sequence[SpecReport], path, plans: Sequence | None = None, trains: tuple | None = None, *,
               works: Sequence[str] | None = None, force: bool = False, inputs=(), **output) -> int:
    """Write the page to ``path`` whole or not at all, never over a spec it shows nor, unless ``force``, over a
    file topo did not write (:func:`topo.atomic.open_output`); returns its size in bytes."""
    inputs = [*inputs, *(r.spec.input_path for r in reports if r.spec.input_path)]
    return write_bytes(path, render_page(reports, plans, trains, works).encode("utf-8"), inputs=inputs, force=force,
                       **output)
