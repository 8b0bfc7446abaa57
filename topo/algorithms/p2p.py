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

__all__ = ["alltoall_plan", "sendrecv_plan", "pipeline_plan", "MAX_ALLTOALL_FLOWS", "EXPLICIT_FLOWS"]

EXPLICIT_FLOWS = 1_000_000  # up to this many flows are kept one by one (max-min sharing needs them)
MAX_ALLTOALL_FLOWS = 100_000_000  # beyond, the all-to-all takes too long to route (about a minute per 100M)
_CHUNK_FLOWS = 1_000_000


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


def _pair_chunks(router: Router, gpus: np.ndarray, nbytes: float):
    """Every ordered pair of distinct ranks of every group, in chunks of about a million flows, each flow spread
    over its destination's NICs."""
    G, p = gpus.shape
    k = _nics_per_gpu(router)
    rows = max(1, _CHUNK_FLOWS // max(1, (p - 1) * k))  # (group, source rank) rows per chunk
    pairs = np.arange(G * p)
    for start in range(0, pairs.size, rows):
        sel = pairs[start:start + rows]
        g, i = sel // p, sel % p
        j = np.arange(p)[None, :].repeat(sel.size, 0)
        keep = j != i[:, None]
        src = np.repeat(gpus[g, i], p - 1)
        dst = gpus[g[:, None].repeat(p, 1)[keep], j[keep]]
        for c in range(k):
            yield src, dst, nbytes / k, c


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
    flows = G * p * (p - 1)
    limit = MAX_ALLTOALL_FLOWS if name == "direct" else 4 * EXPLICIT_FLOWS
    if flows > limit:
        raise AlgorithmUnavailable(f"{name} all-to-all of {G:,} x {p:,} ranks is {flows:,} flows; topo routes up "
                                   f"to {limit:,}")
    gpus = placement.groups
    g = placement.ranks_per_domain() or 1
    remote_peers = p - g
    multi = placement.num_domains > 1
    if name == "direct":
        if flows > EXPLICIT_FLOWS and router.keep_flows:
            raise AlgorithmUnavailable(f"max-min sharing needs every flow, and this all-to-all has {flows:,}, more "
                                       f"than the {EXPLICIT_FLOWS:,} kept one by one; use --sharing equal")
        if flows <= EXPLICIT_FLOWS:
            i, j = np.nonzero(~np.eye(p, dtype=bool))
            routed = _route_split(router, gpus[:, i].ravel(), gpus[:, j].ravel(), 1.0 / p)
        else:
            routed = router.route_summed(_pair_chunks(router, gpus, 1.0 / p))
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
