"""Why a tier's switches have idle ports, and what would use them: arithmetic on the resolved layout.

A switch of tier ``t`` uses ``d`` ports down (``n`` switches of the tier below, ``m`` parallel links to each) and
``u`` up (``d / k`` at oversubscription ``k``, or the spec's ``up_ports``); ``radix - d - u`` ports stay empty.
The builder never fills them silently: the spec says the block sizes and the ratio, and the empty ports are their
price. What would fill them is stated, not done:

- a larger block (more blocks of the tier below per block of this tier), whose switches take more down ports and
  the uplinks the ratio gives them; this is how the published oversubscribed designs fill the radix: the 100k-H100
  design's 7:1 spine takes 56 leaves down and 8 up on 64 ports (pods of 7 scalable units,
  topologies/h100-100k.toml), Alibaba HPN's 15:1 aggregation switch 120 down and 8 up on 128 (15 segments per
  pod, Qian et al., SIGCOMM 2024, https://ennanzhai.github.io/pub/sigcomm24-hpn.pdf);
- on an oversubscribed tier, more uplinks (a smaller ratio, at the price of the tier above's switches and cables);
- on the top tier, more blocks below it: room to grow the cluster without a new tier.

With a block size fixed, no split uses fewer switches for the same ratio: a switch count per group is the leaf's
(or lower switch's) uplinks over ``m``, and a larger ``m`` takes ``m`` times the down ports.
"""

from __future__ import annotations

from .layout import ClosLayout, TierPlan
from ..units import count_noun, format_count, with_article

__all__ = ["idle_ports_why"]


def _ratio(down: int, up: int, t: TierPlan) -> str:
    return f"{down * t.down_rate_Bps / (up * t.up_rate_Bps):.3g}:1"


def _below_name(L: ClosLayout, i: int) -> str:
    """The blocks tier ``i`` joins: units for the spines, the tier below's blocks above them."""
    return L.unit_name if i <= 1 else L.tiers[i - 1].block_name


def _joins_key(i: int) -> str:
    return "fabric.units_per_pod" if i == 1 else f"fabric.tiers[{i}].joins"


def _larger_block(L: ClosLayout, t: TierPlan, scales_up: bool) -> str:
    """The largest block whose switches still fit the radix at the tier's ratio, or "" when none is larger."""
    i, per = t.index, t.down_ports + (t.up_ports if scales_up else 0)
    fixed = 0 if scales_up else t.up_ports
    below_name = _below_name(L, i)
    if t.joins == 0 or per == 0:
        return ""
    best = (t.radix - fixed) * t.joins // per
    if best <= t.joins or (best * t.down_ports) % t.joins or (scales_up and (best * t.up_ports) % t.joins):
        return ""
    down, up = best * t.down_ports // t.joins, best * t.up_ports // t.joins if scales_up else t.up_ports
    below_blocks = t.num_blocks * t.joins
    fits = ("" if below_blocks % best == 0 else
            f", but the cluster's {count_noun(below_blocks, below_name)} do not fill whole {t.block_name}s of {best}")
    return (f"{with_article(t.block_name)} of {count_noun(best, below_name)} ({_joins_key(i)} = {best}) would use "
            f"{down + up} of them ({down} down + {up} up, {_ratio(down, up, t)}){fits}")


def idle_ports_why(L: ClosLayout, t: TierPlan, up_ports_given: bool) -> str:
    """Why each switch of tier ``t`` has idle ports and what would use them; "" where none is idle.

    ``up_ports_given``: the spec fixed the tier's uplinks (``up_ports``) rather than a ratio, so a larger block
    keeps them rather than scaling them with its down ports.
    """
    idle = t.radix - t.down_ports - t.up_ports
    if idle <= 0:
        return ""
    head = (f"{t.name}: {idle} of {t.radix} ports idle on each of {count_noun(t.num_switches, 'switch', 'switches')}"
            f" ({format_count(idle * t.num_switches)} in all)")
    if t.index == 0:
        per_server = t.down_ports // L.servers_per_unit
        used = (f"{with_article(L.unit_name)} of {count_noun(L.servers_per_unit, 'server')} x "
                f"{count_noun(per_server, 'NIC port')} takes {t.down_ports} down")
    else:
        pack = t.logical_per_switch
        n_below = t.down_ports // t.links_from_below // pack
        lower = L.tiers[t.index - 1].name
        each = f"each {t.name}" if pack == 1 else f"each {t.name} of a plane"
        used = (f"{with_article(t.block_name)} of {count_noun(t.joins, _below_name(L, t.index))} gives {each} "
                f"{count_noun(n_below, lower + ' switch', lower + ' switches')} x "
                f"{count_noun(t.links_from_below, 'link')}"
                + (f" = {t.down_ports} down ports" if pack == 1 else
                   f", and one {t.name} switch hosts {pack} of them: {pack} x {n_below * t.links_from_below} = "
                   f"{t.down_ports} down ports"))
    if t.is_top:
        return (f"{head}: {used}, and the top tier has no uplinks; they are room for a larger cluster under the "
                f"same {t.name} tier")
    ratio = _ratio(t.down_ports, t.up_ports, t)
    how_up = "up_ports sets" if up_ports_given else f"{ratio} needs"
    fills = []
    if t.index > 0:
        larger = _larger_block(L, t, not up_ports_given)
        if larger:
            fills.append(larger)
    if (t.oversubscription or 1.0) > 1 + 1e-9:
        fills.append(f"{idle} more uplinks would make it {_ratio(t.down_ports, t.up_ports + idle, t)} (more "
                     f"{L.tiers[t.index + 1].name} switches and cables)")
    tail = f"; {'; or '.join(fills)}" if fills else ""
    return f"{head}: {used}, and {how_up} {t.up_ports} up{tail}"
