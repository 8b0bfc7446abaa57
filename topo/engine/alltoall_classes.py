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
    groups = np.asarray(a.groups, dtype=np.int64)
    p = groups.shape[1]
    k = max(1, f.layout.nics_per_server // f.layout.gpus_per_server)  # NICs per GPU: each pair's bytes split
    dom = groups // f.layout.gpus_per_domain
    fc = _network_classes(router, groups, dom, k, float(a.per_msg_byte) / k)
    loads = _summed_loads(router.num_res, fc)
    parts = [fc]
    src_in, dst_in = _pairs_within(groups, dom)
    if src_in.size:  # flows inside a domain: one class each
        intra = router.route_transfers(Transfers(src_in, dst_in, a.per_msg_byte, split_nics=True))
        loads += np.bincount(intra.res, weights=intra.weight, minlength=router.num_res)
        parts.append(FlowClasses.single(intra.res, intra.flow, intra.weight, intra.flow_bytes))
    # latency: the longest path, rank 0 of the first communicator to every other rank of it (as the loads
    # from the structure report it)
    probe = router.route_transfers(Transfers(np.repeat(groups[0, :1], p - 1), groups[0, 1:], a.per_msg_byte,
                                             split_nics=True))
    used = np.flatnonzero(loads)
    out = Routed.summed(used, loads[used], a.num_flows, float(probe.latency_s.max()), bool(probe.network.any()))
    out.classes = FlowClasses.concat(parts)
    return out


def _network_classes(router: Router, groups: np.ndarray, dom: np.ndarray, k: int, member_bytes: float) \
        -> FlowClasses:
    """The classes of the flows that leave their NVLink domain, given by class (``ptr``): each class's network
    path once, its members' first hops in its template.

    Built to hold little at 100k GPUs (5.5 million classes, 39 million incidences): int32 ids, one broadcast size,
    each class's resources written once (no class id per incidence), weights as float32 when that is exact."""
    f = router.fabric
    N = f.layout.nics_per_server
    K = router.subflows
    pr = _server_pairs(f, groups)
    u_idx, c_idx, dst = _base_classes(groups, dom, pr, k, f.layout.gpus_per_domain)
    src = pr.rep[u_idx]
    base_tpl = u_idx * N + _sending_rail(router, src, dst, c_idx)  # templates: (pair, rail of the sending NIC)
    del u_idx
    tp = _templates(router, base_tpl, N, pr, dst, c_idx)
    template, mult, per = _sub_classes(base_tpl, tp)
    del base_tpl
    ptr, res, cnt = _network_paths(router, src, dst, c_idx, K)  # the network part: from the sending NIC on
    del src, dst, c_idx
    if template.size > per.size:
        ptr, res, cnt = _copy_to_sub_classes(ptr, res, cnt, per)
    C = template.size
    return FlowClasses(np.broadcast_to(np.float64(member_bytes), (C,)), mult.astype(np.int32), None, res,
                       _weights(ptr, cnt, mult, K), template.astype(np.int32), tp.t_id, tp.t_res,
                       tp.n_cross.astype(float), tp.t_partial, ptr=ptr)


def _sending_rail(router: Router, src: np.ndarray, dst: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """The rail of the NIC each base class sends through (PXN: the rail of the receiving NIC); after failover at
    both ends on a fabric with failed parts (the same for every member of the pair)."""
    N = router.fabric.layout.nics_per_server
    if router.fabric.failed is None:
        return router.fabric.gpu_nic(dst, choice) % N
    return router.paths.endpoints(src, dst, choice)[0].nic % N


def _summed_loads(n_res: int, fc: FlowClasses) -> np.ndarray:
    """Bytes on every resource: each class's direct incidences, plus each template's hops once per class using
    it; the incidences' weights a chunk at a time (no second array of the incidences' size)."""
    # float even when no class leaves its domain (bincount of nothing is int64, and a += on it then fails)
    loads = np.zeros(n_res)
    member_bytes = float(fc.size_bytes[0]) if fc.num_classes else 0.0
    step = _CHUNK_CLASSES * 8
    for lo in range(0, fc.res.size, step):
        loads += np.bincount(fc.res[lo:lo + step], weights=fc.a[lo:lo + step].astype(float) * member_bytes,
                             minlength=n_res)
    per_t = np.bincount(fc.template, minlength=fc.num_templates).astype(float)
    loads += np.bincount(fc.t_res, weights=fc.t_a * per_t[fc.t_id] * member_bytes, minlength=n_res)
    return loads


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
        c_idx = np.repeat(np.arange(k, dtype=np.int32), u_idx.size)
        u_idx, j_idx = np.tile(u_idx, k), np.tile(j_idx, k)
    else:
        c_idx = np.zeros(u_idx.size, dtype=np.int32)
    dst = groups[pr.group[u_idx], j_idx]
    del j_idx
    return u_idx, c_idx, dst


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
    hashed parts), by class: ``(ptr, res, cnt)``, class ``i``'s resources ``res[ptr[i]:ptr[i + 1]]`` (int32), each
    once, in path order when its parts never share one, and how many parts cross each (None: one each).

    Routed :data:`_CHUNK_CLASSES` classes at a time (the router's path table of every class at once, 5.5 million at
    100k GPUs, and its temporaries took over 1.5 GB), into arrays sized for the longest paths and cut to what was
    written (untouched pages take no memory; no chunk list joined into a second copy)."""
    net_cols = router.slots.network
    C = src.size
    width = K * len(range(router.slots.width)[net_cols])  # a class's parts side by side
    res = np.empty(C * width, dtype=np.int32)
    cnt = None
    ptr = np.zeros(C + 1, dtype=np.int32 if C * width < 2 ** 31 else np.int64)
    at = 0
    for lo in range(0, C, _CHUNK_CLASSES):
        hi = min(C, lo + _CHUNK_CLASSES)
        n = hi - lo
        cols, _ = router.path_table(np.repeat(src[lo:hi], K), np.repeat(dst[lo:hi], K), np.repeat(choice[lo:hi], K),
                                    np.tile(np.arange(K), n))
        net = cols[:, net_cols].reshape(n, width)
        del cols
        net, keep, times = _merge_parts(net)
        ptr[lo + 1:hi + 1] = at + np.cumsum(keep.sum(axis=1))
        m = int(ptr[hi]) - at
        res[at:at + m] = net[keep]
        if times is not None and cnt is None:  # the first chunk whose parts share a resource: counts from here on
            cnt = np.empty(res.size, dtype=np.int16)
            cnt[:at] = 1
        if cnt is not None:
            cnt[at:at + m] = 1 if times is None else times[keep]
        at += m
    res.resize(at, refcheck=False)  # in place: no copy of what was written
    if cnt is not None:
        cnt.resize(at, refcheck=False)
    return ptr, res, cnt


def _merge_parts(net: np.ndarray):
    """One class's resources per row (-1: no hop), each kept once: ``(table, kept, times)``, with ``times`` how
    many of the row's entries each kept one stands for (None when no row repeats a resource: the table as given,
    in path order; else each row sorted, its first entry of each resource kept)."""
    srt = np.sort(net, axis=1)
    rep = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
    if not rep.any():
        return net, net >= 0, None
    keep = srt >= 0
    keep[:, 1:] &= ~rep
    W = srt.shape[1]
    first = np.flatnonzero(keep)  # the start of each run of one resource in its (sorted) row
    nxt = np.minimum(np.r_[first[1:], keep.size], (first // W + 1) * W)
    times = np.zeros(srt.shape, dtype=np.int16)
    times.ravel()[first] = nxt - first
    return srt, keep, times


def _copy_to_sub_classes(ptr: np.ndarray, res: np.ndarray, cnt: np.ndarray | None, per: np.ndarray):
    """Each base class's network path copied to its ``per`` sub-classes (which differ in their templates only),
    by class as :func:`_network_paths` gives them."""
    base_of = np.repeat(np.arange(per.size), per)
    seg = _ranges(ptr[base_of], np.diff(ptr)[base_of])
    out = np.zeros(base_of.size + 1, dtype=np.int64)
    np.cumsum(np.diff(ptr)[base_of], out=out[1:])
    return out, res[seg], (None if cnt is None else cnt[seg])


def _weights(ptr: np.ndarray, cnt: np.ndarray | None, mult: np.ndarray, K: int) -> np.ndarray:
    """Each incidence's bytes per byte a member moves: its class's members over the ``K`` parts a member's bytes
    are split into, times the parts that cross it. One broadcast value when all are equal (every class of one
    member, its parts never on one resource: the 100k all-to-all of one GPU per pod; 155 MB less), else an array,
    float32 when every weight is exact in it (whole members over a power of two parts; half the memory), float64
    otherwise."""
    nnz = int(ptr[-1])
    if cnt is None and mult.size and mult.min() == mult.max():
        w = float(mult[0]) / K
        return np.broadcast_to(np.float32(w) if float(np.float32(w)) == w else np.float64(w), (nnz,))
    for dtype in (np.float32, np.float64):
        a = np.empty(nnz, dtype=dtype)
        exact = True
        for lo in range(0, mult.size, _CHUNK_CLASSES):
            hi = min(mult.size, lo + _CHUNK_CLASSES)
            i0, i1 = int(ptr[lo]), int(ptr[hi])
            w = np.repeat(mult[lo:hi].astype(float) / K, np.diff(ptr[lo:hi + 1]))
            if cnt is not None:
                w *= cnt[i0:i1]
            a[i0:i1] = w
            exact = exact and np.array_equal(a[i0:i1], w)
        if exact:
            return a
    raise AssertionError("float64 weights are exact by definition")  # pragma: no cover


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
