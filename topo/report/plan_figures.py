"""The planner's part of the report: power, capex and the cost of ownership as stacked bars, the floor, optics,
economics and goodput figures side by side, the bill of materials, goodput against the checkpoint interval, and
the sourced inputs (floor, cooling, economics, checkpoint) each plan used. Each figure function takes :class:`topo.plan.PlanResult` objects and draws what
they hold (nothing is recomputed); :func:`plan_section` is the HTML section the page can include.

>>> from topo.plan import plan
>>> from topo.report import plan_figures
>>> r = plan("dgx-h100-superpod", collectives=False)
>>> [t.name for t in plan_figures.power_figure([r]).data][:3]
['GPUs', 'rest of servers', 'switches']
"""

from __future__ import annotations

import html
from typing import Callable, Sequence

import plotly.graph_objects as go

from ..plan.result import PlanResult
from ..units import format_count, format_in, in_unit
from .style import base_layout, esc

__all__ = ["power_figure", "capex_figure", "ownership_figure", "goodput_figure", "tornado_figure", "deployment_figure",
           "bom_table_html", "summary_table_html", "inputs_table_html", "price_ranges_table_html", "plan_section"]

_PARTS = ("#4C72B0", "#8C8C8C", "#DD8452", "#C44E52", "#55A868", "#8172B3", "#937860", "#DA8BC3", "#CCB974",
          "#64B5CD")  # one colour per part: capex has 8 parts, ownership 5


def power_figure(results: Sequence[PlanResult]) -> go.Figure:
    """IT power by part plus the facility overhead (PUE), MW, one stacked bar per design."""
    names = [esc(r.name) for r in results]
    fig = go.Figure()
    parts = list(results[0].power.parts()) + ["facility overhead (PUE)"]
    for i, part in enumerate(parts):
        ys = [in_unit(r.power.parts().get(part, r.power.facility_power_W - r.power.it_power_W), "MW") for r in results]
        fig.add_trace(go.Bar(x=names, y=ys, name=part, marker_color=_PARTS[i % len(_PARTS)],
                             hovertemplate=f"{esc(part)}: %{{y:,.2f}} MW<extra>%{{x}}</extra>"))
    fig.update_layout(**base_layout("Power: IT by part, and the facility's overhead", height=420))
    fig.update_layout(barmode="stack", yaxis_title="MW")
    return fig


def _range_bars(results: Sequence[PlanResult], line: str) -> dict:
    """Error bars from the expected total to its low and high ends ($M), for the top trace of a stacked bar."""
    lo = [in_unit(r.costs.line(line)[1] - r.costs.line(line)[0], "$M") for r in results]
    hi = [in_unit(r.costs.line(line)[2] - r.costs.line(line)[1], "$M") for r in results]
    return dict(type="data", symmetric=False, array=hi, arrayminus=lo, color="#333333", thickness=1.5, width=8)


def capex_figure(results: Sequence[PlanResult]) -> go.Figure:
    """Capital cost by part, $M, one stacked bar per design, with the total's low-high range as an error bar
    (every price at its low or high end together)."""
    names = [esc(r.name) for r in results]
    fig = go.Figure()
    parts = list(results[0].capex.parts())
    for i, part in enumerate(parts):
        ys = [in_unit(r.capex.parts()[part], "$M") for r in results]
        extra = dict(error_y=_range_bars(results, "capex_usd")) if i == len(parts) - 1 else {}
        fig.add_trace(go.Bar(x=names, y=ys, name=part, marker_color=_PARTS[i % len(_PARTS)],
                             hovertemplate=f"{esc(part)}: $%{{y:,.1f}}M<extra>%{{x}}</extra>", **extra))
    fig.update_layout(**base_layout("Capex by part; bar: every price at its low / high end", height=420))
    fig.update_layout(barmode="stack", yaxis_title="$M")
    return fig


def ownership_figure(results: Sequence[PlanResult]) -> go.Figure:
    """Total cost of ownership by part (depreciation, energy, maintenance, staff and site opex), $M, one stacked
    bar per design; the hover gives the cost per GPU-hour."""
    names = [esc(r.name) for r in results]
    fig = go.Figure()
    parts = list(results[0].ownership.parts())
    for i, part in enumerate(parts):
        ys = [in_unit(r.ownership.parts()[part], "$M") for r in results]
        per_h = [r.ownership.cost_per_gpu_hour_usd for r in results]
        extra = dict(error_y=_range_bars(results, "tco_usd")) if i == len(parts) - 1 else {}
        fig.add_trace(go.Bar(x=names, y=ys, name=part, marker_color=_PARTS[i % len(_PARTS)], customdata=per_h,
                             hovertemplate=f"{esc(part)}: $%{{y:,.1f}}M (TCO: $%{{customdata:.2f}} per GPU-hour)"
                                           "<extra>%{x}</extra>", **extra))
    years = results[0].ownership.years
    fig.update_layout(**base_layout(f"Cost of ownership over {years:g} years by part; bar: every price at its low / "
                                    "high end", height=420))
    fig.update_layout(barmode="stack", yaxis_title="$M")
    return fig


