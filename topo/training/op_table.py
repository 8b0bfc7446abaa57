"""One block's operators as the step model prices them, one row each: GPU seconds forward and backward (launch
gaps included), the host's launch seconds of each pass, the kernels each pass launches and whether a CUDA graph
captures it (what ``topo train --ops`` prints, to set beside a published per-op profile), the end units' too, and
each pipeline rank's compute per micro-batch, to see which stage sets the pace. The rows are
:func:`.operators.block_ops` timed by :func:`.operators.op_passes_s`, :func:`.operators.host_launch_s` and
:func:`.operators.kernels_launched`, the functions :func:`.operators.block_time` sums; a block's time in the step
also depends on what the table does not show (the host waits of a dropless MoE block, recomputation, the SMs
communication holds, layers kept in BF16 in an FP8 run)."""

from __future__ import annotations

from ..fabric.fabric import Fabric
from .gpus import GpuCompute, gpu_compute
from .mapping import default_placement
from .model import ModelSpec
from .operators import (END_UNITS, block_ops, captured, host_launch_s, kernels_launched, op_passes_s,
                        pipeline_units, rank_computes)
from .module_recipes import MODULE_OPS, parse_module_recipes
from .parallel import ParallelLayout
from .tp_overlap import pass_margins

__all__ = ["block_op_table", "stage_table", "step_op_table", "step_stage_table", "unmatched_module_recipes"]


def block_op_table(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute) -> dict[str, list[dict]]:
    """Each block kind of ``model``'s layers, its operators for one micro-batch on one GPU.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
        The layout, placed (:func:`step_op_table` places it as :func:`.step.estimate_step` does).
    gpu : GpuCompute
        The GPU and its host CPU.

    Returns
    -------
    dict
        Block kind (``*``, ``W``, ``-``, ``E``, ``M``), then the end units (``embedding``, ``logits``: the final
        norm, the output head and the loss; ``mtp_head`` where the model has multi-token prediction: its norms,
        projection and its own output head and loss) -> rows ``{op, module, kind, forward_s, backward_s,
        host_forward_s, host_backward_s, kernels_forward, kernels_backward, captured}``, in the block's order.
    """
    kinds = [*dict.fromkeys(k for layer in model.blocks for k in layer),
             *(u for u in END_UNITS if u != "mtp_head" or model.mtp_layers)]
    return {kind: [_row(op, lay, gpu) for op in block_ops(model, lay, kind, gpu.generation)] for kind in kinds}


def unmatched_module_recipes(model: ModelSpec, lay: ParallelLayout) -> tuple[str, ...]:
    """The modules ``lay.module_recipes`` names that none of ``model``'s operators belongs to (no Mamba-2 mixer in a
    dense transformer, no experts' latent projection without a latent MoE): their entries change nothing.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout

    Returns
    -------
    tuple of str
        Megatron-Core module names (:data:`.module_recipes.MODULE_OPS`), in the layout's order; empty when each
        names at least one operator.
    """
    kinds = [*dict.fromkeys(k for layer in model.blocks for k in layer),
             *(u for u in END_UNITS if u != "mtp_head" or model.mtp_layers)]
    present = {(op.module, op.name) for kind in kinds for op in block_ops(model, lay, kind)}
    return tuple(name for name in parse_module_recipes(lay.module_recipes)
                 if not present.intersection(MODULE_OPS.get(name, ())))


