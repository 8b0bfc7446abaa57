"""What a GPU holds per parameter of a weight kept in FP8 (Megatron-Core's ``fp8_param_gather``).

With ``--fp8-param-gather`` Megatron-Core keeps the linear layers' weights as Transformer Engine quantized tensors,
no BF16 copy: the DDP param buffer holds their 1-byte rowwise data, and after each parameter all-gather Transformer
Engine adds what the backward's GEMMs read: a Float8Tensor (delayed or per-tensor current scaling) its transpose
where the GPU has no non-TN FP8 GEMM (Hopper; not Blackwell), a blockwise tensor its column-wise copy, an MXFP8
tensor both directions and their block scales from the optimizer's cast. The fp32 main weights stay in the
optimizer's bytes. An MXFP8 weight is gathered otherwise: Megatron-Core maps no param buffer onto it, gathers
the weights in BF16 through the gradient buffer (``reuse_grad_buf_for_mxfp8_param_ag``: no memory of its own) and
casts each into its MXFP8Tensor after the gather (:func:`gathers_in_fp8`). Figures and sources:
``topo/data/compute/fp8_params.toml``.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from .parallel import ParallelLayout

__all__ = ["fp8_param_bytes", "gathers_in_fp8", "kept_in_fp8", "tensor_kind"]


@lru_cache(maxsize=1)
def _table() -> dict:
    return tomllib.loads((data_dir("compute") / "fp8_params.toml").read_text(encoding="utf-8"))


def kept_in_fp8(lay: ParallelLayout) -> bool:
    """Whether ``lay`` keeps its layers' weights in FP8 (``fp8_param_gather`` with precision fp8)."""
    return bool(lay.fp8_param_gather) and lay.precision == "fp8"


def tensor_kind(lay: ParallelLayout) -> str:
    """The Transformer Engine tensor a weight kept in FP8 is, as ``fp8_params.toml`` names its table: ``blockwise``
    (Float8BlockwiseQTensor), ``mxfp8`` (MXFP8Tensor), else ``float8_tensor`` (delayed or per-tensor current
    scaling). The one mapping the memory and the gather read, on every GPU: on Blackwell Transformer Engine keeps a
    blockwise weight as such and converts only its scales to MXFP8's for each GEMM (``fp8_params.toml``; rev69 Left
    a: the memory priced it as an MXFP8Tensor, the gather as blockwise).

    Parameters
    ----------
    lay : ParallelLayout
        Its ``fp8_recipe``.

    Returns
    -------
    str
    """
    return {"blockwise": "blockwise", "mxfp8": "mxfp8"}.get(lay.fp8_recipe, "float8_tensor")


def gathers_in_fp8(lay: ParallelLayout) -> bool:
    """Whether the data-parallel all-gather of ``lay``'s layer weights carries their 1-byte FP8 data.

    Parameters
    ----------
    lay : ParallelLayout
        Its ``fp8_param_gather``, ``precision`` and ``fp8_recipe``.

    Returns
    -------
    bool
        True for weights kept in FP8 whose storage is the param buffer (per-tensor and blockwise scaling); False
        without ``fp8_param_gather`` and for MXFP8, whose weights Megatron-Core gathers in BF16 through the
        gradient buffer (``fp8_params.toml``'s ``gathered_in_fp8``).
    """
    if not kept_in_fp8(lay):
        return False
    return bool(_table()[tensor_kind(lay)]["gathered_in_fp8"])


def fp8_param_bytes(lay: ParallelLayout, generation: str | None) -> float:
    """Bytes one GPU holds per parameter of a linear weight kept in FP8 (``fp8_params.toml``): rowwise data,
    the column-wise copy or transpose where the recipe and GPU keep one, and the block scales.

    Parameters
    ----------
    lay : ParallelLayout
        Its ``fp8_recipe`` (unset, delayed or current: per-tensor ``Float8Tensor``; blockwise; mxfp8).
    generation : str or None
        The GPU's generation (``GpuCompute.generation``); Blackwell runs FP8 GEMMs in any layout, so a per-tensor
        weight keeps no transpose there. None: unknown, the transpose counted (the larger figure).

    Returns
    -------
    float
        Bytes per parameter: 2 on Hopper, 1 on Blackwell (per-tensor); 2.0005 blockwise (on Blackwell too: its
        weight stays blockwise, :func:`tensor_kind`); 2.0625 MXFP8.
    """
    t = _table()
    non_tn = generation in t["non_tn_fp8_gemm"]["generations"]
    row = t[tensor_kind(lay)]
    columnwise = 0.0 if row["columnwise_only_without_non_tn_gemm"] and non_tn else row["columnwise_bytes"]
    return row["rowwise_bytes"] + columnwise + row["scale_bytes"]
