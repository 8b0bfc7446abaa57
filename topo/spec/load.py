"""Reading specs: TOML files, bundled names, Python dicts, and ``--set KEY=VALUE`` overrides.

Whatever the origin, the same validation runs, and every problem becomes one :class:`~topo.errors.TopoError`
line naming the file (and the ``--set`` that caused it), the dotted key, the value and what is allowed::

    topologies/h100-100k.toml: fabric.tiers[2].oversubscription: must be >= 1, got 0.5
"""

from __future__ import annotations

import copy
import re
import tomllib
import types
import typing
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..engine.profile_data import bundled_files, in_network_reduction
from ..errors import RegionNotSpec, StudyNotSpec, TopoError, closest, key_hint
from ..inputs import check_input, is_input_file, loads_toml, read_toml
from ..inputs import shown_value as _shown
from .model import Spec
from .overrides import override_label
from .sites import is_region_data
from ..resources import topologies_dir, topologies_installed

__all__ = ["load_spec", "spec_from_dict", "apply_overrides", "check_override_key", "bundled_specs", "bundled_regions", "bundled_dir", "DEFAULT_SPEC",
           "format_loc", "display_path"]

DEFAULT_SPEC = "h100-100k"


def bundled_dir() -> Path:
    """The folder of bundled specs (``topologies/``, shipped as package data)."""
    return topologies_dir()


def bundled_specs() -> list[str]:
    """Names of the bundled specs of one fabric, e.g. ``["dgx-h100-superpod", "h100-100k", ...]`` (regions of
    several sites are :func:`bundled_regions`)."""
    return [n for n, region in _bundled() if not region]


def bundled_regions() -> list[str]:
    """Names of the bundled specs of several sites (``[[sites]]``, see :mod:`topo.spec.sites`)."""
    return [n for n, region in _bundled() if region]


def _bundled() -> list[tuple[str, bool]]:
    d = bundled_dir()
    if not d.is_dir():
        return []
    return [(p.stem, bool(_REGION_LINE.search(p.read_text(encoding="utf-8")))) for p in sorted(d.glob("*.toml"))]


_REGION_LINE = re.compile(r"^\[\[sites\]\]", re.MULTILINE)


def resolve_spec_path(name_or_path: str | Path | None, *, one_site: bool = False) -> Path:
    """A spec file from a path, a bundled name (with or without ``.toml``), or None for the default; ``one_site``:
    a region's site, whose error lists (and suggests) only the bundled specs of one fabric, a region being refused
    there (ms55)."""
    if name_or_path is None:
        name_or_path = DEFAULT_SPEC
    p = Path(name_or_path)
    if p.is_file():
        return p
    stem = p.name[:-5] if p.name.endswith(".toml") else p.name
    candidate = bundled_dir() / f"{stem}.toml"
    if p.parent == Path(".") and candidate.is_file():
        return candidate
    if p.is_dir():
        raise TopoError("is a directory, not a spec file; give a .toml file or a bundled spec's name",
                        source=str(name_or_path))
    if is_input_file(p):  # a device, named pipe or socket: said as every input is (topo.inputs)
        check_input(p, "spec file (.toml) or a bundled spec's name")
    names = [n for n, region in _bundled() if not (one_site and region)]
    close = closest(stem, names)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if not names:
        raise TopoError(f"no such spec file, and no bundled specs in {bundled_dir()}: this installation of topo is "
                        "incomplete (the specs ship as package data)", source=str(name_or_path))
    what = "bundled spec of one fabric (a site's; regions are not sites)" if one_site else "bundled spec"
    raise TopoError(f"no such spec file or {what}; bundled: {', '.join(names)}{hint}", source=str(name_or_path))


def load_spec(name_or_path: str | Path | None = None, overrides: typing.Sequence[str] = ()) -> Spec:
    """Load and validate a spec file, a bundled spec by name, or the default (``h100-100k``).

    ``overrides`` are ``KEY=VALUE`` strings (as ``--set`` takes them) applied before validation.
    """
    path = resolve_spec_path(name_or_path)
    source = display_path(path)
    data = read_toml(path, "spec file (.toml)", source=source)
    if is_region_data(data):
        raise RegionNotSpec("is a region of several sites ([[sites]]) where one fabric's spec is expected: name one "
                            "of its sites' specs", source=source)
    if _is_study_data(data):
        raise StudyNotSpec(f"is a sweep study ({', '.join(k for k in _STUDY_ONLY if k in data)}), not a spec",
                           source=source)
    spec = spec_from_dict(data, source=source, overrides=overrides)
    spec._path = str(path)
    return spec


_STUDY_ONLY = ("axes", "compute", "seeds", "zip", "specs")
"""Top-level keys of a sweep study (``topo.sweep.study``) that no spec has."""


