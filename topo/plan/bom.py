"""The bill of materials: switches by model, transceivers by type, cables by type and length class.

Counts come from the fabric's link table and the floor plan (:mod:`topo.plan.floor`):

- every scale-out link (NIC-leaf, leaf-spine, spine-core, any tier to the next) is one cable: copper (DAC, or an
  active electrical cable with ``floor.copper = "dac_aec"``) when short enough, else a fibre with a transceiver at
  each end;
- with ``layout.short_reach = "aoc"``, links within multimode reach are active optical cables instead (optics
  in the cable, its power counted with the optics);
- at a NIC, modules of the server's ``nic_module_ports`` (1; 2 for DGX H100's twin-port OSFP cages, each shared by
  two NICs of the server on the same kind of link); at a switch, modules of the switch's ``ports_per_cage``
  (2 for the twin-port 2 x 400G OSFP cages of Quantum-2 and SN5600): per switch and module type,
  ceil(links / ports per module), so a twin-port module counts once per two links;
- the module is the one of the link's rate and medium with the shortest reach that covers the link's length.

A tier may be *logical* (``[plan.tiers.<name>] stages = 2``): each of its switches is a non-blocking two-stage
Clos of physical switches (``switch``, default the tier's model) with k ports: ceil(E / (k/2)) lower switches for E
external ports, half as many upper switches (rounded up), and k/2 internal links per lower switch: a chassis
built of smaller switches. The cost model sees one non-blocking switch (exact for capacity, one switch hop short in
latency), the bill of materials counts every physical switch, link and module. A 4th or 5th tier of separate
switches is a tier of the spec (``h100-100k-4tier``, ``h100-100k-islands``), not a logical one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import TopoError
from ..fabric.fabric import Fabric
from ..units import in_unit
from .catalog import Catalog
from .floor import MEDIA, FloorPlan, Medium, down_level, link_media

__all__ = ["BillOfMaterials", "SwitchLine", "TransceiverLine", "CableLine", "bill_of_materials", "LENGTH_CLASSES_M",
           "logical_tiers", "reprice", "RACK_TIER"]

LENGTH_CLASSES_M = (3, 10, 30, 50, 100, 500, 2000)
RACK_TIER = "scale-up (in rack)"  # the line of a rack-scale system's own switches (NVL72's NVLink switch trays)


@dataclass(frozen=True)
class SwitchLine:
    tier: str
    model: str
    count: int
    logical_count: int  # switches as the fabric sees them (= count unless the tier is multi-stage)
    power_W_each: float
    price_usd_each: float
    ports_per_cage: int | None = None  # the catalog model's (what a cage of it holds); None: no pluggable cages
    # (a rack-scale system's NVLink switch trays)


@dataclass(frozen=True)
class TransceiverLine:
    type: str
    at: str  # "nic" or a tier name
    count: int
    links: int  # optical link ends it serves
    power_W_each: float
    price_usd_each: float
    mttf_years: float
    on_gpu_links: int = 0  # modules of this line on a GPU's link (NIC side, or the first tier's down ports): a
    # failure of one takes a GPU's rail out and stops the job, at either end of the link


@dataclass(frozen=True)
class CableLine:
    type: str
    level: str
    length_class: str
    count: int
    length_m: float  # total
    price_usd: float  # total
    power_W: float = 0.0  # total (active cables: AOC)


@dataclass(frozen=True)
class BillOfMaterials:
    switches: list[SwitchLine]
    transceivers: list[TransceiverLine]
    cables: list[CableLine]
    links_by_level: dict[str, dict[str, int]]  # level -> medium -> links (fabric links + internal links)

    @property
    def num_switches(self) -> int:
        return sum(s.count for s in self.switches)

    @property
    def num_transceivers(self) -> int:
        return sum(t.count for t in self.transceivers)

    @property
    def num_cables(self) -> int:
        return sum(c.count for c in self.cables)

    def to_dict(self) -> dict:
        return {"switches": [asdict(s) for s in self.switches],
                "transceivers": [asdict(t) for t in self.transceivers],
                "cables": [asdict(c) for c in self.cables], "links_by_level": self.links_by_level,
                "num_switches": self.num_switches, "num_transceivers": self.num_transceivers,
                "num_cables": self.num_cables}

    def to_frame(self):
        """One row per line: kind (switch, transceiver, cable), item, where, count."""
        import pandas as pd

        rows = [{"kind": "switch", "item": s.model, "where": s.tier, "count": s.count} for s in self.switches]
        rows += [{"kind": "transceiver", "item": t.type, "where": t.at, "count": t.count} for t in self.transceivers]
        rows += [{"kind": "cable", "item": f"{c.type} {c.length_class}", "where": c.level, "count": c.count}
                 for c in self.cables]
        return pd.DataFrame(rows)


def reprice(bom: BillOfMaterials, catalog: Catalog, rack_switch_price_usd: float | None = None) -> BillOfMaterials:
    """The same bill of materials at ``catalog``'s prices (e.g. :meth:`Catalog.at` ``("low")``): each switch and
    transceiver line at its model's price, each cable line at count x price + length x price per metre.

    Parameters
    ----------
    bom : BillOfMaterials
        The counts and lengths (unchanged).
    catalog : Catalog
        Where the prices come from.
    rack_switch_price_usd : float, optional
        The price of a rack-scale system's own switches (the server's ``rack_switches``), whose lines are not in
        ``catalog.switches``.

    Returns
    -------
    BillOfMaterials
    """
    switches = [replace(s, price_usd_each=(rack_switch_price_usd if s.tier == RACK_TIER
                                           else catalog.switch(s.model).price_usd.value)) for s in bom.switches]
    transceivers = [replace(t, price_usd_each=catalog.transceivers[t.type].price_usd.value) for t in bom.transceivers]
    cables = [replace(c, price_usd=c.count * catalog.cables[c.type].price_usd.value
                      + c.length_m * catalog.cables[c.type].price_per_m_usd.value) for c in bom.cables]
    return replace(bom, switches=switches, transceivers=transceivers, cables=cables)


class _LogicalTier(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built for a plan.tiers table only
    stages: int = Field(2, strict=True)
    switch: str | None = None


_STAGES_ALLOWED = "1 (one physical switch) or 2 (a non-blocking two-stage Clos of physical switches)"


def logical_tiers(fabric: Fabric, plan: dict, source: str | None = None,
                  sources: dict[str, str] | None = None) -> dict[int, _LogicalTier]:
    """The ``[plan.tiers.<name>]`` tables, by tier index, validated; ``sources`` names the file (or flag) each
    tier's table came from (else ``source``)."""
    out = {}
    names = [t.name for t in fabric.layout.tiers]
    for name, table in (plan or {}).get("tiers", {}).items():
        where = (sources or {}).get(name, source)
        if name not in names:
            raise TopoError(f"no tier named {name!r}; tiers: {', '.join(names)}", source=where,
                            key=f"plan.tiers.{name}")
        if not isinstance(table, dict):
            raise TopoError(f"must be a table with stages and switch, got {table!r}", source=where,
                            key=f"plan.tiers.{name}")
        try:
            lt = _LogicalTier.model_validate(table)
        except ValidationError as exc:
            e = exc.errors()[0]
            loc = ".".join(map(str, e["loc"]))
            if e["type"] == "extra_forbidden":
                msg = f"unknown key {loc!r}; allowed: stages, switch"
            elif loc == "stages":
                msg = f"must be {_STAGES_ALLOWED}, got {e.get('input')!r}"
            else:
                msg = f"must be a switch model name, got {e.get('input')!r}"
            raise TopoError(msg, source=where, key=f"plan.tiers.{name}.{loc}") from None
        if lt.stages not in (1, 2):
            raise TopoError(f"must be {_STAGES_ALLOWED}, got {lt.stages}", source=where,
                            key=f"plan.tiers.{name}.stages")
        out[names.index(name)] = lt
    return out


