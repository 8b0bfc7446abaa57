"""Flows grouped into classes that move at one rate: what routing hands to the contention models.

A router (:mod:`topo.engine.route`, :mod:`topo.engine.alltoall_classes`) builds them; the max-min solver
(:mod:`topo.engine.maxmin`) fills them. Their own module, so that routing does not import the solver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FlowClasses"]


@dataclass
class FlowClasses:
    """Flows grouped into classes whose members move at one rate.

    Direct incidences ``(cls[i], res[i], a[i])``: class ``cls[i]`` puts ``a[i]`` bytes on resource ``res[i]``
    per byte moved by each of its members (its number of members crossing it times the fraction of a member's
    bytes that crosses it). Template incidences ``(t_id[i], t_res[i], t_a[i])`` likewise, for every class whose
    ``template`` is ``t_id[i]``; ``t_partial[i]`` marks a resource that not all members of such a class cross.

    A router that builds millions of classes may give them *by class* instead: ``cls`` None and ``ptr`` the
    class pointer (class ``c``'s incidences are ``ptr[c]:ptr[c + 1]``, each resource at most once in a class).
    The max-min solver then fills them on these arrays as they are, without a copy (:mod:`topo.engine.maxmin`);
    :meth:`class_of` gives ``cls`` to the code that needs it.
    """

    size_bytes: np.ndarray  # per class: bytes of each member flow
    members: np.ndarray  # per class: number of member flows
    cls: np.ndarray | None
    res: np.ndarray
    a: np.ndarray
    template: np.ndarray | None = None  # per class: its template, or -1
    t_id: np.ndarray | None = None
    t_res: np.ndarray | None = None
    t_a: np.ndarray | None = None
    t_partial: np.ndarray | None = None
    ptr: np.ndarray | None = None  # by class: class c's incidences are ptr[c]:ptr[c + 1] (then cls may be None)

    def class_of(self) -> np.ndarray:
        """The class of every direct incidence (``cls``, or expanded from ``ptr``).

        Returns
        -------
        numpy.ndarray
        """
        if self.cls is not None:
            return self.cls
        return np.repeat(np.arange(self.num_classes, dtype=np.int32), np.diff(self.ptr))

    @property
    def num_classes(self) -> int:
        """Number of classes."""
        return int(self.size_bytes.size)

    @property
    def num_flows(self) -> int:
        """Number of member flows over all classes."""
        return int(self.members.sum())

    @property
    def num_templates(self) -> int:
        """Number of templates (0 without)."""
        return 0 if self.t_id is None or self.t_id.size == 0 else int(self.t_id.max()) + 1

    @staticmethod
    def single(res, flow, weight, flow_bytes) -> "FlowClasses":
        """One class per flow.

        Parameters
        ----------
        res, flow, weight : numpy.ndarray
            Entry ``i`` puts ``weight[i]`` bytes of flow ``flow[i]`` on resource ``res[i]``.
        flow_bytes : numpy.ndarray
            Bytes of each flow.

        Returns
        -------
        FlowClasses
        """
        size = np.asarray(flow_bytes, dtype=float)
        a = np.asarray(weight, dtype=float) / np.maximum(size[flow], 1e-300)
        return FlowClasses(size, np.ones(size.size, dtype=np.int64), np.asarray(flow, dtype=np.int32),
                           np.asarray(res, dtype=np.int32), a)

    @staticmethod
    def concat(parts: list["FlowClasses"]) -> "FlowClasses":
        """Classes of several sets side by side (class and template ids renumbered).

        Parameters
        ----------
        parts : list of FlowClasses

        Returns
        -------
        FlowClasses
        """
        parts = [p for p in parts if p.num_classes]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return FlowClasses(np.zeros(0), z, z, z, np.zeros(0))
        c_off = np.cumsum([0] + [p.num_classes for p in parts[:-1]])
        t_off = np.cumsum([0] + [p.num_templates for p in parts[:-1]])
        with_t = [p for p in parts if p.template is not None]
        out = FlowClasses(np.concatenate([p.size_bytes for p in parts]),
                          np.concatenate([p.members for p in parts]),
                          np.concatenate([p.class_of() for p in parts]),
                          np.concatenate([p.res for p in parts]), np.concatenate([p.a for p in parts]))
        at = 0
        for p, o in zip(parts, c_off):  # class ids of each part after the classes of the parts before it
            out.cls[at:at + p.res.size] += o
            at += p.res.size
        if with_t:
            out.template = np.concatenate([np.where(p.template >= 0, p.template + o, -1) if p.template is not None
                                           else np.full(p.num_classes, -1) for p, o in zip(parts, t_off)])
            ts = [(p, o) for p, o in zip(parts, t_off) if p.t_id is not None]
            out.t_id = np.concatenate([p.t_id + o for p, o in ts])
            out.t_res = np.concatenate([p.t_res for p, _ in ts])
            out.t_a = np.concatenate([p.t_a for p, _ in ts])
            out.t_partial = np.concatenate([p.t_partial for p, _ in ts])
        return out
