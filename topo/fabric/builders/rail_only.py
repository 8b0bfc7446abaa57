"""Rail-only fabrics: one Clos per rail and no spine between rails; cross-rail traffic crosses NVLink."""

from __future__ import annotations

from ...spec.model import Spec
from ..fabric import make_fabric
from .clos import Attachment, plan_clos

__all__ = ["rail_only", "ATTACHMENT"]

ATTACHMENT = Attachment(kind="rail_only", leaves_per_unit_is_rails=True, per_rail_groups=True,
                        default_unit_name="scalable unit")


def rail_only(spec: Spec):
    """Build a rail-only fabric (Wang et al., "Rail-only: A Low-Cost High-Performance Network for Training LLMs
    with Trillion Parameters"): GPUs with the same local rank in every NVLink domain share a per-rail Clos.

    Parameters
    ----------
    spec : Spec
        A validated spec with ``fabric.kind = "rail_only"``. Leaves are per (unit, rail) as in a rail-optimized
        fabric, but spines (and cores) serve one rail only: no switch joins two rails.

    Returns
    -------
    Fabric
        Every switch carries its ``rail``; see :mod:`topo.fabric`.

    Raises
    ------
    TopoError
        When the design cannot be built, naming the key and what would fit.

    Notes
    -----
    A flow between rails must first move over NVLink to the GPU on the destination's rail (NCCL's PXN does
    this); :mod:`topo.engine.route` routes it so. The paper reports 38-77% lower network cost than rail-optimized.
    """
    return make_fabric(spec, plan_clos(spec, ATTACHMENT))
