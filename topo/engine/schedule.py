"""Schedules: what a collective algorithm does, free of any fabric's links.

A :class:`Schedule` is the first of the engine's three stages (schedule -> loads -> cost). It lists *phases*
that run one after the other; each phase is a set of concurrent *parts*, repeated ``repeat`` times in sequence:

- :class:`Transfers`: rank-to-rank transfers between GPU ids, in bytes per byte of message (every load scales
  with the message size), optionally on a chosen NIC of the GPU (``choice``: NCCL's channel) or spread over the
  destination GPU's NICs;
- :class:`InSwitchReduce`: NVLS, the NVSwitch reducing and multicasting (each GPU <-> its NVLink switch);
- :class:`InNetworkReduce`: SHARP, the switches of each rail reducing one stream per leaf.

Which links each part loads is the router's business (:mod:`topo.loads`); how long the loads take, the cost
model's (:mod:`topo.cost`). A schedule also carries its latency structure (:class:`LatencyCounts`: hop counts
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

__all__ = ["AlgorithmUnavailable", "NodeShape", "Transfers", "InSwitchReduce", "InNetworkReduce",
           "AllPairs", "SchedulePhase", "LatencyCounts", "LatencyTerm", "Schedule", "ranks_per_domain",
           "sequential_schedule", "is_network"]


@dataclass(frozen=True)
class NodeShape:
    """What an algorithm may know of the hardware: how GPUs, NVLink domains and NICs group, and NVLS."""

    gpus_per_domain: int
    gpus_per_server: int
    nics_per_server: int
    nvls: bool = False

    @classmethod
    def of(cls, fabric) -> "NodeShape":
        L = fabric.layout
        return cls(L.gpus_per_domain, L.gpus_per_server, L.nics_per_server, bool(fabric.spec.nvls))

    @property
    def nics_per_gpu(self) -> int:
        """NICs beside each GPU (1 when GPUs share NICs)."""
        return max(1, self.nics_per_server // self.gpus_per_server)

    def spans_servers(self, ranks) -> bool:
        """True when ranks of one NVLink domain sit on several servers (multi-node NVLink, an NVL72 rack's trays):
        servers nest in domains, so there are then more servers than domains among ``ranks``."""
        ranks = np.asarray(ranks)
        return bool(np.unique(ranks // self.gpus_per_server).size > np.unique(ranks // self.gpus_per_domain).size)

    def nic_of(self, gpus) -> np.ndarray:
        """The (first) NIC beside each GPU, as a global NIC index (as :meth:`topo.fabric.Fabric.gpu_nic`)."""
        gpus = np.asarray(gpus)
        server, local = gpus // self.gpus_per_server, gpus % self.gpus_per_server
        N, g = self.nics_per_server, self.gpus_per_server
        return server * N + (local * N) // g


def is_network(shape: NodeShape, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """True where a transfer leaves its NVLink domain."""
    return (np.asarray(src) // shape.gpus_per_domain) != (np.asarray(dst) // shape.gpus_per_domain)


@dataclass(frozen=True)
class Transfers:
    """Transfers ``src[i] -> dst[i]`` (GPU ids) of ``per_msg_byte`` bytes per byte of
    message (scalar or per transfer).

    ``choice`` picks one of a GPU's NICs (the channel); ``split_nics`` spreads each transfer evenly over the
    destination GPU's NICs instead (point-to-point traffic on servers with several NICs per GPU)."""

    src: np.ndarray
    dst: np.ndarray
    per_msg_byte: float | np.ndarray
    choice: np.ndarray | None = None
    split_nics: bool = False

    @property
    def num_flows(self) -> int:
        return int(np.asarray(self.src).size)


@dataclass(frozen=True)
class AllPairs:
    """A uniform all-to-all: in every communicator (row of ``groups``, GPU ids) each rank sends ``per_msg_byte``
    (bytes per byte of message) to each other rank, spread over the destination GPU's NICs. The router may load it
    from the fabric's structure or enumerate its pairs in chunks (:meth:`transfers`)."""

    groups: np.ndarray
    per_msg_byte: float

    @property
    def num_flows(self) -> int:
        G, p = self.groups.shape
        return int(G * p * (p - 1))

    def network(self, shape: NodeShape) -> bool:
        doms = self.groups // shape.gpus_per_domain
        return bool(np.any(doms != doms[:, :1]))

    def transfers(self, max_flows: int = 1_000_000) -> Iterator[Transfers]:
        """Every ordered pair of distinct ranks of every communicator, in chunks of about ``max_flows``."""
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
    """NVLS: every GPU in ``gpus`` exchanges ``per_msg_byte`` (bytes per byte of message) each way with its NVLink
    switch."""

    gpus: np.ndarray
    per_msg_byte: float

    @property
    def num_flows(self) -> int:
        return int(self.gpus.size)


@dataclass(frozen=True)
class InNetworkReduce:
    """SHARP: every GPU in ``gpus`` sends ``per_msg_byte`` (bytes per byte of message) up its NIC into its rail's
    switch reduction tree and gets the result back; ``communicator[i]`` says which communicator GPU ``i`` belongs to
    (trees are per communicator). Above the leaf each (communicator, leaf, rail) sends one reduced stream."""

    gpus: np.ndarray
    communicator: np.ndarray
    per_msg_byte: float

    @property
    def num_flows(self) -> int:
        return int(self.gpus.size)


@dataclass
class SchedulePhase:
    parts: list
    repeat: float = 1.0
    label: str = ""

    @property
    def num_flows(self) -> int:
        return int(sum(p.num_flows for p in self.parts))


@dataclass
class LatencyCounts:
    """The hops on an algorithm's critical path, which a profile turns into seconds (:func:`topo.cost.latency_s`).
    """

    family: str  # ring, tree, nvls, nvls_tree, collnet, p2p
    intra_hops: float = 0.0  # NVLink hops
    inter_hops: float = 0.0  # network hops
    multi_domain: bool = False
    peers: float = 0.0  # remote peers messaged one by one (all-to-all)
    one_per_domain: bool = False  # one rank per domain: NCCL then prices network hops with the Tree's latency
    ring_allreduce: bool = False  # a ring all-reduce (NCCL's model counts its network steps its own way)
    mnnvl: bool = False  # the NVLink domain spans several servers (an NVL72 rack): NVLink steps cost more


@dataclass(frozen=True)
class LatencyTerm:
    """``multiplier`` x a statistic of the routed latencies (switches, NICs) of part ``part`` of phase ``phase``.

    ``select``: ``max`` (slowest transfer), ``max_intra`` / ``max_inter`` (slowest inside / between domains),
    ``ring`` (a chunk's trip round one ring: the first ``first`` transfers, less the slowest edge)."""

    phase: int
    part: int
    select: str = "max"
    multiplier: float = 1.0
    first: int = 0


@dataclass
class Schedule:
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


def ranks_per_domain(placement, who: str) -> int:
    """Ranks of a communicator in each NVLink domain it spans; ``who`` cannot run when that number varies."""
    g = placement.ranks_per_domain()
    if g is None:
        raise AlgorithmUnavailable(f"{who} needs the same number of ranks in every NVLink domain")
    return g


def sequential_schedule(algorithm: str, shape: NodeShape, steps: list[tuple[Transfers, str]],
                        multi_domain: bool) -> Schedule:
    """Distinct steps run one after the other (recursive algorithms, pairwise exchange): each step pays one hop
    of latency, an NVLink hop if it stays inside the domains, a network hop otherwise, plus its slowest routed
    path."""
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
