"""``topo train --ops``: each block's operators as the step model prices them (:mod:`topo.training.op_table`),
as a table per block kind or the ``block_ops`` key of the JSON document."""

from __future__ import annotations

from ..training.model import Block
from .output import emit, table

BLOCK_NAMES = {Block.ATTENTION: "attention", Block.LOCAL: "local attention", Block.MLP: "dense MLP",
               Block.MOE: "MoE", Block.MAMBA: "Mamba-2"}


def print_op_table(ops: dict) -> None:
    """Print the operator tables of :func:`topo.training.op_table.step_op_table`, one per block kind, in us.

    Parameters
    ----------
    ops : dict
        Block kind -> its rows (:func:`topo.training.op_table.block_op_table`).
    """
    for kind, rows in ops.items():
        emit()
        emit(f"operators of one {BLOCK_NAMES[kind]} block ({kind}), one micro-batch on one GPU (us; host: the CPU's "
             "launches, 0 where a CUDA graph captures the op):")
        body = [[r["op"], r["module"], f"{r['forward_s'] * 1e6:,.1f}", f"{r['backward_s'] * 1e6:,.1f}",
                 f"{r['host_forward_s'] * 1e6:,.1f}", f"{r['host_backward_s'] * 1e6:,.1f}",
                 f"{r['kernels_forward']:.4g} / {r['kernels_backward']:.4g}"] for r in rows]
        body.append(["total", "", *(f"{sum(r[k] for r in rows) * 1e6:,.1f}"
                                    for k in ("forward_s", "backward_s", "host_forward_s", "host_backward_s")), ""])
        emit(table(body, ["op", "module", "GPU fwd", "GPU bwd", "host fwd", "host bwd", "kernels"],
                   right=[False, False, True, True, True, True, True]))
