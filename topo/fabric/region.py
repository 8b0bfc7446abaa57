"""A region: several sites, each a fabric, joined by a data-centre interconnect (DCI), one more level of links.

The DCI is :attr:`topo.fabric.levels.Level.DCI`: its links ("spans") join two sites' attach tiers (their top tier,
or border leaves hanging off it), each with a capacity (waves x rate, per direction) and a one-way latency
(``distance_km x latency_per_km + equipment_latency``). Alike sites (one ``[[sites]]`` entry with ``count``) share
one built :class:`~topo.fabric.fabric.Fabric`: a 1,000,000-GPU region of four alike sites builds one 250k-GPU
fabric, and GPU ids run site by site (``gpu_offset``), so everything stays arrays.

Routes between sites are shortest paths by latency over the working spans (:meth:`Region.routes`); bulk traffic
may also split over a pair's direct span, 2-hop paths and paths one hop longer than its route (:meth:`Region.split_loads`,
:mod:`.region_split`).
``--fail dci:A-B`` (site names or indices) cuts a span, and traffic goes round it where the topology allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ..errors import TopoError, Unreachable
from ..spec.model import Spec
from ..spec.region_load import load_region, site_profile_keys
from ..spec.sites import RegionSpec
from .builders import build_fabric
from .fabric import Fabric
from .levels import Level
from .region_split import split_loads

__all__ = ["Region", "build_region", "region_from_specs"]


@dataclass
class Region:
    """Sites and the DCI spans between them. Build one with :func:`build_region`."""

    spec: RegionSpec
    site_names: tuple[str, ...]
    fabrics: tuple[Fabric, ...]  # one per site; alike sites hold the same object
    attach_tier: np.ndarray  # per site: the scale-out tier index the DCI attaches to
    spans: dict[str, np.ndarray]  # per span: a, b (site indices, a < b), waves, wave_rate_Bps, distance_km, latency_s
    failed: np.ndarray = None  # per span: True when cut
    failures: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict, repr=False)

    def default_waves_note(self) -> str | None:
        """A line for a region whose DCI spans take the default wave count (``interconnect.waves`` given neither in
        ``[interconnect]`` nor on a span): one wave a site pair, easy to leave in by omission (walk26 Left 5: one
        800G wave, 100 GB/s, between two 32k-GPU sites trained across them at 17% of one site); None otherwise."""
        ic = self.spec.interconnect
        if "waves" in ic.model_fields_set or not len(self.spans["waves"]):
            return None
        if sum(s.waves is not None for s in ic.spans) >= self.num_spans:  # every span gives its own
            return None
        rate = float(ic.wave_rate_Bps)
        return (f"the DCI takes the default interconnect.waves = {ic.waves} ({ic.waves} x {rate * 8 / 1e9:g} Gb/s, "
                f"{rate * ic.waves / 1e9:g} GB/s a direction between a site pair, for {int(self.gpus_per_site.max()):,} "
                "GPUs a site): set interconnect.waves (e.g. --set interconnect.waves=16) for the DCI you mean to "
                "build; topo train REGION --model M gives the DCI a job needs")

    # --- sizes ---------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def level(self) -> Level:
        return Level.DCI

    @property
    def site_profiles(self) -> tuple:
        """Each site's ``profile`` key (``[[sites]]``; None where it gives none), in site order (reg70)."""
        return tuple(p for e, key in zip(self.spec.sites, site_profile_keys(self.spec)) for p in [key] * e.count)

    @property
    def num_sites(self) -> int:
        return len(self.site_names)

    @property
    def num_spans(self) -> int:
        return int(self.spans["a"].size)

    @cached_property
    def gpus_per_site(self) -> np.ndarray:
        return np.array([f.num_gpus for f in self.fabrics], dtype=np.int64)

    @cached_property
    def gpu_offset(self) -> np.ndarray:
        """The first global GPU id of each site, and the total at the end (``num_sites + 1`` entries)."""
        return np.concatenate([[0], np.cumsum(self.gpus_per_site)])

    @property
    def num_gpus(self) -> int:
        return int(self.gpu_offset[-1])

    def site_of(self, gpu) -> np.ndarray:
        """The site index of each global GPU id."""
        return np.searchsorted(self.gpu_offset, np.asarray(gpu), side="right") - 1

    @property
    def span_bandwidth_Bps(self) -> np.ndarray:
        """Per span: its capacity per direction (waves x rate); 0 when cut."""
        bw = self.spans["waves"] * self.spans["wave_rate_Bps"]
        return np.where(self.failed, 0.0, bw)

    def span_names(self) -> list[str]:
        """``dci:east-west`` for every span."""
        n = self.site_names
        return [f"dci:{n[a]}-{n[b]}" for a, b in zip(self.spans["a"].tolist(), self.spans["b"].tolist())]

    def site_groups(self) -> list[tuple[Fabric, tuple[int, ...]]]:
        """The distinct site fabrics, each with its sites (indices, in site order), first site first: sites that
        share one built fabric, or whose fabrics have equal specs and the same failed links, are one group (two
        healthy ``[[sites]]`` entries of one spec are timed once; a site with a failed part is its own, regfail65),
        sites of another ``profile`` key apart (reg70). Cached on the region."""
        if "site_groups" not in self._cache:
            groups: list[tuple[Fabric, list[int]]] = []
            own = self.site_profiles
            for i, f in enumerate(self.fabrics):
                same = next((g for g in groups if _same_fabric(g[0], f) and own[g[1][0]] == own[i]), None)
                if same is None:
                    groups.append((f, [i]))
                else:
                    same[1].append(i)
            self._cache["site_groups"] = [(f, tuple(sites)) for f, sites in groups]
        return self._cache["site_groups"]

    # --- the attach point ----------------------------------------------------------------------------------
    def up_latency_s(self, site: int) -> float:
        """One way from a GPU of ``site`` up to its DCI port: the NIC, every switch up to the attach tier, and a
        border leaf when the DCI attaches through border leaves (the inverse of the way down)."""
        f = self.fabrics[site]
        t = int(self.attach_tier[site])
        lat = f.spec.server.nic_latency_s + sum(f.layout.tiers[k].latency_s for k in range(t + 1))
        if self.spec.interconnect.attach == "border":
            lat += f.layout.tiers[0].latency_s  # a border leaf is a leaf-tier switch
        return lat

    def border_Bps(self, site: int, *, as_built: bool = False, span_Bps: np.ndarray | None = None) -> float:
        """What a site's fabric can exchange with the DCI per direction: its working spans' capacity (``as_built``:
        every span's, failed or not: the ports and modules a plan buys and a site must find room for; ``span_Bps``:
        a capacity per span to take instead, a trial's), divided by the border leaves' oversubscription when it
        attaches through them."""
        mine = (self.spans["a"] == site) | (self.spans["b"] == site)
        if span_Bps is not None:
            bw = np.asarray(span_Bps, dtype=float)
        else:
            bw = self.spans["waves"] * self.spans["wave_rate_Bps"] if as_built else self.span_bandwidth_Bps
        return float(bw[mine].sum()) / self.spec.interconnect.border_oversubscription

    # --- routes --------------------------------------------------------------------------------------------
    def routes(self) -> tuple[np.ndarray, np.ndarray]:
        """Shortest routes by latency over the working spans between every pair of sites.

        Returns
        -------
        span : numpy.ndarray
            ``(S, S, S - 1)`` span ids along the route from site ``i`` to ``j``, -1 padded.
        latency_s : numpy.ndarray
            ``(S, S)`` one-way DCI latency of each route (inf where no route is left).
        """
        if "routes" not in self._cache:
            self._cache["routes"] = _routes(self)
        return self._cache["routes"]

    def hops(self) -> np.ndarray:
        """Fewest working spans between every pair of sites.

        Returns
        -------
        numpy.ndarray
            ``(S, S)`` hop counts (inf where no route is left), cached on the region.
        """
        if "hops" not in self._cache:
            ids = np.flatnonzero(~self.failed)
            self._cache["hops"] = _shortest_paths(self.num_sites, self.spans["a"][ids], self.spans["b"][ids],
                                                  np.ones(ids.size))[0]
        return self._cache["hops"]

    def route_latency_s(self, a, b) -> np.ndarray:
        """One-way DCI latency from site ``a`` to site ``b`` (arrays); :class:`Unreachable` if a failure cut them."""
        lat = self.routes()[1][np.asarray(a), np.asarray(b)]
        if np.isinf(lat).any():
            i = int(np.flatnonzero(np.isinf(np.atleast_1d(lat)))[0])
            sa, sb = np.atleast_1d(a)[i], np.atleast_1d(b)[i]
            raise Unreachable(f"no working DCI route from site {self.site_names[sa]} to {self.site_names[sb]} "
                              f"(failed: {', '.join(self.failures)})", key="fail")  # as the engine's cut-off GPU
        return lat

    def cross_site_latency_s(self, src, dst) -> np.ndarray:
        """One-way latency of the paths from global GPUs ``src`` to ``dst`` in other sites: up to the attach tier,
        the DCI route (``distance x per-km + equipment`` per span), down to the GPU."""
        a, b = self.site_of(src), self.site_of(dst)
        if (a == b).any():
            raise ValueError("cross_site_latency_s takes GPUs of different sites")
        up = np.array([self.up_latency_s(s) for s in range(self.num_sites)])
        return up[a] + self.route_latency_s(a, b) + up[b]

    def route_loads(self, a, b, nbytes) -> np.ndarray:
        """Bytes on every directed span (``2*span`` from its lower site to the higher, ``2*span + 1`` back) when
        site ``a[i]`` sends ``nbytes[i]`` to site ``b[i]`` along its route."""
        span, _ = self.routes()
        self.route_latency_s(a, b)  # raises if cut off
        a, b = np.asarray(a), np.asarray(b)
        hops = span[a, b]  # (flows, S-1)
        nb = np.broadcast_to(np.asarray(nbytes, dtype=float), a.shape)
        here = np.repeat(a[:, None], hops.shape[1], axis=1)
        # walk each route: the site a hop starts from is the end of the previous hop
        direction = np.zeros_like(hops)
        for h in range(hops.shape[1]):  # at most S - 1 hops: a loop per hop, not per flow
            ok = hops[:, h] >= 0
            s = hops[ok, h]
            up = self.spans["a"][s] == here[ok, h]
            direction[ok, h] = np.where(up, 0, 1)
            if h + 1 < hops.shape[1]:
                here[ok, h + 1] = np.where(up, self.spans["b"][s], self.spans["a"][s])
        ok = hops >= 0
        ids = 2 * hops[ok] + direction[ok]
        return np.bincount(ids, weights=np.broadcast_to(nb[:, None], hops.shape)[ok], minlength=2 * self.num_spans)

    def split_loads(self, a, b, nbytes) -> tuple[np.ndarray, np.ndarray]:
        """Bytes on every directed span, and each transfer's one-way DCI latency, when site ``a[i]`` sends
        ``nbytes[i]`` to site ``b[i]`` split over its direct span, its 2-hop paths, its route and the paths one hop
        longer, as traffic engineering fills them (:func:`topo.fabric.region_split.split_loads`)."""
        self.route_latency_s(a, b)  # raises if cut off
        return split_loads(self, a, b, nbytes)

    # --- cuts ----------------------------------------------------------------------------------------------
    def cut_Bps(self) -> tuple[float, float]:
        """The DCI capacity per direction across the weakest split of the sites (the min cut) and across the most
        even split by GPUs (the region's bisection). Enumerated over the 2^(S-1) splits (a few sites)."""
        S = self.num_sites
        if S > 20:
            raise ValueError(f"cuts are enumerated over 2^(S-1) splits; {S} sites are too many")
        masks = np.arange(1, 2 ** (S - 1), dtype=np.int64)[:, None]  # site 0 always on the far side
        side = ((masks >> np.arange(S)) & 1).astype(bool)  # (splits, S)
        a, b = self.spans["a"], self.spans["b"]
        crossing = side[:, a] != side[:, b]
        cut = crossing @ self.span_bandwidth_Bps
        gpus = side @ self.gpus_per_site
        even = np.abs(2 * gpus - self.num_gpus)
        return float(cut.min()), float(cut[even == even.min()].min())

    # --- failures ------------------------------------------------------------------------------------------
    def with_failures(self, *failures: str) -> "Region":
        """The same region with parts failed: a DCI span, ``dci:A-B`` with site names or indices (``dci:0-1``), or a
        part of one site, ``SITE:PART`` (a site name or index) with PART as ``--fail`` names it in one fabric
        (``east:spine3``, ``0:spine3``); that site then has a fabric of its own (alike sites keep sharing theirs)."""
        if not failures:
            return self
        dead = self.failed.copy()
        fabrics = list(self.fabrics)
        for f in failures:
            site, part = self._site_part(f)
            if site is None:
                dead[self._span_index(f)] = True
                continue
            try:
                fabrics[site] = fabrics[site].with_failures(part)
            except TopoError as exc:
                raise TopoError(f"site {self.site_names[site]}: {exc.message}", key="--fail") from None
        return replace(self, fabrics=tuple(fabrics), failed=dead, failures=self.failures + tuple(failures),
                       _cache={})

    def _site_part(self, text: str) -> tuple[int | None, str]:
        """``(site index, part)`` for ``SITE:PART`` naming a site by name or index (:func:`_site_of`, as a span's
        ends); ``(None, text)`` otherwise (a span)."""
        head, sep, part = text.strip().partition(":")
        site = _site_of(head, self.site_names) if sep and head != "dci" else None
        return (None, text) if site is None else (site, part)

    def _span_index(self, text: str) -> int:
        names = self.site_names
        body = text.strip()
        if not body.startswith("dci:") or body.count("-") < 1:
            head, sep, _ = body.partition(":")
            unknown = f"no site {head!r}; " if sep and head != "dci" else ""  # a site's part, an unknown site
            raise TopoError(f"{unknown}a region fails DCI spans (dci:A-B with two site names or indices, e.g. "
                            f"{self.span_names()[0]} or dci:0-1) or a site's parts (SITE:PART, e.g. "
                            f"{self.site_names[0]}:leaf0 or 0:leaf0; sites: {', '.join(names)}, or 0 to "
                            f"{len(names) - 1}), got {text!r}" + _whole_site_hint(body, names), key="--fail")
        ends = _split_span(body[4:], names)
        if ends is not None and ends[0] == ends[1]:
            raise TopoError(f"{text!r} names site {names[ends[0]]} at both ends; a span joins two different sites: "
                            f"{', '.join(self.span_names())}", key="--fail")
        if ends is None:
            raise TopoError(f"no such sites in {text!r}; sites: {', '.join(names)} (or 0 to {len(names) - 1})",
                            key="--fail")
        a, b = sorted(ends)
        hit = np.flatnonzero((self.spans["a"] == a) & (self.spans["b"] == b))
        if hit.size == 0:
            raise TopoError(f"no DCI span between {names[a]} and {names[b]} ({self.spec.interconnect.topology}); "
                            f"spans: {', '.join(self.span_names())}", key="--fail")
        return int(hit[0])


