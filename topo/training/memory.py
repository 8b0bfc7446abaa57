"""Memory per GPU of a training job: weights, gradients, optimizer state, activations (busiest stage).

Model state (Rajbhandari et al. 2020, ZeRO): ``weight_bytes`` + ``grad_bytes`` + ``optimizer_bytes`` per
parameter (2 + 2 + 12 by default); ZeRO-1 shards the optimizer over data parallelism, ZeRO-2 (and FSDP's
SHARD_GRAD_OP) also the gradients, ZeRO-3 / FSDP also the weights (plus two layers gathered at a time). A GPU
holds ``1 / tp`` of its stage's layers and embedding; experts are split over ``ep x tp`` and sharded over the
experts' replicas (``dp / ep``).

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", sec. 4,
Table 2), bytes per layer per micro-batch of ``b`` sequences of ``s`` tokens, 16-bit: with tensor and sequence
parallelism ``s b h (34 + 5 a s / h) / t``; selective recomputation drops the ``5 a s / h`` (attention scores)
term, as does fused (flash) attention; full recomputation keeps only the layer's input, ``2 s b h / t``; without sequence parallelism the 10 of
the 34 held by norms and dropouts are not divided by t. The 34 is the GPT layer (multi-head attention, 4h GeLU
MLP, dropout); here it is taken apart so other shapes follow: attention ``2 + 2 + 4 kv d / h + 2 + 1`` (input,
Q, K and V, the output projection's input, a dropout mask = 11 for MHA), MLP ``2 + 2 k f / h + 1`` (input,
``k`` = 2 (GeLU) or 3 (SwiGLU) f-wide intermediates, mask = 19 for GeLU at f = 4h), two norms 4; a model without
dropout (``dropout = false``) has no masks (32 instead of 34) and stores ``2 a s / h`` of scores, not 5. An MoE layer's
MLP activations count once per routed and shared expert a token visits. Context parallelism divides ``s``.
The first pipeline stage holds the most: with 1F1B, ``min(m, p)`` micro-batches of its layers, times
``1 + (p - 1) / (p v)`` when interleaved (Korthikanti et al., sec. 4.2.3); the output layer's fp32 logits
``4 s b V / t`` count when there is one stage.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .parallel import ParallelLayout
from .model import ModelSpec

__all__ = ["MemoryBreakdown", "memory_per_gpu", "activation_bytes_per_layer", "params_per_gpu"]


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU on the busiest stage, and whether they fit."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def short_bytes(self) -> float:
        """How much more memory the layout needs than the GPU has (0 when it fits)."""
        return max(0.0, self.total_bytes - self.capacity_bytes)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(total_bytes=self.total_bytes, fits=self.fits, short_bytes=self.short_bytes)
        return d


def params_per_gpu(model: ModelSpec, lay: ParallelLayout) -> tuple[float, float]:
    """(dense, expert) parameters one GPU of the busiest stage holds, before any ZeRO sharding: the first
    stage's layer count and embedding, with as many MoE layers as fit in it."""
    layers = math.ceil(model.layers / lay.pp)
    moe_layers = min(layers, model.num_moe_layers)  # the stage with the most experts (as in flops.stage_flops)
    emb = model.vocab * model.hidden * (2 if lay.pp == 1 and not model.tied_embeddings else 1)
    dense = (layers * (model.attention_params + model.norm_params) + (layers - moe_layers) * model.dense_mlp_params
             + emb) / lay.tp
    expert = 0.0
    if model.moe is not None:
        m = model.moe
        expert = moe_layers * m.experts * model.expert_params / (lay.ep * lay.tp)
        dense += moe_layers * (m.shared_experts * model.expert_params / lay.tp + model.hidden * m.experts)
    return dense, expert


def activation_bytes_per_layer(model: ModelSpec, lay: ParallelLayout) -> float:
    """One layer, one micro-batch, on one GPU (Korthikanti et al. 2022, generalized as the module says)."""
    s = (lay.seq_len or model.seq_len) / lay.cp
    b, h, t = lay.micro_batch, model.hidden, lay.tp
    sbh = s * b * h
    if lay.recompute == "full":
        return 2 * sbh / (t if lay.sequence_parallel else 1)
    kv_frac = model.num_kv_heads * model.head_dim / h
    mask = 1 if model.dropout else 0
    attn = 2 + 2 + 4 * kv_frac + 2 + mask
    k = model.mlp_matrices
    mlp = 2 + 2 * k * model.ffn_hidden / h + mask
    if model.moe is not None:
        m = model.moe
        moe_mlp = 2 + (m.active_experts + m.shared_experts) * 2 * k * m.expert_ffn_hidden / h + mask
        share = model.num_moe_layers / model.layers
        mlp = (1 - share) * mlp + share * moe_mlp
    norms = 4
    linear = attn + mlp + norms  # 34 for a GPT layer
    scores = 0.0 if lay.recompute == "selective" or lay.flash_attention else (5 if model.dropout else 2) * \
        model.heads * s / h  # softmax output 2 bytes (+ dropout mask 1 and output 2)
    if lay.sequence_parallel or t == 1:
        return sbh * (linear + scores) / t
    # without SP the norms and dropouts (10 of the GPT's 34) are replicated on every TP rank
    rep = 10 if model.dropout else 8
    return sbh * (rep + (linear - rep) / t + scores / t)


def memory_per_gpu(model: ModelSpec, lay: ParallelLayout, capacity_bytes: float) -> MemoryBreakdown:
    dense, expert = params_per_gpu(model, lay)
    dp, edp = lay.dp, lay.dp // lay.ep
    z = lay.zero_stage
    w = dense * lay.weight_bytes / (dp if z >= 3 else 1) + expert * lay.weight_bytes / (edp if z >= 3 else 1)
    if z >= 3:  # two layers' weights gathered at a time (the one computing, the one prefetched)
        w += 2 * (dense + expert) / max(1, math.ceil(model.layers / lay.pp)) * lay.weight_bytes
    g = dense * lay.grad_bytes / (dp if z >= 2 else 1) + expert * lay.grad_bytes / (edp if z >= 2 else 1)
    o = dense * lay.optimizer_bytes / (dp if z >= 1 else 1) + expert * lay.optimizer_bytes / (edp if z >= 1
                                                                                                else 1)
    layers = math.ceil(model.layers / lay.pp)
    p, m, v = lay.pp, lay.microbatches, lay.vpp
    in_flight = min(m, p) * (1 + (p - 1) / (p * v) if v > 1 and m >= p else 1)
    act = activation_bytes_per_layer(model, lay) * layers * in_flight
    if p == 1:
        s = (lay.seq_len or model.seq_len) / lay.cp
        act += 4 * s * lay.micro_batch * model.vocab / lay.tp
    return MemoryBreakdown(weights_bytes=w, gradients_bytes=g, optimizer_bytes=o, activations_bytes=act,
                           capacity_bytes=capacity_bytes)
