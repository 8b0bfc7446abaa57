"""The time of one GPU kernel, from published kernel benchmarks (``topo/data/compute/kernels.toml``).

Three kinds of kernels make a training step:

- **GEMMs** by wave quantisation: the output is cut into ``tm x tn`` tiles, one per SM (or per pair of SMs: a
  Blackwell 2-SM tile) at a time, run in waves of the GPU's SMs, from the tiles the generation's kernels have at
  that precision (``[gemm.tiles]``: CUTLASS's tiles and cuBLAS kernel names); a tile takes ``K + k0``
  steps (``k0``: its fixed prologue and epilogue, in steps of K at the FP8 rate), each step of K no faster than
  shared memory passes the tile's operands to its tensor cores (``[gemm.feed]``: a narrow tile's limit), and the
  kernel picks the tile shape that finishes first; no GEMM is faster than its operands and result cross HBM
  (operands reach the SMs through L2 with multicast across a cluster's SMs, not modelled as a bound of its own:
  with it the best-shape MAMF of FP8 GPUs could not be reached at any efficiency), and an accumulating epilogue's
  extra bytes (FP32 ``main_grad`` read and written) come after the tiles in the share the generation's kernels do
  not run behind their MMAs (:func:`epilogue_extra_s`). The large-GEMM efficiency
  ``e`` is the value at which this model reproduces the published maximum achievable matmul (MAMF) of the GPU at
  its best shape's M and N as K grows (a MAMF is a maximum over shapes: no shape the model prices beats it, and
  the tile's prologue, which a shape of small K pays, is not read into the rate; see ``_burst_efficiency``),
  times the published sustained-over-burst ratio of its generation (power-saturated clocks under training
  load; the GPU's own where its sustained rates are published, ``[sustained_gemm]``: see
  ``_measured_sustained``), times the fraction of that a training framework's GEMMs reach (``[training]``, fitted
  on dense runs only). Grouped GEMMs (an MoE block's experts) pack every group's tiles into one set of waves; a
  loop of per-expert GEMMs (``packed`` False) quantises each group alone.
- **fused attention** at the published cuDNN rates by head dimension, causal mask and sequence length (the
  length of a local window's block for sliding or chunked attention), forward and backward apart, as a fraction
  of the measuring GPU's peak: a GPU with a table of its own (``[attention.<gpu>]``, head dims it lacks from its
  generation's) reads it, then a generation with one (``[attention.<generation>]``), the others scale the Hopper
  table; a sliding window by the tiles its kernel computes (:mod:`.attention_tiles`: the table's full and causal
  curves give the window's fixed cost in keys), anchored on the table's measured window;
- **memory-bound** kernels at the published share of HBM bandwidth.

Every kernel also costs a fixed GPU-side launch gap (``launch_gpu_s`` launched eagerly, ``launch_gpu_graph_s`` as a
node of a CUDA graph, per generation where published), and an eager framework spends
``launch_host_s`` of CPU per call that launches a kernel (what an MoE block waits for after its tokens-per-expert
sync), and ``launch_cpp_s`` / ``launch_cpp_gemm_s`` per kernel / cuBLASLt GEMM that the call's C++ launches after
its first (:func:`topo.training.operators.launch_calls`), all scaled by the single-thread speed of the GPU's host
CPU (:mod:`topo.training.host_cpu`).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from ..errors import TopoError
from ..resources import data_dir
from .cudnn import table_version
from .attention_tiles import band_only_rate, band_rate, fixed_keys, window_keys, window_rate
from .host_cpu import host_cpu, host_time_factor
from .router_load import expected_row_tiles

__all__ = ["KernelModel", "kernel_model", "gemm_s", "tile_set", "attention_rate_flops", "cudnn_factor", "memory_s",
           "router_kernels", "alltoall_preprocess_kernels", "permute_kernels", "permute_s", "permute_efficiency",
           "quantize_kernels", "fp8_padding", "epilogue_extra_s",
           "fp8_recipe_costs", "block_scaled_recipe", "gather_transpose_bytes", "norm_writes_quantised", "recipe_precision", "recipe_gemm_ratio", "cast_extra_bytes", "quantised_copy_bytes", "scale_bytes", "tp_gather_output_gradient_copies", "OPERAND_BYTES", "ssd_sm_reference", "ssd_backward_products_flops", "quantize_s", "fp8_backward_head_dims", "fp8_backward_published",
           "FITTED", "host_launch_price", "PYTHON_CALL_KEYS"]

PYTHON_CALL_KEYS = ("py_call_s", "pybind_call_s", "py_object_s")
"""``kernels.toml [launch]`` keys pricing a Python-level call, a Python object converted to C++ by a bound call and a
Python object built from C++, in the order of ``te_grouped_linear_host.toml``'s ``[python_kinds]``."""

BF16_OUT_BYTES = 2.0
"""HBM bytes per output element of the epilogue the tile's fitted fixed cost includes: one BF16 write (the fit's
DeepGEMM kernels write BF16; :func:`epilogue_extra_s`)."""

FITTED = (("gemm", "tile_overhead_k"), ("gemm", "gemm_memory_efficiency"))
"""Values of kernels.toml fitted on kernel benchmarks (each with ``<key>_range`` beside it); the ``[training]``
fractions are fitted on dense step times (their ``range`` is the section's)."""


OPERAND_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}
"""HBM and shared-memory bytes of one GEMM operand element by tensor-core precision (BF16, FP8 E4M3/E5M2, FP4
E2M1; block scales not counted)."""


@lru_cache(maxsize=None)
def _table() -> dict:
    return tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))


def host_launch_price() -> tuple[float, str]:
    """The host seconds every eagerly launched kernel is charged on the reference CPU and that figure's status
    (``kernels.toml`` ``[launch] host_s``, ``host_status``): an average framework call, fitted on published runs.

    Returns
    -------
    tuple of (float, str)
    """
    t = _table()["launch"]
    return float(t["host_s"]), str(t["host_status"])


@lru_cache(maxsize=None)
def ssd_sm_reference() -> str:
    """The GPU whose SMs set the floor under mamba_ssm's Triton SSD kernels on every GPU (``kernels.toml``
    ``[ssd] sm_bound_reference``: they are bound by their SMs, not HBM; :func:`.operators.sm_bound_floor_s`).

    Returns
    -------
    str
        A GPU name of the compute catalog (``H100``).
    """
    return str(_table()["ssd"]["sm_bound_reference"])


@lru_cache(maxsize=None)
def ssd_backward_products_flops() -> float:
    """The rate at which the SSD backward's own product kernels run their products on the reference GPU's SMs
    (``kernels.toml`` ``[ssd] backward_products_TFLOPs``: measured on H100, the TFLA paper's benchmark of
    ``mamba_split_conv1d_scan_combined``; :func:`.operators.sm_bound_floor_s`).

    Returns
    -------
    float
        FLOP per second.
    """
    return float(_table()["ssd"]["backward_products_TFLOPs"]) * 1e12


@lru_cache(maxsize=None)
def router_kernels(router: str = "deepseek") -> dict:
    """Kernels an MoE router's forward launches (``kernels.toml`` ``[launch]``): ``plain``, ``fused``
    (Megatron-Core's router fusion) and ``flex`` (router fusion with the flex dispatcher's fused preprocess).

    Parameters
    ----------
    router : str
        The router's configuration (``[launch] router_ops`` keys): ``deepseek`` keeps the published counts
        (72 / 31 / 17); another router's ``plain`` count is 72 times its ops over deepseek's (the kernels per
        op the published count implies), rounded to a whole kernel (39 for ``softmax_aux_loss``, 17 for
        ``sigmoid_topk`` and ``softmax_topk``: a launch is whole), its fused counts are deepseek's.

    Returns
    -------
    dict
        ``plain``, ``fused`` and ``flex``: kernels per router forward; ``flex_deepep`` the flex count less DeepEP
        V1's ``get_dispatch_layout``, which its dispatch call launches (``[launch] deepep_layout_kernels``).
    """
    t = _table()["launch"]
    ops = t["router_ops"]
    return {"plain": float(round(t["router_kernels"] * ops[router] / ops["deepseek"])),
            "fused": float(t["router_kernels_fused"]), "flex": float(t["router_kernels_flex"]),
            "flex_deepep": float(t["router_kernels_flex"] - t["deepep_layout_kernels"])}