def two_stage_switches(external_ports: int, k: int) -> tuple[int, int]:
    """(lower, upper) physical switches of ``k`` ports in a non-blocking two-stage Clos with ``external_ports``:
    ceil(E / (k/2)) lower switches, each with k/2 ports out and k/2 in, and ceil(lower x k/2 / k) upper ones."""
    lower = math.ceil(external_ports / (k // 2))
    return lower, math.ceil(lower * (k // 2) / k)


def _class_label(x: float) -> str:
    return f"<= {x:g} m"


def _pick_module(catalog: Catalog, rate_Gbps: float, ports: int, medium: str, length_m,
                 where: str = "") -> tuple[list[str], np.ndarray]:
    """For each length, the module of this rate, port count and medium with the shortest reach that covers it:
    (module names, index into them per length). ``where`` names the links (for the error)."""
    lengths = np.atleast_1d(np.asarray(length_m, dtype=float))
    fits = sorted((t.reach_m.value, n) for n, t in catalog.transceivers.items()
                  if abs(t.rate_Gbps.value - rate_Gbps) < 1e-6 and int(t.ports.value) == ports
                  and t.medium == medium)
    longest = fits[-1][0] if fits else 0.0
    if not fits or lengths.max() > longest:
        have = f"the longest reaches {longest:,.0f} m" if fits else "there is none"
        raise TopoError(f"the floor plan makes {where + ' ' if where else ''}links up to {lengths.max():,.0f} m long, "
                        f"and of the {ports}-port {rate_Gbps:g}G {medium.replace('_', '-')} transceivers {have}; "
                        "shorten the floor (plan.floor: hall_width_m, hall_depth_m, hall_gap_m, slack_m) or add a "
                        f"transceiver under plan.transceivers (types: {', '.join(catalog.transceivers)})",
                        key="plan.floor")
    reaches = np.array([r for r, _ in fits])
    return [n for _, n in fits], np.searchsorted(reaches, lengths, side="left")


def tier_switch_models(fabric: Fabric, catalog: Catalog, logical: dict) -> list:
    """The catalog switch of each tier: ``[plan.tiers.<name>] switch`` if given, else the spec's tier model."""
    out = []
    for t in fabric.layout.tiers:
        lt = logical.get(t.index)
        if lt is not None and lt.switch:
            out.append(catalog.switch(lt.switch, key=f"plan.tiers.{t.name}.switch"))
        else:
            sw = catalog.switch(t.model, key=f"fabric.tiers[{t.index}].model")
            if (lt is None or lt.stages == 1) and t.radix > sw.ports.value:
                raise TopoError(f"a tier of {t.model} switches with {t.radix} ports each, but a {t.model} has "
                                f"{sw.ports.value:g} (plan.switches); allowed: a radix of at most {sw.ports.value:g}, "
                                f"a switch model with {t.radix} ports, or plan.tiers.{t.name}.stages = 2 (a "
                                "multi-stage logical switch)", key=f"fabric.tiers[{t.index}].radix")
            out.append(sw)
    return out


def bill_of_materials(fabric: Fabric, catalog: Catalog, floor: FloorPlan, plan: dict | None = None,
                      source: str | None = None, nic_module_ports: int = 1,
                      sources: dict[str, str] | None = None) -> BillOfMaterials:
    """Count switches, transceivers and cables of ``fabric`` laid out on ``floor``.

    Parameters
    ----------
    fabric, catalog, floor : the design, the catalog and its floor plan (:func:`topo.plan.floor.floor_plan`).
    plan : the ``[plan]`` table (its ``tiers`` key: multi-stage logical tiers).
    source, sources : where the ``tiers`` tables came from (for errors), as a default and per tier name.
    nic_module_ports : links one NIC-side module serves (the server's ``nic_module_ports``: 2 for twin-port
        cages shared by two NICs).

    Returns
    -------
    BillOfMaterials
    """
    logical = logical_tiers(fabric, plan or {}, source, sources)
    models = tier_switch_models(fabric, catalog, logical)
    switch_lines, internal = _switch_lines(fabric, models, logical, source, sources)
    links = _Links.of(fabric, floor, catalog.floor.short_reach == "aoc")
    tally = _ModuleTally()
    _nic_modules(tally, fabric, catalog, links, nic_module_ports)
    _switch_modules(tally, fabric, catalog, links, models)
    links_by_level = _links_by_level(links, fabric.level_names, fabric.layout.num_tiers)
    cables = _cables(catalog, links.level, links.medium, links.length_m, fabric.level_names, links.aoc)
    for it in internal:
        _internal_links(it, catalog, links.aoc, tally, cables, links_by_level)
    return BillOfMaterials(switch_lines, tally.lines(catalog), cables, links_by_level)


@dataclass(frozen=True)
class _InternalLinks:
    """The links inside a logical tier's switches (a two-stage Clos): ``count`` of them, between physical switches
    of model ``model_name``."""
    tier_name: str
    model: object  # the catalog's switch
    model_name: str
    count: int


def _switch_lines(fabric: Fabric, models: list, logical: dict, source: str | None,
                  sources: dict[str, str] | None) -> tuple[list[SwitchLine], list[_InternalLinks]]:
    """One switch line per tier (two, lower and upper stage, per logical tier), and each logical tier's internal
    links."""
    lines, internal = [], []
    for t, sw in zip(fabric.layout.tiers, models):
        lt = logical.get(t.index)
        if lt is None or lt.stages == 1:
            lines.append(SwitchLine(t.name, t.model, t.num_switches, t.num_switches, sw.power_W.value,
                                    sw.price_usd.value, int(sw.ports_per_cage.value)))
            continue
        phys_name = lt.switch or t.model
        k = int(sw.ports.value)
        ext = t.down_ports + t.up_ports
        if ext > k * k // 2:
            raise TopoError(f"a two-stage Clos of {k}-port switches has at most {k * k // 2} external ports, the "
                            f"tier uses {ext}", source=(sources or {}).get(t.name, source),
                            key=f"plan.tiers.{t.name}.stages")
        lower, upper = two_stage_switches(ext, k)
        for stage, n in (("lower", lower), ("upper", upper)):
            lines.append(SwitchLine(f"{t.name} ({stage} stage)", phys_name, n * t.num_switches, t.num_switches,
                                    sw.power_W.value, sw.price_usd.value, int(sw.ports_per_cage.value)))
        internal.append(_InternalLinks(t.name, sw, phys_name, lower * (k // 2) * t.num_switches))
    return lines, internal


@dataclass(frozen=True)
class _Links:
    """The scale-out links (from the floor plan's first link on) as arrays: ends, level, rate, length, medium; and
    the media that carry a module at each end (multimode links are AOC cables, optics included, when ``aoc``)."""
    src: np.ndarray
    dst: np.ndarray
    level: np.ndarray
    rate_Gbps: np.ndarray
    length_m: np.ndarray
    medium: np.ndarray
    aoc: bool

    @classmethod
    def of(cls, fabric: Fabric, floor: FloorPlan, aoc: bool) -> "_Links":
        links, s0 = fabric.links, floor.first_link
        return cls(links["src"][s0:], links["dst"][s0:], links["level"][s0:],
                   in_unit(links["bandwidth_Bps"][s0:], "Gb/s"), floor.lengths_m, floor.media, aoc)

    @property
    def copper(self) -> np.ndarray:
        return (self.medium == Medium.COPPER) | (self.medium == Medium.ACTIVE_COPPER)

    @property
    def optical(self) -> tuple:
        return (Medium.SINGLE_MODE,) if self.aoc else (Medium.MULTIMODE, Medium.SINGLE_MODE)


class _ModuleTally:
    """Transceivers by (type, where): modules, the link ends they serve, and those of them on GPU links."""

    def __init__(self):
        self._by: dict[tuple[str, str], list[int]] = {}

    def add(self, name: str, at: str, count, nlinks, on_gpu_links: bool = False) -> None:
        cur = self._by.setdefault((name, at), [0, 0, 0])
        cur[0] += int(count)
        cur[1] += int(nlinks)
        cur[2] += int(count) if on_gpu_links else 0

    def add_per_type(self, names: list[str], at: str, modules, nlinks, on_gpu_links: bool = False) -> None:
        """One line per module type with links: ``modules[j]`` modules of ``names[j]`` serving ``nlinks[j]``."""
        for j in range(len(names)):
            if nlinks[j]:
                self.add(names[j], at, modules[j], nlinks[j], on_gpu_links)

    def lines(self, catalog: Catalog) -> list[TransceiverLine]:
        out = []
        for (name, at), (count, nlinks, on_gpu) in self._by.items():
            t = catalog.transceivers[name]
            out.append(TransceiverLine(name, at, count, nlinks, t.power_W.value, t.price_usd.value,
                                       t.mttf_years.value, on_gpu))
        return out


def _nic_modules(tally: _ModuleTally, fabric: Fabric, catalog: Catalog, links: _Links, nic_module_ports: int) -> None:
    """The NIC ends: modules of ``nic_module_ports`` links, per server and module type (none on AOC links: their
    optics are in the cable): a twin-port cage serves two of the server's NICs."""
    nic = (links.level == down_level(0)) & ~links.copper
    servers = fabric.nodes["server"][links.src].astype(np.int64)
    for m in links.optical:
        sel = nic & (links.medium == m)
        if not sel.any():
            continue
        for r in np.unique(links.rate_Gbps[sel]):
            s2 = sel & (links.rate_Gbps == r)
            names, idx = _pick_module(catalog, r, nic_module_ports, MEDIA[m], links.length_m[s2], "NIC")
            per = np.unique(servers[s2] * len(names) + idx, return_counts=True)
            mods = np.bincount(per[0] % len(names), weights=np.ceil(per[1] / nic_module_ports),
                               minlength=len(names))
            tally.add_per_type(names, "nic", mods, np.bincount(idx, minlength=len(names)), on_gpu_links=True)


def _switch_modules(tally: _ModuleTally, fabric: Fabric, catalog: Catalog, links: _Links, models: list) -> None:
    """The switch ends: per switch and module type, ceil(links / ports per module), down ports and up ports; the
    first tier's down ports are on GPU links."""
    for t, sw in zip(fabric.layout.tiers, models):
        lo = fabric.node_offset[f"tier:{t.index}"]
        down = links.level == down_level(t.index)
        up = links.level == down_level(t.index + 1)
        ends = [(links.dst[down] - lo, down, t.index == 0)]
        if up.any():
            ends.append((links.src[up] - lo, up, False))
        for ids, mask, gpu_end in ends:
            for m in links.optical:
                _switch_end(tally, catalog, links, t, int(sw.ports_per_cage.value), ids, mask, m, gpu_end)


def _switch_end(tally: _ModuleTally, catalog: Catalog, links: _Links, t, ppc: int, ids: np.ndarray,
                mask: np.ndarray, m: int, gpu_end: bool) -> None:
    """The modules of tier ``t``'s switches on the links of ``mask`` of medium ``m`` (``ids``: each link's switch,
    local to the tier)."""
    sel = mask & (links.medium == m)
    if not sel.any():
        return
    sub_ids = ids[(links.medium[mask] == m)]
    r = float(links.rate_Gbps[sel][0])
    names, idx = _pick_module(catalog, r, ppc, MEDIA[m], links.length_m[sel], t.name)
    per = np.bincount(sub_ids * len(names) + idx, minlength=t.num_switches * len(names))
    per = np.ceil(per.reshape(t.num_switches, len(names)) / ppc).sum(axis=0)
    tally.add_per_type(names, t.name, per, np.bincount(idx, minlength=len(names)), on_gpu_links=gpu_end)


def _links_by_level(links: _Links, level_names, num_tiers: int) -> dict[str, dict[str, int]]:
    """Links per level and medium, for every level with links."""
    out: dict[str, dict[str, int]] = {}
    for lv in range(down_level(0), down_level(num_tiers)):
        sel = links.level == lv
        if sel.any():
            out[level_names[lv]] = {MEDIA[m]: int((sel & (links.medium == m)).sum()) for m in range(len(MEDIA))}
    return out


def _internal_links(it: _InternalLinks, catalog: Catalog, aoc: bool, tally: _ModuleTally, cables: list,
                    links_by_level: dict) -> None:
    """A logical tier's internal links, all of the catalog's ``logical_internal_length_m``: their level, their
    cable line, and their modules (both ends on switches, full cages)."""
    ln = catalog.floor.logical_internal_length_m.value
    m = int(link_media(np.array([ln]), catalog)[0])
    n = it.count
    name_lv = f"{it.tier_name}-internal"
    links_by_level[name_lv] = {MEDIA[i]: (n if i == m else 0) for i in range(len(MEDIA))}
    if m == Medium.SINGLE_MODE or (m == Medium.MULTIMODE and not aoc):
        ppc = int(it.model.ports_per_cage.value)
        names, _ = _pick_module(catalog, float(it.model.port_rate_Gbps.value), ppc, MEDIA[m], ln, name_lv)
        tally.add(names[0], f"{it.tier_name} (internal)", 2 * math.ceil(n / ppc), 2 * n)
    kind = _cable_for(catalog, m, aoc)
    cab = catalog.cables[kind]
    cables.append(CableLine(kind, name_lv, _class_label(_length_class(ln)), n, n * ln,
                            n * (cab.price_usd.value + ln * cab.price_per_m_usd.value), n * cab.power_W.value))


def _cable_for(catalog: Catalog, medium: int, aoc: bool = False) -> str:
    """The cables.toml entry of a link of ``medium`` (a :class:`~topo.plan.floor.Medium`)."""
    return {Medium.COPPER: "DAC", Medium.MULTIMODE: "AOC" if aoc else "MMF", Medium.SINGLE_MODE: "SMF",
            Medium.ACTIVE_COPPER: "AEC"}[Medium(int(medium))]


def _length_class(x: float) -> float:
    for c in LENGTH_CLASSES_M:
        if x <= c:
            return c
    return math.inf


def _cables(catalog, level, medium, length, level_names, aoc=False) -> list[CableLine]:
    classes = np.searchsorted(np.array(LENGTH_CLASSES_M, dtype=float), length, side="left")
    out = []
    nm = len(MEDIA)
    key = (level.astype(np.int64) * nm + medium) * (len(LENGTH_CLASSES_M) + 1) + classes
    counts_all = np.bincount(key)  # the keys are small integers: a bincount, not a sort of every link
    total_all = np.bincount(key, weights=length)
    uniq = np.flatnonzero(counts_all)
    for k, c, tl in zip(uniq.tolist(), counts_all[uniq].tolist(), total_all[uniq].tolist()):
        cls = k % (len(LENGTH_CLASSES_M) + 1)
        m = (k // (len(LENGTH_CLASSES_M) + 1)) % nm
        lv = k // (len(LENGTH_CLASSES_M) + 1) // nm
        name = _cable_for(catalog, m, aoc)
        cab = catalog.cables[name]
        label = _class_label(LENGTH_CLASSES_M[cls]) if cls < len(LENGTH_CLASSES_M) else "> 2000 m"
        out.append(CableLine(name, level_names[lv], label, c, tl,
                             c * cab.price_usd.value + tl * cab.price_per_m_usd.value, c * cab.power_W.value))
    return out