def goodput_figure(results: Sequence[PlanResult]) -> go.Figure:
    """Goodput against the checkpoint interval (log x), one line per design, the renewal optimum marked."""
    fig = go.Figure()
    for r in results:
        c = r.reliability.goodput_vs_interval
        fig.add_trace(go.Scatter(x=[in_unit(t, "min") for t in c["interval_s"]], y=c["goodput"], mode="lines",
                                 name=esc(r.name), hovertemplate="every %{x:.3g} min: goodput %{y:.1%}<extra></extra>"))
        fig.add_trace(go.Scatter(x=[in_unit(r.reliability.checkpoint_interval_s, "min")], y=[r.reliability.goodput],
                                 mode="markers", marker=dict(size=9, symbol="diamond"), showlegend=False,
                                 name=f"{esc(r.name)}: optimum interval",
                                 hovertemplate="optimum interval %{x:.3g} min: goodput %{y:.1%}<extra></extra>"))
    fig.update_layout(**base_layout("Goodput against the checkpoint interval", height=420))
    fig.update_xaxes(type="log", title="checkpoint interval (min)")
    fig.update_yaxes(title="goodput", tickformat=".0%", rangemode="tozero")
    return fig


def tornado_figure(results: Sequence[PlanResult], top: int = 8) -> go.Figure:
    """Cost per GPU-hour with each price alone at its low and high end (``PlanResult.price_sensitivity``): one
    horizontal bar per price and design, widest first, around the expected cost."""
    fig = go.Figure()
    for r in results:
        rows = list(reversed(r.price_sensitivity[:top]))  # the widest on top
        if not rows:
            continue
        labels = [f"{esc(r.name)}: {esc(x['key'])}" if len(results) > 1 else esc(x["key"]) for x in rows]
        exp = rows[0]["expected"]
        for end, color in (("low", "#4c78a8"), ("high", "#e45756")):
            fig.add_trace(go.Bar(y=labels, x=[x[end] - exp for x in rows], base=exp, orientation="h",
                                 name=f"{esc(r.name)}: price at its {end} end", marker_color=color,
                                 customdata=[x[end] for x in rows],
                                 hovertemplate="%{y}: $%{customdata:.2f} per GPU-hour<extra></extra>"))
    fig.update_layout(**base_layout("Cost per GPU-hour, each price alone at its low / high end", height=420),
                      barmode="overlay")
    fig.update_xaxes(title="cost per GPU-hour (USD)", tickprefix="$")
    return fig


def deployment_figure(results: Sequence[PlanResult]) -> go.Figure:
    """The build quarter by quarter (``PlanResult.deployment``): capex spent in each quarter ($M, bars) and the GPUs
    online at its end (line, right axis), one colour per design."""
    fig = go.Figure()
    for i, r in enumerate(results):
        if r.deployment is None:
            continue
        qs, color = r.deployment.quarters, _PARTS[i % len(_PARTS)]
        x = [q.label for q in qs]
        fig.add_trace(go.Bar(x=x, y=[in_unit(q.capex_usd, "$M") for q in qs], name=f"{esc(r.name)}: capex in the quarter",
                             marker_color=color, opacity=0.6,
                             hovertemplate="%{x}: $%{y:,.1f}M spent<extra></extra>"))
        fig.add_trace(go.Scatter(x=x, y=[q.gpus_online for q in qs], yaxis="y2", mode="lines+markers",
                                 name=f"{esc(r.name)}: GPUs online", line=dict(color=color),
                                 customdata=[in_unit(q.it_power_W, "MW") for q in qs],
                                 hovertemplate="%{x}: %{y:,} GPUs online, %{customdata:,.1f} MW IT<extra></extra>"))
    fig.update_layout(**base_layout("Build by quarter: capex as halls come online, and GPUs online", height=420))
    fig.update_layout(barmode="group", yaxis_title="$M in the quarter",
                      yaxis2=dict(title="GPUs online", overlaying="y", side="right", rangemode="tozero"))
    return fig