def _is_study_data(data: dict) -> bool:
    """True when a parsed TOML document is a sweep study rather than one fabric: it has a study's own top-level
    key and no ``[fabric]``."""
    return isinstance(data, dict) and "fabric" not in data and any(k in data for k in _STUDY_ONLY)


def spec_from_dict(data: dict, source: str = "<spec>", overrides: typing.Sequence[str] = ()) -> Spec:
    """Validate a spec given as a dict (the parsed TOML), after applying ``KEY=VALUE`` overrides."""
    data, set_paths = apply_overrides(data, overrides, source=source)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise _to_topo_error(exc, source, set_paths) from None
    spec._origin = source
    spec._set_paths = dict(set_paths)
    _check_sharp_technology(spec)
    return spec


def _check_sharp_technology(spec: Spec) -> None:
    """Refuse ``sharp = true`` on a tier of a technology whose switches cannot reduce in the network (its network
    file's ``in_network_reduction``: NVIDIA SHARP runs on InfiniBand Quantum switches only; walk25 priced SHARP over
    RoCE)."""
    fabric = spec.fabric
    at = next((i for i, t in enumerate(fabric.tiers) if t.sharp), None)
    if at is None:
        return
    reduces, where = in_network_reduction(fabric.technology)
    if reduces:
        return
    key = f"fabric.tiers[{at}].sharp"
    able = ", ".join(n for n in sorted(bundled_files()["network"]) if in_network_reduction(n)[0])
    source = spec.error_source(key)
    if source == spec.error_source(None):  # the tier's sharp is the file's own: did an override change the technology?
        source = spec.error_source("fabric.technology")
    raise TopoError(f"true on the {fabric.tiers[at].name!r} tier, but fabric.technology = {fabric.technology}, whose "
                    f"switches cannot reduce in the network ({where}: in_network_reduction = 0; NVIDIA SHARP runs on "
                    f"InfiniBand Quantum switches); allowed: sharp = false, or fabric.technology one of {able}",
                    source=source, key=key)


# --- overrides ------------------------------------------------------------------------------------------

_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def _key_segments(key: str, source: str | None = None) -> typing.Iterator[tuple[str, bool]]:
    """The segments of the dotted path ``key`` in turn, each ``(text, bracketed)``: ``fabric.tiers[1].radix`` ->
    ``("fabric", False), ("tiers", False), ("1", True), ("radix", False)``. The one reading of a key that
    :func:`apply_overrides` and :func:`check_override_key` share; lazy, so that a reader that stops early (a free
    table) reads no further. An unreadable segment raises :class:`TopoError` (with ``source``)."""
    pos = 0
    key = key.strip()
    while pos < len(key):
        if key[pos] == ".":
            if pos == 0 or key[pos - 1] == "." or pos == len(key) - 1:  # fuzz136: cluster..num_units set num_units
                raise TopoError(f"cannot read the key {key!r}: an empty part between dots; write it as a dotted "
                                "path such as fabric.tiers[1].oversubscription", source=source)
            pos += 1
            continue
        m = _SEGMENT.match(key, pos)
        if not m:
            raise TopoError(f"cannot read the key {key!r}; write it as a dotted path such as "
                            "fabric.tiers[1].oversubscription", source=source)
        pos = m.end()
        yield (m.group(2), True) if m.group(1) is None else (m.group(1), False)


def _parse_key(key: str, original: str) -> list[str | int]:
    parts = [int(token) if token.isdecimal() else token
             for token, _ in _key_segments(key, override_label(original))]
    if not parts:
        raise TopoError("empty key; write KEY=VALUE, e.g. cluster.num_units=8", source=override_label(original))
    return parts


