"""Contention: how long users that share resources take to finish. One home for both sharing models, used by a
single collective's steps (:mod:`topo.engine.cost`) and by traffic mixes (:mod:`topo.engine.traffic`) alike.

A *user* is a flow, a class of alike flows, or a whole collective of a mix; it puts ``a`` units on a resource per
unit it moves (:class:`~topo.engine.flow_classes.FlowClasses` holds these incidences), and may be capped at a maximum
rate (a mix member runs at most as fast as alone). Two fluid models, both linear in the amounts (so a size sweep
costs one computation per schedule):

- ``equal`` (default): on a resource asked for more than its capacity, each of the ``k`` users crossing it gets
  ``1/k`` of it; what a user leaves unused is not passed on (:func:`rates`). For the flows of one collective's
  step (alike flows, as in ring and tree steps) this is the bottleneck bound: the step cannot end before its
  most loaded resource drains, ``t = max_r load_r / capacity_r``, and every flow finishes by then
  (:func:`drain_time`).
- ``maxmin``: max-min fair sharing by progressive filling (:mod:`topo.engine.maxmin`, the only solver); a user
  held back elsewhere leaves its share to the others, so with unlike users this can be longer than the
  bottleneck bound (never shorter).

Either way rates are re-computed whenever a user finishes (:func:`finish_times`).
"""

from __future__ import annotations

import numpy as np

from ..errors import TooManyFlows, TopoError
from .flow_classes import FlowClasses
from .maxmin import max_min_finish_times, max_min_makespan_classes, max_min_rates
from .routed import Routed

__all__ = ["SHARING_MODES", "check_sharing", "rates", "finish_times", "drain_time", "flow_classes",
           "max_min_makespan"]

SHARING_MODES = ("equal", "maxmin")


def check_sharing(sharing: str) -> str:
    """``sharing`` if it is one of :data:`SHARING_MODES`.

    Parameters
    ----------
    sharing : str

    Returns
    -------
    str

    Raises
    ------
    TopoError
        Keyed ``sharing``, naming the value and the allowed ones.
    """
    if sharing not in SHARING_MODES:
        raise TopoError(f"unknown sharing model {sharing!r}; allowed: {', '.join(SHARING_MODES)}", key="sharing")
    return sharing


def _with_caps(users: FlowClasses, capacity: np.ndarray, max_rate) -> tuple[FlowClasses, np.ndarray]:
    """``users`` with one private resource per class of capacity ``max_rate`` per member (appended after the
    resources of ``capacity``), so that max-min filling stops each class at its cap."""
    if max_rate is None:
        return users, capacity
    C, n = users.num_classes, capacity.size
    members = users.members.astype(float)
    cap = np.r_[capacity.astype(float), np.broadcast_to(np.asarray(max_rate, dtype=float), (C,)) * members]
    ids = np.arange(C)
    out = FlowClasses(users.size_bytes, users.members, np.r_[users.class_of(), ids].astype(np.int64),
                      np.r_[users.res, n + ids].astype(np.int64), np.r_[users.a, members],
                      users.template, users.t_id, users.t_res, users.t_a, users.t_partial)
    return out, cap


