"""NVLSTree's chunk: NCCL's size rule, and the rate its chunk steps allow.

NCCL moves an NVLSTree all-reduce in loops: on each of its NVLS channels every head
(:func:`topo.engine.algorithms.nvls.nvls_heads`) takes one chunk per loop up and down its tree across the NVLink
domains. The chunk is NCCL's ``nvlsChunkSize`` (NCCL_NVLS_CHUNKSIZE, 128 KiB), at most 64 KiB from 4 domains on,
and smaller for a small message (NVIDIA/nccl src/enqueue.cc at v2.26.2-1, the NVLS_TREE branch of the chunk-size
computation: ``maxChunkSize = comm->nNodes >= 4 ? 65536 : chunkSize``, then ``if nBytes < k x concurrentOps x
chunkSize and chunkSize > c, chunkSize = c`` for (k, c) = (32, 256 KiB), (16, 128 KiB), (4, 64 KiB), (1, 32 KiB),
``concurrentOps = nChannels x nHeads``; the same from v2.21.5-1 to v2.29.7-1; v2.30 moves the 64 KiB rule to
src/transport/nvls.cc ``ncclNvlsTuning``, where Blackwell across more than 2 nodes takes its own values).

What a smaller chunk costs: each channel's chunks pass through the tree one network step after another, each
step paying the step latency (the NVLSTree network step that :func:`topo.engine.cost.latency_s` charges per tree
level), with up to NCCL_STEPS = 8 steps in flight per connection (src/include/device.h: a connection's buffer holds
8 steps; the profile's ``steps_in_flight``). So the collective moves at most ``steps x channels x heads x chunk``
bytes of message per step latency: a bound on the rate from NCCL's own step and chunk, no efficiency constant.
"""

from __future__ import annotations

import math

__all__ = ["NVLS_TREE_CHUNK_STEPS", "nvls_tree_chunk_bytes", "nvls_tree_chunk_rate_Bps"]

# NCCL's reduction of the NVLSTree chunk for small messages (src/enqueue.cc, v2.21.5-1 to v2.30.7-1): while the
# message is under k x concurrentOps x chunk and the chunk is above c, the chunk becomes c, in this order
NVLS_TREE_CHUNK_STEPS = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))


def nvls_tree_chunk_bytes(size_bytes: float, num_domains: int, concurrent_ops: int, chunk_bytes: int,
                          tree_max_chunk_bytes: int, small_from_domains: int) -> int:
    """The chunk NCCL runs an NVLSTree all-reduce with (src/enqueue.cc, the module's docstring).

    Parameters
    ----------
    size_bytes : float
        The message (NCCL's ``nBytes``).
    num_domains : int
        NVLink domains the communicator spans (NCCL's ``nNodes``: an NVL72 rack is one).
    concurrent_ops : int
        NVLS channels x heads per domain.
    chunk_bytes : int
        NCCL's ``nvlsChunkSize``.
    tree_max_chunk_bytes : int
        The cap from ``small_from_domains`` domains on (NCCL_NVLSTREE_MAX_CHUNKSIZE's default, 64 KiB).
    small_from_domains : int
        The domains from which the cap applies (4).

    Returns
    -------
    int
        Bytes.
    """
    chunk = int(chunk_bytes)
    if num_domains >= small_from_domains:
        chunk = min(chunk, int(tree_max_chunk_bytes))
    for k, c in NVLS_TREE_CHUNK_STEPS:
        if size_bytes < k * concurrent_ops * chunk and chunk > c:
            chunk = c
    return chunk


def nvls_tree_chunk_rate_Bps(sched, profile, size_bytes: float, num_domains: int) -> float:
    """The most bytes of message per second NVLSTree's chunk steps allow: ``steps in flight x channels x heads x
    chunk / step latency``.

    Parameters
    ----------
    sched : Schedule
        Its family and ``nvls_heads`` (heads per domain).
    profile : Profile
        ``nvls_channels``, ``nvls_chunk_bytes``, ``nvls_tree_max_chunk_bytes``, ``nvls_tree_small_chunk_domains``,
        ``steps_in_flight`` and the NVLSTree network step (``net_hop``, Simple: NVLSTree runs Simple only).
    size_bytes : float
    num_domains : int

    Returns
    -------
    float
        inf for another family, a single domain, or a profile without NCCL's NVLS chunk or channels.
    """
    heads = getattr(sched, "nvls_heads", 0)
    if (sched.family != "nvls_tree" or num_domains < 2 or heads < 1 or profile.nvls_channels < 1
            or profile.nvls_chunk_bytes < 1):
        return math.inf
    step_s = profile.net_hop("nvls_tree", "Simple")
    if step_s <= 0:
        return math.inf
    ops = profile.nvls_channels * heads
    chunk = nvls_tree_chunk_bytes(size_bytes, num_domains, ops, profile.nvls_chunk_bytes,
                                  profile.nvls_tree_max_chunk_bytes or profile.nvls_chunk_bytes,
                                  profile.nvls_tree_small_chunk_domains or num_domains + 1)
    return max(1, profile.steps_in_flight) * ops * chunk / step_s
