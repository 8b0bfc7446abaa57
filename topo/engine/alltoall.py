"""All-to-all and group-to-group traffic loads from the structure, without enumerating GPU pairs.

:func:`uniform_alltoall_loads` gives the bytes on every resource of a :class:`~topo.engine.route.Router` when, in each
of several concurrent communicators, every rank sends ``bytes_per_pair`` bytes to every other rank: the same
answer as routing all ``G p (p-1)`` flows with ``router.route`` (split over the destination GPU's NICs as
:mod:`topo.engine.algorithms.p2p` does) and summing them, but computed from counts. :func:`matrix_loads` does the same
for traffic given as a matrix between groups of GPUs.

How (one idea, applied per level). A flow's path is fixed by its two ends (see :mod:`topo.engine.route`):

- the *sending half* (NVLink hop to the proxy GPU, PCIe, NIC up, leaf up, spine-group up) depends only on the
  source GPU ``s`` and on the rail ``x`` of the destination's own NIC, before a failed NIC's failover (PXN: the
  sender uses its server's NIC on that rail, as NCCL does, :meth:`topo.engine.paths.Paths.endpoints`; without
  PXN, on nothing but ``s``);
- the *receiving half* (spine-group down, leaf down, NIC down, PCIe down) depends only on the destination ``d``;
- whether a level is crossed at all depends on whether the two ends share an NVLink domain, a leaf, a spine group.

So the load a source puts on its sending half is its bytes per pair times the number of destinations in its
communicator with rail ``x`` that sit in another NVLink domain (and under another leaf, in another spine group),
and symmetrically for the receiving half. Those numbers are counts of GPUs per (communicator, rail, domain),
(communicator, rail, leaf), ... obtained with ``bincount`` over small integer keys (a sort only where a key space
is too large to count in place), with inclusion-exclusion for "another domain *and* another leaf". The cost is
``O(n r)`` for ``n`` GPUs and ``r`` rails (``O(n r log n)`` at worst), with no loop over GPUs or pairs. Under PXN
the GPUs of one server in one communicator send alike beyond their first NVLink hop, so the sending halves are
counted once per (communicator, server, rail) with the number of GPUs as a weight: ``r`` times fewer rows for an
all-to-all over whole servers (the 100k 1 GiB all-to-all: 0.2 GiB -> 0.1 GiB of arrays, 1.8x faster).

ECMP. With ``ecmp="ideal"`` the answer is exactly the per-flow routing's (same resource ids, including the leaf and
spine-group aggregates). With ``ecmp="hash"`` a real hash pins each flow to one spine and core; what is returned
is the *expected* load of each link over the hash (every leaf's uplinks, and every spine group's, share their
aggregate evenly over its working cables, by :func:`topo.engine.ecmp.spread_over_cables`, as
:meth:`Router.real_link_loads` spreads the ideal aggregates). It is exact for every NVLink,
PCIe and NIC link and for the sum over each leaf's (and spine group's) uplinks; the per-cable collisions of a
particular hash are not modelled (route the flows for those, at sizes where that is possible).
"""

from __future__ import annotations

import numpy as np

from ..errors import TopoError, Unreachable
from ..fabric.levels import Level
from .ecmp import spread_over_cables
from .route import Router

__all__ = ["uniform_alltoall_loads", "hashed_alltoall_loads", "matrix_loads", "counts_follow_failures"]

HASHED_CHUNK_FLOWS = 1_000_000  # flows hashed at once by hashed_alltoall_loads (8 MB per index array: under
# glibc's largest mmap threshold, so the arrays of one chunk reuse the memory of the last)


