"""Collectives across sites: the hierarchical composition and NCCL's flat ring and tree, as closed forms over the
in-site phases (timed by the engine on each site's fabric) and the DCI phase (routed on the region's spans).

With ``K`` sites of ``n`` GPUs each, ``S`` the collective's size (nccl-tests' convention), ``L`` the one-way latency
of a cross-site hop (GPU up to the DCI, the span, down to the GPU) and ``B`` the DCI bandwidth the phase gets:

- hierarchical all-reduce (NeMo / Megatron-Core's distributed-optimizer instances, NCCL's cross-DC blog: RS inside
  each site, AR across sites, AG inside): ``T_rs(S) + [2(K-1) L + 2(K-1)/K S / B] + T_ag(S)``. Every GPU
  all-reduces its ``S/n`` shard with the GPUs of the same local index in the other sites; together a site sends
  ``2(K-1)/K S`` over the DCI, whatever ``n``.
- hierarchical all-gather: across sites first (``(K-1)/K S`` per site), then inside; reduce-scatter the reverse.
- pipelined hierarchical (NeMo's chunked overlap: chunk ``c`` crosses the DCI while ``c+1`` is reduce-scattered
  and ``c-1`` all-gathered): the phases are the stages of a pipeline of ``C`` chunks. A phase of latency ``l_i``
  and bandwidth time ``b_i`` takes ``t_i = b_i / C + d_i`` per chunk, ``d_i = min(d, l_i)`` what each chunk's call
  costs (``d``: NCCL's base latency + the kernel launch, the site profile's); the rest of its latency, ``l_i -
  d_i`` (the ring's steps, the long link's flight time), is paid once, as the chunks stream behind each other:
  ``T(C) = sum_i (l_i - d_i) + sum_i t_i + (C - 1) max_i t_i`` (:func:`pipeline_time_s`: the fill and drain of
  one chunk in every other stage, the slowest stage ``C`` times), with the best ``C`` taken. ``C = 1`` is the
  plain hierarchical, so it is never slower. Assumed: the in-site and cross-site phases of different chunks do
  not slow each other (they load different links, except the site's uplinks to the DCI), and a chunk moves at the
  whole size's protocol and efficiency.
- flat ring (NCCL's ring over all ``N = K n`` ranks; on the cross-DC branch each ring crosses each DC boundary once
  per channel): ``2(N-1)`` steps, each waiting for its slowest hop, so ``2(N-1) max(a_site, L)``; the bytes
  ``2(N-1)/N S`` cross each DC boundary. Its bandwidth part is also window-limited: a channel has at most one
  buffer ``W`` (NCCL_BUFFSIZE, 4 MiB) in flight to its peer and gets a slot back a round trip ``R = 2 L`` later,
  so ``c`` channels carrying ``X`` bytes across a boundary take at least ``R x X / (c W)`` (:func:`window_s`:
  the round trip times the chunk count).
- what each phase is charged (``Timed.charged``): its shares of the algorithm's latency and bandwidth parts, which
  sum to them. Hierarchical: each phase whole. Ring and tree: the site and the DCI run at once, so the bandwidth
  part is charged to the phase that bounds it, and the ring's latency ``2(N-1) max(a_site, L)`` to the slower
  hop's phase; the tree's latency is the site's plus the DCI's. Pipelined: each phase's own latency, the slowest
  stage's ``(C-1) d`` more, its bandwidth ``b_i / C`` and the slowest stage's ``(C-1) b_i / C`` more.
- flat tree (the cross-DC branch: one tree per DC, roots chained DC to DC): the site's tree plus ``2 sum_i L_i``
  over the ``K-1`` hops of the chain of roots, each hop ``L_i`` on its own route (GPU up, the route's spans, down:
  on a chain of sites the neighbours' spans, not the longest route), reduced up the chain and broadcast back down;
  each chained span carries ``S`` each way. Equal hops give ``2(K-1) L``. A tree channel's chained roots are one
  rank each (``treeToParent`` to the next DC's ``treeToChild0``, connect.cc ``connectTrees``), so ``S`` crosses
  through one NIC a channel (``c`` NICs, the channels on different nodes by ``NCCL_SCATTER_XDC=1``), at most the
  span's capacity: ``max(S / (c B_nic), S / B_span)`` (the ring's ``2(N-1)/N S`` likewise, one crossing node a
  channel; :func:`topo.engine.region_estimate.crossing_nics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Phase", "Timed", "hierarchical", "pipelined", "pipeline_time_s", "flat_ring", "flat_tree",
           "window_s", "dci_phase_bytes", "CROSS_SITE_ALGORITHMS"]

CROSS_SITE_ALGORITHMS = ("hierarchical", "hierarchical_pipelined", "ring", "tree")


@dataclass(frozen=True)
class Phase:
    """One phase's time: its latency part, its bandwidth part and what bounds the bandwidth part."""

    latency_s: float
    bandwidth_s: float
    bound: str = ""

    @property
    def time_s(self) -> float:
        """The latency part plus the bandwidth part."""
        return self.latency_s + self.bandwidth_s


