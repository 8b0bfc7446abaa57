"""The algorithm and protocol NCCL's own tuner picks: chosen by NCCL's cost model, not by the wire.

NCCL does not run the algorithm that is fastest on the hardware; it runs the one its model rates fastest
(NVIDIA/nccl src/graph/tuning.cc, ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, read at NCCL 2.20.3,
commit b6475625; the same structure at commit 01afd20a, the 2.7-era constants of ``nccl/2.7.toml``). Per
algorithm x protocol it prices

    time = latency (x the ring's plateau factor) + bytes / algbw
    algbw = busBw x (nRanks / nsteps for Ring, 1/2 for Tree), busBw = nChannels x bw, x the protocol's
            efficiency, capped per channel (the profile's ``proto_efficiency`` and ``busbw_cap``)

where ``bw`` is the graph's per-channel bandwidth: ``bwIntra`` on <= 2 nodes and ``bwInter`` beyond
(``float bw = nNodes <= 2 || collnet ? graphs[a]->bwIntra : graphs[a]->bwInter``). NCCL's tree search may raise a
tree's ``bwIntra`` up to twice its ``bwInter`` (its two trees send each byte once across two nodes), so on two
nodes the tree is rated by what its intra-node side gives, and beyond two nodes by the network bandwidth per
channel, the ring's. Then ``ncclTopoGetAlgoTime`` multiplies a tree's bandwidth by ``treeCorrectionFactor``
(medium sizes, by ``log2(bytes / 64)``) and a Ring/Simple all-reduce's latency across nodes by the ring's
plateau factor (1.4 on compute capability >= 8.0). The run then goes at what the hardware gives that choice,
which :mod:`topo.engine.cost` times on the routed fabric.

How topo fills NCCL's inputs (its graph search is not modelled link by link):

- latency: :func:`topo.engine.cost.latency_s` without the routed switch latencies (NCCL's formulas and constants)
  and without topo's fitted latency terms (:meth:`topo.engine.profiles.Profile.nccl_model`);
- ``nChannels x bw`` of a graph: the routed schedule's own bottleneck rate (what the hardware gives it, which is
  what NCCL's search finds), except a tree beyond two domains, which NCCL rates with the ring's network
  bandwidth: tree algbw = ring busBw / 2, i.e. ``seconds_per_byte(tree) = seconds_per_byte(ring) x n / (n - 1)``
  for ``n`` ranks;
- PAT (all-gather and reduce-scatter with one GPU per node; NCCL 2.23 and later): NCCL's PAT bandwidth is
  ``nChannels x bw x 0.75`` of the tree graph and, unlike the ring's, is not turned into an algorithm bandwidth
  (tuning.cc converts busBw to algBw only for the ring, NVLS and NVLSTree among all-gather and reduce-scatter
  algorithms, read at NCCL 2.29.2, commit ebd1e929): it prices ``bytes / (0.75 busBw)`` where the ring prices
  ``(n-1)/n bytes / busBw``, i.e. ``seconds_per_byte(pat) = routed seconds_per_byte x n / (n - 1)``;
- no pipeline window: NCCL's model has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .cost import Costed, latency_s, rate_limit
from .profiles import Profile

__all__ = ["TunerChoice", "nccl_time_s", "nccl_choice", "CHOOSE_MODES", "tree_correction"]

CHOOSE_MODES = ("nccl", "fastest")


@dataclass(frozen=True)
class TunerChoice:
    """What NCCL's tuner runs at one size, and the time its own model gives it (not topo's timing)."""

    algorithm: str
    protocol: str
    model_time_s: float


# entries of treeCorrectionFactor NCCL reads per algorithm (ncclTopoGetAlgoTime at 2.30.7: Tree 'logSize < 23',
# NVLSTree 'logSize < 24'): the table's 24th entry (512 MiB) is NVLSTree's only
_CORRECTED_ENTRIES = {"tree": 23, "nvls_tree": 24}


def tree_correction(profile: Profile, proto: str, size_bytes: int, family: str = "tree") -> float:
    """NCCL's ``treeCorrectionFactor[proto][log2i(bytes >> 6)]`` (1 past the entries ``family`` reads, or without
    a table).

    Parameters
    ----------
    profile : Profile
    proto : str
    size_bytes : int
    family : str
        ``tree`` (NCCL reads the first 23 entries) or ``nvls_tree`` (24).

    Returns
    -------
    float
    """
    table = profile.tree_correction.get(proto)
    if not table:
        return 1.0
    n = int(size_bytes) >> 6
    i = n.bit_length() - 1 if n > 0 else 0  # NCCL's log2i: floor(log2(n)), 0 for n < 2
    return table[i] if i < min(len(table), _CORRECTED_ENTRIES[family]) else 1.0


def _nccl_seconds_per_byte(name: str, c: Costed, costed: dict[str, Costed], collective: str, num_ranks: int,
                           num_domains: int) -> float:
    """The routed rate standing for NCCL's ``nChannels x bw`` (per byte of message, before efficiencies)."""
    if c.schedule.family == "pat" and num_ranks > 1:  # NCCL's PAT bandwidth is its busBw, not made an algbw
        return c.seconds_per_byte * num_ranks / (num_ranks - 1)
    ring = costed.get("ring")
    if (c.schedule.family == "tree" and num_domains > 2 and ring is not None and collective == "all_reduce"
            and num_ranks > 1 and ring.seconds_per_byte > 0):
        return ring.seconds_per_byte * num_ranks / (num_ranks - 1)
    return c.seconds_per_byte


