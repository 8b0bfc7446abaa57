"""A study's values checked before anything runs: a typo'd model name, an unknown collective, a size that is not
one, ``pue = 0.5`` are one error line naming the study file and the axis, not one error row per point found after
an hour of computing. What depends on the fabric (a layout that does not divide its GPUs, a radix too small for an
oversubscription) is still an error row at its point."""

from __future__ import annotations

import tomllib

from ..engine.collectives import normalize_collective
from ..engine.options import EstimateOptions
from ..engine.profiles import resolve_profile
from ..engine.traffic_file import load_traffic
from ..errors import TopoError
from ..fabric.failures import check_failure
from ..plan.catalog import load_catalog
from ..spec import spec_from_dict
from ..spec.sites import is_region_data
from ..training.model import load_model
from ..training.multisite import check_shares
from ..training.parallel import layout_pairs
from ..units import UnitError, parse_size_bytes
from .point import ESTIMATE_KEYS, toml_value

__all__ = ["check_values", "check_failures", "check_technology"]

_PLAN_TABLES = {"days": "workload", "mfu": "workload", "pue": "facility"}


def _profile(v) -> None:
    try:
        resolve_profile(v, None)
    except TopoError as exc:
        if exc.key != "profile.base" and not exc.message.startswith("the default profile depends on the fabric"):
            raise


def _checker(key: str):
    """The check of one value of axis ``key`` (raises TopoError), or None for an axis checked at its point."""
    if key == "model":
        return load_model
    if key == "traffic":
        return load_traffic
    if key == "collective":
        return normalize_collective
    if key == "size":
        return parse_size_bytes
    if key == "layout":
        return lambda v: layout_pairs(str(v))
    if key == "profile":
        return _profile
    if key == "shares":
        return check_shares
    if key in _PLAN_TABLES:
        return lambda v: load_catalog([(key, {_PLAN_TABLES[key]: {key: v}})])
    if key in ESTIMATE_KEYS:
        return lambda v: EstimateOptions.from_kwargs(**{key: v})
    return None


def check_values(axes: dict, source: str, placeholder: str) -> None:
    """Check every distinct value of every axis that can be checked without a fabric.

    Parameters
    ----------
    axes : dict
        Axis name -> list of values (:attr:`topo.sweep.Study.axes`).
    source : str
        The study file, for the error line.
    placeholder : str
        The seed placeholder: a value holding it is checked at its points, once expanded.

    Raises
    ------
    TopoError
        ``<study>: axes.<name>: <value>: <what is wrong>``.
    """
    if "hash_seed" in axes and "traffic" not in axes and "hash" not in axes.get("ecmp", []):
        raise TopoError("draws other ECMP hash collisions, and no point hashes (ecmp is ideal): the seed would "
                        "change nothing; add ecmp = \"hash\" to the axes", source=source, key="axes.hash_seed")
    for key, values in axes.items():
        check = _checker(key)
        if check is None:
            continue
        for v in values:
            if isinstance(v, str) and placeholder in v:
                continue
            try:
                check(v)
            except TopoError as exc:
                where = [exc.source if exc.source not in (None, str(v)) else None,
                         exc.key if exc.key not in (None, key) else None]
                said = exc.message.removeprefix(f"{v!r}: ")  # rev67: a profile's error names the value too
                raise TopoError(": ".join([repr(v)] + [w for w in where if w] + [said]), source=source,
                                key=f"axes.{key}") from None
            except UnitError as exc:
                raise TopoError(f"{v!r}: {exc}", source=source, key=f"axes.{key}") from None


def _tier_names(specs: dict, axes: dict) -> list[list[str]] | None:
    """Each of the study's specs' tier names from the leaves up, or None where a point may have others: a region, a
    spec that grows tiers, an axis over the tiers."""
    if any(k.startswith(("fabric.tiers", "fabric.grow_tiers")) for k in axes):
        return None
    out: list[list[str]] = []
    for _, text in specs.values():
        fabric = tomllib.loads(text).get("fabric")
        if not isinstance(fabric, dict) or fabric.get("grow_tiers") or not isinstance(fabric.get("tiers"), list):
            return None
        out.append([t["name"] for t in fabric["tiers"] if isinstance(t, dict) and isinstance(t.get("name"), str)])
    return out


def check_failures(axes: dict, specs: dict, source: str, placeholder: str, seeds) -> None:
    """Check every failure of the ``fail`` axis, each seed put in, as far as it can be without a fabric
    (:func:`topo.fabric.failures.check_failure`: the form, and a ``random:`` level or tier some spec of the study
    has): walk25's ``random:link:0.01:{seed}`` was 24 error rows after the points ran.

    Parameters
    ----------
    axes : dict
        Axis name -> list of values.
    specs : dict
        The study's specs, ref -> (source, TOML text).
    source : str
        The study file, for the error line.
    placeholder : str
        The seed placeholder in a value.
    seeds : sequence of int
        The study's seeds (put in for the placeholder).

    Raises
    ------
    TopoError
        ``<study>: axes.fail: <value>: <what is wrong>``.
    """
    tiers = _tier_names(specs, axes)
    for v in axes.get("fail", []):
        for text in dict.fromkeys(str(v).replace(placeholder, str(s)) for s in (list(seeds) or [0])):
            for item in (p.strip() for p in text.split(",") if p.strip()):
                try:
                    check_failure(item, tiers)
                except TopoError as exc:
                    raise TopoError(f"{v!r}: {exc.message}", source=source, key="axes.fail") from None


def check_technology(axes: dict, specs: dict, zipped: list, source: str) -> None:
    """Check each value of a ``fabric.technology`` axis against every spec of the study with ``sharp = true`` on a
    tier, by the spec's own rule (:func:`topo.spec.load.spec_from_dict`: SHARP only where the technology's switches
    reduce, its network file's ``in_network_reduction``): rev66's RoCE point was an error row after the others ran.
    Left to the points where an axis sets the tiers, or the technology is zipped with the spec.

    Parameters
    ----------
    axes : dict
        Axis name -> list of values.
    specs : dict
        The study's specs, ref -> (source, TOML text).
    zipped : list of list of str
        The study's zip groups.
    source : str
        The study file, for the error line.

    Raises
    ------
    TopoError
        ``<study>: axes.fabric.technology: <value>: <the spec's line> (in spec <ref>)``.
    """
    key = "fabric.technology"
    if key not in axes or any(k.startswith("fabric.tiers") for k in axes) or \
            any(key in g and "spec" in g for g in zipped):
        return
    for ref, (_, text) in specs.items():
        data = tomllib.loads(text)
        if is_region_data(data):
            continue
        for v in axes[key]:
            try:
                spec_from_dict(data, source=ref, overrides=[f"{key}={toml_value(v)}"])
            except TopoError as exc:
                if (exc.key or "").endswith(".sharp"):
                    raise TopoError(f"{v!r}: {exc.key}: {exc.message} (in spec {ref})", source=source,
                                    key=f"axes.{key}") from None