def bom_table_html(r: PlanResult) -> str:
    """The bill of materials as an HTML table (every string escaped)."""
    e = html.escape
    rows = ['<table><tr><th class="l">kind</th><th class="l">item</th><th class="l">where</th><th>count</th>'
            '<th>cost ($M)</th></tr>']
    for s in r.bom.switches:
        rows.append(f'<tr><td class="l">switch</td><td class="l">{e(s.model)}</td><td class="l">{e(s.tier)}</td>'
                    f"<td>{format_count(s.count)}</td><td>{in_unit(s.count * s.price_usd_each, '$M'):,.1f}</td></tr>")
    for t in r.bom.transceivers:
        rows.append(f'<tr><td class="l">transceiver</td><td class="l">{e(t.type)}</td><td class="l">{e(t.at)}</td>'
                    f"<td>{format_count(t.count)}</td><td>{in_unit(t.count * t.price_usd_each, '$M'):,.1f}</td></tr>")
    for c in r.bom.cables:
        rows.append(f'<tr><td class="l">cable</td><td class="l">{e(c.type)} {e(c.length_class)}</td>'
                    f'<td class="l">{e(c.level)}</td><td>{format_count(c.count)}</td>'
                    f"<td>{in_unit(c.price_usd, '$M'):,.1f}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def _musd(v: float) -> str:
    return f"${in_unit(v, '$M'):,.0f}M"


def _span(r: PlanResult, line: str, fmt) -> str:
    """Expected (low-high) of a cost line."""
    low, expected, high = r.costs.line(line)
    return f"{fmt(expected)} ({fmt(low)}-{fmt(high)})"


def summary_table_html(results: Sequence[PlanResult]) -> str:
    """The floor, optics, economics and goodput figures, one column per design (every string escaped)."""
    e = html.escape

    def mins(x):
        return "-" if x == float("inf") else format_in(x, "min", ",.2f")

    rows = [
        ("halls", lambda r: f"{r.floor.num_halls} ({r.floor.pods_per_hall} pods each, limit: "
                            f"{r.floor.pods_per_hall_limit})"),
        ("floor area", lambda r: f"{r.floor.area_m2:,.0f} m2" + (
            f" + storage room {r.storage.floor_m2:,.0f} m2" if r.storage is not None else "")),
        ("racks (server / network)", lambda r: f"{format_count(r.floor.server_racks)} / "
                                               f"{format_count(r.floor.network_racks)}"),
        ("cooling", lambda r: f"{r.floor.cooling.replace('_', ' ')} ({format_in(r.floor.rack_load_W, 'kW', '.1f')} racks)"),
        ("longest link", lambda r: ", ".join(f"{k} {v:,.0f} m" for k, v in r.floor.longest_m.items())),
        ("NIC-side optical modules", lambda r: format_count(r.nic_modules)),
        ("first job-stopping optics failure", lambda r: mins(r.reliability.first_job_optics_failure_s)),
        ("interruptions per day", lambda r: f"{r.reliability.interruptions_per_day:.1f} ("
                                            + ("the job's GPUs; " if r.reliability.interruptions_of == "job" else "")
                                            + f"optics: {r.reliability.optics_in_interruptions})"),
        ("goodput", lambda r: f"{100 * r.reliability.goodput:.1f}% ({r.reliability.checkpoint_mode} checkpoints)"
                              + (f", effective{r.training_gpus_words()}" if r.training_gpus_words() else "")),
        ("capex", lambda r: f"{_span(r, 'capex_usd', _musd)} (facility per W of "
                            f"{'IT x PUE' if r.capex.facility_basis == 'facility' else 'IT'})"),
        ("build (quarters: GPUs online)", lambda r: "-" if r.deployment is None else ", ".join(
            f"{q.label}: {format_count(q.gpus_online)}" for q in r.deployment.quarters)),
        ("storage and front-end capex", lambda r: _musd(r.capex.storage_usd + r.capex.frontend_usd)),
        ("storage (sized)", lambda r: "-" if r.storage is None else (
            f"{format_count(r.storage.servers)} servers ({r.storage.sizing}, limit: {r.storage.limit}), "
            f"{format_in(r.storage.write_Bps, 'GB/s', ',.1f')} write, {format_count(r.storage.racks)} racks, "
            f"{format_in(r.storage.power_W, 'MW', ',.2f')}")),
        ("power (nameplate / average)", lambda r: f"{format_in(r.power.it_power_W, 'MW', ',.1f')} IT, "
                                                  f"{format_in(r.power.facility_power_W, 'MW', ',.1f')} facility at PUE "
                                                  f"{r.power.pue:g} ({r.power.pue_source}); "
                                                  f"{format_in(r.power.average_facility_power_W, 'MW', ',.1f')} on average "
                                                  f"(servers at {100 * r.power.server_average_fraction:.1f}%)"),
        ("water per year", lambda r: f"{format_in(r.power.water_per_year_L, 'million L', ',.1f')} at WUE "
                                     f"{r.power.wue_L_per_kWh:g} L/kWh"),
        ("energy cost per year", lambda r: _span(r, "energy_cost_per_year_usd", _musd)),
        ("TCO", lambda r: f"{_span(r, 'tco_usd', _musd)} over {r.ownership.years:g} years"
                          + (f"; {r.storage_sized_for()}" if r.storage is not None else "")),
        ("cost per GPU-hour", lambda r: _span(r, "cost_per_gpu_hour_usd", lambda v: f"${v:,.2f}")),
        ("CO2 per year", lambda r: f"{format_in(r.ownership.co2_per_year_kg, 'kt', ',.0f')} at "
                                   f"{r.ownership.grid_kg_co2_per_kWh:g} kg/kWh"),
    ]
    head = "".join(f"<th>{e(r.name)}</th>" for r in results)
    body = "".join(f'<tr><td class="l">{e(label)}</td>' + "".join(f"<td>{e(f(r))}</td>" for r in results) + "</tr>"
                   for label, f in rows)
    return f'<table><tr><th class="l"></th>{head}</tr>{body}</table>'


def inputs_table_html(r: PlanResult) -> str:
    """The sourced inputs a plan used (floor, cooling, NIC optics, economics, checkpoint), escaped."""
    e = html.escape
    rows = ['<table><tr><th class="l">figure</th><th>value</th><th class="l">status</th>'
            '<th class="l">source</th></tr>']
    for f in r.inputs:
        v = f["value"]
        value = f"{v:,.6g}" if isinstance(v, (int, float)) else str(v)
        rows.append(f'<tr><td class="l">{e(f["key"])}</td><td>{e(value)}</td><td class="l">{e(f["status"])}</td>'
                    f'<td class="l">{e(f["source"])}</td></tr>')
    rows.append("</table>")
    return "".join(rows)


def price_ranges_table_html(r: PlanResult) -> str:
    """The prices a plan used with their low, expected and high ends, each end's status and source (escaped)."""
    e = html.escape
    rows = ['<table><tr><th class="l">price</th><th>low</th><th>expected</th><th>high</th>'
            '<th class="l">sources (low; expected; high)</th></tr>']
    for p in r.costs.prices:
        src = "; ".join(f"{p[f'{end}_status']}: {p[f'{end}_source']}" for end in ("low", "expected", "high"))
        rows.append(f'<tr><td class="l">{e(p["key"])}</td><td>{p["low"]:,.6g}</td><td>{p["expected"]:,.6g}</td>'
                    f'<td>{p["high"]:,.6g}</td><td class="l">{e(src)}</td></tr>')
    rows.append("</table>")
    return "".join(rows)


def plan_section(results: Sequence[PlanResult], div: Callable[[go.Figure, str], str],
                 works: Sequence[str] | None = None) -> str:
    """The report's "Plan" section: ``div(figure, kind)`` places a figure (the page's own helper); ``works``, one
    text per result ("" for none), each design's job: its cost per million tokens, time to train and energy
    (:attr:`PlanResult.time_to_train`, :attr:`PlanResult.energy_to_train`), as ``topo plan`` words them."""
    e = html.escape
    n = len(results)
    # the heading names no command: the text is the caller's (topo report's job and topo plan's each word their own)
    jobs = "".join(f'<div class="cell"><h3>{e(r.name)}: the job</h3>'
                   f'<pre style="overflow-x: auto">{e(w)}</pre></div>' for r, w in zip(results, works or []) if w)
    boms = "".join(f'<div class="cell"><h3>{e(r.name)}: bill of materials</h3>{bom_table_html(r)}</div>'
                   for r in results)
    figs = "".join(f'<div class="cell">{div(f, kind)}</div>' for f, kind in
                   ((power_figure(results), "plan-power"), (capex_figure(results), "plan-capex"),
                    (ownership_figure(results), "plan-ownership"), (goodput_figure(results), "plan-goodput"),
                    (tornado_figure(results), "plan-tornado"), (deployment_figure(results), "plan-deployment")))
    sources = "".join(f"<details><summary>{e(r.name)}: the floor, cooling, economics and checkpoint inputs used, "
                      f"with their sources</summary>{inputs_table_html(r)}</details>"
                      f"<details><summary>{e(r.name)}: the prices used, low / expected / high, with the source of "
                      f"each end</summary>{price_ranges_table_html(r)}</details>" for r in results)
    lead = ("Power, capex and goodput from <code>topo plan</code>: the catalog's values (each with its source) "
            "applied to each cluster's bill of materials, as laid out on the floor; every cost also at every price's "
            "low and high end (the error bars and the ranges in brackets).")
    grid = 'style="grid-template-columns: repeat({}, minmax(0, 1fr));"'
    return (f'<section id="plan"><h2>Plan: power, cost, optics, goodput</h2><p class="lead">{lead}</p>'
            f'<div class="grid" {grid.format(2)}>{figs}</div>'
            f'<div class="cell"><h3>Floor, optics, economics and goodput</h3>{summary_table_html(results)}</div>'
            f'{jobs}<div class="grid" {grid.format(max(n, 1))}>{boms}</div>{sources}</section>')
