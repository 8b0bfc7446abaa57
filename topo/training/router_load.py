"""The busiest expert-parallel rank's load under dropless routing: the expected maximum over the EP ranks.

A dropless router gives each rank whatever its experts were chosen for, so each MoE layer's expert GEMMs and the
all-to-all that gathers their results last as long as the busiest rank's (the combine waits for it). With ``n``
tokens entering an EP group of ``R`` ranks, each token choosing ``k`` distinct experts of ``E`` uniformly (the
top-k of independent random logits: Megatron-Core's forced load balancing, ``moe_router_force_load_balancing``,
which replaces the router's logits by random ones), a rank holding ``B = E / R`` experts receives, per token, a
hypergeometric count of mean ``k / R`` and variance ``k (1/R)(1 - 1/R)(E - k)/(E - 1)``. Summed over the ``n``
independent tokens, a rank's load is close to normal, of mean ``mu = n k / R`` and that variance times ``n``; the
ranks' loads share a fixed total (correlation ``-1/(R - 1)``), which is the law of ``Z_i - mean(Z)`` for ``R``
independent standard normals scaled by ``sigma / sqrt(1 - 1/R)``, so

    E[max load] / mu = 1 + sigma / mu * e_R / sqrt(1 - 1/R),

``e_R`` the expected maximum of ``R`` independent standard normals (``e_2 = 1/sqrt(pi)``, ``e_3 = 3/(2 sqrt(pi))``),
integrated numerically. tests/test_router_load.py checks it against a seeded simulation of the router.

This is a floor for a trained router: a learned router's choices are correlated through the tokens' content, so its
busiest rank carries more. No source found gives a trained router's busiest-rank load per micro-batch for the
recipes topo models (docs/calibration-findings.md, "dropless routing"), so a trained router takes this floor unless
the layout sets ``moe_imbalance``. Status: derived.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["expected_max_std_normal", "uniform_max_over_mean", "uniform_expert_sd", "expected_row_tiles"]

_GRID = np.linspace(-12.0, 12.0, 24_001)  # the integrand of E[max] is below 1e-30 outside +-12 for R <= 1e9
_DX = float(_GRID[1] - _GRID[0])
_PDF = np.exp(-0.5 * _GRID ** 2) / math.sqrt(2.0 * math.pi)


def _ndtr(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF (``scipy.special.ndtr``), imported at its first use: ``scipy.special`` costs about
    0.15 s of CPU to import (with ``numpy.f2py``), which a dense model's step never needs (section 169).

    Parameters
    ----------
    x : numpy.ndarray

    Returns
    -------
    numpy.ndarray
    """
    from scipy.special import ndtr  # here, not at the top: only a dropless MoE router's spread reads it

    return ndtr(x)


@lru_cache(maxsize=1)
def _cdf() -> np.ndarray:
    """``Phi`` on :data:`_GRID`, computed once at its first use (read-only)."""
    out = _ndtr(_GRID)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=1024)
def expected_max_std_normal(n: int) -> float:
    """Expected maximum of ``n`` independent standard normal variables.

    Parameters
    ----------
    n : int
        How many (>= 1).

    Returns
    -------
    float
        ``integral x n phi(x) Phi(x)^(n-1) dx`` (0 for ``n = 1``; ``1/sqrt(pi)`` for 2).
    """
    if n <= 1:
        return 0.0
    density = n * _PDF * np.power(_cdf(), n - 1)
    return float(np.sum(_GRID * density) * _DX)


def uniform_max_over_mean(tokens: float, k: int, experts: int, ranks: int) -> float:
    """Expected load of the busiest of ``ranks`` equal expert shards over the mean load, for a router that sends
    each of ``tokens`` tokens to ``k`` distinct experts chosen uniformly from ``experts``.

    Parameters
    ----------
    tokens : float
        Tokens entering the EP group in one MoE layer's dispatch (every rank's own, summed).
    k : int
        Routed experts per token.
    experts : int
        Routed experts of the layer (``ranks`` divides it).
    ranks : int
        Expert-parallel ranks, ``experts / ranks`` experts each.

    Returns
    -------
    float
        ``>= 1``; 1 for one rank or no tokens.
    """
    if ranks <= 1 or tokens <= 0 or k >= experts:
        return 1.0
    p = 1.0 / ranks
    mean = tokens * k * p
    var = tokens * k * p * (1.0 - p) * (experts - k) / (experts - 1)
    return 1.0 + math.sqrt(var) / mean * expected_max_std_normal(ranks) / math.sqrt(1.0 - p)


def uniform_expert_sd(rows: float, local_experts: int, k: int, experts: int) -> float:
    """Spread of each expert's rows about their mean ``rows`` on a rank of ``B = local_experts`` experts, the
    rank's total given: a token picks each expert with probability ``p = k / E`` and two given experts together
    with ``p (k - 1)/(E - 1)`` (``k`` distinct of ``E``), so an expert's count varies by ``n p (1 - p)`` and two
    co-vary by ``n p ((k - 1)/(E - 1) - p)``; about the rank's own mean the spread is ``(1 - 1/B)`` times their
    difference, ``rows (1 - 1/B)(E - k)/(E - 1)``. 0 for one expert per rank (its count is the rank's, whose
    own spread about its expected maximum is not modelled).

    Parameters
    ----------
    rows : float
        Mean rows of one local expert on the rank.
    local_experts : int
        Experts on the rank (``experts / ep``).
    k, experts : int
        Routed experts per token and of the layer.

    Returns
    -------
    float
        Rows.
    """
    if local_experts <= 1 or experts <= 1:
        return 0.0
    return math.sqrt(max(rows, 0.0) * (1.0 - 1.0 / local_experts) * max(0.0, experts - k) / (experts - 1))


@lru_cache(maxsize=65536)  # a search prices the same expert shapes under many layouts
def expected_row_tiles(rows: float, tile_rows: int, rows_sd: float = 0.0) -> float:
    """Expected row tiles of a GEMM whose row count is ``rows`` on average with spread ``rows_sd`` (normal): the
    expected ``ceil(X / tile_rows)``, ``sum_{j >= 0} P(X > j tile_rows)``; ``ceil(rows / tile_rows)`` when the
    count is fixed (``rows_sd = 0``). A dropless expert's grouped-GEMM tiles: each expert's count varies around
    the mean, so its last tile is partly filled on average, not exactly full or exactly a tile more.

    Parameters
    ----------
    rows : float
        Mean rows (``M``).
    tile_rows : int
        Rows of a tile (``tm``).
    rows_sd : float
        Standard deviation of the rows.

    Returns
    -------
    float
        Tiles (not an integer when ``rows_sd > 0``).
    """
    if rows_sd <= 0.0:
        return float(math.ceil(rows / tile_rows))
    lo = max(0, math.floor((rows - 8.0 * rows_sd) / tile_rows))
    hi = math.ceil((rows + 8.0 * rows_sd) / tile_rows)
    j = np.arange(lo, hi + 1)
    return float(lo + np.sum(1.0 - _ndtr((j * tile_rows - rows) / rows_sd)))
