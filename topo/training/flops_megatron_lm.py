"""The ``megatron-lm`` FLOP convention: what Megatron-LM logs as ``throughput per GPU (TFLOP/s/GPU)``.

Megatron-LM's ``num_floating_point_operations`` (NVIDIA/Megatron-LM@d98e8a64 megatron/training/training.py) counts
each GEMM 3 times ("forward pass, backward wgrad, backward dgrad"), whatever the run recomputed, where SC21's
eq. 3 (topo's ``megatron``) counts the layers 4 times. Term by term, per token, forward (x 3 for the step):

- transformer (``transformer_flops``): the MLP ``2 h ffn m`` per dense layer, ``2 h ffn_e m (k + shared)`` per MoE
  layer (``m`` = 3 for SwiGLU, else 2; no router term); the attention projections ``2 x`` their weights (MLA: plus
  the q and kv LoRA norms, ``q_lora_rank + kv_lora_rank``); the core attention ``s n (d_qk + d_v)``: the causal
  half of ``Q K^T`` and ``P V`` (no sliding window: every attention layer counts the full causal square); MTP
  layers as extra layers (MoE if the last layer is), their norms and projection ``2 (3 h + 2 h^2)`` each, and the
  logits ``2 h V_pad (1 + mtp)``;
- hybrid (``hybrid_flops``, a model with a ``layer_pattern``): the pattern's ``*``, ``-``, ``E`` blocks as above
  (GQA attention without the MLA norms), each ``M`` block ``2 h (2 d_in + 2 G N + H) + 7 d_in N + 2 d_in h`` with
  ``d_in = 2 h`` as the function takes it (not the mixer's ``expand`` or ``num_heads x head_dim``), the logits
  ``2 h V_pad (1 + mtp)``; each MTP depth's blocks (``mtp_pattern``) as the pattern's, since the counts are
  ``get_hybrid_layer_counts`` of the unified ``main/mtp/...`` pattern (NVIDIA/Megatron-LM@2a75ac12
  megatron/training/training.py and megatron/core/models/hybrid/hybrid_layer_allocation.py), and no MTP
  projection.

``V_pad``: the vocabulary padded to a multiple of ``make_vocab_size_divisible_by x tp`` (megatron/core/tokenizers/
utils/build_tokenizer.py ``vocab_size_with_padding``), the argument's default 128 (megatron/training/
arguments.py ``--make-vocab-size-divisible-by``). Sequences unpacked (BSHD: ``sum L_i^2 = B s^2``).

The ``megatron-bridge`` convention (``windows``): Megatron-Bridge logs its own ``num_floating_point_operations``
(NVIDIA-NeMo/Megatron-Bridge v0.6.0, 2026-08-19, ``src/megatron/bridge/training/utils/flop_utils.py``), the same
count term by term for the models topo builds (3 passes; the MLP, MoE, MLA, MTP and logit terms; the causal half
of full attention, ``query_projection_size x s / 2 x 2``; the padded vocabulary, ``calculate_padded_vocab_size``
with the provider's 128; a hybrid's ``attn_layer_flops`` and ``mamba_layer_flops``) but one: a sliding-window layer
(``window_size``, one in ``window_attn_skip_freq``) takes the exact average causal context of a ``W``-token window,
``W - W (W - 1) / (2 s)`` for ``W < s`` (``swa_context``; ``W = window_size[0] + window_size[1] + 1``, gpt-oss's
``(sliding_window - 1, 0)``: the model's ``window``), in place of full attention's ``s / 2``. Chunked attention
(Llama 4) sets no ``window_size`` in Megatron-Bridge and counts as full.
"""

from __future__ import annotations

import math

from .model import Block, ModelSpec

__all__ = ["megatron_lm_flops_per_token", "padded_vocab", "swa_context", "VOCAB_DIVISIBLE_BY"]

# Megatron-LM's --make-vocab-size-divisible-by default (megatron/training/arguments.py@d98e8a64): a software
# default the log's count uses, not a fitted constant.
VOCAB_DIVISIBLE_BY = 128


def padded_vocab(vocab: int, tp: int) -> int:
    """``vocab`` rounded up to a multiple of ``128 x tp``, as Megatron-LM pads it (``vocab_size_with_padding``)."""
    multiple = VOCAB_DIVISIBLE_BY * tp
    return math.ceil(vocab / multiple) * multiple


def megatron_lm_flops_per_token(model: ModelSpec, seq: int, tp: int, windows: bool = False) -> float:
    """FLOPs per token of one training step as Megatron-LM's ``num_floating_point_operations`` counts them
    (``windows``: as Megatron-Bridge's does, its sliding-window layers at their causal window context).

    Parameters
    ----------
    model : ModelSpec
        The model.
    seq : int
        Sequence length in tokens (every sequence full length, unpacked).
    tp : int
        Tensor-parallel degree (it sets the padded vocabulary).
    windows : bool
        Megatron-Bridge's count (:func:`swa_context` for sliding-window layers); else Megatron-LM's.

    Returns
    -------
    float
        FLOPs per token, forward and backward (``3 x`` the forward count).
    """
    vocab = padded_vocab(model.vocab, tp)
    if model.layer_pattern is not None:
        return 3 * _hybrid_forward(model, seq, vocab)
    return 3 * _transformer_forward(model, seq, vocab, windows)


