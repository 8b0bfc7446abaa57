"""A uniform all-to-all as max-min flow classes (:mod:`topo.engine.flow_classes`, filled by :mod:`topo.engine.maxmin`), without routing every GPU pair.

With PXN, a GPU sends to another NVLink domain through the NIC of its own server that sits on the destination
NIC's rail (NCCL's PXN: the data crosses NVLink to that NIC's GPU first). So every GPU of a communicator on one
server reaches a given destination through the same NIC, the same hashed switch path (the hash keys on the two
NICs) and the same receiving NIC: their paths differ only before that NIC, in the NVLink hop and the host link
that bring each GPU's data to it. One class per (communicator, sending server, destination rank, NIC choice)
then stands for all of those GPUs; its members' first hops form a *template* shared by every class of the same
(communicator, sending server, rail): which GPU crosses which NVLink and host link to reach that rail's NIC.

For the 4,096-GPU hashed all-to-all (16.8 million flows) this is 2.1 million classes, each with the 6-8 resources
of one network path, plus 4,096 templates of a few dozen entries: what max-min needs, exactly (the solver checks
that no template resource crossed by only some members binds; see :mod:`topo.engine.maxmin`).

Flows inside an NVLink domain stay one class each.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .flow_classes import FlowClasses
from .route import Routed, Router
from .schedule import AllPairs, Transfers

__all__ = ["classes_apply", "class_paths", "alltoall_classes"]


def classes_apply(router: Router) -> bool:
    """Whether :func:`alltoall_classes` can merge flows on this router: PXN on, unless the router was told to keep
    flows one by one (``merge_classes``). Failed parts keep the classes whole: a failed NIC's stand-in is chosen per
    NIC (:meth:`topo.engine.paths.Paths.alive_nics`), so the GPUs of a server still reach a destination through one
    sending NIC, one hashed path (the hash keys on the two NICs and picks among the surviving cables by the
    leaves) and one receiving NIC.

    Parameters
    ----------
    router : Router

    Returns
    -------
    bool
    """
    return router.merge_classes and router.pxn


def class_paths(router: Router, a: AllPairs) -> int:
    """An upper bound on the network paths :func:`alltoall_classes` builds for ``a`` (one per (communicator,
    sending server, destination rank, NIC choice, hashed part)): what its memory and time grow with.

    Parameters
    ----------
    router : Router
    a : AllPairs
        The all-to-all part (its communicators).

    Returns
    -------
    int
    """
    f = router.fabric
    groups = np.asarray(a.groups, dtype=np.int64)
    G, p = groups.shape
    k = max(1, f.layout.nics_per_server // f.layout.gpus_per_server)
    pairs = np.unique((np.arange(G)[:, None] * (f.num_gpus + 1) + f.gpu_server(groups)).ravel()).size
    return pairs * p * k * router.subflows


def alltoall_classes(router: Router, a: AllPairs) -> Routed:
    """Every ordered pair of ranks of every communicator of ``a``, as max-min classes; ``res``/``weight`` carry
    the summed loads, as for any routed part.

    Parameters
    ----------
    router : Router
        With PXN on (:func:`classes_apply`).
    a : AllPairs
        The all-to-all part: its communicators and bytes per pair.

    Returns
    -------
    Routed
        Summed loads, with ``classes`` holding the flow classes for max-min.
    """
    f = router.fabric
    L = f.layout
    groups = np.asarray(a.groups, dtype=np.int64)
    G, p = groups.shape
    N = L.nics_per_server
    k = max(1, N // L.gpus_per_server)  # NICs per GPU: the bytes of each pair are split over them
    K = router.subflows
    member_bytes = float(a.per_msg_byte) / k
    dom = groups // L.gpus_per_domain

    pr = _server_pairs(f, groups)
    u_idx, c_idx, dst = _base_classes(groups, dom, pr, k, L.gpus_per_domain)
    # templates: (pair, rail of the receiving NIC)
    if f.failed is None:
        q = f.gpu_nic(dst, c_idx) % N
    else:  # the sending NIC after failover at both ends (the same for every member of the pair)
        q = router.paths.endpoints(pr.rep[u_idx], dst, c_idx)[0].nic % N
    base_tpl = u_idx * N + q
    tp = _templates(router, base_tpl, N, pr, dst, c_idx)
    template, mult, per = _sub_classes(base_tpl, tp)
    C0, C = u_idx.size, template.size

    # the network part of each class: its representative's path from the sending NIC on
    res, base_cls = _network_paths(router, pr.rep[u_idx], dst, c_idx, K)
    if C > C0:  # copy each base class's path to its sub-classes
        first_sub = np.cumsum(per) - per
        reps = per[base_cls]
        cls = np.repeat(first_sub[base_cls], reps) + (np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps))
        res = np.repeat(res, reps)
    else:
        cls = base_cls
    a_dir = mult.astype(float)[cls]  # gathered as floats: one array of the incidences' size, not two
    a_dir /= K  # each member's bytes split over K hashed parts
    t_id, t_res, n_cross = tp.t_id, tp.t_res, tp.n_cross

    fc = FlowClasses(np.full(C, member_bytes), mult.astype(np.int64), cls, res, a_dir,
                     template, t_id, t_res, n_cross.astype(float), tp.t_partial)

    # summed loads: direct parts, plus each template's hops once per class using it
    n_res = router.num_res
    # float even when no class leaves its domain (bincount of nothing is int64, and the += below then fails)
    loads = np.zeros(n_res)
    for lo in range(0, res.size, _CHUNK_CLASSES * 8):  # weights a chunk at a time: no second incidence-sized array
        loads += np.bincount(res[lo:lo + _CHUNK_CLASSES * 8], weights=a_dir[lo:lo + _CHUNK_CLASSES * 8] * member_bytes,
                             minlength=n_res)
    per_t = np.bincount(template, minlength=tp.num_sub).astype(float)
    loads += np.bincount(t_res, weights=n_cross * per_t[t_id] * member_bytes, minlength=n_res)

    # flows inside a domain: one class each
    parts = [fc]
    src_in, dst_in = _pairs_within(groups, dom)
    if src_in.size:
        intra = router.route_transfers(Transfers(src_in, dst_in, a.per_msg_byte, split_nics=True))
        loads += np.bincount(intra.res, weights=intra.weight, minlength=n_res)
        parts.append(FlowClasses.single(intra.res, intra.flow, intra.weight, intra.flow_bytes))

    # latency: the longest path, rank 0 of the first communicator to every other rank of it (as the loads
    # from the structure report it)
    probe = router.route_transfers(Transfers(np.repeat(groups[0, :1], p - 1), groups[0, 1:], a.per_msg_byte,
                                             split_nics=True))
    used = np.flatnonzero(loads)
    out = Routed.summed(used, loads[used], a.num_flows, float(probe.latency_s.max()), bool(probe.network.any()))
    out.classes = FlowClasses.concat(parts)
    return out


class _Pairs(NamedTuple):
    """The (communicator, server) pairs of an all-to-all and their member GPUs, grouped by pair."""

    start: np.ndarray  # first member of each pair in ``members``
    count: np.ndarray  # members of each pair
    members: np.ndarray  # member GPU ids, grouped by pair
    group: np.ndarray  # the communicator of each pair
    rep: np.ndarray  # the first GPU of each pair: it sends for all of them


def _server_pairs(f, groups: np.ndarray) -> _Pairs:
    """Each communicator's GPUs grouped by server: one pair per (communicator, server)."""
    G = groups.shape[0]
    key = (np.arange(G)[:, None] * (f.num_gpus + 1) + f.gpu_server(groups)).ravel()
    order = np.argsort(key, kind="stable")
    uk, start, count = np.unique(key[order], return_index=True, return_counts=True)
    members = groups.ravel()[order]
    return _Pairs(start, count, members, uk // (f.num_gpus + 1), members[start])


def _base_classes(groups: np.ndarray, dom: np.ndarray, pr: _Pairs, k: int, gpus_per_domain: int):
    """The base classes, pair u x destination rank of its communicator in another NVLink domain x NIC choice c:
    ``(u, c, destination GPU)`` of each."""
    p = groups.shape[1]
    U = pr.start.size
    u_idx = np.repeat(np.arange(U), p)
    j_idx = np.tile(np.arange(p), U)
    keep = dom[pr.group[u_idx], j_idx] != pr.rep[u_idx] // gpus_per_domain
    u_idx, j_idx = u_idx[keep], j_idx[keep]
    if k > 1:
        c_idx = np.repeat(np.arange(k), u_idx.size)
        u_idx, j_idx = np.tile(u_idx, k), np.tile(j_idx, k)
    else:
        c_idx = np.zeros(u_idx.size, dtype=np.int64)
    return u_idx, c_idx, groups[pr.group[u_idx], j_idx]


class _Templates(NamedTuple):
    """Templates, one per (pair, rail of the receiving NIC), split into sub-templates by the host link their
    members leave through; the incidences of each sub-template (``t_id``, ``t_res``, ``n_cross`` members crossing,
    ``t_partial`` when not all do)."""

    used: np.ndarray  # template keys in use (pair x N + rail), sorted
    sub_start: np.ndarray  # first sub-template of each template
    sub_size: np.ndarray  # members of each sub-template
    num_sub: int
    t_id: np.ndarray
    t_res: np.ndarray
    n_cross: np.ndarray
    t_partial: np.ndarray


def _templates(router: Router, base_tpl: np.ndarray, N: int, pr: _Pairs, dst: np.ndarray,
               c_idx: np.ndarray) -> _Templates:
    """The members' first hops to the rail's NIC (the path's head), by template, split by the host link they leave
    through (members that share a NIC but not a host link move apart)."""
    t_used, t_first = np.unique(base_tpl, return_index=True)
    tu = t_used // N
    m_rows = np.repeat(np.arange(t_used.size), pr.count[tu])  # one row per (template, member)
    m_gpu = pr.members[_ranges(pr.start[tu], pr.count[tu])]
    first = t_first[m_rows]
    slots = router.slots
    mcols, _ = router.path_table(m_gpu, dst[first], c_idx[first], np.zeros(m_gpu.size, dtype=np.int64))
    head = mcols[:, slots.head].astype(np.int64)
    del mcols
    sub_key = m_rows * (router.num_res + 1) + (head[:, slots.SEND_PCIE] + 1)
    sub_u, m_sub = np.unique(sub_key, return_inverse=True)  # sub-templates, ordered by template
    sub_tpl = sub_u // (router.num_res + 1)
    sub_size = np.bincount(m_sub, minlength=sub_u.size)
    sub_start = np.searchsorted(sub_tpl, np.arange(t_used.size + 1))
    ok = head >= 0
    r_rows, r_col = np.nonzero(ok)
    tk = m_sub[r_rows] * router.num_res + head[r_rows, r_col]
    uq, n_cross = np.unique(tk, return_counts=True)  # per (sub-template, resource): members crossing it
    t_id, t_res = uq // router.num_res, uq % router.num_res
    return _Templates(t_used, sub_start, sub_size, sub_u.size, t_id, t_res, n_cross, n_cross < sub_size[t_id])


def _sub_classes(base_tpl: np.ndarray, tp: _Templates):
    """One class per (base class, sub-template of its template): ``(template of each class, its members,
    sub-classes per base class)``."""
    base_t = np.searchsorted(tp.used, base_tpl)
    n_sub = np.diff(tp.sub_start)
    per = n_sub[base_t]
    C0 = base_tpl.size
    base_of = np.repeat(np.arange(C0), per) if np.any(per > 1) else np.arange(C0)
    template = tp.sub_start[base_t[base_of]] + (np.arange(base_of.size) - np.repeat(np.cumsum(per) - per, per)
                                                if np.any(per > 1) else 0)
    return template, tp.sub_size[template], per


_CHUNK_CLASSES = 1 << 19  # classes routed at once: the path table and its temporaries stay ~100-200 MB


def _network_paths(router: Router, src: np.ndarray, dst: np.ndarray, choice: np.ndarray, K: int):
    """The network hops of every class's path (``src[i] -> dst[i]`` on NIC ``choice[i]``, each of its ``K``
    hashed parts): ``(res, cls)``, the resource ids (int32) and each one's class, grouped by class in order.

    Routed :data:`_CHUNK_CLASSES` classes at a time: the router's path table of every class at once (5.5 million
    at 100k GPUs) and its temporaries took over 1.5 GB."""
    net_cols = router.slots.network
    res_parts, cls_parts = [], []
    for lo in range(0, src.size, _CHUNK_CLASSES):
        hi = min(src.size, lo + _CHUNK_CLASSES)
        n = hi - lo
        cols, _ = router.path_table(np.repeat(src[lo:hi], K), np.repeat(dst[lo:hi], K), np.repeat(choice[lo:hi], K),
                                    np.tile(np.arange(K), n))
        net = cols[:, net_cols]
        del cols
        ok = net >= 0
        rows, _ = np.nonzero(ok)
        res_parts.append(net[ok])  # int32, as the router's path table
        cls_parts.append((rows // K + lo).astype(np.int32))
    if not res_parts:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
    return np.concatenate(res_parts), np.concatenate(cls_parts)


def _ranges(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(lo[i], lo[i] + n[i])``."""
    total = int(n.sum())
    return np.arange(total) + np.repeat(lo - np.cumsum(np.r_[0, n[:-1]]), n)


def _pairs_within(groups: np.ndarray, dom: np.ndarray):
    """Every ordered pair of distinct ranks of a communicator that share an NVLink domain, as GPU ids."""
    G = groups.shape[0]
    key = (np.arange(G)[:, None] * (int(dom.max()) + 1) + dom).ravel()
    order = np.argsort(key, kind="stable")
    gpus = groups.ravel()[order]
    _, start, size = np.unique(key[order], return_index=True, return_counts=True)
    b = np.repeat(size, size)  # block size of each rank
    s0 = np.repeat(start, size)  # block start of each rank
    src = np.repeat(np.arange(gpus.size), b)
    dst = np.repeat(s0, b) + (np.arange(src.size) - np.repeat(np.cumsum(b) - b, b))  # each rank: its whole block
    keep = src != dst
    return gpus[src[keep]], gpus[dst[keep]]
