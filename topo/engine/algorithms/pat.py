"""PAT (Parallel Aggregated Trees): NCCL's logarithmic all-gather and reduce-scatter (NCCL 2.23 and later).

PAT is a Bruck all-gather with its dimensions reversed (S. Jeaugey, "PAT: a new algorithm for all-gather and
reduce-scatter operations at scale", arXiv:2506.20252, 2025): with ``p`` ranks and ``n = ceil(log2 p)`` steps, step
``j = 0..n-1`` exchanges with the rank at distance ``2^(n-1-j)`` (the farthest first), and a rank forwards every
block it holds: ``c_j = min(2^j, p - 2^j)`` blocks of ``S/p`` (``sum c_j = p - 1``). Reduce-scatter runs the same
steps backwards (nearest first, reducing on the way). With NCCL's bounded buffers a large message is cut into
more, smaller aggregations, which changes the number of network transfers but not the bytes each rank sends: over
a uniform non-blocking network the bandwidth part is the ring's, ``(p-1)/p S/B``, in ``n`` steps instead of
``p - 1``. For ``p`` not a power of two the step sizes are Bruck's; the distances are an approximation of PAT's
(they decide which links the routed model loads, not how many bytes).

Where NCCL runs it (NVIDIA/nccl src/graph/tuning.cc ``ncclPatEnable`` and ``ncclTopoTuneModel``, read at NCCL
2.29.2, commit ebd1e929): all-gather and reduce-scatter only, Simple protocol only, and by default
(``NCCL_PAT_ENABLE=2``) only when ``nNodes == nRanks``, one GPU per node (an NVLink domain counts as one node:
NCCL's nodes are its NVLink domains, a multi-node NVLink rack included), on GPUs of compute capability >= 6.0 and
without network device offload. NCCL also skips PAT for a reduce-scatter whose op scales (``avg``,
``PreMulSum``, src/enqueue.cc ``updateCollCostTable``): :func:`topo.engine.estimate.evaluate` leaves PAT out
of such a reduce-scatter (option ``op``, nccl-tests' ``-o``), and refuses it when it is the one asked for.

Its latency is NCCL's formula (:func:`topo.engine.cost.latency_s`, family ``pat``): base + ``log2i(nodes)`` x the
network step / ``pat_net_step_divisor`` + ranks x ``pat_rank_latency_us``, with the Tree's network step (one
GPU per node: NCCL prices every algorithm's network step with the Tree's then). Its bandwidth is the routed one at
the profile's PAT efficiency (NCCL: ``busBw *= .75``).
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..schedule import (AlgorithmUnavailable, LatencyCounts, LatencyTerm, NodeShape, Schedule, SchedulePhase,
                        Transfers)

__all__ = ["pat_schedule", "pat_steps"]


def pat_steps(p: int) -> list[tuple[int, int]]:
    """PAT's all-gather steps on ``p`` ranks: ``(distance, blocks)`` per step, the farthest first.

    Parameters
    ----------
    p : int
        Ranks (>= 2).

    Returns
    -------
    list of (int, int)
        ``ceil(log2 p)`` steps; step ``j`` sends ``min(2^j, p - 2^j)`` blocks of ``S/p`` to the rank
        ``2^(n-1-j)`` away. The blocks add up to ``p - 1``.
    """
    n = int(p - 1).bit_length()  # ceil(log2 p) for p >= 2
    return [(1 << (n - 1 - j), min(1 << j, p - (1 << j))) for j in range(n)]


def pat_schedule(shape: NodeShape, placement: Placement, collective: str) -> Schedule:
    """PAT all-gather or reduce-scatter: ``ceil(log2 p)`` exchanges, one GPU per NVLink domain.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    collective : str
        all_gather or reduce_scatter.

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        Another collective, fewer than two ranks, or more than one rank in an NVLink domain (where NCCL does not
        run PAT); the reason says why.
    """
    if collective not in ("all_gather", "reduce_scatter"):
        raise AlgorithmUnavailable(f"NCCL runs PAT for all_gather and reduce_scatter only, not {collective}")
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("PAT needs at least 2 ranks")
    g = placement.ranks_per_domain()
    if g != 1:
        per = f"{g} ranks in each NVLink domain" if g else "several ranks in some NVLink domain"
        raise AlgorithmUnavailable(f"NCCL runs PAT with one GPU per node only (NCCL_PAT_ENABLE's default: nNodes == "
                                   f"nRanks, src/graph/tuning.cc), and this communicator has {per}; use ring, or "
                                   "one rank per NVLink domain")
    steps = pat_steps(p)
    if collective == "reduce_scatter":  # the all-gather run backwards: nearest first, towards the owner
        steps = steps[::-1]
    groups = placement.groups
    ranks = np.arange(p)
    phases, terms = [], []
    for i, (dist, blocks) in enumerate(steps):
        peer = (ranks - dist) % p if collective == "all_gather" else (ranks + dist) % p
        t = Transfers(groups.ravel(), groups[:, peer].ravel(), blocks / p, split_nics=True)
        phases.append(SchedulePhase([t], 1.0, f"step {i + 1}: {blocks} block(s) to distance {dist}"))
        terms.append(LatencyTerm(i, 0, "max"))
    # NCCL's latency counts log2i(nNodes) network steps (floor) and every rank once (tuning.cc)
    counts = LatencyCounts("pat", inter_hops=int(p).bit_length() - 1, multi_domain=True, one_per_domain=True,
                           ranks=p)
    return Schedule("pat", "pat", phases, counts, terms)
