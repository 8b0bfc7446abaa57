"""The switch ports a region's DCI takes at each site, and the switches a site adds for them.

Each coherent wave is one pluggable (400ZR/800ZR class, :mod:`topo.plan.dci`) at each end of its span, and a
pluggable sits in one switch cage of at least the wave's rate, on an Ethernet switch (a ZR module carries an
Ethernet client: "Client rate ... 1x400GbE", f-tone's 400G ZR+ datasheet; OIF 800ZR, multisite.md s.4) whose cage
powers it (``cage_power_W`` in ``topo/data/dci/interconnect.toml`` where published: NVIDIA's SN5600 powers 18 W a
cage, below an 800ZR's 20-24 W). Per site, where ``w`` is a span's waves at rate ``R`` and ``B = sum(w R) / o`` its
capacity into the site (``o`` the border oversubscription):

- ``attach = "top"`` and the attach tier hosts the waves: they take ``sum(w) x c`` of its ports (``c`` the ports a
  cage holds, the tier's catalog model's ``ports_per_cage`` as the site's bill carries it, a line without one
  refused: a twin-port 2 x 400G cage holds one 800G pluggable). Idle ports take them at no cost; the rest need
  switches of the tier's own model, ``ceil(missing / (k/2))`` of radix ``k``, half their ports to the DCI and half
  into the site with a module of the tier's optics at both ends (an assumption: a non-blocking border switch).
- otherwise (``attach = "border"``, or a tier that cannot host them: InfiniBand, a cage slower than the wave or
  powered below the module): border switches, of the site's leaf model when it hosts the waves (the spec's radix
  and port rate, the site's bill's price and power), else the DCI catalog's ``[switch]``. Their ports: ``sum(w x
  ceil(R / cage rate)) x c`` up to the waves (``c`` the leaf model's or the DCI switch's ``ports_per_cage``) and
  ``ceil(B / r)`` down into the site at their port rate ``r``; ``ceil((up + down) / k)`` switches. Their links
  land on ``ceil(B / r_t)`` attach-tier ports (``r_t`` the tier's rate), a module of the tier's optics at both
  ends; idle ports take them.

Where the attach tier's idle ports end (:func:`_grown_top`), the top tier grows: ``ceil(missing / k)`` more
switches of its own model (radix ``k``, the site's bill's price and power), rounded up to the same number in each
of its ``G`` planes (the builder's groups: ``G ceil(missing / (G k))``, place64), the links from the tier below spread
over them (their count and optics unchanged: ``n k`` ports hold the ``n k - idle`` taken from below and the
DCI's), the same rule as the single-site plan's switch counts (ports = switches x radix). A tier below the top
cannot grow without ports above it: refused, naming the site and ``interconnect.attach_tier``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import TopoError
from .dci import DciCatalog, DciItem

__all__ = ["SitePorts", "site_ports", "port_notes"]


@dataclass
class SitePorts:
    """One site's DCI ports: where the waves' pluggables sit, the attach tier's ports taken and idle, and what the
    site adds for them."""

    site: str
    attach_tier: str
    dci_Bps: float  # per direction, into the site (over the border oversubscription)
    port_rate_Bps: float  # the attach tier's
    ports_needed: int  # attach-tier ports the DCI takes: the pluggables' (hosted there) or the border links'
    ports_idle: int
    border_switches: int  # switches the site adds (the tier's model, the leaf model or the DCI catalog's switch)
    items: list[DciItem]  # those switches and their site-side modules (empty when idle ports suffice)
    waves: int = 0  # coherent pluggables at this site, one per wave
    hosted_at: str = ""  # where they sit: the attach tier's name, or "border"
    border_model: str = ""
    border_up_ports: int = 0  # the border switches' ports to the waves
    border_down_ports: int = 0  # ... and into the site
    why_border: str = ""  # why the attach tier does not host the waves
    ports_missing: int = 0  # attach-tier ports the DCI needs beyond the idle ones (the top tier grows for them)
    tier_added: int = 0  # switches of the attach tier's model added to it for those ports (:func:`_grown_top`)
    tier_planes: int = 1  # the attach tier's planes (its groups), each growing alike
    notes: list[str] = field(default_factory=list)

    @property
    def power_W(self) -> float:
        """Watts of the border switches and modules :attr:`items` adds (0 where idle ports take the DCI)."""
        return sum(i.count * i.power_W_each for i in self.items)

    @property
    def equipment_usd(self) -> float:
        """Price of the border switches and modules :attr:`items` adds, in US dollars."""
        return sum(i.count * i.price_usd_each for i in self.items)


def site_ports(region, site_plans, cat: DciCatalog) -> list[SitePorts]:
    """Every site's DCI ports (see the module doc).

    Parameters
    ----------
    region : topo.fabric.region.Region
    site_plans : list of topo.plan.planner.PlanResult
        Each site's plan, in the order of sites (their bills give the switches' and modules' prices).
    cat : DciCatalog
        The DCI figures: the coherent module's power, the DCI switch, the cages' power.

    Returns
    -------
    list of SitePorts
    """
    ic = region.spec.interconnect
    sp = region.spans
    out = []
    for k, (f, p) in enumerate(zip(region.fabrics, site_plans)):
        t = f.layout.tiers[int(region.attach_tier[k])]
        mine = (sp["a"] == k) | (sp["b"] == k)
        waves = [(int(w), float(r)) for w, r in zip(sp["waves"][mine], sp["wave_rate_Bps"][mine])]
        need_Bps = region.border_Bps(k, as_built=True)  # the plan buys every wave, a failed span's too
        idle = t.idle_ports
        base = dict(site=region.site_names[k], attach_tier=t.name, dci_Bps=need_Bps, port_rate_Bps=t.down_rate_Bps,
                    ports_idle=idle, waves=sum(w for w, _ in waves))
        why = _cannot_host(f, t, _switch_line(p.bom, t.name), t.down_rate_Bps, waves, cat)
        if ic.attach == "top" and not why:
            out.append(_at_tier(base, p.bom, t, waves, idle))
        else:
            out.append(_border(base, f, p.bom, t, waves, need_Bps, idle, cat, why if ic.attach == "top" else ""))
    return out


def _ppc(line) -> int:
    """Ports a cage of the bill's switch ``line`` holds: its catalog model's ``ports_per_cage``, as the site's own
    bill priced it (the spec's [plan.switches] models included). A line without it (a rack-scale system's NVLink
    trays) holds no pluggable: refused, not taken as 1 (rev51, docs/calibration-findings.md section 156: a model the
    default catalog lacked was silently 1)."""
    if line.ports_per_cage is None:
        raise TopoError(f"the switch {line.model!r} ({line.tier}) has no ports_per_cage in the catalog, so the DCI's "
                        f"pluggables cannot be placed in its cages; allowed: a DCI attached to a tier of catalog "
                        f"switch models (plan.switches.MODEL.ports_per_cage)", key="interconnect.attach_tier")
    return line.ports_per_cage


def _cannot_host(f, t, line, port_rate_Bps: float, waves, cat: DciCatalog) -> str:
    """Why switches of the bill's ``line`` (``t``'s ports) cannot hold the waves' pluggables; '' when they can."""
    model = line.model
    if f.spec.fabric.technology.startswith("infiniband"):
        return (f"its fabric is InfiniBand, {f.spec.fabric.technology}, and a coherent pluggable carries an Ethernet "
                "client")
    cage_Bps = port_rate_Bps * _ppc(line)
    fastest = max(r for _, r in waves)
    if cage_Bps < fastest:
        return f"a {model or t.name} cage carries {cage_Bps * 8 / 1e9:g} Gb/s, below a wave's {fastest * 8 / 1e9:g}"
    budget = cat.cage_power_W.get(model)
    if budget is not None and budget.value < cat.module.power_W.value:
        return (f"a {model} cage powers {budget.value:g} W ({budget.source.split(':')[0]}), below a coherent "
                f"module's {cat.module.power_W.value:g} W")
    return ""


