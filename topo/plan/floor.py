"""The floor plan: racks, rows, halls and the campus, where each switch sits, and from that the length and the
medium of every scale-out link.

Placement (every distance and limit from the catalog's ``floor`` and ``cooling`` values, each an assumption):

- **racks**: servers fill racks, ``servers_per_rack`` each (checked against ``rack_power_W``); a unit that fits one
  rack fills a rack alone (Meta's Llama 3 racks: 2 servers under one ToR), with its leaf on top when the server
  allows it (``leaf_in_rack``);
- **rows**: ``racks_per_row`` positions (given, or ``hall_width_m / rack_width_m``); a unit takes a block of its
  server racks and its leaf network rack (at the block's end, or in its middle with ``leaf_placement =
  "middle_of_row"``); as many units share a row as fit. With ``"with_spines"`` (``auto`` for a unit of one rack
  that holds no leaf: an NVL72 rack, ``servers.leaf_in_rack = false``) a pod's leaves share network racks beside
  its spines, packed by space and power, as NVIDIA's DGX SuperPOD GB200 RA builds the compute fabric for a whole
  scalable unit of 8 racks, leaf switches included, laid out in one row;
- **pods**: packed by positions: a pod's units and its network racks (spines, in the middle of its units, where
  their cables are shortest) are blocks laid one after another along rows that run back and forth, a block never
  split across two rows; pods follow one another in a hall's rows (no whole rows per pod);
- **halls**: a hall holds whole pods, as many as its power (``hall_power_W``) and its rows (``hall_depth_m x
  rack_area_fraction / row_pitch_m``) allow; it is as deep as its rows need, the rows taking ``rack_area_fraction``
  of its floor (the rest: cross aisles, in-room cooling and power), and as wide as its rows (a single row as long as
  its racks); a pod bigger than a hall gets a hall of its own, enlarged, and a note;
- **campus**: halls stand in a near-square grid, ``hall_gap_m`` apart; the tiers above the pods sit in a network
  room at the campus's centre, so the longest inter-hall link is about half the campus's width plus half its depth
  (a straight line of halls would double it);
- **islands**: when a tier below the top joins pods into islands (``h100-100k-islands``: 24 pods under each
  island's cores, a 4th tier above them), each island has halls of its own (as few as its pods need, the pods spread
  evenly over them) in a near-square block around an island network room that holds that island's tier; the
  island blocks stand in a grid around the central room, which holds only the tiers that join islands. Links
  inside an island stay within its block; only the links up from the island tier go to the central room;
- a link's length is the Manhattan distance between its ends plus ``slack_m`` (inside one rack, and from a
  middle-of-row leaf rack to its two neighbours, cabled through their sides: half the slack, so those links are
  within a DAC's reach: 2 of a unit's 8 racks, 25% of its NIC links, SemiAnalysis' 25-33% copper, planner.md
  line 28);
- **medium** (:func:`link_media`): copper (DAC) up to the DAC's reach, active electrical cable (AEC) up to its reach
  when ``copper = "dac_aec"``, multimode up to the shortest multimode reach, single-mode beyond;
- **cooling**: each hall gets the least of air, rear-door and direct liquid cooling that takes its densest rack and
  that its servers allow (an NVL72 rack needs liquid whatever its load).

Everything is numpy over the fabric's link table: no loop per GPU or per link.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import IntEnum

import numpy as np

from ..errors import TopoError
from ..fabric.fabric import LEVEL_NIC, Fabric
from ..units import format_count, format_in
from .catalog_schema import COOLING, COPPER_REACH_MAX_M, Catalog

__all__ = ["FloorPlan", "Hall", "SwitchRacking", "floor_plan", "link_media", "island_tier", "MEDIA", "Medium",
           "down_level"]

class Medium(IntEnum):
    """A link's medium: the codes :func:`link_media` returns (numpy int8 arrays compare with them)."""

    COPPER = 0  # passive copper (DAC)
    MULTIMODE = 1
    SINGLE_MODE = 2
    ACTIVE_COPPER = 3  # active electrical cable (AEC)


MEDIA = tuple(m.name.lower() for m in Medium)  # the media by code: names in the bill of materials


def down_level(tier_index: int) -> int:
    """The link level whose upper ends are tier ``tier_index``'s switches (NIC-leaf for the first tier)."""
    return LEVEL_NIC + tier_index


@dataclass(frozen=True)
class SwitchRacking:
    """What a tier's switches take in network racks: space and power of one logical switch of the fabric (a
    multi-stage logical switch counts all its physical switches)."""

    rack_units: float
    power_W: float  # with optics: what the network rack must feed
    physical_per_logical: int = 1


