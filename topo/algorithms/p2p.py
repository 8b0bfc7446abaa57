"""Point-to-point patterns: all-to-all, sendrecv and pipeline stage boundaries.

- ``alltoall``: every rank sends ``S/p`` to every rank (nccl-tests' size is one rank's send buffer).
  ``direct`` posts every send at once (as NCCL does), one step; ``pairwise`` exchanges with rank ``i+k`` in step
  ``k = 1..p-1``. Closed form of pairwise on a uniform non-blocking network: ``(p-1) alpha + (p-1)/p S/B``.
- ``sendrecv``: nccl-tests' pattern: every rank sends ``S`` to the next rank and receives from the previous
  (two ranks: one pair, both ways). Closed form: ``alpha + S/B``.
- ``pipeline``: the ranks split into ``stages`` consecutive blocks; every rank of block ``s`` sends ``S`` to the
  rank at the same position in block ``s+1``, all boundaries at once (pipeline parallelism's activations).

A GPU with several NICs (e.g. 4 EFA NICs per H100 on AWS p5) spreads each message over them.
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..route import Routed, Router
from .base import AlgorithmUnavailable, LatencyCounts, Phase, Plan, sequential_plan

__all__ = ["alltoall_plan", "sendrecv_plan", "pipeline_plan", "MAX_ALLTOALL_FLOWS"]

MAX_ALLTOALL_FLOWS = 4_200_000  # 2,048 ranks: beyond this the explicit flow list outgrows memory


def _nics_per_gpu(router: Router) -> int:
    L = router.fabric.layout
    return max(1, L.nics_per_server // L.gpus_per_server)


def _route_split(router: Router, src, dst, nbytes) -> Routed:
    """Route flows, each spread evenly over the NICs of its destination GPU."""
    k = _nics_per_gpu(router)
    if k == 1:
        return router.route(src, dst, nbytes)
    parts = [router.route(src, dst, nbytes / k, choice=c) for c in range(k)]
    return Routed.concat(parts)


def _counts(routed: Routed, peers: int = 0, multi: bool = False) -> LatencyCounts:
    net = bool(routed.network.any())
    return LatencyCounts("p2p", intra_hops=0 if net else 1, inter_hops=1 if net else 0,
                         routed_s=float(routed.latency_s.max()) if routed.num_flows else 0.0, multi_domain=multi,
                         peers=peers)


def alltoall_plan(router: Router, placement: Placement, name: str) -> Plan:
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("an all-to-all needs at least 2 ranks")
    G = placement.num_groups
    if G * p * (p - 1) > MAX_ALLTOALL_FLOWS:
        raise AlgorithmUnavailable(f"an all-to-all over {G * p:,} ranks is {G * p * (p - 1):,} flows; topo routes "
                                   f"all-to-all explicitly up to {MAX_ALLTOALL_FLOWS:,} flows (2,048 ranks)")
    gpus = placement.groups
    g = placement.ranks_per_domain() or 1
    remote_peers = p - g
    multi = placement.num_domains > 1
    if name == "direct":
        i, j = np.nonzero(~np.eye(p, dtype=bool))
        routed = _route_split(router, gpus[:, i].ravel(), gpus[:, j].ravel(), 1.0 / p)
        return Plan("direct", "p2p", [Phase(routed, 1.0, "all pairs at once")],
                    _counts(routed, remote_peers, multi))
    ranks = np.arange(p)
    steps = [(_route_split(router, gpus.ravel(), gpus[:, (ranks + k) % p].ravel(), 1.0 / p), f"shift {k}")
             for k in range(1, p)]
    return sequential_plan("pairwise", steps, multi)


def sendrecv_plan(router: Router, placement: Placement) -> Plan:
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("sendrecv needs at least 2 ranks")
    gpus = placement.groups
    routed = _route_split(router, gpus.ravel(), np.roll(gpus, -1, axis=1).ravel(), 1.0)
    return Plan("direct", "p2p", [Phase(routed, 1.0, "send to next")], _counts(routed))


def pipeline_plan(router: Router, placement: Placement, stages: int) -> Plan:
    p = placement.num_ranks
    if not isinstance(stages, (int, np.integer)) or stages < 2:
        raise AlgorithmUnavailable(f"a pipeline needs at least 2 stages, got {stages!r}")
    if p % stages:
        raise AlgorithmUnavailable(f"{p} ranks do not split into {stages} equal pipeline stages")
    blocks = placement.groups.reshape(placement.num_groups, stages, p // stages)
    routed = _route_split(router, blocks[:, :-1].ravel(), blocks[:, 1:].ravel(), 1.0)
    return Plan("direct", "p2p", [Phase(routed, 1.0, f"{stages - 1} stage boundaries")], _counts(routed))