def alltoall_preprocess_kernels(expert_parallel: bool) -> dict:
    """Launches of the all-to-all dispatcher's token-count work in a dropless MoE block's forward
    (``kernels.toml`` ``[launch]``, counted from Megatron-Core's ``MoEAlltoAllTokenDispatcher``).

    Parameters
    ----------
    expert_parallel : bool
        EP or expert TP above 1 (the counts are gathered over the group and the splits copied to the host);
        otherwise only the tokens per expert are summed and copied.

    Returns
    -------
    dict
        ``preprocess``: kernels and the counts' all-gather (what ``cuda_graph_scope`` ``moe_preprocess``
        captures); ``dtoh``: device-to-host copies before the sync (never captured by a partial graph).
    """
    if not expert_parallel:
        return {"preprocess": 1.0, "dtoh": 1.0}
    t = _table()["launch"]
    return {"preprocess": float(t["alltoall_preprocess_kernels"]), "dtoh": float(t["alltoall_dtoh_copies"])}


def permute_kernels(dispatcher: str) -> tuple[float, float]:
    """Launches of an MoE block's permutation and un-permutation (``kernels.toml`` ``[launch] permute_kernels``,
    Transformer Engine's fused path).

    Parameters
    ----------
    dispatcher : str
        ``alltoall`` (several local experts: the received tokens are sorted by expert and back),
        ``alltoall_one_local``, ``deepep`` or ``hybridep`` (the flex dispatcher's backends).

    Returns
    -------
    tuple of float
        Forward and backward launches.
    """
    fwd, bwd = _table()["launch"]["permute_kernels"][dispatcher]
    return float(fwd), float(bwd)


def permute_backward_bytes(dispatcher: str) -> float:
    """The permutation's backward bytes over its forward's (``kernels.toml`` ``[launch] permute_backward_bytes``):
    HybridEP's backward runs its forward's kernels the other way on the gradients (1); Transformer Engine's
    permute and un-permute as the other dispatchers call them, 2 (assumption).

    Parameters
    ----------
    dispatcher : str
        ``alltoall``, ``alltoall_one_local``, ``deepep`` or ``hybridep`` (as :func:`permute_kernels`).

    Returns
    -------
    float
    """
    return float(_table()["launch"]["permute_backward_bytes"][dispatcher])


@lru_cache(maxsize=1)
def quantize_kernels() -> dict:
    """Kernels of one FP8 quantisation of a GEMM input by scaling recipe (``kernels.toml`` ``[launch]``,
    published): ``current`` (per-tensor current scaling: the amax zeroed, the amax, the scale, the cast),
    ``current_norm_amax`` (current scaling of a norm's output whose kernel computed the amax: the scale, the cast),
    ``delayed_scale_inverse`` (per-tensor delayed scaling in Transformer Engine 2.0-2.6: the scale inverse, then
    the cast), ``nvfp4`` (NVFP4BlockScaling: the amaxes zeroed, the Hadamard amax, the fused row-wise and RHT
    column-wise cast) and ``cast`` (every other recipe).

    Returns
    -------
    dict
        ``current``, ``current_norm_amax``, ``delayed_scale_inverse``, ``nvfp4`` and ``cast``: kernels per
        quantisation.
    """
    t = _table()["launch"]
    return {"current": float(t["fp8_current_scaling_kernels"]),
            "current_norm_amax": float(t["fp8_current_scaling_norm_amax_kernels"]),
            "delayed_scale_inverse": float(t["fp8_delayed_scale_inverse_kernels"]),
            "nvfp4": float(t["fp8_nvfp4_cast_kernels"]), "cast": 1.0}


@lru_cache(maxsize=32)
def fp8_recipe_costs(recipe: str | None, generation: str) -> tuple[float, float, int]:
    """What an FP8 scaling recipe costs on a GPU generation against per-tensor scaling (``kernels.toml``
    ``[fp8_recipe]``): its GEMMs' time ratio at the same shape, the scale bytes its quantisation writes per element
    and FP8 copy, and the FP8 copies of each quantised tensor (row-wise, and a column-wise one where the GEMMs need
    it: every recipe on Hopper, block-scaled recipes on Blackwell).

    Parameters
    ----------
    recipe : str or None
        The layout's ``fp8_recipe`` (``delayed``, ``current`` or None: per-tensor; ``blockwise``; ``mxfp8``;
        ``nvfp4``, whose ratio is the GPU's: :func:`recipe_gemm_ratio`).
    generation : str
        The GPU's generation (``hopper``, ``blackwell``, ...).

    Returns
    -------
    tuple
        ``(gemm_time_ratio, scale_bytes_per_element, copies)``.
    """
    t = _table()["fp8_recipe"]
    block = block_scaled_recipe(recipe)
    ratio = float(t["gemm_time_ratio"].get(f"{generation}_{recipe}", 1.0)) if block else 1.0
    scale = scale_bytes(recipe if block else None)
    copies = 2 if (block or generation != "blackwell") else 1
    return ratio, scale, copies


def block_scaled_recipe(recipe: str | None) -> bool:
    """Whether FP8 scaling ``recipe`` scales blocks (``blockwise``, ``mxfp8``, ``nvfp4``), not whole tensors
    (``delayed``, ``current``, None)."""
    return recipe in ("blockwise", "mxfp8", "nvfp4")


def gather_transpose_bytes(recipe: str | None, generation: str) -> float:
    """Bytes per element of the transpose Transformer Engine makes of a sequence-parallel all-gathered FP8 tensor
    (``kernels.toml`` ``[fp8_recipe]`` ``gather_transpose_*``): per-tensor scaling on a GPU whose FP8 GEMMs are TN
    only (two copies a tensor: :func:`fp8_recipe_costs`) gathers the row-wise data alone and transposes the whole
    gathered tensor for the weight-gradient GEMM, reading and writing it (2); 0 where no transpose is made
    (block-scaled recipes, which cast both copies on the shard; per-tensor from compute capability 10.0).

    Parameters
    ----------
    recipe : str or None
        The FP8 recipe the linear layer runs (None, ``delayed``, ``current``: per-tensor).
    generation : str
        The GPU's generation.

    Returns
    -------
    float
        Bytes read and written per element of the gathered tensor.
    """
    if block_scaled_recipe(recipe) or fp8_recipe_costs(recipe, generation)[2] < 2:
        return 0.0
    return float(_table()["fp8_recipe"]["gather_transpose_bytes_per_element"])


def norm_writes_quantised(recipe: str) -> bool:
    """Whether Transformer Engine's norm before a column-parallel linear (``LayerNormLinear``) writes its output
    quantised under FP8 ``recipe``, its cast fused into the norm kernel (``kernels.toml`` ``[fp8_recipe]``
    ``norm_writes_quantised``): per-tensor delayed scaling only; every other recipe's norm writes BF16 and a cast
    kernel follows (MXFP8's cuDNN fused norm only with ``NVTE_NORM_FWD_USE_CUDNN=1``, which no MXFP8 row sets).

    Parameters
    ----------
    recipe : str
        ``delayed``, ``current``, ``blockwise``, ``mxfp8`` or ``nvfp4`` (per-tensor scaling named by what it is).

    Returns
    -------
    bool
    """
    return bool(_table()["fp8_recipe"]["norm_writes_quantised"].get(recipe, False))


def recipe_precision(recipe: str | None) -> str:
    """The tensor-core precision a linear layer's GEMMs run at under FP8 scaling recipe ``recipe``: ``fp4`` for
    ``nvfp4`` (Transformer Engine's NVFP4BlockScaling quantises both operands of fprop, dgrad and wgrad to E2M1:
    TE docs features/low_precision_training/nvfp4; arXiv 2509.25149 sec. 4), ``fp8`` for every other."""
    return "fp4" if recipe == "nvfp4" else "fp8"


def recipe_gemm_ratio(km: KernelModel, recipe: str | None, generation: str) -> float:
    """The factor on a linear GEMM's time at :func:`recipe_precision` under ``recipe``: :func:`fp8_recipe_costs`'s
    ratio, or for ``nvfp4`` (GEMMs on the FP4 tiles at the FP4 peak) the measured NVFP4 over per-tensor FP8 time
    (``kernels.toml`` ``[fp8_recipe] nvfp4_fp8_time_ratio``) times per-tensor FP8's over FP4's tile-model time of the
    twelve GEMMs it was measured on (``nvfp4_ratio_fprop_shapes``, each as fprop, dgrad and wgrad), so those take
    that share of per-tensor FP8's time on every GPU (:func:`_nvfp4_layer_s`).

    Parameters
    ----------
    km : KernelModel
        The GPU's kernel model (its ``peak_flops``).
    recipe : str or None
        The layout's ``fp8_recipe``.
    generation : str
        The GPU's generation.

    Returns
    -------
    float
        The time factor.
    """
    if recipe != "nvfp4":
        return fp8_recipe_costs(recipe, generation)[0]
    hit = _NVFP4_RATIO.get(id(km))
    if hit is None or hit[0] is not km:
        ratio = float(_table()["fp8_recipe"]["nvfp4_fp8_time_ratio"]) * _nvfp4_layer_s(km, "fp8") / _nvfp4_layer_s(km, "fp4")
        hit = _NVFP4_RATIO[id(km)] = (km, ratio)
    return hit[1]