@dataclass(frozen=True)
class Hall:
    """One data hall of the campus."""

    index: int
    pods: int
    server_racks: int
    network_racks: int
    rows: int
    it_power_W: float  # servers and the network racks in the hall
    width_m: float
    depth_m: float
    cooling: str
    x_m: float  # the hall's corner on the campus
    y_m: float

    @property
    def area_m2(self) -> float:
        return self.width_m * self.depth_m

    def to_dict(self) -> dict:
        return {**asdict(self), "area_m2": self.area_m2}


@dataclass(frozen=True)
class FloorPlan:
    """Where everything sits, and the length of every scale-out link (``lengths_m``, indexed like the fabric's
    links from the NIC block on: ``fabric.links[...][first_link:]``)."""

    servers_per_rack: int
    server_racks: int
    network_racks: int  # leaf racks + pod network racks + the central room's
    core_room_racks: int  # the central room's (the tiers above the pods, or above the islands)
    racks_per_row: int
    racks_per_row_source: str  # "floor.racks_per_row", "hall_width_m / rack_width_m" or a unit's racks (a row too short for one)
    units_per_row: int
    rows: int
    halls: list[Hall]
    pods_per_hall: int
    pods_per_hall_limit: str  # what sets it: "power", "rows", "floor.pods_per_hall", "one pod is bigger than a hall"
    campus_columns: int
    campus_width_m: float
    campus_depth_m: float
    core_room_area_m2: float
    rack_power_W: float
    server_power_W: float
    leaf_placement: str  # "top_of_rack", "middle_of_row", "end_of_row" or "with_spines" (the pod's network racks)
    rack_load_W: float  # a full rack: its servers and its own switches (NVLink switch trays)
    cooling: str  # the halls' cooling (the same in every hall: every server rack is alike)
    first_link: int
    lengths_m: np.ndarray
    levels: np.ndarray
    media: np.ndarray  # link_media codes
    longest_m: dict[str, float] = field(default_factory=dict)  # per level name (nic-leaf, leaf-spine, ...)
    notes: list[str] = field(default_factory=list)
    islands: int = 1  # blocks of the island tier, each with its own halls and network room (1: no island tier)
    island_tier: str | None = None  # the tier whose switches sit in the islands' rooms
    island_room_racks: int = 0  # network racks in each island's room
    island_room_area_m2: float = 0.0  # each island room's
    unit_racks: int = 1  # one unit's racks in a row: its server racks and its leaf racks (a unit is the layout's)
    units_per_pod: int = 1  # the layout's (a pod is a published scalable unit where the spec says so)
    unit_racks_least: int = 1  # the shortest unit's racks (units sharing rack-scale racks take 1 or 2 of 18 trays)

    @property
    def area_m2(self) -> float:
        """Floor area: every hall, the islands' network rooms and the central network room."""
        return (sum(h.area_m2 for h in self.halls) + self.islands * self.island_room_area_m2
                + self.core_room_area_m2)

    @property
    def num_halls(self) -> int:
        return len(self.halls)

    def to_dict(self) -> dict:
        keys = ("servers_per_rack", "server_racks", "network_racks", "core_room_racks", "racks_per_row",
                "racks_per_row_source", "units_per_row", "rows", "pods_per_hall", "pods_per_hall_limit",
                "campus_columns", "campus_width_m", "campus_depth_m", "core_room_area_m2", "rack_power_W",
                "server_power_W", "leaf_placement", "rack_load_W", "cooling", "islands", "island_tier",
                "island_room_racks", "island_room_area_m2", "unit_racks", "units_per_pod", "unit_racks_least")
        return {**{k: getattr(self, k) for k in keys}, "num_halls": self.num_halls, "area_m2": self.area_m2,
                "longest_m": dict(self.longest_m),
                "halls": [h.to_dict() for h in self.halls], "notes": list(self.notes)}


def link_media(lengths_m: np.ndarray, catalog: Catalog) -> np.ndarray:
    """The medium code of each link (index into :data:`MEDIA`): copper up to the DAC's reach, active copper (AEC)
    up to its reach when ``floor.copper = "dac_aec"``, multimode up to the shortest multimode module's reach,
    single-mode beyond."""
    fl = catalog.floor
    for name in ("DAC", "AEC"):
        cab = catalog.cables.get(name)
        if cab is not None and cab.reach_m.value > COPPER_REACH_MAX_M:
            raise TopoError(f"a {name} copper cable reaching {cab.reach_m.value:g} m; copper at these rates reaches "
                            f"a few metres (at most {COPPER_REACH_MAX_M:g} m allowed: a value in cm or ft?)",
                            key=f"plan.cables.{name}.reach_m")
    mm_reach = min(t.reach_m.value for t in catalog.transceivers.values() if t.medium == "multimode")
    dac = catalog.cables["DAC"].reach_m.value if fl.copper != "none" else -1.0
    out = np.where(lengths_m <= mm_reach, Medium.MULTIMODE, Medium.SINGLE_MODE)
    if fl.copper == "dac_aec":
        if "AEC" not in catalog.cables:
            raise TopoError("floor.copper = 'dac_aec' needs an AEC entry under plan.cables", key="plan.cables")
        out = np.where(lengths_m <= catalog.cables["AEC"].reach_m.value, Medium.ACTIVE_COPPER, out)
    return np.where(lengths_m <= dac, Medium.COPPER, out).astype(np.int8)


