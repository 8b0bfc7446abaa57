"""The host's time per call kind, as published (``topo/data/compute/host_calls.toml``).

An eager step's host thread spends its time per framework call (a module's Python and checks, the PyTorch
dispatcher, autograd's record, the CUDA launch), not per kernel alone: TransformerEngine issue #2053 timed one
``torch.nn.Linear`` forward and one TE ``Linear`` forward (one GEMM kernel each) on three hosts. topo's step model
prices the host per kernel (``kernels.toml`` ``[launch] host_s``) times the host CPU's time factor; a CPU whose
``host_cpu.toml`` row names a call kind (``time_factor_call``: Grace) takes its factor from these figures
(:func:`topo.training.host_cpu.host_time_factor`), and a HybridEP all-to-all call is priced from its measured
figure (:func:`topo.training.operators.ep_calls_host`, :func:`topo.training.host_cpu.call_host_on_s`). The rest
(TE's extra per call and the release it went away in, the qualitative rows) is the published record a per-call
model would be built from; nothing prices it yet (docs/calibration-findings.md, the host per call kind section).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["call_host_s", "host_call_table"]


@lru_cache(maxsize=None)
def host_call_table() -> dict:
    """topo/data/compute/host_calls.toml as read (cached).

    Returns
    -------
    dict
        ``call``: each call kind's ``what``, ``host_s`` by host CPU (where published), status and source.
    """
    with open(data_dir("compute", "host_calls.toml"), "rb") as f:
        return tomllib.load(f)


def call_host_s(kind: str, cpu: str, part: str | None = None) -> float:
    """Published host seconds of one call of ``kind`` on ``cpu`` (of its ``part`` where the source times the
    call's parts apart).

    Parameters
    ----------
    kind : str
        A key of ``host_calls.toml``'s ``[call]`` (``torch_linear_forward``, ``te_linear_forward``).
    cpu : str
        A key of ``host_cpu.toml``'s ``[cpu]``.
    part : str, optional
        A key of the kind's table of figures by part on ``cpu`` (``[call.deepep_v1_call]``: ``dispatch_forward``,
        ``combine_forward``, ``dispatch_backward``, ``combine_backward``). A kind with one figure prices every part
        alike; a kind with figures by part needs one.

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    KeyError
        One line naming the call kind and the CPU: the kind is unknown, no source measured it on that CPU, or the
        part is missing or not one of the kind's parts.
    """
    calls = host_call_table()["call"]
    if kind not in calls:
        raise KeyError(f"call kind {kind!r}: not in host_calls.toml (known: {', '.join(sorted(calls))})")
    measured = calls[kind].get("host_s", {})
    if cpu not in measured:
        raise KeyError(f"call kind {kind!r} on host CPU {cpu!r}: no published figure "
                       f"(published on: {', '.join(sorted(measured)) or 'none'})")
    figure = measured[cpu]
    if not isinstance(figure, dict):
        return float(figure)
    if part not in figure:
        raise KeyError(f"call kind {kind!r} on host CPU {cpu!r}: part {part!r} has no figure "
                       f"(allowed: {', '.join(sorted(figure))})")
    return float(figure[part])
