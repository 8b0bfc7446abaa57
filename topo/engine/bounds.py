"""A lower bound on a schedule's bandwidth part from the ends of its transfers alone, without routing them.

Routing a schedule over 100,000 GPUs costs a few tenths of a second per candidate algorithm; when one candidate is
already costed, another whose bound is not below it cannot be the fastest and need not be routed
(:func:`topo.engine.estimate.evaluate` with ``at_sizes``).

A phase lasts at least ``max_r load_r / capacity_r`` over its resources (:func:`topo.engine.cost.cost_schedule` under
equal sharing; max-min sharing can only take longer), and for any set ``R`` of resources that maximum is at least
``sum_R load / sum_R capacity``. The sets used here are *cuts* whose loads are known from the transfers' ends: the
GPUs fall into groups, and a transfer between two groups must leave the first through the cut's resources of that
group and enter the second through the second's:

- **NVLink domains, through their NICs.** A transfer between domains leaves its domain through one of the domain's
  NICs (its own, a PXN proxy's or a failed NIC's stand-in: always a NIC of the domain) and enters the other's through
  one of its NICs: the NIC-to-leaf cables of each domain, up and down.
- **the blocks of each switch tier, through the cables above them.** Blocks of tier ``k`` (the scalable units of the
  leaves, the pods of the spines, the islands under a 4-tier fabric's top) are joined only through tier ``k + 1``:
  a transfer between two blocks crosses the cables from tier ``k`` up to ``k + 1`` of its source's block, and down
  into its destination's (ECMP aggregates or cables, as the router counts them). Used for a tier only when every
  NVLink domain lies inside one of its blocks (else a transfer could leave a block over NVLink).

For each cut and group, the bytes leaving it over its capacity out, and the bytes entering it over its capacity in;
the largest is the phase's bound. Transfers are the parts that ring, tree and point-to-point schedules are made of;
other parts (an all-to-all loaded from counts, in-switch and in-network reductions) add nothing to the bound, which
stays a lower bound.
"""

from __future__ import annotations

import numpy as np

from ..fabric.levels import Level
from .route import Router
from .schedule import Schedule, Transfers

__all__ = ["seconds_per_byte_bound"]

# the bound is often exact (every resource of a cut equally loaded): it is returned this much lower (relative), so
# that the rounding of its sums can never lift it above the routed figure
_ROUNDING = 1e-9


def seconds_per_byte_bound(schedule: Schedule, router: Router, capacity_Bps: np.ndarray) -> float:
    """A lower bound on :attr:`topo.engine.cost.Costed.seconds_per_byte` of ``schedule`` on ``router``'s fabric.

    Parameters
    ----------
    schedule : Schedule
    router : Router
        The router the schedule would be loaded on (its ECMP mode decides the resources of the tiers' cuts).
    capacity_Bps : numpy.ndarray
        Usable capacity per resource id (:func:`topo.engine.cost.usable_capacity`).

    Returns
    -------
    float
        Seconds per byte of message, summed over phases and repeats; never above what routing the schedule and
        costing it gives.
    """
    cuts = None
    total = 0.0
    for ph in schedule.phases:
        parts = [p for p in ph.parts if isinstance(p, Transfers) and p.num_flows]
        if not parts:
            continue
        src = np.concatenate([np.asarray(p.src, dtype=np.int64).ravel() for p in parts])
        dst = np.concatenate([np.asarray(p.dst, dtype=np.int64).ravel() for p in parts])
        nbytes = np.concatenate([np.broadcast_to(np.asarray(p.per_msg_byte, dtype=np.float64), (p.num_flows,))
                                 for p in parts])
        cuts = cuts if cuts is not None else _cuts(router, capacity_Bps)
        bound = 0.0
        for gpus_per_group, out_Bps, in_Bps in cuts:
            g_s, g_d = src // gpus_per_group, dst // gpus_per_group
            across = g_s != g_d
            if not across.any():
                break  # groups of the next cuts hold these ones: nothing crosses them either
            n = out_Bps.size
            leaving = np.bincount(g_s[across], weights=nbytes[across], minlength=n)
            entering = np.bincount(g_d[across], weights=nbytes[across], minlength=n)
            bound = max(bound, _ratio_max(leaving, out_Bps), _ratio_max(entering, in_Bps))
        total += ph.repeat * bound
    return float(total) * (1.0 - _ROUNDING)


def _ratio_max(load: np.ndarray, cap: np.ndarray) -> float:
    """``max(load / cap)`` over the groups that carry bytes (infinite where they have no capacity)."""
    busy = load > 0
    if not busy.any():
        return 0.0
    with np.errstate(divide="ignore"):
        return float(np.max(load[busy] / cap[busy]))


def _cuts(router: Router, capacity_Bps: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Each cut as ``(GPUs per group, capacity out of each group, capacity into each group)``, from the NVLink
    domains' NICs up to the blocks under the top tier (groups of GPUs numbered consecutively, as the fabric numbers
    them: a group's GPUs are ``g * size .. (g + 1) * size - 1``)."""
    f = router.fabric
    L = f.layout
    # NVLink domains, through their NICs' cables to the leaves
    nics = np.arange(L.num_servers * L.nics_per_server)
    link = router.paths.nic_link(nics)
    dom = f.gpu_domain(f.nic_server(nics) * L.gpus_per_server)
    n = int(L.num_domains)
    cuts = [(L.gpus_per_domain, np.bincount(dom, weights=capacity_Bps[2 * link], minlength=n),
             np.bincount(dom, weights=capacity_Bps[2 * link + 1], minlength=n))]
    gpus_per_unit = L.servers_per_unit * L.gpus_per_server
    for k in range(L.num_tiers - 1):  # the blocks of tier k, through the cables from tier k up to k + 1
        size = L.units_per_block(k) * gpus_per_unit
        if size % L.gpus_per_domain:
            continue
        na = L.num_aggregates(k)
        if router.virtual:  # ideal ECMP: transfers load the boundary's aggregates
            up = capacity_Bps[router.aggregate_start(k) + np.arange(na)]
            down = capacity_Bps[router.aggregate_start(k, True) + np.arange(na)]
        else:  # hashed: the cables, grouped by aggregate (the uplinks of one aggregate are consecutive)
            sl = f.level_slice(Level.uplink(k))
            ids = np.arange(sl.start, sl.stop)
            up = capacity_Bps[2 * ids].reshape(na, -1).sum(axis=1)
            down = capacity_Bps[2 * ids + 1].reshape(na, -1).sum(axis=1)
        # the block of each aggregate: a leaf's unit for k = 0 (one block per unit), (block, rail group) above
        a = np.arange(na)
        block = a // L.leaves_per_unit if k == 0 else (a // L.rail_groups if L.rail_groups > 1 else a)
        nb = -(-L.num_gpus // size)
        cuts.append((size, np.bincount(block, weights=up, minlength=nb), np.bincount(block, weights=down,
                                                                                     minlength=nb)))
    return cuts