def stage_table(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute, ep_cover_s: float = 0.0) -> list[dict]:
    """Each pipeline rank's compute per micro-batch as :func:`.operators.rank_computes` prices it (the busiest
    rank's, times the micro-batches, is the step's ``compute`` where no communication holds SMs beside it).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
        The layout, placed.
    gpu : GpuCompute
    ep_cover_s : float
        The expert all-to-alls' cover of a dropless layer's host waits (the step's ``ep_cover_s``).

    Returns
    -------
    list of dict
        One per pipeline rank, in rank order: ``{rank, layers, ends, forward_s, backward_s, recompute_s,
        microbatch_s, by_module_s, busiest}``; ``layers`` its layers (an MTP module's counted), ``ends`` its end
        units (``embedding``, ``logits``, ``mtp_head``), ``by_module_s`` its seconds per module per micro-batch.
    """
    ranks = rank_computes(model, lay, gpu, ep_cover_s)
    units = pipeline_units(model, lay)
    return [{"rank": r.busiest, "layers": r.layers, "ends": [u for u in units[r.busiest] if u in END_UNITS],
             "forward_s": r.forward_s, "backward_s": r.backward_s, "recompute_s": r.recompute_s,
             "microbatch_s": r.microbatch_s, "by_module_s": dict(r.by_module_s), "busiest": r is ranks[0]}
            for r in sorted(ranks, key=lambda r: r.busiest)]


def _row(op, lay: ParallelLayout, gpu: GpuCompute) -> dict:
    fwd, bwd = op_passes_s(op, gpu, lay)
    kw = dict(graphs=lay.cuda_graph_scope, precision=lay.precision, amax_pass=lay.fp8_amax_pass,
              scale_kernel=lay.fp8_scale_inverse_kernel)
    runs = {"forward": op.passes != "backward", "backward": op.passes != "forward"}
    kernels = {p: kernels_launched(op, lay.precision, p == "backward", lay.fp8_amax_pass,
                                   lay.fp8_scale_inverse_kernel) if runs[p] else 0.0
               for p in runs}
    return {"op": op.name, "module": op.module, "kind": op.kind, "forward_s": fwd, "backward_s": bwd,
            "host_forward_s": host_launch_s(op, gpu, **kw), "host_backward_s": host_launch_s(op, gpu, True, **kw),
            "kernels_forward": kernels["forward"], "kernels_backward": kernels["backward"],
            "captured": captured(op, lay.cuda_graph_scope), "sm_margin": pass_margins(op, lay)}


def step_op_table(fabric: Fabric, model: ModelSpec, lay: ParallelLayout,
                  efficiency: float | None = None) -> dict[str, list[dict]]:
    """:func:`block_op_table` of ``model`` laid out as ``lay`` on ``fabric``, the layout placed and the GPU built
    with the spec's host CPU as :func:`.step.estimate_step` places and builds them.

    Parameters
    ----------
    fabric : Fabric
    model : ModelSpec
    lay : ParallelLayout
    efficiency : float, optional
        Large-GEMM efficiency instead of the generation's (``topo train --efficiency``).

    Returns
    -------
    dict
        As :func:`block_op_table`.
    """
    return block_op_table(model, *_placed(fabric, lay, efficiency))


def step_stage_table(fabric: Fabric, model: ModelSpec, lay: ParallelLayout, efficiency: float | None = None,
                     ep_cover_s: float = 0.0) -> list[dict]:
    """:func:`stage_table` of ``model`` laid out as ``lay`` on ``fabric``, placed as :func:`step_op_table` places it.

    Parameters
    ----------
    fabric : Fabric
    model : ModelSpec
    lay : ParallelLayout
    efficiency : float, optional
        Large-GEMM efficiency instead of the generation's (``topo train --efficiency``).
    ep_cover_s : float
        As :func:`stage_table`'s (:attr:`.result.StepResult.ep_cover_s` of the step).

    Returns
    -------
    list of dict
        As :func:`stage_table`.
    """
    return stage_table(model, *_placed(fabric, lay, efficiency), ep_cover_s)


def _placed(fabric: Fabric, lay: ParallelLayout, efficiency: float | None) -> tuple[ParallelLayout, GpuCompute]:
    """The layout placed and the GPU built with the spec's host CPU, as :func:`.step.estimate_step` does."""
    spec = fabric.spec
    placed, _ = default_placement(lay, spec.gpus_per_domain, fabric.layout.num_gpus)
    return placed, gpu_compute(spec.gpu, efficiency, host_cpu=spec.host_cpu[0])
