"""Report figures of a training job (``topo train``): step-time breakdown, memory per GPU, link loads per tier.

Each function draws what the library's results hold (:class:`topo.training.result.StepResult`, the frame of
:func:`topo.training.tier_bytes.tier_bytes`) and computes no time or load itself. Several results (layouts, or one
layout on several fabrics) become bars side by side.

>>> import topo
>>> from topo.training.parallel import make_layout
>>> from topo.training.model import load_model
>>> from topo.training.step import estimate_step
>>> f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
>>> r = estimate_step(f, load_model("llama3-8b"), make_layout(tp=8, dp=128, global_batch=256))
>>> [t.name for t in step_breakdown_figure([r]).data][:3]
['compute', 'bubble', 'optimizer']
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from ..training.result import BREAKDOWN_KEYS, SHOWN_WHERE_RUN, StepResult
from ..training.timeline import LANES
from ..units import format_in, format_time, in_unit
from .style import ALERT_COLOR, base_layout, esc

__all__ = ["step_breakdown_figure", "memory_figure", "tier_loads_figure", "timeline_figure", "train_figures",
           "train_section"]

_COLORS = {"compute": "#009E73", "bubble": "#BBBBBB", "tp": "#0072B2", "cp": "#56B4E9", "pp": "#E69F00",
           "dp": "#D55E00", "ep": "#CC79A7", "weights": "#0072B2", "gradients": "#E69F00", "optimizer": "#CC79A7",
           "activations": "#009E73", "buffers": "#999933", "reserved": "#882255",
           "nccl": "#44AA99", "ep_buffers": "#332288", "nvls": "#AA4499", "fp8_amax": "#F0E442",
           "fp8_weight_cast": "#661100"}


def _label(r: StepResult) -> str:
    L = r.layout
    return f"{r.model} {r.spec}<br>tp{L['tp']} cp{L['cp']} pp{L['pp']} dp{L['dp']} ep{L['ep']}"


def step_breakdown_figure(results: Sequence[StepResult]) -> go.Figure:
    """Stacked horizontal bars: compute, bubble and each dimension's exposed communication, per result; the FP8
    lines (:data:`~topo.training.result.SHOWN_WHERE_RUN`) only where a result has them."""
    fig = go.Figure()
    names = [_label(r) for r in results]
    for k in BREAKDOWN_KEYS:
        vals = [r.breakdown_s[k] for r in results]
        if k in SHOWN_WHERE_RUN and not any(vals):
            continue
        hover = [esc(f"{k}: {format_time(v)} ({v / r.step_time_s:.1%} of the step)") for v, r in zip(vals, results)]
        fig.add_trace(go.Bar(name=k, y=names, x=vals, orientation="h", marker_color=_COLORS[k],
                             hovertext=hover, hoverinfo="text"))
    fig.update_layout(**base_layout("Step time: compute, bubble and exposed communication", 200 + 80 * len(results)),
                      barmode="stack", xaxis_title="seconds per step")
    return fig


def memory_figure(results: Sequence[StepResult]) -> go.Figure:
    """Stacked bars of memory per GPU (weights, gradients, optimizer, activations, gathered buffers, the process's
    own reserve, NCCL's channel buffers, the flex dispatcher's buffer, NCCL's NVLS buffers) against the GPU's capacity."""
    fig = go.Figure()
    names = [_label(r) for r in results]
    for k in ("weights", "gradients", "optimizer", "activations", "buffers", "reserved", "nccl", "ep_buffers", "nvls"):
        vals = [in_unit(getattr(r.memory, f"{k}_bytes"), "GB") for r in results]
        fig.add_trace(go.Bar(name=k, y=names, x=vals, orientation="h", marker_color=_COLORS[k]))
    for r, n in zip(results, names):
        fig.add_trace(go.Scatter(x=[in_unit(r.memory.capacity_bytes, "GB")] * 2, y=[n, n], mode="markers",
                                 marker=dict(symbol="line-ns-open", size=28, color=ALERT_COLOR),
                                 name="GPU memory", showlegend=r is results[0],
                                 hovertext=esc(f"{r.gpu}: {format_in(r.memory.capacity_bytes, 'GB', '.0f')}; "
                                               + ("fits" if r.fits else
                                                  f"short by {format_in(r.memory.short_bytes, 'GB', '.1f')}")),
                                 hoverinfo="text"))
    fig.update_layout(**base_layout("Memory per GPU (busiest stage)", 200 + 80 * len(results)), barmode="stack",
                      xaxis_title="GB per GPU")
    return fig


def tier_loads_figure(loads, title: str = "The job's bytes per step on each tier") -> go.Figure:
    """Grouped bars: bytes per step on each link level, one colour per parallel dimension (the frame of
    :func:`topo.training.tier_bytes.tier_bytes`; with a ``spec`` column of several designs, a bar per design and
    level: plan65 found the page of two designs never drawn, both designs' ``nvlink`` rows under one label)."""
    fig = go.Figure()
    several = "spec" in loads and loads["spec"].nunique() > 1
    loads = loads.assign(where=loads["spec"] + ", " + loads["level"] if several else loads["level"])
    levels = list(dict.fromkeys(loads["where"]))
    for dim, part in loads.groupby("dim", sort=False):
        by = part.drop_duplicates("where").set_index("where").reindex(levels)  # a SPEC given twice: one bar
        fig.add_trace(go.Bar(name=dim, x=levels, y=in_unit(by["bytes_per_step"].fillna(0), "TB"),
                             marker_color=_COLORS.get(dim, "#777777"),
                             hovertext=[esc(f"{dim} on {lv}: {format_in(b, 'TB', '.3g')} per step over {n:.0f} links; "
                                            f"busiest link {format_in(m, 'GB', '.3g')}") if b == b else ""
                                        for lv, b, m, n in zip(levels, by["bytes_per_step"],
                                                               by["max_link_bytes_per_step"], by["links"])],
                             hoverinfo="text"))
    fig.update_layout(**base_layout(title), barmode="group", yaxis_title="TB per step (all links of the tier)")
    return fig


def timeline_figure(result: StepResult) -> go.Figure:
    """One stage over one step (:attr:`StepResult.timeline`): a lane per activity, exposed segments solid and
    communication hidden behind compute hatched over the compute it overlaps."""
    fig = go.Figure()
    lanes = [ln for ln in LANES if any(seg["lane"] == ln for seg in result.timeline)]
    for exposed in (True, False):
        for lane in lanes:
            segs = [sg for sg in result.timeline if sg["lane"] == lane and sg["exposed"] == exposed]
            if not segs:
                continue
            fig.add_trace(go.Bar(
                name=f"{lane}{'' if exposed else ' (hidden)'}", y=[lane] * len(segs),
                x=[sg["end_s"] - sg["start_s"] for sg in segs], base=[sg["start_s"] for sg in segs],
                orientation="h", marker_color=_COLORS.get(lane, "#777777"),
                marker_pattern_shape="" if exposed else "/", opacity=1.0 if exposed else 0.45,
                hovertext=[esc(f"{sg['label']}: {format_time(sg['start_s'])} to {format_time(sg['end_s'])}") for sg in segs],
                hoverinfo="text"))
    fig.update_layout(**base_layout(f"One stage, one step: {esc(_label(result).replace('<br>', ', '))}",
                                    120 + 40 * len(lanes)), barmode="overlay", xaxis_title="seconds into the step")
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes)))
    return fig


