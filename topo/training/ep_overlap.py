"""What Megatron-Core's EP all-to-all overlap (``overlap_moe_expert_parallel_comm``, the combined 1F1B) hides.

The schedule runs one micro-batch's forward of a layer beside another micro-batch's backward of a layer, the
compute on one CUDA stream and the all-to-alls on another (NVIDIA/Megatron-LM@6cd6ea530e, the Megatron-LM that
Megatron-Bridge@7ded17dae, PR #5094's matched EP-overlap A/B, pins as ``3rdparty/Megatron-LM``;
``megatron/core/models/common/model_chunk_schedule_plan.py``, ``TransformerLayerSchedulePlan.run``, the same
order at @01cf4fb5). The host issues, per layer::

    combine_bwd(b) attn_fwd(f) mlp_bwd(b) dispatch_fwd(f) mlp_bwd_dw(b) dispatch_bwd(b) mlp_fwd(f) combine_fwd(f)
    attn_bwd(b)

Each node waits on its micro-batch's CUDA event before it runs and records it after
(``megatron/core/pipeline_parallel/utils.py`` ``ScheduleNode.stream_acquire_context``; one event a model-chunk
plan, so one chain a micro-batch), and each stream runs in issue order. So the MLP's backward waits for the combine's
backward, the dispatch's forward for the attention's forward, the dispatch's backward for the MLP's whole backward
(``mlp_bwd_dw`` records no event and, with ``delay_wgrad_compute`` off, Megatron-Core's default and the A/B's
recipe, runs nothing: the weight gradient is in ``mlp_bwd``, ``models/common/utils.py``
``TransformerLayerNode.backward_dw``), the MLP's forward for the dispatch's forward, the attention's backward for
the dispatch's backward and the combine's forward for the MLP's forward; the next layer's attention forward waits
for this combine's forward and its combine backward for this attention's backward. The layer runs in four phases,
each as long as the longer of its two streams::

    comm_stream: combine_bwd | dispatch_fwd | dispatch_bwd | combine_fwd
    comp_stream: attn_fwd    | mlp_bwd      | mlp_fwd      | attn_bwd

so a layer exposes what each call exceeds the compute beside it by, not what the whole step's all-to-alls exceed
the whole step's compute by, nor what the two dispatches exceed both MLP passes by (the dispatch's backward cannot
start before the MLP's backward ends, nor the MLP's forward before the dispatch's forward). The ``attn`` node is
the layer's attention block and the MoE block up to the dispatch (its norm, router and permutation) and the shared
experts; the ``mlp`` node the routed experts (``build_layer_callables``: attention, then ``moe_dispatch``,
``mlp``, ``moe_combine``). The shared experts run in the ``attn`` node's forward
(``submodule_pre_dispatch_forward`` calls ``layer.mlp.shared_experts_compute`` beside the router, NVIDIA/
Megatron-LM@01cf4fb5 and @d98e8a64 ``megatron/core/models/gpt/fine_grained_callables.py``; their output is
detached there and added in ``moe_combine``, so their backward runs in the ``attn`` node's backward, their weight
gradient with the attention's, ``shared_expert_dw_callable``), since the EP overlap forbids the dispatcher's own
shared-expert overlap (``transformer_config.py``: "disable moe_shared_expert_overlap when enabling
overlap_moe_expert_parallel_comm"). Forwards and backwards that have no partner run alone, their all-to-alls exposed: an
interleaved pipeline's warm-up forwards and cool-down backwards (NVIDIA/Megatron-LM@00611e6e
``pipeline_parallel/schedules.py`` ``get_pp_rank_microbatches``: ``(p - i - 1) x 2 + (v - 1) x g`` warm-up
chunk-micro-batches on stage ``i``, ``g = microbatch_group_size_per_vp_stage``, by default ``p``, and one more
with ``overlap_moe_expert_parallel_comm`` "to ensure the forward and backward computations are independent in all
1f1b steps"; stage 0 taken, which has the most and finishes the step), ``p - 1`` for a plain 1F1B (assumption: the
combined schedule is built for the interleaved and the unpipelined cases), and without pipelining the first
forward and the last backward (the pp = 1 combined schedule pairs each forward with the previous micro-batch's
backward: Megatron-LM MR3470, "support ep a2a overlapping at pp=1").
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache

from ..resources import data_dir
from .gpus import GpuCompute
from .model import Block, ModelSpec
from .operators import ALLTOALL_PREPROCESS_OPS, MOE_ROUTER_OPS, SHARED_EXPERT_MODULES, block_ops, op_passes_s
from .parallel import ParallelLayout

__all__ = ["ATTN_NODE_MODULES", "LayerParts", "moe_layer_parts", "layer_exposed_s", "unpaired_share",
           "unpaired_note", "published_gemm_loss"]

ATTN_NODE_OPS = (*MOE_ROUTER_OPS, *ALLTOALL_PREPROCESS_OPS, "permute", "permute_grad", "residual")
"""Operators of an MoE block (:func:`topo.training.operators.block_ops`) that run with the combined 1F1B's
``attn`` node (the norm, the router, learned or the benchmark gate, the all-to-all dispatcher's token counts and
the permutation before the dispatch; the residual add); with those of ``ATTN_NODE_MODULES``, the block's others (the routed experts, their activation and bias) are the ``mlp`` node."""

