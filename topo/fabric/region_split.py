"""Bulk cross-site traffic split over every short DCI path of a site pair (traffic engineering on the site graph).

A site pair's traffic may take its direct span, every 2-hop path through a third site, and, where the pair is
further apart (a chain, a long ring), its lowest-latency route and every path one hop longer (a ring's other way
round; on a dense graph whose routes are long, whole hop counts of them up to :data:`MAX_PATHS`). The split is the one a traffic-engineered
long-haul network reaches when it fills longer paths as the short one fills: the fractions that minimise the
busiest directed span's time (load over capacity, a min-max multi-commodity flow, solved as one small linear
programme over the site graph), and among those the lowest latency-weighted bytes (a second programme with the
busiest span's time held), so a path is used only when it shortens the phase. On a 3-site ring of equal spans where each site sends to the next, each pair gets its direct
span plus half of the 2-hop path (the two reverse directions are shared by two pairs): 1.5x the direct span.

Sites are few (ten in ``region-1m``): a path per pair and site, never per GPU or per flow. The solution is linear
in the bytes, so it is solved once per traffic pattern (pairs and their shares) and cached on the region.
"""

from __future__ import annotations

import numpy as np

__all__ = ["split_paths", "split_loads", "split_notes", "MAX_PATHS"]


MAX_PATHS = 64
"""The most paths of 3 hops or more a site pair's split keeps (its direct span, 2-hop paths and route are always
kept): the bound on the linear programme's size. Without it the paths of up to ``h + 1`` hops grow exponentially
on a dense site graph whose routes are long (a mesh whose short spans form a chain: 109,601 paths between the ends
of 10 sites, 986,410 at 11, minutes and GB to list). Longer paths join a hop count at a time while the whole count
fits, so none is chosen by site order; a pair whose next hop count does not fit is named in
:func:`split_notes`.

Why 64 (measured, small50, on this 2-core machine under load): every bundled region needs at most 2 paths a pair
(two-site-h100 1, three-site-chain 1, region-1m 2: the bound never binds there). On the 10-site mesh with a 1 km
chain (tests/test_region_chain.py), an all-pairs split keeps 4,884 paths and solves in about 1.2 s at 64, against
866 paths and 0.2 s at 16 and 23,688 paths and 6.7 s at 1,024; on 8 sites 1,672 paths and 0.4 s at 64 (12,458 and
2.8 s at 1,024). 64 keeps a pair's 3-hop level whole up to 9 sites (7 x 8 = 56 paths) at about a second for an
all-pairs split, which keeps ``topo estimate`` and ``topo train`` of a region interactive. No source was found for
how many tunnels a long-haul traffic-engineering system keeps per site pair (rev51, section 156): the value is an
engineering bound, not a published one."""


def split_paths(r, i: int, j: int) -> list[np.ndarray]:
    """The directed span ids (``2*span`` lower site to higher, ``+1`` back) of every path site ``i`` may send to
    site ``j`` on: the simple paths over the working spans of at most ``max(2, h + 1)`` hops, ``h`` the hops of
    the lowest-latency route. So the direct span and each 2-hop path through a third site always, and the route;
    where the pair is further apart (a chain, a long ring), the paths one hop longer (a ring's other way round, a
    chain's detour), the 3-hop ones and up a whole hop count at a time while they total at most :data:`MAX_PATHS`.
    Shorter paths first, then by the sites they pass, so the first is the direct span where there is one.

    Parameters
    ----------
    r : topo.fabric.region.Region
    i, j : int
        Sending and receiving site.

    Returns
    -------
    list of numpy.ndarray
        One array of directed span ids per path, in the order of its hops (empty when no working path joins them).
    """
    a, b, alive = r.spans["a"], r.spans["b"], ~r.failed
    S = r.num_sites
    span_of = np.full((S, S), -1, dtype=np.int64)
    ids = np.flatnonzero(alive)
    span_of[a[ids], b[ids]] = ids
    span_of[b[ids], a[ids]] = ids
    route_spans = r.routes()[0][i, j]
    route_hops = int((route_spans >= 0).sum())
    if route_hops == 0:
        return []
    limit = max(2, route_hops + 1)
    neighbours = [np.flatnonzero(span_of[k] >= 0).tolist() for k in range(S)]
    found, cut = _paths_by_hops(neighbours, r.hops()[:, j], i, j, limit)
    route, here = [i], i
    for s in route_spans[:route_hops].tolist():
        here = int(b[s] if a[s] == here else a[s])
        route.append(here)
    if tuple(route) not in found:
        found.append(tuple(route))
    found.sort(key=lambda p: (len(p), p))
    if cut is not None:  # the bound left out a whole hop count: said in the results that split (split_notes)
        r._cache.setdefault("split_cut", {})[(i, j)] = (len(found), cut)

    def directed(x: int, y: int) -> int:
        s = int(span_of[x, y])
        return 2 * s + (0 if a[s] == x else 1)

    return [np.array([directed(x, y) for x, y in zip(p[:-1], p[1:])], dtype=np.int64) for p in found]