def _equal_rates(users: FlowClasses, capacity: np.ndarray, active: np.ndarray, max_rate) -> tuple[np.ndarray,
                                                                                                    np.ndarray]:
    """Equal shares: each of the ``k`` member flows on a resource asked (at full rate) for more than its
    capacity may use ``1/k`` of it."""
    if users.template is not None and users.num_templates:
        raise ValueError("equal shares are computed on direct incidences only (no templates)")
    C = users.num_classes
    cap_rate = np.full(C, np.inf) if max_rate is None else np.broadcast_to(np.asarray(max_rate, float), (C,))
    x = np.where(active, cap_rate, 0.0)
    lim = np.full(C, -1, dtype=np.int64)
    cls = users.class_of()
    sel = active[cls] & (users.a > 0)
    cls, res, a = cls[sel], users.res[sel], users.a[sel]
    if cls.size == 0:
        return x, lim
    n = capacity.size
    # a class's parts on one resource (hashed sub-flows pinned to the same link) are one user of it
    pair, inv = np.unique(cls.astype(np.int64) * n + res, return_inverse=True)
    cls, res, a = pair // n, pair % n, np.bincount(inv, weights=a)
    with np.errstate(invalid="ignore"):
        asked = np.bincount(res, weights=a * cap_rate[cls], minlength=n)
    over = asked > capacity * (1 + 1e-12)  # resources asked for more than they have
    on = over[res]
    cls, res, a = cls[on], res[on], a[on]
    if cls.size == 0:
        return x, lim
    m = users.members.astype(float)
    k = np.bincount(res, weights=m[cls], minlength=n)  # member flows on each over-asked resource
    bound = capacity[res] / (k[res] * (a / m[cls]))
    order = np.lexsort((res, bound, cls))  # per class: its smallest bound first (ties: the lowest resource)
    cls, res, bound = cls[order], res[order], bound[order]
    first = np.r_[True, cls[1:] != cls[:-1]]
    c, r, b = cls[first], res[first], bound[first]
    slowed = b < x[c]
    x[c] = np.minimum(x[c], b)
    lim[c[slowed]] = r[slowed]
    return x, lim


