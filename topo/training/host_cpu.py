"""The host CPU's speed at an eager framework's per-op work (``topo/data/compute/host_cpu.toml``).

An eager PyTorch / Transformer Engine step launches its kernels from one CPU thread per GPU, and each op costs
that thread Python, dispatcher and module code besides the CUDA launch (Megatron-LM
``docs/discussions/deepseek-v3-gb200-optimization`` sec. 2). ``kernels.toml``'s ``[launch] host_s`` is that time
per kernel on DGX H100's Xeon Platinum 8480C; another host takes ``time_factor`` times as long (the same op timed
on both: TransformerEngine issue #2053 for Grace, read from ``host_calls.toml`` by :mod:`topo.training.host_calls`).
"""

from __future__ import annotations

from ..fabric.server_cpu import default_host_cpu, host_cpu_table
from .host_calls import call_host_s

__all__ = ["host_cpu", "host_time_factor", "reference_host_cpu", "call_host_on_s"]

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

    Notes
    -----
    A CPU whose row names ``time_factor_call`` takes the ratio of that call kind's published host times on it and
    on the reference (:func:`topo.training.host_calls.call_host_s`; Grace: TE #2053's ``torch.nn.Linear``
    forward, 37.08 / 13.48 us), so the figure lives in ``host_calls.toml`` alone.
    """
    row = host_cpu_table()["cpu"][cpu]
    if "time_factor_call" in row:
        kind = row["time_factor_call"]
        return call_host_s(kind, cpu) / call_host_s(kind, reference_host_cpu())
    return float(row["time_factor"])


def call_host_on_s(kind: str, cpu: str, part: str | None = None) -> float:
    """Host seconds of one call of ``kind`` (its ``part``: :func:`topo.training.host_calls.call_host_s`) on
    ``cpu``: its published figure there, else the reference CPU's (:func:`reference_host_cpu`) times ``cpu``'s time
    factor (:func:`host_time_factor`).

    Parameters
    ----------
    kind : str
        A key of ``host_calls.toml``'s ``[call]`` with a figure on ``cpu`` or on the reference CPU.
    cpu : str
        A key of ``host_cpu.toml``'s ``[cpu]``.
    part : str, optional
        The call's part, for a kind timed by part (``[call.deepep_v1_call]``).

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    KeyError
        One line: the call kind is unknown, has no figure on ``cpu`` nor on the reference, ``cpu`` is unknown, or
        ``part`` is not one of the kind's parts.
    """
    try:
        return call_host_s(kind, cpu, part)
    except KeyError:
        ref = reference_host_cpu()
        if cpu not in host_cpu_table()["cpu"]:
            raise KeyError(f"host CPU {cpu!r}: not in host_cpu.toml") from None
        return call_host_s(kind, ref, part) * host_time_factor(cpu) / host_time_factor(ref)
