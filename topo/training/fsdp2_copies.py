"""PyTorch FSDP2's copies around each unit's all-gather and reduce-scatter (``ParallelLayout.wgrad_output =
"fsdp2"`` under ZeRO-3), as kernels and HBM bytes per block and pass.

From the implementation (pytorch/pytorch@010ae4a8 ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``,
streams from ``_fsdp_param_group.py`` ``FSDPCommContext.get_all_gather_streams``), per FSDP unit (a parameter
group: torchtitan and NeMo AutoModel wrap each transformer layer; the experts, sharded on their own mesh, are a
group of their own):

- **copy-in** (``foreach_all_gather``): ``torch.ops.fsdp.all_gather_copy_in`` copies the unit's shards into the
  all-gather's input buffer with one ``torch._foreach_copy_`` (a ``_foreach_copy_`` casting the shards to
  ``MixedPrecisionPolicy.param_dtype`` precedes it when they are stored in another dtype: ``FSDPParam`` clamps
  ``param_dtype`` to None when it equals the stored dtype; that cast kernel is not counted, also where a layout's
  ``gather_bytes`` differs from its ``weight_bytes``). It runs on ``all_gather_copy_in_stream`` (implicit prefetching, forward and pre-backward), not the
  compute stream: the host launches it, the compute stream does not run it.
- **copy-out** (``foreach_all_gather_copy_out``): one ``torch.ops.fsdp.split_with_sizes_copy`` from the
  all-gather's output into the unsharded parameters, on the compute stream (``wait_for_unshard``), reading and
  writing every gathered element once: ``2 x`` the gather's bytes (``weight_gather_bytes``: ``gather_bytes``,
  default ``weight_bytes``) a parameter the GPU holds (before sharding).
- **reduce copy-in** (``foreach_reduce``): one ``torch.ops.fsdp.chunk_cat`` of the unit's gradients into the
  reduce-scatter buffer, on the compute stream; its bytes are the weight-gradient GEMM's
  (:func:`topo.training.operators.wgrad_kw`, ``grad_copy_bytes``), its launch is counted here.

Each gather and reduce is one unit's, so a layer's blocks share its unit's kernels (a two-block layer's attention
and MLP half each); an MoE block adds the experts' unit. A unit is gathered before its forward and, when it
reshards after the forward (``fsdp_reshard_after_forward``), again before its backward; it is gathered and
reduced in ``ParallelLayout.fsdp_unit_rounds`` of the step's micro-batches (the step's ZeRO-3 traffic's rule):
every one, or once a schedule run under PyTorch pipelining (``fsdp_pipeline_sync = "step"``), the copies priced
per micro-batch as their mean over the step (:func:`unit_round_share`). The reduce-scatter stream's own kernels
after the reduction (the division, the cast to the stored dtype, ``+=`` into the sharded gradient from the second
micro-batch on) run off the compute stream and are not counted.

Under ``step`` the stage module runs every backward with gradient sync and resharding off and reduces once after
the last (pytorch/pytorch@01386103 ``torch/distributed/pipelining/stage.py`` ``backward_maybe_with_nosync``,
``_post_backward``). Its units, kept from the forward (``fsdp_reshard_after_forward`` false) and after each
backward, stay unsharded from the first forward of a run to its reduction: ``unshard`` returns at once for an
unsharded group and ``wait_for_unshard`` copies out nothing without a pending all-gather (``_fsdp_param_group.py``
at the commit below), so each unit's copy-in and copy-out run once a run. FSDP2's gradient kernels on the compute
stream are, per weight-gradient element
(pytorch/pytorch@010ae4a89516fa3be548ab16dff711414ec12d0b ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``
``FSDPParamGroup.post_backward``, ``_fsdp_param.py`` ``FSDPParam.to_accumulated_grad_if_needed`` and
``accumulate_unsharded_grad_if_needed``, ``_fsdp_collectives.py`` ``foreach_reduce``; :func:`fsdp2_grad_copy_bytes`):
the first backward of a run casts the new gradient to the reduce dtype (``.to(reduce_dtype)``: the gradient's bytes
read, the reduction's written; nothing where the two dtypes are the same, the gradient kept as it is); every later
backward adds the new gradient into that unsharded accumulator (``unsharded_accumulated_grad +=``, or autograd's
in-place ``param.grad +=`` where the dtypes are the same: the new gradient and the accumulator read, the
accumulator written); after the last backward ``foreach_reduce``'s ``chunk_cat`` copies the accumulator, already in
the reduce dtype, into the reduce-scatter buffer (the reduction's bytes read and written). The accumulation's
kernels are one a parameter (a Python loop over the unit's parameters, no foreach); their launches are not priced,
as PyTorch's own accumulation's are not (:func:`topo.training.operators.autograd_add_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import BLOCK_KINDS, ModelSpec
from .parallel import ParallelLayout
from .unit_params import block_params_on_gpu, unit_params

__all__ = ["Fsdp2Copies", "fsdp2_copies", "copies_units", "unit_round_share", "fsdp2_grad_copy_bytes",
           "COPY_IN_KERNELS", "COPY_OUT_KERNELS", "REDUCE_COPY_KERNELS"]

COPY_IN_KERNELS = 1  # all_gather_copy_in's _foreach_copy_, per gather (module doc)
COPY_OUT_KERNELS = 1  # split_with_sizes_copy, per gather
REDUCE_COPY_KERNELS = 1  # chunk_cat, per reduce-scatter


@dataclass(frozen=True)
class Fsdp2Copies:
    """One block's share of FSDP2's copies, a mean per micro-batch over the step (:func:`unit_round_share`), by
    pass: the compute stream's kernels and bytes, and the copy-in kernels the host launches onto the copy-in
    stream."""

    forward_kernels: float
    forward_bytes: float
    forward_side_kernels: float
    backward_kernels: float
    backward_bytes: float
    backward_side_kernels: float


def copies_units(lay: ParallelLayout) -> bool:
    """Whether the layout runs FSDP2's unit copies: FSDP2's gradients (``wgrad_output = "fsdp2"``) under ZeRO-3,
    whose units are gathered and reduced (the one place the step's compute reads the data-parallel sharding).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    bool
    """
    return lay.wgrad_output == "fsdp2" and lay.zero_stage == 3


def unit_round_share(lay: ParallelLayout) -> float:
    """The share of a step's micro-batches in which each unit is gathered (its copy-in and copy-out) and its
    gradients reduce-scattered (the ``chunk_cat``): ``fsdp_unit_rounds / microbatches``, 1 where every micro-batch
    gathers and reduces, ``pipeline_flushes / microbatches`` under ``fsdp_pipeline_sync = "step"`` (the one rule,
    :attr:`~topo.training.parallel.ParallelLayout.fsdp_unit_rounds`).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    float
    """
    return lay.fsdp_unit_rounds / lay.microbatches


def fsdp2_grad_copy_bytes(lay: ParallelLayout, grad_bytes: float, reduce_bytes: float) -> float:
    """Bytes per weight-gradient element FSDP2's gradient kernels on the compute stream move, a mean per
    micro-batch over the step (module doc), after the weight-gradient GEMM has written a new gradient of
    ``grad_bytes`` an element.

    Every micro-batch reducing (``fsdp_pipeline_sync = "microbatch"``): ``foreach_reduce``'s ``chunk_cat`` of the new
    gradient into the reduce-scatter buffer, ``grad_bytes + reduce_bytes``. Once a schedule run (``step``), with
    ``r = fsdp_unit_rounds`` runs of ``m`` micro-batches: each run's first backward casts (``grad_bytes +
    reduce_bytes``, 0 where the two are equal) and its ``chunk_cat`` copies the accumulator (``2 reduce_bytes``),
    the ``m - r`` other backwards each add into it (``grad_bytes + 2 reduce_bytes``)::

        (r (cast + 2 R) + (m - r) (G + 2 R)) / m

    Parameters
    ----------
    lay : ParallelLayout
    grad_bytes : float
        The new gradient's bytes an element (``MixedPrecisionPolicy.param_dtype``).
    reduce_bytes : float
        The reduction's bytes an element (``reduce_dtype``: ``reduce_bytes``, the experts' ``expert_reduce_bytes``).

    Returns
    -------
    float
    """
    if lay.fsdp_pipeline_sync != "step":
        return grad_bytes + reduce_bytes
    r, m = lay.fsdp_unit_rounds, lay.microbatches
    cast = 0.0 if reduce_bytes == grad_bytes else grad_bytes + reduce_bytes
    return (r * (cast + 2.0 * reduce_bytes) + (m - r) * (grad_bytes + 2.0 * reduce_bytes)) / m


def _unit_share(model: ModelSpec, kind: str) -> float:
    """The share of its layer's unit one block of ``kind`` carries: 1 / the blocks of the layers holding it."""
    sizes = [len(u) for u in model.blocks if kind in u]
    return sum(1.0 / n for n in sizes) / len(sizes) if sizes else 1.0


