"""Transformer Engine's amax reduction under per-tensor delayed FP8 scaling: what each step pays for it.

Under delayed scaling every FP8 module of a rank registers its amax tensors in one global buffer per autocast
(recipe and group): ``3 x num_gemms`` FP32 amaxes forward (input, weight, output) and ``2 x num_gemms`` backward
(output gradient, input gradient) (NVIDIA/TransformerEngine@bee4649c, the TE NeMo 25.04 pins,
``transformer_engine/pytorch/module/base.py`` line 503, ``fp8.py`` ``add_fp8_tensors_to_global_buffer`` lines
205-252). When the outermost ``fp8_autocast`` exits with gradients on, and again when the region's first FP8 module
finishes its backward, TE reduces the whole buffer (``fp8.py`` ``reduce_and_update_fp8_tensors`` lines 334-385,
``fp8_autocast_exit`` 432-441, ``module/linear.py`` lines 341-345 and 682): ``torch.cat`` of the amaxes, one
``torch.distributed.all_reduce`` (MAX, ``async_op=False``: the compute stream waits for it) over the autocast's
group, and one fused amax-history and scale update (``tex.fused_amax_and_scale_update_after_reduction``).
Megatron-Core wraps each model chunk's transformer block in one autocast for delayed scaling, over the
tensor x data x context parallel group (core_v0.12.0 ``transformer/transformer_block.py`` lines 500-509,
``fp8_utils.py`` 417-421, ``parallel_state.py`` 1345-1352; docs/calibration-findings.md section 150), so a
pipeline rank runs one forward and one backward reduction per model chunk and micro-batch. A recomputed forward
runs without gradients and reduces nothing (``fp8_autocast_exit``: ``torch.is_grad_enabled()``).

Counts and sizes are data (``kernels.toml`` ``[fp8_amax]``); the all-reduce's time is the fabric's (the step's
collective engine), each call with the launch gaps of its two kernels. TE skips the all-reduce when its group has one
rank (``torch.distributed.get_world_size(group=group) > 1``, ``fp8.py`` line 355) and still runs the concatenation
and the update; the step's ``fp8_amax`` line holds both, the comm table the all-reduce alone, where there is one.

Whether a layout runs it (:func:`amax_reduced`): TE's ``DelayedScaling`` reduces by default (``reduce_amax: bool =
True`` in ``transformer_engine/common/recipe/__init__.py`` at v1.5, v1.9, v2.2, bee4649c, v2.5, v2.9, v2.13 and
v2.18, read in the local mirror of NVIDIA/TransformerEngine), and Megatron-Core builds its recipe without setting it,
so a delayed-scaling layout reduces unless it says otherwise. Megatron-Core's default recipe is delayed (``--fp8-recipe``
``default='delayed'`` in ``megatron/training/arguments.py`` at core_v0.12.0-core_v0.15.0; ``TransformerConfig.fp8_recipe
= "delayed"`` at NVIDIA/Megatron-LM@d98e8a64, whose arguments are generated from it), so a layout with ``fp8_recipe``
unset runs it too (:func:`delayed_scaling`). The group (:func:`amax_group`) is Megatron-Core's
``get_amax_reduction_group(with_context_parallel=True, tp_only_amax_red=...)`` (Megatron-LM@d98e8a64
``megatron/core/parallel_state.py`` lines 1877-1900, ``fp8_utils.py`` lines 859-860): tensor x data x context
ranks, or tensor x context ranks with ``TransformerConfig.tp_only_amax_red`` (line 646, "reduce the FP8 AMAX only
in the TP or TP-CP domain"; a config field, which Megatron-LM's ``arguments.py`` line 2335 keeps off its command
line). Current, block-wise and MXFP8 scaling keep no amax
history and no such buffer (the buffer "should only be non-empty for fp8 delayed scaling", ``fp8.py`` line 339).

Per-tensor current scaling has a reduction of its own where a module runs sequence parallel (:func:`sp_amax_reduced`):
TE gives a column-parallel layer's input quantizer and a row-parallel layer's output-gradient quantizer the TP group
as their ``amax_reduction_group`` (``_customize_quantizers_float8_current_scaling``, TE v2.2 ``module/linear.py``
lines 1242-1266, ``layernorm_linear.py`` 1441-1448, ``layernorm_mlp.py`` 1623-1653; the same to v2.17; v2.18 sets it
per call), so the tensor is gathered under one scale: each such quantisation all-reduces its one FP32 amax (MAX) over
the TP group and the compute stream waits for it (``allreduce(...)->wait()``, v2.2 ``csrc/extensions/cast.cpp`` lines
54-62) before the scale and the cast. Megatron-Core's layers are column-parallel for the QKV and fc1 projections
(and Mamba's ``in_proj``) and row-parallel for the output projection and fc2 (``out_proj``)
(``megatron/core/models/gpt/gpt_layer_specs.py``, ``mamba/mamba_layer_specs.py`` at core_v0.14.0): one reduction
forward and one backward for each of the step's sequence-parallel all-gathers of a TP block
(:func:`topo.training.step.sp_quantisations`); TE's ``GroupedLinear`` refuses TP with current scaling, so routed
experts have none. Kernels beside it: none (``kernels.toml`` ``[fp8_amax_current]``).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from .comm import CommEngine
from .model import BLOCK_KINDS, ModelSpec
from .operators import block_ops
from .parallel import ParallelLayout, current_scaling, delayed_scaling
from .result import DimensionComm

__all__ = ["amax_group", "amax_reduced", "amax_kernels_s", "amax_reductions", "amax_step", "fp8_amax_table",
           "fp8_amax_current_table", "sp_amax_reduced", "AMAX_GROUP", "AMAX_TP_ONLY_GROUP", "AMAX_PHASE", "AMAX_SP_GROUP"]

AMAX_GROUP = "tpdpcp"
"""The mapping's group name of the amax reduction: tensor x data x context parallel ranks of one pipeline stage."""
AMAX_TP_ONLY_GROUP = "tpcp"
"""The group with Megatron-Core's ``tp_only_amax_red``: tensor x context parallel ranks (``get_amax_reduction_group(
with_context_parallel=True, tp_only_amax_red=True)``, the ``_TENSOR_AND_CONTEXT_PARALLEL_GROUP``)."""
AMAX_SP_GROUP = "tp"
"""The group of current scaling's amax reduction under sequence parallelism: the module's TP group
(:func:`sp_amax_reduced`)."""
AMAX_PHASE = "fp8_amax"
"""The :class:`.result.DimensionComm` ``dim`` and ``phase`` of the amax all-reduce, and the step breakdown's line of
the whole reduction step (all of it exposed, per micro-batch)."""


