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
from ..profiles import Profile
from ..route import Routed, Router
from .base import AlgorithmUnavailable, LatencyCounts, Phase, Plan, ranks_per_domain
from .tree import double_binary_tree

__all__ = ["nvls_plan", "switch_reduce_loads"]


def switch_reduce_loads(router: Router, gpus: np.ndarray, g: int) -> Routed:
    """NVLink loads of an in-switch reduce-scatter + multicast all-gather: ``S (1 + 1/g)`` each way per GPU."""
    lo = router.fabric.link_offset["nvlink"]
    w = 1.0 + 1.0 / g
    link = lo + gpus
    n = gpus.size
    return Routed(res=np.r_[2 * link, 2 * link + 1], weight=np.full(2 * n, w), flow=np.r_[np.arange(n), np.arange(n)],
                  num_flows=n, flow_bytes=np.full(n, 2 * w), latency_s=router.res_latency_s[2 * link] * 2,
                  network=np.zeros(n, dtype=bool))


def nvls_plan(router: Router, placement: Placement, name: str, profile: Profile) -> Plan:
    f = router.fabric
    if not f.spec.nvls:
        raise AlgorithmUnavailable(f"{f.spec.gpu} NVSwitches cannot reduce in the switch (no NVLS)")
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("NVLS needs at least 2 ranks")
    g = ranks_per_domain(placement, "NVLS")
    D = placement.num_domains
    if g < 2:
        raise AlgorithmUnavailable("NVLS needs at least 2 ranks in each NVLink domain")
    local = switch_reduce_loads(router, placement.gpus, g)
    if name == "nvls":
        if D > 1:
            raise AlgorithmUnavailable("nvls reduces inside one NVLink domain; across domains use nvls_tree")
        counts = LatencyCounts("nvls", routed_s=float(local.latency_s.max()))
        return Plan("nvls", "nvls", [Phase(local, 1.0, "in-switch reduce + multicast")], counts)
    if D < 2:
        raise AlgorithmUnavailable("nvls_tree spans NVLink domains; inside one domain use nvls")
    G = placement.num_groups
    gpus = placement.groups.reshape(G, D, g)
    p0, p1, depth = double_binary_tree(D)
    src, dst, choice = [], [], []
    per_nic = max(1, f.layout.nics_per_server // f.layout.gpus_per_server)
    for parent in (p0, p1):
        child = np.flatnonzero(parent >= 0)
        for c in range(per_nic):
            src.append(gpus[:, child].ravel())
            dst.append(gpus[:, parent[child]].ravel())
            choice.append(np.full(G * child.size * g, c))
    src, dst, choice = np.concatenate(src), np.concatenate(dst), np.concatenate(choice)
    share = 1.0 / (2 * g * per_nic)  # each rank's S/g share, split in two trees (and over its NICs)
    up = router.route(src, dst, share, choice)
    down = router.route(dst, src, share, choice)
    routed = Routed.concat([local, up, down])
    r_inter = float(up.latency_s.max()) if up.num_flows else 0.0
    counts = LatencyCounts("nvls_tree", inter_hops=2 * depth, routed_s=float(local.latency_s.max())
                           + 2 * depth * r_inter, multi_domain=True)
    return Plan("nvls_tree", "nvls_tree", [Phase(routed, 1.0, "in-switch reduce + trees across domains")], counts)
