"""Hierarchical (2D) algorithms: inside the NVLink domain, then across domains rail by rail, then inside again.

With ``g`` ranks in each of ``D`` domains (as Horovod's and PyTorch's hierarchical all-reduce do):

- all-reduce: ring reduce-scatter inside each domain (every rank keeps ``S/g``), ring all-reduce of that
  ``S/g`` among the ranks of the same local index across domains (one rail each), ring all-gather inside.
  Uniform closed form: ``2(g-1) alpha + 2(g-1)/g S/B_nvlink + 2(D-1) alpha' + 2(D-1)/D (S/g)/B_net``.
- all-gather: across domains per local index (each gathers ``S/g``), then inside each domain.
- reduce-scatter: inside each domain, then across domains per local index.

Phases run one after the other (no overlap), which is what distinguishes this from NCCL's pipelined trees.
"""

from __future__ import annotations

from ..placement import Placement
from ..schedule import AlgorithmUnavailable, LatencyCounts, LatencyTerm, NodeShape, Schedule, ranks_per_domain
from .ring import ring_phase

__all__ = ["hierarchical_schedule"]


def hierarchical_schedule(shape: NodeShape, placement: Placement, collective: str) -> Schedule:
    """Hierarchical (2D) schedule: inside each NVLink domain, then across domains rail by rail, then inside
    again.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    collective : str
        all_reduce, all_gather or reduce_scatter.

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    g = ranks_per_domain(placement, "hierarchical algorithms")
    D = placement.num_domains
    if D < 2 or g < 2:
        raise AlgorithmUnavailable(f"hierarchical needs at least 2 domains of at least 2 ranks, got {D} domain(s) "
                                   f"of {g}; use ring")
    p = g * D
    G = placement.num_groups
    inside = placement.groups.reshape(G * D, g)
    across = placement.groups.reshape(G, D, g).transpose(0, 2, 1).reshape(G * g, D)  # one ring per local index
    phases, terms, intra, inter = [], [], 0, 0

    def add(groups, bytes_per_flow, repeat, traversals, label):
        nonlocal intra, inter
        ph, (a, b, m), _ = ring_phase(shape, groups, bytes_per_flow, repeat, label=label)
        terms.append(LatencyTerm(len(phases), 0, "ring", traversals, first=m))
        phases.append(ph)
        intra += traversals * a
        inter += traversals * b

    if collective == "all_reduce":
        add(inside, 1.0 / g, g - 1, 1, "reduce-scatter inside domains")
        add(across, 1.0 / (g * D), 2 * (D - 1), 2, "all-reduce across domains")
        add(inside, 1.0 / g, g - 1, 1, "all-gather inside domains")
    elif collective == "all_gather":
        add(across, 1.0 / p, D - 1, 1, "all-gather across domains")
        add(inside, 1.0 / g, g - 1, 1, "all-gather inside domains")
    elif collective == "reduce_scatter":
        add(inside, 1.0 / g, g - 1, 1, "reduce-scatter inside domains")
        add(across, 1.0 / p, D - 1, 1, "reduce-scatter across domains")
    else:
        raise AlgorithmUnavailable(f"hierarchical does not implement {collective}")
    counts = LatencyCounts("ring", intra_hops=intra, inter_hops=inter, multi_domain=True)
    return Schedule("hierarchical", "ring", phases, counts, terms)
