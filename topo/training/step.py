"""One training step: operator compute, the pipeline bubble, the optimizer step and each dimension's exposed
communication, with the step's collectives run together as one traffic mix.

``step = compute + bubble + optimizer + exposed(tp) + exposed(cp) + exposed(pp) + exposed(dp) + exposed(ep)`` on
the pipeline stage that sets the pace, with ``m`` micro-batches per step (under 1F1B every distinct stage is timed
with its own layers' traffic and the slowest is the step's, :func:`_pace_candidates`):

- compute: ``m x (forward + backward + recomputation)`` of that stage, each operator timed by the GPU's
  roofline (:mod:`topo.training.operators`);
- bubble: ``(p - 1) / v`` of the per-micro-batch time (compute and exposed TP/CP/EP), 1F1B with ``v``
  interleaved stages (Narayanan et al. 2021, sec. 2.2); DualPipe (``pipeline_schedule``): ``(p/2 - 1)`` forwards
  of a micro-batch (DeepSeek-V3 Table 2); paid once per schedule run (``pipeline_flushes``);
- optimizer: a fused Adam step over the GPU's shard (:func:`topo.training.operators.optimizer_step_s`);
- fp8_weight_cast: Transformer Engine's FP8 cast of the BF16 linear weights, once a step (:mod:`.fp8_weight_cast`);
- TP per block (attention, MLP, Mamba) and micro-batch: with sequence parallelism an all-gather and a
  reduce-scatter forward (and forward again for recomputed blocks), backward two all-gathers (the output
  gradient; the input again, for the weight gradient) and a reduce-scatter, else two all-reduces each way;
  message = the block's activations ``b s/cp h`` x 2 bytes (an FP8 layout's all-gathers 1 byte with
  ``overlap_tp``: Transformer Engine quantises a linear layer's input and output gradient before gathering them).
  Exposed unless ``overlap_tp`` (which needs sequence parallelism, :func:`.tp_overlap.tp_overlap_on`); with it
  each collective hides only behind its own linear layer's GEMM (userbuffers' ring exchange,
  :func:`tp_ring_exposed_s`), one no GEMM pairs behind the micro-batch;
  without it the column-parallel layer's backward gather and reduce-scatter (Transformer Engine's ``async_op``)
  still hide behind that layer's own dgrad and wgrad GEMMs (:func:`tp_exposed_s`), their NCCL kernels' SMs charged
  on those GEMMs as the DP collectives' below;
- CP per attention block (:mod:`topo.training.ring_attention`): ring attention (``cp_comm_type = p2p``): ``cp - 1``
  sends of the rank's K/V chunk forward, K/V and dK/dV backward, each behind its own step's attention kernel and
  exposed where it outlasts it; or an all-gather of K and V forward, K and V gathered again backward and their
  gradients reduce-scattered, exposed (``all_gather``, Meta's Llama 3); or Ulysses' all-to-alls of Q, K, V and
  the output forward, dO, dQ, dK and dV backward, exposed (``a2a``, :func:`a2a_exchanges`); per Mamba block six all-to-alls each pass
  (its tokens for heads and back, :func:`mamba_cp_alltoalls`), exposed;
- PP: each micro-batch's activations cross every stage boundary forward and backward, ``2 (m v + p - 1)`` sends on
  the critical path (``2 (p - 1)`` when ``overlap_pp``; the ``p - 1`` once per schedule run,
  ``pipeline_flushes``). Megatron's scatter/gather (Narayanan et al. 2021, sec. 4.1): each TP rank sends ``1/tp``
  of the activation and the receiving stage all-gathers it over NVLink (with sequence parallelism the activation
  is already split);
- DP over the data x context ranks (experts over their replicas): none: all-reduce of the gradients; ZeRO-1/2 and
  SHARD_GRAD_OP: reduce-scatter of the gradients and all-gather of the weights (``weight_bytes``; an FP8 layout's
  layer weights 1 byte with ``fp8_param_gather``, MXFP8's in BF16 through the gradient buffer,
  :func:`gather_bytes_per_param`), one collective per bucket
  (Megatron-Core's, :func:`topo.training.parallel.dp_bucket_calls`: each pays its own latency; pipeline rank 0's
  only, a later rank's one a chunk inside its cooldown window, the step taking the rank whose collectives end last,
  :func:`pp_rank_shares`), the reduction hidden
  behind the last micro-batch's backward except the last bucket and the gather behind the first forward except
  the first bucket (``overlap_dp``; the gather apart with ``overlap_param_gather``, false: every bucket gathered
  after the optimizer step, exposed, :func:`topo.training.parallel.dp_overlapped`); with interleaving (``vpp > 1``) each model chunk's reduction starts when its
  last backward ends and its gather as the chunk before it starts its forwards, one after another on the DP
  stream (:mod:`topo.training.dp_overlap`); ZeRO-3 / FSDP: per layer (the unit), an all-gather before its forward and
  its backward (only before its forward when ``fsdp_reshard_after_forward`` is false: the weights are kept to the
  backward) and a reduce-scatter after its backward, each prefetched behind the previous layer's compute, so
  only what exceeds a layer's compute and the first gather are exposed (no single gather larger than a layer);
  a JAX run scheduled by XLA's latency-hiding scheduler (``dp_overlap_policy = "xla_lhs"``) instead runs one DP
  collective at a time, each beside an equal share of its pass's compute (:func:`.dp_overlap.xla_lhs_exposed_s`);
  a DP group across NVLink domains also hides behind the compute stream's exposed TP, CP, PP, EP collectives whose
  groups stay inside one domain (NVLink only, the NICs left to the DP stream: :func:`_nvlink_exposed_s`);
  the hidden part of every DP collective (and of the CP ring's sends) still holds NCCL's channels' SMs, so the
  compute beside it runs on the rest (:mod:`topo.training.comm_sms`: ``hidden x (1 - t / t')``, ``t'`` the
  compute on the SMs left; the DP ones together at most the step's compute), added to the dimension's exposed time;
- EP per MoE block and micro-batch: all-to-all dispatch and combine forward and backward, each rank sending its
  tokens x top-k x h x 2 bytes (the flex dispatcher with node-limited routing: at most ``max_nodes_per_token``
  copies cross the scale-out network; Megatron-Core's all-to-all dispatcher sends all top-k, :func:`ep_copies`); with ``overlap_ep`` a micro-batch's all-to-alls run during another micro-batch's compute (DeepSeek's
  DualPipe, Megatron-Core's combined 1F1B ``overlap_moe_expert_parallel_comm``): only what exceeds the compute is
  exposed, and the hidden part still costs the compute beside it what its kernels take, by the same model as
  the DP ones (:mod:`topo.training.comm_sms`: the SMs its kernels hold, :func:`ep_held_sms`: the flex
  dispatcher's ``ep_comm_sms``, DeepSeek-V3 sec. 3.2.2: 20 of 132, the ``alltoall`` dispatcher's NCCL p2p
  channels; and the all-to-all's HBM traffic; :func:`_ep_loss`), no less under the combined 1F1B than the concurrent GEMMs'
  published loss where measured (:func:`ep_overlap_cost_s`: DeepEP V1 at 20 SMs on H100, ~20%, arXiv 2603.07685
  sec. 4.2.3). The flex
  dispatcher (``deepep``: DeepEP / HybridEP) lasts no less than its kernel at the published rate plus the call's
  fixed part (DeepEP V1 across domains: its kernel alone, no fixed part published), inside one NVLink domain
  (:mod:`topo.training.ep_dispatch`) and across domains (:mod:`topo.training.ep_internode`).

One step as one traffic mix (``contention=True``): each dimension's largest collective runs with the others
through :func:`topo.engine.traffic.run_mix` (all groups of every dimension at once, sharing links); each
dimension's times are multiplied by its slowdown in that mix, so dimensions that share links slow each other
(and dimensions on disjoint links, such as TP on NVLink beside DP on the network, do not); a link is shared max-min
fairly (:data:`STEP_MIX_SHARING`: what a member held back elsewhere does not use of it goes to the others). What
runs at once follows the schedule: the steady 1F1B phase carries every micro-batch's TP, CP, EP and PP traffic (and
FSDP's per-layer gathers), so those are slowed by each other only; the once-per-step DP reduction and gather run at
the step's ends beside everything, so their slowdown comes from the mix of all (an upper bound: the tail overlaps
less).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

from ..engine.options import EstimateOptions
from ..engine.paths import stand_in_notes
from ..errors import TopoError
from ..engine.traffic import Member, run_mix
from ..fabric.failures import failures_summary
from ..fabric.fabric import Fabric
from ..units import format_in, format_time
from .activation_bytes import modules_recomputed
from .comm import CommEngine, CommTime, engine_for
from .cross_entropy import cross_entropy_tp
from .comm_sms import comm_hbm_Bps, moved_Bps, nccl_p2p_sms, nccl_sms, reduced_gpu, sm_loss_s
from .dp_overlap import (interleaved_gather_exposed_s, interleaved_reduce_exposed_s, xla_collectives_in_flight,
                         xla_lhs_exposed_s)
from .ep_dispatch import flex_dispatch_s
from .ep_internode import internode_call_s
from .ep_overlap import LayerParts, layer_exposed_s, moe_layer_parts, published_gemm_loss, unpaired_note, unpaired_share
from .flops import model_flop_per_step
from .flops_megatron_lm import padded_vocab
from .fp8_params import gathers_in_fp8
from .fp8_weight_cast import weight_cast_s
from .fp8_amax import AMAX_PHASE, AMAX_SP_GROUP, amax_group, amax_reduced, amax_step, sp_amax_reduced
from .gpus import gpu_compute
from .host_cpu import host_time_factor, reference_host_cpu
from .fsdp2_pipeline_note import fsdp2_pipeline_note
from .latent_note import latent_size_note
from .kernels import memory_s, recipe_precision, scale_bytes, tp_gather_output_gradient_copies
from .mapping import (EXPERT_DP_GROUPS, FLEX_GROUP, default_placement, map_layout, recipe_gpus_used,
                      refuse_failed_placement)
from .memory import busiest_stage, bf16_kept_params, memory_per_gpu, stage_params, units_holding
from .model import BLOCK_KINDS, Block, ModelSpec
from .module_recipes import TP_LINEARS, module_copy_bytes, module_precision, op_recipes, parse_module_recipes
from .nvls_buffers import may_run_nvls, step_nvls_bytes
from .overlap_idle import pp_overlap_idle_note
from .operators import (END_UNITS, bf16_layers, busiest_rank_load, expert_capacity, optimizer_step_s,
                        pipeline_key, pipeline_units, rank_computes, ring_step_s)
from .pipeline_bubble import bubble_note
from .parallel import ParallelLayout, check_layout, dp_bucket_calls, dp_overlapped, hybrid_sharded, xla_all_reduce_calls
from .result import DimensionComm, StepResult
from .ring_attention import a2a_exchanges, ring_sends
from .routing import consecutive_destinations, rank_destinations, spread_destinations
from .timeline import step_timeline
from .unit_params import tp_replicated_params
from .tp_overlap import (check_num_sm, first_proj_userbuffers, margins_note, tp_exposed_note, tp_overlap_on,
                         userbuffers_off_note, userbuffers_on)
from .uncertainty import job_reach, left_out_measured, step_interval

__all__ = ["estimate_step", "step_traffic", "traffic_stage",
           "mamba_cp_alltoalls", "step_breakdown", "bubble_s", "exposed_comm_s", "ep_copies",
           "exposed_routed", "ep_overlap_cost_s", "ep_held_sms", "tp_ring_exposed_s", "tp_ring_steps", "tp_exposed_s", "comm_windows", "stage_tp_blocks",
           "gather_bytes_per_param", "stage_block_counts", "sp_quantisations", "dp_floor_s",
           "routed_ep_cover_s", "behind_window_s", "forward_gather_share", "optimizer_params", "not_fit_note",
           "group_degree", "ub_scale_gather_bytes", "UB_SCALE_PHASES"]

ACT_BYTES = 2  # activations and their gradients travel in 16 bits
FP8_BYTES = 1
FP32_BYTES = 4  # the loss's maxima and sums (Megatron-LM's and TE's cross-entropy keep them in FP32)
MLA_UP_PAIRS = {"query latent": "q_up", "key-value latent": "kv_up"}
"""The up projection (its operator's ``tp_pair``, :func:`topo.training.operators.tp_paired_gemm_s`) whose GEMMs an
MLA latent's backward exchanges (:attr:`.model.ModelSpec.mla_tp_latents`) hide behind."""
HEAD_PAIRS = {"output layer": "head", "MTP eh_proj": "eh_proj"}
"""The same for the heads' column-parallel linears (:func:`_head_traffic`)."""
COLUMN_PAIRS = ("ag", *MLA_UP_PAIRS.values(), *HEAD_PAIRS.values())
BULK = tuple(f"{c}_{p}" for c in COLUMN_PAIRS for p in ("dgrad", "wgrad"))
"""TP collectives overlapped in bulk (beside a whole GEMM): a column-parallel layer's input gathered during its
input-gradient GEMM and its input gradient reduce-scattered during its weight-gradient GEMM, through userbuffers
(NeMo's ``qkv_dgrad``/``fc1_dgrad``, ``qkv_wgrad``/``fc1_wgrad`` ``bulk`` configurations) or NCCL's asynchronous
calls (:func:`beside_own_gemm`), the MLA up projections' and the heads' too (:data:`COLUMN_PAIRS`); the others are
ring exchanges (:func:`tp_ring_exposed_s`)."""
WGRAD_PAIRS = tuple(f"{c}_wgrad" for c in COLUMN_PAIRS)


def stage_block_counts(model: ModelSpec, lay: ParallelLayout) -> dict:
    """Blocks of each kind on the busiest pipeline stage (the most layers, then the most MoE layers), as the step
    counts its traffic and its FP8 amax reductions (:func:`.fp8_amax.amax_reductions`).

    Parameters
    ----------
    model, lay
        The model and its layout.

    Returns
    -------
    dict
        ``{block kind: blocks}`` and ``layers``.
    """
    return _stage_counts(model, lay)


def _stage_counts(model: ModelSpec, lay: ParallelLayout, stage: int | None = None) -> dict:
    """Blocks of each kind on pipeline stage ``stage``; by default the busiest by its blocks: the most layers, then
    the most MoE layers (the first such). Kept by the placement's key (:func:`.operators.pipeline_key`) and the
    stage (at most :data:`COUNTS_KEPT`; a search asks ~120k times), each caller given its own dict."""
    key = (pipeline_key(model, lay), stage)
    got = _COUNTS.get(key)
    if got is None:
        if len(_COUNTS) >= COUNTS_KEPT:
            _COUNTS.clear()
        got = _COUNTS[key] = _counted(pipeline_units(model, lay), stage)
    return dict(got)


COUNTS_KEPT = 16384  # (placement, stage) block counts :func:`_stage_counts` keeps
_COUNTS: dict[tuple, dict] = {}


def _stage_weight(units: list) -> tuple:
    """What makes a stage the busiest (:func:`_stage_counts`): its layers, then its MoE layers, then its blocks."""
    layers = [x for x in units if x not in END_UNITS]
    return len(layers), sum(x.count(Block.MOE) for x in layers), sum(len(x) for x in layers)


def _counted(stages: list, stage: int | None) -> dict:
    """:func:`_stage_counts` of the placed ``stages``, computed."""

    best = max(stages, key=_stage_weight) if stage is None else stages[stage]
    counts = {k: sum(u.count(k) for u in best if u not in END_UNITS) for k in BLOCK_KINDS}
    counts[Block.ATTENTION] += counts.pop(Block.LOCAL)  # a local window's TP and CP exchanges are a full layer's (CP: all of K, V)
    counts["layers"] = sum(1 for x in best if x not in END_UNITS)
    counts.update({u: best.count(u) for u in END_UNITS})  # the stage's own heads (:func:`_head_traffic`)
    return counts


def ep_copies(model: ModelSpec, lay: ParallelLayout) -> float:
    """Copies of each token the expert all-to-all carries (the dispatch's size is tokens x copies x hidden).

    ``alltoall`` (Megatron-Core's ``MoEAlltoAllTokenDispatcher``): one per routed expert, ``top-k``, node-limited
    routing or not (its permutation makes one row per token and expert, "for dropless training, output size is
    static (num_tokens * topk)", and NCCL's all-to-all sends each row: NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/moe/token_dispatcher.py). ``deepep``: sent once to each of at most
    ``max_nodes_per_token`` nodes and forwarded over NVLink (DeepSeek-V3 sec. 2.1.2, DeepEP's internode kernels):
    one per distinct destination node when an EP group spans ``N > 1`` NVLink domains
    of the layout's ``gpus_per_domain_used`` (a placed layout's, :func:`.mapping.default_placement`; unplaced: one
    domain) (else per distinct GPU of the ``N = ep`` in the group), as many as the layout's ``moe_routing`` puts a
    token's ``k`` distinct experts on (:mod:`topo.training.routing`): ``spread``, ``N (1 - C(E - E/N, k) /
    C(E, k))`` for ``N`` nodes of ``E/N`` experts each (each node's own experts where the last is partly filled),
    under node-limited routing ``E[min(M, D)]``, the nodes the router's groups; ``consecutive``, exact for the
    contiguous expert shards (the benchmark gate replaces the router, so no node limit applies)."""
    mo = model.moe
    if lay.ep_dispatcher != "deepep":
        return float(mo.active_experts)
    gpus = lay.ep * lay.expert_tp
    D = lay.gpus_per_domain_used or gpus
    nodes = math.ceil(gpus / D)
    if nodes == 1:
        return rank_destinations(lay.moe_routing, mo.experts, mo.active_experts, lay.ep)
    per_rank = max(1, mo.experts // lay.ep)
    if lay.moe_routing == "consecutive":
        return consecutive_destinations(mo.experts, mo.active_experts, per_rank * max(1, D // lay.expert_tp))
    held = tuple(per_rank * max(1, min(D, gpus - j * D) // lay.expert_tp) for j in range(nodes))  # experts a node holds
    return spread_destinations(held, mo.active_experts, limit=mo.max_nodes_per_token)


def mamba_cp_alltoalls(model: ModelSpec, lay: ParallelLayout) -> list[tuple[float, int]]:
    """Megatron-Core's Mamba context parallelism (NVIDIA/Megatron-LM@00caa53a megatron/core/ssm/
    mamba_context_parallel.py ``MambaContextParallel``): before the convolution and the scan each rank trades its
    ``s / cp`` tokens of all local heads for all ``s`` tokens of ``1 / cp`` of them, one all-to-all each for ``z``,
    ``x``, ``B``, ``C`` and ``dt`` (``pre_conv_ssm``; B and C with each group repeated ``cp / groups`` times when a
    rank has fewer groups than ``cp``), and the scan's output goes back in one more (``post_conv_ssm``): blocking,
    in the mixer's forward, their gradients the same in the backward.

    Parameters
    ----------
    model : ModelSpec
        A model with Mamba blocks (its ``mamba`` settings, ``mamba_inner`` and ``mamba_heads``).
    lay : ParallelLayout
        The layout (``tp``, ``cp``, ``micro_batch``, ``seq_len``).

    Returns
    -------
    list of (float, int)
        ``(bytes each rank sends, all-to-alls per Mamba layer and pass)``: z, x and the output; B and C; dt.
    """
    mb, tp, cp = model.mamba, lay.tp, lay.cp
    tokens = lay.micro_batch * (lay.seq_len or model.seq_len) / cp
    g = max(1, mb.groups // tp)
    repeat = cp // g if g < cp else 1
    return [(tokens * model.mamba_inner / tp * ACT_BYTES, 3),
            (tokens * g * repeat * mb.d_state * ACT_BYTES, 2),
            (tokens * model.mamba_heads / tp * ACT_BYTES, 1)]


def step_traffic(model: ModelSpec, lay: ParallelLayout, stage: int | None = None,
                 parts: str = "all", only=None) -> list[dict]:
    """Every collective of one step on pipeline stage ``stage`` (default: the busiest by its blocks,
    :func:`_stage_counts`): dimension, collective, groups, size, calls, phase.

    A placed layout's ``gpus_per_domain_used`` sets how many nodes an expert group spans for the ``deepep``
    dispatcher (:func:`ep_copies`). ``parts``: ``all``; ``dispatcher_free``, the TP, CP, PP, DP and router
    collectives (none reads the expert dispatcher, :data:`.operators.DISPATCHER_FIELDS`); ``dispatcher``, the EP
    collectives (the rest). ``only``: None, or a test of a collective's name; an item whose collective fails it is
    not built (the search's NVLS check asks for the few collectives that may run NVLS, ~1M items a search)."""
    if parts not in _PARTS:
        raise TopoError(f"step_traffic parts: {parts!r} is not one of {', '.join(_PARTS)}")
    names = _builders(parts, only)
    if not names:
        return []
    t = _Traffic(model, lay, stage, only)
    builders = globals()
    for name in names:
        builders[name](t)
    return t.out


def _builders(parts: str, only) -> tuple[str, ...]:
    """The builders of ``parts`` (:data:`_PARTS`) that may add an item ``only`` keeps: one of the collectives each
    may add (:data:`BUILDER_COLLECTIVES`) passes it; every one where ``only`` is None."""
    if only is None:
        return _PARTS[parts]
    return tuple(name for name in _PARTS[parts] if any(map(only, BUILDER_COLLECTIVES[name])))


class _Traffic:
    """What every dimension's traffic reads (the busiest stage's block counts, recomputed layers, one
    micro-batch's activation bytes) and the list it adds its collectives to."""

    def __init__(self, model: ModelSpec, lay: ParallelLayout, stage: int | None = None, only=None):
        self.model, self.lay, self.only, self.stage = model, lay, only, stage
        self.seq = lay.seq_len or model.seq_len
        self.s_cp = self.seq / lay.cp
        self.m = lay.microbatches
        self.c = _stage_counts(model, lay, stage)
        self.full = lay.recompute == "full"
        c_layers = self.c["layers"]
        self.rec_layers = c_layers if lay.recompute_num_layers is None else min(c_layers, lay.recompute_num_layers)
        self.act = lay.micro_batch * self.s_cp * model.hidden * ACT_BYTES
        self.out: list[dict] = []

    def recomputed(self, kind: str, module: str) -> int:
        """Blocks of ``kind`` on the stage whose forward (and so its collectives) runs again in the backward:
        every one when the recipe recomputes ``module`` (Megatron-Core's ``recompute_modules``, none under full
        recomputation: :func:`.activation_bytes.modules_recomputed`), else full recomputation's layers."""
        if module in modules_recomputed(self.lay):
            return self.c[kind]
        return min(self.c[kind], self.rec_layers) if self.full else 0

    def stopped(self, kind: str, module: str) -> int:
        """Of :meth:`recomputed`'s blocks of ``kind``, those whose replay stops before their combine all-to-all:
        full recomputation's layers under ``recompute_early_stop`` (an MoE block ends its layer:
        :func:`.operators.early_stopped_s`), not where the recipe recomputes ``module`` on its own (Megatron-Core's
        ``moe`` module, which replays the combine)."""
        if not (self.full and self.lay.recompute_early_stop) or module in modules_recomputed(self.lay):
            return 0
        return min(self.c[kind], self.rec_layers)

    def add(self, dim, coll, groups_dim, size, calls, phase, elem_bytes=ACT_BYTES, pair="", what="",
            blocks=None, userbuffers=False, pp_ranks=None) -> None:
        """``blocks``: the TP blocks a micro-batch the item's calls are for, where not all of them
        (:func:`_tp_traffic`'s MLA split; :func:`_stream_exposed` shares its GEMM pairs over them).
        ``userbuffers``: a TP item overlapped where the model's others are not (:func:`_tp_traffic`).
        ``pp_ranks``: a bucketed DP item's pipeline ranks that can end the step (:func:`pp_rank_shares`)."""
        if self.only is not None and not self.only(coll):
            return
        if calls > 0 and size > 0 and group_degree(self.lay, groups_dim) > 1:
            self.out.append({"dim": dim, "collective": coll, "groups": groups_dim, "size_bytes": float(size),
                             "calls": float(calls), "phase": phase, "elem_bytes": float(elem_bytes),
                             **({"pair": pair} if pair else {}), **({"what": what} if what else {}),
                             **({"tp_blocks": blocks} if blocks is not None else {}),
                             **({"userbuffers": True} if userbuffers else {}),
                             **({"pp_ranks": pp_ranks} if pp_ranks else {})})


_DEGREES = {"dpcp": lambda lay: lay.dp * lay.cp, "tpcp": lambda lay: lay.tp * lay.cp,
            "edp": lambda lay: lay.expert_dp, "etp": lambda lay: lay.expert_tp,
            "dps": lambda lay: lay.dp_shard_size * lay.cp, "dpr": lambda lay: lay.dp // lay.dp_shard_size,
            "edps": lambda lay: lay.expert_dp_shard_size,
            "edpr": lambda lay: lay.expert_dp // lay.expert_dp_shard_size,
            "emb": lambda lay: 2 if lay.pp > 1 else 1, FLEX_GROUP: lambda lay: lay.ep * lay.expert_tp}


def group_degree(lay: ParallelLayout, groups_dim: str) -> int:
    """Ranks in one group of a traffic item's ``groups`` (:func:`step_traffic`): a combined or sharding group's
    (``dpcp``, ``tpcp``, ``edp``, ``etp``, ``dps``, ``dpr``, ``edps``, ``edpr``, the flex dispatcher's
    :data:`~.mapping.FLEX_GROUP`), else the layout's size of that
    dimension; only the one asked is computed (the search adds ~1.4M items).

    Parameters
    ----------
    lay : ParallelLayout
    groups_dim : str

    Returns
    -------
    int
    """
    of = _DEGREES.get(groups_dim)
    return (of(lay) if of is not None else 0) or getattr(lay, groups_dim)


def _tp_blocks(model: ModelSpec, counts: dict) -> int:
    """Blocks with TP traffic among a stage's block ``counts`` (:func:`_stage_counts`): attention (local windows
    counted in), dense MLP, Mamba, and an MoE block's shared experts (its routed experts gather over ETP)."""
    shared = counts[Block.MOE] if (model.moe and model.moe.shared_experts) else 0
    return counts[Block.ATTENTION] + counts[Block.MLP] + counts[Block.MAMBA] + shared


def stage_tp_blocks(model: ModelSpec, lay: ParallelLayout, stage: int | None = None) -> int:
    """TP blocks a micro-batch on pipeline stage ``stage`` (:func:`step_traffic`'s; default the busiest), what
    :func:`tp_exposed_s` shares an item's calls over.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    stage : int, optional

    Returns
    -------
    int
    """
    return _tp_blocks(model, _stage_counts(model, lay, stage))


def _tp_passes(t: _Traffic) -> tuple[float, int]:
    """A stage's TP blocks run forward (full recomputation's layers again) and backward, per micro-batch."""
    blocks = _tp_blocks(t.model, t.c)
    per_layer_blocks = blocks / max(1, t.c["layers"])
    return blocks + (per_layer_blocks * t.rec_layers if t.full else 0), blocks


def sp_quantisations(model: ModelSpec, lay: ParallelLayout, stage: int | None = None) -> tuple[float, float]:
    """The step's sequence-parallel all-gathers of a TP block's FP8 input (forward, recomputed forward included)
    and of its output gradient (backward) on pipeline stage ``stage`` (:func:`step_traffic`'s): the quantisations
    Transformer Engine's current scaling reduces the amax of over TP (:func:`.fp8_amax.sp_amax_reduced`), one each.

    Parameters
    ----------
    model, lay
        The model and its layout.
    stage : int, optional
        The pipeline stage (default: the busiest by its blocks).

    Returns
    -------
    tuple of float
        ``(forward, backward)`` per step; ``(0.0, 0.0)`` without sequence parallelism or with ``tp`` 1.
    """
    if lay.tp <= 1 or not lay.sequence_parallel:
        return 0.0, 0.0
    t = _Traffic(model, lay, stage)
    forward, blocks = _tp_passes(t)
    return float(t.m * forward), float(t.m * blocks)


def _tp_traffic(t: _Traffic) -> None:
    """Tensor parallelism: an MoE block's routed experts gather over ETP instead (:func:`_ep_traffic`); its shared
    experts are a TP block. The forward (and recomputed forward) is on the critical path; backward: Transformer
    Engine overlaps the column-parallel input's second all-gather with its layer's dgrad GEMM and the input
    gradient's reduce-scatter (all-reduce without sequence parallelism) with its wgrad GEMM (phase "backward",
    :func:`beside_own_gemm`); the output gradient's all-gather blocks (:data:`GRAD_GATHER_PHASE`).
    With sequence parallelism each block's backward has three: the output gradient gathered for the
    row-parallel layer (output projection, fc2), the column-parallel layer's input gathered again for its weight
    gradient (Transformer Engine saves its shard: ``gather_along_first_dim(ln_out, ...)`` or userbuffers' bulk
    all-gather in ``LayerNormLinear`` / ``LayerNormMLP`` backward, NVIDIA/TransformerEngine
    transformer_engine/pytorch/module/layernorm_linear.py), and the column-parallel input gradient
    reduce-scattered. Each item's ``pair`` names the GEMM userbuffers overlaps it with
    (:func:`topo.training.operators.tp_paired_gemm_s`).

    An MLA block's input side is its latents instead (:attr:`.model.ModelSpec.mla_tp_latents`), one collective
    each at its own width: the up projections' buffer names (``q_up_proj``, ``kv_up_proj``, ``q_proj``) are not
    Transformer Engine's, so Megatron-Core builds them without userbuffers (NVIDIA/Megatron-LM@d98e8a64
    ``megatron/core/extensions/transformer_engine.py`` lines 1176-1187), but they are Transformer Engine
    column-parallel linears all the same (``TEColumnParallelLinear``, ``TELayerNormColumnParallelLinear`` with
    ``qk_layernorm``: ``megatron/core/models/gpt/gpt_layer_specs.py`` lines 246-255), so each latent's backward
    gather and input-gradient reduce-scatter hide behind its own up projection's dgrad and wgrad GEMMs
    (:data:`MLA_UP_PAIRS`, :func:`beside_own_gemm`). ``k_pos_emb``'s gather is an autograd function's (BF16; the
    up projections' gathers, TE linears', at :func:`tp_gather_elem_bytes`), whose backward reduce-scatter is
    synchronous (``_GatherFromSequenceParallelRegion.backward`` -> ``_reduce_scatter_along_first_dim``, no
    ``async_op``: ``megatron/core/tensor_parallel/mappings.py`` lines 159-186, 331-345): blocking
    (:data:`GRAD_GATHER_PHASE`). Megatron's ``mla_up_proj`` recomputation runs the up
    projections' gathers again (not ``k_pos_emb``'s, an input of the checkpointed function: lines 787-797).
    Without sequence parallelism the up projections' input gradients are all-reduced beside their wgrad GEMMs,
    ``k_pos_emb`` moves none."""
    lay = t.lay
    if lay.tp <= 1:
        return
    forward, blocks = _tp_passes(t)
    latents = t.model.mla_tp_latents
    mla = t.c[Block.ATTENTION] if latents else 0
    mla_fwd = mla + (mla / max(1, t.c["layers"]) * t.rec_layers if t.full else 0)
    up_fwd = mla_fwd if t.full else mla + t.recomputed(Block.ATTENTION, "mla_up_proj")
    rest = blocks - mla  # the blocks whose input side is h wide
    tokens = lay.micro_batch * t.s_cp
    x_bytes, _, x2_bytes = tp_gather_elem_bytes(lay, t.model)  # an MLA block's latents: the layout's recipe
    groups = tp_gather_groups(t.model, lay, t.stage) if lay.sequence_parallel else []
    if lay.sequence_parallel:
        # the rank's first MLA layer's linear_proj keeps userbuffers (:func:`.tp_overlap.first_proj_userbuffers`):
        # its forwards (a recomputed layer's again) and its backward, overlapped where the rest are not
        ub = mla_fwd / mla if (mla and first_proj_userbuffers(lay, t.model)) else 0.0
        ub_bytes = FP8_BYTES if lay.precision == "fp8" else ACT_BYTES
        # ``what``: what each carries, so that the two backward all-gathers of one size read apart (walk24)
        _gathers(t, groups, 0, t.m * (forward - mla_fwd), "microbatch", "ag_fprop", "input", rest if mla else None)
        t.add("tp", "reduce_scatter", "tp", t.act, t.m * (forward - ub), "microbatch", pair="rs_fprop",
              what="output")
        _gathers(t, groups, 1, t.m * (blocks - (1 if ub else 0)), GRAD_GATHER_PHASE, "rs_dgrad", "output gradient")
        if ub:
            t.add("tp", "reduce_scatter", "tp", t.act, t.m * ub, "microbatch", pair="rs_fprop",
                  what="output, the first MLA layer's linear_proj (userbuffers)", userbuffers=True)
            t.add("tp", "all_gather", "tp", t.act * ub_bytes / ACT_BYTES, t.m, "backward", ub_bytes,
                  pair="rs_dgrad", what="output gradient, the first MLA layer's linear_proj (userbuffers)",
                  userbuffers=True)
        _gathers(t, groups, 2, t.m * rest, "backward", "ag_dgrad", "input again, for wgrad", rest if mla else None)
        t.add("tp", "reduce_scatter", "tp", t.act, t.m * rest, "backward", pair="ag_wgrad", what="input gradient",
              blocks=rest if mla else None)
        _ub_scale_traffic(t, forward - mla_fwd, blocks - (1 if ub else 0), rest, bool(ub))
        _mla_latent_traffic(t, latents, (tokens, up_fwd, mla_fwd, mla), x_bytes, x2_bytes)
    else:
        _tp_allreduce_traffic(t, forward, rest, mla, latents, tokens)


def _ub_scale_traffic(t: _Traffic, fwd_blocks: float, out_blocks: float, rest: float, first_proj: bool) -> None:
    """Userbuffers' MXFP8 gathers send the scale-inverses apart, by a synchronous NCCL all-gather
    (:data:`UB_SCALE_PHASES`, :func:`ub_scale_gather_bytes`): the forward input's (``fwd_blocks`` a micro-batch),
    the output gradient's (``out_blocks``) and the input's again for wgrad (``rest``); the rank's first MLA layer's
    ``linear_proj`` (``first_proj``) its output gradient's."""
    lay = t.lay
    scales = tp_gather_groups(t.model, lay, t.stage, ub_scale_gather_bytes)
    for role, calls, phase, what in ((0, t.m * fwd_blocks, "ub_scales", "input"),
                                     (1, t.m * out_blocks, "ub_scales_backward", "output gradient"),
                                     (2, t.m * rest, "ub_scales_backward", "input again, for wgrad")):
        _gathers(t, scales, role, calls, phase, "", f"MXFP8 scale-inverses of the {what} (userbuffers)",
                 elem=FP8_BYTES)
    if first_proj and lay.precision == "fp8" and lay.fp8_recipe == "mxfp8":
        t.add("tp", "all_gather", "tp", t.act * scale_bytes("mxfp8") / ACT_BYTES, t.m, "ub_scales_backward",
              FP8_BYTES, what="MXFP8 scale-inverses of the output gradient, the first MLA layer's linear_proj "
              "(userbuffers)")


def _mla_latent_traffic(t: _Traffic, latents, counts: tuple, x_bytes: float, x2_bytes: float) -> None:
    """An MLA block's latents' TP collectives with sequence parallelism (:func:`_tp_traffic`): ``counts`` is
    ``(tokens, up_fwd, mla_fwd, mla)``, the micro-batch's tokens, the up projections' forwards (recomputed ones
    included), every MLA block's forwards, and the MLA blocks; ``x_bytes`` / ``x2_bytes`` an element of a linear's
    gathered input forward and again for wgrad."""
    tokens, up_fwd, mla_fwd, mla = counts
    for name, width, linear in latents:
        size, lb = tokens * width * ACT_BYTES, (x_bytes if linear else ACT_BYTES)
        up = MLA_UP_PAIRS.get(name, "")
        t.add("tp", "all_gather", "tp", size * lb / ACT_BYTES, t.m * (up_fwd if linear else mla_fwd),
              "microbatch", lb, what=f"MLA {name}")
        if linear:
            t.add("tp", "all_gather", "tp", size * x2_bytes / ACT_BYTES, t.m * mla, "backward", x2_bytes,
                  pair=f"{up}_dgrad", what=f"MLA {name} again, for wgrad", blocks=mla)
            t.add("tp", "reduce_scatter", "tp", size, t.m * mla, "backward", pair=f"{up}_wgrad",
                  what=f"MLA {name} gradient", blocks=mla)
        else:
            t.add("tp", "reduce_scatter", "tp", size, t.m * mla, GRAD_GATHER_PHASE, what=f"MLA {name} gradient")


def _tp_allreduce_traffic(t: _Traffic, forward: float, rest: float, mla: float, latents, tokens: float) -> None:
    """TP without sequence parallelism (:func:`_tp_traffic`): the forward's all-reduces (``forward`` blocks a
    micro-batch) and the input gradients' (``rest`` blocks and the MLA latents'), beside their layers' wgrad GEMMs
    or blocking (:func:`tp_grad_allreduce_phase`)."""
    phase = tp_grad_allreduce_phase(t.lay, "backward")
    hidden = phase == "backward"
    t.add("tp", "all_reduce", "tp", t.act, t.m * forward, phase="microbatch")
    t.add("tp", "all_reduce", "tp", t.act, t.m * rest, phase=phase, pair="ag_wgrad" if hidden else "",
          blocks=rest if mla else None)
    for name, width, linear in latents:
        if linear:
            t.add("tp", "all_reduce", "tp", tokens * width * ACT_BYTES, t.m * mla, phase=phase,
                  pair=f"{MLA_UP_PAIRS[name]}_wgrad" if hidden else "", what=f"MLA {name} gradient", blocks=mla)


def _gathers(t: _Traffic, groups: list, role: int, calls: float, phase: str, pair: str, what: str,
             blocks=None, elem: float | None = None) -> None:
    """Add a TP block's all-gather of ``role`` (:func:`tp_gather_groups`), its ``calls`` shared over the groups of
    blocks whose modules' recipes give it the same bytes an element (``elem``: the gathered tensor's element size
    where it is not those bytes, as for the scale-inverses' uint8)."""
    for r, b, share in groups:
        if r == role:
            t.add("tp", "all_gather", "tp", t.act * b / ACT_BYTES, calls * share, phase, b if elem is None else elem,
                  pair=pair, what=what, blocks=blocks)


def peak_precision(lay: ParallelLayout) -> str:
    """The precision whose dense peak a layout's MFU is of: the one its linear layers' GEMMs run at
    (:func:`.kernels.recipe_precision`), ``fp4`` under ``fp8_recipe = "nvfp4"`` (Transformer Engine's NVFP4 recipe
    runs fprop, dgrad and wgrad in E2M1), else the layout's ``precision``, as for every FP8 layout (whose
    attention may run BF16 too). Megatron-Bridge's tables give achieved model TFLOP/s per GPU only, against no
    peak (NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary-archive.md line 28: "Model TFLOP/sec/GPU: Model
    floating-point operations per second per GPU"; no MFU column).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    str
    """
    return recipe_precision(lay.fp8_recipe) if lay.precision == "fp8" else lay.precision


def tp_gather_elem_bytes(lay: ParallelLayout, model: ModelSpec, recipe: str = "") -> tuple[float, float, float]:
    """Bytes an element of a TP block's three all-gathers moves under sequence parallelism: its column-parallel
    input forward, its row-parallel output gradient backward, its input again for the weight gradient, for a
    linear module at ``recipe`` (its own: ``module_recipes``, ``bf16`` for a layer kept in BF16; "" the layout's:
    :func:`.module_recipes.module_precision`). Transformer Engine quantises a module's gathered tensors by the
    module's own recipe, so a BF16 module gathers BF16 (:func:`tp_gather_groups` gives each block its modules').

    BF16 (any precision but ``fp8``): 2 each. FP8 through userbuffers: 1 each (quantised before the gather, one
    usage at a time). FP8 through NCCL (no userbuffers; NVFP4 never has them: :func:`.parallel.check_layout`):
    Transformer Engine quantises before ``gather_along_first_dim`` and gathers the quantised copies' data and scales
    (:func:`.kernels.quantised_copy_bytes`: 1 per tensor, 1 + 1/32 MXFP8, 1 + 4/128 block-wise, 0.5625 NVFP4): the
    input's row-wise copy forward (``layernorm_linear.py`` ``quantizer.set_usage(rowwise=True,
    columnwise=False)``), the output gradient's copies (:func:`.kernels.tp_gather_output_gradient_copies`: per-tensor
    FP8's row-wise data alone, transposed after the gather; the block-scaled recipes' row- and column-wise: ``base.py``
    ``grad_output_preprocess``) and the input's one copy again for the weight gradient (per tensor row-wise and
    transposed, else column-wise: ``layernorm_linear.py`` backward, ``supports_only_rowwise_all_gather``).
    NVIDIA/TransformerEngine@5671fd36 (v2.12), f031cf87 (v2.14), 4220403e (v2.16) ``distributed.py``
    ``_all_gather_fp8``, ``_all_gather_mxfp8``, ``_start_all_gather_fp8_blockwise``, ``_all_gather_nvfp4``;
    per-tensor FP8 gathers uint8 from v1.0, MXFP8 both usages from v2.2, block-wise from v2.5 (``kernels.toml``
    ``[fp8_recipe]``; every row's TE is later).

    Parameters
    ----------
    lay : ParallelLayout
    model : ModelSpec
    recipe : str, optional
        The module's own recipe, or "" (the layout's).

    Returns
    -------
    tuple of float
        ``(input, output_gradient, input_again)`` bytes per element.
    """
    precision, fp8_recipe = module_precision(recipe, lay.precision, lay.fp8_recipe)
    if precision != "fp8":
        return float(ACT_BYTES), float(ACT_BYTES), float(ACT_BYTES)
    if tp_ring_steps(lay, model) > 1:  # userbuffers: the row-wise FP8 data of one usage
        return float(FP8_BYTES), float(FP8_BYTES), float(FP8_BYTES)
    q = module_copy_bytes(recipe, lay.precision, lay.fp8_recipe)
    return q, q * tp_gather_output_gradient_copies(fp8_recipe), q


def ub_scale_gather_bytes(lay: ParallelLayout, model: ModelSpec, recipe: str = "") -> tuple[float, float, float]:
    """Bytes an element of a TP block's three gathered tensors (as :func:`tp_gather_elem_bytes`: input, output
    gradient, input again) that userbuffers' MXFP8 all-gather sends apart from the data: the scale-inverses, by a
    synchronous NCCL all-gather on the compute stream before the GEMM (:data:`UB_SCALE_PHASES`). 1/32 each
    (:func:`.kernels.scale_bytes`) for a linear module at MXFP8 (``recipe``: its own, "" the layout's) whose TP
    collectives run through userbuffers (:func:`tp_ring_steps` > 1), 0 otherwise: per-tensor FP8 gathers no scale
    (its one scale-inverse stays local), BF16 none, and without userbuffers the scales travel in the NCCL gather of
    the quantised copy (:func:`tp_gather_elem_bytes`).

    ``fill_userbuffers_buffer_for_all_gather`` copies the MXFP8 data of one usage into the userbuffers buffer and
    gathers its compact scale-inverses with ``torch.distributed.all_gather_into_tensor(global_scale_inv,
    local_scale_inv, group=process_group)`` (NVIDIA/TransformerEngine@d0067d0d
    ``transformer_engine/pytorch/module/base.py`` lines 679-749, the gather at 727; v2.5 line 532, v2.8 611, v2.10 573, v2.12 577), no
    ``async_op``, on the current (compute) stream. It runs for the column-parallel input's forward ring exchange
    (``linear.py`` lines 413-418, ``layernorm_linear.py`` 301-306), the input gathered again for the weight gradient
    by the bulk ``*_dgrad`` exchange (``layernorm_linear.py`` 778-784, ``linear.py`` 984-990) and the row-parallel
    output gradient's ring exchange before its dgrad GEMM (``base.py`` ``grad_output_preprocess`` lines
    1725-1744): three a TP block. A fourth, the output gradient's column-wise copy for the row-parallel weight
    gradient (``linear.py`` lines 1185-1213: ``proj_wgrad`` / ``fc2_wgrad``), is filled on the dgrad GEMM's send
    stream (``torch.cuda.stream(dgrad_send_stream)``), beside that GEMM: not on the compute stream, not counted.

    Parameters
    ----------
    lay : ParallelLayout
    model : ModelSpec
    recipe : str, optional
        The module's own recipe, or "" (the layout's).

    Returns
    -------
    tuple of float
        ``(input, output_gradient, input_again)`` scale bytes per element gathered.
    """
    precision, fp8_recipe = module_precision(recipe, lay.precision, lay.fp8_recipe)
    if precision != "fp8" or fp8_recipe != "mxfp8" or tp_ring_steps(lay, model) <= 1:
        return 0.0, 0.0, 0.0
    s = scale_bytes(fp8_recipe)
    return s, s, s


def tp_gather_groups(model: ModelSpec, lay: ParallelLayout, stage: int | None = None,
                     bytes_of=tp_gather_elem_bytes) -> list[tuple]:
    """The TP blocks of pipeline stage ``stage`` (:func:`_stage_counts`'s) grouped by what their all-gathers'
    elements weigh (:func:`tp_gather_elem_bytes`): a block's input and input-again gathers at its column-parallel
    linear's recipe, its output gradient's at its row-parallel linear's
    (:data:`.module_recipes.TP_LINEARS`), each a module's own where ``module_recipes`` names it and BF16 in a layer
    kept in BF16 (:func:`.operators.bf16_layers`). An MLA block's input side (its latents) is left out of the
    input groups, as :func:`_tp_traffic` prices it apart, at the layout's recipe.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    stage : int, optional
        The pipeline stage (default: the busiest by its blocks).
    bytes_of : callable, optional
        ``(lay, model, recipe) -> (input, output_gradient, input_again)`` bytes an element: the gathers' own
        (:func:`tp_gather_elem_bytes`, the default) or the userbuffers' scale-inverses (:func:`ub_scale_gather_bytes`).

    Returns
    -------
    list of tuple
        ``(role, elem_bytes, share)``: ``role`` 0 input, 1 output gradient, 2 input again; ``share`` the role's
        blocks at those bytes over the role's blocks (each role's shares sum to 1). One group a role when no
        module or layer has a recipe of its own.
    """
    one = bytes_of(lay, model)
    own = op_recipes(lay.module_recipes) if lay.precision == "fp8" else {}
    kept = lay.precision == "fp8" and (lay.num_layers_at_start_in_bf16 or lay.num_layers_at_end_in_bf16)
    if not (own or kept):
        return [(role, b, 1.0) for role, b in enumerate(one)]
    stages, flags = pipeline_units(model, lay), bf16_layers(model, lay)
    i = stage if stage is not None else max(range(len(stages)), key=lambda j: _stage_weight(stages[j]))
    mla = bool(model.mla_tp_latents)
    counts: dict[tuple, float] = {}
    for unit, bf16 in zip(stages[i], flags[i]):
        if unit in END_UNITS:
            continue
        for kind in unit:
            kind = Block.ATTENTION if kind == Block.LOCAL else kind
            if kind not in TP_LINEARS or (kind == Block.MOE and not (model.moe and model.moe.shared_experts)):
                continue
            col, row = ("bf16", "bf16") if bf16 else (own.get(op, "") for op in TP_LINEARS[kind])
            for role, r in ((0, col), (1, row), (2, col)):
                if role != 1 and mla and kind == Block.ATTENTION:
                    continue
                key = (role, bytes_of(lay, model, r)[role])
                counts[key] = counts.get(key, 0.0) + 1.0
    totals = {role: sum(n for (r, _), n in counts.items() if r == role) for role in range(3)}
    got = [(role, b, n / totals[role]) for (role, b), n in counts.items()]
    return got + [(role, one[role], 1.0) for role in range(3) if not totals[role]]


GRAD_GATHER_PHASE = "backward_blocking"
"""Phase of a sequence-parallel row-parallel layer's output-gradient all-gather without userbuffers: Transformer
Engine gathers it synchronously before the layer's dgrad GEMM, which needs it (``grad_output_preprocess`` calls
``gather_along_first_dim(grad_output, ctx.tp_group)`` with its default ``async_op=False``,
NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/base.py lines 1702-1709 and
distributed.py line 1671), so no weight-gradient GEMM hides it; the column-parallel layer's input gathered again
and its input gradient's reduce-scatter are launched ``async_op=True`` beside its dgrad and wgrad GEMMs
(layernorm_linear.py lines 787-790, 904-907): phase ``backward``."""

_BLOCKING_GRAD_ALLREDUCE = {"backward": GRAD_GATHER_PHASE, "head_wgrad": "head_backward"}


def tp_grad_allreduce_phase(lay: ParallelLayout, phase: str) -> str:
    """The phase of a column-parallel linear's input-gradient all-reduce over TP (no sequence parallelism), launched
    in ``phase`` (``backward`` for a block's linears, ``head_wgrad`` for a head's) when it hides beside the
    layer's own weight-gradient GEMM: that phase with ``lay.async_tp_grad_allreduce`` (Megatron-LM's asynchronous
    all-reduce, Transformer Engine's ``async_op=True``), else the pass's blocking phase (:data:`GRAD_GATHER_PHASE`,
    ``head_backward``): Megatron-LM before September 2021 all-reduced it synchronously in
    ``_CopyToModelParallelRegion.backward`` (:attr:`.parallel.ParallelLayout.async_tp_grad_allreduce`), so no GEMM
    hides it.

    Parameters
    ----------
    lay : ParallelLayout
        The layout.
    phase : str
        ``"backward"`` or ``"head_wgrad"``.

    Returns
    -------
    str
        The phase the all-reduce's traffic item takes."""
    return phase if lay.async_tp_grad_allreduce else _BLOCKING_GRAD_ALLREDUCE[phase]


UB_SCALE_PHASES = {"ub_scales": "forward", "ub_scales_backward": "backward"}
"""Phases of the scale-inverses' all-gathers userbuffers' MXFP8 gathers send apart (:func:`ub_scale_gather_bytes`)
and the pass each runs in: a synchronous NCCL ``all_gather_into_tensor`` on the compute stream before the GEMM that
reads them, so nothing hides them, with or without TP overlap (blocking, as :data:`ROUTER_PHASE`)."""

HEAD_PHASES = {"head": "forward", "head_backward": "backward", "head_wgrad": "backward"}
"""Phases of a stage's heads' TP collectives (:func:`_head_traffic`) and the pass each runs in: ``head`` and
``head_backward`` block the compute stream (autograd functions' collectives); ``head_wgrad`` is launched
asynchronously beside the layer's own input-gradient GEMM (the input gathered again) or weight-gradient GEMM (the
input gradient's reduce-scatter or all-reduce), as the layers' backward exchanges (:func:`beside_own_gemm`, the
items' ``pair`` :data:`HEAD_PAIRS`): the output layer's ``LinearWithGradAccumulationAndAsyncCommunication.backward``
(NVIDIA/Megatron-LM@d98e8a64 megatron/core/tensor_parallel/layers.py: the gather ``async_op=True`` at lines
674-676, the dgrad GEMM ``grad_output.matmul(weight)`` at 683, ``handle.wait()`` at 687 before the wgrad GEMM; the
reduce-scatter ``async_op=True`` at 707-709, or the all-reduce at 696, beside the wgrad GEMM at 713-731, waited at
789), MTP's ``eh_proj`` a ``TEColumnParallelLinear`` (multi_token_prediction.py lines 780, 1174-1187; buffer name
``mtp_eh_proj``, so never userbuffers) the same order (:func:`beside_own_gemm`'s Transformer Engine lines).
Each item's ``what`` starts ``head:``."""


def _head_traffic(t: _Traffic) -> None:
    """The TP collectives of the stage's own embedding lookups, output layers, MTP projections and losses, as
    NVIDIA/Megatron-LM@7094270c launches them (none of them a Transformer Engine userbuffers GEMM):

    - ``VocabParallelEmbedding.forward`` (``tensor_parallel/layers.py`` lines 241-271; the first stage's and each
      MTP depth's lookup): the output reduce-scattered to the sequence shards (backward: the gradient all-gathered,
      ``mappings.py`` ``_ReduceScatterToSequenceParallelRegion``), or all-reduced without sequence parallelism
      (backward: none).
    - The output layer (``ColumnParallelLinear``, ``LinearWithGradAccumulationAndAsyncCommunication``, lines
      403-510; the last stage's and each MTP depth's): with sequence parallelism its input all-gathered forward
      (line 434), gathered again for the weight gradient beside the input-gradient GEMM (line 468) and the input
      gradient reduce-scattered beside the weight-gradient GEMM (line 502); without, the input gradient
      all-reduced beside it (line 489).
    - Each MTP depth's ``eh_proj`` (``transformer/multi_token_prediction.py`` lines 373-383, 484-490): a column-
      parallel linear of the ``2h`` concatenation, as the output layer's; its output gathered along the hidden
      dimension (``_AllGatherFromTensorParallelRegion``; backward a reduce-scatter) and, with sequence parallelism,
      split to the sequence shards (backward an all-gather).
    - The vocabulary-parallel loss of each head: the layout's ``cross_entropy`` implementation's collectives of a
      few FP32 values a token, each labelled with what it carries (:func:`.cross_entropy.cross_entropy_tp`).
    """
    lay, c = t.lay, t.c
    looks, heads, mtp = c["embedding"] + c["mtp_head"], c["logits"] + c["mtp_head"], c["mtp_head"]
    if lay.tp <= 1 or not (looks or heads):
        return
    m, act = t.m, t.act
    if lay.sequence_parallel:
        t.add("tp", "reduce_scatter", "tp", act, m * looks, "head", what="head: embedding output")
        t.add("tp", "all_gather", "tp", act, m * looks, "head_backward", what="head: embedding output gradient")
        for width, n, name in ((1, heads, "output layer"), (2, mtp, "MTP eh_proj")):
            pair = HEAD_PAIRS[name]
            t.add("tp", "all_gather", "tp", width * act, m * n, "head", what=f"head: {name} input")
            t.add("tp", "all_gather", "tp", width * act, m * n, "head_wgrad", pair=f"{pair}_dgrad",
                  what=f"head: {name} input again, for wgrad", blocks=n)
            t.add("tp", "reduce_scatter", "tp", width * act, m * n, "head_wgrad", pair=f"{pair}_wgrad",
                  what=f"head: {name} input gradient", blocks=n)
        t.add("tp", "all_gather", "tp", act, m * mtp, "head_backward", what="head: MTP eh_proj output gradient, sequence")
    else:
        t.add("tp", "all_reduce", "tp", act, m * looks, "head", what="head: embedding output")
        phase = tp_grad_allreduce_phase(lay, "head_wgrad")
        hidden = phase == "head_wgrad"
        t.add("tp", "all_reduce", "tp", act, m * heads, phase, pair="head_wgrad" if hidden else "",
              what="head: output layer input gradient", blocks=heads)
        t.add("tp", "all_reduce", "tp", 2 * act, m * mtp, phase, pair="eh_proj_wgrad" if hidden else "",
              what="head: MTP eh_proj input gradient", blocks=mtp)
    t.add("tp", "all_gather", "tp", act, m * mtp, "head", what="head: MTP eh_proj output, hidden")
    t.add("tp", "reduce_scatter", "tp", act, m * mtp, "head_backward", what="head: MTP eh_proj output gradient, hidden")
    coll, values, carries = cross_entropy_tp(lay.cross_entropy)
    tokens = lay.micro_batch * t.s_cp
    for v, what in (zip(values, carries) if coll != "none" else ()):
        size = tokens * v * FP32_BYTES * (lay.tp if coll == "all_gather" else 1)
        t.add("tp", coll, "tp", size, m * heads, "head", FP32_BYTES, what=f"head: loss, {what}")


def _embedding_group_traffic(t: _Traffic) -> None:
    """Megatron-LM's embedding group (NVIDIA/Megatron-LM@7094270c ``distributed/finalize_model_grads.py``
    ``_allreduce_word_embedding_grads``, lines 119-150, called from ``finalize_model_grads`` after
    ``finish_grad_sync``): where the first and last pipeline stages each hold the word embedding (tied embeddings,
    or MTP on the last stage), the whole ``main_grad`` of the rank's vocabulary shard all-reduced between the two
    stages' ranks, once a step, blocking before the optimizer; the shard's rows are the padded vocabulary's
    (:func:`.flops_megatron_lm.padded_vocab`: Megatron-LM builds ``VocabParallelEmbedding`` and the output layer
    with ``padded_vocab_size``, megatron/training/arguments.py@d98e8a64 ``--make-vocab-size-divisible-by``). A stage that holds neither end pays none; DualPipe
    (both ends on one rank) none."""
    lay, model, c = t.lay, t.model, t.c
    if lay.pp <= 1 or lay.pipeline_schedule != "1f1b" or not (model.tied_embeddings or model.mtp_layers):
        return
    if c["embedding"] or c["logits"] or c["mtp_head"]:
        size = padded_vocab(model.vocab, lay.tp) / lay.tp * model.hidden * lay.grad_bytes
        t.add("pp", "all_reduce", "emb", size, 1, "embedding_grads", lay.grad_bytes, what="embedding group")


REPLICATED_GRADS_PHASE = "tp_replicated_grads"


def _replicated_grads_traffic(t: _Traffic) -> None:
    """Megatron-Core's ``_allreduce_non_tensor_model_parallel_grads`` (NVIDIA/Megatron-LM@d98e8a64
    ``megatron/core/distributed/finalize_model_grads.py`` lines 416-485, called from ``finalize_model_grads`` line
    661 after ``finish_grad_sync``): the gradients of the parameters each TP rank holds whole
    (:func:`.unit_params.tp_replicated_params`: norms, routers, MLA's down projections under sequence parallelism;
    QK norms) flattened into one buffer and all-reduced over the TP group, once a step, blocking before the
    optimizer (:data:`REPLICATED_GRADS_PHASE`: exposed whole). In ``grad_bytes`` (``main_grad``)."""
    lay = t.lay
    if lay.tp <= 1:
        return
    n = tp_replicated_params(t.model, t.c, lay.sequence_parallel)
    t.add("tp", "all_reduce", "tp", n * lay.grad_bytes, 1, REPLICATED_GRADS_PHASE, lay.grad_bytes,
          what="replicated gradients")


def _cp_traffic(t: _Traffic) -> None:
    """Context parallelism: attention's K/V gathered (and their gradients reduced); Mamba's all-to-alls."""
    lay, c, model, m = t.lay, t.c, t.model, t.m
    if lay.cp > 1 and c[Block.ATTENTION]:
        kv = lay.micro_batch * t.seq * model.kv_width(lay.tp) * ACT_BYTES
        forward = m * (c[Block.ATTENTION] + t.recomputed(Block.ATTENTION, "core_attn"))
        if lay.cp_comm_type == "a2a":  # Ulysses: Q, K, V and O (dO, dQ, dK, dV) traded for heads, blocking
            tok = lay.micro_batch * t.s_cp * ACT_BYTES
            q_heads, kv_heads = model.heads / lay.tp, model.kv_heads_per_rank(lay.tp)
            calls = a2a_exchanges(tok * q_heads * model.qk_dim, tok * kv_heads * model.qk_dim,
                                  tok * kv_heads * model.v_dim, tok * q_heads * model.v_dim)
            for phase, passes in (("forward", forward), ("backward", m * c[Block.ATTENTION])):
                for size in set(calls[phase]):
                    t.add("cp", "alltoall", "cp", size, passes * calls[phase].count(size), phase=f"cp_a2a_{phase}")
        elif lay.cp_comm_type == "all_gather":  # K/V gathered again backward (ring_attention's module doc)
            t.add("cp", "all_gather", "cp", kv, forward, phase="cp_gather")
            t.add("cp", "all_gather", "cp", kv, m * c[Block.ATTENTION], phase="cp_gather_backward")
            t.add("cp", "reduce_scatter", "cp", kv, m * c[Block.ATTENTION], phase="cp_gather_backward")
        else:  # ring attention: each step sends the rank's K/V chunk (backward with the partial dK/dV) on
            for phase, (chunks, sends) in ring_sends(lay.cp).items():
                passes = forward if phase == "cp_ring_forward" else m * c[Block.ATTENTION]
                t.add("cp", "sendrecv", "cp", chunks * kv / lay.cp, passes * sends, phase=phase)
    if lay.cp > 1 and c[Block.MAMBA]:
        rec_mamba = t.recomputed(Block.MAMBA, "mamba")  # full recomputation's layers: no module is "mamba"
        for size, per_layer in mamba_cp_alltoalls(model, lay):
            t.add("cp", "alltoall", "cp", size, m * per_layer * (2 * c[Block.MAMBA] + rec_mamba), phase="mamba")


def _pp_traffic(t: _Traffic) -> None:
    """Pipeline sends: each schedule run fills and drains the pipeline."""
    lay = t.lay
    p, tp = lay.pp, lay.tp
    if p <= 1:
        return
    fills = lay.pipeline_flushes * (p - 1)
    sends = 2 * fills if lay.overlap_pp else 2 * (t.m * lay.vpp + fills)
    split = tp if (lay.sequence_parallel or lay.pp_scatter_gather) else 1
    t.add("pp", "pipeline", "pp", t.act / split, sends, phase="step")
    if tp > 1 and lay.pp_scatter_gather and not lay.sequence_parallel:
        t.add("tp", "all_gather", "tp", t.act / tp, sends, phase="pp_gather")


def _dp_traffic(t: _Traffic) -> None:
    """Data parallelism of the busiest rank's dense and expert parameters, by ZeRO stage; hybrid sharding's
    shards all-reduced across the replicas each micro-batch, or with ``dp_outer_sharding = "optim"`` reduce-scattered
    across them and gathered back once a step."""
    model, lay = t.model, t.lay
    rows = stage_params(model, lay)
    busiest = busiest_stage(rows)
    dense, expert, _ = rows[busiest]
    held_dense, held_expert = units_holding(model, lay)[busiest]
    z = lay.zero_stage
    hybrid, e_hybrid = hybrid_sharded(lay)
    bf16 = bf16_kept_params(model, lay)[busiest]
    for groups, n, held, across in (("dps" if hybrid else "dpcp", dense, held_dense, "dpr"),
                                    ("edps" if e_hybrid else "edp", expert, held_expert, "edpr")):
        if n <= 0:
            continue
        width = lay.dp_shard_size * lay.cp if across == "dpr" else lay.expert_dp_shard_size  # a shard group's
        shard = n / width if groups in ("dps", "edps") else 0.0
        rb = lay.expert_reduce_bytes if across == "edpr" else lay.reduce_bytes
        wb = gather_bytes_per_param(lay, n, bf16 if across == "dpr" else 0.0)
        k = dp_bucket_calls(lay, n)  # one collective per bucket, each paying its own latency
        ranks = pp_rank_shares(rows, 1 if across == "edpr" else 0, n, lay)
        if z == 0:
            k = xla_all_reduce_calls(lay, k, n * rb)  # XLA's combiner, where the layout sets its threshold
            ranks = tuple((r, f, xla_all_reduce_calls(lay, c, n * f * rb)) for r, f, c in ranks)
            t.add("dp", "all_reduce", groups, n * rb / k, k, phase="reduce", pp_ranks=ranks)
        elif z in (1, 2):
            t.add("dp", "reduce_scatter", groups, n * rb / k, k, phase="reduce", pp_ranks=ranks)
            t.add("dp", "all_reduce", across, shard * rb / k, k, phase="reduce", pp_ranks=ranks)
            t.add("dp", "all_gather", groups, n * wb / k, k, phase="gather", elem_bytes=wb, pp_ranks=ranks)
        else:  # FSDP / ZeRO-3: per unit (layer), gathered before forward and backward, reduced after backward;
            # each gather is one unit's part of this group's weights (dense or experts), once per unit holding some,
            # every micro-batch or once a schedule run (``fsdp_unit_rounds``: PyTorch pipelining's FSDP2 branch)
            calls, r = max(1, held), lay.fsdp_unit_rounds
            per = n / calls
            t.add("dp", "all_gather", groups, per * wb, _gather_passes(lay) * r * calls,
                  phase="gather_unit", elem_bytes=wb)
            t.add("dp", "reduce_scatter", groups, per * rb, r * calls, phase="reduce_unit")
            if shard and lay.dp_outer_sharding == "optim":
                # Megatron-FSDP's optimizer-sharded replicas (the layout field's sources): each unit's gradient shard
                # reduce-scattered across them once a step, on the last micro-batch's backward, and its updated
                # weight shard gathered back once, before the first forward: the once-a-step phases
                t.add("dp", "reduce_scatter", across, shard * rb / calls, calls, phase="reduce")
                t.add("dp", "all_gather", across, shard * wb / calls, calls, phase="gather", elem_bytes=wb)
                continue
            # hybrid sharding's all-reduce of the shard across replicas: one a unit, or XLA's combined buckets
            ar = xla_all_reduce_calls(lay, calls, shard * rb) if shard else calls
            t.add("dp", "all_reduce", across, shard * rb / ar, r * ar, phase="reduce_unit")


def pp_rank_shares(rows: list[tuple[float, ...]], kind: int, busiest: float,
                   lay: ParallelLayout) -> tuple[tuple[int, float, int], ...]:
    """The pipeline ranks whose bucketed data-parallel collectives can end a 1F1B step, each with its parameters of
    one kind (``kind`` 0 dense, 1 expert) as a share of the busiest rank's (whose traffic the step times): rank 0,
    which buckets its first chunk and ends the step's compute, and each later rank unless a rank between it and
    rank 0 holds no fewer parameters of both kinds. A later rank reduces and gathers each chunk as one collective
    (Megatron-Core's ``DistributedDataParallel`` leaves pipeline ranks > 0 unbucketed, NVIDIA/Megatron-LM@5d745a79cd
    onwards, @14346b65 ``megatron/core/distributed/distributed_data_parallel.py`` line 105) inside a cooldown
    (warm-up) window that grows with its rank (:func:`topo.training.dp_overlap.interleaved_reduce_exposed_s`), so
    of two such ranks the later one with no more parameters ends no later. Both kinds' items list the same ranks,
    in the same order: the step takes the one rank whose collectives together end last (:func:`_binding_rank`).

    Parameters
    ----------
    rows : list of tuple
        Each pipeline rank's dense and expert parameters first (:func:`topo.training.memory.stage_params`).
    kind : int
        0 for the dense parameters, 1 for the experts'.
    busiest : float
        The busiest rank's parameters of the kind (the step's DP traffic).
    lay : ParallelLayout

    Returns
    -------
    tuple of (int, float, int)
        ``(rank, share, calls)``, rank 0 first, ``calls`` the rank's collectives of the kind (rank 0's buckets of
        the layout's size, :func:`dp_bucket_calls`; a later rank's one a chunk); empty without a pipeline, under
        DualPipe or with the DP collectives not overlapped (one collective a rank, rank 0 the last to start).

    >>> lay = ParallelLayout(pp=4, global_batch=8, dp=8)
    >>> pp_rank_shares([(4e9, 0.0), (5e9, 0.0), (3e9, 0.0), (6e9, 0.0)], 0, 6e9, lay)
    ((0, 0.6666666666666666, 100), (1, 0.8333333333333334, 1), (3, 1.0, 1))
    """
    if lay.pp <= 1 or lay.pipeline_schedule != "1f1b" or not lay.overlap_dp or busiest <= 0:
        return ()
    out, kept = [(0, rows[0][kind] / busiest, dp_bucket_calls(lay, rows[0][kind]))], []
    for r, row in enumerate(rows[1:], start=1):
        if not any(k[0] >= row[0] and k[1] >= row[1] for k in kept):
            out.append((r, row[kind] / busiest, lay.vpp))
            kept.append(row)
    return tuple(out)


def pp_cooldowns(ranks: list, sc) -> tuple[tuple[float, float], ...]:
    """Each pipeline rank's warm-up and cooldown in passes of the pacing stage ``sc``: how long after rank 0's its
    first forward starts (the forwards of one micro-batch on the ranks before it) and how long before rank 0's its
    last backward ends (their backwards and recomputation: 1F1B's cooldown runs the last micro-batch's backward from
    the last rank down to rank 0), over ``sc``'s forward and backward. ``r`` for rank ``r`` of stages as busy as
    ``sc``; pipeline sends not counted (they lengthen the windows).

    Parameters
    ----------
    ranks : list of StageCompute
        Each pipeline rank's compute per micro-batch, ``busiest`` naming its rank
        (:func:`topo.training.operators.rank_computes`).
    sc : StageCompute
        The pacing stage's, whose passes are the DP windows.

    Returns
    -------
    tuple of (float, float)
        Per pipeline rank, in rank order: (warm-up in forwards, cooldown in backwards); rank 0's (0, 0).
    """
    fwd, bwd = sc.forward_s, sc.backward_s + sc.recompute_s
    out, f, b = [], 0.0, 0.0
    for rc in sorted(ranks, key=lambda rc: rc.busiest):
        out.append((f / fwd if fwd > 0 else 0.0, b / bwd if bwd > 0 else 0.0))
        f, b = f + rc.forward_s, b + rc.backward_s + rc.recompute_s
    return tuple(out)


def _binding_rank(terms: dict[int, list[float]]) -> dict[int, float]:
    """Each bucketed DP item's exposed seconds (``terms``: item index -> one value a rank of its ``pp_ranks``, the
    same ranks for every item) at the one pipeline rank whose collectives, all items together, end last: the
    optimizer step's grad-norm all-reduce waits for every rank."""
    if not terms:
        return {}
    sums = [sum(col) for col in zip(*terms.values(), strict=True)]
    k = max(range(len(sums)), key=sums.__getitem__)
    return {i: t[k] for i, t in terms.items()}


def gather_bytes_per_param(lay: ParallelLayout, params: float, bf16_params: float = 0.0) -> float:
    """Mean bytes per parameter of a data-parallel weight all-gather of ``params`` parameters: the layout's
    ``weight_gather_bytes`` (``gather_bytes``, default ``weight_bytes``), or with ``fp8_param_gather`` (FP8
    layouts) 1 byte for the linear layers' weights and ``weight_gather_bytes`` for the ``bf16_params`` of them that
    stay in BF16 (the embedding, the output layer, the norms, an MoE router, a Mamba mixer's convolution and scalars:
    :func:`topo.training.memory.bf16_kept_params`), each from the DDP buffer of its dtype. MXFP8 weights are gathered at
    ``weight_gather_bytes`` even so: Megatron-Core gathers them in BF16 through the gradient buffer and casts them
    after (:func:`topo.training.fp8_params.gathers_in_fp8`).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``precision``, ``fp8_param_gather``, ``fp8_recipe``, ``gather_bytes``, ``weight_bytes``).
    params : float
        Parameters the gather carries.
    bf16_params : float
        Of those, the parameters gathered at ``weight_gather_bytes`` whatever the setting.

    Returns
    -------
    float
        Bytes per parameter (between 1 and ``weight_gather_bytes``).
    """
    if not gathers_in_fp8(lay) or params <= 0:
        return lay.weight_gather_bytes
    kept = min(max(bf16_params, 0.0), params)
    return (FP8_BYTES * (params - kept) + lay.weight_gather_bytes * kept) / params


def _ep_traffic(t: _Traffic) -> None:
    """Expert parallelism: each rank sends its own tokens across the EP group (Megatron-Core's all-to-all
    dispatcher), then the expert-tensor-parallel ranks all-gather what they received over ETP (and reduce-scatter
    it back in the combine); the busiest rank receives busiest_rank_load x the mean: the all-to-all waits for it.
    Dropped and padded to capacity (the all-to-all dispatcher only): each rank sends every expert its capacity
    (expert_capacity), static shapes, whatever the routing. Recomputed MoE blocks dispatch and combine again:
    full recomputation's layers, or every MoE block when the recipe recomputes the "moe" module (Megatron-Core's
    MoELayer checkpoints its whole forward, router, dispatch, experts and combine: moe_layer_recompute,
    NVIDIA/Megatron-LM@00119989 megatron/core/transformer/moe/moe_layer.py MoELayer.forward); a replay that stops
    at the layer's last saved tensor (``recompute_early_stop``) dispatches again but does not combine."""
    model, lay, c, m = t.model, t.lay, t.c, t.m
    if model.moe is None or not c[Block.MOE] or lay.ep * lay.expert_tp <= 1:
        return
    h = model.moe_width  # the routed tokens' width: a LatentMoE dispatches its latents
    cap = expert_capacity(model, lay)
    if cap is not None and lay.ep_dispatcher == "alltoall":
        elems = cap * model.moe.experts * h
    else:
        elems = lay.micro_batch * t.s_cp / lay.tp * ep_copies(model, lay) * h * busiest_rank_load(model, lay)
    rec_moe = t.recomputed(Block.MOE, "moe")  # dispatch (and combine, but where the replay stops before it) again
    calls = m * (c[Block.MOE] * 4 + 2 * rec_moe - t.stopped(Block.MOE, "moe"))  # forward, recomputed, backward
    if lay.ep > 1:
        if lay.ep_dispatch_bytes != ACT_BYTES:  # the forward dispatches in FP8, the rest in BF16
            t.add("ep", "alltoall", "ep", elems * lay.ep_dispatch_bytes, m * (c[Block.MOE] + rec_moe),
                  phase="microbatch", elem_bytes=lay.ep_dispatch_bytes)
            t.add("ep", "alltoall", "ep", elems * ACT_BYTES, calls - m * (c[Block.MOE] + rec_moe), phase="microbatch")
        else:
            t.add("ep", "alltoall", "ep", elems * ACT_BYTES, calls, phase="microbatch")
    if lay.ep_dispatcher == "alltoall":
        _alltoall_side_traffic(t, elems / h, rec_moe, dropless=cap is None)
    if _routing_map_gathered(lay):
        # HybridEP's forward dispatch (no cached handle) all-gathers the bool routing map over the flex group
        # (:func:`_routing_map_gathered`): tokens x experts x etp bytes a rank, group_degree of them gathered
        routing_map = (lay.micro_batch * t.s_cp / lay.tp * model.moe.experts * lay.expert_tp
                       * group_degree(lay, FLEX_GROUP))
        t.add("ep", "all_gather", FLEX_GROUP, routing_map, m * (c[Block.MOE] + rec_moe), phase="microbatch",
              elem_bytes=1.0)
    gathered = elems * lay.expert_tp * ACT_BYTES  # what each ETP rank holds after the gather
    t.add("ep", "all_gather", "etp", gathered, calls / 2, phase="microbatch")
    t.add("ep", "reduce_scatter", "etp", gathered, calls / 2, phase="microbatch")


ALLTOALL_PROBS_BYTES = 4.0
"""Bytes of one routed token's probability in the all-to-all dispatcher's probs all-to-all: FP32, the router's
dtype in the recipes that set ``moe_router_dtype = "fp32"`` (a BF16 router sends 2; the call is latency-bound
either way)."""
COUNT_BYTES = 8.0
"""Bytes of one expert's token count (int64: ``routing_map.sum(dim=0)``)."""
PROBS_PAIR = "ep_probs"
"""The ``pair`` tag of the all-to-all dispatcher's probs all-to-all (:func:`_is_ep_a2a`)."""


def _alltoall_side_traffic(t: _Traffic, rows: float, rec_moe: float, dropless: bool) -> None:
    """The all-to-all dispatcher's calls beside the tokens' (NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/moe/token_dispatcher.py ``MoEAlltoAllTokenDispatcher``): ``token_dispatch`` sends the
    routed tokens' probabilities in an all-to-all of their own (``rows`` routed copies a rank, FP32), forward and,
    as autograd's reverse, backward; a dropless ``preprocess`` all-gathers each rank's tokens per expert (int64)
    over the EP x ETP group (timed on the EP group) before the host can size the token all-to-all. Both are small
    and latency-bound."""
    lay, c, m = t.lay, t.c, t.m
    fwd = m * (c[Block.MOE] + rec_moe)
    if lay.ep > 1:
        t.add("ep", "alltoall", "ep", rows * ALLTOALL_PROBS_BYTES, fwd + m * c[Block.MOE], phase="microbatch",
              elem_bytes=ALLTOALL_PROBS_BYTES, pair=PROBS_PAIR)
    if dropless:
        t.add("ep", "all_gather", "ep", t.model.moe.experts * COUNT_BYTES * lay.ep, fwd, phase="microbatch",
              elem_bytes=COUNT_BYTES)


AUX_LOSS_ROUTERS = ("deepseek", "softmax_aux_loss")
"""The router configurations (:attr:`topo.training.model.MoeSpec.router`) with a load-balancing loss, whose
forward reduces the tokens per expert over the ranks that split the sequence: ``deepseek``'s sequence aux loss
and ``softmax_aux_loss``'s switch aux loss (Megatron-Bridge's DeepSeek-V3 and Qwen3 bridges set
``seq_aux_loss`` / ``aux_loss``: NVIDIA-NeMo/Megatron-Bridge@v0.4.0 ``models/deepseek/deepseek_v3_bridge.py``,
``models/qwen/qwen3_moe_bridge.py``); ``sigmoid_topk`` and ``softmax_topk`` have none."""
ROUTER_PHASE = "router"
"""The ``phase`` of the router's token-count reduction (:func:`_router_traffic`): always exposed."""
ROUTER_WHAT = "router: tokens per expert"
"""The ``what`` of the router's token-count reduction (:func:`_router_traffic`): Megatron-Core's
``get_tokens_per_expert_and_token_count`` reduces ``routing_map.sum(dim=0)``, the tokens routed to each expert."""


def _router_traffic(t: _Traffic) -> None:
    """An MoE router's load-balancing loss needs the tokens per expert of the whole sequence: with the sequence
    split over tensor (sequence-parallel) or context ranks, each MoE block's forward all-reduces its ``experts``
    int64 counts (``routing_map.sum(dim=0)``) over the TP x CP group before the loss
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/moe_utils.py
    ``get_tokens_per_expert_and_token_count``: ``reduce_from_tensor_model_parallel_region(..., tp_cp_group)``,
    called by router.py ``_apply_aux_loss`` and ``_apply_seq_aux_loss``, fused router or not; the same at
    core_v0.14.0 / core_v0.15.0 router.py, and at @1e057005 (May 2025) as ``torch.distributed.all_reduce`` of the
    counts in ``switch_load_balancing_loss_func``). It is a blocking ``torch.distributed`` call on the compute
    stream (the kernels after it wait for it), so nothing hides it (:data:`ROUTER_PHASE`); a recomputed MoE
    block computes the loss again (activation checkpointing replays the forward with gradients on). Megatron-LM's
    GB200 study names these reductions as what keeps the fused router at 31 kernels ("separated by communication
    kernels", docs/discussions/deepseek-v3-gb200-optimization@1d9edcf8 sec. 2.1.4). Timed on the TP group
    (``tp`` dimension), or the CP group when TP is 1. The sequence aux loss (``deepseek``) counts each sequence of
    the micro-batch apart: ``_apply_seq_aux_loss`` sums ``routing_map.reshape(seq_length, -1)`` over the
    sequence, ``micro_batch x experts`` counts (router.py @d98e8a64dd, core_v0.14.0 alike)."""
    model, lay, c = t.model, t.lay, t.c
    moe = model.moe
    if (moe is None or not c[Block.MOE] or moe.router not in AUX_LOSS_ROUTERS or lay.tp * lay.cp <= 1
            or lay.moe_routing == "consecutive"):  # the benchmark gate computes no scores and no loss
        return
    calls = t.m * (c[Block.MOE] + t.recomputed(Block.MOE, "moe"))
    counts = moe.experts * (lay.micro_batch if moe.router == "deepseek" else 1)  # one row a sequence: seq aux loss
    t.add("tp" if lay.tp > 1 else "cp", "all_reduce", "tpcp", counts * COUNT_BYTES, calls, phase=ROUTER_PHASE,
          elem_bytes=COUNT_BYTES, what=ROUTER_WHAT)


_PARTS = {"all": ("_tp_traffic", "_head_traffic", "_cp_traffic", "_pp_traffic", "_embedding_group_traffic",
                  "_dp_traffic", "_ep_traffic", "_router_traffic", "_replicated_grads_traffic"),
          "dispatcher_free": ("_tp_traffic", "_head_traffic", "_cp_traffic", "_pp_traffic",
                              "_embedding_group_traffic", "_dp_traffic", "_router_traffic",
                              "_replicated_grads_traffic"),
          "dispatcher": ("_ep_traffic",)}  # by name: each builder looked up when called (a replaced one is run)
BUILDER_COLLECTIVES = {"_tp_traffic": ("all_gather", "reduce_scatter", "all_reduce"),
                       "_head_traffic": ("all_gather", "reduce_scatter", "all_reduce"),
                       "_embedding_group_traffic": ("all_reduce",),
                       "_cp_traffic": ("alltoall", "all_gather", "reduce_scatter", "sendrecv"),
                       "_pp_traffic": ("pipeline", "all_gather"),
                       "_dp_traffic": ("all_reduce", "reduce_scatter", "all_gather"),
                       "_ep_traffic": ("alltoall", "all_gather", "reduce_scatter"),
                       "_router_traffic": ("all_reduce",),
                       "_replicated_grads_traffic": ("all_reduce",)}
"""The collectives each builder of :data:`_PARTS` may add (its ``add`` calls, :func:`_alltoall_side_traffic`'s in
``_ep_traffic``'s): :func:`step_traffic` with ``only`` runs no builder whose collectives ``only`` refuses all of
(the search's NVLS check under NCCL's ``auto``, where only the all-reduce may run NVLS, ~26k calls at 100k GPUs);
``tests/test_step_traffic_builders_fast70.py`` records every item each builder adds against it."""


def _routing_map_gathered(lay: ParallelLayout) -> bool:
    """Whether the forward dispatch all-gathers the routing map: HybridEP's, over any flex group
    (:data:`~.mapping.FLEX_GROUP`, Megatron-Core's ``tp_ep``: ``ep x etp`` ranks) of more than one rank, inside one
    NVLink domain as across domains. Its ``metadata_preprocessing`` (every forward dispatch: the backward's calls
    reuse the forward's handle) gathers each rank's bool routing map into the global map its preprocessing kernel
    scans, so each rank receives ``ep x etp - 1`` others' maps. A rank's map is tokens x ``experts x etp`` bytes:
    the flex dispatcher expands it to one column per local expert of every group rank, an EP member's experts
    repeated over its ``etp`` ranks (NVIDIA/Megatron-LM@d98e8a64 ``token_dispatcher.py``
    ``MoEFlexTokenDispatcher._initialize_metadata``, lines 1906-1911; ``num_experts = tp_size x num_moe_experts``,
    line 1849; DeepEP's ``allgather_routing_map`` asserts the columns are ``experts_per_rank x ranks_per_node x
    nodes``, executor.cu line 35). At deepseek-ai/DeepEP@94a9f8f6
    (branch hybrid-ep, 2026-07-10, PR #682 "Disable custom allgather by default"; the commit ``ep_dispatch.toml``'s
    rates are read at) that gather is NCCL's ``all_gather_into_tensor`` whatever the group
    (``csrc/hybrid_ep/executor/executor.cu`` ``Executor::allgather_routing_map``, lines 39-44: NCCL when
    ``num_of_nodes > 1 || !enable_custom_allgather``; ``deep_ep/hybrid_ep_buffer.py`` line 52,
    ``enable_custom_allgather: bool = False``), and Megatron-Core does not set it
    (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/moe/fused_a2a.py`` ``init_hybrid_ep_buffer``, lines
    340-347); before PR #556 (a484936, 2026-01-20) it was NCCL too (``deep_ep/hybrid_ep_buffer.py`` at a484936^, lines
    464-472). Between the two, inside one node, a custom NVLink kernel (32 SMs) moved the same bytes at a rate no
    source publishes: priced as NCCL's all-gather alike (assumption)."""
    return lay.ep_dispatcher == "deepep" and lay.ep_flex_backend == "hybridep" and group_degree(lay, FLEX_GROUP) > 1


TAIL_PHASES = ("reduce", "gather")  # once per step, at its ends: DP of ZeRO-0/1/2 and SHARD_GRAD_OP

# How the step's collectives share a link in its traffic mix (:mod:`topo.engine.contention`): max-min fair, a
# member held back elsewhere leaving what it does not use of a link to the others (Bertsekas & Gallager, *Data
# Networks*, 2nd ed., sec. 6.5.2). A link is work-conserving: it does not idle while another member's bytes wait.
# Equal shares that are not passed on (the engine's default, the bottleneck bound of one collective's alike flows)
# gave each member 1/k of a link whatever it used of it: on 1,152 GB200 at EP 32 the expert-DP ring, held to its
# NIC's rate, uses 7% of a GPU's NVLink port for its hop between a rack's two members and was given a third of it,
# slowing the expert all-to-all beside it x2.22 where its 7% slows it x1.32 (findings section 477).
STEP_MIX_SHARING = "maxmin"


def _mix_slowdowns(fabric: Fabric, comms: list[tuple[dict, CommTime]], groups: dict,
                   engine: CommEngine | None = None, steady_window_s: float | None = None) -> dict:
    """Each dimension's slowdown when its largest collective runs with the other dimensions' (one mix).

    Two mixes: the steady state of the pipeline (every micro-batch's TP, CP, EP and PP traffic, FSDP's per-layer
    gathers and reductions) sets the slowdown of those; the once-per-step data-parallel reduction and gather
    (``TAIL_PHASES``) run during the last backward and the first forward, beside everything, so theirs comes
    from the mix of all. A steady collective meets the others only while they run: with ``steady_window_s`` (the
    steady phase's length) its slowdown is weighted by the share of that window its sharers (the dimensions it meets
    on an over-asked link, :func:`topo.engine.traffic.over_asked_sharers`) are busy (:func:`duty_weighted_slowdowns`):
    DP on the NICs does not lengthen the time TP and EP on NVLink are slowed by each other. Cached on ``engine`` per (members' collectives, group matrices, sizes to
    two significant digits): layouts of a search that differ only in what the mix cannot see share one run."""
    lead: dict[str, tuple[dict, CommTime]] = {}
    for item, one in comms:
        key = item["dim"] if item["groups"] not in EXPERT_DP_GROUPS else "dp_experts"
        if one.time_s > 0 and (key not in lead or one.time_s * item["calls"] > lead[key][1].time_s
                               * lead[key][0]["calls"]):
            lead[key] = (item, one)
    steady = {k: v for k, v in lead.items() if v[0]["phase"] not in TAIL_PHASES}
    out = {}
    if len(steady) < len(lead):
        out.update({k: v for k, v in _run_mix(fabric, lead, groups, engine)[0].items() if k not in steady})
    mixed, sharers = _run_mix(fabric, steady, groups, engine)
    if steady_window_s:
        busy: dict[str, float] = {}
        for item, one in comms:
            key = item["dim"] if item["groups"] not in EXPERT_DP_GROUPS else "dp_experts"
            if key in steady:
                busy[key] = busy.get(key, 0.0) + one.time_s * item["calls"]
        mixed = duty_weighted_slowdowns(mixed, busy, steady_window_s, sharers)
    out.update(mixed)
    return out


def duty_weighted_slowdowns(slow: dict, busy_s: dict, window_s: float, sharers: dict | None = None) -> dict:
    """Slowdowns of collectives that meet the others only part of the time.

    A traffic mix times every member running with all the others at once; over a window of ``window_s`` seconds
    in which its sharers (the members it meets on an over-asked link; default: all the others) are busy
    ``sum(busy_s[y] for y in sharers[x])`` seconds (each alone), member ``x`` shares its links for at most that
    fraction ``f`` of its own calls: ``1 + (s - 1) min(1, f)``. An upper bound on the overlap (the sharers taken as
    never running at the same time as each other). A member on links no over-asked one of ``x``'s crosses cannot
    slow ``x``, so its busy time does not count (TP on NVLink beside DP on the NICs).

    Parameters
    ----------
    slow : dict
        Member -> slowdown when all run together (>= 1).
    busy_s : dict
        Member -> seconds its calls take alone over the window.
    window_s : float
        The seconds over which the members' calls are spread.
    sharers : dict, optional
        Member -> the members that can slow it (:func:`topo.engine.traffic.over_asked_sharers`); None: all the others.

    Returns
    -------
    dict
        Member -> weighted slowdown (>= 1).
    """
    def met_s(k):
        others = [y for y in busy_s if y != k] if sharers is None else sharers.get(k, ())
        return sum(busy_s.get(y, 0.0) for y in others)

    return {k: 1.0 + (s - 1.0) * min(1.0, met_s(k) / window_s) for k, s in slow.items()}


def _run_mix(fabric: Fabric, lead: dict, groups: dict, engine: CommEngine | None) -> tuple[dict, dict]:
    """Slowdown of each member of ``lead`` (name -> (item, time)) run as one traffic mix, and each one's sharers
    (:attr:`topo.engine.traffic.MixResult.sharers`) (cached)."""
    if len(lead) < 2:
        return {}, {}
    key = tuple(sorted((k, it["collective"], CommEngine.signature(groups[it["groups"]]),
                        float(f"{it['size_bytes']:.2g}")) for k, (it, _) in lead.items()))
    cache = getattr(engine, "mix_cache", None) if engine is not None else None
    if cache is not None and key in cache:
        return dict(cache[key][0]), dict(cache[key][1])
    members = []
    for name, (item, _) in lead.items():
        G = groups[item["groups"]]
        kw = {"stages": int(G.shape[1])} if item["collective"] == "pipeline" else {}
        members.append(Member(name=name, collective=item["collective"], size=max(1, int(item["size_bytes"])),
                              options=EstimateOptions(ranks=G.ravel(), groups=int(G.shape[0]),
                                                      group_layout="blocked", rank_order="given", **kw),
                              evaluation=engine.evaluation(item["collective"], G) if engine is not None else None))
    res = run_mix(fabric, members, name="training step", max_contested=0,  # only the slowdowns are read
                  sharing=STEP_MIX_SHARING, profile=engine.profile if engine is not None else None)
    out = {mr.name: max(1.0, mr.slowdown) for mr in res.members}
    if cache is not None:
        cache[key] = (out, res.sharers)
    return dict(out), dict(res.sharers)


def estimate_step(fabric: Fabric, model: ModelSpec, lay: ParallelLayout, *, engine: CommEngine | None = None,
                  convention: str = "6n", efficiency: float | None = None, check: bool = True,
                  contention: bool | dict = True, kernel_overrides: dict | None = None,
                  profile=None) -> StepResult:
    """Estimate one training step of ``model`` laid out as ``lay`` on ``fabric``.

    Parameters
    ----------
    fabric, model, lay
        The cluster, the model and its parallel layout.
    engine : CommEngine, optional
        A shared collective cache (a search passes one).
    convention : str
        FLOP convention of TFLOPs/GPU and MFU: ``6n`` or ``megatron``.
    efficiency : float, optional
        Large-GEMM efficiency in (0, 1] instead of the GPU generation's.
    check : bool
        Validate the layout against the model and the fabric first.
    contention : bool or dict
        Run the step's dimensions as one traffic mix (see the module doc); False times each alone (faster); a
        dict reuses the slowdowns (``StepResult.contention``) of an earlier evaluation of the same layout.
    kernel_overrides : dict, optional
        ``{section: {key: value}}`` over ``kernels.toml`` (the accuracy fit).
    profile : optional
        The cost profile of the step's collectives (:class:`~topo.training.comm.CommEngine`'s; None: the
        fabric's own); not with ``engine``, which carries its own.

    Returns
    -------
    StepResult
    """
    spec = fabric.spec
    lay, placed, gpu = _placed_layout_and_gpu(fabric, model, lay, efficiency, kernel_overrides, check)
    mapping = map_layout(lay, spec.gpus_per_domain, fabric.layout.num_gpus)
    refuse_failed_placement(lay, fabric)
    engine = engine_for(fabric, engine, profile)
    traffic, groups, spans, timed = _timed_traffic(fabric, model, lay, mapping, engine)
    cover = _ep_cover_s(lay, timed)
    ranks = rank_computes(model, lay, gpu, cover)
    if isinstance(contention, dict):
        slow = dict(contention)  # slowdowns of an earlier evaluation of the same layout (a fit reuses them)
    else:
        slow = (_mix_slowdowns(fabric, timed, groups, engine, lay.microbatches * ranks[0].microbatch_s)
                if contention else {})
    paced, reduced = None, {}  # reduced: rank computes on a GPU less what hidden communication takes
    ep_sms = ep_held_sms(lay, engine.profile)
    for sc, stage in _pace_candidates(model, lay, ranks):
        if stage is None:
            tr, tm = traffic, timed
        else:
            tr, _, _, tm = _timed_traffic(fabric, model, lay, mapping, engine, stage, groups, spans)
        ep_loss = _ep_loss(model, lay, gpu, sc, cover, tm, groups, slow, reduced, ep_sms)
        comms, exposed = _exposed_comms(model, lay, gpu, sc, engine, tr, tm, groups, spans, slow, stage, ep_loss,
                                        pp_cooldowns(ranks, sc))
        amax, exposed[AMAX_PHASE] = amax_step(engine, mapping, model, lay, _stage_counts(model, lay, stage),
                                              gpu.kernels.launch_gpu_s, sp_quantisations(model, lay, stage))
        if amax is not None:
            comms.append(amax)
        note = _add_sm_losses(model, lay, gpu, sc, cover, engine, comms, exposed, reduced, [it for it, _ in tm])
        paced_s = sum(step_breakdown(lay, sc, exposed, 0.0).values())
        if paced is None or paced_s > paced[0]:
            paced = (paced_s, sc, comms, exposed, note)
    _, sc, comms, exposed, note = paced
    result = _step_result(fabric, model, lay, gpu, sc, mapping, comms, exposed, slow, placed, convention,
                          engine.profile)
    result.ep_cover_s, result.gather_lead_s = cover, gather_lead_s(model, lay, gpu)
    if note:
        result.notes.append(note)
    result.notes += failure_notes(fabric, engine)
    return result


def failure_notes(fabric: Fabric, engine: CommEngine) -> list[str]:
    """What ``--fail`` took down and, for a failed NIC, whose NIC carries its traffic (as ``topo estimate`` says
    it): a step slowed by a failure says why; none on a fabric without failures."""
    text = failures_summary(fabric)
    return [text] + stand_in_notes(engine.router.paths) if text else []


def _pace_candidates(model: ModelSpec, lay: ParallelLayout, ranks: list) -> list[tuple]:
    """The pipeline stages that may set the pace, each as (its compute, its index for :func:`step_traffic`), one of
    each distinct set of units: a stage's time per micro-batch is its own compute and its own layers' exposed
    communication, so a stage with less compute but more MoE (or TP) layers than the compute-busiest one (a last
    stage that holds the loss in a layer's place) can be the slowest. DualPipe (each rank runs two stages on half
    the micro-batches each): the compute-busiest rank with the stage of the most layers' traffic, as one."""
    if traffic_stage(lay, ranks[0]) is None:
        return [(ranks[0], None)]
    stages, flags = pipeline_units(model, lay), bf16_layers(model, lay)
    seen, out = set(), []
    for sc in ranks:
        key = _stage_key(stages, flags, sc.busiest)
        if key not in seen:
            seen.add(key)
            out.append((sc, sc.busiest))
    return out


def _stage_key(stages: list, flags: list, i: int) -> tuple:
    """What a pipeline stage's traffic reads of it: its units and which of its layers run in BF16."""
    return tuple(map(str, stages[i])), tuple(flags[i])


def pace_stages(model: ModelSpec, lay: ParallelLayout) -> list[int | None]:
    """Every pipeline stage whose traffic may pace the step (:func:`_pace_candidates` takes those of the pipeline
    ranks' busiest stages), one of each distinct set of units, as :func:`step_traffic`'s ``stage``: ``[None]`` where
    the step reads no stage in particular (DualPipe, or one stage; :func:`traffic_stage`).

    Parameters
    ----------
    model, lay
        The model and its layout.

    Returns
    -------
    list
        Stage indices (or ``[None]``), a superset of those :func:`estimate_step` paces by, whatever the computes.
    """
    if lay.pipeline_schedule != "1f1b" or lay.pp <= 1:
        return [None]
    flags = bf16_layers(model, lay)  # kept by the placement, as the units: the stages follow from both
    key = (pipeline_key(model, lay), tuple(map(tuple, flags)))
    got = _PACE.get(key)
    if got is None:
        if len(_PACE) >= COUNTS_KEPT:
            _PACE.clear()
        stages, seen = pipeline_units(model, lay), {}
        for i in range(len(stages)):
            seen.setdefault(_stage_key(stages, flags, i), i)
        got = _PACE[key] = tuple(seen.values())
    return list(got)


_PACE: dict[tuple, tuple] = {}  # :func:`pace_stages` by placement and BF16 flags (the search's NVLS check, ~27k calls)


def comm_dim(item: dict) -> str:
    """The :class:`DimensionComm` ``dim`` of a traffic item: its dimension, ``dp_experts`` for the expert
    data-parallel groups (their own communicators)."""
    return item["dim"] if item["groups"] not in EXPERT_DP_GROUPS else "dp_experts"


def nvls_communicators(model: ModelSpec, lay: ParallelLayout, algorithm: str, parts: str = "all") -> set:
    """Every communicator of a step on any pipeline stage (:func:`pace_stages`) whose collectives an engine told
    ``algorithm`` may run as NVLS or NVLSTree (:func:`.nvls_buffers.may_run_nvls`), as ``(dim, groups)``: the
    communicators :func:`.nvls_buffers.step_nvls_bytes` can count a buffer for, whatever the routing chooses; the
    FP8 amax all-reduce's group where the layout reduces amaxes (:func:`.fp8_amax.amax_step`). ``parts`` as
    :func:`step_traffic`'s: ``dispatcher`` gives the EP communicators alone (no amax group), so a
    search unites a shape's dispatcher-free set, found once, with each dispatcher's."""
    out, may = set(), partial(may_run_nvls, algorithm=algorithm)
    for stage in (pace_stages(model, lay) if _builders(parts, may) else ()):  # no builder adds one: no stage
        out.update((comm_dim(it), it["groups"]) for it in step_traffic(model, lay, stage, parts, only=may))
    if parts == "dispatcher":
        return out
    if sp_amax_reduced(lay):
        out.add((AMAX_PHASE, AMAX_SP_GROUP))
    elif amax_reduced(lay):
        out.add((AMAX_PHASE, amax_group(lay)))
    return out


def least_nvls_bytes(engine: CommEngine, model: ModelSpec, lay: ParallelLayout, mapping, gpu) -> float:
    """The least NVLS buffer bytes per GPU :func:`estimate_step` can count for ``lay``: over every stage that may
    pace the step (:func:`pace_stages`), :func:`.nvls_buffers.step_nvls_bytes` of the stage's collectives that may
    run NVLS, each with the algorithm ``engine`` chooses for it (routed as the step routes them; the flex
    dispatcher's bound, :func:`_flex_bound`, touches only all-to-alls), and the stage's amax all-reduce
    (:func:`.fp8_amax.amax_step`). A layout that does not fit with this many bytes does not fit as estimated.

    Parameters
    ----------
    engine : CommEngine
    model, lay
        The model and its layout, placed (:func:`.mapping.default_placement`).
    mapping : Mapping
        The layout on the fabric (:func:`.mapping.map_layout`).
    gpu : GPUCompute
        The GPU's kernel model (its generation, launch gap).

    Returns
    -------
    float
    """
    profile, least = engine.profile, math.inf
    for stage in pace_stages(model, lay):
        comms = []
        for it in step_traffic(model, lay, stage):
            if not may_run_nvls(it["collective"], engine.algorithm):
                continue
            G = mapping.groups(it["groups"])
            one = engine.time(it["collective"], G, it["size_bytes"])
            comms.append(DimensionComm(
                dim=comm_dim(it), collective=it["collective"], size_bytes=it["size_bytes"],
                calls_per_step=it["calls"], time_s=one.time_s, exposed_s=0.0, algorithm=one.algorithm,
                level=one.level, link=one.link, utilization=one.utilization, num_groups=int(G.shape[0]),
                group_size=int(G.shape[1]), domains_per_group=mapping.domains_spanned(it["groups"])))
        amax, _ = amax_step(engine, mapping, model, lay, _stage_counts(model, lay, stage), gpu.kernels.launch_gpu_s,
                            sp_quantisations(model, lay, stage))
        least = min(least, step_nvls_bytes(profile, gpu.generation, comms + ([amax] if amax is not None else [])))
    return float(least)


def traffic_stage(lay: ParallelLayout, sc) -> int | None:
    """The pipeline stage whose traffic goes with the compute ``sc`` (:func:`step_traffic`'s ``stage``): its own
    under 1F1B, None (the stage of the most layers) for DualPipe's paired stages or one stage; what a lower bound of
    the step pairs ``sc`` with (:func:`estimate_step` takes the slowest stage with its own traffic).

    Parameters
    ----------
    lay : ParallelLayout
    sc : StageCompute
        One pipeline rank's compute (:func:`.operators.rank_computes`).

    Returns
    -------
    int or None
        ``sc.busiest`` under 1F1B with ``pp > 1``, else None.
    """
    return sc.busiest if lay.pipeline_schedule == "1f1b" and lay.pp > 1 else None


def _check_module_recipes_gpu(lay: ParallelLayout, gpu) -> None:
    """A module the layout's ``module_recipes`` runs in MXFP8 or NVFP4 needs the tensor cores its recipe does, as
    ``fp8_recipe`` (below): Blackwell's block scaling, FP4 for NVFP4."""
    for name, recipe in parse_module_recipes(lay.module_recipes).items():
        if (recipe == "mxfp8" and gpu.generation != "blackwell") or (recipe == "nvfp4" and gpu.peak_fp4_flops is None):
            raise TopoError(f"{name}={recipe} needs Blackwell's block-scaled{' FP4' if recipe == 'nvfp4' else ''} "
                            f"tensor cores, {gpu.name} is {gpu.generation}; allowed: {name}=bf16",
                            source="layout", key="module_recipes")


def _placed_layout_and_gpu(fabric: Fabric, model: ModelSpec, lay: ParallelLayout, efficiency: float | None,
                           kernel_overrides: dict | None, check: bool):
    """The layout with its default placement (and the note saying so), checked against the model and the fabric
    when ``check``, and the GPU's kernel model with the spec's host CPU."""
    spec = fabric.spec
    lay, placed = default_placement(lay, spec.gpus_per_domain, fabric.layout.num_gpus)
    if check:
        check_layout(model, lay, gpus_per_domain=spec.gpus_per_domain)
    gpu = gpu_compute(spec.gpu, efficiency, kernel_overrides, spec.host_cpu[0])
    if check and lay.fp8_recipe == "mxfp8" and gpu.generation != "blackwell":
        # MXFP8's 1x32 block scales are applied inside Blackwell's tensor cores (Megatron-LM
        # megatron/core/transformer/moe/README.md, FP8 recipes: MXFP8 on Blackwell)
        raise TopoError(f"mxfp8 needs Blackwell's block-scaled tensor cores, {gpu.name} is {gpu.generation}; "
                        f"allowed: delayed, current, blockwise", source="layout", key="fp8_recipe")
    if check and lay.fp8_recipe == "nvfp4" and gpu.peak_fp4_flops is None:  # E2M1 GEMMs need FP4 tensor cores
        raise TopoError(f"nvfp4 needs FP4 tensor cores (Blackwell), {gpu.name} is {gpu.generation} with none; "
                        f"allowed: delayed, current, blockwise{', mxfp8' if gpu.generation == 'blackwell' else ''}",
                        source="layout", key="fp8_recipe")
    if check:
        _check_module_recipes_gpu(lay, gpu)
    if check and lay.attention_fp8 == "mxfp8" and gpu.generation != "blackwell":  # cuDNN's MXFP8 SDPA likewise
        raise TopoError(f"mxfp8 needs Blackwell's block-scaled tensor cores, {gpu.name} is {gpu.generation}; "
                        f"allowed: fp8, or \"\" (BF16 attention)", source="layout", key="attention_fp8")
    gpu.peak_flops(lay.precision)  # a precision the GPU has no tensor-core rate for is refused here, before timing
    if check:
        check_num_sm(lay.tp_overlap_config, gpu)
    return lay, placed, gpu


def _timed_traffic(fabric: Fabric, model: ModelSpec, lay: ParallelLayout, mapping, engine: CommEngine,
                   stage: int | None = None, groups: dict | None = None, spans: dict | None = None):
    """The step's collectives (:func:`step_traffic` of pipeline stage ``stage``), the rank groups and NVLink domains
    each spans (added to ``groups`` and ``spans`` when given), and each collective timed alone on the fabric (the
    flex dispatcher's bound applied)."""
    traffic = step_traffic(model, lay, stage)
    groups = {} if groups is None else groups
    spans = {} if spans is None else spans
    for d in {it["groups"] for it in traffic} - set(groups):
        groups[d], spans[d] = mapping.groups(d), mapping.domains_spanned(d)
    timed = [(it, _flex_bound(it, engine.time(it["collective"], groups[it["groups"]], it["size_bytes"]), lay,
                              spans[it["groups"]], fabric.spec.gpu)) for it in traffic]
    return traffic, groups, spans, timed


def _exposed_comms(model: ModelSpec, lay: ParallelLayout, gpu, sc, engine: CommEngine, traffic: list[dict],
                   timed: list, groups: dict, spans: dict, slow: dict,
                   stage: int | None = None, ep_loss: float = 0.0,
                   cooldowns: tuple | None = None) -> tuple[list[DimensionComm], dict]:
    """Each collective's time in the mix and the part of it the step exposes, by the overlap rules of each
    dimension (the module doc), and the exposed seconds summed per dimension; ``traffic`` is pipeline stage
    ``stage``'s (:func:`step_traffic`), ``sc`` its compute, ``ep_loss`` what the hidden expert all-to-alls cost
    the compute beside them per hidden second (:func:`_ep_loss`), ``cooldowns`` each pipeline rank's windows
    (:func:`pp_cooldowns`)."""
    m = lay.microbatches
    units = max(1, sc.layers)
    comms: list[DimensionComm] = []
    exposed = {k: 0.0 for k in ("tp", "cp", "pp", "dp", "ep")}
    done = _stream_exposed(model, lay, gpu, sc, traffic, timed, slow, stage, ep_loss)
    # DP last: its collectives run on their own stream during the whole pass, so the compute stream's exposed
    # NVLink-only collectives widen their windows (:func:`_nvlink_exposed_s`, :func:`_dp_windows`)
    nvl = _nvlink_exposed_s([(it["dim"], spans[it["groups"]], done[i]) for i, (it, _) in enumerate(timed)
                             if it["dim"] != "dp"])
    t_f, t_b = sc.forward_s, sc.backward_s + sc.recompute_s
    stream, lead = xla_stream_calls(traffic, lay), gather_lead_s(model, lay, gpu)
    terms: dict[int, list[float]] = {}
    for i, (item, one) in enumerate(timed):
        if item["dim"] == "dp":
            factor = slow.get("dp" if item["groups"] not in EXPERT_DP_GROUPS else "dp_experts", 1.0)
            wf, wb = _dp_windows(t_f, t_b, m, spans[item["groups"]], nvl)
            ex = _dp_exposed(engine, item, groups[item["groups"]], one.time_s * factor, factor, wf, wb, units,
                             lay, stream, lead, by_rank=True, cooldowns=cooldowns)
            (terms if isinstance(ex, list) else done)[i] = ex
    done.update(_binding_rank(terms))
    for i, (item, one) in enumerate(timed):
        dim, ex = item["dim"], done[i]
        key = comm_dim(item)
        factor = slow.get(key, 1.0)
        exposed[dim] += ex
        comms.append(DimensionComm(
            dim=key, collective=item["collective"], size_bytes=item["size_bytes"], calls_per_step=item["calls"],
            time_s=one.time_s * factor * item["calls"], exposed_s=ex, algorithm=one.algorithm, level=one.level,
            link=one.link, utilization=one.utilization, num_groups=int(groups[item["groups"]].shape[0]),
            group_size=int(groups[item["groups"]].shape[1]),
            domains_per_group=spans[item["groups"]], slowdown=factor, phase=_tp_pass(item),
            what=item.get("what", "")))
    return comms, exposed


_TP_UNRINGED = {ROUTER_PHASE, REPLICATED_GRADS_PHASE, *HEAD_PHASES, *UB_SCALE_PHASES}  # TP items no userbuffers GEMM hides
_TP_PASSES = {"microbatch": "forward", "backward": "backward", GRAD_GATHER_PHASE: "backward", "pp_gather": "pipeline", ROUTER_PHASE: "forward",
              REPLICATED_GRADS_PHASE: "step", **HEAD_PHASES, **UB_SCALE_PHASES}


def _tp_pass(item: dict) -> str:
    """When a TP exchange runs, as :class:`DimensionComm` names it: ``forward`` (:func:`_tp_traffic`'s phase
    ``microbatch``, with any recomputed forward), ``backward``, ``pipeline`` (the next stage's gather of a
    pipeline send, :func:`_pp_traffic`) or ``step`` (once a step after the backward: :func:`_replicated_grads_traffic`);
    "" for the other dimensions."""
    return _TP_PASSES.get(item["phase"], "") if item["dim"] == "tp" else ""


def _stream_exposed(model: ModelSpec, lay: ParallelLayout, gpu, sc, traffic: list[dict], timed: list, slow: dict,
                    stage: int | None = None, ep_loss: float = 0.0) -> dict[int, float]:
    """The exposed seconds of each TP, CP, PP and EP item of ``timed`` (its index -> seconds; DP items left out) by
    its dimension's overlap rule; ``timed`` holds ``(item, CommTime)`` pairs of pipeline stage ``stage``'s
    ``traffic``. Each dimension draws on windows of its own, so the items of some dimensions alone get the same
    seconds as among all (what the search's :func:`exposed_routed` relies on). ``ep_loss``: what the hidden expert
    all-to-alls cost the compute beside them a hidden second (:func:`_ep_loss`; 0 in the search's bound, which
    keeps only the published floor, :func:`ep_overlap_cost_s`)."""
    tp_blocks = stage_tp_blocks(model, lay, stage)
    ring, tp_hidden = tp_ring_steps(lay, model) > 1, tp_overlap_on(lay, model)
    windows = {**comm_windows(lay, sc, ring, tp_hidden), **_ring_windows(traffic, ring_step_s(model, lay, gpu))}
    paired = _paired_ep_exposed(model, lay, gpu, sc, windows,
                                [(it, one.time_s * slow.get("ep", 1.0)) for it, one in timed if it["dim"] == "ep"],
                                ep_loss)
    done: dict[int, float] = {}
    for i, (item, one) in enumerate(timed):
        dim = item["dim"]
        if dim == "dp":
            continue
        one_s = one.time_s * slow.get(dim, 1.0)
        total = one_s * item["calls"]
        if paired is not None and dim == "ep":  # the combined 1F1B's node holds it (:func:`_ep_node`)
            ex = paired * total if _ep_node(item, lay) == EP_COMM_NODE else total
        elif dim == "tp":
            ex = tp_exposed_s(item, one_s, sc, tp_blocks, windows, lay, ring=ring, tp_hidden=tp_hidden,
                              ep_loss=ep_loss)
        else:
            ex = exposed_comm_s(dim, item["phase"], total, windows, lay, ep_loss,
                                tp_overlap=tp_hidden or "userbuffers" in item)
        done[i] = ex
    return done


def comm_windows(lay: ParallelLayout, sc, ring: bool, tp_hidden: bool) -> dict:
    """The step's pooled windows (:func:`exposed_comm_s`): ``tp``, the micro-batches' compute (TP overlap), ``ep``
    the same (``overlap_ep``), and ``tp_backward``, the weight-gradient GEMMs the TP items not priced against their
    own GEMM draw on (what no pair covers): less the column-parallel wgrad GEMMs their own input gradients'
    exchanges hold (``sc.tp_pairs`` of :data:`WGRAD_PAIRS`): the layers' and MLA up projections' where those hide
    behind their own (:func:`beside_own_gemm`: no userbuffers, no TP overlap), the heads' always; never below 0.

    Parameters
    ----------
    lay : ParallelLayout
    sc : StageCompute
    ring, tp_hidden : bool
        As :func:`tp_exposed_s`'s.

    Returns
    -------
    dict
    """
    m = lay.microbatches
    own = [f"{c}_wgrad" for c in HEAD_PAIRS.values()] if (ring or tp_hidden) else WGRAD_PAIRS
    held = sum(g * n for key in own for g, n in sc.tp_pairs.get(key, []))
    return {"tp": m * sc.microbatch_s, "tp_backward": m * max(0.0, sc.wgrad_s - held), "ep": m * sc.microbatch_s}


def beside_own_gemm(item: dict, ring: bool, tp_hidden: bool) -> bool:
    """Whether TP traffic item ``item`` hides behind its own layer's GEMM (the one its ``pair`` names,
    :func:`topo.training.operators.tp_paired_gemm_s`), not behind a window pooled over the step: every paired
    exchange through userbuffers (``ring``, :func:`tp_ring_steps`), and without them a column-parallel layer's
    backward exchanges (phase ``backward``), which Transformer Engine launches ``async_op=True`` and waits for
    inside that layer's backward (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/
    layernorm_linear.py: the input's all-gather ``ln_out_total_work`` launched at line 787 before the dgrad GEMM
    (851-876) and waited at 985-987 before the wgrad GEMM (1050-1083); the input gradient's reduce-scatter
    ``dgrad_work`` (an all-reduce without sequence parallelism) launched at 904-910 after the dgrad GEMM and
    waited at 1128-1130 after the wgrad GEMM; linear.py alike, lines 993-996, 1086, 1126-1132, 1172-1174, 1285,
    1347-1352). So the input's gather hides behind that layer's dgrad GEMM only (``ag_dgrad``) and its input
    gradient's exchange behind its wgrad GEMM only (``ag_wgrad``): on one communicator the reduce-scatter starts
    when the gather and the dgrad GEMM are both done, as the wgrad GEMM does. Megatron-Core builds a block's
    column- and row-parallel linears as modules of their own (``TELayerNormColumnParallelLinear`` /
    ``TEColumnParallelLinear`` and ``TERowParallelLinear``; NVIDIA/Megatron-LM@d98e8a64
    megatron/core/models/gpt/gpt_layer_specs.py lines 531-551, Transformer Engine's fused ``LayerNormMLP`` only
    through the opt-in op fuser), so no GEMM of another layer lies between a launch and its wait. Not under
    ``tp_hidden`` without userbuffers, nor for the router's items and the heads' blocking ones
    (:data:`_TP_UNRINGED`). An MLA model's up projections (no userbuffers, ``ring`` and ``tp_hidden`` never set)
    are column-parallel linears like any (their items' ``pair`` :data:`MLA_UP_PAIRS`); the heads' ``head_wgrad``
    exchanges, never through userbuffers (:data:`HEAD_PHASES`), hide behind the output layer's or ``eh_proj``'s own
    GEMMs whatever the layers run (``ring``, ``tp_hidden``)."""
    if item["phase"] == "head_wgrad":
        return bool(item.get("pair"))
    if item["phase"] in _TP_UNRINGED:
        return False
    return ring or (item["phase"] == "backward" and not tp_hidden and "userbuffers" not in item)


def tp_exposed_s(item: dict, one_s: float, sc, tp_blocks: int, windows: dict, lay: ParallelLayout, *,
                 ring: bool, tp_hidden: bool, ep_loss: float = 0.0) -> float:
    """The exposed seconds of TP traffic item ``item``'s calls of ``one_s`` each: those :func:`beside_own_gemm`
    prices against their own layer's GEMM, block kind by block kind (:func:`tp_ring_exposed_s` of
    ``sc.tp_pairs``; ``bulk`` for :data:`BULK`: beside the whole GEMM), the calls no GEMM pairs (an MLA model's,
    whose linears carry no pair: :func:`.tp_overlap.userbuffers_built`) and every other item by
    :func:`exposed_comm_s`, drawing on ``windows``. One rule for the step (:func:`_stream_exposed`) and the
    search's bound (``topo.training.search._comm_floor_s``, at each call's floor seconds).

    Parameters
    ----------
    item : dict
        A TP item of :func:`step_traffic`.
    one_s : float
        Seconds of one of its calls.
    sc : StageCompute
        The stage's compute (its ``tp_pairs``).
    tp_blocks : int
        TP blocks a micro-batch on the stage (:func:`_tp_blocks`), unless the item names its own.
    windows : dict
        The step's windows (:func:`exposed_comm_s`), drawn down.
    lay : ParallelLayout
    ring, tp_hidden : bool
        Userbuffers run the model's TP exchanges (:func:`tp_ring_steps` > 1); the layout's TP overlap takes
        effect (:func:`.tp_overlap.tp_overlap_on`).
    ep_loss : float
        As :func:`exposed_comm_s`'s.

    Returns
    -------
    float
    """
    overlap = tp_hidden or "userbuffers" in item
    if not beside_own_gemm(item, ring, tp_hidden):
        return exposed_comm_s("tp", item["phase"], one_s * item["calls"], windows, lay, ep_loss, tp_overlap=overlap)
    pairs = sc.tp_pairs.get(item.get("pair"), [])
    ex, rest = tp_ring_exposed_s(one_s, item["calls"], pairs, item.get("tp_blocks", tp_blocks), lay.tp,
                                 item.get("pair") in BULK)
    return ex + exposed_comm_s("tp", item["phase"], rest, windows, lay, ep_loss, tp_overlap=overlap)


def _dp_windows(t_f: float, t_b: float, m: int, dp_span: int, nvlink_s: float):
    """The forward and backward windows (per micro-batch) a DP collective hides behind: the compute, and when the
    DP group crosses the network, also ``nvlink_s`` (a step's exposed collectives of the compute stream whose
    groups stay inside one NVLink domain, :func:`_nvlink_exposed_s`) over the ``m`` micro-batches. Those run on
    the compute stream over NVLink, while the DP stream's next gather or last reduction has the NICs to itself
    (Megatron-FSDP prefetches the next unit's gather on its own stream: NVIDIA/Megatron-LM@1e057005
    megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py ``_pre_forward_param_unshard``,
    ``AllGatherPipeline``). Split between forward and backward as the compute is (an approximation: the calls' own
    phases are not recorded). ``nvlink_s`` infinite (not known yet: the search's bound) gives infinite windows,
    the least a DP collective can expose."""
    if dp_span <= 1 or t_f + t_b <= 0 or nvlink_s <= 0:
        return t_f, t_b
    if math.isinf(nvlink_s):
        return math.inf, math.inf
    nvl = nvlink_s / max(1, m)
    return t_f + nvl * t_f / (t_f + t_b), t_b + nvl * t_b / (t_f + t_b)


def _nvlink_exposed_s(items: list[tuple[str, int, float | None]]) -> float:
    """A step's exposed seconds on the compute stream that leave the NICs to the DP collectives: ``items`` are the
    step's TP, CP, PP and EP collectives as ``(dimension, NVLink domains its groups span, exposed seconds)``; a
    dimension counts when every one of its collectives' groups stays inside one NVLink domain (its traffic never
    reaches a NIC), else 0 (a group across domains, an all-to-all or a CP ring across nodes, or a pipeline send,
    shares the NICs with the DP collectives). Decided from the mapped groups, not by the dimension's name: TP
    inside a node counts, CP counts only where ``tp x cp`` fits in a domain. An exposed time not known yet (None,
    the search's bound before those groups are routed) makes the sum infinite. :func:`_dp_windows` applies it
    only to a DP group that spans more than one domain."""
    dims: dict[str, list] = {}
    for dim, span, ex in items:
        dims.setdefault(dim, []).append((span, ex))
    total = 0.0
    for rows in dims.values():
        if all(span == 1 for span, _ in rows):
            total += math.inf if any(ex is None for _, ex in rows) else sum(ex for _, ex in rows)
    return total


def _add_sm_losses(model: ModelSpec, lay: ParallelLayout, gpu, sc, cover: float, engine: CommEngine,
                   comms: list[DimensionComm], exposed: dict, cache: dict | None = None,
                   items: list[dict] | None = None) -> str | None:
    """Add to ``exposed`` (and each collective's ``exposed_s``) what the hidden DP, CP ring and TP collectives cost
    the compute beside them: their NCCL kernels hold :func:`.comm_sms.nccl_sms` SMs and move HBM bytes
    (:func:`.comm_sms.comm_hbm_Bps` of their bus bytes a second) while they run, so the compute they hide behind
    (a ring send: its attention kernels; a layer's backward TP exchange: its own layer's GEMM) runs on what is left
    (:func:`.comm_sms.reduced_gpu`, :func:`.comm_sms.sm_loss_s`). ``items``: the traffic items of ``comms`` (same
    order), which say which TP collectives are a layer's backward exchange hidden through NCCL
    (:func:`_nccl_hidden_tp`; Transformer Engine's ``async_op=True`` gathers and reduce-scatters run as NCCL kernels
    beside the GEMM, as the DP collectives do); None charges no TP. The expert all-to-alls pay theirs already
    (:func:`_ep_loss`); the userbuffers TP GEMMs theirs in the operators (the configuration's ``set_sm_margin``,
    :mod:`.tp_overlap`: each GEMM launched, whole, on the SMs its communicator leaves); the PP sends are not
    counted. A DP collective whose windows the compute stream's
    NVLink-only exposed time widens (:func:`_dp_windows`) is charged only on its share beside compute
    (:func:`_beside_compute`): while the GPU waits on exposed communication no GEMM runs, so the SMs held cost
    nothing there. The DP collectives' hidden seconds beside compute together are capped at the step's compute
    (they queue on one stream). Returns the note saying what they cost, or None."""
    tp_pairs = _nccl_hidden_tp(model, lay, comms, items)
    hidden = [(i, c.time_s - c.exposed_s) for i, c in enumerate(comms)
              if (c.dim in ("dp", "dp_experts", "cp") or i in tp_pairs) and c.time_s > c.exposed_s]
    if not hidden or not gpu.sms:
        return None
    share = _beside_compute(lay, sc, comms)
    dp = {i for i, _ in hidden if comms[i].dim in ("dp", "dp_experts")}
    hidden = [(i, h * share if i in dp and comms[i].domains_per_group > 1 else h) for i, h in hidden]
    prof = engine.profile
    helds = {i: nccl_sms(_group_channels(prof, comms[i]), lay.nccl_min_ctas, lay.nccl_max_ctas) for i, _ in hidden}
    keys = {i: (helds[i], _hbm_taken(gpu, _moved(comms[i]))) for i, _ in hidden}
    # the same pipeline stage as ``sc``, on what the NCCL kernels leave (one stage compute per SMs and HBM taken)
    slows = {k: _reduced_stage(model, lay, gpu, sc, cover, *k, cache) for k in set(keys.values())}
    # one DP stream: its collectives run one after another, so no more of them than the step's compute overlaps
    window = lay.microbatches * sc.microbatch_s
    dp_hidden = sum(h for i, h in hidden if i in dp)
    cap = min(1.0, window / dp_hidden) if dp_hidden > 0 else 1.0
    total = 0.0
    for i, h in hidden:
        c, slow = comms[i], slows[keys[i]]
        if c.dim == "cp":
            loss = sm_loss_s(h, sc.attention_s, slow.attention_s)
        elif i in tp_pairs:  # beside its own layer's GEMM (:func:`beside_own_gemm`), else the weight gradients
            loss = sm_loss_s(h, _tp_gemm_s(sc, tp_pairs[i]), _tp_gemm_s(slow, tp_pairs[i]))
        else:
            loss = sm_loss_s(h * cap, sc.microbatch_s, slow.microbatch_s)
        key = "dp" if i in dp else c.dim
        exposed[key] += loss
        comms[i] = replace(c, exposed_s=c.exposed_s + loss)
        total += loss
    counts = sorted(set(helds.values()), reverse=True)
    held = str(counts[0]) if len(counts) == 1 else ", ".join(map(str, counts[:-1])) + f" or {counts[-1]}"
    by = "" if len(counts) == 1 else ", by collective"
    hbm = max(k[1] for k in keys.values()) / gpu.hbm_Bps
    kinds = "DP/CP/TP" if tp_pairs else "DP/CP"
    return (f"hidden {kinds} collectives hold {held} of the {gpu.sms} SMs (NCCL's channels{by}) and up to {hbm:.0%} "
            f"of HBM bandwidth while they run: the compute beside them loses {format_time(total)} per step, counted "
            f"in their exposed time")


def _nccl_hidden_tp(model: ModelSpec, lay: ParallelLayout, comms: list[DimensionComm],
                    items: list[dict] | None) -> dict[int, str]:
    """The TP collectives of ``comms`` (index -> their traffic item's ``pair``, "" for none) that NCCL runs hidden
    beside a layer's backward GEMM: phase ``backward`` without userbuffers or TP overlap (:func:`beside_own_gemm`
    without ``ring`` and ``tp_hidden``; an MLA model's up projections' too), and the heads' ``head_wgrad``
    exchanges whatever the layers run (never userbuffers: :data:`HEAD_PHASES`). None without ``items``."""
    if items is None:
        return {}
    nccl = not (tp_overlap_on(lay, model) or tp_ring_steps(lay, model) > 1)
    return {i: items[i].get("pair", "") for i, c in enumerate(comms[:len(items)])
            if c.dim == "tp" and (items[i]["phase"] == "head_wgrad" or nccl) and beside_own_gemm(items[i], False, False)}


def _tp_gemm_s(sc, pair: str) -> float:
    """Seconds a micro-batch of the GEMMs a backward TP exchange of ``pair`` hides behind on stage compute ``sc``:
    its layers' own (``sc.tp_pairs``, :func:`.operators.tp_paired_gemm_s`), or, for an unpaired one, the stage's
    weight-gradient GEMMs (the pooled window it draws on)."""
    return sum(g * n for g, n in sc.tp_pairs.get(pair, [])) or sc.wgrad_s


def _beside_compute(lay: ParallelLayout, sc, comms: list[DimensionComm]) -> float:
    """The share of a widened DP collective's hidden seconds that runs beside compute: ``C / (C + N)``, ``C`` the
    step's compute (``m`` x the micro-batch's forward, backward and recompute, the windows of :func:`_dp_windows`)
    and ``N`` the compute stream's NVLink-only exposed seconds that widen them (:func:`_nvlink_exposed_s` of
    ``comms``' TP, CP, PP and EP collectives, before any SM loss is added to CP). The DP stream's calls start when
    a bucket or unit is ready, not when a TP or EP exchange exposes, and each spans many layers, so its seconds
    fall on compute and on that exposed time in their shares of the widened window. 1 when nothing widens."""
    nvl = _nvlink_exposed_s([(c.dim, c.domains_per_group, c.exposed_s) for c in comms
                             if c.dim not in ("dp", "dp_experts")])
    compute = lay.microbatches * (sc.forward_s + sc.backward_s + sc.recompute_s)
    return compute / (compute + nvl) if nvl > 0 and compute > 0 else 1.0


def _moved(c: DimensionComm) -> float:
    """Bus bytes a second collective ``c`` moves per GPU while it runs (:func:`.comm_sms.moved_Bps`)."""
    call_s = c.time_s / c.calls_per_step if c.calls_per_step else 0.0
    return moved_Bps(c.collective, c.size_bytes, c.group_size, call_s)


def _hbm_taken(gpu, moved: float) -> float:
    """HBM bandwidth communication kernels moving ``moved`` bus bytes a second take (:func:`.comm_sms.comm_hbm_Bps`),
    to 1% of the GPU's HBM (collectives within it share one reduced stage compute): the DP/CP collectives'
    (:func:`_add_sm_losses`) and the expert all-to-alls' (:func:`_ep_loss`)."""
    return round(comm_hbm_Bps(moved) / gpu.hbm_Bps, 2) * gpu.hbm_Bps


def _reduced_stage(model: ModelSpec, lay: ParallelLayout, gpu, sc, cover: float, held: int, taken_Bps: float,
                   cache: dict | None = None):
    """Pipeline stage ``sc.busiest``'s compute on ``gpu`` less ``held`` SMs and ``taken_Bps`` of HBM
    (:func:`.comm_sms.reduced_gpu`); ``cache`` keeps every rank's across the step's candidate stages."""
    cache = {} if cache is None else cache
    key = (held, taken_Bps)
    if key not in cache:
        cache[key] = rank_computes(model, lay, reduced_gpu(gpu, held, taken_Bps), cover)
    return next(r for r in cache[key] if r.busiest == sc.busiest)


def ep_held_sms(lay: ParallelLayout, prof) -> int:
    """SMs the expert all-to-all's kernels hold while they run, by dispatcher (the one place it is decided): the
    flex dispatcher's (``deepep``: DeepEP / HybridEP) the layout's ``ep_comm_sms``, the SMs those kernels are
    launched on (``moe_deepep_num_sms``, ``moe_hybridep_num_sms``), as DeepSeek's own kernels under DualPipe
    (``pipeline_schedule = "dualpipe"``: DeepSeek-V3 sec. 3.2.2, 20 SMs; no NCCL); Megatron-Core's ``alltoall``
    dispatcher runs PyTorch's ``all_to_all_single``, NCCL send/recv pairs on NCCL's p2p channels, one SM each
    (:func:`.comm_sms.nccl_p2p_sms` of the profile's channels and the recipe's ``NCCL_MIN_CTAS`` /
    ``NCCL_MAX_CTAS``: 16 on the bundled profiles).

    Parameters
    ----------
    lay : ParallelLayout
    prof : the fabric's NCCL profile (``channels``)

    Returns
    -------
    int
    """
    if lay.ep_dispatcher == "deepep" or lay.pipeline_schedule == "dualpipe":
        return lay.ep_comm_sms
    return nccl_p2p_sms(prof.channels, lay.nccl_min_ctas, lay.nccl_max_ctas)


def _ep_loss(model: ModelSpec, lay: ParallelLayout, gpu, sc, cover: float, timed: list, groups: dict,
             slow: dict, cache: dict | None = None, sms: int | None = None) -> float:
    """What the hidden expert all-to-alls cost the compute beside them per hidden second, by the model of the DP
    collectives (:mod:`.comm_sms`): ``1 - t / t'`` with ``t'`` the stage's compute on the SMs the dispatcher's
    kernels leave (``sms``, :func:`ep_held_sms`; None: the layout's ``ep_comm_sms``) and the HBM bandwidth the
    largest all-to-all's traffic leaves. 0 without ``overlap_ep``, an SM count or an expert all-to-all.

    Parameters
    ----------
    model, lay
    gpu : GpuCompute
    sc : StageCompute
        The stage's compute on the whole GPU.
    cover : float
        The all-to-alls' cover of the host's waits (:func:`_ep_cover_s`).
    timed : list
        The step's ``(item, timing)`` pairs (:func:`_timed_traffic`); ``groups`` their group matrices.
    slow : dict
        The traffic mix's slowdowns per dimension.
    cache : dict, optional
        Reduced-GPU rank computes already made (:func:`_reduced_stage`).

    Returns
    -------
    float
    """
    a2a = [(it, one) for it, one in timed if _is_ep_a2a(it)]
    if not (lay.overlap_ep and gpu.sms and a2a):
        return 0.0
    factor = slow.get("ep", 1.0)
    moved = max(moved_Bps("alltoall", it["size_bytes"], groups[it["groups"]].shape[1], one.time_s * factor)
                for it, one in a2a)
    held = lay.ep_comm_sms if sms is None else sms
    t = _reduced_stage(model, lay, gpu, sc, cover, held, _hbm_taken(gpu, moved), cache).microbatch_s
    return max(0.0, 1.0 - sc.microbatch_s / t) if t > 0 else 0.0


def _group_channels(prof, c: DimensionComm) -> int:
    """NCCL's collective channels in ``c``'s communicator: the profile's ``channels_one_gpu_per_node`` when the
    group has one GPU in each of its domains (NCCL's ``nNodes == nRanks``: the ring search finds one channel
    through the GPU's own NIC and duplicates it twice, ``src/graph/search.cc`` ``ncclTopoDupChannels`` and
    ``src/graph/connect.cc`` ``ncclTopoPostset``), else the profile's ``channels``. Point-to-point sends (the CP
    ring's) keep the profile's count: NCCL's p2p channels come from another rule, not modelled."""
    one_per_node = (c.group_size > 1 and c.domains_per_group == c.group_size
                    and c.collective in ("all_gather", "reduce_scatter", "all_reduce"))
    return prof.channels_one_gpu_per_node if (one_per_node and prof.channels_one_gpu_per_node) else prof.channels


def _step_result(fabric: Fabric, model: ModelSpec, lay: ParallelLayout, gpu, sc, mapping,
                 comms: list[DimensionComm], exposed: dict, slow: dict, placed, convention: str,
                 profile) -> StepResult:
    """The step's breakdown (compute, exposed communication, bubble, optimizer), memory, notes, timeline and
    interval as one :class:`StepResult`; ``profile``: the one that priced the collectives."""
    spec = fabric.spec
    m = lay.microbatches
    optimizer = optimizer_step_s(optimizer_params(model, lay), gpu, lay)
    breakdown = step_breakdown(lay, sc, exposed, optimizer, weight_cast_s(model, lay, gpu))
    step = sum(breakdown.values())
    seq = lay.seq_len or model.seq_len
    mem = memory_per_gpu(model, lay, gpu.memory_bytes, generation=gpu.generation, gpus_per_domain=spec.gpus_per_domain)
    # the NVLS buffers of the communicators whose collectives topo's choice runs as NVLS: only the step knows them
    mem = replace(mem, nvls_bytes=step_nvls_bytes(profile, gpu.generation, comms))
    notes = ([placed] if placed else []) + _notes(model, lay, gpu, mem, mapping)
    notes += [n for n in [bubble_note(breakdown, m)] if n]
    layout = lay.model_dump()
    # seq_len: the tokens the step ran a sequence at (the model's when the layout gives none), never null
    layout.update(gpus=lay.gpus, microbatches=m, etp=lay.expert_tp, edp=lay.expert_dp, seq_len=seq,
                  fp8_amax_reduction=amax_reduced(lay) or sp_amax_reduced(lay))  # what runs; chosen_by: who chose
    if model.moe is not None:  # dropless: what the busiest EP rank's experts and all-to-all carry; padded: None
        layout["moe_busiest_rank_load"] = (busiest_rank_load(model, lay) if expert_capacity(model, lay) is None
                                           else None)
    result = StepResult(
        spec=fabric.name, model=model.name, model_status=model.status, layout=layout, gpus=lay.gpus,
        gpu=gpu.name, precision=lay.precision, flop_convention=convention, efficiency=gpu.efficiency,
        peak_flop_per_s_per_gpu=gpu.peak_flops(peak_precision(lay)), peak_precision=peak_precision(lay),
        step_time_s=step, breakdown_s=breakdown,
        tokens_per_step=lay.global_batch * seq, model_flop_per_step=model_flop_per_step(model, lay, convention),
        executed_flop_per_step=sc.executed_flops * m * lay.gpus, memory=mem, comm=comms,
        overlap={k: getattr(lay, f"overlap_{k}") for k in ("tp", "cp", "pp", "dp", "ep")}, notes=notes,
        compute_by_module_s={k: v_ * m for k, v_ in sc.by_module_s.items()}, contention=slow,
        chosen_by={"fp8_amax_reduction": "default" if lay.fp8_amax_reduction is None else "layout",
                   **({"fp8_recipe": "default" if lay.fp8_recipe is None else "layout"} if lay.precision == "fp8"
                      else {})},  # unset: Megatron-Core's default, delayed (parallel.delayed_scaling)
        host_cpu={"name": gpu.kernels.host_cpu, "source": spec.host_cpu[1],
                  "time_factor": host_time_factor(gpu.kernels.host_cpu), "reference": reference_host_cpu()},
        profile=profile.name)
    result.timeline = step_timeline(result, sc.forward_s, sc.backward_s + sc.recompute_s)
    result.uncertainty = step_interval(model, lay.precision, step, gpu.generation, job_reach(lay, mapping))
    return result


def _ep_cover_s(lay: ParallelLayout, timed: list) -> float:
    """GPU seconds of a dropless MoE layer's forward dispatch and combine (each call alone on the fabric), which run
    between its tokens-per-expert syncs while the host launches on (:func:`.operators._synced_layer_wait_s`);
    the passes' mean where the EP calls are overlapped with another micro-batch (a paired pass's time is then not
    the compute stream's); 0 when there are none.

    One rule for every dispatcher and shape: the dispatch is every item of the exchange on its way to the experts
    (:func:`_exchange_call`), the EP all-to-all (the FP8 one where the forward dispatches in FP8) and the experts'
    etp all-gather; the combine every item on the way back, the etp reduce-scatter and the BF16 all-to-all. What
    Megatron-Core runs on the compute stream after the sync (NVIDIA/Megatron-LM@d98e8a64dd, the same at @44151194
    and @23e00ed0, ``megatron/core/transformer/moe/token_dispatcher.py``): the all-to-all dispatcher syncs
    ``before_ep_alltoall`` wherever ``ep_size > 1 or tp_size > 1`` (``preprocess``), then ``token_dispatch``'s
    all-to-all over the EP group (none at ep 1: ``mappings._AllToAll`` returns its input on one rank),
    ``dispatch_postprocess``'s ``gather_from_sequence_parallel_region`` over the experts' TP group, the experts,
    ``combine_preprocess``'s ``reduce_scatter_to_sequence_parallel_region`` over it and ``token_combine``'s
    all-to-all, all launched by the host in that order; the experts' grouped linears communicate nothing
    (``extensions/transformer_engine.py``: ``explicit_expert_comm``). The flex dispatcher makes one call each way
    over the TP x EP group (``MoEFlexTokenDispatcher``: ``group=self.tp_ep_group``), which the step prices as
    those same all-to-all and etp items (:func:`_ep_traffic`), so its cover is theirs.

    Under ``overlap_ep`` a pass's exchange runs beside another micro-batch's compute only where the pass pairs
    (:func:`_alone_ep_share`, the rule :func:`_paired_ep_exposed` hides by): a pass with no partner runs its
    dispatch alone and the host launches the ``mlp`` node's kernels while the compute stream waits for it, as
    without the overlap. The cover is the mean over the step's passes, the full cover times that share (exact
    where nothing pairs or everything does); none under a full-iteration graph (:func:`_covered_ep_share`)."""
    share = _covered_ep_share(lay)
    if share == 0.0:
        return 0.0
    per_call = {key: one.time_s for it, one in timed if (key := _exchange_call(it)) is not None}
    dispatch = per_call.get(FP8_A2A, per_call.get(BF16_A2A, 0.0)) + per_call.get(ETP_GATHER, 0.0)
    combine = per_call.get(BF16_A2A, 0.0) + per_call.get(ETP_SCATTER, 0.0)
    return share * (dispatch + combine) if combine > 0 else 0.0


def _alone_ep_share(lay: ParallelLayout) -> float:
    """The share of a step's MoE layer passes whose EP calls run with no other micro-batch's compute beside them:
    1 without ``overlap_ep``; under the combined 1F1B the warm-up and cool-down passes that have no partner
    (:func:`.ep_overlap.unpaired_share`); 0 under DualPipe, whose overlap the generic ``ep`` window prices
    (:func:`exposed_comm_s`). One rule for what :func:`_paired_ep_exposed` hides and what :func:`_ep_cover_s`
    leaves on the compute stream."""
    if not lay.overlap_ep:
        return 1.0
    return unpaired_share(lay) if lay.pipeline_schedule == "1f1b" else 0.0


def _covered_ep_share(lay: ParallelLayout) -> float:
    """The share of a step's MoE layer passes whose EP calls a host line launches behind (:func:`_ep_cover_s`):
    :func:`_alone_ep_share`, but 0 under a full-iteration CUDA graph, which captures every kernel
    (:func:`.operators.captured`): the host launches nothing in the step, so no host wait is there to cover, whether
    or not the EP calls overlap (fixa67: tidy65's unpaired share gave a graphed, overlapped step a cover)."""
    return 0.0 if "full_iteration" in lay.cuda_graph_scope else _alone_ep_share(lay)


def routed_ep_cover_s(engine: CommEngine, model: ModelSpec, lay: ParallelLayout, mapping) -> float | None:
    """The cover :func:`estimate_step` gives its compute (:func:`_ep_cover_s` of the step's exchange calls, each
    timed alone with the flex dispatcher's bound), from collectives ``engine`` routed already (no new routing):
    what the search's refinement times the step's host waits with (:func:`.operators.rank_computes`).

    Parameters
    ----------
    engine : CommEngine
    model, lay
        The model and its layout.
    mapping : Mapping
        ``lay`` on the fabric (:func:`topo.training.mapping.map_layout`).

    Returns
    -------
    float or None
        Seconds; None while one of those calls' groups is not routed yet.
    """
    if _covered_ep_share(lay) == 0.0:
        return 0.0
    timed = []
    for item in step_traffic(model, lay):  # the step's cover reads the traffic of no stage in particular
        if _exchange_call(item) is None:
            continue
        one = engine.time(item["collective"], mapping.groups(item["groups"]), item["size_bytes"], cached_only=True,
                          key=mapping.group_key(item["groups"]))
        if one is None:
            return None
        timed.append((item, _flex_bound(item, one, lay, mapping.domains_spanned(item["groups"]),
                                        engine.fabric.spec.gpu)))
    return _ep_cover_s(lay, timed)


FP8_A2A, BF16_A2A, ETP_GATHER, ETP_SCATTER = "fp8_alltoall", "alltoall", "etp_all_gather", "etp_reduce_scatter"
"""The parts of an MoE layer's exchange :func:`_exchange_call` names: the forward's FP8 dispatch all-to-all, a BF16
all-to-all (the combine, and the dispatch where it is BF16), the experts' etp all-gather (dispatch) and
reduce-scatter (combine)."""


def _exchange_call(item: dict) -> str | None:
    """Which part of an MoE layer's forward exchange ``item`` prices for :func:`_ep_cover_s` (:data:`FP8_A2A`,
    :data:`BF16_A2A`, :data:`ETP_GATHER`, :data:`ETP_SCATTER`), None when it prices none (the all-to-all
    dispatcher's probs and counts, HybridEP's routing map)."""
    if _is_ep_a2a(item):
        return FP8_A2A if item.get("elem_bytes", ACT_BYTES) != ACT_BYTES else BF16_A2A
    if item["dim"] != "ep" or item.get("groups") != "etp":
        return None
    return {"all_gather": ETP_GATHER, "reduce_scatter": ETP_SCATTER}.get(item["collective"])


def _is_ep_a2a(item: dict) -> bool:
    """An expert all-to-all of the tokens (dispatch or combine); not the all-to-all dispatcher's probs call, which
    is exposed by the dimension's rule, not paired as one of a layer's four (:func:`_alltoall_side_traffic`)."""
    return item["dim"] == "ep" and item["collective"] == "alltoall" and item.get("pair") != PROBS_PAIR


EP_COMM_NODE, EP_COMPUTE_NODE = "comm", "compute"
"""Where the combined 1F1B runs an EP item (:func:`_ep_node`): the dispatch or combine node, on the
communication stream, or the ``attn`` or ``mlp`` node, on the compute stream."""


def _ep_node(item: dict, lay: ParallelLayout) -> str:
    """Which node of Megatron-Core's combined 1F1B holds the EP item ``item`` (NVIDIA/Megatron-LM@d98e8a64dd, the
    same at @6cd6ea530e and @01cf4fb5: ``megatron/core/models/gpt/fine_grained_callables.py``
    ``build_transformer_layer_callables``, ``megatron/core/transformer/moe/moe_layer.py``,
    ``token_dispatcher.py``): :data:`EP_COMM_NODE` for ``moe_dispatch`` (``MoELayer.dispatch`` ->
    ``token_dispatch``: the tokens' all-to-all and the all-to-all dispatcher's probs all-to-all; the flex
    dispatcher's one call over the TP x EP group, its etp part included, and HybridEP's routing-map all-gather
    inside it) and ``moe_combine`` (``token_combine``: the all-to-all back, the flex call's etp part);
    :data:`EP_COMPUTE_NODE` for what the all-to-all dispatcher runs in the compute nodes: ``preprocess``'s
    tokens-per-expert all-gather in the ``attn`` node (``submodule_pre_dispatch_forward`` -> ``MoELayer.preprocess``)
    and ``dispatch_postprocess``'s etp all-gather and ``combine_preprocess``'s etp reduce-scatter in the ``mlp``
    node (``MoELayer.routed_experts_compute``)."""
    if _is_ep_a2a(item) or item.get("pair") == PROBS_PAIR or lay.ep_dispatcher == "deepep":
        return EP_COMM_NODE
    return EP_COMPUTE_NODE


def _ep_node_passes(item: dict, fp8_dispatch: bool) -> tuple[str, ...]:
    """Which of a paired MoE layer's four communication passes (:func:`.ep_overlap.layer_exposed_s`'s
    ``dispatch_fwd_s``, ``dispatch_bwd_s``, ``combine_fwd_s``, ``combine_bwd_s``) one call of ``item`` runs in, each once
    (:func:`_ep_node`): a backward pass runs its forward's calls reversed (an all-gather's backward is a
    reduce-scatter). The tokens' all-to-all: all four, or the three but the forward dispatch where that runs in FP8
    (``fp8_dispatch``, the item of other ``elem_bytes``); the probs all-to-all: the dispatch's both ways; an etp
    all-gather: the forward dispatch and the combine's backward; an etp reduce-scatter: the other two; the routing
    map's all-gather: the forward dispatch alone."""
    if _is_ep_a2a(item):
        if item["elem_bytes"] != ACT_BYTES:
            return ("dispatch_fwd_s",)
        return ("combine_fwd_s", "dispatch_bwd_s", "combine_bwd_s") + (() if fp8_dispatch else ("dispatch_fwd_s",))
    if item.get("pair") == PROBS_PAIR:
        return ("dispatch_fwd_s", "dispatch_bwd_s")
    if item.get("groups") == "etp":
        return ({"all_gather": ("dispatch_fwd_s", "combine_bwd_s")}.get(item["collective"])
                or ("combine_fwd_s", "dispatch_bwd_s"))
    return ("dispatch_fwd_s",)


def _ep_compute_parts(parts: LayerParts, items: list, lay: ParallelLayout) -> LayerParts:
    """``parts`` with the EP calls the compute nodes run (:func:`_ep_node`) added to their nodes' time, a call each
    (they run on the compute stream, so the partner's all-to-all runs beside them too): the tokens-per-expert
    all-gather to the ``attn`` node's forward, an etp all-gather and a reduce-scatter to each ``mlp`` pass."""
    attn_f = sum(one for it, one in items if _ep_node(it, lay) == EP_COMPUTE_NODE and it.get("groups") != "etp")
    mlp = sum(one for it, one in items if _ep_node(it, lay) == EP_COMPUTE_NODE and it.get("groups") == "etp")
    return replace(parts, attn_f=parts.attn_f + attn_f, mlp_f=parts.mlp_f + mlp, mlp_b=parts.mlp_b + mlp)


def _paired_ep_exposed(model: ModelSpec, lay: ParallelLayout, gpu, sc, windows: dict, items: list,
                       ep_loss: float = 0.0) -> float | None:
    """The exposed share of the EP calls of the dispatch and combine nodes (:func:`_ep_node`) under
    Megatron-Core's combined 1F1B (``overlap_ep``, not DualPipe): each MoE layer's four passes of them beside
    its partner's compute (the EP calls of the compute nodes counted in it, :func:`_ep_compute_parts`), phase by
    phase, the unpaired warm-up and cool-down passes' exposed whole (:mod:`.ep_overlap`), the hidden part costing
    the compute beside it ``ep_loss`` a second (:func:`_ep_loss`, :func:`ep_overlap_cost_s`); the recomputed
    forwards' calls (beyond a layer's four passes) behind the step's compute window. None when the layout runs no
    such overlap; the compute nodes' EP calls are then exposed whole (:func:`_stream_exposed`).

    ``items``: the step's EP items with their per-call seconds (contention applied)."""
    n = lay.microbatches * sc.blocks.get(Block.MOE, 0)  # MoE layer passes of the busiest stage per step
    if not (lay.overlap_ep and lay.pipeline_schedule == "1f1b" and items and n):
        return None
    comm = [(it, one) for it, one in items if _ep_node(it, lay) == EP_COMM_NODE]
    fp8 = any(_is_ep_a2a(it) and it["elem_bytes"] != ACT_BYTES for it, _ in comm)
    passes = dict.fromkeys(("dispatch_fwd_s", "dispatch_bwd_s", "combine_fwd_s", "combine_bwd_s"), 0.0)
    for it, one in comm:
        for name in _ep_node_passes(it, fp8):
            passes[name] += one
    total = sum(one * it["calls"] for it, one in comm)
    modeled = min(total, n * sum(passes.values()))
    u = _alone_ep_share(lay)
    parts = _ep_compute_parts(moe_layer_parts(model, lay, gpu), items, lay)
    ex = min(modeled, n * ((1 - u) * layer_exposed_s(parts, **passes) + u * sum(passes.values())))
    ex += ep_overlap_cost_s(modeled - ex, lay, gpu, ep_loss)
    ex += exposed_comm_s("ep", "microbatch", total - modeled, windows, lay, ep_loss)
    return ex / total if total > 0 else 0.0


def _ring_windows(traffic: list[dict], step_s: tuple[float, float]) -> dict:
    """The attention each ring send hides behind: a send per step, behind that step's kernel (forward, backward),
    so a step's exchange is exposed only where it outlasts the step (``calls x step``: all steps alike)."""
    steps = {"cp_ring_forward": step_s[0], "cp_ring_backward": step_s[1], "cp_ring_backward_ends": step_s[1]}
    return {it["phase"]: it["calls"] * steps[it["phase"]] for it in traffic if it["phase"] in steps}


def bubble_s(lay: ParallelLayout, forward_s: float, microbatch_s: float) -> float:
    """The pipeline bubble of ``lay``: ``(p - 1) / v`` of a micro-batch's time (its compute, exposed TP, CP and
    EP, and FP8 amax reductions), interleaved 1F1B (Narayanan et al. 2021, sec. 2.2); DualPipe: ``(p/2 - 1)`` forwards of a micro-batch
    (DeepSeek-V3 Table 2: ``(p/2 - 1)(F&B + B - 3W)`` with the backward split evenly into B and W); once per
    schedule run (``pipeline_flushes``)."""
    if lay.pipeline_schedule == "dualpipe":
        return max(0.0, lay.pp / 2 - 1) * forward_s * lay.pipeline_flushes
    return (lay.pp - 1) / lay.vpp * microbatch_s * lay.pipeline_flushes


def step_breakdown(lay: ParallelLayout, sc, exposed: dict, optimizer_s: float, weight_cast_s: float = 0.0) -> dict:
    """One step's seconds by component (the step-time formula, one place; the search's bound calls it with its
    floors): ``m`` micro-batches of the busiest stage's compute, the bubble, the optimizer and each dimension's
    exposed communication.

    Parameters
    ----------
    lay : ParallelLayout
    sc : StageCompute
        The busiest stage's compute (:func:`topo.training.operators.stage_compute`).
    exposed : dict
        Exposed seconds per step by dimension (``tp``, ``cp``, ``pp``, ``dp``, ``ep``) and of the FP8 amax
        reductions (``fp8_amax``, :mod:`.fp8_amax`); missing ones count 0.
    optimizer_s : float
        The optimizer step.
    weight_cast_s : float, optional
        The FP8 cast of the BF16 linear weights, once a step (:mod:`.fp8_weight_cast`); 0 where none runs.

    Returns
    -------
    dict
        ``compute``, ``bubble``, ``optimizer``, ``tp``, ``cp``, ``pp``, ``dp``, ``ep``, ``fp8_amax``,
        ``fp8_weight_cast`` (their sum is the step). The amax reductions run inside each micro-batch's forward and backward, as TP's, CP's and EP's
        exposed traffic does, so they lengthen the bubble's micro-batch too.
    """
    m = lay.microbatches
    ex = {k: exposed.get(k, 0.0) for k in ("tp", "cp", "pp", "dp", "ep", AMAX_PHASE)}
    per_mb = sc.microbatch_s + (ex["tp"] + ex["cp"] + ex["ep"] + ex[AMAX_PHASE]) / m
    return {"compute": m * sc.microbatch_s, "bubble": bubble_s(lay, sc.forward_s, per_mb), "optimizer": optimizer_s,
            **ex, "fp8_weight_cast": weight_cast_s}


def exposed_comm_s(dim: str, phase: str, total: float, windows: dict, lay: ParallelLayout,
                   ep_loss: float = 0.0, *, tp_overlap: bool = False) -> float:
    """The exposed seconds of ``total`` seconds of a TP, CP, PP or EP collective's calls (the step's overlap
    rules, one place); ``windows`` holds the compute each can hide behind and is drawn down as it is used.

    TP: exposed, unless ``tp_overlap`` (the layout's ``overlap_tp`` where it takes effect for the model, with
    sequence parallelism, :func:`.tp_overlap.tp_overlap_on`, which the callers give: hidden behind the
    micro-batches' compute; :func:`estimate_step` hides each behind its own GEMM first, :func:`tp_ring_exposed_s`); the backward pass's
    all-gather / reduce-scatter hide behind the weight-gradient GEMMs either way (Transformer Engine's asynchronous
    TP communication; what pairs with a GEMM hides behind its own layer's alone, :func:`tp_exposed_s`; the window
    ``tp_backward`` pools the rest), not the row-parallel output gradient's gather (:data:`GRAD_GATHER_PHASE`, blocking). CP: a ring send behind its step's attention (``overlap_cp``, the ``cp_ring_*`` windows), never
    the all-gather's or Mamba's all-to-alls. EP: behind another micro-batch's
    compute (``overlap_ep``), the hidden part costing the compute beside it ``ep_loss`` a hidden second
    (:func:`_ep_loss`; 0 in the search's bound). PP: exposed (its sends are counted on the critical path already)."""
    if phase in (ROUTER_PHASE, REPLICATED_GRADS_PHASE, *UB_SCALE_PHASES):  # blocking: the router's counts
        # (:func:`_router_traffic`), the replicated gradients' all-reduce (:func:`_replicated_grads_traffic`),
        # userbuffers' MXFP8 scale-inverses (:data:`UB_SCALE_PHASES`)
        return total
    if dim == "tp" and phase in HEAD_PHASES:  # no userbuffers GEMM: blocking, or beside its own layer's GEMM
        return _draw(windows, "tp_backward", total) if phase == "head_wgrad" else total
    if dim == "tp":
        if tp_overlap:
            return _draw(windows, "tp", total)
        return _draw(windows, "tp_backward", total) if phase == "backward" else total  # GRAD_GATHER_PHASE blocks
    if dim == "cp":  # Mamba's all-to-alls and the K/V all-gather block the attention: nothing hides them
        return _draw(windows, phase, total) if (lay.overlap_cp and phase in windows) else total
    if dim == "ep":
        ex = _draw(windows, "ep", total) if lay.overlap_ep else total
        return ex + (total - ex) * ep_loss
    return total


def tp_ring_steps(lay: ParallelLayout, model: ModelSpec) -> int:
    """Steps of the ring exchange that hides a TP linear layer's all-gather or reduce-scatter behind its GEMM:
    ``tp`` with TP communication overlap (Transformer Engine's userbuffers, which needs sequence parallelism),
    else 1 (no ring). Transformer Engine's ``CommOverlapP2PBase::split_overlap_ag`` / ``split_overlap_rs``
    (NVIDIA/TransformerEngine ``transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp``) runs the
    GEMM as ``tp`` GEMMs of one rank's chunk of rows each, sending one chunk to the ring's next rank during each
    (their tiles pack into waves as one GEMM's do: chunk ``i`` runs on ``_stream_compute[i % size]``, so one
    chunk's last wave runs beside the next chunk's first; the model times the GEMM whole);
    NeMo's Blackwell userbuffers configurations run every forward and output-gradient exchange this way
    (NVIDIA/NeMo ``nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py``, e.g.
    ``userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096``: ``qkv_fprop``, ``proj_fprop``, ``fc1_fprop``,
    ``fc2_fprop``, ``proj_dgrad``, ``fc2_dgrad`` ``ring_exchange``; the input gradients' reduce-scatter ``bulk``,
    beside the weight-gradient GEMM).

    Parameters
    ----------
    lay : ParallelLayout
    model : ModelSpec
        Megatron-Core builds an MLA model without userbuffers (:func:`.tp_overlap.userbuffers_built`): 1.

    Returns
    -------
    int
        ``lay.tp`` with ``overlap_tp``, sequence parallelism and ``tp > 1`` (:func:`.tp_overlap.userbuffers_on`),
        else 1.
    """
    return lay.tp if userbuffers_on(lay, model) else 1


def tp_ring_exposed_s(one_s: float, calls: float, pairs: list, tp_blocks: int, tp: int,
                      bulk: bool = False) -> tuple[float, float]:
    """The exposed seconds of ``calls`` TP collectives of ``one_s`` each that Transformer Engine's userbuffers
    overlap GEMM by GEMM (:func:`tp_ring_steps`), and the seconds of those no GEMM pairs.

    Each collective hides only behind the GEMM it is fused with, not behind the whole micro-batch: a ring exchange
    of ``tp`` steps runs one GEMM chunk (``g / tp``) beside each of the ``tp - 1`` sends (``c / (tp - 1)``)
    and one chunk alone, so it exposes ``max(0, c - g (tp - 1) / tp)``; the backward's input-gradient
    reduce-scatter and the weight-gradient input's all-gather (``bulk``) run beside a whole GEMM:
    ``max(0, c - g)``. A step exposes the sum over its GEMMs, not ``max(0, sum c - sum g)``.

    Parameters
    ----------
    one_s : float
        Seconds of one collective.
    calls : float
        Its calls per step (every block's, recomputed forwards included).
    pairs : list of (float, int)
        ``(gemm_s, blocks)``: the GEMM each block's collective overlaps with, and how many such blocks a
        micro-batch has (:attr:`topo.training.operators.StageCompute.tp_pairs`).
    tp_blocks : int
        Blocks per micro-batch with TP traffic (the calls' share each pair takes is ``blocks / tp_blocks``).
    tp : int
        Tensor-parallel degree (the ring's steps).
    bulk : bool
        A bulk overlap (:data:`BULK`: beside the whole GEMM); False: a ring exchange (the forward's exchanges and
        the output gradient's all-gather).

    Returns
    -------
    tuple of float
        The paired calls' exposed seconds, and the unpaired calls' total seconds (for the caller's window).
    """
    paired = sum(n for _, n in pairs)
    if calls <= 0 or tp_blocks <= 0 or paired <= 0:
        return 0.0, calls * one_s
    scale = min(1.0, tp_blocks / paired)  # more pairs than blocks: the busiest stages differ (never over calls)
    hidden_share = 1.0 if bulk else (tp - 1) / tp
    exposed = sum(n * max(0.0, one_s - g * hidden_share) for g, n in pairs) * scale / tp_blocks
    share = min(1.0, paired / tp_blocks)
    return calls * exposed, calls * (1.0 - share) * one_s


def _draw(windows: dict, name: str, total: float) -> float:
    """What of ``total`` the window ``name`` cannot hide; the window shrinks by what it hides."""
    hidden = min(total, windows[name])
    windows[name] -= hidden
    return total - hidden


def ep_overlap_cost_s(hidden_s: float, lay: ParallelLayout, gpu, ep_loss: float = 0.0) -> float:
    """Compute time the combined 1F1B's hidden all-to-alls cost the compute beside them: ``hidden_s x`` the
    larger of ``ep_loss`` (the SMs and HBM their kernels take, :func:`_ep_loss`) and, where the dispatcher's
    authors measured the concurrent GEMMs' loss, that loss (:func:`topo.training.ep_overlap.published_gemm_loss`:
    DeepEP V1 at 20 SMs on H100, ~20%; the compute runs at ``1 - loss`` of its rate while they last, and the
    work it does not do runs after them, :func:`.comm_sms.sm_loss_s` with ``t / t' = 1 - loss``). The model
    gives ~0.12-0.13 there, so the measurement is kept as a floor (docs/calibration-findings.md).

    Parameters
    ----------
    hidden_s : float
        Seconds of communication overlapped with compute.
    lay : ParallelLayout
    gpu : GpuCompute
    ep_loss : float
        The model's loss per hidden second (:func:`_ep_loss`).

    Returns
    -------
    float
        Seconds added to the step.
    """
    if hidden_s <= 0:
        return 0.0
    loss = published_gemm_loss(gpu.name, lay)
    return hidden_s * (ep_loss if loss is None else max(ep_loss, sm_loss_s(1.0, 1.0 - loss, 1.0)))


def not_fit_note(mem, gpu_name: str) -> str:
    """The step's note where its memory per GPU ``mem`` (a :class:`~topo.training.memory.MemoryBreakdown`) is over
    the capacity of the GPU ``gpu_name``; "" where it fits (one wording: a step's, and a region's share in the form
    its job takes, regions82).

    Parameters
    ----------
    mem : MemoryBreakdown
    gpu_name : str

    Returns
    -------
    str
    """
    if mem.fits:
        return ""
    cap = mem.capacity_bytes
    capacity = f"{format_in(cap, 'GB', '.1f')} ({format_in(cap, 'GiB', '.1f')})"
    return (f"does not fit: {format_in(mem.total_bytes, 'GB', '.1f')} per GPU on stage {mem.stage}, "
            f"{format_in(mem.short_bytes, 'GB', '.1f')} more than the {gpu_name}'s {capacity}")


def _notes(model, lay, gpu, mem, mapping) -> list[str]:
    notes = []
    if model.status != "published":
        notes.append(f"{model.name}: {model.status} figures")
    if not mem.fits:
        notes.append(not_fit_note(mem, gpu.name))
    units = model.layers + (2 if lay.pipeline_embedding else 0)
    chunks = lay.pp * lay.vpp
    if lay.pipeline_layout is not None:
        notes.append(f"pipeline layout {lay.pipeline_layout} (the busiest stage sets the pace)")
    elif units % chunks:
        lo, hi = units // chunks, math.ceil(units / chunks)
        notes.append(f"uneven pipeline split: {units} layers{' (with embedding and loss)' if lay.pipeline_embedding else ''}"
                     f" over {chunks} chunks: {units % chunks} chunks of {hi}, the rest of {lo}; the busiest stage "
                     f"sets the pace")
    if lay.ep > 1 and model.moe is not None:
        span = mapping.domains_spanned("ep")
        width = lay.ep * lay.expert_tp
        if span > 1 and width <= mapping.gpus_per_domain:
            notes.append(f"an EP group ({lay.ep} x etp {lay.expert_tp}) spans {span} NVLink domains although it "
                         f"would fit in one; gpus_per_domain_used (e.g. 64 of 72) or another rank order keeps "
                         f"it inside")
    if (model.moe is not None and lay.ep > 1 and "full_iteration" in lay.cuda_graph_scope
            and lay.moe_capacity_factor is None and lay.moe_expert_rank_capacity_factor is None):
        # Megatron-Bridge@067f987d perf_recipes/deepseek/common.py set_full_iter_cg_configs: "Dropless MoE produces
        # variable-shaped per-expert tensors that CG cannot capture; we pad to a fixed capacity"
        notes.append("full_iteration with dropless routing: a graph cannot hold the tokens-per-expert host sync; "
                     "Megatron-Bridge's full-iteration MoE recipes give HybridEP a static rank budget "
                     "(moe_expert_rank_capacity_factor=1.5); priced as if sync-free at the dropless busiest-rank load")
    if model.moe is not None and lay.ep > 1 and lay.pipeline_schedule == "dualpipe" and not lay.overlap_ep:
        # DeepSeek-V3 report sec. 3.2.1: DualPipe pairs a forward and a backward chunk to hide their all-to-alls
        notes.append("dualpipe without overlap_ep: DualPipe exists to hide each chunk pair's expert all-to-alls "
                     "behind the other chunk's compute (DeepSeek-V3 sec. 3.2.1), but only overlap_ep=true hides "
                     "them here: priced exposed whole")
    if model.moe is not None and lay.ep > 1 and lay.overlap_ep and lay.pipeline_schedule == "1f1b":
        notes += [n for n in [unpaired_note(lay)] if n]
    notes += [n for n in (userbuffers_off_note(lay, model), tp_exposed_note(lay, model),
                          margins_note(lay, model, gpu.sms), pp_overlap_idle_note(lay),
                          latent_size_note(model), fsdp2_pipeline_note(lay)) if n]
    notes += _straddle_notes(lay, mapping)
    return notes + left_out_notes(model, lay, gpu.generation)


def left_out_notes(model, lay, generation: str) -> list[str]:
    """``not modelled:`` notes for what the step leaves out of this model kind, where it applies (walk30: the
    README's closing paragraphs said it, the step did not): an eager grouped-expert MoE block's host work beyond the
    launches and calls counted (findings sections 305 and 313: a floor; no source sizes the rest), and a Mamba-2
    mixer on Blackwell, whose SSD rate no source publishes (section 293). Each quotes the measured size of what it
    misses, with its section (:func:`~topo.training.uncertainty.left_out_measured`, ``left_out.toml``).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    generation : str
        The GPU's generation.

    Returns
    -------
    list of str
    """
    out = []
    scope = set(lay.cuda_graph_scope)
    if model.moe is not None and lay.moe_grouped_gemm and not scope & {"moe", "full_iteration"}:
        out.append("not modelled: an eager MoE block's host work beyond the kernel launches and Transformer Engine "
                   "calls counted (per-expert Python, allocation, synchronisation), which no published source sizes: "
                   "priced at that floor, so the step is more likely longer than shorter; "
                   f"{left_out_measured('eager_moe_host')}")
    if model.mamba is not None and generation == "blackwell":
        out.append("not modelled: a published Mamba-2 SSD kernel rate on Blackwell (none found), so the mixer's "
                   f"price is the least sure part of this step: {left_out_measured('blackwell_mamba')}")
    return out


STRADDLE_DIMS = (("tp", "TP"), ("cp", "CP"), ("dp", "DP"))
"""Dense groups whose crossing of NVLink domains the step's notes name (EP's own note is :func:`_notes`')."""


def _straddle_notes(lay: ParallelLayout, mapping) -> list[str]:
    """One note per TP, CP, DP or hybrid shard group that crosses more NVLink domains as placed than it would at
    the largest power of two of each domain (72 of an NVL72 rack used where recipes use 64), or, placed at fewer
    than all of each domain (the default 64 of 72), than it would at all of them (walk21: a JAX mesh's
    ``ici_fsdp=72`` spread over two racks at 64 a rack, its gathers on the NICs): its collectives then take the
    network between racks (:meth:`topo.training.mapping.Mapping.straddles`)."""
    D = mapping.gpus_per_domain
    used = lay.gpus_per_domain_used or D
    other, filling = recipe_gpus_used(used), False
    if other == used:  # filling the domains is named only where it keeps a group inside one
        other, filling = (D, True) if used < D else (None, False)
    if other is None:
        return []
    notes = []
    dims = STRADDLE_DIMS + ((("dps", "hybrid shard"),) if lay.dp_shard and lay.dp_shard < lay.dp else ())
    for dim, name in dims:
        size = lay.dp_shard * lay.cp if dim == "dps" else getattr(lay, dim)
        if size <= 1:
            continue
        placed, alt = mapping.straddles(dim, used, lay.first_gpu, other, lay.skip_domains)
        if placed > alt and not (filling and alt > 1):
            notes.append(f"placement: a {name} group ({size} GPUs) spans {placed} NVLink domains, where {other} of "
                         f"each {D}-GPU domain would keep it in {alt}: its collectives cross the network between "
                         f"domains (gpus_per_domain_used = {other} avoids it)")
    return notes


def exposed_routed(engine: CommEngine, model: ModelSpec, lay: ParallelLayout, mapping, sc, gpu=None,
                   traffic: list[dict] | None = None) -> dict:
    """The exposed seconds of each dimension :func:`estimate_step` gives without the traffic mix, from the
    collectives whose routing ``engine`` holds already: what a search refines its bounds with, routing nothing.
    The hidden all-to-alls' cost to the compute beside them is left out (it needs the stage's compute on the GPU
    they leave, :func:`_ep_loss`) but for a published floor (:func:`ep_overlap_cost_s`), which the step charges at
    least.

    Parameters
    ----------
    engine : CommEngine
    model, lay
        The model and its layout.
    mapping : Mapping
        ``lay`` on the fabric (:func:`topo.training.mapping.map_layout`).
    sc : StageCompute
        The layout's compute (:func:`topo.training.operators.stage_compute`).
    gpu : GpuCompute, optional
        The GPU ``sc`` was computed on (its efficiency, kernel overrides and host CPU time the EP overlap's layer
        parts); default: the spec's GPU with its host CPU (``server.host_cpu``).
    traffic : list of dict, optional
        The layout's :func:`step_traffic` at ``sc``'s stage (:func:`traffic_stage`), when the caller has it.

    Returns
    -------
    dict
        ``tp``, ``cp``, ``pp``, ``ep``: the exposed seconds of that dimension by the step's rules
        (:func:`_stream_exposed`), or None unless every one of its collectives was routed already; ``dp``: the
        exposed seconds of the DP collectives routed already (the others count 0; a bucketed one's at pipeline rank
        0, :func:`_routed_dp_s`), their windows widened by the NVLink-only exposed time as the step's
        (:func:`_nvlink_exposed_s`), or infinitely (their least exposure) while a dimension that would widen them
        is not known. Each term is the step's when ``sc`` is the step's own
        compute (its host waits at the step's EP cover); the search's refinement passes that once the EP exchanges
        are routed, and before it the compute at EP cover 0, whose longest waits give windows at least as wide as
        the step's (it then reads no ``dp`` or ``tp`` term from here: ``_Search.refined``).
    """
    spec = engine.fabric.spec
    gpu = gpu or gpu_compute(spec.gpu, host_cpu=spec.host_cpu[0])
    stage = traffic_stage(lay, sc)
    traffic = step_traffic(model, lay, stage) if traffic is None else traffic
    groups: dict = {}  # one matrix per dimension: its routing is looked up by the matrix's digest, once
    spans: dict = {}
    timed = []  # (item, its time alone or None when its group matrix was not routed yet)
    for item in traffic:
        d = item["groups"]
        if d not in groups:
            groups[d], spans[d] = mapping.groups(d), mapping.domains_spanned(d)
        one = engine.time(item["collective"], groups[d], item["size_bytes"], cached_only=True,
                          key=mapping.group_key(d))
        timed.append((item, None if one is None else _flex_bound(item, one, lay, spans[d], spec.gpu)))
    unknown = {it["dim"] for it, one in timed if one is None}
    known = [(i, pair) for i, pair in enumerate(timed) if pair[0]["dim"] not in unknown | {"dp"}]
    got = _stream_exposed(model, lay, gpu, sc, traffic, [pair for _, pair in known], {}, stage)
    done = {i: got[j] for j, (i, _) in enumerate(known)}
    out: dict = {d: (None if d in unknown else 0.0) for d in ("tp", "cp", "pp", "ep")}
    for i, ex in done.items():
        out[timed[i][0]["dim"]] += ex
    nvl = _nvlink_exposed_s([(it["dim"], spans[it["groups"]], done.get(i)) for i, (it, _) in enumerate(timed)
                             if it["dim"] != "dp"])
    return {**out, "dp": _routed_dp_s(engine, model, lay, gpu, sc, traffic, timed, groups, spans, nvl)}


def _routed_dp_s(engine: CommEngine, model: ModelSpec, lay: ParallelLayout, gpu, sc, traffic: list[dict],
                 timed: list, groups: dict, spans: dict, nvl: float) -> float:
    """:func:`exposed_routed`'s DP seconds: the routed DP items of ``timed`` by :func:`_dp_exposed`'s rules, a
    bucketed item's at pipeline rank 0 (the step takes the rank whose items together end last,
    :func:`_binding_rank`, from every rank's compute: no less than rank 0's, so this stays under the step's)."""
    dp, units, stream = 0.0, max(1, sc.layers), xla_stream_calls(traffic, lay)
    lead = gather_lead_s(model, lay, gpu)
    for item, one in timed:
        if item["dim"] == "dp" and one is not None:
            wf, wb = _dp_windows(sc.forward_s, sc.backward_s + sc.recompute_s, lay.microbatches,
                                 spans[item["groups"]], nvl)
            ex = _dp_exposed(engine, item, groups[item["groups"]], one.time_s, 1.0, wf, wb, units, lay, stream,
                             lead, by_rank=True)
            dp += ex[0] if isinstance(ex, list) else ex
    return dp


def _flex_bound(item: dict, one: CommTime, lay: ParallelLayout, domains: int, gpu: str) -> CommTime:
    """``one`` (an item's time on the fabric), or for an expert all-to-all of the flex dispatcher the slower of it
    and the dispatcher's published figures, its kernel's rate plus the call's fixed part: inside one NVLink domain
    :func:`.ep_dispatch.flex_dispatch_s` of the layout's backend (the algorithm then reads ``flex dispatcher rate``:
    HybridEP's kernel plus fixed part, DeepEP's call), across domains
    :func:`.ep_internode.internode_call_s` of the layout's backend (``flex dispatcher call``: HybridEP's kernel plus
    fixed part, DeepEP V1's kernel alone)."""
    if item["dim"] != "ep" or item["collective"] != "alltoall" or lay.ep_dispatcher != "deepep":
        return one
    elem, km = item.get("elem_bytes", ACT_BYTES), gpu_compute(gpu).kernels
    if domains == 1:
        t = flex_dispatch_s(gpu, lay.ep, item["size_bytes"], elem, lambda b: memory_s(km, b), lay.ep_flex_backend)
        name = "flex dispatcher rate"
    else:
        t = internode_call_s(gpu, lay.ep, item["size_bytes"], elem, lambda b: memory_s(km, b), lay.ep_flex_backend)
        name = "flex dispatcher call"
    if t is None or t <= one.time_s:
        return one
    return replace(one, time_s=t, algorithm=name)


def _dp_exposed(engine: CommEngine, item: dict, G, one_s: float, factor: float, t_f: float, t_bwd: float,
                units: int, lay: ParallelLayout, stream: tuple[float, float] = (1.0, 1.0),
                lead_s: float = 0.0, by_rank: bool = False,
                cooldowns: tuple[tuple[float, float], ...] | None = None) -> float | list[float]:
    """The overlap rule of data parallelism (see the module doc); ``stream``: the DP collectives of a micro-batch's
    forward and backward (:func:`xla_stream_calls`), read under ``dp_overlap_policy = "xla_lhs"``; ``lead_s``: the
    optimizer steps chunk 0's gather runs behind (:func:`gather_lead_s`). An item with ``pp_ranks`` gives the
    largest of its pipeline ranks' exposures, or with ``by_rank`` each one (:func:`_binding_rank` picks the rank);
    ``cooldowns``: each rank's warm-up and cooldown in the windows' passes (:func:`pp_cooldowns`; None: ``r`` for
    rank ``r``, stages of equal compute)."""
    calls = item["calls"]
    if not dp_overlapped(lay, item["phase"]):  # every call exposed: after the backward, or after the optimizer step
        return one_s * calls
    if lay.dp_overlap_policy == "xla_lhs":
        return _xla_dp_exposed(item, one_s, t_f, t_bwd, stream, lay)
    phase = item["phase"]
    m = lay.fsdp_unit_rounds  # the micro-batches whose passes gather and reduce (each schedule run's first / last)
    if phase == "gather_unit":  # FSDP: the next unit's gather runs during this unit's forward / backward
        passes = _gather_passes(lay)
        k = calls / (passes * m)  # this group's gathers per pass, each behind one k-th of the pass
        per_unit = (max(0.0, one_s - t_f / k) + (max(0.0, one_s - t_bwd / k) if passes == 2 else 0.0)) * k
        return m * (per_unit + one_s)  # the first unit's gather of each micro-batch cannot hide
    if phase == "reduce_unit":
        if not lay.dp_reduce_behind_backward:  # every unit's, after the stage's last backward: behind no compute
            return one_s * calls  # (pytorch/pytorch@01386103 stage.py ``_post_backward``, then the optimizer)
        k = calls / m
        return m * (max(0.0, one_s - t_bwd / k) * k + one_s)  # the last unit's reduction cannot hide
    # one call per bucket (:func:`dp_bucket_calls`): the calls run one after another on the DP stream behind the
    # window; the last bucket's reduction (the first bucket's gather) cannot hide
    window = t_f if "gather" in phase else t_bwd
    ranks = item.get("pp_ranks")
    if ranks:  # the pipeline ranks that can end the step, each its own parameters and window (:func:`pp_rank_shares`)
        side = 0 if "gather" in phase else 1
        each = [_rank_dp_exposed(engine, item, G, one_s, factor, window, lay, lead_s, share, k,
                                 r if cooldowns is None else cooldowns[r][side]) if share > 0 else 0.0
                for r, share, k in ranks]
        return each if by_rank else max(each)
    if lay.vpp <= 1:
        return behind_window_s(calls * one_s, one_s, window)
    return min(calls * one_s, _interleaved_dp_exposed(engine, item, G, factor, window, lay, lead_s))


def _rank_dp_exposed(engine: CommEngine, item: dict, G, one_s: float, factor: float, window: float,
                     lay: ParallelLayout, lead_s: float, share: float, calls: int, lag: float) -> float:
    """A pipeline rank's part of a bucketed DP item (``share`` of its bytes in ``calls`` collectives) left past the
    step's compute end: rank 0's (``lag`` 0) buckets as :func:`_dp_exposed`'s rule, a later rank's one collective a
    chunk behind its cooldown (warm-up) window, ``lag`` passes of ``window`` (:mod:`.dp_overlap`)."""
    total, v = item["size_bytes"] * item["calls"] * share, lay.vpp
    if lag == 0:
        one = (one_s if total == item["size_bytes"] * calls else
               engine.time(item["collective"], G, total / calls).time_s * factor)
        if v > 1:
            return min(calls * one, _interleaved_dp_exposed(engine, item, G, factor, window, lay, lead_s, share,
                                                            0.0, calls))
        return behind_window_s(calls * one, one, window)
    if math.isinf(window):  # no bound on the window (the search's floor): a later rank's hides whole
        return 0.0
    if v > 1:
        return _interleaved_dp_exposed(engine, item, G, factor, window, lay, lead_s, share, lag, calls)
    whole = engine.time(item["collective"], G, total).time_s * factor
    if "gather" in item["phase"]:
        return interleaved_gather_exposed_s(whole, whole, 1, 1, 1, window, lag=lag)
    return interleaved_reduce_exposed_s(whole, whole, 1, 1, 1, window, lag=lag)


def behind_window_s(total_s: float, edge_s: float, window_s: float) -> float:
    """What a bucketed data-parallel collective exposes behind the compute window it overlaps: all but the window,
    and at least its edge bucket, which cannot hide (the last bucket of the gradients' reduction after the last
    backward; the first bucket of the parameters' gather before the first forward: Megatron-Core's
    ``overlap_grad_reduce`` and ``overlap_param_gather``, NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    megatron/core/distributed/param_and_grad_buffer.py lines 383-524). The one rule of the one-site step
    (:func:`_dp_exposed`) and of a region's cross-site phases (:func:`topo.training.multisite._dp`).

    Parameters
    ----------
    total_s : float
        The collective's seconds, every bucket.
    edge_s : float
        The edge bucket's seconds.
    window_s : float
        The compute it overlaps.

    Returns
    -------
    float

    >>> behind_window_s(10.0, 1.0, 4.0), behind_window_s(10.0, 1.0, 20.0)
    (6.0, 1.0)
    """
    return max(edge_s, total_s - window_s)


def dp_floor_s(traffic: list[dict], lay: ParallelLayout, one_s: list[float], covered_s: float) -> float:
    """A floor under a step's exposed DP seconds, given a floor under the step's other parts (the search's bound),
    whatever the DP windows: the DP collectives of ``traffic`` (its ``dim == "dp"`` items, ``one_s`` a lower bound
    on each one's time, in order) by :func:`_dp_exposed`'s rules.

    Each item exposes at least ``a``, its exposure with unlimited windows (the first gather of each micro-batch, the
    last reduction, one bucket). With windows ``W`` it exposes at least ``b - W``: ``b = calls x one + a`` for
    ZeRO-3's per-unit gathers and reductions (each unit's call beyond its share of the window), ``calls x one`` for
    the bucketed ones. A DP item's windows are the micro-batches' compute, widened by the step's NVLink-only exposed
    TP, CP, PP and EP seconds (:func:`_dp_windows`), all of which the step counts: ``W <= C``, the step's compute
    and those exposed seconds. So a step's ``C + dp`` is at least ``sum a + max(C, b - a)`` for every item (the
    items hide behind the same windows independently, as :func:`_exposed_comms` applies them), and with
    ``covered_s`` a floor under ``C``, ``dp`` counts as ``sum a + max(0, max(b - a) - covered_s)`` on top of it:
    the longest DP collective's calls back to back outlast the step's compute. An interleaved pipeline's bucketed
    items (timed on the fabric per chunk, :func:`_interleaved_dp_exposed`) count 0; XLA's scheduler's and
    non-overlapped items count ``a`` only.

    Parameters
    ----------
    traffic : list of dict
        The step's collectives (:func:`step_traffic`).
    lay : ParallelLayout
    one_s : list of float
        A lower bound on one call of each DP item, in the order of ``traffic``.
    covered_s : float
        A floor under the step's compute and exposed TP, CP, PP and EP seconds (the windows' most).

    Returns
    -------
    float
        Seconds.
    """
    stream = xla_stream_calls(traffic, lay)
    unit = ("gather_unit", "reduce_unit")
    least = longest = 0.0
    items = [it for it in traffic if it["dim"] == "dp"]
    for item, one in zip(items, one_s, strict=True):
        hooked = dp_overlapped(lay, item["phase"]) and lay.dp_overlap_policy != "xla_lhs"
        if hooked and lay.vpp > 1 and item["phase"] not in unit:
            continue
        if "pp_ranks" in item:  # at least rank 0's calls, each its share of the bytes (no less than that share of
            _, share, calls = item["pp_ranks"][0]  # the time: a collective's latency does not shrink with them)
            one *= min(1.0, share * item["calls"] / calls)
            item = {**{k: x for k, x in item.items() if k != "pp_ranks"}, "calls": calls}
        a = _dp_exposed(None, item, None, one, 1.0, math.inf, math.inf, 1, lay, stream)
        least += a
        if hooked:
            longest = max(longest, item["calls"] * one - (0.0 if item["phase"] in unit else one))
    return least + max(0.0, longest - covered_s)


def _interleaved_dp_exposed(engine: CommEngine, item: dict, G, factor: float, window: float,
                            lay: ParallelLayout, lead_s: float = 0.0, share: float = 1.0, lag: float = 0.0,
                            calls: float | None = None) -> float:
    """An interleaved pipeline's bucketed reduction or gather (:mod:`.dp_overlap`): chunk 0's ``calls - (vpp -
    1)`` buckets and one collective for each later chunk, each chunk ``1 / vpp`` of the bytes, timed on ``G``;
    of a pipeline rank ``lag`` passes behind rank 0 holding ``share`` of the item's bytes in ``calls`` collectives
    (default the item's; a later rank's chunk 0 one collective)."""
    v, calls = lay.vpp, item["calls"] if calls is None else calls
    buckets = max(1, calls - (v - 1))
    chunk_bytes = item["size_bytes"] * item["calls"] * share / v
    chunk_s = engine.time(item["collective"], G, chunk_bytes).time_s * factor
    bucket_s = chunk_s if lag else engine.time(item["collective"], G, chunk_bytes / buckets).time_s * factor
    m, g = lay.microbatches, min(lay.vp_group, lay.microbatches)
    if "gather" in item["phase"]:
        return interleaved_gather_exposed_s(chunk_s, bucket_s, buckets, v, g, window / v, lead_s, lag)
    last = m % g or g  # Megatron-Core's last group holds the micro-batches left over
    return interleaved_reduce_exposed_s(chunk_s, bucket_s, buckets, v, last, window / v, lay.dp_align_grad_reduce,
                                        lag)


def xla_stream_calls(traffic: list[dict], lay: ParallelLayout) -> tuple[float, float]:
    """The data-parallel collectives of one micro-batch's forward and of its backward, which XLA runs one stream
    (:func:`topo.training.dp_overlap.xla_lhs_exposed_s`): the gathers before each unit's forward; the gathers before
    its backward (ZeRO-3 resharding after the forward), the reduce-scatters and the all-reduces. A step's
    bucketed reduction or gather (ZeRO-0/1/2, ``reduce`` / ``gather``) counts whole in its pass."""
    m, fwd, bwd = lay.fsdp_unit_rounds, 0.0, 0.0
    for it in traffic:
        if it["dim"] != "dp":
            continue
        phase, calls = it["phase"], it["calls"]
        if phase == "gather_unit":
            passes = _gather_passes(lay)
            fwd += calls / (passes * m)
            bwd += calls / (passes * m) if passes == 2 else 0.0
        elif phase == "reduce_unit":
            bwd += calls / m
        elif "gather" in phase:
            fwd += calls
        else:
            bwd += calls
    return max(fwd, 1.0), max(bwd, 1.0)


def _xla_dp_exposed(item: dict, one_s: float, t_f: float, t_bwd: float, stream: tuple[float, float],
                    lay: ParallelLayout) -> float:
    """A DP item's exposed seconds as XLA's latency-hiding scheduler lays the pass out
    (:func:`topo.training.dp_overlap.xla_lhs_exposed_s`): every collective of the pass shares its compute by count;
    the first gather of each forward and the last reduction of each backward hide behind nothing."""
    m, calls, phase, k = lay.fsdp_unit_rounds, item["calls"], item["phase"], xla_collectives_in_flight()
    if phase == "gather_unit":
        passes = _gather_passes(lay)
        n = calls / (passes * m)
        back = xla_lhs_exposed_s(one_s, n, 0, t_bwd, stream[1], k) if passes == 2 else 0.0
        return m * (xla_lhs_exposed_s(one_s, n, 1, t_f, stream[0], k) + back)
    if phase == "reduce_unit":
        return m * xla_lhs_exposed_s(one_s, calls / m, 1, t_bwd, stream[1], k)
    if "gather" in phase:
        return xla_lhs_exposed_s(one_s, calls, 1, t_f, stream[0], k)
    return xla_lhs_exposed_s(one_s, calls, 1, t_bwd, stream[1], k)


def _gather_passes(lay: ParallelLayout) -> int:
    """ZeRO-3 / FSDP gathers of each unit per micro-batch: before its forward and again before its backward (2),
    or once when the gathered weights are kept from the forward to the backward (``fsdp_reshard_after_forward``
    false: 1)."""
    return 2 if lay.fsdp_reshard_after_forward else 1


def forward_gather_share(lay: ParallelLayout) -> float:
    """The share of a step's data-parallel parameter gathers that runs in a forward: all of the distributed
    optimizer's (ZeRO-1/2: the updated parameters, bucket by bucket before the next step's first forward,
    Megatron-Core's ``overlap_param_gather``, NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    megatron/core/distributed/param_and_grad_buffer.py lines 383-524); of ZeRO-3 / FSDP's per-unit gathers the
    forward's, one of :func:`_gather_passes` (PyTorch FSDP unshards a unit before its forward and, with
    ``reshard_after_forward``, again before its backward: pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471
    torch/distributed/fsdp/_runtime_utils.py ``_pre_forward_unshard`` and ``_pre_backward_hook``).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    float
    """
    return 1.0 / _gather_passes(lay) if lay.zero_stage >= 3 else 1.0


def gather_lead_s(model: ModelSpec, lay: ParallelLayout, gpu) -> float:
    """The optimizer steps the first model chunk's weight all-gather runs behind under
    ``overlap_param_gather_with_optimizer_step`` (0 without it): Megatron-Core steps chunk 0's dense optimizer first,
    dispatches its gather, then steps the later chunks' dense optimizer and the experts' (NVIDIA/Megatron-LM@14346b65
    ``megatron/core/optimizer/__init__.py`` lines 1056-1062, 1207-1243; ``optimizer.py`` lines 1667-1675). The busiest
    stage's rank, as :func:`optimizer_params`: its dense shard less chunk 0's ``1 / vpp`` of it, and all its expert
    shard, at :func:`topo.training.operators.optimizer_step_s`'s rate (the step's ``optimizer`` line).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    gpu : GpuCompute
        The GPU the optimizer runs on.

    Returns
    -------
    float
        Seconds.
    """
    if not lay.overlap_param_gather_with_optimizer_step:
        return 0.0
    rows = stage_params(model, lay)
    dense, expert, _ = rows[busiest_stage(rows)]
    return optimizer_step_s(lay.sharded(dense * (lay.vpp - 1) / lay.vpp, expert, 1), gpu, lay)


def optimizer_params(model: ModelSpec, lay: ParallelLayout) -> float:
    """The parameters the busiest pipeline stage's GPU steps its optimizer over: its ZeRO shard of the stage's dense
    and expert parameters (:meth:`~topo.training.parallel.ParallelLayout.sharded` at stage 1), what the step's
    ``optimizer`` line (:func:`topo.training.operators.optimizer_step_s`, linear in them) reads.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
        The layout whose data-parallel ranks shard the optimizer state.

    Returns
    -------
    float
    """
    rows = stage_params(model, lay)
    dense, expert, _ = rows[busiest_stage(rows)]
    return lay.sharded(dense, expert, 1)
