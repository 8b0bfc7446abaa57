"""The resolved structure of a folded Clos of any depth: counts per tier and the index arithmetic that joins them.

:func:`topo.fabric.builders.clos.plan_clos` makes a :class:`ClosLayout` from a spec; the fabric's arrays, the
router and the all-to-all loads read it. Nothing here loops over GPUs: every function takes numpy arrays.

Blocks. Servers form *units* (the servers under one leaf, or one leaf per rail). A switch tier ``t >= 1`` joins
blocks of the tier below: tier 1 joins ``joins`` units into a *pod*, tier 2 joins pods into an *island*, and so on;
the top tier joins everything. ``TierPlan.num_blocks`` is how many blocks the tier has (units for the leaves).

Groups and planes. The switches of tier ``t >= 1`` come in groups of ``switches_per_group``; a switch of tier
``t - 1`` has the same number of cables (``links_from_below``) to every switch of one group. A switch of tier ``t``
is numbered, in mixed radix, ``(block, rail group, j_1, ..., j_t)``: its block at depth ``t``, its rail group (rail-only
fabrics keep one Clos per rail; otherwise 0) and its index ``j_k`` in its group at every tier ``k <= t`` (its
*plane* coordinates). A switch ``(B, r, j_1 .. j_t)`` of tier ``t`` reaches the group ``(B // joins, r, j_1 .. j_t)``
of tier ``t + 1``: spine ``j`` of every pod goes to the cores of plane ``j``, core ``(j, j2)`` of every island to
the group ``(j, j2)`` above, and so on (the recursive, multi-plane fat tree).

Aggregates. The switches of tier ``t`` sharing ``(block, rail group)`` are an *aggregate* (a leaf by itself at
tier 0): with ECMP a flow from below spreads evenly over an aggregate's uplinks, so the router may represent them by
one resource. Their ids are contiguous: ``aggregate * switches_per_aggregate(t) + plane digits``.

Hosted top switches. The groups of the top tier can be small (a plane of a 4-tier fabric may give each of its
switches 6 links); one physical switch then hosts ``logical_per_switch`` consecutive switches of the arithmetic
above (:meth:`physical_switch`), so the tier has as many switches as its links need. Every count, port and node of
a :class:`TierPlan` is physical; the group arithmetic (``switches_per_group``, aggregates, link ids) is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

__all__ = ["TierPlan", "ClosLayout"]


@dataclass(frozen=True)
class TierPlan:
    """One scale-out tier, resolved: counts, ports and rates."""

    index: int
    name: str
    model: str
    radix: int
    down_rate_Bps: float
    up_rate_Bps: float
    down_ports: int  # used per switch
    up_ports: int  # per switch (0 for the top tier)
    num_switches: int
    num_groups: int  # groups this tier's switches form (units x rails for leaves; (block, rail, planes) above)
    switches_per_group: int
    links_from_below: int  # parallel links from each lower switch to each switch of this tier in its group
    latency_s: float
    sharp: bool
    power_W: float | None
    joins: int = 1  # blocks of the tier below in one block of this tier (units per pod for tier 1); 1 for leaves
    num_blocks: int = 1  # blocks at this tier's depth (units for the leaves, pods for tier 1, ...)
    block_name: str = ""  # what one of its blocks is called ("pod", "island"); the unit's name for the leaves
    logical_per_switch: int = 1  # top tier only: switches of its groups one physical switch hosts (see clos._pack)

    @property
    def logical_switches(self) -> int:
        """Switches as the groups count them (``num_groups * switches_per_group``): the index arithmetic's; more
        than ``num_switches`` when a top-tier switch hosts several (``logical_per_switch``)."""
        return self.num_switches * self.logical_per_switch

    @property
    def is_top(self) -> bool:
        return self.up_ports == 0

    @property
    def down_capacity_Bps(self) -> float:
        return self.num_switches * self.down_ports * self.down_rate_Bps

    @property
    def idle_ports(self) -> int:
        """Ports of the tier's switches that neither the links from below nor the uplinks use (every switch)."""
        return (self.radix - self.down_ports - self.up_ports) * self.num_switches

    def switches_for_ports(self, ports: int) -> int:
        """Switches of this tier's model that add at least ``ports`` ports in whole groups: the same number to each
        of its ``num_groups`` groups, as the builder lays a tier (``num_groups x switches_per_group``; at the top
        tier a group is a plane: a rail's, or the spines' plane coordinates below), so every plane keeps its share.

        Parameters
        ----------
        ports : int
            Ports to add.

        Returns
        -------
        int
            ``num_groups * ceil(ports / (num_groups * radix))`` (0 for no ports).
        """
        return self.num_groups * -(-max(0, ports) // (self.num_groups * self.radix))

    @property
    def up_capacity_Bps(self) -> float:
        return self.num_switches * self.up_ports * self.up_rate_Bps

    @property
    def oversubscription(self) -> float | None:
        """Downlink:uplink capacity (None for the top tier, which has no uplinks)."""
        if self.up_ports == 0:
            return None
        return (self.down_ports * self.down_rate_Bps) / (self.up_ports * self.up_rate_Bps)


@dataclass(frozen=True)
class ClosLayout:
    """Every integer the fabric's arrays and the router need: the regular structure, resolved."""

    kind: str
    unit_name: str
    num_gpus: int
    gpus_per_server: int
    gpus_per_domain: int
    num_servers: int
    nics_per_server: int
    nic_rate_Bps: float
    servers_per_unit: int
    num_units: int
    units_per_pod: int  # units under one tier-1 block (a pod); all units when tier 1 is the top
    num_pods: int  # tier-1 blocks
    leaves_per_unit: int  # 1 or the number of rails
    rail_groups: int  # 1, or the number of rails in rail-only
    tiers: tuple[TierPlan, ...] = field(default_factory=tuple)

    @property
    def num_domains(self) -> int:
        return self.num_gpus // self.gpus_per_domain

    @property
    def num_nics(self) -> int:
        return self.num_servers * self.nics_per_server

    @property
    def num_tiers(self) -> int:
        return len(self.tiers)

    @property
    def leaves_per_pod(self) -> int:
        return self.units_per_pod * self.leaves_per_unit

    @property
    def nic_ports_per_server_per_leaf(self) -> int:
        return self.nics_per_server // self.leaves_per_unit

    # --- the arithmetic of blocks, groups and planes (vectorised) ------------------------------------------
    @cached_property
    def _per_aggregate(self) -> tuple[int, ...]:
        out, p = [], 1
        for t in self.tiers:
            if t.index > 0:
                p *= t.switches_per_group
            out.append(p)
        return tuple(out)

    @cached_property
    def _units_per_block(self) -> tuple[int, ...]:
        out, p = [], 1
        for t in self.tiers:
            if t.index > 0:
                p *= t.joins
            out.append(p)
        return tuple(out)

    def switches_per_aggregate(self, tier: int) -> int:
        """Switches of tier ``tier`` in one aggregate (1 for the leaves: the product of the group sizes of tiers 1
        to ``tier``)."""
        return self._per_aggregate[tier]

    def num_aggregates(self, tier: int) -> int:
        return self.tiers[tier].logical_switches // self._per_aggregate[tier]

    def units_per_block(self, tier: int) -> int:
        """Units in one block of tier ``tier`` (1 for the leaves, ``units_per_pod`` for tier 1)."""
        return self._units_per_block[tier]

    def leaf_aggregate(self, tier: int, leaf):
        """The aggregate of tier ``tier`` above each leaf: ``(block, rail group)`` as one id (the leaf for 0)."""
        leaf = np.asarray(leaf)
        if tier == 0:
            return leaf
        unit, rail = leaf // self.leaves_per_unit, leaf % self.leaves_per_unit
        block = unit // self._units_per_block[tier]
        if self.rail_groups == 1:
            return block
        return block * self.rail_groups + rail % self.rail_groups

    def upper_group(self, tier: int, switch):
        """The group of tier ``tier + 1`` that each switch of tier ``tier`` reaches."""
        x = np.asarray(switch)
        above = self.tiers[tier + 1]
        if tier == 0:
            return self.leaf_aggregate(1, x)
        span = self.rail_groups * self._per_aggregate[tier]  # switches of one block of tier ``tier``
        return (x // span // above.joins) * span + x % span

    def upper_switch(self, tier: int, switch, j):
        """Switch ``j`` of the group of tier ``tier + 1`` that each switch of tier ``tier`` reaches."""
        return self.upper_group(tier, switch) * self.tiers[tier + 1].switches_per_group + np.asarray(j)

    def first_logical(self, tier: int, switch):
        """The first switch of the groups' arithmetic that each physical switch of tier ``tier`` hosts (itself,
        except at a top tier whose switches host several: ``TierPlan.logical_per_switch``)."""
        return np.asarray(switch) * self.tiers[tier].logical_per_switch

    def physical_switch(self, tier: int, logical):
        """The physical switch of tier ``tier`` that hosts each switch ``logical`` of the groups' arithmetic."""
        return np.asarray(logical) // self.tiers[tier].logical_per_switch

    def switch_plane(self, tier: int, switch):
        """The plane of each switch of tier ``tier >= 1``: ``rail group * s_1 + j_1`` (spine ``j`` of every pod and
        everything above it that spine reaches share plane ``j``)."""
        x = np.asarray(switch)
        span = self.rail_groups * self._per_aggregate[tier]
        return (x % span) // (self._per_aggregate[tier] // self.tiers[1].switches_per_group)

    def switch_block(self, tier: int, switch):
        """The block (at this tier's depth) of each switch of tier ``tier >= 1``."""
        return np.asarray(switch) // (self.rail_groups * self._per_aggregate[tier])

    def switch_rail_group(self, tier: int, switch):
        """The rail group of each switch of tier ``tier >= 1`` (0 unless rail-only)."""
        x = np.asarray(switch)
        return (x % (self.rail_groups * self._per_aggregate[tier])) // self._per_aggregate[tier]