def fsdp2_copies(model: ModelSpec, lay: ParallelLayout, kind: str) -> Fsdp2Copies | None:
    """FSDP2's copies one block of ``kind`` carries (None: not FSDP2 under ZeRO-3, or nothing to gather).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    kind : str
        A layer's block kind (``*``, ``E``...) or an end unit (``embedding``, ``logits``, ``mtp_head``; the
        output layer is taken with its own weights unless pp = 1 ties it to the embedding).

    Returns
    -------
    Fsdp2Copies or None
    """
    if not copies_units(lay):
        return None
    if kind in BLOCK_KINDS:
        dense, expert = block_params_on_gpu(model, lay, kind)
        share = _unit_share(model, kind)
    else:
        dense, expert = unit_params(model, lay, kind, embedding_held=lay.pp == 1)
        share = 1.0
    units = (share if dense > 0 else 0.0) + (1.0 if expert > 0 else 0.0)
    if units == 0:
        return None
    units *= unit_round_share(lay)  # the gathers and reductions of a mean micro-batch
    moved = 2.0 * lay.weight_gather_bytes * (dense + expert) * unit_round_share(lay)
    again = 1.0 if lay.fsdp_reshard_after_forward else 0.0
    return Fsdp2Copies(forward_kernels=COPY_OUT_KERNELS * units, forward_bytes=moved,
                       forward_side_kernels=COPY_IN_KERNELS * units,
                       backward_kernels=(again * COPY_OUT_KERNELS + REDUCE_COPY_KERNELS) * units,
                       backward_bytes=again * moved, backward_side_kernels=again * COPY_IN_KERNELS * units)
