"""Where a token's routed experts land: the expected number of distinct destinations (GPUs or nodes) of its ``k``
routed experts, which sets how many copies of it a deduplicating dispatcher (DeepEP) sends.

Two routings (``ParallelLayout.moe_routing``):

- ``spread``: the ``k`` experts fall independently and uniformly over the ``N`` destinations (a learned router on
  balanced data, or Megatron-Core's forced balancing from random logits): ``N (1 - (1 - 1/N)^k)`` distinct ones.
- ``consecutive``: token ``t`` takes experts ``(t k + i) mod E`` for ``i < k`` (NeMo AutoModel's
  ``FakeBalancedGate``: ``torch.arange(T * k).view(-1, k) % n_experts``, NVIDIA-NeMo/Automodel@ce005dd
  ``nemo_automodel/components/moe/layers.py``). Experts are sharded over the EP ranks in contiguous blocks of
  ``E / ep`` (``ExpertParallel``: ``Shard(0)`` on the expert dimension, same file's ``parallelizer.py``), so a token's
  experts sit on one or two neighbouring ranks of one node: every expert gets the same load, yet a token fans out
  far less than under ``spread``. The count is exact, averaged over the start positions ``t k mod E``, which a
  long sequence visits uniformly.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ROUTINGS", "spread_destinations", "consecutive_destinations", "rank_destinations"]

ROUTINGS = ("spread", "consecutive")


def spread_destinations(destinations: int, k: float) -> float:
    """Expected distinct destinations of ``k`` experts drawn uniformly from ``destinations`` equal ones.

    Parameters
    ----------
    destinations : int
        GPUs (or nodes) the experts are spread over.
    k : float
        Routed experts per token.

    Returns
    -------
    float
        ``N (1 - (1 - 1/N)^k)``.
    """
    n = float(destinations)
    return n * (1.0 - (1.0 - 1.0 / n) ** k)


def consecutive_destinations(experts: int, k: int, experts_per_destination: int) -> float:
    """Mean distinct destinations of the ``k`` consecutive experts ``(s + i) mod E`` over the start positions
    ``s = t k mod E``, experts ``[j B, (j + 1) B)`` on destination ``j`` (``B = experts_per_destination``).

    Parameters
    ----------
    experts : int
        Routed experts per MoE layer (``E``).
    k : int
        Routed experts per token.
    experts_per_destination : int
        Experts held by one destination (a GPU: ``E / ep``; a node: that times the GPUs of the node in the group).

    Returns
    -------
    float
        Between 1 and ``k``.
    """
    starts = np.arange(0, experts, math.gcd(k, experts))  # the positions t k mod E takes, each equally often
    dest = np.sort(((starts[:, None] + np.arange(k)[None, :]) % experts) // experts_per_destination, axis=1)
    return float(np.mean(1 + np.count_nonzero(np.diff(dest, axis=1), axis=1)))


def rank_destinations(routing: str, experts: int, k: int, ranks: int) -> float:
    """Mean distinct expert-parallel ranks a token's ``k`` experts land on under ``routing``, the experts sharded
    over ``ranks`` in contiguous blocks: what the flex dispatcher's receiving ranks each get one copy of.

    Parameters
    ----------
    routing : str
        ``spread`` or ``consecutive`` (:data:`ROUTINGS`).
    experts, k : int
        Routed experts per MoE layer and per token.
    ranks : int
        Expert-parallel ranks.

    Returns
    -------
    float

    Examples
    --------
    >>> round(rank_destinations("spread", 128, 8, 8), 2), rank_destinations("consecutive", 128, 8, 8)
    (5.25, 1.0)
    """
    if routing == "consecutive":
        return consecutive_destinations(experts, k, max(1, experts // ranks))
    return spread_destinations(ranks, k)