def _same_fabric(f: Fabric, g: Fabric) -> bool:
    """One built fabric, or two of equal specs with the same links failed (none, or the same ones)."""
    if f is g:
        return True
    if f.failed is None or g.failed is None:
        return f.failed is None and g.failed is None and f.spec == g.spec
    return f.spec == g.spec and np.array_equal(f.failed, g.failed)


def _site_of(text: str, names) -> int | None:
    """The site index ``text`` names: a site's name, else its index (``0``); None for neither. The one rule for a
    span's ends (``dci:east-west``, ``dci:0-1``) and a site's part (``west:leaf0``, ``1:leaf0``)."""
    if text in names:
        return list(names).index(text)
    return int(text) if text.isdecimal() and int(text) < len(names) else None


def _split_span(body: str, names) -> tuple[int, int] | None:
    """Two site indices from ``A-B`` (names may hold '-': every split point is tried; two different sites are
    preferred, the same site twice is returned when nothing else reads)."""
    same = None
    for i in [k for k, ch in enumerate(body) if ch == "-"]:
        x, y = body[:i], body[i + 1:]
        ends = [_site_of(v, names) for v in (x, y)]
        if None not in ends and ends[0] != ends[1]:
            return ends[0], ends[1]
        if None not in ends:
            same = (ends[0], ends[1])
    return same


