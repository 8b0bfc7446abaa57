"""The switch ports a region's DCI takes at each site, and what a site whose attach tier is full must add for them.

The fabric model attaches the DCI beyond the switches' radix (:mod:`topo.fabric.region`); the plan counts the ports.
A site's DCI takes ``ceil(B / r)`` ports of its attach tier, ``B`` its spans' capacity per direction (over the border
leaves' oversubscription when it attaches through them) and ``r`` the tier's port rate: the coherent pluggables of
the DCI's bill (:mod:`topo.plan.dci`, one per wave at each end) sit in them. Idle ports of the tier take them at no
cost (their switches are in the site's bill). The ports beyond the idle ones need DCI border switches of the tier's
own model (the site's bill's price and power, with its catalog source), ``ceil(missing / (k/2))`` of radix ``k``:
half their ports to the DCI and half into the site, each of those links with a module of the tier's optics at both
ends (the site's bill's module at that tier). The half-and-half split is an assumption (a non-blocking border
switch); the site-side ports those links land on are the site's own to find (a full tier has none idle: the note
says so) and are not priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dci import DciItem

__all__ = ["SitePorts", "site_ports", "port_notes"]


@dataclass
class SitePorts:
    """One site's DCI ports: needed, idle at the attach tier, and what the missing ones add."""

    site: str
    attach_tier: str
    dci_Bps: float  # per direction, at the attach tier (over the border oversubscription)
    port_rate_Bps: float
    ports_needed: int
    ports_idle: int
    border_switches: int
    items: list[DciItem]  # border switches and their site-side modules (empty when idle ports suffice)

    @property
    def power_W(self) -> float:
        """Watts of the border switches and modules :attr:`items` adds (0 where idle ports take the DCI)."""
        return sum(i.count * i.power_W_each for i in self.items)

    @property
    def equipment_usd(self) -> float:
        """Price of the border switches and modules :attr:`items` adds, in US dollars."""
        return sum(i.count * i.price_usd_each for i in self.items)


def site_ports(region, site_plans) -> list[SitePorts]:
    """Every site's DCI ports (see the module doc).

    Parameters
    ----------
    region : topo.fabric.region.Region
    site_plans : list of topo.plan.planner.PlanResult
        Each site's plan, in the order of sites (their bills give the attach tier's switch and module prices).

    Returns
    -------
    list of SitePorts
    """
    ic = region.spec.interconnect
    cap = region.spans["waves"] * region.spans["wave_rate_Bps"]  # as built, failures aside: the plan buys them all
    out = []
    for k, (f, p) in enumerate(zip(region.fabrics, site_plans)):
        t = f.layout.tiers[int(region.attach_tier[k])]
        mine = (region.spans["a"] == k) | (region.spans["b"] == k)
        need_Bps = float(cap[mine].sum()) / ic.border_oversubscription
        needed = math.ceil(need_Bps / t.down_rate_Bps - 1e-9)
        idle = t.idle_ports
        missing = max(0, needed - idle)
        extra = math.ceil(missing / (t.radix // 2)) if missing else 0
        out.append(SitePorts(region.site_names[k], t.name, need_Bps, t.down_rate_Bps, needed, idle, extra,
                             _items(p.bom, t, extra) if extra else []))
    return out


def _items(bom, t, extra: int) -> list[DciItem]:
    """The border switches' lines: the attach tier's switch, and its modules on the links into the site."""
    sw = next(s for s in bom.switches if s.tier.startswith(t.name))  # a two-stage tier: its lines' first
    items = [DciItem(f"DCI border switch ({sw.model})", extra, sw.power_W_each, sw.price_usd_each)]
    mod = next((m for m in bom.transceivers if m.at == t.name), None)
    if mod is not None:  # an optical tier: a module at both ends of each link into the site
        links = extra * (t.radix // 2)
        ends_each = max(1, mod.links // max(1, mod.count))
        items.append(DciItem(f"{mod.type} (border switch to {t.name})", 2 * math.ceil(links / ends_each),
                             mod.power_W_each, mod.price_usd_each))
    return items


def port_notes(ports: list[SitePorts]) -> list[str]:
    """A note per site whose attach tier has too few idle ports for its DCI: the border switches the bill adds,
    and what they leave unpriced (the module doc's assumption).

    Parameters
    ----------
    ports : list of SitePorts
        :func:`site_ports`' answer.

    Returns
    -------
    list of str
        One note per site that needs border switches; none where idle ports take the DCI.
    """
    out = []
    for p in ports:
        if p.border_switches:
            lines = ", ".join(f"{i.count:,} x {i.item}" for i in p.items)
            out.append(f"site {p.site}: its DCI takes {p.ports_needed:,} {p.attach_tier} ports of "
                       f"{p.port_rate_Bps * 8 / 1e9:g} Gb/s and the tier has {p.ports_idle:,} idle: the DCI's bill "
                       f"adds {lines} (assumption: half of each border switch's ports to the DCI, half into the "
                       f"site; the {p.attach_tier} ports those links land on are not priced: plan the site with "
                       f"room at its top tier)")
    return out
