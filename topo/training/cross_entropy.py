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


def cross_entropy_tp(impl: str) -> tuple[str, tuple[int, ...], tuple[str, ...]]:
    """The TP collectives of one forward of ``impl`` over vocabulary shards: the collective (``all_reduce``,
    ``all_gather`` or ``none``) and, one entry per call, the FP32 values a token each carries and what they are
    (``cross_entropy.toml`` ``tp_collective``, ``tp_values_per_token``, ``tp_carries``).

    Parameters
    ----------
    impl : str
        A key of ``cross_entropy.toml``.

    Returns
    -------
    tuple
        ``(collective, values per token of each call, what each call carries)``: e.g. Megatron-Core's fused
        loss ``("all_reduce", (1, 2), ("max logit", "target logit and sum of exponentials"))``.

    Raises
    ------
    ValueError
        Naming the value and the implementations allowed.
    """
    cross_entropy_moves(impl)  # refuses an unknown implementation
    entry = _table()[impl]
    values, carries = entry["tp_values_per_token"], entry["tp_carries"]
    if len(carries) != len(values):  # the data file's own consistency, not the user's input
        raise ValueError(f"cross_entropy.toml [impl.{impl}]: tp_carries has {len(carries)} entries, "
                         f"tp_values_per_token {len(values)}; one each per call")
    return str(entry["tp_collective"]), tuple(int(v) for v in values), tuple(str(w) for w in carries)