def _switch_line(bom, tier: str):
    return next(s for s in bom.switches if s.tier.startswith(tier))  # a two-stage tier: its lines' first


def _tier_module(bom, tier: str):
    return next((m for m in bom.transceivers if m.at == tier), None)


def _module_items(bom, t, links: int) -> list[DciItem]:
    """The tier's optical module at both ends of ``links`` links (none on a copper tier)."""
    mod = _tier_module(bom, t.name)
    if mod is None or links <= 0:
        return []
    ends_each = max(1, mod.links // max(1, mod.count))
    return [DciItem(f"{mod.type} (border switch to {t.name})", 2 * math.ceil(links / ends_each), mod.power_W_each,
                    mod.price_usd_each)]


def _at_tier(base: dict, bom, t, waves, idle: int) -> SitePorts:
    """The waves' pluggables in the attach tier's own cages; more switches of its model where the idle ports end."""
    sw = _switch_line(bom, t.name)
    needed = sum(w for w, _ in waves) * _ppc(sw)
    missing = max(0, needed - idle)
    items = _grown_top(bom, t, missing, base["site"])
    added = items[0].count if items else 0
    return SitePorts(**base, ports_needed=needed, border_switches=0, items=items, hosted_at=t.name,
                     border_model="", ports_missing=missing, tier_added=added, tier_planes=t.num_groups)


def _grown_top(bom, t, missing: int, site: str) -> list[DciItem]:
    """The switches of the attach tier's own model that give it ``missing`` more ports: ``ceil(missing / k)`` of
    radix ``k``, rounded up to the same number in each of the tier's planes (place64: :meth:`~topo.fabric.layout.
    TierPlan.switches_for_ports`, as the builder lays the tier), priced and powered as the site's bill prices the tier (a larger top tier, the links from below
    spread over more switches, their count unchanged); refused below the top tier, which would need ports above."""
    if missing <= 0:
        return []
    if not t.is_top:
        raise TopoError(f"site {site}: the DCI needs {missing:,} more {t.name} ports than the tier's "
                        f"{t.idle_ports:,} idle, and a tier below the top cannot grow without ports above it; "
                        f"allowed: attach the DCI at the top tier (interconnect.attach_tier) or a site whose "
                        f"{t.name} has idle ports (fewer units)", key="interconnect.attach_tier")
    sw = _switch_line(bom, t.name)
    return [DciItem(f"{t.name} switch added for the DCI ({sw.model})", t.switches_for_ports(missing),
                    sw.power_W_each, sw.price_usd_each)]


def _border(base: dict, f, bom, t, waves, need_Bps: float, idle: int, cat: DciCatalog, why: str) -> SitePorts:
    """Border switches hold the waves' pluggables; their links into the site land on the attach tier."""
    leaf = f.layout.tiers[0]
    leaf_line = _switch_line(bom, leaf.name)
    if not _cannot_host(f, leaf, leaf_line, leaf.down_rate_Bps, waves, cat):  # the spec's own leaf model
        model, k, rate, ppc = leaf_line.model, leaf.radix, leaf.down_rate_Bps, _ppc(leaf_line)
        power, price = leaf_line.power_W_each, leaf_line.price_usd_each
    else:
        s = cat.switch
        model = f"DCI switch, {s.ports.value:g} x {s.port_rate_Gbps.value:g}G"
        k, rate, ppc = int(s.ports.value), s.port_rate_Gbps.value * 1e9 / 8, int(s.ports_per_cage.value)
        power, price = s.power_W.value, s.price_usd.value
    up = sum(w * math.ceil(r / (rate * ppc) - 1e-9) for w, r in waves) * ppc
    down = math.ceil(need_Bps / rate - 1e-9)
    n = math.ceil((up + down) / k)
    links = math.ceil(need_Bps / t.down_rate_Bps - 1e-9)
    missing = max(0, links - idle)
    items = [DciItem(f"DCI border switch ({model})", n, power, price)] + _module_items(bom, t, links)
    grown = _grown_top(bom, t, missing, base["site"])
    items += grown
    fastest = max(r for _, r in waves)
    notes = [f"a wave of {fastest * 8 / 1e9:g} Gb/s is faster than a {model} cage ({rate * ppc * 8 / 1e9:g} Gb/s): "
             f"counted as {math.ceil(fastest / (rate * ppc) - 1e-9)} cages a wave; quote a switch with cages of the "
             f"wave's rate (plan.dci.switch.port_rate_Gbps)"] if fastest > rate * ppc * (1 + 1e-9) else []
    return SitePorts(**base, ports_needed=links, border_switches=n, items=items, hosted_at="border",
                     border_model=model, border_up_ports=up, border_down_ports=down, why_border=why,
                     ports_missing=missing, tier_added=grown[0].count if grown else 0, tier_planes=t.num_groups,
                     notes=notes)


def port_notes(ports: list[SitePorts]) -> list[str]:
    """A note per site that adds switches for its DCI, or whose attach tier lacks the ports the border links need.

    Parameters
    ----------
    ports : list of SitePorts
        :func:`site_ports`' answer.

    Returns
    -------
    list of str
        One note per site that adds switches or misses ports; none where idle ports of the tier take the waves.
    """
    out = []
    for p in ports:
        rate = f"{p.port_rate_Bps * 8 / 1e9:g} Gb/s"
        lines = ", ".join(f"{i.count:,} x {i.item}" for i in p.items[:len(p.items) - (p.tier_added > 0)])
        if p.hosted_at == "border":
            head = (f"site {p.site}: its {p.waves:,} coherent pluggables (one a wave) sit on border switches"
                    + (f", not its {p.attach_tier} ({p.why_border})" if p.why_border else " (attach = border)"))
            text = (f"{head}: the DCI's bill adds {lines}: {p.border_up_ports:,} ports to the waves and "
                    f"{p.border_down_ports:,} into the site, landing on {p.ports_needed:,} {p.attach_tier} ports of "
                    f"{rate}")
            if "InfiniBand" in p.why_border:
                text += " (an InfiniBand site joins an Ethernet DCI through gateways: priced as the DCI switch, " \
                        "an assumption)"
            if p.ports_missing:
                text += f"; {_grown_text(p)}"
            out.append("; ".join([text] + p.notes))
        elif p.tier_added:
            out.append(f"site {p.site}: its {p.waves:,} coherent pluggables take {p.ports_needed:,} {p.attach_tier} "
                       f"ports of {rate} (a cage each); {_grown_text(p)}")
    return out


def _grown_text(p: SitePorts) -> str:
    """What growing the top tier for the DCI's missing ports added (:func:`_grown_top`)."""
    grown = p.items[-1]
    return (f"the {p.attach_tier} has {p.ports_idle:,} idle, {p.ports_missing:,} short: the DCI's bill adds "
            f"{grown.count:,} {p.attach_tier} switch{'es' * (grown.count != 1)} of the site's model "
            f"({grown.item.rsplit('(', 1)[-1].rstrip(')')}, {grown.power_W_each:,.0f} W, "
            f"${grown.price_usd_each:,.0f} each"
            + (f", {grown.count // p.tier_planes:,} in each of its {p.tier_planes:,} planes" if p.tier_planes > 1 else "")
            + f": a larger top tier, the links from below spread over "
            f"{grown.count:,} more switches, their count and optics unchanged)")
