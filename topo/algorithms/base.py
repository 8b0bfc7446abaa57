"""What every algorithm produces: a plan of phases of routed flows, and the counts its latency is made of.

A *phase* is a set of concurrent flows, routed onto the fabric, for a message of 1 byte (every load scales with
the message size), repeated ``repeat`` times in sequence. Phases of a plan run one after the other. The bandwidth
part of the time is therefore ``size * sum(repeat * drain_time(phase))``, computed once per plan for a whole size
sweep. The latency part comes from :func:`latency_s` with the profile's constants.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..profiles import Profile
from ..route import Routed

__all__ = ["Phase", "LatencyCounts", "Plan", "latency_s", "AlgorithmUnavailable", "sequential_plan",
           "ranks_per_domain"]


class AlgorithmUnavailable(Exception):
    """This algorithm cannot run for this collective, fabric and placement (the reason is the message)."""


@dataclass
class Phase:
    routed: Routed  # one repetition, bytes per byte of message
    repeat: float = 1.0
    label: str = ""


@dataclass
class LatencyCounts:
    """The hops on an algorithm's critical path, which a profile turns into seconds."""

    family: str  # ring, tree, nvls, nvls_tree, collnet, p2p
    intra_hops: float = 0.0  # NVLink hops
    inter_hops: float = 0.0  # network hops
    routed_s: float = 0.0  # switch/NIC latencies of the routed paths on the critical path
    multi_domain: bool = False
    peers: float = 0.0  # remote peers messaged one by one (all-to-all)
    one_per_domain: bool = False  # one rank per domain: NCCL then prices network hops with the Tree's latency


@dataclass
class Plan:
    algorithm: str
    family: str
    phases: list[Phase]
    latency: LatencyCounts
    notes: list[str] = field(default_factory=list)


def ranks_per_domain(placement, who: str) -> int:
    """Ranks of a communicator in each NVLink domain it spans; ``who`` cannot run when that number varies."""
    g = placement.ranks_per_domain()
    if g is None:
        raise AlgorithmUnavailable(f"{who} needs the same number of ranks in every NVLink domain")
    return g


def sequential_plan(algorithm: str, steps: list[tuple[Routed, str]], multi_domain: bool) -> Plan:
    """A plan of distinct steps run one after the other (recursive algorithms, pairwise exchange): each step
    pays one hop of latency, an NVLink hop if it stays inside the domains, a network hop otherwise."""
    phases, intra, inter, routed_s = [], 0, 0, 0.0
    for routed, label in steps:
        phases.append(Phase(routed, 1.0, label))
        if routed.network.any():
            inter += 1
        else:
            intra += 1
        routed_s += float(routed.latency_s.max()) if routed.num_flows else 0.0
    counts = LatencyCounts("p2p", intra_hops=intra, inter_hops=inter, routed_s=routed_s, multi_domain=multi_domain)
    return Plan(algorithm, "p2p", phases, counts)


def latency_s(c: LatencyCounts, profile: Profile, proto: str) -> float:
    """Latency of a plan under ``profile`` with protocol ``proto``, NCCL's formulas (tuning.cc):

    - ring: base + (steps inside domains) * max(NVLink hop, network overhead if the ring leaves the domain)
      + (steps between domains) * network hop
    - tree: base + NVLink hops * NVLink hop + network hops * network hop (the caller counts
      ``2*((gpus per domain - 1) + log2(domains))`` hops, as NCCL does)
    - nvls: base + the NVLS hop (+ the network NVLS hop across domains); nvls_tree: + network hops * NVLSTree hop
    - collnet (SHARP): base + NVLink hops + one CollNet network latency
    - p2p (textbook steps, sendrecv, all-to-all): base + hops + network overhead per network step
      + per-peer message overhead
    plus, always, the routed switch and NIC latencies on the critical path.
    """
    f = c.family
    base = profile.base(f, proto)
    nv = profile.nv_hop(f, proto)
    net = profile.net_hop(f, proto)
    if f == "ring":
        intra = max(nv, profile.overhead(proto)) if c.multi_domain else nv
        if c.one_per_domain:
            net = profile.net_hop("tree", proto)
        t = base + c.intra_hops * intra + c.inter_hops * net
    elif f == "tree":
        t = base + c.intra_hops * nv + c.inter_hops * net
    elif f == "nvls":
        t = base + nv + (net if c.multi_domain else 0.0)
    elif f == "nvls_tree":
        t = base + nv + c.inter_hops * net
    elif f == "collnet":
        t = base + c.intra_hops * nv + (net if c.multi_domain else 0.0)
    else:  # p2p
        t = (base + c.intra_hops * nv + c.inter_hops * (net + profile.overhead(proto))
             + c.peers * profile.peer_overhead_s)
    return t + c.routed_s
