"""Fat tree (ToR) fabrics: every NIC of a server goes to the same leaf, as in Meta's racks."""

from __future__ import annotations

from ...spec.model import Spec
from ..fabric import make_fabric
from .clos import Attachment, plan_clos

__all__ = ["fat_tree", "ATTACHMENT"]

ATTACHMENT = Attachment(kind="fat_tree", leaves_per_unit_is_rails=False, per_rail_groups=False,
                        default_unit_name="rack")


def fat_tree(spec: Spec):
    """Build a folded-Clos fat tree whose leaves are top-of-rack switches.

    Parameters
    ----------
    spec : Spec
        A validated spec with ``fabric.kind = "fat_tree"``. ``fabric.servers_per_unit`` servers share a leaf
        (ToR), all their NICs on it; spines join the leaves of a pod, cores join pods (3 tiers).

    Returns
    -------
    Fabric
        Nodes carry ``role``, ``tier``, ``rail`` (NIC index), ``server``, ``domain``, ``unit`` (rack), ``pod``,
        ``plane``; links ``level``, ``bandwidth_Bps``, ``latency_s`` (see :mod:`topo.fabric`).

    Raises
    ------
    TopoError
        When the design cannot be built (ports beyond a radix, counts that do not divide), naming the key.

    Notes
    -----
    Reproduces Meta's 24K-GPU Llama 3 RoCE clusters (``topologies/meta-llama3-24k.toml``): 2 servers (16 GPUs)
    per rack switch, 192 racks per pod under full-bisection cluster switches, 8 pods joined 1:7 oversubscribed
    (Llama 3 paper, arXiv 2407.21783, Sec. 3.3.1).
    """
    return make_fabric(spec, plan_clos(spec, ATTACHMENT))
