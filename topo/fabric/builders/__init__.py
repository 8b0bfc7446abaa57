"""Builders: a validated spec becomes a :class:`~topo.fabric.fabric.Fabric`, one builder per fabric kind."""

from __future__ import annotations

from ...errors import TopoError
from ...spec.model import Spec
from .fat_tree import fat_tree
from .rail_only import rail_only
from .rail_optimized import rail_optimized

__all__ = ["build_fabric", "fat_tree", "rail_optimized", "rail_only", "BUILDERS"]

BUILDERS = {"fat_tree": fat_tree, "rail_optimized": rail_optimized, "rail_only": rail_only}


def build_fabric(spec: Spec):
    """Build the fabric a spec describes, with the builder of its ``fabric.kind``.

    A design that cannot be built raises :class:`~topo.errors.TopoError` naming the spec's file and key.
    """
    try:
        return BUILDERS[spec.fabric.kind](spec)
    except TopoError as exc:
        raise TopoError(exc.message, source=exc.source or spec.error_source(exc.key), key=exc.key) from None
