"""The timeline of one pipeline stage over one step, for the report: what runs when, in lanes.

Built from a :class:`~topo.training.result.StepResult`'s breakdown and collectives (it computes no time of its
own): the warm-up half of the bubble, the FP8 weight cast of the step's first micro-batch, then each micro-batch's forward and backward on the ``compute`` lane with
its exposed TP, CP and EP communication after it, the pipeline sends, the cool-down half of the bubble, the
data-parallel reduction's exposed tail and the optimizer step. Communication that hides behind compute is drawn
on its own lane over the compute it overlaps (``exposed = False``). At most ``MAX_MICROBATCHES`` micro-batches are
drawn one by one; more are merged into that many equal groups (the label says how many each holds).
"""

from __future__ import annotations

__all__ = ["step_timeline", "LANES", "MAX_MICROBATCHES"]

LANES = ("compute", "fp8_weight_cast", "tp", "cp", "ep", "fp8_amax", "pp", "dp", "optimizer", "bubble")
MAX_MICROBATCHES = 32


def step_timeline(result, forward_s: float, backward_s: float) -> list[dict]:
    """Segments ``{lane, start_s, end_s, label, exposed}`` of one stage's step, in time order per lane.

    ``forward_s`` and ``backward_s`` (with recomputation) are one micro-batch's on the busiest stage; the rest is
    read from ``result``. The segments end at ``result.step_time_s``."""
    b = result.breakdown_s
    m = max(1, int(result.layout.get("microbatches", 1)))
    groups = min(m, MAX_MICROBATCHES)
    per = m / groups
    total = {d: sum(c.time_s for c in result.comm if c.dim.startswith(d)) for d in ("tp", "cp", "ep", "pp", "dp")}
    out: list[dict] = []
    t = 0.0

    def seg(lane, start, end, label, exposed=True):
        if end > start:
            out.append({"lane": lane, "start_s": start, "end_s": end, "label": label, "exposed": exposed})

    seg("bubble", t, t + b["bubble"] / 2, "pipeline warm-up (bubble)")
    t += b["bubble"] / 2
    cast = b.get("fp8_weight_cast", 0.0)  # the first micro-batch's forward casts the BF16 weights to FP8
    seg("fp8_weight_cast", t, t + cast, "FP8 weight cast (first micro-batch)")
    t += cast
    dp_gather = sum(c.time_s for c in result.comm if c.dim.startswith("dp") and c.collective == "all_gather")
    seg("dp", t, t + min(dp_gather, forward_s * per), "weights all-gather (hidden)", exposed=False)
    mb_exposed = {d: b.get(d, 0.0) / groups for d in ("tp", "cp", "ep", "fp8_amax")}
    hidden = {d: max(0.0, total[d] - b[d]) / groups for d in ("tp", "cp", "ep")}
    pp_each = b["pp"] / groups
    for g in range(groups):
        label = f"micro-batch {g + 1}" if per == 1 else f"micro-batches {g * per + 1:.0f}-{(g + 1) * per:.0f}"
        start = t
        seg("compute", t, t + forward_s * per, f"forward, {label}")
        t += forward_s * per
        seg("compute", t, t + backward_s * per, f"backward, {label}")
        t += backward_s * per
        for d in ("tp", "cp", "ep"):
            seg(d, start, start + min(hidden[d], t - start), f"{d} hidden behind compute", exposed=False)
        for d in ("tp", "cp", "ep", "fp8_amax"):  # fp8_amax: delayed scaling's blocking amax reductions
            seg(d, t, t + mb_exposed[d], f"{d} exposed, {label}" if d != "fp8_amax" else f"FP8 amax reductions, "
                f"{label}")
            t += mb_exposed[d]
        seg("pp", t, t + pp_each, f"pipeline sends, {label}")
        t += pp_each
    seg("bubble", t, t + b["bubble"] / 2, "pipeline cool-down (bubble)")
    t += b["bubble"] / 2
    dp_hidden = max(0.0, total["dp"] - dp_gather - b["dp"])
    seg("dp", max(0.0, t - dp_hidden), t, "gradient reduction (hidden)", exposed=False)
    seg("dp", t, t + b["dp"], "data-parallel exposed")
    t += b["dp"]
    seg("optimizer", t, t + b["optimizer"], "optimizer step")
    return out