@dataclass(frozen=True)
class Timed:
    """An algorithm's time across sites, with its parts and the resource that bounds it."""

    algorithm: str
    time_s: float
    latency_s: float
    bandwidth_s: float
    bottleneck: str
    phases: dict  # name -> Phase (as timed alone), besides ``chunks`` and ``per_chunk_s`` of the pipelined
    charged: dict = field(default_factory=dict)  # name -> Phase: its share of latency_s and bandwidth_s (they sum)


def dci_phase_bytes(collective: str, num_sites: int, size_bytes: float) -> float:
    """Bytes each site sends to the next in the cross-site ring of the hierarchical ``collective``.

    Parameters
    ----------
    collective : str
        all_reduce, all_gather or reduce_scatter.
    num_sites : int
        ``K``.
    size_bytes : float
        ``S``, the collective's size (nccl-tests' convention).

    Returns
    -------
    float
        ``2(K-1)/K S`` for all-reduce, ``(K-1)/K S`` for all-gather and reduce-scatter.
    """
    K = num_sites
    return (2.0 if collective == "all_reduce" else 1.0) * (K - 1) / K * size_bytes


def hierarchical(phases: dict[str, Phase]) -> Timed:
    """The phases one after another; the bound is the slowest phase's.

    Parameters
    ----------
    phases : dict of str to Phase
        ``rs``, ``dci``, ``ag`` as the collective needs them, in order.

    Returns
    -------
    Timed
    """
    lat = sum(p.latency_s for p in phases.values())
    bw = sum(p.bandwidth_s for p in phases.values())
    worst = max(phases.values(), key=lambda p: p.time_s)
    return Timed("hierarchical", lat + bw, lat, bw, worst.bound, dict(phases), dict(phases))


def pipeline_time_s(chunk_s, chunks, fill_s: float = 0.0):
    """A pipeline of stages over ``chunks`` chunks: ``fill_s + sum_i t_i + (chunks - 1) max_i t_i``.

    The slowest stage works ``chunks`` times; each other stage's one chunk is the pipeline's fill (before the
    slowest stage's first chunk) or its drain (after its last). Three stages of ``t`` each over ``C`` chunks:
    ``(C + 2) t``.

    Parameters
    ----------
    chunk_s : array_like
        ``(stages,)`` or ``(stages, n)``: each stage's time per chunk (one column per chunk count).
    chunks : int or array_like
        ``C`` (or ``(n,)`` of them).
    fill_s : float or array_like
        Paid once besides (the latency that streams).

    Returns
    -------
    float or numpy.ndarray
    """
    t = np.asarray(chunk_s, dtype=float)
    return fill_s + t.sum(axis=0) + (np.asarray(chunks) - 1) * t.max(axis=0)


def pipelined(phases: dict[str, Phase], per_chunk_s: float = 0.0, max_chunks: int = 1024) -> Timed:
    """The phases as the stages of a pipeline of ``C`` chunks (see the module doc), the best ``C`` taken.

    Parameters
    ----------
    phases : dict of str to Phase
        As :func:`hierarchical` takes them.
    per_chunk_s : float
        ``d``: what one chunk's call costs in a phase whatever its size (at most the phase's latency).
    max_chunks : int
        ``C`` is the fastest of 1 ... this (the first of equals).

    Returns
    -------
    Timed
        Its ``phases`` also hold ``chunks``, the ``C`` taken, and ``per_chunk_s``.
    """
    lat = np.array([p.latency_s for p in phases.values()])
    bw = np.array([p.bandwidth_s for p in phases.values()])
    d = np.minimum(per_chunk_s, lat)
    C = np.arange(1, max_chunks + 1)
    per = bw[:, None] / C + d[:, None]  # (phases, C)
    fill = float((lat - d).sum())
    T = pipeline_time_s(per, C, fill)
    k = int(np.argmin(T))
    c, t = int(C[k]), float(T[k])
    worst = int(np.argmax(per[:, k]))
    bandwidth = float(bw.sum() / c + (c - 1) * bw[worst] / c)
    name = list(phases)[worst]
    more = (np.arange(len(bw)) == worst) * (c - 1)  # the slowest stage works c times
    charged = {k: Phase(float(lat[i] + more[i] * d[i]), float(bw[i] / c + more[i] * bw[i] / c), p.bound)
               for i, (k, p) in enumerate(phases.items())}
    return Timed("hierarchical_pipelined", t, t - bandwidth, bandwidth, phases[name].bound,
                 {**phases, "chunks": c, "per_chunk_s": float(per_chunk_s)}, charged)


