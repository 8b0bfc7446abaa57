"""The planner's catalog schema: the typed values (``{ value, source, status }``), the parts (GPUs, servers,
switches, transceivers, cables) and the planning tables (facility, floor, cooling, economics, checkpoint, storage,
spares, reliability, workload, price ranges), each field with its bounds and unit. :mod:`topo.plan.catalog` loads the
data files into these types and layers the overrides over them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..errors import TopoError, closest
from ..fabric.hardware import GPU_MODELS

__all__ = ["Status", "Value", "NonNeg", "Positive", "Price", "Fraction", "Count", "Gpu", "RackSwitch", "Cooling", "COOLING", "Server", "Switch", "Transceiver", "COPPER_REACH_MAX_M", "Cable", "Facility", "FloorLayout", "CoolingType", "CoolingTypes", "MAX_YEARS", "Economics", "Checkpoint", "StorageServer", "Storage", "Spares", "Reliability", "Reference", "PriceRange", "PriceRanges", "is_price", "ENDS", "Workload", "Deployment", "Catalog"]

Status = Literal["published", "secondary", "derived", "assumption", "override"]


class _Strict(BaseModel):
    # schemas built when a catalog is first read, not at import (topo report and topo sweep import the planner)
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Value(_Strict):
    """One sourced number."""

    value: Annotated[float, Field(allow_inf_nan=False)]
    source: Annotated[str, Field(min_length=1)]
    status: Status

    def __float__(self) -> float:
        return float(self.value)


def _bounded(ge: float | None = 0.0, gt: float | None = None, le: float | None = None, price: bool = False,
             whole: bool = False, why_le: str = "", why_ge: str = ""):
    def check(v: Value) -> Value:
        x = v.value
        if whole and x != int(x):
            raise ValueError(f"must be a whole number{f' >= {ge:g}' if ge is not None else ''}, got {x:g}")
        if ge is not None and x < ge:
            raise ValueError(f"must be >= {ge:g}{why_ge}, got {x:g}")
        if gt is not None and x <= gt:
            raise ValueError(f"must be > {gt:g}, got {x:g}")
        if le is not None and x > le:
            raise ValueError(f"must be <= {le:g}{why_le}, got {x:g}")
        return v
    return Annotated[Value, AfterValidator(check)]


NonNeg = _bounded()
Positive = _bounded(ge=None, gt=0.0)
Price = _bounded(price=True)
Fraction = _bounded(ge=0.0, le=1.0)
Count = _bounded(ge=1.0, whole=True)  # a whole number of things (ports, GPUs, racks), at least one


class Gpu(_Strict):
    tdp_W: Positive
    idle_W: Positive | None = None  # the draw of a powered GPU with no work (a job standing: restart, reload)
    hbm_bytes: Positive
    peak_flops: dict[str, Positive]


class RackSwitch(_Strict):
    """Switches built into a rack-scale system's rack (the NVLink switch trays of an NVL72 rack)."""

    model: str
    per_rack: Positive
    power_W: NonNeg
    price_usd: Price


Cooling = Literal["air", "rear_door", "direct_liquid"]
COOLING = ("air", "rear_door", "direct_liquid")  # from the least to the most heat removed per rack


CPU_VENDORS = ("intel", "amd", "arm")


class CpuVendor(_Strict):
    """The host CPU's vendor, sourced (NCCL prices its network overhead by it: tuning.cc getNetOverhead)."""

    value: Literal["intel", "amd", "arm"]
    source: Annotated[str, Field(min_length=1)]
    status: Status


class Server(_Strict):
    gpu: str
    gpus: Count
    non_gpu_power_per_gpu_W: NonNeg
    max_power_W: Positive
    rack_units: Positive
    price_usd: Price
    # A rack-scale system (GB200 NVL72): the server is one compute tray of a rack the product fixes; these replace
    # layout.servers_per_rack and layout.rack_power_W, and the rack's own switches are counted per rack.
    servers_per_rack: _bounded(ge=1.0) | None = None
    rack_power_W: Positive | None = None
    rack_switches: RackSwitch | None = None
    leaf_in_rack: bool = True  # False: the rack has no room for a leaf, which then sits at the end of the row
    nic_module_ports: _bounded(ge=1.0, le=2.0, whole=True, why_le=" (single- or twin-port NIC cages)")
    cooling: Cooling  # the least cooling a rack of these servers needs
    cpu_vendor: CpuVendor  # the host CPU: the spec's server.cpu_vendor when it gives none (topo.spec.server_cpu)


