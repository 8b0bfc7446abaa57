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
from ..route import Routed, Router
from .base import AlgorithmUnavailable, LatencyCounts, Phase, Plan, ranks_per_domain
from .nvls import switch_reduce_loads

__all__ = ["sharp_plan"]


def _direct(res: np.ndarray, weight: float, latency: np.ndarray) -> Routed:
    n = res.size
    return Routed(res=res, weight=np.full(n, weight), flow=np.arange(n), num_flows=n, flow_bytes=np.full(n, weight),
                  latency_s=latency, network=np.ones(n, dtype=bool))


def sharp_plan(router: Router, placement: Placement) -> Plan:
    f = router.fabric
    L = f.layout
    D = placement.num_domains
    if D < 2:
        raise AlgorithmUnavailable("nothing to reduce in the network: the ranks share one NVLink domain")
    g = ranks_per_domain(placement, "SHARP")
    gpus = placement.gpus
    nics = f.gpu_nic(gpus)
    leaves = f.nic_leaf(nics)
    groups = f.leaf_group(leaves)
    tiers_used = 1 + (np.unique(leaves).size > 1) + (np.unique(groups).size > 1)
    lacking = [t.name for t in L.tiers[:tiers_used] if not t.sharp]
    if lacking:
        raise AlgorithmUnavailable(f"the {', '.join(lacking)} switches cannot reduce in the network "
                                   "(set sharp = true on their tier)")
    share = 1.0 / g
    parts = []
    if g > 1:
        if f.spec.nvls:
            parts.append(switch_reduce_loads(router, gpus, g))
        else:  # direct reduce-scatter + all-gather: 2(g-1)/g each way
            lo = f.link_offset["nvlink"]
            w = 2.0 * (g - 1) / g
            link = lo + gpus
            parts.append(Routed(res=np.r_[2 * link, 2 * link + 1], weight=np.full(2 * gpus.size, w),
                                flow=np.r_[np.arange(gpus.size), np.arange(gpus.size)], num_flows=gpus.size,
                                flow_bytes=np.full(gpus.size, 2 * w), latency_s=np.zeros(gpus.size),
                                network=np.zeros(gpus.size, dtype=bool)))
    lo = f.link_offset
    lat = router.res_latency_s
    # GPU <-> NIC <-> leaf, both ways
    pcie = lo["pcie"] + (nics if f.pcie_per_nic else gpus)
    nic = lo["nic"] + nics
    for ids in (pcie, nic):
        parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], share, np.r_[lat[2 * ids], lat[2 * ids + 1]]))
    depth_s = float(lat[2 * nic].max() + lat[2 * pcie].max())
    rails = f.nic_rail(nics)
    if tiers_used >= 2:
        t0, t1 = L.tiers[0], L.tiers[1]
        S2, m1, u0 = t1.switches_per_group, t1.links_from_below, t0.up_ports
        group_of = np.repeat(np.arange(placement.num_groups), placement.num_ranks)
        # each (communicator, leaf, rail tree) sends one reduced stream up
        leaf_rail = np.unique(np.c_[leaves, rails, group_of], axis=0)
        j = leaf_rail[:, 1] % S2
        ids = lo["up:0"] + leaf_rail[:, 0] * u0 + j * m1
        parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], share, np.r_[lat[2 * ids], lat[2 * ids]]))
        depth_s += float(lat[2 * ids].max())
        if tiers_used >= 3:
            t2 = L.tiers[2]
            u1, m2 = t1.up_ports, t2.links_from_below
            grp_rail = np.unique(np.c_[f.leaf_group(leaf_rail[:, 0]), leaf_rail[:, 1], leaf_rail[:, 2]], axis=0)
            spine = grp_rail[:, 0] * S2 + grp_rail[:, 1] % S2
            ids = lo["up:1"] + spine * u1 + 0 * m2
            parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], share, np.r_[lat[2 * ids], lat[2 * ids]]))
            depth_s += float(lat[2 * ids].max())
    routed = Routed.concat(parts)
    counts = LatencyCounts("collnet", intra_hops=2 * (g - 1), routed_s=2 * depth_s, multi_domain=True)
    return Plan("sharp", "collnet", [Phase(routed, 1.0, "in-network reduction")], counts)