def _racks_for(n: float, rack: SwitchRacking, units: float, power_W: float, where: str) -> int:
    if n <= 0:
        return 0
    if rack.power_W > power_W or rack.rack_units > units:
        raise TopoError(f"one {where} switch ({rack.rack_units:g}U, {rack.power_W:,.0f} W with optics) does not fit a "
                        f"network rack of {units:g}U and {power_W:,.0f} W; raise network_rack_units or "
                        f"network_rack_power_W", key="plan.floor.network_rack_power_W")
    per_rack = min(int(units // rack.rack_units), int(power_W // rack.power_W))  # whole switches per rack
    return math.ceil(math.ceil(n * rack.physical_per_logical - 1e-9) / per_rack)


def floor_plan(fabric: Fabric, catalog: Catalog, server_power_W: float, racking: list[SwitchRacking] | None = None,
               servers_per_rack: int | None = None, rack_power_W: float | None = None, rack_extra_W: float = 0.0,
               leaf_in_rack: bool = True, server_cooling: str = "air", rack_scale: bool | None = None) -> FloorPlan:
    """Place racks, rows, halls and the campus for ``fabric`` and measure every scale-out link.

    Parameters
    ----------
    fabric : the built fabric.
    catalog : the planner's catalog (``floor`` and ``cooling`` values).
    server_power_W : one server's power.
    racking : per tier, what one of its switches takes in a network rack (default: the catalog's switch of each
        tier's model, one physical switch per logical one).
    servers_per_rack, rack_power_W : a rack-scale server's own (an NVL72 tray: 18 per 132 kW rack); they replace
        ``floor.servers_per_rack`` and ``floor.rack_power_W``.
    rack_extra_W : the power of the rack's own switches (NVLink switch trays), which its budget must also hold.
    leaf_in_rack : False when the rack has no room for a leaf (an NVL72 rack).
    server_cooling : the least cooling the servers need (``air``, ``rear_door``, ``direct_liquid``).
    rack_scale : units share racks as NVL72 trays do (default: ``servers_per_rack`` given; not an HGX B200's 3).

    Returns
    -------
    FloorPlan

    Raises
    ------
    TopoError
        a rack that cannot hold one server, servers beyond the rack's power, a rack beyond every cooling type, a
        switch that does not fit a network rack.
    """
    fl = catalog.floor
    L = fabric.layout
    if racking is None:
        racking = []
        for t in L.tiers:
            sw = catalog.switch(t.model, key=f"fabric.tiers[{t.index}].model")
            racking.append(SwitchRacking(sw.rack_units.value, sw.power_with_optics_W.value))
    spr, rack_W, placement = _rack_fill(fabric, catalog, server_power_W, servers_per_rack, rack_power_W,
                                        rack_extra_W, leaf_in_rack)
    tor = placement == "top_of_rack"
    rack_load_W = spr * server_power_W + rack_extra_W
    cooling = _cooling(catalog, rack_load_W, server_cooling)
    net = _network_racks(fabric, catalog, racking, tor, placement == "with_spines")
    geo = _Campus(fabric, catalog, spr, net, placement,
                  rack_scale=servers_per_rack is not None if rack_scale is None else rack_scale)
    pod_W = (L.units_per_pod * L.servers_per_unit * server_power_W
             + geo.pod_server_racks * rack_extra_W
             + sum(net.pod_switches[i] * racking[i].physical_per_logical * racking[i].power_W
                   for i in range(L.num_tiers)) + L.units_per_pod * L.leaves_per_unit * racking[0].power_W)
    geo.place_halls(pod_W, rack_load_W)
    lengths, level, start = _link_lengths(fabric, geo, fl.slack_m.value)
    halls = geo.halls(pod_W, cooling)
    fraction, w, pitch = fl.rack_area_fraction.value, geo.w, geo.pitch
    core_area = _room_area(net.core_racks, geo.rpr, w, pitch, fraction)
    island_area = _room_area(net.island_racks, geo.rpr, w, pitch, fraction)
    return FloorPlan(servers_per_rack=spr, server_racks=geo.racks_of_pods(0, L.num_pods),
                     network_racks=(L.num_units * net.leaf_racks + L.num_pods * net.pod_racks
                                    + net.islands * net.island_racks + net.core_racks),
                     core_room_racks=net.core_racks, racks_per_row=geo.rpr, racks_per_row_source=geo.rpr_source,
                     units_per_row=geo.units_per_row, unit_racks=max(geo.unit_racks),
                     unit_racks_least=min(geo.unit_racks),
                     units_per_pod=L.units_per_pod, rows=sum(h.rows for h in halls), halls=halls,
                     pods_per_hall=geo.pph, pods_per_hall_limit=geo.limit, campus_columns=geo.cols,
                     campus_width_m=geo.campus_w, campus_depth_m=geo.campus_d, core_room_area_m2=core_area,
                     rack_power_W=rack_W, server_power_W=server_power_W, leaf_placement=placement,
                     rack_load_W=rack_load_W, cooling=cooling, first_link=start, lengths_m=lengths,
                     levels=level.copy(), media=link_media(lengths, catalog), notes=geo.notes, islands=net.islands,
                     island_tier=L.tiers[net.isl].name if net.isl is not None else None,
                     island_room_racks=net.island_racks, island_room_area_m2=island_area,
                     longest_m={fabric.level_names[int(lv)]: float(lengths[level == lv].max())
                                for lv in np.unique(level)})


def _rack_fill(fabric, catalog, server_power_W, servers_per_rack, rack_power_W, rack_extra_W, leaf_in_rack):
    """Servers per rack, the rack's power and where the leaves sit, checked against the rack's power."""
    fl, L = catalog.floor, fabric.layout
    spr = int(servers_per_rack if servers_per_rack is not None else fl.servers_per_rack.value)
    rack_W = rack_power_W if rack_power_W is not None else fl.rack_power_W.value
    if server_power_W + rack_extra_W > rack_W:
        raise TopoError(f"a rack of {rack_W:,.0f} W cannot hold one server of {server_power_W:,.0f} W"
                        + (f" and its {rack_extra_W:,.0f} W of rack switches" if rack_extra_W else "")
                        + "; raise rack_power_W or lower the server's power", key="plan.floor.rack_power_W")
    if spr * server_power_W + rack_extra_W > rack_W:
        raise TopoError(f"{spr} servers of {server_power_W:,.0f} W"
                        + (f" and {rack_extra_W:,.0f} W of rack switches" if rack_extra_W else "")
                        + f" need {spr * server_power_W + rack_extra_W:,.0f} W, more than rack_power_W = "
                        f"{rack_W:,.0f} W; at most {int((rack_W - rack_extra_W) // server_power_W)} fit",
                        key="plan.floor.servers_per_rack")
    spu = L.servers_per_unit
    fits_one_rack = spu <= spr
    if fits_one_rack and servers_per_rack is None:
        spr = spu  # a unit smaller than a rack fills a rack alone, under its own leaf
    placement = fl.leaf_placement
    if placement == "auto":
        placement = ("top_of_rack" if fits_one_rack and leaf_in_rack else "with_spines" if fits_one_rack
                     else "end_of_row")
    if placement == "top_of_rack" and not (fits_one_rack and leaf_in_rack):
        why = (f"a unit of {spu} servers needs {math.ceil(spu / spr)} racks" if not fits_one_rack
               else "the server's rack has no room for a leaf (servers.leaf_in_rack = false)")
        raise TopoError(f"leaves cannot sit on top of the rack: {why}; allowed here: auto, middle_of_row, end_of_row, "
                        "with_spines",
                        key="plan.floor.leaf_placement")
    return spr, rack_W, placement


@dataclass
class _NetworkRacks:
    """Network racks per place: a unit's leaves, a pod's row, an island's room, the central room."""

    leaf_racks: int  # per unit (0 with the leaves on top of the rack or with the spines)
    pod_racks: int
    island_racks: int
    core_racks: int
    pod_switches: list
    isl: int | None
    islands: int
    pod_leaf_racks: int = 0  # of pod_racks: the pod's leaves, with its spines ("with_spines")


def _network_racks(fabric, catalog, racking, tor: bool, with_spines: bool = False) -> _NetworkRacks:
    fl, L, nodes = catalog.floor, fabric.layout, fabric.nodes
    nu, nw = fl.network_rack_units.value, fl.network_rack_power_W.value
    leaf_racks = 0 if tor or with_spines else _racks_for(L.leaves_per_unit, racking[0], nu, nw, L.tiers[0].name)
    pod_leaf_racks = (_racks_for(L.units_per_pod * L.leaves_per_unit, racking[0], nu, nw, L.tiers[0].name)
                      if with_spines else 0)
    isl = island_tier(fabric)
    n_isl = L.tiers[isl].num_blocks if isl is not None else 1
    pod_switches, island_switches, core_switches = [0] * L.num_tiers, [0] * L.num_tiers, [0] * L.num_tiers
    for t in L.tiers[1:]:
        lo = fabric.node_offset[f"tier:{t.index}"]
        pods = nodes["pod"][lo:lo + t.num_switches]
        local = int(np.count_nonzero(pods >= 0))
        pod_switches[t.index] = local / max(L.num_pods, 1)
        if t.index == isl:
            island_switches[t.index] = (t.num_switches - local) / n_isl
        else:
            core_switches[t.index] = t.num_switches - local

    def racks(counts):
        return sum(_racks_for(counts[i], racking[i], nu, nw, L.tiers[i].name) for i in range(L.num_tiers))

    return _NetworkRacks(leaf_racks, racks(pod_switches) + pod_leaf_racks, racks(island_switches),
                         racks(core_switches), pod_switches, isl, n_isl, pod_leaf_racks)


class _Campus:
    """Where everything sits: blocks of racks along rows (a unit's server racks and leaf rack; a pod's network
    racks in the middle of its units, where its cables are shortest; a block never split across two rows; pods
    follow one another in a hall's rows), halls of whole pods, islands' blocks of halls in a grid around the
    central network room."""

    def __init__(self, fabric, catalog, spr: int, net: _NetworkRacks, placement: str, rack_scale: bool = False):
        fl, L = catalog.floor, fabric.layout
        self.fabric, self.fl, self.L, self.net, self.placement = fabric, fl, L, net, placement
        self.w, self.pitch, self.fraction = fl.rack_width_m.value, fl.row_pitch_m.value, fl.rack_area_fraction.value
        if fl.racks_per_row is not None:
            self.rpr, self.rpr_source = int(fl.racks_per_row.value), "floor.racks_per_row"
        else:
            self.rpr = max(1, int(fl.hall_width_m.value // self.w + 1e-9))
            self.rpr_source = "hall_width_m / rack_width_m"
        self.spu, self.upp, self.spr = L.servers_per_unit, L.units_per_pod, spr
        self.notes: list[str] = []
        self.unit_rack_start, self.shared_racks = _unit_rack_starts(self.spu, self.upp, spr, rack_scale, self.notes)
        sizes = np.diff(self.unit_rack_start)  # each unit position's server racks
        self.pod_server_racks = int(self.unit_rack_start[-1])
        self.unit_racks = [int(n) + net.leaf_racks for n in sizes]
        longest = max(self.unit_racks)
        if longest > self.rpr:  # a unit longer than a row: its own row, lengthened
            self.notes.append(f"a unit's {longest} racks do not fit a row of {self.rpr}: each unit takes a "
                              f"row of its own, {longest} racks long")
            self.rpr, self.rpr_source = longest, "a unit's racks; hall_width_m / rack_width_m holds fewer"
        self.units_per_row = self.rpr // longest
        self.mid = self.upp // 2  # the pod's network racks come after this many of its units
        rpr, pnr = self.rpr, net.pod_racks
        self.net_blocks = [rpr] * (pnr // rpr) + ([pnr % rpr] if pnr % rpr else [])
        self.pod_blocks = self.unit_racks[:self.mid] + self.net_blocks + self.unit_racks[self.mid:]
        self.nb = len(self.pod_blocks)
        self.block_row, self.block_x = _pack(self.pod_blocks * L.num_pods, rpr)
        self.pod_rows = self.block_row[self.nb - 1::self.nb] + 1  # rows used by the first k + 1 pods of a hall
        self.leaf_rack_in_unit = {"end_of_row": np.array(self.unit_racks) - 1, "middle_of_row": sizes // 2,
                                  "top_of_rack": 0 * sizes, "with_spines": 0 * sizes}[placement]  # per position
        if placement == "with_spines":
            self.notes.append(_with_spines_note(self.upp * L.leaves_per_unit, net.pod_leaf_racks,
                                                self.pod_server_racks))

    def racks_of_pods(self, first: int, n: int) -> int:
        """Server racks of pods ``first`` to ``first + n - 1``: a pod's positions where pods do not share racks;
        where units share them (a rack-scale system), the racks whose first server is in those pods,
        ``ceil(last server / spr) - ceil(first server / spr)`` (the cluster's: ``ceil(servers / spr)``)."""
        if not self.shared_racks:
            return n * self.pod_server_racks
        pod = self.upp * self.spu
        return math.ceil((first + n) * pod / self.spr) - math.ceil(first * pod / self.spr)

    def place_halls(self, pod_W: float, rack_load_W: float) -> None:
        """Halls of whole pods, as many as power and rows allow (the rows under racks: a fraction of the hall's
        depth); islands take whole halls of their own, their pods spread evenly over as few halls as they need."""
        fl, L, net = self.fl, self.L, self.net
        by_power = int(fl.hall_power_W.value // pod_W)
        rows_per_hall = int(fl.hall_depth_m.value * self.fraction // self.pitch + 1e-9)
        if rows_per_hall < 1:
            raise TopoError(f"a hall {fl.hall_depth_m.value:g} m deep holds no row of racks (a row takes row_pitch_m "
                            f"= {self.pitch:g} m, rows {self.fraction:g} of the floor: at least "
                            f"{self.pitch / self.fraction:.1f} m; a value in another unit?)",
                            key="plan.floor.hall_depth_m")
        if fl.hall_power_W.value < rack_load_W:
            raise TopoError(f"a hall of {fl.hall_power_W.value:,.0f} W cannot feed one rack of {rack_load_W:,.0f} W "
                            "(W, not MW: 30 MW is 30e6)", key="plan.floor.hall_power_W")
        by_rows = int(np.count_nonzero(self.pod_rows <= rows_per_hall))
        if fl.pods_per_hall is not None:
            pph, limit = int(fl.pods_per_hall.value), "floor.pods_per_hall"
        elif min(by_power, by_rows) >= 1:
            pph, limit = min(by_power, by_rows), "power" if by_power <= by_rows else "rows"
        else:
            pph, limit = 1, "one pod is bigger than a hall"
            self.notes.append(f"one pod ({format_in(pod_W, 'MW', ',.1f')}, {int(self.pod_rows[0])} rows) is bigger than a hall "
                              f"({format_in(fl.hall_power_W.value, 'MW', ',.0f')}, {rows_per_hall} rows): each pod has a hall "
                              "of its own, enlarged to hold it")
        pph = min(pph, L.num_pods)
        isl = net.isl
        self.ppi = min(L.tiers[isl].joins, L.num_pods) if isl is not None else L.num_pods  # pods per island
        halls_per_island = math.ceil(self.ppi / pph)
        if isl is not None:
            pph = math.ceil(self.ppi / halls_per_island)
        self.pph, self.limit = pph, limit
        self.pods_of_island = [min(self.ppi, L.num_pods - i * self.ppi) for i in range(net.islands)]
        self.island_halls = [math.ceil(n / pph) for n in self.pods_of_island]
        self.hall_w, self.hall_d = _hall_size(self.block_row, self.block_x, self.pod_blocks, pph, self.rpr, self.w,
                                              self.pitch, self.fraction)
        gap = self.gap = fl.hall_gap_m.value
        self.hcols = math.ceil(math.sqrt(halls_per_island))  # an island's block of halls (the campus: one island)
        hrows = math.ceil(halls_per_island / self.hcols)
        self.block_w = self.hcols * self.hall_w + (self.hcols - 1) * gap
        self.block_d = hrows * self.hall_d + (hrows - 1) * gap
        self.icols = math.ceil(math.sqrt(net.islands))  # the islands' blocks in a grid
        irows = math.ceil(net.islands / self.icols)
        self.campus_w = self.icols * self.block_w + (self.icols - 1) * gap
        self.campus_d = irows * self.block_d + (irows - 1) * gap
        self.core_xy = (self.campus_w / 2, self.campus_d / 2)  # the central network room
        self.cols = self.hcols * self.icols

    def island_xy(self, island):
        return (island % self.icols) * (self.block_w + self.gap), (island // self.icols) * (self.block_d + self.gap)

    def island_room_xy(self, island):
        ix, iy = self.island_xy(island)
        return ix + self.block_w / 2, iy + self.block_d / 2

    def hall_xy(self, island, local):
        ix, iy = self.island_xy(island)
        return ix + (local % self.hcols) * (self.hall_w + self.gap), iy + (local // self.hcols) * (self.hall_d
                                                                                                   + self.gap)

    def block_xy(self, pod, b):
        """Where block ``b`` of a pod starts: its hall's corner plus the block's position in the hall's rows."""
        island, q = pod // self.ppi, pod % self.ppi
        hx, hy = self.hall_xy(island, q // self.pph)
        k = (q % self.pph) * self.nb + b
        return hx + self.block_x[k] * self.w, hy + self.block_row[k] * self.pitch

    def unit_row_xy(self, unit):
        """The unit's block: x of its first rack and y of its row."""
        pod, u = unit // self.upp, unit % self.upp
        return self.block_xy(pod, u + len(self.net_blocks) * (u >= self.mid))

    def pod_net_xy(self, pod):
        x, y = self.block_xy(pod, self.mid)
        return (x + self.net_blocks[0] * self.w / 2, y) if self.net_blocks else (x, y)

    def leaf_xy(self, unit):
        if self.placement == "with_spines":
            return self.pod_net_xy(unit // self.upp)
        x0, y = self.unit_row_xy(unit)
        return x0 + self.leaf_rack_in_unit[unit % self.upp] * self.w, y

    def rack_in_unit(self, server):
        """A server's rack counted from its unit's first (-1: a rack the unit shares with the unit before it)."""
        if self.shared_racks:
            in_pod = server % (self.upp * self.spu)
            return in_pod // self.spr - self.unit_rack_start[in_pod // self.spu]
        return (server % self.spu) // self.spr

    def switch_xy(self, node_ids, tier):
        """Where the switches ``node_ids`` of ``tier`` sit: a leaf in its unit, an island's tier in its island's
        room, a pod's tier in the pod's network racks, the rest in the central room."""
        nodes, L = self.fabric.nodes, self.L
        if tier == 0:
            return self.leaf_xy(nodes["unit"][node_ids].astype(np.int64))
        if tier == self.net.isl:
            return self.island_room_xy(L.switch_block(tier, node_ids - self.fabric.node_offset[f"tier:{tier}"]))
        pods = nodes["pod"][node_ids].astype(np.int64)
        x, y = self.pod_net_xy(np.maximum(pods, 0))
        return np.where(pods >= 0, x, self.core_xy[0]), np.where(pods >= 0, y, self.core_xy[1])

    def halls(self, pod_W: float, cooling: str) -> list:
        out = []
        for island, n_local in enumerate(self.island_halls):
            for local in range(n_local):
                pods = min(self.pph, self.pods_of_island[island] - local * self.pph)
                hx, hy = self.hall_xy(island, local)
                hw, hd = _hall_size(self.block_row, self.block_x, self.pod_blocks, pods, self.rpr, self.w,
                                    self.pitch, self.fraction)
                first = island * self.ppi + local * self.pph
                out.append(Hall(index=len(out), pods=pods, server_racks=self.racks_of_pods(first, pods),
                                network_racks=pods * (self.upp * self.net.leaf_racks + self.net.pod_racks),
                                rows=int(self.pod_rows[pods - 1]), it_power_W=pods * pod_W, width_m=hw,
                                depth_m=hd, cooling=cooling, x_m=hx, y_m=hy))
        return out


def _unit_rack_starts(spu: int, upp: int, spr: int, rack_scale: bool, notes: list) -> tuple[np.ndarray, bool]:
    """Where each unit position of a pod starts, in server racks from the pod's first (``upp + 1`` values), and
    whether units share racks.

    A unit takes whole racks of its own (the last one part full), except where the rack is a rack-scale system (an
    NVL72 rack: its trays are one NVLink domain, it holds exactly ``spr``): then units share racks, as the trays of
    a domain sit in one rack whichever leaf they reach, and a rack belongs to the unit of its first server. Where a
    pod's servers do not fill whole racks, racks are shared across pods too (:meth:`_Campus.racks_of_pods`): a rack
    stands in the pod of its first tray, and each pod keeps the positions of the most racks a pod takes."""
    if not (rack_scale and spu % spr):
        return np.arange(upp + 1, dtype=np.int64) * math.ceil(spu / spr), False
    pod = upp * spu
    if pod % spr == 0:
        notes.append(f"units of {spu} servers share racks of {spr} (a rack-scale system's rack holds one NVLink "
                     f"domain): a pod's {pod} servers fill {pod // spr} racks, not {upp} units x "
                     f"{math.ceil(spu / spr)}")
    else:
        notes.append(f"units of {spu} servers share racks of {spr} (a rack-scale system's rack holds one NVLink "
                     f"domain), across pods too: a pod's {pod} servers fill {pod / spr:.2f} racks, so a rack holding "
                     f"two pods' trays stands at the end of the first pod's block, cabled to both pods' leaves; "
                     f"every pod keeps {math.ceil(pod / spr)} positions (the most a pod takes: one may stay empty), "
                     f"and the hall's power is planned for that many racks' switch trays a pod")
    return np.array([-(-u * spu // spr) for u in range(upp + 1)], dtype=np.int64), True


def _with_spines_note(leaves: int, leaf_racks: int, server_racks: int) -> str:
    """What sharing a pod's leaf racks saves, and on what the count rests."""
    return (f"leaves beside the spines: a pod's {format_count(leaves)} leaves take {leaf_racks} network "
            f"rack{'s' * (leaf_racks != 1)}, one per {server_racks / max(leaf_racks, 1):,.3g} server racks (by the "
            "network rack's space and power), not one per unit: NVIDIA's DGX SuperPOD GB200 RA builds an NVL72 "
            "scalable unit's compute fabric, leaf switches included, for the whole SU of 8 racks laid out in one row "
            "(its network-fabrics and dgx-superpod-architecture pages); its count of network racks per SU is in a "
            "figure topo could not read, so this count is the planner's packing (floor.network_rack_units, "
            "network_rack_power_W); leaf_placement = \"with_spines\", auto when the server's rack holds no leaf")


def _link_lengths(fabric, geo: _Campus, slack: float):
    """Every scale-out link's length: NIC to leaf within the unit's row (top of rack: in the rack), and each tier
    to the next by the Manhattan distance between where their switches sit, plus the slack."""
    links, nodes, L = fabric.links, fabric.nodes, fabric.layout
    start = fabric.link_offset["nic"]
    src, dst, level = links["src"][start:], links["dst"][start:], links["level"][start:]
    lengths = np.empty(len(src))
    w, placement, leaf = geo.w, geo.placement, geo.leaf_rack_in_unit
    nic = level == down_level(0)
    server = nodes["server"][src[nic]].astype(np.int64)
    rack_in_unit = geo.rack_in_unit(server)
    leaf = leaf[(server // L.servers_per_unit) % L.units_per_pod]
    if placement == "top_of_rack":
        lengths[nic] = slack / 2
    elif placement == "with_spines":  # from the server's rack to the pod's network racks
        x0, y0 = geo.unit_row_xy(server // L.servers_per_unit)
        lx, ly = geo.leaf_xy(server // L.servers_per_unit)
        lengths[nic] = np.abs(x0 + rack_in_unit * w - lx) + np.abs(y0 - ly) + slack
    else:
        pos = rack_in_unit + (rack_in_unit >= leaf) * (placement == "middle_of_row")
        d = np.abs(pos - leaf)
        # a middle-of-row leaf rack is cabled to its two neighbours through their sides: half the slack, as in a rack
        side = (d == 1) & (placement == "middle_of_row")
        lengths[nic] = d * w + np.where(side, slack / 2, slack)
    for t in L.tiers[1:]:
        sel = level == down_level(t.index)
        if not sel.any():
            continue
        ax, ay = geo.switch_xy(src[sel], t.index - 1)
        bx, by = geo.switch_xy(dst[sel], t.index)
        lengths[sel] = np.abs(ax - bx) + np.abs(ay - by) + slack
    return lengths, level, start


def _pack(sizes: list[int], rpr: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and first position of each block of racks laid in order along rows of ``rpr`` positions; a block that
    does not fit what is left of a row starts the next one (one step per block: a unit or a pod's network racks).
    Rows run back and forth (odd rows right to left), so a pod that spills into the next row stays at the same end
    of the hall, near its network racks."""
    rows, xs = np.empty(len(sizes), dtype=np.int64), np.empty(len(sizes), dtype=np.int64)
    r = x = 0
    for i, n in enumerate(sizes):
        if x + n > rpr and x > 0:
            r, x = r + 1, 0
        rows[i], xs[i] = r, (x if r % 2 == 0 else max(rpr - x - n, 0))
        x += n
    return rows, xs


def _hall_size(block_row, block_x, pod_blocks, pods: int, rpr: int, w: float, pitch: float, fraction: float
               ) -> tuple[float, float]:
    """A hall's width and depth: its rows of racks (a single row as long as its racks), their row pitch, and the
    rest of the floor (cross aisles, cooling and power in the room) so that rows take ``fraction`` of it."""
    last = pods * len(pod_blocks) - 1
    rows = int(block_row[last]) + 1
    length = rpr if rows > 1 else int(block_x[last]) + pod_blocks[-1]  # row 0 runs left to right
    return length * w, rows * pitch / fraction


def rack_position_area_m2(w: float, pitch: float, fraction: float) -> float:
    """Floor per rack position, aisles and the rest of the hall included: rack width x row pitch / the share of
    floor under rows (``rack_area_fraction``)."""
    return w * pitch / fraction


def _room_area(racks: int, rpr: int, w: float, pitch: float, fraction: float) -> float:
    """A network room's floor: its racks in rows of up to ``rpr``, at the halls' share of floor under rows."""
    if not racks:
        return 0.0
    return math.ceil(racks / rpr) * min(racks, rpr) * rack_position_area_m2(w, pitch, fraction)


def island_tier(fabric: Fabric) -> int | None:
    """The index of the tier that joins pods into islands (tier 2) when it is not the top tier and has more than
    one block; None otherwise (the tiers above the pods then all sit in the central room)."""
    L = fabric.layout
    if L.num_tiers >= 4 and L.tiers[2].num_blocks > 1:
        return 2
    return None


def _cooling(catalog: Catalog, rack_load_W: float, needs: str) -> str:
    """The least cooling that removes ``rack_load_W`` per rack and is at least what the servers need."""
    for name in COOLING[COOLING.index(needs):]:
        if rack_load_W <= getattr(catalog.cooling, name).max_rack_W.value:
            return name
    top = catalog.cooling.direct_liquid.max_rack_W.value
    raise TopoError(f"a rack of {rack_load_W:,.0f} W is beyond every cooling type (direct liquid up to {top:,.0f} W); "
                    "put fewer servers in a rack or raise cooling.direct_liquid.max_rack_W",
                    key="plan.floor.servers_per_rack")