def amax_group(lay: ParallelLayout) -> str:
    """The mapping's group the layout reduces its amaxes over: :data:`AMAX_TP_ONLY_GROUP` with ``tp_only_amax_red``,
    else :data:`AMAX_GROUP` (Megatron-Core's ``get_amax_reduction_group``, see the module doc)."""
    return AMAX_TP_ONLY_GROUP if lay.tp_only_amax_red else AMAX_GROUP


def amax_reduced(lay: ParallelLayout) -> bool:
    """Whether ``lay`` runs Transformer Engine's delayed-scaling amax reduction: its ``fp8_amax_reduction`` when set
    (under delayed scaling; current scaling's is :func:`sp_amax_reduced`), else on under delayed scaling (:func:`delayed_scaling`: TE's ``DelayedScaling`` default, see the module doc).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    bool
    """
    if lay.fp8_amax_reduction is not None:
        return lay.fp8_amax_reduction and delayed_scaling(lay)
    return delayed_scaling(lay)


def sp_amax_reduced(lay: ParallelLayout) -> bool:
    """Whether ``lay`` runs current scaling's amax all-reduce over the TP group: per-tensor current scaling
    (:func:`.parallel.current_scaling`), sequence parallelism and ``tp > 1`` (see the module doc); a layout whose
    ``fp8_amax_reduction`` is false runs none (a JAX mesh's: Flax, not Transformer Engine).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    bool
    """
    return (current_scaling(lay) and lay.sequence_parallel and lay.tp > 1
            and lay.fp8_amax_reduction is not False)


@lru_cache(maxsize=1)
def fp8_amax_table() -> dict:
    """``kernels.toml`` ``[fp8_amax]``: amaxes per FP8 GEMM forward and backward, bytes per amax, kernels per
    reduction beside the all-reduce."""
    return _kernels_toml()["fp8_amax"]


@lru_cache(maxsize=1)
def _kernels_toml() -> dict:
    return tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))


def fp8_amax_current_table() -> dict:
    """``kernels.toml`` ``[fp8_amax_current]``: amaxes per current-scaling quantisation reduced over TP under
    sequence parallelism, kernels beside the all-reduce."""
    return _kernels_toml()["fp8_amax_current"]


def _fp8_gemms(model: ModelSpec, lay: ParallelLayout, counts: dict) -> float:
    """FP8 GEMMs (a grouped linear layer's local experts each one) of the blocks ``counts`` holds
    (``{block kind: blocks}``): the linear layers Transformer Engine runs in FP8."""
    total = 0.0
    for kind, n in counts.items():
        if kind in set(BLOCK_KINDS) and n:
            total += n * sum(op.groups for op in block_ops(model, lay, kind) if op.kind == "gemm" and op.linear)
    return total


def _calls_each_way(lay: ParallelLayout) -> float:
    """Reductions of a step each way (forward, backward): one per model chunk and micro-batch."""
    return float(lay.microbatches * (lay.vpp if lay.pp > 1 else 1))


