"""The MXFP8 weight-scale swizzle Transformer Engine runs in every GEMM call that reads an MXFP8 weight.

cuBLASLt reads MXFP8 scales in a tiled layout; TE's weight quantizers write the compact one (they never set
``optimize_for_gemm``), so each fprop and dgrad GEMM call's C++ allocates a buffer and launches one swizzle kernel
for its weight's scales: one kernel for every expert of a grouped call (``multi_tensor_swizzle_scales_for_gemm``),
one a dense GEMM (``swizzle_scales_for_gemm``); none in wgrad, whose operands are cast already swizzled. The kernel
reads the compact scales and writes the swizzled ones: 2 x 1/32 bytes a weight element. Counts, lines and pins:
``topo/data/compute/mxfp8_weight_swizzle.toml`` (NVIDIA/TransformerEngine v2.12 5671fd36, v2.14 f031cf87, v2.16
4220403e: ``pytorch/csrc/extensions/gemm.cpp``, ``swizzle.cpp``).

Under sequence parallelism (TP > 1) the operand a linear all-gathers is quantised without GEMM-ready scales too
(``optimize_for_gemm`` off for a column-parallel linear's input and a row-parallel linear's output gradient), so
its GEMM calls swizzle the gathered operand's scales as well (:func:`gathered_swizzles`; ``[sp_gathered]``).

FP8 block scaling has no cuBLASLt GEMM on Blackwell: TE's GEMM call converts both operands' block-wise scales to
swizzled MXFP8 ones instead (:func:`block_conversions`; ``[blockwise_to_mxfp8]`` of the same file), in every pass.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from .grouped_gemm import CPP_LOOP_PATHS

__all__ = ["block_conversions", "cast_memsets", "conversion_bytes", "converts", "gathered_swizzle_bytes",
           "gathered_swizzles", "scale_kernels", "swizzle_bytes", "swizzle_host_s", "weight_swizzles"]


@lru_cache(maxsize=1)
def _file() -> dict:
    return tomllib.loads((data_dir("compute") / "mxfp8_weight_swizzle.toml").read_text(encoding="utf-8"))


def _table() -> dict:
    return _file()["swizzle"]


def _convert() -> dict:
    return _file()["blockwise_to_mxfp8"]


def _gathered() -> dict:
    return _file()["sp_gathered"]


def cast_memsets(op, precision: str, backward: bool = False) -> float:
    """Scale-buffer memsets one MXFP8 cast of ``op``'s pass input issues before its kernel (each expert's cast of
    a grouped GEMM alike): ``[cast_memset]`` of ``mxfp8_weight_swizzle.toml``.

    A cast that writes GEMM-ready (swizzled) scales, ``optimize_for_gemm``, zeroes its row-wise and column-wise
    scale buffers with a ``cudaMemsetAsync`` each when the tensor does not fill whole 128 x 128 tiles
    (Transformer Engine ``common/cast/mxfp8/quantize_mxfp8.cuh``). Rows of the cast: ``op.m`` (a grouped
    expert's token count: dropless, ``m_sd`` > 0, a multiple of the tile only by chance, so taken as not one);
    columns: ``op.k`` forward (X), ``op.n`` backward (dY). None for an operand a sequence-parallel all-gather
    makes (its quantizer keeps compact scales: :func:`gathered_swizzles`).

    Parameters
    ----------
    op : topo.training.operators.Op
        A GEMM operator (``mxfp8``: its recipe is MXFP8).
    precision : str
        The precision it runs at (only ``fp8`` quantises).
    backward : bool
        The backward's cast (dY), else the forward's (X).

    Returns
    -------
    float
        ``memsets_per_cast`` (0 where the tiles are whole, or for any other operator, precision or recipe).
    """
    if not (op.kind == "gemm" and op.linear and op.mxfp8 and precision == "fp8"):
        return 0.0
    if op.sp_gather == ("rs" if backward else "ag"):
        return 0.0
    t = _file()["cast_memset"]
    cols = op.n if backward else op.k
    whole = (op.m_sd == 0 and op.m % t["tile_rows"] == 0) and cols % t["tile_cols"] == 0
    return 0.0 if whole else float(t["memsets_per_cast"])


def _passes(backward: bool) -> tuple[str, ...]:
    return ("dgrad", "wgrad") if backward else ("fprop",)


def weight_swizzles(op, precision: str, backward: bool = False) -> float:
    """Swizzle kernels ``op``'s pass launches for its MXFP8 weight's scales.

    Parameters
    ----------
    op : topo.training.operators.Op
        A GEMM operator (``mxfp8``: its layout's recipe is MXFP8; ``weights``: it reads a weight).
    precision : str
        The layout's precision (only ``fp8`` quantises the weight).
    backward : bool
        The backward (dgrad and wgrad), else the forward (fprop).

    Returns
    -------
    float
        ``kernels_per_call`` of the pass's GEMMs that read the weight (fprop forward, dgrad backward) times the GEMM
        calls: one for every expert of a grouped call issued from C++ (:data:`.grouped_gemm.CPP_LOOP_PATHS`), else
        ``op.launches``; 0 for any other operator, precision, recipe or issue path (the fused grouped MLP).
    """
    if not (op.kind == "gemm" and op.linear and op.weights and op.mxfp8 and precision == "fp8"):
        return 0.0
    if op.expert_kernels and op.expert_kernels not in CPP_LOOP_PATHS:
        return 0.0
    per = _table()["kernels_per_call"]
    kernels = per["dgrad"] + per["wgrad"] if backward else per["fprop"]
    calls = 1.0 if op.expert_kernels in CPP_LOOP_PATHS else op.launches
    return float(kernels) * calls


def swizzle_bytes(op, precision: str, backward: bool = False) -> float:
    """HBM bytes of ``op``'s pass's :func:`weight_swizzles`: the weight's scales read and written.

    Parameters
    ----------
    op : topo.training.operators.Op
    precision : str
    backward : bool

    Returns
    -------
    float
        ``passes_over_scales x scale_bytes_per_element x N x K x groups`` for each pass that swizzles, 0 else.
    """
    if not weight_swizzles(op, precision, backward):
        return 0.0
    return _scale_bytes(op.n * op.k * op.groups)


def _scale_bytes(elements: float) -> float:
    """HBM bytes one swizzle kernel moves for a tensor of ``elements`` elements: its scales read and written
    (``[swizzle]``'s ``passes_over_scales x scale_bytes_per_element`` an element)."""
    t = _table()
    return float(t["passes_over_scales"]) * float(t["scale_bytes_per_element"]) * elements


def _gathered_kernels(op, precision: str, backward: bool) -> float:
    """Swizzles a pass of ``op`` launches for its all-gathered operand's scales, per GEMM call (see
    :func:`gathered_swizzles`)."""
    if not (op.kind == "gemm" and op.linear and op.mxfp8 and precision == "fp8" and op.sp_gather):
        return 0.0
    per = _gathered()["kernels_per_call"][op.sp_gather]
    return float(sum(per[p] for p in _passes(backward)))


def gathered_swizzles(op, precision: str, backward: bool = False) -> float:
    """Swizzle kernels ``op``'s pass launches for the scales of the operand its sequence-parallel all-gather made.

    Transformer Engine leaves ``optimize_for_gemm`` off for a column-parallel linear's input and a row-parallel
    linear's output gradient under sequence parallelism (its ``_get_quantizers``), so the all-gathered MXFP8 tensor
    carries compact scales and every GEMM call that reads it swizzles them into a new buffer
    (``swizzle_scales_for_gemm`` on both operands): a column linear's fprop (the gathered input, row-wise) and wgrad
    (the input gathered again, column-wise); a row linear's dgrad and wgrad (the gathered output gradient, row-wise
    and column-wise). ``[sp_gathered]`` of ``mxfp8_weight_swizzle.toml``.

    Parameters
    ----------
    op : topo.training.operators.Op
        A GEMM operator (``sp_gather``: ``ag`` a column-parallel linear whose input is gathered, ``rs`` a
        row-parallel one whose output gradient is; empty: no sequence-parallel gather, TP 1 included).
    precision : str
        The layout's precision (only ``fp8`` quantises).
    backward : bool
        The backward (dgrad and wgrad), else the forward (fprop).

    Returns
    -------
    float
        The pass's ``kernels_per_call`` times ``op.launches``; 0 for any other operator, precision or recipe.
    """
    return _gathered_kernels(op, precision, backward) * op.launches


def gathered_swizzle_bytes(op, precision: str, backward: bool = False) -> float:
    """HBM bytes of ``op``'s pass's :func:`gathered_swizzles`: the gathered operand's scales read and written,
    ``passes_over_scales x scale_bytes_per_element`` an element of it (the input ``m x k``, the output gradient
    ``m x n``) a kernel.

    Parameters
    ----------
    op : topo.training.operators.Op
    precision : str
    backward : bool

    Returns
    -------
    float
    """
    kernels = gathered_swizzles(op, precision, backward)
    if not kernels:
        return 0.0
    return kernels * _scale_bytes(op.m * (op.k if op.sp_gather == "ag" else op.n) * op.groups)


def block_conversions(op, precision: str, backward: bool = False) -> float:
    """Kernels ``op``'s pass launches converting its operands' FP8 block-wise scales to swizzled MXFP8 ones.

    Transformer Engine runs FP8 block scaling on Blackwell as MXFP8 GEMMs: each GEMM call converts both operands
    (``convert_block_scaling_to_mxfp8_tensor``), fprop, dgrad and wgrad alike; a grouped call each expert's
    (``[blockwise_to_mxfp8]`` of ``mxfp8_weight_swizzle.toml``).

    Parameters
    ----------
    op : topo.training.operators.Op
        A GEMM operator (``block_convert``: its layout's recipe is block-wise on a generation that converts).
    precision : str
        The layout's precision (only ``fp8`` quantises).
    backward : bool
        The backward (dgrad and wgrad), else the forward (fprop).

    Returns
    -------
    float
        The operands of the pass's GEMMs times ``op.launches`` (a GEMM call, or an expert's GEMM of a grouped
        call); 0 for any other operator, precision or recipe.
    """
    if not (op.kind == "gemm" and op.linear and op.block_convert and precision == "fp8"):
        return 0.0
    operands = _convert()["operands"]
    return float(sum(len(operands[p]) for p in _passes(backward))) * op.launches


def conversion_bytes(op, precision: str, backward: bool = False) -> float:
    """HBM bytes of ``op``'s pass's :func:`block_conversions`: each operand's FP32 block scales read (4 bytes a 1x128
    block of an input or output gradient, a 128x128 block of a weight) and its E8M0 scales written (one byte a 1x32
    block).

    Parameters
    ----------
    op : topo.training.operators.Op
    precision : str
    backward : bool

    Returns
    -------
    float
        The sum over the pass's GEMMs' operands of ``(read + write bytes an element) x elements x groups`` (weight
        ``n k``, input ``m k``, output gradient ``m n``), 0 where nothing converts.
    """
    if not block_conversions(op, precision, backward):
        return 0.0
    t = _convert()
    elements = {"weight": op.n * op.k, "input": op.m * op.k, "output_grad": op.m * op.n}
    per = (lambda name: float(t["read_bytes_per_element"][str(t["block_dims"][name])])
           + float(t["write_bytes_per_element"]))
    return sum(per(name) * elements[name] for p in _passes(backward) for name in t["operands"][p]) * op.groups


def converts(generation: str) -> bool:
    """Whether Transformer Engine's GEMM on a GPU of ``generation`` runs FP8 block scaling as MXFP8
    (``[blockwise_to_mxfp8] generations``: ``sm_arch() >= 100``)."""
    return generation in _convert()["generations"]


def scale_kernels(op, precision: str, backward: bool = False) -> float:
    """The scale kernels ``op``'s GEMM calls launch from C++ in a pass: :func:`weight_swizzles` and
    :func:`gathered_swizzles` (MXFP8) plus :func:`block_conversions` (block-wise on Blackwell)."""
    return (weight_swizzles(op, precision, backward) + gathered_swizzles(op, precision, backward)
            + block_conversions(op, precision, backward))


def swizzle_host_s(op, torch_cpp_op_s: float, precision: str, backward: bool = False) -> float:
    """CPU seconds of the swizzles' and block-wise conversions' scale buffers (``allocateSpace``: one tensor ATen
    makes from C++ a kernel); the kernels' launches are priced with the call's other C++ kernels
    (:func:`.operators.launch_calls`).

    Parameters
    ----------
    op : topo.training.operators.Op
    torch_cpp_op_s : float
        The host's seconds a tensor made from C++ (``KernelModel.launch_torch_cpp_op_s``).
    precision : str
    backward : bool

    Returns
    -------
    float
    """
    return ((weight_swizzles(op, precision, backward) + gathered_swizzles(op, precision, backward))
            * float(_table()["allocations_per_kernel"])
            + block_conversions(op, precision, backward) * float(_convert()["allocations_per_kernel"])) * torch_cpp_op_s