_NVFP4_RATIO: dict = {}  # id(km) -> (km, its NVFP4 factor): a GPU's kernel model is built once and kept


def _nvfp4_layer_s(km: KernelModel, precision: str) -> float:
    """Seconds of the twelve GEMMs of Transformer Engine's GEMM-profiling layer (``[fp8_recipe]
    nvfp4_ratio_fprop_shapes``: fprop [M, N, K], dgrad [M, K, N], wgrad [N, K, M]) at ``precision``, no recipe
    factor."""
    shapes = _table()["fp8_recipe"]["nvfp4_ratio_fprop_shapes"]
    return sum(gemm_s(km, *dims, precision=precision)
               for m, n, k in shapes for dims in ((m, n, k), (m, k, n), (n, k, m)))


def cast_extra_bytes(recipe: str | None) -> tuple[float, float]:
    """``(element_bytes, amax_read_bytes)`` of one quantisation under ``recipe`` (``kernels.toml``
    ``[fp8_recipe]``): bytes a quantised element takes (1 for FP8, 0.5 for NVFP4's E2M1) and the BF16 bytes a
    separate amax kernel reads before the cast (NVFP4's tensor amax, 2; 0 for every other recipe, whose amax
    read is ``fp8_amax_pass``'s)."""
    t = _table()["fp8_recipe"]
    return (float(t["element_bytes"].get(recipe, 1.0)) if recipe else 1.0,
            float(t["amax_read_bytes_per_element"].get(recipe, 0.0)) if recipe else 0.0)


def quantised_copy_bytes(recipe: str | None) -> float:
    """Bytes an element of one quantised copy of a tensor takes under FP8 scaling ``recipe`` (``kernels.toml``
    ``[fp8_recipe]``): the element (1 for FP8, 0.5 for NVFP4's E2M1) and its block scales (1/16 for NVFP4's E4M3
    per 16, 1/32 for MXFP8's E8M0 per 32, 4/128 block-wise, 0 per tensor). What Transformer Engine keeps of a
    linear layer's input for the weight gradient (its column-wise copy: ``linear.py`` ``update_usage(rowwise_usage=
    False, columnwise_usage=True)``) and what it all-gathers a copy of over TP without userbuffers
    (``distributed.py`` ``_all_gather_nvfp4``: data and scale inverses).

    Parameters
    ----------
    recipe : str or None
        The layout's ``fp8_recipe`` (None: per-tensor).

    Returns
    -------
    float
        Bytes per element.
    """
    return cast_extra_bytes(recipe)[0] + scale_bytes(recipe)


def scale_bytes(recipe: str | None) -> float:
    """Bytes an element of a quantised copy's block scales (scale-inverses) take under FP8 scaling ``recipe``
    (``kernels.toml`` ``[fp8_recipe]`` ``scale_bytes_per_element``): 1/32 for MXFP8's E8M0 per 32 elements, 4/128
    block-wise, 1/16 NVFP4, 0 per tensor (one scale a tensor). The scales' part of :func:`quantised_copy_bytes`, and
    what userbuffers' MXFP8 all-gather sends apart through NCCL (:func:`.step.ub_scale_gather_bytes`).

    Parameters
    ----------
    recipe : str or None
        The layout's ``fp8_recipe`` (None: per-tensor).

    Returns
    -------
    float
        Bytes per element.
    """
    t = _table()["fp8_recipe"]["scale_bytes_per_element"]
    return float(t.get(recipe, t["per_tensor"]))


def tp_gather_output_gradient_copies(recipe: str | None) -> int:
    """Quantised copies of a row-parallel layer's output gradient Transformer Engine all-gathers over TP under
    sequence parallelism without userbuffers (``kernels.toml`` ``[fp8_recipe]``
    ``tp_gather_output_gradient_copies``): 1 per tensor (its quantizer gathers row-wise data only and transposes
    after the gather), 2 under MXFP8, block-wise and NVFP4 (row- and column-wise, each with its scales).

    Parameters
    ----------
    recipe : str or None
        The layout's ``fp8_recipe`` (None, delayed, current: per-tensor).

    Returns
    -------
    int
    """
    t = _table()["fp8_recipe"]["tp_gather_output_gradient_copies"]
    return int(t.get(recipe, t["per_tensor"]))


def quantize_s(km: KernelModel, nbytes: float, recipe: str | None, generation: str) -> float:
    """Seconds of an FP8 quantisation kernel moving ``nbytes`` through HBM: at the HBM rate the recipe's cast
    kernel reaches on that generation where measured (``kernels.toml`` ``[fp8_recipe]``
    ``quantize_memory_efficiency``: MXFP8 on Blackwell, 0.651 of the peak), else as any elementwise kernel
    (:func:`memory_s`).

    Parameters
    ----------
    km : KernelModel
    nbytes : float
        Bytes read and written (:func:`topo.training.operators.quantize_bytes` x elements).
    recipe : str or None
        The layout's ``fp8_recipe``.
    generation : str
        The GPU's generation.

    Returns
    -------
    float
    """
    eff = _table()["fp8_recipe"].get("quantize_memory_efficiency", {}).get(f"{generation}_{recipe}")
    return memory_s(km, nbytes) if eff is None else nbytes / (km.hbm_Bps * float(eff))


@lru_cache(maxsize=8)
def fp8_padding(recipe: str | None) -> tuple[int, float, float]:
    """Transformer Engine's FP8 padding of a grouped expert MLP's rows (``kernels.toml`` ``[launch]``
    ``fp8_padding_*``, Megatron-Core's ``TEGroupedMLP``): the row alignment of the FP8 ``recipe`` and the kernels
    of the padding and unpadding copies, forward and backward.

    Parameters
    ----------
    recipe : str or None
        The layout's ``fp8_recipe`` (``mxfp8`` aligns to 32 rows, every other recipe to 16).

    Returns
    -------
    tuple
        ``(align_rows, forward_kernels, backward_kernels)``.
    """
    t = _table()["launch"]
    align = t["fp8_padding_align_rows"]
    fwd, bwd = t["fp8_padding_kernels"]
    return int(align.get(recipe or "other", align["other"])), float(fwd), float(bwd)


