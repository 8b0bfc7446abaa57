"""One training step: compute, the pipeline bubble and each dimension's exposed communication.

``step = compute + bubble + exposed(tp) + exposed(cp) + exposed(pp) + exposed(dp) + exposed(ep)`` on the busiest
pipeline stage, with ``m`` micro-batches per step:

- compute: ``m x (forward + backward + recomputation)`` executed FLOPs per GPU / (peak x efficiency)
  (:mod:`topo.training.flops`, :mod:`topo.training.gpus`);
- bubble: ``(p - 1) / (m v)`` of the per-micro-batch time (compute and exposed TP/CP/EP), 1F1B with ``v``
  interleaved stages (Narayanan et al. 2021, sec. 2.2);
- TP per layer and micro-batch: with sequence parallelism 2 all-gathers + 2 reduce-scatters forward and the same
  backward (+ forward again under full recomputation), else 2 all-reduces each way; message = the layer's
  activations ``b s/cp h`` x 2 bytes. Exposed unless ``overlap_tp`` (then only what exceeds the compute);
- CP per layer: all-gather of K and V (full sequence, the TP rank's KV heads) forward, reduce-scatter of their
  gradients backward; with ``overlap_cp`` each hides behind half the step's attention-score compute (forward,
  backward and any recomputation) as far as it fits;
- PP: each micro-batch's activations (``b s/cp h / tp`` x 2 bytes) cross every stage boundary forward and
  backward, ``2 (m v + p - 1)`` sends on the critical path (``2 (p - 1)`` when ``overlap_pp``);
- DP once per step: none: all-reduce of the gradients; ZeRO-1/2 and SHARD_GRAD_OP: reduce-scatter of the
  gradients and all-gather of the weights; ZeRO-3: per micro-batch 2 all-gathers and a reduce-scatter. With
  ``overlap_dp`` the reduction hides behind the last micro-batch's backward except its last bucket, and the
  all-gather behind the first forward except its first bucket. Experts reduce over their own replicas;
- EP per MoE layer and micro-batch: all-to-all dispatch and combine forward and backward, each rank sending
  its tokens x top-k x h x 2 bytes; hidden behind the experts' compute as far as it fits when ``overlap_ep``.

Every collective runs on all of its dimension's groups at once through :mod:`topo.training.comm`.
"""

from __future__ import annotations

import math

from ..fabric.fabric import Fabric
from .comm import CommEngine, CommTime
from .flops import model_flops_per_step, stage_flops
from .gpus import gpu_compute
from .parallel import ParallelLayout, check_layout
from .mapping import map_layout
from .memory import memory_per_gpu, params_per_gpu
from .model import ModelSpec
from .result import DimensionComm, StepResult

__all__ = ["estimate_step", "step_traffic"]

ACT_BYTES = 2  # activations and their gradients travel in 16 bits


