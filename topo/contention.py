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
        raise TopoError(f"unknown sharing model {sharing!r}; allowed: {', '.join(SHARING_MODES)}", key="--sharing")
    n = capacity_Bps.size if num_res is None else num_res
    loads = np.bincount(routed.res, weights=routed.weight, minlength=n) if routed.num_flows else np.zeros(n)
    if routed.num_flows == 0:
        return 0.0, -1, loads
    t = loads / capacity_Bps
    r = int(np.argmax(t))
    if sharing == "equal":
        return float(t[r]), r, loads
    return max_min_makespan(routed, capacity_Bps), r, loads


def max_min_makespan(routed: Routed, capacity_Bps: np.ndarray, max_events: int = 10_000) -> float:
    """Fluid max-min fair completion time of all flows (progressive filling, re-run at each completion).

    A flow's parts on the same resource (hashed sub-flows pinned to the same link) count as one user of it;
    sub-flows are not rate-limited separately (the flow is treated as a single fluid).
    """
    res, flow, w = routed.res, routed.flow, routed.weight
    F = routed.num_flows
    size = routed.flow_bytes.astype(float).copy()
    if F == 0:
        return 0.0
    # Incidence (flow, resource) with multiplicity = fraction of the flow's bytes crossing it.
    key = flow * (res.max() + 1) + res
    uniq, inv = np.unique(key, return_inverse=True)
    frac = np.bincount(inv, weights=w) / np.maximum(size[uniq // (res.max() + 1)], 1e-300)
    inc_flow = uniq // (res.max() + 1)
    inc_res = uniq % (res.max() + 1)
    remaining = size.copy()
    active = remaining > 0
    t = 0.0
    for _ in range(max_events):
        if not np.any(active):
            return t
        rate = _progressive_fill(inc_flow, inc_res, frac, active, capacity_Bps, F)
        with np.errstate(divide="ignore", invalid="ignore"):
            dt_all = np.where(active & (rate > 0), remaining / rate, np.inf)
        dt = float(dt_all.min())
        if not np.isfinite(dt):
            raise TopoError("a flow gets no bandwidth (a resource has zero capacity)", key="--sharing")
        t += dt
        remaining = remaining - rate * dt
        done = active & (remaining <= size * 1e-12 + 1e-9)
        active &= ~done
    raise TopoError(f"max-min sharing needed more than {max_events} completion events; use --sharing equal",
                    key="--sharing")


def _progressive_fill(inc_flow, inc_res, frac, active, cap, F) -> np.ndarray:
    """Max-min fair rates (bytes/s of each flow) by progressive filling over the active flows."""
    rate = np.zeros(F)
    frozen = ~active.copy()
    cap_left = cap.astype(float).copy()
    live = active[inc_flow]
    inc_flow, inc_res, frac = inc_flow[live], inc_res[live], frac[live]
    level = 0.0
    while True:
        open_inc = ~frozen[inc_flow]
        if not np.any(open_inc):
            return rate
        # demand per resource from unfrozen flows, per unit of common rate
        demand = np.bincount(inc_res[open_inc], weights=frac[open_inc], minlength=cap.size)
        used = demand > 0
        # the common rate every unfrozen flow can still gain before some resource saturates
        headroom = np.full(cap.size, np.inf)
        headroom[used] = cap_left[used] / demand[used]
        step = float(headroom.min())
        level += step
        cap_left -= step * demand
        saturated = used & (headroom <= step * (1 + 1e-12) + 1e-300)
        hit = np.unique(inc_flow[open_inc & saturated[inc_res]])
        rate[hit] = level
        frozen[hit] = True
