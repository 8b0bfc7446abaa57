"""NVLS: all-reduce with the reduction done in the NVSwitch (NVLink SHARP, Hopper and newer).

Inside one NVLink domain of ``g`` ranks (NCCL's NVLS algorithm): each rank pulls its ``1/g`` share of the vector
reduced by the switch (``multimem.ld_reduce``: the switch reads that share from every rank), then pushes the
reduced share to the switch, which multicasts it to every rank (``multimem.st``). Per rank and direction the
NVLink carries ``S + S/g`` bytes, against ``2(g-1)/g S`` for a ring, hence busbw ``2(g-1)/(g+1)`` times the
usable NVLink bandwidth (1.56x at g = 8): NVIDIA's maintainers quote ~480 GB/s busbw on 8 H100 with NVLS versus
~370 GB/s with Ring (nccl-tests issue #212).

``nvls_tree`` (NCCL's NVLSTree) spans domains: the same in-switch reduce-scatter and multicast inside every
domain, and between them a double binary tree per head (:func:`nvls_heads`: one per NIC, at most the profile's
``nvls_max_heads``, NCCL's NCCL_MAX_NVLS_ARITY) carrying that head's ``S/H`` share; all three run concurrently
on successive chunks, so their loads add up in one phase.

Many ranks per domain (``reference_ranks``: the profile's ``reference_ranks_per_domain``, 8, the ranks per
domain its NVLS constants were fitted at): measured NVLS busbw stops growing with the ranks past it. The
S(1 + 1/g) traffic gives busbw ``2(g-1)/(g+1)`` x NVLink, 1.56x at 8 ranks and 1.95x at 72, but GB300 at 8 ranks
reaches 841 GB/s busbw (data/reference/nccl_tests_measurements.csv, oci_gb300_2n, 16 GiB) and GB200 at 72 ranks
835-839 GB/s (coreweave/nccl-tests README, one NVL72 rack, 4-8 GiB) on the same NVLink5; NCCL's own tuning model
has no rank term in NVLS bandwidth either (src/graph/tuning.cc: ``2 * bwIntra * nvlsEfficiency *
(nChannels-1)/nChannels``). Past ``r`` ranks each GPU moves ``(g-1)/g * (r+1)/(r-1)`` each way, which keeps busbw
at its value at ``r`` (and equals ``1 + 1/g`` there). The pipeline that fills before NVLS reaches that rate is
longer with more ranks (each rank's share of a loop is ``1/g``) and with each NVLSTree level the chunks climb: the
schedule scales the profile's window by ``g/r * (1 + tree depth)`` (one rack of 72 GB200 ranks reaches 70% of its
peak busbw at 512 MiB, 2 racks 61%, 20 racks 37%; coreweave/nccl-tests README).
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..schedule import (AlgorithmUnavailable, InSwitchReduce, LatencyCounts, LatencyTerm, NodeShape, Schedule,
                        SchedulePhase, Transfers, ranks_per_domain)
from .ring import nic_slots
from .tree import double_binary_tree

__all__ = ["in_switch_bytes", "nvls_heads", "nvls_schedule", "window_scale"]


def in_switch_bytes(g: int, reference_ranks: int = 0) -> float:
    """Bytes each GPU moves each way through its NVLink switch per byte of message, with ``g`` ranks per domain
    (``1 + 1/g``; flat busbw past ``reference_ranks``, see the module's docstring).

    Parameters
    ----------
    g : int
        Ranks per NVLink domain.
    reference_ranks : int
        The profile's reference ranks per domain (0: none).

    Returns
    -------
    float
    """
    r = reference_ranks
    if r > 1 and g > r:
        return (g - 1) / g * (r + 1) / (r - 1)
    return 1.0 + 1.0 / g


def window_scale(g: int, depth: int, reference_ranks: int = 0) -> float:
    """The factor on the profile's pipeline window for NVLS over ``g`` ranks per domain and a tree of ``depth``
    levels across domains (1 without a reference: the window as fitted).

    Parameters
    ----------
    g : int
    depth : int
    reference_ranks : int

    Returns
    -------
    float
    """
    if reference_ranks < 1:
        return 1.0
    return g / reference_ranks * (1 + depth)


def nvls_heads(shape: NodeShape, groups: np.ndarray, g: int, max_heads: int = 0) -> np.ndarray:
    """Local indices (in a domain's block of ``g`` ranks) of the NVLSTree heads: the ranks that carry the
    cross-domain trees.

    NCCL's NVLS graph search takes one channel per NIC, headed by the GPU beside it, skips a GPU already heading
    one, and stops at ``min(NCCL_MAX_NVLS_ARITY, GPUs)`` (src/graph/search.cc ``ncclTopoCompute``,
    src/graph/connect.cc ``ncclTopoPreset``): a DGX H100 has 8 heads, one per GPU; a GB200 NVL72 rack (72 GPUs, 72
    NICs) has 32. Heads sit on distinct NICs, spread evenly over the domain.

    Parameters
    ----------
    shape : NodeShape
    groups : numpy.ndarray
        ``[communicators, ranks]`` GPU ids.
    g : int
        Ranks per domain.
    max_heads : int
        NCCL_MAX_NVLS_ARITY (0: one per NIC).

    Returns
    -------
    numpy.ndarray
    """
    slots = nic_slots(shape, groups)
    if slots is None:
        first = np.arange(g)
    else:
        _, first = np.unique(slots[1], return_index=True)  # the first rank beside each NIC
        first = np.sort(first)
    if max_heads and first.size > max_heads:
        first = first[(np.arange(max_heads) * first.size) // max_heads]
    return first


def nvls_schedule(shape: NodeShape, placement: Placement, name: str, gpu_name: str = "these",
                  reference_ranks: int = 0, max_heads: int = 0, collective: str = "all_reduce") -> Schedule:
    """NVLS (one NVLink domain) or NVLSTree (across domains) for ``collective``.

    All-gather and reduce-scatter run NVLS inside one domain only, as NCCL does (src/enqueue.cc, 2.20: "we only
    support single-node NVLS allgather and reducescatter"; src/graph/tuning.cc admits RING, NVLS and
    COLLNET_DIRECT for them): all-gather stores each rank's ``S/g`` once and the switch multicasts it
    (``multimem.st``), reduce-scatter pulls each rank's share reduced by the switch (``multimem.ld_reduce``); each
    GPU's NVLink carries ``(g-1)/g S`` the busy way, as a ring's, in one step instead of ``g-1``.

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    name : str
        nvls or nvls_tree.
    gpu_name : str
        For messages.
    reference_ranks : int
        The profile's reference ranks per domain.
    max_heads : int
        The most NVLSTree heads per domain (0: one per NIC).
    collective : str
        all_reduce, all_gather or reduce_scatter.

    Returns
    -------
    Schedule

    Raises
    ------
    AlgorithmUnavailable
        When it cannot run for this collective or placement (the reason says why).
    """
    g, D = _nvls_ranks(shape, placement, gpu_name)
    if collective in ("all_gather", "reduce_scatter"):
        if D > 1 or name != "nvls":
            raise AlgorithmUnavailable(f"NCCL runs NVLS {collective.replace('_', '-')} inside one NVLink domain only")
        half = InSwitchReduce(placement.gpus, (g - 1) / g)
        return Schedule("nvls", "nvls", [SchedulePhase([half], 1.0, f"in-switch {collective.replace('_', '-')}")],
                        LatencyCounts("nvls"), [LatencyTerm(0, 0, "max")],
                        window_scale=window_scale(g, 0, reference_ranks))
    # in-switch reduce-scatter + multicast all-gather: S (1 + 1/g) each way per GPU (flat busbw past the reference)
    local = InSwitchReduce(placement.gpus, in_switch_bytes(g, reference_ranks))
    if name == "nvls":
        if D > 1:
            raise AlgorithmUnavailable("nvls reduces inside one NVLink domain; across domains use nvls_tree")
        return Schedule("nvls", "nvls", [SchedulePhase([local], 1.0, "in-switch reduce + multicast")],
                        LatencyCounts("nvls"), [LatencyTerm(0, 0, "max")],
                        window_scale=window_scale(g, 0, reference_ranks))
    if D < 2:
        raise AlgorithmUnavailable("nvls_tree spans NVLink domains; inside one domain use nvls")
    return _nvls_tree(shape, placement, local, g, reference_ranks, max_heads)


def _nvls_ranks(shape: NodeShape, placement: Placement, gpu_name: str) -> tuple[int, int]:
    """Ranks per NVLink domain and domains of a placement NVLS can run on (at least 2 ranks in each domain)."""
    if not shape.nvls:
        raise AlgorithmUnavailable(f"{gpu_name} NVSwitches cannot reduce in the switch (no NVLS)")
    if placement.num_ranks < 2:
        raise AlgorithmUnavailable("NVLS needs at least 2 ranks")
    g = ranks_per_domain(placement, "NVLS")
    D = placement.num_domains
    if g < 2:
        raise AlgorithmUnavailable("NVLS needs at least 2 ranks in each NVLink domain")
    return g, D


def _nvls_tree(shape: NodeShape, placement: Placement, local: InSwitchReduce, g: int, reference_ranks: int,
               max_heads: int) -> Schedule:
    """NVLSTree: the in-switch all-reduce ``local`` in each domain, and each head's share up and down two double
    binary trees across the domains (over each of its NICs)."""
    G, D = placement.num_groups, placement.num_domains
    heads = nvls_heads(shape, placement.groups, g, max_heads)
    H = heads.size
    gpus = placement.groups.reshape(G, D, g)[:, :, heads]
    p0, p1, depth = double_binary_tree(D)
    src, dst, choice = [], [], []
    per_nic = shape.nics_per_gpu
    for parent in (p0, p1):
        child = np.flatnonzero(parent >= 0)
        for c in range(per_nic):
            src.append(gpus[:, child].ravel())
            dst.append(gpus[:, parent[child]].ravel())
            choice.append(np.full(G * child.size * H, c))
    src, dst, choice = np.concatenate(src), np.concatenate(dst), np.concatenate(choice)
    share = 1.0 / (2 * H * per_nic)  # each head's S/H share, split in two trees (and over its NICs)
    up = Transfers(src, dst, share, choice)
    down = Transfers(dst, src, share, choice)
    counts = LatencyCounts("nvls_tree", inter_hops=2 * depth, multi_domain=True)
    terms = [LatencyTerm(0, 0, "max"), LatencyTerm(0, 1, "max", 2 * depth)]
    return Schedule("nvls_tree", "nvls_tree",
                    [SchedulePhase([local, up, down], 1.0, "in-switch reduce + trees across domains")], counts, terms,
                    window_scale=window_scale(g, depth, reference_ranks), nvls_heads=int(H))
