"""Contention: how long a set of concurrent flows takes to drain through shared links.

Two fluid models, both exact for what they assume and both linear in the bytes (so a size sweep costs one
computation per schedule):

- ``equal`` (default): the step cannot end before its most loaded resource drains,
  ``t = max_r load_r / capacity_r``. Flows sharing a bottleneck share it equally and every flow finishes by then;
  this is a lower bound that real transports approach when flows are alike (as in ring and tree steps).
- ``maxmin``: max-min fair sharing by progressive filling, re-computed whenever a flow finishes; the step ends
  when the last flow ends. A flow limited elsewhere leaves its share of a link to the others, so with unlike flows
  this can be longer than the bottleneck bound (never shorter).
"""

from __future__ import annotations

import numpy as np

from .errors import TopoError
from .route import Routed

__all__ = ["SHARING_MODES", "drain_time", "max_min_makespan"]

SHARING_MODES = ("equal", "maxmin")


def drain_time(routed: Routed, capacity_Bps: np.ndarray, sharing: str = "equal", num_res: int | None = None):
    """Time for all flows of ``routed`` to finish, the bottleneck resource, and the loads per resource."""
    if sharing not in SHARING_MODES:
        raise TopoError(f"unknown sharing model {sharing!r}; allowed: {', '.join(SHARING_MODES)}", key="sharing")
    n = capacity_Bps.size if num_res is None else num_res
    loads = np.bincount(routed.res, weights=routed.weight, minlength=n) if routed.num_flows else np.zeros(n)
    if routed.num_flows == 0:
        return 0.0, -1, loads
    t = loads / capacity_Bps
    r = int(np.argmax(t))
    if sharing == "equal":
        return float(t[r]), r, loads
    if routed.aggregated:
        raise TopoError(f"max-min sharing needs every flow, and this step has {routed.num_flows:,}, more than are "
                        "kept one by one; use sharing=equal", key="sharing")
    return max_min_makespan(routed, capacity_Bps), r, loads


def max_min_makespan(routed: Routed, capacity_Bps: np.ndarray, max_events: int = 100_000) -> float:
    """Fluid max-min fair completion time of all flows (progressive filling, re-run at each completion).

    A flow's parts on the same resource (hashed sub-flows pinned to the same link) count as one user of it;
    sub-flows are not rate-limited separately (the flow is treated as a single fluid).
    """
    F = routed.num_flows
    if F == 0:
        return 0.0
    res, flow, w = routed.res, routed.flow, routed.weight
    size = routed.flow_bytes.astype(float)
    # Incidence (flow, resource) with the fraction of the flow's bytes crossing the resource.
    used_res, compact = np.unique(res, return_inverse=True)  # only the resources some flow crosses
    R = used_res.size
    key = flow.astype(np.int64) * R + compact
    uniq, inv = np.unique(key, return_inverse=True)
    inc_flow = uniq // R
    inc_res = uniq % R
    frac = np.bincount(inv, weights=w) / np.maximum(size[inc_flow], 1e-300)
    by_res = np.argsort(inc_res, kind="stable")  # incidences grouped by resource
    res_start = np.searchsorted(inc_res[by_res], np.arange(R + 1))
    flow_start = np.searchsorted(inc_flow, np.arange(F + 1))  # uniq is sorted by flow
    cap = capacity_Bps[used_res].astype(float)
    remaining = size.copy()
    active = remaining > 0
    t = 0.0
    for _ in range(max_events):
        if not np.any(active):
            return t
        rate = _progressive_fill(inc_flow, inc_res, frac, by_res, res_start, flow_start, active, cap)
        with np.errstate(divide="ignore", invalid="ignore"):
            dt_all = np.where(active & (rate > 0), remaining / rate, np.inf)
        dt = float(dt_all.min())
        if not np.isfinite(dt):
            raise TopoError("a flow gets no bandwidth (a resource has zero capacity)", key="sharing")
        t += dt
        remaining = np.where(active, remaining - rate * dt, remaining)
        active &= remaining > size * 1e-9
    raise TopoError(f"max-min sharing needed more than {max_events} completion events; use sharing=equal",
                    key="sharing")


def _segments(starts: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Concatenated ranges ``starts[i]:starts[i+1]`` for every i in ``idx``."""
    lo, hi = starts[idx], starts[idx + 1]
    n = hi - lo
    if n.sum() == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(lo - np.cumsum(np.r_[0, n[:-1]]), n)
    return np.arange(n.sum()) + offs


def _progressive_fill(inc_flow, inc_res, frac, by_res, res_start, flow_start, active, cap) -> np.ndarray:
    """Max-min fair rates (bytes/s of each flow) by progressive filling over the active flows.

    Every flow not yet frozen gains rate at the same pace; when a resource saturates, the flows crossing it are
    frozen at the current level and their demand leaves the other resources. Work per level is proportional to
    the incidences of the flows frozen at that level, so the whole fill is one pass over the incidences."""
    F = active.size
    rate = np.zeros(F)
    frozen = ~active
    open_inc = ~frozen[inc_flow]
    demand = np.bincount(inc_res[open_inc], weights=frac[open_inc], minlength=cap.size)
    cap_left = cap.copy()
    stamp = np.empty(F, dtype=np.int64)
    level = 0.0
    while True:
        used = demand > 1e-15
        if not np.any(used):
            return rate
        headroom = np.full(cap.size, np.inf)
        headroom[used] = cap_left[used] / demand[used]
        step = float(headroom.min())
        level += step
        cap_left -= step * demand
        saturated = np.flatnonzero(used & (headroom <= step * (1 + 1e-9) + 1e-300))
        cand = inc_flow[by_res[_segments(res_start, saturated)]]
        cand = cand[~frozen[cand]]
        stamp[cand] = np.arange(cand.size)  # keep one copy of each flow, in O(n)
        hit = cand[stamp[cand] == np.arange(cand.size)]
        if hit.size == 0:  # numerical corner: retire the saturated resources
            demand[saturated] = 0.0
            continue
        rate[hit] = level
        frozen[hit] = True
        inc = _segments(flow_start, hit)
        demand -= np.bincount(inc_res[inc], weights=frac[inc], minlength=cap.size)
        demand[saturated] = 0.0
