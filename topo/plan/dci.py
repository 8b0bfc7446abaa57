"""The bill of a region's data-centre interconnect: coherent modules, amplifier huts, fibre pairs and muxes per span,
their power and cost, from the sourced figures in ``topo/data/dci/interconnect.toml``.

Per span of ``d`` km with ``w`` waves: ``2 w`` modules (one per wave at each end); ``ceil(w / waves_per_pair)`` fibre
pairs, each with a mux at both ends and an amplifier at both ends and in every in-line hut; ``ceil(d / spacing) - 1``
in-line amplifier huts. Cost over the plan's years: equipment depreciated over the network's life (as the sites'
network), fibre over its IRU life, energy at the sites' electricity price.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import TopoError
from ..inputs import read_toml
from ..resources import data_dir
from .catalog_schema import Positive, Price, Value, _bounded
from .power import HOURS_PER_YEAR
from .tco import depreciation_usd

__all__ = ["DciCatalog", "DciItem", "SpanBill", "DciBill", "load_dci_catalog", "span_items", "dci_bill",
           "beyond_reach"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Module(_Strict):
    power_W: Price
    price_usd: Price
    reach_km: Positive


class _Amplifier(_Strict):
    spacing_km: Positive
    per_pair_power_W: Price
    per_pair_price_usd: Price
    hut_power_W: Price
    hut_price_usd: Price


class _Fibre(_Strict):
    waves_per_pair: Positive
    price_per_pair_km_usd: Price
    life_years: Positive
    mux_price_usd: Price


class _Switch(_Strict):
    ports: Positive
    port_rate_Gbps: Positive
    # what one cage holds: a wave's pluggable takes that many ports (topo.plan.dci_ports)
    ports_per_cage: _bounded(ge=1.0, le=8.0, whole=True, why_le=" (an OSFP cage holds at most 8 lanes)")
    power_W: Price
    price_usd: Price


class DciCatalog(_Strict):
    version: str
    module: _Module
    amplifier: _Amplifier
    fibre: _Fibre
    switch: _Switch  # hosts the coherent pluggables where a site's own switches cannot (topo.plan.dci_ports)
    cage_power_W: dict[str, Positive] = {}  # the most a cage of a switch model powers, where published


_QUOTED = ("module", "amplifier", "fibre", "switch")  # the sections a region's [plan.dci] may quote


def load_dci_catalog(overrides: dict | None = None, origin=None) -> DciCatalog:
    """The DCI figures (``topo/data/dci/interconnect.toml``) with a region's quotes over them, validated.

    Parameters
    ----------
    overrides : dict, optional
        ``{section: {key: value}}`` (a region's ``[plan.dci]``): each value replaces the file's, its source
        ``<origin>: plan.dci.<section>.<key>``, its status ``override``.
    origin : callable, optional
        ``origin(key)``: where the value of ``plan.dci.SECTION.KEY`` comes from (the region file, with the ``--set``
        that gave it: :meth:`topo.spec.sites.RegionSpec.source_of`), for sources and errors.

    Returns
    -------
    DciCatalog

    Raises
    ------
    TopoError
        An unknown section or key (keyed ``plan.dci.SECTION.KEY``, the allowed ones named), or a value out of its
        range.
    """
    path = data_dir("dci", "interconnect.toml")
    doc = read_toml(path, "DCI catalog (.toml)")
    where = origin or (lambda key: "")
    for sec, values in (overrides or {}).items():
        if sec not in _QUOTED:
            first = f"plan.dci.{sec}" + (f".{next(iter(values))}" if values else "")
            raise TopoError(f"no DCI section {sec!r}; allowed: {', '.join(_QUOTED)}", source=where(first) or None,
                            key=f"plan.dci.{sec}")
        for key, v in values.items():
            name = f"plan.dci.{sec}.{key}"
            if key not in doc[sec]:
                raise TopoError(f"no DCI figure {key!r} in {sec}; allowed: {', '.join(sorted(doc[sec]))}",
                                source=where(name) or None, key=name)
            doc[sec][key] = {"value": v, "source": f"{where(name)}: {name}", "status": "override"}
    try:
        return DciCatalog.model_validate(doc)
    except ValidationError as exc:
        e = exc.errors()[0]
        msg = e["msg"].removeprefix("Value error, ")
        loc = [str(x) for x in e["loc"] if x != "value"]
        if len(loc) >= 2 and loc[1] in (overrides or {}).get(loc[0], {}):
            name = "plan.dci." + ".".join(loc[:2])
            raise TopoError(msg, source=where(name) or None, key=name) from None
        raise TopoError(msg, source=str(path), key=".".join(loc)) from None


@dataclass
class DciItem:
    """One line of a span's bill: ``count`` of ``item``, each drawing ``power_W_each`` and costing
    ``price_usd_each`` (a fibre pair: its whole route, ``length_m`` long)."""

    item: str
    count: int
    power_W_each: float
    price_usd_each: float
    length_m: float = 0.0


@dataclass
class SpanBill:
    name: str
    distance_km: float
    waves: int
    fibre_pairs: int
    modules: int
    amplifier_huts: int
    amplifiers: int
    power_W: float
    equipment_usd: float
    fibre_usd: float
    items: list[DciItem]  # the lines the power and the two costs sum (fibre pairs: fibre_usd; the rest: equipment)


@dataclass
class DciBill:
    spans: list[SpanBill]
    power_W: float  # the spans' and the sites' DCI ports'
    equipment_usd: float  # the spans' and the sites' DCI ports'
    fibre_usd: float
    cost_over_years_usd: float
    years: float
    sources: dict  # figure -> (value, source, status)
    # per site: the attach tier's ports the DCI takes, idle ones, and the border switches the rest need
    # (:mod:`topo.plan.dci_ports`), as dicts with their lines
    site_ports: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _v(x: Value) -> float:
    return float(x.value)


FIBRE_PAIR = "fibre pair"


def span_items(cat: DciCatalog, distance_km: float, waves: int) -> list[DciItem]:
    """The lines of one span's bill (see the module doc): coherent modules, line amplifiers, in-line amplifier huts,
    muxes and fibre pairs, each with its count, power and price from ``cat``.

    Parameters
    ----------
    cat : DciCatalog
        The DCI catalog (module, amplifier, fibre).
    distance_km : float
        The span's route length.
    waves : int
        Coherent waves (one module at each end of each).

    Returns
    -------
    list of DciItem
        Coherent modules, line amplifiers, amplifier huts, muxes, fibre pairs (``length_m`` the route's).
    """
    pairs = math.ceil(waves / _v(cat.fibre.waves_per_pair))
    huts = max(0, math.ceil(distance_km / _v(cat.amplifier.spacing_km)) - 1)
    a, m, f = cat.amplifier, cat.module, cat.fibre
    return [DciItem("coherent module", 2 * waves, _v(m.power_W), _v(m.price_usd)),
            # in every hut, and a booster/pre-amplifier at each end
            DciItem("line amplifier", pairs * (huts + 2), _v(a.per_pair_power_W), _v(a.per_pair_price_usd)),
            DciItem("amplifier hut", huts, _v(a.hut_power_W), _v(a.hut_price_usd)),
            DciItem("mux", 2 * pairs, 0.0, _v(f.mux_price_usd)),
            DciItem(FIBRE_PAIR, pairs, 0.0, distance_km * _v(f.price_per_pair_km_usd), distance_km * 1e3)]


def span_bill(cat: DciCatalog, name: str, distance_km: float, waves: int) -> SpanBill:
    """One span's bill (see the module doc): its lines (:func:`span_items`) summed."""
    items = span_items(cat, distance_km, waves)
    n = {i.item: i.count for i in items}
    return SpanBill(name=name, distance_km=distance_km, waves=waves, fibre_pairs=n[FIBRE_PAIR],
                    modules=n["coherent module"], amplifier_huts=n["amplifier hut"], amplifiers=n["line amplifier"],
                    power_W=sum(i.count * i.power_W_each for i in items),
                    equipment_usd=sum(i.count * i.price_usd_each for i in items if i.item != FIBRE_PAIR),
                    fibre_usd=sum(i.count * i.price_usd_each for i in items if i.item == FIBRE_PAIR), items=items)


def dci_bill(spans, *, years: float, network_life_years: float, electricity_usd_per_kWh: float,
             cat: DciCatalog | None = None, site_ports=()) -> DciBill:
    """The DCI's bill and its cost over ``years``.

    Parameters
    ----------
    spans : iterable of (name, distance_km, waves)
    years : float
        The plan's horizon (the sites' TCO years).
    network_life_years : float
        Life of the DCI's equipment (as the sites' network).
    electricity_usd_per_kWh : float
    site_ports : sequence of topo.plan.dci_ports.SitePorts, optional
        Each site's DCI ports: the border switches and modules a full attach tier needs join the equipment and power.

    Returns
    -------
    DciBill
    """
    cat = cat or load_dci_catalog()
    bills = [span_bill(cat, n, d, w) for n, d, w in spans]
    power = sum(b.power_W for b in bills) + sum(p.power_W for p in site_ports)
    equipment = sum(b.equipment_usd for b in bills) + sum(p.equipment_usd for p in site_ports)
    fibre = sum(b.fibre_usd for b in bills)
    energy = power * HOURS_PER_YEAR * years / 1e3 * electricity_usd_per_kWh
    cost = (depreciation_usd(equipment, years, network_life_years)
            + depreciation_usd(fibre, years, _v(cat.fibre.life_years)) + energy)
    sources = {f"{sec}.{k}": (v.value, v.source, v.status) for sec in _QUOTED
               for k, v in getattr(cat, sec) if isinstance(v, Value)}
    sources.update({f"cage_power_W.{m}": (v.value, v.source, v.status) for m, v in cat.cage_power_W.items()})
    return DciBill(spans=bills, power_W=power, equipment_usd=equipment, fibre_usd=fibre, cost_over_years_usd=cost,
                   years=years, sources=sources, site_ports=[asdict(p) for p in site_ports])


def beyond_reach(spans, cat: DciCatalog) -> list[str]:
    """A note per span longer than a ZR module's single-span reach (``module.reach_km``): its bill prices ZR
    pluggables with in-line amplifiers, and the published pluggables that go farther run below 800 Gb/s, so the
    wave rate there is the region file's assumption (walk9: two-site-h100's 1,000 km at 16 x 800G said nothing).

    Parameters
    ----------
    spans : iterable of (name, distance_km, waves)
    cat : DciCatalog

    Returns
    -------
    list of str
    """
    reach = _v(cat.module.reach_km)
    return [f"{name} ({d:,.0f} km) is beyond a ZR module's {reach:g} km single-span reach (module.reach_km in "
            f"topo/data/dci/interconnect.toml: OIF 400ZR and 800ZR, with their sources): the bill prices ZR pluggables "
            f"with in-line amplifiers, while the published longer-reach pluggables (OpenZR+) run at a reduced rate; "
            f"the wave rate over it is the region file's assumption; quote long-haul transponders as "
            f"plan.dci.module.price_usd and power_W" for name, d, _ in spans if d > reach]
