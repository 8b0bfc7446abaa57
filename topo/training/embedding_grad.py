"""The word embedding's weight gradient: the bytes per token row and the kernels of PyTorch's dense embedding
backward and of Megatron-LM's accumulation into ``main_grad``.

``topo/data/compute/embedding_grad.toml`` holds them with their sources; :func:`topo.training.operators.block_ops`
prices the ``embedding_wgrad`` operator from them and the layout's gradient bytes (the ``embedding`` unit, and the
``mtp_head`` unit's lookup of the shifted tokens).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir

__all__ = ["embedding_grad_costs"]


@lru_cache(maxsize=1)
def _table() -> dict:
    return tomllib.loads((data_dir("compute") / "embedding_grad.toml").read_text(encoding="utf-8"))


def embedding_grad_costs() -> tuple[float, int, int]:
    """``(bytes per element of the tokens x hidden rows, dense-backward kernels, accumulation kernels)``.

    Returns
    -------
    tuple
        ``embedding_grad.toml``'s ``[dense_backward] token_bytes`` and ``kernels``, ``[accumulate] kernels``.
    """
    t = _table()
    return (float(t["dense_backward"]["token_bytes"]), int(t["dense_backward"]["kernels"]),
            int(t["accumulate"]["kernels"]))
