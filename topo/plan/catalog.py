"""The planner's catalog: versioned data files of GPUs, servers, switches, optics, cables, the facility, the floor
layout, reliability and the workload, each value with its ``source`` and ``status``.

The files live in ``topo/data/catalog/*.toml``; every number is a table ``{ value = ..., source = "...",
status = "published" | "secondary" | "derived" | "assumption" }`` in SI units named in the key (``power_W``,
``price_usd``, ``reach_m``). A price says where it comes from like any value (``published`` when read from a published price or
cost guide, ``assumption`` for a placeholder); every price also has a low and a high end, each with its source and
status (``price_ranges.toml``: listed ranges, else a default band), and :meth:`Catalog.at` gives the catalog with
every price at one end. Prices remain inputs a user overrides with a quote.

A server may be a tray of a rack-scale system (GB200 NVL72): its ``servers_per_rack`` and ``rack_power_W`` replace
the layout's, and its ``rack_switches`` (the NVLink switch trays, ``per_rack``) are counted per rack of such servers
as switches (power and price) by :func:`topo.plan.plan`.

Overrides come in layers, each ``(origin, dict)``: the spec's ``[plan]`` table, a plan file, command-line options.
A bare number replaces a value (its source becomes ``<origin>: plan.<key>``, status ``override``); a table with
``value``/``source``/``status`` replaces it whole; a new item (a switch model) gives all its fields. Whatever the
layer, a bad value is one :class:`~topo.errors.TopoError` naming the file (or the origin) and the dotted key::

    topo/data/catalog/facility.toml: pue: must be >= 1, got 0.9
    my-spec.toml: plan.switches.QM9700.price_usd: must be >= 0, got -5
"""

from __future__ import annotations

import copy
import functools
import re
import tomllib
import types
from pathlib import Path
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..errors import TopoError, closest
from ..spec.load import format_loc
from ..resources import data_dir
from .catalog_schema import (DROPPED, ENDS, ITEM_KINDS, ITEM_NAMES, KINDS, PLAN_KEYS, RENAMED, Catalog, Value,
                             is_price, walk)

__all__ = ["Value", "Catalog", "load_catalog", "catalog_dir", "KINDS", "PLAN_KEYS", "ENDS", "is_price"]


def catalog_dir() -> Path:
    """The bundled catalog files' folder (``topo/data/catalog``)."""
    return data_dir("catalog")

def _read(path: Path) -> dict:
    """The parsed file (a fresh copy: the caller merges overrides into it); parsed once per version of the file."""
    try:
        st = path.stat()
        return copy.deepcopy(_parse(str(path), st.st_mtime_ns, st.st_size))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TopoError(f"cannot read the catalog: {exc}", source=_display(path)) from None


@functools.lru_cache(maxsize=64)
def _parse(path: str, mtime_ns: int, size: int) -> dict:
    return tomllib.loads(Path(path).read_text(encoding="utf-8"))


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _merge(base: dict, over: dict, origin: str, path: list[str], marks: dict[str, str]) -> None:
    """Apply one override layer in place; record each overridden dotted path with its origin."""
    for k, v in over.items():
        here = path + [str(k)]
        key = ".".join(here)
        old = base.get(k)
        if isinstance(v, dict) and not {"value"} <= set(v) and isinstance(old, dict) and "value" not in old:
            _merge(old, v, origin, here, marks)
            continue
        if isinstance(v, dict) and not {"value"} <= set(v) and old is None:
            marks[key] = origin
            base[k] = {}
            _merge(base[k], v, origin, here, marks)
            continue
        marks[key] = origin
        numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
        if numeric and (old is None or (isinstance(old, dict) and "value" in old)):
            v = {"value": v, "source": f"{origin}: plan.{key}", "status": "override"}
        base[k] = v


