"""A training step's compute as the sum of its operators, each timed by the kernel model of the GPU.

Every block of a layer (attention ``*``, MLP ``-``, MoE ``E``, Mamba-2 ``M``), the embedding and the logits is a
list of operators for one micro-batch on one GPU: GEMMs (projections, MLP, experts, logits), the fused attention
core, memory-bound kernels (norms, residual adds, activation functions, RoPE, MoE permutation, cross-entropy, FP8
casts), and kernels of one pass each (Mamba-2's scan, convolution, norm and copies, forward and backward listed
apart: :mod:`topo.training.ssd`). An operator's time is its kernels' (:mod:`topo.training.kernels`: GEMMs by
tile and wave quantisation, attention at cuDNN's rates by head dimension and block length, memory-bound kernels
at their share of HBM) plus a launch gap per kernel.

An MoE block is its parts: the router GEMM and top-k, the permutation and un-permutation of the routed tokens
(memory-bound), and the expert GEMMs at their real shapes (each local expert ``ep x etp x tokens x top-k /
experts`` rows on the busiest rank, times the expected maximum over the EP ranks of a dropless router's load,
:func:`busiest_rank_load`, or the capacity when padded): dense GEMMs of that
shape, Transformer Engine's grouped linear issuing one cuBLAS GEMM per local expert (a launch each on the host)
on 4 CUDA streams that run together (their tiles packed into one set of waves, each kernel's launch gap behind the
other streams' tiles, no faster than a stream's GEMMs one after another), or the fused grouped MLP's one kernel a
pass (:mod:`topo.training.grouped_gemm`; ``moe_grouped_gemm = false``: one after another, each quantised alone). The host launches every kernel that no CUDA graph of the
layout's ``cuda_graph_scope`` captures (the router's published kernel counts, fused or not); the GPU waits where the
host is slower, and a dropless router syncs its tokens per expert to the host, so a layer with an MoE block lasts
at least the host's launches of its kernels (:func:`stage_compute`; Megatron-LM's GB200 study, sec. 2 and 2.3):
many small experts per GPU leave the GPU waiting for the CPU. Only the linear layers' GEMMs
run in FP8 when the layout's precision is ``fp8``; the attention core, norms, activations, router, logits and the
optimizer stay in BF16/FP32, and FP8 adds a quantisation of each linear layer's input (forward) and output gradient
(backward) in one kernel: 2 bytes read and each FP8 copy the pass's GEMMs need written with its scales
(:func:`quantize_bytes`; an operand all-gathered over TP is cast on the rank's shard before the gather, and per-tensor
FP8 on Hopper transposes the gathered tensor for wgrad: :attr:`Op.gather_transpose_elem_bytes`); the FP8 GEMMs of a block-scaled recipe run at their measured time ratio to per-tensor
scaling (:func:`.kernels.fp8_recipe_costs`); a grouped expert GEMM quantises each expert's rows once a pass,
in four kernels reading them once more under per-tensor current scaling (``fp8_recipe = "current"``, as every
linear layer's input but a TE norm's output, and every output gradient: :func:`cast_kind`), and
Megatron-Core's grouped experts copy their rows to pad each expert's count to the FP8 alignment unless the router or
the dispatch already did (:func:`fp8_padding_ops`).

Backward: each GEMM ``Y[M,N] = X[M,K] W[K,N]`` runs two GEMMs of its FLOPs, ``dX`` (shape ``M, K, N``) and
``dW`` (shape ``K, N, M``); the fused attention's backward is 2.5 x its forward FLOPs (it recomputes the scores:
FlashAttention-2, arXiv 2307.08691, sec. 3.2); memory-bound kernels move twice their forward bytes.

Tensor parallelism splits GEMMs by columns or rows (``N`` or ``K`` over ``tp``); with sequence parallelism norms,
residuals and dropouts work on ``1/tp`` of the tokens. Context parallelism gives each rank ``s/cp`` queries
against the whole sequence's keys. An MoE block's experts are split over ``ep`` (and ``etp`` within an expert);
each local expert is a GEMM of ``ep x etp x tokens x top-k / experts`` rows (times :func:`busiest_rank_load`
on the busiest rank).

The optimizer step (fused Adam, Megatron's distributed optimizer) reads and writes ``OPTIMIZER_STEP_BYTES`` per
local parameter: fp32 gradient, main weight and two moments read (16), main weight and moments written (12), the
bf16 weight written (2) and the gradient buffer zeroed (4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .activation_bytes import fully_recomputed, modules_recomputed
from .activation_offload import host_link_Bps, offload_exposed_s, stage_offload_bytes
from .attention_sinks import sink_backend, sink_grad_bytes
from .cross_entropy import cross_entropy_moves
from .embedding_grad import embedding_grad_costs
from .fsdp2_copies import copies_units, fsdp2_copies, fsdp2_grad_copy_bytes
from .gpus import GpuCompute, gpu_compute
from .grad_hooks import ddp_hooks_run, grad_hook_host_s
from .host_cpu import call_host_on_s, reference_host_cpu
from .grouped_gemm import (CPP_LOOP_PATHS, GROUP_QUANTIZE_KERNELS, epilogue_cast, expert_host_ops,
                           expert_python_calls, grouped_pass_s, input_cast_kernels)
from .kernels import (KernelModel, alltoall_preprocess_kernels, attention_rate_flops, cast_extra_bytes,
                      fp8_backward_published, fp8_padding, fp8_recipe_costs, gather_transpose_bytes, gemm_s, memory_s,
                      memory_backward_bytes, norm_writes_quantised,
                      permute_backward_bytes, permute_kernels, permute_s, quantize_kernels, quantize_s,
                      recipe_gemm_ratio, recipe_precision, router_kernels, ssd_backward_products_flops, ssd_sm_reference)
from .module_recipes import module_precision, mtp_in_bf16, op_recipes
from .parallel import ParallelLayout, current_scaling, delayed_scaling
from .pipeline_layout import END_UNITS, layout_chunks
from .ring_attention import cp_attention_calls, p2p_merge_bytes
from .router_load import uniform_expert_sd, uniform_max_over_mean
from .routing import rank_destinations
from .te_version import ub_grad_output_copy_bytes
from .tp_overlap import margin_kernels, pass_margins, userbuffers_built, userbuffers_on
from .weight_swizzle import (cast_memsets, conversion_bytes, converts, gathered_swizzle_bytes, scale_kernels,
                             swizzle_bytes, swizzle_host_s)
from .model import ATTENTION_BLOCKS, Block, ModelSpec
from .ssd import ssd_flops, ssd_kernels

__all__ = ["END_UNITS", "Op", "block_ops", "busiest_rank_load", "expert_rows_sd", "op_time_s", "op_passes_s", "wgrad_kw",
           "quantize_bytes", "norm_cast_bytes", "gathered_elements", "gather_transposes", "cast_kind", "BlockTime", "block_time", "ep_calls", "EpCallsHost", "EP_CALL_PARTS", "ep_calls_host", "block_time_key", "DISPATCHER_FIELDS", "StageCompute", "stage_compute", "rank_computes", "rank_computes_at",
           "pipeline_units", "rank_stages", "layer_numbers", "bf16_layers", "fully_recomputed", "optimizer_step_s",
           "OPTIMIZER_STEP_BYTES", "optimizer_step_bytes", "autograd_add_bytes", "UNSCALE_BYTES", "MOE_ROUTER_OPS", "ALLTOALL_PREPROCESS_OPS", "SHARED_EXPERT_MODULES", "SCOPE_PARTS",
           "host_syncs", "CAPACITY_MASK_BYTES", "RESIDUAL_TAG", "early_stopped_s", "launch_calls", "expert_host_s",
           "fp8_padding_ops", "fp8_padding_copies", "FP8_PADDING_MOVES", "sm_bound_floor_s"]

OPTIMIZER_STEP_BYTES = 34.0
MOE_ROUTER_OPS = ("norm", "router", "router_topk", "router_fake", "router_capacity", "router_capacity_grad")
"""An MoE block's operators before its routed experts' token-count sync: the norm and the router (a learned one's
GEMM and top-k, or the benchmark gate's ``router_fake``). Megatron-Core's ``moe_router`` graph part and, with the
permutation, the combined 1F1B's ``attn`` node (:mod:`topo.training.ep_overlap`)."""
ALLTOALL_PREPROCESS_OPS = {"dispatch_preprocess": "moe_preprocess", "dispatch_dtoh": ""}
LATENT_PROJ_PARTS = {"fc1_latent_proj": "moe_preprocess", "fc2_latent_proj": "moe"}
"""A LatentMoE block's projections (:func:`latent_proj_ops`) and the ``cuda_graph_scope`` part that captures each:
the down projection runs in ``MoELayer.preprocess`` (``moe_preprocess``), the up projection in ``postprocess``,
after the combine, which only a whole-MoE graph captures (NVIDIA/Megatron-LM@d98e8a64
megatron/core/transformer/moe/moe_layer.py: ``@maybe_skip_or_early_return_by_cudagraph("preprocess")``)."""
"""The all-to-all dispatcher's token-count operators of a dropless MoE block (:func:`_alltoall_preprocess_ops`)
and the ``cuda_graph_scope`` part that captures each: the preprocess by ``moe_preprocess``, the device-to-host
copies by no partial graph (Megatron-Core moves them after the graph when the preprocess is captured)."""
SYNC_OP = "permute"
"""The first operator of a dropless MoE block after its tokens-per-expert device-to-host sync
(:func:`_synced_layer_wait_s`): the permutation. The flex dispatcher permutes after its dispatch has returned the
counts. Megatron-Core's all-to-all dispatcher syncs ``before_ep_alltoall`` in ``token_dispatch``, after its first
permutation (``dispatch_preprocess``'s ``permute``: 4 of the op's 9 forward kernels, ``kernels.toml``
``permute_kernels``; NVIDIA/Megatron-LM@d98e8a64dd ``token_dispatcher.py``); the op is not split, so those
launches are counted after the sync (assumption; splitting them before it moved 4 rows by 0.1-0.5 point and no
group's median, rev39)."""

RESIDUAL_TAG = "residual"
"""The tag of a block's residual add (its :func:`block_time` ``recompute_s`` entry): what a layer's replay under
``recompute_early_stop`` leaves out at its end (:func:`early_stopped_s`)."""

SCOPE_PARTS = {"moe": ("moe", "moe_router", "moe_preprocess")}
"""The ``cuda_graph_scope`` parts a scope value captures beyond its own name. ``moe`` graphs the whole MoE block,
its norm, router and shared experts (the ``moe_router`` part) included: Megatron-Core's per-layer graph with ``moe``
takes ``pre_mlp_layernorm`` and the whole ``mlp`` (NVIDIA/Megatron-LM@d98e8a64dd
``megatron/core/transformer/transformer_layer.py``, the capture's submodules: ``moe`` before the ``moe_router``
branch), and at 25.09's Megatron-Core 0.14 ``enable_cuda_graph`` wraps the whole ``TransformerLayer`` in its
``CudaGraphManager`` (NVIDIA/Megatron-LM@23e00ed0 core_v0.14.0 ``transformer_layer.py`` ``__init__`` and
``__call__``), which a token-drop, padded MoE layer allows (no host sync)."""
SHARED_EXPERT_MODULES = ("shared_experts", "shared_experts_act")
"""An MoE block's modules that run beside the router, not with the routed experts (the same two users)."""
ATTENTION_BACKWARD_FLOPS = 2.5
"""A fused attention's backward over its forward FLOPs (it recomputes the scores; FlashAttention-2, arXiv
2307.08691 sec. 3.2, and the FLOP convention of its benchmarks: backward = 2.5 x forward)."""
ACT = 2  # bytes per activation element (bf16)


@dataclass(frozen=True)
class Op:
    """One operator of one block, one micro-batch, one GPU, forward pass.

    ``kind``: ``gemm`` (shape ``m x n x k``, ``groups`` alike GEMMs), ``attention`` (a fused kernel),
    ``memory`` (bandwidth-bound), ``kernel`` (one kernel of one pass: the longer of its ``dots`` and its bytes)
    or ``host`` (an eager MoE block's host launches for ``groups`` local experts:
    a floor under the block's GPU time, see :func:`block_time`). ``linear``: a linear layer's
    GEMM, run in FP8 when the layout asks; ``grouped``: an expert GEMM of a grouped-GEMM kernel."""

    name: str
    module: str
    kind: str
    flops: float
    bytes: float
    m: float = 0.0
    n: float = 0.0
    k: float = 0.0
    groups: float = 1.0
    linear: bool = False
    grouped: bool = False
    tag: str = ""
    """A finer recomputation unit than the module (``mla_up_proj``: MLA's up-projections and their RoPE)."""
    launches: float = 1.0
    """Kernels launched forward (a GEMM launches twice that backward: input and weight gradients)."""
    head_dim: float = 0.0
    block_seq: float = 0.0
    causal: bool = True
    """Fused attention: the head dimension, the length of a block the kernel sees (the sequence, a chunk, or the
    tokens a sliding window slides over) and the mask (the kernel's rate depends on all three,
    :func:`topo.training.kernels.attention_rate_flops`)."""
    window: float = 0.0
    """Fused attention over a sliding window: the keys a query attends to (its band's rate from the kernel's
    tiles, :mod:`.attention_tiles`); 0: a causal or full block of ``block_seq``."""
    fp8_attention: str = ""
    """Fused attention in FP8 (the layout's ``attention_fp8``: ``fp8`` or ``mxfp8``): its backward over a causal
    square (a causal block's, or a sliding-window layer's whole square) reads cuDNN's FP8 backward rate at the
    measured head dim (:func:`topo.training.kernels.attention_rate_flops`)."""
    fp8_band: tuple[float, float] = ()
    """A sliding-window layer's FP8 backward over the square (:func:`_fp8_band_ops`): its BF16 band's ``(flops,
    window)``, priced instead where the GPU's table publishes no FP8 backward at the op's head dim
    (:func:`topo.training.kernels.fp8_backward_published`): the square is a measurement on Blackwell at hdim 64."""
    packed: bool = True
    """Grouped GEMMs: one kernel packs every group's tiles (False: a loop of per-group GEMMs)."""
    weights: bool = True
    """A GEMM with a weight (its backward has a weight-gradient GEMM); False: attention scores."""
    graph: str = ""
    """The ``cuda_graph_scope`` part that captures this operator (``attn``, ``mlp``, ``moe_router``, ``moe``,
    ``mamba``; empty: only a full-iteration graph does)."""
    passes: str = "both"
    """``both``: runs forward, its backward derived (above); ``forward`` / ``backward``: a kernel of that pass only
    (a ``kernel`` op: Mamba-2's scan, convolution, norm and copies, whose backward is kernels of its own)."""
    dots: tuple = ()
    """A ``kernel`` op's tensor-core products ``(m, n, k, groups)`` (BF16): it takes the longer of them (tile
    model) and its ``bytes`` through HBM."""
    by_index: bool = False
    """A ``kernel`` op that moves rows by index (an MoE block's permutation and un-permutation): its ``bytes`` at
    the permute kernels' measured shares of HBM (:func:`topo.training.kernels.permute_s`), not a contiguous
    kernel's."""
    sm_bound: bool = False
    """A ``kernel`` op bound by its SMs, not HBM (mamba_ssm's Triton SSD kernels): at least its time on
    ``kernels.toml`` ``[ssd] sm_bound_reference``'s SMs, scaled to this GPU's (:func:`op_time_s`)."""
    ssd_gradient: bool = False
    """One of the SSD backward's own kernels (not a recomputed forward one, :mod:`.ssd`): with products, on the
    reference GPU's SMs it runs them no faster than ``kernels.toml`` ``[ssd] backward_products_TFLOPs``
    (measured, :func:`sm_bound_floor_s`)."""
    current_scaling: bool = False
    """An FP8 linear GEMM under per-tensor current scaling (:func:`block_ops` sets it for every linear layer of a
    layout with ``fp8_recipe = "current"``): each quantisation of its input (each expert's of a grouped GEMM) is
    Transformer Engine's four kernels (the amax zeroed, the amax, the scale, the cast) and reads its input once
    more for the amax (:func:`.kernels.quantize_kernels`), except a ``norm_amax`` forward."""
    block_scaled: bool = False
    """An FP8 linear GEMM under a block-scaled recipe (``fp8_recipe`` ``mxfp8`` or ``blockwise``; :func:`block_ops`
    sets it): a grouped expert module's ``split_quantize`` allocates every expert's output at once
    (:func:`.grouped_gemm.expert_host_ops`)."""
    mxfp8: bool = False
    """An FP8 linear GEMM under MXFP8 (``fp8_recipe = "mxfp8"``; :func:`block_ops` sets it): each fprop and dgrad
    GEMM call swizzles its weight's scales (:func:`.weight_swizzle.weight_swizzles`)."""
    sp_gather: str = ""
    """A tensor-parallel linear whose operand is all-gathered under sequence parallelism (TP > 1; :func:`block_ops`
    sets it from ``tp_role``, with or without userbuffers): ``ag`` its input (column-parallel), ``rs`` its output
    gradient (row-parallel); under MXFP8 each GEMM call reading it swizzles its scales
    (:func:`.weight_swizzle.gathered_swizzles`). Transformer Engine quantises that operand on the rank's shard,
    ``1 / sp_ranks`` of the GEMM's rows, before the gather (:func:`op_time_s`)."""
    sp_ranks: int = 1
    """The TP ranks an ``sp_gather`` operand is gathered from (the layout's ``tp``; 1: none)."""
    gather_transpose_elem_bytes: float = 0.0
    """Bytes per element of the transpose Transformer Engine makes of each all-gathered operand of this FP8 linear
    GEMM for its weight gradient (:func:`.kernels.gather_transpose_bytes`: per-tensor scaling on a TN-only GPU, 2;
    :func:`block_ops` sets it with ``sp_gather``): backward, one kernel over the whole gathered tensor (the input
    regathered, ``ag``; the output gradient, ``rs``), its shard cast writing the row-wise copy only."""
    block_convert: bool = False
    """An FP8 linear GEMM under block-wise scaling (``fp8_recipe = "blockwise"``) on a GPU whose Transformer Engine
    GEMM runs it as MXFP8 (Blackwell; :func:`block_ops` sets it from its ``generation``): each GEMM call converts
    both operands' scales (:func:`.weight_swizzle.block_conversions`)."""
    grad_hooks: bool = False
    """A GEMM whose weights' gradients run Megatron-Core DDP's per-parameter backward hook (:func:`block_ops` sets
    it for a layout with ``wgrad_output = "main_grad"`` below ZeRO-3: :func:`.grad_hooks.grad_hook_host_s`)."""
    recipe: str = ""
    """A linear GEMM's own recipe (``bf16``, ``mxfp8`` or ``nvfp4``) where the layout's ``module_recipes`` names its
    module (:func:`block_ops`; :func:`op_precision` reads it); empty: the layout's ``precision`` and ``fp8_recipe``."""
    fp4_cast: bool = False
    """An FP4 linear GEMM (``fp8_recipe = "nvfp4"``; :func:`block_ops` sets it): each quantisation of its input is
    Transformer Engine's NVFP4 cast, three kernels (``quantize_kernels()["nvfp4"]``: :func:`cast_kind`)."""
    norm_amax: bool = False
    """A linear layer whose forward input a Transformer Engine norm produces in the same module
    (Megatron-Core's ``TELayerNormColumnParallelLinear``: QKV, a dense MLP's fc1, Mamba's in_proj): under current
    scaling the norm kernel computes the amax (TE 2.7+), so the cast is the scale and the cast kernels, no extra
    read (``quantize_kernels()["current_norm_amax"]``)."""
    norm_cast: bool = False
    """A ``norm_amax`` linear under per-tensor delayed scaling (:func:`block_ops`): Transformer Engine's norm kernel
    writes its output in FP8 (``normalization.cpp`` FULLY_FUSED for a ``Float8Quantizer``; v1.x
    ``layernorm_fwd_fp8``), so the forward has no cast kernel and the norm writes 1 byte an element in place of its
    BF16 2 (:func:`norm_cast_bytes`); every other recipe's norm writes BF16 and a cast follows (:func:`cast_kind`)."""
    norm_transpose_elem_bytes: float = 0.0
    """Bytes per element of the transposed copy a ``norm_cast`` forward makes of the norm's FP8 output where the
    weight gradient needs it column-wise and no TP gather stands between (:func:`.kernels.gather_transpose_bytes`:
    2 on a TN-only GPU, 0 from Blackwell or under sequence parallelism, where the gathered tensor is transposed
    backward: :attr:`gather_transpose_elem_bytes`); one kernel the norm's call launches (``ln_api.cpp`` /
    ``rmsnorm_api.cpp`` ``nvte_transpose`` after the norm)."""
    tp_overlap: str = ""
    """A tensor-parallel linear layer's TP collective (its ``tp_role``) that a userbuffers communicator runs beside
    its GEMM (:func:`.tp_overlap.pass_margins`); empty: none, or built without a communicator (every one of an MLA
    model's, :func:`.tp_overlap.userbuffers_built`; a linear with a ``tp_pair`` of its own: :func:`block_ops`)."""
    ub_grad_copy_elem_bytes: float = 0.0
    """Bytes per element of the output-gradient shard a row-parallel FP8 linear layer's backward copies into
    userbuffers' dgrad all-gather buffer after quantising it (read and written: Transformer Engine 2.x; 1.x casts
    into the buffer, 0; :func:`.te_version.ub_grad_output_copy_bytes`); :func:`block_ops` sets it for a quantised
    ``rs`` linear whose layout runs userbuffers (:func:`.tp_overlap.userbuffers_on`). One kernel, one call
    (``copy_into_buffer``)."""
    tp_role: str = ""
    """A tensor-parallel linear layer's role, whatever runs its collectives: ``ag`` column-parallel (its input is
    all-gathered under sequence parallelism: QKV, fc1, Mamba's in_proj, MLA's up projections, the output layer,
    MTP's ``eh_proj``) or ``rs`` row-parallel (its output is reduce-scattered: the output projection, fc2); empty:
    not a TP linear. Its GEMMs are what its TP exchanges hide behind (:func:`tp_paired_gemm_s`)."""
    tp_pair: str = ""
    """The prefix of the pair keys a TP linear's GEMMs name (:func:`tp_paired_gemm_s`) where its exchanges are not
    the block's ``h``-wide ones (:func:`topo.training.step._tp_traffic`): ``q_up`` / ``kv_up`` (MLA's up
    projections, one latent each), ``head`` (the output layer) and ``eh_proj`` (MTP's), none of them a
    userbuffers buffer (Megatron-Core's ``TELinear`` turns userbuffers off for a buffer name other than ``qkv``,
    ``proj``, ``fc1``, ``fc2``: NVIDIA/Megatron-LM@d98e8a64 megatron/core/extensions/transformer_engine.py lines
    1176-1187; the output layer is Megatron's own ``ColumnParallelLinear``); empty: the role's (``ag`` / ``rs``)."""
    in_call: bool = False
    """A kernel launched from C++ inside a call whose host time is priced as the call's (HybridEP's permute and
    un-permute, inside ``dispatch_with_permute`` / ``combine_with_unpermute``: :func:`ep_calls_host`): its GPU gap
    counts, no host launch of its own."""
    side_stream: bool = False
    """A kernel the host launches onto a stream of its own (FSDP2's all-gather copy-in, :mod:`.fsdp2_copies`): its
    launch counts on the host, its seconds not on the compute stream."""
    expert_kernels: str = ""
    """A grouped GEMM's issue path (:mod:`.grouped_gemm`: ``multi_stream`` or ``fused_mlp``, the layout's
    ``moe_expert_kernels``); empty: not a grouped kernel (a dense GEMM, or ``packed`` False: a loop of GEMMs)."""
    m_sd: float = 0.0
    """Spread of each group's ``m`` rows (a dropless router's experts, :func:`expert_rows_sd`): the forward and
    input-gradient GEMMs take the expected row tiles (:func:`.router_load.expected_row_tiles`); 0: exact."""
    epilogue_cast: str = ""
    """An FP8 expert GEMM's pass (``forward`` / ``backward``) whose quantised input the kernel before it writes in
    its epilogue (:func:`.grouped_gemm.epilogue_cast`): no cast kernel, no cast bytes in that pass."""


def _gemm(name, module, m, n, k, groups=1.0, linear=True, grouped=False, tag="", launches=1.0,
          packed=True, weights=True, tp_role="", m_sd=0.0, expert_kernels="", norm_amax=False, tp_pair="") -> Op:
    flops = 2.0 * m * n * k * groups
    return Op(name, module, "gemm", flops, ACT * (m * k + k * n + m * n) * groups, m, n, k, groups, linear,
              grouped, tag, launches=launches, packed=packed, weights=weights, tp_role=tp_role, tp_pair=tp_pair,
              m_sd=m_sd,
              expert_kernels=expert_kernels, norm_amax=norm_amax, epilogue_cast=epilogue_cast(expert_kernels, name))


def _mem(name, module, nbytes, tag="", launches=1.0) -> Op:
    return Op(name, module, "memory", 0.0, float(nbytes), tag=tag, launches=launches)


def _tokens(model: ModelSpec, lay: ParallelLayout) -> tuple[float, float, int]:
    s = lay.seq_len or model.seq_len
    T = lay.micro_batch * s / lay.cp
    T_sp = T / lay.tp if (lay.sequence_parallel and lay.tp > 1) else T
    return T, T_sp, s


def _attention_ops(model: ModelSpec, lay: ParallelLayout, kind: str = Block.ATTENTION) -> list[Op]:
    T, T_sp, s = _tokens(model, lay)
    h, tp, a = model.hidden, lay.tp, model.attention
    heads = model.heads / tp
    ops = [_mem("norm", "layernorm", 4 * T_sp * h)]
    if a.kind == "mla":
        # The down projections are whole on each TP rank (TELinear parallel_mode='duplicated') and take the block's
        # input as it is: under sequence parallelism the rank's T / tp tokens, without it all T (each rank computes
        # them all). The latents' norms (fused into the up projections' TELayerNormColumnParallelLinear) run on
        # those tokens before the up projections all-gather the sequence (NVIDIA/Megatron-LM@d98e8a64
        # megatron/core/transformer/multi_latent_attention.py lines 638-664: "q_compressed: [s / TP, b,
        # q_lora_rank]", "kv_combined: [s / TP, b, (kv_lora_rank + qk_pos_emb_head_dim)]").
        ops += [_gemm("q_down", "attention", T_sp, a.q_lora_rank, h, tag="qkv_proj"),
                _gemm("kv_down", "attention", T_sp, a.kv_lora_rank + a.qk_rope_head_dim, h, tag="qkv_proj"),
                *([_mem("qk_norm", "attention", 4 * T_sp * (a.q_lora_rank + a.kv_lora_rank), launches=2.0)]
                  if a.qk_norm else []),  # RMSNorm of each latent, one kernel each (read, write)
                # the up projections: Transformer Engine column-parallel linears (``TEColumnParallelLinear``, or
                # ``TELayerNormColumnParallelLinear`` with ``qk_layernorm``: gpt_layer_specs.py lines 246-255),
                # whose backward exchanges hide behind their own GEMMs, one latent each (``tp_pair``)
                _gemm("q_up", "attention", T, heads * (a.qk_nope_head_dim + a.qk_rope_head_dim), a.q_lora_rank,
                      tag="mla_up_proj", tp_role="ag", tp_pair="q_up"),
                _gemm("kv_up", "attention", T, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank,
                      tag="mla_up_proj", tp_role="ag", tp_pair="kv_up"),
                _mem("rope", "attention", 4 * T * heads * a.qk_rope_head_dim, tag="mla_up_proj")]
    else:
        kv = max(1.0, model.num_kv_heads / tp)
        d = model.head_dim
        ops += [_gemm("qkv", "attention", T, (heads + 2 * kv) * d, h, tag="qkv_proj", tp_role="ag",
                      norm_amax=True)]
        if a.qk_norm:  # RMSNorm of each Q and K head, one kernel each, priced as every norm (read, write)
            ops.append(_mem("qk_norm", "attention", 4 * T * (heads + kv) * d, launches=2.0))
        if a.rope:
            ops += _rope_ops(model, lay, T * (heads + kv) * d)
    dqk, dv = model.qk_dim, model.v_dim
    sinks = sink_backend(a.sinks, lay.cudnn_version, lay.cp, lay.cp_comm_type, lay.attention_fp8)
    if lay.flash_attention and sinks != "unfused":
        # causal: half of the s x s square; a local layer (W) the area of its window's mask
        flops = 2.0 * T * model.attended_keys(kind, s) * heads * (dqk + dv)
        io = ACT * T * heads * (2 * dqk + 2 * dv)
        if lay.cp > 1 and not (kind == Block.LOCAL and model.attention.window):
            ops += _cp_attention_ops(s, lay, flops, io, dqk, T * heads * dv, T * model.kv_width(tp))
        else:  # the block the kernel sees: the sequence, or a local window (its s / cp keys under CP at most;
            # Ulysses' kernel holds all s tokens of its heads)
            side = s if lay.cp_comm_type == "a2a" else s / lay.cp
            block = min(side, model.attention.window) if kind == Block.LOCAL and model.attention.window else s
            sliding = kind == Block.LOCAL and model.attention.window_kind == "sliding" and block < side
            # a sliding window's kernel sees the whole sequence (its s / cp tokens), masked to the window
            core = Op("core_attention", "core_attn", "attention", flops, io, head_dim=dqk,
                      block_seq=side if sliding else block, causal=True, window=block if sliding else 0.0,
                      fp8_attention="" if sliding else lay.attention_fp8)
            ops += _fp8_band_ops(core, 2.0 * T * model.attended_keys(Block.ATTENTION, side) * heads * (dqk + dv),
                                 lay.attention_fp8) if sliding and lay.attention_fp8 else [core]
        if sinks == "fused":  # the sink's gradient in cuDNN's backward (its forward term moves no bytes)
            nbytes, launches = sink_grad_bytes(T * heads)
            ops.append(Op("attention_sink_grad", "core_attn", "kernel", 0.0, nbytes, launches=launches,
                          passes="backward"))
    else:  # 2021-era, or sinks before cuDNN 9.13.1: two batched GEMMs over the full square and the
        # softmax/mask/dropout on s x s elements (a local layer's mask too: unfused kernels compute the square and
        # mask it; the sink's one column a row is not counted)
        sq = T * s * heads
        ops += [_gemm("scores", "core_attn", T, s, dqk, groups=heads, linear=False, weights=False),
                _gemm("weighted_sum", "core_attn", T, dv, s, groups=heads, linear=False, weights=False),
                _mem("softmax_dropout", "core_attn", sq * (4 + (5 if model.dropout else 0)))]
    ops += [_gemm("out_proj", "attention", T, h, heads * dv, tag="out_proj", tp_role="rs"),
            *_attention_bias_ops(model, lay, T_sp * h),
            _mem("residual", "layernorm", (6 + (1 if model.dropout else 0)) * T_sp * h, tag=RESIDUAL_TAG)]
    return ops


def _fp8_band_ops(core: Op, square_flops: float, fp8: str) -> list[Op]:
    """A sliding-window layer's fused attention in FP8 (``fp8``: the layout's ``attention_fp8``): the forward
    keeps its band (``core``, forward only), the backward computes the whole causal square, ``square_flops`` (the
    forward FLOPs of a causal block of ``core.block_seq`` keys), at cuDNN's FP8 band-backward rate (``kernels.toml
    [attention.<table>.fp8_band_backward]``: its time grows as the square of the length, the BF16 band's as the
    length)."""
    forward = replace(core, passes="forward")
    backward = replace(core, name="core_attention_fp8_grad", flops=square_flops, window=0.0, passes="backward",
                       fp8_attention=fp8, fp8_band=(core.flops, core.window))
    return [forward, backward]


ATTENTION_BIAS_MOVES = ((2.0, 1), (1.0, 1))
"""Megatron-Core's unfused bias-dropout-add of the attention output projection's bias, as ``((activation
elements moved per output element, kernels) forward, (..., ...) backward)``, beyond the residual add that every
model's layer runs (``residual``). ``linear_proj`` is built with ``skip_bias_add=True`` and hands its bias to
``self_attn_bda``; with ``bias_dropout_fusion = False`` (Megatron-Bridge@067f987d ``gpt_oss_bridge.py``; Megatron-Core
requires it when the experts carry biases: ``TEGroupedMLP.__init__`` asserts "bias_dropout_fusion is not supported
in TEGroupedMLP when add_bias_linear=True", NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/moe/experts.py``)
that is ``_bias_dropout_add_func`` (``megatron/core/fusions/fused_bias_dropout.py``): ``x = x + bias`` (read,
write: 2, one kernel), ``dropout`` at ``hidden_dropout = 0`` (returns its input: PyTorch ``_dropout_impl``, ``if
(p == 0 || !train ...) return input``, ``aten/src/ATen/native/Dropout.cpp``), then ``residual + out`` (the
fused kernel's three moves, already ``residual``). Backward: the add passes the gradient on, and the bias's
gradient sums it over the tokens (read: 1, one kernel). The MoE layer's ``mlp_bda`` has no bias (the experts add
theirs): the same three moves as the fused kernel, nothing more."""


def _attention_bias_ops(model: ModelSpec, lay: ParallelLayout, elems: float) -> list[Op]:
    """The eager add of the attention output projection's bias over ``elems`` output elements (one
    micro-batch, one GPU, after the sequence-parallel scatter), forward and backward apart, at HBM rate
    (:data:`ATTENTION_BIAS_MOVES`); none without the bias or where the GEMM adds it (the layout's
    ``attention_bias_eager``)."""
    if not (model.attention.out_bias and lay.attention_bias_eager):
        return []
    (fwd, k_f), (bwd, k_b) = ATTENTION_BIAS_MOVES
    return [Op("attention_bias", "attention", "kernel", 0.0, fwd * ACT * elems, launches=float(k_f),
               passes="forward"),
            Op("attention_bias_grad", "attention", "kernel", 0.0, bwd * ACT * elems, launches=float(k_b),
               passes="backward")]


ROPE_UNFUSED_MOVES = ((12.0, 12), (14.0, 7))
"""Megatron-Core's unfused RoPE (``_apply_rotary_pos_emb_bshd``, NVIDIA/Megatron-LM@d98e8a64
``megatron/core/models/common/embeddings/rope_utils.py``), run for Q and for K apart, as ``((activation elements
moved per element of the tensor, kernels per tensor) forward, (..., ...) backward)``. Forward:
``t * cos_`` (read, write), ``_rotate_half``'s ``-x2`` (half the elements read and written) and its ``cat``
(read, write), ``* sin_`` (read, write), the sum (two read, one written) and the closing ``torch.cat((t,
t_pass))`` with ``t_pass`` empty (read, write): 12; kernels: those 6 and ``(cos(freqs) * mscale).to(dtype)`` and
the same for ``sin`` on the small ``[s, 1, 1, d]`` table (6 more, bytes not counted). Backward (autograd):
``grad * sin_`` (2), the negation's gradient (1), ``chunk``'s backward concatenating the halves' gradients (2),
``grad * cos_`` (2), and the sum of the two paths into ``t`` (two read, one written, 3); and the empty
``t_pass = t[..., rot_dim:]``, a slice (``t[..., :rot_dim]`` over the whole width is ``t`` itself: ATen
``applySlice`` returns ``self``), whose backward ``slice_backward`` fills a zero tensor of ``t``'s full size
(``at::zeros(input_sizes)``, 1 written; its ``copy_`` of the empty gradient moves nothing) that autograd adds to
``t``'s gradient (3): 14, in 7 kernels (the ``cat``s' backwards are views; rev37). Megatron-Core takes this
path when ``mscale`` (YaRN's concentration factor) is not 1: "mscale ... is not supported by TE's fused RoPE.
Using unfused implementation" (``apply_rotary_pos_emb``, since NVIDIA/Megatron-LM@98739581 "Fixes for
gpt-oss", 2025-11-22); Megatron-Bridge turns ``apply_rope_fusion`` off for any ``position_embedding_type`` but
``rope`` (NVIDIA-NeMo/Megatron-Bridge@067f987d ``utils/fusions.py`` ``validate_rope_fusion_compatibility``, since
07b106fe, 2025-10-28; gpt-oss's is ``yarn``, ``gpt_oss_bridge.py``). The fused kernel (Transformer Engine) reads
and writes once: 2 moves."""


def _rope_ops(model: ModelSpec, lay: ParallelLayout, elems: float) -> list[Op]:
    """The rotary embedding of ``elems`` Q and K elements (one micro-batch, one GPU): Transformer Engine's fused
    kernel (one read and write; its backward twice that), or, where the layout's ``rope_kernel`` is
    Megatron-Core's and the model's rotary has a concentration factor, Megatron-Core's unfused path
    (:data:`ROPE_UNFUSED_MOVES`, Q and K apart)."""
    if lay.rope_kernel == "megatron" and model.attention.rope_concentration != 1.0:
        (fwd, k_f), (bwd, k_b) = ROPE_UNFUSED_MOVES
        return [Op("rope_unfused", "attention", "kernel", 0.0, fwd * ACT * elems, launches=2.0 * k_f,
                   passes="forward"),
                Op("rope_unfused_grad", "attention", "kernel", 0.0, bwd * ACT * elems, launches=2.0 * k_b,
                   passes="backward")]
    return [_mem("rope", "attention", 2 * ACT * elems)]


def _cp_attention_ops(s: float, lay: ParallelLayout, flops: float, io_bytes: float, head_dim: float,
                      q_elems: float, kv_elems: float) -> list[Op]:
    """The fused attention of one layer under context parallelism (:mod:`topo.training.ring_attention`): its
    ``flops`` shared over the exchange's kernels by their query-key pairs, each at its block's rate and with its
    own launches; the ring's merge kernels at HBM rate."""
    calls = cp_attention_calls(s, lay.cp, lay.cp_comm_type)
    pairs = sum(c.pairs for c in calls)
    ops = [Op(f"core_attention_{c.name}", "core_attn", "attention", flops * c.pairs / pairs,
              io_bytes * c.pairs / pairs, launches=float(c.launches), head_dim=head_dim, block_seq=c.block,
              causal=c.causal) for c in calls]
    if lay.cp_comm_type == "p2p":
        fwd, bwd, k_fwd, k_bwd = p2p_merge_bytes(lay.cp, q_elems, kv_elems, ACT)
        ops += [Op("cp_merge", "core_attn", "kernel", 0.0, fwd, launches=float(k_fwd), passes="forward"),
                Op("cp_grad_accumulate", "core_attn", "kernel", 0.0, bwd, launches=float(k_bwd), passes="backward")]
    return ops


def ring_step_s(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute) -> tuple[float, float]:
    """Seconds of one ring-attention step after the diagonal (one kernel, its launch gap included), forward and
    backward, of a full-attention layer on one GPU: what that step's K/V send hides behind (0, 0 without a ring).

    Parameters
    ----------
    model : ModelSpec
        The model (its first full-attention block is timed).
    lay : ParallelLayout
        The layout: a ring needs ``cp > 1``, ``cp_comm_type = "p2p"`` and fused attention.
    gpu : GpuCompute
        The GPU the step runs on.

    Returns
    -------
    tuple of float
        ``(forward_s, backward_s)``.
    """
    if lay.cp <= 1 or lay.cp_comm_type != "p2p" or not lay.flash_attention:
        return 0.0, 0.0
    op = next(o for o in _attention_ops(model, lay) if o.name == "core_attention_ring_steps")
    per = max(1.0, op.launches)
    # the launch gap :func:`block_time` charges the same op of an attention block (captured by "attn")
    cap = captured(replace(op, graph=_graph_part(Block.ATTENTION, op)), lay.cuda_graph_scope)
    return (op_time_s(op, gpu, lay.precision, graphed=cap, cudnn=lay.cudnn_version) / per,
            op_time_s(op, gpu, lay.precision, backward=True, graphed=cap, cudnn=lay.cudnn_version) / per)


def _mlp_ops(model: ModelSpec, lay: ParallelLayout, ffn: float, module: str, T: float, T_sp: float, split: int,
             groups: float = 1.0, norm: bool = True, m_sd: float = 0.0, width: int | None = None) -> list[Op]:
    h = width or model.hidden  # the width fc1 takes and fc2 gives: a LatentMoE's routed experts the latent's
    f = ffn / split
    up = model.fc1_width_factor * f
    act_bytes = (6 if model.mlp == "swiglu" else 4) * T * f * groups
    ops = [_mem("norm", "layernorm", 4 * T_sp * h)] if norm else []
    grouped = module == "moe"
    packed = lay.moe_grouped_gemm if grouped else True
    # how the grouped experts' GEMMs are issued (:mod:`.grouped_gemm`): Transformer Engine's grouped linear
    # launches one GEMM per local expert (fc1, fc2; twice backward), the fused grouped MLP one kernel a pass; FP8
    # quantisations per expert are counted by kernels_launched
    path = lay.moe_expert_kernels if (grouped and packed) else ""
    per = groups if (grouped and path != "fused_mlp") else 1.0
    # a dense MLP's and the shared experts' TP exchanges (a TP block each: :func:`topo.training.step._tp_traffic`);
    # routed experts gather over ETP in the token dispatcher, no userbuffers overlap
    tpo = module in ("mlp", "shared_experts")
    ops += [_gemm("fc1", module, T, up, h, groups, grouped=grouped, launches=per, packed=packed, tag="mlp_wi",
                  tp_role="ag" if tpo else "", m_sd=m_sd, expert_kernels=path, norm_amax=norm and module == "mlp")]
    if path != "fused_mlp":  # the fused grouped MLP runs the activation (a GLU or the squared ReLU) in fc1's
        # epilogue and its backward in fc2's dgrad kernel (:mod:`.grouped_gemm`)
        ops.append(_mem("activation", module + "_act", act_bytes))
    ops.append(_gemm("fc2", module, T, h, f, groups, grouped=grouped, launches=per, packed=packed,
                     tp_role="rs" if tpo else "", m_sd=m_sd, expert_kernels=path))
    if norm:
        ops.append(_mem("residual", "layernorm", (6 + (1 if model.dropout else 0)) * T_sp * h, tag=RESIDUAL_TAG))
    return ops


def expert_rows(model: ModelSpec, lay: ParallelLayout) -> float:
    """Rows of each local expert's GEMMs on the busiest expert rank, per micro-batch.

    The rank's own tokens (``b s / (cp tp)``) go to ``top-k`` experts each; every expert rank receives, on average,
    ``ep x etp x tokens x top-k / experts`` rows per local expert (the all-to-all over ``ep``, then the gather over
    ``etp``). Dropless routing: the busiest rank carries :func:`busiest_rank_load` x the mean; a capacity factor ``c``
    pads every expert to ``c`` x the mean (static shapes: no rank waits for another)."""
    T, _, _ = _tokens(model, lay)
    m = model.moe
    cap = expert_capacity(model, lay)
    if cap is not None:  # every rank of the EP and ETP groups sends each expert its capacity
        return lay.ep * lay.expert_tp * cap
    return lay.ep * lay.expert_tp * (T / lay.tp) * m.active_experts / m.experts * busiest_rank_load(model, lay)


def busiest_rank_load(model: ModelSpec, lay: ParallelLayout) -> float:
    """The busiest expert rank's dropless load over the mean, the one factor of its expert GEMMs and of the
    all-to-all that waits for it.

    At most the layout's ``moe_expert_rank_capacity_factor`` (HybridEP's static rank budget of ``tokens x top-k x
    factor`` rows: it drops the rows beyond it; Megatron-Core's runner then reruns the step unpadded, which is not
    priced). The layout's ``moe_imbalance`` when set (the user's override); 1 under the ``consecutive`` benchmark gate
    (token ``t`` to experts ``(t k + i) mod E``: every expert the same count) or one EP rank; otherwise the
    expected maximum over the ``ep`` ranks of a uniform router's load of the ``ep x etp x b s / (cp tp)`` tokens
    entering the EP group (:func:`topo.training.router_load.uniform_max_over_mean`): exact for forced balancing,
    a floor for a trained router.

    Parameters
    ----------
    model : ModelSpec
        A model with experts.
    lay : ParallelLayout
        The layout (``ep``, ``expert_tp``, ``moe_routing``, ``moe_imbalance``).

    Returns
    -------
    float
        ``>= 1``.
    """
    if lay.moe_imbalance is not None:
        load = lay.moe_imbalance
    elif lay.moe_routing == "consecutive" or lay.ep <= 1:
        load = 1.0
    else:
        m = model.moe
        load = uniform_max_over_mean(_ep_group_tokens(model, lay), m.active_experts, m.experts, lay.ep)
    budget = lay.moe_expert_rank_capacity_factor
    return load if budget is None else min(load, budget)  # rows beyond the rank budget are dropped


def _ep_group_tokens(model: ModelSpec, lay: ParallelLayout) -> float:
    """Tokens entering one EP group's dispatch: every rank's own ``b s / (cp tp)``, over ``ep x etp`` ranks."""
    T, _, _ = _tokens(model, lay)
    return lay.ep * lay.expert_tp * T / lay.tp


def expert_rows_sd(model: ModelSpec, lay: ParallelLayout) -> float:
    """Spread (standard deviation) of one local expert's rows under a uniform dropless router, which its grouped
    GEMM's row tiles take in expectation; 0 where the counts are fixed: padded to capacity, the ``consecutive``
    gate, or a ``moe_imbalance`` the layout sets (the user's load, taken as exact). One EP rank holds every expert,
    whose counts still vary about their mean (the rank's total fixed: ``B = E``).

    Parameters
    ----------
    model : ModelSpec
        A model with experts.
    lay : ParallelLayout
        The layout.

    Returns
    -------
    float
        Rows (:func:`topo.training.router_load.uniform_expert_sd` of the busiest rank's rows per expert).
    """
    if (lay.moe_imbalance is not None or lay.moe_routing == "consecutive"
            or expert_capacity(model, lay) is not None):
        return 0.0
    m = model.moe
    return uniform_expert_sd(expert_rows(model, lay), m.experts // lay.ep, m.active_experts, m.experts)


def expert_capacity(model: ModelSpec, lay: ParallelLayout) -> float | None:
    """Rows one rank sends each expert when the router drops and pads to capacity; None when dropless.

    Megatron-Core's ``get_capacity`` over the rank's own tokens (``b s / (cp tp)``, sequence-parallel):
    ``ceil(tokens x top-k / experts x capacity_factor)`` (NVIDIA/Megatron-LM@ff45bd42
    megatron/core/transformer/moe/moe_utils.py ``get_capacity``); the all-to-all dispatcher then sends
    ``capacity x experts`` rows and each local expert receives ``capacity x etp x ep`` of them
    (token_dispatcher.py ``MoEAlltoAllTokenDispatcher.preprocess``, ``drop_and_pad``)."""
    if lay.moe_capacity_factor is None:
        return None
    T, _, _ = _tokens(model, lay)
    m = model.moe
    return float(math.ceil((T / lay.tp) * m.active_experts / m.experts * lay.moe_capacity_factor))


def _moe_ops(model: ModelSpec, lay: ParallelLayout) -> list[Op]:
    T, T_sp, _ = _tokens(model, lay)
    m, h, w = model.moe, model.hidden, model.moe_width
    etp, ep = lay.expert_tp, lay.ep
    t_in = T / lay.tp  # tokens entering the MoE block on this GPU (after the sequence-parallel scatter)
    rows = expert_rows(model, lay)
    local = m.experts / ep
    routed = ACT * t_in * m.active_experts * etp * w  # the routed copies of this rank's tokens
    load = rows / (ep * etp * t_in * m.active_experts / m.experts)
    if lay.moe_routing == "consecutive":  # the benchmark gate computes no scores: no GEMM, no top-k, no backward
        router = [Op("router_fake", "moe", "kernel", 0.0, FAKE_GATE_BYTES * t_in * m.active_experts,
                     launches=FAKE_GATE_KERNELS, passes="forward")]
    else:
        router = [_gemm("router", "moe", t_in, m.experts, h, linear=False),
                  # fp32 logits: softmax, top-k, the auxiliary load-balancing terms (read and write)
                  _mem("router_topk", "moe", 4 * 3 * t_in * m.experts, launches=_router_kernels(m.router, lay) - 1)]
    if lay.moe_routing != "consecutive":
        router += _capacity_ops(model, lay, t_in)
    ops = [_mem("norm", "layernorm", 4 * T_sp * h), *router, *latent_proj_ops(model, t_in)[:1],
           *_alltoall_preprocess_ops(model, lay, t_in),
           *_permute_ops(lay, _permute_bytes(model, lay, t_in, routed, load), sorts_by_local_expert(model, lay))]
    ops += fp8_padding_ops(model, lay, rows, local)
    ops += _mlp_ops(model, lay, m.expert_ffn_hidden, "moe", rows, 0, etp, groups=local, norm=False,
                    m_sd=expert_rows_sd(model, lay), width=w)
    up = model.fc1_width_factor * m.expert_ffn_hidden / etp  # fc1's output width
    if m.glu_clamp is not None and lay.expert_clamp_eager:
        ops += _expert_clamp_ops(rows * local * up)
    if m.expert_bias:
        ops += _expert_bias_ops(lay.expert_bias_eager, rows * local, up, w, local, _probs_fp32(lay))
    ops += latent_proj_ops(model, t_in)[1:]
    if m.shared_experts:
        ops += _mlp_ops(model, lay, m.shared_experts * m.expert_ffn_hidden, "shared_experts", T, T_sp, lay.tp,
                        norm=False)
    ops.append(_mem("residual", "layernorm", 6 * T_sp * h, tag=RESIDUAL_TAG))
    return ops


def latent_proj_ops(model: ModelSpec, t_in: float) -> list[Op]:
    """A LatentMoE block's two projections on the rank's own ``t_in`` tokens: ``fc1_latent_proj`` (``hidden ->
    latent``, in ``preprocess``, after the router and before the dispatch) and ``fc2_latent_proj`` (``latent ->
    hidden``, in ``postprocess``, after the combine), dense linears whose weights every TP rank holds whole
    (``parallel_mode="duplicated"``, so no TP collective: each rank projects its own sequence-parallel tokens);
    NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/moe_layer.py lines 266-304, 489-491 and 591-592.
    None without a latent.

    Parameters
    ----------
    model : ModelSpec
        The model (hidden size and :attr:`.MoeSpec.latent_size`).
    t_in : float
        Tokens entering the MoE block on this GPU, per micro-batch.

    Returns
    -------
    list of Op
        ``[fc1_latent_proj, fc2_latent_proj]`` or ``[]``.
    """
    lat = model.moe.latent_size
    if lat is None:
        return []
    return [_gemm("fc1_latent_proj", "moe", t_in, lat, model.hidden),
            _gemm("fc2_latent_proj", "moe", t_in, model.hidden, lat)]


EXPERT_BIAS_MOVES = {"weighted": ((6.0, 0.0), (8.0, 0.0)), "weighted_fp32": ((2.0, 6.0), (4.0, 8.0)),
                     "plain": ((4.0, 0.0), (3.0, 0.0))}
"""Elements moved per element of the experts' output by an eager per-expert bias add, ``(forward, backward)``,
each ``(activation-dtype elements, FP32 elements)``
(``torch.cat([t + b * p for t, b, p in zip(torch.split(out, tokens_per_expert), bias, probs)]).to(out.dtype)``:
Megatron-Core's ``TEGroupedMLP._apply_bias``, NVIDIA/Megatron-LM@a329dd6d "Enable bias in expert mlp [gpt-oss 5/5]"
and @d98e8a64 ``megatron/core/transformer/moe/experts.py``; NeMo AutoModel's ``GroupedExpertsDeepEP._apply_bias``,
Automodel@ce005dd ``nemo_automodel/components/moe/layers.py``). ``weighted`` (the routing probability times the
bias, probabilities in the activations' dtype): forward, ``b * p`` writes its product, the add reads two and writes
one, ``cat`` reads and writes one (6); backward, autograd's ``cat`` and add pass the gradient on as views, ``mul``'s
backward forms ``grad * p`` (read, write) and sums it over the rows for the bias (read), and ``grad * b`` (read,
write) summed over the width for the probability (read), and ``torch.split``'s backward concatenates the experts'
gradient slices into the output's gradient (PyTorch ``split_with_sizes_backward``: ``at::cat``; read, write) (8).
``weighted_fp32``: the same with FP32 probabilities, as the flex dispatcher hands them on (DeepEP and HybridEP
take FP32 probabilities only and Megatron-Core casts them, NVIDIA/Megatron-LM@d98e8a64
``megatron/core/transformer/moe/token_dispatcher.py`` ``_DeepepManager.dispatch`` and ``_HybridEPManager.dispatch``:
"DeepEP only supports float32 probs"; AutoModel's copy of that dispatcher, Automodel@ce005dd
``components/moe/megatron/token_dispatcher.py``, likewise): ``b * p`` promotes to FP32, so the product, the sum
and the ``cat`` are FP32, and the final ``.to(out.dtype)`` is a cast. Forward: ``b * p`` writes 1 FP32, the add
reads ``t`` (1 activation) and the product (1 FP32) and writes 1 FP32, ``cat`` 2 FP32, the cast reads 1 FP32 and
writes 1 activation (2 + 6); backward: the cast's backward widens the output's gradient (1 activation read, 1 FP32
written), the add's gradient for ``t`` is cast back to ``t``'s dtype by autograd's engine
(``validate_outputs``: 1 FP32 read, 1 activation written), ``mul``'s four moves and two sums are FP32 (6), and the
split's ``cat`` is in the activations' dtype (2) (4 + 8). ``plain`` (``t + b``, both in the activations' dtype):
forward, the add and ``cat`` read and write one each (4); backward, the bias's gradient, the rows' sum of the
gradient (read), and the split's ``cat`` (read, write) (3)."""
EXPERT_BIAS_KERNELS = {"weighted": ((2, 1), (4, 2)), "weighted_fp32": ((2, 2), (6, 3)), "plain": ((1, 1), (1, 1))}
"""Kernels of an eager per-expert bias add (forward, backward), each ``(per local expert, per add)``:
``weighted``, forward ``mul`` and add per expert and one ``cat``; backward the two gradient products and their
two sums per expert and the ``cat`` of each ``torch.split`` (the output's and the probabilities');
``weighted_fp32``, forward also the final cast; backward also the cast of the output's gradient to FP32 (per add),
and per expert the cast of ``t``'s gradient and of the bias's summed gradient to the activations' dtype;
``plain``, forward the add per expert and one ``cat``, backward the bias's sum per expert and the split's ``cat``."""
EXPERT_CLAMP_MOVES = ((4.0, 0.0, 3), (5.5, 4.0, 9))
"""Megatron-Core's eager clamp of the experts' fc1 output before its fused quick-GeGLU
(``weighted_bias_quick_geglu_impl`` with ``clamp_value``, NVIDIA/Megatron-LM@2e29a5e1 "Add quick geglu activation
for gpt-oss [gpt-oss 4/5]", unchanged at @d98e8a64 ``megatron/core/fusions/fused_bias_geglu.py``: ``x_glu,
x_linear = input.chunk(2, -1)``, ``torch.cat((x_glu.clamp(max=v), x_linear.clamp(-v, v)), -1)``, outside the
``jit_fuser`` functions), per element of fc1's output, as ``(activation elements moved, 1-byte mask elements
moved, kernels)`` forward and backward. Forward: each half clamped (read, write: half the elements each) and
concatenated (read, write): 4 moves, 3 kernels. Backward (PyTorch ``clamp_backward``,
pytorch/pytorch ``torch/csrc/autograd/FunctionsManual.cpp``): the gate half (max only) ``where(self <= max,
grad, 0)``: the compare reads ``self`` and writes a mask, ``where`` reads the mask and the gradient and writes
one; the linear half ``where((self >= min).logical_and_(self <= max), grad, 0)``: two compares, the in-place
``logical_and_`` (two masks read, one written) and ``where``; each with a ``scalar_tensor`` zero (a kernel);
then ``chunk``'s backward concatenates the halves' gradients (read, write). Per element: activation moves
(3 + 4) / 2 + 2 = 5.5, mask moves (2 + 6) / 2 = 4; kernels 3 + 5 + 1 = 9. Under ``recompute_modules`` ``moe_act``
the forward runs again (module ``moe_act``)."""
FP32 = 4  # bytes per FP32 element


def _expert_clamp_ops(elems: float) -> list[Op]:
    """The eager clamp of ``elems`` elements of the experts' fc1 output (the rank's expert rows times fc1's
    width), forward and backward apart, at HBM rate (:data:`EXPERT_CLAMP_MOVES`); one pass over all the rank's
    experts' rows (no per-expert kernels)."""
    ops = []
    for suffix, (act, mask, kernels), passes in zip(("", "_grad"), EXPERT_CLAMP_MOVES, ("forward", "backward")):
        ops.append(Op(f"expert_clamp{suffix}", "moe_act", "kernel", 0.0, (ACT * act + mask) * elems,
                      launches=float(kernels), passes=passes))
    return ops
FAKE_GATE_KERNELS = 6
FAKE_GATE_BYTES = 58.0
"""NeMo AutoModel's ``FakeBalancedGate`` (its benchmark configs' ``fake_balanced_gate: true``; the layout's
``moe_routing = "consecutive"``), per token and routed expert (Automodel@08a48f76
``nemo_automodel/components/moe/layers.py``, ``noise = 0``): ``torch.ones(n, k)`` (FP32, 4 written), ``/ k``
(4 read, 4 written), ``torch.arange(n k)`` (int64, 8 written), ``% E`` and ``+ skip_first_n_experts`` (8 read, 8
written each) and ``.type_as(x)`` (4 read, 2 written): 6 kernels, 58 bytes. No router GEMM, no softmax or top-k,
and no backward: the weights are constants."""
def _expert_bias_ops(eager: str, rows: float, up: float, h: float, local: float, probs_fp32: bool) -> list[Op]:
    """The eager bias adds of an MoE block's experts (``rows``: the rank's expert rows over its ``local``
    experts; ``up``: fc1's output width, ``h``: fc2's), forward and backward apart, at HBM rate
    (:data:`EXPERT_BIAS_MOVES`: :data:`ACT`-byte and :data:`FP32` elements; kernels :data:`EXPERT_BIAS_KERNELS`).
    ``eager``: the layout's ``expert_bias_eager``; ``probs_fp32``: the routing probabilities arrive in FP32 (the
    flex dispatcher), which promotes the weighted add."""
    weighted = "weighted_fp32" if probs_fp32 else "weighted"
    adds = {"fc2": ((weighted, h),), "fc1_fc2": (("plain", up), (weighted, h)), "none": ()}[eager]
    ops = []
    for kind, width in adds:
        (fwd, bwd), kernels = EXPERT_BIAS_MOVES[kind], EXPERT_BIAS_KERNELS[kind]
        for suffix, (act, fp32), (per_expert, per_add), passes in (("", fwd, kernels[0], "forward"),
                                                                    ("_grad", bwd, kernels[1], "backward")):
            nbytes = (ACT * act + FP32 * fp32) * rows * width
            ops.append(Op(f"expert_bias_{kind}{suffix}", "moe", "kernel", 0.0, nbytes,
                          launches=float(per_expert * local + per_add), passes=passes))
    return ops


FP8_PADDING_MOVES = (4.0, 2.0)
"""Elements Transformer Engine's FP8 padding around a grouped expert MLP moves per expert row in a pass, as
``(activation elements per hidden unit, probability elements)`` (``kernels.toml`` ``[launch] fp8_padding_*``).
Forward: ``Fp8Padding`` copies the permuted hidden states into the padded buffer (read, write) and the routing
probabilities alike (read, write), ``Fp8Unpadding`` copies fc2's output back (read, write): 4 per row and hidden
unit, 2 per row. Backward: each copy's gradient is the reverse copy (the output gradient padded, the input's and
the probabilities' gradients unpadded): the same (NVIDIA/TransformerEngine@d0067d0da
``transformer_engine/pytorch/module/fp8_padding.py`` ``_Fp8Padding.forward`` / ``backward``). The padding rows
themselves, under ``align - 1`` a local expert, are not counted (under 0.4% of 4,096 rows)."""


def fp8_padding_ops(model: ModelSpec, lay: ParallelLayout, rows: float, local: float) -> list[Op]:
    """The FP8 padding copies of an MoE block's grouped experts (``rows`` per local expert, ``local`` experts on
    the rank), forward and backward apart, at HBM rate (:data:`FP8_PADDING_MOVES`); none where the counts arrive
    aligned (:func:`fp8_padding_copies`).

    Parameters
    ----------
    model : ModelSpec
        The model (its hidden size).
    lay : ParallelLayout
        The layout (precision, recipe, dispatcher, aligned counts).
    rows, local : float
        Rows of each local expert on the busiest rank (:func:`expert_rows`) and the local experts.

    Returns
    -------
    list of Op
        ``fp8_padding`` (forward) and ``fp8_padding_grad`` (backward), or none.
    """
    if not fp8_padding_copies(model, lay):
        return []
    _, k_fwd, k_bwd = fp8_padding(lay.fp8_recipe)
    act, probs = FP8_PADDING_MOVES
    nbytes = (ACT * act * model.moe_width + (FP32 if _probs_fp32(lay) else ACT) * probs) * rows * local
    return [Op("fp8_padding", "moe", "kernel", 0.0, nbytes, launches=k_fwd, passes="forward"),
            Op("fp8_padding_grad", "moe", "kernel", 0.0, nbytes, launches=k_bwd, passes="backward")]


def fp8_padding_copies(model: ModelSpec, lay: ParallelLayout) -> bool:
    """Whether Megatron-Core's grouped experts copy their rows to pad each expert's count to the FP8 alignment.

    ``TEGroupedMLP`` pads whenever FP8 is on; Transformer Engine's ``Fp8Padding`` copies unless every count is
    already a multiple of the alignment (``kernels.toml`` ``[launch] fp8_padding_source``). Counts arrive aligned
    when the router or the dispatch pads them (``moe_counts_aligned``), and always under HybridEP; a dropless
    router's counts (learned, or Megatron-Core's forced balancing from random logits) are multiples only by chance,
    which is not counted; a static count (capacity factor, consecutive routing) is checked. ``SequentialMLP``
    (``moe_grouped_gemm`` off) is not modelled here.

    Parameters
    ----------
    model : ModelSpec
        The model (an MoE one, or none copy).
    lay : ParallelLayout
        The layout (precision, recipe, grouped GEMM, dispatcher, capacity factor, routing, aligned counts).

    Returns
    -------
    bool
        True where the padding copies run.
    """
    if lay.precision != "fp8" or model.moe is None or not lay.moe_grouped_gemm or lay.moe_counts_aligned:
        return False
    if lay.ep_dispatcher == "deepep" and lay.ep_flex_backend == "hybridep":
        return False
    if lay.moe_capacity_factor is None and lay.moe_routing != "consecutive":
        return True
    align, _, _ = fp8_padding(lay.fp8_recipe)
    return expert_rows(model, lay) % align != 0


def _probs_fp32(lay: ParallelLayout) -> bool:
    """Whether the routing probabilities reach the experts in FP32: under the flex dispatcher (``deepep``: DeepEP
    and HybridEP cast them, :data:`EXPERT_BIAS_MOVES`); under the all-to-all dispatcher they keep the router's
    dtype, the activations' when ``moe_router_dtype`` is unset (Megatron-Core's default; Megatron-Bridge@067f987d
    ``models/gpt_oss/gpt_oss_bridge.py`` leaves it unset)."""
    return lay.ep_dispatcher == "deepep"


def _permute_bytes(model: ModelSpec, lay: ParallelLayout, t_in: float, routed: float, load: float) -> float:
    """Bytes the permutation and un-permutation of one MoE block's tokens move, forward.

    Megatron-Core's all-to-all dispatcher (:func:`_alltoall_permute_bytes`): read the rank's tokens, write their
    routed copies (and the reverse), then with more than one local expert sort the rows received by local expert
    and back (read + write each way). The flex
    dispatcher (``deepep``: DeepEP / HybridEP) sends each token once per destination rank with no global
    permutation (NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization@1d9edcf8 sec. 2.1.1;
    ``MoEFlexTokenDispatcher.get_permuted_hidden_states_by_experts``): the rank reads the tokens it received (one
    copy per token and rank) and writes its local experts' rows, and the reverse."""
    h, k = model.moe_width, model.moe.active_experts  # the routed tokens' width (a LatentMoE's latent)
    if lay.ep_dispatcher != "deepep" or lay.ep == 1:
        return _alltoall_permute_bytes(model, lay, t_in, routed, load)
    dest = rank_destinations(lay.moe_routing, model.moe.experts, k, lay.ep)  # as the all-to-all routes them
    received = ACT * t_in * lay.expert_tp * h * dest * load
    return 2 * (received + routed * load)


def sorts_by_local_expert(model: ModelSpec, lay: ParallelLayout) -> bool:
    """Whether the all-to-all dispatcher's permutation 2 runs: the rank holds more than one local expert
    (``experts / ep > 1``; Megatron-Core ``MoEAlltoAllTokenDispatcher``: ``if self.num_local_experts > 1``). Both
    its bytes (:func:`_alltoall_permute_bytes`) and its launches (:func:`_permute_ops`) read this one test.

    Parameters
    ----------
    model : ModelSpec
        An MoE model.
    lay : ParallelLayout
        The layout (its ``ep``).

    Returns
    -------
    bool
    """
    return model.moe.experts > lay.ep


def _alltoall_permute_bytes(model: ModelSpec, lay: ParallelLayout, t_in: float, routed: float,
                            load: float) -> float:
    """Forward bytes of the all-to-all dispatcher's permutations (NVIDIA/Megatron-LM@d580efc6 core_v0.12.0
    megatron/core/transformer/moe/token_dispatcher.py ``MoEAlltoAllTokenDispatcher``). Permutation 1 (before the
    EP all-to-all) reads the rank's own ``t_in`` tokens and writes their ``t_in x top-k`` routed copies, and
    unpermutation 1 the reverse: the rank's own copies, not the ETP-gathered ones (``routed / etp``). Permutation
    2 (``token_permutation``: ``if self.num_local_experts > 1``), after the ETP all-gather, sorts the
    ``routed x load`` rows received by local expert and back (read + write each way); none with one local
    expert, as :func:`.kernels.permute_kernels`'s ``alltoall_one_local`` launches count."""
    own = routed / lay.expert_tp
    sort = 4 * routed * load if sorts_by_local_expert(model, lay) else 0.0
    return 2 * (ACT * t_in * model.moe_width + own) + sort


CAPACITY_MASK_BYTES = ((22.0, 12.0, 5), (9.0, 0.0, 1))
"""Megatron-Core's token dropping in the router (``apply_router_token_dropping``, ``drop_policy = "probs"``, the
default, NVIDIA/Megatron-LM@23e00ed0 core_v0.14.0 ``megatron/core/transformer/moe/moe_utils.py``) as ``((forward
bytes per router score, per capacity slot, kernels), (backward ...))``, the scores FP32 (as ``router_topk``'s).
Forward: ``torch.topk(probs, k=capacity, dim=0)`` reads the scores (4), ``zeros_like`` writes them (4), ``scatter``
writes each slot's index and value (8 + 4 a slot), ``.bool()`` reads and writes (4 + 1), ``probs * mask`` reads both
and writes (4 + 1 + 4): 22 a score and 12 a slot in 5 kernels (a multi-block top-k may launch more: uncounted).
Backward: only the product has a gradient, ``grad * mask`` (4 + 1 + 4) in one kernel."""


def _capacity_ops(model: ModelSpec, lay: ParallelLayout, t_in: float) -> list[Op]:
    """The router's token dropping under a capacity factor (:data:`CAPACITY_MASK_BYTES`), over the rank's
    ``t_in x experts`` scores and ``capacity x experts`` slots; none for a dropless router."""
    cap = expert_capacity(model, lay)
    if cap is None:
        return []
    scores, slots = t_in * model.moe.experts, cap * model.moe.experts
    (fs, fc, fk), (bs, bc, bk) = CAPACITY_MASK_BYTES
    return [Op("router_capacity", "moe", "kernel", 0.0, fs * scores + fc * slots, launches=fk, passes="forward"),
            Op("router_capacity_grad", "moe", "kernel", 0.0, bs * scores + bc * slots, launches=bk,
               passes="backward")]


def _alltoall_preprocess_ops(model: ModelSpec, lay: ParallelLayout, t_in: float) -> list[Op]:
    """The all-to-all dispatcher's token counts in a dropless MoE block's forward: the preprocess (the tokens per
    expert summed from the bool routing map, ``t_in x experts`` bytes read, then sums and the counts' all-gather
    over the EP group) and the device-to-host copies of the splits that the host waits for before the EP
    all-to-all (:func:`.kernels.alltoall_preprocess_kernels`); none for the flex dispatcher (its fused preprocess
    is in the router's count) or a padded (capacity) router, which needs no counts on the host."""
    if lay.ep_dispatcher != "alltoall" or lay.moe_capacity_factor is not None:
        return []
    k = alltoall_preprocess_kernels(lay.ep * lay.expert_tp > 1)
    return [Op("dispatch_preprocess", "moe", "kernel", 0.0, t_in * model.moe.experts, launches=k["preprocess"],
               passes="forward"),
            Op("dispatch_dtoh", "moe", "kernel", 0.0, 0.0, launches=k["dtoh"], passes="forward")]


def _permute_ops(lay: ParallelLayout, nbytes: float, sorts: bool) -> list[Op]:
    """The permutation and un-permutation of an MoE block's tokens, ``nbytes`` forward (:func:`_permute_bytes`),
    in the launches of the layout's dispatcher (:func:`.kernels.permute_kernels`), and backward
    :func:`.kernels.permute_backward_bytes` times that. Transformer Engine's kernels (the all-to-all dispatcher,
    DeepEP's backend) move rows by index, at the permute kernels' measured rates (:func:`.kernels.permute_s`);
    HybridEP's permutation is its copy out of its registered buffer, at a contiguous kernel's share of HBM: its
    published Torch API time on GB200 (the kernel plus that copy) leaves the copy (topo's bytes) no less than 59%
    of HBM, above the gather rates' 46% (tests/test_training_ep_dispatch.py). HybridEP's kernels are launched from
    C++ inside its dispatch and combine calls (``Op.in_call``), whose host time :func:`ep_calls_host` prices."""
    if lay.ep_dispatcher == "deepep":
        key = lay.ep_flex_backend
    else:
        key = "alltoall" if sorts else "alltoall_one_local"  # sorts: :func:`sorts_by_local_expert`
    fwd, bwd = permute_kernels(key)
    gather = key != "hybridep"
    back = permute_backward_bytes(key)
    return [Op("permute", "moe", "kernel", 0.0, nbytes, launches=fwd, passes="forward", by_index=gather,
               in_call=not gather),
            Op("permute_grad", "moe", "kernel", 0.0, back * nbytes, launches=bwd, passes="backward",
               by_index=gather, in_call=not gather)]


def _router_kernels(router: str, lay: ParallelLayout) -> float:
    """Kernels of the router's forward, its GEMM included (:func:`.kernels.router_kernels`, by the model's
    router configuration): fused or not, and with the flex dispatcher's preprocess fused in; with DeepEP V1 that
    preprocess's kernel, ``get_dispatch_layout``, is launched inside the dispatch call, whose price
    (:func:`ep_calls_host`) holds it, so it is not counted here too."""
    k = router_kernels(router)
    if not lay.moe_router_fusion:
        return k["plain"]
    if lay.ep_dispatcher != "deepep":
        return k["fused"]
    return k["flex_deepep"] if lay.ep_flex_backend == "deepep" else k["flex"]


def _kernel(name, passes, nbytes, dots=(), flops=None, launches=1.0, sm_bound=False, ssd_gradient=False) -> Op:
    return Op(name, "mamba", "kernel", ssd_flops(dots) if flops is None else float(flops), float(nbytes),
              launches=launches, passes=passes, dots=tuple(dots), sm_bound=sm_bound, ssd_gradient=ssd_gradient)


def _mamba_ops(model: ModelSpec, lay: ParallelLayout) -> list[Op]:
    """Megatron-Core's Mamba mixer in training (NVIDIA/Megatron-LM ``megatron/core/ssm/mamba_mixer.py``
    ``forward`` and ``_ssm_training`` @d98e8a64): ``in_proj`` (Transformer Engine's norm + column-parallel
    linear, FP8 when the layout is), a copy of its output to batch-major (``rearrange(...).contiguous()``), the
    causal depthwise convolution with SiLU (causal-conv1d's kernel, recomputed in the backward), the SSD scan
    gated by ``z`` (:mod:`topo.training.ssd`), a copy back to sequence-major, the grouped RMSNorm (mamba_ssm's
    ``layernorm_gated``) and ``out_proj`` (row-parallel linear). The copies, the convolution and the norm move
    their bytes at HBM rate; their backward kernels are listed apart (``passes``).

    ``lay.mamba_mixer == "mamba_ssm"`` (mamba_ssm's ``Mamba2`` and NeMo AutoModel's ``NemotronV3Mamba2Mixer``,
    Automodel@08a48f76 ``components/models/nemotron_v3/layers.py``): batch-major activations, so no copies; the
    scan runs ungated (``z=None``) and the norm kernel gates, forward reading the scan's output and ``z`` and
    writing its output (3 per element of ``d_inner``), backward reading ``dy``, ``x`` and ``z`` and writing ``dx``,
    ``dz`` and the recomputed output that ``out_proj``'s weight gradient takes (6:
    ``MambaSplitConv1dScanCombinedFn.backward``'s ``_layer_norm_bwd(..., z, recompute_output=True)``,
    state-spaces/mamba ``ssd_combined.py``@e9594ce1)."""
    T, T_sp, _ = _tokens(model, lay)
    mb, h, tp = model.mamba, model.hidden, lay.tp
    di, nh = model.mamba_inner / tp, model.mamba_heads / tp
    g = max(1.0, mb.groups / min(tp, mb.groups))
    conv_ch = di + 2 * g * mb.d_state
    zxbcdt = di + conv_ch + nh  # z, x, B, C, dt
    conv_flops = 2.0 * T * conv_ch * mb.conv_kernel
    megatron = lay.mamba_mixer == "megatron"
    # read + write of in_proj's output and of the scan's output (backward: their gradients); a micro-batch of one
    # sequence is already batch-major (.contiguous() copies nothing)
    copies = 2 * ACT * T * (zxbcdt + di) if lay.micro_batch > 1 and megatron else 0.0
    norm_moves = (2, 3) if megatron else (3, 6)  # per element of d_inner, forward and backward (above)
    ops = [_mem("norm", "layernorm", 4 * T_sp * h),
           _gemm("in_proj", "mamba", T, zxbcdt, h, tp_role="ag", norm_amax=True),  # Megatron: "fc1" buffer
           _kernel("copies", "forward", copies, launches=2),
           _kernel("conv1d", "forward", 2 * ACT * T * conv_ch, flops=conv_flops),
           *_ssd_ops(model, lay, T, nh),
           _kernel("norm_out", "forward", norm_moves[0] * ACT * T * di),
           _gemm("out_proj", "mamba", T, h, di, tp_role="rs"),
           _kernel("norm_out_bwd", "backward", norm_moves[1] * ACT * T * di),  # Megatron: reads x, dy; writes dx
           _kernel("copies_bwd", "backward", copies, launches=2),
           _kernel("conv1d_recompute", "backward", 2 * ACT * T * conv_ch, flops=conv_flops),
           _kernel("conv1d_bwd", "backward", 3 * ACT * T * conv_ch, flops=2 * conv_flops),  # x, dy in; dx out
           _mem("residual", "layernorm", 6 * T_sp * h, tag=RESIDUAL_TAG)]
    return [op for op in ops if op.bytes > 0 or op.flops > 0]


def _ssd_ops(model: ModelSpec, lay: ParallelLayout, T: float, nh: float) -> list[Op]:
    """Mamba-2's SSD on this GPU (``nh`` local heads, ``groups / tp`` local groups, Megatron-Core's TP split):
    the kernels of :func:`topo.training.ssd.ssd_kernels`, forward and backward, chunked per sequence of the
    layout's length (under CP each rank scans whole sequences of its heads: ``mamba_context_parallel.py``'s
    all-to-all, :func:`topo.training.step.mamba_cp_alltoalls`)."""
    mb, tp, s = model.mamba, lay.tp, _tokens(model, lay)[2]
    g = max(1.0, mb.groups / min(tp, mb.groups))
    gated = lay.mamba_mixer == "megatron"  # mamba_ssm's path gates in the norm, not the scan
    return [_kernel(k.name, k.passes, k.bytes, k.dots, launches=k.launches, sm_bound=k.triton,
                    ssd_gradient=k.gradient)
            for k in ssd_kernels(T, nh, g, float(mb.head_dim), float(mb.d_state), float(mb.chunk_size), gated,
                                   seq_len=float(s))]


def block_ops(model: ModelSpec, lay: ParallelLayout, kind: str, generation: str = "") -> list[Op]:
    """Operators of one block of ``kind`` (``*``, ``W``: local attention, ``-``, ``E``, ``M``, or ``embedding`` /
    ``logits``), one micro-batch, one GPU, forward; each with the CUDA-graph part that captures it. Under FSDP2
    (``wgrad_output = "fsdp2"``, ZeRO-3) the block's share of its unit's copies comes first (:func:`_fsdp2_ops`).
    ``generation``: the GPU's, where block-wise FP8 GEMMs convert their scales (``Op.block_convert``)."""
    ops = _fsdp2_ops(model, lay, kind) + _block_ops(model, lay, kind)
    cs = current_scaling(lay)  # every linear layer's casts (the layout's one rule, as the TP amax reduction's)
    named = "delayed" if delayed_scaling(lay) else ("current" if cs else lay.fp8_recipe)  # per tensor by its kind
    own = op_recipes(lay.module_recipes)  # modules at a recipe of their own (:mod:`.module_recipes`)
    hooks = ddp_hooks_run(lay)  # Megatron-Core DDP's per-parameter hooks (:mod:`.grad_hooks`)
    ub = userbuffers_built(model)  # an MLA model's TP linears have no communicator (:func:`.tp_overlap.userbuffers_built`)
    ub_on = userbuffers_on(lay, model)  # the layout runs them through userbuffers
    sp = lay.tp > 1 and bool(lay.sequence_parallel)  # the TP linears gather an operand (:func:`.weight_swizzle.gathered_swizzles`)
    out = []
    for op in ops:
        lin = _linear_gemm(op)
        mine = own.get((op.module, op.name), "") if lin else ""
        recipe = mine or lay.fp8_recipe
        q = lin and lay.precision == "fp8" and recipe != "bf16"  # a quantised linear GEMM
        gathered = op.tp_role if (sp and lin) else ""
        fused = q and op.norm_amax and norm_writes_quantised(mine or named)  # the norm writes it quantised
        out.append(replace(op, graph=_graph_part(kind, op), recipe=mine, current_scaling=cs and lin and not mine,
                           norm_cast=fused, norm_transpose_elem_bytes=gather_transpose_bytes(recipe, generation)
                           if (fused and not gathered) else 0.0,
                           block_scaled=q and recipe in ("mxfp8", "blockwise"), mxfp8=q and recipe == "mxfp8",
                           sp_gather=gathered, sp_ranks=lay.tp if gathered else 1,
                           gather_transpose_elem_bytes=gather_transpose_bytes(recipe, generation)
                           if (q and gathered) else 0.0,
                           block_convert=q and recipe == "blockwise" and converts(generation),
                           fp4_cast=q and recipe == "nvfp4", grad_hooks=hooks and op.kind == "gemm" and op.weights,
                           tp_overlap=op.tp_role if (ub and not op.tp_pair) else "",
                           ub_grad_copy_elem_bytes=ub_grad_output_copy_bytes(lay.te_version, cast_extra_bytes(
                               recipe)[0]) if (q and ub_on and gathered == "rs" and not op.tp_pair) else 0.0))
    return out


def op_precision(op: Op, precision: str, fp8_recipe: str | None) -> tuple[str, str | None]:
    """The precision and FP8 recipe ``op`` runs at under a layout's ``precision`` and ``fp8_recipe``: its own
    where the layout's ``module_recipes`` names its module (``op.recipe``: ``bf16`` runs it unquantised), else the
    layout's; a layer kept in BF16 whole (:func:`bf16_layers`, priced at ``precision = "bf16"``) stays BF16.

    Parameters
    ----------
    op : Op
    precision : str
        The layout's (or its BF16 layer's) ``precision``.
    fp8_recipe : str or None
        The layout's ``fp8_recipe``.

    Returns
    -------
    tuple
        ``(precision, fp8_recipe)`` of the op.
    """
    return module_precision(op.recipe, precision, fp8_recipe)


def _linear_gemm(op: Op) -> bool:
    """Whether ``op`` is a linear layer's GEMM (the operators an FP8 / FP4 recipe casts the inputs of)."""
    return op.kind == "gemm" and op.linear


FSDP_MODULE = "fsdp"
"""The module of FSDP2's copies around a unit's gathers and reductions: not an operator of the layer, so no
recomputation repeats them (the backward's gather has its own copy-out)."""


def _fsdp2_ops(model: ModelSpec, lay: ParallelLayout, kind: str) -> list[Op]:
    """FSDP2's copies one block of ``kind`` carries (:func:`.fsdp2_copies.fsdp2_copies`) as ``kernel`` operators:
    the compute stream's copy-out (and, backward, the reduce's ``chunk_cat`` launch) and the copy-in the host
    launches onto its own stream (``side_stream``)."""
    c = fsdp2_copies(model, lay, kind)
    if c is None:
        return []
    return [Op("fsdp_copy_out", FSDP_MODULE, "kernel", 0.0, c.forward_bytes, launches=c.forward_kernels,
               passes="forward"),
            Op("fsdp_copy_in", FSDP_MODULE, "kernel", 0.0, 0.0, launches=c.forward_side_kernels, passes="forward",
               side_stream=True),
            Op("fsdp_copy_out_bwd", FSDP_MODULE, "kernel", 0.0, c.backward_bytes, launches=c.backward_kernels,
               passes="backward"),
            Op("fsdp_copy_in_bwd", FSDP_MODULE, "kernel", 0.0, 0.0, launches=c.backward_side_kernels,
               passes="backward", side_stream=True)]


def _graph_part(kind: str, op: Op) -> str:
    """Megatron-Core's ``cuda_graph_scope`` part that captures ``op`` of a block of ``kind``: the attention,
    dense MLP or Mamba block whole; of an MoE block the norm, router and shared experts (``moe_router``: the
    static part before the tokens-per-expert sync, Megatron-LM docs/discussions/deepseek-v3-gb200-optimization
    sec. 2.3), the rest only by ``moe`` (token-drop); the embedding and the head only by a full-iteration graph."""
    if kind in ATTENTION_BLOCKS:
        return "attn"
    if kind in (Block.MLP, Block.MAMBA):
        return {Block.MLP: "mlp", Block.MAMBA: "mamba"}[kind]
    if kind == Block.MOE:
        if op.name in ALLTOALL_PREPROCESS_OPS:
            return ALLTOALL_PREPROCESS_OPS[op.name]
        if op.name in LATENT_PROJ_PARTS:
            return LATENT_PROJ_PARTS[op.name]
        static = op.name in MOE_ROUTER_OPS or op.module in SHARED_EXPERT_MODULES
        return "moe_router" if static else "moe"
    return ""


def _block_ops(model: ModelSpec, lay: ParallelLayout, kind: str) -> list[Op]:
    T, T_sp, _ = _tokens(model, lay)
    h, V = model.hidden, model.vocab
    if kind in ATTENTION_BLOCKS:
        return _attention_ops(model, lay, kind)
    if kind == Block.MLP:
        return _mlp_ops(model, lay, model.ffn_hidden, "mlp", T, T_sp, lay.tp)
    if kind == Block.MOE:
        return _moe_ops(model, lay)
    if kind == Block.MAMBA:
        return _mamba_ops(model, lay)
    if kind == "embedding":
        return _embedding_ops(model, lay)
    if kind == "logits":
        head = [_mem("final_norm", "layernorm", 4 * T_sp * h),
                _gemm("logits", "logits", T, V / lay.tp, h, linear=False, tp_role="ag", tp_pair="head")]
        (fwd, k_f), (bwd, k_b) = cross_entropy_moves(lay.cross_entropy)  # bytes a BF16 logit, by implementation
        logits = T * V / lay.tp
        return head + [Op("cross_entropy", "logits", "kernel", 0.0, fwd * logits, launches=k_f, passes="forward"),
                       Op("cross_entropy_bwd", "logits", "kernel", 0.0, bwd * logits, launches=k_b,
                          passes="backward")]
    if kind == "mtp_head":  # DeepSeek-V3 sec. 2.2: look up the next tokens' embeddings (the stage's own copy of
        # the embedding, its weight gradient too), norm them and the hidden states, concatenate (torch.cat: both
        # read, 2h written; its backward hands on views) and project 2h -> h (the module's layer is a unit of its
        # own), then the shared head (NVIDIA/Megatron-LM@7094270c multi_token_prediction.py, forward of
        # MultiTokenPredictionBlock and MultiTokenPredictionLayer)
        return [*_embedding_ops(model, lay), _mem("mtp_norms", "mtp", 2 * 4 * T_sp * h),
                Op("mtp_concat", "mtp", "kernel", 0.0, 4 * ACT * T_sp * h, passes="forward"),
                _gemm("mtp_proj", "mtp", T, h / lay.tp, 2 * h, tp_role="ag", tp_pair="eh_proj"),
                *_block_ops(model, lay, "logits")]
    raise ValueError(f"unknown block kind {kind!r}")


def _embedding_ops(model: ModelSpec, lay: ParallelLayout) -> list[Op]:
    """One embedding lookup of a micro-batch: the lookup, and backward the weight gradient of the rank's vocabulary
    shard (``V / tp`` rows): PyTorch's dense embedding backward zero-fills it in the gradient's dtype and adds the
    ``T`` tokens' rows (``embedding_grad.toml`` ``token_bytes`` an element), then, under Megatron-LM's
    ``main_grad``, its DDP hook adds the whole shard into ``main_grad`` (2 bytes read, ``grad_bytes`` read and
    written); a layout whose gradient is written once (:func:`wgrad_kw`) fills it at ``grad_bytes`` and copies it
    as a weight-gradient GEMM's would be (``grad_copy_bytes``)."""
    T, T_sp, _ = _tokens(model, lay)
    h = model.hidden
    lookup = _mem("embedding", "embedding", 2 * ACT * T_sp * h)
    token_bytes, dense_kernels, add_kernels = embedding_grad_costs()
    kw = wgrad_kw(lay, lookup)
    if kw.get("grad_once"):
        per_row, kernels = kw["grad_bytes"] + kw.get("grad_copy_bytes", 0.0), dense_kernels
    else:
        per_row, kernels = 2 * ACT + 2 * kw["grad_bytes"], dense_kernels + add_kernels
    nbytes = model.vocab / lay.tp * h * per_row + T * h * token_bytes
    return [lookup, Op("embedding_wgrad", "embedding", "kernel", 0.0, nbytes, launches=kernels, passes="backward")]


def op_time_s(op: Op, gpu: GpuCompute, precision: str, backward: bool = False, amax_pass: bool = False,
              graphed: bool = False, fp8_recipe: str | None = None, grad_bytes: float | None = None,
              grad_once: bool = False, grad_copy_bytes: float = 0.0, margins: dict | None = None,
              cudnn: str = "", scale_kernel: bool = False) -> float:
    """Seconds of ``op`` (forward, or its backward) on ``gpu`` at the layout's ``precision``, its kernels' launch
    gaps included (:mod:`topo.training.kernels`: a graph node's gap when ``graphed``, a CUDA graph captures it,
    else an eager launch's); ``amax_pass``: each FP8 cast reads its input once more for the amax, in a kernel of
    its own (the layout's ``fp8_amax_pass``); ``fp8_recipe``: the layout's, which sets an FP8 GEMM's time against
    per-tensor scaling and its quantisation's bytes (:func:`.kernels.fp8_recipe_costs`). A ``kernel`` op takes the
    longer of its products and its bytes, and an SM-bound one no less than :func:`sm_bound_floor_s`.

    ``grad_bytes``: the kept gradient's bytes per parameter, which a weight-gradient GEMM adds its product into
    (None: a new bf16 tensor). Megatron-LM's ``--gradient-accumulation-fusion`` (its default) hands Transformer
    Engine's linear and grouped linear layers ``fuse_wgrad_accumulation``: cuBLAS runs the weight-gradient GEMM
    with ``accumulate`` on ``main_grad`` (FP32, or bf16 with a bf16 gradient buffer), each output element read and
    written at the gradient's bytes (NVIDIA/TransformerEngine ``pytorch/module/grouped_linear.py`` and
    ``linear.py``: ``out=main_grad``, ``accumulate=accumulate_wgrad_into_param_main_grad``). It binds where the
    GEMM's reduction, the tokens, is short against its output, the weight: experts with few rows each.
    ``grad_once``: the weight-gradient GEMM writes a new gradient of ``grad_bytes`` an element instead (no
    accumulation); ``grad_copy_bytes``: bytes per weight-gradient element a memory kernel of the pass moves after
    it (PyTorch FSDP2's copy into the reduce-scatter buffer: :func:`wgrad_kw`).

    ``margins``: SMs a GEMM pass (``fprop``, ``dgrad``, ``wgrad``) runs without, its userbuffers communicator's
    ``set_sm_margin`` (:func:`.tp_overlap.pass_margins`): that pass on :func:`.tp_overlap.margin_kernels`.
    ``cudnn``: the layout's ``cudnn_version``, which a fused attention runs (:func:`.kernels.cudnn_factor`).
    ``scale_kernel``: the layout's ``fp8_scale_inverse_kernel`` (:func:`kernels_launched`)."""
    km = gpu.kernels
    if (op.passes != "both" and backward != (op.passes == "backward")) or op.side_stream:
        return 0.0
    if op.recipe:  # a module at a recipe of its own: per-tensor scaling's amax pass and scale kernel are not its
        precision, fp8_recipe = op_precision(op, precision, fp8_recipe)
        amax_pass = scale_kernel = False
    per = km.launch_gpu_graph_s if (graphed and km.launch_gpu_graph_s is not None) else km.launch_gpu_s
    gap = per * kernels_launched(op, precision, backward, amax_pass, scale_kernel)
    if op.kind in ("kernel", "memory", "attention"):
        return _plain_op_s(op, gpu, backward, cudnn) + gap
    prec = _gemm_precision(op, precision, fp8_recipe)
    fp8 = prec != "bf16"  # FP8, or NVFP4's FP4 (fp8_recipe nvfp4)
    gemms = _gemm_shapes(op)
    passes = ("dgrad", "wgrad") if backward else ("fprop",)
    shapes = tuple(gemms[p] for p in passes)
    ratio = recipe_gemm_ratio(gpu.kernels, fp8_recipe, gpu.generation) if fp8 else 1.0
    t = 0.0
    if op.expert_kernels:  # a grouped pass's launch gaps are its path's (:mod:`.grouped_gemm`), not one a GEMM
        gap -= per * op.launches * len(passes)
    for i, (M, N, K) in enumerate(shapes):
        accumulated = backward and i == 1 and op.weights and grad_bytes is not None  # the weight gradient
        m_sd = op.m_sd if passes[i] != "wgrad" else 0.0  # the weight gradient reduces over the rows: no row tiles
        out = (grad_bytes if grad_once else 2.0 * grad_bytes) if accumulated else 2.0
        kp = margin_kernels(gpu, margins.get(passes[i], 0)) if margins else km
        if op.expert_kernels:
            t += grouped_pass_s(kp, M, N, K, prec, op.groups, op.expert_kernels, per, ratio, out, m_sd)
        else:
            t += ratio * gemm_s(kp, M, N, K, prec, op.groups, op.packed, out_bytes=out, m_sd=m_sd)
        if accumulated and grad_copy_bytes:
            t += memory_s(km, grad_copy_bytes * M * N * op.groups)
    # the MXFP8 weight's scales, block-wise scales converted to MXFP8 (:mod:`.weight_swizzle`)
    t += memory_s(km, swizzle_bytes(op, precision, backward) + gathered_swizzle_bytes(op, precision, backward)
                  + conversion_bytes(op, precision, backward))
    M, _, K = shapes[0]  # the pass's quantised input: X forward (fprop's M x K), dY backward (dgrad's)
    if fp8 and op.epilogue_cast == ("backward" if backward else "forward"):
        return t + gap  # the kernel before this pass wrote its input quantised (fused grouped MLP)
    if fp8:
        t += _input_cast_s(op, gpu, M, K, precision, fp8_recipe, amax_pass, backward)
    return t + gap


def _input_cast_s(op: Op, gpu: GpuCompute, M: float, K: float, precision: str, fp8_recipe: str | None,
                  amax_pass: bool, backward: bool) -> float:
    """Seconds of a quantised GEMM pass's input cast (:func:`op_time_s`): ``M x K`` elements (X forward, dY
    backward), on the rank's shard before a TP all-gather (:attr:`Op.sp_gather`), or the norm's quantised write
    where the norm before it casts (:attr:`Op.norm_cast`); current scaling's amax read and a gathered tensor's
    transpose (:attr:`Op.gather_transpose_elem_bytes`) where they run."""
    km, t = gpu.kernels, 0.0
    gathered = op.sp_gather == ("rs" if backward else "ag")  # this pass's input is all-gathered over TP: cast on
    rows = M / op.sp_ranks if gathered else M  # the rank's shard before the gather (:attr:`Op.sp_gather`)
    if M > 0 and K > 0 and op.norm_cast and not backward:  # the norm wrote it quantised: no cast kernel; its
        # bytes are the norm kernel's, at the norm's rate (kernels.toml [memory.kernel_TBps.norm])
        t += memory_s(km, norm_cast_bytes(op, gpu.generation, fp8_recipe) * rows * K * op.groups, op="norm")
    elif M > 0 and K > 0:
        qb = quantize_bytes(gpu.generation, fp8_recipe, amax_pass,
                            rowwise_only=gathered and op.gather_transpose_elem_bytes > 0)
        t += quantize_s(km, qb * rows * K * op.groups, fp8_recipe, gpu.generation)
    if op.current_scaling and not amax_pass and cast_kind(op, backward) == "current":
        # current scaling's amax kernel reads the input once more (X forward, dY backward; each expert's rows of a
        # grouped GEMM); with amax_pass quantize_bytes counts it, after a norm that computed the amax none
        t += memory_s(km, ACT * rows * K * op.groups)
    if gather_transposes(op, precision, backward):
        t += memory_s(km, op.gather_transpose_elem_bytes * gathered_elements(op))
    if ub_grad_copies(op, precision, backward):  # TE 2.x: the quantised shard copied into userbuffers' buffer
        t += memory_s(km, op.ub_grad_copy_elem_bytes * rows * K * op.groups)
    return t


def ub_grad_copies(op: Op, precision: str, backward: bool) -> float:
    """Copies of ``op``'s quantised output-gradient shard into userbuffers' dgrad all-gather buffer in this pass
    (:attr:`Op.ub_grad_copy_elem_bytes`): one backward, for a quantised linear GEMM whose Transformer Engine makes
    it (2.x); 0 otherwise (forward, 1.x, BF16, a module at a recipe of its own kept in BF16).

    Parameters
    ----------
    op : Op
    precision : str
        The layout's GEMM precision (a module at a recipe of its own reads its own, :func:`op_precision`).
    backward : bool
        The backward pass.

    Returns
    -------
    float
        Copy kernels, 0 or 1.
    """
    if not (backward and op.ub_grad_copy_elem_bytes and op.kind == "gemm" and op.linear):
        return 0.0
    if op.recipe:
        precision, _ = op_precision(op, precision, None)
    return 1.0 if precision == "fp8" else 0.0


def gathered_elements(op: Op) -> float:
    """Elements of GEMM ``op``'s operand all-gathered over TP under sequence parallelism (``op.sp_gather``): the
    input (``ag``, ``m x k``) or the output gradient (``rs``, ``m x n``), the whole gathered tensor; 0 for none."""
    if not op.sp_gather:
        return 0.0
    return op.m * (op.k if op.sp_gather == "ag" else op.n) * op.groups


def gather_transposes(op: Op, precision: str, backward: bool) -> float:
    """Transpose kernels Transformer Engine runs in ``op``'s pass on its all-gathered FP8 operand
    (:attr:`Op.gather_transpose_elem_bytes`): one backward, before the weight-gradient GEMM, for a quantised linear
    GEMM whose recipe and GPU make it (per-tensor on Hopper); 0 otherwise (forward, BF16, a module at a recipe of its
    own)."""
    if not (backward and op.gather_transpose_elem_bytes and op.kind == "gemm" and op.linear):
        return 0.0
    if op.recipe:
        precision, _ = op_precision(op, precision, None)
    return 1.0 if precision == "fp8" else 0.0


def _plain_op_s(op: Op, gpu: GpuCompute, backward: bool, cudnn: str) -> float:
    """A ``kernel``, ``memory`` or ``attention`` op's time without its launch gap (:func:`op_time_s`)."""
    km = gpu.kernels
    if op.kind == "kernel":
        return max(_kernel_body_s(km, op.dots, op.bytes, op.by_index), sm_bound_floor_s(op, km))
    if op.kind == "memory":
        t = (memory_backward_bytes(km, op.name) if backward else 1.0) * memory_s(km, op.bytes, op.name, backward)
        return t + (op.flops / (gpu.peak_bf16_flops * 0.5) if op.flops else 0.0)
    if op.fp8_band and not fp8_backward_published(km.attention_table, op.fp8_attention, op.head_dim):
        op = replace(op, flops=op.fp8_band[0], window=op.fp8_band[1], fp8_attention="")  # the BF16 band
    rate = attention_rate_flops(km, op.head_dim, op.block_seq, op.causal, backward, op.window, cudnn,
                                op.fp8_attention)
    return (ATTENTION_BACKWARD_FLOPS if backward else 1.0) * op.flops / rate


def _kernel_body_s(km: KernelModel, dots: tuple, nbytes: float, by_index: bool = False) -> float:
    """A ``kernel`` op's time without its launch gap: the longer of its products (the tile model, BF16) and its
    bytes through HBM (``by_index``: at the permute kernels' rates, :func:`.kernels.permute_s`)."""
    hbm = permute_s(km, nbytes) if by_index else memory_s(km, nbytes)
    return max(sum(gemm_s(km, m, n, k, "bf16", g) for m, n, k, g in dots), hbm)


@lru_cache(maxsize=16)
def _sm_reference(overrides: tuple = ()) -> KernelModel:
    """The reference GPU's kernel model under the same ``kernels.toml`` overrides as the GPU being priced."""
    return gpu_compute(ssd_sm_reference(), overrides={k: dict(v) for k, v in overrides}).kernels


@lru_cache(maxsize=4096)
def _reference_body_s(dots: tuple, nbytes: float, overrides: tuple = ()) -> float:
    return _kernel_body_s(_sm_reference(overrides), dots, nbytes)


def sm_bound_floor_s(op: Op, km: KernelModel) -> float:
    """The least time of an SM-bound ``kernel`` op (``op.sm_bound``: mamba_ssm's Triton SSD kernels) on the GPU of
    ``km``: its time on the reference GPU (``kernels.toml`` ``[ssd] sm_bound_reference``, H100, under the same
    ``kernels.toml`` overrides as ``km``) times the reference's SM cycles a second over those it runs on here: SMs
    (``km.sms``, fewer beside communication kernels) x the SMs' maximum clock (``km.sm_clock_Hz``, ``gpus.toml``
    ``sm_clock_MHz``: a kernel at a few per cent of tensor peak draws too little power for the power limit to lower
    it; docs/calibration-findings.md section 442). A kernel bound by its SMs' issue and latency hiding
    gains nothing from a faster HBM: on H100 the SSD's forward kernels move their bytes at a third of HBM's rate
    (vLLM PR #27299), and H200 trains a pure Mamba-2 model no faster than H100's SMs would (state-spaces/mamba
    #904). On the reference GPU a backward product kernel (``op.ssd_gradient`` with ``op.dots``) takes no less than
    its products at the measured ``[ssd] backward_products_TFLOPs`` (H100's forward + backward of
    ``mamba_split_conv1d_scan_combined``, the TFLA paper's benchmark: 39 TFLOP/s, a third of the tile model's time
    at that shape). 0 for any other op.

    Parameters
    ----------
    op : Op
        The operator.
    km : KernelModel
        The kernel model of the GPU it runs on.

    Returns
    -------
    float
        Seconds, without the launch gap.
    """
    if not op.sm_bound:
        return 0.0
    if not km.sm_clock_Hz:
        raise ValueError("an SM-bound kernel needs its GPU's SM clock (gpus.toml sm_clock_MHz); this kernel model has "
                         "none")
    ref = _sm_reference(km.overrides)  # its kernel constants as given for this GPU (a fit's candidates, a study's)
    body = _reference_body_s(tuple(op.dots), float(op.bytes), km.overrides)
    if op.ssd_gradient and op.dots:
        body = max(body, ssd_flops(op.dots) / ssd_backward_products_flops())
    return body * (ref.sms * ref.sm_clock_Hz) / (km.sms * km.sm_clock_Hz)


def quantize_bytes(generation: str, fp8_recipe: str | None = None, amax_pass: bool = False,
                   rowwise_only: bool = False) -> float:
    """Bytes per element of one FP8 quantisation of a GEMM input in Transformer Engine (``kernels.toml``
    ``[fp8_recipe]``): the BF16 read, each FP8 copy the pass's GEMMs need with its scales (a column-wise copy
    beside the row-wise one for every recipe on Hopper and for block-scaled recipes on Blackwell; half a byte an
    element under NVFP4), and with ``amax_pass`` current scaling's separate amax read (NVFP4 always reads its input
    once for the tensor amax before the cast: :func:`.kernels.cast_extra_bytes`). A linear layer quantises its input once forward (fprop
    row-wise, wgrad column-wise) and its output gradient once backward (dgrad, wgrad).

    Parameters
    ----------
    generation : str
        The GPU's generation.
    fp8_recipe : str or None
        The layout's ``fp8_recipe``.
    amax_pass : bool
        The layout's ``fp8_amax_pass``.
    rowwise_only : bool
        The row-wise copy alone: a per-tensor FP8 shard cast before its TP all-gather on a TN-only GPU, whose
        column-wise copy a transpose after the gather makes (:attr:`Op.gather_transpose_elem_bytes`).

    Returns
    -------
    float
        Bytes read and written per element quantised.
    """
    _, scale, copies = fp8_recipe_costs(fp8_recipe, generation)
    copies = 1 if rowwise_only else copies
    element, amax_read = cast_extra_bytes(fp8_recipe)
    return ACT + copies * (element + scale) + (ACT if amax_pass else amax_read)


def norm_cast_bytes(op: Op, generation: str, fp8_recipe: str | None = None) -> float:
    """Bytes per element a ``norm_cast`` linear's forward input adds to its norm (:attr:`Op.norm_cast`): the norm
    kernel writes the quantised element and its scale in place of the BF16 element its ``norm`` op prices (so
    ``element + scale - 2``, -1 for FP8), plus the transposed copy the norm's call makes of it
    (:attr:`Op.norm_transpose_elem_bytes`: read and written, 2 on a TN-only GPU without a TP gather). Against
    :func:`quantize_bytes` (the BF16 read and every copy written, 4 on Hopper, 3 on Blackwell), the cast kernel's
    read and the BF16 write go.

    Parameters
    ----------
    op : Op
        A linear GEMM whose norm writes its input quantised.
    generation : str
        The GPU's generation.
    fp8_recipe : str or None
        The recipe it runs (per tensor: None or ``delayed``).

    Returns
    -------
    float
        Bytes per element of the norm's output; negative where the norm moves fewer than in BF16.
    """
    _, scale, _ = fp8_recipe_costs(fp8_recipe, generation)
    element, _ = cast_extra_bytes(fp8_recipe)
    return element + scale - ACT + op.norm_transpose_elem_bytes


def tp_paired_gemm_s(op: Op, gpu: GpuCompute, precision: str, fp8_recipe: str | None = None,
                     margins: dict | None = None) -> dict:
    """The GEMM seconds each of ``op``'s TP collectives overlaps with, by the traffic item's ``pair``
    (:func:`topo.training.step._tp_traffic`): a column-parallel (``ag``) layer's forward all-gather with its
    forward GEMM (``ag_fprop``, ring exchange), its input's second gather with its input-gradient GEMM
    (``ag_dgrad``, bulk) and its input gradient's reduce-scatter with its weight-gradient GEMM (``ag_wgrad``,
    bulk); a row-parallel (``rs``) layer's forward reduce-scatter with its forward GEMM (``rs_fprop``) and its
    output gradient's all-gather with its input-gradient GEMM (``rs_dgrad``, both ring exchange), each on the SMs
    its communicator leaves it (``margins``, :func:`.tp_overlap.pass_margins`). Without userbuffers the same pairs
    say what Transformer Engine's asynchronous backward gather and reduce-scatter hide behind
    (:func:`topo.training.step.tp_exposed_s`). The pairs are named by the op's ``tp_role``, or by its ``tp_pair``
    where it has one (``q_up_dgrad``, ``head_wgrad``, ...). Empty for other operators."""
    if op.kind != "gemm" or not op.tp_role:
        return {}
    precision, fp8_recipe = op_precision(op, precision, fp8_recipe)
    prec, km = _gemm_precision(op, precision, fp8_recipe), gpu.kernels
    ratio = recipe_gemm_ratio(km, fp8_recipe, gpu.generation) if prec != "bf16" else 1.0
    passes = ("fprop", "dgrad", "wgrad") if op.tp_role == "ag" else ("fprop", "dgrad")
    if op.tp_pair:  # never userbuffers: its forward exchanges block, only the backward's pair (``beside_own_gemm``)
        passes = passes[1:]
    margins = margins or {}
    return {f"{op.tp_pair or op.tp_role}_{p}": ratio * gemm_s(margin_kernels(gpu, margins[p]) if p in margins
                                                              else km, *shape, prec, op.groups, op.packed)
            for p, shape in _gemm_shapes(op).items() if p in passes}


def _gemm_shapes(op: Op) -> dict[str, tuple[float, float, float]]:
    """``(M, N, K)`` of a GEMM operator's matmuls by pass: ``fprop`` (``m x n`` over ``k``), and backward
    ``dgrad``, the input gradient (``m x k`` over the ``n`` outputs), and ``wgrad``, the weight gradient (``k x n``
    over the ``m`` rows)."""
    return {"fprop": (op.m, op.n, op.k), "dgrad": (op.m, op.k, op.n), "wgrad": (op.k, op.n, op.m)}


def _gemm_precision(op: Op, precision: str, fp8_recipe: str | None = None) -> str:
    """The precision a GEMM operator runs at under the layout's ``precision``: FP8 only for a linear layer
    (attention's score and weighted-sum matmuls stay BF16), FP4 under ``fp8_recipe = "nvfp4"``
    (:func:`.kernels.recipe_precision`; TE's NVFP4BlockScaling keeps attention out: ``fp8_dpa = False``)."""
    return recipe_precision(fp8_recipe) if (op.linear and precision == "fp8") else "bf16"


def kernels_launched(op: Op, precision: str, backward: bool = False, amax_pass: bool = False,
                     scale_kernel: bool = False) -> float:
    """Kernels ``op`` launches in a pass: its own (a GEMM twice backward: input and weight gradients) and, for an
    FP8 linear layer's GEMM, one quantisation a pass (Transformer Engine quantises the input forward, row- and
    column-wise, and the output gradient backward, which dgrad and wgrad share: :func:`quantize_bytes`), with
    ``amax_pass`` (current scaling before TE 2.7) as current scaling's amax, scale and cast kernels
    (:func:`.kernels.quantize_kernels`). A grouped expert GEMM quantises each expert's rows once a pass (TE
    ``GroupedLinear``), in those four kernels under per-tensor current scaling or ``amax_pass`` (whose amax read
    :func:`op_time_s` charges per expert either way), or in one kernel for every expert on the fused grouped MLP
    (:func:`.grouped_gemm.input_cast_kernels`); none in a pass whose input the kernel before it cast in its
    epilogue (``Op.epilogue_cast``: the fused grouped MLP's fc2 forward and fc1 backward). ``scale_kernel``
    (the layout's ``fp8_scale_inverse_kernel``): each cast of delayed scaling is two kernels, its scale inverse
    and the cast (``quantize_kernels()["delayed_scale_inverse"]``). An MXFP8 cast writing GEMM-ready scales adds
    its scale buffers' memsets where the tensor does not fill whole 128 x 128 tiles (every dropless expert's:
    :func:`.weight_swizzle.cast_memsets`). An MXFP8 weight's GEMM calls add their scale
    swizzles (:func:`.weight_swizzle.weight_swizzles`), a block-wise GEMM on Blackwell its scale conversions
    (:func:`.weight_swizzle.block_conversions`)."""
    gemms = 2.0 if (backward and op.kind == "gemm") else 1.0
    if op.recipe:  # a module at a recipe of its own (:func:`op_precision`)
        precision, _ = op_precision(op, precision, None)
        amax_pass = scale_kernel = False
    if not (op.kind == "gemm" and op.linear and precision == "fp8"):
        return op.launches * gemms
    own = (op.launches * gemms + scale_kernels(op, precision, backward) + gather_transposes(op, precision, backward)
           + ub_grad_copies(op, precision, backward))
    if op.epilogue_cast == ("backward" if backward else "forward"):
        return own  # its input cast in the epilogue of the kernel before it
    kind = cast_kind(op, backward, amax_pass, scale_kernel)
    if kind == "norm":  # the norm kernel wrote it: its transpose, and TE 2.0-2.6's scale inverse (create_tensor)
        kq = quantize_kernels()
        return own + (1.0 if op.norm_transpose_elem_bytes else 0.0) + (kq["delayed_scale_inverse"] - kq["cast"]
                                                             if scale_kernel else 0.0)
    q = quantize_kernels()[kind] + cast_memsets(op, precision, backward)  # an MXFP8 cast's scale memsets
    if op.grouped:
        return own + input_cast_kernels(op.expert_kernels, op.groups, q)
    return own + q


def cast_kind(op: Op, backward: bool = False, amax_pass: bool = False, scale_kernel: bool = False) -> str:
    """How Transformer Engine quantises the input of FP8 linear ``op``'s pass (X forward, dY backward), as a key
    of :func:`.kernels.quantize_kernels`: ``current`` under per-tensor current scaling (``op.current_scaling``, or
    ``amax_pass``: TE before 2.7), its amax computed in kernels of its own; ``current_norm_amax`` for a
    ``norm_amax`` forward from TE 2.7 (the norm computed the amax); ``nvfp4`` under NVFP4 (``op.fp4_cast``: its
    amax kernels and the fused cast, every input alike: with the random Hadamard transform TE runs the norm
    unfused); ``norm`` for a ``norm_cast`` forward (per-tensor delayed scaling: the norm kernel wrote it quantised,
    no cast kernel, :attr:`Op.norm_cast`; not a key of ``quantize_kernels``, :func:`kernels_launched` counts its
    transpose); else ``delayed_scale_inverse`` with ``scale_kernel``, else ``cast``.

    The TE version is read from ``amax_pass``, the runs file's ``fp8_amax_pass`` column recording each run's
    container's TE (the layout's ``te_version``, :mod:`.te_version`, is read for userbuffers' gradient copy only). NVIDIA/TransformerEngine v2.7 (fedd9ddc)
    ``transformer_engine/pytorch/csrc/extensions/normalization.cpp`` lines 115-116 and 147-151 (``layernorm_fwd``;
    ``rmsnorm_fwd`` 281-285): the norm writes its output with its amax (``create_hp_tensor_with_amax``) and the
    cast is ``quantize_with_amax``; at f05f12c9 (2.5.0, NeMo 25.07's pin: NVIDIA/NeMo@v2.4.0 ``requirements/manifest.json``)
    lines 141-149 and 302-310 run ``nvte_compute_amax`` over the norm's output first, as every other cast.

    Parameters
    ----------
    op : Op
    backward : bool
    amax_pass : bool
        The layout's ``fp8_amax_pass``.
    scale_kernel : bool
        The layout's ``fp8_scale_inverse_kernel``.

    Returns
    -------
    str
    """
    if op.norm_cast and not backward:
        return "norm"
    if op.fp4_cast:
        return "nvfp4"
    if op.current_scaling or amax_pass:
        return "current_norm_amax" if (op.norm_amax and not backward and not amax_pass) else "current"
    return "delayed_scale_inverse" if scale_kernel else "cast"


def launch_calls(op: Op, precision: str, backward: bool = False, amax_pass: bool = False,
                 scale_kernel: bool = False) -> tuple[float, float, float]:
    """How the host issues the :func:`kernels_launched` of ``op``'s pass: framework calls, each with its first
    kernel, and the GEMMs and other kernels a call's C++ launches after its first.

    A GEMM is a call of its own, except on a path that loops over the experts in C++
    (:data:`.grouped_gemm.CPP_LOOP_PATHS`: one call a GEMM pass, its other experts' cuBLASLt GEMMs from C++). An
    FP8 input cast is one call whose other kernels (current scaling's amax, scale and cast; delayed scaling's scale
    inverse) its C++ launches, one for every expert on such a path (``split_quantize``), one per expert for a
    Python loop of experts; a norm's amax cast (``current_norm_amax``) is launched inside the norm's call, so none.
    An MXFP8 weight's scale swizzles and block-wise scale conversions are launched by the GEMM call's C++
    (:func:`.weight_swizzle.scale_kernels`); a gathered operand's transpose (:func:`gather_transposes`) is a call of
    its own (``Float8TensorStorage._create_transpose``: ``tex.fp8_transpose``).

    Parameters
    ----------
    op : Op
    precision : str
    backward, amax_pass, scale_kernel : bool
        As :func:`kernels_launched`.

    Returns
    -------
    tuple of float
        ``(calls, C++ GEMMs, C++ kernels)``, which sum to :func:`kernels_launched`.
    """
    total = kernels_launched(op, precision, backward, amax_pass, scale_kernel)
    if op.kind != "gemm":
        return total, 0.0, 0.0
    gemms = 2.0 if backward else 1.0
    own = op.launches * gemms
    calls = min(gemms, own) if op.expert_kernels in CPP_LOOP_PATHS else own
    swizzles = scale_kernels(op, precision, backward)
    transposes = gather_transposes(op, precision, backward)  # ``_create_transpose``: a call each, one kernel
    transposes += ub_grad_copies(op, precision, backward)  # ``copy_into_buffer``: a call, one kernel
    casts = total - own - swizzles - transposes
    if casts <= 0:
        return calls + transposes, own - calls, swizzles
    if cast_kind(op, backward, amax_pass, scale_kernel) in ("current_norm_amax", "norm"):
        cast_calls = 0.0
    elif op.grouped and not (op.expert_kernels in CPP_LOOP_PATHS or op.expert_kernels in GROUP_QUANTIZE_KERNELS):
        cast_calls = min(op.groups, casts)
    else:
        cast_calls = 1.0
    return calls + cast_calls + transposes, own - calls, casts - cast_calls + swizzles


def host_launch_s(op: Op, gpu: GpuCompute, backward: bool = False, graphs: tuple = (),
                  precision: str = "bf16", amax_pass: bool = False, scale_kernel: bool = False) -> float:
    """CPU seconds an eager framework spends launching ``op``'s kernels (forward, or its backward): ``launch_host_s``
    a call, ``launch_cpp_gemm_s`` and ``launch_cpp_s`` a GEMM and a kernel its C++ launches after the call's first
    (:func:`launch_calls`); none when a CUDA graph of ``graphs`` (the layout's ``cuda_graph_scope``) captures it,
    or when it runs in the other pass (``amax_pass``, ``scale_kernel``: :func:`kernels_launched`); none for a kernel
    a priced call launches (``Op.in_call``). With it, a grouped module's per-expert work (:func:`expert_host_s`), an
    MXFP8 weight's swizzle buffers (:func:`.weight_swizzle.swizzle_host_s`) and, backward, Megatron-Core DDP's hook
    a weight (:func:`.grad_hooks.grad_hook_host_s`)."""
    if captured(op, graphs) or op.in_call:
        return 0.0
    if op.passes != "both" and backward != (op.passes == "backward"):
        return 0.0
    km = gpu.kernels
    calls, gemms, kernels = launch_calls(op, precision, backward, amax_pass, scale_kernel)
    return (km.launch_host_s * calls + km.launch_cpp_gemm_s * gemms + km.launch_cpp_s * kernels
            + expert_host_s(op, gpu, precision, backward)
            + swizzle_host_s(op, km.launch_torch_cpp_op_s, precision, backward)
            + grad_hook_host_s(op, km.launch_py_s, backward))


def expert_host_s(op: Op, gpu: GpuCompute, precision: str = "bf16", backward: bool = False) -> float:
    """CPU seconds a grouped expert module spends on its local experts in a pass outside its launches: each
    expert's PyTorch ops from Python and tensors from C++ (:func:`.grouped_gemm.expert_host_ops`, counted from
    Transformer Engine's ``GroupedLinear``) at ``launch_torch_op_s`` and ``launch_torch_cpp_op_s``, and its
    Python-level calls, Python objects converted to C++ and Python objects built from C++
    (:func:`.grouped_gemm.expert_python_calls`) at ``launch_py_s``. None for any other op or issue path.

    Parameters
    ----------
    op : Op
    gpu : GpuCompute
    precision : str
        The layout's precision (FP8 casts each expert's input: ``split_quantize``).
    backward : bool
        The backward pass (dgrad and wgrad), else the forward.

    Returns
    -------
    float
    """
    if not (op.kind == "gemm" and op.grouped and op.packed):
        return 0.0
    if precision != "fp8" or not op.linear:
        cast = "bf16"
    else:
        cast = "fp8_block" if op.block_scaled else "fp8_per_tensor"
    torch_py, torch_cpp, _ = expert_host_ops(op.expert_kernels, cast, backward)
    km = gpu.kernels
    python = sum(n * price for n, price in zip(expert_python_calls(op.expert_kernels, cast, backward), km.launch_py_s))
    return op.groups * (torch_py * km.launch_torch_op_s + torch_cpp * km.launch_torch_cpp_op_s + python)


def captured(op: Op, graphs: tuple) -> bool:
    """Whether a CUDA graph of ``graphs`` (the layout's ``cuda_graph_scope``) captures ``op``.

    Parameters
    ----------
    op : Op
        The operator (its ``graph``: the ``cuda_graph_scope`` part that captures it, "" if none).
    graphs : tuple of str
        The layout's ``cuda_graph_scope``.

    Returns
    -------
    bool
        True when a full-iteration graph, the op's own part or a part holding it (:data:`SCOPE_PARTS`) is
        captured.
    """
    if "full_iteration" in graphs:
        return True
    return bool(op.graph) and any(op.graph in SCOPE_PARTS.get(g, (g,)) for g in graphs)


EP_CALL_PARTS = ("dispatch_forward", "combine_forward", "dispatch_backward", "combine_backward")
"""An expert all-to-all call's parts, as ``host_calls.toml`` names a kind's figures by part and in
:class:`EpCallsHost`'s order: the forward dispatch and combine, the dispatch's backward (a combine) and the
combine's backward (a dispatch with the forward's handle)."""


class EpCallsHost(NamedTuple):
    """Host seconds of an MoE block's four expert all-to-all calls a micro-batch (:func:`ep_calls_host`), in
    :data:`EP_CALL_PARTS`' order."""

    dispatch_s: float = 0.0  # the forward's dispatch: the call right after a dropless router's sync
    combine_s: float = 0.0  # the forward's combine
    dispatch_backward_s: float = 0.0  # the dispatch's backward (a combine call)
    combine_backward_s: float = 0.0  # the combine's backward (a dispatch call with the forward's handle)

    @property
    def forward_s(self) -> float:
        """The forward's two calls (and a replayed forward's)."""
        return self.dispatch_s + self.combine_s

    @property
    def backward_s(self) -> float:
        """The backward's two calls."""
        return self.dispatch_backward_s + self.combine_backward_s


@dataclass(frozen=True)
class BlockTime:
    """One block's seconds per micro-batch on one GPU, and per module (forward + backward)."""

    forward_s: float
    backward_s: float
    by_module_s: dict
    recompute_s: dict  # module, op tag or (module, tag) -> forward seconds that recomputing it repeats
    forward_flops: float = 0.0
    attention_s: float = 0.0  # the fused attention kernels' forward + backward seconds
    wgrad_s: float = 0.0  # the weight-gradient GEMMs' seconds (the pooled window of unpaired backward TP traffic)
    host_s: float = 0.0  # CPU seconds launching the forward's kernels (eager, the uncaptured ones)
    host_backward_s: float = 0.0  # ... and the backward's
    recompute_host_s: dict = field(default_factory=dict)  # the same keys -> the forward's host seconds
    tp_pairs_s: dict = field(default_factory=dict)  # a TP collective's pair -> the GEMM seconds it overlaps with
    launch_seq: tuple = ()  # the forward's ops in order: (host seconds, GPU seconds, kernels) each
    sync_at: int = -1  # an MoE block: index in launch_seq of its first op after the tokens-per-expert sync
    sync_s: float = 0.0  # an MoE block with that sync: the sync's round trip after the GPU drains (KernelModel.sync_s)
    calls_host_s: EpCallsHost = EpCallsHost()  # an MoE block with EP: its expert all-to-all calls' host (ep_calls_host)
    launch_modules: tuple = ()  # the module of each launch_seq op


def op_passes_s(op: Op, gpu: GpuCompute, lay: ParallelLayout) -> tuple[float, float]:
    """Forward and backward seconds of ``op`` under the layout's precision, FP8 recipe and amax pass, its launch
    gaps as the layout's CUDA graphs capture them (:func:`op_time_s`): the one place a block's operator is timed
    (:func:`block_time`, :func:`topo.training.ep_overlap.moe_layer_parts`).

    Parameters
    ----------
    op : Op
        The operator.
    gpu : GpuCompute
        The GPU it runs on.
    lay : ParallelLayout
        The layout (``precision``, ``fp8_recipe``, ``fp8_amax_pass``, ``cuda_graph_scope``, ``grad_bytes``).

    Returns
    -------
    tuple of float
        ``(forward_s, backward_s)``.
    """
    cap = captured(op, lay.cuda_graph_scope)
    kw = dict(amax_pass=lay.fp8_amax_pass, graphed=cap, fp8_recipe=lay.fp8_recipe, margins=pass_margins(op, lay),
              cudnn=lay.cudnn_version, scale_kernel=lay.fp8_scale_inverse_kernel)
    return (op_time_s(op, gpu, lay.precision, **kw),
            op_time_s(op, gpu, lay.precision, backward=True, **wgrad_kw(lay, op), **kw))


def wgrad_kw(lay: ParallelLayout, op: Op) -> dict:
    """How ``op``'s weight-gradient GEMM writes its gradient under the layout's framework
    (``ParallelLayout.wgrad_output``), as :func:`op_time_s`'s keywords:

    - ``main_grad`` (Megatron-LM, NeMo, Megatron-Bridge: ``--gradient-accumulation-fusion``): the GEMM adds into
      ``main_grad`` at ``grad_bytes``, each element read and written.
    - ``fsdp2`` (PyTorch FSDP2, NeMo AutoModel, torchtitan): autograd's GEMM writes a new gradient in the
      unsharded parameters' dtype (``MixedPrecisionPolicy.param_dtype``, bf16: 2 bytes); before each
      reduce-scatter FSDP2's ``foreach_reduce`` copies it, on the compute stream (the copy precedes
      ``reduce_scatter_stream.wait_stream(current_stream)``), into the reduce-scatter buffer at ``reduce_dtype``
      (``chunk_cat``: 2 bytes read, the reduction's bytes written: ``reduce_bytes``, the experts'
      ``expert_reduce_bytes``), then frees it (pytorch/pytorch@010ae4a8
      ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``); under PyTorch pipelining's once-a-run reduction
      (``fsdp_pipeline_sync = "step"``) the backwards accumulate it unsharded in the reduce dtype and the copy runs
      once a run (:func:`.fsdp2_copies.fsdp2_grad_copy_bytes`).
    - ``copied`` (Megatron-FSDP without ``gradient_accumulation_fusion``): Transformer Engine's linear returns a new
      bf16 gradient (``param.grad``) and Megatron-FSDP's post-backward hook, on the compute stream, copies it into
      the parameter's slot of the gradient buffer (``param.main_grad.copy_(param.grad)``, in the reduction's dtype:
      bf16 where ``grad_reduce_in_fp32`` is off) before its reduce-scatter (NVIDIA/Megatron-LM@d98e8a64
      ``megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py`` ``_grad_acc``, sharded gradient
      buffer): FSDP2's bytes, 2 written by the GEMM, then 2 read and ``reduce_bytes`` written. Megatron-Bridge's
      Llama 3 / 3.1 performance configs turn the fusion off under Megatron-FSDP ("Disabled to avoid functional
      errors") from v0.2.0 (NeMo 25.11) on (NVIDIA-NeMo/Megatron-Bridge v0.2.0
      ``scripts/performance/configs/llama3/llama3_llm_pretrain.py`` lines 74, 109, 144, 267; v0.4.0
      ``configs/llama/llama3_llm_pretrain.py`` 76, 111, 146; @067f987d
      ``src/megatron/bridge/perf_recipes/llama/gb200/llama3.py`` ``gradient_accumulation_fusion = False``).
    - ``param_dtype`` (JAX, MaxText): the gradient of a parameter is in the parameter's dtype (MaxText's
      ``weight_dtype: float32``, AI-Hypercomputer/maxtext@000e9355 ``MaxText/configs/base.yml``), written once
      at ``grad_bytes``, the bf16 product's cast to it fused into the GEMM's output (an assumption: XLA may write
      bf16 and cast in a fusion of its own).
    - ``autograd`` (Megatron-LM of 2021 with ``--fp16``: no ``main_grad``): a new gradient in the parameter's
      dtype (2 bytes) each micro-batch, which PyTorch's ``AccumulateGrad`` keeps as ``param.grad`` on the first
      micro-batch and adds in place into ``param.grad`` on the others (:func:`autograd_add_bytes`).

    Parameters
    ----------
    lay : ParallelLayout
    op : Op

    Returns
    -------
    dict
        ``grad_bytes``, ``grad_once``, ``grad_copy_bytes``.
    """
    if lay.wgrad_output == "main_grad":
        return dict(grad_bytes=lay.grad_bytes)
    if lay.wgrad_output == "param_dtype":
        return dict(grad_bytes=lay.grad_bytes, grad_once=True)
    if lay.wgrad_output == "autograd":
        return dict(grad_bytes=float(ACT), grad_once=True, grad_copy_bytes=autograd_add_bytes(lay))
    reduce = lay.expert_reduce_bytes if op.module == "moe" else lay.reduce_bytes
    return dict(grad_bytes=float(ACT), grad_once=True, grad_copy_bytes=fsdp2_grad_copy_bytes(lay, ACT, reduce))


def block_time(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute, kind: str) -> BlockTime:
    """Time of one block of ``kind`` (see :func:`block_ops`), and the host's launches of its forward kernels
    (what :func:`stage_compute` bounds a layer of a dropless MoE by)."""
    fwd = bwd = flops = host = host_b = attention = wgrad = 0.0
    mods: dict[str, float] = {}
    rec: dict = {}  # module, tag, or (module, tag) -> forward seconds
    hmods: dict = {}  # the same keys -> the forward's host seconds
    pairs: dict[tuple, float] = {}
    seq: list[tuple] = []
    seq_mods: list[str] = []
    sync_at = -1
    graphs = lay.cuda_graph_scope
    for op in block_ops(model, lay, kind, gpu.generation):
        for key, g in tp_paired_gemm_s(op, gpu, lay.precision, lay.fp8_recipe, pass_margins(op, lay)).items():
            pairs[key] = pairs.get(key, 0.0) + g
        amax, inv = lay.fp8_amax_pass, lay.fp8_scale_inverse_kernel
        f, b = op_passes_s(op, gpu, lay)
        fwd += f
        bwd += b
        h = host_launch_s(op, gpu, graphs=graphs, precision=lay.precision, amax_pass=amax, scale_kernel=inv)
        host += h
        hmods[op.module] = hmods.get(op.module, 0.0) + h
        if op.tag:  # by tag, and by module and tag: what a replay of both counts once (_replayed_s)
            for k in (op.tag, (op.module, op.tag)):
                hmods[k] = hmods.get(k, 0.0) + h
        if op.passes != "backward":
            if op.name == SYNC_OP and sync_at < 0 and host_syncs(lay):
                sync_at = len(seq)
            seq.append((h, f, kernels_launched(op, lay.precision, amax_pass=amax, scale_kernel=inv)))
            seq_mods.append(op.module)
        host_b += host_launch_s(op, gpu, backward=True, graphs=graphs, precision=lay.precision, amax_pass=amax,
                                scale_kernel=inv)
        flops += op.flops if op.passes != "backward" else 0.0
        if op.kind == "attention":
            attention += f + b
        elif op.kind == "gemm" and op.weights and not op.grouped:
            wgrad += b / 2  # a TP linear's weight-gradient GEMM: half of its backward FLOPs (experts run no TP)
        mods[op.module] = mods.get(op.module, 0.0) + f + b
        rec[op.module] = rec.get(op.module, 0.0) + f
        if op.tag:
            for k in (op.tag, (op.module, op.tag)):
                rec[k] = rec.get(k, 0.0) + f
    synced = sync_at >= 0
    calls = kind == Block.MOE and ep_calls(lay)  # the expert all-to-alls the host calls
    return BlockTime(fwd, bwd, mods, rec, flops, attention, wgrad, host, host_b, hmods, pairs, tuple(seq), sync_at,
                     gpu.kernels.sync_s if synced else 0.0, ep_calls_host(lay, gpu) if calls else EpCallsHost(),
                     tuple(seq_mods))


HYBRIDEP_CALL = "hybridep_dispatch_with_permute"
"""``host_calls.toml``'s call kind of a HybridEP all-to-all call (:func:`ep_calls_host`)."""
DEEPEP_CALL = "deepep_v1_call"
"""``host_calls.toml``'s call kind of a DeepEP V1 all-to-all call (:func:`ep_calls_host`)."""


def ep_calls(lay: ParallelLayout) -> bool:
    """Whether an MoE block's host calls a dispatch and a combine each pass (its ``calls_host_s``, else none).

    The all-to-all dispatcher calls its all-to-all over the EP group, none at ep 1 (one rank). The flex dispatcher
    (``deepep``) runs over the TP x EP group of the experts (``tp_ep_group``, its TP the experts' ``etp``), so at
    ep 1 and etp > 1 it still calls DeepEP's or HybridEP's dispatch and combine, each token sent to its experts'
    ``etp`` ranks (NVIDIA/Megatron-LM@44151194 ``megatron/core/transformer/moe/token_dispatcher.py``
    ``MoEFlexTokenDispatcher.__init__``: ``_DeepepManager`` and ``_HybridEPManager`` both built with
    ``group=self.tp_ep_group`` and ``num_experts=self.tp_size * config.num_moe_experts``). topo prices that exchange
    as the experts' TP all-gather and reduce-scatter (``topo.training.step._ep_traffic``), the calls' host here.
    """
    return lay.ep * lay.expert_tp > 1 if lay.ep_dispatcher == "deepep" else lay.ep > 1


def ep_calls_host(lay: ParallelLayout, gpu: GpuCompute) -> EpCallsHost:
    """Host seconds of each of an MoE block's expert all-to-all calls under the layout's dispatcher, a micro-batch
    (an MoE block's ``calls_host_s``; the host line reads each where it issues that call).

    DeepEP V1 (the ``deepep`` backend, normal kernels): each call kind's own host time inside DeepEP's C++ entries,
    less the dispatch's busy-wait on the received counts (``[call.deepep_v1_call]``, by part: deepseek-ai/
    profile-data@4496024's H800 training trace, medians over its 4 layers: the forward dispatch 245 us with
    ``get_dispatch_layout``'s entry in it, the forward combine 67, the dispatch's backward 54, the combine's backward
    88; a lower bound, the Python of ``Buffer`` is not resolved there), times the host CPU's factor elsewhere
    (:func:`.host_cpu.call_host_on_s`). HybridEP (the ``hybridep`` backend): its ``dispatch_with_permute`` call's
    measured host time outside the preprocessing and its sync (``[call.hybridep_dispatch_with_permute]``: the
    Python, the routing map's all-gather call, and the dispatch and permute launches from C++; Megatron-Bridge PR
    #5094's Nsight profile, DGX H100), one figure for every call: the profile's range mixes the forward dispatch
    and the combine's backward and times no part apart, and ``combine_with_unpermute`` has no published figure and
    is taken alike (assumption: the forward combine and the dispatch's backward run the same Python and C++ path
    with the handle, deepseek-ai/DeepEP@94a9f8f6 hybrid-ep ``deep_ep/hybrid_ep_buffer.py``). The all-to-all
    dispatcher: one kernel launch of the host's a call (``KernelModel.launch_host_s``).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``ep_dispatcher``, ``ep_flex_backend``).
    gpu : GpuCompute
        The GPU (its ``kernels.host_cpu``; empty: the reference CPU).

    Returns
    -------
    EpCallsHost
        Seconds of each call, in :data:`EP_CALL_PARTS`' order.
    """
    if lay.ep_dispatcher == "deepep":
        kind = HYBRIDEP_CALL if lay.ep_flex_backend == "hybridep" else DEEPEP_CALL
        cpu = gpu.kernels.host_cpu or reference_host_cpu()
        return EpCallsHost(*(call_host_on_s(kind, cpu, part) for part in EP_CALL_PARTS))
    return EpCallsHost(*(gpu.kernels.launch_host_s,) * len(EP_CALL_PARTS))


BLOCK_TIME_UNREAD = ("pp", "vpp", "dp", "dp_shard", "dp_sharding", "global_batch", "recompute", "recompute_num_layers",
                     "recompute_early_stop", "recompute_modules", "rank_order", "first_gpu", "gpus_per_domain_used",
                     "skip_domains")
"""Layout fields :func:`block_time` does not read (the pipeline split, the data-parallel size and sharding, the
recomputation, which :func:`_stage_row` applies, and the placement), but for FSDP2's unit copies
(:func:`.fsdp2_copies.fsdp2_copies`), which read the sharding as :func:`.fsdp2_copies.copies_units` and ``pp``
as whether it is 1, and Megatron-Core DDP's hooks, which read the sharding as :func:`.grad_hooks.ddp_hooks_run`:
those are in :func:`block_time_key`. ``tests/test_training_block_cache.py`` records the
fields it reads."""


DISPATCHER_FIELDS = ("ep_dispatcher", "ep_flex_backend")
"""Layout fields only an MoE block's :func:`block_time` reads (its dispatch, permutation and router kernels): the
other blocks' times are shared across the dispatchers (:func:`block_time_key`'s ``moe``);
``tests/test_training_comm_keyed_fast63.py`` records it."""
_UNREAD_MOE = frozenset(BLOCK_TIME_UNREAD)
_UNREAD_OTHER = frozenset(BLOCK_TIME_UNREAD + DISPATCHER_FIELDS)



def block_time_key(lay: ParallelLayout, moe: bool = True) -> tuple:
    """What :func:`block_time` reads of ``lay``: layouts with equal keys time every block alike (on one model and
    one GPU), so a search prices each block once for all of them (:func:`rank_computes`' ``blocks``).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    tuple
        Hashable: the layout's fields less :data:`BLOCK_TIME_UNREAD` (and :data:`DISPATCHER_FIELDS` unless
        ``moe``: the key of a block other than an MoE block), whether it copies FSDP2's units, whether pp is 1,
        whether Megatron-Core DDP's per-parameter hooks run (:func:`.grad_hooks.ddp_hooks_run`), and the
        micro-batches under ``wgrad_output = "autograd"`` (:func:`autograd_add_bytes`).
    """
    skip = _UNREAD_MOE if moe else _UNREAD_OTHER  # the fields as the layout holds them (scalars and tuples): its
    # ``model_dump`` without the copy (a search asks ~16k times)
    return (tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in lay.__dict__.items()
                         if k not in skip)), copies_units(lay), lay.pp == 1, ddp_hooks_run(lay),
            lay.microbatches if lay.wgrad_output == "autograd" else None)  # autograd_add_bytes reads m


