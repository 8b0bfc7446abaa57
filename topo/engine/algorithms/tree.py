"""Double binary tree all-reduce across NVLink domains, with a chain inside each domain (NCCL's Tree).

Across the ``D`` domains the data is split between two binary trees: tree 0 is an in-order binary tree over the
domains in topology order (a domain's parent differs from it in its lowest set bit, so most edges join nearby
domains, as in NCCL), tree 1 its mirror (or shift, for an odd count), so a domain is interior in at most one of
them and leaves of one tree do the work of the other (Sanders, Speck, Traff, "Two-tree algorithms for full bandwidth broadcast,
reduction and scan", Parallel Computing 2009; NCCL 2.4). Each tree reduces towards its root and broadcasts back.
Inside a domain the ranks form a chain from the rank that talks to the network; with several NICs, one tree pair
per NIC (channel), each with its own head rank, so every NIC carries its share.

Closed form on a uniform non-blocking network, store-and-forward in k chunks, depth ``d = log2 p`` for a power
of two
(the table in ``../shared/design/cost-model.md``, binary tree pipelined in k chunks):
``T = 2 (d + k - 1) (alpha + S / (k B))``: reduce then broadcast, each ``d + k - 1`` steps in which the busiest
link carries one chunk (a rank interior in one tree receives two half-chunks).

Without ``chunks`` (NCCL's streaming pipeline) reduce and broadcast run concurrently on successive chunks: every
edge carries its total bytes, latency is paid once along the deepest path, as NCCL's tuning model has it:
``2 * ((g-1) * intra hop + log2(D) * network hop)``.
"""

from __future__ import annotations

import numpy as np

from ..placement import Placement
from ..schedule import (AlgorithmUnavailable, LatencyCounts, LatencyTerm, NodeShape, Schedule, SchedulePhase,
                        Transfers, ranks_per_domain)
from .ring import channels_for, nic_slots, run_patterns

__all__ = ["tree_schedule", "double_binary_tree", "tree_flows"]


def _in_order_parents(n: int) -> np.ndarray:
    """Parent of each node of an in-order binary tree over ``0..n-1`` rooted at 0: node ``r`` with lowest set
    bit ``b`` hangs under ``(r - b) + 2b`` (or ``r - b`` when that is past the end), so half the edges join
    neighbours, a quarter join nodes two apart, and so on: a tree over ranks in topology order stays local."""
    r = np.arange(n)
    low = r & -r
    up = (r ^ low) | (low << 1)
    up = np.where(up >= n, r ^ low, up)
    up[0] = -1
    return up


def _depth(parent: np.ndarray) -> int:
    depth = np.zeros(parent.size, dtype=np.int64)
    cur = parent.copy()
    while np.any(cur >= 0):
        live = cur >= 0
        depth[live] += 1
        cur[live] = parent[cur[live]]
    return int(depth.max()) if depth.size else 0


