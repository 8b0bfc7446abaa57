"""Search: every valid layout of a model on a number of GPUs with a global batch, ranked by step time.

Enumerated: tp (powers of two up to the NVLink domain, dividing the heads), cp (1, 2, 4, 8, 16 where the
sequence splits), pp (divisors of the rest, up to the layers), dp (what remains), ep (MoE: powers of two dividing
the experts and the stage's ``tp x cp x dp / etp`` ranks: expert parallelism may span tensor and data ranks),
etp (``etps``; default: tp), vpp (1, 2, 4 when pp > 1), micro-batch (1, 2, 4), recomputation (none, selective,
full), the sharding modes and the rank orders given (``tp-cp-ep-pp-dp`` as well as Megatron's ``tp-cp-ep-dp-pp``
shows what keeping data parallelism inside a pod buys); rank orders that place every GPU alike for a layout (they
differ only in dimensions of size 1, or in ``ep``, which folds over the stage's ranks) count once, as the first
given.

How it stays fast and bounded at 100k GPUs:

1. a layout that breaks a divisibility rule is skipped before it is built; one that does not fit in memory
   (weights, gradients, optimizer, activations, and the buffers of its collectives: a gathered FSDP layer) is
   counted and dropped (memory is closed-form, cached per shape, its activations per the fields they
   read: :data:`~topo.training.memory.ACTIVATIONS_READ`);
2. each fitting layout gets a lower bound of its step time: its compute and bubble (operator roofline, cached per
   shape) plus a floor under its exposed tensor-parallel and expert all-to-all traffic: the bytes each GPU must
   send at its NVLink rate, and the part of an all-to-all that must leave an NVLink domain of ``D`` GPUs
   (``1 - D / ep`` of it, at least) at its NICs' rate, and under delayed FP8 scaling the amax reductions' kernel
   gaps (:func:`~topo.training.fp8_amax.amax_kernels_s`; their all-reduce counts 0); a layout whose bound is not
   below the ``keep``-th best step
   time found so far is pruned without touching the network;
3. the candidates are walked in passes; each pass keeps only the ``batch`` lowest bounds not yet decided (a
   bounded heap) and evaluates them best bound first, skipping any whose bound the improving threshold already
   beats, with one shared :class:`~topo.training.comm.CommEngine` (layouts that share a group matrix, in any
   order of its rows after the first, cost one engine call between them); before its evaluation a layout's
   bound gains its exposed data-parallel, expert all-to-all, context and pipeline times when those groups were
   routed already for another layout (ZeRO-3's per-layer gathers over 50,000 ranks rule out hundreds of layouts
   this way, with no routing), and while its expert all-to-all is not routed, that floor with the EP groups as
   mapped: ``1 - k / ep`` leaves the domain, ``k`` the members of its EP group a GPU finds in its own domain
   (:meth:`~topo.training.mapping.Mapping.members_in_domain`: the rank order and the expert-TP stride spread
   them; at 100k GPUs, DeepSeek-V3, this halves the layouts evaluated, 99 to 52); the DP windows widen by the
   NVLink-only exposed TP, CP and EP time as the step's do, and by no less (infinitely while one of those is
   not routed). DP collectives not routed yet count at the engine's bound without routing
   (:meth:`~topo.training.comm.CommEngine.time_floor`: NCCL's latency and a cut bound on the bandwidth part),
   exposed by :func:`~topo.training.step.dp_floor_s`: whatever the windows, the part of each that hides behind
   nothing, and the longest one's calls back to back beyond the step's compute and other exposed time (ZeRO-3's
   per-layer gathers over 50,000 ranks, latency-bound, take 10-30 s a step). A layout whose refined bound is
   above the next one's goes back in line at it (refined again when its turn comes if anything was routed
   since), so the threshold falls with the best layouts first (at 100k GPUs: 52 layouts evaluated to 24).
   When the best found beats the lowest bound a pass left out, the search is exact and stops;
   otherwise the next pass takes the next ``batch``, building only the candidates whose bound (kept from the
   first walk by their place in it, 8 bytes each) lies in its range. Only the ``keep`` best results, the bounded
   heap and those bounds are held, so memory grows with the number of layouts by 8 bytes each (the per-shape
   caches hold a bound and its compute, or a memory breakdown, per distinct shape);
4. the ``keep`` best are evaluated again with the step's collectives as one traffic mix (``contention``) and
   ranked by that, fastest alone first; a mix only slows a step (every slowdown is at least 1), so once ``top``
   are mixed, a layout whose time alone is above the ``top``-th mixed time cannot enter and the rest are skipped;
   a layout left out of the pool is at or above the ``keep``-th best time alone, so where the ``top``-th mixed
   time is above that, the threshold becomes that mixed time and the candidates are walked again, each layout
   evaluated once and mixed where it is below the threshold, which falls as they come (:meth:`_Search.widen`: the
   evaluated layouts that left the pool are held for it, a few hundred at most): exact with the mix too. A
   ranking by another figure at or above the mixed step (``rank_by``: a region's step across its sites, which adds
   the DCI to the slowest site's) walks and widens the same way with that figure for the mixed time: exact by it.
"""

from __future__ import annotations

import heapq
from array import array
import itertools
import math
import time
import typing
from dataclasses import replace

import numpy as np

from ..errors import OnFabric, TopoError
from ..fabric.fabric import Fabric
from ..units import format_in
from .comm import CommEngine, engine_for
from .fp8_amax import AMAX_PHASE, amax_kernels_s
from .fsdp2_copies import copies_units
from .gpus import gpu_compute
from .parallel import DEFAULT_ORDER, ParallelLayout, check_layout, sends_unoverlappable
from .memory import memory_per_gpu
from .multisite_memory import state_layout
from .nvls_buffers import nvls_bound_bytes
from .ep_buffers import ep_buffer_bytes
from .nccl_buffers import nccl_buffer_bytes
from .model import ModelSpec
from .operators import rank_computes, rank_computes_at, stage_compute
from .result import SearchResult
from .mapping import FEWER_GPUS, default_placement, map_layout, refuse_failed_placement
from .tp_overlap import DEFAULT as TP_OVERLAP_DEFAULT, check_num_sm, tp_overlap_on
from .step import (comm_windows, dp_floor_s, exposed_comm_s, estimate_step, exposed_routed, failure_notes, group_degree,
                   least_nvls_bytes, nvls_communicators, routed_ep_cover_s, stage_tp_blocks, step_breakdown,
                   step_traffic, tp_exposed_s, traffic_stage)

__all__ = ["search_layouts", "candidate_layouts", "common_factor_note", "expert_dispatchers"]


def _pow2_upto(n: int) -> list[int]:
    out, x = [], 1
    while x <= n:
        out.append(x)
        x *= 2
    return out


def candidate_layouts(model: ModelSpec, gpus: int, global_batch: int, *, gpus_per_domain: int,
                      seq_len: int | None = None, dp_sharding=("zero1", "fsdp_grad_op", "zero3"),
                      recompute=("none", "selective", "full"), micro_batches=(1, 2, 4), vpps=(1, 2, 4),
                      cps=(1, 2, 4, 8, 16), rank_orders=(DEFAULT_ORDER,), etps=(None,), pp_multiple: int = 1,
                      wanted=None, **fixed):
    """Yield ``(ParallelLayout or None, reason)`` for every combination; None when a rule fails (the reason says which).

    Combinations that cannot split the global batch (``global_batch % (dp x micro_batch)``, interleaving with
    micro-batches not a multiple of pp) are rejected before a ParallelLayout is built; ``pp_multiple`` keeps only
    pipelines of a multiple of that many stages (a region's sites, each holding the same number of stages). A MoE
    layout with ep x etp > 1 is tried with each expert dispatcher ``fixed`` leaves open
    (:func:`expert_dispatchers`); with ep x etp = 1 there is nothing to dispatch and the layout's default stands.

    ``wanted``: called with each item's place among those yielded (from 0, the same in every walk of the same
    arguments); a combination it answers False for is yielded as ``(None, SKIPPED)``, unbuilt (a search's later
    passes build only the layouts whose bound it still needs)."""
    combos = _combinations(model, gpus, global_batch, gpus_per_domain, seq_len, dp_sharding, recompute, micro_batches,
                           vpps, cps, rank_orders, etps, pp_multiple, fixed)
    for i, (fields, why) in enumerate(combos):
        if fields is None:
            yield None, why
        elif wanted is not None and not wanted(i):
            yield None, SKIPPED
        else:
            try:
                lay = ParallelLayout(**fields)
                check_layout(model, lay, gpus=gpus, gpus_per_domain=gpus_per_domain)
            except (TopoError, ValueError) as exc:
                yield None, str(exc)
                continue
            yield lay, ""