class Switch(_Strict):
    ports: Count
    port_rate_Gbps: Positive
    ports_per_cage: _bounded(ge=1.0, le=8.0, whole=True, why_le=" (an OSFP cage holds at most 8 lanes)")
    power_W: _bounded(ge=10.0, why_ge=" (W: a switch draws tens of watts or more; a value in kW?)")
    power_with_optics_W: _bounded(ge=10.0, why_ge=" (W: a switch draws tens of watts or more; a value in kW?)")
    price_usd: Price
    rack_units: Count


class Transceiver(_Strict):
    rate_Gbps: Positive
    ports: _bounded(ge=1.0, le=8.0, whole=True, why_le=" (links one module serves)")
    medium: Literal["multimode", "single_mode"]
    reach_m: Positive
    power_W: NonNeg
    price_usd: Price
    mttf_years: Positive


COPPER_REACH_MAX_M = 15.0  # passive and active copper at 400G and up reach a few metres (DAC ~3 m, AEC ~7 m)


class Cable(_Strict):
    medium: Literal["copper", "multimode", "single_mode", "aoc", "aec"]
    reach_m: Positive
    power_W: NonNeg  # the cable's own (an AOC's optics at both ends); 0 for passive copper and fibre
    price_usd: Price
    price_per_m_usd: Price


_PUE = _bounded(ge=1.0, le=3.0, why_le=" (above 3, two thirds of the power would be overhead: check the value)")


class Facility(_Strict):
    # None: the PUE of the halls' cooling type (cooling.<type>.pue); a value here (or --pue) replaces it
    pue: _PUE | None = None
    electricity_usd_per_kWh: _bounded(price=True, le=2.0, why_le=" (USD per kWh: a price per MWh, or in cents?)")
    load_factor: Fraction
    frontend_fraction: _bounded(ge=0.0, le=0.5, why_le=" (a share of the GPU servers' power: a percentage?)")
    server_average_fraction: _bounded(ge=None, gt=0.0, le=1.0, why_le=" (average draw / nameplate: a "
                                      "percentage?)")
    capex_usd_per_W: Price
    capex_basis: Literal["facility", "it"]
    redundancy: Literal["N", "N+1", "2N"] = "N+1"
    ups_module_W: _bounded(ge=1e3, why_ge=" (W: a UPS module of at least a kW; a value in MW?)")
    generator_W: _bounded(ge=1e3, why_ge=" (W: a generator of at least a kW; a value in MW?)")


class FloorLayout(_Strict):
    """Racks, rows, halls and the campus (topo.plan.floor)."""

    short_reach: Literal["transceivers", "aoc"] = "transceivers"
    copper: Literal["dac", "dac_aec", "none"] = "dac"
    leaf_placement: Literal["auto", "top_of_rack", "middle_of_row", "end_of_row", "with_spines"] = "auto"
    cooling: Literal["auto", "air", "rear_door", "direct_liquid"] = "auto"  # at least this, more if the racks need it
    servers_per_rack: Count
    rack_power_W: Positive
    rack_width_m: Positive
    row_pitch_m: Positive
    rack_area_fraction: _bounded(ge=None, gt=0.0, le=1.0)
    racks_per_row: Count | None = None
    hall_width_m: Positive
    hall_depth_m: Positive
    hall_power_W: Positive
    pods_per_hall: Count | None = None
    hall_gap_m: NonNeg
    slack_m: NonNeg
    logical_internal_length_m: NonNeg
    network_rack_units: Count
    network_rack_power_W: Positive