def swa_context(window: int, seq: int) -> float:
    """Megatron-Bridge's average causal context of a sliding-window layer (``calculate_swa_context``): the keys of
    ``seq`` queries, ``W (W + 1) / 2 + (s - W) W``, over ``seq``, i.e. ``W - W (W - 1) / (2 s)`` for ``W < s``,
    else full attention's ``s / 2``.

    Parameters
    ----------
    window : int
        ``W``: the query and the ``W - 1`` keys before it.
    seq : int
        Sequence length in tokens.

    Returns
    -------
    float
        Mean keys per query as the count takes them.
    """
    return window - window * (window - 1) / (2 * seq) if window < seq else seq / 2


def _mlp_forward(model: ModelSpec, dense_layers: int, moe_layers: int) -> float:
    """Dense MLP and MoE blocks (routed top-k and shared experts, latent projections; no router), forward, per
    token."""
    out = dense_layers * 2 * model.dense_mlp_params
    if model.moe is not None:
        # routed experts at the latent width and the two latent projections (``moe_layer_flops``, training.py lines
        # 846-860 at NVIDIA/Megatron-LM@d98e8a64): the shared experts at hidden
        out += moe_layers * 2 * model.moe_token_params
    return out


def _core_attention(model: ModelSpec, seq: int) -> float:
    """``Q K^T`` and ``P V`` under the causal mask, per token and layer: ``2 s n (d_qk + d_v) / 2``
    (``standard_self_attn_core_term``; ``attn_layer_flops``' ``2 sum(L^2) h p``)."""
    return seq * model.heads * (model.qk_dim + model.v_dim)


def _attention_projections(model: ModelSpec) -> float:
    """Attention projections, forward, per token and layer: ``2 x`` the weights; MLA adds its q and kv LoRA
    norms (the ``+ 1`` in ``q_term`` and the kv term of ``standard_self_attn_term``)."""
    a = model.attention
    if a.kind != "mla":
        return 2 * model.attention_params
    h, n = model.hidden, model.heads
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim
    q = h * n * qk if a.q_lora_rank is None else a.q_lora_rank * (h + n * qk + 1)
    kv = a.kv_lora_rank * (h + n * (a.qk_nope_head_dim + a.v_head_dim) + 1) + h * a.qk_rope_head_dim
    return 2 * (q + kv + n * a.v_head_dim * h)


def _window_layers(model: ModelSpec, layers: int, windows: bool) -> int:
    """Of ``layers`` attention layers (MTP included, as Megatron-Bridge's ``swa_pattern`` runs over ``num_layers``
    with MTP), those Megatron-Bridge counts at a sliding window's context: none unless ``windows`` and the model's
    local layers slide (``window_attn_skip_freq``: layer ``i`` full when ``(i + 1) % freq == 0``)."""
    a = model.attention
    if not windows or a.window is None or a.window_kind != "sliding":
        return 0
    return sum(model.attention_kind(i) == Block.LOCAL for i in range(layers))


def _transformer_forward(model: ModelSpec, seq: int, vocab: int, windows: bool = False) -> float:
    """``transformer_flops`` / 3 per token: MTP layers counted as MoE layers if the last layer is one; with
    ``windows``, Megatron-Bridge's sliding-window layers at ``2 x`` :func:`swa_context` keys in place of ``s``."""
    h, mtp = model.hidden, model.mtp_layers
    last_moe = model.moe is not None and model.blocks[-1].endswith(Block.MOE)
    moe = model.num_moe_layers + (mtp if last_moe else 0)
    dense = model.num_dense_layers + (0 if last_moe else mtp)
    layers = model.num_attention_layers + mtp
    local = _window_layers(model, layers, windows)
    core = (layers - local) * _core_attention(model, seq)
    if local:
        core += local * _core_attention(model, seq) * 2 * swa_context(model.attention.window, seq) / seq
    return (_mlp_forward(model, dense, moe) + layers * _attention_projections(model) + core
            + mtp * 2 * (3 * h + 2 * h * h) + 2 * h * vocab * (1 + mtp))


def _mamba_forward(model: ModelSpec) -> float:
    """``mamba_layer_flops`` per token: in_proj, the scan ``7 d_in N``, out_proj, with ``d_in = 2 h``."""
    mb, h = model.mamba, model.hidden
    d_in = 2 * h
    heads = mb.num_heads or d_in // mb.head_dim
    return 2 * h * (2 * d_in + 2 * mb.groups * mb.d_state + heads) + 7 * d_in * mb.d_state + 2 * d_in * h


def _hybrid_forward(model: ModelSpec, seq: int, vocab: int) -> float:
    """``hybrid_flops`` / 3 per token: the blocks of the pattern and of every MTP depth (``get_hybrid_layer_counts``
    of the unified ``main/mtp/mtp`` pattern) counted apart, the logits once per MTP depth, no MTP projection."""
    mtp = model.mtp_layers

    def n(kind: str) -> int:
        return model.count(kind) + mtp * model.mtp_block.count(kind)

    mamba = n(Block.MAMBA) * _mamba_forward(model) if model.mamba is not None else 0.0
    attn = (n(Block.ATTENTION) + n(Block.LOCAL)) * (_attention_projections(model) + _core_attention(model, seq))
    return (attn + _mlp_forward(model, n(Block.MLP), n(Block.MOE)) + mamba
            + 2 * model.hidden * vocab * (1 + mtp))