def train_figures(results: Sequence[StepResult], loads=None) -> list[go.Figure]:
    """The report section's figures, in order: breakdown, memory, bytes per tier, then each job's timeline."""
    figs = [step_breakdown_figure(results), memory_figure(results)]
    if loads is not None and len(loads):
        figs.append(tier_loads_figure(loads))
    figs += [timeline_figure(r) for r in results if r.timeline]
    return figs


def _bound_by(r: StepResult, e) -> str:
    """The largest overhead of a step: its most exposed collective, the pipeline bubble or the GPU's wait for the
    host's launches (inside compute), or "compute" when none costs anything."""
    worst = max(r.comm, key=lambda d: d.exposed_s, default=None)
    costs = {"bubble": r.breakdown_s.get("bubble", 0.0), "host wait": r.compute_by_module_s.get("host", 0.0),
             "comm": worst.exposed_s if worst is not None else 0.0}
    top = max(costs, key=costs.get)
    if costs[top] <= 0:
        return "compute"
    if top == "comm":
        return f"most exposed: {e(worst.dim)} {e(worst.collective)} ({e(str(worst.level))})"
    return f"{top} {format_time(costs[top])}" + (" (the host's kernel launches)" if top == "host wait" else "")


def train_section(results: Sequence[StepResult], loads, div) -> str:
    """The report's "Training job" section (``topo report --train M --layout L``): ``div(figure, kind)`` places
    a figure (the page's own helper); ``loads`` is the concatenated :func:`topo.training.tier_bytes.tier_bytes` frame."""
    import html

    e = html.escape
    figs = train_figures(results, loads)
    kinds = ["train-step", "train-memory"] + (["train-loads"] if loads is not None and len(loads) else [])
    kinds += [f"train-timeline-{i}" for i in range(len(figs) - len(kinds))]
    cells = "".join(f'<div class="cell">{div(f, k)}</div>' for f, k in zip(figs, kinds))
    rows = ["<table><tr><th class=\"l\">job</th><th>step</th><th>tokens/s</th><th>TFLOP/s per GPU</th><th>MFU</th>"
            "<th>memory per GPU</th><th class=\"l\">bound by</th></tr>"]
    notes = []
    for r in results:
        bound = _bound_by(r, e)
        u = r.uncertainty or {}
        interval = f" ({format_time(u['low_s'])} - {format_time(u['high_s'])})" if u.get("runs") else ""
        notes += [f"{e(_label(r).replace('<br>', ', '))}: {e(n)}" for n in r.notes]
        rows.append(f'<tr><td class="l">{e(_label(r).replace("<br>", ", "))}</td><td>{format_time(r.step_time_s)}{interval}</td>'
                    f"<td>{r.tokens_per_s:,.0f}</td><td>{r.tflop_per_s_per_gpu:.0f}</td><td>{r.mfu:.1%}</td>"
                    f"<td>{format_in(r.memory_per_gpu_bytes, 'GiB', '.1f')}{'' if r.fits else ' (does not fit)'}</td>"
                    f'<td class="l">{bound}</td></tr>')
    rows.append("</table>")
    rows += [f'<p>note: {n}</p>' for n in notes]
    lead = ("One training step of the job on each cluster (<code>topo train</code>): compute (with any time the GPU "
            "waits for the host's kernel launches), exposed communication per parallel dimension and the pipeline "
            "bubble, which add up to the step; in parentheses, the step's interval from the out-of-family error of the "
            "model's group on the GPU's generation, or on every generation where it has too few runs (nine in ten "
            "published runs within it); memory per GPU; the bytes the step puts on each "
            "tier; the timeline of one stage over one step (communication hidden behind compute hatched).")
    grid = f'style="grid-template-columns: repeat({min(len(figs), 3)}, minmax(0, 1fr));"'
    return (f'<section id="train"><h2>Training job</h2><p class="lead">{lead}</p>{"".join(rows)}'
            f'<div class="grid" {grid}>{cells}</div></section>')
