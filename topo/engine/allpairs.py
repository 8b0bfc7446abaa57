"""Routing the parts of a schedule, and the one place that decides how an all-to-all is loaded.

An all-to-all of ``p`` ranks has ``p (p - 1)`` flows per communicator: 10 billion at 100k GPUs. How its loads are
obtained is a choice made by :func:`alltoall_method`, in the open, from the flow count, the ECMP mode, the sharing
model and whether parts failed:

==============  ======================================================================================
``COUNTS``      from the structure, never enumerating pairs (:func:`topo.engine.alltoall.uniform_alltoall_loads`):
                exact for ideal ECMP, failed parts included (NIC failover followed wherever
                :func:`topo.engine.alltoall.counts_follow_failures` says so); for hashed ECMP on an intact fabric
                with too many flows to hash one by one, the expected loads over the hash (``EXPECTED``, with a note)
``HASHED``      hashed ECMP: the NVLink, PCIe and NIC hops from counts, the switch hops hashed flow by flow
                (:func:`topo.engine.alltoall.hashed_alltoall_loads`): the hash's collisions and its re-hash
                around failed parts, exactly, at about 0.2 us per flow
``CLASSES``     the hash's own collisions, exactly, from max-min flow classes (:mod:`topo.engine.alltoall_classes`;
                PXN, failed parts included); with max-min sharing the classes are kept for the solver
``FLOWS``       every flow routed one by one
``CHUNKED``     every flow routed, in chunks, keeping only the summed loads
==============  ======================================================================================

Loaded without routing its flows, an all-to-all on a fabric with failed parts is checked for loads on failed
links (some flow has no working path: :class:`topo.errors.Unreachable`, as routing it would raise), and its
longest path includes the flows of servers with a stand-in NIC (routed one by one: they gain NVLink hops).

The router (:mod:`topo.engine.route`) only routes; it holds no policy and does not change while used.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from ..errors import TopoError, Unreachable
from .alltoall import counts_follow_failures, hashed_alltoall_loads, uniform_alltoall_loads
from . import alltoall_classes as _classes
from .route import Routed, Router
from .schedule import AlgorithmUnavailable, AllPairs, InNetworkReduce, InSwitchReduce, Transfers

__all__ = ["AllPairsMethod", "alltoall_method", "route_all_pairs", "route_part", "EXPLICIT_FLOWS",
           "MAX_HASHED_CLASS_PATHS", "MAX_HASHED_CHUNKED", "MAX_MAXMIN_CLASS_PATHS", "MAX_ENUMERATED_FLOWS"]

EXPLICIT_FLOWS = 1_000_000  # up to this many flows of one part are kept one by one (max-min sharing needs them)
MAX_ENUMERATED_FLOWS = 100_000_000  # an all-to-all enumerated pair by pair beyond this takes minutes
# a hashed all-to-all of more than EXPLICIT_FLOWS flows gets its loads from max-min classes (the hash's own
# collisions, exactly) up to this many class paths (the 4,096-GPU one: 2.1 million, ~1.2 GB, ~5 s); beyond (or where
# classes do not apply: no PXN), its switch hops hashed flow by flow (HASHED, ~0.2 us each; the 100k default's expert
# all-to-all, 1,792 communicators of 56: 5.5 million flows, ~1 s) up to MAX_HASHED_CHUNKED flow parts on an
# intact fabric (beyond: the expected loads over the hash, with a note) and up to MAX_ENUMERATED_FLOWS on a failed
# one (no expectation over the hash is known for the surviving paths)
MAX_HASHED_CLASS_PATHS = 2_500_000
MAX_HASHED_CHUNKED = 40_000_000
# max-min of an all-to-all as classes: about 600 bytes per class path (5.6 million, the expert all-to-all of the
# 100k default with 1,792 communicators of 56: 3.3 GB, 37 s); beyond this, an error instead of exhausting memory
MAX_MAXMIN_CLASS_PATHS = 6_000_000


class AllPairsMethod(Enum):
    """How an all-to-all's loads are obtained (see the module doc)."""

    COUNTS = "counts"
    EXPECTED = "expected"
    HASHED = "hashed"
    CLASSES = "classes"
    FLOWS = "flows"
    CHUNKED = "chunked"


