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

from ..errors import TopoError
from .maxmin import FlowClasses, max_min_makespan_classes
from .route import Routed

__all__ = ["SHARING_MODES", "drain_time", "flow_classes", "max_min_makespan"]

SHARING_MODES = ("equal", "maxmin")


def drain_time(routed: Routed, capacity_Bps: np.ndarray, sharing: str = "equal", num_res: int | None = None):
    """Time for all flows of ``routed`` to finish, the bottleneck resource, and the loads per resource."""
    if sharing not in SHARING_MODES:
        raise TopoError(f"unknown sharing model {sharing!r}; allowed: {', '.join(SHARING_MODES)}", key="sharing")
    n = capacity_Bps.size if num_res is None else num_res
    loads = np.bincount(routed.res, weights=routed.weight, minlength=n) if routed.num_flows else np.zeros(n)
    if routed.num_flows == 0:
        return 0.0, -1, loads
    # only resources that carry bytes: a failed link has capacity 0 and no load (0/0 is not a bottleneck)
    used = np.flatnonzero(loads)
    if used.size == 0:
        return 0.0, -1, loads
    t = loads[used] / capacity_Bps[used]
    r = int(used[np.argmax(t)])
    if sharing == "equal":
        return float(t.max()), r, loads
    if routed.aggregated and routed.classes is None:
        raise TopoError(f"max-min sharing needs every flow, and this step has {routed.num_flows:,}, more than are "
                        "kept one by one; use sharing=equal", key="sharing")
    return max_min_makespan(routed, capacity_Bps), r, loads


def max_min_makespan(routed: Routed, capacity_Bps: np.ndarray, max_events: int = 1_000_000) -> float:
    """Fluid max-min fair completion time of all flows (progressive filling, re-run as flows finish; see
    :mod:`topo.maxmin`). A flow's parts on the same resource (hashed sub-flows pinned to the same link) count as
    one user of it; sub-flows are not rate-limited separately (the flow is treated as a single fluid)."""
    return max_min_makespan_classes(flow_classes(routed), capacity_Bps, max_events)


def flow_classes(routed: Routed) -> FlowClasses:
    """The flows of ``routed`` as max-min classes: the router's own when it merged them, else one per flow."""
    if routed.classes is not None:
        return routed.classes
    return FlowClasses.single(routed.res, routed.flow, routed.weight, routed.flow_bytes)
