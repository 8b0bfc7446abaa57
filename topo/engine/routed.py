"""The routed result type: flows routed onto resources (directed links and ECMP aggregates of a
:class:`topo.engine.route.Router`), kept one by one, as summed loads, or as max-min classes
(:class:`topo.engine.flow_classes.FlowClasses`).

:mod:`topo.engine.contention` turns a :class:`Routed` into times; :mod:`topo.engine.loads` into bytes per resource.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .flow_classes import FlowClasses

__all__ = ["Routed"]


@dataclass
class Routed:
    """Flows routed onto resources: entry ``i`` puts ``weight[i]`` bytes of flow ``flow[i]`` on ``res[i]``."""

    res: np.ndarray
    weight: np.ndarray
    flow: np.ndarray
    num_flows: int
    flow_bytes: np.ndarray  # bytes of each flow
    latency_s: np.ndarray  # routed latency of each flow (sum of its links' latencies)
    network: np.ndarray  # True where the flow leaves its NVLink domain
    aggregated: bool = False  # True: only the summed load per resource is kept (res, weight); no per-flow data
    classes: "FlowClasses | None" = None  # flows merged into max-min classes (topo.engine.flow_classes), if kept so
    notes: tuple[str, ...] = ()  # what routing approximated (e.g. expected loads over the hash)

    @staticmethod
    def concat(parts: list["Routed"]) -> "Routed":
        """Several routed sets of flows as one (flow ids renumbered in order; summed if any part is summed).

        Parameters
        ----------
        parts : list of Routed
            On the same router; empty parts are dropped.

        Returns
        -------
        Routed
            Their entries together; kept one by one unless a part keeps only summed loads or max-min classes.
        """
        parts = [p for p in parts if p.num_flows]
        if not parts:
            return Routed.empty()
        notes = tuple(dict.fromkeys(n for p in parts for n in p.notes))
        if any(p.classes is not None for p in parts) and all(p.classes is not None or not p.aggregated
                                                                for p in parts):
            out = Routed.summed(np.concatenate([p.res for p in parts]), np.concatenate([p.weight for p in parts]),
                                sum(p.num_flows for p in parts), max(float(p.latency_s.max()) for p in parts),
                                any(bool(p.network.any()) for p in parts))
            out.classes = FlowClasses.concat([p.classes if p.classes is not None else
                                              FlowClasses.single(p.res, p.flow, p.weight, p.flow_bytes)
                                              for p in parts])
            out.notes = notes
            return out
        if any(p.aggregated for p in parts):
            out = Routed.summed(np.concatenate([p.res for p in parts]), np.concatenate([p.weight for p in parts]),
                                sum(p.num_flows for p in parts), max(float(p.latency_s.max()) for p in parts),
                                any(bool(p.network.any()) for p in parts))
            out.notes = notes
            return out
        offs = np.cumsum([0] + [p.num_flows for p in parts[:-1]])
        return Routed(
            res=np.concatenate([p.res for p in parts]),
            weight=np.concatenate([p.weight for p in parts]),
            flow=np.concatenate([p.flow + o for p, o in zip(parts, offs)]),
            num_flows=int(sum(p.num_flows for p in parts)),
            flow_bytes=np.concatenate([p.flow_bytes for p in parts]),
            latency_s=np.concatenate([p.latency_s for p in parts]),
            network=np.concatenate([p.network for p in parts]),
            notes=notes,
        )

    @staticmethod
    def summed(res: np.ndarray, weight: np.ndarray, num_flows: int, max_latency_s: float, network: bool) -> "Routed":
        """Flows kept only as their summed load per resource (too many to keep one by one).

        Parameters
        ----------
        res, weight : numpy.ndarray
            Resource ids and bytes of every entry (repeats are summed).
        num_flows : int
            How many flows the entries came from.
        max_latency_s : float
            The largest routed latency among them.
        network : bool
            Whether any of them leaves its NVLink domain.

        Returns
        -------
        Routed
            ``aggregated``: one entry per loaded resource, no per-flow data.
        """
        res = np.asarray(res, dtype=np.int64)
        if res.size:
            loads = np.bincount(res, weights=weight)
            res = np.flatnonzero(loads)
            weight = loads[res]
        return Routed(res=res, weight=np.asarray(weight, dtype=float), flow=np.zeros(res.size, dtype=np.int64),
                      num_flows=int(num_flows), flow_bytes=np.zeros(0), latency_s=np.array([max_latency_s]),
                      network=np.array([network]), aggregated=True)

    @staticmethod
    def empty() -> "Routed":
        """No flows.

        Returns
        -------
        Routed
        """
        z = np.zeros(0, dtype=np.int64)
        return Routed(z, np.zeros(0), z, 0, np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))

    def scaled(self, factor: float) -> "Routed":
        """The same flows carrying ``factor`` times the bytes.

        Parameters
        ----------
        factor : float

        Returns
        -------
        Routed
        """
        return Routed(self.res, self.weight * factor, self.flow, self.num_flows, self.flow_bytes * factor,
                      self.latency_s, self.network, notes=self.notes)
