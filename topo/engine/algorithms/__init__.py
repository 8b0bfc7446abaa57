"""Collective algorithms, one module per family; each turns a collective on a placement into a schedule.

Algorithms see the placement and the :class:`~topo.engine.schedule.NodeShape`, never the fabric's links: routing is
:mod:`topo.engine.loads`' job, timing :mod:`topo.engine.cost`'s.
"""

from __future__ import annotations

import dataclasses

from ..placement import Placement
from ..schedule import AlgorithmUnavailable, NodeShape, Schedule
from . import hierarchical, nvls, p2p, pat, recursive, ring, sharp, tree

__all__ = ["build_schedule", "AlgorithmUnavailable", "Schedule"]


def build_schedule(name: str, collective: str, shape: NodeShape, placement: Placement, chunks: int | None = None,
                   stages: int = 2, channels: int | None = None, gpu_name: str = "these",
                   reference_ranks_per_domain: int = 0, nvls_max_heads: int = 0, mnnvl: bool = False) -> Schedule:
    """The schedule of algorithm ``name`` for ``collective`` on ``placement``.

    Parameters
    ----------
    name : str
        An algorithm of :data:`topo.engine.collectives.ALGORITHMS`.
    collective : str
        A normalised collective name.
    shape : NodeShape
    placement : Placement
    chunks : int, optional
        Store-and-forward chunks (tree, broadcast); default streaming.
    stages : int
        Pipeline stages (``pipeline``).
    channels : int, optional
        Pinned NCCL channels.
    gpu_name : str
        For messages.
    reference_ranks_per_domain : int
        The profile's: the ranks per NVLink domain its pipeline window was fitted at. Ring and tree schedules scale
        the window by ``g / reference`` for ``g`` ranks per domain; NVLS also by its tree's depth
        (:mod:`topo.engine.algorithms.nvls`).
    nvls_max_heads : int
        The most NVLSTree heads per domain (0: one per NIC).
    mnnvl : bool
        The communicator's ranks in one NVLink domain sit on several servers (multi-node NVLink, an NVL72 rack):
        its NVLink steps are priced with the profile's MNNVL terms (:func:`topo.engine.cost.latency_s`).

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        With the reason the algorithm cannot run here.
    """
    sched = _build(name, collective, shape, placement, chunks, stages, channels, gpu_name,
                   (reference_ranks_per_domain, nvls_max_heads))
    g = placement.ranks_per_domain()
    if reference_ranks_per_domain > 0 and sched.family in ("ring", "tree") and g:
        sched.window_scale = g / reference_ranks_per_domain
    sched.pinned_channels = channels  # NCCL's per-channel caps scale with a pinned count
    if mnnvl:
        sched.latency = dataclasses.replace(sched.latency, mnnvl=True)
    return sched


def _build(name, collective, shape, placement, chunks, stages, channels, gpu_name, nvls_args) -> Schedule:
    if collective in ("all_reduce", "all_gather", "reduce_scatter") and name == "ring":
        return ring.ring_schedule(shape, placement, collective, channels)
    if collective == "broadcast":
        return ring.chain_schedule(shape, placement, chunks, algorithm=name, channels=channels)
    if collective == "reduce":  # NCCL's ring reduce: the broadcast's chain run towards the root
        towards_root = dataclasses.replace(placement, groups=placement.groups[:, ::-1])
        return ring.chain_schedule(shape, towards_root, chunks, algorithm=name, channels=channels)
    if collective in ("gather", "scatter"):
        return p2p.rooted_schedule(shape, placement, collective)
    if name == "pat":
        return pat.pat_schedule(shape, placement, collective)
    if name == "tree":
        return tree.tree_schedule(shape, placement, chunks, channels)
    if name in ("halving_doubling", "recursive_doubling", "recursive_halving"):
        return recursive.recursive_schedule(shape, placement, collective, name)
    if name == "hierarchical":
        return hierarchical.hierarchical_schedule(shape, placement, collective)
    if name in ("nvls", "nvls_tree"):
        return nvls.nvls_schedule(shape, placement, name, gpu_name, *nvls_args, collective=collective)
    if name == "sharp":
        return sharp.sharp_schedule(shape, placement)
    if collective == "alltoall":
        return p2p.alltoall_schedule(shape, placement, name)
    if collective == "sendrecv":
        return p2p.sendrecv_schedule(shape, placement, channels)
    if collective == "pipeline":
        return p2p.pipeline_schedule(shape, placement, stages)
    raise AlgorithmUnavailable(f"{name} does not implement {collective}")  # pragma: no cover
