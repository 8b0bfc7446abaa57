"""Why a tier has more switches than its links need.

The fewest switches that can terminate a tier's links is ceil(links / radix), with every port of every switch in
use. The fabric builder (topo.builders.clos) gives each group of a tier (a pod's spines, a plane's cores) the fewest
switches that every switch below can reach with the *same* number of links, which can be more; the planner keeps
the fabric as built (the cost model routes over it) and says where and why it is above the minimum.
"""

from __future__ import annotations

import math

from ..fabric.fabric import Fabric
from ..units import format_count, format_in, format_usd

__all__ = ["minimum_switches", "switch_count_notes"]


def minimum_switches(fabric: Fabric) -> dict[str, int]:
    """Per tier name: ceil(links the tier terminates / radix), the fewest switches with every port in use."""
    out = {}
    for t in fabric.layout.tiers:
        links = t.num_switches * (t.down_ports + t.up_ports)
        out[t.name] = math.ceil(links / t.radix)
    return out


def _surplus(t, minimum: int, each: dict[str, tuple[float, float]] | None) -> str:
    """What the switches above the minimum cost: their count, power and price (when ``each`` gives them)."""
    extra = t.num_switches - minimum
    if not each or t.name not in each:
        return ""
    W, usd = each[t.name]
    return (f" ({format_count(extra)} above the minimum: {format_in(extra * W, 'kW', ',.0f')} and {format_usd(extra * usd, smallest='M')} at "
            "the catalog's power and price)")


def _leaf_note(t, minimum: int, each) -> str | None:
    """Leaves with a quarter or more of their ports idle: one per unit (and rail) by construction."""
    used = t.down_ports + t.up_ports
    if 4 * used > 3 * t.radix or t.num_switches <= minimum:
        return None
    return (f"{t.name}: {format_count(t.num_switches)} switches, {used} of {t.radix} ports used on each "
            f"({100 * (1 - used / t.radix):.0f}% idle){_surplus(t, minimum, each)}: the builder gives each unit its "
            f"own leaves (one per rail when rail-optimized) and a unit's servers take {t.down_ports} ports down on "
            f"each; {format_count(minimum)} leaves with every port in use would take the same links (a larger "
            "fabric.servers_per_unit fills them)")


def switch_count_notes(fabric: Fabric, each: dict[str, tuple[float, float]] | None = None) -> list[str]:
    """One note per tier whose switch count is above :func:`minimum_switches`, saying why and, when ``each`` gives
    a tier's (power in W, price in $) per switch, what the surplus draws and costs."""
    notes = []
    tiers = fabric.layout.tiers
    mins = minimum_switches(fabric)
    for i, t in enumerate(tiers):
        if i == 0:
            note = _leaf_note(t, mins[t.name], each)
            notes += [note] if note else []
            continue
        if t.num_switches <= mins[t.name]:
            continue
        used = t.down_ports + t.up_ports
        links = t.num_switches * used
        below = tiers[i - 1]
        per_group_links = t.switches_per_group * used
        fewest_per_group = math.ceil(per_group_links / t.radix)
        if t.logical_per_switch > 1:
            why = (f"each switch hosts {t.logical_per_switch} of its {format_count(t.logical_switches)} plane "
                   f"switches ({t.down_ports // t.logical_per_switch} links each), the most whose ports fit that "
                   "divide them evenly, so every switch takes the same number of links")
        elif fewest_per_group < t.switches_per_group:
            why = (f"the builder gives each of its {format_count(t.num_groups)} groups {t.switches_per_group} "
                   f"switches so that every {below.name} switch of the group reaches each of them over the same "
                   f"number of links ({t.links_from_below}); {fewest_per_group} per group would take the group's "
                   f"{format_count(per_group_links)} links but would spread each {below.name} switch's "
                   f"{below.up_ports} uplinks unevenly")
        else:
            why = (f"each of its {format_count(t.num_groups)} groups (a pod's or a plane's) needs "
                   f"{t.switches_per_group} switch{'es' if t.switches_per_group > 1 else ''} of its own, and a "
                   "switch serves one group only")
        notes.append(f"{t.name}: {format_count(t.num_switches)} switches, {used} of {t.radix} ports used on each"
                     f"{_surplus(t, mins[t.name], each)}; "
                     f"{format_count(mins[t.name])} would take its {format_count(links)} links with every port in "
                     f"use: {why}")
    return notes