def alltoall_method(router: Router, a: AllPairs, keep_flows: bool = False) -> AllPairsMethod:
    """The way :func:`route_all_pairs` loads the all-to-all ``a`` on ``router``.

    Parameters
    ----------
    router : Router
    a : AllPairs
        The all-to-all (communicators x ranks, bytes per pair).
    keep_flows : bool
        True when every flow (or flow class) must be kept, for max-min sharing.

    Returns
    -------
    AllPairsMethod

    Raises
    ------
    TopoError
        Max-min sharing of more flows or classes than topo keeps.
    AlgorithmUnavailable
        An all-to-all with failed parts too large to route pair by pair.
    """
    n = a.num_flows
    failed = router.fabric.failed is not None
    if not keep_flows and router.ecmp == "ideal" and counts_follow_failures(router, a.groups):
        return AllPairsMethod.COUNTS
    if not keep_flows and router.ecmp == "hash" and n > EXPLICIT_FLOWS:  # too many to keep one by one
        if _classes.classes_apply(router) and _classes.class_paths(router, a) <= MAX_HASHED_CLASS_PATHS:
            return AllPairsMethod.CLASSES
        if not failed and n * router.subflows > MAX_HASHED_CHUNKED:
            return AllPairsMethod.EXPECTED  # (with failed parts, hashed one by one: no expectation over the hash
            # is known for the surviving paths)
        if counts_follow_failures(router, a.groups) and n * router.subflows <= MAX_ENUMERATED_FLOWS:
            return AllPairsMethod.HASHED
    if keep_flows and _classes.classes_apply(router):  # max-min on classes of flows that share their network path (exact)
        paths = _classes.class_paths(router, a)
        if paths > MAX_MAXMIN_CLASS_PATHS:
            raise TopoError(f"max-min sharing of this all-to-all ({n:,} flows) needs {paths:,} flow classes, more "
                            f"than the {MAX_MAXMIN_CLASS_PATHS:,} topo keeps (about 600 bytes each); use "
                            "sharing=equal", key="sharing")
        return AllPairsMethod.CLASSES
    if n <= EXPLICIT_FLOWS:
        return AllPairsMethod.FLOWS
    if keep_flows:
        raise TopoError(f"max-min sharing needs every flow, and this all-to-all has {n:,}, more than the "
                        f"{EXPLICIT_FLOWS:,} kept one by one (flows are merged into classes only with PXN); "
                        "use sharing=equal", key="sharing")
    if n > MAX_ENUMERATED_FLOWS:
        raise AlgorithmUnavailable(f"an all-to-all of {n:,} flows that must be routed pair by pair; topo routes "
                                   f"up to {MAX_ENUMERATED_FLOWS:,}")
    return AllPairsMethod.CHUNKED