def window_s(boundary_bytes: float, round_trip_s: float, channels: int, buffer_bytes: float) -> float:
    """The least time ``channels`` flow-controlled channels take to carry ``boundary_bytes`` over a link of round
    trip ``round_trip_s`` when each has at most ``buffer_bytes`` in flight: ``R x X / (c W)``, the round trip
    times the chunk count (one buffer per channel per round trip).

    Parameters
    ----------
    boundary_bytes : float
        ``X``, the bytes every channel together carries across the link, one way.
    round_trip_s : float
        ``R``.
    channels : int
        ``c``.
    buffer_bytes : float
        ``W``, NCCL_BUFFSIZE.

    Returns
    -------
    float
    """
    return round_trip_s * boundary_bytes / (channels * buffer_bytes)


def flat_ring(num_ranks: int, site_step_latency_s: float, site_bandwidth_s: float, cross_latency_s: float,
              dci: Phase, site_bound: str = "site", window: Phase | None = None) -> Timed:
    """NCCL's ring over every rank of every site (see the module doc).

    Parameters
    ----------
    num_ranks : int
        ``N``, every rank of every site.
    site_step_latency_s : float
        One step's latency of the ring inside a site.
    site_bandwidth_s : float
        The ring's bandwidth part inside a site, for ``N`` ranks.
    cross_latency_s : float
        ``L``, one cross-site hop one way.
    dci : Phase
        The DCI carrying ``2(N-1)/N S`` across each site boundary (its bandwidth part and bound).
    site_bound : str
        What bounds the site's ring.
    window : Phase, optional
        The flow-control bound across the long link (:func:`window_s` as its bandwidth part, its name as bound).

    Returns
    -------
    Timed
        ``2(N-1) max(a_site, L)`` of latency; the slowest of the site's, the DCI's and the window's bandwidth parts.
        Its phases: ``dci`` (``2(N-1) L``, its bandwidth part), ``site`` (``2(N-1) a_site``, the ring's bandwidth
        part inside the sites) and ``window``.
    """
    steps = 2 * (num_ranks - 1)
    phases = {"dci": Phase(steps * cross_latency_s, dci.bandwidth_s, dci.bound),
              "site": Phase(steps * site_step_latency_s, site_bandwidth_s, site_bound)}
    if window is not None:
        phases["window"] = window
    slow = "dci" if cross_latency_s >= site_step_latency_s else "site"
    bw_name = max(phases, key=lambda k: phases[k].bandwidth_s)  # the first of equals: the DCI, then the site
    lat, bw = phases[slow].latency_s, phases[bw_name].bandwidth_s
    return Timed("ring", lat + bw, lat, bw, phases[bw_name].bound, phases, _charge(phases, {slow}, bw_name))


def _charge(phases: dict[str, Phase], lat_names, bw_name: str) -> dict[str, Phase]:
    """Phases that run at once: the latency of those in ``lat_names`` and the bandwidth part of ``bw_name``."""
    return {k: Phase(p.latency_s if k in lat_names else 0.0, p.bandwidth_s if k == bw_name else 0.0, p.bound)
            for k, p in phases.items()}


def flat_tree(site: Phase, hop_latency_s, dci: Phase) -> Timed:
    """One tree per site, roots chained site to site (see the module doc).

    Parameters
    ----------
    site : Phase
        The tree all-reduce inside a site.
    hop_latency_s : array_like
        ``L_i``, each of the ``K-1`` hops of the chain of roots one way (GPU up, its route, down).
    dci : Phase
        The chained spans carrying ``S`` each way.

    Returns
    -------
    Timed
        ``a_site + 2 sum_i L_i`` of latency (up the chain and back down); the slower of the site's and the DCI's
        bandwidth parts.
    """
    phases = {"site": site, "dci": Phase(2 * float(np.sum(hop_latency_s)), dci.bandwidth_s, dci.bound)}
    lat = site.latency_s + phases["dci"].latency_s
    bw_name = "dci" if dci.bandwidth_s >= site.bandwidth_s else "site"
    bw = phases[bw_name].bandwidth_s
    return Timed("tree", lat + bw, lat, bw, phases[bw_name].bound, phases, _charge(phases, set(phases), bw_name))
