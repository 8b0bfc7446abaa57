"""NCCL's buffers per GPU: what the communicators a training step uses hold once connected.

NCCL connects a communicator's channels at its first collective (a ring per channel: one receive connection from
the previous rank, one send connection to the next) or at its first send/receive to a peer (``p2p``: channels per
peer, both ways), and keeps them for the run. On Hopper and Blackwell an NVLink connection holds its three
protocols' buffers on the receiving GPU (LL 0.5 MiB, LL128 4.7 MiB, Simple 4 MiB, rounded up to 10 MiB) and
2 MiB on the sender: 12 MiB per channel and peer (``topo/data/compute/nccl_buffers.toml``, each figure with its
source). Send/receive to peers across the network shares one pool each way per communicator.

The communicators a Megatron-Core step uses (``megatron/core/parallel_state.py``'s groups): TP (its all-gathers
and reduce-scatters: a ring), CP (ring attention's send/receive to the two neighbours, an all-to-all's to every
rank, or an all-gather's ring), data x context (the gradients' reduction: a ring), PP (send/receive to the
previous and next stage), and for MoE the EP all-to-all (send/receive to every rank of the group, Megatron-Core's
``alltoall`` dispatcher), the expert TP and expert DP rings. A send/receive communicator whose ranks share one
NVLink domain gets NCCL's NVLink channels per peer, capped at its p2p channels; one that spans domains gets the
network's count, halved for many peers as NCCL does, for the peers inside the domain, plus the shared network pools.
NCCL's node is the NVLink domain, a GB200 NVL72 rack's MNNVL clique and not its 4-GPU trays: ``src/init.cc``
(v2.30.7-1) counts ``nNodes`` from the ring graph's first ranks once the clique's topology is fused, takes
``nNvlDomains = nNodes`` (``initNvlDomainInfo``), and ``ncclTopoComputeP2pChannels`` halves "in the case of >1
NVLD". NVLS (:mod:`.nvls_buffers`) and the NCCL profile count nodes the same way. Without a domain size
every send/receive communicator is counted as spanning domains with no NVLink peer (the least NCCL holds).
"""

from __future__ import annotations

import math
import tomllib
from functools import lru_cache

from ..resources import data_dir
from .mapping import first_group_reach
from .parallel import ParallelLayout

__all__ = ["nccl_constants", "communicators", "nccl_buffer_bytes"]

P2P_PER_BATCH = 8
"""NCCL's ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` (src/include/device.h, v2.30.7-1): the peers one round of
send/receive work serves, by which ``ncclTopoComputeP2pChannels`` halves a multi-node communicator's channels per
peer."""


@lru_cache(maxsize=None)
def nccl_constants() -> dict[str, float]:
    """``nccl_buffers.toml``'s values by key (bytes, channels)."""
    table = tomllib.loads((data_dir("compute") / "nccl_buffers.toml").read_text(encoding="utf-8"))
    return {k: float(v["value"]) for k, v in table.items()}


def communicators(lay: ParallelLayout, moe: bool) -> list[tuple[str, str, int, int]]:
    """The communicators one GPU of ``lay`` uses in a step, as ``(group, kind, ranks, peers)``: ``kind`` is
    ``"ring"`` (collectives) or ``"p2p"`` (send/receive to ``peers`` ranks of the group). Groups of one rank hold
    nothing and are left out. ``moe``: the model has experts (Megatron-Core builds the expert groups)."""
    out = []
    if lay.tp > 1:
        out.append(("tp", "ring", lay.tp, 2))
    if lay.cp > 1:
        if lay.cp_comm_type == "all_gather":
            out.append(("cp", "ring", lay.cp, 2))
        else:  # ring attention's neighbours, or the all-to-all's every rank
            out.append(("cp", "p2p", lay.cp, min(2, lay.cp - 1) if lay.cp_comm_type == "p2p" else lay.cp - 1))
    if lay.dp * lay.cp > 1:
        out.append(("dpcp", "ring", lay.dp * lay.cp, 2))
    if lay.pp > 1:
        out.append(("pp", "p2p", lay.pp, min(2, lay.pp - 1)))
    if moe:
        if lay.ep > 1 and lay.ep_dispatcher == "alltoall":
            out.append(("ep", "p2p", lay.ep, lay.ep - 1))
        if lay.expert_tp > 1:
            out.append(("etp", "ring", lay.expert_tp, 2))
        if lay.expert_dp > 1:
            out.append(("edp", "ring", lay.expert_dp, 2))
    return out


