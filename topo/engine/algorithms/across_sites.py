"""Collectives across sites: the hierarchical composition and NCCL's flat ring and tree, as closed forms over the
in-site phases (timed by the engine on each site's fabric) and the DCI phase (routed on the region's spans).

With ``K`` sites of ``n`` GPUs each, ``S`` the collective's size (nccl-tests' convention), ``L`` the one-way latency
of a cross-site hop (GPU up to the DCI, the span, down to the GPU) and ``B`` the DCI bandwidth the phase gets:

- hierarchical all-reduce (NeMo / Megatron-Core's distributed-optimizer instances, NCCL's cross-DC blog: RS inside
  each site, AR across sites, AG inside): ``T_rs(S) + [2(K-1) L + 2(K-1)/K S / B] + T_ag(S)``. Every GPU
  all-reduces its ``S/n`` shard with the GPUs of the same local index in the other sites; together a site sends
  ``2(K-1)/K S`` over the DCI, whatever ``n``.
- hierarchical all-gather: across sites first (``(K-1)/K S`` per site), then inside; reduce-scatter the reverse.
- pipelined hierarchical: the same three phases cut into ``C`` chunks that overlap (chunk ``c`` crosses the DCI
  while ``c+1`` is reduce-scattered): the long link's latency is paid once, as the pipeline fills, not per chunk
  or per step; ``T = 2(K-1) L + sum_i s_i + (C-1) max_i s_i`` with ``s_i`` a phase's time per chunk.
- flat ring (NCCL's ring over all ``N = K n`` ranks; on the cross-DC branch each ring crosses each DC boundary once
  per channel): ``2(N-1)`` steps, each waiting for its slowest hop, so ``2(N-1) max(a_site, L)``; the bytes
  ``2(N-1)/N S`` cross each DC boundary.
- flat tree (the cross-DC branch: one tree per DC, roots chained DC to DC): the site's tree plus ``2(K-1) L``; each
  chained span carries ``S`` each way.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Phase", "Timed", "hierarchical", "pipelined", "flat_ring", "flat_tree", "dci_phase_bytes",
           "CROSS_SITE_ALGORITHMS"]

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
    phases: dict  # name -> Phase


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
    return Timed("hierarchical", lat + bw, lat, bw, worst.bound, dict(phases))


def pipelined(phases: dict[str, Phase], max_chunks: int = 64) -> Timed:
    """The phases cut into ``C`` chunks that overlap: the cross-site phase's latency is paid once (the pipeline
    fill); an in-site phase pays its latency per chunk.

    Parameters
    ----------
    phases : dict of str to Phase
        As :func:`hierarchical` takes them.
    max_chunks : int
        ``C`` is the fastest power of two up to this.

    Returns
    -------
    Timed
        Its ``phases`` also hold ``chunks``, the ``C`` taken.
    """
    best = None
    C = 1
    while C <= max_chunks:
        per = [p.bandwidth_s / C + (0.0 if name == "dci" else p.latency_s) for name, p in phases.items()]
        fill = phases["dci"].latency_s if "dci" in phases else 0.0
        t = fill + sum(per) + (C - 1) * max(per)
        if best is None or t < best[0]:
            best = (t, C, per)
        C *= 2
    t, C, per = best
    names = list(phases)
    worst = names[max(range(len(per)), key=per.__getitem__)]
    lat = phases["dci"].latency_s + C * sum(p.latency_s for n, p in phases.items() if n != "dci")
    return Timed("hierarchical_pipelined", t, min(lat, t), max(0.0, t - lat), phases[worst].bound,
                 {**phases, "chunks": C})


def flat_ring(num_ranks: int, site_step_latency_s: float, site_bandwidth_s: float, cross_latency_s: float,
              dci: Phase, site_bound: str = "site") -> Timed:
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

    Returns
    -------
    Timed
        ``2(N-1) max(a_site, L)`` of latency; the slower of the site's and the DCI's bandwidth parts.
    """
    lat = 2 * (num_ranks - 1) * max(site_step_latency_s, cross_latency_s)
    bw, bound = (dci.bandwidth_s, dci.bound) if dci.bandwidth_s >= site_bandwidth_s else (site_bandwidth_s, site_bound)
    return Timed("ring", lat + bw, lat, bw, bound, {"dci": dci})


def flat_tree(site: Phase, num_sites: int, cross_latency_s: float, dci: Phase) -> Timed:
    """One tree per site, roots chained site to site (see the module doc).

    Parameters
    ----------
    site : Phase
        The tree all-reduce inside a site.
    num_sites : int
    cross_latency_s : float
        One cross-site hop one way.
    dci : Phase
        The chained spans carrying ``S`` each way.

    Returns
    -------
    Timed
    """
    lat = site.latency_s + 2 * (num_sites - 1) * cross_latency_s
    bw, bound = (dci.bandwidth_s, dci.bound) if dci.bandwidth_s >= site.bandwidth_s else (site.bandwidth_s, site.bound)
    return Timed("tree", lat + bw, lat, bw, bound, {"site": site, "dci": dci})
