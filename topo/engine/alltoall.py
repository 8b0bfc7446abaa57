"""All-to-all and group-to-group traffic loads from the structure, without enumerating GPU pairs.

:func:`uniform_alltoall_loads` gives the bytes on every resource of a :class:`~topo.route.Router` when, in each
of several concurrent communicators, every rank sends ``bytes_per_pair`` bytes to every other rank: the same
answer as routing all ``G p (p-1)`` flows with ``router.route`` (split over the destination GPU's NICs as
:mod:`topo.algorithms.p2p` does) and summing them, but computed from counts. :func:`matrix_loads` does the same
for traffic given as a matrix between groups of GPUs.

How (one idea, applied per level). A flow's path is fixed by its two ends (see :mod:`topo.route`):

- the *sending half* (NVLink hop to the proxy GPU, PCIe, NIC up, leaf up, spine-group up) depends only on the
  source GPU ``s`` and on the rail ``x`` of the destination's NIC (PXN: the sender uses its server's NIC on that
  rail; without PXN, on nothing but ``s``);
- the *receiving half* (spine-group down, leaf down, NIC down, PCIe down) depends only on the destination ``d``;
- whether a level is crossed at all depends on whether the two ends share an NVLink domain, a leaf, a spine group.

So the load a source puts on its sending half is its bytes per pair times the number of destinations in its
communicator with rail ``x`` that sit in another NVLink domain (and under another leaf, in another spine group),
and symmetrically for the receiving half. Those numbers are counts of GPUs per (communicator, rail, domain),
(communicator, rail, leaf), ... obtained with ``bincount`` over small integer keys (a sort only where a key space
is too large to count in place), with inclusion-exclusion for "another domain *and* another leaf". The cost is
``O(n r)`` for ``n`` GPUs and ``r`` rails (``O(n r log n)`` at worst), with no loop over GPUs or pairs.

ECMP. With ``ecmp="ideal"`` the answer is exactly the per-flow routing's (same resource ids, including the leaf and
spine-group aggregates). With ``ecmp="hash"`` a real hash pins each flow to one spine and core; what is returned
is the *expected* load of each link over the hash (every leaf's uplinks, and every spine group's, share their
aggregate evenly, as :meth:`Router.real_link_loads` spreads the ideal aggregates). It is exact for every NVLink,
PCIe and NIC link and for the sum over each leaf's (and spine group's) uplinks; the per-cable collisions of a
particular hash are not modelled (route the flows for those, at sizes where that is possible).
"""

from __future__ import annotations

import numpy as np

from ..errors import TopoError
from .route import Router

__all__ = ["uniform_alltoall_loads", "matrix_loads"]


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
    """Per-GPU quantities of both halves of a path, for one NIC choice (vectorised over the GPUs)."""

    def __init__(self, router: Router, gpus: np.ndarray, choice: int):
        f = router.fabric
        L = f.layout
        N = L.nics_per_server
        self.X = N if router.pxn else 1  # values of the selector the sending half depends on
        # receiving half of destination d
        d = gpus
        self.d = d
        self.nic_d = f.gpu_nic(d, choice)
        self.x_d = (self.nic_d % N) if router.pxn else np.zeros_like(d)
        self.ld = f.nic_leaf(self.nic_d)
        self.gd = f.leaf_group(self.ld) if L.num_tiers > 1 else np.zeros_like(d)
        self.dom_d = f.gpu_domain(d)
        self.pcie_d = self.nic_d if f.pcie_per_nic else d
        # sending half of source s towards selector x: rows are (s, x), x fastest
        s = np.repeat(gpus, self.X)
        x = np.tile(np.arange(self.X), gpus.size)
        self.s, self.x = s, x
        nic_s = f.gpu_server(s) * N + x if router.pxn else f.gpu_nic(s, choice)
        if f.pcie_per_nic:
            proxy = f.nic_gpu(nic_s)
            pcie_s = nic_s
        else:
            proxy = np.where(f.gpu_nic(s) == nic_s, s, f.nic_gpu(nic_s))
            pcie_s = proxy
        self.nic_s, self.proxy, self.pcie_s = nic_s, proxy, pcie_s
        self.ls = f.nic_leaf(nic_s)
        self.gs = f.leaf_group(self.ls) if L.num_tiers > 1 else np.zeros_like(s)
        self.dom_s = f.gpu_domain(s)
        self.rail_s = f.nic_rail(nic_s)
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
    return {"cls": num_classes, "x": L.nics_per_server, "dom": L.num_domains, "leaf": L.tiers[0].num_switches,
            "grp": max(1, L.tiers[1].num_groups if L.num_tiers > 1 else 1), "rail": L.nics_per_server}


