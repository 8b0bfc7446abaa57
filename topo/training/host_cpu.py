"""The host CPU's speed at an eager framework's per-op work (``topo/data/compute/host_cpu.toml``).

An eager PyTorch / Transformer Engine step launches its kernels from one CPU thread per GPU, and each op costs
that thread Python, dispatcher and module code besides the CUDA launch (Megatron-LM
``docs/discussions/deepseek-v3-gb200-optimization`` sec. 2). ``kernels.toml``'s ``[launch] host_s`` is that time
per kernel on DGX H100's Xeon Platinum 8480C; another host takes ``time_factor`` times as long (the same op timed
on both: TransformerEngine issue #2053 for Grace).
"""

from __future__ import annotations

from ..fabric.server_cpu import default_host_cpu, host_cpu_table

__all__ = ["host_cpu", "host_time_factor", "reference_host_cpu"]

host_cpu = default_host_cpu  # the GPU's catalog server's CPU (a spec's server.host_cpu replaces it)


def reference_host_cpu() -> str:
    """The CPU every ``time_factor`` is relative to (``host_cpu.toml``'s ``reference``).

    Returns
    -------
    str
        A key of the ``[cpu]`` table.
    """
    return str(host_cpu_table()["reference"])


def host_time_factor(cpu: str) -> float:
    """Seconds of host work per framework op on ``cpu`` over those on :func:`reference_host_cpu`'s.

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
    return float(host_cpu_table()["cpu"][cpu]["time_factor"])