class CoolingType(_Strict):
    max_rack_W: Positive
    capex_usd_per_W: Price
    pue: _PUE
    wue_L_per_kWh: _bounded(ge=0.0, le=10.0, why_le=" (litres of site water per kWh of IT energy: the thirstiest "
                            "evaporative sites use a few; a value in mL, or per MWh?)")


class CoolingTypes(_Strict):
    air: CoolingType
    rear_door: CoolingType
    direct_liquid: CoolingType


MAX_YEARS = 50.0
"""The longest plan (``economics.years``, and ``workload.days`` in 365-day years) the catalog takes."""


class Economics(_Strict):
    years: _bounded(ge=None, gt=0.0, le=MAX_YEARS)
    server_life_years: Positive
    network_life_years: Positive
    facility_life_years: Positive
    maintenance_fraction_per_year: Fraction
    opex_usd_per_MW_year: Price
    grid_kg_co2_per_kWh: _bounded(ge=0.0, le=2.0, why_le=" (coal, the most carbon-intensive source, is about 1)")
    storage_servers_per_gpu: NonNeg
    frontend_usd_per_server: Price


class Checkpoint(_Strict):
    bytes_per_param: Positive
    detection_s: NonNeg
    restart_s: NonNeg
    mode: Literal["sync", "async", "in_memory"] = "sync"
    snapshot_Bps: Positive
    repair_s: NonNeg
    hot_spare_fraction: _bounded(ge=0.0, le=0.5)
    # a site's own work between checkpoints, s (a policy; absent: the renewal optimum, topo.plan.renewal)
    interval_s: Positive | None = None


class StorageServer(_Strict):
    """One kind of storage server: its capacity, bandwidth, power, servers per rack and price (storage.toml
    [kinds.<name>])."""

    capacity_bytes: _bounded(ge=1e11, le=1e16, why_ge=" (bytes: a server of at least 100 GB; a value in TB?)",
                             why_le=" (bytes: at most 10 PB in one server; a value in bits or kB?)")
    write_Bps: _bounded(ge=1e6, le=2e11, why_ge=" (bytes/s: at least 1 MB/s; a value in MB/s?)",
                        why_le=" (bytes/s: the fastest all-flash appliances write tens of GB/s; a slip of 1000x?)")
    read_Bps: _bounded(ge=1e6, le=2e11, why_ge=" (bytes/s: at least 1 MB/s; a value in MB/s?)",
                       why_le=" (bytes/s: the fastest all-flash appliances read about 100 GB/s; a slip of 1000x?)")
    power_W: _bounded(ge=10.0, le=1e4, why_ge=" (W: a server of at least 10 W; a value in kW?)",
                      why_le=" (W: a storage server of at most 10 kW; a value in mW?)")
    servers_per_rack: Count
    price_usd: Price


class Storage(_Strict):
    """Storage sized from checkpoints and the dataset (topo.plan.storage)."""

    sizing: Literal["per_gpu", "needs"] = "needs"
    checkpoints_kept: Count
    bytes_per_token: _bounded(ge=None, gt=0.0, le=1e3, why_le=" (bytes per token: a value in bits?)")
    write_budget_s: _bounded(ge=None, gt=0.0, le=86_400.0, why_le=" (seconds: a value in ms?)")
    kind: str  # the storage server's kind: a key of ``kinds`` (checked by topo.plan.catalog.load_catalog)
    kinds: dict[str, StorageServer]

    @property
    def server(self) -> StorageServer:
        """The chosen kind's server (``kinds[kind]``)."""
        return self.kinds[self.kind]


class Spares(_Strict):
    lead_time_days: Positive
    service_level: _bounded(ge=None, gt=0.0, le=0.999999, why_le=" (a probability below 1)")


class Causes(_Strict):
    """Interruptions by cause over the observed GPUs x days, the groups of Llama 3's Table 5 (reliability.toml).

    Closed (walk46: ``causes.gpus = 100``, a typo of ``gpu``, was added as a sixth cause): the names carry meaning
    (gpu, nic and host wait for a repair when no hot spare is free; optics = "parts" replaces network); fold another
    cause into the nearest group."""

    gpu: NonNeg
    network: NonNeg
    nic: NonNeg
    host: NonNeg
    software: NonNeg

    def items(self):
        """(name, Value) of every cause, as a dict's items."""
        return ((k, getattr(self, k)) for k in type(self).model_fields)


