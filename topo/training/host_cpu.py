"""The host CPU's speed at an eager framework's per-op work (``topo/data/compute/host_cpu.toml``).

An eager PyTorch / Transformer Engine step launches its kernels from one CPU thread per GPU, and each op costs
that thread Python, dispatcher and module code besides the CUDA launch (Megatron-LM
``docs/discussions/deepseek-v3-gb200-optimization`` sec. 2). ``kernels.toml``'s ``[launch] host_s`` is that time
per kernel on DGX H100's Xeon Platinum 8480C; another host takes ``time_factor`` times as long (the same op timed
on both: TransformerEngine issue #2053 for Grace).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["host_cpu", "host_time_factor"]


@lru_cache(maxsize=None)
def _table() -> dict:
    with open(data_dir("compute", "host_cpu.toml"), "rb") as f:
        return tomllib.load(f)


def host_cpu(gpu: str) -> str:
    """The host CPU of ``gpu``'s catalog server (a key of ``host_cpu.toml``'s ``[cpu]``).

    Parameters
    ----------
    gpu : str
        A GPU model as the compute catalog names it (``H100``, ``GB200``).

    Returns
    -------
    str
        The CPU's key (``xeon_8480c``, ``xeon_8570``, ``grace``, ...).

    Raises
    ------
    KeyError
        ``gpu`` has no host CPU in the table (every GPU of the compute catalog has one: a test checks it).
    """
    gpus = _table()["gpu"]
    if gpu.upper() not in gpus:
        raise KeyError(f"host_cpu.toml: gpu: no host CPU for {gpu!r}; known: {', '.join(gpus)}")
    return gpus[gpu.upper()]


def host_time_factor(cpu: str) -> float:
    """Seconds of host work per framework op on ``cpu`` over those on the reference CPU (Xeon Platinum 8480C).

    Parameters
    ----------
    cpu : str
        A key of ``host_cpu.toml``'s ``[cpu]`` table.

    Returns
    -------
    float
        The time factor (> 1: a slower host thread).

    Raises
    ------
    KeyError
        ``cpu`` is not in the table.
    """
    return float(_table()["cpu"][cpu]["time_factor"])
