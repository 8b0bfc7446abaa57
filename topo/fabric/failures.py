"""Failed parts: which links of a fabric are down, from names as ``describe`` and ``export`` print them.

A failure is one of (as ``--fail`` takes it, or as strings to :meth:`topo.fabric.Fabric.with_failures`):

==============================  ===================================================================
``spine3``, ``leaf7``, ``core0``  a switch (any tier, by its tier name and index): every link it has
``nic12.3``                     NIC 3 of server 12: its PCIe and leaf links
``nvswitch4``, ``gpu17``        an NVLink switch (every NVLink of its domain) or a GPU (its NVLink and PCIe)
``leaf3-spine0``                every cable between two adjacent nodes; ``leaf3-spine0#1`` only the second one
``rail:2``                      a whole rail: the leaves of rail 2 in every unit (rail fabrics) or NIC 2 of
                                every server (fat trees), with all their links
``plane:1``                     a whole plane: spine 1 of every pod and every switch above that it reaches
``pod:0``                       every uplink of pod 0: the cables from its tier-1 switches to the tier above
                                (fabrics of three tiers or more; the pod keeps its own links)
``random:LEVEL:F[:SEED]``       a fraction F of the links of a level (``leaf-spine``, ``nic-leaf``, ...)
``random:TIER:F[:SEED]``        or of the switches of a tier (``spine``), drawn with SEED (default 0); F x count
                                when not whole fails its floor or ceiling, keeping the mean (see ``_draw_count``)
``random:link:F[:SEED]``        a fraction F of every network cable (each level from the NICs up), drawn together
==============================  ===================================================================

The result is a boolean mask over the fabric's links (True: failed); routing avoids them (:mod:`topo.engine.route`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import TopoError
from ..units import format_count
from .bisection import bisection
from .levels import Level

__all__ = ["check_failure", "failed_gpu_ids", "failed_links", "failed_nodes", "failures_summary", "node_id", "nvswitch_domains", "degraded", "Degraded", "DegradedTier", "DegradedLevel"]

ANY_LINK = "link"  # random:link:F: a fraction of every network cable, each level from the NICs up
_NAME = re.compile(r"^([A-Za-z_][A-Za-z_\-]*?)(\d+)(?:\.(\d+))?$")


def node_id(fabric, name: str) -> int:
    """The node id of a node name (``gpu12``, ``nvswitch1``, ``nic3.5``, ``leaf7``)."""
    L = fabric.layout
    o = fabric.node_offset
    m = _NAME.match(name.strip())
    if not m and "," in name:
        raise TopoError(f"{name!r} names several nodes: give one node a failure and repeat the option for each "
                        f"(e.g. {name.split(',')[0].strip() or 'spine0'}, then the next)", key="fail")
    if not m:
        raise TopoError(f"cannot read the node name {name!r}; write e.g. spine3, leaf7, nic12.3, gpu17", key="fail")
    prefix, a, b = m.group(1), int(m.group(2)), m.group(3)
    if prefix == "nic":
        if b is None:
            raise TopoError(f"name a NIC as nic<server>.<index>, e.g. nic{a}.0; got {name!r}", key="fail")
        if a >= L.num_servers or int(b) >= L.nics_per_server:
            raise TopoError(f"no such NIC {name!r}: servers 0 to {L.num_servers - 1}, NICs 0 to "
                            f"{L.nics_per_server - 1}", key="fail")
        return o["nic"] + a * L.nics_per_server + int(b)
    if b is not None:
        raise TopoError(f"no such node {name!r}", key="fail")
    if prefix == "gpu":
        _check(a, L.num_gpus, name, "GPUs")
        return o["gpu"] + a
    if prefix == "nvswitch":
        _check(a, L.num_domains, name, "NVLink switches")
        return o["nvswitch"] + a
    for t in L.tiers:
        if prefix == t.name:
            _check(a, t.num_switches, name, f"{t.name} switches")
            return fabric.tier_start(t.index) + a
    known = ["gpu", "nvswitch", "nic"] + [t.name for t in L.tiers]
    raise TopoError(f"no such node {name!r}; names start with {', '.join(known)}", key="fail")


def nvswitch_domains(failures, gpus_per_domain: int) -> list[tuple[int, int, str]]:
    """Each failed NVLink switch (``nvswitchN``: the switch of NVLink domain N) in ``failures``, in domain order:
    ``(N, its domain's last GPU, the words naming it and the GPUs it cuts off from each other)``, e.g. "nvswitch1
    failed: its NVLink domain (GPUs 72 to 143)". One rule for ``train``'s refusal of a job in the domain and the
    report's cut (tidy67: it named the two GPUs the router found)."""
    out = []
    for d in sorted({int(f[8:]) for f in failures if re.fullmatch(r"nvswitch\d+", f)}):
        lo, hi = d * gpus_per_domain, (d + 1) * gpus_per_domain - 1
        out.append((d, hi, f"nvswitch{d} failed: its NVLink domain (GPUs {lo:,} to {hi:,})"))
    return out


def _check(i: int, n: int, name: str, what: str) -> None:
    if i >= n:
        raise TopoError(f"no such node {name!r}: {what} are numbered 0 to {n - 1}", key="fail")


def _nodes_links(fabric, nodes: np.ndarray) -> np.ndarray:
    links = fabric.links
    return np.isin(links["src"], nodes) | np.isin(links["dst"], nodes)


def failed_gpu_ids(failures) -> np.ndarray:
    """The ids of the GPUs ``failures`` names (``gpu3``), sorted: each failed, not cut off by other parts."""
    names = [str(f).strip() for f in failures]
    return np.array(sorted({int(f[3:]) for f in names if re.fullmatch(r"gpu\d+", f)}), dtype=np.int64)


def failures_summary(fabric) -> str | None:
    """The failed parts (``--fail``) of ``fabric`` in words, so that an output says what it routed around:
    ``with failures: leaf3 (36 of 11,520 links down; routing avoids them)``; None without failures."""
    if not fabric.failures:
        return None
    down = int(fabric.failed.sum()) if fabric.failed is not None else 0
    total = len(fabric.failed) if fabric.failed is not None else fabric.num_links
    return (f"with failures: {', '.join(fabric.failures)} ({format_count(down)} of {format_count(total)} links down; "
            "routing avoids them)")


def failed_links(fabric, failures) -> np.ndarray:
    """The mask of links (True: failed) that ``failures`` (strings, see the module doc) take down."""
    dead = np.zeros(fabric.num_links, dtype=bool)
    for item in failures:
        text = str(item).strip()
        nodes = _failed_part_nodes(fabric, text)
        if nodes is not None:
            dead |= _nodes_links(fabric, nodes)
        elif text.startswith("random:"):
            dead |= _random_links(fabric, text)
        elif text.startswith("pod:"):
            dead |= _pod_uplinks(fabric, _int(text[4:], text))
        else:
            dead |= _link(fabric, text)
    return dead


def failed_nodes(fabric, failures) -> np.ndarray:
    """The mask of nodes (True: failed) that ``failures`` take down whole: a named switch, NIC, GPU or NVSwitch, a
    rail's or a plane's switches (or NICs), a tier's random switches; a failed cable or a pod's uplinks fail no
    node (tidy75: ``export --fail spine0`` marked the switch's cables but not the switch)."""
    out = np.zeros(fabric.num_nodes, dtype=bool)
    for item in failures:
        nodes = _failed_part_nodes(fabric, str(item).strip())
        if nodes is not None:
            out[nodes] = True
    return out


def _failed_part_nodes(fabric, text: str) -> np.ndarray | None:
    """The node ids of the parts one failure takes down whole (each with every link it has), or None when it
    fails links only (a cable ``leaf3-spine0``, ``pod:N``, ``random:LEVEL:F``): the one reading of a failure that
    :func:`failed_links` and :func:`failed_nodes` share."""
    L = fabric.layout
    if text.startswith("random:"):
        return _random_switches(fabric, text)
    if text.startswith("rail:"):
        k = _int(text[5:], text)
        if not 0 <= k < L.nics_per_server:
            raise TopoError(f"no such rail {k}: rails 0 to {L.nics_per_server - 1}", key="fail")
        if L.leaves_per_unit > 1:
            leaves = np.arange(L.tiers[0].num_switches)
            return fabric.switch_node(0, leaves[leaves % L.leaves_per_unit == k])
        return fabric.node_offset["nic"] + np.arange(L.num_servers) * L.nics_per_server + k
    if text.startswith("plane:"):
        return _plane_switches(fabric, _int(text[6:], text))
    if text.startswith("pod:") or ("-" in text and not _NAME.match(text)):
        return None
    return np.array([node_id(fabric, text)])


def _plane_switches(fabric, j: int) -> np.ndarray:
    """Plane ``j``'s switches: spine ``j`` of every pod and each switch above in that plane alone."""
    L = fabric.layout
    if len(L.tiers) < 2:
        raise TopoError("this fabric has no spine planes (one tier)", key="fail")
    num_planes = L.rail_groups * L.tiers[1].switches_per_group
    if not 0 <= j < num_planes:
        raise TopoError(f"no such plane {j}: planes 0 to {num_planes - 1}", key="fail")
    nodes = []
    for t in L.tiers[1:]:
        if t.logical_per_switch > 1:
            continue  # its switches host several planes; the plane's links to them die with the tier below
        ids = np.arange(t.num_switches)
        nodes.append(fabric.switch_node(t.index, ids[L.switch_plane(t.index, ids) == j]))
    return np.concatenate(nodes)


def _pod_uplinks(fabric, pod: int) -> np.ndarray:
    """The mask of pod ``pod``'s uplinks: every link from one of its tier-1 switches to the tier above (walk27: to
    cut pod 0 of meta-llama3-24k off the user listed ctsw0-atsw0 ... ctsw7-atsw7, found by trial)."""
    L = fabric.layout
    if len(L.tiers) < 3:
        raise TopoError(f"pod:{pod}: this fabric has {len(L.tiers)} tier{'s' if len(L.tiers) > 1 else ''}, so no "
                        "tier joins pods and a pod has no uplinks; allowed: pod:N on a fabric of three tiers or more, "
                        "or its switches (spine3) or cables (leaf3-spine0)", key="fail")
    t = L.tiers[1]
    if not 0 <= pod < t.num_blocks:
        raise TopoError(f"no such {t.block_name} {pod}: pod:N takes {t.block_name}s 0 to {t.num_blocks - 1}",
                        key="fail")
    ids = np.arange(t.num_switches)
    nodes = fabric.switch_node(1, ids[L.switch_block(1, ids) == pod])
    links = fabric.links
    return (links["level"] == Level.out_of_tier(1).code) & np.isin(links["src"], nodes)


def _int(text: str, whole: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TopoError(f"expected a whole number in {whole!r}", key="fail") from None


def _link(fabric, text: str) -> np.ndarray:
    pair, _, cable = text.partition("#")
    a, _, b = pair.partition("-")
    u, v = node_id(fabric, a), node_id(fabric, b)
    links = fabric.links
    sel = np.flatnonzero(((links["src"] == u) & (links["dst"] == v)) | ((links["src"] == v) & (links["dst"] == u)))
    if sel.size == 0:
        raise TopoError(f"{a} and {b} are not linked", key="fail")
    if cable:
        k = _int(cable, text)
        if not 0 <= k < sel.size:
            raise TopoError(f"{a}-{b} has cables #0 to #{sel.size - 1}, got #{k}", key="fail")
        sel = sel[k:k + 1]
    out = np.zeros(fabric.num_links, dtype=bool)
    out[sel] = True
    return out


def _draw_count(rng: np.random.Generator, expected: float) -> int:
    """How many parts a random draw fails: ``expected`` when it is whole, else its floor or its ceiling with the
    probability that keeps the mean at ``expected`` (1% of 16 spines fails one spine in 16% of the draws, never
    none in every draw as rounding would)."""
    whole = int(np.floor(expected))
    part = expected - whole
    return whole + int(part > 1e-12 and rng.random() < part)


def _parse_random(text: str) -> tuple[str, float, int]:
    """``random:WHAT:FRACTION[:SEED]`` read: what (a level or tier name), the fraction, the seed (default 0)."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise TopoError(f"write random:LEVEL_OR_TIER:FRACTION[:SEED], got {text!r}", key="fail")
    try:
        frac = float(parts[2])
    except ValueError:
        frac = -1.0
    if not 0 < frac <= 1:
        raise TopoError(f"the fraction must be in (0, 1], got {parts[2]!r}", key="fail")
    return parts[1], frac, _int(parts[3], text) if len(parts) == 4 else 0


def _unknown_target(what: str, level_names, tier_names) -> TopoError:
    return TopoError(f"unknown level or tier {what!r}; levels: {', '.join(level_names)}; tiers: "
                     f"{', '.join(tier_names)}; or {ANY_LINK} (every network cable)", key="fail")


def check_failure(text: str, fabric_tiers: list[list[str]] | None = None) -> None:
    """Check a failure string as far as it can be without its fabric (a sweep checks its ``fail`` values so before
    any point runs): the form of ``random:``, ``rail:``, ``plane:`` and, for ``random:``, that it names a level or a
    tier of one of the fabrics whose tiers ``fabric_tiers`` lists (None: not checked). Node names and indices need
    the fabric.

    Parameters
    ----------
    text : str
        One failure, as ``--fail`` takes it.
    fabric_tiers : list of list of str, optional
        Each fabric's tier names from the leaves up: a level or tier of any of them passes (each fabric's levels
        named from its own tiers, as :attr:`topo.fabric.fabric.Fabric.level_names`).

    Raises
    ------
    TopoError
        Key ``fail``, the same line the fabric's own check gives.
    """
    text = str(text).strip()
    if text.startswith("random:"):
        what = _parse_random(text)[0]
        if fabric_tiers is None or what == ANY_LINK:
            return
        levels = list(dict.fromkeys(lv.name_in(t) for t in fabric_tiers for lv in Level.all(len(t))))
        tiers = list(dict.fromkeys(n for t in fabric_tiers for n in t))
        if what not in levels + tiers + ["dci"]:
            raise _unknown_target(what, levels, tiers)
    elif text.startswith("rail:"):
        _int(text[5:], text)
    elif text.startswith("plane:"):
        _int(text[6:], text)
    elif text.startswith("pod:"):
        _int(text[4:], text)


def _random_links(fabric, text: str) -> np.ndarray:
    """``random:LEVEL:F[:SEED]`` or ``random:link:F[:SEED]``: the mask of the links drawn."""
    what, frac, seed = _parse_random(text)
    rng = np.random.default_rng(seed)
    links = fabric.links
    names = fabric.level_names
    if what not in names and what != ANY_LINK:
        raise _unknown_target(what, names, [t.name for t in fabric.layout.tiers])
    out = np.zeros(fabric.num_links, dtype=bool)
    ids = np.flatnonzero(links["level"] >= Level.NIC.code if what == ANY_LINK
                         else links["level"] == fabric.levels[names.index(what)].code)
    k = _draw_count(rng, frac * ids.size)
    out[rng.choice(ids, size=k, replace=False)] = True
    return out


def _random_switches(fabric, text: str) -> np.ndarray | None:
    """``random:TIER:F[:SEED]``: the node ids of the switches drawn; None when it names a level (links)."""
    what, frac, seed = _parse_random(text)
    for t in fabric.layout.tiers:
        if what == t.name:
            rng = np.random.default_rng(seed)
            k = _draw_count(rng, frac * t.num_switches)
            return fabric.switch_node(t.index, rng.choice(t.num_switches, size=k, replace=False))
    return None


@dataclass(frozen=True)
class DegradedTier:
    """A scale-out tier with its failed links taken out: capacities, and its oversubscription overall and at the
    switch that lost the most (downlink:uplink capacity; None where nothing goes up)."""

    name: str
    down_capacity_Bps: float
    up_capacity_Bps: float
    oversubscription: float | None
    worst_switch: str | None
    worst_oversubscription: float | None  # inf: a switch with no working uplink


@dataclass(frozen=True)
class DegradedLevel:
    name: str
    num_links: int
    num_failed: int
    capacity_Bps: float  # of the working links, per direction


@dataclass(frozen=True)
class Degraded:
    failures: tuple[str, ...]
    levels: list[DegradedLevel]
    tiers: list[DegradedTier]
    bisection_bandwidth_Bps: float  # max flow between the halves with the failed links out (topo.bisection)
    bisection_bandwidth_per_gpu_Bps: float
    bisection_without_failures_Bps: float  # the same flow with every link working

    def to_dict(self) -> dict:
        return asdict(self)


def degraded(fabric) -> Degraded:
    """Capacities, oversubscription and bisection (:func:`topo.fabric.bisection.bisection`) of ``fabric`` with its failed
    links taken out."""
    links = fabric.links
    alive = fabric.link_alive
    bw = links["bandwidth_Bps"] * alive
    names = fabric.level_names
    lvl = links["level"]
    levels = [DegradedLevel(n, int((lvl == lv.code).sum()), int(((lvl == lv.code) & ~alive).sum()),
                            float(bw[lvl == lv.code].sum())) for lv, n in zip(fabric.levels, names)]
    tiers = []
    for t in fabric.layout.tiers:
        start = fabric.tier_start(t.index)
        below = lvl == Level.into_tier(t.index).code  # links into this tier from below (NIC-leaf for the leaves)
        above = lvl == Level.out_of_tier(t.index).code
        down = np.bincount(links["dst"][below] - start, weights=bw[below], minlength=t.num_switches)
        up = np.bincount(links["src"][above] - start, weights=bw[above], minlength=t.num_switches) \
            if above.any() else None
        if up is None:
            tiers.append(DegradedTier(t.name, float(down.sum()), 0.0, None, None, None))
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(up > 0, down / up, np.where(down > 0, np.inf, 0.0))
        k = int(np.argmax(ratio))
        tiers.append(DegradedTier(t.name, float(down.sum()), float(up.sum()),
                                  float(down.sum() / up.sum()) if up.sum() > 0 else float("inf"),
                                  fabric._name(start + k), float(ratio[k])))
    b = bisection(fabric)
    return Degraded(tuple(fabric.failures), levels, tiers, b.bandwidth_Bps, b.bandwidth_per_gpu_Bps,
                    bisection(fabric, ignore_failures=True).bandwidth_Bps)