def load_catalog(layers: list[tuple[str, dict]] = (), directory: Path | None = None) -> Catalog:
    """Read every catalog file, apply the override ``layers`` in order, and validate.

    ``layers`` are ``(origin, plan_table)`` pairs, e.g. ``[("my-spec.toml", spec.plan), ("--pue", {"facility":
    {"pue": 1.3}})]``; the plan table's keys are the catalog kinds (``facility``, ``switches``, ...). Its
    ``tiers`` key belongs to the bill of materials and is ignored here.
    """
    d = directory or catalog_dir()
    raw, files, versions = {}, {}, {}
    for kind in KINDS:
        path = d / f"{kind}.toml"
        data = _read(path)
        versions[kind] = str(data.pop("version", ""))
        raw[kind] = data
        files[kind] = _display(path)
    marks: dict[str, str] = {}
    for origin, table in layers:
        if not table:
            continue
        unknown = [k for k in table if k not in PLAN_KEYS]
        if unknown:
            close = [RENAMED[unknown[0]]] if unknown[0] in RENAMED else closest(
                unknown[0], PLAN_KEYS)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            if unknown[0] in RENAMED:
                hint += f" (plan.{unknown[0]} is now plan.{RENAMED[unknown[0]]})"
            raise TopoError(f"unknown key {unknown[0]!r}; allowed: {', '.join(PLAN_KEYS)}{hint}", source=origin,
                            key=f"plan.{unknown[0]}")
        for k, v in table.items():
            # every key but server_model is a table ([plan.switches], [plan.tiers.core], ...); a bare value there
            # stopped the merge with an internal TypeError
            inner = v.items() if k in ITEM_KINDS + ("tiers",) and isinstance(v, dict) else ()
            for where, x in [(f"plan.{k}", v)] * (k != "server_model") + [(f"plan.{k}.{n}", x) for n, x in inner]:
                if not isinstance(x, dict):
                    raise TopoError(f"must be a table ([{where}] with its keys), got {x!r}", source=origin, key=where)
        if "server_model" in table:
            if not isinstance(table["server_model"], str) or not table["server_model"]:
                raise TopoError(f"must be the name of a server in the catalog, got {table['server_model']!r}; "
                                f"allowed: {', '.join(raw['servers'])}", source=origin, key="plan.server_model")
            raw["server_model"] = table["server_model"]
            marks["server_model"] = origin
        known = {k: set(raw[k]) for k in ITEM_KINDS}
        _merge(raw, {k: copy.deepcopy(v) for k, v in table.items() if k not in ("tiers", "server_model")}, origin,
               [], marks)
        for kind in ITEM_KINDS:
            for name in set(raw[kind]) - known[kind]:
                close = closest(name, sorted(known[kind]), cutoff=0.75)
                if close and isinstance(table.get(kind, {}).get(name), dict) and not {"value"} & set(
                        table[kind][name]):
                    fields = _model_fields(kind)
                    if not fields <= set(table[kind][name]):
                        what = ITEM_NAMES[kind]
                        raise TopoError(f"no {what} named {name!r} in the catalog; did you mean {close[0]!r}? "
                                        f"(a new {what} gives every field: {', '.join(sorted(fields))})",
                                        source=origin, key=f"plan.{kind}.{name}")
    try:
        cat = Catalog.model_validate({**raw, "versions": versions, "origins": {**files, **marks}})
    except ValidationError as exc:
        raise _error(exc, files, marks) from None
    _check_storage_kind(cat, files)
    _check_ranges(cat, files)
    return cat


def _check_storage_kind(cat: Catalog, files: dict[str, str]) -> None:
    """The storage's ``kind`` names one of its ``kinds`` (storage.toml, or a kind a plan layer added)."""
    st = cat.storage
    if st.kind in st.kinds:
        return
    origin, overridden = cat.origin_of("storage.kind")
    close = closest(st.kind, list(st.kinds))
    raise TopoError(f"no storage server kind {st.kind!r}; allowed: {', '.join(st.kinds)} (or add one under "
                    f"plan.storage.kinds)" + (f"; did you mean {close[0]!r}?" if close else ""),
                    source=origin if overridden else files["storage"],
                    key="plan.storage.kind" if overridden else "kind")


def _check_ranges(cat: Catalog, files: dict[str, str]) -> None:
    """Each listed range names a price of the catalog, and low <= expected <= high (unless the price was
    overridden: a quote has no range)."""
    prices = {k: v for k, v in walk(cat.model_dump(exclude={"versions", "origins", "price_ranges"}))
              if is_price(k)}
    for key, r in cat.price_ranges.ranges.items():
        origin, overridden = cat.origin_of(f"price_ranges.ranges.{key}")
        source = origin if overridden else files["price_ranges"]
        if key not in prices:
            close = closest(key, list(prices))
            raise TopoError(f"no price {key!r} in the catalog" + (f"; did you mean {close[0]!r}?" if close else ""),
                            source=source, key=f"ranges.{key}" if not overridden else f"plan.price_ranges.ranges.{key}")
        v = prices[key]
        if v["status"] == "override" or cat.origin_of(key)[1]:
            continue
        if not r.low.value <= v["value"] <= r.high.value:
            raise TopoError(f"low {r.low.value:g} <= expected {v['value']:g} <= high {r.high.value:g} does not hold",
                            source=source, key=f"ranges.{key}" if not overridden else f"plan.price_ranges.ranges.{key}")