def pipeline_units(model: ModelSpec, lay: ParallelLayout) -> list[list[str]]:
    """Each pipeline stage's units, in order: block strings of its layers, plus ``embedding`` (first stage)
    and ``logits`` (last stage).

    The ``layers`` (with the embedding and the loss as two more units when ``lay.pipeline_embedding``, as
    Megatron-LM's ``account_for_embedding_in_pipeline_split`` / ``..._loss_...`` do) are split into ``pp x vpp``
    consecutive chunks as evenly as possible (earlier chunks take the extra unit); stage ``i`` runs chunks
    ``i, i + pp, ...``; the model's multi-token-prediction depths (a unit of :attr:`.ModelSpec.mtp_block` and an
    ``mtp_head`` each) run on the last stage. A ``lay.pipeline_layout`` says instead which chunk holds what
    (:mod:`.pipeline_layout`).

    Kept by what :func:`_placed` reads (the model's blocks and MTP modules, the layout's pipeline fields; at most
    :data:`UNITS_KEPT` placements, a search asks ~220k times for a few hundred), each call given its own lists."""
    key = pipeline_key(model, lay)
    got = _UNITS.get(key)
    if got is None:
        if len(_UNITS) >= UNITS_KEPT:
            _UNITS.clear()
        got = _UNITS[key] = tuple(map(tuple, _placed(model, lay, list(model.blocks), model.mtp_block)))
    return [list(s) for s in got]