def _nics_per_gpu(router: Router) -> int:
    L = router.fabric.layout
    return max(1, L.nics_per_server // L.gpus_per_server)


def _combine(cols: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int64 key per row from columns of small non-negative integers (mixed radix)."""
    key = np.zeros(cols[0].shape, dtype=np.int64)
    for c, n in zip(cols, sizes):
        key *= np.int64(n)
        key += c.astype(np.int64, copy=False)
    return key


def _count(data: list[np.ndarray], query: list[np.ndarray], sizes: list[int], weight=None) -> np.ndarray:
    """For every query row, the number (or summed ``weight``) of data rows with the same key."""
    dk = _combine(data, sizes)
    qk = _combine(query, sizes)
    if dk.size == 0:
        return np.zeros(qk.shape)
    space = int(np.prod(np.asarray(sizes, dtype=np.float64)))
    if space <= 4 * (dk.size + qk.size) + 4096:  # small key space: count in place, no sort
        return np.bincount(dk, weights=weight, minlength=space)[qk]
    uniq, inv = np.unique(dk, return_inverse=True)
    tot = np.bincount(inv.ravel(), weights=weight, minlength=uniq.size)
    pos = np.searchsorted(uniq, qk)
    pos_c = np.minimum(pos, uniq.size - 1)
    hit = uniq[pos_c] == qk
    return np.where(hit, tot[pos_c], 0.0)


class _Sides:
    """Per-GPU quantities of both halves of a path (:class:`topo.engine.paths.Paths`), for one NIC choice
    (vectorised over the GPUs): ``agg_d[k]`` / ``agg_s[k]`` are the aggregates of tier ``k`` above each half's leaf
    (``k = 0``: the leaf), one per tier boundary.

    With ``cls`` (each GPU's communicator) the sending halves are held once per (communicator, server, selector):
    under PXN, with a host link per NIC and no failed part, a sending half beyond its first NVLink hop (the NIC of
    the server on rail ``x``, its proxy GPU, host link and leaf) is the same for every GPU of a server, so the
    GPUs of one server in one communicator send alike. ``mult`` is then each sending row's number of GPUs,
    ``member`` each GPU's row block (rows ``member * X + x``) and ``cls_s`` each row's communicator; without
    ``cls``, or when that does not hold, rows are (GPU, selector) and ``mult`` is None.
    """

    def __init__(self, router: Router, gpus: np.ndarray, choice: int, cls: np.ndarray | None = None):
        f = router.fabric
        L = f.layout
        N = L.nics_per_server
        paths = router.paths
        self.X = N if router.pxn else 1  # values of the selector the sending half depends on
        self.gpus = gpus
        self.mult = self.member = None
        senders = gpus
        if cls is not None and router.pxn and f.pcie_per_nic and f.failed is None and L.gpus_per_server > 1:
            pair = cls.astype(np.int64) * L.num_servers + f.gpu_server(gpus)
            _, first, member, mult = np.unique(pair, return_index=True, return_inverse=True, return_counts=True)
            if first.size < gpus.size:  # some server holds several GPUs of one communicator
                senders, cls = gpus[first], cls[first]
                self.member, self.mult = member.ravel(), np.repeat(mult.astype(np.float64), self.X)
        self.cls_s = None if cls is None else np.repeat(cls, self.X)
        # receiving half of destination d
        d = gpus
        self.d = d
        failed = f.failed is not None
        recv = paths.receiving(d, choice, failover=failed)  # a failed NIC's stand-in, as routing takes it
        self.nic_d = recv.nic
        self.nic_gpu_d = recv.nic_gpu  # the GPU beside the receiving NIC: d, unless a stand-in forwards over NVLink
        # PXN's rail: the destination's own NIC's index, before failover (Paths.endpoints, NCCL's choice)
        self.x_d = paths.pxn_rail(d, choice) if router.pxn else np.zeros_like(d)
        self.agg_d = paths.aggregates(recv.leaf) if L.num_tiers > 1 else [recv.leaf]
        self.top_d = paths.top_aggregate(recv.leaf)
        self.dom_d = f.gpu_domain(d)
        self.pcie_d = recv.pcie
        # sending half of source s towards selector x: rows are (s, x), x fastest
        s = np.repeat(senders, self.X)
        x = np.tile(np.arange(self.X), senders.size)
        self.s, self.x = s, x
        nic_s = paths.sending_nic(s, x if router.pxn else choice)
        if failed:
            nic_s = paths.alive_nics(nic_s, s)
        send = paths.sending(s, nic_s)
        self.nic_s, self.proxy, self.pcie_s = send.nic, send.proxy, send.pcie
        self.agg_s = paths.aggregates(send.leaf) if L.num_tiers > 1 else [send.leaf]
        self.top_s = paths.top_aggregate(send.leaf)
        self.dom_s = f.gpu_domain(s)
        self.rail_s = f.nic_rail(self.nic_s)
        self.rail_d = f.nic_rail(self.nic_d)


def _in_domain(dom_d, v_d, dom_s, v_s, ref):
    """``v`` (a leaf or spine group) relative to a reference value of its NVLink domain, shifted to start at 0,
    and the number of values it takes: a domain's GPUs reach few leaves, so (domain, relative leaf) keys stay
    small enough to count without sorting. Exact whatever the span (a large span only costs a sort)."""
    rd = v_d - ref[dom_d]
    rs = v_s - ref[dom_s]
    lo = min(int(rd.min(initial=0)), int(rs.min(initial=0)))
    hi = max(int(rd.max(initial=0)), int(rs.max(initial=0)))
    return rd - lo, rs - lo, hi - lo + 1


def _sizes(router: Router, num_classes: int) -> dict:
    f = router.fabric
    L = f.layout
    return {"cls": num_classes, "x": L.nics_per_server, "dom": L.num_domains,
            "agg": [L.num_aggregates(k) for k in range(max(1, L.num_tiers - 1))], "rail": L.nics_per_server}


class _Counts:
    """The counts of one pass of :func:`_accumulate`: for every sending half (s, x), the destinations ``d`` of the
    same communicator (``cls_d == cls_s``) whose rail is ``x``, each weighing ``wd_data`` (default 1); for every
    receiving half ``d``, the sending halves with ``x == x_d`` of its communicator, each weighing ``ws_data``. Keys
    may be narrowed by more columns (a tier's aggregate, a rail), and to the ends' own NVLink domain (``*_dom``).
    """

    def __init__(self, router: Router, sd, cls_s, cls_d, sizes: dict, wd_data=None, ws_data=None):
        z = sizes
        self.wd, self.ws = wd_data, ws_data
        # key prefixes (class, x), combined once
        self.D = [_combine([cls_d, sd.x_d], [z["cls"], z["x"]])]
        self.S = [_combine([cls_s, sd.x], [z["cls"], z["x"]])]
        self.ks = [z["cls"] * z["x"]]
        # (class, domain) pairs as one dense id: few of them, so keys that include the domain stay countable in
        # place. Sending-half rows are the members repeated once per x (x fastest), so every member is in S[::X].
        nd = router.fabric.layout.num_domains
        kd = cls_d.astype(np.int64) * nd + sd.dom_d
        ks_ = cls_s.astype(np.int64) * nd + sd.dom_s
        uniq = np.unique(np.concatenate([kd, ks_[::sd.X]]))
        cd_d, cd_s = np.searchsorted(uniq, kd), np.searchsorted(uniq, ks_)
        self.DD = [_combine([cd_d, sd.x_d], [uniq.size, z["x"]])]
        self.SD = [_combine([cd_s, sd.x], [uniq.size, z["x"]])]
        self.kz = [uniq.size * z["x"]]

    def to_send(self, dk, sk, zz):
        """Destinations seen from each sending half."""
        return _count(self.D + dk, self.S + sk, self.ks + zz, weight=self.wd)

    def to_recv(self, sk, dk, zz):
        """Sending halves (with x == x_d) seen from each receiving half."""
        return _count(self.S + sk, self.D + dk, self.ks + zz, weight=self.ws)

    def to_send_dom(self, dk, sk, zz):
        """Destinations in the sending half's domain."""
        return _count(self.DD + dk, self.SD + sk, self.kz + zz, weight=self.wd)

    def to_recv_dom(self, sk, dk, zz):
        """Sending halves in the receiving half's domain."""
        return _count(self.SD + sk, self.DD + dk, self.kz + zz, weight=self.ws)


def _add(out: np.ndarray, ids, vals) -> None:
    out[:] += np.bincount(ids, weights=vals, minlength=out.size)


def _weighted(sd, n):
    """A sending row's bytes times the GPUs it stands for."""
    return n if sd.mult is None else n * sd.mult


def _accumulate(router: Router, out: np.ndarray, sd, cls_s, cls_d, f_s, f_d, sizes: dict, wd_data=None,
                ws_data=None) -> None:
    """Add the inter-domain loads of one pass to ``out``.

    A pass counts, for every sending half (s, x), the destinations d with ``cls_d == cls_s`` (the same
    communicator), each weighing ``wd_data`` (default 1), times ``f_s`` (bytes per pair); and for every receiving
    half d, the sending halves with ``x == x_d`` and ``cls_s == cls_d``, each weighing ``ws_data``, times ``f_d``.
    """
    c = _Counts(router, sd, cls_s, cls_d, sizes, wd_data, ws_data)
    a, a_dom = c.to_send([], [], []), c.to_send_dom([], [], [])
    b, b_dom = c.to_recv([], [], []), c.to_recv_dom([], [], [])
    n_inter, m_inter = (a - a_dom) * f_s, (b - b_dom) * f_d  # pairs in other domains, per half
    _host_loads(router, out, sd, n_inter, m_inter)
    crossed = _tiers_crossed(router, sd, c, sizes, (a, a_dom, b, b_dom), f_s, f_d)
    for k, (n_k, m_k) in enumerate(crossed):
        _switch_loads(router, out, sd, k, n_k, m_k, sizes["agg"][k])


def _host_loads(router: Router, out: np.ndarray, sd, n_inter, m_inter) -> None:
    """The hops below the leaves of the pairs in other domains: the NVLink hop to the proxy GPU, host links and
    NIC links at both ends, and a failed NIC's stand-in forwarding over NVLink at the receiving end."""
    f = router.fabric
    paths = router.paths
    nv = f.level_start(Level.NVLINK)
    if sd.mult is None:
        hop = sd.proxy != sd.s
        _add(out, 2 * (nv + sd.s[hop]), n_inter[hop])
        _add(out, 2 * (nv + sd.proxy[hop]) + 1, n_inter[hop])
    else:  # the first NVLink hop is each GPU's own: every GPU of a row, towards every selector
        n_g = n_inter.reshape(-1, sd.X)[sd.member]
        proxy_g = sd.proxy.reshape(-1, sd.X)[sd.member]
        s_g = np.broadcast_to(sd.gpus[:, None], proxy_g.shape)
        hop = proxy_g != s_g
        _add(out, 2 * (nv + s_g[hop]), n_g[hop])
        _add(out, 2 * (nv + proxy_g[hop]) + 1, n_g[hop])
        del n_g, proxy_g, s_g, hop
    n_w = _weighted(sd, n_inter)
    _add(out, 2 * sd.pcie_s, n_w)
    _add(out, 2 * paths.nic_link(sd.nic_s), n_w)
    _add(out, 2 * paths.nic_link(sd.nic_d) + 1, m_inter)
    _add(out, 2 * sd.pcie_d + 1, m_inter)
    back = sd.nic_gpu_d != sd.d  # a failed NIC's stand-in: its GPU forwards the data over NVLink
    if back.any():
        _add(out, 2 * (nv + sd.nic_gpu_d[back]), m_inter[back])
        _add(out, 2 * (nv + sd.d[back]) + 1, m_inter[back])


def _tiers_crossed(router: Router, sd, c: _Counts, sizes: dict, totals, f_s, f_d) -> list:
    """For each tier boundary that some pair crosses, from the leaves up, the bytes of the pairs in other domains
    whose leaves sit in different aggregates of that tier: ``(per sending half, per receiving half)``. Raises
    :class:`Unreachable` when pairs on different leaves (or rails, in a rail-only fabric) have no way up."""
    f = router.fabric
    L = f.layout
    paths = router.paths
    a, a_dom, b, b_dom = totals
    # a reference leaf per domain: a domain's GPUs reach few aggregates, so relative keys stay small
    ref_leaf = f.nic_leaf(f.gpu_nic(np.arange(L.num_domains) * L.gpus_per_domain))
    ref_aggs = paths.aggregates(ref_leaf) if L.num_tiers > 1 else [ref_leaf]

    def crossing(k):
        a_k = c.to_send([sd.agg_d[k]], [sd.agg_s[k]], [sizes["agg"][k]])
        rd, rs, span = _in_domain(sd.dom_d, sd.agg_d[k], sd.dom_s, sd.agg_s[k], ref_aggs[k])
        a_dk = c.to_send_dom([rd], [rs], [span])
        b_k = c.to_recv([sd.agg_s[k]], [sd.agg_d[k]], [sizes["agg"][k]])
        b_dk = c.to_recv_dom([rs], [rd], [span])
        return (a - a_dom - a_k + a_dk) * f_s, (b - b_dom - b_k + b_dk) * f_d

    n_leaf, m_leaf = crossing(0)
    if not np.any(n_leaf > 0):
        return []
    _check_way_up(router, sd, c, sizes, n_leaf, a - a_dom)
    crossed = [(n_leaf, m_leaf)]
    for k in range(1, L.num_tiers - 1):
        n_k, m_k = crossing(k)
        if not np.any(n_k > 0):
            break
        crossed.append((n_k, m_k))
    # the top tier joins every aggregate below it (but rails in rail-only, caught above): no boundary beyond
    return crossed


def _check_way_up(router: Router, sd, c: _Counts, sizes: dict, n_leaf, inter) -> None:
    """Pairs on different leaves need a spine; in a rail-only fabric without PXN, pairs on different rails too."""
    L = router.fabric.layout
    if L.num_tiers == 1:
        k = int(np.flatnonzero(n_leaf > 0)[0])
        raise Unreachable(f"GPU {int(sd.s[k])} cannot reach some of its peers: their NICs sit on different leaves "
                        "and the fabric has no spine" + ("" if router.pxn else "; turn PXN on"), key="fabric.tiers")
    if L.rail_groups > 1 and not router.pxn:
        r = c.to_send([sd.rail_d], [sd.rail_s], [sizes["rail"]])
        rd = c.to_send_dom([sd.rail_d], [sd.rail_s], [sizes["rail"]])
        bad = inter - (r - rd) > 0  # pairs in other domains on other rails (hence other leaves)
        if np.any(bad):
            k = int(np.flatnonzero(bad)[0])
            raise Unreachable(f"GPU {int(sd.s[k])} cannot reach some of its peers in a rail-only fabric: their NICs "
                            "are on different rails; route through NVLink (pxn=True)", key="pxn")


def _switch_loads(router: Router, out: np.ndarray, sd, k: int, n_k, m_k, num_aggregates: int) -> None:
    """The bytes that cross tier boundary ``k``: on its aggregates (ideal ECMP), or spread evenly over each
    aggregate's working cables (hashed ECMP: the expected load of each cable)."""
    if router.ecmp == "ideal":
        _add(out, router.aggregate_start(k) + sd.agg_s[k], _weighted(sd, n_k))
        _add(out, router.aggregate_start(k, True) + sd.agg_d[k], m_k)
        return
    f = router.fabric
    sl = f.level_slice(Level.uplink(k))
    ids = np.arange(sl.start, sl.stop)
    alive = router.alive[sl]
    out[2 * ids] += spread_over_cables(np.bincount(sd.agg_s[k], weights=_weighted(sd, n_k),
                                                   minlength=num_aggregates), alive)
    out[2 * ids + 1] += spread_over_cables(np.bincount(sd.agg_d[k], weights=m_k, minlength=num_aggregates), alive)


def counts_follow_failures(router: Router, groups: np.ndarray) -> bool:
    """Whether :func:`uniform_alltoall_loads` follows the router's NIC failover for the GPUs ``groups``.

    A failed NIC's traffic moves to a stand-in NIC of its server chosen per NIC (:meth:`Paths.alive_nics`), so the
    sending half still depends only on the source and the receiving NIC's rail, and the receiving half only on the
    destination: counting stays exact. Two cases are left to routing flow by flow: a server of ``groups`` that lost
    every NIC (whether that is an error depends on whether any of its flows leaves its NVLink domain), and a
    rail-only fabric under PXN with a failed NIC (a flow then moves to a rail that works at both of its ends, a
    choice of the pair).

    Parameters
    ----------
    router : Router
    groups : numpy.ndarray
        GPU ids of the communicators.

    Returns
    -------
    bool
        True on an intact fabric.
    """
    f = router.fabric
    if f.failed is None:
        return True
    N = f.layout.nics_per_server
    servers = np.unique(f.gpu_server(np.asarray(groups, dtype=np.int64).ravel()))
    ok = router.paths.nic_ok(servers[:, None] * N + np.arange(N)[None, :])
    if not ok.any(axis=1).all():
        return False
    return not (router.pxn and f.layout.rail_groups > 1 and not ok.all())


def _check_gpus(router: Router, gpus: np.ndarray, key: str) -> None:
    n = router.fabric.num_gpus
    if gpus.size and (gpus.min() < 0 or gpus.max() >= n):
        bad = int(gpus[(gpus < 0) | (gpus >= n)][0])
        raise TopoError(f"GPU id {bad} does not exist; this fabric has GPUs 0 to {n - 1}", key=key)


def uniform_alltoall_loads(router: Router, groups: np.ndarray, bytes_per_pair: float) -> np.ndarray:
    """Bytes on every resource of ``router`` when every rank of every communicator sends ``bytes_per_pair``
    bytes to every other rank of its communicator, all at once.

    Parameters
    ----------
    router : Router
        Defines the fabric, ECMP mode, PXN and the resource space (``router.num_res`` ids).
    groups : array ``[num_groups, ranks]`` of GPU ids
        Concurrent communicators (rows); a GPU should appear in one row only. Rank order does not matter.
    bytes_per_pair : float
        What each rank sends to each other rank. For nccl-tests' all-to-all of size ``S`` (one rank's send
        buffer) on ``p`` ranks, this is ``S / p``.

    Returns
    -------
    numpy array of ``router.num_res`` bytes: equal to ``router.loads`` of every pair routed with
    ``router.route`` (each flow split evenly over the destination GPU's NICs, choices ``0..k-1``) for
    ``ecmp="ideal"``, failed parts included where :func:`counts_follow_failures` says so; the expected loads
    over the hash for ``ecmp="hash"`` (see the module doc).
    """
    groups = np.asarray(groups, dtype=np.int64)
    if groups.ndim != 2:
        raise TopoError(f"groups must be a 2-D array [groups, ranks] of GPU ids, got shape {groups.shape}",
                        key="groups")
    _check_gpus(router, groups, "groups")
    out = np.zeros(router.num_res)
    G, p = groups.shape
    if G == 0 or p < 2 or bytes_per_pair == 0:
        return out
    B = float(bytes_per_pair)
    gpus = groups.ravel()
    cls = np.repeat(np.arange(G), p)
    f = router.fabric
    # inside NVLink domains: B to every other member of the same domain, whatever the NIC choice
    dom = f.gpu_domain(gpus)
    same = _count([cls, dom], [cls, dom], [G, f.layout.num_domains]) - 1
    nv = f.level_start(Level.NVLINK)
    out += np.bincount(2 * (nv + gpus), weights=B * same, minlength=out.size)
    out += np.bincount(2 * (nv + gpus) + 1, weights=B * same, minlength=out.size)
    k = _nics_per_gpu(router)
    sizes = _sizes(router, G)
    for c in range(k):
        sd = _Sides(router, gpus, c, cls)
        _accumulate(router, out, sd, sd.cls_s, cls, B / k, B / k, sizes, ws_data=sd.mult)
    return out


def hashed_alltoall_loads(router: Router, groups: np.ndarray, bytes_per_pair: float) -> np.ndarray:
    """:func:`uniform_alltoall_loads` with hashed ECMP's own picks: every flow's switch hops hashed one by one.

    A flow's NVLink, PCIe and NIC hops do not depend on the hash, so they come from counts (exact, failover
    included where :func:`counts_follow_failures` says so); only the cables between leaves and above are routed
    flow by flow (:meth:`Router.hashed_switch_loads`: the hash's key is the pair of NICs, so it needs each flow's
    two NICs and leaves, and nothing else of its path). The result equals routing every flow with
    ``router.route`` and summing, collisions and failed parts (a re-hash over what survives) included, at a
    fraction of the cost: about 0.2 us per flow against about 1 us (measured in ``benchmarks/bench_alltoall.py``).

    Parameters
    ----------
    router : Router
        A router with ``ecmp="hash"``.
    groups : array ``[num_groups, ranks]`` of GPU ids
        Concurrent communicators (rows), as for :func:`uniform_alltoall_loads`.
    bytes_per_pair : float
        What each rank sends to each other rank.

    Returns
    -------
    numpy.ndarray
        ``router.num_res`` bytes.

    Raises
    ------
    Unreachable
        Some flow has no working path.
    """
    out = uniform_alltoall_loads(router, groups, bytes_per_pair)
    groups = np.asarray(groups, dtype=np.int64)
    G, p = groups.shape
    f = router.fabric
    L = f.layout
    if router.ecmp != "hash" or L.num_tiers == 1 or G == 0 or p < 2 or bytes_per_pair == 0:
        return out
    for k in range(L.num_tiers - 1):  # the expected loads of the switch hops, replaced below
        sl = f.level_slice(Level.uplink(k))
        out[2 * sl.start:2 * sl.stop] = 0.0
    gpus = groups.ravel()
    dom = f.gpu_domain(gpus).reshape(G, p)
    k = _nics_per_gpu(router)
    per = max(1, HASHED_CHUNK_FLOWS // (p * p))  # communicators per chunk
    for c in range(k):
        sd = _Sides(router, gpus, c)
        for g0 in range(0, G, per):
            g1 = min(G, g0 + per)
            # flows (communicator, rank a, rank b) in different NVLink domains (the others never reach the
            # network); each flow's data are gathered from per-GPU tables, nothing is divided per flow
            g, a, b = np.nonzero(dom[g0:g1, :, None] != dom[g0:g1, None, :])
            g += g0
            i, j = g * p + a, g * p + b
            del g, a, b
            row = i * sd.X + sd.x_d[j] if sd.X > 1 else i  # the sending half towards j's rail
            aggs = [a_s[row] for a_s in sd.agg_s], [a_d[j] for a_d in sd.agg_d]
            out += router.hashed_switch_loads(sd.nic_s[row], sd.nic_d[j], float(bytes_per_pair) / k, gpus[i],
                                              gpus[j], aggs)
    return out


def matrix_loads(router: Router, group_gpus_list, traffic_matrix_bytes) -> np.ndarray:
    """Bytes on every resource of ``router`` for traffic between groups of GPUs, all at once.

    ``traffic_matrix_bytes[i, j]`` is what *each* GPU of group ``i`` sends to *each* GPU of group ``j`` (a GPU
    never sends to itself); groups are disjoint lists of GPU ids of any sizes. Same semantics and exactness as
    :func:`uniform_alltoall_loads` (which is the block-diagonal case). Cost: one pass per group with traffic,
    ``O(M n r log n)`` for ``M`` groups.

    Parameters
    ----------
    router : Router
        The resource space (and ECMP mode) the loads are in.
    group_gpus_list : sequence of array-like
        ``M`` disjoint groups of GPU ids.
    traffic_matrix_bytes : array-like
        ``M x M`` bytes each GPU of group ``i`` sends to each GPU of group ``j``.

    Returns
    -------
    numpy.ndarray
        Bytes per resource id.

    Raises
    ------
    TopoError
        A matrix of the wrong shape or with negative or non-finite bytes; unknown or repeated GPUs.
    Unreachable
        Some pair has no path (see :func:`uniform_alltoall_loads`).
    """
    gl = [np.asarray(g, dtype=np.int64).ravel() for g in group_gpus_list]
    M = len(gl)
    T = np.asarray(traffic_matrix_bytes, dtype=float)
    if T.shape != (M, M):
        raise TopoError(f"traffic_matrix_bytes must be {M} x {M} (one row and column per group), got shape "
                        f"{T.shape}", key="traffic_matrix_bytes")
    if np.any(~np.isfinite(T)) or np.any(T < 0):
        raise TopoError("traffic_matrix_bytes must hold finite bytes >= 0", key="traffic_matrix_bytes")
    out = np.zeros(router.num_res)
    if M == 0:
        return out
    gpus = np.concatenate(gl)
    _check_gpus(router, gpus, "group_gpus_list")
    if np.unique(gpus).size != gpus.size:
        raise TopoError("a GPU is in more than one group (or twice in one); groups must be disjoint",
                        key="group_gpus_list")
    cls = np.repeat(np.arange(M), [g.size for g in gl])
    f = router.fabric
    nv = f.level_start(Level.NVLINK)
    dom = f.gpu_domain(gpus)
    k = _nics_per_gpu(router)
    sides = [_Sides(router, gpus, c) for c in range(k)]
    X = sides[0].X
    cls_s_rows = np.repeat(cls, X)
    sizes = _sizes(router, 1)
    for j in np.flatnonzero(T.any(axis=0)):  # one pass per destination group j
        w_col = T[:, j]  # bytes per pair from each source group into j
        in_j = cls == j
        # inside NVLink domains: each source s sends to the members of j in its domain (not itself)...
        same_j = _count([dom[in_j]], [dom], [f.layout.num_domains]) - in_j
        out += np.bincount(2 * (nv + gpus), weights=w_col[cls] * same_j, minlength=out.size)
        # ...and each member d of j receives from every source in its domain at that source's group's rate
        w_dom = _count([dom], [dom[in_j]], [f.layout.num_domains], weight=w_col[cls]) - w_col[j]
        out += np.bincount(2 * (nv + gpus[in_j]) + 1, weights=w_dom, minlength=out.size)
        w_rows = w_col[cls_s_rows] / k  # bytes per pair of each sending half into group j
        for sd in sides:
            sub = _Restricted(sd, in_j)
            _accumulate(router, out, sub, np.zeros(sub.s.size, dtype=np.int64),
                        np.zeros(sub.d.size, dtype=np.int64), w_rows, 1.0, sizes, ws_data=w_rows)
    return out


class _Restricted:
    """A :class:`_Sides` whose receiving halves are restricted to ``mask`` (all sending halves kept)."""

    def __init__(self, sd: _Sides, mask: np.ndarray):
        self.__dict__.update(sd.__dict__)
        for name in ("d", "nic_d", "nic_gpu_d", "x_d", "top_d", "dom_d", "pcie_d", "rail_d"):
            setattr(self, name, getattr(sd, name)[mask])
        self.agg_d = [a[mask] for a in sd.agg_d]