def _parse_value(text: str, item: str):
    try:
        return loads_toml(f"v = {text}", f"--set {item}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string such as 400 Gb/s


def apply_overrides(data: dict, overrides: typing.Sequence[str], source: str = "<spec>"):
    """Apply ``KEY=VALUE`` overrides to a copy of ``data``.

    Keys are dotted paths; list items are addressed by index (``fabric.tiers[2]``) or, for named items such as
    tiers, by name (``fabric.tiers[spine]``). Values are read as TOML values (``8``, ``true``, ``"400 Gb/s"``)
    and otherwise kept as strings. An empty value (``KEY=``) removes the key (or the list item), so that, e.g.,
    ``cluster.num_units=`` then ``cluster.num_gpus=512`` changes how the size is given; an empty string is
    written ``KEY=""``. Returns the new dict and the normalised paths that were set.
    """
    data = copy.deepcopy(data)
    set_paths: dict[str, str] = {}
    for item in overrides:
        if "=" not in item:
            raise TopoError("expected KEY=VALUE, e.g. cluster.num_units=8 (or KEY= to remove a key)",
                            source=override_label(item))
        key, value = item.split("=", 1)
        remove = value.strip() == ""
        parts = _parse_key(key, item)
        node = data
        norm: list[str | int] = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, list):
                idx = _list_index(node, part, norm, item)
                norm.append(idx)
                if last and remove:
                    del node[idx]
                elif last:
                    node[idx] = _parse_value(value, item)
                else:
                    node = node[idx]
            elif isinstance(node, dict):
                if not isinstance(part, str):
                    raise TopoError(f"{format_loc(norm) or 'the spec'} is a table, not a list; "
                                    f"use a key name, not [{part}]", source=override_label(item))
                norm.append(part)
                if last and remove:
                    if part not in node:
                        there = ", ".join(map(str, node)) or "nothing"
                        raise TopoError(f"cannot remove {format_loc(norm)}: the spec does not set it "
                                        f"({format_loc(norm[:-1]) or 'the top level'} sets {there})",
                                        source=override_label(item))
                    del node[part]
                elif last:
                    node[part] = _parse_value(value, item)
                elif remove and part not in node:
                    raise TopoError(f"cannot remove {key.strip()}: the spec does not set {format_loc(norm)}",
                                    source=override_label(item))
                else:
                    node = node.setdefault(part, {})
            else:
                raise TopoError(f"{format_loc(norm)} is a value, not a table", source=override_label(item))
        set_paths[format_loc(norm)] = item
    return data, set_paths


def check_override_key(key: str, root: type[BaseModel] = Spec) -> None:
    """Raise :class:`TopoError` if the dotted path ``key`` names no field of a spec (``fabric.tiers[1].radx``: an
    unknown key, with the allowed ones and a close match). List items (``[1]``, ``[spine]``) and the keys of free
    tables (``plan``) are not checked here: they depend on the spec (:func:`apply_overrides` checks them)."""
    model: type[BaseModel] | None = root
    loc: list = []
    for part, bracketed in _key_segments(key):
        if bracketed:  # a list item
            loc.append(0)
            continue
        if model is None:
            return  # a free table or a value (apply_overrides says which)
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        if part not in fields:
            allowed = list(fields)
            hint = key_hint(part, allowed)
            where = format_loc(loc) or "the top level"
            raise TopoError(f"unknown key {part!r} in {where}; allowed: {', '.join(allowed)}{hint}")
        loc.append(part)
        model = _unwrap(fields[part].annotation)
    if not loc:
        raise TopoError("empty key; write a dotted path such as cluster.num_units")


def _list_index(node: list, part, norm, item) -> int:
    if isinstance(part, int):
        if not 0 <= part < len(node):
            raise TopoError(f"index {part} is out of range; {format_loc(norm)} has {len(node)} items "
                            f"(0 to {len(node) - 1})", source=override_label(item))
        return part
    names = [x.get("name") for x in node if isinstance(x, dict)]
    if part in names:
        return names.index(part)
    raise TopoError(f"{format_loc(norm)} has no item named {part!r}; names: {', '.join(map(str, names))}",
                    source=override_label(item))


# --- error formatting ------------------------------------------------------------------------------------

def format_loc(loc: typing.Sequence) -> str:
    """``('fabric', 'tiers', 2, 'oversubscription')`` -> ``fabric.tiers[2].oversubscription``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _unwrap(annotation):
    """The model class (or None) inside Optional[...], Annotated[...], list[...]."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(annotation):
            found = _unwrap(arg)
            if found is not None:
                return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _model_at(loc: typing.Sequence, root: type[BaseModel] = Spec) -> type[BaseModel] | None:
    model: type[BaseModel] | None = root
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        model = _unwrap(field.annotation)
    return model


def _allowed_keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _ratio(m) -> str | None:
    """``a:b`` as the one number a spec's oversubscription takes, the larger over the smaller, since it is at least 1
    (``2:1`` -> ``2``, ``8:7`` -> ``1.143``; walk28; Meta's "1:7 between 8 pods", written uplinks first, -> ``7``:
    rev69, the hint said 0.1429, which is refused in turn), or None where it is none (a 0 on either side)."""
    try:
        a, b = float(m[1]), float(m[2])
    except ValueError:
        return None
    return f"{max(a, b) / min(a, b):.4g}" if min(a, b) > 0 else None


