"""The host's time per call kind, as published (``topo/data/compute/host_calls.toml``).

An eager step's host thread spends its time per framework call (a module's Python and checks, the PyTorch
dispatcher, autograd's record, the CUDA launch), not per kernel alone: TransformerEngine issue #2053 timed one
``torch.nn.Linear`` forward and one TE ``Linear`` forward (one GEMM kernel each) on three hosts. topo's step model
prices the host per kernel (``kernels.toml`` ``[launch] host_s``); these figures are the per-call side, read by
the tests that tie ``host_cpu.toml``'s Grace factor to them and by the findings that score a per-call model.
"""

from __future__ import annotations

import datetime
import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["call_host_s", "host_call_table", "te_linear_extra_host_s"]


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


def call_host_s(kind: str, cpu: str) -> float:
    """Published host seconds of one call of ``kind`` on ``cpu``.

    Parameters
    ----------
    kind : str
        A key of ``host_calls.toml``'s ``[call]`` (``torch_linear_forward``, ``te_linear_forward``).
    cpu : str
        A key of ``host_cpu.toml``'s ``[cpu]``.

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    KeyError
        One line naming the call kind and the CPU: the kind is unknown, or no source measured it on that CPU.
    """
    calls = host_call_table()["call"]
    if kind not in calls:
        raise KeyError(f"call kind {kind!r}: not in host_calls.toml (known: {', '.join(sorted(calls))})")
    measured = calls[kind].get("host_s", {})
    if cpu not in measured:
        raise KeyError(f"call kind {kind!r} on host CPU {cpu!r}: no published figure "
                       f"(published on: {', '.join(sorted(measured)) or 'none'})")
    return float(measured[cpu])


def te_linear_extra_host_s(cpu: str, release_date: datetime.date) -> float:
    """Host seconds a Transformer Engine ``Linear`` forward costs over a ``torch.nn.Linear`` forward on ``cpu``,
    for a TE release of ``release_date``: the #2053 difference before TE's CPU-overhead work was done
    (``extra_gone_by``, TE #2126), none from then on (qualitative: "nearly the same").

    Parameters
    ----------
    cpu : str
        A key of ``host_cpu.toml``'s ``[cpu]``.
    release_date : datetime.date
        The TE release's date.

    Returns
    -------
    float
        Seconds (>= 0).

    Raises
    ------
    KeyError
        Before the fix, on a CPU without both published figures (:func:`call_host_s`).
    """
    gone_by = datetime.date.fromisoformat(host_call_table()["call"]["te_linear_forward"]["extra_gone_by"])
    if release_date >= gone_by:
        return 0.0
    return call_host_s("te_linear_forward", cpu) - call_host_s("torch_linear_forward", cpu)
