"""Megatron-Core DDP's per-parameter backward hook: the host's Python work once a parameter, backward and
micro-batch (``_make_backward_post_hook`` on the parameter's AccumulateGrad node, NVIDIA/Megatron-LM@d98e8a64
``megatron/core/distributed/distributed_data_parallel.py``; counted in
``topo/data/compute/megatron_ddp_grad_hook.toml``). A grouped expert module's experts are one Parameter each, so
its backward runs one hook an expert; a dense linear's one.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["ddp_hooks_run", "grad_hook_host_s", "hook_python_calls"]


@lru_cache(maxsize=1)
def hook_python_calls() -> tuple[float, float, float]:
    """One hook call's Python work by kind (``megatron_ddp_grad_hook.toml [hook] python_kinds``).

    Returns
    -------
    tuple of float
        ``(Python-level calls, Python objects converted to C++ by a bound call, Python objects built from C++)``,
        the order of ``KernelModel.launch_py_s``.
    """
    t = tomllib.loads((data_dir("compute") / "megatron_ddp_grad_hook.toml").read_text(encoding="utf-8"))
    return tuple(float(n) for n in t["hook"]["python_kinds"])


def grad_hook_host_s(op, launch_py_s: tuple, backward: bool = False) -> float:
    """CPU seconds of the DDP hooks ``op``'s backward runs: one a weight (``op.groups``), when its layout runs
    Megatron-Core DDP (``op.grad_hooks``).

    Parameters
    ----------
    op : topo.training.operators.Op
    launch_py_s : tuple of float
        The host's seconds a Python call, a pybind conversion and a Python object built from C++
        (``KernelModel.launch_py_s``).
    backward : bool
        The backward pass; the forward runs no hook.

    Returns
    -------
    float
    """
    if not (backward and op.grad_hooks and op.kind == "gemm" and op.weights):
        return 0.0
    return op.groups * sum(n * price for n, price in zip(hook_python_calls(), launch_py_s))


def ddp_hooks_run(lay) -> bool:
    """Whether ``lay``'s weight gradients run Megatron-Core DDP's per-parameter backward hook: gradients into
    ``main_grad`` below ZeRO-3 (Megatron-FSDP, FSDP2 and JAX register none that this module prices).

    Parameters
    ----------
    lay : topo.training.parallel.ParallelLayout

    Returns
    -------
    bool

    Examples
    --------
    >>> from topo.training.parallel import ParallelLayout
    >>> ddp_hooks_run(ParallelLayout(tp=1, dp=8, global_batch=8, dp_sharding="zero1"))
    True
    >>> ddp_hooks_run(ParallelLayout(tp=1, dp=8, global_batch=8, dp_sharding="zero3"))
    False
    """
    return lay.wgrad_output == "main_grad" and lay.zero_stage < 3