class Reliability(_Strict):
    observed_gpus: Count  # whole GPUs (walk46: 16.384, thousands of GPUs, made the rate 1,000x)
    observed_days: Positive
    causes: Causes
    checkpoint: Checkpoint
    spares: Spares
    optics: Literal["table", "parts"] = "table"
    rate_scale: _bounded(ge=None, gt=0.0, le=1e6, why_le=" (a factor on every cause: 2 is twice the table's rate)")


class Reference(_Strict):
    name: str
    flop: Positive
    gpus: Positive
    gpu: str
    precision: str


class PriceRange(_Strict):
    """The low and high ends of one price, each with its source and status."""

    low: NonNeg
    high: NonNeg


class PriceRanges(_Strict):
    """Listed ranges by dotted price key, and the default band for every other price."""

    default_low_factor: _bounded(ge=0.0, le=1.0, why_le=" (the low end is at most the expected price)")
    default_high_factor: _bounded(ge=1.0, le=10.0, why_le=" (check the value)")
    ranges: dict[str, PriceRange] = {}


def is_price(key: str) -> bool:
    """A catalog key holds a price when its unit is dollars: it ends in ``_usd`` or has ``_usd_`` in it."""
    leaf = key.rsplit(".", 1)[-1]
    return leaf.endswith("_usd") or "_usd_" in leaf


ENDS = ("low", "expected", "high")


class Workload(_Strict):
    mfu: _bounded(ge=None, gt=0.0, le=1.0)
    precision: str
    days: _bounded(ge=None, gt=0.0, le=MAX_YEARS * 365, why_le=f" ({MAX_YEARS:g} years of 365 days, the longest "
                                                              "plan.economics.years may be)")
    params: Positive | None = None
    tokens_per_param: Positive
    reference: Reference


def _halls_schedule(v: Any) -> list:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v) or (
            v and not any(v)):
        raise ValueError("must be a list of the halls coming online in each quarter, whole numbers >= 0 with at "
                         f"least one hall (e.g. [1, 2, 2]), or [] for the ramp (ramp_gpus in ramp_days); got {v!r}")
    return v


def _quarter_label(v: Any) -> str | None:
    if v is not None and not (isinstance(v, str) and re.fullmatch(r"[0-9]{4}Q[1-4]", v)):
        given = v["value"] if isinstance(v, dict) and "value" in v else v  # a number given arrives as a Value table
        raise ValueError(f"must be a calendar quarter YYYYQn in quotes with n from 1 to 4 (e.g. \"2026Q3\"), got "
                         f"{given!r}")
    return v


class Deployment(_Strict):
    """When the halls come online (:mod:`topo.plan.phasing`): a schedule of halls per quarter, or a build pace."""

    halls_per_quarter: Annotated[Any, AfterValidator(_halls_schedule)] = []  # a list, checked by the validator
    ramp_gpus: Positive
    ramp_days: Positive
    start_quarter: Annotated[Any, AfterValidator(_quarter_label)] = None  # a str or None, checked by the validator