@dataclass(frozen=True)
class KernelModel:
    """One GPU's kernel model (see the module doc).

    Attributes
    ----------
    sms : int
        Streaming multiprocessors.
    sm_clock_Hz : float
        The SMs' maximum (boost) clock (``gpus.toml`` ``sm_clock_MHz``; 0: not given), what the SM-bound kernels
        scale with (:func:`.operators.sm_bound_floor_s`).
    peak_flops : dict
        Dense peak FLOP/s by precision (``bf16``, ``fp8`` where the GPU has it).
    efficiency : dict
        Large-GEMM efficiency by precision at the sustained clock (``e`` of the module doc).
    hbm_Bps : float
        HBM bandwidth.
    tile_shapes : dict
        Candidate output tiles by precision, ``(tm, tn, sms)`` each (:func:`tile_set`).
    tile_overhead_k : float
        A tile's fixed cost in steps of K at the FP8 rate.
    feed_flops_per_byte : dict
        By precision, shared memory's time for one byte of a tile's operands in FLOP of its tensor cores' time
        (``[gemm.feed]``: passes x tensor FLOP per clock / 128 B per clock, per SM); absent or 0: no feed bound.
    gemm_memory_efficiency, memory_efficiency : float
        Share of HBM bandwidth a GEMM's operand stream and an elementwise kernel reach.
    attention_scale, sustained : float
        The generation's attention rate relative to its attention table's, and its sustained-over-burst clock
        ratio.
    attention_table : str
        The GPU's own attention table (``[attention.<gpu>]``), else its generation's
        (``[attention.<generation>]``), or "" for the Hopper table.
    launch_sms : int or None
        SMs a GEMM's tile shape is chosen for, when the kernel runs on fewer (``sms``) beside communication
        kernels (None: ``sms``).
    launch_gpu_s, launch_host_s : float
        Per-kernel GPU-side gap of an eager launch and CPU launch time (``[launch] host_s`` on the reference host,
        times the GPU's host CPU's ``time_factor``: :mod:`topo.training.host_cpu`).
    launch_cpp_s, launch_cpp_gemm_s : float
        CPU time of a kernel, and of a cuBLASLt GEMM, that a C++ function launches after its call's first
        (``[launch] cpp_launch_s``, ``cpp_gemm_s``, times the same ``time_factor``; 0: priced as ``launch_host_s``).
    launch_torch_op_s, launch_torch_cpp_op_s : float
        CPU time of a PyTorch op entered from Python, and of a tensor ATen makes from C++, as a grouped expert
        module's per-expert work counts them (``[launch] torch_py_op_s``, ``torch_cpp_op_s``, times the same
        ``time_factor``; :func:`topo.training.grouped_gemm.expert_host_ops`).
    launch_py_s : tuple of float
        CPU time of a Python-level call, of a Python object converted to C++ by a bound call and of a Python object
        built from C++, as the same work counts them (``[launch]`` keys :data:`PYTHON_CALL_KEYS`, measured on the
        nanobind benchmark's host, times ``python_calls_host_factor`` to the reference host, times the same
        ``time_factor``; :func:`topo.training.grouped_gemm.expert_python_calls`).
    sync_s : float
        Seconds from the GPU running out of work before a device-to-host sync to the host thread's resuming
        (``[launch] sync_s``: the copy's landing and the blocked thread's wake-up; every host alike).
    epilogue_overlap : float
        Share of an accumulating epilogue's extra HBM traffic (:func:`epilogue_extra_s`) that the GEMM kernels of the
        generation run behind their tiles' MMAs (``[gemm] epilogue_overlap``): 1 prices the kernel at the longer of
        its tiles and its bytes, 0 adds that traffic after the tiles.
    """

    sms: int
    peak_flops: dict
    efficiency: dict
    hbm_Bps: float
    tile_shapes: dict
    tile_overhead_k: float
    gemm_memory_efficiency: float
    memory_efficiency: float
    attention_scale: float
    sustained: float
    launch_gpu_s: float
    launch_host_s: float
    source: str = ""
    burst: dict = field(default_factory=dict)
    host_cpu: str = ""  # the host CPU launch_host_s is priced on (topo/data/compute/host_cpu.toml)
    attention_table: str = ""
    attention_cudnn: bool = True  # its attention table's cuDNN sets price it (not where it scales another's die)
    launch_gpu_graph_s: float | None = None  # the gap of a kernel captured in a CUDA graph (None: launch_gpu_s)
    sync_s: float = 0.0  # a device-to-host sync's round trip after the GPU drains ([launch] sync_s)
    launch_sms: int | None = None  # SMs a GEMM's tile shape is chosen for (None: ``sms``; see _tile_s)
    feed_flops_per_byte: dict = field(default_factory=dict)  # by precision: see _feed_flops_per_byte ({}: no bound)
    overrides: tuple = ()  # the kernels.toml overrides it was built with, ((section, ((key, value), ...)), ...)
    permute_efficiency: tuple = ()  # (permute, un-permute) shares of HBM of a row-index copy (:func:`permute_s`)
    op_memory_efficiency: tuple = ()  # ((op, (fwd, bwd) share of HBM), ...): :func:`op_memory_efficiency`
    memory_backward_bytes: float = 2.0  # a memory op's backward bytes over its forward's ([memory] backward_bytes_ratio)
    op_backward_bytes: tuple = ()  # ((op, backward over forward bytes), ...): :func:`op_backward_bytes`
    epilogue_overlap: float = 1.0  # share of an accumulating epilogue hidden behind the MMAs (epilogue_extra_s)
    launch_cpp_s: float = 0.0  # CPU per kernel a C++ loop launches after its call's first ([launch] cpp_launch_s)
    launch_cpp_gemm_s: float = 0.0  # ... per cuBLASLt GEMM so launched ([launch] cpp_gemm_s)
    launch_torch_op_s: float = 0.0  # CPU per PyTorch op entered from Python ([launch] torch_py_op_s)
    launch_torch_cpp_op_s: float = 0.0  # CPU per tensor ATen makes from C++ ([launch] torch_cpp_op_s)
    launch_py_s: tuple = (0.0, 0.0, 0.0)  # CPU per Python call, pybind conversion, object from C++ (PYTHON_CALL_KEYS)
    sm_clock_Hz: float = 0.0  # the SMs' maximum clock (gpus.toml sm_clock_MHz; 0: not given)

    def with_efficiency(self, bf16: float) -> "KernelModel":
        """The same with the BF16 large-GEMM efficiency set to ``bf16`` and FP8's scaled alike
        (``--efficiency``)."""
        ratio = bf16 / self.efficiency["bf16"]
        return replace(self, efficiency={k: min(1.0, v * ratio) for k, v in self.efficiency.items()},
                       source=f"given: gemm efficiency {bf16}")


def _tile_s(km: KernelModel, M, N, K, precision: str, e: float, groups=1.0, packed: bool = True,
            m_sd: float = 0.0) -> float:
    """Seconds of the tiles of ``groups`` GEMMs of ``M x N x K`` (the compute side) at efficiency ``e``: the tile of
    ``km.tile_shapes[precision]`` (a tile of ``sms`` SMs runs in waves of the SMs // ``sms``) that finishes first
    on ``km.launch_sms`` SMs (the whole GPU, which is what cuBLAS's heuristics see unless told otherwise:
    ``cublasSetSmCountTarget``), its waves counted over the ``km.sms`` SMs the kernel gets (fewer when
    communication kernels hold some: :func:`topo.training.comm_sms.reduced_gpu`). ``M`` a mean of spread ``m_sd``
    (a dropless expert's rows) takes its expected row tiles in a packed (grouped) kernel."""
    peak_sm = km.peak_flops[precision] / km.sms
    # shared memory's time for one byte of operand, in FLOP of the tensor cores' time (0: no feed bound)
    feed = km.feed_flops_per_byte.get(precision, 0.0) * OPERAND_BYTES[precision]
    # the fixed part of a tile is the same time in any precision: k0 steps at the FP8 rate
    k0 = km.tile_overhead_k * (km.peak_flops[precision] / km.peak_flops.get("fp8", 2 * km.peak_flops["bf16"])
                               if precision != "fp8" else 1.0)
    return _tiles_s(km.tile_shapes[precision], km.sms, km.launch_sms or km.sms, peak_sm, feed, k0, float(M),
                    float(N), float(K), e, groups, packed, m_sd)