SKIPPED = "skipped"
"""The reason :func:`candidate_layouts` gives a combination its ``wanted`` left unbuilt."""
UNSPLIT = "a share of the job that its fabric cannot run"
"""The reason :func:`search_layouts` gives a job layout its ``split`` does not split onto the fabrics."""


def _combinations(model, gpus, global_batch, gpus_per_domain, seq_len, dp_sharding, recompute, micro_batches, vpps,
                  cps, rank_orders, etps, pp_multiple, fixed):
    """:func:`candidate_layouts`' combinations in order: ``(fields, "")`` for each to build (a ParallelLayout's
    keyword arguments), ``(None, reason)`` for each its divisibility rules reject before."""
    seq = seq_len or model.seq_len
    experts = model.moe.experts if model.moe else 1
    units = model.layers + (2 if fixed.get("pipeline_embedding") else 0)
    dispatchers = expert_dispatchers(model, fixed)
    for tp in _pow2_upto(min(gpus_per_domain, gpus)):
        if model.heads % tp:
            continue
        for cp in cps:
            if gpus % (tp * cp) or (cp > 1 and seq < 8192 * cp // 2):
                continue
            rest = gpus // (tp * cp)
            for pp in [d for d in range(1, min(rest, units) + 1) if rest % d == 0 and d % pp_multiple == 0]:
                dp = rest // pp
                for etp in etps:
                    e_tp = etp or tp
                    ranks = tp * cp * dp
                    eps = [e for e in _pow2_upto(min(ranks // e_tp, experts)) if ranks % (e * e_tp) == 0
                           and experts % e == 0] if model.moe else [1]
                    for ep, vpp, mb in itertools.product(eps, vpps if pp > 1 else (1,), micro_batches):
                        if global_batch % (dp * mb):
                            yield None, "global_batch"
                            continue
                        if vpp > 1 and (global_batch // (dp * mb)) % pp:
                            yield None, "global_batch"
                            continue
                        if pp * vpp > units:
                            yield None, "pp"
                            continue
                        sizes = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
                        seen: set = set()
                        for rc, zs, ro, dispatch in itertools.product(recompute, dp_sharding, rank_orders,
                                                                      dispatchers if ep * e_tp > 1 else ({},)):
                            if rc == "selective" and fixed.get("flash_attention", True) and len(recompute) > 1:
                                continue  # fused attention already drops what selective recomputation drops
                            # (asked for alone it is kept: it found no layout, refused as "divisibility", tidy65)
                            # orders that differ only where a dimension has one rank (or in ep, which has no
                            # axis of its own) put every GPU in the same groups: the first one given stands
                            same = (rc, zs, tuple(d.strip() for d in ro.replace(",", "-").split("-")
                                                  if sizes.get(d.strip(), 1) > 1), tuple(dispatch.values()))
                            if same in seen:
                                continue
                            seen.add(same)
                            yield _pp_overlap_where_it_applies(
                                dict(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp, vpp=vpp, micro_batch=mb,
                                     global_batch=global_batch, seq_len=seq_len, recompute=rc, dp_sharding=zs,
                                     rank_order=ro, **{**fixed, **dispatch})), ""


PP_OVERLAP_NOTE = ("overlap_pp=true is held where the pipeline interleaves (vpp > 1), and overlap_pp=false set on the "
                   "vpp-1 layouts with pp > 1, as Megatron-LM's training script sets it there (NVIDIA/Megatron-LM@d98e8a64 "
                   "megatron/training/arguments.py lines 1010-1018: its non-interleaved 1F1B schedule raises on "
                   "overlap_p2p_comm)")
"""The note a search gives once when it turned a held ``overlap_pp`` off on some vpp-1 layouts."""


def _pp_overlap_where_it_applies(fields: dict) -> dict:
    """A search's layout ``fields`` with a held ``overlap_pp`` true turned off where the schedule cannot overlap its
    sends (:func:`.parallel.sends_unoverlappable`), as Megatron-LM's training script does; a single layout asking
    for it there is refused instead (:func:`.parallel.check_layout`)."""
    if fields.get("overlap_pp") and sends_unoverlappable(fields["pp"], fields["vpp"],
                                                         fields.get("pipeline_schedule", "1f1b")):
        return {**fields, "overlap_pp": False}
    return fields


def expert_dispatchers(model: ModelSpec, fixed: dict) -> tuple[dict, ...]:
    """The expert dispatchers a search tries, as layout fields: Megatron-Core's all-to-all, and its flex
    dispatcher on each backend (``ep_dispatcher`` and ``ep_flex_backend``, the values :class:`ParallelLayout`
    allows), less those the fixed fields rule out (``ep_dispatcher`` fixed: that one alone, its backends still
    tried for the flex dispatcher; ``ep_flex_backend`` fixed: the flex dispatcher on that backend alone, beside the
    all-to-all). A dense model: nothing to try (one empty choice).

    Parameters
    ----------
    model : ModelSpec
    fixed : dict
        The layout fields the search holds (``--layout``'s and the flags').

    Returns
    -------
    tuple of dict
        One dict of fields a dispatcher sets per choice, the all-to-all first (``{}`` alone for a dense model).
    """
    if model.moe is None:
        return ({},)
    kinds = typing.get_args(ParallelLayout.model_fields["ep_dispatcher"].annotation)
    backends = typing.get_args(ParallelLayout.model_fields["ep_flex_backend"].annotation)
    out = []
    for kind in kinds:
        if fixed.get("ep_dispatcher", kind) != kind:
            continue
        if kind == "alltoall":  # the backend is the flex dispatcher's alone
            out.append({"ep_dispatcher": kind})
            continue
        out += [{"ep_dispatcher": kind, "ep_flex_backend": b} for b in backends
                if fixed.get("ep_flex_backend", b) == b]
    return tuple(out)


def _comm_floor_s(spec, lay: ParallelLayout, traffic: list[dict], sc,
                  ep_members: float | None = None, *, tp_overlap: bool, tp_blocks: int = 0) -> tuple[float, float]:
    """Lower bounds on the exposed TP and on the exposed EP communication of a step (see the module doc),
    seconds: each call's bytes per GPU at its NVLink rate (and, for the all-to-all, the part that must leave an
    NVLink domain at its NICs' rate), exposed by the step's own overlap rules
    (:func:`~topo.training.step.exposed_comm_s`).

    ``ep_members``: the members of its EP group a GPU finds in its own NVLink domain as the layout is mapped
    (:meth:`~topo.training.mapping.Mapping.members_in_domain`, in the least local domain); each GPU of that domain
    sends ``1 - ep_members / ep`` of an expert all-to-all's buffer through the domain's NICs. Unmapped (None): the
    most any rank order allows, the GPUs of a domain the layout uses. ``tp_overlap``: the layout's TP overlap
    takes effect for the model (:func:`~topo.training.tp_overlap.tp_overlap_on`); an item marked ``userbuffers``
    (an MLA model's first ``linear_proj``, :func:`~topo.training.tp_overlap.first_proj_userbuffers`) overlapped
    either way. ``tp_blocks``: the stage's TP blocks a micro-batch (``step._tp_blocks``): a layer's backward
    exchange without userbuffers hides behind its own GEMM (:func:`~topo.training.step.tp_exposed_s`, at the call's
    floor: ``max(0, c - g)`` grows with ``c``, so the floor's exposure is at most the step's); 0 pools them all
    behind the stage's weight-gradient GEMMs (a looser bound). The heads' ``head_wgrad`` exchanges, never through
    userbuffers, hide behind their own GEMMs either way, as in the step."""
    nvlink = spec.nvlink_Bps
    nic = spec.server.nic_rate_Bps * spec.server.nics / spec.gpus_per_server
    used = lay.gpus_per_domain_used or spec.gpus_per_domain
    own = tp_blocks > 0 and not tp_overlap  # the layers' backward exchanges beside their own GEMMs
    windows = comm_windows(lay, sc, False, not own)
    tp = ep = 0.0
    for it in traffic:
        if it["dim"] not in ("tp", "ep"):
            continue
        n = group_degree(lay, it["groups"])
        floor = it["calls"] * it["size_bytes"] * (n - 1) / n / nvlink
        if it["collective"] == "alltoall":
            D = ep_members if ep_members is not None and it["groups"] == "ep" else used
            floor = max(floor, it["calls"] * it["size_bytes"] * max(0.0, 1 - D / n) / nic)
        if it["dim"] == "tp" and (own or it["phase"] == "head_wgrad") and it["calls"] > 0:
            got = tp_exposed_s(it, floor / it["calls"], sc, tp_blocks, windows, lay, ring=False, tp_hidden=False)
        else:
            got = exposed_comm_s(it["dim"], it["phase"], floor, windows, lay,
                                 tp_overlap=tp_overlap or "userbuffers" in it)
        if it["dim"] == "tp":
            tp += got
        else:
            ep += got
    return tp, ep


def _bound(lay: ParallelLayout, sc, tp_s: float, ep_s: float, dp_s: float = 0.0, cp_s: float = 0.0,
           pp_s: float = 0.0, amax_s: float = 0.0) -> float:
    """A lower bound of the step: the step-time formula (:func:`~topo.training.step.step_breakdown`, the same
    bubble, 1F1B or DualPipe) with floors for the exposed TP, EP, DP, CP and PP seconds and for the FP8 amax
    reductions' (their kernels' gaps, :func:`~topo.training.fp8_amax.amax_kernels_s`; the all-reduce counts 0), and
    no optimizer step."""
    exposed = {"tp": tp_s, "ep": ep_s, "dp": dp_s, "cp": cp_s, "pp": pp_s, AMAX_PHASE: amax_s}
    return sum(step_breakdown(lay, sc, exposed, 0.0).values())


_BOUND_DROP = ("dp_sharding", "overlap_dp", "overlap_param_gather", "overlap_param_gather_with_optimizer_step",
               "dp_bucket_params")  # fields the compute
# bound does not read, but for whether FSDP2's unit copies run (ZeRO-3 with FSDP2's gradients,
# :func:`.fsdp2_copies.copies_units`), kept in the key
_SHAPE_FIELDS = tuple(sorted(k for k in ParallelLayout.model_fields if k not in ("rank_order", "first_gpu", "skip_domains")))
"""The fields of a layout's shape, sorted (its memory and, less :data:`_BOUND_DROP`, its compute bound)."""
_MEMORY_DROP = ("ep_dispatcher", "ep_flex_backend")  # read by the memory only through the flex dispatcher's buffer
# (:func:`.ep_buffers.ep_buffer_bytes`), which :meth:`_Search.bound_of` keys apart
_BOUND_AT = tuple(i for i, k in enumerate(_SHAPE_FIELDS) if k not in _BOUND_DROP)
_MEMORY_AT = tuple(i for i, k in enumerate(_SHAPE_FIELDS) if k not in _MEMORY_DROP)


def _keys(lay: ParallelLayout) -> tuple[int, int, int]:
    """Hashes of the layout's shape (memory: every field but its rank order, first GPU and expert dispatcher, whose
    buffer :meth:`_Search.bound_of` keys apart), of its shape less the data-parallel sharding fields (compute bound:
    with whether its compute copies FSDP2's units, which ZeRO-3 decides), and of its shape with its rank order
    (done). The fields' values are read as the layout holds them (scalars and tuples; a list as a tuple), in
    :data:`_SHAPE_FIELDS`' order, not through ``model_dump``: a search keys each of its candidates."""
    d = lay.__dict__
    shape = tuple([tuple(v) if type(v) is list else v for v in map(d.__getitem__, _SHAPE_FIELDS)])
    memory = tuple([shape[i] for i in _MEMORY_AT])
    bound = (tuple([shape[i] for i in _BOUND_AT]), copies_units(lay))
    return hash(memory), hash(bound), hash((shape, lay.rank_order))


def search_layouts(fabric: Fabric, model: ModelSpec, gpus: int, global_batch: int, *, top: int | None = None,
                   convention: str = "6n", efficiency: float | None = None, engine: CommEngine | None = None,
                   max_layouts: int | None = None, progress=None, contention: bool = True, batch: int = 2048,
                   keep: int | None = None, also_on: tuple[Fabric, ...] = (), profile=None, rank_by=None,
                   also_profiles: tuple | None = None, split=None, job_form=None, **options) -> SearchResult:
    """Rank every valid layout that fits by step time (fastest first); see the module doc.

    Parameters
    ----------
    fabric, model, gpus, global_batch
        The cluster, the model, the job's GPUs and sequences per step.
    top : int, optional
        Results to return (default 10).
    max_layouts : int, optional
        Stop after evaluating this many layouts.
    progress : callable, optional
        ``progress(done, total, what)`` after each batch (the CLI draws it on a terminal).
    contention : bool
        Re-evaluate the best ``keep`` with the step's collectives as one traffic mix.
    batch, keep : int
        Layouts evaluated per batch; results kept for the re-ranking with the traffic mix (default
        ``max(top + 2, 5)``: the bound prunes against the ``keep``-th best, so a smaller pool prunes more; at 100k
        GPUs, top 3, keeping 5 instead of 10 evaluates 168 layouts instead of 275, with the same top 3).
    also_on : tuple of Fabric
        Other fabrics every layout also runs on in lockstep (the other sites of a region, each with its own
        failures): a layout's step is the slowest fabric's (the first among equals), its bound the largest of its
        bounds on each (a lower bound of that step), so the search stays exact; ``site_steps`` holds each ranked
        layout's step on ``fabric`` and on each of these. Empty: one fabric, as before. ``also_profiles``: one profile
        for each (a region's site's own, reg70; None: ``profile``'s for each).
    profile : optional
        The cost profile of every layout's collectives (:class:`~topo.training.comm.CommEngine`'s; None: each
        fabric's own); not with ``engine``, which carries its own. The fabrics of ``also_on`` take the same.
    rank_by : callable, optional
        ``rank_by(step, steps)``: the figure layouts are ranked by, from a step (the slowest fabric's, mixed with
        ``contention``) and its step on each fabric (``fabric``'s, then ``also_on``'s), at or above that step (a
        region's step across its sites): step 4 (module doc) compares it for the mixed time, exact. None: the step.
    split : callable, optional
        ``split(lay)``: each fabric's own share of the job's ``lay`` (a region's by-size replicas, regsearch72), None
        where it does not split; each fabric bounds, places and times its own. None: each runs ``lay`` itself.
    job_form : JobForm, optional
        Each layout's memory as its job shards the ZeRO state (:class:`~topo.training.multisite_memory.JobForm`: a
        region's flat cross-DC ring, regions77). None: as the layout itself shards it.
    **options
        Enumeration choices and fixed layout fields (see :func:`candidate_layouts`).

    Raises
    ------
    TopoError
        No layout is valid, or none fits (saying by how much the closest one misses).
    """
    t0 = time.perf_counter()
    _check_request(fabric, gpus, split, options)
    top = top or 10
    gpu = gpu_compute(fabric.spec.gpu, efficiency, host_cpu=fabric.spec.host_cpu[0])
    check_num_sm(options.get("tp_overlap_config", TP_OVERLAP_DEFAULT), gpu)  # its layouts are not checked one by one
    s = _Search(fabric, model, engine_for(fabric, engine, profile), gpu,
                keep or max(top + 2, 5), dict(convention=convention, efficiency=efficiency), progress, max_layouts)
    s.others, s.rank_by, s.mix = s.peers(also_on, efficiency, also_profiles), rank_by, contention
    for x in s.sites():
        x.job_form = job_form
    _place_apart(s, split, "gpus_per_domain_used" in options)
    candidates = _candidates(s, gpus, global_batch, split, options)
    s.passes(candidates, batch)
    s.raise_if_none_fits(gpus, global_batch)
    results = s.ranked(top, contention)
    while (contention or rank_by is not None) and s.widen(results, top):  # walk23, regsearch67
        s.passes(candidates, batch, count=False)
        results = s.ranked(top, contention)
    return _search_result(s, results[:top], gpus, global_batch, time.perf_counter() - t0)


def _candidates(s: "_Search", gpus: int, global_batch: int, split, options: dict):
    """``candidates(wanted)``: search ``s``'s candidate layouts (:func:`candidate_layouts` of its model, as
    :func:`_split_candidates` splits them), marking ``s.pp_overlap_off`` where a held ``overlap_pp`` was turned off."""
    def candidates(wanted):
        for lay, why in _split_candidates(candidate_layouts(s.model, gpus, global_batch, wanted=wanted,
                                                            gpus_per_domain=s.fabric.spec.gpus_per_domain, **options),
                                          split):
            if lay is not None and options.get("overlap_pp") and not lay.overlap_pp:
                s.pp_overlap_off = True
            yield lay, why
    return candidates


def _check_request(fabric: Fabric, gpus: int, split, options: dict) -> None:
    """Refuse a search the fabric cannot hold or that fixes what the search chooses."""
    if split is None and gpus > fabric.layout.num_gpus:
        raise TopoError(f"{gpus:,} GPUs asked, but the fabric has {fabric.layout.num_gpus:,}{FEWER_GPUS}", key="gpus")
    if options.get("pipeline_layout"):
        raise TopoError("a pipeline_layout fixes pp and vpp, which the search chooses; allowed with the search: "
                        "none (give the layout to a single evaluation instead)", key="pipeline_layout")


def _place_apart(s: "_Search", split, fixed: bool) -> None:
    """How each fabric of search ``s`` places a layout: its own share (``split``), or where the fabrics place one
    layout apart and the options do not fix its ``gpus_per_domain_used``, as its own step does (regsearch66: 64 or
    72 a rack)."""
    for i, x in enumerate(s.sites()):
        x.split, x.index = split, i
    if split is None and not fixed and any(_places_apart(s.fabric, x.fabric) for x in s.others):
        for x in s.sites():
            x.own_placement = True


def _split_candidates(got, split):
    """:func:`candidate_layouts`' items ``got``, each job layout ``split`` (None: all as they are) cannot split onto
    the fabrics given as ``(None, UNSPLIT)``."""
    if split is None:
        return got
    return ((lay, why) if lay is None or split(lay) is not None else (None, UNSPLIT) for lay, why in got)


def _search_result(s: "_Search", ranked: list, gpus: int, global_batch: int, elapsed_s: float) -> SearchResult:
    """The :class:`SearchResult` of search ``s`` with its ``ranked`` layouts: its counts, notes and site steps."""
    failed = [failure_notes(x.fabric, x.engine) for x in s.sites()]
    placed = [sorted(x.placement_notes) for x in s.sites()]
    notes = (sorted({n for per in placed for n in per}) + [n for n in [common_factor_note(gpus, global_batch)] if n]
             + ([PP_OVERLAP_NOTE] if s.pp_overlap_off else [])
             + list(dict.fromkeys(n for per in failed for n in per)))
    return SearchResult(spec=s.fabric.name, model=s.model.name, gpus=gpus, global_batch=global_batch,
                        ranked=ranked, considered=s.considered, rejected_memory=s.too_big,
                        rejected_invalid=s.invalid, engine_calls=s.routed_calls(), elapsed_s=elapsed_s,
                        evaluated=s.evaluated, pruned=max(0, s.considered - s.invalid - s.too_big - s.evaluated),
                        notes=notes, site_steps=[s.per_site.get(id(r), (r,)) for r in ranked], failure_notes=failed,
                        placement_notes=placed,
                        profile=s.profile.name)


def _places_apart(fabric: Fabric, other: Fabric) -> bool:
    """Whether :func:`~.mapping.default_placement` may place one layout apart on the two fabrics: NVLink domains
    that are not a power of two (an NVL72 rack, where a job takes 64 or 72 of each by its size against the
    fabric's racks) on fabrics of different sizes or domains."""
    D = fabric.spec.gpus_per_domain
    return other.spec.gpus_per_domain != D or (D & (D - 1) != 0 and other.layout.num_gpus != fabric.layout.num_gpus)


def _rank_of(ranks: list, lay: ParallelLayout, sc):
    """Of ``ranks`` (:func:`.operators.rank_computes`), the one :meth:`_Search.waited` reads for ``sc``: ``sc``'s own
    pipeline rank, or the busiest where the step reads no stage in particular (:func:`.step.traffic_stage` None)."""
    return ranks[0] if traffic_stage(lay, sc) is None else next(r for r in ranks if r.busiest == sc.busiest)


def _rank(r) -> tuple:
    return round(r.step_time_s, 9), r.memory_per_gpu_bytes  # ties: less memory first


class _Search:
    """The state of one search (see the module doc), its steps as methods: bound a layout, refine a bound with
    routed DP traffic, evaluate a batch, walk the candidates in passes, re-rank the best with the traffic mix."""

    def __init__(self, fabric, model, engine, gpu, keep, step_kw, progress, max_layouts):
        self.fabric, self.model, self.engine, self.gpu, self.keep = fabric, model, engine, gpu, keep
        self.spec = fabric.spec
        self.step_kw, self.progress, self.max_layouts = step_kw, progress, max_layouts
        self.considered = self.invalid = self.too_big = self.evaluated = 0
        self.closest = None  # (memory, layout, how its memory is counted) of the smallest that does not fit
        self.unplaced = None  # (layout, TopoError) of the first layout that fits but cannot be placed
        self.placement_notes: set = set()  # what default_placement said of the layouts it placed on this fabric
        self.reasons: dict = {}  # why candidates broke a rule: reason -> count (a few distinct reasons)
        self.mem_cache: dict = {}
        self.act_cache: dict = {}  # each stage's activations per micro-batch (memory_per_gpu's ``activations``)
        self.bound_cache: dict = {}
        self.nvls_bounds: dict = {}  # (memory key, dispatcher, backend) -> the NVLS bytes a step holds at most
        self.nvls_free: dict = {}  # memory key -> the communicators no expert dispatcher reads that may run NVLS
        self.profile = engine.profile
        self.waits: dict = {}  # (bound key, EP cover) -> the stage compute with the host's waits at that cover
        self.blocks: dict = {}  # block times of this model on this GPU (operators.block_time_key, kind) -> BlockTime
        self.best: list = []  # heap of (-step, seq, StepResult): the ``keep`` best so far
        self.counter = itertools.count()
        self.done: set = set()  # hashes of layouts already evaluated (ints: a few bytes each)
        self.bounds = array("d")  # each candidate's bound by its place in the walk (inf: invalid or does not fit)
        self.spill: list = []  # the evaluated layouts that fit but left the ``keep`` best (for :meth:`widen`)
        self.cap = None  # the threshold once :meth:`widen` widened the search: the top-th mixed time
        self.top, self.mixed = 0, []  # once widened: the rows asked, every layout mixed so far (fastest first)
        self.others: list[_Search] = []  # the other fabrics each layout runs on in lockstep (search_layouts' also_on)
        self.per_site: dict = {}  # with others: id(step) -> the layout's step on each fabric (this one first)
        self.own_placement = False  # a layout placed for another fabric is placed again for this one (placed)
        self.rank_by = None  # search_layouts' rank_by: the figure a ranked layout is ordered by (None: its step)
        self.mix = True  # whether the ranked layouts are mixed (search_layouts' contention)
        self.figures: dict = {}  # with rank_by: id(step) -> (step, its figure), the step held so its id stays its own
        self.split, self.index = None, 0  # search_layouts' split, and this fabric's place in its shares
        self.jobs: dict = {}  # with split: id(step) -> (step, the job's layout it is the slowest share of)
        self.placements_ok: set = set()  # placements refuse_failed found past this fabric's failed parts
        self.pp_overlap_off = False  # a held overlap_pp true was turned off on a vpp-1 layout (PP_OVERLAP_NOTE)
        self.job_form = None  # search_layouts' job_form: a layout's memory as its job shards the state (regions77)

    def peers(self, fabrics, efficiency, profiles=None) -> list:
        """:meth:`peer` on each of ``fabrics``, each with its profile (``profiles``; None: this search's engine's
        for each)."""
        profiles = profiles if profiles is not None else [self.engine.profile_given] * len(fabrics)
        return [self.peer(f, efficiency, p) for f, p in zip(fabrics, profiles)]

    def peer(self, fabric, efficiency, profile=None):
        """A search of the same model on ``fabric``, another fabric the layouts run on in lockstep (its own engine
        and failures); of an equal spec, it shares this one's caches of memory, compute and bounds, which read the
        spec, the GPU and the model alone (the NVLS check that routes is not cached, :meth:`nvls_checked`), and the
        NVLS buffers' bounds only where its profile is this one's (they read the profile's channels and chunk: two
        sites of one spec may have different ``profile`` keys, reg70); ``profile``: its collectives' (None: the
        fabric's own)."""
        if fabric.spec != self.spec:
            gpu = gpu_compute(fabric.spec.gpu, efficiency, host_cpu=fabric.spec.host_cpu[0])
            return _Search(fabric, self.model, CommEngine(fabric, profile=profile), gpu, self.keep, self.step_kw,
                           None, None)
        out = _Search(fabric, self.model, CommEngine(fabric, profile=profile), self.gpu, self.keep, self.step_kw,
                      None, None)
        shared = ("mem_cache", "act_cache", "bound_cache", "waits", "blocks")
        for name in shared + (("nvls_bounds",) if out.profile == self.profile else ()):
            setattr(out, name, getattr(self, name))
        return out

    def sites(self) -> tuple:
        """This search and its :attr:`others`: every fabric a layout runs on."""
        return (self, *self.others)

    def routed_calls(self) -> int:
        """The engine calls of every fabric's engine (a bound is refined again once any of them routed more)."""
        return sum(x.engine.engine_calls for x in self.sites())

    def bound_all(self, lay, keys):
        """:meth:`bound_of` on every fabric: the largest bound (a lower bound of the slowest fabric's step), None
        with that fabric's memory where the layout does not fit on one."""
        bound, mem = self._on_fabric(self.bound_of, lay, keys)
        for other in self.others:
            if bound is None:
                break
            got, other_mem = other._on_fabric(other.bound_of, lay, keys)
            bound, mem = (None, other_mem) if got is None else (max(bound, got), mem)
        return bound, mem

    def _on_fabric(self, method, *args):
        """``method(*args)``, its refusal said of this fabric where the layouts run on others too (as
        :meth:`step_of`'s: the caller names its site)."""
        try:
            return method(*args)
        except TopoError as exc:
            raise (OnFabric(exc, self.fabric) if self.others or self.index else exc) from None

    def refined_all(self, lay, bound, keys, above: float = math.inf) -> float:
        """:meth:`refined` on every fabric in turn, each from the largest so far, until one reaches ``above``."""
        for x in self.sites():
            bound = x.refined(lay, bound, keys, above)
            if bound >= above:
                break
        return bound

    def step_of(self, lay, contention: bool):
        """The step of ``lay`` on every fabric: the slowest (one that does not fit first; the first among equals),
        each fabric's kept in :attr:`per_site` where there are others. One fabric: its step, as before."""
        runs = []
        for x in self.sites():
            try:
                runs.append(estimate_step(x.fabric, x.model, x.placed(lay), engine=x.engine, check=False,
                                          contention=contention, **x.step_kw))
            except TopoError as exc:  # which fabric of several refused it (its site named by the caller)
                raise (OnFabric(exc, x.fabric) if self.others else exc) from None
        out = max(runs, key=lambda r: (not r.fits, r.step_time_s))
        if self.others:
            self.per_site[id(out)] = tuple(runs)
        if self.split is not None:
            self.jobs[id(out)] = (out, lay)
        return out

    def layout_of(self, r) -> ParallelLayout:
        """The layout step ``r`` was evaluated for: with a split, the job's (``r`` is one share's step)."""
        return self.jobs[id(r)][1] if self.split is not None else _layout_of(r, self.model)

    def threshold(self) -> float:
        """The ``keep``-th best step time so far (a bound at or above it cannot enter); after :meth:`widen`, the
        mixed time it set."""
        if self.cap is not None:
            return self.cap
        return -self.best[0][0] if len(self.best) >= self.keep else float("inf")

    def placed(self, lay):
        """``lay`` placed as :func:`~topo.training.step.estimate_step` places it (:func:`.mapping.default_placement`;
        a placed layout as it is): what :meth:`bound_of` and :meth:`refined` bound is that placement's step (an
        unplaced flex-dispatcher layout would count its all-to-all's copies per GPU, not per domain, above it). With
        :attr:`own_placement` (fabrics of a search that place a job apart, :func:`_places_apart`), a layout another
        fabric placed is placed again for this one, as its own step places the layout unplaced."""
        if self.split is not None:  # the job's layout: this fabric's share of it, unplaced
            lay = self.split(lay)[self.index]
        if self.own_placement and lay.gpus_per_domain_used is not None:
            lay = lay.model_copy(update={"gpus_per_domain_used": None})
        return default_placement(lay, self.spec.gpus_per_domain, self.fabric.layout.num_gpus)[0]

    def memory_of(self, lay, state, nccl: float, ep_buf: float):
        """The memory per GPU of ``lay`` (:func:`memory_per_gpu`); with ``state`` (:attr:`job_form`'s ranks), of
        ``lay`` with its ZeRO state sharded over them, its NCCL and expert-parallel buffers ``lay``'s own (``nccl``,
        ``ep_buf``), as :func:`~topo.training.multisite_memory.job_memory` keeps the share's (regions78: the state
        layout's wider data-parallel group counted its buffers, 201 MB more than ``topo train REGION`` holds)."""
        dom = self.spec.gpus_per_domain
        if state is None:
            return memory_per_gpu(self.model, lay, self.gpu.memory_bytes, generation=self.gpu.generation,
                                  activations=self.act_cache, gpus_per_domain=dom)
        mem = memory_per_gpu(self.model, state_layout(lay, state), self.gpu.memory_bytes,
                             generation=self.gpu.generation, activations=self.act_cache, gpus_per_domain=dom)
        return replace(mem, nccl_bytes=nccl, ep_buffers_bytes=ep_buf)

    def bound_of(self, lay, keys):
        """Memory check and compute + communication-floor bound (None: does not fit), a lower bound on the step of
        ``lay`` placed or not (:meth:`placed`); ``keys`` are :func:`_keys` of ``lay`` (with a split, of the share).
        With :attr:`job_form`, the memory is of the share with its state sharded as its job shards it."""
        state = None if self.job_form is None else self.job_form.state_dp(lay)
        lay = self.placed(lay)
        keys = _keys(lay) if self.split is not None else keys
        mk, bk, _ = keys
        dom = self.spec.gpus_per_domain  # NCCL's buffers read the rank order,
        nccl = nccl_buffer_bytes(lay, self.model.moe is not None, dom)  # which the shape's key leaves out
        ep_buf = ep_buffer_bytes(self.model, lay, dom)  # HybridEP's probabilities read the domain's EP ranks too
        mem = self.mem_cache.get((mk, nccl, ep_buf))
        if mem is None:
            shape = self.mem_cache.get(mk)  # the same shape in another rank order or with another dispatcher:
            # only NCCL's buffers and the flex dispatcher's differ (memory_per_gpu reads no other field of them)
            if shape is None:
                mem = shape = self.mem_cache[mk] = self.memory_of(lay, state, nccl, ep_buf)
            else:
                mem = replace(shape, nccl_bytes=nccl, ep_buffers_bytes=ep_buf)
            self.mem_cache[(mk, nccl, ep_buf)] = mem
        if not mem.fits:
            return None, mem
        mem = self.nvls_checked(lay, mem, mk)
        if not mem.fits:
            return None, mem
        got = self.bound_cache.get(bk)
        if got is None:
            # no sync-to-sync wait: a lower bound; blocks priced once for the layouts that time them alike
            if self.model.moe is None:
                sc = stage_compute(self.model, lay, self.gpu, math.inf, self.blocks)
            else:  # and the longest waits (cover 0) on the same rows, priced once (only the waits differ)
                least, most = rank_computes_at(self.model, lay, self.gpu, (math.inf, 0.0), self.blocks)
                sc = least[0]
                self.waits[(bk, 0.0)] = _rank_of(most, lay, sc)
            wide = self.waited(lay, sc, bk, 0.0)  # the floors hide behind the widest windows the host's waits give
            stage = traffic_stage(lay, sc)
            tp_f, ep_f = _comm_floor_s(self.spec, lay, step_traffic(self.model, lay, stage), wide,
                                       tp_overlap=tp_overlap_on(lay, self.model),
                                       tp_blocks=stage_tp_blocks(self.model, lay, stage))
            amax_f = amax_kernels_s(lay, self.gpu.kernels.launch_gpu_s)  # the step's gaps (estimate_step)
            got = self.bound_cache[bk] = (_bound(lay, sc, tp_f, ep_f, amax_s=amax_f), sc, tp_f, ep_f, amax_f)
        return got[0], mem

    def nvls_checked(self, lay, mem, key):
        """``mem`` (the memory without NCCL's NVLS buffers) where the layout fits with every communicator that may
        run NVLS holding its largest buffer (:func:`~topo.training.nvls_buffers.nvls_bound_bytes` of
        :func:`~topo.training.step.nvls_communicators`: those no expert dispatcher reads kept per shape ``key``, the
        EP ones per shape and dispatcher); else with the least NVLS bytes the step can count
        (:func:`~topo.training.step.least_nvls_bytes`, its collectives routed as the step routes them), so a layout
        that cannot fit as estimated is dropped here, and none that can is. ``lay`` placed as in :meth:`bound_of`."""
        if not self.spec.nvls:  # no NVLink SHARP: the engine never chooses NVLS
            return mem
        with_ep = (key, lay.ep_dispatcher, lay.ep_flex_backend)
        bound = self.nvls_bounds.get(with_ep)
        if bound is None:
            free = self.nvls_free.get(key)
            if free is None:
                free = self.nvls_free[key] = nvls_communicators(self.model, lay, self.engine.algorithm,
                                                                  "dispatcher_free")
            comms = free | nvls_communicators(self.model, lay, self.engine.algorithm, "dispatcher")
            bound = self.nvls_bounds[with_ep] = nvls_bound_bytes(
                self.profile, self.gpu.generation, self.spec.gpus_per_domain, len(comms))
        if replace(mem, nvls_bytes=bound).fits:
            return mem
        try:
            mapping = map_layout(lay, self.spec.gpus_per_domain, self.fabric.layout.num_gpus)
        except TopoError:
            return mem  # its groups do not map: :meth:`run` counts it invalid
        self.refuse_failed(lay)
        return replace(mem, nvls_bytes=least_nvls_bytes(self.engine, self.model, lay, mapping, self.gpu))

    def refuse_failed(self, lay) -> None:
        """Refuse placed ``lay`` where this fabric's failed parts are under the job, as its step would first
        (:func:`~.mapping.refuse_failed_placement`), before a bound routes any of its collectives; once a placement
        (fixb74: the router's "a rank of the communicator" line, and on a region's second site the first named)."""
        key = (lay.gpus, lay.first_gpu, tuple(lay.skip_domains), lay.gpus_per_domain_used)
        if self.fabric.failures and key not in self.placements_ok:
            refuse_failed_placement(lay, self.fabric)
            self.placements_ok.add(key)

    def waited(self, lay, sc, bk, cover_s: float):
        """The compute of ``sc``'s pipeline rank (the step's rank under DualPipe, :func:`.step.traffic_stage` None)
        with the host's waits the step gives it at EP cover ``cover_s`` (:func:`.operators.rank_computes`): the
        step's own compute at the step's cover; at cover 0 the longest waits (a cover only shortens them), so the
        widest windows any step of the layout hides behind. ``sc`` itself without MoE (the cover is read by MoE
        layers only); ``bk`` is the layout's bound key."""
        if self.model.moe is None:
            return sc
        got = self.waits.get((bk, cover_s))
        if got is None:
            got = self.waits[(bk, cover_s)] = _rank_of(rank_computes(self.model, lay, self.gpu, cover_s, self.blocks),
                                                        lay, sc)
        return got

    def refined(self, lay, bound, keys, above: float = math.inf) -> float:
        """``bound`` with the layout's exposed TP, DP, EP, CP and PP times from collectives already routed for other
        layouts (no new routing, :func:`~topo.training.step.exposed_routed`): the step-time formula with those
        times, the TP and EP floors where they are not routed yet, and the DP floor (:meth:`_dp_floor`), which is
        left out once the rest reaches ``above`` (the threshold); ``lay`` placed as in :meth:`bound_of`.

        A dropless MoE's step waits on the host (:func:`.operators.rank_computes`), which lengthens its compute and
        widens every window its communication hides behind: each exposed term may shrink by the whole wait while
        the compute grows by it once. Once the expert all-to-alls the waits depend on are routed
        (:func:`~topo.training.step.routed_ep_cover_s`) the terms are read on the step's own compute; before, the
        compute counts no wait, the floors hide behind the longest waits' windows (:meth:`waited` at cover 0), and
        DP counts its floor alone (:func:`~topo.training.step.dp_floor_s`, whatever the windows)."""
        lay = self.placed(lay)
        keys = _keys(lay) if self.split is not None else keys
        _, sc, tp_f, ep_f, amax_f = self.bound_cache[keys[1]]
        try:
            mapping = map_layout(lay, self.spec.gpus_per_domain, self.fabric.layout.num_gpus)
        except TopoError:
            return bound
        cover = routed_ep_cover_s(self.engine, self.model, lay, mapping) if self.model.moe is not None else 0.0
        if cover is None:
            count, wide = sc, self.waited(lay, sc, keys[1], 0.0)
        else:
            count = wide = self.waited(lay, sc, keys[1], cover)
        traffic = step_traffic(self.model, lay, traffic_stage(lay, sc))
        got = exposed_routed(self.engine, self.model, lay, mapping, wide, self.gpu, traffic)
        # TP hides behind one window, the micro-batches' compute, which ``wide`` makes at least the step's (a cover
        # only shortens the host's waits): its routed term there is at most the step's, routed cover or not (tidy65)
        tp = got["tp"] if got["tp"] is not None else tp_f
        ep = got["ep"]
        if ep is None:  # not routed yet: the floor with the EP groups as mapped (rank order, etp stride)
            ep = ep_f if lay.ep <= 1 else _comm_floor_s(self.spec, lay, traffic, wide, mapping.members_in_domain("ep"),
                                                        tp_overlap=tp_overlap_on(lay, self.model))[1]
        cp, pp = got["cp"] or 0.0, got["pp"] or 0.0  # the step's own where routed
        # DP hides behind the forward's and the backward's windows apart, the NVLink-only exposed time shared out
        # by the compute's split (step._dp_windows): cover 0's waits, where more of them fall in the backward, can
        # narrow the forward's window while TP's exposure drops, so the routed DP term is read on the step's own
        # compute only
        dp = got["dp"] if count is wide else 0.0
        out = max(bound, _bound(lay, count, tp, ep, dp, cp, pp, amax_f))
        if out >= above:
            return out
        least = self._dp_floor(lay, mapping, traffic, lay.microbatches * count.microbatch_s + tp + ep + cp + pp)
        return out if least <= dp else max(out, _bound(lay, count, tp, ep, least, cp, pp, amax_f))

    def _dp_floor(self, lay, mapping, traffic: list[dict], covered_s: float) -> float:
        """The floor under the layout's exposed DP seconds (:func:`~topo.training.step.dp_floor_s`) given
        ``covered_s`` under its compute and other exposed seconds: each DP collective at its routed time where its
        groups were routed, else at the engine's bound without routing
        (:meth:`~topo.training.comm.CommEngine.time_floor`)."""
        one = []
        for it in traffic:
            if it["dim"] != "dp":
                continue
            G, key = mapping.groups(it["groups"]), mapping.group_key(it["groups"])
            got = self.engine.time(it["collective"], G, it["size_bytes"], cached_only=True, key=key)
            one.append(got.time_s if got is not None else
                       self.engine.time_floor(it["collective"], G, it["size_bytes"], key=key))
        return dp_floor_s(traffic, lay, one, covered_s)

    def _placeable(self, lay) -> bool:
        """Whether the layout's groups map onto the fabric as placed (a TP group inside one NVLink domain)."""
        lay = self.placed(lay)
        try:
            map_layout(lay, self.spec.gpus_per_domain, self.fabric.layout.num_gpus)
        except TopoError as exc:
            self.unplaced = self.unplaced or (lay, exc)
            return False
        return True

    def _full(self) -> bool:
        return self.max_layouts is not None and self.evaluated >= self.max_layouts

    def run(self, pending) -> None:
        """Evaluate a pass's layouts, lowest bound first, skipping those the threshold already rules out. A layout
        whose refined bound (:meth:`refined`) is above the next one's goes back in line at that bound, and is
        refined again when its turn comes if the engine has routed anything since; so the layouts the threshold
        falls fastest with are evaluated first (an exact search still: none is skipped unless its bound is at or
        above the threshold)."""
        line = [(bound, seq, lay, keys, -1) for bound, seq, lay, keys in pending]  # -1: not refined yet
        heapq.heapify(line)
        while line:
            bound, seq, lay, keys, routed = heapq.heappop(line)
            if bound >= self.threshold() or self._full():
                break  # the threshold only falls: every layout left is at or above it too
            if routed != self.routed_calls():  # refined before nothing was routed since
                routed = self.routed_calls()
                bound = self.refined_all(lay, bound, keys, self.threshold())
                if bound >= self.threshold():
                    continue  # its collectives (routed for another layout, or their floors) rule it out
                if line and bound > line[0][0]:
                    heapq.heappush(line, (bound, seq, lay, keys, routed))
                    continue
            if not all(x._placeable(lay) for x in self.sites()):  # e.g. TP 16 on NVL72 racks filled to 72
                self.invalid += 1
                self.done.add(keys[2])
                continue
            r = self.step_of(lay, contention=False)
            self.evaluated += 1
            self.done.add(keys[2])
            fits = self.fits(r, lay)
            if fits and self.cap is not None:
                self.mix_in(r)
            elif fits:
                item = (-r.step_time_s, next(self.counter), r)
                if len(self.best) < self.keep:
                    heapq.heappush(self.best, item)
                elif item[0] > self.best[0][0]:
                    self.spill.append(heapq.heapreplace(self.best, item))
                else:
                    self.spill.append(item)
            if self.progress is not None and self.evaluated % 64 == 0:
                self.progress(self.evaluated, None, "layouts evaluated")

    def fits(self, r, lay) -> bool:
        """Whether step ``r`` of ``lay`` fits: its own ``fits``, else :attr:`job_form`'s ``fits_by`` (a region's job in
        the form it takes; one that does not is counted as too big, its share's memory the closest's)."""
        if r.fits or self.job_form is None:
            return r.fits
        if self.job_form.fits_by(r, self.per_site.get(id(r), (r,))):
            return True
        self.too_big += 1
        self._closer(r.memory, lay, ("", f" (its state sharded over its own {lay.dp:,} data-parallel ranks; its job "
                                         "does not fit in the form it takes either)"))
        return False

    def _closer(self, mem, lay, said: tuple = ("", "")) -> None:
        """Remember ``lay`` (its memory ``mem``; ``said``: the words before that memory and after its "per GPU", how
        it is counted) where it is the smallest that does not fit so far (:meth:`raise_if_none_fits` words it)."""
        if self.closest is None or mem.total_bytes < self.closest[0].total_bytes:
            self.closest = (mem, lay, said)

    def _count(self, lay, mem, first: bool, why: str = "") -> None:
        """The first pass counts every candidate (``lay`` None: invalid, for reason ``why``; ``mem`` given: does
        not fit) and remembers the smallest that does not fit."""
        if not first:
            return
        self.considered += 1
        if self.progress is not None and self.considered % 8192 == 0:
            self.progress(self.considered, None, "layouts considered")
        if lay is None:
            self.invalid += 1
            self.reasons[why] = self.reasons.get(why, 0) + 1
        elif mem is not None:
            self.too_big += 1
            self._closer(mem, lay, ("", "") if self.job_form is None else
                         ("at least ", f" (its ZeRO state sharded over {self.job_form.state_dp(lay):,} data-parallel "
                                       f"ranks{self.job_form.said})"))

    def one_pass(self, candidates, batch: int, floor_bound: float, first: bool) -> float:
        """Keep the ``batch`` lowest bounds above ``floor_bound`` not yet decided (a bounded heap), evaluate them;
        return the lowest bound left out."""
        heap: list = []  # max-heap on bound: (-bound, seq, layout, keys)
        cut = float("inf")
        for lay, why in candidates:
            if lay is None:
                self._count(None, None, first, why)
                if first:
                    self.bounds.append(math.inf)
                continue
            # placed as the step places it (64 of 72 on NVL72), so the bound sees the step's groups
            lay, notes = self._placed_with_notes(lay)
            for x, said in zip(self.sites(), notes):
                if said:  # each fabric's own (walk29: a region's two notes were both said as the first site's)
                    x.placement_notes.add(said)
            keys = _keys(lay)
            bound, mem = self.bound_all(lay, keys)
            if first:
                self.bounds.append(math.inf if bound is None else bound)
            if bound is None:
                self._count(lay, mem, first)
                continue
            self._count(lay, None, first)
            if bound < floor_bound or bound >= self.threshold() or keys[2] in self.done:
                continue
            item = (-bound, next(self.counter), lay, keys)
            if len(heap) < batch:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                cut = min(cut, -heapq.heapreplace(heap, item)[0])
            else:
                cut = min(cut, bound)
        self.run([(-b, c, lay, keys) for b, c, lay, keys in heap])
        if self.progress is not None:
            self.progress(self.evaluated, None, f"layouts evaluated of {self.considered:,} considered")
        return cut

    def _placed_with_notes(self, lay) -> tuple:
        """``lay`` placed on the first fabric and what :func:`.mapping.default_placement` says of it on each (None
        where nothing; :meth:`_note_on` each other's); with a split, ``lay`` as it is (the job's: each fabric places
        its own share, :meth:`placed`) and each fabric's note of its own share."""
        if self.split is not None:
            return lay, [default_placement(x.split(lay)[x.index], x.spec.gpus_per_domain, x.fabric.layout.num_gpus)[1]
                         for x in self.sites()]
        placed, note = default_placement(lay, self.spec.gpus_per_domain, self.fabric.layout.num_gpus)
        return placed, [note] + [self._note_on(x, placed) for x in self.others]

    def _note_on(self, other, lay):
        """What :func:`.mapping.default_placement` says of ``lay`` on ``other``'s fabric where it places the layout
        there for itself (:attr:`own_placement`), else None (the first fabric's note is the placement's)."""
        if not other.own_placement:
            return None
        raw = lay.model_copy(update={"gpus_per_domain_used": None})
        return default_placement(raw, other.spec.gpus_per_domain, other.fabric.layout.num_gpus)[1]

    def passes(self, candidates, batch: int, count: bool = True) -> None:
        """Passes over the candidates until the best found beats every bound a pass left out (exact); ``count``:
        the first pass counts the candidates (not again after :meth:`widen`)."""
        floor_bound, first = -float("inf"), count
        while True:
            # after the first walk only the layouts whose bound is in the pass's range are built (the bounds by
            # place, :attr:`bounds`): the others one_pass would drop, unbuilt or not
            wanted = None if first else (lambda i, lo=floor_bound: lo <= self.bounds[i] < self.threshold())
            cut = self.one_pass(candidates(wanted), batch, floor_bound, first)
            first = False
            if cut >= self.threshold() or cut == float("inf") or self._full():
                return
            floor_bound = cut

    def raise_if_none_fits(self, gpus: int, global_batch: int) -> None:
        if self.best:
            return
        model, cap = self.model, self.gpu.memory_bytes
        if self.unplaced is not None and not self.evaluated:  # layouts fit, none could be placed: why, not the
            lay, exc = self.unplaced  # memory of one that does not fit (rev64: --skip-domains 999 blamed the memory)
            raise TopoError(f"no layout of {model.name} that fits on {gpus:,} GPUs can be placed; the first "
                            f"({lay.describe()}): {exc.message}", source=exc.source, key=exc.key)
        if self.closest is None:
            why, n = max(self.reasons.items(), key=lambda it: it[1], default=("", 0))
            rule = why in ("global_batch", "pp")  # the enumeration's own divisibility checks (candidate_layouts)
            raise TopoError(f"no layout of {model.name} on {gpus:,} GPUs with a global batch of {global_batch:,} "
                            f"satisfies the divisibility rules ({self.invalid:,} tried)"
                            + ("" if rule or not n else f"; the most common reason ({n} of them): {why}")
                            + _hint(common_factor_note(gpus, global_batch)), key="gpus")
        mem, lay, (least, said) = self.closest
        raise TopoError(f"{model.name} fits in no layout on {gpus} GPUs: the smallest ({lay.describe()}) needs {least}"
                        f"{format_in(mem.total_bytes, 'GB', '.1f')} per GPU{said}, "
                        f"{format_in(mem.short_bytes, 'GB', '.1f')} "
                        f"more than the {self.spec.gpu}'s {format_in(cap, 'GB', '.1f')} "
                        f"({format_in(cap, 'GiB', '.1f')})", key="model")

    def widen(self, mixed: list, top: int) -> bool:
        """Whether a layout left out of the ``keep`` best alone could still enter the ``top`` once mixed (and
        figured, :meth:`rank_of`); if so the threshold becomes the ``top``-th figure (:meth:`mix_in`), the
        evaluated layouts that left the pool are mixed where they are below it, and the candidates are walked again
        (each layout evaluated once), each new one below the threshold mixed as it comes. A layout left out is at
        or above the ``keep``-th best time alone (:meth:`threshold`), and a mix only slows (a figure is at or above
        the mixed step), so none can enter when the ``top``-th figure is at or below it. Above it, one can (walk23:
        DeepSeek-V3 on 7,168 GB200 with DeepEP: ZeRO-3 layouts fastest alone took the pool of 6 and slowed 13%
        mixed, to 2.789 s, while a ZeRO-2 layout outside it stepped in 2.686 s; regsearch67: a region's DCI
        exposes more of one layout's gradients than another's). Once widened, every layout below the threshold is
        mixed: exact."""
        if self.cap is not None or len(self.best) < self.keep or not mixed or self._full():
            return False  # widened already, or every layout that fits was kept (nothing pruned)
        cap = self.rank_of(mixed[min(top, len(mixed)) - 1])[0]
        if len(mixed) < top or cap <= round(self.threshold(), 9):
            return False
        self.cap, self.top, self.mixed = cap, top, sorted(mixed, key=self.rank_of)
        for _, _, r in sorted(self.spill, reverse=True):
            self.mix_in(r)
        self.spill = []
        return True

    def mix_in(self, r) -> None:
        """Once widened: ``r`` (evaluated alone) mixed (:attr:`mix`) when its time alone is below the threshold,
        which falls to the ``top``-th figure (:meth:`rank_of`)."""
        if self.cap is None or round(r.step_time_s, 9) >= self.cap:
            return
        self.mixed.append(self.step_of(self.layout_of(r), contention=True) if self.mix else r)
        self.mixed.sort(key=self.rank_of)
        self.cap = min(self.cap, self.rank_of(self.mixed[self.top - 1])[0])

    def rank_of(self, r) -> tuple:
        """The place of step ``r`` among the ranked: its :attr:`rank_by` figure (its step without one), to 1e-9,
        less memory first among equals; each step's figure found once."""
        if self.rank_by is None:
            return _rank(r)
        got = self.figures.get(id(r))
        if got is None:
            got = self.figures[id(r)] = (r, self.rank_by(r, self.per_site.get(id(r), (r,))))
        return round(got[1], 9), r.memory_per_gpu_bytes

    def ranked(self, top: int, contention: bool) -> list:
        """The best, re-evaluated with the traffic mix (``contention``) and ordered by their figures
        (:meth:`rank_of`): a mix only slows (every slowdown >= 1) and a figure is at or above the mixed step, so the
        walk stops when the next one alone cannot enter the top."""
        if self.cap is not None:  # widened: every layout below the threshold was mixed as it came
            return list(self.mixed)
        results = sorted((r for _, _, r in self.best), key=_rank)
        if contention or self.rank_by is not None:
            mixed: list = []
            for r in results:
                if len(mixed) >= top and round(r.step_time_s, 9) > sorted(map(self.rank_of, mixed))[top - 1][0]:
                    break
                mixed.append(self.step_of(self.layout_of(r), contention=True) if contention else r)
            results = mixed
        return sorted(results, key=self.rank_of)


def _layout_of(r, model) -> ParallelLayout:
    fields = set(ParallelLayout.model_fields)
    return ParallelLayout(**{k: v for k, v in r.layout.items() if k in fields and not (k == "etp" and v == r.layout["tp"]
                                                                              and model.moe is None)})


def _hint(note: str) -> str:
    return f"; {note}: choose a GPU count or a global batch with more factors in common" if note else ""


def common_factor_note(gpus: int, global_batch: int) -> str:
    """Why few layouts divide when the GPUs and the batch share little (empty when they share enough): dp divides
    both (``global_batch % (dp x micro_batch) == 0``), so tp x cp x pp is a multiple of gpus / gcd; and the most GPUs
    at or below ``gpus`` that leave it a factor the note is silent on. Silent when that factor divides 8 (a power of
    two a tensor-parallel group inside a server or a pipeline of 2-8 stages takes up); any other factor is said,
    an odd one too (walk9: 16,128 GB200 = 224 racks of 72 with a batch of 8,192 left 63, which no DeepSeek-V3
    layout is; walk23: 7,168 GPUs with a batch of 2,048 leave 7, which forced pp 7 on two micro-batches, MFU 3.1%).

    Parameters
    ----------
    gpus : int
        The job's GPUs.
    global_batch : int
        Sequences per optimizer step.

    Returns
    -------
    str
        The note, or "" when ``gpus / gcd(gpus, global_batch)`` divides 8.
    """
    common = math.gcd(gpus, global_batch)
    if 8 % (gpus // common) == 0:
        return ""
    n = np.arange(gpus, 0, -1, dtype=np.int64)
    n = int(n[8 % (n // np.gcd(n, global_batch)) == 0][0])  # 1 always qualifies
    left = n // math.gcd(n, global_batch)
    return (f"dp divides both the {gpus:,} GPUs and the batch of {global_batch:,} (their greatest common factor is "
            f"{common:,}), so tp x cp x pp is a multiple of {gpus // common:,}; {n:,} GPUs would leave "
            + (f"it a multiple of {left}" if left > 1 else "no such factor"))
