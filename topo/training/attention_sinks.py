"""The attention kernel a model with attention sinks runs, and what the sink adds to it.

gpt-oss adds a learnable per-head offset to every softmax (the model file's ``[attention] sinks``). Transformer
Engine runs no FlashAttention with a sink; cuDNN's fused attention takes it from cuDNN 9.13.1, below which the layer
runs unfused (``topo/data/compute/attention_sinks.toml``, with the source's lines). :func:`sink_backend` reads the
layout's cuDNN (its container's, :mod:`.cudnn`); :func:`sink_grad_bytes` prices the sink's gradient in the fused
backward.
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache

from ..errors import TopoError
from ..resources import data_dir
from .cudnn import parse_version

__all__ = ["SINKS", "sink_backend", "sink_grad_bytes"]

SINKS = ("none", "learnable", "off-by-one")
"""The model file's ``[attention] sinks``: none (plain softmax), a learnable offset a head (gpt-oss), or a fixed
zero logit (Transformer Engine's ``off-by-one``); both sinks take the same kernels."""


@lru_cache(maxsize=1)
def _rules() -> dict:
    return tomllib.loads((data_dir("compute") / "attention_sinks.toml").read_text(encoding="utf-8"))


def _full_version(version: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a cuDNN 9 version (``"9.13.1.26"`` -> ``(9, 13, 1)``; no patch: 0)."""
    major, minor = parse_version(version)
    m = re.fullmatch(r"9\.\d+\.(\d+)(?:\.\d+)?", str(version).strip())
    return major, minor, int(m[1]) if m else 0


def sink_backend(sinks: str, cudnn_version: str, cp: int = 1, cp_comm_type: str = "p2p",
                 attention_fp8: str = "") -> str:
    """The attention kernel Transformer Engine picks for a layer with sinks at the layout's cuDNN.

    Parameters
    ----------
    sinks : str
        The model's ``[attention] sinks`` (:data:`SINKS`).
    cudnn_version : str
        The cuDNN the run's container ships (``ParallelLayout.cudnn_version``).
    cp, cp_comm_type : int, str
        Context parallelism and its exchange (the layout's).
    attention_fp8 : str
        The layout's ``attention_fp8`` ("" for BF16 attention).

    Returns
    -------
    str
        ``none`` (no sink: the layout's own kernel), ``fused`` (cuDNN's, at its plain rate plus
        :func:`sink_grad_bytes`) or ``unfused`` (the s x s scores materialised).

    Raises
    ------
    TopoError
        Keyed by the option, naming the value where no backend runs the layer (context parallelism other than a2a; FP8 attention before
        cuDNN 9.21), or a ``sinks`` not in :data:`SINKS`.
    """
    if sinks not in SINKS:
        raise TopoError(f"{sinks!r}; allowed: {', '.join(SINKS)}", key="attention.sinks")
    if sinks == "none":
        return "none"
    rules = _rules()
    if cp > 1 and cp_comm_type not in rules["cp_comm_types"]:
        raise TopoError(f"{cp_comm_type!r} with attention sinks (cp {cp}): Transformer Engine runs sink attention "
                        f"under context parallelism only with cp_comm_type {' or '.join(rules['cp_comm_types'])}",
                        source="layout", key="cp_comm_type")
    fused = _full_version(cudnn_version) >= _full_version(rules["fused_min_cudnn"])
    if attention_fp8 and not _full_version(cudnn_version) >= _full_version(rules["fp8_min_cudnn"]):
        raise TopoError(f"{attention_fp8!r} with attention sinks at cuDNN {cudnn_version}: Transformer Engine runs "
                        f"FP8 sink attention from cuDNN {rules['fp8_min_cudnn']} (Blackwell)", source="layout",
                        key="attention_fp8")
    if cp > 1 and not fused:
        raise TopoError(f"{cp} with attention sinks at cuDNN {cudnn_version}: only cuDNN's fused attention (cuDNN "
                        f"{rules['fused_min_cudnn']} or newer) runs them under context parallelism",
                        source="layout", key="cp")
    return "fused" if fused else "unfused"


def sink_grad_bytes(rows: float) -> tuple[float, float]:
    """HBM bytes and kernel launches the sink's gradient adds to cuDNN's fused backward over ``rows`` (query,
    head) rows: the softmax statistics and ``rowsum(dO o O)`` read once more (``[dsink]``, an upper bound)."""
    d = _rules()["dsink"]
    return float(d["bytes_per_row"]) * rows, float(d["launches"])