def _accumulate(router: Router, out: np.ndarray, sd, cls_s, cls_d, f_s, f_d, sizes: dict, wd_data=None,
                ws_data=None) -> None:
    """Add the inter-domain loads of one pass to ``out``.

    A pass counts, for every sending half (s, x), the destinations d with ``cls_d == cls_s`` (the same
    communicator), each weighing ``wd_data`` (default 1), times ``f_s`` (bytes per pair); and for every receiving
    half d, the sending halves with ``x == x_d`` and ``cls_s == cls_d``, each weighing ``ws_data``, times ``f_d``.
    """
    f = router.fabric
    L = f.layout
    lo = f.link_offset
    z = sizes
    # destinations seen from each sending half (s, x): keys (class, x[, dom][, leaf | group])
    D = [_combine([cls_d, sd.x_d], [z["cls"], z["x"]])]  # key prefixes, combined once
    S = [_combine([cls_s, sd.x], [z["cls"], z["x"]])]
    ks = [z["cls"] * z["x"]]

    def ca(dk, sk, zz):  # destinations seen from each sending half
        return _count(D + dk, S + sk, ks + zz, weight=wd_data)

    def cb(sk, dk, zz):  # sending halves (with x == x_d) seen from each receiving half
        return _count(S + sk, D + dk, ks + zz, weight=ws_data)

    # (class, domain) pairs as one dense id: few of them, so keys that include the domain stay countable in
    # place. Sending-half rows are the members repeated once per x (x fastest), so every member is in S[::X].
    X = sd.X
    kd = cls_d.astype(np.int64) * L.num_domains + sd.dom_d
    ks_ = cls_s.astype(np.int64) * L.num_domains + sd.dom_s
    uniq = np.unique(np.concatenate([kd, ks_[::X]]))
    cd_d, cd_s = np.searchsorted(uniq, kd), np.searchsorted(uniq, ks_)
    DD = [_combine([cd_d, sd.x_d], [uniq.size, z["x"]])]
    SD = [_combine([cd_s, sd.x], [uniq.size, z["x"]])]
    kz = [uniq.size * z["x"]]

    def ca_dom(dk, sk, zz):  # destinations in the sending half's domain
        return _count(DD + dk, SD + sk, kz + zz, weight=wd_data)

    def cb_dom(sk, dk, zz):  # sending halves in the receiving half's domain
        return _count(SD + sk, DD + dk, kz + zz, weight=ws_data)

    a = ca([], [], [])
    a_dom = ca_dom([], [], [])
    n_inter = (a - a_dom) * f_s
    b = cb([], [], [])
    b_dom = cb_dom([], [], [])
    m_inter = (b - b_dom) * f_d

    def add(ids, vals):
        out[:] += np.bincount(ids, weights=vals, minlength=out.size)

    hop = sd.proxy != sd.s
    add(2 * (lo["nvlink"] + sd.s[hop]), n_inter[hop])
    add(2 * (lo["nvlink"] + sd.proxy[hop]) + 1, n_inter[hop])
    add(2 * (lo["pcie"] + sd.pcie_s), n_inter)
    add(2 * (lo["nic"] + sd.nic_s), n_inter)
    add(2 * (lo["nic"] + sd.nic_d) + 1, m_inter)
    add(2 * (lo["pcie"] + sd.pcie_d) + 1, m_inter)

    # leaf level: pairs in other domains whose NICs sit on different leaves
    a_l = ca([sd.ld], [sd.ls], [z["leaf"]])
    f0 = f.gpu_nic(np.arange(L.num_domains) * L.gpus_per_domain)  # a reference NIC per domain
    ref_leaf = f.nic_leaf(f0)
    rld, rls, span = _in_domain(sd.dom_d, sd.ld, sd.dom_s, sd.ls, ref_leaf)
    a_dl = ca_dom([rld], [rls], [span])
    n_leaf = (a - a_dom - a_l + a_dl) * f_s
    b_l = cb([sd.ls], [sd.ld], [z["leaf"]])
    b_dl = cb_dom([rls], [rld], [span])
    m_leaf = (b - b_dom - b_l + b_dl) * f_d
    if not np.any(n_leaf > 0):
        return
    if L.num_tiers == 1:
        k = int(np.flatnonzero(n_leaf > 0)[0])
        raise TopoError(f"GPU {int(sd.s[k])} cannot reach some of its peers: their NICs sit on different leaves "
                        "and the fabric has no spine" + ("" if router.pxn else "; turn PXN on"), key="fabric.tiers")
    if L.rail_groups > 1 and not router.pxn:
        r = ca([sd.rail_d], [sd.rail_s], [z["rail"]])
        rd = ca_dom([sd.rail_d], [sd.rail_s], [z["rail"]])
        bad = (a - a_dom) - (r - rd) > 0  # pairs in other domains on other rails (hence other leaves)
        if np.any(bad):
            k = int(np.flatnonzero(bad)[0])
            raise TopoError(f"GPU {int(sd.s[k])} cannot reach some of its peers in a rail-only fabric: their NICs "
                            "are on different rails; route through NVLink (pxn=True)", key="pxn")
    # spine-group level: pairs in other domains whose leaves are in different spine groups
    a_g = ca([sd.gd], [sd.gs], [z["grp"]])
    rgd, rgs, span_g = _in_domain(sd.dom_d, sd.gd, sd.dom_s, sd.gs, f.leaf_group(ref_leaf))
    a_dg = ca_dom([rgd], [rgs], [span_g])
    n_grp = (a - a_dom - a_g + a_dg) * f_s
    b_g = cb([sd.gs], [sd.gd], [z["grp"]])
    b_dg = cb_dom([rgs], [rgd], [span_g])
    m_grp = (b - b_dom - b_g + b_dg) * f_d
    if L.num_tiers < 3 and np.any(n_grp > 0):
        raise TopoError("flows cross spine groups but the fabric has no core tier", key="fabric.tiers")

    n_leaves, n_groups = L.tiers[0].num_switches, L.tiers[1].num_groups
    if router.ecmp == "ideal":
        add(router.v_leaf_up + sd.ls, n_leaf)
        add(router.v_leaf_down + sd.ld, m_leaf)
        if L.num_tiers > 2:
            add(router.v_grp_up + sd.gs, n_grp)
            add(router.v_grp_down + sd.gd, m_grp)
        return
    # hashed ECMP: the expected load of each cable, an aggregate spread evenly over the cables it stands for
    u0 = L.tiers[0].up_ports
    up = np.bincount(sd.ls, weights=n_leaf, minlength=n_leaves) / u0
    down = np.bincount(sd.ld, weights=m_leaf, minlength=n_leaves) / u0
    ids = lo["up:0"] + np.arange(n_leaves * u0)
    out[2 * ids] += np.repeat(up, u0)
    out[2 * ids + 1] += np.repeat(down, u0)
    if L.num_tiers > 2:
        t1 = L.tiers[1]
        per = t1.switches_per_group * t1.up_ports
        up = np.bincount(sd.gs, weights=n_grp, minlength=n_groups) / per
        down = np.bincount(sd.gd, weights=m_grp, minlength=n_groups) / per
        ids = lo["up:1"] + np.arange(t1.num_switches * t1.up_ports)
        out[2 * ids] += np.repeat(up, per)
        out[2 * ids + 1] += np.repeat(down, per)


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
    ``ecmp="ideal"``; the expected loads over the hash for ``ecmp="hash"`` (see the module doc).
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
    lo = f.link_offset
    out += np.bincount(2 * (lo["nvlink"] + gpus), weights=B * same, minlength=out.size)
    out += np.bincount(2 * (lo["nvlink"] + gpus) + 1, weights=B * same, minlength=out.size)
    k = _nics_per_gpu(router)
    sizes = _sizes(router, G)
    for c in range(k):
        sd = _Sides(router, gpus, c)
        cls_s = np.repeat(cls, sd.X)
        _accumulate(router, out, sd, cls_s, cls, B / k, B / k, sizes)
    return out


