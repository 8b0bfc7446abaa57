"""Collective algorithms, one module per family; each turns a collective on a placement into a plan."""

from __future__ import annotations

from ..placement import Placement
from ..profiles import Profile
from ..route import Router
from .base import AlgorithmUnavailable, Plan

__all__ = ["build_plan", "AlgorithmUnavailable", "Plan"]


def build_plan(name: str, collective: str, router: Router, placement: Placement, profile: Profile,
               chunks: int | None = None, stages: int = 2) -> Plan:
    """The plan of algorithm ``name`` for ``collective``; raises AlgorithmUnavailable with the reason."""
    from . import hierarchical, nvls, p2p, recursive, ring, sharp, tree

    if collective in ("all_reduce", "all_gather", "reduce_scatter") and name == "ring":
        return ring.ring_plan(router, placement, collective)
    if collective == "broadcast":
        return ring.chain_plan(router, placement, chunks, algorithm=name)
    if name == "tree":
        return tree.tree_plan(router, placement, chunks)
    if name in ("halving_doubling", "recursive_doubling", "recursive_halving"):
        return recursive.recursive_plan(router, placement, collective, name)
    if name == "hierarchical":
        return hierarchical.hierarchical_plan(router, placement, collective)
    if name in ("nvls", "nvls_tree"):
        return nvls.nvls_plan(router, placement, name, profile)
    if name == "sharp":
        return sharp.sharp_plan(router, placement)
    if collective == "alltoall":
        return p2p.alltoall_plan(router, placement, name)
    if collective == "sendrecv":
        return p2p.sendrecv_plan(router, placement)
    if collective == "pipeline":
        return p2p.pipeline_plan(router, placement, stages)
    raise AlgorithmUnavailable(f"{name} does not implement {collective}")  # pragma: no cover