UNITS_KEPT = 4096  # pipeline placements :func:`pipeline_units` keeps (a search's few hundred shapes)
_UNITS: dict[tuple, tuple] = {}


def pipeline_key(model: ModelSpec, lay: ParallelLayout) -> tuple:
    """What :func:`pipeline_units` reads: the model's blocks, layers and MTP modules, the layout's pp, vpp,
    pipeline_embedding and pipeline_layout (a value kept by it is kept by the placement).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout

    Returns
    -------
    tuple
    """
    return (model.blocks, model.layers, model.mtp_layers, model.mtp_block, lay.pp, lay.vpp, lay.pipeline_embedding,
            lay.pipeline_layout)


def layer_numbers(model: ModelSpec, lay: ParallelLayout) -> list[list]:
    """Each stage's units as :func:`pipeline_units` places them, a layer given as its index in the model (0 to
    ``layers - 1``, Megatron-Core's ``layer_number - 1``), a multi-token-prediction module's layer as None and
    the embedding and the head by name.

    Parameters
    ----------
    model : ModelSpec
        The model.
    lay : ParallelLayout
        The layout (its pipeline sizes and ``pipeline_layout``).

    Returns
    -------
    list of list
        Per stage, its units: an int per layer, None per MTP layer, ``"embedding"``, ``"logits"``, ``"mtp_head"``.
    """
    return _placed(model, lay, list(range(len(model.blocks))), None)