def amax_kernels_s(lay: ParallelLayout, launch_gap_s: float) -> float:
    """The launch gaps of the kernels beside the all-reduce (the concatenation and the fused update) of every
    amax reduction of a step: what the ``fp8_amax`` line holds whatever the group and the fabric, so a floor of it
    (the search's bound, :mod:`.search`).

    Parameters
    ----------
    lay : ParallelLayout
    launch_gap_s : float
        The GPU's gap a kernel launched eagerly.

    Returns
    -------
    float
        Seconds per step; 0.0 when the layout runs no reduction (:func:`amax_reduced`).
    """
    if not amax_reduced(lay):
        return 0.0
    return 2 * _calls_each_way(lay) * float(fp8_amax_table()["kernels_per_reduction"]) * launch_gap_s


def amax_reductions(model: ModelSpec, lay: ParallelLayout, counts: dict) -> list[tuple[float, float]]:
    """The amax all-reduces of one step on a pipeline rank holding the blocks ``counts`` (``{block kind:
    blocks}``), as ``(bytes per call, calls)``: forward, then backward; none unless :func:`amax_reduced`.

    Parameters
    ----------
    model, lay
        The model and its layout (``fp8_amax_reduction``, ``microbatches``, ``vpp``).
    counts : dict
        The rank's blocks by kind (all its model chunks).

    Returns
    -------
    list of tuple
        ``[(forward bytes, calls), (backward bytes, calls)]``; empty when the layout runs no such reduction.
    """
    if not amax_reduced(lay):
        return []
    t = fp8_amax_table()
    gemms = _fp8_gemms(model, lay, counts)
    calls = _calls_each_way(lay)
    size = float(t["amax_bytes"])
    return [(size * t["amaxes_per_gemm"][0] * gemms, calls), (size * t["amaxes_per_gemm"][1] * gemms, calls)]


def amax_step(engine: CommEngine, mapping, model: ModelSpec, lay: ParallelLayout, counts: dict,
              launch_gap_s: float, sp_calls: tuple[float, float] = (0.0, 0.0)) -> tuple[DimensionComm | None, float]:
    """The step's amax reductions on a pipeline rank holding the blocks ``counts``, all of it exposed: each call the
    all-reduce alone on the fabric (latency-bound: a few bytes to a few KB) and the launch gaps of the kernels beside
    it (``launch_gap_s`` each). Delayed scaling: over TE's group (:func:`amax_group`: tensor x data x context
    parallel ranks, or tensor x context with ``tp_only_amax_red``), none when that group is one rank, its two kernels
    either way. Current scaling under sequence parallelism (:func:`sp_amax_reduced`): one FP32 amax over the TP group
    a call, ``sp_calls`` of them, no kernel beside it.

    Parameters
    ----------
    engine : CommEngine
    mapping : Mapping
        The layout on the fabric (:func:`.mapping.map_layout`).
    model, lay
        The model and its layout.
    counts : dict
        The rank's blocks by kind.
    launch_gap_s : float
        The GPU's gap a kernel launched eagerly.
    sp_calls : tuple of float
        The rank's current-scaling quantisations a step whose amax TE reduces over TP, forward and backward
        (:func:`topo.training.step.sp_quantisations`); read only where :func:`sp_amax_reduced`.

    Returns
    -------
    tuple
        The all-reduce as one collective (None without one) and the seconds of the whole step's reductions,
        kernels included (0.0 when the layout runs none).
    """
    if sp_amax_reduced(lay):
        t = fp8_amax_current_table()
        n = float(sum(sp_calls))
        calls = [(float(fp8_amax_table()["amax_bytes"]) * t["amaxes_per_quantisation"], n)] if n > 0 else []
        name, kernels_s = AMAX_SP_GROUP, n * t["kernels_beside_reduction"] * launch_gap_s
    else:
        calls = amax_reductions(model, lay, counts)
        name, kernels_s = amax_group(lay), amax_kernels_s(lay, launch_gap_s)
    if not calls:
        return None, kernels_s
    groups = mapping.groups(name)
    if groups.shape[1] <= 1:  # TE skips the all-reduce of a one-rank group
        return None, kernels_s
    times = [engine.time("all_reduce", groups, size) for size, _ in calls]
    reduce_s = sum(n * one.time_s for (_, n), one in zip(calls, times))
    one = max(times, key=lambda c: c.time_s)
    comm = DimensionComm(dim=AMAX_PHASE, collective="all_reduce", size_bytes=max(size for size, _ in calls),
                         calls_per_step=sum(n for _, n in calls), time_s=reduce_s, exposed_s=reduce_s,
                         algorithm=one.algorithm, level=one.level, link=one.link, utilization=one.utilization,
                         num_groups=int(groups.shape[0]), group_size=int(groups.shape[1]),
                         domains_per_group=mapping.domains_spanned(name), phase=AMAX_PHASE)
    return comm, reduce_s + kernels_s
