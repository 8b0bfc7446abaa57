"""Collective algorithms, one module per family; each turns a collective on a placement into a schedule.

Algorithms see the placement and the :class:`~topo.schedule.NodeShape`, never the fabric's links: routing is
:mod:`topo.loads`' job, timing :mod:`topo.cost`'s.
"""

from __future__ import annotations

from ..placement import Placement
from ..schedule import AlgorithmUnavailable, NodeShape, Schedule

__all__ = ["build_schedule", "AlgorithmUnavailable", "Schedule"]


def build_schedule(name: str, collective: str, shape: NodeShape, placement: Placement, chunks: int | None = None,
                   stages: int = 2, channels: int | None = None, gpu_name: str = "these",
                   nvls_reference_ranks: int = 0) -> Schedule:
    """The schedule of algorithm ``name`` for ``collective``; raises AlgorithmUnavailable with the reason.

    ``nvls_reference_ranks``: the profile's NVLS reference (see :func:`topo.algorithms.nvls.nvls_schedule`)."""
    from . import hierarchical, nvls, p2p, recursive, ring, sharp, tree

    if collective in ("all_reduce", "all_gather", "reduce_scatter") and name == "ring":
        return ring.ring_schedule(shape, placement, collective, channels)
    if collective == "broadcast":
        return ring.chain_schedule(shape, placement, chunks, algorithm=name, channels=channels)
    if name == "tree":
        return tree.tree_schedule(shape, placement, chunks, channels)
    if name in ("halving_doubling", "recursive_doubling", "recursive_halving"):
        return recursive.recursive_schedule(shape, placement, collective, name)
    if name == "hierarchical":
        return hierarchical.hierarchical_schedule(shape, placement, collective)
    if name in ("nvls", "nvls_tree"):
        return nvls.nvls_schedule(shape, placement, name, gpu_name, nvls_reference_ranks)
    if name == "sharp":
        return sharp.sharp_schedule(shape, placement)
    if collective == "alltoall":
        return p2p.alltoall_schedule(shape, placement, name)
    if collective == "sendrecv":
        return p2p.sendrecv_schedule(shape, placement)
    if collective == "pipeline":
        return p2p.pipeline_schedule(shape, placement, stages)
    raise AlgorithmUnavailable(f"{name} does not implement {collective}")  # pragma: no cover