def step_traffic(model: ModelSpec, lay: ParallelLayout) -> list[dict]:
    """Every collective of one step on the busiest stage: dimension, collective, groups, size, calls."""
    seq = lay.seq_len or model.seq_len
    s_cp = seq / lay.cp
    b, h, tp, m, p, v = lay.micro_batch, model.hidden, lay.tp, lay.microbatches, lay.pp, lay.vpp
    layers = math.ceil(model.layers / p)
    full = lay.recompute == "full"
    act = b * s_cp * h * ACT_BYTES
    out: list[dict] = []

    def add(dim, coll, groups_dim, size, calls, phase):
        degree = lay.dp // lay.ep if groups_dim == "edp" else getattr(lay, groups_dim)
        if calls > 0 and size > 0 and degree > 1:
            out.append({"dim": dim, "collective": coll, "groups": groups_dim, "size_bytes": float(size),
                        "calls": float(calls), "phase": phase})

    if tp > 1:
        passes = 3 if full else 2  # forward, backward (, forward again)
        if lay.sequence_parallel:
            add("tp", "all_gather", "tp", act, m * layers * 2 * passes, phase="microbatch")
            add("tp", "reduce_scatter", "tp", act, m * layers * 2 * passes, phase="microbatch")
        else:
            add("tp", "all_reduce", "tp", act, m * layers * 2 * passes, phase="microbatch")
    if lay.cp > 1:
        kv_heads = max(1, model.num_kv_heads // tp)
        kv = b * seq * 2 * kv_heads * model.head_dim * ACT_BYTES
        add("cp", "all_gather", "cp", kv, m * layers * (2 if full else 1), phase="microbatch")
        add("cp", "reduce_scatter", "cp", kv, m * layers, phase="microbatch")
    if p > 1:
        size = act / (tp if lay.sequence_parallel else 1)
        sends = 2 * (p - 1) if lay.overlap_pp else 2 * (m * v + p - 1)
        add("pp", "pipeline", "pp", size, sends, phase="step")
    if lay.dp > 1:
        dense, expert = params_per_gpu(model, lay)  # of the first stage
        for dim, groups, n in (("dp", "dp", dense), ("dp", "edp", expert)):
            if n <= 0:
                continue
            z = lay.zero_stage
            if z == 0:
                add(dim, "all_reduce", groups, n * lay.grad_bytes, 1, phase="reduce")
            elif z in (1, 2):
                add(dim, "reduce_scatter", groups, n * lay.grad_bytes, 1, phase="reduce")
                add(dim, "all_gather", groups, n * lay.weight_bytes, 1, phase="gather")
            else:
                add(dim, "all_gather", groups, n * lay.weight_bytes, 2 * m, phase="gather_mb")
                add(dim, "reduce_scatter", groups, n * lay.grad_bytes, m, phase="reduce_mb")
    if lay.ep > 1 and model.moe is not None:
        moe_layers = min(layers, model.num_moe_layers)  # the busiest stage holds MoE layers only
        tokens = b * s_cp / (tp if lay.sequence_parallel else 1)
        size = tokens * model.moe.active_experts * h * ACT_BYTES
        add("ep", "alltoall", "ep", size, m * moe_layers * 2 * (3 if full else 2), phase="microbatch")
    return out


def estimate_step(fabric: Fabric, model: ModelSpec, lay: ParallelLayout, *, engine: CommEngine | None = None,
                  convention: str = "6n", efficiency: float | None = None, check: bool = True) -> StepResult:
    """Estimate one training step of ``model`` laid out as ``lay`` on ``fabric``."""
    spec = fabric.spec
    if check:
        check_layout(model, lay, gpus_per_domain=spec.gpus_per_domain)
    gpu = gpu_compute(spec.gpu, efficiency)
    mapping = map_layout(lay, spec.gpus_per_domain, fabric.layout.num_gpus)
    engine = engine or CommEngine(fabric)
    peak = gpu.peak_flops(lay.precision)
    rate = peak * gpu.efficiency
    sf = stage_flops(model, lay)
    t_f, t_b, t_r = sf.forward / rate, sf.backward / rate, sf.recompute / rate
    t_mb = t_f + t_b + t_r
    m, p, v = lay.microbatches, lay.pp, lay.vpp

    groups = {d: mapping.groups(d) for d in ("tp", "cp", "pp", "dp", "edp", "ep")}
    comms: list[DimensionComm] = []
    exposed = {k: 0.0 for k in ("tp", "cp", "pp", "dp", "ep")}
    for item in step_traffic(model, lay):
        G = groups[item["groups"]]
        one: CommTime = engine.time(item["collective"], G, item["size_bytes"])
        total = one.time_s * item["calls"]
        dim = item["dim"]
        if dim == "tp":
            ex = max(0.0, total - m * t_mb) if lay.overlap_tp else total
        elif dim == "cp":
            window = m * sf.attention_forward / rate * (3 + (1 if lay.recompute != "none" else 0))
            ex = max(0.0, total - window / 2) if lay.overlap_cp else total  # the AG and the RS share it
        elif dim == "ep":
            window = m * sf.moe_mlp_forward / rate * (3 + (1 if lay.recompute == "full" else 0))
            ex = max(0.0, total - window) if lay.overlap_ep else total
        elif dim == "pp":
            ex = total
        else:  # dp
            ex = _dp_exposed(engine, item, G, one.time_s, t_f, t_b + t_r, lay)
        exposed[dim] += ex
        comms.append(DimensionComm(
            dim=dim if item["groups"] != "edp" else "dp_experts", collective=item["collective"],
            size_bytes=item["size_bytes"], calls_per_step=item["calls"], time_s=total, exposed_s=ex,
            algorithm=one.algorithm, level=one.level, link=one.link, utilization=one.utilization,
            num_groups=int(G.shape[0]), group_size=int(G.shape[1]),
            domains_per_group=mapping.domains_spanned(item["groups"])))

    compute = m * t_mb
    per_mb_exposed = (exposed["tp"] + exposed["cp"] + exposed["ep"]) / m
    bubble = (p - 1) / v * (t_mb + per_mb_exposed)
    breakdown = {"compute": compute, "bubble": bubble, **exposed}
    step = sum(breakdown.values())
    seq = lay.seq_len or model.seq_len
    mem = memory_per_gpu(model, lay, gpu.memory_bytes)
    notes = []
    if model.status != "published":
        notes.append(f"{model.name}: {model.status} figures")
    if not mem.fits:
        notes.append(f"does not fit: {mem.total_bytes / 1e9:.1f} GB per GPU, {mem.short_bytes / 1e9:.1f} GB more "
                     f"than the {gpu.memory_bytes / 1e9:.0f} GB of a {gpu.name}")
    layout = lay.model_dump()
    layout["gpus"] = lay.gpus
    layout["microbatches"] = m
    return StepResult(
        spec=fabric.name, model=model.name, model_status=model.status, layout=layout, gpus=lay.gpus,
        gpu=gpu.name, precision=lay.precision, flop_convention=convention, efficiency=gpu.efficiency,
        peak_flops_per_gpu=peak, step_time_s=step, breakdown_s=breakdown, tokens_per_step=lay.global_batch * seq,
        model_flops_per_step=model_flops_per_step(model, lay, convention),
        executed_flops_per_step=sf.total * m * lay.gpus, memory=mem, comm=comms,
        overlap={k: getattr(lay, f"overlap_{k}") for k in ("tp", "cp", "pp", "dp", "ep")}, notes=notes)


def _dp_exposed(engine: CommEngine, item: dict, G, one_s: float, t_f: float, t_bwd: float,
                lay: ParallelLayout) -> float:
    """The overlap rule of data parallelism (see the module docstring)."""
    calls = item["calls"]
    if not lay.overlap_dp:
        return one_s * calls
    bucket = min(item["size_bytes"], lay.dp_bucket_params * (lay.grad_bytes if "reduce" in item["phase"]
                                                              else lay.weight_bytes))
    edge = engine.time(item["collective"], G, bucket).time_s  # the bucket that cannot hide
    window = t_f if "gather" in item["phase"] else t_bwd
    if item["phase"] == "gather_mb":  # ZeRO-3: one gather in each forward and each backward
        return lay.microbatches * (max(one_s - t_f, edge) + max(one_s - t_bwd, edge))
    return calls * max(one_s - window, edge)