def _paths_by_hops(neighbours: list, hops_to_j: np.ndarray, i: int, j: int,
                   limit: int) -> tuple[list[tuple[int, ...]], int | None]:
    """The simple paths (site tuples) from ``i`` to ``j`` of 1 to ``limit`` hops, as :func:`split_paths` keeps
    them: every 1- and 2-hop path, then the paths of 3 hops or more a whole hop count at a time while they total
    at most :data:`MAX_PATHS`; and the first hop count left out where the bound cut the set (None otherwise). ``neighbours[k]``: the sites one working span from ``k``; ``hops_to_j``: each site's fewest
    hops to ``j`` (prunes the walk)."""

    def walk(path: list[int], hops: int, out: list, cap: int) -> bool:  # paths of exactly ``hops`` hops
        here = path[-1]
        if here == j:  # a simple path ends at j: kept when it has the hops asked
            if len(path) - 1 == hops:
                out.append(tuple(path))
            return len(out) <= cap
        for k in neighbours[here]:  # a few sites: never per GPU; pruned to sites that can still reach j in time
            if k not in path and len(path) + hops_to_j[k] <= hops:
                if not walk(path + [k], hops, out, cap):
                    return False
        return True

    found: list[tuple[int, ...]] = []
    longer = 0  # paths of 3 hops or more kept
    for hops in range(1, limit + 1):
        level: list[tuple[int, ...]] = []
        if hops <= 2:
            walk([i], hops, level, len(neighbours))  # at most S - 2 of them
        elif not walk([i], hops, level, MAX_PATHS - longer):
            return found, hops  # this hop count's paths do not all fit: none of them, nor longer ones
        else:
            longer += len(level)
        found += level
    return found, None


def split_notes(r) -> list[str]:
    """What the bound on paths (:data:`MAX_PATHS`) left out of the splits computed so far on ``r``: one note
    naming the pairs cut (the first few) and the hop count each stopped at; empty when it cut none.

    Parameters
    ----------
    r : topo.fabric.region.Region
        A region whose :meth:`~topo.fabric.region.Region.split_loads` has run.

    Returns
    -------
    list of str
        Zero or one note.
    """
    cut = r._cache.get("split_cut", {})
    if not cut:
        return []
    names = r.site_names
    shown = sorted(cut.items())[:3]
    pairs = "; ".join(f"{names[i]}->{names[j]} kept {kept} paths (the route's among them), none other of {hops} "
                      f"hops or more"
                      for (i, j), (kept, hops) in shown)
    more = f" and {len(cut) - len(shown)} more pairs" if len(cut) > len(shown) else ""
    return [f"the DCI split keeps at most {MAX_PATHS} paths of 3 hops or more a site pair (MAX_PATHS, the bound on "
            f"its linear programme): {len(cut)} pair{'s' if len(cut) > 1 else ''} had more ({pairs}{more}); a "
            f"longer path could only lower the busiest span's time, so the split's is an upper bound"]


