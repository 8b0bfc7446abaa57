"""Where a token's routed experts land: the expected number of distinct destinations (GPUs or nodes) of its ``k``
routed experts, which sets how many copies of it a deduplicating dispatcher (DeepEP) sends.

Two routings (``ParallelLayout.moe_routing``):

- ``spread``: the token's ``k`` experts are ``k`` distinct ones drawn uniformly from the ``E`` (a learned router on
  balanced data, or Megatron-Core's forced balancing from random logits: ``torch.topk`` over the scores picks ``k``
  distinct experts, NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/moe_utils.py
  ``topk_routing_with_score_function``, ``apply_random_logits``), the experts held evenly, ``E / N`` by each of the
  ``N`` destinations: ``N (1 - C(E - E/N, k) / C(E, k))`` distinct ones (:func:`spread_destinations`; the
  experts cannot repeat, so this is above the ``N (1 - (1 - 1/N)^k)`` of independent draws: 128 experts, top-6,
  16 ranks, 5.22 against 5.14). With node-limited routing (DeepSeek-V3, arXiv 2412.19437 sec. 2.1.2: at most
  ``M = 4`` nodes a token) the router first keeps ``M`` groups (nodes), then takes the top ``k`` experts inside
  them; where a group's score is its best expert's (DeepEP's tests/test_internode.py at deepseek-ai/DeepEP@567632dd
  lines 40-44: ``amax``; Megatron-Core's ``group_limited_topk`` when ``topk // group_topk`` is 1) the groups kept
  are the first ``M`` met walking the experts by falling score, and the top ``k`` inside them are the first ``k``
  met, so the count is exactly ``min(M, D)`` with ``D`` that of unlimited routing: ``E[min(M, D)]``.
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
from fractions import Fraction
from functools import lru_cache

import numpy as np

__all__ = ["ROUTINGS", "spread_destinations", "consecutive_destinations", "rank_destinations"]

ROUTINGS = ("spread", "consecutive")


def spread_destinations(experts_per_destination, k: int, limit: int | None = None) -> float:
    """Expected distinct destinations of a token's ``k`` distinct experts, drawn uniformly from the experts the
    destinations hold (``spread`` routing), at most ``limit`` of them under node-limited routing.

    Without ``limit``: ``sum_j (1 - C(E - E_j, k) / C(E, k))`` over the destinations' ``E_j`` experts
    (``E = sum E_j``; ``N (1 - C(E - E/N, k) / C(E, k))`` for ``N`` equal ones), each destination missed by a
    token exactly when all ``k`` experts fall among the other ``E - E_j``. With ``limit`` ``M``: ``E[min(M, D)]``
    (the module's doc), ``D``'s distribution counted exactly over the destinations (:func:`_covered_counts`).

    Parameters
    ----------
    experts_per_destination : int or sequence of int
        The experts each destination (GPU or node) holds (``(E // N,) * N`` for ``N`` equal ones).
    k : int
        Routed experts per token (at most the experts held).
    limit : int, optional
        Node-limited routing's most destinations a token reaches (the destinations are the router's groups).

    Returns
    -------
    float
        Between 1 and ``min(k, N, limit)``.

    Examples
    --------
    >>> round(spread_destinations((8,) * 16, 6), 4), round(spread_destinations((32,) * 8, 8, limit=4), 4)
    (5.2242, 3.9831)
    """
    sizes = tuple(int(e) for e in experts_per_destination)
    k = min(int(k), sum(sizes))  # an unchecked layout holding fewer experts than k: every one of them
    return _spread(sizes, k, None if limit is None or limit >= min(len(sizes), k) else int(limit))


@lru_cache(maxsize=4096)
def _spread(sizes: tuple, k: int, limit: int | None) -> float:
    """:func:`spread_destinations`, kept (a search asks the same few shapes many times)."""
    total = sum(sizes)
    if limit is None:
        return float(sum(1 - Fraction(math.comb(total - e, k), math.comb(total, k)) for e in sizes))
    ways = _covered_counts(sizes, k)
    return float(Fraction(sum(min(d, limit) * w for d, w in enumerate(ways)), math.comb(total, k)))


def _covered_counts(sizes: tuple, k: int) -> list:
    """``ways[d]``: the ``k``-expert sets that cover exactly ``d`` destinations of ``sizes`` experts each (the
    coefficient of ``x^k y^d`` in ``prod_j (1 + y ((1 + x)^E_j - 1))``), in integers."""
    ways = [[1] + [0] * k]  # ways[d][j]: j experts chosen from the destinations seen, d of them covered
    for e in sizes:
        take = [math.comb(e, t) for t in range(1, min(e, k) + 1)]  # t >= 1 experts from this destination
        new = [row[:] for row in ways] + [[0] * (k + 1)]
        for d, row in enumerate(ways):
            for j, w in enumerate(row):
                if w:
                    for t, c in enumerate(take, start=1):
                        if j + t > k:
                            break
                        new[d + 1][j + t] += w * c
        ways = new
    return [row[k] for row in ways]


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
    (5.34, 1.0)
    """
    if routing == "consecutive":
        return consecutive_destinations(experts, k, max(1, experts // ranks))
    return spread_destinations((max(1, experts // ranks),) * ranks, k)