_BYTES: dict = {}
""":func:`nccl_buffer_bytes` by the layout fields it reads, the domain and ``moe``: a search asks again for every
micro-batch, recomputation and sharding of one shape."""


def nccl_buffer_bytes(lay: ParallelLayout, moe: bool, gpus_per_domain: int | None = None) -> float:
    """Bytes of NCCL buffers one GPU of ``lay`` holds (see the module doc).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (its sizes, rank order, CP exchange and EP dispatcher; ``gpus_per_domain_used`` when placed).
    moe : bool
        Whether the model has experts.
    gpus_per_domain : int, optional
        GPUs of one NVLink domain the job uses (the layout's ``gpus_per_domain_used`` first). None: unknown, every
        send/receive communicator counted as spanning domains with no NVLink peer.

    Returns
    -------
    float
        Bytes per GPU.
    """
    dom = lay.gpus_per_domain_used or gpus_per_domain
    key = (lay.tp, lay.cp, lay.pp, lay.dp, lay.ep, lay.etp, lay.rank_order, lay.cp_comm_type, lay.ep_dispatcher,
           moe, dom)
    got = _BYTES.get(key)
    if got is None:
        if len(_BYTES) >= 4096:
            _BYTES.clear()
        got = _BYTES[key] = sum(_communicator_bytes(lay, c, dom) for c in communicators(lay, moe))
    return got


def _communicator_bytes(lay: ParallelLayout, comm: tuple[str, str, int, int], dom: int | None) -> float:
    """One communicator's bytes on one GPU: a ring's channels; a send/receive communicator's channels per peer
    (NCCL's ``ncclTopoComputeP2pChannelsPerPeer``: the NVLink count when every rank is over NVLink, else the
    network's; ``ncclTopoComputeP2pChannels`` caps it at the communicator's p2p channels, or halves it for many peers
    once the ranks span NCCL's nodes, the NVLink domains: :func:`_p2p_channels_per_peer`) to each peer over
    NVLink, and the shared network pools when some rank is beyond the domain."""
    k = nccl_constants()
    conn = k["connection_bytes"]
    group, kind, ranks, peers = comm
    if kind == "ring":
        return k["collective_channels"] * conn
    if dom is None:
        return k["network_p2p_shared_bytes"]
    members, last = first_group_reach(lay, group, dom)
    inside = members - 1  # NVLink peers of the first GPU
    per_peer = _p2p_channels_per_peer(inside == ranks - 1, last >= dom, ranks)
    pools = k["network_p2p_shared_bytes"] if inside < ranks - 1 else 0.0
    return pools + min(peers, inside) * per_peer * conn


def _p2p_channels_per_peer(nvlink: bool, nodes: bool, ranks: int) -> int:
    """NCCL's channels per peer of a send/receive communicator of ``ranks`` (src/graph/paths.cc,
    ``ncclTopoComputeP2pChannels``, v2.30.7-1): what ``ncclTopoGetNchannels`` asks (``nvlink``: every peer over
    NVLink, else the network's count), capped at the communicator's p2p channels on one node, or, across ``nodes``
    (nNodes > 1: NVLink domains), halved while the peers' rounds of :data:`P2P_PER_BATCH` would need more than its p2p channels."""
    k = nccl_constants()
    per_peer = int(k["nvlink_p2p_channels_per_peer"] if nvlink else k["network_p2p_channels_per_peer"])
    if not nodes:
        return min(per_peer, int(k["p2p_channels_one_node"]))
    while per_peer * math.ceil(ranks / P2P_PER_BATCH) > k["collective_channels"] and per_peer > 1:
        per_peer //= 2
    return per_peer
