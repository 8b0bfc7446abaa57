"""Sliding-window attention from its tiles: the work a fused kernel computes for a local window, and its rate.

A fused attention kernel (cuDNN's, FlashAttention-3 on SM90, FlashAttention-4 on SM100) gives each query tile of
``tile_q`` rows to one CTA, which loads the tile, loops over key tiles of ``tile_k`` columns (two GEMMs, the
online softmax and, on a tile the mask cuts, the mask), then rescales and stores its output. It skips key tiles
wholly outside the mask and computes every score of a tile it enters. A sliding window of ``w`` keys (a query
attends to itself and the ``w - 1`` before it) thus costs more than its band:

- **computed over useful scores** (:func:`computed_over_useful`): a query tile spans ``tile_q + w - 1`` keys, so
  it enters ``(tile_q + w) / tile_k`` key tiles when both are multiples of ``tile_k``, and computes
  ``tile_q (tile_q + w)`` scores for ``tile_q w`` useful: ``1 + tile_q / w``. At GPT-OSS's 128-key window that is
  2 with 128-row tiles (FlashAttention-4's backward and a single-stage forward on SM100), 3 with 256-row tiles (its
  two-stage forward), 3.5 with FlashAttention-3's 192 x 160 local tiles at head dim 64 (SM90).
- **the rate** (:func:`window_rate`, :func:`window_keys`): a query tile takes ``c + k + m_k`` tile-times, ``k`` the key tiles it
  computes, ``m_k`` the extra cost of the masked ones and ``c`` its fixed part (Q load, final rescale, output
  store). In keys of the steady rate, full attention over ``s`` keys then runs at ``s / (s + k_full)`` of it and
  causal at ``s / (s + k_causal)``; for a window (two masked tiles per query tile: the diagonal and the window's
  edge, against the causal mask's one) the same count gives ``w / (w + k_causal - k_full)``: the window's fixed
  cost is the difference of the two masks' fixed costs, whatever the tile size. ``k_full`` and ``k_causal`` are
  read off a published table's full and causal curves (:func:`fixed_keys`: the time per useful FLOP is linear in
  ``1 / s``). Checked against cuDNN's own sliding-window measurements (tests/test_training_attention_tiles.py):
  the B200 hdim-64 table predicts GB200's 128-key window within 2% and the Hopper table H200's 1,024-key window
  within 3% forward and 7% backward (:func:`window_keys`: the backward on its own curve's fixed cost).

The rate above is the band's, far from the sequence's start. A sequence's first ``w`` rows attend to fewer than
``w`` keys: they are a causal block of ``w`` (one masked tile per query tile, not two), so a window over ``s``
tokens spends ``w (w + 1) / 2`` of its ``w (w + 1) / 2 + (s - w) w`` useful scores at the causal rate at ``w``
(:func:`band_rate`): 1.6% at GPT-OSS's 128 keys over 4,096 tokens, a third at 4,096 over 8,192, all of it as ``w``
reaches ``s``, where the window is the causal mask.

The kernel model (:func:`topo.training.kernels.attention_rate_flops`) prices a sliding window with
:func:`window_rate` and :func:`band_rate`, anchored on a measured window where its table has one (its band's
rate taken out of the measurement by :func:`band_only_rate`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["computed_over_useful", "key_tiles", "fixed_keys", "window_keys", "window_rate", "band_rate",
           "band_only_rate"]


def key_tiles(seq: int, window: int, tile_q: int, tile_k: int) -> tuple[float, float]:
    """Scores a tiled kernel computes and the band's useful scores, for one head of a causal sliding window.

    Parameters
    ----------
    seq : int
        Tokens of the sequence.
    window : int
        Keys a query attends to (itself and ``window - 1`` before it).
    tile_q, tile_k : int
        Rows of a query tile, columns of a key tile.

    Returns
    -------
    tuple of float
        ``(computed, useful)``: every score of each key tile a query tile enters (rows that exist times
        ``tile_k``), and the band's ``sum_i min(i + 1, window)``.
    """
    start = np.arange(0, seq, tile_q, dtype=np.int64)
    end = np.minimum(start + tile_q, seq) - 1  # last query row of each tile
    first_key = np.maximum(0, start - window + 1)
    tiles = end // tile_k - first_key // tile_k + 1
    computed = float(np.sum(tiles * (end - start + 1) * tile_k))
    w = min(window, seq)
    useful = w * (w + 1) / 2 + (seq - w) * w
    return computed, float(useful)


def computed_over_useful(window: float, tile_q: int, tile_k: int) -> float:
    """Computed over useful scores of a sliding window of ``window`` keys far from the sequence's start.

    A query tile's keys span ``tile_q + window - 1``; over the tile starts (multiples of ``tile_q``: offsets in
    steps of ``g = gcd(tile_q, tile_k)`` inside a key tile) it enters ``(tile_q + window - g) / tile_k + 1`` key
    tiles on average when ``window`` is a multiple of ``g`` (:func:`key_tiles` counts them exactly), each of
    ``tile_q tile_k`` scores, for ``tile_q window`` useful.

    Parameters
    ----------
    window : float
        Keys a query attends to.
    tile_q, tile_k : int
        Query and key tile sizes.

    Returns
    -------
    float
        ``1 + (tile_q + tile_k - g) / window`` (``g = gcd(tile_q, tile_k)``): 2 for 128 x 128 tiles at a 128-key
        window.
    """
    g = math.gcd(int(tile_q), int(tile_k))
    return 1.0 + (tile_q + tile_k - g) / float(window)


def fixed_keys(seq, rates) -> tuple[float, float]:
    """The steady rate and fixed cost, in keys, of a published attention curve.

    Under the tile count of the module doc a kernel's time per useful FLOP at length ``s`` is
    ``(1 + k / s) / R``: fitted by least squares on ``1 / rate`` against ``1 / s``.

    Parameters
    ----------
    seq : sequence of float
        Lengths of the curve.
    rates : sequence of float
        Its rates (any unit).

    Returns
    -------
    tuple of float
        ``(R, k)``: the rate as ``s`` grows (the rates' unit) and the fixed keys.
    """
    s = np.asarray(seq, dtype=float)
    y = 1.0 / np.asarray(rates, dtype=float)
    a, b = np.linalg.lstsq(np.vstack([np.ones_like(s), 1.0 / s]).T, y, rcond=None)[0]
    return float(1.0 / a), float(b / a)


def window_keys(seq, full, causal, pass_full=None) -> float:
    """The fixed cost, in keys, of a sliding window: ``k_causal - k_full`` of one pass's full and causal curves
    at one head dim (module doc).

    In the tile count of the module doc ``k_full = c`` (a query tile's fixed part) and ``k_causal = 2 c + m_k``
    (``m_k``: the diagonal's masked tiles and the keys they waste, counted twice: a causal row attends to half its
    keys on average), so the window's ``c + m_k`` is ``k_full + (k_causal - 2 k_full)``. A pass measured with the
    full mask only (Hopper's backward table) has its own ``c``: ``pass_full``, that pass's full-mask curve, gives
    it, and ``m_k`` comes from ``full`` and ``causal`` (the forward's): the window never costs less than the
    pass's full mask over as many keys, which borrowing the forward's ``c`` as well did (a 1,024-key window's
    backward 25% above cuDNN's measured H200 rate, tests/test_training_attention_tiles.py).

    Parameters
    ----------
    seq : sequence of float
        The curves' lengths.
    full, causal : sequence of float
        Full-mask and causal rates at those lengths (one pass).
    pass_full : sequence of float, optional
        Full-mask rates of the pass being priced, where it has no causal curve of its own.

    Returns
    -------
    float
        Keys.
    """
    k_full = fixed_keys(seq, full)[1]
    own = k_full if pass_full is None else fixed_keys(seq, pass_full)[1]
    return max(0.0, own) + max(0.0, fixed_keys(seq, causal)[1] - 2.0 * k_full)


def window_rate(window: float, rate_inf: float, keys: float, anchor: tuple | None = None) -> float:
    """Rate of a sliding window of ``window`` keys: ``rate_inf w / (w + keys)`` (module doc).

    Parameters
    ----------
    window : float
        Keys a query attends to.
    rate_inf : float
        The kernel's steady rate (:func:`fixed_keys` of a full-mask curve).
    keys : float
        The window's fixed keys (:func:`window_keys`).
    anchor : tuple, optional
        ``(window, rate)`` measured for a sliding window of the same kernel: that rate moved along
        ``w / (w + keys)`` to ``window`` instead (``rate_inf`` unused).

    Returns
    -------
    float
        The window's rate, in the unit of ``rate_inf`` (or of the anchor's rate).
    """
    def shape(w: float) -> float:
        return w / (w + keys)

    if anchor is not None:
        w0, rate0 = anchor
        return float(rate0) * shape(float(window)) / shape(float(w0))
    return float(rate_inf) * shape(float(window))


def _band_scores(seq: float, window: float) -> tuple[float, float]:
    """Useful scores of a sliding window over ``seq`` tokens, per head: the first ``window`` rows' causal
    triangle and the band after them."""
    w = min(float(window), float(seq))
    return w * (w + 1.0) / 2.0, (float(seq) - w) * w


def band_rate(seq: float, window: float, rate_causal: float, rate_band: float) -> float:
    """Rate of a sliding window of ``window`` keys over ``seq`` tokens (module doc): the first ``window`` rows at
    the causal rate at ``window`` keys, the rest at the band's.

    Parameters
    ----------
    seq : float
        Tokens the window slides over.
    window : float
        Keys a query attends to.
    rate_causal : float
        The causal mask's rate at ``window`` keys.
    rate_band : float
        The band's rate (:func:`window_rate`).

    Returns
    -------
    float
        Useful scores over the time of both parts, in the rates' unit: ``rate_causal`` at ``window >= seq``.
    """
    tri, rect = _band_scores(seq, window)
    return (tri + rect) / (tri / rate_causal + rect / rate_band)


def band_only_rate(seq: float, window: float, rate_causal: float, rate_measured: float) -> float:
    """The band's rate in a measured sliding window (the inverse of :func:`band_rate`): its causal triangle's time
    taken out.

    Parameters
    ----------
    seq, window : float
        The measurement's tokens and window.
    rate_causal : float
        The causal mask's rate at ``window`` keys.
    rate_measured : float
        The measured window's rate (its FLOPs counting the whole band, the triangle included).

    Returns
    -------
    float
        The band's rate (``rate_measured`` when the triangle alone would take the measured time).
    """
    tri, rect = _band_scores(seq, window)
    rest = (tri + rect) / rate_measured - tri / rate_causal
    return rect / rest if rect > 0 and rest > 0 else float(rate_measured)
