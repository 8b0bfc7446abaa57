"""FLOPs of a training step: what the GPUs execute, and what the sources count as "model FLOPs".

Per token, forward, one layer (2 FLOPs per multiply-add):

- projections: ``2 x`` the layer's attention weights; MLP: ``2 x`` its weights (MoE: the routed top-k and the
  shared experts, plus the router ``2 h E``);
- attention scores: ``2 s n (d_qk + d_v)`` (``Q K^T`` and ``P V`` over the whole ``s x s`` square, as Megatron's
  eq. 3 counts them; ``4 s h`` for multi-head attention); a local layer (sliding window or chunks of ``w``)
  ``2 min(w, s) n (d_qk + d_v)``, the whole band as the whole square is counted for full attention, averaged over
  the attention layers (Megatron-Bridge counts a window's causal context instead: ``megatron-bridge`` below);
- the output layer (logits): ``2 h V`` once per token.

Executed (hardware) FLOPs: backward = 2 x forward; recomputation adds the layers' forward again (``full``) or
the attention scores only (``selective``, Korthikanti et al. 2022; a fused flash-attention kernel does the same
in its backward pass).

Four conventions for the FLOPs a throughput figure counts (``convention``):

- ``megatron``: Narayanan et al. 2021 (SC21), eq. 3, ``96 B s l h^2 (1 + s/(6h) + V/(16 l h))`` for a GPT:
  4 passes over the layers (forward, backward x2, full recomputation) and 3 over the logits, whatever the run
  recomputed; computed here from the general per-layer count, which reduces to eq. 3 exactly for GPT shapes.
- ``megatron-lm``: what Megatron-LM logs today (``num_floating_point_operations``): 3 passes over the layers and
  the logits, the causal half of the attention scores, the vocabulary padded to ``128 x tp``; see
  :mod:`.flops_megatron_lm`. For a GPT at ``V`` a multiple of ``128 tp`` it is ``72 B s l h^2 (1 + s/(12h) +
  V/(12 l h))``: eq. 3 without the recomputation pass and with its attention scores halved (causal).
- ``megatron-bridge``: what Megatron-Bridge logs (its own ``num_floating_point_operations``): ``megatron-lm``'s
  count, but a sliding-window layer at its average causal context ``W - W (W - 1) / (2 s)`` in place of ``s / 2``
  (:func:`.flops_megatron_lm.swa_context`); the same as ``megatron-lm`` for a model without sliding windows.
- ``6n``: PaLM (Chowdhery et al. 2022, appendix B) and Llama 3: ``6 N + 6 l s n (d_qk + d_v)`` per token
  (``6N + 12 l h s`` for multi-head attention), N the active weights without the input embedding (a lookup),
  ``l`` the layers with attention (a hybrid model's Mamba-2 and MLP blocks have none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .parallel import ParallelLayout
from .model import ATTENTION_BLOCKS, Block, ModelSpec
from .flops_megatron_lm import megatron_lm_flops_per_token

__all__ = ["LayerFlops", "layer_flops", "model_flop_per_step", "six_n_params", "stage_flops", "CONVENTIONS"]

CONVENTIONS = ("megatron", "megatron-lm", "megatron-bridge", "6n")


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs per token of one average layer and of the logits."""

    matmul: float  # projections and MLP (average over dense and MoE layers)
    scores: float  # attention scores and weighted sum
    logits: float
    moe_fraction: float  # share of layers that are MoE

    @property
    def layer(self) -> float:
        return self.matmul + self.scores


def layer_flops(model: ModelSpec, seq: int) -> LayerFlops:
    h = model.hidden
    attn = 2 * model.attention_params
    dense = 2 * model.dense_mlp_params
    if model.moe is None:
        mlp = dense
    else:
        mlp = (model.num_dense_layers * dense + model.num_moe_layers * _moe_block(model)) / model.layers
    n_att = model.num_attention_layers
    keys = (sum(model.count(k) * model.attended_keys(k, seq, causal=False) for k in ATTENTION_BLOCKS) / n_att
            if n_att and model.count(Block.LOCAL) else float(seq))
    scores = 2 * keys * model.heads * (model.qk_dim + model.v_dim)
    return LayerFlops(matmul=attn + mlp, scores=scores, logits=2 * h * model.vocab,
                      moe_fraction=model.num_moe_layers / model.layers)


def _moe_block(model: ModelSpec) -> float:
    """Forward FLOPs per token of one MoE block: the routed top-k and shared experts, the latent projections and
    the router."""
    return 2 * model.moe_token_params + 2 * model.router_params


