"""``topo train --ops``: each block's operators as the step model prices them (:mod:`topo.training.op_table`),
as a table per block kind or the ``block_ops`` key of the JSON document, and each pipeline rank's compute per
micro-batch (the ``stage_compute`` key)."""

from __future__ import annotations

from ..training.model import Block
from .output import emit, table

BLOCK_NAMES = {Block.ATTENTION: "attention block", Block.LOCAL: "local attention block",
               Block.MLP: "dense MLP block", Block.MOE: "MoE block", Block.MAMBA: "Mamba-2 block",
               "embedding": "embedding", "logits": "output head and loss",
               "mtp_head": "multi-token-prediction head and loss"}


def print_op_table(ops: dict) -> None:
    """Print the operator tables of :func:`topo.training.op_table.step_op_table`, one per block kind, in us.

    Parameters
    ----------
    ops : dict
        Block kind -> its rows (:func:`topo.training.op_table.block_op_table`).
    """
    for kind, rows in ops.items():
        emit()
        emit(f"operators of one {BLOCK_NAMES[kind]} ({kind}), one micro-batch on one GPU (us; host: the CPU's "
             "launches, 0 where a CUDA graph captures the op):")
        body = [[r["op"], r["module"], f"{r['forward_s'] * 1e6:,.1f}", f"{r['backward_s'] * 1e6:,.1f}",
                 f"{r['host_forward_s'] * 1e6:,.1f}", f"{r['host_backward_s'] * 1e6:,.1f}",
                 f"{r['kernels_forward']:.4g} / {r['kernels_backward']:.4g}", _margin(r)] for r in rows]
        body.append(["total", "", *(f"{sum(r[k] for r in rows) * 1e6:,.1f}"
                                    for k in ("forward_s", "backward_s", "host_forward_s", "host_backward_s")), "", ""])
        emit(table(body, ["op", "module", "GPU fwd", "GPU bwd", "host fwd", "host bwd", "kernels", "SMs given up"],
                   right=[False, False, True, True, True, True, True, False]))


def _margin(row: dict) -> str:
    """The SMs each GEMM pass of ``row`` gives up to its userbuffers communicator (``fprop 24, dgrad 16``), or ""."""
    return ", ".join(f"{p} {n}" for p, n in (row.get("sm_margin") or {}).items())


def print_stage_table(stages: list[dict], microbatches: int) -> None:
    """Print each pipeline rank's compute of :func:`topo.training.op_table.step_stage_table`, in ms per
    micro-batch and s per step; nothing for one rank.

    Parameters
    ----------
    stages : list of dict
        One per pipeline rank (:func:`topo.training.op_table.stage_table`).
    microbatches : int
        Micro-batches per step.
    """
    if len(stages) < 2:
        return
    emit()
    emit(f"compute of each pipeline rank, one micro-batch (ms) and the step's {microbatches} (s); the busiest (*) "
         "sets the pace:")
    body = [[f"{r['rank']}{' *' if r['busiest'] else ''}", str(r["layers"]), " ".join(r["ends"]),
             *(f"{r[k] * 1e3:,.1f}" for k in ("forward_s", "backward_s", "recompute_s", "microbatch_s")),
             f"{r['microbatch_s'] * microbatches:,.2f}",
             f"{r['by_module_s'].get('logits', 0.0) * 1e3:,.1f}"] for r in stages]
    emit(table(body, ["rank", "layers", "end units", "fwd", "bwd", "recompute", "total", "step", "of it logits"],
               right=[False, True, False, True, True, True, True, True, True]))
