"""The one door from the workload to the collective engine (:func:`topo.estimate.estimate`).

Every group of a dimension runs at once: a group matrix ``M [num_groups, group_size]`` of GPU ids goes to the
engine as ``ranks=M.ravel(), groups=M.shape[0], group_layout="blocked", rank_order="given"``, so the links the
groups share are loaded by all of them together.

Speed: routing is the expensive part and a size sweep after it is arithmetic, so each (collective, group
matrix) is estimated once over a fixed grid of sizes (4 per octave, 64 B to 1 TiB) and cached; a size in between
is read by linear interpolation of time in size (the engine's time is piecewise affine in size, so the error is
only where the winning algorithm or protocol changes inside one quarter-octave; ``tests/test_workload_comm.py``
bounds it against the exact engine call). A search over hundreds of layouts reuses the same few matrices.

A reduce-scatter and an all-gather of the same size on the same groups take the same time and load the same
links in the engine (NCCL runs both as a ring of p - 1 steps of S/p; checked by ``tests/test_workload_comm.py``
on four bundled fabrics), so the adapter routes one curve for both (``SAME_CURVE``): at 100k GPUs each routing
costs about a second.

Keep every call to the engine in this module: its keyword interface is being replaced by an options object.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..estimate import estimate
from ..fabric import Fabric

__all__ = ["CommTime", "CommEngine", "GRID_BYTES", "SAME_CURVE"]

SAME_CURVE = {"reduce_scatter": "all_gather"}  # collectives the engine times identically (see above)

GRID_BYTES = np.unique(np.round(64 * 2.0 ** (np.arange(0, 4 * 34 + 1) / 4)).astype(np.int64))  # 64 B .. 1 TiB


@dataclass(frozen=True)
class CommTime:
    """Time of one collective (every group at once) and the link that bounds it."""

    collective: str
    size_bytes: float
    time_s: float
    algorithm: str
    level: str | None  # the bottleneck's link level (tier): nvlink, pcie, nic-leaf, leaf-spine, ...
    link: str | None  # "src -> dst"
    utilization: float | None


@dataclass
class _Curve:
    time_s: np.ndarray
    algorithm: list[str]
    level: list
    link: list
    utilization: list
    result: object  # the engine's EstimateResult (for link loads)


class CommEngine:
    """Collective times on one fabric, cached per (collective, group matrix, stages)."""

    def __init__(self, fabric: Fabric, *, algorithm: str = "auto"):
        self.fabric = fabric
        self.algorithm = algorithm
        self._curves: dict[tuple, _Curve] = {}
        self.engine_calls = 0

    @staticmethod
    def signature(groups: np.ndarray) -> tuple:
        g = np.ascontiguousarray(groups, dtype=np.int64)
        return g.shape, hashlib.blake2b(g.tobytes(), digest_size=16).hexdigest()

    def _curve(self, collective: str, groups: np.ndarray) -> _Curve:
        collective = SAME_CURVE.get(collective, collective)
        stages = groups.shape[1] if collective == "pipeline" else 2
        key = (collective, self.signature(groups), stages)
        c = self._curves.get(key)
        if c is None:
            kw = {"stages": stages} if collective == "pipeline" else {}
            r = estimate(self.fabric, collective, [int(x) for x in GRID_BYTES], ranks=groups.ravel(),
                         groups=int(groups.shape[0]), group_layout="blocked", rank_order="given",
                         algorithm=self.algorithm, **kw)
            self.engine_calls += 1
            rows = r.results
            c = _Curve(time_s=np.array([x.time_s for x in rows]), algorithm=[x.algorithm for x in rows],
                       level=[x.bottleneck.level if x.bottleneck else None for x in rows],
                       link=[f"{x.bottleneck.src} -> {x.bottleneck.dst}" if x.bottleneck else None for x in rows],
                       utilization=[x.bottleneck.utilization if x.bottleneck else None for x in rows], result=r)
            self._curves[key] = c
        return c

    def time(self, collective: str, groups: np.ndarray, size_bytes: float) -> CommTime:
        """``collective`` of ``size_bytes`` (nccl-tests' size: one rank's larger buffer) on every group of
        ``groups`` at once. Groups of one GPU, or zero bytes, take no time."""
        groups = np.asarray(groups)
        if groups.shape[1] < 2 or size_bytes <= 0:
            return CommTime(collective, float(size_bytes), 0.0, "none", None, None, None)
        c = self._curve(collective, groups)
        S = float(size_bytes)
        g = GRID_BYTES
        if S <= g[0]:
            i, t = 0, float(c.time_s[0])
        elif S >= g[-1]:  # beyond the grid: extend the last segment (bandwidth-bound there)
            slope = (c.time_s[-1] - c.time_s[-2]) / (g[-1] - g[-2])
            i, t = len(g) - 1, float(c.time_s[-1] + slope * (S - g[-1]))
        else:
            i = int(np.searchsorted(g, S))
            w = (S - g[i - 1]) / (g[i] - g[i - 1])
            t = float(c.time_s[i - 1] * (1 - w) + c.time_s[i] * w)
        return CommTime(collective, S, t, c.algorithm[i], c.level[i], c.link[i], c.utilization[i])

    def link_loads(self, collective: str, groups: np.ndarray, size_bytes: float):
        """Per directed link bytes of one such collective (the engine's frame at the nearest grid size,
        scaled to ``size_bytes``)."""
        c = self._curve(collective, np.asarray(groups))
        i = int(np.clip(np.searchsorted(GRID_BYTES, size_bytes), 0, len(GRID_BYTES) - 1))
        frame = c.result.link_loads(int(GRID_BYTES[i])).copy()
        frame["bytes"] *= float(size_bytes) / float(GRID_BYTES[i])
        return frame
