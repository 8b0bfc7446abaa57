"""Loads: a schedule put on the fabric. The second of the engine's stages (schedule -> loads -> cost).

:func:`load_schedule` asks the router (the only owner of link and resource ids) to route every part of every
phase of a :class:`~topo.engine.schedule.Schedule`, and keeps, per phase, the bytes on each resource per byte of message
(one repetition). Loads of different schedules live in the same resource space and can be added
(:func:`total_loads`), which is how concurrent collectives share links (:mod:`topo.engine.traffic`). The routed
switch and NIC latencies of the critical path are read off the routed parts as the schedule's
:class:`~topo.engine.schedule.LatencyTerm` s say.

Every flow is kept only when a contention model needs them (max-min sharing); otherwise only the summed loads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .allpairs import route_part
from .route import Routed, Router
from .schedule import LatencyTerm, Schedule, Transfers

__all__ = ["PhaseLoads", "ScheduleLoads", "load_schedule", "total_loads"]


@dataclass
class PhaseLoads:
    """One phase on the fabric: bytes on each resource per byte of message, for one repetition.

    Attributes
    ----------
    label : str
    repeat : float
    num_flows : int
    res : numpy.ndarray
        Resource ids that carry bytes, each once, increasing.
    bytes : numpy.ndarray
        Bytes on each of ``res`` per byte of message.
    routed : Routed, optional
        Every flow, kept only for max-min sharing.
    """

    label: str
    repeat: float
    num_flows: int
    res: np.ndarray
    bytes: np.ndarray
    routed: Routed | None = None  # every flow, kept only for max-min sharing


@dataclass
class ScheduleLoads:
    """A schedule put on the fabric: the second of the engine's stages.

    Attributes
    ----------
    schedule : Schedule
    phases : list of PhaseLoads
    routed_latency_s : float
        Switch and NIC latencies along the critical path.
    num_res : int
        Size of the router's resource space.
    """

    schedule: Schedule
    phases: list[PhaseLoads]
    routed_latency_s: float  # switch and NIC latencies along the critical path
    num_res: int

    def total(self) -> np.ndarray:
        """Bytes on every resource per byte of message over the whole collective (all phases and repeats).

        Returns
        -------
        numpy.ndarray
            One value per resource id.
        """
        return total_loads([self])

    def summed(self) -> ScheduleLoads:
        """These loads as one phase of one repetition (the bytes on each resource over the whole collective:
        :meth:`total`, exactly) with the schedule's transfers dropped: what a time, a bottleneck, link bytes and a
        traffic mix read, in one phase's memory (PAT's all-gather over 100,352 GPUs in 16 groups, 13 phases: 5 MiB
        instead of 101 with its transfers). Not for costing again (:func:`topo.engine.cost.cost_schedule` drains
        each phase on its own).

        Returns
        -------
        ScheduleLoads
        """
        total = self.total()
        res = np.flatnonzero(total)
        if self.num_res < 2**31:
            res = res.astype(np.int32)  # 12 bytes a loaded resource, not 16 (every fabric has fewer than 2**31)
        one = PhaseLoads("every phase, summed", 1.0, sum(p.num_flows for p in self.phases), res, total[res])
        return ScheduleLoads(dataclasses.replace(self.schedule, phases=[]), [one], self.routed_latency_s,
                             self.num_res)


def total_loads(loads: list[ScheduleLoads], weights=None) -> np.ndarray:
    """Sum of several schedules' loads, each scaled by its weight (e.g. its message size).

    Loads of different schedules on one router share its resource space, so concurrent collectives add up.

    Parameters
    ----------
    loads : list of ScheduleLoads
        On the same router.
    weights : sequence of float, optional
        One per schedule (default 1).

    Returns
    -------
    numpy.ndarray
        Bytes per resource id.
    """
    n = loads[0].num_res
    out = np.zeros(n)
    for k, sl in enumerate(loads):
        w = 1.0 if weights is None else float(weights[k])
        for ph in sl.phases:
            if not ph.res.size:
                continue
            add = ph.bytes * (ph.repeat * w)
            if ph.res.size < 2 or np.all(ph.res[1:] > ph.res[:-1]):
                # each resource once (as load_schedule and summed make them): adding at the ids is the sum
                # ``bincount`` gives, bit for bit (a resource not listed gains 0.0), without a pass over all of
                # them per phase (fast67)
                out[ph.res] += add
            else:
                out += np.bincount(ph.res, weights=add, minlength=n)
    return out


def _term_s(term: LatencyTerm, routed: Routed) -> float:
    lat, net = routed.latency_s, routed.network
    if routed.aggregated or lat.size == 0:
        return term.multiplier * (float(lat.max()) if lat.size else 0.0)
    if term.select == "ring":
        lat, net = lat[:term.first], net[:term.first]
        if lat.size == 0:
            return 0.0
        slowest = float(lat[net].max()) if net.any() else float(lat.max())
        return term.multiplier * (float(lat.sum()) - slowest)
    if term.select == "max_intra":
        lat = lat[~net]
    elif term.select == "max_inter":
        lat = lat[net]
    return term.multiplier * (float(lat.max()) if lat.size else 0.0)


_CHUNK_FLOWS = 1 << 15  # transfers routed at once when only their loads are kept: bounds the path table (about
# 1 KB per flow at 100k GPUs); the chunks' entries are summed into the resource vector a batch at a time
# (_Accumulator), so that the vector's size is paid once per batch, not once per chunk


def _add_loads(loads: np.ndarray | None, res: np.ndarray, weight: np.ndarray, num_res: int) -> np.ndarray:
    """``loads`` plus ``weight`` bytes on each of ``res`` (the new array when ``loads`` is None)."""
    if loads is None:
        return np.bincount(res, weights=weight, minlength=num_res)
    loads += np.bincount(res, weights=weight, minlength=num_res)
    return loads


class _Accumulator:
    """Routed entries gathered until they number about half the resources, then summed into the loads in one
    ``bincount`` (whose cost is the resource vector's length): the held entries stay under the size of one such
    vector in memory, and a schedule of millions of flows pays the vector a few times, not once per chunk."""

    def __init__(self, loads: np.ndarray | None, num_res: int):
        self.loads, self.num_res = loads, num_res
        self._res, self._weight, self._held = [], [], 0

    def add(self, r: Routed) -> None:
        if not r.res.size:
            return
        self._res.append(r.res)
        self._weight.append(r.weight)
        self._held += r.res.size
        if self._held >= self.num_res // 2:
            self.flush()

    def flush(self) -> np.ndarray | None:
        if self._res:
            res, weight = np.concatenate(self._res), np.concatenate(self._weight)
            self._res, self._weight, self._held = [], [], 0
            self.loads = _add_loads(self.loads, res, weight, self.num_res)
        return self.loads


def _route_in_chunks(router: Router, t: Transfers,
                     loads: np.ndarray | None) -> tuple[np.ndarray | None, Routed]:
    """Route ``t`` a slice at a time, adding its loads into ``loads`` (None: none yet); returns the loads and its
    flows' latencies and network flags only (in the order of ``t``, as the latency terms expect), without
    per-flow resources."""
    F = t.num_flows
    lat, net = [], []
    nb = np.asarray(t.per_msg_byte, dtype=float)
    acc = _Accumulator(loads, router.num_res)
    for a in range(0, F, _CHUNK_FLOWS):
        sl = slice(a, a + _CHUNK_FLOWS)
        part = Transfers(t.src[sl], t.dst[sl], nb if nb.ndim == 0 else nb[sl],
                         None if t.choice is None else t.choice[sl], t.split_nics)
        r = router.route_transfers(part)
        acc.add(r)
        k = max(1, r.num_flows // part.num_flows)  # split over NICs: k copies of the slice's flows
        lat.append(r.latency_s.reshape(k, -1).max(axis=0) if k > 1 else r.latency_s)
        net.append(r.network.reshape(k, -1).any(axis=0) if k > 1 else r.network)
    z = np.zeros(0, dtype=np.int64)
    return acc.flush(), Routed(z, np.zeros(0), z, F, np.zeros(0), np.concatenate(lat), np.concatenate(net))


def load_schedule(router: Router, schedule: Schedule, keep_flows: bool = False) -> ScheduleLoads:
    """Route every phase of ``schedule`` on the router's fabric.

    Parameters
    ----------
    router : Router
        The only owner of link and resource ids.
    schedule : Schedule
    keep_flows : bool
        Keep every flow (max-min sharing needs them); otherwise only the summed loads.

    Returns
    -------
    ScheduleLoads
        Per phase, bytes per resource per byte of message; the routed latency of the critical path. Notes the
        router adds are appended to ``schedule.notes``.
    """
    phases: list[PhaseLoads] = []
    latency = 0.0
    terms_by_phase: dict[int, list[LatencyTerm]] = {}
    for t in schedule.routed_latency:
        terms_by_phase.setdefault(t.phase, []).append(t)
    notes: list[str] = []
    for i, ph in enumerate(schedule.phases):
        loads = None  # made by the first part that carries bytes (one resource-sized array per phase)
        kept, flows = [], 0
        for j, part in enumerate(ph.parts):  # one part at a time: only its loads outlive it (unless kept)
            if keep_flows or not isinstance(part, Transfers) or part.num_flows <= _CHUNK_FLOWS:
                r = route_part(router, part, keep_flows)
                notes += [n for n in r.notes if n not in notes]
                if r.res.size:
                    loads = _add_loads(loads, r.res, r.weight, router.num_res)
            else:
                loads, r = _route_in_chunks(router, part, loads)
            for t in terms_by_phase.get(i, []):
                if t.part == j:
                    latency += _term_s(t, r)
            flows += r.num_flows
            if keep_flows:
                kept.append(r)
            del r
        if loads is None:
            loads = np.zeros(router.num_res)
        res = np.flatnonzero(loads)
        phases.append(PhaseLoads(ph.label, float(ph.repeat), flows, res, loads[res],
                                 Routed.concat(kept) if keep_flows else None))
    for note in notes:  # what routing approximated for this schedule
        if note not in schedule.notes:
            schedule.notes.append(note)
    return ScheduleLoads(schedule, phases, latency, router.num_res)
