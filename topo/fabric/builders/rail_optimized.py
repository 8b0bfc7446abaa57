"""Rail-optimized fabrics: NIC r of every server in a scalable unit goes to that unit's leaf of rail r."""

from __future__ import annotations

from ...spec.model import Spec
from ..fabric import make_fabric
from .clos import Attachment, plan_clos

__all__ = ["rail_optimized", "ATTACHMENT"]

ATTACHMENT = Attachment(kind="rail_optimized", leaves_per_unit_is_rails=True, per_rail_groups=False,
                        default_unit_name="scalable unit")


def rail_optimized(spec: Spec):
    """Build a rail-optimized folded Clos, as NVIDIA's DGX SuperPOD.

    Parameters
    ----------
    spec : Spec
        A validated spec with ``fabric.kind = "rail_optimized"``. Each scalable unit of
        ``fabric.servers_per_unit`` servers has one leaf per rail (NIC index); spines join all leaves (all rails)
        of a pod, so traffic between rails can cross the spine; cores join pods.

    Returns
    -------
    Fabric
        Leaves carry ``rail`` and ``unit``; see :mod:`topo.fabric` for every attribute.

    Raises
    ------
    TopoError
        When the design cannot be built, naming the key and what would fit.

    Notes
    -----
    Reproduces the DGX SuperPOD H100 compute fabric (``topologies/dgx-h100-superpod.toml``): scalable units of
    32 DGX H100, 8 rails, QM9700 64-port NDR switches, non-blocking; 4 SUs use 32 leaves and 16 spines (NVIDIA
    DGX SuperPOD H100 reference architecture, Table 4).
    """
    return make_fabric(spec, plan_clos(spec, ATTACHMENT))
