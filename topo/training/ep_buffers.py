"""The flex dispatcher's own buffers per GPU: DeepEP's or HybridEP's, allocated at the first dispatch and kept.

Megatron-Core's flex dispatcher (``ep_dispatcher = "deepep"``) holds one communication buffer per process for the
run (NVIDIA/Megatron-LM@d98e8a64dd ``megatron/core/transformer/moe/fused_a2a.py``, module globals):

- DeepEP (``ep_flex_backend = "deepep"``): ``get_buffer`` sizes it from DeepEP's recommended dispatch and combine
  configs (``Buffer.get_dispatch_config`` / ``get_combine_config`` by EP size), the larger of their
  ``get_nvl_buffer_size_hint`` and of their ``get_rdma_buffer_size_hint`` (hidden bytes ``hidden x max(element, 2)``,
  the group's size, ``Buffer.num_sms`` SMs: two per channel), plus DeepEP's 32 MiB workspace
  (deepseek-ai/DeepEP@94a9f8f6 ``csrc/config.hpp``, ``csrc/deep_ep.cpp``). The RDMA buffer is 0 up to 8 ranks;
  beyond, it lives in NVSHMEM's symmetric heap, which maps physical memory in whole 512 MiB granules beside
  NVSHMEM's own allocations (:func:`nvshmem_heap_bytes`).
- HybridEP (``ep_flex_backend = "hybridep"``): ``init_hybrid_ep_buffer`` passes the first dispatch's tokens as
  ``max_num_of_tokens_per_rank``; its NVLink buffers hold the worst case, every token of the group routed to one
  rank: ``tokens x group`` tokens of bf16 hidden, their probabilities over the NVLink domain's experts (fp32) and
  a float scale per 128 hidden elements (``csrc/hybrid_ep/buffer/intranode.cu``). An EP group that spans NVLink
  domains adds the RDMA coordinator's buffers (:func:`hybridep_rdma_bytes`).

The sizes and the configs are in ``topo/data/compute/ep_buffers.toml`` with their source lines.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from .mapping import FLEX_GROUP, first_group_reach
from .operators import _ep_group_tokens
from .parallel import ParallelLayout, deepep_config_ranks

__all__ = ["ep_buffer_constants", "deepep_hint_bytes", "nvshmem_heap_bytes", "hybridep_rdma_bytes",
           "ep_buffer_bytes"]


@lru_cache(maxsize=None)
def ep_buffer_constants() -> dict:
    """``ep_buffers.toml``'s tables by key (each with its ``value``; the configs with their ``ranks``)."""
    return tomllib.loads((data_dir("compute") / "ep_buffers.toml").read_text(encoding="utf-8"))


def _config(which: str, ranks: int, sms: int) -> tuple[int, int, int, int, int]:
    """DeepEP's ``Config`` for ``ranks``: (channels, NVL receive tokens, RDMA send, RDMA receive tokens rounded up to
    a multiple of the send tokens as its constructor does)."""
    table = ep_buffer_constants()[f"deepep_{which}_config"]["ranks"]
    if ranks not in deepep_config_ranks():  # check_layout says so first, naming the flag
        raise ValueError(f"ep: {ranks} ranks has no DeepEP {which} config; allowed: "
                         f"{', '.join(map(str, deepep_config_ranks()))} (deep_ep/buffer.py get_dispatch_config)")
    _, nvl_recv, rdma_send, rdma_recv = table[str(ranks)]
    return sms // 2, nvl_recv, rdma_send, -(-rdma_recv // rdma_send) * rdma_send