def matrix_loads(router: Router, group_gpus_list, traffic_matrix_bytes) -> np.ndarray:
    """Bytes on every resource of ``router`` for traffic between groups of GPUs, all at once.

    ``traffic_matrix_bytes[i, j]`` is what *each* GPU of group ``i`` sends to *each* GPU of group ``j`` (a GPU
    never sends to itself); groups are disjoint lists of GPU ids of any sizes. Same semantics and exactness as
    :func:`uniform_alltoall_loads` (which is the block-diagonal case). Cost: one pass per group with traffic,
    ``O(M n r log n)`` for ``M`` groups.
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
    lo = f.link_offset
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
        out += np.bincount(2 * (lo["nvlink"] + gpus), weights=w_col[cls] * same_j, minlength=out.size)
        # ...and each member d of j receives from every source in its domain at that source's group's rate
        w_dom = _count([dom], [dom[in_j]], [f.layout.num_domains], weight=w_col[cls]) - w_col[j]
        out += np.bincount(2 * (lo["nvlink"] + gpus[in_j]) + 1, weights=w_dom, minlength=out.size)
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
        for name in ("d", "nic_d", "x_d", "ld", "gd", "dom_d", "pcie_d", "rail_d"):
            setattr(self, name, getattr(sd, name)[mask])