def split_loads(r, src, dst, nbytes) -> tuple[np.ndarray, np.ndarray]:
    """Bytes on every directed span and each transfer's one-way DCI latency (its longest path that carries a
    share) when site ``src[k]`` sends ``nbytes[k]`` to ``dst[k]``, split as the module doc says.

    Parameters
    ----------
    r : topo.fabric.region.Region
    src, dst : array of int
        Sending and receiving sites (different), one entry per transfer; every pair must have a working route
        (:meth:`~topo.fabric.region.Region.route_latency_s` raises first otherwise).
    nbytes : float or array

    Returns
    -------
    tuple of numpy.ndarray
        ``(2 * spans,)`` bytes per directed span and ``(transfers,)`` latency in seconds.
    """
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    nb = np.broadcast_to(np.asarray(nbytes, dtype=float), src.shape)
    S = r.num_sites
    demand = np.bincount(src * S + dst, weights=nb, minlength=S * S)
    total = demand.sum()
    if total <= 0:
        return np.zeros(2 * r.num_spans), np.zeros(src.shape)
    pairs = np.flatnonzero(demand)
    share = demand[pairs] / total
    key = ("split", tuple(pairs.tolist()), tuple(np.round(share, 12).tolist()))
    if key not in r._cache:
        r._cache[key] = _solve(r, pairs // S, pairs % S, share)
    per_unit, pair_lat = r._cache[key]
    lat = pair_lat[np.searchsorted(pairs, src * S + dst)]
    return per_unit * total, lat


def _solve(r, i: np.ndarray, j: np.ndarray, share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per directed span its load per byte of the pattern, and per pair its latency (the module doc's programme:
    variables are each path's fraction of its pair, then the busiest span's time ``t``)."""
    E = 2 * r.num_spans
    cap = np.repeat(r.span_bandwidth_Bps, 2)
    cap = cap / cap.max()
    span_lat = np.repeat(r.spans["latency_s"], 2)
    paths = [split_paths(r, int(x), int(y)) for x, y in zip(i, j)]
    owner = np.concatenate([np.full(len(p), k) for k, p in enumerate(paths)])
    flat = [p for ps in paths for p in ps]
    P = len(flat)
    use = np.zeros((E, P))  # use[e, p]: path p crosses directed span e (a simple path crosses each once)
    use[np.concatenate(flat), np.repeat(np.arange(P), [len(h) for h in flat])] = 1.0
    path_lat = use.T @ span_lat
    load = use * share[owner]  # bytes of the pattern on span e when path p takes its whole pair
    if P == len(paths):  # one path per pair (two sites, neighbours on a ring of four or more): nothing to split
        return load.sum(axis=1), path_lat
    from scipy.optimize import linprog  # here: its import (0.25 s of CPU) is paid only where a pair has a choice

    # two programmes, one after the other: the least busiest-span time t, then, with t held there, the least
    # latency-weighted bytes. One objective with the latency as a tie-break scaled far below t is not enough: HiGHS
    # stops within its optimality tolerance (1e-7), at a vertex that may send a small pair over a 2-hop path where
    # its direct span is idle (a 4-site mesh: tests/test_region.py)
    A_ub = np.c_[load, -cap][cap > 0]
    A_eq = np.c_[(owner[None, :] == np.arange(len(paths))[:, None]).astype(float), np.zeros(len(paths))]
    lp = dict(A_ub=A_ub, b_ub=np.zeros(A_ub.shape[0]), A_eq=A_eq, b_eq=np.ones(len(paths)), method="highs")
    res = linprog(np.r_[np.zeros(P), 1.0], bounds=[(0, None)] * (P + 1), **lp)
    if res.status == 0:
        t = float(res.x[P])
        res = linprog(np.r_[share[owner] * path_lat / max(path_lat.max(), 1e-30), 0.0],
                      bounds=[(0, None)] * P + [(0, t * (1 + 1e-9) + 1e-15)], **lp)
    if res.status != 0:
        raise RuntimeError(f"the DCI split found no solution: {res.message}")
    x = np.clip(res.x[:P], 0.0, None)
    per_unit = load @ x
    used = x > 1e-9
    lat = np.array([path_lat[(owner == k) & used].max() for k in range(len(paths))])
    return per_unit, lat