def deepep_hint_bytes(hidden_bytes: int, ranks: int, sms: int = 20) -> tuple[int, int]:
    """DeepEP's NVLink and RDMA buffer bytes as Megatron-Core's ``get_buffer`` asks them: the larger of the
    dispatch and combine configs' ``get_nvl_buffer_size_hint`` and ``get_rdma_buffer_size_hint``.

    Parameters
    ----------
    hidden_bytes : int
        Bytes of one token's hidden state (``hidden x max(element size, 2)``).
    ranks : int
        The EP group's ranks (a key of DeepEP's config maps).
    sms : int
        ``Buffer.num_sms`` (Megatron-Core's ``moe_deepep_num_sms``; DeepEP's default 20).

    Returns
    -------
    tuple of int
        (NVLink bytes, RDMA bytes) per GPU, each rounded up to 128 B.
    """
    k = {key: v["value"] for key, v in ep_buffer_constants().items()}
    peers, topk, scales, meta = (k["deepep_num_max_nvl_peers"], k["deepep_max_topk"], k["deepep_max_scales"],
                                 k["deepep_source_meta_bytes"])
    align = k["deepep_alignment_bytes"]
    per_token = hidden_bytes + meta + topk * 8 + topk * 4 + scales * 4  # the hidden, source meta, top-k, scales
    rdma_ranks, nvl_ranks = max(ranks // peers, 1), min(ranks, peers)
    nvl = rdma = 0
    for which in ("dispatch", "combine"):
        ch, nvl_recv, _, rdma_recv = _config(which, ranks, sms)
        n = ch * nvl_ranks * (2 * rdma_ranks + 3) * 4 + ch * nvl_ranks * nvl_recv * per_token
        nvl = max(nvl, -(-n // align) * align)
        if ranks > peers:  # "Legacy mode": no RDMA buffer within one NVLink group of 8
            r = ch * rdma_ranks * (peers * 2 + 2) * 2 * 4 + ch * rdma_ranks * rdma_recv * (per_token + 16) * 2
            rdma = max(rdma, -(-r // align) * align)
    return nvl, rdma


def _value(key: str) -> int:
    """``ep_buffers.toml``'s ``value`` of ``key``."""
    return ep_buffer_constants()[key]["value"]


def nvshmem_heap_bytes(rdma_bytes: int, npes: int) -> int:
    """Physical bytes NVSHMEM's dynamic (CUDA VMM) symmetric heap maps on one GPU once DeepEP's RDMA buffer is in.

    At ``nvshmemx_init_attr`` NVSHMEM allocates its own buffers (the psync pool of ``NVSHMEM_MAX_TEAMS`` teams, its
    g and coalescing buffers: ``heapextra``); the heap maps whole granules to hold them. DeepEP then asks
    ``nvshmem_align(128, rdma_bytes)``: if the mapped granules' free space cannot hold it, the heap maps
    ``round_up(rdma_bytes + 128, granularity)`` more (NVIDIA/nvshmem@2d7d25f0 ``src/host/mem/mem_heap.cpp``
    lines 1730 and 1823). Sources and lines in ``ep_buffers.toml`` (``nvshmem_*``).

    Parameters
    ----------
    rdma_bytes : int
        DeepEP's RDMA buffer (:func:`deepep_hint_bytes`' second figure); 0: NVSHMEM is not initialised.
    npes : int
        NVSHMEM's PEs: DeepEP's RDMA ranks (``ranks / 8`` in its normal mode).

    Returns
    -------
    int
        Bytes per GPU: a whole number of granules, 0 without an RDMA buffer.
    """
    if rdma_bytes <= 0:
        return 0
    gran = _value("nvshmem_cumem_granularity_bytes")
    psync = _value("nvshmem_max_teams") * (_value("nvshmem_psync_longs_per_team")
                                          + _value("nvshmem_psync_longs_per_team_per_pe") * npes) * 8
    own = (psync + _value("nvshmem_g_buf_bytes") + _value("nvshmem_g_coalescing_buf_bytes")
           + 24 * _value("nvshmem_malloc_alignment_bytes"))
    mapped = -(-own // gran) * gran
    ask = rdma_bytes + _value("deepep_rdma_alignment_bytes")
    return mapped if own + ask <= mapped else mapped + -(-ask // gran) * gran


def hybridep_rdma_bytes(tokens_per_rank: float, nodes: int, hidden: int, domain_experts: int) -> float:
    """HybridEP's RDMA coordinator buffers on one GPU of an EP group over ``nodes`` NVLink domains (0 for one).

    deepseek-ai/DeepEP@94a9f8f6 ``csrc/hybrid_ep/buffer/internode_doca.cu`` ``allocate_dispatch_buffers`` and
    ``allocate_combine_buffers``, element counts in ``ep_buffers.toml`` (``hybridep_rdma_buffers``): bf16 tokens
    (2 B), fp32 probabilities over the domain's experts, a float scale per 128 hidden elements.

    Parameters
    ----------
    tokens_per_rank : float
        ``max_num_of_tokens_per_rank``: the rank's first dispatch's tokens.
    nodes : int
        The EP group's NVLink domains (HybridEP's ``num_of_nodes``).
    hidden : int
        Hidden size.
    domain_experts : int
        Experts per rank x the group's ranks in one domain (``num_of_experts_per_rank x num_of_ranks_per_node``).

    Returns
    -------
    float
        Bytes per GPU.
    """
    if nodes <= 1:
        return 0.0
    t, far, scales = tokens_per_rank, nodes - 1, hidden // _value("hybridep_scale_block") * 4
    dispatch = t * (hidden * 2 + domain_experts * nodes * 4 + scales) + t * far * (hidden * 2 + domain_experts * 4
                                                                                 + scales)
    combine = 2 * t * far * (hidden * 2 + domain_experts * 4)
    return float(dispatch + combine)


def ep_buffer_bytes(model, lay: ParallelLayout, gpus_per_domain: int | None = None) -> float:
    """Bytes the flex dispatcher's buffer holds on one GPU of ``lay`` (see the module doc); 0 for a model without
    experts, the ``alltoall`` dispatcher or an EP group of one.

    Parameters
    ----------
    model : ModelSpec
        The model (its hidden size and experts).
    lay : ParallelLayout
        The layout (EP size, dispatcher and backend, SMs, micro-batch and sequence split).
    gpus_per_domain : int, optional
        GPUs of one NVLink domain (the layout's ``gpus_per_domain_used`` first): the ranks of the buffer's group
        (:data:`~.mapping.FLEX_GROUP`, ``ep x etp``) HybridEP reaches over NVLink, whose experts' probabilities each
        buffered token carries. None: one.

    Returns
    -------
    float
        Bytes per GPU.
    """
    if model.moe is None or lay.ep_dispatcher != "deepep" or lay.ep * lay.expert_tp <= 1:
        return 0.0
    ranks, hidden_bytes = lay.ep * lay.expert_tp, model.moe_width * 2  # a LatentMoE's buffers hold its latents
    if lay.ep_flex_backend == "deepep":
        nvl, rdma = deepep_hint_bytes(hidden_bytes, ranks, lay.ep_comm_sms)
        heap = nvshmem_heap_bytes(rdma, max(ranks // _value("deepep_num_max_nvl_peers"), 1))
        return float(nvl + heap + _value("deepep_workspace_bytes"))
    dom = lay.gpus_per_domain_used or gpus_per_domain
    node_ranks = first_group_reach(lay, FLEX_GROUP, dom)[0] if dom else 1  # the buffer's group: ep x etp ranks
    tokens = _ep_group_tokens(model, lay)  # the first dispatch's tokens x the group's ranks
    domain_experts = (model.moe.experts // lay.ep) * node_ranks
    probs = tokens * domain_experts * 4
    scales = tokens * (model.moe_width // _value("hybridep_scale_block")) * 4
    rdma = hybridep_rdma_bytes(tokens / ranks, -(-ranks // node_ranks), model.moe_width, domain_experts)
    return float(tokens * hidden_bytes + probs + scales + rdma)
