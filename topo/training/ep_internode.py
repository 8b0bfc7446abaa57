"""The flex dispatcher's call across NVLink domains: its kernel at the published rate plus the call's fixed part.

Megatron-Core's flex dispatcher (topo's ``ep_dispatcher = "deepep"``) sends a token once to each destination node
over the scale-out network (HybridEP, DeepEP). Its authors publish on DGX H100 both the rate of the dispatch and
combine kernels alone and of the same calls through the framework's API, on one shape (hidden 7,168:
``topo/data/compute/ep_internode.toml``). The API's call is the kernel, a copy of the received tokens out of the
dispatcher's buffer, and a part that does not scale with the bytes (the stream synchronisation that reads the
received count, flag updates). Megatron-Core calls ``dispatch_with_permute``, whose permute kernel replaces that
copy (priced with the MoE block's compute, :func:`topo.training.operators._permute_bytes`); the kernel and the fixed
part remain. So a call lasts at least its bytes at the kernel's rate plus the fixed part
(:func:`internode_call_s`), which at the published shape is the published API time and at a smaller hidden size
(Qwen3-30B-A3B's 2,048: 4 KiB a token against 14 KiB) keeps the fixed part whole, where a rate read off the API
would shrink it with the bytes.

DeepSeek's DeepEP V1 (``ep_flex_backend = "deepep"``) publishes its kernels' rates alone, measured without the
notify kernel and the host's wait for the received counts, its kernel writing the received tokens in place: its call
lasts at least its bytes at those rates, with no fixed part known (a lower bound; ``[internode_deepep]``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from functools import lru_cache

from ..resources import data_dir
from ..units import GB
from .ep_dispatch import (FP8_FACTOR, KINDS, SHAPE_KEYS, api_includes_copy, call_s, figures_for, figures_key,
                          nearest_column, rate_and_fixed_s, stated)
from .routing import spread_destinations

__all__ = ["internode_table", "internode_fixed_s", "internode_call_s", "FP8_FACTOR"]


SECTIONS = {"hybridep": "internode", "deepep": "internode_deepep"}  # backend -> the data file's table
SOURCE = "ep_internode.toml"


@lru_cache(maxsize=1)
def _data() -> dict:
    return tomllib.loads((data_dir("compute") / SOURCE).read_text(encoding="utf-8"))


def internode_table(gpu: str, ranks: int, backend: str = "hybridep") -> dict | None:
    """The published figures for an EP group of ``ranks`` on ``gpu`` (the nearest published group size, the largest
    for a larger group, the smallest for a smaller): the reference shape and, per kind (``dispatch``,
    ``dispatch_fp8``, ``combine``), ``(api, kernel)`` rates in bytes/s (``api`` None where only the kernel is
    published: DeepEP V1); None for a GPU without figures.

    Parameters
    ----------
    gpu : str
        GPU name as the fabric's spec gives it (``H100``).
    ranks : int
        GPUs in the EP group.
    backend : {"hybridep", "deepep"}
        The flex dispatcher's backend (``ParallelLayout.ep_flex_backend``).

    Returns
    -------
    dict or None
        ``ranks`` (the published size used), ``tokens``, ``hidden``, ``topk``, ``gpus_per_node`` and the rates.
    """
    t = figures_for(_data(), SECTIONS[backend], gpu)  # its own, else those of the GPU it takes them from
    if t is None:
        return None
    key = figures_key(_data(), SECTIONS[backend], gpu)
    out = stated(t, ("ranks", *SHAPE_KEYS, "gpus_per_node"), "the group sizes and the call's shape its rates were "
                 "published at", source=SOURCE, key=key)
    i = nearest_column(out["ranks"], ranks)
    out["key"] = key
    out["api_includes_copy"] = (api_includes_copy(t, source=SOURCE, key=out["key"]) if f"{KINDS[0]}_GBps" in t
                                else False)
    out["ranks"] = t["ranks"][i]
    for k in KINDS:
        api = t.get(f"{k}_GBps")
        out[k] = (None if api is None else float(api[i]) * GB, float(t[f"{k}_kernel_GBps"][i]) * GB)
    return out


def internode_fixed_s(gpu: str, ranks: int, copy_s: Callable[[float], float],
                      backend: str = "hybridep") -> dict | None:
    """Seconds a call of each kind adds beyond its kernel and the copy of the received tokens, at the published
    shape: the API's time minus the kernel's minus the copy's (``copy_s`` of the bytes it reads and writes: the
    tokens a rank receives, one copy per token and destination rank, under the test's uniform routing); zero
    where only the kernel is published (DeepEP V1: its fixed part is unknown, the bound the kernel alone).

    Parameters
    ----------
    gpu : str
        GPU name (``H100``).
    ranks : int
        GPUs in the EP group.
    copy_s : callable
        Seconds an HBM-bound kernel takes to move a number of bytes on ``gpu``.
    backend : {"hybridep", "deepep"}
        The flex dispatcher's backend.

    Returns
    -------
    dict or None
        Seconds per kind (``dispatch``, ``dispatch_fp8``, ``combine``), none below zero; None without figures.
    """
    t = internode_table(gpu, ranks, backend)
    if t is None:
        return None
    if all(t[k][0] is None for k in KINDS):  # the kernels' rates alone (DeepEP V1): no fixed part known
        return {k: 0.0 for k in KINDS}
    # HybridEP's test routes each token to topk distinct experts of local_experts x ranks drawn uniformly, no node
    # limit (tests/test_hybrid_ep.py init_tensor, torch.randperm(num_of_experts)[:topk]; topo.training.ep_dispatch)
    local = stated(figures_for(_data(), SECTIONS[backend], gpu), ("local_experts",),
                   "the experts per rank of the test's routing", source=SOURCE, key=t["key"])["local_experts"]
    nodes = max(1, t["ranks"] // t["gpus_per_node"])
    token = t["hidden"] * 2.0  # a BF16 token's bytes
    rdma = t["tokens"] * spread_destinations((local * t["ranks"] // nodes,) * nodes, t["topk"]) * token
    received = t["tokens"] * spread_destinations((local,) * t["ranks"], t["topk"]) * token
    out = {}
    for k in KINDS:
        f = FP8_FACTOR if k == "dispatch_fp8" else 1.0
        api, kernel = t[k]
        held = copy_s(2.0 * received * f) if t["api_includes_copy"] else 0.0
        out[k] = rate_and_fixed_s(rdma * f, api, kernel, held, source=SOURCE, key=f"{t['key']}.{k}_GBps")[1]
    return out


def internode_call_s(gpu: str, ranks: int, size_bytes: float, elem_bytes: float,
                     copy_s: Callable[[float], float], backend: str = "hybridep") -> float | None:
    """Least seconds of one flex-dispatcher call whose EP group spans NVLink domains: ``size_bytes`` (one copy per
    token and destination node, as the fabric's all-to-all carries it) at the kernel's published rate, plus the
    call's fixed part (:func:`internode_fixed_s`; the rule of :func:`.ep_dispatch.call_s`, as inside a domain): an
    FP8 dispatch for 1-byte elements (its scales added), else the mean of a BF16 dispatch and a combine.

    Parameters
    ----------
    gpu : str
        GPU name (``H100``).
    ranks : int
        GPUs in the EP group.
    size_bytes : float
        Bytes a rank sends over the scale-out network in the call.
    elem_bytes : float
        Bytes per element of the tokens moved (1: FP8 dispatch, 2: BF16).
    copy_s : callable
        Seconds an HBM-bound kernel takes to move a number of bytes on ``gpu``.
    backend : {"hybridep", "deepep"}
        The flex dispatcher's backend (HybridEP; DeepEP V1: its kernels' rates, no fixed part).

    Returns
    -------
    float or None
        None without published figures for ``gpu``.
    """
    t = internode_table(gpu, ranks, backend)
    if t is None:
        return None
    return call_s(size_bytes, elem_bytes, {k: t[k][1] for k in KINDS},
                  internode_fixed_s(gpu, ranks, copy_s, backend))