ATTN_NODE_MODULES = SHARED_EXPERT_MODULES
"""Modules of an MoE block whose operators run with the ``attn`` node: the shared experts (module doc)."""


@dataclass(frozen=True)
class LayerParts:
    """One MoE layer's compute per micro-batch, seconds, by node of the combined 1F1B: the attention node's
    forward and backward, and the MLP node's."""

    attn_f: float
    attn_b: float
    mlp_f: float
    mlp_b: float


def moe_layer_parts(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute) -> LayerParts:
    """The compute of the model's first layer with an MoE block, split by combined-1F1B node.

    Parameters
    ----------
    model : ModelSpec
        A model with an MoE block.
    lay : ParallelLayout
    gpu : GpuCompute

    Returns
    -------
    LayerParts
    """
    layer = next(u for u in model.blocks if Block.MOE in u)
    af = ab = mf = mb = 0.0
    for kind in layer:
        for op in block_ops(model, lay, kind, gpu.generation):
            f, b = op_passes_s(op, gpu, lay)
            if kind == Block.MOE and op.name not in ATTN_NODE_OPS and op.module not in ATTN_NODE_MODULES:
                mf, mb = mf + f, mb + b
            else:
                af, ab = af + f, ab + b
    return LayerParts(af, ab, mf, mb)


def layer_exposed_s(parts: LayerParts, dispatch_fwd_s: float, dispatch_bwd_s: float, combine_fwd_s: float,
                    combine_bwd_s: float) -> float:
    """Seconds of all-to-all one paired layer (a forward beside a backward) exposes: the four phases of the
    combined 1F1B, each the longer of its streams (module doc): the combine's backward beside the attention's
    forward, the dispatch's forward beside the MLP's backward, the dispatch's backward beside the MLP's forward,
    the combine's forward beside the attention's backward.

    Parameters
    ----------
    parts : LayerParts
        The layer's compute by node.
    dispatch_fwd_s, dispatch_bwd_s, combine_fwd_s, combine_bwd_s : float
        The layer's four all-to-alls, one call each.

    Returns
    -------
    float
    """
    return (max(0.0, combine_bwd_s - parts.attn_f) + max(0.0, dispatch_fwd_s - parts.mlp_b)
            + max(0.0, dispatch_bwd_s - parts.mlp_f) + max(0.0, combine_fwd_s - parts.attn_b))


def unpaired_share(lay: ParallelLayout) -> float:
    """The share of stage 0's forwards (and, as many, backwards) that run with no partner (module doc).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    float
        In [0, 1].
    """
    alone, total = _unpaired_counts(lay)
    return min(total, alone) / total


def _unpaired_counts(lay: ParallelLayout) -> tuple[int, int]:
    """Stage 0's forwards with no partner and all its forwards (chunk-micro-batches) a step (module doc)."""
    alone = 1 if lay.pp == 1 else lay.warmup_chunks(0, extra=1 if lay.vpp > 1 else 0)
    return alone, lay.microbatches * lay.vpp


def unpaired_note(lay: ParallelLayout) -> str:
    """Why ``overlap_ep`` hides nothing (walk23: Qwen3-235B on 7,168 GB200 at pp 2 x vpp 4 with 2 micro-batches
    a step: every forward is a warm-up one, the all-to-alls all exposed, the step slower than without the
    overlap); "" when some forward has a partner.

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    str
    """
    alone, total = _unpaired_counts(lay)
    if alone < total:
        return ""
    where = ("without pipelining the first forward has no backward beside it" if lay.pp == 1 else
             f"stage 0's warm-up holds {alone} forwards before its first backward")
    return (f"overlap_ep hides nothing here: {where}, and the step has {total} (micro-batches {lay.microbatches}"
            f"{f' x vpp {lay.vpp}' if lay.vpp > 1 else ''}), so no forward runs beside a backward and every expert "
            f"all-to-all is exposed; more micro-batches a step (a larger global batch, a smaller dp or micro-batch) "
            f"give the combined 1F1B pairs")


@lru_cache(maxsize=1)
def _gemm_loss_table() -> dict:
    data = tomllib.loads((data_dir("compute") / "ep_overlap.toml").read_text(encoding="utf-8"))
    return data["gemm_loss"]


def published_gemm_loss(gpu_name: str, lay: ParallelLayout) -> float | None:
    """The fraction of the concurrent GEMMs' rate that the expert all-to-all's kernels cost under the combined 1F1B,
    where their authors measured it (``topo/data/compute/ep_overlap.toml``: DeepEP V1 at 20 SMs on H100, ~20%,
    arXiv 2603.07685 sec. 4.2.3), and as a floor at more SMs on the same GPU and backend (the kernels then take
    more SMs for the same traffic: a cost that fell as they took more would be no physics,
    :func:`.step.ep_overlap_cost_s` takes the larger of it and the SM share); None for any other GPU or
    dispatcher, or fewer SMs (the SM share then stands).

    Parameters
    ----------
    gpu_name : str
        The GPU (``GpuCompute.name``).
    lay : ParallelLayout

    Returns
    -------
    float or None
    """
    row = _gemm_loss_table().get(gpu_name)
    if not isinstance(row, dict) or lay.ep_dispatcher != "deepep":
        return None
    if lay.ep_flex_backend != row["backend"] or lay.ep_comm_sms < row["sms"]:
        return None
    return float(row["loss"])