def rates(users: FlowClasses, capacity: np.ndarray, sharing: str = "equal", max_rate=None,
          active: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rate of each user (per member flow) when the ``active`` ones run at once.

    Parameters
    ----------
    users : FlowClasses
        Users and the resources they cross: class ``c`` puts ``a`` units on a resource per unit each member
        moves.
    capacity : numpy.ndarray
        Capacity of every resource (units per second).
    sharing : {"equal", "maxmin"}
        The sharing model (module docstring).
    max_rate : float or numpy.ndarray, optional
        Each member's highest rate (a mix member: 1, as fast as alone); none by default.
    active : numpy.ndarray of bool, optional
        Which classes run (default: all); the others get rate 0.

    Returns
    -------
    rate : numpy.ndarray
        Rate of each member of each class.
    limiter : numpy.ndarray
        For each class, the resource that holds it back (-1: none; it runs at ``max_rate``).
    """
    check_sharing(sharing)
    C = users.num_classes
    active = np.ones(C, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    if sharing == "equal":
        return _equal_rates(users, capacity, active, max_rate)
    capped, cap = _with_caps(users, capacity, max_rate)
    rate, lim = np.zeros(C), np.full(C, -1, dtype=np.int64)
    idx = np.flatnonzero(active)
    if idx.size:
        sub_lim = np.full(idx.size, -1, dtype=np.int64)
        rate[idx] = max_min_rates(capped, cap, idx, sub_lim)
        lim[idx] = np.where(sub_lim >= capacity.size, -1, sub_lim)  # a private cap: not held back
    return rate, lim


def finish_times(users: FlowClasses, capacity: np.ndarray, sharing: str = "equal", max_rate=None,
                 max_events: int = 1_000_000) -> tuple[np.ndarray, np.ndarray]:
    """When each user finishes its work, all starting at t = 0, rates re-computed each time one finishes.

    Parameters
    ----------
    users : FlowClasses
        Users and the resources they cross; ``users.size_bytes`` is each member's work (bytes, or seconds of
        work at rate 1 for a mix member).
    capacity : numpy.ndarray
        Capacity of every resource.
    sharing : {"equal", "maxmin"}
        The sharing model (module docstring).
    max_rate : float or numpy.ndarray, optional
        Each member's highest rate; none by default.
    max_events : int
        Re-computations allowed (max-min) before giving up.

    Returns
    -------
    finish : numpy.ndarray
        Finish time of each class (0 for a class without work).
    limiter : numpy.ndarray
        For each class, the resource that held it back first (-1: none). Rates only rise as users finish, so a
        user not held back at t = 0 never is.

    Raises
    ------
    TopoError
        A user gets no bandwidth (a resource of zero capacity), or max-min needed more than ``max_events``
        re-computations.
    """
    check_sharing(sharing)
    C = users.num_classes
    if sharing == "maxmin":
        capped, cap = _with_caps(users, capacity, max_rate)
        lim = np.full(C, -1, dtype=np.int64)
        finish = max_min_finish_times(capped, cap, max_events, lim)
        return finish, np.where(lim >= capacity.size, -1, lim)
    work = users.size_bytes.astype(float)
    left = work.copy()
    finish = np.zeros(C)
    active = left > 0
    limiter = np.full(C, -1, dtype=np.int64)
    t = 0.0
    first = True
    while active.any():
        x, lim = _equal_rates(users, capacity, active, max_rate)
        if first:
            limiter = np.where(active, lim, -1)
            first = False
        with np.errstate(divide="ignore", invalid="ignore"):
            dt_all = np.where(active & (x > 0), left / x, np.inf)
        dt = float(dt_all.min())
        if not np.isfinite(dt):
            raise TopoError("a flow gets no bandwidth (a resource has zero capacity)", key="sharing")
        t += dt
        left = np.where(active, left - x * dt, left)
        fin = active & (left <= work * 1e-12 + 1e-18)
        finish[fin] = t
        active &= ~fin
    return finish, limiter


def drain_time(routed: Routed, capacity_Bps: np.ndarray, sharing: str = "equal", num_res: int | None = None):
    """How long one step of a collective takes: all of its flows start together.

    Parameters
    ----------
    routed : Routed
        The step's flows on the fabric (from the router).
    capacity_Bps : numpy.ndarray
        Usable capacity of every resource.
    sharing : {"equal", "maxmin"}
        ``equal``: the bottleneck bound (module docstring); ``maxmin``: the last flow's max-min finish time.
    num_res : int, optional
        Number of resources (default ``capacity_Bps.size``).

    Returns
    -------
    time_s : float
        Bytes per byte of message become seconds per byte of message: the step's time for a message of 1 byte.
    bottleneck : int
        The most loaded resource relative to its capacity (-1: no flow).
    loads : numpy.ndarray
        Bytes on each resource.

    Raises
    ------
    TooManyFlows
        ``maxmin`` on a step whose flows the router did not keep one by one (nor as classes).
    """
    check_sharing(sharing)
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
        raise TooManyFlows(f"max-min sharing needs every flow, and this step has {routed.num_flows:,}, more than "
                           "are kept one by one; use sharing=equal", key="sharing")
    return max_min_makespan(routed, capacity_Bps), r, loads


def max_min_makespan(routed: Routed, capacity_Bps: np.ndarray, max_events: int = 1_000_000) -> float:
    """Fluid max-min fair completion time of all flows of ``routed`` (progressive filling, re-run as flows
    finish; see :mod:`topo.engine.maxmin`).

    A flow's parts on the same resource (hashed sub-flows pinned to the same link) count as one user of it;
    sub-flows are not rate-limited separately (the flow is treated as a single fluid).

    Parameters
    ----------
    routed : Routed
        Flows kept one by one or as classes.
    capacity_Bps : numpy.ndarray
        Capacity of every resource.
    max_events : int
        Re-fills allowed before giving up.

    Returns
    -------
    float
        Time until the last flow ends.
    """
    return max_min_makespan_classes(flow_classes(routed), capacity_Bps, max_events)


def flow_classes(routed: Routed) -> FlowClasses:
    """The flows of ``routed`` as max-min users: the router's own classes when it merged them, else one per flow.

    Parameters
    ----------
    routed : Routed
        Flows from the router.

    Returns
    -------
    FlowClasses
    """
    if routed.classes is not None:
        return routed.classes
    return FlowClasses.single(routed.res, routed.flow, routed.weight, routed.flow_bytes)