def route_all_pairs(router: Router, a: AllPairs, keep_flows: bool = False) -> Routed:
    """A uniform all-to-all, loaded as :func:`alltoall_method` decides.

    Parameters
    ----------
    router : Router
    a : AllPairs
    keep_flows : bool
        Keep every flow (or flow class) for max-min sharing.

    Returns
    -------
    Routed
        Its loads (and flows or classes when kept); a note rides on ``notes`` when the loads are the expected
        ones over the hash.
    """
    method = alltoall_method(router, a, keep_flows)
    n, p = a.num_flows, a.groups.shape[1]
    if method is AllPairsMethod.CLASSES:
        out = _classes.alltoall_classes(router, a)
        _check_reachable(router, out.res, out.weight)
        if not keep_flows:
            out.classes = None  # the hash's collisions, as routing every flow would give them; loads only
        return out
    if method in (AllPairsMethod.COUNTS, AllPairsMethod.EXPECTED, AllPairsMethod.HASHED):
        loads = (hashed_alltoall_loads if method is AllPairsMethod.HASHED else uniform_alltoall_loads)(
            router, a.groups, a.per_msg_byte)
        res = np.flatnonzero(loads)
        _check_reachable(router, res, loads[res])
        # the longest path: rank 0 of the first communicator to every other rank of it (one of each kind of path)
        peers = _path_kinds(router, int(a.groups[0, 0]), a.groups[0, 1:])
        probe = router.route_transfers(Transfers(np.full(peers.size, a.groups[0, 0]), peers, a.per_msg_byte,
                                                 split_nics=True))
        out = Routed.summed(res, loads[res], n, max(float(probe.latency_s.max()), _failover_latency_s(router, a)),
                            bool(probe.network.any()))
        if method is AllPairsMethod.EXPECTED:
            out.notes = (f"ecmp=hash: the all-to-all's {n:,} flows are too many to hash one by one; its loads are "
                         "the expected loads over the hash (as ideal ECMP gives them), without the hash's "
                         "collisions",)
        return out
    if method is AllPairsMethod.FLOWS:
        i, j = np.nonzero(~np.eye(p, dtype=bool))
        return router.route_transfers(Transfers(a.groups[:, i].ravel(), a.groups[:, j].ravel(), a.per_msg_byte,
                                                split_nics=True))
    k = max(1, router.fabric.layout.nics_per_server // router.fabric.layout.gpus_per_server)
    chunks = ((t.src, t.dst, t.per_msg_byte / k, c) for t in a.transfers(EXPLICIT_FLOWS // k) for c in range(k))
    return router.route_summed(chunks)


def _path_kinds(router: Router, src: int, dst: np.ndarray) -> np.ndarray:
    """One of ``dst`` for every kind of path from ``src``: the destinations whose paths cross the same levels.

    Every link of a level has the same latency, so a path's latency is fixed by the levels it crosses, and these
    by the destination's place relative to the source: its GPU's index in its server (its NICs, their rails, hence
    a PXN hop and the leaves' rails), whether it shares the source's server, NVLink domain and scalable unit, and
    the highest tier whose block the two share. A failed part can change one pair's path (a stand-in NIC): then
    every destination is kept.
    """
    f = router.fabric
    L = f.layout
    dst = np.asarray(dst, dtype=np.int64)
    if f.failed is not None or dst.size == 0:
        return dst
    per_server = L.gpus_per_server
    unit_s, unit_d = src // per_server // L.servers_per_unit, dst // per_server // L.servers_per_unit
    shared = [dst // per_server == src // per_server, f.gpu_domain(dst) == f.gpu_domain(src)]
    shared += [unit_d // L.units_per_block(k) == unit_s // L.units_per_block(k) for k in range(L.num_tiers)]
    key = dst % per_server
    for same in shared:
        key = 2 * key + same
    _, first = np.unique(key, return_index=True)
    return dst[np.sort(first)]


def _check_reachable(router: Router, res: np.ndarray, weight: np.ndarray) -> None:
    """Loads put on a failed link (an all-to-all loaded without routing its flows) mean that some flow has no
    working path: the error routing that flow would raise."""
    f = router.fabric
    if f.failed is None:
        return
    dead = weight > 0
    dead[dead] = router.capacity_Bps[res[dead]] <= 0
    if dead.any():
        d = router.describe_resource(int(res[np.flatnonzero(dead)[0]]))
        raise Unreachable(f"some flows of the all-to-all cross only failed parts ({d['src']} -> {d['dst']}, "
                          f"{d['level']}; failures: {', '.join(f.failures)})", key="fail")


def _failover_latency_s(router: Router, a: AllPairs) -> float:
    """The longest routed latency of the flows from and to the GPUs of servers with a failed NIC (a stand-in NIC
    adds NVLink hops; every other flow keeps its intact path), 0 when there are none."""
    f = router.fabric
    if f.failed is None:
        return 0.0
    N = f.layout.nics_per_server
    g = np.asarray(a.groups, dtype=np.int64)
    G, p = g.shape
    srv = f.gpu_server(g)
    hit = ~router.paths.nic_ok(srv[..., None] * N + np.arange(N)).all(axis=-1)
    rows, cols = np.nonzero(hit)
    if rows.size == 0:
        return 0.0
    peers = g[rows]  # [affected GPU, rank]
    me = g[rows, cols][:, None]
    keep = peers != me
    src = np.broadcast_to(me, peers.shape)[keep]
    dst = peers[keep]
    out = 0.0
    for lo in range(0, src.size, EXPLICIT_FLOWS):
        s, d = src[lo:lo + EXPLICIT_FLOWS], dst[lo:lo + EXPLICIT_FLOWS]
        r = router.route_transfers(Transfers(np.r_[s, d], np.r_[d, s], a.per_msg_byte, split_nics=True))
        out = max(out, float(r.latency_s.max()))
    return out


def route_part(router: Router, part, keep_flows: bool = False) -> Routed:
    """Route one part of a schedule phase (see :mod:`topo.engine.schedule`).

    Parameters
    ----------
    router : Router
    part : Transfers, AllPairs, InSwitchReduce or InNetworkReduce
    keep_flows : bool
        Keep every flow (max-min sharing).

    Returns
    -------
    Routed
    """
    if isinstance(part, Transfers):
        return router.route_transfers(part)
    if isinstance(part, AllPairs):
        return route_all_pairs(router, part, keep_flows)
    if isinstance(part, InSwitchReduce):
        return router.in_switch_reduce(part.gpus, part.per_msg_byte)
    if isinstance(part, InNetworkReduce):
        return router.in_network_reduce(part.gpus, part.communicator, part.per_msg_byte)
    raise TypeError(f"cannot route {type(part).__name__}")  # pragma: no cover