class Catalog(_Strict):
    """Every kind of the catalog, validated, with overrides applied."""

    gpus: dict[str, Gpu]
    servers: dict[str, Server]
    switches: dict[str, Switch]
    transceivers: dict[str, Transceiver]
    cables: dict[str, Cable]
    facility: Facility
    floor: FloorLayout
    cooling: CoolingTypes
    economics: Economics
    reliability: Reliability
    workload: Workload
    storage: Storage
    price_ranges: PriceRanges
    deployment: Deployment
    server_model: str | None = None  # the plan's choice among servers (default: the first holding the GPU)
    versions: dict[str, str] = {}
    origins: dict[str, str] = {}  # dotted path -> origin of an override; kind -> its catalog file

    def origin_of(self, dotted: str) -> tuple[str, bool]:
        """Where the value at ``dotted`` (``layout.rack_power_W``) comes from: (origin, overridden)."""
        for p in sorted((k for k in self.origins if "." in k or k not in KINDS), key=len, reverse=True):
            if dotted == p or dotted.startswith(p + "."):
                return self.origins[p], True
        below = [o for k, o in self.origins.items() if k.startswith(dotted + ".")]
        if below:  # a whole kind (plan.floor) whose values were overridden: the last layer that did
            return below[-1], True
        return self.origins.get(dotted.split(".")[0], "catalog"), False

    def gpu(self, name: str) -> Gpu:
        # a GPU topo knows is a product of its own, never a typo of another ("B200" is not "GB200")
        return _lookup(self.gpus, name, "gpus", "GPU", suggest=(name or "").upper() not in GPU_MODELS)

    def switch(self, name: str, key: str | None = None) -> Switch:
        return _lookup(self.switches, name, "switches", "switch model", key)

    def server_for(self, gpu: str) -> tuple[str, Server]:
        """The server model that holds ``gpu``: ``server_model`` if the plan names one, else the first in the
        catalog."""
        if self.server_model is not None:
            name = next((k for k in self.servers if k.upper() == self.server_model.upper()), None)
            if name is None:
                _lookup(self.servers, self.server_model, "servers", "server model", "plan.server_model")
            s = self.servers[name]
            if s.gpu.upper() != gpu.upper():
                raise TopoError(f"the server {name!r} holds {s.gpu} GPUs, the spec's GPU is {gpu}; name a server "
                                f"of {gpu} GPUs: " + ", ".join(n for n, x in self.servers.items()
                                                                if x.gpu.upper() == gpu.upper()),
                                key="plan.server_model")
            return name, s
        for name, s in self.servers.items():
            if s.gpu.upper() == gpu.upper():
                return name, s
        raise TopoError(f"no server in the catalog holds {gpu!r} GPUs; servers: "
                        f"{', '.join(f'{n} ({s.gpu})' for n, s in self.servers.items())}; add one under "
                        f"plan.servers", key="plan.servers")

    def prices(self) -> list[dict]:
        """Every price with its three ends: rows of ``key``, ``low``, ``expected``, ``high`` and, per end, its
        ``source`` and ``status`` (``low_source``, ``high_status``, ...). A price a user overrode is a quote: its
        three ends are the override."""
        rows = []
        pr = self.price_ranges
        lo_f, hi_f = pr.default_low_factor, pr.default_high_factor
        for key, v in walk(self.model_dump(exclude={"versions", "origins", "price_ranges"})):
            if not is_price(key):
                continue
            row = {"key": key, "expected": v["value"], "expected_source": v["source"],
                   "expected_status": v["status"]}
            given = pr.ranges.get(key)
            if v["status"] == "override" or self.origin_of(key)[1]:
                for end in ("low", "high"):
                    row.update({end: v["value"], f"{end}_source": "overridden: a quote has no range",
                                f"{end}_status": v["status"]})
            elif given is not None:
                for end in ("low", "high"):
                    b = getattr(given, end)
                    row.update({end: b.value, f"{end}_source": b.source, f"{end}_status": b.status})
            else:
                for end, f, name in (("low", lo_f, "default_low_factor"), ("high", hi_f, "default_high_factor")):
                    row.update({end: v["value"] * f.value, f"{end}_source": f"price_ranges.{name} = {f.value:g} "
                                f"x expected ({f.source})", f"{end}_status": f.status})
            rows.append(row)
        return rows

    def at(self, end: str, keys: set[str] | None = None) -> "Catalog":
        """This catalog with every price at its ``end`` (``low``, ``expected`` or ``high``; see :meth:`prices`).

        Parameters
        ----------
        end : str
            ``low``, ``expected`` or ``high``.
        keys : set of str, optional
            Only these prices (their :meth:`prices` keys) at that end; the others stay expected.

        Returns
        -------
        Catalog
            A copy whose prices are that end's values, with that end's source and status.
        """
        if end not in ENDS:
            raise ValueError(f"end must be one of {', '.join(ENDS)}, got {end!r}")
        if end == "expected":
            return self
        data = self.model_dump(exclude={"versions", "origins", "price_ranges"})
        out = self
        for row in self.prices():  # already validated values: copied in, not validated again
            if keys is not None and row["key"] not in keys:
                continue
            value = Value.model_construct(value=row[end], source=row[f"{end}_source"], status=row[f"{end}_status"])
            out = _replace(out, _split_key(row["key"], data), value)
        return out

    def assumptions(self) -> list[dict]:
        """Every value whose status is ``assumption`` or ``override``, as rows (key, value, source, status)."""
        rows = []
        for key, v in walk(self.model_dump(exclude={"versions"})):
            if v["status"] in ("assumption", "override"):
                rows.append({"key": key, **v})
        return rows