def nccl_time_s(name: str, costed: dict[str, Costed], profile: Profile, proto: str, size_bytes: int,
                collective: str, num_ranks: int, num_domains: int) -> float:
    """NCCL's modelled time of algorithm ``name`` with protocol ``proto`` (``ncclTopoGetAlgoTime``).

    Parameters
    ----------
    name : str
        A key of ``costed``.
    costed : dict of str to Costed
        Every candidate (a tree beyond two domains is rated with the ring's bandwidth).
    profile : Profile
    proto : str
    size_bytes : int
    collective : str
    num_ranks, num_domains : int

    Returns
    -------
    float
        Seconds, by NCCL's model (not topo's timing).
    """
    c = costed[name]
    fam = c.schedule.family
    lat = latency_s(c.schedule.latency, 0.0, profile.nccl_model(), proto)
    if (fam == "ring" and proto == "Simple" and collective == "all_reduce" and num_domains > 1
            and size_bytes / num_ranks >= profile.ring_plateau_min_bytes_per_rank):
        lat *= profile.ring_plateau_latency_factor
    spb = _nccl_seconds_per_byte(name, c, costed, collective, num_ranks, num_domains)
    rate = rate_limit(c, profile, proto, collective, num_ranks, num_domains, seconds_per_byte=spb).rate_Bps
    if fam == "tree":
        rate *= tree_correction(profile, proto, size_bytes)
    elif fam == "nvls_tree" and collective == "all_reduce" and profile.nvls_tree_correction:
        rate *= tree_correction(profile, proto, size_bytes, "nvls_tree")
    return lat + (size_bytes / rate if math.isfinite(rate) and rate > 0 else 0.0)


def nccl_choice(costed: dict[str, Costed], protocols: dict[str, tuple[str, ...]], profile: Profile,
                size_bytes: int, collective: str, num_ranks: int, num_domains: int) -> TunerChoice:
    """The algorithm x protocol with the least NCCL-modelled time (ties: the first, in ``costed``'s order).

    Parameters
    ----------
    costed : dict of str to Costed
    protocols : dict of str to tuple of str
        The protocols each candidate may run.
    profile : Profile
    size_bytes : int
    collective : str
    num_ranks, num_domains : int

    Returns
    -------
    TunerChoice
    """
    best = None
    for name in costed:
        for proto in protocols[name]:
            t = nccl_time_s(name, costed, profile, proto, size_bytes, collective, num_ranks, num_domains)
            if best is None or t < best.model_time_s:
                best = TunerChoice(name, proto, t)
    if best is None:
        raise ValueError("no candidate to choose from")  # evaluate() never builds an empty Evaluation
    return best