def _list_example(loc: tuple, value) -> str:
    """How the list at ``loc`` is written: a table given once is written as ``[[...]]`` entries; anything else as a
    TOML array (walk36: ``sites[0].set = "cluster.num_units=2"`` was told "e.g. [[fabric.tiers]] entries")."""
    keys = [p for p in loc if isinstance(p, str) and p.isidentifier()]  # not list indices, nor union tags (list[str])
    if isinstance(value, dict) and keys:
        return f"[[{'.'.join(keys)}]] entries"
    return f"a TOML array: {keys[-1]} = [...]" if keys else "a TOML array"


def _describe(err: dict, root: type[BaseModel] = Spec) -> str:
    kind = err["type"]
    loc = err["loc"]
    value = err.get("input")
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1], root)
        allowed = _allowed_keys(model) if model else []
        hint = key_hint(str(loc[-1]), allowed)
        return f"unknown key {loc[-1]!r}; allowed: {', '.join(allowed)}{hint}"
    if kind == "missing":
        return "is required but missing"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        allowed = re.findall(r"'([^']*)'", expected)
        close = closest(str(value), allowed)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"must be one of {', '.join(allowed)}, got {_shown(value)}{hint}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(err.get("ctx", {}).values()), "?")
        return f"must be {op} {bound}, got {_shown(value)}"
    if kind in ("int_type", "int_from_float", "int_parsing"):
        return f"must be a whole number, got {_shown(value)}"
    if kind in ("float_type", "float_parsing", "finite_number"):
        ratio = re.fullmatch(r"\s*([0-9.]+)\s*:\s*([0-9.]+)\s*", value) if isinstance(value, str) else None
        number = _ratio(ratio) if ratio and loc and str(loc[-1]).endswith("oversubscription") else None  # describe prints 7:1
        hint = f" (a downlink:uplink ratio is one number, at least 1: write {number} for {ratio[1]}:{ratio[2]})" if number else ""
        return f"must be a finite number, got {_shown(value)}{hint}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {_shown(value)}"
    if kind in ("string_type",):
        return f"must be a string, got {_shown(value)}"
    if kind in ("too_short", "too_long"):
        return err["msg"][0].lower() + err["msg"][1:] + f", got {_shown(value)}"
    if kind == "model_type" or kind == "dict_type":
        return f"must be a table (a [section] in TOML), got {_shown(value)}"
    if kind == "list_type":
        return f"must be a list ({_list_example(loc, value)}), got {_shown(value)}"
    msg = err["msg"]
    if msg.startswith("Value error, "):
        return msg[len("Value error, "):]
    return f"{msg}, got {_shown(value)}"


def _to_topo_error(exc: ValidationError, source: str, set_paths: dict[str, str],
                   root: type[BaseModel] = Spec) -> TopoError:
    errors = sorted(exc.errors(), key=lambda e: (e["type"] != "extra_forbidden", e["type"] == "missing"))
    first = errors[0]
    if first["type"] == "extra_forbidden":
        # A misspelt key also leaves the right one missing; that is the same mistake, reported once.
        model = _model_at(first["loc"][:-1], root)
        close = closest(str(first["loc"][-1]), _allowed_keys(model) if model else [])
        if close:
            twin = tuple(first["loc"][:-1]) + (close[0],)
            errors = [e for e in errors if not (e["type"] == "missing" and tuple(e["loc"]) == twin)]
    key = format_loc(first["loc"])
    message = _describe(first, root)
    if len(errors) > 1:
        # each other key with its fault (walk17: "(also: cluster, fabric)" after the allowed keys read as more of them)
        others = [f"{format_loc(e['loc']) or '(top level)'}: {_describe(e, root)}" for e in errors[1:4]]
        more = f" and {len(errors) - 4} more" if len(errors) > 4 else ""
        message += f" (also: {'; '.join(others)}{more})"
    origin = next((orig for path, orig in set_paths.items() if key == path or key.startswith(path + ".")
                   or key.startswith(path + "[")
                   # an unknown key an override wrote: --set foo.bar=1 makes 'foo' (walk17)
                   or (first["type"] == "extra_forbidden" and path.startswith((key + ".", key + "[")))), None)
    src = f"{source} ({override_label(origin)})" if origin else source
    return TopoError(message, source=src, key=key or None)


def display_path(path: Path) -> str:
    """A path as the user would write it: relative to the working folder when below it; a bundled spec by its name
    where it is not a checkout's ``topologies/`` below the working folder (an installed package's folder, also one
    in a virtual environment below the working folder: walk14).

    Parameters
    ----------
    path : pathlib.Path
        A spec file's path.

    Returns
    -------
    str
        ``bundled spec NAME``, a path relative to the working folder, or the path as given.
    """
    bundled = path.resolve().parent == bundled_dir().resolve()
    if bundled and topologies_installed():
        return f"bundled spec {path.stem}"
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return f"bundled spec {path.stem}" if bundled else str(path)
