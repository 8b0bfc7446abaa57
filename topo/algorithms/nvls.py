"""NVLS: all-reduce with the reduction done in the NVSwitch (NVLink SHARP, Hopper and newer).

Inside one NVLink domain of ``g`` ranks (NCCL's NVLS algorithm): each rank pulls its ``1/g`` share of the vector
reduced by the switch (``multimem.ld_reduce``: the switch reads that share from every rank), then pushes the
reduced share to the switch, which multicasts it to every rank (``multimem.st``). Per rank and direction the
NVLink carries ``S + S/g`` bytes, against ``2(g-1)/g S`` for a ring, hence busbw ``2(g-1)/(g+1)`` times the
usable NVLink bandwidth (1.56x at g = 8): NVIDIA's maintainers quote ~480 GB/s busbw on 8 H100 with NVLS versus
~370 GB/s with Ring (nccl-tests issue #212).

``nvls_tree`` (NCCL's NVLSTree) spans domains: the same in-switch reduce-scatter and multicast inside every
domain, and between them a double binary tree per local rank carrying that rank's ``S/g`` share; all three run
concurrently on successive chunks, so their loads add up in one phase.
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..schedule import (AlgorithmUnavailable, InSwitchReduce, LatencyCounts, LatencyTerm, NodeShape, Schedule,
                        SchedulePhase, Transfers, ranks_per_domain)
from .tree import double_binary_tree

__all__ = ["nvls_schedule"]


def nvls_schedule(shape: NodeShape, placement: Placement, name: str, gpu_name: str = "these") -> Schedule:
    if not shape.nvls:
        raise AlgorithmUnavailable(f"{gpu_name} NVSwitches cannot reduce in the switch (no NVLS)")
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("NVLS needs at least 2 ranks")
    g = ranks_per_domain(placement, "NVLS")
    D = placement.num_domains
    if g < 2:
        raise AlgorithmUnavailable("NVLS needs at least 2 ranks in each NVLink domain")
    # in-switch reduce-scatter + multicast all-gather: S (1 + 1/g) each way per GPU
    local = InSwitchReduce(placement.gpus, 1.0 + 1.0 / g)
    if name == "nvls":
        if D > 1:
            raise AlgorithmUnavailable("nvls reduces inside one NVLink domain; across domains use nvls_tree")
        return Schedule("nvls", "nvls", [SchedulePhase([local], 1.0, "in-switch reduce + multicast")],
                        LatencyCounts("nvls"), [LatencyTerm(0, 0, "max")])
    if D < 2:
        raise AlgorithmUnavailable("nvls_tree spans NVLink domains; inside one domain use nvls")
    G = placement.num_groups
    gpus = placement.groups.reshape(G, D, g)
    p0, p1, depth = double_binary_tree(D)
    src, dst, choice = [], [], []
    per_nic = shape.nics_per_gpu
    for parent in (p0, p1):
        child = np.flatnonzero(parent >= 0)
        for c in range(per_nic):
            src.append(gpus[:, child].ravel())
            dst.append(gpus[:, parent[child]].ravel())
            choice.append(np.full(G * child.size * g, c))
    src, dst, choice = np.concatenate(src), np.concatenate(dst), np.concatenate(choice)
    share = 1.0 / (2 * g * per_nic)  # each rank's S/g share, split in two trees (and over its NICs)
    up = Transfers(src, dst, share, choice)
    down = Transfers(dst, src, share, choice)
    counts = LatencyCounts("nvls_tree", inter_hops=2 * depth, multi_domain=True)
    terms = [LatencyTerm(0, 0, "max"), LatencyTerm(0, 1, "max", 2 * depth)]
    return Schedule("nvls_tree", "nvls_tree",
                    [SchedulePhase([local, up, down], 1.0, "in-switch reduce + trees across domains")], counts, terms)
