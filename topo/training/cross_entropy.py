"""The HBM bytes and kernels of the loss over the logits, by the implementation a run's framework calls.

``topo/data/compute/cross_entropy.toml`` lists each implementation (``ParallelLayout.cross_entropy``) with the
bytes it moves per logit forward and backward and the kernels that sweep the vocabulary, counted from the kernel
source (file and commit in each entry). :func:`cross_entropy_moves` reads one entry; the operator list prices it
as bytes x tokens x vocabulary / TP at HBM rate (:func:`topo.training.operators.block_ops`, the ``logits`` block).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["cross_entropy_impls", "cross_entropy_moves", "cross_entropy_tp"]


@lru_cache(maxsize=1)
def _table() -> dict:
    return tomllib.loads((data_dir("compute") / "cross_entropy.toml").read_text(encoding="utf-8"))["impl"]


def cross_entropy_impls() -> tuple[str, ...]:
    """The implementations ``cross_entropy.toml`` lists, in its order."""
    return tuple(_table())


def cross_entropy_moves(impl: str) -> tuple[tuple[float, int], tuple[float, int]]:
    """``((forward bytes per logit, kernels), (backward bytes per logit, kernels))`` of ``impl``.

    Parameters
    ----------
    impl : str
        A key of ``cross_entropy.toml`` (``fused``, ``te``, ``te_fp32_grad``, ``megatron_unfused``,
        ``torch_bf16``).

    Returns
    -------
    tuple
        The forward and backward pass's bytes per BF16 logit and kernel count.

    Raises
    ------
    ValueError
        Naming the value and the implementations allowed.
    """
    table = _table()
    if impl not in table:
        raise ValueError(f"cross_entropy={impl!r} is not a known implementation; allowed: {', '.join(table)}")
    entry = table[impl]
    return ((float(entry["forward_bytes"]), int(entry["forward_kernels"])),
            (float(entry["backward_bytes"]), int(entry["backward_kernels"])))


def cross_entropy_tp(impl: str) -> tuple[str, tuple[int, ...]]:
    """The TP collectives of one forward of ``impl`` over vocabulary shards: the collective (``all_reduce``,
    ``all_gather`` or ``none``) and, one entry per call, the FP32 values a token each carries
    (``cross_entropy.toml`` ``tp_collective``, ``tp_values_per_token``).

    Parameters
    ----------
    impl : str
        A key of ``cross_entropy.toml``.

    Returns
    -------
    tuple
        ``(collective, values per token of each call)``.

    Raises
    ------
    ValueError
        Naming the value and the implementations allowed.
    """
    cross_entropy_moves(impl)  # refuses an unknown implementation
    entry = _table()[impl]
    return str(entry["tp_collective"]), tuple(int(v) for v in entry["tp_values_per_token"])