@lru_cache(maxsize=1 << 16)
def _tiles_s(tile_shapes: tuple, gpu_sms: int, chosen_on: int, peak_sm: float, feed: float, k0: float, M: float,
             N: float, K: float, e: float, groups, packed: bool, m_sd: float) -> float:
    """:func:`_tile_s`'s closed form over a tile set (memoised by shape): the tile that finishes first on
    ``chosen_on`` SMs, its time on ``gpu_sms``."""
    tm, tn, sms, heights, height_of = _tile_arrays(tile_shapes)
    usable = (tm >= 128 * sms) | (M <= tm)  # fewer than 128 rows per SM: a small-M tile, for M <= tm only
    # a grouped kernel packs its groups' tiles: their expected row tiles (a dropless expert's count varies about M);
    # a loop quantises each GEMM's integer tiles alone: the mean's (the expected waves not modelled)
    rows = np.array([expected_row_tiles(M, r, m_sd if packed else 0.0) for r in heights])
    per = rows[height_of] * np.ceil(N / tn)
    tiles = per * groups if packed else per
    mma = 2.0 * tm * tn  # FLOP of one step of K; its operands tm + tn elements through shared memory
    step = (np.maximum(mma, feed * (tm + tn)) * K + mma * k0) / (sms * peak_sm * e)  # one tile, all its K
    rounds = 1 if packed else groups
    chosen = np.where(usable, np.ceil(tiles / np.maximum(1, chosen_on // sms)) * rounds * step, np.inf)
    i = int(np.argmin(chosen))  # the first of equals, as the tile set lists them
    return float(math.ceil(tiles[i] / max(1, gpu_sms // int(sms[i]))) * rounds * step[i])


@lru_cache(maxsize=64)
def _tile_arrays(tiles: tuple) -> tuple:
    """``(tm, tn, sms)`` of a tile set as float arrays (the set's order kept), its distinct row counts and each
    tile's index among them."""
    a = np.asarray(tiles, dtype=float).reshape(-1, 3)
    heights, height_of = np.unique(a[:, 0], return_inverse=True)
    return a[:, 0], a[:, 1], a[:, 2], tuple(int(h) for h in heights), height_of


def tile_set(generation: str, precision: str, library: str = "") -> tuple:
    """The output tiles GEMMs of ``generation`` run at ``precision`` (``kernels.toml`` ``[gemm.tiles]``), or those
    of a named kernel ``library`` (``[gemm.kernel_tiles]``, e.g. ``deepgemm_sm90``).

    Parameters
    ----------
    generation : str
        ampere, hopper or blackwell (ignored when ``library`` is given).
    precision : str
        ``bf16`` or ``fp8``.
    library : str, optional
        A kernel library's own set instead of the generation's.

    Returns
    -------
    tuple
        ``(tm, tn, sms)`` per tile: ``tm x tn`` outputs computed by ``sms`` SMs together.

    Raises
    ------
    TopoError
        No set for the generation (or library) or for its precision.
    """
    g = _table()["gemm"]
    section, name = ("kernel_tiles", library) if library else ("tiles", generation)
    sets = g[section].get(name)
    if not isinstance(sets, dict):
        raise TopoError(f"no tile set for {name!r}; known: {', '.join(sorted(g[section]))}",
                        source="kernels.toml", key=f"gemm.{section}")
    if precision not in sets:
        known = ", ".join(k for k, v in sets.items() if isinstance(v, list))
        raise TopoError(f"no {precision} tiles for {name!r}; it has: {known}", source="kernels.toml",
                        key=f"gemm.{section}.{name}")
    return tuple((int(x[0]), int(x[1]), int(x[2]) if len(x) > 2 else 1) for x in sets[precision])


def gemm_s(km: KernelModel, M: float, N: float, K: float, precision: str = "bf16", groups: float = 1.0,
           packed: bool = True, efficiency: float | None = None, out_bytes: float = 2.0,
           m_sd: float = 0.0) -> float:
    """Seconds of ``groups`` GEMMs ``[M, K] x [K, N]`` on one GPU (no launch cost).

    Parameters
    ----------
    km : KernelModel
    M, N, K : float
        The GEMM's dimensions (rows of the output, its columns, the reduction).
    precision : str
        ``bf16``, ``fp8`` (operands in FP8, output in BF16) or ``fp4`` (NVFP4 operands, half a byte an element).
    groups : float
        Alike GEMMs in one kernel (a grouped GEMM) or one after another (``packed=False``).
    packed : bool
        True: one kernel packs every group's tiles into waves (a grouped GEMM); False: each GEMM quantises alone.
    efficiency : float, optional
        A large-GEMM efficiency instead of the model's.
    out_bytes : float
        HBM bytes per output element: 2, written in bf16; a weight gradient accumulated into the kept gradient
        reads and writes it (Megatron-Core's ``gradient_accumulation_fusion``: 8 for an FP32 ``main_grad``); the
        bytes over a BF16 write that the generation's kernels do not hide behind their MMAs come after the tiles
        (:func:`epilogue_extra_s`): ``max(tiles + (1 - overlap) x extra, hbm)``.
    m_sd : float
        Spread of each group's rows around ``M`` (a dropless router's experts: :mod:`.router_load`); 0: exactly
        ``M`` rows.
    """
    if M <= 0 or N <= 0 or K <= 0 or groups <= 0:
        return 0.0
    M, N, K = float(M), float(N), float(K)
    e = efficiency if efficiency is not None else km.efficiency[precision]
    b = OPERAND_BYTES[precision]
    g = max(1, round(groups))
    tiles = _tile_s(km, M, N, K, precision, e, g, packed, m_sd)
    hbm = (b * (M * K + K * N) + out_bytes * M * N) * g / (km.hbm_Bps * km.gemm_memory_efficiency)
    exposed = (1.0 - km.epilogue_overlap) * epilogue_extra_s(km, M, N, out_bytes, g)
    return max(tiles + exposed, hbm) * groups / g


def epilogue_extra_s(km: KernelModel, M: float, N: float, out_bytes: float, groups: float = 1.0) -> float:
    """Seconds of HBM traffic an epilogue adds over writing its output once in BF16: ``(out_bytes - 2) M N``
    bytes a GEMM at the GEMM's share of HBM (``gemm_memory_efficiency``); 0 at 2 bytes or fewer.

    The tile's fixed cost (``tile_overhead_k``) was fitted on kernels that write BF16, so that write is in the
    tile time already; a weight gradient accumulated into an FP32 ``main_grad`` (8 bytes an element: C read and D
    written, ``out_bytes``) moves 6 more, which :func:`gemm_s` runs behind the MMAs of the next tile in the share
    ``KernelModel.epilogue_overlap`` and after the tiles in the rest (``kernels.toml`` ``[gemm] epilogue_overlap``).

    Parameters
    ----------
    km : KernelModel
    M, N : float
        The GEMM's output (rows x columns).
    out_bytes : float
        HBM bytes per output element (:func:`gemm_s`).
    groups : float
        GEMMs of that output.

    Returns
    -------
    float
        Seconds.
    """
    extra = max(0.0, float(out_bytes) - BF16_OUT_BYTES)
    return extra * float(M) * float(N) * float(groups) / (km.hbm_Bps * km.gemm_memory_efficiency)


def _interp(seq: np.ndarray, vals: np.ndarray, s: float, short: tuple | None = None) -> float:
    """Rate at length ``s``: linear in log2(s) inside the table, flat above it. Below it: on the line to the
    table's measured short block ``short = (length, rate)`` where it has one (that rate below it), else on the
    line through its first two points (not under 1/16 of the first)."""
    x, ls = np.log2(seq), math.log2(max(1.0, s))
    if ls >= x[0]:
        return float(np.interp(ls, x, vals))
    if short is not None:
        return float(np.interp(ls, [math.log2(short[0]), x[0]], [short[1], vals[0]]))
    slope = (vals[1] - vals[0]) / (x[1] - x[0])
    return float(max(vals[0] / 16, vals[0] + slope * (ls - x[0])))


def _attention_curve(name: str, causal: bool, backward: bool) -> tuple:
    """The attention table ``name`` (a GPU's or generation's, "" for Hopper's) of one mask and pass: head dim ->
    rates, the peak each head dim's rates were measured against, the lengths, and the table's measured short
    block (length, fraction of peak) or None."""
    attn = _table()["attention"]
    a = attn[name] if name else attn

    def curve(t: dict) -> dict:
        if backward:  # a table with one backward curve serves both masks
            return t.get("bwd_causal" if causal else "bwd_full", t.get("bwd", {}))
        return t["fwd_causal"] if causal else t["fwd_full"]

    def peaks_of(t: dict, dims) -> dict:
        peak = t["peak_TFLOPs"]
        return {d: float(peak[d] if isinstance(peak, dict) else peak) for d in dims}

    table = curve(a)
    peaks = peaks_of(a, table)
    if "base" in a:  # a GPU's own table: head dims it lacks come from its generation's table
        b = attn[a["base"]]
        if list(b["seq"]) != list(a["seq"]):
            raise ValueError(f"kernels.toml: attention.{name}: seq {a['seq']} differs from "
                             f"attention.{a['base']}'s {b['seq']}; a GPU table must share its base's lengths")
        extra = {d: v for d, v in curve(b).items() if d not in table}
        table, peaks = {**extra, **table}, {**peaks_of(b, extra), **peaks}
    short = a.get("short")  # a measured block shorter than the table: (length, fraction of peak)
    short = (float(short["seq"]), float(short["bwd" if backward else "fwd"]) / float(short["peak_TFLOPs"])) \
        if short else None
    return table, peaks, a["seq"], short


def attention_rate_flops(km: KernelModel, head_dim: float, seq: float, causal: bool, backward: bool,
                         window: float = 0.0, cudnn: str = "", fp8: str = "") -> float:
    """FLOP/s of fused attention (FlashAttention's FLOP convention) at ``head_dim`` and block length ``seq``: the
    table's fraction of its measuring GPU's peak, interpolated, times this GPU's sustained BF16 peak. A sliding
    window of ``window`` keys over ``seq`` tokens runs its band at its tile model's rate
    (:func:`_window_fraction`) and its first ``window`` rows at the causal rate at ``window`` keys
    (:func:`.attention_tiles.band_rate`): no faster than causal attention over ``seq`` as ``window`` reaches it.

    Parameters
    ----------
    km : KernelModel
        The GPU's kernel model (its attention table, scale, sustained clock and BF16 peak).
    head_dim : float
        Head dimension (between the table's, linear in log2; outside them, the nearest).
    seq : float
        Keys of the block the kernel sees (the sequence, a chunk, or one CP step's; with a window, the tokens it
        slides over).
    causal, backward : bool
        The mask (causal or full) and the pass.
    window : float
        Keys of a sliding window (0: none).
    cudnn : str
        The cuDNN version the kernel runs (the layout's ``cudnn_version``; "": the table's own, the newest):
        its rate relative to the table's (:func:`cudnn_factor`), at the window's length where it has one; not on
        a generation that scales another's table (``KernelModel.attention_cudnn``: Ampere).
    fp8 : str
        An FP8 backward over a causal square (``fp8`` or ``mxfp8``: the op's ``fp8_attention``; ``window`` 0,
        ``seq`` the square's side): the table's ``fp8_band_backward`` rate of that scaling at its head dim
        (:func:`_fp8_band_fraction`); "", another head dim or a table without one: the BF16 causal rate.

    Returns
    -------
    float
        FLOP/s.
    """
    factor = cudnn_factor(km.attention_table, cudnn, min(seq, window) if window > 0 else seq, backward) \
        if km.attention_cudnn else 1.0
    band_fp8 = _fp8_band_fraction(km.attention_table, fp8, seq, head_dim) if fp8 and backward and not window \
        else None
    if band_fp8 is not None:
        fraction = band_fp8
    elif window > 0 and seq > window:
        band = _window_fraction(km.attention_table, float(head_dim), float(window), bool(backward))
        causal_w = _table_fraction(km.attention_table, head_dim, window, True, backward)
        fraction = band_rate(seq, window, causal_w, band)
    else:  # (a window as long as the sequence is its causal mask)
        fraction = _table_fraction(km.attention_table, head_dim, seq, causal or window > 0, backward)
    return fraction * factor * km.attention_scale * km.sustained * km.peak_flops["bf16"]


def fp8_backward_head_dims() -> frozenset[float]:
    """The head dims at which some attention table publishes an FP8 backward rate (``kernels.toml
    [attention.<table>.fp8_band_backward] head_dim``): the layout's ``attention_fp8`` changes nothing at another."""
    return frozenset(float(t["fp8_band_backward"]["head_dim"]) for t in _table()["attention"].values()
                     if isinstance(t, dict) and "fp8_band_backward" in t)


def fp8_backward_published(attention_table: str, fp8: str, head_dim: float) -> bool:
    """Whether the attention table ``attention_table`` publishes an FP8 backward of scaling ``fp8`` at
    ``head_dim`` (``kernels.toml [attention.<table>.fp8_band_backward]``): where it does not, the layout's
    ``attention_fp8`` prices nothing (:func:`attention_rate_flops` keeps the BF16 rate)."""
    return bool(fp8) and _fp8_band_fraction(attention_table, fp8, 4096.0, head_dim) is not None


def _fp8_band_fraction(attention_table: str, fp8: str, seq: float, head_dim: float) -> float | None:
    """Fraction of its measuring GPU's peak at which an FP8 backward computes a causal square of ``seq`` keys (a
    causal block, or a sliding-window layer's whole square: ``kernels.toml [attention.<table>.fp8_band_backward]``,
    the ``fp8`` scaling's curve, in log2 of the length, flat outside it); None where the table has none (Hopper's,
    an unmeasured scaling) or ``head_dim`` is not the measured one (assumption: no other head dim is published)."""
    attn = _table()["attention"]
    band = (attn.get(attention_table) or {}).get("fp8_band_backward") if attention_table else None
    if band is None or fp8 not in band or float(head_dim) != float(band["head_dim"]):
        return None
    rates = np.asarray(band[fp8], dtype=float) / float(band["peak_TFLOPs"])
    x = np.log2(np.asarray(band["seq"], dtype=float))
    return float(np.interp(min(max(math.log2(max(1.0, seq)), x[0]), x[-1]), x, rates))


@lru_cache(maxsize=1024)
def cudnn_factor(attention_table: str, cudnn: str, seq: float, backward: bool) -> float:
    """A cuDNN version's attention rate over the attention table's own, one pass at ``seq`` keys: the published set
    the version reads (:func:`.cudnn.table_version`, ``[attention.<table>.cudnn.versions]``) as a fraction of its
    measuring GPU's peak, over the table's own fraction at hdim 128 causal at the set's lengths (the set's ``seq``,
    else its table's ``[cudnn] seq``), linear in log2 of the length inside them, flat outside. 1 for a table
    without versions (Ampere's), for ``cudnn`` "" and for the table's own version (``newest``, where one is named:
    Hopper's table is no published set's, so every version reads one).

    Parameters
    ----------
    attention_table : str
        The GPU's attention table (``KernelModel.attention_table``; "" the Hopper table).
    cudnn : str
        A cuDNN 9 version ("": the table's own).
    seq : float
        Keys of the block.
    backward : bool
        The pass.

    Returns
    -------
    float
        The rate ratio.

    Raises
    ------
    ValueError
        Where a set's lengths fall outside the table's own (a ratio the table cannot price there).
    """
    attn = _table()["attention"]
    versions = (attn[attention_table] if attention_table else attn).get("cudnn")
    if not cudnn or versions is None:
        return 1.0
    published = versions["versions"]
    own_version = [versions["newest"]] if "newest" in versions else []
    pick = table_version(cudnn, [*published, *own_version])
    if pick not in published:
        return 1.0
    v = published[pick]
    lengths = [float(x) for x in v.get("seq", versions.get("seq", []))]
    table_seq = _attention_curve(attention_table, True, backward)[2]
    if not lengths or min(lengths) < min(table_seq) or max(lengths) > max(table_seq):
        raise ValueError(f"kernels.toml: attention.{attention_table or '(hopper)'}.cudnn.versions.{pick}: seq "
                         f"{lengths} lies outside the table's {table_seq}")
    mine = np.asarray(v["bwd" if backward else "fwd"], dtype=float) / float(v["peak_TFLOPs"])
    own = np.asarray([_table_fraction(attention_table, 128, n, True, backward) for n in lengths])
    grid = np.log2(np.asarray(lengths))
    x = min(max(math.log2(max(1.0, seq)), grid[0]), grid[-1])
    return float(np.interp(x, grid, mine / own))


def _table_fraction(attention_table: str, head_dim: float, seq: float, causal: bool, backward: bool) -> float:
    """The attention table's fraction of its measuring GPU's peak at ``seq`` keys, one mask and pass: at each head
    dim by :func:`_interp`, between them linear in log2 of the head dim (outside them, the nearest)."""
    table, peaks, seq_grid, short = _attention_curve(attention_table, causal, backward)
    dims = sorted(int(d) for d in table)
    seqs = np.asarray(seq_grid, dtype=float)
    fractions = [_interp(seqs, np.asarray(table[str(d)], dtype=float) / peaks[str(d)], seq, short) for d in dims]
    d = min(max(float(head_dim), dims[0]), dims[-1])
    return float(np.interp(math.log2(d), np.log2(dims), fractions))


@lru_cache(maxsize=256)
def _window_fraction(attention_table: str, head_dim: float, window: float, backward: bool) -> float:
    """Fraction of the measuring GPU's peak a sliding window of ``window`` keys runs at (one pass), from the
    table's curves by :mod:`.attention_tiles`: at each head dim with both forward masks, the pass's steady rate
    (its full curve's, else its causal's) times ``w / (w + k)``, ``k`` the pass's ``k_causal - k_full`` where the
    table splits the pass by mask (a measured split: Hopper's causal backward is its full curve times a published
    ratio, ``bwd_causal_status`` "derived", and splits nothing), else the forward's (Blackwell's hdim-64 backward)
    on the pass's own full-mask fixed cost where it has one (Hopper's full backward curve:
    :func:`.attention_tiles.window_keys`);
    at the head dim of a measured window (``window``, else ``short``: ``seq`` keys, ``head_dim``) that measurement
    moved along the same curve, its causal triangle first taken out where it gives its ``tokens``
    (:func:`.attention_tiles.band_only_rate`). Between head dims: linear in log2 of the head dim."""
    full_f, _, seq, _ = _attention_curve(attention_table, False, False)
    causal_f = _attention_curve(attention_table, True, False)[0]
    full_p, peaks_p, _, _ = _attention_curve(attention_table, False, backward)
    causal_p, peaks_c, _, short_c = _attention_curve(attention_table, True, backward)
    attn = _table()["attention"]
    a = attn[attention_table] if attention_table else attn
    measured = a.get("window", a.get("short"))
    dims = sorted(int(d) for d in causal_f if d in full_f)
    fractions = []
    for d in dims:
        k = str(d)
        split = backward and k in full_p and k in causal_p and list(full_p[k]) != list(causal_p[k]) \
            and a.get("bwd_causal_status") != "derived"  # a ratio on the full curve: no fixed keys of its own
        own = full_p[k] if backward and not split and k in full_p else None  # one backward curve: its own c
        keys = window_keys(seq, *((full_p[k], causal_p[k]) if split else (full_f[k], causal_f[k])), own)
        steady, peak = (full_p[k], peaks_p[k]) if k in full_p else (causal_p[k], peaks_c[k])
        anchor = None
        if measured is not None and int(measured["head_dim"]) == d:
            w0 = float(measured["seq"])
            rate0 = float(measured["bwd" if backward else "fwd"]) / float(measured["peak_TFLOPs"])
            if "tokens" in measured:  # the band's own rate: the triangle's time at the causal rate taken out
                causal0 = _interp(np.asarray(seq, dtype=float), np.asarray(causal_p[k], dtype=float) / peaks_c[k],
                                  w0, short_c)
                rate0 = band_only_rate(float(measured["tokens"]), w0, causal0, rate0)
            anchor = (w0, rate0)
        fractions.append(window_rate(window, fixed_keys(seq, steady)[0] / peak, keys, anchor))
    d = min(max(head_dim, dims[0]), dims[-1])
    return float(np.interp(math.log2(d), np.log2(dims), fractions))


def memory_s(km: KernelModel, nbytes: float, op: str = "", backward: bool = False) -> float:
    """Seconds to move ``nbytes`` through HBM in a memory-bound kernel (no launch cost): at the share of HBM the
    kernel of operator ``op`` reaches where it is published (``kernels.toml`` ``[memory.kernel_TBps]``,
    :func:`op_memory_efficiency`), else at ``[memory] memory_efficiency``.

    Parameters
    ----------
    km : KernelModel
    nbytes : float
        Bytes the kernel reads and writes.
    op : str
        The memory operator's name (:mod:`topo.training.operators`, e.g. ``norm``); empty for any other kernel.
    backward : bool
        The operator's backward pass (its backward kernel's rate).

    Returns
    -------
    float
    """
    shares = dict(km.op_memory_efficiency).get(op)
    eff = km.memory_efficiency if shares is None else shares[1 if backward else 0]
    return nbytes / (km.hbm_Bps * eff)


def memory_backward_bytes(km: KernelModel, op: str = "") -> float:
    """A memory operator's backward bytes over its forward's: its kernel's where ``kernels.toml``
    ``[memory.kernel_TBps.<kind>] backward_bytes_ratio`` gives them (the backward kernel's operands), else
    ``[memory] backward_bytes_ratio``.

    Parameters
    ----------
    km : KernelModel
    op : str
        The memory operator's name (:mod:`topo.training.operators`, e.g. ``norm``).

    Returns
    -------
    float
    """
    return dict(km.op_backward_bytes).get(op, km.memory_backward_bytes)


def measured_share(rate_TBps: float, measured_hbm_TBps: float) -> float:
    """A kernel's published achieved rate as a share of the HBM bandwidth of the GPU it was measured on (the share
    the model applies on every GPU).

    Parameters
    ----------
    rate_TBps : float
        The kernel's published achieved rate, TB/s.
    measured_hbm_TBps : float
        The HBM bandwidth of the GPU it was measured on, TB/s.

    Returns
    -------
    float
        ``rate_TBps / measured_hbm_TBps``.
    """
    return float(rate_TBps) / float(measured_hbm_TBps)


def op_memory_efficiency(mem: dict) -> tuple:
    """Shares of HBM bandwidth the kernels of named memory operators reach, from ``kernels.toml``
    ``[memory.kernel_TBps.<kind>]`` (``ops``, ``forward_TBps``, ``backward_TBps``, ``measured_hbm_TBps``).

    Parameters
    ----------
    mem : dict
        The ``[memory]`` table.

    Returns
    -------
    tuple
        ``((op, (forward_share, backward_share)), ...)``, each share by :func:`measured_share`.
    """
    out = []
    for kind in mem.get("kernel_TBps", {}).values():
        shares = (measured_share(kind["forward_TBps"], kind["measured_hbm_TBps"]),
                  measured_share(kind["backward_TBps"], kind["measured_hbm_TBps"]))
        out += [(op, shares) for op in kind["ops"]]
    return tuple(out)


def op_backward_bytes(mem: dict) -> tuple:
    """Backward-over-forward bytes of the named memory operators whose kind gives them, from ``kernels.toml``
    ``[memory.kernel_TBps.<kind>] backward_bytes_ratio``.

    Parameters
    ----------
    mem : dict
        The ``[memory]`` table.

    Returns
    -------
    tuple
        ``((op, ratio), ...)``; operators of a kind without the key are absent (they take
        ``[memory] backward_bytes_ratio``, :func:`memory_backward_bytes`).
    """
    return tuple((op, float(kind["backward_bytes_ratio"])) for kind in mem.get("kernel_TBps", {}).values()
                 if "backward_bytes_ratio" in kind for op in kind["ops"])


def permute_efficiency(mem: dict) -> tuple[float, float]:
    """Shares of HBM bandwidth an MoE block's permute and un-permute kernels reach (``kernels.toml``
    ``[memory] permute_TBps`` and ``unpermute_TBps``, measured on a GPU of ``permute_measured_hbm_TBps``).

    Parameters
    ----------
    mem : dict
        The ``[memory]`` table.

    Returns
    -------
    tuple of float
        ``(permute, unpermute)``, each by :func:`measured_share`.
    """
    hbm = mem["permute_measured_hbm_TBps"]
    return measured_share(mem["permute_TBps"], hbm), measured_share(mem["unpermute_TBps"], hbm)


def permute_s(km: KernelModel, nbytes: float) -> float:
    """Seconds to move ``nbytes`` of an MoE block's permutation and un-permutation: half the bytes at the permute's
    share of HBM, half at the un-permute's (each direction moves the same rows; a backward pass runs the two the
    other way round), :func:`permute_efficiency`; at :func:`memory_s`'s share where a model has none.

    Parameters
    ----------
    km : KernelModel
        The GPU's kernel model.
    nbytes : float
        Bytes the op moves, both directions together.

    Returns
    -------
    float
        Seconds, without launch gaps.
    """
    if not km.permute_efficiency:
        return memory_s(km, nbytes)
    e_p, e_u = km.permute_efficiency
    return 0.5 * nbytes / km.hbm_Bps * (1.0 / e_p + 1.0 / e_u)


def _burst_efficiency(km: KernelModel, precision: str, mamf) -> float:
    """The efficiency at which the tile model gives the published MAMF at its best shape's M and N as K grows
    (bisection).

    A MAMF is the maximum of a search over shapes, so the model's rate may reach it but no shape may beat it: the
    tile's fixed prologue (``k0``) is left out here, as if K were large. Calibrating at the measured K instead
    reads the prologue into the rate wherever the search's best K is small (GB200 FP8 at K = 1,536: 0.974,
    against B200's 0.892 at K = 3,072), and the model's GB200 then runs 21% faster than its B200 at large K while
    their MAMFs differ by 5% (docs/calibration-findings.md, 'A Blackwell GEMM model').
    """
    km = replace(km, tile_overhead_k=0.0)
    tflops, M, N, K = mamf
    target = 2.0 * M * N * K / (tflops * 1e12)
    lo, hi = 0.05, 1.0
    if gemm_s(km, M, N, K, precision, efficiency=hi) > target * (1 + 1e-9):
        raise ValueError(f"kernels.toml: mamf.{precision}: {tflops} TFLOP/s at {M} x {N} x {K} is beyond the tile "
                         f"model at efficiency 1: the model cannot reproduce what was measured")
    for _ in range(60):
        mid = (lo + hi) / 2
        if gemm_s(km, M, N, K, precision, efficiency=mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _attention_table(gpu: str, generation: str, named: str = "") -> str:
    """The attention table a GPU reads: the one its catalog entry names (``named``: B300 reads GB300's, the same
    Blackwell Ultra die), else its own (``[attention.<gpu>]``, e.g. GB300: Blackwell Ultra's doubled SFU
    exponential rate), else its generation's, else "" (the Hopper table, scaled)."""
    attn = _table()["attention"]
    if named:
        if not (isinstance(attn.get(named), dict) and "fwd_causal" in attn[named]):
            raise ValueError(f"gpus.toml: {gpu}: attention_table {named!r} is not a table of kernels.toml [attention]")
        return _burst_footing(attn, named)
    for name in (gpu, generation):
        if isinstance(attn.get(name), dict) and "fwd_causal" in attn[name]:
            return _burst_footing(attn, name)
    return _burst_footing(attn, "")


def _attention_cudnn(table: str, generation: str) -> bool:
    """Whether a GPU of ``generation`` reading attention table ``table`` takes its cuDNN versions' ratios: the
    versions' sets were measured on one generation's die (``[attention.<table>.cudnn] generation``, Hopper's), so a
    generation that scales that table (Ampere) keeps the table's rate whatever its cuDNN."""
    attn = _table()["attention"]
    versions = (attn[table] if table else attn).get("cudnn") or {}
    return versions.get("generation", generation) == generation


# The one clock footing an attention table may have: its rates are derated by the generation's sustained ratio
# (MSMF / MAMF), which only a burst-clock rate may take; no soaked attention table is published (kernels.toml
# [attention] clock).
ATTENTION_CLOCK = "burst"


def _burst_footing(attn: dict, name: str) -> str:
    """``name``, once its attention table, its base and their sliding-window tables declare ``clock = "burst"``
    (``kernels.toml`` ``[attention] clock``): :func:`attention_rate_flops` derates every table by the sustained
    ratio, which a table measured at a power-saturated clock would take twice."""
    table = attn[name] if name else attn
    tables = [(name, table)] + ([(table["base"], attn[table["base"]])] if "base" in table else [])
    tables += [(f"{n}.window".lstrip("."), t["window"]) for n, t in tables if isinstance(t.get("window"), dict)]
    for key, t in tables:
        if t.get("clock") != ATTENTION_CLOCK:
            where = f"attention.{key}" if key else "attention"
            raise ValueError(f"kernels.toml: {where}.clock: {t.get('clock')!r}; allowed: {ATTENTION_CLOCK!r} (a "
                             "short benchmark's boost-clock rate, which [sustained] derates as a GEMM's MAMF)")
    return name


def _launch_gap_s(launch: dict, generation: str, graphed: bool) -> float:
    """The GPU-side gap of one kernel of ``generation``: ``[launch] gpu_s_by_generation``'s (eager, graph) pair
    where the generation has one, else ``gpu_s`` either way."""
    pair = launch.get("gpu_s_by_generation", {}).get(generation)
    return float(launch["gpu_s"]) if pair is None else float(pair[1 if graphed else 0])


def _epilogue_overlap(gemm: dict, generation: str) -> float:
    """The generation's share of an accumulating epilogue run behind the MMAs (``kernels.toml`` ``[gemm]
    epilogue_overlap``, one value or one a generation). A generation the table does not list is a data error, not
    a default: the measured generations are 0 (nothing hidden), so no value is safe to assume for another."""
    value = gemm.get("epilogue_overlap", {})
    if isinstance(value, dict):
        if generation not in value:
            raise ValueError(f"kernels.toml: gemm.epilogue_overlap: no value for generation {generation!r} (listed: "
                             f"{', '.join(sorted(value)) or 'none'}); add one with its _status and _source")
        value = value[generation]
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"kernels.toml: gemm.epilogue_overlap.{generation}: {value} is not a share in [0, 1]")
    return float(value)


def _feed_flops_per_byte(feed: dict, generation: str, precision: str) -> float:
    """Shared memory's time for one byte of a tile's operands, in FLOP of its tensor cores' time
    (``kernels.toml`` ``[gemm.feed]``): passes x tensor FLOP per clock / shared-memory bytes per clock, per SM; 0
    for a generation without the figures (no feed bound)."""
    passes = feed.get("passes", {}).get(generation)
    flops = feed.get("tensor_flops_per_clk", {}).get(f"{generation}_{precision}")
    if passes is None or flops is None:
        return 0.0
    return float(passes) * float(flops) / float(feed["smem_bytes_per_clk"])


def _measured_sustained(km: KernelModel, burst: dict, gpu: str, measured: dict) -> float:
    """The sustained-over-burst ratio at which the tile model gives a GPU's published sustained (power-saturated)
    GEMM rates (``[sustained_gemm.<gpu>]``: BF16's where both precisions are given) at their own shapes, in the
    median (bisection).

    Unlike a MAMF these are rates at fixed shapes, not the best of a search, so each is priced at its own M, N and
    K, the tile's prologue included.
    """
    precision = "bf16" if "bf16" in measured else min(measured)
    if precision not in burst:
        raise ValueError(f"kernels.toml: sustained_gemm.{gpu}.{precision}: no mamf.{gpu}.{precision} to scale")
    rows = [(float(r[0]) * 1e12, int(r[1]), int(r[2]), int(r[3])) for r in measured[precision]]

    def model_over_measured(ratio: float) -> float:
        e = burst[precision] * ratio
        return float(np.median([2.0 * m * n * k / gemm_s(km, m, n, k, precision, efficiency=e) / rate
                                for rate, m, n, k in rows]))

    if model_over_measured(1.0) < 1.0:
        raise ValueError(f"kernels.toml: sustained_gemm.{gpu}.{precision}: the measured rates are beyond the "
                         f"model at the burst rate (mamf.{gpu}); a sustained rate is at most the burst rate")
    lo, hi = 0.05, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if model_over_measured(mid) < 1.0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@lru_cache(maxsize=64)
def _kernel_model(gpu: str, generation: str, sms: int, peaks: tuple, hbm_Bps: float,
                  overrides: tuple = (), cpu: str = "", attention: str = "", sm_clock_Hz: float = 0.0) -> KernelModel:
    t = _table()
    over = {k: dict(v) for k, v in overrides}
    g = {**t["gemm"], **over.get("gemm", {})}
    launch = {**t["launch"], **over.get("launch", {})}
    mem = {**t["memory"], **over.get("memory", {})}
    peak = dict(peaks)
    cpu = cpu or host_cpu(gpu)
    km = KernelModel(
        sms=sms, sm_clock_Hz=sm_clock_Hz, peak_flops=peak, efficiency={p: 1.0 for p in peak}, hbm_Bps=hbm_Bps,
        tile_shapes={p: tile_set(generation, p) for p in peak}, tile_overhead_k=float(g["tile_overhead_k"]),
        feed_flops_per_byte={p: _feed_flops_per_byte(g.get("feed", {}), generation, p) for p in peak},
        gemm_memory_efficiency=float(g["gemm_memory_efficiency"]),
        memory_efficiency=float(mem["memory_efficiency"]),
        permute_efficiency=permute_efficiency(mem),
        op_memory_efficiency=op_memory_efficiency(mem),
        memory_backward_bytes=float(mem["backward_bytes_ratio"]), op_backward_bytes=op_backward_bytes(mem),
        attention_scale=1.0 if generation in t["attention"] else float(t["attention"]["scale"][generation]),
        attention_table=_attention_table(gpu, generation, attention),
        attention_cudnn=_attention_cudnn(_attention_table(gpu, generation, attention), generation),
        sustained=float({**t["sustained"], **over.get("sustained", {})}[generation]),
        launch_gpu_s=_launch_gap_s(launch, generation, graphed=False),
        launch_gpu_graph_s=_launch_gap_s(launch, generation, graphed=True),
        launch_host_s=float(launch["host_s"]) * host_time_factor(cpu), host_cpu=cpu,
        launch_cpp_s=float(launch["cpp_launch_s"]) * host_time_factor(cpu),
        launch_cpp_gemm_s=float(launch["cpp_gemm_s"]) * host_time_factor(cpu),
        launch_torch_op_s=float(launch["torch_py_op_s"]) * host_time_factor(cpu),
        launch_torch_cpp_op_s=float(launch["torch_cpp_op_s"]) * host_time_factor(cpu),
        launch_py_s=tuple(float(launch[k]) * float(launch["python_calls_host_factor"]) * host_time_factor(cpu)
                          for k in PYTHON_CALL_KEYS),
        sync_s=float(launch.get("sync_s", 0.0)), overrides=overrides,
        epilogue_overlap=_epilogue_overlap(g, generation))
    mamf = t["mamf"].get(gpu, {})
    burst = {p: _burst_efficiency(km, p, mamf[p]) for p in peak if p in mamf}
    if "bf16" in burst and "fp8" in peak and "fp8" not in burst:
        burst["fp8"] = burst["bf16"]
    if "fp8" in burst and "fp4" in peak and "fp4" not in burst:  # no FP4 MAMF published: FP8's share of peak
        burst["fp4"] = burst["fp8"]
    measured = t.get("sustained_gemm", {}).get(gpu)
    if measured:  # the GPU's own sustained rates replace its generation's ratio
        km = replace(km, sustained=_measured_sustained(km, burst, gpu, measured))
    train = {**t["training"], **over.get("training", {})}
    eff = {p: min(1.0, burst[p] * km.sustained * float(train[f"{generation}_{train.get(f'{p}_takes', p)}"]))
           for p in burst}
    src = f"{t['mamf']['source']}; sustained: {t['sustained_gemm']['source'] if measured else t['sustained']['source']}"
    return replace(km, efficiency=eff, burst=burst, source=src)


def kernel_model(gpu: str, generation: str, sms: int, peak_flops: dict, hbm_Bps: float,
                 overrides: dict | None = None, host_cpu: str | None = None,
                 attention_table: str | None = None, sm_clock_Hz: float = 0.0) -> KernelModel:
    """The kernel model of GPU ``gpu`` (cached).

    Parameters
    ----------
    gpu, generation : str
        A GPU of ``kernels.toml``'s MAMF table and its generation (ampere, hopper, blackwell).
    sms : int
        Its streaming multiprocessors.
    peak_flops : dict
        Dense peak FLOP/s by precision.
    hbm_Bps : float
        HBM bandwidth.
    overrides : dict, optional
        ``{section: {key: value}}`` over ``kernels.toml`` (how a fit tries candidate values).
    host_cpu : str, optional
        The host CPU (a key of ``host_cpu.toml``'s ``[cpu]``, a spec's ``server.host_cpu``); default: the GPU's
        catalog server's.
    attention_table : str, optional
        The ``[attention.<name>]`` table the GPU reads (its catalog entry's ``attention_table``: B300 reads GB300's);
        default: its own, else its generation's.
    sm_clock_Hz : float, optional
        The SMs' maximum clock (``gpus.toml`` ``sm_clock_MHz``); 0: not given (no SM-bound kernel can be priced).
    """
    over = tuple(sorted((k, tuple(sorted(v.items()))) for k, v in (overrides or {}).items()))
    return _kernel_model(gpu, generation, int(sms), tuple(sorted(peak_flops.items())), float(hbm_Bps), over,
                         host_cpu or "", attention_table or "", float(sm_clock_Hz))
