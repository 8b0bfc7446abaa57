"""SHARP-style in-network all-reduce (NCCL's CollNet), where the spec says the switches can reduce.

Inside each NVLink domain the ranks reduce-scatter (in the NVSwitch when it has NVLS, else directly over NVLink),
so each rank holds ``S/g``; each rank sends its share up through its NIC into a reduction tree of switches (one
tree per rail: every leaf with ranks of that rail sends one reduced stream up to the tree's spine, spines of
different pods to one core), the root returns the result down the same tree, and the domain all-gathers. All of
it runs concurrently on successive chunks. A NIC carries ``S/g`` each way (a ring carries about ``2 S/g``), and
every switch uplink of a tree carries one stream, whatever the number of ranks below it: the traffic above the
leaf no longer grows with the job, which is what SHARP is for.
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..schedule import (AlgorithmUnavailable, InNetworkReduce, InSwitchReduce, LatencyCounts, LatencyTerm,
                        NodeShape, Schedule, SchedulePhase, ranks_per_domain)

__all__ = ["sharp_schedule"]


def sharp_schedule(shape: NodeShape, placement: Placement) -> Schedule:
    """In-domain reduce-scatter, the rail trees of switches, in-domain all-gather, all at once.

    Whether the switches can reduce is the router's to say (it owns the tiers): it raises AlgorithmUnavailable if
    not.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    D = placement.num_domains
    if D < 2:
        raise AlgorithmUnavailable("nothing to reduce in the network: the ranks share one NVLink domain")
    g = ranks_per_domain(placement, "SHARP")
    gpus = placement.gpus
    parts, terms = [], []
    comm = np.repeat(np.arange(placement.num_groups), placement.num_ranks)
    parts.append(InNetworkReduce(gpus, comm, 1.0 / g))
    terms.append(LatencyTerm(0, 0, "max", 2.0))  # up the tree and back down
    if g > 1:
        # in the NVSwitch when it has NVLS (S(1+1/g) each way), else a direct reduce-scatter + all-gather
        # over NVLink (2(g-1)/g each way)
        parts.append(InSwitchReduce(gpus, 1.0 + 1.0 / g if shape.nvls else 2.0 * (g - 1) / g))
    counts = LatencyCounts("collnet", intra_hops=2 * (g - 1), multi_domain=True)
    return Schedule("sharp", "collnet", [SchedulePhase(parts, 1.0, "in-network reduction")], counts, terms)
