"""The data-parallel reduction and gather of an interleaved pipeline (``vpp`` model chunks a rank) as Megatron-Core's
schedule overlaps them: each chunk's collectives are launched when that chunk is ready, not at one point of the step.

Megatron-Core buckets the first chunk only (``disable_bucketing=(model_chunk_idx > 0)``, megatron/training/
training.py ``get_model``, core_v0.11.0 line 611): chunk 0 is ``buckets`` collectives, every later chunk one. The
interleaved schedule (megatron/core/pipeline_parallel/schedules.py
``forward_backward_pipelining_with_interleaving``, core_v0.11.0 lines 718-720, 872-884 and 938-941) runs the
micro-batches in groups of ``microbatch_group_size_per_vp_stage`` (default ``pp``) a chunk, the backward from the
last chunk to chunk 0, and:

- without a ``grad_sync_func``, enables the gradient sync of a chunk for its last micro-batch only
  (``is_last_microbatch_for_model_chunk``), so each bucket's reduction starts when its last gradient is ready
  (``_ParamAndGradBucketGroup.register_grad_ready``): chunk ``j >= 1`` (one bucket) when its last backward ends,
  ``j`` groups of chunk backwards before the rank's backward ends; chunk 0's buckets during its own last
  backward. This is NeMo 2's path (25.02-25.07): it sets ``grad_sync_func`` only when the DDP config has
  ``align_grad_reduce`` true (NVIDIA/NeMo v2.2.1-v2.4.0 nemo/lightning/megatron_parallel.py ``extract_ddp_funcs``),
  and Megatron-Core's ``DistributedDataParallelConfig`` has no such field (core_v0.11-v0.14);
- with ``align_grad_reduce`` (Megatron-LM's default, ``--no-align-grad-reduce`` turns it off; Megatron-Bridge's
  ``_update_model_config_funcs(align_grad_reduce=True)``) the ``grad_sync_func`` starts a chunk's whole reduction
  after its last backward, ``pp_rank`` chunk backwards later so every stage launches at once (lines 960-969), and
  chunk 0's, whose last backward is the rank's last, after the backward ends (lines 1452-1456): the first stage,
  which ends last, exposes all of chunk 0's buckets;
- with ``align_param_gather`` (NeMo sets it when ``pp > 1`` and ``vpp > 1``: v2.2.1
  nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py ``_get_optimizer_overlap_cfgs``; Megatron-LM's
  default) dispatches the weight all-gathers of chunks 0 and 1 when the step starts and chunk ``k + 1``'s when
  chunk ``k``'s first forward starts (the first pipeline stage, which runs its warm-up forwards back to back,
  is the one that waits).

Without interleaving (``vpp`` 1) ``align_grad_reduce`` changes nothing the step shows
(``forward_backward_pipelining_without_interleaving``, core_v0.14.0 lines 2233, 2267, 2294; d98e8a64, 2026-08,
lines 2433, 2460, 2479: the same): the first pipeline stage enables the hooks for its last backward whatever the
setting, so its buckets reduce as they are ready, ``max(k b - c, b)`` past its end (``c`` one micro-batch's backward
of the stage); a later stage ``p`` with a ``grad_sync_func`` starts its whole reduction ``R`` when its last backward
ends, ``p`` stage backwards before the first stage's (the comment: "Other pipeline stages do grad reduction during
pipeline bubble"), so it ends ``R - p c`` past the first stage's end, never later than the first stage's own
``max(R - c, b)``. Both rules give the first stage's: :func:`interleaved_reduce_exposed_s` with one chunk.

Only pipeline rank 0 buckets (its first chunk): Megatron-Core's ``DistributedDataParallel`` gives every later rank
one collective a chunk (``bucket_size = None`` if ``pp_rank > 0``, NVIDIA/Megatron-LM@5d745a79cd onwards, @14346b65
``megatron/core/distributed/distributed_data_parallel.py`` line 105), started when its last backward of the chunk
ends, ``r`` chunk backwards before rank 0's, and its gathers waited for by a first forward ``r`` chunk forwards
after rank 0's (``lag`` of :func:`interleaved_reduce_exposed_s` and :func:`interleaved_gather_exposed_s`). With the
same bytes rank 0's queue never ends earlier (its buckets start a chunk backward before its end, a later rank's one
collective at its own end, ``r >= 1`` of them earlier); a later rank ends the step only with more parameters
(:func:`topo.training.step.pp_rank_shares`).

The collectives of one rank run one after another on the DP stream. Times are seconds; windows are a chunk's
share of a micro-batch's forward or backward (the stage's, over ``vpp``).

A JAX run (``dp_overlap_policy = "xla_lhs"``) is scheduled by XLA's latency-hiding scheduler, not by hooks:
:func:`xla_lhs_exposed_s` (its sources in ``topo/data/compute/xla_scheduler.toml``).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..errors import TopoError
from ..resources import data_dir

XLA_SCHEDULER = "xla_scheduler.toml"


def interleaved_reduce_exposed_s(chunk_s: float, bucket_s: float, buckets: int, chunks: int, group: int,
                                 chunk_backward_s: float, aligned: bool = False, lag: float = 0.0) -> float:
    """Seconds of a pipeline rank's gradient reduction left after the first pipeline rank's last backward ends (the
    step's compute end).

    Rank 0 buckets its first chunk; a later rank reduces each chunk as one collective (Megatron-Core's
    ``DistributedDataParallel`` sets ``bucket_size = None`` on pipeline ranks > 0, NVIDIA/Megatron-LM@5d745a79cd
    onwards, @14346b65 ``distributed_data_parallel.py`` line 105: "not on the critical path"). Rank ``r``'s last
    backward of each chunk ends ``r`` chunk backwards before rank 0's (the backward of the last micro-batch runs
    from the last virtual stage down to rank 0's chunk 0, rank ``r`` holding virtual stages ``r, r + pp, ...``), so
    without ``align_grad_reduce`` each chunk's reduction starts ``r`` chunk backwards earlier than rank 0's; with it
    the ``grad_sync_func`` of chunk ``j`` waits ``r`` virtual micro-batches more (``schedules.py``
    ``backward_step_helper_postprocess``, @14346b65 lines 1427-1437: "launch asynchronous communication at the same
    time across the pipeline-parallel group"), and the chunks it never reaches, chunk 0's among them, start when
    the rank's loop ends (lines 2045-2051). The grad-norm all-reduce of the optimizer step waits for every rank,
    so the step's exposure is the largest rank's.

    Parameters
    ----------
    chunk_s : float
        One later chunk's reduction (one collective, the chunk's parameters).
    bucket_s : float
        One of chunk 0's bucket reductions.
    buckets : int
        Chunk 0's buckets.
    chunks : int
        Model chunks a rank (``vpp``, at least 1).
    group : int
        Micro-batches of the schedule's last group (each chunk runs them one after another).
    chunk_backward_s : float
        One chunk's backward (and recompute) of one micro-batch.
    aligned : bool
        ``align_grad_reduce``: chunk 0's buckets start together when the backward ends, not as they are ready.
    lag : float
        The rank's cooldown in ``chunk_backward_s``: how long before rank 0's its last backward ends (``r`` for
        rank ``r`` of equal stages; the backward of the ranks before it, :func:`topo.training.step.pp_cooldowns`).
        0 is rank 0 (``buckets`` of ``bucket_s`` in chunk 0); above 0 a later rank (chunk 0 one collective of
        ``chunk_s``).

    Returns
    -------
    float
        Exposed seconds: the queue's spill-over; rank 0's at least chunk 0's last bucket (``aligned``: all its
        buckets), a later rank's at least 0.

    >>> interleaved_reduce_exposed_s(2.0, 0.5, 4, 1, 1, 1.0), interleaved_reduce_exposed_s(2.0, 0.5, 4, 1, 1, 1.0, lag=1)
    (1.0, 1.0)
    """
    c = chunk_backward_s
    free = -float("inf")
    for j in range(chunks - 1, 0, -1):  # chunk j's last backward ends j groups of chunk backwards before the rank's end
        late = max(j * group, lag) if aligned else j * group + lag  # chunk backwards before rank 0's end
        free = max(free, -late * c) + chunk_s
    if lag > 0:  # chunk 0 one bucket: ready when the rank's last backward ends, ``lag`` before rank 0's
        return max(max(free, -lag * c) + chunk_s, 0.0)
    start = max(free, 0.0) if aligned and chunks > 1 else max(free, -c)
    return max(start + buckets * bucket_s, bucket_s)


def interleaved_gather_exposed_s(chunk_s: float, bucket_s: float, buckets: int, chunks: int, group: int,
                                 chunk_forward_s: float, lead_s: float = 0.0, lag: float = 0.0) -> float:
    """Seconds a pipeline rank's forwards wait for its weight all-gathers (``align_param_gather``).

    Rank 0 buckets its first chunk; a later rank gathers each chunk as one collective (as
    :func:`interleaved_reduce_exposed_s`), but its first forward starts ``r`` chunk forwards after rank 0's (its
    warm-up waits for the activations), and it dispatches chunk ``k + 1``'s gather ``r`` virtual micro-batches
    early in its own order (``schedules.py`` ``forward_step_helper_preprocess``, @14346b65 lines 1318-1335), at the
    time rank 0 does. A wait delays the rank's forwards and every stage after it by as much.

    Parameters
    ----------
    chunk_s, bucket_s, buckets, chunks, group
        As :func:`interleaved_reduce_exposed_s` (``group``: micro-batches of the first group).
    chunk_forward_s : float
        One chunk's forward of one micro-batch.
    lead_s : float
        How long before the step's first forward chunk 0's gather was dispatched: 0 when the schedule dispatches it
        as the step starts; with ``overlap_param_gather_with_optimizer_step`` the optimizer steps after chunk 0's
        (Megatron-Core's ``ChainedOptimizer._step``,
        :attr:`topo.training.parallel.ParallelLayout.overlap_param_gather_with_optimizer_step`).
    lag : float
        The rank's warm-up in ``chunk_forward_s``: how long after rank 0's its first forward starts (``r`` for rank
        ``r`` of equal stages); 0 is rank 0, above 0 a later rank (as :func:`interleaved_reduce_exposed_s`).

    Returns
    -------
    float
        Exposed seconds: chunk 0's gather beyond ``lead_s`` and the rank's first forward's start (rank 0's: at least
        its first bucket beyond ``lead_s``), then each later chunk's gather beyond the ``group`` forwards of the
        chunk before it (chunk 1's dispatched as the step starts, queued behind chunk 0's on the one DP stream).

    >>> interleaved_gather_exposed_s(2.0, 2.0, 1, 2, 1, 1.0), interleaved_gather_exposed_s(2.0, 2.0, 1, 2, 1, 1.0, 1.5)
    (3.0, 1.5)
    >>> interleaved_gather_exposed_s(2.0, 0.5, 4, 1, 1, 1.0), interleaved_gather_exposed_s(2.0, 0.5, 4, 1, 1, 1.0, lag=1)
    (1.0, 1.0)
    """
    c, off = chunk_forward_s, lag * chunk_forward_s if lag else 0.0  # the rank's first forward after rank 0's
    if lag > 0:  # Megatron-Core buckets pipeline rank 0's first chunk only
        buckets, bucket_s = 1, chunk_s
    first = buckets * bucket_s - lead_s  # chunk 0's gather ends so long after the step's first forward could start
    waited = max(first - c - off, bucket_s - lead_s - off, 0.0)  # chunk 0's first forward consumes its buckets
    t = off + waited + group * c  # chunk 1's first forward starts
    done = max(first, 0.0) + chunk_s  # chunk 1 was dispatched as the step starts, behind chunk 0 on the DP stream
    for k in range(1, chunks):
        wait = max(0.0, done - t)
        waited, t = waited + wait, t + wait
        if k + 1 < chunks:  # chunk k + 1 dispatched as rank 0's chunk k's first forward starts
            done = max(done, t - off) + chunk_s
        t += group * c
    return waited


@lru_cache(maxsize=1)
def xla_collectives_in_flight() -> int:
    """Async collectives XLA GPU's latency-hiding scheduler keeps in flight at once (``xla_scheduler.toml``
    ``collectives_in_flight``).

    Raises
    ------
    TopoError
        The file does not parse or the value is not a whole number >= 1: one line naming the file, the key and
        the value.
    """
    try:
        data = tomllib.loads((data_dir("compute") / XLA_SCHEDULER).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TopoError(f"invalid TOML: {exc}", source=XLA_SCHEDULER) from None
    n = data.get("collectives_in_flight")
    if type(n) is not int or n < 1:
        raise TopoError(f"{n!r}; allowed: a whole number >= 1 (XLA's GetNumAvailableResources)",
                        source=XLA_SCHEDULER, key="collectives_in_flight")
    return n


def xla_lhs_exposed_s(call_s: float, calls: float, unhidden: float, pass_s: float, pass_calls: float,
                      in_flight: int) -> float:
    """Seconds ``calls`` collectives of ``call_s`` each expose in a pass (a micro-batch's forward or backward)
    that XLA's latency-hiding scheduler laid out.

    The scheduler keeps ``in_flight`` async collectives at once on one stream, all-gathers, reduce-scatters and
    all-reduces alike, and estimates every one at the same latency whatever its bytes (5000 units against 1000 a
    GEMM-class call or loop fusion: about 5 such ops between a start and its done). Building the schedule
    bottom-up, it places each start as soon as that estimate is covered when another collective waits for the
    stream. The pass's ``pass_calls`` collectives therefore share its compute by count, not by bytes: each runs
    beside ``in_flight x pass_s / pass_calls`` seconds of compute and exposes what it lasts beyond that. The
    ``unhidden`` ones have no compute to run beside (the first gather of the forward waits for nothing before it;
    the last reduction's gradients exist only when the backward ends) and are exposed whole. Since every call's
    excess is at least ``call_s`` minus its share, the pass's collectives together expose no less than they
    outlast the pass (at ``in_flight`` 1).

    Parameters
    ----------
    call_s : float
        One collective's time (s).
    calls : float
        This kind's collectives in the pass.
    unhidden : float
        How many of them are exposed whole (0 or 1).
    pass_s : float
        The pass's compute (s), the window the collectives share.
    pass_calls : float
        Every collective of the pass on the stream, this kind's included (>= ``calls``).
    in_flight : int
        Collectives in flight at once (:func:`xla_collectives_in_flight`).

    Returns
    -------
    float
        Exposed seconds.
    """
    window = in_flight * pass_s / max(pass_calls, 1.0)
    return (calls - unhidden) * max(0.0, call_s - window) + unhidden * call_s
