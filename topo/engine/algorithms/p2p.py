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
from .ring import channels_for
from ..schedule import (AlgorithmUnavailable, AllPairs, LatencyCounts, LatencyTerm, NodeShape, Schedule,
                        SchedulePhase, Transfers, is_network, sequential_schedule)

__all__ = ["alltoall_schedule", "sendrecv_schedule", "pipeline_schedule", "rooted_schedule", "MAX_PAIRWISE_FLOWS"]

MAX_PAIRWISE_FLOWS = 4_000_000  # pairwise exchange keeps every step's flows: beyond, use direct


def _counts(shape: NodeShape, t, peers: int = 0, multi: bool = False) -> LatencyCounts:
    if isinstance(t, AllPairs):
        net = t.network(shape)
    else:
        net = bool(is_network(shape, t.src, t.dst).any())
    return LatencyCounts("p2p", intra_hops=0 if net else 1, inter_hops=1 if net else 0, multi_domain=multi,
                         peers=peers)


def alltoall_schedule(shape: NodeShape, placement: Placement, name: str) -> Schedule:
    """All-to-all: every rank sends ``S/p`` to every other, at once (``direct``) or in ``p - 1`` pairwise
    steps (``pairwise``).

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    name : str
        direct or pairwise.

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("an all-to-all needs at least 2 ranks")
    G = placement.num_groups
    gpus = placement.groups
    g = placement.ranks_per_domain() or 1
    remote_peers = p - g
    multi = placement.num_domains > 1
    if name == "direct":
        t = AllPairs(gpus, 1.0 / p)
        sched = Schedule("direct", "p2p", [SchedulePhase([t], 1.0, "all pairs at once")],
                         _counts(shape, t, remote_peers, multi), [LatencyTerm(0, 0, "max")])
        return _per_peer(sched, shape, placement, 1.0 / p)
    flows = G * p * (p - 1)
    if flows > MAX_PAIRWISE_FLOWS:
        raise AlgorithmUnavailable(f"pairwise all-to-all of {G:,} x {p:,} ranks is {flows:,} flows in {p - 1:,} "
                                   f"steps; topo routes up to {MAX_PAIRWISE_FLOWS:,} this way (use direct)")
    ranks = np.arange(p)
    steps = [(Transfers(gpus.ravel(), gpus[:, (ranks + k) % p].ravel(), 1.0 / p, split_nics=True), f"shift {k}")
             for k in range(1, p)]
    return _per_peer(sequential_schedule("pairwise", shape, steps, multi), shape, placement, 1.0 / p)


def _per_peer(sched: Schedule, shape: NodeShape, placement: Placement, fraction: float) -> Schedule:
    """Record what NCCL's per-message protocol choice reads: the bytes of one send per message byte and, across
    the network, NCCL's p2p channels per peer (:func:`net_peer_channels`)."""
    sched.peer_message_fraction = fraction
    if placement.num_domains > 1:
        sched.p2p_channels_per_peer = net_peer_channels(placement.num_ranks,
                                                        2 * channels_for(shape, placement.groups),
                                                        shape.nics_per_gpu)
    return sched


def rooted_schedule(shape: NodeShape, placement: Placement, collective: str) -> Schedule:
    """nccl-tests' gather (every rank sends ``S/p`` to root 0) or scatter (root 0 sends ``S/p`` to every
    rank), grouped sends and receives (src/gather.cu, src/scatter.cu), all at once: the root's links carry
    ``(p-1)/p S``. Closed form on a uniform non-blocking network: ``alpha + (p-1)/p S/B``.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    collective : str
        gather or scatter.

    Returns
    -------
    Schedule
    """
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable(f"a {collective} needs at least 2 ranks")
    gpus = placement.groups
    others = gpus[:, 1:].ravel()
    root = np.repeat(gpus[:, 0], p - 1)
    src, dst = (others, root) if collective == "gather" else (root, others)
    t = Transfers(src, dst, 1.0 / p, split_nics=True)
    g = placement.ranks_per_domain() or 1
    sched = Schedule("direct", "p2p", [SchedulePhase([t], 1.0, f"{collective} at rank 0")],
                     _counts(shape, t, p - g, placement.num_domains > 1), [LatencyTerm(0, 0, "max")])
    return _per_peer(sched, shape, placement, 1.0 / p)


def net_peer_channels(ranks: int, p2p_channels: int, nics_per_gpu: int) -> int:
    """NCCL's p2p channels per network peer (src/graph/paths.cc ncclTopoGetNchannels and
    ncclTopoComputeP2pChannels, NCCL_NCHANNELS_PER_NET_PEER unset): 2, halved while 2 x ranks exceeds
    4 x p2pnChannels (down to 1), at least the NICs a GPU drives, rounded up to a power of two.

    Parameters
    ----------
    ranks : int
    p2p_channels : int
    nics_per_gpu : int

    Returns
    -------
    int
    """
    c = 2
    while c * ranks > 4 * p2p_channels and c > 1:
        c //= 2
    c = max(c, nics_per_gpu)
    return min(1 << (c - 1).bit_length(), max(p2p_channels, 1))


def sendrecv_schedule(shape: NodeShape, placement: Placement, channels: int | None = None) -> Schedule:
    """Send/receive between rank pairs (nccl-tests' sendrecv: each rank sends to the next and receives from
    the previous).

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    channels : int, optional
        Pinned NCCL channels.

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("sendrecv needs at least 2 ranks")
    gpus = placement.groups
    t = Transfers(gpus.ravel(), np.roll(gpus, -1, axis=1).ravel(), 1.0, split_nics=True)
    counts = _counts(shape, t)
    sched = Schedule("direct", "p2p", [SchedulePhase([t], 1.0, "send to next")], counts, [LatencyTerm(0, 0, "max")])
    if counts.inter_hops:  # NCCL's p2pnChannels: its channel count, 2 per NIC a domain's ranks have (or pinned)
        p2p = int(channels) if channels else 2 * channels_for(shape, gpus)
        sched.net_peer_channels = sched.p2p_channels_per_peer = net_peer_channels(p, p2p, shape.nics_per_gpu)
    return sched


def pipeline_schedule(shape: NodeShape, placement: Placement, stages: int) -> Schedule:
    """Pipeline stage boundaries: the ranks split into ``stages`` stages, each sending to the next.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    stages : int

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    p = placement.num_ranks
    if not isinstance(stages, (int, np.integer)) or stages < 2:
        raise AlgorithmUnavailable(f"a pipeline needs at least 2 stages, got {stages!r}")
    if p % stages:
        raise AlgorithmUnavailable(f"{p} ranks do not split into {stages} equal pipeline stages")
    blocks = placement.groups.reshape(placement.num_groups, stages, p // stages)
    t = Transfers(blocks[:, :-1].ravel(), blocks[:, 1:].ravel(), 1.0, split_nics=True)
    sched = Schedule("direct", "p2p", [SchedulePhase([t], 1.0, f"{stages - 1} stage boundaries")], _counts(shape, t),
                     [LatencyTerm(0, 0, "max")])
    return _per_peer(sched, shape, placement, 1.0)