def _routes(r: Region) -> tuple[np.ndarray, np.ndarray]:
    S = r.num_sites
    alive = ~r.failed
    a, b, lat = r.spans["a"][alive], r.spans["b"][alive], r.spans["latency_s"][alive]
    dist, pred = _shortest_paths(S, a, b, lat)
    span_of = np.full((S, S), -1, dtype=np.int64)
    ids = np.flatnonzero(alive)
    span_of[a, b] = ids
    span_of[b, a] = ids
    out = np.full((S, S, max(1, S - 1)), -1, dtype=np.int64)
    for i in range(S):  # S sites: a loop per site pair, never per GPU
        for j in range(S):
            if i == j or np.isinf(dist[i, j]):
                continue
            path, k = [], j
            while k != i:
                path.append(span_of[pred[i, k], k])
                k = pred[i, k]
            out[i, j, :len(path)] = path[::-1]
    np.fill_diagonal(dist, 0.0)
    return out, dist


def _shortest_paths(S: int, a: np.ndarray, b: np.ndarray, latency_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dijkstra's shortest paths by latency from every site over the spans ``a[i] - b[i]`` (both ways).

    Returns ``dist (S, S)`` (inf: no route) and ``pred (S, S)``, the site before ``j`` on the route from ``i``
    (-1: none). Sites are settled in order of latency, the lowest index first among equals, and a route is only
    replaced by a strictly shorter one: of two routes of equal latency (a ring's opposite site), the one through
    the site settled first is kept. A few sites: a loop per site pair, in numpy per site.
    """
    adj = np.full((S, S), np.inf)
    np.minimum.at(adj, (np.r_[a, b], np.r_[b, a]), np.r_[latency_s, latency_s])
    dist = np.full((S, S), np.inf)
    pred = np.full((S, S), -1, dtype=np.int64)
    for i in range(S):
        d, p, done = dist[i], pred[i], np.zeros(S, dtype=bool)
        d[i] = 0.0
        for _ in range(S):
            k = int(np.argmin(np.where(done, np.inf, d)))
            if done[k] or np.isinf(d[k]):
                break
            done[k] = True
            new = d[k] + adj[k]
            better = (new < d) & ~done
            d[better] = new[better]
            p[better] = k
    return dist, pred


def region_from_specs(region: RegionSpec, site_specs: list[Spec], source: str = "") -> Region:
    """Build the sites (one fabric per ``[[sites]]`` entry) and lay out the DCI spans."""
    fabrics, names = [], region.site_names
    for entry, spec in zip(region.sites, site_specs):
        f = build_fabric(spec)
        fabrics += [f] * entry.count
    _check_joinable(region, fabrics, source)
    ic = region.interconnect
    attach = np.array([_attach_tier(f, ic.attach_tier, names[i], region.source_of("interconnect.attach_tier") or source)
                       for i, f in enumerate(fabrics)])
    pairs = region.pairs()
    own = {frozenset((names.index(s.sites[0]), names.index(s.sites[1]))): s for s in ic.spans}
    cols = {k: [] for k in ("a", "b", "waves", "wave_rate_Bps", "distance_km")}
    for a, b in pairs:
        s = own.get(frozenset((a, b)))
        cols["a"].append(a)
        cols["b"].append(b)
        cols["waves"].append(s.waves if s and s.waves else ic.waves)
        cols["wave_rate_Bps"].append(s.wave_rate_Bps if s and s.wave_rate_Bps else ic.wave_rate_Bps)
        cols["distance_km"].append(s.distance_km if s and s.distance_km else ic.distance_km)
    unused = [s for key, s in own.items() if tuple(sorted(key)) not in pairs]
    if unused:
        raise TopoError(f"no {ic.topology} span joins {'-'.join(unused[0].sites)}; spans: "
                        f"{', '.join(f'{names[a]}-{names[b]}' for a, b in pairs)}", source=source,
                        key="interconnect.spans")
    spans = {k: np.array(v, dtype=np.int64 if k in ("a", "b", "waves") else float) for k, v in cols.items()}
    spans["latency_s"] = spans["distance_km"] * ic.latency_per_km_s + ic.equipment_latency_s
    return Region(spec=region, site_names=tuple(names), fabrics=tuple(fabrics), attach_tier=attach, spans=spans,
                  failed=np.zeros(len(pairs), dtype=bool))


def build_region(name_or_path, overrides=()) -> Region:
    """Load a region file (or bundled region) with ``--set`` overrides and build it.

    Parameters
    ----------
    name_or_path : str or Path
    overrides : sequence of str

    Returns
    -------
    Region
    """
    region, specs = load_region(name_or_path, overrides)
    return region_from_specs(region, specs, region._origin)


def _check_joinable(region: RegionSpec, fabrics: list[Fabric], source: str) -> None:
    first = fabrics[0]
    for i, f in enumerate(fabrics[1:], 1):
        if f.spec.gpu != first.spec.gpu:
            raise TopoError(f"site {region.site_names[i]} has {f.spec.gpu} GPUs and site {region.site_names[0]} "
                            f"{first.spec.gpu}: one job cannot span both; allowed: sites of one GPU model",
                            source=source, key="sites")


def _attach_tier(f: Fabric, name: str | None, site: str, source: str) -> int:
    tiers = [t.name for t in f.layout.tiers]
    if name is None:
        return len(tiers) - 1
    if name not in tiers:
        raise TopoError(f"site {site} has no tier {name!r}; allowed: {', '.join(tiers)}", source=source,
                        key="interconnect.attach_tier")
    return tiers.index(name)


def _whole_site_hint(body: str, names: list[str]) -> str:
    """What to do instead where ``--fail`` names a whole site (walk19: a user asking what a site's loss does got
    the syntax alone): the region without that site is a region file of the others."""
    if body not in names:
        return ""
    others = [n for n in names if n != body]
    return (f"; a whole site is not failed in place: its loss is the region without it, a region file of "
            f"{', '.join(others)}" + (" (one site left: its spec alone)" if len(others) == 1 else ""))
