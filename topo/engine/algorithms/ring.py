"""Ring algorithms: all-reduce (reduce-scatter + all-gather), all-gather, reduce-scatter, pipelined broadcast.

Closed forms on a uniform non-blocking network (Thakur, Rabenseifner, Gropp, IJHPCA 2005), with p ranks,
message size S, per-hop latency alpha and bandwidth B:

- all-reduce: ``2(p-1)*alpha + 2(p-1)/p * S/B``
- all-gather, reduce-scatter: ``(p-1)*alpha + (p-1)/p * S/B``
- broadcast, pipelined chain of k chunks: ``(p-1 + k-1) * (alpha + S/(k*B))``

Channels, as NCCL forms them: when the ring leaves the NVLink domain, it runs one ring per NIC (rail), each
carrying ``1/C`` of the data and leaving every domain through its own NIC. Inside domain ``i`` the ring of
channel ``c`` starts at the domain's ``(c - i) mod g``-th rank and ends one before it, so the rank that leaves a
domain and the rank that enters the next have the same local index: every network hop stays on one rail, and over
the ``C`` channels every NIC sends and receives exactly once. Each step of a ring moves one ``S/(p*C)`` chunk
along every edge of every channel; steps are identical, so one is scheduled and repeated. With ``channels`` set
(NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS pin it), channel ``c`` leaves through local NIC ``c mod g``: fewer
channels than NICs leave NICs idle, more reuse them.
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..schedule import (AlgorithmUnavailable, LatencyCounts, LatencyTerm, NodeShape, Schedule, SchedulePhase,
                        Transfers, is_network)

__all__ = ["ring_orders", "ring_phase", "ring_schedule", "chain_schedule", "channels_for"]


MAX_CHANNELS = 64  # NCCL's MAXCHANNELS: the most channels a communicator runs


def nic_slots(shape: NodeShape, groups: np.ndarray) -> tuple[int, np.ndarray] | None:
    """The NICs of one domain block of a ring.

    Ranks sharing a NIC share a slot.

    Parameters
    ----------
    shape : NodeShape
    groups : numpy.ndarray
        ``[communicators, ranks]`` GPU ids in NCCL order.

    Returns
    -------
    tuple or None
        ``(number of NICs, NIC slot of each rank of the block)``, or None when the domains hold unequal numbers of
        ranks.
    """
    g = _block_size(shape, groups)
    if not g:
        return None
    nics = shape.nic_of(groups[0, :g])
    _, slot = np.unique(nics, return_inverse=True)
    return int(slot.max()) + 1, slot


def channels_for(shape: NodeShape, groups: np.ndarray, channels: int | None = None) -> int:
    """The channels a ring runs.

    ``channels`` if given; else, when the rings leave their NVLink domain, one channel per NIC that a domain's ranks
    have (every NIC carries a channel: 8 on a DGX H100, 4 for 8 GPUs on 4 NICs, 32 for 32 EFA NICs, 16 for a domain
    of two 8-NIC servers; at most NCCL's 64); else one.

    Parameters
    ----------
    shape : NodeShape
    groups : numpy.ndarray
    channels : int, optional

    Returns
    -------
    int
    """
    if channels:
        return int(channels)
    doms = groups // shape.gpus_per_domain
    if not np.any(doms != doms[:, :1]):
        return 1
    slots = nic_slots(shape, groups)
    if slots is None:  # domains hold unequal numbers of ranks: one channel per NIC of the smallest domain
        counts = []
        for rows, starts, sizes in run_patterns(groups, shape.gpus_per_domain):
            fewest = int(nics_per_run(shape, groups[rows[0]], sizes).min())
            counts.append(fewest * (shape.nics_per_gpu if fewest == sizes.min() else 1))
        return int(min(min(counts), MAX_CHANNELS))
    n, slot = slots
    per_rank = shape.nics_per_gpu if n == slot.size else 1
    return int(min(n * per_rank, MAX_CHANNELS))


def nics_per_run(shape: NodeShape, ranks: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The distinct NICs beside each run of ``ranks`` (consecutive runs of ``sizes`` ranks covering the row, as
    :func:`domain_runs` gives them), in one sort of the row's (run, NIC) pairs rather than one per run.

    Parameters
    ----------
    shape : NodeShape
    ranks : numpy.ndarray
        One group's GPU ids in NCCL order.
    sizes : numpy.ndarray
        The runs' lengths, summing to ``ranks.size``.

    Returns
    -------
    numpy.ndarray
        The count of distinct NICs of each run.
    """
    nics = shape.nic_of(ranks).astype(np.int64)
    nics -= nics.min()  # from 0, so that each run's (run, NIC) code is its own whatever the ids (tidy76)
    width = int(nics.max()) + 1
    pairs = np.unique(np.repeat(np.arange(sizes.size, dtype=np.int64), sizes) * width + nics)
    return np.bincount(pairs // width, minlength=sizes.size)


def domain_runs(ranks: np.ndarray, gpus_per_domain: int) -> tuple[np.ndarray, np.ndarray]:
    """Start and length of each run of consecutive ranks in one NVLink domain (a group's order).

    Parameters
    ----------
    ranks : numpy.ndarray
    gpus_per_domain : int

    Returns
    -------
    starts, lengths : numpy.ndarray
    """
    doms = ranks // gpus_per_domain
    starts = np.r_[0, np.flatnonzero(np.diff(doms) != 0) + 1]
    return starts, np.diff(np.r_[starts, doms.size])


def run_patterns(groups: np.ndarray, gpus_per_domain: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The groups that split alike over NVLink domains, each kind with its runs (:func:`domain_runs`).

    Concurrent groups whose size does not divide the domain's split differently (walk30: 96-rank groups on 72-GPU
    racks, the first 72 + 24, the second 48 + 48), so no group's runs stand for another's.

    Parameters
    ----------
    groups : numpy.ndarray
        ``[communicators, ranks]`` GPU ids in NCCL order.
    gpus_per_domain : int

    Returns
    -------
    list of tuple
        ``(rows, starts, lengths)``: the rows of ``groups`` of one kind and that kind's runs.
    """
    doms = groups // gpus_per_domain
    cuts = np.diff(doms, axis=1) != 0
    if len(cuts) and (cuts == cuts[0]).all():  # every group splits alike (as a search's mostly do): one kind, no
        # sort of the rows (``np.unique`` over a few long rows takes ~0.4 s at 100k GPUs)
        return [(np.arange(len(groups)), *domain_runs(groups[0], gpus_per_domain))]
    kinds, which = np.unique(cuts, axis=0, return_inverse=True)
    which = np.asarray(which).ravel()
    out = []
    for k in range(len(kinds)):
        rows = np.flatnonzero(which == k)
        out.append((rows, *domain_runs(groups[rows[0]], gpus_per_domain)))
    return out


def _block_size(shape: NodeShape, groups: np.ndarray) -> int | None:
    """Ranks per domain along every group's ring when every domain of every group holds the same number, else
    None."""
    kinds = run_patterns(groups, shape.gpus_per_domain)
    runs = kinds[0][2]
    return int(runs[0]) if len(kinds) == 1 and np.all(runs == runs[0]) else None


def ring_orders(shape: NodeShape, groups: np.ndarray, channels: int) -> np.ndarray:
    """Ring order of every channel of every group.

    ``groups`` rows are ranks in NCCL order (by domain), ``g`` ranks in each of ``D`` domains, or each row by its own
    runs where rows split unlike over the domains. Every channel enters and leaves each domain through the same NIC
    slot, so network hops stay on one rail:

    - ranks sharing NICs (e.g. 8 GPUs on 4 NICs): channel ``c`` uses NIC ``c mod n``: it enters each domain at
      that NIC's first rank, visits the others, and leaves from that NIC's last rank;
    - a NIC per rank: channel ``c`` rotates domain ``i``'s block by ``c - i``, so the rank leaving a domain and the
      rank entering the next have the same local index; the last domain is ordered to leave from the first domain's
      entry index (``c``), closing the ring on one rail too (unless it would have to enter and leave by the same
      rank, when D = 1 mod g: that one edge is forwarded over NVLink, PXN);
    - domains holding unequal numbers of ranks (e.g. 128 ranks on two 72-GPU racks): channel ``c`` rotates the
      ``b``-th domain's run by ``c - b`` too, so the channels leave every domain through different ranks and NICs
      (a rail may change between domains, which PXN or the spines carry).

    Parameters
    ----------
    shape : NodeShape
    groups : numpy.ndarray
    channels : int

    Returns
    -------
    numpy.ndarray
        ``[channels, groups, n]`` GPU ids.
    """
    G, n = groups.shape
    slots = nic_slots(shape, groups)
    out = np.empty((channels, G, n), dtype=np.int64)
    if slots is None and channels > 1:  # unequal domains: channel c rotates domain run b by c - b, as below
        for rows, starts, sizes in run_patterns(groups, shape.gpus_per_domain):  # each group by its own runs
            block = np.repeat(np.arange(starts.size), sizes)
            off = np.arange(n) - starts[block]
            for c in range(channels):
                out[c, rows] = groups[rows][:, starts[block] + (c - block + off) % sizes[block]]
        return out
    if slots is None or slots[1].size == 1:
        out[:] = groups[None]
        return out
    nslots, slot = slots
    g = slot.size
    D = n // g
    j = np.arange(n)
    block, off = j // g, j % g
    for c in range(channels):
        if nslots < g:  # shared NICs
            mine = np.flatnonzero(slot == c % nslots)
            local = np.r_[mine[:1], np.flatnonzero(slot != c % nslots), mine[1:]]
            idx = block * g + local[off]
        else:
            idx = block * g + (c - block + off) % g
            a, b = (c - (D - 1)) % g, c % g
            if D > 1 and D % g and a != b:  # close the ring on the first domain's entry rail
                rest = [x for x in range(g) if x not in (a, b)]
                last = np.array([a, *rest, b])
                tail = block == D - 1
                idx[tail] = (D - 1) * g + last[off[tail]]
        out[c] = groups[:, idx]
    return out


def ring_phase(shape: NodeShape, groups: np.ndarray, bytes_per_flow: float, repeat: float,
               channels: int | None = None, drop_wrap: bool = False, label: str = "ring"):
    """One step of rings over ``groups`` (all at once), and the hop counts of a chunk's trip round one ring.

    Parameters
    ----------
    shape : NodeShape
    groups : numpy.ndarray
    bytes_per_flow : float
        Bytes per byte of message on each ring edge.
    repeat : float
        Steps the phase stands for.
    channels : int, optional
    drop_wrap : bool
        Count the trip without its slowest edge unless set.
    label : str

    Returns
    -------
    tuple
        ``(SchedulePhase, (intra, inter, edges), channels)``: the hop counts for channel 0, group 0.
    """
    C = channels_for(shape, groups, channels)
    orders = ring_orders(shape, groups, C)
    src = orders
    dst = np.roll(orders, -1, axis=2)
    g = _block_size(shape, groups) or 1
    # with several NICs per GPU, channels beyond the first g go through the GPUs' other NICs
    choice = np.broadcast_to((np.arange(C) // g % shape.nics_per_gpu)[:, None, None], orders.shape)
    if drop_wrap:
        src, dst, choice = src[:, :, :-1], dst[:, :, :-1], choice[:, :, :-1]
    m = src.shape[2]
    t = Transfers(src.ravel(), dst.ravel(), bytes_per_flow / C, np.ascontiguousarray(choice).ravel())
    inter = is_network(shape, src[0, 0], dst[0, 0])
    n_inter, n_intra = int(inter.sum()), int((~inter).sum())
    if not drop_wrap and m > 0:  # a chunk goes round in m-1 hops: the slowest edge (a network one) is skipped
        if n_inter:
            n_inter -= 1
        else:
            n_intra -= 1
    return SchedulePhase([t], repeat, label), (n_intra, n_inter, m), C


def ring_schedule(shape: NodeShape, placement: Placement, collective: str, channels: int | None = None) -> Schedule:
    """The ring schedule for all_reduce, all_gather or reduce_scatter over the whole placement.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    collective : str
    channels : int, optional
        Pinned NCCL channels.

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("a ring needs at least 2 ranks")
    steps = 2 * (p - 1) if collective == "all_reduce" else p - 1
    traversals = 2 if collective == "all_reduce" else 1
    phase, (intra, inter, m), C = ring_phase(shape, placement.groups, 1.0 / p, steps, channels)
    counts = LatencyCounts("ring", intra_hops=traversals * intra, inter_hops=traversals * inter,
                           multi_domain=placement.num_domains > 1, one_per_domain=placement.ranks_per_domain() == 1,
                           ring_allreduce=collective == "all_reduce")
    return Schedule("ring", "ring", [phase], counts, [LatencyTerm(0, 0, "ring", traversals, first=m)], channels=C)


def chain_schedule(shape: NodeShape, placement: Placement, chunks: int | None = None, algorithm: str = "ring",
                   channels: int | None = None) -> Schedule:
    """Pipelined broadcast from rank 0 along the ring order (a chain: no edge back to the root).

    ``chunks=None``: streaming, as NCCL pipelines it: latency along the chain once, every edge carries S.
    ``chunks=k``: store-and-forward of k chunks, ``(p-1 + k-1)`` steps of ``S/k`` (the textbook form), each step
    paying one hop's latency (the slowest: a network hop when the chain leaves a domain).

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    chunks : int, optional
    algorithm : str
        The name the schedule reports.
    channels : int, optional

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    p = placement.num_ranks
    if p < 2:
        raise AlgorithmUnavailable("a broadcast needs at least 2 ranks")
    groups = placement.groups
    C = channels_for(shape, groups, channels) if algorithm == "ring" else 1
    multi = placement.num_domains > 1
    if chunks is None:
        phase, (intra, inter, m), C = ring_phase(shape, groups, 1.0, 1.0, channels=C, drop_wrap=True, label="chain")
        counts = LatencyCounts("ring", intra_hops=intra, inter_hops=inter, multi_domain=multi)
        return Schedule(algorithm, "ring", [phase], counts, [LatencyTerm(0, 0, "ring", 1.0, first=m)], channels=C)
    k = int(chunks)
    nsteps = p - 1 + k - 1
    phase, (intra, inter, m), C = ring_phase(shape, groups, 1.0 / k, nsteps, channels=C, drop_wrap=True,
                                             label="chain")
    counts = LatencyCounts("ring", intra_hops=0 if multi else nsteps, inter_hops=nsteps if multi else 0,
                           multi_domain=multi)
    return Schedule(algorithm, "ring", [phase], counts, [LatencyTerm(0, 0, "max", nsteps)],
                    notes=[f"store-and-forward in {k} chunks"], channels=C)
