"""The flex dispatcher's published rates and the call they imply, inside one NVLink domain.

Megatron-Core's flex dispatcher (topo's ``ep_dispatcher = "deepep"``) moves an MoE layer's routed tokens with
DeepEP's or HybridEP's kernels, not NCCL's all-to-all. Their authors publish the rate a dispatch or a combine
reaches, by its kernel alone and through the framework's call (``topo/data/compute/ep_dispatch.toml``: algorithm
bandwidth, the bytes a rank receives over the time, by GPU and EP group size). The call through the framework
("Torch API", its routing handle cached: no metadata preprocessing) is the kernel, the copy of the received tokens
out of HybridEP's buffer, and a part that does not scale with the bytes (its test's "misc = device_sync,
update_flag, etc."). topo prices the copy as the MoE block's permutation (Megatron-Core's ``dispatch_with_permute``
makes that copy the permutation), so a call lasts at least its bytes at the kernel's rate plus that fixed part
(:func:`call_s`, :func:`rate_and_fixed_s`; GB200 NVL72 at 8-36 ranks: 0.04-0.12 ms a call). Where only the framework's
rate is published (H100; DeepEP, whose kernel writes its output itself), the bytes at that rate. Each backend has
its own table (:data:`SECTIONS`): HybridEP's, and DeepEP's (its README's GB200 and B200 figures, the Megatron-LM
GB200 study's EP32 ones over MNNVL: 400 / 190 GB/s); a GPU DeepEP's table lacks takes HybridEP's. An expert
all-to-all of this dispatcher inside one NVLink domain takes the slower of the fabric's time and that bound
(:func:`flex_dispatch_s`). Across domains the same rule holds with the scale-out figures:
:mod:`topo.training.ep_internode`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from functools import lru_cache

from ..errors import TopoError
from ..resources import data_dir
from ..units import GB, format_time
from .routing import spread_destinations

__all__ = ["SECTIONS", "SHAPE_KEYS", "stated", "flex_rates", "flex_fixed_s", "flex_dispatch_s", "nearest_column", "api_includes_copy",
           "rate_and_fixed_s", "call_s", "gpu_figures", "figures_for", "figures_key"]

KINDS = ("dispatch", "dispatch_fp8", "combine")

FP8_FACTOR = (1 + 4 / 128) / 2
"""An FP8 token's bytes over a BF16 one's: 1 byte an element and a 4-byte scale per 128 (HybridEP's test,
``fp8_factor``)."""


SECTIONS = {"hybridep": "flex", "deepep": "flex_deepep"}  # backend -> the data file's table
SOURCE = "ep_dispatch.toml"


@lru_cache(maxsize=1)
def _tables() -> dict:
    return tomllib.loads((data_dir("compute") / "ep_dispatch.toml").read_text(encoding="utf-8"))


def figures_key(data: dict, section: str, gpu: str) -> str | None:
    """The one rule by which a data file of published dispatcher figures prices ``gpu`` (``ep_dispatch.toml``,
    ``ep_internode.toml``): the dotted key of the ``section`` table's own ``[section.GPU]``, else that of the GPU it
    takes figures from (the file's ``[same_as]`` ``gpus``: an assumption with its source there), else the same in
    the table the section's ``fallback`` names; None without figures. The key names the table in errors.

    Parameters
    ----------
    data : dict
        The parsed data file.
    section : str
        The backend's table in it (``flex``, ``internode_deepep``, ...).
    gpu : str
        GPU name as the fabric's spec gives it.

    Returns
    -------
    str or None
        ``SECTION.GPU`` of the table read.

    Examples
    --------
    >>> data = {"same_as": {"gpus": {"B300": "B200"}}, "a": {"B200": {"x": 1}, "fallback": "b"},
    ...         "b": {"H100": {"x": 2}}}
    >>> figures_key(data, "a", "B300"), figures_key(data, "a", "H100"), figures_key(data, "a", "A100")
    ('a.B200', 'b.H100', None)
    """
    twin = data.get("same_as", {}).get("gpus", {}).get(gpu)
    while True:
        table = data[section]
        for name in (gpu, twin):
            if name and isinstance(table.get(name), dict):
                return f"{section}.{name}"
        if "fallback" not in table:
            return None
        section = table["fallback"]


def figures_for(data: dict, section: str, gpu: str) -> dict | None:
    """The table of published figures that prices ``gpu`` (:func:`figures_key`'s), None without figures.

    Parameters
    ----------
    data : dict
        The parsed data file.
    section : str
        The backend's table in it (``flex``, ``internode_deepep``, ...).
    gpu : str
        GPU name as the fabric's spec gives it.

    Returns
    -------
    dict or None
        The GPU's table of figures.

    Examples
    --------
    >>> data = {"same_as": {"gpus": {"B300": "B200"}}, "a": {"B200": {"x": 1}, "fallback": "b"},
    ...         "b": {"H100": {"x": 2}}}
    >>> figures_for(data, "a", "B300"), figures_for(data, "a", "H100"), figures_for(data, "a", "A100")
    ({'x': 1}, {'x': 2}, None)
    """
    key = figures_key(data, section, gpu)
    if key is None:
        return None
    section, name = key.split(".", 1)
    return data[section][name]


def gpu_figures(gpu: str, backend: str = "hybridep") -> dict | None:
    """The published figures ``gpu``'s flex dispatcher is priced with inside one NVLink domain for ``backend``
    (:func:`figures_for` on ``ep_dispatch.toml``: B300 takes B200's, GB300 GB200's; DeepEP's table falls back to
    HybridEP's); None without figures.

    Parameters
    ----------
    gpu : str
        GPU name as the fabric's spec gives it.
    backend : {"hybridep", "deepep"}
        The flex dispatcher's backend (``ParallelLayout.ep_flex_backend``).

    Returns
    -------
    dict or None
        The ``[flex.GPU]`` or ``[flex_deepep.GPU]`` table (or its twin's, or its fallback's).
    """
    if backend not in SECTIONS:
        raise TopoError(f"is {backend!r}: allowed {', '.join(SECTIONS)}", key="ep_flex_backend")
    return figures_for(_tables(), SECTIONS[backend], gpu)


def _flex_parts(gpu: str, ranks: int, copy_s: Callable[[float], float] | None, backend: str):
    """Per kind, the rate and fixed part of ``gpu``'s published call (:func:`rate_and_fixed_s` at the published
    shape); None without figures."""
    t = gpu_figures(gpu, backend)
    if t is None:
        return None
    where = dict(source=SOURCE, key=figures_key(_tables(), SECTIONS[backend], gpu))
    i = nearest_column(stated(t, ("ranks",), "the EP group sizes its rates were published at", **where)["ranks"],
                       ranks)
    has_api = "dispatch_GBps" in t
    received = 0.0
    if has_api and ("kernel_dispatch_GBps" in t or api_includes_copy(t, **where)):
        shape = stated(t, (*SHAPE_KEYS, "local_experts"), "the shape of the call its rates were published at", **where)
        received = shape["tokens"] * _test_ranks(shape, t["ranks"][i]) * shape["hidden"] * 2.0
    out = {}
    for k in KINDS:
        f = FP8_FACTOR if k == "dispatch_fp8" else 1.0
        api = float(t[f"{k}_GBps"][i]) * GB if has_api else None
        kernel = float(t[f"kernel_{k}_GBps"][i]) * GB if f"kernel_{k}_GBps" in t else None
        held = 0.0  # the copy the call's rate holds; without copy_s only the kernel's rate is read (flex_rates)
        if has_api and api_includes_copy(t, **where):
            if copy_s is None and kernel is None:
                raise TopoError("the call's rate holds the copy out of the buffer and no kernel rate is given: "
                                "pricing it needs copy_s", **where)
            held = 0.0 if copy_s is None else copy_s(2.0 * received * f)
        if not received:  # a kernel's rate alone, or a call's that holds no copy: that rate, no fixed part
            out[k] = (api if kernel is None else kernel, 0.0)
            continue
        out[k] = rate_and_fixed_s(received * f, api, kernel, held, source=SOURCE, key=f"{where['key']}.{k}_GBps")
    return out


def _test_ranks(shape: dict, ranks: int) -> float:
    """Mean distinct ranks a token reaches in HybridEP's test: ``topk`` distinct experts of the ``local_experts x
    ranks`` drawn uniformly (``torch.randperm(num_of_experts)[:topk]``, deepseek-ai/DeepEP@94a9f8f6 branch hybrid-ep
    tests/test_hybrid_ep.py ``init_tensor``; ``NUM_OF_EXPERTS = NUM_LOCAL_EXPERTS x ranks``, ``test_main``), no
    node limit: the bytes its bandwidth divides are those tokens' copies."""
    return spread_destinations((shape["local_experts"],) * ranks, shape["topk"])


def flex_rates(gpu: str, ranks: int, backend: str = "hybridep",
               copy_s: Callable[[float], float] | None = None) -> dict | None:
    """Rates (bytes/s) at which the flex dispatcher's ``backend`` on ``gpu`` moves a call's bytes for an EP group
    of ``ranks`` in one NVLink domain: ``dispatch``, ``dispatch_fp8``, ``combine``, the kernel's own where
    published, else the call's through the framework, with the copy out of the buffer taken out where that rate
    holds it (:func:`rate_and_fixed_s`); the nearest published group size (the largest for a larger group, the
    smallest for a smaller); a GPU without its own figures takes its twin's (:func:`gpu_figures`); None for a GPU
    with neither.

    Parameters
    ----------
    gpu : str
        GPU name as the fabric's spec gives it (``GB200``, ``B200``, ``H100``).
    ranks : int
        GPUs in the EP group (all in one NVLink domain).
    backend : {"hybridep", "deepep"}
        The flex dispatcher's backend (``ParallelLayout.ep_flex_backend``).
    copy_s : callable, optional
        Seconds an HBM-bound kernel takes to move a number of bytes on ``gpu`` (needed only where a call's rate
        holds the copy).

    Returns
    -------
    dict or None
        ``dispatch``, ``dispatch_fp8`` and ``combine`` rates in bytes/s, or None without published rates.
    """
    parts = _flex_parts(gpu, ranks, copy_s, backend)
    return None if parts is None else {k: rate for k, (rate, _) in parts.items()}


def nearest_column(sizes: list[int], ranks: int) -> int:
    """Index of the published EP group size that stands for ``ranks``: the smallest at least ``ranks``, the largest
    for a larger group (the data files' assumption).

    Parameters
    ----------
    sizes : list of int
        The published group sizes, ascending (a table's ``ranks``).
    ranks : int
        GPUs in the EP group.

    Returns
    -------
    int

    Examples
    --------
    >>> nearest_column([8, 16, 24, 32, 36], 12), nearest_column([8, 16, 24, 32, 36], 64)
    (1, 4)
    """
    return next((j for j, r in enumerate(sizes) if r >= ranks), len(sizes) - 1)


SHAPE_KEYS = ("tokens", "hidden", "topk")  # the shape a table's call rates were published at


def stated(table: dict, names, why: str, *, source: str | None = None, key: str | None = None) -> dict:
    """``names``' values in a table of published figures, each of which it must state: a missing one is the
    project's one line naming the data file, the missing key and why the table needs it (not a ``KeyError``).

    Parameters
    ----------
    table : dict
        A GPU's table of published figures (``ep_dispatch.toml``, ``ep_internode.toml``).
    names : sequence of str
        The keys read.
    why : str
        What they are, said in the error.
    source, key : str, optional
        The data file and the table's dotted key, named in the error.

    Returns
    -------
    dict

    Raises
    ------
    TopoError
        A key is missing.

    >>> stated({"tokens": 4096, "hidden": 7168, "topk": 8}, SHAPE_KEYS, "the shape")
    {'tokens': 4096, 'hidden': 7168, 'topk': 8}
    """
    missing = [n for n in names if n not in table]
    if missing:
        raise TopoError(f"is missing: allowed a table that states {', '.join(names)} ({why})", source=source,
                        key=".".join(p for p in (key, missing[0]) if p))
    return {n: table[n] for n in names}


def api_includes_copy(table: dict, *, source: str | None = None, key: str | None = None) -> bool:
    """Whether a table's published call rates (its Torch API columns) include the copy of the received tokens out
    of the dispatcher's buffer: the table's ``api_includes_copy``, which every table with such a rate states
    (HybridEP's: yes; DeepEP's, whose kernel writes the output itself: no). A kernel's own rate never does.

    Parameters
    ----------
    table : dict
        A GPU's table of published figures (``ep_dispatch.toml``, ``ep_internode.toml``).
    source, key : str, optional
        The data file and the table's dotted key, named in the error.

    Returns
    -------
    bool

    Raises
    ------
    TopoError
        The flag is not a boolean.
    """
    flag = table.get("api_includes_copy")
    if not isinstance(flag, bool):
        raise TopoError(f"is {flag!r} in a table with a call's rate: allowed true or false (whether that rate holds "
                        "the copy out of the buffer)", source=source,
                        key=".".join(p for p in (key, "api_includes_copy") if p))
    return flag


def rate_and_fixed_s(measured_bytes: float, api_Bps: float | None, kernel_Bps: float | None,
                     api_copy_s: float, *, source: str | None = None, key: str | None = None) -> tuple[float, float]:
    """The one rule by which a published call is priced with the copy of the received tokens counted once, as the
    permutation topo prices apart: the kernel's rate where published, plus the call's fixed part, ``measured_bytes``
    at the call's rate less at the kernel's less the copy the call's rate holds (none below zero; zero without a
    call's rate); else the call's rate with that copy taken out (the call's time at the published shape less the
    copy, over the bytes), and no fixed part.

    Parameters
    ----------
    measured_bytes : float
        Bytes the published algorithm bandwidth divides (received bytes inside a domain, RDMA bytes across).
    api_Bps, kernel_Bps : float or None
        The call's and the kernel's published rates, bytes/s (None: not published).
    api_copy_s : float
        Seconds of the copy the call's rate holds (read and write at HBM rate; 0 where it holds none:
        :func:`api_includes_copy`).
    source, key : str, optional
        The data file and the call's rate's dotted key, named in the error.

    Returns
    -------
    tuple of float
        The rate (bytes/s) the call's bytes move at, and the fixed part (s).

    Raises
    ------
    TopoError
        Without a kernel's rate, a call no longer than the copy it holds.
    """
    if kernel_Bps is not None:
        fixed = 0.0 if api_Bps is None else measured_bytes / api_Bps - measured_bytes / kernel_Bps - api_copy_s
        return kernel_Bps, max(0.0, fixed)
    rest_s = measured_bytes / api_Bps - api_copy_s
    if rest_s <= 0:
        raise TopoError(f"a published call of {measured_bytes:.3g} B at {api_Bps / GB:.6g} GB/s is no longer than the "
                        f"copy it holds ({format_time(api_copy_s)}): allowed: a rate whose call outlasts that copy, or "
                        "api_includes_copy = false", source=source, key=key)
    return measured_bytes / rest_s, 0.0


def call_s(size_bytes: float, elem_bytes: float, kernel_Bps: dict, fixed_s: dict) -> float:
    """Least seconds of one call: ``size_bytes`` at the kernel's rate plus the call's fixed part, for an FP8
    dispatch (1-byte elements, their 1x128 scales added as the published rate counts them: x (1 + 4/128)), else the
    mean of a BF16 dispatch and a combine (a step's calls pair them: dispatch and combine forward, their gradients
    backward).

    Parameters
    ----------
    size_bytes : float
        Bytes of the call's elements (received bytes inside a domain, RDMA bytes across), no scales.
    elem_bytes : float
        Bytes per element of the tokens moved (1: FP8 dispatch, 2: BF16).
    kernel_Bps, fixed_s : dict
        Per kind (:data:`KINDS`): the kernel's rate in bytes/s, the fixed part in seconds.

    Returns
    -------
    float
    """
    if elem_bytes < 2:
        return size_bytes * 2 * FP8_FACTOR / kernel_Bps["dispatch_fp8"] + fixed_s["dispatch_fp8"]
    return sum(size_bytes / kernel_Bps[k] + fixed_s[k] for k in ("dispatch", "combine")) / 2


def flex_fixed_s(gpu: str, ranks: int, copy_s: Callable[[float], float], backend: str = "hybridep") -> dict | None:
    """The fixed part of each kind of call inside one NVLink domain (:func:`rate_and_fixed_s` at the published
    shape: its tokens, hidden size and top-k, uniform routing, the received tokens one copy per token and
    destination rank); zero where the call's and the kernel's rates are not both published.

    Parameters
    ----------
    gpu : str
        GPU name (``GB200``, ``B200``, ``H100``).
    ranks : int
        GPUs in the EP group (all in one NVLink domain).
    copy_s : callable
        Seconds an HBM-bound kernel takes to move a number of bytes on ``gpu``.
    backend : {"hybridep", "deepep"}
        The flex dispatcher's backend.

    Returns
    -------
    dict or None
        Seconds per kind (:data:`KINDS`); None without published rates.
    """
    parts = _flex_parts(gpu, ranks, copy_s, backend)
    return None if parts is None else {k: fixed for k, (_, fixed) in parts.items()}


def flex_dispatch_s(gpu: str, ranks: int, size_bytes: float, elem_bytes: float,
                    copy_s: Callable[[float], float], backend: str = "hybridep") -> float | None:
    """Least seconds of one all-to-all call of the flex dispatcher inside one NVLink domain: ``size_bytes`` (what a
    rank receives) at the kernel's published rate plus the call's fixed part (:func:`call_s`,
    :func:`flex_fixed_s`), or at the framework's rate where the kernel's is not published; None without published
    rates for ``gpu``.

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
    copy_s : callable
        Seconds an HBM-bound kernel takes to move a number of bytes on ``gpu``.
    backend : {"hybridep", "deepep"}
        The flex dispatcher's backend (``ParallelLayout.ep_flex_backend``): HybridEP's figures or DeepEP's.

    Returns
    -------
    float or None
    """
    r = flex_rates(gpu, ranks, backend, copy_s)
    if r is None:
        return None
    return call_s(size_bytes, elem_bytes, r, flex_fixed_s(gpu, ranks, copy_s, backend))
