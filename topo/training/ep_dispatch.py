"""The flex dispatcher's own rate: DeepEP / HybridEP dispatch and combine inside one NVLink domain.

Megatron-Core's flex dispatcher (topo's ``ep_dispatcher = "deepep"``) moves an MoE layer's routed tokens with
DeepEP's or HybridEP's kernels, not NCCL's all-to-all. Their authors publish the rate a dispatch or a combine
reaches, by its kernel alone and through the framework's call (``topo/data/compute/ep_dispatch.toml``: algorithm
bandwidth, the bytes a rank receives over the time, by GPU and EP group size). topo prices the call's copy of the
received tokens into the experts' order as the MoE block's permutation and its preprocessing as the router's
kernels, so the kernel's rate is the one used where it is published (GB200 NVL72: 600-760 GB/s at 32 SMs; the call
through the framework: 450-570, the copy and the rest included). An expert all-to-all of this dispatcher inside one
NVLink domain takes the slower of the fabric's time and its bytes at that rate (:func:`flex_dispatch_s`). Across
domains the scale-out network binds: the call's own bound there is :mod:`topo.training.ep_internode`'s.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from ..units import GB

__all__ = ["flex_rates", "flex_dispatch_s"]


@lru_cache(maxsize=1)
def _table() -> dict:
    return tomllib.loads((data_dir("compute") / "ep_dispatch.toml").read_text(encoding="utf-8"))["flex"]


def flex_rates(gpu: str, ranks: int) -> dict | None:
    """Published rates (bytes/s) of the flex dispatcher on ``gpu`` for an EP group of ``ranks`` in one NVLink
    domain: ``dispatch``, ``dispatch_fp8``, ``combine``, the kernel's own where published (``kernel_*``), else the
    call through the framework's; the nearest published group size (the largest for a larger group, the smallest
    for a smaller); None for a GPU without published rates.

    Parameters
    ----------
    gpu : str
        GPU name as the fabric's spec gives it (``GB200``, ``B200``, ``H100``).
    ranks : int
        GPUs in the EP group (all in one NVLink domain).

    Returns
    -------
    dict or None
        ``dispatch``, ``dispatch_fp8`` and ``combine`` rates in bytes/s, or None without published rates.
    """
    t = _table().get(gpu)
    if t is None:
        return None
    sizes = t["ranks"]
    i = next((j for j, r in enumerate(sizes) if r >= ranks), len(sizes) - 1)
    return {k: float(t.get(f"kernel_{k}_GBps", t[f"{k}_GBps"])[i]) * GB
            for k in ("dispatch", "dispatch_fp8", "combine")}


def flex_dispatch_s(gpu: str, ranks: int, size_bytes: float, elem_bytes: float) -> float | None:
    """Seconds of one all-to-all call of the flex dispatcher at its published rate: ``size_bytes`` (what a rank
    receives) at the FP8 dispatch rate for 1-byte elements (an FP8 dispatch), else at the mean time of a BF16
    dispatch and a combine (the calls of a step pair them: dispatch and combine forward, their gradients
    backward); None without published rates for ``gpu``.

    Parameters
    ----------
    gpu : str
        GPU name as the fabric's spec gives it (``GB200``, ``B200``, ``H100``).
    ranks : int
        GPUs in the EP group (all in one NVLink domain).
    size_bytes : float
        Bytes one rank receives in the call.
    elem_bytes : float
        Bytes per element of the tokens moved (1: FP8 dispatch, 2: BF16).

    Returns
    -------
    float or None
    """
    r = flex_rates(gpu, ranks)
    if r is None:
        return None
    if elem_bytes < 2:
        return size_bytes / r["dispatch_fp8"]
    return 0.5 * (size_bytes / r["dispatch"] + size_bytes / r["combine"])
