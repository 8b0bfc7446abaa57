"""Parameters of one pipeline unit (a layer, the embedding, the output layer, a multi-token-prediction head) on
one GPU, before any ZeRO sharding, split into dense and expert parameters: the one place :mod:`.memory` (model
state, FSDP gathers) and :mod:`.fsdp2_copies` (FSDP2's copies of each unit's gathered weights) take them from."""

from __future__ import annotations

from .model import Block, ModelSpec
from .parallel import ParallelLayout

__all__ = ["unit_params", "block_params_on_gpu"]


def block_params_on_gpu(model: ModelSpec, lay: ParallelLayout, kind: str) -> tuple[float, float]:
    """(dense, expert) parameters of one block of ``kind`` (a layer's pattern character) on one GPU: a dense block's
    over TP; an MoE block's routed experts over ``ep x etp``, its shared experts over TP, its router and norm whole.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    kind : str
        A block kind of :data:`topo.training.model.BLOCK_KINDS`.

    Returns
    -------
    tuple of float
    """
    if kind == Block.MOE:
        m = model.moe
        # the router and norm whole; not the router's expert bias, a buffer with no gradient or optimizer state
        return (m.shared_experts * model.expert_params / lay.tp + model.router_and_norm_params,
                m.experts * model.expert_params / (lay.ep * lay.expert_tp))
    return model.block_params(kind) / lay.tp, 0.0


def unit_params(model: ModelSpec, lay: ParallelLayout, unit: str, embedding_held: bool) -> tuple[float, float]:
    """(dense, expert) parameters of one pipeline unit on one GPU (before ZeRO sharding).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    unit : str
        ``embedding``, ``logits``, ``mtp_head`` or a layer's block string (``*E``).
    embedding_held : bool
        The GPU also holds the embedding (one stage, or DualPipe's rank of the first and last stages, which shares
        the embedding and the output head with the MTP modules: DeepSeek-V3, arXiv 2412.19437 sec. 3.2.4).

    Returns
    -------
    tuple of float
    """
    if unit == "embedding":
        return model.vocab * model.hidden / lay.tp, 0.0
    if unit == "logits":
        own = 0 if (model.tied_embeddings and embedding_held) else model.vocab * model.hidden
        return (own + model.final_norm_params) / lay.tp, 0.0
    if unit == "mtp_head":  # three norms and the 2h -> h projection; the output head is shared, and a last stage
        # without the embedding holds a copy of it for the next tokens (Megatron-Core builds one where mtp_process)
        emb = 0 if embedding_held else model.vocab * model.hidden
        return (model.mtp_head_params + emb) / lay.tp, 0.0
    dense = expert = 0.0
    for k in unit:
        d, e = block_params_on_gpu(model, lay, k)
        dense, expert = dense + d, expert + e
    return dense, expert
