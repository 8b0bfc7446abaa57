"""Where to draw a fabric: layers (GPU domains, then each switch tier) of aggregated groups, never one dot per
GPU. A 100k-GPU cluster becomes a few pods of scalable units with one leaf per rail, a spine group per pod, the
core planes above, the groups of every tier above that (islands' 4th tier, a 5th), and "... N more pods" for the
rest.

Only the drawn groups are visited (a few hundred at most, whatever the cluster's size); counts and capacities
come from the fabric's resolved layout, the same numbers ``topo describe`` prints. Hover texts are escaped here,
so tier names from a spec are shown as text. This module computes positions only; it imports no plotting library.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..fabric.fabric import Fabric
from ..units import format_bandwidth, format_count, format_rate
from .style import esc

__all__ = ["Marker", "Bundle", "Gap", "LayerDrawing", "layer_drawing", "pick"]


@dataclass(frozen=True)
class Marker:
    """One drawn group: ``count`` real nodes of layer ``layer`` (0 = GPUs, 1 + i = scale-out tier i)."""

    layer: int
    x: float
    count: int
    hover: str


@dataclass(frozen=True)
class Bundle:
    """The cables between two drawn groups, all of link level ``level`` (index into ``fabric.level_names``)."""

    level: int
    x0: float
    y0: int
    x1: float
    y1: int
    cables: int
    capacity_Bps: float
    hover: str


@dataclass(frozen=True)
class Gap:
    """Groups left out of the drawing: an ellipsis at ``x`` across layers ``y0`` to ``y1``."""

    x: float
    y0: int
    y1: int
    text: str
    hover: str


@dataclass
class LayerDrawing:
    """Everything :func:`topo.report.figures.fabric_figure` draws."""

    layer_names: list[str]
    markers: list[Marker] = field(default_factory=list)
    bundles: list[Bundle] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    pod_labels: list[tuple[float, str]] = field(default_factory=list)  # (x, text) under the GPU layer
    x_range: tuple[float, float] = (0.0, 1.0)


def pick(n: int, k: int) -> list[int | None]:
    """Which of ``n`` groups to draw when about ``k`` fit: all, or the first ``k - 1``, a gap (None), the last.
    A gap always stands for at least two groups (drawing one group takes no more room than its ellipsis).

    >>> pick(3, 4)
    [0, 1, 2]
    >>> pick(4, 3)
    [0, 1, 2, 3]
    >>> pick(56, 3)
    [0, 1, None, 55]
    """
    if n <= k + 1:
        return list(range(n))
    return list(range(k - 1)) + [None, n - 1]


def _ratio(x: float | None) -> str:
    return "top tier" if x is None else f"{x:.3g}:1"


def layer_drawing(fabric: Fabric, max_pods: int = 3, max_units: int = 7, max_planes: int = 32,
                  max_rails: int = 16) -> LayerDrawing:
    """Lay out ``fabric`` as layers of aggregated groups.

    Parameters
    ----------
    fabric : Fabric
    max_pods, max_units, max_planes : int
        At most this many pods, units per pod and groups of each tier above the spines (core planes, ...) are
        drawn; the rest become one gap each. Every tier is drawn, at any depth.
    max_rails : int
        Units with more leaves than this draw their leaves as one group.
    """
    L = fabric.layout
    d = LayerDrawing(layer_names=["GPUs"] + [t.name for t in L.tiers])
    leaf_x, x = _draw_pods(d, fabric, max_pods, max_units, max_rails)
    xmin, xmax = -0.8, max(x - 2.0, 1.0) + 0.8
    d.x_range = (xmin, xmax)
    if len(L.tiers) < 2:
        return d
    group_x = _draw_tier1(d, fabric, leaf_x, max_rails)
    if len(L.tiers) >= 3:
        _draw_upper_tiers(d, fabric, group_x, max_planes)
    return d


def _pod_word(L) -> str:
    return "pod" if L.num_pods > 1 else "cluster"


def _leaves_drawn_per_unit(L, max_rails: int) -> int:
    return L.leaves_per_unit if L.leaves_per_unit <= max_rails else 1


def _draw_pods(d: LayerDrawing, fabric: Fabric, max_pods: int, max_units: int,
               max_rails: int) -> tuple[dict[tuple[int, int], list[float]], float]:
    """The GPUs and leaves of the drawn pods, left to right, a gap for the rest: the x of each (pod, rail group)'s
    drawn leaves, and the x after the last pod."""
    L, tiers = fabric.layout, fabric.layout.tiers
    gpus_per_unit = L.servers_per_unit * L.gpus_per_server
    unit, pod_word = esc(L.unit_name), _pod_word(L)
    x = 0.0
    leaf_x: dict[tuple[int, int], list[float]] = {}  # (pod, rail group) -> x of its drawn leaves
    for p in pick(L.num_pods, max_pods):
        if p is None:
            hidden = L.num_pods - max_pods
            x += 1.5
            d.gaps.append(Gap(x, 0, min(2, len(tiers)), f"… {hidden} more pods",
                              f"{format_count(hidden)} more pods like these, each {L.units_per_pod} {unit}s, "
                              f"{format_count(L.units_per_pod * gpus_per_unit)} GPUs, "
                              f"{format_count(L.leaves_per_pod)} {esc(tiers[0].name)} switches"
                              + (f", {tiers[1].switches_per_group * L.rail_groups} {esc(tiers[1].name)} "
                                 f"switches" if len(tiers) > 2 else "")))
            x += 3.5
            continue
        start = x
        for u_local in pick(L.units_per_pod, max_units):
            if u_local is None:
                hidden = L.units_per_pod - max_units
                x += 0.6
                d.gaps.append(Gap(x, 0, 1, "…", f"{format_count(hidden)} more {unit}s in this {pod_word}"))
                x += 1.6
                continue
            x = _draw_unit(d, fabric, p, p * L.units_per_pod + u_local, x, leaf_x, max_rails)
        d.pod_labels.append(((start + x - 1.8) / 2, f"{pod_word} {p}" if L.num_pods > 1 else ""))
        x += 1.2
    return leaf_x, x


def _draw_unit(d: LayerDrawing, fabric: Fabric, p: int, u: int, x: float,
               leaf_x: dict[tuple[int, int], list[float]], max_rails: int) -> float:
    """Unit ``u`` of pod ``p`` from ``x``: its leaves (each, or one group), its GPUs below them and the cables
    between; records the leaves' x in ``leaf_x`` and returns the x after the unit."""
    L = fabric.layout
    t0, unit, pod_word = L.tiers[0], esc(L.unit_name), _pod_word(L)
    gpus_per_unit = L.servers_per_unit * L.gpus_per_server
    domains_per_unit = max(1, gpus_per_unit // L.gpus_per_domain)
    drawn = _leaves_drawn_per_unit(L, max_rails)
    xs = []
    for r in range(drawn):
        xs.append(x)
        leaf = u * L.leaves_per_unit + r
        leaf_x.setdefault((p, r if L.rail_groups > 1 else 0), []).append(x)
        if drawn == L.leaves_per_unit:
            who = f"{esc(t0.name)} {format_count(leaf)}" + (f" (rail {r})" if L.leaves_per_unit > 1 else "")
            count = 1
        else:
            who = f"{L.leaves_per_unit} {esc(t0.name)} switches, one per rail"
            count = L.leaves_per_unit
        d.markers.append(Marker(1, x, count,
                                f"<b>{who}</b><br>{unit} {format_count(u)}, {pod_word} {p}<br>"
                                f"{t0.down_ports} ports down x {format_rate(t0.down_rate_Bps)}, "
                                f"{t0.up_ports} up x {format_rate(t0.up_rate_Bps)}<br>"
                                f"oversubscription {_ratio(t0.oversubscription)}"))
        x += 1.0
    cx = sum(xs) / len(xs)
    d.markers.append(Marker(0, cx, gpus_per_unit,
                            f"<b>{unit} {format_count(u)}</b> ({pod_word} {p})<br>"
                            f"{L.servers_per_unit} servers x {L.gpus_per_server} GPUs = "
                            f"{format_count(gpus_per_unit)} GPUs<br>"
                            f"{domains_per_unit} NVLink domain{'s' * (domains_per_unit > 1)} of "
                            f"{L.gpus_per_domain} GPUs, {format_bandwidth(fabric.spec.nvlink_Bps)} per GPU<br>"
                            f"{L.servers_per_unit * L.nics_per_server} NICs x {format_rate(L.nic_rate_Bps)}"))
    per_leaf = L.servers_per_unit * L.nic_ports_per_server_per_leaf * (L.leaves_per_unit // drawn)
    for lx in xs:
        d.bundles.append(Bundle(2, cx, 0, lx, 1, per_leaf, per_leaf * L.nic_rate_Bps,
                                f"<b>{esc(fabric.level_names[2])}</b>: {format_count(per_leaf)} cables x "
                                f"{format_rate(L.nic_rate_Bps)} = {format_bandwidth(per_leaf * L.nic_rate_Bps)}"
                                f"<br>{unit} {format_count(u)} to its {esc(t0.name)}"))
    return x + 0.8


def _draw_tier1(d: LayerDrawing, fabric: Fabric, leaf_x: dict[tuple[int, int], list[float]],
                max_rails: int) -> dict[tuple[int, int], float]:
    """Tier 1: one group per pod (per pod and rail in rail-only), above the leaves it joins; the x of each."""
    L = fabric.layout
    t0, t1, pod_word = L.tiers[0], L.tiers[1], _pod_word(L)
    group_x: dict[tuple[int, int], float] = {}
    for (p, g), xs in leaf_x.items():
        gx = sum(xs) / len(xs)
        group_x[(p, g)] = gx
        rail = f", rail {g}" if L.rail_groups > 1 else ""
        up = (f"{t1.up_ports} up x {format_rate(t1.up_rate_Bps)}, oversubscription {_ratio(t1.oversubscription)}"
              if t1.up_ports else "top tier: no uplinks")
        d.markers.append(Marker(2, gx, t1.switches_per_group,
                                f"<b>{t1.switches_per_group} {esc(t1.name)} switches</b> ({pod_word} {p}{rail})<br>"
                                f"each {t1.down_ports} ports down x {format_rate(t1.down_rate_Bps)}, {up}"))
        cables = t0.up_ports * (L.leaves_per_unit // _leaves_drawn_per_unit(L, max_rails))
        for lx in xs:
            d.bundles.append(Bundle(3, lx, 1, gx, 2, cables, cables * t0.up_rate_Bps,
                                    f"<b>{esc(fabric.level_names[3])}</b>: {format_count(cables)} cables x "
                                    f"{format_rate(t0.up_rate_Bps)} = {format_bandwidth(cables * t0.up_rate_Bps)}"
                                    f"<br>{esc(t0.name)} to the {t1.switches_per_group} "
                                    f"{esc(t1.name)} switches of its group"))
    return group_x


def _draw_upper_tiers(d: LayerDrawing, fabric: Fabric, group_x: dict[tuple[int, int], float],
                      max_planes: int) -> None:
    """Tiers 2 and above: the groups the drawn groups below reach, spread over the width (at most ``max_planes``
    per layer, the rest one gap).

    Switch j of a spine group goes to core plane j (per rail in rail-only); a core group's switch k to the group
    (j, k) of the tier above, and so on (topo.fabric.layout.upper_group). When not all fit, the groups are taken in
    turn from each drawn group below (its first, then its second, ...), so that every drawn group below keeps some
    of its cables in the drawing.
    """
    L, tiers, pod_word = fabric.layout, fabric.layout.tiers, _pod_word(fabric.layout)
    xmin, xmax = d.x_range
    drawn_x = {p * L.rail_groups + g: gx for (p, g), gx in group_x.items()}  # tier-1 group id -> x
    for ti in range(2, len(tiers)):
        t, below = tiers[ti], tiers[ti - 1]
        spg = below.switches_per_group
        reach: dict[int, list[tuple[int, int]]] = {}  # group of tier ti -> [(drawn group below, switch index j)]
        for gid in drawn_x:
            for j in range(spg):
                reach.setdefault(int(L.upper_group(ti - 1, gid * spg + j)), []).append((gid, j))
        in_turn = list(dict.fromkeys(int(L.upper_group(ti - 1, gid * spg + j)) for j in range(spg)
                                     for gid in drawn_x))
        hidden = len(in_turn) - max_planes if len(in_turn) > max_planes + 1 else 0
        ids = sorted(in_turn[:max_planes] if hidden else in_turn)
        slots = len(ids) + (2 if hidden else 0)
        step = (xmax - xmin - 1.6) / max(slots - 1, 1)
        here_x: dict[int, float] = {}
        for k, g in enumerate(ids):
            px = xmin + 0.8 + k * step if slots > 1 else (xmin + xmax) / 2
            here_x[g] = px
            d.markers.append(Marker(ti + 1, px, t.switches_per_group, _upper_hover(L, ti, g, pod_word)))
        if hidden:
            d.gaps.append(Gap(xmin + 0.8 + (len(ids) + 0.5) * step, ti + 1, ti + 1, "…",
                              f"{format_count(hidden)} more {esc(t.name)} {'planes' if ti == 2 else 'groups'}"
                              " reached by the groups drawn below"))
        for g, gx in here_x.items():
            for gid, j in reach[g]:
                cables = below.up_ports
                what = (f"{esc(below.name)} {j} of {pod_word} {_pod_of(L, gid)} to plane {g}" if ti == 2 else
                        f"{esc(below.name)} {j} of group {gid} to {esc(t.name)} group {g}")
                d.bundles.append(Bundle(ti + 2, drawn_x[gid], ti, gx, ti + 1, cables, cables * below.up_rate_Bps,
                                        f"<b>{esc(fabric.level_names[ti + 2])}</b>: {cables} cables x "
                                        f"{format_rate(below.up_rate_Bps)} = "
                                        f"{format_bandwidth(cables * below.up_rate_Bps)}<br>{what}"))
        drawn_x = here_x


def _pod_of(L, group: int) -> int:
    """The pod of a tier-1 group id (``pod * rail groups + rail group``)."""
    return group // L.rail_groups


def _upper_hover(L, ti: int, g: int, pod_word: str) -> str:
    """Hover text of group ``g`` of tier ``ti >= 2``."""
    t, t1 = L.tiers[ti], L.tiers[1]
    sw = g * t.switches_per_group
    head = (f"<b>{esc(t.name)} {'plane' if ti == 2 else 'group'} {g}</b>: {t.switches_per_group} switch"
            f"{'es' * (t.switches_per_group > 1)}")
    if not t.is_top and t.block_name:
        head += f" ({esc(t.block_name)} {int(L.switch_block(ti, sw))})"
    up = (f"{t.up_ports} up x {format_rate(t.up_rate_Bps)}, oversubscription {_ratio(t.oversubscription)}"
          if t.up_ports else "top tier: no uplinks")
    pack = t.logical_per_switch  # tier73: one physical switch hosts several of the groups' switches
    text = f"{head}<br>{t.down_ports // pack} ports down x {format_rate(t.down_rate_Bps)} each, {up}"
    if pack > 1:
        text += (f"<br>one physical {esc(t.name)} switch hosts {pack} of these ({t.down_ports} of its {t.radix} "
                 "ports)")
    if ti == 2:
        text += (f"<br>{esc(t1.name)} {int(L.switch_plane(ti, sw)) % t1.switches_per_group} of every "
                 f"{'pod' if L.rail_groups == 1 else 'pod of its rail'}"
                 f"{' in its ' + esc(t.block_name) if not t.is_top and t.block_name else ''} connects here")
    return text