def _model_fields(kind: str) -> set[str]:
    """The required fields of one item of ``kind`` (``switches`` -> Switch's)."""
    model = Catalog.model_fields[kind].annotation.__args__[1]
    return {n for n, f in model.model_fields.items() if f.is_required()}


def _keys_at(loc: list[str]) -> list[str]:
    """The keys a table of the catalog at ``loc`` (``["switches", "QM9700"]``) takes; [] where unknown."""
    t = Catalog
    for part in [*loc, None]:
        while get_origin(t) is Annotated:
            t = get_args(t)[0]
        if get_origin(t) in (Union, types.UnionType):  # an optional table: its table member
            t = next((a for a in get_args(t) if get_origin(a) is dict or isinstance(a, type) and issubclass(
                a, BaseModel)), None)
        if part is None:
            break
        if get_origin(t) is dict:  # a table of items by name: the item's type
            t = get_args(t)[1]
        elif isinstance(t, type) and issubclass(t, BaseModel) and part in t.model_fields:
            t = t.model_fields[part].annotation
        else:
            return []
    return list(t.model_fields) if isinstance(t, type) and issubclass(t, BaseModel) else []


def _error(exc: ValidationError, files: dict[str, str], marks: dict[str, str]) -> TopoError:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    if loc and loc[-1] in ("value",) and err["type"] != "extra_forbidden":
        loc = loc[:-1]
    dotted = format_loc(loc)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = f"unknown key {loc[-1]!r}"
        allowed = _keys_at(loc[:-1])
        if allowed:
            close = closest(loc[-1], allowed)
            msg += f"; allowed: {', '.join(allowed)}" + (f"; did you mean {close[0]!r}?" if close else "")
        if dotted in DROPPED:  # a key the catalog had: where what it set lives now
            msg += f" (plan.{dotted} was {DROPPED[dotted]})"
    elif err["type"] == "missing":
        msg = "is required but missing"
    elif err["type"] in ("model_type", "dict_type") and loc[:2] == ["price_ranges", "ranges"] and len(loc) <= 3:
        msg = (f"must be a table {{ low, high }} (each a number or a table {{ value, source, status }}), got "
               f"{err.get('input')!r}" if len(loc) == 3 else
               f"must be a table of ranges by price key, e.g. [plan.price_ranges.ranges.\"switches.QM9700.price_usd\"] "
               f"with low and high, got {err.get('input')!r}")
    elif err["type"] == "model_type" and err.get("ctx", {}).get("class_name") not in (None, "Value"):
        msg = f"must be a table ([plan.{dotted}] with its keys), got {err.get('input')!r}"
    elif err["type"] in ("model_type", "dict_type") and isinstance(err.get("input"), str) and _unit_of(dotted):
        msg = (f"must be a number in {_unit_of(dotted)} (the unit its name ends with; no unit written), or a table "
               f"{{ value, source, status }}, got {err.get('input')!r}")
    elif err["type"] in ("model_type", "dict_type"):
        msg = f"must be a number or a table {{ value, source, status }}, got {err.get('input')!r}"
    elif err["type"] in ("float_type", "float_parsing", "finite_number"):
        msg = f"must be a finite number, got {err.get('input')!r}"
    elif err["type"] == "literal_error":
        allowed = re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", ""))
        given = err.get("input")  # an override arrives as { value, source, status }: show the value given
        given = given["value"] if isinstance(given, dict) and "value" in given else given
        msg = f"must be one of {', '.join(allowed)}, got {given!r}"
    origin = next((o for p, o in sorted(marks.items(), key=lambda x: -len(x[0]))
                   if dotted == p or dotted.startswith(p + ".")), None)
    if origin is not None:
        return TopoError(msg, source=origin, key=f"plan.{dotted}")
    kind = loc[0] if loc else ""
    return TopoError(msg, source=files.get(kind, "catalog"), key=format_loc(loc[1:]) or None)


_KEY_UNITS = (("_kWh", "kWh"), ("_MW", "MW"), ("_W", "W"), ("_m2", "m2"), ("_km", "km"), ("_m", "m"),
              ("_usd", "USD"), ("_s", "s"), ("_h", "hours"), ("_years", "years"))


def _unit_of(key: str) -> str | None:
    """The unit a catalog key's name ends with (``rack_power_W``: W), as the project names keys; None if none."""
    last = key.rsplit(".", 1)[-1]
    if "_per_" in last:  # capex_usd_per_W: USD per W
        head, _, per = last.rpartition("_per_")
        unit = _unit_of(head)
        return f"{unit} per {per}" if unit else None
    return next((unit for suffix, unit in _KEY_UNITS if last.endswith(suffix)), None)
