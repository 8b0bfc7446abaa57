"""Parameters of one pipeline unit (a layer, the embedding, the output layer, a multi-token-prediction head) on
one GPU, before any ZeRO sharding, split into dense and expert parameters: the one place :mod:`.memory` (model
state, FSDP gathers) and :mod:`.fsdp2_copies` (FSDP2's copies of each unit's gathered weights) take them from; and
of those, the ones outside FP8 linear layers (:func:`unit_bf16_params`), which stay in BF16 under
``fp8_param_gather``."""

from __future__ import annotations

from .model import ATTENTION_BLOCKS, Block, ModelSpec
from .parallel import ParallelLayout

__all__ = ["unit_params", "unit_bf16_params", "block_params_on_gpu", "tp_replicated_params"]


def block_params_on_gpu(model: ModelSpec, lay: ParallelLayout, kind: str) -> tuple[float, float]:
    """(dense, expert) parameters of one block of ``kind`` (a layer's pattern character) on one GPU: a dense block's
    over TP, except what every TP rank holds whole (:meth:`.ModelSpec.tp_whole_params`: its input norm, an MLA
    attention block's down projections and latents' norms); an MoE block's routed experts over ``ep x etp``, its
    shared experts over TP, its router, norm and latent projections whole.

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
    whole = model.tp_whole_params(kind)
    if kind == Block.MOE:
        m = model.moe
        # the router and norm whole; not the router's expert bias, a buffer with no gradient or optimizer state
        return (model.shared_expert_params / lay.tp + whole,
                m.experts * model.expert_params / (lay.ep * lay.expert_tp))
    return (model.block_params(kind) - whole) / lay.tp + whole, 0.0


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
        return own / lay.tp + model.final_norm_params, 0.0  # the final norm whole on each TP rank, as every norm
    if unit == "mtp_head":  # three norms (whole) and the 2h -> h projection; the output head is shared, and a last
        # stage without the embedding holds a copy of it for the next tokens (Megatron-Core builds one where
        # mtp_process)
        emb = 0 if embedding_held else model.vocab * model.hidden
        norms = model.mtp_norm_params
        return (model.mtp_head_params - norms + emb) / lay.tp + norms, 0.0
    dense = expert = 0.0
    for k in unit:
        d, e = block_params_on_gpu(model, lay, k)
        dense, expert = dense + d, expert + e
    return dense, expert


def unit_bf16_params(model: ModelSpec, lay: ParallelLayout, unit: str, embedding_held: bool) -> float:
    """Of :func:`unit_params`'s dense parameters, those outside FP8 linear layers: what stays in BF16 when
    Megatron-Core keeps the linear layers' weights in FP8 (``fp8_param_gather``), gathered from a BF16 buffer
    while the FP8 weights are gathered from a uint8 one.

    Only a Transformer Engine linear's weight is quantized: TE wraps a parameter in a QuantizedTensor only where it
    was registered with an ``fp8_meta_index`` (NVIDIA/TransformerEngine@d0067d0d
    ``transformer_engine/pytorch/module/base.py`` lines 1836-1838), which the weights have (``module/linear.py``
    lines 1774-1779) and a fused norm's ``layer_norm_weight`` and the biases have not (``module/layernorm_linear.py``
    lines 1448-1456, 1563-1567); and Megatron-Core builds only its layers (``transformer_block.py`` lines 355-359)
    and its multi-token-prediction layers (``multi_token_prediction.py`` lines 1927, 1944) inside TE's
    ``fp8_model_init`` (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/fp8_utils.py`` line 848), so the embedding and
    the output layer stay BF16, as do a layer's norms, an MoE router's weight (``transformer/moe/router.py`` lines
    64-65, cast to ``params_dtype`` at line 84) and a Mamba mixer's convolution, ``A_log``, ``D``, ``dt_bias`` and
    gated norm (:attr:`.ModelSpec.mamba_nonlinear_params`); ``Float16Module`` casts all of them to BF16
    (``transformer/module.py`` lines 458-476, 510). DDP puts each in the buffer of its dtype, ``uint8`` for a
    quantized weight (``distributed/param_and_grad_buffer.py`` ``group_params_for_buffers``, lines 888-935). An MLA
    layer's down projections and an MTP depth's ``eh_proj`` are TE linears: FP8. The routed experts have none.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    unit : str
        As :func:`unit_params`.
    embedding_held : bool
        As :func:`unit_params`.

    Returns
    -------
    float
        Parameters on one GPU (before ZeRO sharding).
    """
    if unit in ("embedding", "logits"):
        return unit_params(model, lay, unit, embedding_held)[0]
    if unit == "mtp_head":  # its norms and the output head's copy; its 2h -> h eh_proj is FP8
        eh_proj = model.mtp_head_params - model.mtp_norm_params
        return unit_params(model, lay, unit, embedding_held)[0] - eh_proj / lay.tp
    n = 0.0
    for k in unit:
        linear_whole = model.mla_down_params if k in ATTENTION_BLOCKS else 0
        n += model.tp_whole_params(k) - linear_whole
        n += model.mamba_nonlinear_params / lay.tp if k == Block.MAMBA else 0.0
    return n


def tp_replicated_params(model: ModelSpec, counts: dict, sequence_parallel: bool) -> float:
    """Parameters of a pipeline stage that every tensor-parallel rank holds whole and whose gradients Megatron-Core
    sums over the TP group once a step (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/distributed/
    finalize_model_grads.py`` ``_allreduce_non_tensor_model_parallel_grads``, lines 416-485: the parameters marked
    ``sequence_parallel`` under sequence parallelism, and ``q_layernorm`` / ``k_layernorm`` with ``qk_layernorm``).

    Marked ``sequence_parallel`` (same commit): each block's norm, ``h`` (Transformer Engine's norms built with
    ``sequence_parallel``, ``extensions/transformer_engine.py`` line 1099); an MoE block's router weight
    (``transformer/moe/router.py`` line 85); the final norm on the stage holding the output layer; an MTP depth's
    three norms; under MLA each layer's down projections, built ``parallel_mode='duplicated'``
    (``transformer/multi_latent_attention.py`` lines 526-527 and 573-574, ``extensions/transformer_engine.py``
    lines 1313-1316) with their ``q_layernorm`` and ``kv_layernorm``. Without MLA, ``qk_norm``'s query and key norms,
    ``head_dim`` each, with or without sequence parallelism. Biases: none (the models have none).

    Parameters
    ----------
    model : ModelSpec
    counts : dict
        The stage's blocks by kind (local attention counted with attention) and its ``logits`` and ``mtp_head``
        units (:func:`topo.training.step._stage_counts`).
    sequence_parallel : bool

    Returns
    -------
    float
        Parameters, the same on each TP rank.
    """
    h, a, att = model.hidden, model.attention, counts.get(Block.ATTENTION, 0)
    n = 0.0
    if a.kind != "mla" and a.qk_norm:
        n += att * 2 * model.head_dim
    if not sequence_parallel:
        return n
    blocks = sum(counts.get(k, 0) for k in (Block.ATTENTION, Block.MLP, Block.MOE, Block.MAMBA))
    n += h * blocks + model.router_params * counts.get(Block.MOE, 0)
    n += model.final_norm_params * counts.get("logits", 0) + model.mtp_norm_params * counts.get("mtp_head", 0)
    if a.kind == "mla":  # the down projections and the latents' norms
        n += att * (model.mla_down_params + model.mla_norm_params)
    return n
