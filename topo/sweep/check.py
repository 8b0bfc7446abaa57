"""A study's values checked before anything runs: a typo'd model name, an unknown collective, a size that is not
one, ``pue = 0.5`` are one error line naming the study file and the axis, not one error row per point found after
an hour of computing. What depends on the fabric (a layout that does not divide its GPUs, a radix too small for an
oversubscription) is still an error row at its point."""

from __future__ import annotations

from ..engine.collectives import normalize_collective
from ..engine.options import EstimateOptions
from ..engine.profiles import resolve_profile
from ..engine.traffic_file import load_traffic
from ..errors import TopoError
from ..plan.catalog import load_catalog
from ..training.model import load_model
from ..training.parallel import layout_pairs
from ..units import UnitError, parse_size_bytes
from .point import ESTIMATE_KEYS

__all__ = ["check_values"]

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
                raise TopoError(": ".join([repr(v)] + [w for w in where if w] + [exc.message]), source=source,
                                key=f"axes.{key}") from None
            except UnitError as exc:
                raise TopoError(f"{v!r}: {exc}", source=source, key=f"axes.{key}") from None
