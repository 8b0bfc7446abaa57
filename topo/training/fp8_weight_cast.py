"""The FP8 cast of the BF16 linear weights Transformer Engine makes once a step under Megatron-Core.

Megatron-Core's TE wrappers hand Transformer Engine ``is_first_microbatch`` (True on a model chunk's first forward of
a step, False after; None only with ``disable_parameter_transpose_cache``, default False), and TE casts each BF16
weight into its cached FP8 workspace on that call only, row-wise and column-wise where the backward needs it
(``kernels.toml`` ``[fp8_weight_cast]``: NVIDIA/Megatron-LM core_v0.12.0 ``extensions/transformer_engine.py`` lines
251-255, NVIDIA/TransformerEngine@bee4649c ``pytorch/module/linear.py`` lines 183-202, ``module/base.py``
``get_weight_workspace``). The cast moves a quantisation's bytes a parameter (:func:`.operators.quantize_bytes`: the
BF16 read, each FP8 copy the GPU's GEMMs need written; under current scaling the weight quantizer's amax read too),
over the linear weights of every pipeline rank: each rank casts on its model chunks' first forwards, and the step's
first micro-batch passes each (stage, chunk)'s first forward in turn (1F1B's fill, and an interleaved schedule's,
which runs micro-batch 0 through chunk c on every stage before chunk c + 1), so the step waits for the sum of the
ranks' casts, ``p`` times one stage's where the stages are alike. None under ``fp8_param_gather``: a weight kept in FP8 is a ``QuantizedTensor``,
which ``linear.py`` does not cast (line 183). Layers kept in BF16 (:func:`.operators.bf16_layers`) cast nothing.

The step's ``fp8_weight_cast`` line. Left out: the cast kernels' launch gaps (one to four a weight, a few hundred
microseconds a step) and a ``module_recipes`` module kept in BF16.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from .gpus import GpuCompute
from .kernels import memory_s
from .memory import bf16_kept_params, stage_params
from .model import ModelSpec
from .operators import bf16_layers, pipeline_units, quantize_bytes, rank_stages
from .fp8_params import kept_in_fp8
from .parallel import ParallelLayout, current_scaling
from .unit_params import unit_bf16_params, unit_params

__all__ = ["weight_cast_params", "weight_cast_s"]


@lru_cache(maxsize=1)
def _table() -> dict:
    return tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))["fp8_weight_cast"]


def weight_cast_params(model: ModelSpec, lay: ParallelLayout) -> float:
    """Linear-weight parameters the step waits for the FP8 cast of: over every pipeline rank (see the module doc),
    each rank's GPU casting the whole weights its forward reads (before ZeRO sharding), its dense and expert parameters
    less those outside FP8 linear layers (:func:`.memory.bf16_kept_params`) and less the linears of its layers kept
    in BF16; 0 unless ``precision`` is fp8 and the weights are BF16 (no ``fp8_param_gather``).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout

    Returns
    -------
    float
    """
    if lay.precision != "fp8" or kept_in_fp8(lay):
        return 0.0
    rows, kept = stage_params(model, lay), bf16_kept_params(model, lay)
    stages, flags = pipeline_units(model, lay), bf16_layers(model, lay)
    total = 0.0
    for i, held in enumerate(rank_stages(lay)):
        dense, expert, _ = rows[i]
        with_emb = any("embedding" in stages[j] for j in held)
        in_bf16 = sum(sum(unit_params(model, lay, u, with_emb)) - unit_bf16_params(model, lay, u, with_emb)
                      for j in held for u, bf16 in zip(stages[j], flags[j]) if bf16)
        total += max(0.0, dense + expert - kept[i] - in_bf16)
    return total


def weight_cast_s(model: ModelSpec, lay: ParallelLayout, gpu: GpuCompute) -> float:
    """Seconds a step of the FP8 cast of the BF16 linear weights (see the module doc): ``casts_per_step`` x
    :func:`weight_cast_params` x :func:`.operators.quantize_bytes` (with the amax read under current scaling)
    through HBM (:func:`.kernels.memory_s`).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    gpu : GpuCompute

    Returns
    -------
    float
    """
    params = weight_cast_params(model, lay)
    if not params:
        return 0.0
    per = quantize_bytes(gpu.generation, lay.fp8_recipe, amax_pass=current_scaling(lay))
    return float(_table()["casts_per_step"]) * memory_s(gpu.kernels, per * params)
