"""Mapping a layout onto GPU ids: each parallel dimension's group matrix ``[num_groups, group_size]``.

The job's GPUs are ``first_gpu .. first_gpu + gpus - 1`` (GPU ids are packed by NVLink domain, server, unit,
pod: see :mod:`topo.placement`). The rank order lists dimensions from the fastest-varying GPU id to the slowest;
Megatron-LM's default ``tp-cp-ep-dp-pp`` puts a TP group on consecutive GPUs (one NVLink domain), then CP, then
the experts' replicas, then data parallelism, and pipeline stages outermost (stage k = one block of GPUs).

``dp`` (dense weights' replicas) is the pair of axes ``ep`` x ``dp/ep`` (expert parallelism is carved out of
data parallelism); ``edp`` (the experts' replicas) is the ``dp/ep`` axis alone. Every matrix is built with
numpy reshapes and transposes, never a loop per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TopoError
from .parallel import ParallelLayout

__all__ = ["Mapping", "map_layout"]


@dataclass(frozen=True)
class Mapping:
    """GPU ids of a job as an array with one axis per dimension (in rank order, fastest last)."""

    grid: np.ndarray  # axes: reversed rank order (slowest first), sizes of tp, cp, ep, edp, pp
    axes: tuple[str, ...]  # axis names of ``grid``
    gpus_per_domain: int

    def groups(self, dim: str) -> np.ndarray:
        """``[num_groups, group_size]`` GPU ids of dimension ``dim`` (tp, cp, ep, edp, pp, or dp = ep x edp).

        Ranks inside a group follow the grid (the fastest-varying member first)."""
        names = ("ep", "edp") if dim == "dp" else (dim,)
        idx = [self.axes.index(n) for n in names]
        rest = [i for i in range(self.grid.ndim) if i not in idx]
        # members ordered slowest-first among the chosen axes, so rank r+1 is the next GPU id in that dimension
        moved = np.transpose(self.grid, rest + sorted(idx))
        size = int(np.prod([self.grid.shape[i] for i in idx]))
        return moved.reshape(-1, size)

    def domains_spanned(self, dim: str) -> int:
        """NVLink domains one group of ``dim`` spans (the first group; groups are alike under packing)."""
        g = self.groups(dim)[0]
        return int(np.unique(g // self.gpus_per_domain).size)


def map_layout(lay: ParallelLayout, gpus_per_domain: int, num_fabric_gpus: int) -> Mapping:
    """Lay ``lay``'s dimensions onto GPU ids in its rank order."""
    n = lay.gpus
    if lay.first_gpu + n > num_fabric_gpus:
        raise TopoError(f"the job needs GPUs {lay.first_gpu} to {lay.first_gpu + n - 1}, but the fabric has "
                        f"{num_fabric_gpus}", source="layout", key="gpus")
    sizes = {"tp": lay.tp, "cp": lay.cp, "ep": lay.ep, "edp": lay.dp // lay.ep, "pp": lay.pp}
    order = ["edp" if d == "dp" else d for d in lay.order()]  # fastest first; the dp axis holds dp / ep
    axes = tuple(reversed(order))
    ids = np.arange(lay.first_gpu, lay.first_gpu + n, dtype=np.int64)
    grid = ids.reshape([sizes[a] for a in axes])
    mapping = Mapping(grid=grid, axes=axes, gpus_per_domain=gpus_per_domain)
    if lay.tp > 1 and not lay.tp_across_domains and mapping.domains_spanned("tp") > 1:
        raise TopoError(f"a TP group of {lay.tp} GPUs spans {mapping.domains_spanned('tp')} NVLink domains of "
                        f"{gpus_per_domain} under rank order {lay.rank_order} and first GPU {lay.first_gpu}; "
                        f"allow it with tp_across_domains", source="layout", key="tp")
    return mapping