KINDS = ("gpus", "servers", "switches", "transceivers", "cables", "facility", "floor", "cooling", "economics",
         "reliability", "workload", "storage", "price_ranges", "deployment")
ITEM_KINDS = ("gpus", "servers", "switches", "transceivers", "cables")  # tables of named parts
ITEM_NAMES = {"gpus": "GPU", "servers": "server", "switches": "switch", "transceivers": "transceiver",
               "cables": "cable"}
PLAN_KEYS = KINDS + ("tiers", "server_model")
RENAMED = {"layout": "floor"}  # the floor plan's table was plan.layout, a name the training package's layouts use
# keys dropped from the catalog, and where what they set lives now (said beside "unknown key")
DROPPED = {
    "reliability.checkpoint.write_Bps": "dropped: the goodput model writes the checkpoint at the storage servers' "
    "aggregate write rate, the one the storage lines show; set one server's plan.storage.kinds.<kind>.write_Bps, or "
    "plan.storage.kind",
    "reliability.checkpoint.reload_Bps": "dropped: a restart reloads the checkpoint at the storage servers' aggregate "
    "read rate; set one server's plan.storage.kinds.<kind>.read_Bps, or plan.storage.kind",
}


def _lookup(table: dict, name: str, kind: str, what: str, key: str | None = None, suggest: bool = True):
    for k, v in table.items():
        if k.upper() == (name or "").upper():
            return v
    if not (name or "").strip():  # a tier without `model`: say it is missing, not that '' is unknown
        raise TopoError(f"no {what} is given, and the planner prices a part by it; give one of "
                        f"{', '.join(table)} (or add yours under plan.{kind})", key=key or f"plan.{kind}")
    close = closest(name or "", list(table)) if suggest else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise TopoError(f"{what} {name!r} is not in the catalog; allowed: {', '.join(table)} (or add it under "
                    f"plan.{kind}){hint}", key=key or f"plan.{kind}")


def _split_key(key: str, data: dict) -> list[str]:
    """The path of a dotted key whose item names may hold dots (``servers.GB200 NVL72 compute tray.price_usd``,
    ``switches.SN5600 (64 x 800G).price_usd``): the longest names that exist, level by level."""
    parts, node, rest = [], data, key
    while rest:
        for i in [j for j, ch in enumerate(rest) if ch == "."][::-1] + [len(rest)]:
            head = rest[:i]
            if isinstance(node, dict) and head in node:
                parts.append(head)
                node, rest = node[head], rest[i + 1:]
                break
        else:
            raise KeyError(key)
    return parts


def _replace(obj, parts: list[str], value):
    """``obj`` (a model or a dict of models) with the value at ``parts`` replaced, copying only the path to it."""
    head = parts[0]
    if isinstance(obj, dict):
        return {**obj, head: value if len(parts) == 1 else _replace(obj[head], parts[1:], value)}
    inner = value if len(parts) == 1 else _replace(getattr(obj, head), parts[1:], value)
    return obj.model_copy(update={head: inner})


def walk(obj, prefix=""):
    if isinstance(obj, dict) and set(obj) == {"value", "source", "status"}:
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(v, f"{prefix}.{k}" if prefix else str(k))
