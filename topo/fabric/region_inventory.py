"""What ``topo describe`` says of a region: its sites (each with its bisection, after the site's failed parts), the
DCI spans, and the cuts.

Alike sites share one fabric, so each distinct fabric's inventory is made once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .bisection import bisection
from .inventory import inventory
from .region import Region

__all__ = ["RegionInventory", "SiteRow", "SpanRow", "region_inventory", "cut_apart_text"]


@dataclass
class SiteRow:
    name: str
    spec: str
    gpu: str
    num_gpus: int
    tiers: list[str]
    attach_tier: str
    bisection_bandwidth_Bps: float  # its working links' (a site with failed parts: less than its spec's)
    dci_Bps: float  # its working spans' capacity per direction (over the border oversubscription)
    up_latency_s: float  # one way, GPU to its DCI port
    power_limit_MW: float | None
    failures: list[str]  # the site's failed parts (--fail SITE:PART), by the site's own names
    bisection_without_failures_Bps: float
    # the attach tier's idle ports x their rate, per direction: where the DCI's ports (or the border leaves' uplinks)
    # would plug in; the model does not take them from the radix, so describe notes a site with too few
    attach_idle_Bps: float = 0.0
    dci_as_built_Bps: float = 0.0  # every span's capacity, failed or not: what the attach tier's ports must take


@dataclass
class SpanRow:
    name: str
    distance_km: float
    waves: int
    wave_rate_Bps: float
    bandwidth_Bps: float  # per direction; 0 when cut
    latency_s: float  # one way
    failed: bool


@dataclass
class RegionInventory:
    name: str
    description: str
    sources: list[str]
    assumptions: list[str]
    num_sites: int
    num_gpus: int
    topology: str
    attach: str
    border_oversubscription: float
    sites: list[SiteRow]
    spans: list[SpanRow]
    min_cut_Bps: float  # the weakest split of the sites
    bisection_cut_Bps: float  # the most even split by GPUs
    farthest_latency_s: float  # one way, GPU to GPU across the longest working route
    cut_apart: list[list[str]]  # site pairs no working route joins, [a, b] (names may hold '-': "s-0", "s-1")
    # when the region is cut: the groups of sites working routes still join, each a list of site names (a pair of
    # cut_apart has its two sites in different groups); empty when every site reaches every other
    cut_groups: list[list[str]]
    failures: list[str]

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (``topo describe --json`` of a region)."""
        return asdict(self)


def cut_apart_text(inv: RegionInventory) -> str:
    """The groups of sites that working DCI routes still join, in describe's and the report's words.

    Parameters
    ----------
    inv : RegionInventory

    Returns
    -------
    str
        ``no working DCI route joins these groups of sites: group 1: site east; group 2: site west``, or ``""``
        when every site reaches every other.
    """
    if not inv.cut_apart:
        return ""
    return "no working DCI route joins these groups of sites: " + "; ".join(
        f"group {k}: {'site' if len(g) == 1 else 'sites'} {', '.join(g)}" for k, g in enumerate(inv.cut_groups, 1))


def _groups(reach: np.ndarray, names) -> list[list[str]]:
    """The sites in groups that reach one another (``reach``: the working routes' site-by-site reachability, which
    routes make transitive), in the order of each group's first site."""
    out, seen = [], set()
    for i in range(len(names)):
        if i not in seen:
            members = np.flatnonzero(reach[i]).tolist()
            seen.update(members)
            out.append([names[k] for k in members])
    return out


def region_inventory(r: Region) -> RegionInventory:
    """The inventory of a region (see the module doc).

    Parameters
    ----------
    r : Region

    Returns
    -------
    RegionInventory
    """
    invs: dict[int, object] = {}
    entry_of = [e for e in r.spec.sites for _ in range(e.count)]
    sites = []
    for i, f in enumerate(r.fabrics):
        if id(f) not in invs:  # not setdefault(id(f), inventory(f)): that computes it for every site
            invs[id(f)] = inventory(f)
        inv = invs[id(f)]
        e = entry_of[i]
        working = bisection(f).bandwidth_Bps if f.failures else inv.bisection_bandwidth_Bps
        at = inv.tiers[int(r.attach_tier[i])]
        sites.append(SiteRow(name=r.site_names[i], spec=e.spec or f.spec.name, gpu=f.spec.gpu, num_gpus=f.num_gpus,
                             tiers=[t.name for t in f.layout.tiers],
                             attach_tier=f.layout.tiers[int(r.attach_tier[i])].name,
                             bisection_bandwidth_Bps=working, dci_Bps=r.border_Bps(i),
                             up_latency_s=r.up_latency_s(i), power_limit_MW=e.power_limit_MW,
                             failures=list(f.failures), bisection_without_failures_Bps=inv.bisection_bandwidth_Bps,
                             attach_idle_Bps=at.ports_idle * at.down_port_rate_Bps,
                             dci_as_built_Bps=r.border_Bps(i, as_built=True)))
    bw = r.span_bandwidth_Bps
    spans = [SpanRow(name=n, distance_km=float(d), waves=int(w), wave_rate_Bps=float(rate), bandwidth_Bps=float(b),
                     latency_s=float(lat), failed=bool(x))
             for n, d, w, rate, b, lat, x in zip(r.span_names(), r.spans["distance_km"], r.spans["waves"],
                                                r.spans["wave_rate_Bps"], bw, r.spans["latency_s"], r.failed)]
    lat = r.routes()[1]
    up = np.array([s.up_latency_s for s in sites])
    reach = np.isfinite(lat)
    farthest = float(np.max(np.where(reach, lat + up[:, None] + up[None, :], 0.0)))
    min_cut, even_cut = r.cut_Bps()
    ic = r.spec.interconnect
    src = r.spec.source
    return RegionInventory(name=r.name, description=r.spec.description,
                           sources=[src] if isinstance(src, str) and src else list(src or []),
                           assumptions=list(r.spec.assumptions), num_sites=r.num_sites, num_gpus=r.num_gpus,
                           topology=ic.topology, attach=ic.attach, border_oversubscription=ic.border_oversubscription,
                           sites=sites, spans=spans, min_cut_Bps=min_cut, bisection_cut_Bps=even_cut,
                           farthest_latency_s=farthest,
                           cut_apart=[[r.site_names[a], r.site_names[b]] for a, b in zip(*np.nonzero(~reach))
                                      if a < b],
                           cut_groups=_groups(reach, r.site_names) if not reach.all() else [],
                           failures=list(r.failures))
