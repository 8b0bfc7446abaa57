"""Folded-Clos arithmetic shared by the three builders: how many switches each tier needs and how they connect.

The structure (one idea, three attachments):

- Servers are grouped into *units* of ``servers_per_unit`` (a rack under a ToR in a fat tree, a scalable unit in a
  rail-optimized fabric). A unit has ``leaves_per_unit`` leaves: 1 (fat tree: every NIC of a server goes to it) or
  one per rail (rail kinds: NIC r of every server of the unit goes to the unit's leaf of rail r).
- Tier 2 (spine) joins the leaves of a *group*: all leaves of a pod (fat tree, rail-optimized) or only the pod's
  leaves of one rail (rail-only). Every leaf connects to every spine of its group with the same number of parallel
  links ``m``; the number of spines is the smallest divisor ``s`` of the leaf's uplinks for which the spines' ports
  suffice (fewest switches, as NVIDIA's SuperPOD tables do: 4 SUs = 32 leaves x 32 uplinks = 16 spines x 64 ports).
- Tier 3 (core) joins pods: spine j of every pod goes to *plane* j (per rail in rail-only); each plane has the
  smallest number of cores whose ports take all its spines' uplinks.

Port arithmetic: a switch with ``d`` ports down at rate ``r_d`` and ``u`` ports up at rate ``r_u`` has
oversubscription ``d*r_d / (u*r_u)``; non-blocking is 1 (as many up as down at equal rates); a top tier has no
uplinks. An impossible design (ports beyond the radix, counts that do not divide, oversubscription that gives no
whole number of ports) raises :class:`~topo.errors.TopoError` naming the key and what would fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ...errors import TopoError
from ...spec.model import MAX_TIERS, Spec, TierSpec
from ...units import count_noun, format_bandwidth, format_count, with_article
from ..layout import ClosLayout, TierPlan

__all__ = ["Attachment", "TierPlan", "ClosLayout", "plan_clos"]


@dataclass(frozen=True)
class Attachment:
    """What distinguishes the three fabric kinds."""

    kind: str
    leaves_per_unit_is_rails: bool  # True: one leaf per rail in each unit
    per_rail_groups: bool  # True: spines and cores serve one rail only (rail-only)
    default_unit_name: str


# --- helpers ----------------------------------------------------------------------------------------------

def _key(i: int, name: str) -> str:
    return f"fabric.tiers[{i}].{name}"


def _do(n: int) -> str:
    return "does" if n == 1 else "do"


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class _NoUpPortsOption(TopoError):
    """No whole uplink count near the oversubscription would build this split (see ``_up_ports_for``'s ``keeps``)."""


def _up_ports_for(tier: TierSpec, i: int, down: int, down_rate: float, up_rate: float, keeps=None) -> int:
    """Uplinks a switch needs for ``down`` used down ports, from ``up_ports`` or the oversubscription.

    ``keeps(u)``, when given, says whether ``up_ports = u`` would build this same split of ``down`` down ports: the
    error suggests only such counts (and is a :class:`_NoUpPortsOption` when none is), so that following it gives
    the oversubscription it states."""
    if tier.up_ports is not None:
        if tier.oversubscription is not None:
            got = down * down_rate / (tier.up_ports * up_rate) if tier.up_ports else math.inf
            if not math.isclose(got, tier.oversubscription, rel_tol=1e-9):
                raise TopoError(
                    f"{down} down ports and {tier.up_ports} up ports give {got:.4g}:1, not the "
                    f"{tier.oversubscription:g}:1 asked; give only one of up_ports and oversubscription",
                    key=_key(i, "up_ports"))
        return tier.up_ports
    k = tier.oversubscription or 1.0
    exact = down * down_rate / (k * up_rate)
    up = round(exact)
    if up < 1 or not math.isclose(exact, up, rel_tol=1e-9, abs_tol=1e-9):
        lo, hi = max(1, math.floor(exact)), max(1, math.ceil(exact))
        options = [u for u in sorted({lo, hi}) if keeps is None or keeps(u)]
        if not options:
            raise _NoUpPortsOption(f"{tier.name}: {down} down ports at oversubscription {k:g} need {exact:.4g} up "
                                   "ports", key=_key(i, "oversubscription"))
        alts = ", ".join(f"up_ports = {u} gives {down * down_rate / (u * up_rate):.3g}:1" for u in options)
        raise TopoError(
            f"{tier.name}: {down} down ports at oversubscription {k:g} need {exact:.4g} up ports, not a whole "
            f"number; set up_ports instead ({alts})", key=_key(i, "oversubscription"))
    return up


def _check_fits(tier: TierSpec, i: int, down: int, up: int, what: str) -> None:
    if down + up > tier.radix:
        raise TopoError(
            f"{tier.name}: {what} need {format_count(down)} down + {format_count(up)} up = "
            f"{format_count(down + up)} ports, but the radix is {tier.radix}", key=_key(i, "radix"))
    if tier.down_ports is not None and down > tier.down_ports:
        raise TopoError(f"{tier.name}: {what} need {format_count(down)} down ports, but down_ports is "
                        f"{tier.down_ports}", key=_key(i, "down_ports"))


def _max_down(tier: TierSpec, i: int, down_rate: float, up_rate: float, top: bool, step: int) -> int:
    """The most down ports (a multiple of ``step``) a switch of this tier can use, in closed form.

    With ``up_ports`` given: the largest multiple of ``step`` that leaves room for them. With an oversubscription
    ``k``: ``up = down * r`` must be whole, where ``r = down_rate / (k * up_rate)``; writing ``r = p/q`` in lowest
    terms (``q`` at most the radix, else no ``down`` within the radix works), ``down`` is a multiple of
    ``lcm(q, step)`` and ``down * (1 + p/q) <= radix``, so ``down = floor(radix * q / ((p + q) * lcm)) * lcm``.
    """
    if tier.down_ports is not None:
        return tier.down_ports - tier.down_ports % step
    if top:
        return tier.radix - tier.radix % step
    if tier.up_ports is not None:
        room = tier.radix - tier.up_ports
        down = room - room % step
        if down > 0:
            return down
        raise TopoError(f"{tier.name}: {format_count(tier.up_ports)} up ports leave no room for "
                        f"{count_noun(step, 'down port')} in a radix of {tier.radix}", key=_key(i, "up_ports"))
    else:
        k = tier.oversubscription or 1.0
        r = down_rate / (k * up_rate)
        frac = Fraction(r).limit_denominator(tier.radix)
        p, q = frac.numerator, frac.denominator
        if p >= 1 and math.isclose(p / q, r, rel_tol=1e-9):
            lcm = q * step // math.gcd(q, step)
            down = (tier.radix * q // ((p + q) * lcm)) * lcm
            if down > 0:
                return down
    raise TopoError(f"{tier.name}: no split of {tier.radix} ports into down and up ports gives "
                    f"{tier.oversubscription or 1:g}:1", key=_key(i, "radix"))


def _rates(spec: Spec, tiers: list[TierSpec]) -> list[tuple[float, float]]:
    """(down, up) port rates per tier, checked to match across each boundary."""
    out = []
    below_rate, below_key, below_what = spec.server.nic_rate_Bps, "server.nic_rate", "the NIC rate"
    for i, t in enumerate(tiers):
        down, up = t.port_rate_Bps, t.up_port_rate_Bps or t.port_rate_Bps
        if not math.isclose(down, below_rate, rel_tol=1e-9):
            raise TopoError(
                f"{t.name}: ports of {format_bandwidth(down)} cannot take links of {format_bandwidth(below_rate)} "
                f"({below_what}, {below_key}); make the rates equal", key=_key(i, "port_rate"))
        out.append((down, up))
        below_rate, below_key, below_what = up, _key(i, "up_port_rate"), f"{t.name}'s uplink rate"
    return out


# --- the plan ---------------------------------------------------------------------------------------------

# names of the tiers grow_tiers adds, in order (never ending in a digit: switch names are tier name + index); as
# many as MAX_TIERS can need above a leaf whatever the spec's own names are
_GROWN_NAMES = tuple(f"{p}{n}" for p in ("", "super-", "hyper-", "ultra-", "mega-", "giga-", "tera-", "peta-")
                     for n in ("spine", "core"))


class _TopTierFull(TopoError):
    """The top tier cannot connect everything below it (a tier could be grown)."""


def plan_clos(spec: Spec, attach: Attachment) -> ClosLayout:
    """Resolve a spec into counts and ports for every tier, or raise a TopoError that says what would fit.

    With ``fabric.grow_tiers``, a top tier too small for what is below it gets a tier like it added above, as
    often as needed up to :data:`topo.spec.model.MAX_TIERS` tiers (named spine, core, super-spine, super-core,
    hyper-spine, ...); otherwise that is an error. Any number of tiers may be given.
    """
    if spec.fabric.kind != attach.kind:
        raise TopoError(f"the {attach.kind} builder cannot build a spec of kind {spec.fabric.kind!r}; use "
                        f"build_fabric, which picks the builder of the spec's kind", key="fabric.kind")
    tiers = list(spec.fabric.tiers)
    if tiers[0].joins is not None:
        raise TopoError(f"{tiers[0].name} is the leaf tier: it joins servers, not blocks; give "
                        "fabric.servers_per_unit instead", key=_key(0, "joins"))
    top = tiers[-1]
    if top.oversubscription not in (None, 1.0) or top.up_ports:
        raise TopoError(f"{top.name} is the top tier and has no uplinks; oversubscription and up_ports apply to "
                        "the tiers below it", key=_key(len(tiers) - 1,
                                                       "oversubscription" if top.oversubscription else "up_ports"))
    while True:
        try:
            return _plan_once(spec, attach, tiers)
        except _TopTierFull as exc:
            if not spec.fabric.grow_tiers:
                raise
            if len(tiers) >= MAX_TIERS:
                raise TopoError(f"{exc.message.split('; ')[0]}; grow_tiers stops at {MAX_TIERS} tiers, the most a spec "
                                "may have: raise the radix", key=exc.key) from None
            names = {t.name for t in tiers}
            name = next(n for n in _GROWN_NAMES if n not in names)
            old = tiers[-1]
            rate = old.up_port_rate_Bps or old.port_rate_Bps
            tiers.append(old.model_copy(update={"name": name, "oversubscription": None, "up_ports": None,
                                                "down_ports": None, "port_rate_Bps": rate,
                                                "up_port_rate_Bps": None, "joins": None, "block_name": ""}))


def _plan_once(spec: Spec, attach: Attachment, tiers: list[TierSpec]) -> ClosLayout:
    """The layout of ``tiers`` as given; :class:`_TopTierFull` when the top tier cannot join all below it."""
    gps, gpd, nics = spec.gpus_per_server, spec.gpus_per_domain, spec.server.nics
    if gpd % gps != 0:
        raise TopoError(f"an NVLink domain of {count_noun(gpd, 'GPU')} must hold whole servers of {count_noun(gps, 'GPU')}",
                        key="scale_up.gpus_per_domain")
    rails = nics if attach.leaves_per_unit_is_rails else 1
    leaves_per_unit = rails
    ports_per_server = nics // leaves_per_unit  # NIC ports a server puts on each of its unit's leaves
    rail_groups = rails if attach.per_rail_groups else 1
    rates = _rates(spec, tiers)
    _check_block_names(spec, tiers, spec.fabric.unit_name or attach.default_unit_name)
    spu, num_servers = _units(spec, attach, tiers, rates, ports_per_server, leaves_per_unit // rail_groups)
    num_units = num_servers // spu
    plans = [_leaf_plan(spec, attach, tiers, rates[0], spu, ports_per_server, num_units, leaves_per_unit)]
    # tiers 1 and up: each joins blocks of the tier below (units for tier 1) into blocks of its own
    for i in range(1, len(tiers)):
        lower_per_block = leaves_per_unit // rail_groups if i == 1 else 1  # lower switches per block, per group
        plans.append(_upper_plan(spec, attach, tiers, i, rates[i], plans, lower_per_block, rail_groups))
    units_per_pod = plans[1].joins if len(plans) > 1 else num_units
    num_pods = plans[1].num_blocks if len(plans) > 1 else 1

    return ClosLayout(
        kind=attach.kind,
        unit_name=spec.fabric.unit_name or attach.default_unit_name,
        num_gpus=num_servers * gps,
        gpus_per_server=gps,
        gpus_per_domain=gpd,
        num_servers=num_servers,
        nics_per_server=nics,
        nic_rate_Bps=spec.server.nic_rate_Bps,
        servers_per_unit=spu,
        num_units=num_units,
        units_per_pod=units_per_pod,
        num_pods=num_pods,
        leaves_per_unit=leaves_per_unit,
        rail_groups=rail_groups,
        tiers=tuple(plans),
    )


def _units(spec: Spec, attach: Attachment, tiers: list[TierSpec], rates, ports_per_server: int,
           lower_per_block: int) -> tuple[int, int]:
    """Servers per unit and servers in the cluster, checked against the leaf's ports and the NVLink domains (the
    nearest sizes a refusal names fill whole pods too where :func:`_pod_units` knows the pod)."""
    gps, gpd = spec.gpus_per_server, spec.gpus_per_domain
    leaf_rates = rates[0]
    leaf = tiers[0]
    spu_max = _max_down(leaf, 0, *leaf_rates, top=len(tiers) == 1, step=ports_per_server) // ports_per_server
    spu = spec.fabric.servers_per_unit
    if spu is not None and spu > spu_max:
        raise TopoError(f"{leaf.name}: {count_noun(spu, 'server')} x {count_noun(ports_per_server, 'NIC port')} need {spu * ports_per_server} "
                        f"down ports, but a {leaf.name} switch has room for {spu_max * ports_per_server}",
                        key="fabric.servers_per_unit")

    num_servers = _num_servers(spec, gps, spu or spu_max, tiers, attach)
    if spu is None:
        spu = min(spu_max, num_servers)
    unit = attach.default_unit_name  # the word the refusal itself uses
    if num_servers % spu != 0 or (num_servers * gps) % gpd != 0:
        pod = _pod_units(spec, tiers, rates, spu, ports_per_server, lower_per_block, -(-num_servers // spu))
        pod_name = _block_name(spec, 1)
    if num_servers % spu != 0:
        raise TopoError(f"{count_noun(num_servers, 'server')} {_do(num_servers)} not fill whole {attach.default_unit_name}s of "
                        f"{count_noun(spu, 'server')}; use a multiple of {spu} or set fabric.servers_per_unit"
                        + _whole_sizes(spec, num_servers, spu, gps, gpd, unit, pod, pod_name), key=_size_key(spec))
    if (num_servers * gps) % gpd != 0:
        raise TopoError(f"{count_noun(num_servers * gps, 'GPU')} {_do(num_servers * gps)} not fill whole NVLink domains of {count_noun(gpd, 'GPU')}"
                        + _whole_sizes(spec, num_servers, spu, gps, gpd, unit, pod, pod_name), key=_size_key(spec))
    return spu, num_servers


def _whole_sizes(spec: Spec, num_servers: int, spu: int, gps: int, gpd: int, unit: str, pod: int | None = None,
                 pod_name: str = "pod") -> str:
    """The sizes nearest ``num_servers`` that fill whole units, whole NVLink domains and, where ``pod`` (units a
    pod, :func:`_pod_units`) is known, whole pods, in the spec's own count (GPUs or servers; nothing for a count of
    units or pods, whose step the unit error already gives)."""
    c = spec.cluster
    scale, what = (gps, "GPUs") if c.num_gpus is not None else (1, "servers")
    if c.num_gpus is None and c.num_servers is None:
        return ""
    step = math.lcm(spu, gpd // math.gcd(gpd, gps))  # servers: whole units of spu and whole domains of gpd GPUs
    also = [] if step == spu else [f"whole NVLink domains of {gpd} GPUs"]
    if pod:
        step = math.lcm(step, spu * pod)
        also.append(f"whole {pod_name}s of {count_noun(pod, unit)}")
    near = _nearest(num_servers, step, scale, what)
    if not also:
        return f" (nearest: {near})"
    return (f" (whole {unit}s of {count_noun(spu, 'server')} that also fill {' and '.join(also)} come "
            f"in steps of {format_count(step * scale)} {what}; nearest: {near})")


def _nearest(count: int, step: int, scale: int, what: str) -> str:
    """The multiples of ``step`` either side of ``count`` (the lower one only when above 0), each x ``scale``, as
    ``LO or HI WHAT``: the one rule of every "nearest" a size refusal names."""
    lo, hi = count // step * step, (count // step + 1) * step
    return " or ".join(format_count(n * scale) for n in (lo, hi) if n > 0) + f" {what}"


def _leaf_plan(spec: Spec, attach: Attachment, tiers: list[TierSpec], leaf_rates, spu: int, ports_per_server: int,
               num_units: int, leaves_per_unit: int) -> TierPlan:
    """The leaf tier: ``spu`` servers' NIC ports down and the uplinks its oversubscription gives."""
    leaf = tiers[0]
    leaf_top = len(tiers) == 1
    d0 = spu * ports_per_server
    u0 = 0 if leaf_top else _up_ports_for(leaf, 0, d0, *leaf_rates)
    _check_fits(leaf, 0, d0, u0, f"{count_noun(spu, 'server')} x {count_noun(ports_per_server, 'NIC port')} and the uplinks")
    if leaf_top and num_units > 1:
        raise _TopTierFull(f"one tier holds a single {attach.default_unit_name} of {count_noun(spu, 'server')}, but the cluster "
                           f"has {format_count(num_units)}; add a spine tier or set fabric.grow_tiers = true",
                           key="fabric.tiers")
    n_leaves = num_units * leaves_per_unit
    return _plan(leaf, 0, leaf_rates, d0, u0, n_leaves, n_leaves, 1, 1, 1, num_units,
                 spec.fabric.unit_name or attach.default_unit_name)


def _upper_plan(spec: Spec, attach: Attachment, tiers: list[TierSpec], i: int, rates, plans: list[TierPlan],
                lower_per_block: int, rail_groups: int) -> TierPlan:
    """Tier ``i`` >= 1, joining the blocks of the tier below (``plans[-1]``; units for tier 1) into blocks of its
    own, each switch spreading the uplinks of the ``lower_per_block`` lower switches per block of each group."""
    tier, top = tiers[i], i == len(tiers) - 1
    below = plans[-1]
    num_blocks, below_up = below.num_blocks, below.up_ports
    below_name = attach.default_unit_name if i == 1 else below.block_name
    name = _block_name(spec, i)
    joins = _tier_joins(spec, tier, i, rates, top, num_blocks, below_up, lower_per_block, below_name, name)
    n_below = joins * lower_per_block  # lower switches in one group of this tier
    lower_word = below.name + " switch"
    what = (f"{count_noun(n_below, lower_word, below.name + ' switches')} x "
            f"{count_noun(below_up, 'uplink')}" + ("" if i == 1 else " per plane"))
    s_, m, d, u = _spread(tier, i, rates, n_below, below_up, top, what, name if i == 1 else "plane", below_name)
    blocks = num_blocks // joins
    groups = blocks * rail_groups * (1 if i == 1 else _planes(plans[1:]))
    pack = _pack(tier, d, groups * s_ // rail_groups) if top else 1
    return _plan(tier, i, rates, d * pack, u, groups * s_ // pack, groups, s_, m, joins, blocks, name, pack)


def _pack(tier: TierSpec, down: int, per_rail_group: int) -> int:
    """How many switches of the top tier's groups one physical switch hosts: the most ``p`` whose ``p * down``
    ports fit the switch (its radix, or ``down_ports``) and that divides the ``per_rail_group`` switches of one
    rail group, so every physical switch takes the same number of links and none joins two rail groups.

    A plane's group holds the fewest switches that every lower switch reaches with the same number of links; when
    few lower switches share a plane (6 cores of a 4-tier GB200 fabric of 912 racks, 19 uplinks each) that leaves
    each switch a few ports, and one physical switch takes several of them (consecutive ones: the rest of one plane
    and the start of the next), as a designer cables a partly populated top tier."""
    room = min(tier.radix, tier.down_ports or tier.radix) // down
    return max(p for p in range(1, max(1, room) + 1) if per_rail_group % p == 0)


def _tier_joins(spec: Spec, tier: TierSpec, i: int, rates, top: bool, num_blocks: int, below_up: int,
                lower_per_block: int, below_name: str, name: str) -> int:
    """How many blocks of the tier below one block of tier ``i`` joins (all of them at the top), checked to divide
    ``num_blocks``."""
    if top and tier.joins is not None and tier.joins > num_blocks:
        raise TopoError(f"{tier.name}: {with_article(name)} of {count_noun(tier.joins, below_name)} needs more "
                        f"than the {format_count(num_blocks)} the cluster has", key=_key(i, "joins"))
    if top and tier.joins is not None and tier.joins < num_blocks:
        # the top tier joins everything below it (the spec's joins was ignored): a smaller block needs a tier
        # above it, which grow_tiers adds
        raise _TopTierFull(f"{tier.name} is the top tier: it joins all {count_noun(num_blocks, below_name)}, "
                           f"not {tier.joins}; remove {_key(i, 'joins')}, add a tier above it or set "
                           "fabric.grow_tiers = true", key=_key(i, "joins"))
    joins = num_blocks if top else _joins(spec, tier, i, rates, below_up, lower_per_block, num_blocks,
                                           below_name, name)
    if num_blocks % joins != 0:
        word = "units" if i == 1 else f"{below_name}s"
        raise TopoError(f"{count_noun(num_blocks, below_name)} {_do(num_blocks)} not fill whole {name}s of "
                        f"{joins}; use a multiple of {joins} {word} or set {_joins_key(spec, i)}"
                        + _whole_blocks(spec, num_blocks, joins), key=_size_key(spec))
    return joins


def _whole_blocks(spec: Spec, num_blocks: int, joins: int) -> str:
    """The sizes nearest the spec's GPU or server count that fill whole blocks of ``joins`` lower blocks (walk42: a
    100,000-GPU GB300 spec was told 100,008 GPUs fill whole racks, and at 100,008 that 1,389 racks do not fill
    whole pods, with no size in its own count); nothing for a count of units or pods, whose step the error gives."""
    c = spec.cluster
    count, what = (c.num_gpus, "GPUs") if c.num_gpus is not None else (c.num_servers, "servers")
    if count is None:
        return ""
    step = count // num_blocks * joins  # the lower blocks are whole: the count divides by them
    return f" (nearest: {_nearest(count, step, 1, what)})"


def _planes(plans: list[TierPlan]) -> int:
    """Plane coordinates so far: the product of the group sizes of the tiers above the leaves."""
    out = 1
    for p in plans:
        out *= p.switches_per_group
    return out


DEFAULT_BLOCK_NAMES = ("unit", "pod", "island", "zone", "region")  # not "hall" or "campus": the planner's floor
# plan names its buildings so


def _block_name(spec: Spec, i: int) -> str:
    given = spec.fabric.tiers[i].block_name if i < len(spec.fabric.tiers) else ""
    return given or (DEFAULT_BLOCK_NAMES[i] if i < len(DEFAULT_BLOCK_NAMES) else f"tier-{i} block")


def _check_block_names(spec: Spec, tiers: list[TierSpec], unit_name: str) -> None:
    """Every level of blocks has its own name ("pod = 24 pods" read as nonsense); blame the name the user gave."""
    seen = {unit_name: "fabric.unit_name" if spec.fabric.unit_name else "the units' default name"}
    for i in range(1, len(tiers)):
        name = _block_name(spec, i)
        given = i < len(spec.fabric.tiers) and bool(spec.fabric.tiers[i].block_name)
        if name in seen:
            key = _key(i, "block_name") if given else seen[name]
            raise TopoError(f"{name!r} names the blocks of two tiers ({seen[name]} and the blocks of "
                            f"{tiers[i].name}); give each level its own name", key=key)
        seen[name] = _key(i, "block_name") if given else f"{tiers[i].name}'s default block name"


def _joins_key(spec: Spec, i: int) -> str:
    return "fabric.units_per_pod" if i == 1 and spec.fabric.tiers[1].joins is None else _key(i, "joins")


def _plan(t: TierSpec, i, rates, down, up, n, groups, per_group, m, joins=1, blocks=1, block_name="",
          pack=1) -> TierPlan:
    return TierPlan(index=i, name=t.name, model=t.model, radix=t.radix, down_rate_Bps=rates[0],
                    up_rate_Bps=rates[1], down_ports=down, up_ports=up, num_switches=n, num_groups=groups,
                    switches_per_group=per_group, links_from_below=m, latency_s=t.latency_s, sharp=t.sharp,
                    power_W=t.power_W, joins=joins, num_blocks=blocks, block_name=block_name,
                    logical_per_switch=pack)


def _spread(t: TierSpec, i: int, rates, n_below: int, up_below: int, top: bool, what: str, group: str,
            below_name: str = "unit"):
    """Switches per group so that each of ``n_below`` lower switches spreads its ``up_below`` uplinks evenly.

    Returns (switches per group, parallel links per pair, down ports used, up ports per switch)."""
    port_error: TopoError | None = None
    splits = [(s, up_below // s, n_below * (up_below // s)) for s in _divisors(up_below)]
    splits = [x for x in splits if x[2] <= min(t.radix, t.down_ports or t.radix)]
    for s, m, down in splits:
        def keeps(u: int, down: int = down) -> bool:
            # with up_ports = u the loop below takes the first split whose ports fit: this one?
            return next((d for _, _, d in splits if d + u <= t.radix), None) == down
        try:
            up = 0 if top else _up_ports_for(t, i, down, *rates, keeps=keeps)
        except _NoUpPortsOption:
            continue
        except TopoError as exc:
            port_error = port_error or exc
            continue
        if down + up <= t.radix:
            return s, m, down, up
    if port_error is not None:
        raise port_error
    error = _TopTierFull if top else TopoError  # grow_tiers adds a tier above a top tier that cannot hold it all
    k = t.oversubscription or 1.0
    up_min = 0 if top else (t.up_ports if t.up_ports is not None else math.ceil(n_below * rates[0] / (k * rates[1])))
    need = f"{format_count(n_below)} down" + ("" if top else f" + {format_count(up_min)} up")
    if group == "plane" and top:
        hint = (f"use fewer, larger {below_name}s, a larger radix, a tier of {below_name} groups below "
                f"{t.name} (fabric.tiers[{i}].joins) or set fabric.grow_tiers = true")
    elif group == "plane":
        hint = f"put fewer {below_name}s in each block of {t.name} (fabric.tiers[{i}].joins) or raise the radix"
    elif top:
        hint = "raise the radix, add a tier or set fabric.grow_tiers = true"
    else:
        hint = "put fewer units in a pod (fabric.units_per_pod) or raise the radix"
    raise error(f"{t.name}: {what} need {need} ports on each {t.name} switch even with one link to each, but the "
                f"radix is {t.radix}; {hint}", key=_key(i, "radix"))


def _joins(spec: Spec, tier: TierSpec, i: int, rates, below_up: int, lower_per_block: int, num_blocks: int,
           below_name: str, name: str) -> int:
    """Blocks of the tier below in one block of tier ``i`` (units per pod for tier 1): the spec's, or as many as
    the tier's switches hold."""
    given = tier.joins if tier.joins is not None else (spec.fabric.units_per_pod if i == 1 else None)
    if i == 1 and tier.joins is not None and spec.fabric.units_per_pod not in (None, tier.joins):
        raise TopoError(f"fabric.units_per_pod = {spec.fabric.units_per_pod} and fabric.tiers[1].joins = "
                        f"{tier.joins} say two pod sizes; give one", key=_key(1, "joins"))
    if given is not None:
        if given > num_blocks:
            raise TopoError(f"{tier.name}: {with_article(name)} of {count_noun(given, below_name)} needs more "
                            f"than the {format_count(num_blocks)} the cluster has", key=_joins_key(spec, i))
        return given
    best = _most_joined(tier, i, rates, below_up, lower_per_block)
    if best == 0:
        raise TopoError(f"{tier.name}: not even one {below_name} fits under {tier.radix}-port switches",
                        key=_key(i, "radix"))
    best = min(best, num_blocks)
    if i >= len(spec.fabric.tiers) and num_blocks > 1:
        # a tier grow_tiers added has no joins a user could set: take the most blocks that fit and divide the
        # blocks below evenly (at least 2, or the tier would join nothing)
        fits = next(b for b in range(best, 0, -1) if num_blocks % b == 0)
        if fits < 2:
            raise TopoError(f"{count_noun(num_blocks, below_name)} {_do(num_blocks)} not fill whole {name}s of 2 to "
                            f"{best}, the most that fit under {tier.name} (a tier fabric.grow_tiers added, whose "
                            f"joins cannot be set); change the cluster's size or raise the radix",
                            key=_size_key(spec))
        best = fits
    return best


def _most_joined(tier: TierSpec, i: int, rates, below_up: int, lower_per_block: int) -> int:
    """The most blocks of the tier below whose ``below_up`` uplinks (``lower_per_block`` lower switches a block, per
    group) one group of tier ``i``'s switches holds; 0 when not even one fits."""
    best = 0
    for b in range(1, tier.radix + 1):
        if b * lower_per_block > tier.radix:
            break
        try:
            _spread(tier, i, rates, b * lower_per_block, below_up, False, "", "pod" if i == 1 else "plane")
        except TopoError:
            continue
        best = b
    return best


def _pod_units(spec: Spec, tiers: list[TierSpec], rates, spu: int, ports_per_server: int, lower_per_block: int,
               num_units: int) -> int | None:
    """Units a pod joins where ``num_units`` must fill whole pods, known before the build (None where it need not
    or cannot be known): a tier sits above tier 1 (the spec's third, or the one ``fabric.grow_tiers`` adds above a
    spine too small for ``num_units``), and the pod is tier 1's ``joins`` / ``fabric.units_per_pod`` or else the
    most units the spine's switches hold (:func:`_joins`' rule, from the leaf's uplinks at ``spu`` servers a unit).
    The tiers above the pods are not looked at."""
    if len(tiers) < 2:
        return None
    given = tiers[1].joins if tiers[1].joins is not None else spec.fabric.units_per_pod
    if len(tiers) == 2 and not spec.fabric.grow_tiers:
        return None  # the spine is the top tier: it joins every unit (or the build refuses the size)
    if given is not None:
        return given if len(tiers) > 2 or given < num_units else None
    try:
        up = _up_ports_for(tiers[0], 0, spu * ports_per_server, *rates[0])
    except TopoError:
        return None
    most = _most_joined(tiers[1], 1, rates[1], up, lower_per_block)
    return most if 0 < most < num_units else None


def _num_servers(spec: Spec, gps: int, spu: int, tiers, attach: Attachment) -> int:
    c = spec.cluster
    if c.num_gpus is not None:
        if c.num_gpus % gps:
            raise TopoError(f"{count_noun(c.num_gpus, 'GPU')} {_do(c.num_gpus)} not fill whole servers of {count_noun(gps, 'GPU')}"
                            + _whole_sizes(spec, c.num_gpus // gps, spec.fabric.servers_per_unit or 1, gps,
                                           spec.gpus_per_domain, attach.default_unit_name),  # walk28 Left 5
                            key="cluster.num_gpus")
        return c.num_gpus // gps
    if c.num_servers is not None:
        return c.num_servers
    if c.num_units is not None:
        return c.num_units * spu
    # num_pods: the pod size must come from the fabric
    if len(tiers) < 3 and c.num_pods != 1:
        raise TopoError(f"a fabric of {count_noun(len(tiers), 'tier')} is one pod; num_pods = {c.num_pods} needs 3 tiers",
                        key="cluster.num_pods")
    upp = spec.fabric.units_per_pod or spec.fabric.tiers[1].joins
    if upp is None:
        if len(tiers) < 3:
            raise TopoError("with num_pods and fewer than 3 tiers, size the cluster with num_units instead",
                            key="cluster.num_pods")
        raise TopoError("with num_pods, set fabric.units_per_pod (the pod size) too", key="cluster.num_pods")
    return c.num_pods * upp * spu


def _size_key(spec: Spec) -> str:
    c = spec.cluster
    for k in ("num_gpus", "num_servers", "num_units", "num_pods"):
        if getattr(c, k) is not None:
            return f"cluster.{k}"
    return "cluster"
