"""Recursive algorithms on a power-of-two number of ranks (Thakur, Rabenseifner, Gropp, IJHPCA 2005).

In step ``i`` every rank exchanges with the rank whose index differs in bit ``i`` (distance ``2^i``); ranks are
in NCCL order, so the first steps stay inside NVLink domains.

- ``halving_doubling`` all-reduce (Rabenseifner): reduce-scatter by recursive vector halving (step i moves
  ``S/2^(i+1)``), then all-gather by recursive doubling in reverse: ``2 log2(p) alpha + 2 (p-1)/p S/B``.
- ``recursive_doubling`` all-reduce: every step exchanges the whole vector: ``log2(p) (alpha + S/B)``.
- ``recursive_doubling`` all-gather: step i exchanges ``2^i S/p``: ``log2(p) alpha + (p-1)/p S/B``.
- ``recursive_halving`` reduce-scatter: step i moves ``S/2^(i+1)``: ``log2(p) alpha + (p-1)/p S/B``.
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..schedule import AlgorithmUnavailable, NodeShape, Schedule, Transfers, sequential_schedule

__all__ = ["recursive_schedule"]


def recursive_schedule(shape: NodeShape, placement: Placement, collective: str, name: str) -> Schedule:
    """Recursive halving/doubling (Thakur, Rabenseifner, Gropp 2005) on a power-of-two number of ranks.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    collective : str
    name : str
        halving_doubling, recursive_doubling or recursive_halving.

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    p = placement.num_ranks
    if p < 2 or p & (p - 1):
        raise AlgorithmUnavailable(f"{name} needs a power-of-two number of ranks, got {p}")
    n = int(np.log2(p))
    if collective == "all_reduce" and name == "halving_doubling":
        fracs = [1 / 2 ** (i + 1) for i in range(n)]
        steps = list(zip(range(n), fracs)) + list(zip(reversed(range(n)), reversed(fracs)))
    elif collective == "all_reduce" and name == "recursive_doubling":
        steps = [(i, 1.0) for i in range(n)]
    elif collective == "all_gather" and name == "recursive_doubling":
        steps = [(i, 2 ** i / p) for i in range(n)]
    elif collective == "reduce_scatter" and name == "recursive_halving":
        steps = [(i, 1 / 2 ** (i + 1)) for i in range(n)]
    else:
        raise AlgorithmUnavailable(f"{name} does not implement {collective}")
    ranks = np.arange(p)
    g = placement.groups
    transfers = [(Transfers(g.ravel(), g[:, ranks ^ (1 << bit)].ravel(), frac), f"distance {1 << bit}")
                 for bit, frac in steps]
    return sequential_schedule(name, shape, transfers, placement.num_domains > 1)