def _placed(model: ModelSpec, lay: ParallelLayout, layers: list, mtp_layer) -> list[list]:
    """Each stage's units with ``layers`` (one item per model layer) placed as the model's layers are, and
    ``mtp_layer`` for a multi-token-prediction module's layer (see :func:`pipeline_units`)."""
    if lay.pipeline_layout is not None:
        return _laid_out_units(model, lay, layers, mtp_layer)
    units: list = list(layers)
    if lay.pipeline_embedding:
        units = ["embedding", *units, "logits"]
    chunks = lay.pp * lay.vpp
    sizes = [len(units) // chunks + (1 if c < len(units) % chunks else 0) for c in range(chunks)]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    stages: list[list] = [[] for _ in range(lay.pp)]
    for c in range(chunks):
        stages[c % lay.pp] += units[bounds[c]:bounds[c + 1]]
    if not lay.pipeline_embedding:
        stages[0].insert(0, "embedding")
        stages[-1].append("logits")
    if model.mtp_layers:  # Megatron-Core puts the multi-token-prediction modules on the last stage
        stages[-1] += [mtp_layer] * model.mtp_layers + ["mtp_head"] * model.mtp_layers
    return stages


def rank_stages(lay: ParallelLayout) -> list[tuple[int, ...]]:
    """The pipeline stages each pipeline rank runs, rank by rank.

    Stage ``i`` runs on rank ``i``. Under DualPipe, rank ``i`` holds stage ``i`` and its mirror ``pp - 1 - i``,
    and half the micro-batches enter from each end, so each rank runs each of its two stages on half of them
    (deepseek-ai/DualPipe@3da1bbe ``examples/example_dualpipe.py``: the local modules are ``full_modules[rank]``
    and ``full_modules[pp_size - 1 - rank]``; its README's table: 2x parameters per device).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (its ``pp`` and ``pipeline_schedule``).

    Returns
    -------
    list of tuple of int
        Per pipeline rank, the indices of the stages (:func:`pipeline_units`) it runs.

    Examples
    --------
    >>> from topo.training.parallel import make_layout
    >>> rank_stages(make_layout(pp=4, dp=1, global_batch=8, pipeline_schedule="dualpipe"))
    [(0, 3), (1, 2), (2, 1), (3, 0)]
    """
    if lay.pipeline_schedule == "dualpipe":
        return [(i, lay.pp - 1 - i) for i in range(lay.pp)]
    return [(i,) for i in range(lay.pp)]


def _laid_out_units(model: ModelSpec, lay: ParallelLayout, layers: list, mtp_layer) -> list[list]:
    """Each stage's units as ``lay.pipeline_layout`` places them: chunk ``c`` on stage ``c mod pp``, its layers
    the model's next ones in order, an MTP module as its layer and its head."""
    chunks = layout_chunks(lay.pipeline_layout, chunks=lay.pp * lay.vpp, layers=model.layers,
                           mtp_layers=model.mtp_layers)
    stages: list[list] = [[] for _ in range(lay.pp)]
    nxt = iter(layers)
    token = {"E": ["embedding"], "L": ["logits"], "m": [mtp_layer, "mtp_head"]}
    for c, chunk in enumerate(chunks):
        for ch in chunk:
            stages[c % lay.pp] += [next(nxt)] if ch == "t" else token[ch]
    return stages


@dataclass(frozen=True)
class StageCompute:
    """Compute of every pipeline stage per micro-batch, and the busiest stage's details.

    Attributes
    ----------
    stage_s : numpy.ndarray
        Forward + backward + recomputation seconds per micro-batch of each stage.
    busiest : int
        The pipeline rank these details describe: :func:`stage_compute`'s, the one with the most compute (a rank
        of :func:`rank_computes`' list, its own index).
    forward_s, backward_s, recompute_s : float
        The busiest stage's parts.
    attention_s : float
        The busiest stage's fused-attention seconds (forward and backward) per micro-batch: what CP's K/V
        exchange hides behind.
    wgrad_s : float
        The busiest stage's weight-gradient GEMM seconds per micro-batch: what the backward pass's TP traffic
        hides behind (Megatron overlaps it with them).
    by_module_s : dict
        The busiest stage's seconds per module per micro-batch.
    layers : int
        Layers (pattern characters) on the busiest stage; ``blocks``: its blocks by kind.
    """

    stage_s: np.ndarray
    busiest: int
    forward_s: float
    backward_s: float
    recompute_s: float
    attention_s: float
    wgrad_s: float
    by_module_s: dict
    layers: int
    blocks: dict = field(default_factory=dict)
    executed_flops: float = 0.0  # forward x 3 (+ recomputed forward) per micro-batch on the busiest stage
    tp_pairs: dict = field(default_factory=dict)
    """A TP collective's ``pair`` -> ``[(gemm_s, blocks), ...]``: the GEMM seconds each of the busiest stage's TP
    collectives overlaps with (:func:`tp_paired_gemm_s`) and how many blocks per micro-batch pair it so."""

    @property
    def microbatch_s(self) -> float:
        return self.forward_s + self.backward_s + self.recompute_s


def _recomputed(lay: ParallelLayout, kind: str, bt: BlockTime, index_in_stage: int) -> float:
    """Forward seconds recomputed for one block of a layer at ``index_in_stage`` in its stage."""
    return _replayed_s(lay, bt, fully_recomputed(lay, index_in_stage))[0]


def _recomputed_keys(lay: ParallelLayout) -> set:
    """The modules and op tags (``BlockTime.recompute_s``'s keys) selective recomputation replays: the layout's
    ``recompute_modules`` through their aliases, and the attention core where attention is not flash's."""
    mods = set(modules_recomputed(lay))
    if lay.recompute == "selective" and not lay.flash_attention:
        mods.add("core_attn")  # Korthikanti et al. 2022: the attention core only
    alias = {"mlp": ("mlp", "mlp_act"), "moe": MOE_MODULE, "moe_act": ("moe_act",),
             "layernorm": ("layernorm",), "core_attn": ("core_attn",),
             "mla_up_proj": ("mla_up_proj",), "mlp_act": ("mlp_act",),
             # an input projection recomputed with the activation after it (fc2's input is the activation's output)
             "mlp_wi": ("mlp_wi", "mlp_act", "moe_act", "shared_experts_act")}
    return {x for mname in mods for x in alias.get(mname, (mname,))}


def _replayed_s(lay: ParallelLayout, bt: BlockTime, full: bool, skip: tuple = ()) -> tuple[float, float]:
    """GPU and host seconds of one block's forward that the backward replays, per micro-batch: a fully recomputed
    layer's whole forward but FSDP2's copies (not an operator of the layer), else the ops of the modules and tags
    selective recomputation replays (:func:`_recomputed_keys`) but those in ``skip``, an op whose module and tag
    are both replayed (``mlp`` and ``mlp_wi``: fc1) once. The one place the replay's
    GPU time (:func:`_recomputed`) and its launches (:func:`_replay_terms`) are read from."""
    if full:
        return (bt.forward_s - bt.recompute_s.get(FSDP_MODULE, 0.0),
                bt.host_s - bt.recompute_host_s.get(FSDP_MODULE, 0.0))
    keys = _recomputed_keys(lay) - set(skip)
    both = [k for k in bt.recompute_s if isinstance(k, tuple) and k[0] in keys and k[1] in keys]  # counted once
    return tuple(sum(d.get(x, 0.0) for x in keys) - sum(d.get(k, 0.0) for k in both)
                 for d in (bt.recompute_s, bt.recompute_host_s))


def bf16_layers(model: ModelSpec, lay: ParallelLayout) -> list[list[bool]]:
    """For each stage's units (:func:`pipeline_units`), whether it is a layer an FP8 layout runs in BF16: one of
    the model's first ``num_layers_at_start_in_bf16`` or last ``num_layers_at_end_in_bf16`` layers (Megatron-Core's
    ``get_fp8_context(config, layer_number - 1)``, NVIDIA/Megatron-LM ``megatron/core/fp8_utils.py`` @f7a3dcc4:
    ``layer_no < num_layers_at_start_in_bf16`` or ``layer_no >= num_layers - num_layers_at_end_in_bf16``).

    Parameters
    ----------
    model : ModelSpec
        The model.
    lay : ParallelLayout
        The layout (its ``precision``, BF16 layer counts and ``module_recipes``).

    Returns
    -------
    list of list of bool
        Per stage, per unit of :func:`pipeline_units`: True for a layer kept in BF16 (never an end unit; an MTP
        layer only when ``module_recipes`` keeps ``mtp`` in BF16, :mod:`.module_recipes`; all False unless
        ``precision = "fp8"``). Kept by the placement (:func:`pipeline_key`) and the
        BF16 counts, at most :data:`UNITS_KEPT`; each call given its own lists.
    """
    start, end, n = lay.num_layers_at_start_in_bf16, lay.num_layers_at_end_in_bf16, model.layers
    mtp = lay.precision == "fp8" and mtp_in_bf16(lay.module_recipes)
    on = bool(lay.precision == "fp8" and (start or end))
    key = (pipeline_key(model, lay), on, start, end, mtp)  # what the flags read: the placement and the BF16 counts
    got = _BF16.get(key)
    if got is None:
        if len(_BF16) >= UNITS_KEPT:
            _BF16.clear()
        got = _BF16[key] = tuple(tuple((on and isinstance(i, int) and (i < start or i >= n - end)) or (mtp and i is None)
                                       for i in units)
                                 for units in layer_numbers(model, lay))
    return [list(s) for s in got]


_BF16: dict[tuple, tuple] = {}  # :func:`bf16_layers` by placement and BF16 counts (a search asks ~60k times)


def stage_compute(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute, ep_cover_s: float = 0.0,
                  blocks: dict | None = None) -> StageCompute:
    """Every stage's compute per micro-batch (see :func:`pipeline_units`); the busiest sets the pace. Layers an FP8
    layout keeps in BF16 (:func:`bf16_layers`) are timed as a BF16 layout's. ``ep_cover_s``: GPU seconds of the
    expert exchange a dropless MoE layer runs between its syncs, forward (its dispatch and combine: the EP
    all-to-alls and the experts' etp all-gather and reduce-scatter, timed by the step:
    :func:`topo.training.step._ep_cover_s`), during which the host launches ahead (:func:`_synced_layer_wait_s`);
    ``math.inf`` gives a lower bound of the waits (the layout search's). ``blocks``: as :func:`rank_computes`'."""
    return rank_computes(model, lay, gpu, ep_cover_s, blocks)[0]


def rank_computes(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute,
                  ep_cover_s: float = 0.0, blocks: dict | None = None) -> list[StageCompute]:
    """Each pipeline rank's compute per micro-batch at one EP cover (:func:`rank_computes_at`'s at ``(ep_cover_s,)``);
    see there."""
    return rank_computes_at(model, lay, gpu, (ep_cover_s,), blocks)[0]


def rank_computes_at(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute, covers_s: tuple = (0.0,),
                     blocks: dict | None = None) -> list[list[StageCompute]]:
    """Each pipeline rank's compute per micro-batch, the busiest first, then the others in rank order (``busiest``
    names the rank each describes): a stage with less compute but more communication (more MoE layers beside a
    last stage's loss) can set the pace (:func:`.step.estimate_step` takes the slowest with its own traffic).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    gpu : GpuCompute
    covers_s : tuple of float
        EP covers, each as :func:`stage_compute`'s ``ep_cover_s``: the expert exchange's seconds between a dropless
        layer's syncs. The rows are priced once; only the host's waits are read per cover (a search bounds with the
        covers ``math.inf`` and 0).
    blocks : dict, optional
        Block times shared across calls for one model on one GPU, keyed by :func:`block_time_key` and the
        block's kind (a search's layouts differ mostly in what blocks do not read: pp, vpp, dp, recomputation).

    Returns
    -------
    list of list of StageCompute
        Per cover, one per pipeline rank, the compute-busiest first.
    """
    stages = pipeline_units(model, lay)
    in_bf16 = bf16_layers(model, lay)
    cache: dict[tuple, BlockTime] = {}
    keys: dict[tuple, tuple] = {}
    layout_key = None if blocks is None else stage_base_key(lay)
    if layout_key is not None:  # an MoE block's key of the layout as it is: stage_base_key's (not made twice)
        keys[(False, True)] = layout_key[1]
    as_bf16: list = []  # the layout in BF16, made when a block kept in BF16 is first timed

    def bt(kind, bf16=False):
        if (kind, bf16) not in cache:
            if bf16 and not as_bf16:
                as_bf16.append(lay.model_copy(update={"precision": "bf16"}))
            on = as_bf16[0] if bf16 else lay
            if blocks is None:
                cache[(kind, bf16)] = block_time(model, on, gpu, kind)
            else:
                moe = kind == Block.MOE  # the only block that reads the dispatcher
                if (bf16, moe) not in keys:
                    keys[(bf16, moe)] = block_time_key(on, moe)
                shared = blocks.get((keys[(bf16, moe)], kind))
                if shared is None:
                    shared = blocks[(keys[(bf16, moe)], kind)] = block_time(model, on, gpu, kind)
                cache[(kind, bf16)] = shared
        return cache[(kind, bf16)]

    rows: list = [[] for _ in covers_s]
    seen: dict = {}
    terms: list = [{} for _ in covers_s]  # per cover, each unit's host terms: the same on every stage of the layout
    for units, flags in zip(stages, in_bf16):
        key = (tuple(units), tuple(flags))  # stages alike (the middle ones, mostly) have one row: computed once
        if key not in seen:
            shared = None if blocks is None else (*layout_key, key)
            base = _shared_base(lay, units, flags, bt, shared, blocks)
            seen[key] = [_offloaded_row(_shared_waited(base, lay, units, flags, bt, c, t, shared, blocks),
                                        model, lay, gpu, units, flags) for c, t in zip(covers_s, terms)]
        for j in range(len(covers_s)):
            rows[j].append(seen[key][j])  # shared rows, read only: each rank's own copy is made below
    return [_busiest_first([_row_copy(_rank_mean([one[i] for i in ranks])) for ranks in rank_stages(lay)])
            for one in rows]


def _offloaded_row(row: tuple, model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute, units: list,
                   flags: list) -> tuple:
    """A stage's row with its activation offloading's exposed copies (:mod:`.activation_offload`: out beside the
    forward, back beside the backward and its recomputation) in its forward, backward and ``offload`` module; the
    row itself where the layout offloads nothing or every copy hides (a new row otherwise: rows are shared)."""
    if not (lay.offload_modules or lay.activation_offload_layers):
        return row
    moved = stage_offload_bytes(model, lay, units, flags)
    f, b, r, att, wg, mods, n_layers, kinds, fl, pairs = row
    ex_f, ex_b = offload_exposed_s(moved, host_link_Bps(gpu.name), f, b + r)
    if not (ex_f or ex_b):
        return row
    return f + ex_f, b + ex_b, r, att, wg, {**mods, "offload": ex_f + ex_b}, n_layers, kinds, fl, pairs


def _shared_base(lay: ParallelLayout, units: list, flags: list, bt, key: tuple | None, blocks: dict | None) -> tuple:
    """:func:`_stage_base` of one stage, kept in ``blocks`` (when given) by ``key``: :func:`stage_base_key` of the
    layout and the stage's units and BF16 flags as tuples. Layouts of another pp, vpp, dp or placement whose stage
    holds the same units share it (the row is read, never changed: each layout's rows are :func:`_row_copy`'s)."""
    if blocks is None:
        return _stage_base(lay, units, flags, bt)
    got = blocks.get(key)
    if got is None:
        got = blocks[key] = _stage_base(lay, units, flags, bt)
    return got


def _shared_waited(base: tuple, lay: ParallelLayout, units: list, flags: list, bt, ep_cover_s: float, terms: dict,
                   key: tuple | None, blocks: dict | None) -> tuple:
    """:func:`_waited_row` of one stage at ``ep_cover_s``, kept in ``blocks`` (when given) by ``key`` (the stage's
    :func:`_shared_base` key) and the cover, after the tag :data:`WAITED_ROW`: the host's waits
    (:func:`_host_waits_s`) read of the layout no field outside :func:`stage_base_key`'s (its blocks' times through
    ``bt``; whether the router syncs, :func:`host_syncs`, from fields of :func:`block_time_key`; the recomputation,
    :data:`STAGE_BASE_READS`), so layouts of another pp, vpp, dp or placement whose stage holds the same units share
    its rows at each cover (read, never changed: each layout's rows are :func:`_row_copy`'s)."""
    if blocks is None:
        return _waited_row(base, lay, units, flags, bt, ep_cover_s, terms)
    got = blocks.get((WAITED_ROW, key, ep_cover_s))
    if got is None:
        got = blocks[(WAITED_ROW, key, ep_cover_s)] = _waited_row(base, lay, units, flags, bt, ep_cover_s, terms)
    return got


def stage_base_key(lay: ParallelLayout) -> tuple:
    """What :func:`_stage_base` reads of ``lay`` (with the stage's units and flags): its blocks' times
    (:func:`block_time_key` of an MoE block, which holds every other block's key and the precision its BF16 layers
    change) and :data:`STAGE_BASE_READS`, after the tag :data:`STAGE_BASE` (a ``blocks`` dict holds both).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    tuple
        Hashable.
    """
    return STAGE_BASE, block_time_key(lay, True), tuple(_read_field(lay, f) for f in STAGE_BASE_READS)


def _read_field(lay: ParallelLayout, name: str):
    """A layout field as a key holds it (a list as a tuple)."""
    v = getattr(lay, name)
    return tuple(v) if isinstance(v, list) else v


STAGE_BASE = ("stage base",)  # the tag of :func:`_shared_base`'s entries among a ``blocks`` dict's block times
WAITED_ROW = ("waited row",)  # the tag of :func:`_shared_waited`'s entries among them
STAGE_BASE_READS = ("recompute", "recompute_num_layers", "recompute_early_stop", "recompute_modules")
"""Layout fields :func:`_stage_base` reads beyond its blocks' times (in :data:`BLOCK_TIME_UNREAD`, so not in
:func:`block_time_key`): the recomputation it applies to each layer."""


def _row_copy(row: tuple) -> tuple:
    """A stage's row (:func:`_stage_row`) with its dicts its own: stages alike share one computation, not objects."""
    f, b, r, att, wg, mods, n_layers, kinds, fl, pairs = row
    return f, b, r, att, wg, dict(mods), n_layers, dict(kinds), fl, {k: list(v) for k, v in pairs.items()}


def _stage_row(lay: ParallelLayout, units: list, flags: list, bt, ep_cover_s: float) -> tuple:
    """One pipeline stage's compute per micro-batch (:func:`rank_computes`): forward, backward and recompute
    seconds, attention and weight-gradient seconds, seconds by module, layers, blocks by kind, executed FLOPs and
    TP-paired GEMMs; ``units`` and ``flags`` its units and which run in BF16, ``bt(kind, bf16)`` a block's times."""
    return _waited_row(_stage_base(lay, units, flags, bt), lay, units, flags, bt, ep_cover_s)


def _waited_row(base: tuple, lay: ParallelLayout, units: list, flags: list, bt, ep_cover_s: float,
                terms: dict | None = None) -> tuple:
    """:func:`_stage_base`'s row with the host's waits at ``ep_cover_s`` (:func:`_host_waits_s`, its unit ``terms``
    shared with the layout's other stages at that cover) in its forward, backward and ``host`` module; a new row,
    ``base`` unchanged (one base serves several covers)."""
    f, b, r, att, wg, mods, n_layers, kinds, fl, pairs = base
    wait_f, wait_b = _host_waits_s(lay, list(zip(units, flags)), bt, ep_cover_s, terms)
    if wait_f or wait_b:
        mods = {**mods, "host": mods.get("host", 0.0) + wait_f + wait_b}
    return f + wait_f, b + wait_b, r, att, wg, mods, n_layers, kinds, fl, pairs


def _stage_base(lay: ParallelLayout, units: list, flags: list, bt) -> tuple:
    """:func:`_stage_row` but for the host's waits (which alone read the EP cover)."""
    counts: dict[tuple, int] = {}
    for u, bf16 in zip(units, flags):
        for kind in ([u] if u in END_UNITS else u):
            counts[(kind, bf16)] = counts.get((kind, bf16), 0) + 1
    n_layers = sum(1 for u in units if u not in END_UNITS)
    full_n = 0
    if lay.recompute == "full":
        full_n = n_layers if lay.recompute_num_layers is None else min(n_layers, lay.recompute_num_layers)
    f = b = r = att = wg = fl = 0.0
    mods: dict[str, float] = {}
    pairs: dict[tuple, list] = {}
    for (kind, bf16), n in counts.items():
        t = bt(kind, bf16)
        for key, g in t.tp_pairs_s.items():
            pairs.setdefault(key, []).append((g, n))
        if kind in END_UNITS:
            rr = 0.0
        else:  # the first full_n layers recompute fully (a layer's blocks share its fraction)
            frac = full_n / n_layers if n_layers else 0.0
            rr = frac * (t.forward_s - t.recompute_s.get(FSDP_MODULE, 0.0)) + (1 - frac) * _recomputed(
                lay, kind, t, 10 ** 9)
        f += n * t.forward_s
        b += n * t.backward_s
        r += n * rr
        fl += n * t.forward_flops * (3 + (rr / t.forward_s if t.forward_s else 0))
        att += n * t.attention_s
        wg += n * t.wgrad_s
        for k_, v_ in t.by_module_s.items():
            mods[k_] = mods.get(k_, 0.0) + n * v_
    r -= early_stopped_s(lay, units, flags, bt)
    kinds: dict[str, int] = {}
    for (kind, _), n in counts.items():
        kinds[kind] = kinds.get(kind, 0) + n
    return f, b, r, att, wg, mods, n_layers, kinds, fl, pairs


def early_stopped_s(lay: ParallelLayout, units: list, flags: list, bt) -> float:
    """Forward seconds per micro-batch that a stage's full recomputation does not replay under
    ``recompute_early_stop``: each recomputed layer's last residual add.

    PyTorch's non-reentrant checkpoint counts the tensors the forward saved for the backward and, replaying,
    stops once it has made them all again (pytorch/pytorch@0008d771 ``torch/utils/checkpoint.py``:
    ``early_stop``, default True, "stops recomputation as soon as all needed intermediate activations have been
    recomputed"). A pre-norm layer ends with its residual add, which saves nothing, so the add is not replayed;
    an earlier block's add in the same layer is, since the next norm saves its output. An MoE block ends its
    layer in NeMo AutoModel's models: its combine all-to-all (``FusedCombine`` saves no tensor, only DeepEP's
    handle) and the shared and routed experts' sum come after the un-permutation's saved ``row_id_map``
    (NVIDIA/TransformerEngine v2.12 ``pytorch/permutation.py`` ``_moe_unpermute_mask_map``), so they are not
    replayed either: the combine is the step's EP traffic (:meth:`topo.training.step._Traffic.stopped`).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``recompute``, ``recompute_num_layers``, ``recompute_early_stop``).
    units, flags : list
        The stage's units and which run in BF16 (:func:`_stage_row`'s).
    bt : callable
        ``bt(kind, bf16)``: a block's :class:`BlockTime`.

    Returns
    -------
    float
        Seconds; 0 without full recomputation or early stop. The recomputed share of layers is
        :func:`_stage_row`'s (the first ``recompute_num_layers``, as a fraction of the stage's layers).
    """
    if lay.recompute != "full" or not lay.recompute_early_stop:
        return 0.0
    layers = [(u, bf16) for u, bf16 in zip(units, flags) if u not in END_UNITS]
    if not layers:
        return 0.0
    n = len(layers) if lay.recompute_num_layers is None else min(len(layers), lay.recompute_num_layers)
    return n / len(layers) * sum(_unreplayed_s(lay, u, bf16, bt)[0] for u, bf16 in layers)


def _unreplayed_s(lay: ParallelLayout, u, bf16: bool, bt) -> tuple[float, float]:
    """GPU and host seconds per micro-batch of one fully recomputed layer's forward that its replay does not run
    under ``recompute_early_stop`` (:func:`early_stopped_s`): its last block's residual add, the kernel and its
    launch; (0, 0) without early stop or full recomputation. The one place :func:`early_stopped_s` (the replay's
    GPU time) and :func:`_replay_terms` (its host balance) read it from."""
    if lay.recompute != "full" or not lay.recompute_early_stop or u in END_UNITS:
        return 0.0, 0.0
    last = bt(u[-1], bf16)
    return last.recompute_s.get(RESIDUAL_TAG, 0.0), last.recompute_host_s.get(RESIDUAL_TAG, 0.0)


def _stops_before_combine(lay: ParallelLayout, kinds: list) -> bool:
    """Whether a fully recomputed layer's replay under ``recompute_early_stop`` ends before its MoE block's combine
    call: the MoE block ends the layer and is not checkpointed on its own (Megatron-Core's ``moe`` module replays
    the combine); the same rule as :meth:`topo.training.step._Traffic.stopped`."""
    return lay.recompute_early_stop and kinds[-1] == Block.MOE and "moe" not in modules_recomputed(lay)


def _busiest_first(rows: list[tuple]) -> list[StageCompute]:
    """Each pipeline rank's row (:func:`rank_computes`) as a :class:`StageCompute`, the compute-busiest first."""
    totals = np.array([x[0] + x[1] + x[2] for x in rows])
    first = int(np.argmax(totals))
    out = []
    for i in [first] + [j for j in range(len(rows)) if j != first]:
        f, b, r, att, wg, mods, nl, kinds, fl, pairs = rows[i]
        out.append(StageCompute(stage_s=totals, busiest=i, forward_s=f, backward_s=b, recompute_s=r, attention_s=att,
                                wgrad_s=wg, by_module_s=mods, layers=nl, blocks=kinds, executed_flops=fl,
                                tp_pairs=pairs))
    return out


def _rank_mean(rows: list[tuple]) -> tuple:
    """One pipeline rank's compute per micro-batch: the mean of its stages' rows (each runs an equal share of the
    micro-batches, :func:`rank_stages`); its layers, blocks and TP pairs are its busier stage's."""
    if len(rows) == 1:
        return rows[0]
    n = len(rows)
    mods: dict[str, float] = {}
    for row in rows:
        for k_, v_ in row[5].items():
            mods[k_] = mods.get(k_, 0.0) + v_ / n
    busier = max(rows, key=lambda x: x[0] + x[1] + x[2])
    mean = [sum(x[j] for x in rows) / n for j in (0, 1, 2, 3, 4)]
    return (*mean, mods, busier[6], busier[7], sum(x[8] for x in rows) / n, busier[9])


def _host_waits_s(lay: ParallelLayout, units: list[tuple], bt, ep_cover_s: float = 0.0,
                  terms: dict | None = None) -> tuple[float, float]:
    """Seconds a stage's GPU waits for the host per micro-batch: (forward, backward); ``units`` are the stage's
    (unit, kept in BF16) pairs, ``bt(kind, bf16)`` a block's times; ``terms``, each unit's terms by the unit and
    whether it is fully recomputed, kept across the calls of one layout, ``bt`` and cover (else this call's own).

    An eager framework's host launches every kernel no CUDA graph captures (:func:`host_launch_s`); where it is
    slower than the GPU runs them, the GPU waits (Megatron-LM ``docs/discussions/deepseek-v3-gb200-optimization``
    sec. 2: "host boundedness"). The host runs ahead of the GPU across a pass, except that a dropless MoE router
    hands its tokens per expert to the host (a device-to-host sync, ibid. sec. 2.3) before the experts' GEMMs can
    be launched: the GPU's queue is empty there, so each layer with such an MoE block runs its kernels as the host
    launches them from that sync to the next (:func:`_synced_layer_wait_s`), the expert all-to-alls in that
    stretch (``ep_cover_s``) running on the GPU while the host launches on. A padded (capacity-factor) router, a
    static rank budget or a full-iteration graph has no sync: the host then runs ahead across the pass, and each MoE
    layer's forward all-to-alls (``ep_cover_s``) are GPU time it launches behind, as in a synced layer; the backward
    has no sync of its own (a recomputed ``moe`` module replays the router, its sync and the two all-to-all calls
    there: :func:`_moe_recompute_wait_s`; a fully recomputed layer replays the forward's synced stretch, its wait
    counted again; a replay without a sync of its own, a fully recomputed layer's forward or a selectively
    recomputed module's ops, launches and runs inside the backward pass, where the host runs ahead as across the
    forward: both join the backward's balance, :func:`_replay_terms`), and its
    two all-to-alls are GPU time the host launches behind as well: without
    EP overlap they run on the compute stream in launch order, the combine's gradient dispatched and the dispatch's
    combined with the forward's handle and its token count already on the host, so neither syncs
    (NVIDIA/Megatron-LM@44151194, the Megatron-Bridge 26.04.01 pin: ``token_dispatcher.py`` ``_HybridEPManager``
    keeps ``num_permuted_tokens = tokens_per_expert.sum()`` of the forward's synced counts and passes it with the
    handle to ``hybrid_ep_combine``; ``fused_a2a.py`` ``HybridEPCombine.backward`` calls ``dispatch_with_permute``
    with both, ``HybridEPDispatch.backward`` ``combine_with_unpermute``; deepseek-ai/DeepEP@94a9f8f6
    ``deep_ep/hybrid_ep_buffer.py``: a handle skips ``metadata_preprocessing``, where the stream is synchronised).
    They carry the forward's tokens back, so the backward's cover is taken as ``ep_cover_s``
    (with an FP8 forward dispatch the backward's is BF16 and longer: a lower bound on the cover); the step still
    counts their time under ``ep``. The host calls them as it calls the forward's (``dispatch_with_permute`` and
    ``combine_with_unpermute`` again, ibid.), the block's ``calls_host_s`` backward's (:func:`ep_calls_host`), in the
    backward's host time as in the forward's."""
    synced = host_syncs(lay)
    wait_f = gpu_rest = host_rest = gpu_b = host_b = wait_rec = 0.0
    # a stage's layers are mostly alike: each unit's terms once, summed in order
    seen: dict[tuple, tuple] = {} if terms is None else terms
    layer = 0
    for unit in units:
        full = unit[0] not in END_UNITS and fully_recomputed(lay, layer)
        if (unit, full) not in seen:
            seen[(unit, full)] = (*_unit_host_terms(lay, *unit, bt, synced, ep_cover_s),
                                  *_replay_terms(lay, *unit, bt, synced, ep_cover_s, full))
        g, h, gb, hb, synced_moe, wf, wr, ws, g_rep, h_rep = seen[(unit, full)]
        gpu_b += gb + g_rep  # the backward's own, and its replay's: the host runs ahead across both
        host_b += hb + h_rep
        if synced_moe:
            wait_f += wf
            wait_rec += ws if full else wr  # the layer's forward again, or its MoE
        else:  # the layer's expert all-to-alls run on the GPU while the host launches on, synced or not
            gpu_rest += g
            host_rest += h
        layer += unit[0] not in END_UNITS
    return wait_f + max(0.0, host_rest - gpu_rest), max(0.0, host_b - gpu_b) + wait_rec


def _replay_terms(lay: ParallelLayout, u, bf16: bool, bt, synced: bool, ep_cover_s: float,
                  full: bool) -> tuple[float, float]:
    """GPU and host seconds one unit's replay adds to the backward's host balance (:func:`_host_waits_s`), per
    micro-batch: what the backward recomputes (:func:`_replayed_s`: the whole forward of a fully recomputed layer,
    else the selectively recomputed modules' ops), launched inside the backward pass, where nothing syncs and the
    host runs ahead as across the forward. A replayed MoE forward (full, or the ``moe`` module) calls its
    dispatch and combine again (:meth:`topo.training.step._Traffic.recomputed` counts their GPU time under
    ``ep``): ``ep_cover_s`` of GPU and the forward's two calls of host (``calls_host_s``), as in the forward. Under
    ``recompute_early_stop`` a fully recomputed layer's replay ends before its last residual add
    (:func:`_unreplayed_s`) and, the MoE block last, before the combine call (:func:`_stops_before_combine`: half the
    cover, one call), as :func:`early_stopped_s` and the step's EP traffic have it. A synced replay waits on a
    line of its own instead: a fully recomputed synced MoE layer the forward's stretch (:func:`_synced_layer_wait_s`),
    nothing here; a recomputed ``moe`` module of a synced layer its MoELayer's (:func:`_moe_recompute_wait_s`), the
    other modules here. End units replay nothing (:func:`_stage_row`)."""
    if u in END_UNITS:
        return 0.0, 0.0
    moe, moe_module = Block.MOE in u, "moe" in modules_recomputed(lay)
    if synced and moe and full:
        return 0.0, 0.0
    own_line = synced and moe and moe_module
    g = h = 0.0
    for kind in u:
        gk, hk = _replayed_s(lay, bt(kind, bf16), full, MOE_MODULE if own_line else ())
        g, h = g + gk, h + hk
    if moe and (full or moe_module) and not own_line:
        calls = 1 if full and _stops_before_combine(lay, list(u)) else 2  # the dispatch, and the combine
        c = bt(Block.MOE, bf16).calls_host_s  # a replayed forward's: a fresh dispatch, and the combine
        g, h = g + calls / 2 * ep_cover_s, h + (c.dispatch_s if calls == 1 else c.forward_s)
    if full:  # an early-stopped replay ends before the layer's last residual add
        gs, hs = _unreplayed_s(lay, u, bf16, bt)
        g, h = g - gs, h - hs
    return g, h


def _unit_host_terms(lay: ParallelLayout, u, bf16: bool, bt, synced: bool, ep_cover_s: float) -> tuple:
    """One unit's terms of :func:`_host_waits_s`: its GPU forward seconds (with its expert all-to-alls) and host
    launch seconds, its backward's two, whether it is a synced MoE layer, and then its forward wait, its recomputed
    ``moe`` module's and its full replay's (the forward's, or under ``recompute_early_stop`` with the MoE block last
    the stretch that ends at the un-permutation: :func:`_synced_layer_wait_s`'s ``early_stop``)."""
    kinds = [u] if u in END_UNITS else list(u)
    moe = Block.MOE in kinds  # its dispatch and combine, each pass: GPU time the host launches behind, two launches
    c = bt(Block.MOE, bf16).calls_host_s if moe else EpCallsHost()  # the forward's two calls, the backward's two
    cover = ep_cover_s if moe else 0.0
    g, h = sum(bt(k, bf16).forward_s for k in kinds), sum(bt(k, bf16).host_s for k in kinds)
    gb = sum(bt(k, bf16).backward_s for k in kinds) + cover  # the backward's pair
    hb = sum(bt(k, bf16).host_backward_s for k in kinds) + c.backward_s  # and the host's two calls of it
    if synced and moe:
        blocks, at = [bt(k, bf16) for k in kinds], kinds.index(Block.MOE)
        wf = _synced_layer_wait_s(blocks, at, ep_cover_s)
        # the MoE block ends the layer (step._Traffic.stopped: the same rule); no module is checkpointed on its own
        # in a fully recomputed layer (tidy121: activation_bytes.modules_recomputed)
        stops = _stops_before_combine(lay, kinds)
        replay = _synced_layer_wait_s(blocks, at, ep_cover_s, early_stop=True) if stops else wf
        return (g, h, gb, hb, True, wf, _moe_recompute_wait_s(lay, bt(Block.MOE, bf16), ep_cover_s), replay)
    return g + cover, h + c.forward_s, gb, hb, False, 0.0, 0.0, 0.0


def host_syncs(lay: ParallelLayout) -> bool:
    """Whether an MoE block of the layout syncs its tokens per expert to the host each forward.

    A dropless router does (:func:`_synced_layer_wait_s`); a padded one (``moe_capacity_factor``) does not: its
    every split is the capacity, known on the host (NVIDIA/Megatron-LM@23e00ed0 core_v0.14.0
    ``megatron/core/transformer/moe/token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.preprocess``, ``drop_and_pad``;
    ``_maybe_dtoh_and_synchronize`` copies nothing); nor does HybridEP with a static rank budget
    (``moe_expert_rank_capacity_factor``: the receive buffer is sized on the host, the counts stay on the device;
    NVIDIA/Megatron-LM@d98e8a64 ``token_dispatcher.py`` ``_HybridEPManager.setup_metadata`` and
    docs/user-guide/features/paged_stash.md, "sync-free"), nor a full-iteration graph (no host in the step;
    without a rank budget no graph holds the sync: ``topo train`` says so in a note).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``moe_capacity_factor``, ``moe_expert_rank_capacity_factor``, ``cuda_graph_scope``).

    Returns
    -------
    bool
        True where the host waits for the counts.
    """
    return (lay.moe_capacity_factor is None and lay.moe_expert_rank_capacity_factor is None
            and "full_iteration" not in lay.cuda_graph_scope)


def _synced_layer_wait_s(blocks: list[BlockTime], moe: int, ep_cover_s: float = 0.0,
                         early_stop: bool = False) -> float:
    """Seconds the GPU waits for the host in one layer of a dropless MoE block, forward, per micro-batch.

    Megatron-Core's dropless dispatchers read the tokens per expert on the host before the expert-parallel
    exchange (``cuda_sync_point = "before_ep_alltoall"``, NVIDIA/Megatron-LM@d98e8a64dd
    ``megatron/core/transformer/moe/token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.preprocess``; the flex
    dispatcher's DeepEP / HybridEP calls wait for their received counts alike): the host blocks there until the
    GPU has run every kernel before it, so the GPU starts each sync-to-sync stretch idle and the host cannot run
    ahead across it. In the steady state of identical layers that stretch is the MoE block's ops from the sync
    (:data:`SYNC_OP`) on, the layer's other blocks, then the MoE block's ops up to the sync (the next layer's,
    taken equal). Each op's kernels are launched one after another by the host and run in launch order on the
    GPU (a two-stage flow line, :func:`_launch_line_s`); the wait is the stretch's length over its GPU time. It is
    at least the host's launches less the GPU's time, and more where the host's launches bunch up (an op's
    launches right after the sync, a router's small kernels just before the next).

    ``ep_cover_s``: the stretch's expert exchange (the EP all-to-alls and the experts' etp all-gather and
    reduce-scatter: :func:`topo.training.step._ep_cover_s`), half of it the dispatch right after the sync (the host
    launches the permutation and the experts while it runs) and half the combine after the experts (before the
    block's residual), each its own part of the block's ``calls_host_s`` of host (:func:`ep_calls_host`): the host
    launches the dispatch only once the sync has returned, so the GPU, drained, idles for that launch too (HybridEP's dropless forward
    syncs inside ``metadata_preprocessing``, after the routing map's all-gather and the preprocessing kernel, and
    launches the dispatch kernel after it: deepseek-ai/DeepEP@94a9f8f6 hybrid-ep
    ``csrc/hybrid_ep/executor/executor.cu`` ``metadata_preprocess_core``'s ``cudaStreamSynchronize``, then
    ``hybrid_ep.cu`` ``dispatch_with_permute``; Megatron-Core's all-to-all dispatcher syncs before its
    all-to-all, above). The step counts their GPU time apart, so the wait is the line's length over the GPU's
    compute and those. ``math.inf`` gives no wait (a lower bound: the layout search's). The stretch opens with
    the sync's round trip (the MoE block's ``sync_s``: the copy lands and the host thread resumes), host time
    before the first launch with the GPU idle.

    ``early_stop``: the replay of a layer the MoE block ends under ``recompute_early_stop``, which stops after the
    un-permutation (:func:`early_stopped_s`): no combine call, no residual, as the step's EP traffic drops the
    combine (:meth:`topo.training.step._Traffic.stopped`)."""
    if math.isinf(ep_cover_s):
        return 0.0
    synced, before = _synced_stretch(blocks[moe], ep_cover_s, early_stop=early_stop)
    return _stretch_wait_s([*synced, *(op for b in blocks[moe + 1:] + blocks[:moe] for op in b.launch_seq), *before])


def _synced_stretch(m: BlockTime, ep_cover_s: float, moe_module: bool = False,
                    early_stop: bool = False) -> tuple[list, list]:
    """A synced MoE block's forward ops as the host launches them around its sync, each ``(host seconds, GPU
    seconds, kernels)``: from the sync (its round trip ``sync_s``, the dispatch call, the ops from the sync on, the
    combine call, the block's last op, its residual) and the ops before it (the norm and the router, up to the
    device-to-host copy); each call its part of ``calls_host_s`` of host (the forward dispatch's, the forward
    combine's) and half of ``ep_cover_s`` on the GPU.
    ``moe_module``: only the MoELayer's ops (:data:`MOE_MODULE`, what recomputing ``moe`` replays: no norm, no
    residual, the combine last). ``early_stop``: the replay ends with the ops before the combine (no combine call,
    no residual: :func:`early_stopped_s`). The one place :func:`_synced_layer_wait_s` and
    :func:`_moe_recompute_wait_s` read the sequence from."""
    ops, mods = m.launch_seq, m.launch_modules
    at = m.sync_at if m.sync_at >= 0 else len(ops)
    if moe_module:
        keep = [i for i, mod in enumerate(mods) if mod in MOE_MODULE]
        at, ops = sum(1 for i in keep if i < at), [ops[i] for i in keep]
    c = m.calls_host_s
    dispatch, combine = (c.dispatch_s, ep_cover_s / 2, 1.0), (c.combine_s, ep_cover_s / 2, 1.0)
    if at == len(ops):
        after = [dispatch] if early_stop else [dispatch, combine]
    else:
        body, tail = (ops[at:], []) if moe_module else (ops[at:-1], ops[-1:])
        after = [dispatch, *body] if early_stop else [dispatch, *body, combine, *tail]
    return [(m.sync_s, 0.0, 1.0), *after], list(ops[:at])


def _stretch_wait_s(seq: list[tuple]) -> float:
    """Seconds the GPU, idle at the stretch's start, waits for the host over ``seq``: the flow line's length
    (:func:`_launch_line_s`) less the GPU's time."""
    return _launch_line_s(seq) - sum(g for _, g, _ in seq)


def _launch_line_s(seq: list[tuple]) -> float:
    """Seconds until the GPU finishes ``seq``'s ops, each ``(host seconds, GPU seconds, kernels)``, when one host
    thread launches them in order from time 0 and the GPU, idle at 0, runs each kernel once launched and the one
    before it is done. An op's ``n`` kernels are taken alike (``a = host / n``, ``b = gpu / n`` each): the GPU
    finishes them at ``max(gpu_free + n b, host_before + n max(a, b) + min(a, b))`` (the flow line's recurrence
    ``gpu_k = max(gpu_{k-1}, host_before + k a) + b`` solved over ``k``)."""
    host = gpu = 0.0
    for h, g, n in seq:
        n = max(1.0, n)
        a, b = h / n, g / n
        gpu = max(gpu + g, host + n * max(a, b) + min(a, b))
        host += h
    return gpu


MOE_MODULE = ("moe", "moe_act", "shared_experts", "shared_experts_act")
"""What Megatron-Core's MoELayer forward runs (router, dispatch, experts and their activation, the shared experts
and theirs, combine): what recomputing its ``moe`` module replays (:func:`_recomputed`'s alias)."""


def _moe_recompute_wait_s(lay: ParallelLayout, t: BlockTime, ep_cover_s: float = 0.0) -> float:
    """Seconds the backward's GPU waits for the host in one MoE block's recomputed forward, per micro-batch.

    With ``"moe"`` in ``recompute_modules`` Megatron-Core checkpoints the MoELayer's whole forward, the router,
    ``self.dispatch``, the experts and ``self.combine`` inside one ``custom_forward`` under
    ``tensor_parallel.checkpoint`` (``te_checkpoint`` in FP8) (NVIDIA/Megatron-LM@00119989, @6cd6ea530e and
    @44151194 ``megatron/core/transformer/moe/moe_layer.py`` ``MoELayer.forward``; ``moe_act`` checkpoints only
    the experts' activation, ``experts.py``'s ``CheckpointWithoutOutput``), so the backward runs the router again,
    syncs its tokens per expert to the host again (a fresh dispatch has no handle: deepseek-ai/DeepEP@94a9f8f6
    hybrid-ep ``dispatch_with_permute`` preprocesses and syncs again) and calls the dispatch and the combine
    again. The GPU, drained at the sync, waits as in the forward pass (:func:`_synced_layer_wait_s`, one rule):
    the flow line (:func:`_launch_line_s`) over the MoELayer's own ops from the sync (:func:`_synced_stretch`: the
    round trip ``sync_s``, the dispatch call, the experts, the combine call, each call its part of ``calls_host_s``
    with half of ``ep_cover_s``, which the step counts under ``ep``), then the router's replayed launches up to
    the next sync, less the GPU's time: at least the round trip and the dispatch call's launch (the host makes it
    only once the sync has returned) and at least the host's launches beyond the GPU's time. The backward's own
    launches between two replays are in the backward's host balance (:func:`_host_waits_s`), not in this line. A
    fully recomputed layer replays the forward's synced stretch (:func:`_host_waits_s`). ``math.inf`` (the search's
    lower bound) leaves the round trip and that launch, the line's limit."""
    if "moe" not in modules_recomputed(lay):
        return 0.0
    if math.isinf(ep_cover_s):
        return t.sync_s + t.calls_host_s.dispatch_s
    synced, before = _synced_stretch(t, ep_cover_s, moe_module=True)
    return _stretch_wait_s([*synced, *before])


def autograd_add_bytes(lay: ParallelLayout) -> float:
    """Bytes per weight-gradient element a micro-batch's in-place add moves under PyTorch's own accumulation
    (``wgrad_output = "autograd"``), as a mean over the step's ``m`` micro-batches.

    ``AccumulateGrad`` steals the first micro-batch's new gradient as ``param.grad`` (no copy) and adds each later
    one in place, ``variable_grad += new_grad`` (pytorch/pytorch v1.8.0, the release of the paper's NGC 20.12
    container, ``torch/csrc/autograd/functions/accumulate_grad.h`` ``accumulateGrad``: "AccumulateGrad steals
    new_grad if it's stealable", "AccumulateGrad performs variable_grad += new_grad in-place"): the new gradient
    read (2 bytes), ``param.grad`` read and written (``grad_bytes`` each), on ``m - 1`` of the ``m``
    micro-batches. Megatron-LM@a8d172b3 ``megatron/schedules.py`` runs the micro-batches' backwards into the same
    ``param.grad`` (torch DDP under ``no_sync`` but the last; local DDP without contiguous buffers registers no
    hook, ``megatron/model/distributed.py`` lines 123-165). The add kernel's launch is not priced (eager launches
    run ahead of the GPU).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``grad_bytes``, ``microbatches``).

    Returns
    -------
    float
        ``(2 + 2 grad_bytes) (m - 1) / m``.
    """
    m = lay.microbatches
    return (ACT + 2.0 * lay.grad_bytes) * (m - 1) / m


UNSCALE_BYTES = 8.0
"""Bytes per parameter of the gradient scaler's unscale and inf / NaN check (``loss_scaling``): every fp32 main
gradient read and written in place by ``torch._amp_foreach_non_finite_check_and_unscale_``
(NVIDIA/Megatron-LM@a8d172b3 ``megatron/optimizer/optimizer.py`` lines 315-339, each step, whatever the scaler)."""


def optimizer_step_bytes(lay: ParallelLayout) -> float:
    """Bytes per local parameter the optimizer step moves through HBM: :data:`OPTIMIZER_STEP_BYTES` (fused Adam with
    its gradient buffer zeroed), and

    - ``wgrad_output = "autograd"`` (2021's ``Float16OptimizerWithFloat16Params`` on ``param.grad``,
      NVIDIA/Megatron-LM@a8d172b3 ``megatron/optimizer/optimizer.py`` lines 283-312): no buffer zeroed
      (``zero_grad(set_to_none=True)`` frees the gradients, -4) but each ``param.grad`` copied into a new fp32 main
      gradient (``model_param.grad.float()``: ``grad_bytes`` read, 4 written);
    - ``loss_scaling``: :data:`UNSCALE_BYTES`.

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``wgrad_output``, ``grad_bytes``, ``loss_scaling``).

    Returns
    -------
    float
        Bytes per parameter.
    """
    copy = lay.grad_bytes if lay.wgrad_output == "autograd" else 0.0  # - 4 zeroed + grad_bytes read + 4 written
    return OPTIMIZER_STEP_BYTES + copy + (UNSCALE_BYTES if lay.loss_scaling else 0.0)


def optimizer_step_s(local_params: float, gpu: GpuCompute, lay: ParallelLayout | None = None) -> float:
    """Seconds of a fused Adam step over ``local_params`` (the GPU's shard), bandwidth-bound: the layout's
    :func:`optimizer_step_bytes` a parameter (None: :data:`OPTIMIZER_STEP_BYTES`)."""
    per = OPTIMIZER_STEP_BYTES if lay is None else optimizer_step_bytes(lay)
    return memory_s(gpu.kernels, local_params * per)