def _layers_forward(model: ModelSpec, f: LayerFlops) -> float:
    """Forward FLOPs per token of all the model's layers, each block counted where the model has it: attention
    (projections and scores) in its attention blocks only, the dense MLP, MoE and Mamba-2 blocks (the mixer's
    projections, ``2 x`` its weights) in theirs. A hybrid model's ``layers`` counts every block as a layer, as
    Megatron-LM's ``num_floating_point_operations`` counts its ``hybrid_override_pattern``'s M, * and - apart
    (NVIDIA/Megatron-LM megatron/training/training.py); for a transformer it is ``layers x f.layer``."""
    moe = 0.0 if model.moe is None else model.num_moe_layers * _moe_block(model)
    return (model.num_attention_layers * (2 * model.attention_params + f.scores)
            + model.num_dense_layers * 2 * model.dense_mlp_params + moe
            + model.num_mamba_layers * 2 * model.mamba_params)


def model_flop_per_step(model: ModelSpec, lay: ParallelLayout, convention: str = "6n") -> float:
    """FLOPs one step counts under ``convention`` (``megatron``, ``megatron-lm``, ``megatron-bridge`` or ``6n``)
    for the whole global batch."""
    seq = lay.seq_len or model.seq_len
    tokens = lay.global_batch * seq
    f = layer_flops(model, seq)
    if convention == "megatron":
        return tokens * (4 * _layers_forward(model, f) + 3 * f.logits)
    if convention in ("megatron-lm", "megatron-bridge"):
        return tokens * megatron_lm_flops_per_token(model, seq, lay.tp, windows=convention == "megatron-bridge")
    if convention == "6n":
        return tokens * (6 * six_n_params(model) + 3 * model.num_attention_layers * f.scores)
    raise ValueError(f"unknown FLOP convention {convention!r}; allowed: {', '.join(CONVENTIONS)}")


def six_n_params(model: ModelSpec) -> float:
    """The ``N`` of the ``6n`` count: the weights one token goes through (an MoE's active ones) without the input
    embedding, a lookup (kept where it is tied to the output layer, which multiplies)."""
    return model.active_params - (0 if model.tied_embeddings else model.vocab * model.hidden)


@dataclass(frozen=True)
class StageFlops:
    """Executed FLOPs per GPU for one micro-batch on the busiest pipeline stage."""

    forward: float
    backward: float
    recompute: float
    layers: int  # layers on the busiest stage
    attention_forward: float  # the scores part of ``forward`` (what CP's exchange hides behind)
    moe_mlp_forward: float  # the expert part of ``forward`` (what EP's all-to-alls hide behind)
    moe_layers: int = 0  # MoE layers on the busiest stage

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute


def stage_flops(model: ModelSpec, lay: ParallelLayout) -> StageFlops:
    """Layers split as evenly as possible over ``pp`` stages (the first stages take the extra ones); the logits
    run on the last stage; the busiest stage sets the pipeline's pace. In an MoE model the busiest stage is
    taken to hold MoE layers only (as many as there are). Work splits evenly over tp x cp."""
    seq = lay.seq_len or model.seq_len
    f = layer_flops(model, seq)
    tokens = lay.micro_batch * seq
    hi = math.ceil(model.layers / lay.pp)
    lo = model.layers // lay.pp
    moe_layer, dense_layer = _layer_kinds(model, f)

    def stage(n):  # forward FLOPs per token of a stage of n layers, the MoE ones first
        k = min(n, model.num_moe_layers)
        return k * moe_layer + (n - k) * dense_layer, k

    if lay.pp == 1:
        layers, body, logits, n_moe = model.layers, f.layer * model.layers, f.logits, model.num_moe_layers
    else:
        (first, k1), (last, k2) = stage(hi), stage(lo)
        if first >= last + f.logits:
            layers, body, logits, n_moe = hi, first, 0.0, k1
        else:
            layers, body, logits, n_moe = lo, last, f.logits, k2
    fwd = body + logits
    split = lay.tp * lay.cp
    rec = {"none": 0.0, "selective": layers * f.scores, "full": body}[lay.recompute]
    if lay.flash_attention and lay.recompute == "none":
        rec = layers * f.scores  # the fused kernel's backward recomputes the scores
    m = model.moe
    moe_mlp = 0.0 if m is None else n_moe * 2 * model.moe_token_params
    return StageFlops(forward=tokens * fwd / split, backward=2 * tokens * fwd / split,
                      recompute=tokens * rec / split, layers=layers,
                      attention_forward=tokens * layers * f.scores / split,
                      moe_mlp_forward=tokens * moe_mlp / split, moe_layers=n_moe)


def _layer_kinds(model: ModelSpec, f: LayerFlops) -> tuple[float, float]:
    """Forward FLOPs per token of one MoE layer and of one dense layer (attention included)."""
    attn = 2 * model.attention_params + f.scores
    dense = attn + 2 * model.dense_mlp_params
    if model.moe is None:
        return dense, dense
    return attn + _moe_block(model), dense