def double_binary_tree(n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Parents of nodes ``0..n-1`` in the two trees (-1 at the roots) and their depth.

    Tree 0 is an in-order binary tree rooted at node 0 (see :func:`_in_order_parents`), as NCCL builds its trees;
    tree 1 is its mirror (node ``i`` plays ``n-1-i``) when ``n`` is even, or its shift by one when odd, so that
    every node is interior in at most one of the two trees.

    Parameters
    ----------
    n : int

    Returns
    -------
    parent0, parent1 : numpy.ndarray
    depth : int
    """
    p0 = _in_order_parents(n)
    i = np.arange(n)
    if n % 2 == 0:
        m = n - 1 - i  # node i plays m(i) in tree 0
        p1 = np.where(p0[m] >= 0, n - 1 - p0[m], -1)
    else:  # odd: tree 0 in order over labels 1..n (root: the node of the highest power of two), tree 1 its shift
        lab = i + 1
        low = lab & -lab
        up = (lab ^ low) | (low << 1)
        up = np.where(up > n, lab ^ low, up)
        p0 = up - 1  # the root (label a power of two with no parent in range) gets -1
        m = (i - 1) % n
        p1 = np.where(p0[m] >= 0, (p0[m] + 1) % n, -1)
    return p0, p1, max(_depth(p0), _depth(p1))


def _uneven_tree_flows(placement: Placement, channels: int, shape: NodeShape | None):
    """:func:`tree_flows` when the domains hold unequal numbers of ranks (128 ranks on two 72-GPU racks): each
    domain's chain starts at its rank ``c mod size`` for channel ``c`` (so channels use different heads and NICs),
    the trees join the heads as over equal domains. Concurrent groups that split unlike over the domains are each
    joined by their own runs (:func:`.ring.run_patterns`). ``g`` is the longest chain, ``D`` and ``depth`` the
    largest of any group."""
    per_gpu = shape.nics_per_gpu if shape is not None else 1
    srcs, dsts, choices = [], [], []
    g = D = depth = 0
    for rows, starts, sizes in run_patterns(placement.groups, placement.gpus_per_domain):
        groups = placement.groups[rows]
        n = groups.shape[1]
        block = np.repeat(np.arange(starts.size), sizes)
        off = np.arange(n) - starts[block]
        p0, p1, d = double_binary_tree(starts.size)
        g, D, depth = max(g, int(sizes.max())), max(D, int(starts.size)), max(depth, d)
        for c in range(channels):
            order = groups[:, starts[block] + (c + off) % sizes[block]]  # chain order of every domain, from its head
            heads = order[:, starts]
            choice = np.full(1, (c // int(sizes.min())) % per_gpu)
            for parent in (p0, p1):
                child = np.flatnonzero(parent >= 0)
                srcs.append(heads[:, child].ravel())
                dsts.append(heads[:, parent[child]].ravel())
                choices.append(np.repeat(choice, rows.size * child.size))
            inner = np.flatnonzero(off >= 1)
            for _ in range(2):
                srcs.append(order[:, inner].ravel())
                dsts.append(order[:, inner - 1].ravel())
                choices.append(np.repeat(choice, rows.size * inner.size))
    return (np.concatenate(srcs), np.concatenate(dsts), np.concatenate(choices)), g, D, depth


def tree_flows(placement: Placement, channels: int, shape: NodeShape | None = None):
    """Reduce-direction flows of the double binary tree of every communicator.

    Inter-domain child -> parent heads and the intra-domain chain towards the head, for every channel and both
    trees; the broadcast flows are the same reversed. Domains may hold unequal numbers of ranks (chains of
    different lengths; ``g`` is then the longest).

    Parameters
    ----------
    placement : Placement
    channels : int
    shape : NodeShape, optional

    Returns
    -------
    tuple
        ``(src, dst, choice)`` arrays and ``(g, D, depth)``.
    """
    if placement.ranks_per_domain() is None:
        return _uneven_tree_flows(placement, channels, shape)
    g = ranks_per_domain(placement, "the tree")
    G, n = placement.groups.shape
    D = n // g
    gpus = placement.groups.reshape(G, D, g)  # ranks of each domain in NCCL order
    p0, p1, depth = double_binary_tree(D)
    srcs, dsts, choices = [], [], []
    slots = nic_slots(shape, placement.groups) if shape is not None else None
    for c in range(channels):
        if slots is not None and slots[0] < g:  # ranks share NICs: channel c starts at NIC c's first rank
            head = int(np.flatnonzero(slots[1] == c % slots[0])[0])
            choice = 0
        else:
            head = c % g
            choice = (c // g) % (shape.nics_per_gpu if shape is not None else 1)
        order = gpus[:, :, (head + np.arange(g)) % g]  # chain from the head
        for parent in (p0, p1):
            child = np.flatnonzero(parent >= 0)
            srcs.append(order[:, child, 0].ravel())
            dsts.append(order[:, parent[child], 0].ravel())
            choices.append(np.full(G * child.size, choice))
        if g > 1:  # chain inside each domain, towards the head (once per tree)
            for _ in range(2):
                srcs.append(order[:, :, 1:].ravel())
                dsts.append(order[:, :, :-1].ravel())
                choices.append(np.full(G * D * (g - 1), choice))
    return (np.concatenate(srcs), np.concatenate(dsts), np.concatenate(choices)), g, D, depth


def tree_schedule(shape: NodeShape, placement: Placement, chunks: int | None = None,
                  channels: int | None = None) -> Schedule:
    """NCCL's double binary tree all-reduce across NVLink domains, with a chain inside each domain
    (reduce up both trees, broadcast down).

    Parameters
    ----------
    shape : NodeShape
    placement : Placement
    chunks : int, optional
        Store-and-forward chunks; default streaming.
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
        raise AlgorithmUnavailable("a tree needs at least 2 ranks")
    D = placement.num_domains
    C = channels_for(shape, placement.groups, channels)
    (src, dst, choice), g, D, depth = tree_flows(placement, C, shape)
    share = 1.0 / (2 * C)  # each tree of each channel carries this fraction of the data
    if chunks is None:
        up = Transfers(src, dst, share, choice)
        down = Transfers(dst, src, share, choice)
        counts = LatencyCounts("tree", intra_hops=2 * (g - 1), inter_hops=2 * depth, multi_domain=D > 1)
        terms = [LatencyTerm(0, 0, "max_intra", 2 * (g - 1)), LatencyTerm(0, 0, "max_inter", 2 * depth)]
        return Schedule("tree", "tree", [SchedulePhase([up, down], 1.0, "reduce+broadcast")], counts, terms,
                        channels=C)
    k = int(chunks)
    steps = (g - 1) + depth + k - 1
    up = Transfers(src, dst, share / k, choice)
    down = Transfers(dst, src, share / k, choice)
    # every step pays one hop: the chain's inside the domain, the pipeline's over the network when it spans domains
    counts = LatencyCounts("tree", intra_hops=2 * ((g - 1) + (0 if D > 1 else depth + k - 1)),
                           inter_hops=2 * (depth + k - 1) if D > 1 else 0, multi_domain=D > 1)
    terms = [LatencyTerm(0, 0, "max", 2 * steps)]
    return Schedule("tree", "tree", [SchedulePhase([up], steps, "reduce"), SchedulePhase([down], steps, "broadcast")],
                    counts, terms, notes=[f"tree: store-and-forward in {k} chunks"], channels=C)
