"""Schedules: what a collective algorithm does, free of any fabric's links.

A :class:`Schedule` is the first of the engine's three stages (schedule -> loads -> cost). It lists *phases*
that run one after the other; each phase is a set of concurrent *parts*, repeated ``repeat`` times in sequence:

- :class:`Transfers`: rank-to-rank transfers between GPU ids, in bytes per byte of message (every load scales
  with the message size), optionally on a chosen NIC of the GPU (``choice``: NCCL's channel) or spread over the
  destination GPU's NICs;
- :class:`InSwitchReduce`: NVLS, the NVSwitch reducing and multicasting (each GPU <-> its NVLink switch);
- :class:`InNetworkReduce`: SHARP, the switches of each rail reducing one stream per leaf.

Which links each part loads is the router's business (:mod:`topo.engine.loads`); how long the loads take, the cost
model's (:mod:`topo.engine.cost`). A schedule also carries its latency structure (:class:`LatencyCounts`: hop counts
NCCL's formulas price) and :class:`LatencyTerm` s saying which routed paths make up the critical path, so the
switch and NIC latencies of the fabric are added by the router, never guessed here.

An algorithm sees only the placement and a :class:`NodeShape` (GPUs per domain and server, NICs per server,
NVLS): never link ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..errors import AlgorithmUnavailable
from ..fabric.hosts import nic_beside
from .placement import distinct_per_row

__all__ = ["AlgorithmUnavailable", "NodeShape", "Transfers", "InSwitchReduce", "InNetworkReduce",
           "AllPairs", "SchedulePhase", "LatencyCounts", "LatencyTerm", "Schedule", "ranks_per_domain",
           "sequential_schedule", "is_network"]


@dataclass(frozen=True)
class NodeShape:
    """What an algorithm may know of the hardware: how GPUs, NVLink domains and NICs group, and NVLS.

    Attributes
    ----------
    gpus_per_domain : int
        GPUs in one NVLink domain (8 in an HGX server, 72 in an NVL72 rack).
    gpus_per_server : int
        GPUs in one server (a domain holds one or several servers).
    nics_per_server : int
        Scale-out NICs in one server.
    nvls : bool
        The NVLink switches reduce in the switch (NVLS, Hopper and newer).
    """

    gpus_per_domain: int
    gpus_per_server: int
    nics_per_server: int
    nvls: bool = False

    @classmethod
    def of(cls, fabric) -> "NodeShape":
        """The shape of ``fabric``'s nodes.

        Parameters
        ----------
        fabric : Fabric

        Returns
        -------
        NodeShape
        """
        L = fabric.layout
        return cls(L.gpus_per_domain, L.gpus_per_server, L.nics_per_server, bool(fabric.spec.nvls))

    @property
    def nics_per_gpu(self) -> int:
        """NICs beside each GPU (1 when GPUs share NICs)."""
        return max(1, self.nics_per_server // self.gpus_per_server)

    def spans_servers(self, ranks) -> bool:
        """True when ranks of one NVLink domain sit on several servers (multi-node NVLink, an NVL72 rack's
        trays): servers nest in domains, so there are then more servers than domains among ``ranks``. With one row
        per communicator (a placement's groups), true when any communicator's do.

        Parameters
        ----------
        ranks : array_like of int
            GPU ids: one communicator's, or one row per communicator.

        Returns
        -------
        bool
        """
        ranks = np.asarray(ranks)
        servers = distinct_per_row(ranks // self.gpus_per_server)
        return bool(np.any(servers > distinct_per_row(ranks // self.gpus_per_domain)))

    def nic_of(self, gpus) -> np.ndarray:
        """The (first) NIC beside each GPU, as a global NIC index (one function with
        :meth:`topo.fabric.fabric.Fabric.gpu_nic`: :func:`topo.fabric.hosts.nic_beside`).

        Parameters
        ----------
        gpus : array_like of int
            GPU ids.

        Returns
        -------
        numpy.ndarray
            NIC ids, one per GPU.
        """
        return nic_beside(gpus, self.gpus_per_server, self.nics_per_server)


def is_network(shape: NodeShape, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """True where a transfer leaves its NVLink domain.

    Parameters
    ----------
    shape : NodeShape
    src, dst : numpy.ndarray
        GPU ids of the transfers' ends.

    Returns
    -------
    numpy.ndarray of bool
    """
    return (np.asarray(src) // shape.gpus_per_domain) != (np.asarray(dst) // shape.gpus_per_domain)


@dataclass(frozen=True)
class Transfers:
    """Rank-to-rank transfers ``src[i] -> dst[i]`` (GPU ids), all at once.

    Attributes
    ----------
    src, dst : numpy.ndarray
        GPU ids.
    per_msg_byte : float or numpy.ndarray
        Bytes moved per byte of message (scalar, or one per transfer): every load scales with the message size.
    choice : numpy.ndarray, optional
        Which of a GPU's NICs each transfer leaves by (NCCL's channel).
    split_nics : bool
        Spread each transfer evenly over the destination GPU's NICs instead (point-to-point traffic on servers
        with several NICs per GPU).
    """

    src: np.ndarray
    dst: np.ndarray
    per_msg_byte: float | np.ndarray
    choice: np.ndarray | None = None
    split_nics: bool = False

    @property
    def num_flows(self) -> int:
        """Number of transfers."""
        return int(np.asarray(self.src).size)


@dataclass(frozen=True)
class AllPairs:
    """A uniform all-to-all: in every communicator each rank sends the same amount to each other rank.

    The router may load it from the fabric's structure (counts per domain, rail, leaf) or enumerate its pairs in
    chunks (:meth:`transfers`).

    Attributes
    ----------
    groups : numpy.ndarray
        ``[communicators, ranks]`` GPU ids.
    per_msg_byte : float
        Bytes per byte of message each rank sends to each other rank, spread over the destination GPU's NICs.
    """

    groups: np.ndarray
    per_msg_byte: float

    @property
    def num_flows(self) -> int:
        """Ordered pairs of distinct ranks over all communicators."""
        G, p = self.groups.shape
        return int(G * p * (p - 1))

    def network(self, shape: NodeShape) -> bool:
        """Whether any communicator spans several NVLink domains.

        Parameters
        ----------
        shape : NodeShape

        Returns
        -------
        bool
        """
        doms = self.groups // shape.gpus_per_domain
        return bool(np.any(doms != doms[:, :1]))

    def transfers(self, max_flows: int = 1_000_000) -> Iterator[Transfers]:
        """Every ordered pair of distinct ranks of every communicator, in chunks of about ``max_flows``.

        Parameters
        ----------
        max_flows : int
            Transfers per chunk (about).

        Yields
        ------
        Transfers
        """
        G, p = self.groups.shape
        rows = max(1, max_flows // max(1, p - 1))  # (communicator, source rank) rows per chunk
        pairs = np.arange(G * p)
        for start in range(0, pairs.size, rows):
            sel = pairs[start:start + rows]
            g, i = sel // p, sel % p
            j = np.arange(p)[None, :].repeat(sel.size, 0)
            keep = j != i[:, None]
            src = np.repeat(self.groups[g, i], p - 1)
            dst = self.groups[g[:, None].repeat(p, 1)[keep], j[keep]]
            yield Transfers(src, dst, self.per_msg_byte, split_nics=True)


@dataclass(frozen=True)
class InSwitchReduce:
    """NVLS: every GPU exchanges data each way with its NVLink switch, which reduces and multicasts.

    Attributes
    ----------
    gpus : numpy.ndarray
        GPU ids.
    per_msg_byte : float
        Bytes per byte of message each way.
    """

    gpus: np.ndarray
    per_msg_byte: float

    @property
    def num_flows(self) -> int:
        """Number of GPUs (one flow each)."""
        return int(self.gpus.size)


@dataclass(frozen=True)
class InNetworkReduce:
    """SHARP: every GPU sends up its NIC into its rail's switch reduction tree and gets the result back.

    Trees are per communicator; above the leaf each (communicator, leaf, rail) sends one reduced stream.

    Attributes
    ----------
    gpus : numpy.ndarray
        GPU ids.
    communicator : numpy.ndarray
        The communicator of each GPU of ``gpus``.
    per_msg_byte : float
        Bytes per byte of message each GPU sends (and receives).
    """

    gpus: np.ndarray
    communicator: np.ndarray
    per_msg_byte: float

    @property
    def num_flows(self) -> int:
        """Number of GPUs (one flow each)."""
        return int(self.gpus.size)


@dataclass
class SchedulePhase:
    """Parts that run at once, repeated ``repeat`` times one after the other.

    Attributes
    ----------
    parts : list
        :class:`Transfers`, :class:`AllPairs`, :class:`InSwitchReduce` or :class:`InNetworkReduce`.
    repeat : float
        Repetitions in sequence (a ring's ``p - 1`` steps are one phase repeated).
    label : str
        What the phase is, for ``--detail`` and :meth:`topo.engine.result.EstimateResult.steps_frame`.
    """

    parts: list
    repeat: float = 1.0
    label: str = ""

    @property
    def num_flows(self) -> int:
        """Flows of all parts (one repetition)."""
        return int(sum(p.num_flows for p in self.parts))


@dataclass
class LatencyCounts:
    """The hops on an algorithm's critical path, which a profile turns into seconds
    (:func:`topo.engine.cost.latency_s`).

    Attributes
    ----------
    family : str
        ring, tree, nvls, nvls_tree, collnet, pat or p2p: which of NCCL's formulas prices it.
    intra_hops, inter_hops : float
        NVLink hops and network hops.
    multi_domain : bool
        The communicator spans several NVLink domains.
    peers : float
        Remote peers messaged one by one (all-to-all).
    one_per_domain : bool
        One rank per domain: NCCL then prices network hops with the Tree's latency.
    ring_allreduce : bool
        A ring all-reduce (NCCL's model counts its network steps its own way).
    mnnvl : bool
        The NVLink domain spans several servers (an NVL72 rack): NVLink steps cost more.
    ranks : int
        Ranks of the communicator, for a latency linear in them (NCCL's PAT: ``nRanks x`` a per-rank term).
    """

    family: str  # ring, tree, nvls, nvls_tree, collnet, p2p
    intra_hops: float = 0.0  # NVLink hops
    inter_hops: float = 0.0  # network hops
    multi_domain: bool = False
    peers: float = 0.0  # remote peers messaged one by one (all-to-all)
    one_per_domain: bool = False  # one rank per domain: NCCL then prices network hops with the Tree's latency
    ring_allreduce: bool = False  # a ring all-reduce (NCCL's model counts its network steps its own way)
    mnnvl: bool = False  # the NVLink domain spans several servers (an NVL72 rack): NVLink steps cost more
    ranks: int = 0  # ranks of the communicator, for a latency linear in them (NCCL's PAT)


@dataclass(frozen=True)
class LatencyTerm:
    """``multiplier`` x a statistic of the routed latencies (switches, NICs) of part ``part`` of phase
    ``phase``.

    Attributes
    ----------
    phase, part : int
        Which routed part.
    select : str
        ``max`` (slowest transfer), ``max_intra`` / ``max_inter`` (slowest inside / between domains), ``ring``
        (a chunk's trip round one ring: the first ``first`` transfers, less the slowest edge).
    multiplier : float
    first : int
    """

    phase: int
    part: int
    select: str = "max"
    multiplier: float = 1.0
    first: int = 0


@dataclass
class Schedule:
    """What a collective algorithm does, free of any fabric's links: the first of the engine's stages.

    Attributes
    ----------
    algorithm : str
        The algorithm's name (``ring``, ``tree``, ``nvls_tree``, ...).
    family : str
        Which of NCCL's cost formulas and profile entries price it (``ring``, ``tree``, ``nvls``, ``nvls_tree``,
        ``collnet``, ``p2p``).
    phases : list of SchedulePhase
        Run one after the other.
    latency : LatencyCounts
        Hop counts of the critical path.
    routed_latency : list of LatencyTerm
        Which routed paths make up the critical path (the router adds their switch and NIC latencies).
    notes : list of str
        What the schedule or its routing approximated.
    channels : int
        NCCL channels (rings or tree pairs) the schedule runs.
    pinned_channels : int, optional
        Set when the user pinned the channel count (NCCL's caps scale with it).
    window_scale : float
        The profile's pipeline window times this (NVLS: grows with ranks and tree depth).
    net_peer_channels : int
        Send/receive across the network: NCCL's p2p channels per network peer (0: none).
    nvls_heads : int
        NVLSTree: heads per NVLink domain, each carrying one chunk per loop on every NVLS channel (0: none).
    """

    algorithm: str
    family: str
    phases: list[SchedulePhase]
    latency: LatencyCounts
    routed_latency: list[LatencyTerm] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    channels: int = 1  # NCCL channels (rings or tree pairs) the schedule runs
    pinned_channels: int | None = None  # set when the user pinned the channel count (NCCL's caps scale with it)
    window_scale: float = 1.0  # the profile's pipeline window times this (NVLS: grows with ranks and tree depth)
    net_peer_channels: int = 0  # send/receive across the network: NCCL's p2p channels per network peer (0: none)
    nvls_heads: int = 0  # NVLSTree: heads per NVLink domain, each carrying its chunk on every NVLS channel (0: none)
    # send/receive patterns (family p2p): bytes of one send to one peer per byte of message (alltoall: 1/p), and
    # NCCL's p2p channels per peer (0: the profile's channel count); NCCL's LL-or-Simple choice reads both
    peer_message_fraction: float = 1.0
    p2p_channels_per_peer: int = 0


def ranks_per_domain(placement, who: str) -> int:
    """Ranks of a communicator in each NVLink domain it spans.

    Parameters
    ----------
    placement : Placement
    who : str
        The algorithm asking, for the error.

    Returns
    -------
    int

    Raises
    ------
    AlgorithmUnavailable
        When the number varies between domains.
    """
    g = placement.ranks_per_domain()
    if g is None:
        raise AlgorithmUnavailable(f"{who} needs the same number of ranks in every NVLink domain")
    return g


def sequential_schedule(algorithm: str, shape: NodeShape, steps: list[tuple[Transfers, str]],
                        multi_domain: bool) -> Schedule:
    """Distinct steps run one after the other (recursive algorithms, pairwise exchange).

    Each step pays one hop of latency, an NVLink hop if it stays inside the domains, a network hop otherwise, plus
    its slowest routed path.

    Parameters
    ----------
    algorithm : str
    shape : NodeShape
    steps : list of (Transfers, str)
        Each step's transfers and label.
    multi_domain : bool
        The communicator spans several NVLink domains.

    Returns
    -------
    Schedule
    """
    phases, terms, intra, inter = [], [], 0, 0
    for i, (t, label) in enumerate(steps):
        phases.append(SchedulePhase([t], 1.0, label))
        if is_network(shape, t.src, t.dst).any():
            inter += 1
        else:
            intra += 1
        terms.append(LatencyTerm(i, 0, "max"))
    counts = LatencyCounts("p2p", intra_hops=intra, inter_hops=inter, multi_domain=multi_domain)
    return Schedule(algorithm, "p2p", phases, counts, terms)
