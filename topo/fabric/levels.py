"""Levels of links and the hop slots of a path: named, typed values instead of bare integers.

A fabric's links fall into levels, from the GPU outwards:

=====================  ==========================================================================
``Level.NVLINK``       GPU to its NVLink domain's NVSwitch
``Level.PCIE``         GPU to NIC (the host link)
``Level.NIC``          NIC to its leaf (scale-out tier 0)
``Level.uplink(k)``    a switch of scale-out tier ``k`` to one of tier ``k + 1`` (``k = 0`` is leaf-spine)
``Level.DCI``          a long-haul span between two sites' attach tiers (:mod:`topo.fabric.region`)
=====================  ==========================================================================

A level is stored in the fabric's link table as a small integer (:attr:`Level.code`); every module names it
through this class (``Level.uplink(t.index)``, ``Level.into_tier(t)``) and never by its number, so a fabric may have
any number of switch tiers.

:class:`PathSlots` names the columns of a routed path table (one row per flow, one resource id per hop): the sending
half (NVLink to the proxy GPU, its host link, the NIC), one up and one down cable per tier boundary, and the
receiving half (the NIC, its host link, NVLink from a stand-in NIC's GPU). Its width grows with the number of tiers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property

__all__ = ["Level", "LevelKind", "PathSlots"]


class LevelKind(Enum):
    """What joins the two ends of a link."""

    NVLINK = "nvlink"
    PCIE = "pcie"
    NIC = "nic"
    UPLINK = "uplink"
    DCI = "dci"


_FIRST_UPLINK = 3  # codes 0, 1, 2 are NVLink, PCIe and NIC; uplink(k) is 3 + k
_DCI = 127  # above every uplink (8 tiers at most) and within the link table's int8


@dataclass(frozen=True, order=True)
class Level:
    """One level of links (see the module doc). Compare and hash by value; ``code`` is the link table's value."""

    code: int

    # the fixed levels are class attributes set below the class (a frozen dataclass cannot refer to itself here)
    NVLINK = None  # type: Level
    PCIE = None  # type: Level
    NIC = None  # type: Level
    DCI = None  # type: Level

    def __post_init__(self):
        if not isinstance(self.code, int) or self.code < 0:
            raise ValueError(f"a level code is a whole number >= 0, got {self.code!r}")

    @classmethod
    def uplink(cls, tier: int) -> "Level":
        """The cables from scale-out tier ``tier`` up to tier ``tier + 1``."""
        if tier < 0:
            raise ValueError(f"a tier index is >= 0, got {tier}")
        return cls(_FIRST_UPLINK + tier)

    @classmethod
    def into_tier(cls, tier: int) -> "Level":
        """The links that reach scale-out tier ``tier`` from below: NIC links for the leaves, else the uplinks of
        the tier below."""
        return cls.NIC if tier == 0 else cls.uplink(tier - 1)

    @classmethod
    def out_of_tier(cls, tier: int) -> "Level":
        """The links that leave scale-out tier ``tier`` upwards."""
        return cls.uplink(tier)

    @classmethod
    def all(cls, num_tiers: int) -> tuple["Level", ...]:
        """Every level of a fabric of ``num_tiers`` scale-out tiers, in link-table order."""
        return (cls.NVLINK, cls.PCIE, cls.NIC) + tuple(cls.uplink(k) for k in range(num_tiers - 1))

    @property
    def kind(self) -> LevelKind:
        if self.code == _DCI:
            return LevelKind.DCI
        return (LevelKind.NVLINK, LevelKind.PCIE, LevelKind.NIC)[self.code] if self.code < _FIRST_UPLINK \
            else LevelKind.UPLINK

    @property
    def lower_tier(self) -> int | None:
        """The scale-out tier at the lower end (None for NVLink, PCIe, NIC and DCI links)."""
        return self.code - _FIRST_UPLINK if _FIRST_UPLINK <= self.code < _DCI else None

    @property
    def upper_tier(self) -> int | None:
        """The scale-out tier at the upper end (0 for NIC links; None for NVLink, PCIe and DCI)."""
        if _FIRST_UPLINK <= self.code < _DCI:
            return self.code - _FIRST_UPLINK + 1
        return 0 if self.code == 2 else None

    @property
    def is_network(self) -> bool:
        """True for the scale-out links (NIC and switch cables)."""
        return self.code >= 2

    def name_in(self, tier_names) -> str:
        """The level's name in a fabric whose tiers are called ``tier_names`` (``nic-leaf``, ``leaf-spine``)."""
        if self.kind is LevelKind.NVLINK:
            return "nvlink"
        if self.kind is LevelKind.PCIE:
            return "pcie"
        if self.kind is LevelKind.NIC:
            return f"nic-{tier_names[0]}"
        if self.kind is LevelKind.DCI:
            return "dci"
        k = self.lower_tier
        return f"{tier_names[k]}-{tier_names[k + 1]}"


Level.NVLINK = Level(0)
Level.PCIE = Level(1)
Level.NIC = Level(2)
Level.DCI = Level(_DCI)


@dataclass(frozen=True)
class PathSlots:
    """The columns of a path table for a fabric of ``num_tiers`` scale-out tiers (see the module doc).

    A path is ``[to_nvswitch, to_proxy, send_pcie, send_nic, up(0) .. up(T-2), down(T-2) .. down(0), recv_nic,
    recv_pcie, back_to_nvswitch, back_to_gpu]``; a flow inside an NVLink domain uses ``to_nvswitch`` (its source's
    NVLink up) and ``to_proxy`` (the destination's NVLink down).
    """

    num_tiers: int

    TO_NVSWITCH = 0  # source GPU -> NVSwitch (PXN hop, or an intra-domain flow's first hop)
    TO_PROXY = 1  # NVSwitch -> the GPU beside the sending NIC (or an intra-domain flow's destination)
    SEND_PCIE = 2
    SEND_NIC = 3

    @property
    def boundaries(self) -> int:
        """Tier boundaries a path may cross: one fewer than the tiers."""
        return max(0, self.num_tiers - 1)

    def up(self, k: int) -> int:
        """The cable from tier ``k`` up to tier ``k + 1``."""
        return 4 + k

    def down(self, k: int) -> int:
        """The cable from tier ``k + 1`` down to tier ``k``."""
        return 4 + 2 * self.boundaries - 1 - k

    @cached_property
    def recv_nic(self) -> int:
        return 4 + 2 * self.boundaries

    @cached_property
    def recv_pcie(self) -> int:
        return self.recv_nic + 1

    @cached_property
    def back_to_nvswitch(self) -> int:
        return self.recv_nic + 2

    @cached_property
    def back_to_gpu(self) -> int:
        return self.recv_nic + 3

    @cached_property
    def width(self) -> int:
        return self.recv_nic + 4

    @property
    def head(self) -> slice:
        """The sending half before the NIC: what differs between GPUs that share a sending NIC (PXN)."""
        return slice(0, self.SEND_NIC)

    @property
    def network(self) -> slice:
        """From the sending NIC to the end: what GPUs that share a sending NIC and a destination share."""
        return slice(self.SEND_NIC, self.width)
