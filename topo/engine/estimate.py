"""Estimate a collective: the one-call composition of the engine's stages.

    placement -> schedule (:mod:`topo.engine.algorithms`, no fabric) -> loads (:mod:`topo.engine.loads`, the router)
    -> cost (:mod:`topo.engine.cost`, a profile) -> results (:mod:`topo.engine.result`, plain data)

``auto`` routes and costs NCCL's own algorithms with each protocol, and per size runs the one the routed model times
fastest (option ``choose = "fastest"``, the default), or the algorithm NCCL's tuner picks by its own cost model
(``choose = "nccl"``, :mod:`topo.engine.tuner`), timed on the routed fabric.
Options are one typed object, :class:`topo.engine.options.EstimateOptions` (keyword arguments build it).
"""

from __future__ import annotations

import dataclasses
import math

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from ..errors import AlgorithmUnavailable, ClassesDiverge, ProtocolUnavailable, TopoError
from ..fabric.fabric import Fabric
from ..units import UnitError, format_size, format_time, parse_size_bytes
from .algorithms import build_schedule
from .bounds import seconds_per_byte_bound
from .collectives import (DATA_TYPES, PER_RANK, REDUCING, ROOTED, SCALING_OPS, algorithm_candidates, busbw_factor,
                          count_column, nccl_tests_count, normalize_collective)
from .cost import Costed, best_protocol, class_efficiency, cost_schedule, fill_bytes, limit_of, usable_capacity
from .loads import ScheduleLoads, load_schedule
from .options import EstimateOptions
from .paths import stand_in_notes
from .stand_in_load import off_bottleneck_notes
from .placement import Placement, place
from .profiles import Profile, fabric_profile, resolve_profile
from .result import Bottleneck, EstimateResult, LinkTable, SizeResult
from .route import Router
from .schedule import NodeShape
from .host_launch import host_floor_s
from .interval import time_range_s
from .tuner import nccl_choice

__all__ = ["estimate", "default_profile", "size_sweep", "Evaluation", "CollectiveTime", "evaluate", "size_result",
           "placement_for", "evaluate_unrouted"]

_TYPE_BYTES = 4  # nccl-tests' default type: float
MAX_SWEEP_SIZES = 10_000  # a longer sweep is an error that says how to shorten it


def default_profile(fabric: Fabric) -> Profile:
    """The NCCL-derived profile of the fabric's GPU generation and network technology, on its servers' CPU
    (:func:`topo.engine.profiles.fabric_profile`, which this names for the estimate's callers).

    Parameters
    ----------
    fabric : Fabric

    Returns
    -------
    Profile
    """
    return fabric_profile(fabric)


def size_sweep(min_bytes, max_bytes, factor: float = 2.0, step_bytes=None) -> list[int]:
    """nccl-tests' ``-b MIN -e MAX -f FACTOR`` sweep: ``MIN x FACTOR**k`` up to ``MAX``, rounded to whole bytes,
    each size once; or its ``-i STEP`` sweep: ``MIN + k x STEP`` up to ``MAX``.

    Parameters
    ----------
    min_bytes, max_bytes : int or str
        Sizes as nccl-tests takes them (8, 64K, 1M, 16G) or with units (1GiB).
    factor : float
        Multiplier between sizes (> 1).
    step_bytes : int or str, optional
        Bytes between sizes instead of a factor (nccl-tests' ``-i``).

    Returns
    -------
    list of int

    Raises
    ------
    TopoError
        A bad size or factor (keyed ``min_bytes``, ``max_bytes``, ``factor``), or more than
        :data:`MAX_SWEEP_SIZES` sizes (keyed ``factor``: the message says the factor to use).
    """
    try:
        lo = parse_size_bytes(min_bytes)
    except UnitError as exc:
        raise TopoError(str(exc), key="min_bytes") from None
    try:
        hi = parse_size_bytes(max_bytes)
    except UnitError as exc:
        raise TopoError(str(exc), key="max_bytes") from None
    if hi < lo:
        def shown(n):  # as given (1 GiB) and as the table prints it, nccl-tests' raw bytes
            return format_size(n) + (f" ({n:,} B)" if n >= 1024 else "")
        raise TopoError(f"the largest size {shown(hi)} is below the smallest {shown(lo)}; allowed: a largest size at "
                        "or above the smallest (nccl-tests runs no size then)", key="max_bytes")
    if step_bytes is not None:
        return _size_steps(lo, hi, step_bytes)
    if isinstance(factor, bool) or not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1):
        # inf would step past every size after the first: a sweep of one size, silently
        raise TopoError(f"the step factor must be a finite number > 1, got {factor!r}", key="factor")
    # count first (never stop silently): sizes lo * factor**k up to hi, repeated sizes once
    count = int(math.floor(math.log(hi / lo) / math.log(factor) * (1 + 1e-12))) + 1
    if count > MAX_SWEEP_SIZES:
        need = math.ceil((hi / lo) ** (1 / (MAX_SWEEP_SIZES - 1)) * 1e6) / 1e6
        raise TopoError(f"{lo:,} to {hi:,} bytes by factors of {factor!r} is {count:,} sizes; at most "
                        f"{MAX_SWEEP_SIZES:,}: use a factor of at least {need!r} or a narrower range",
                        key="factor")
    sizes, s = [], float(lo)
    while s <= hi * (1 + 1e-12):
        sizes.append(int(round(s)))
        s *= factor
    return list(dict.fromkeys(sizes))


def _size_steps(lo: int, hi: int, step_bytes) -> list[int]:
    """``lo, lo + step, ...`` up to ``hi`` (nccl-tests' ``-i``), at most :data:`MAX_SWEEP_SIZES` sizes."""
    try:
        step = parse_size_bytes(step_bytes)
    except UnitError as exc:
        raise TopoError(str(exc), key="step_bytes") from None
    if step < 1:
        raise TopoError(f"the step must be 1 byte or more, got {step_bytes!r}", key="step_bytes")
    count = (hi - lo) // step + 1
    if count > MAX_SWEEP_SIZES:
        raise TopoError(f"{lo:,} to {hi:,} bytes in steps of {step:,} is {count:,} sizes; at most "
                        f"{MAX_SWEEP_SIZES:,}: use a step of at least {-(-(hi - lo) // (MAX_SWEEP_SIZES - 1)):,} "
                        "bytes or a narrower range", key="step_bytes")
    return list(range(lo, hi + 1, step))


def placement_for(fabric: Fabric, opts: EstimateOptions) -> Placement:
    """The placement the options describe (``ranks``, or ``gpus`` placed as ``placement``).

    Parameters
    ----------
    fabric : Fabric
    opts : EstimateOptions

    Returns
    -------
    Placement
    """
    if opts.ranks is not None:
        return place(fabric, gpus=opts.ranks, groups=opts.groups, group_layout=opts.group_layout,
                     order=opts.rank_order)
    return place(fabric, opts.gpus, kind=opts.placement, rail=opts.rail, groups=opts.groups,
                 group_layout=opts.group_layout)


class CollectiveTime(NamedTuple):
    """One collective's time at one size (:meth:`Evaluation.time`): the algorithm and protocol run, and the time's
    two parts."""

    time_s: float
    algorithm: str
    protocol: str
    latency_s: float
    bandwidth_s: float


@dataclass
class Evaluation:
    """One collective's candidates routed and costed, size-independent: what a size sweep, a traffic mix or
    a training step reads times from (:meth:`time`).

    Attributes
    ----------
    collective : str
    placement : Placement
    profile : Profile
    router : Router
    costed : dict of str to Costed
        Every candidate algorithm that can run.
    unavailable : dict of str to str
        The candidates that cannot, with the reason.
    protocols : dict of str to tuple of str
        The protocols each candidate may run.
    choose : str
        ``fastest`` or ``nccl`` (see :class:`EstimateOptions`).
    sharing : str
    protocol : str, optional
        The protocol the options pinned.
    op : str, optional
        The reduction operation the options name.
    pruned : dict of str to str
        Candidates left unrouted because a lower bound on their time shows they cannot be the fastest at
        ``sizes`` (:func:`evaluate` with ``at_sizes``), with the reason.
    sizes : tuple of int, optional
        With ``pruned``, the only sizes :meth:`time` answers for.
    gpus_per_process : int
        GPUs one host thread launches in turn (nccl-tests ``-g``); above 1 every time is at least the host's
        launch floor (:func:`topo.engine.host_launch.host_floor_s`).
    phases_summed : bool
        Each candidate's loads are summed over its phases (:meth:`summed`): :meth:`with_profile` refuses it.
    """

    collective: str
    placement: Placement
    profile: Profile
    router: Router
    costed: dict[str, Costed]
    unavailable: dict[str, str]
    protocols: dict[str, tuple[str, ...]]
    choose: str = "fastest"
    sharing: str = "equal"
    protocol: str | None = None  # the protocol the options pinned, if any
    op: str | None = None  # the reduction operation the options name (reported for reducing collectives)
    pruned: dict[str, str] = field(default_factory=dict)  # candidates not routed: they cannot be the fastest
    sizes: tuple[int, ...] | None = None  # the only sizes it answers for, when candidates were pruned
    gpus_per_process: int = 1  # GPUs one host thread launches in turn (nccl-tests -g): a floor per collective
    phases_summed: bool = False  # loads summed over phases (Evaluation.summed): times and totals only, no re-costing

    def __post_init__(self):
        self.num_domains = self.placement.num_domains  # computed once: every size reads it

    def with_profile(self, profile: Profile) -> Evaluation:
        """The same routed loads costed under another profile: what a fit does at every step.

        The schedules depend on the profile only through ``reference_ranks_per_domain`` and ``nvls_max_heads``,
        which must be the same (else :func:`evaluate` again).

        Parameters
        ----------
        profile : Profile

        Returns
        -------
        Evaluation
        """
        if self.pruned:
            raise ValueError("candidates were pruned for this evaluation's profile and sizes: evaluate again")
        if self.phases_summed:
            raise ValueError("this evaluation's loads are summed over phases (Evaluation.summed): evaluate again")
        if (profile.reference_ranks_per_domain, profile.nvls_max_heads) != (
                self.profile.reference_ranks_per_domain, self.profile.nvls_max_heads):
            raise ValueError("the schedules depend on reference_ranks_per_domain and nvls_max_heads: evaluate again")
        cap = usable_capacity(self.router, profile)
        costed, protocols = {}, {}
        for name, c in self.costed.items():
            try:
                protos = _protocols(profile, c.schedule.family, self.protocol)
            except AlgorithmUnavailable:
                continue
            costed[name] = cost_schedule(c.loads, self.router, cap, self.sharing)
            protocols[name] = protos
        return dataclasses.replace(self, profile=profile, costed=costed, protocols=protocols)

    def summed(self) -> Evaluation:
        """This evaluation with each candidate's loads summed over its phases and its schedule's transfers dropped
        (:meth:`topo.engine.loads.ScheduleLoads.summed`): the same times, bottlenecks, link bytes and traffic-mix
        loads, bit for bit, in a fraction of the memory (what a cache of many evaluations holds); only
        :meth:`with_profile`, which drains each phase again, refuses it.

        Returns
        -------
        Evaluation
        """
        if self.phases_summed:
            return self
        costed = {n: dataclasses.replace(c, loads=c.loads.summed()) for n, c in self.costed.items()}
        return dataclasses.replace(self, costed=costed, phases_summed=True)

    def time(self, size_bytes: int, algorithm: str | None = None) -> CollectiveTime | None:
        """The time at one size of the algorithm NCCL's tuner picks (``choose = "nccl"``), of the fastest
        candidate (``"fastest"``), or of ``algorithm`` when given; each with the protocol the routed model times
        fastest.

        Parameters
        ----------
        size_bytes : int
        algorithm : str, optional

        Returns
        -------
        CollectiveTime or None
            None when ``algorithm`` is not a costed candidate.
        """
        if self.pruned and algorithm is None and int(size_bytes) not in self.sizes:
            raise ValueError(f"this evaluation left out {', '.join(self.pruned)} for sizes "
                             f"{', '.join(map(str, self.sizes))} only; evaluate again for {size_bytes}")
        if algorithm is None and self.choose == "nccl" and len(self.costed) > 1:
            algorithm = nccl_choice(self.costed, self.protocols, self.profile, size_bytes, self.collective,
                                    self.placement.num_ranks, self.num_domains).algorithm
        best = None
        for name, c in self.costed.items():
            if algorithm is not None and name != algorithm:
                continue
            t = best_protocol(c, self.profile, self.protocols[name], size_bytes, self.collective,
                              self.placement.num_ranks, self.num_domains)
            if best is None or t.time_s < best.time_s:
                best = CollectiveTime(t.time_s, name, t.protocol, t.latency_s, t.bandwidth_s)
        floor = host_floor_s(self.profile, self.gpus_per_process)
        if best is not None and floor > best.time_s:  # the host launches slower than the GPUs run: it sets the pace
            best = best._replace(time_s=floor, latency_s=best.latency_s + floor - best.time_s)
        return best

    def bottleneck(self, size_bytes: int, algorithm: str, time_s: float, latency_s: float,
                   bandwidth_s: float, protocol: str | None = None) -> Bottleneck | None:
        """The resource that bounds ``algorithm``'s bandwidth part at ``size_bytes``, and what limits the time.

        Parameters
        ----------
        size_bytes : int
        algorithm : str
        time_s, latency_s, bandwidth_s : float
            The algorithm's time at that size and its parts (from :meth:`time`).
        protocol : str, optional
            The protocol that time was run with; it names the limit (:func:`topo.engine.cost.limit_of`). Without
            it the limit is ``latency`` or ``link``.

        Returns
        -------
        Bottleneck or None
            None when no link carries bytes.
        """
        c = self.costed[algorithm]
        r = c.bottleneck_res
        if r < 0:
            return None
        d = self.router.describe_resource(r)
        per_link = c.bottleneck_bytes_per_byte * size_bytes / d["num_links"]
        line = self.router.capacity_Bps[r] / d["num_links"]
        fam = c.schedule.family
        if protocol is None:
            limit, eff = ("latency" if latency_s > bandwidth_s else "link"), 1.0
        else:
            limit = limit_of(c, self.profile, protocol, self.collective, self.placement.num_ranks, self.num_domains,
                             latency_s, bandwidth_s)
            eff = self.profile.efficiency(fam, protocol, self.num_domains)
        util = float(per_link / (line * time_s)) if time_s > 0 else 0.0
        fill = fill_bytes(c, self.profile, size_bytes)
        shares = dict(protocol_efficiency=float(eff),
                      class_efficiency=float(class_efficiency(self.router, self.profile)[self.router.level[r]]),
                      fill_share=size_bytes / (size_bytes + fill) if size_bytes > 0 else 1.0,
                      bandwidth_share=float(bandwidth_s / time_s) if time_s > 0 else 0.0)
        product = math.prod(shares.values())
        return Bottleneck(src=d["src"], dst=d["dst"], level=d["level"], direction=d["direction"],
                          num_links=d["num_links"], bytes=float(per_link), utilization=util,
                          bound="latency" if latency_s > bandwidth_s else "bandwidth", limit=str(limit),
                          fill_bytes=fill, other_share=util / product if product > 0 else 1.0,
                          aggregate=d.get("aggregate", ""), **shares)

    def link_bytes(self, size_bytes: int, algorithm: str) -> np.ndarray:
        """Bytes on every directed link (``2*link`` up, ``2*link+1`` down) for ``algorithm`` at ``size_bytes``.

        Parameters
        ----------
        size_bytes : int
        algorithm : str

        Returns
        -------
        numpy.ndarray
        """
        return self.router.real_link_loads(self.costed[algorithm].loads.total()) * size_bytes


def _protocols(profile: Profile, family: str, pinned: str | None) -> tuple[str, ...]:
    """The protocols a schedule of ``family`` may run under ``profile``: all it allows, or the pinned one."""
    protos = profile.protocols(family)
    if not protos:  # e.g. NVLS under an Ampere profile on a Hopper fabric: the profile does not price it
        raise AlgorithmUnavailable(f"profile {profile.name} has no {family} protocols (it does not run {family})")
    if pinned is None:
        return protos
    if family == "p2p" and pinned == "LL128":  # a profile may price it, but NCCL never picks it for p2p
        raise ProtocolUnavailable("NCCL runs send/receive (and an all-to-all's sends) with LL or Simple, never "
                                  "LL128 (src/enqueue.cc, addP2pToPlan)")
    if pinned not in protos:
        raise ProtocolUnavailable(f"it does not run with protocol {pinned} (it has: {', '.join(protos)})")
    return (pinned,)


def evaluate(fabric: Fabric, collective: str, options: EstimateOptions | None = None, router: Router | None = None,
             at_sizes: Sequence[int] | None = None, **kwargs) -> Evaluation:
    """Place, schedule, load and cost every candidate algorithm of ``collective`` (no sizes yet).

    Parameters
    ----------
    fabric : Fabric
    collective : str
        nccl-tests names (hyphens accepted).
    options : EstimateOptions, optional
    router : Router, optional
        A router to share (a traffic mix's members share one); default a new one for the options' ECMP and PXN.
    at_sizes : sequence of int, optional
        The only message sizes (bytes) the evaluation will be asked for. With ``choose = "fastest"``, a candidate
        whose lower bound (:func:`topo.engine.bounds.seconds_per_byte_bound`, no routed latency) is at no one of
        these sizes below the fastest candidate costed before it cannot be chosen, and is not routed
        (:attr:`Evaluation.pruned`); the fastest candidate and its time are those without ``at_sizes``. The
        evaluation then answers for these sizes only. An empty sequence names no size to prune for: every
        candidate is routed.
    **kwargs
        Fields of :class:`EstimateOptions`, replacing those of ``options``.

    Returns
    -------
    Evaluation

    Raises
    ------
    AlgorithmUnavailable
        The one algorithm asked for cannot run here (:class:`ProtocolUnavailable`: not with the pinned protocol).
    TopoError
        No candidate can run, or a bad option (keyed by the option's name).
    """
    opts = EstimateOptions.from_kwargs(options, **kwargs)
    coll = normalize_collective(collective)
    asked, candidates = algorithm_candidates(coll, opts.algorithm)
    pl = placement_for(fabric, opts)
    _check_two_ranks(coll, opts, pl)
    prof = resolve_profile(opts.profile, fabric)
    if router is None:
        router = Router(fabric, ecmp=opts.ecmp, subflows=opts.subflows, pxn=opts.pxn, salt=opts.hash_seed)
    prune = bool(at_sizes is not None and len(at_sizes) and opts.choose == "fastest")
    sizes = tuple(int(x) for x in at_sizes) if at_sizes is not None else None
    unavailable: dict[str, str] = {}
    run = _Candidates(fabric, coll, opts, pl, prof, router, sizes if prune else None, unavailable)
    candidates = _without_scaled_pat(coll, opts, asked, candidates, unavailable)
    for name in candidates:
        run.cost(name, single=len(candidates) == 1 and asked != "auto")
    if not run.costed:
        _raise_none_runs(coll, opts, prof, unavailable, run.by_protocol)
    return Evaluation(coll, pl, prof, router, run.costed, unavailable, run.protocols, opts.choose, opts.sharing,
                      opts.protocol, opts.op, run.pruned, sizes if run.pruned else None,
                      opts.gpus_per_process)


def _check_two_ranks(coll: str, opts: EstimateOptions, pl: Placement) -> None:
    """Refuse a communicator of one rank as the rank count's error, not the algorithms': every algorithm needs
    two ranks, so naming each one's reason would blame ``--algorithm`` for what ``--gpus``, ``--ranks`` or
    ``--groups`` asked."""
    if pl.num_ranks >= 2:
        return
    total = pl.num_groups * pl.num_ranks
    if pl.num_groups > 1:
        raise TopoError(f"{coll} needs at least 2 ranks a group: {total:,} GPUs in {pl.num_groups:,} groups leave "
                        f"{pl.num_ranks}; allowed: at most {total // 2:,} groups", key="groups")
    raise TopoError(f"{coll} needs at least 2 ranks, got {total}; allowed: 2 GPUs or more",
                    key="ranks" if opts.ranks is not None else "gpus")


def _without_scaled_pat(coll: str, opts: EstimateOptions, asked: str, candidates: list[str],
                        unavailable: dict[str, str]) -> list[str]:
    """``candidates`` without PAT for a reduce-scatter of a scaling op (said in ``unavailable``), which NCCL has no
    kernel for; an error when PAT was the one algorithm asked for."""
    if coll == "reduce_scatter" and opts.op in SCALING_OPS and "pat" in candidates:
        reason = (f"NCCL has no PAT kernel for a reduce-scatter with op {opts.op} (a scaled sum) and leaves PAT out "
                  "(src/enqueue.cc); use ring, or op sum")
        if candidates == ["pat"] and asked != "auto":
            raise AlgorithmUnavailable(f"pat cannot run here: {reason}", key="algorithm", reason=reason)
        candidates = [c for c in candidates if c != "pat"]
        unavailable["pat"] = reason
    return candidates


def _raise_none_runs(coll: str, opts: EstimateOptions, prof: Profile, unavailable: dict[str, str],
                     by_protocol: bool) -> None:
    """The error when no candidate runs: each one's reason, keyed by the pinned protocol when it was the cause."""
    why = "; ".join(f"{k}: {v}" for k, v in unavailable.items())
    if opts.protocol is not None and by_protocol:
        raise TopoError(f"no algorithm can run {coll} with protocol {opts.protocol} here (profile "
                        f"{prof.name}): {why}", key="protocol")
    raise TopoError(f"no algorithm can run {coll} here: {why}", key="algorithm")


class _Candidates:
    """The candidates of one evaluation, costed one at a time in order: those costed, pruned and unavailable."""

    def __init__(self, fabric: Fabric, coll: str, opts: EstimateOptions, pl: Placement, prof: Profile,
                 router: Router, prune_sizes: tuple[int, ...] | None, unavailable: dict[str, str]):
        self.fabric, self.coll, self.opts, self.pl, self.prof, self.router = fabric, coll, opts, pl, prof, router
        self.prune_sizes, self.unavailable = prune_sizes, unavailable
        self.shape = NodeShape.of(fabric)
        # a communicator whose ranks in one NVLink domain sit on several servers talks across trays (multi-node
        # NVLink); ranks of one server in an NVL72 rack talk as in any server
        self.mnnvl = self.shape.spans_servers(pl.groups)  # any communicator's ranks
        self.cap = usable_capacity(router, prof)
        self.costed: dict[str, Costed] = {}
        self.protocols: dict[str, tuple[str, ...]] = {}
        self.pruned: dict[str, str] = {}
        self.by_protocol = False  # some candidate was left out only for the pinned protocol

    def schedule(self, name: str):
        """Candidate ``name``'s schedule and its protocols (raises :class:`AlgorithmUnavailable`)."""
        opts, prof = self.opts, self.prof
        sched = build_schedule(name, self.coll, self.shape, self.pl, chunks=opts.chunks, stages=opts.stages,
                               channels=opts.channels, gpu_name=self.fabric.spec.gpu,
                               reference_ranks_per_domain=prof.reference_ranks_per_domain,
                               nvls_max_heads=prof.nvls_max_heads, mnnvl=self.mnnvl)
        return sched, _protocols(prof, sched.family, opts.protocol)

    def cost(self, name: str, single: bool) -> None:
        """Schedule, load and cost candidate ``name``, or say why it is pruned or unavailable (an error when it is
        the ``single`` algorithm asked for)."""
        opts, prof = self.opts, self.prof
        try:
            sched, protos = self.schedule(name)
            if self.prune_sizes and self.costed:
                why = _cannot_win(sched, protos, self.router, self.cap, prof, self.coll, self.pl, self.costed,
                                  self.protocols, self.prune_sizes)
                if why:
                    self.pruned[name] = why
                    return
            loads = load_schedule(self.router, sched, keep_flows=opts.sharing != "equal")
        except AlgorithmUnavailable as exc:
            if single:
                raise type(exc)(f"{name} cannot run here: {exc.reason}", key="algorithm",
                                reason=exc.reason) from None
            self.unavailable[name] = exc.reason
            self.by_protocol |= isinstance(exc, ProtocolUnavailable)
            return
        try:
            self.costed[name] = cost_schedule(loads, self.router, self.cap, opts.sharing)
        except ClassesDiverge:  # merged flows would move apart: fill them one by one (where few enough)
            one_by_one = self.router.without_merging()
            self.costed[name] = cost_schedule(load_schedule(one_by_one, sched, keep_flows=True), one_by_one,
                                              self.cap, opts.sharing)
        self.protocols[name] = protos


def _cannot_win(sched, protos, router: Router, cap: np.ndarray, prof: Profile, coll: str, pl: Placement,
                costed: dict[str, Costed], protocols: dict[str, tuple[str, ...]], sizes: tuple[int, ...]) -> str:
    """Why ``sched`` cannot be the fastest at any of ``sizes`` ('' when it might be): its time with the lower
    bound on its bandwidth part and no routed latency is at every size no faster than a candidate already costed
    (which wins a tie, coming first)."""
    bound = _unrouted(sched, router, cap)
    D = pl.num_domains
    for S in sizes:
        at_least = best_protocol(bound, prof, protos, S, coll, pl.num_ranks, D).time_s
        best = min((best_protocol(c, prof, protocols[n], S, coll, pl.num_ranks, D).time_s, n)
                   for n, c in costed.items())
        if at_least < best[0]:
            return ""
    return (f"not routed: at least {format_time(at_least)} at {S:,} bytes (a bound from its transfers' ends), no "
            f"faster than {best[1]} ({format_time(best[0])})")


def _unrouted(sched, router: Router, cap: np.ndarray, drop_transfers: bool = False) -> Costed:
    """``sched`` costed without routing: the lower bound on its bandwidth part from its transfers' ends
    (:func:`topo.engine.bounds.seconds_per_byte_bound`) and no routed latency; no faster than routing it gives.
    ``drop_transfers``: the schedule kept without its phases (a time reads its latency counts only)."""
    spb = seconds_per_byte_bound(sched, router, cap)
    kept = dataclasses.replace(sched, phases=[]) if drop_transfers else sched
    return Costed(ScheduleLoads(kept, [], 0.0, router.num_res), spb, -1, 0.0, [])


def evaluate_unrouted(fabric: Fabric, collective: str, options: EstimateOptions | None = None,
                      router: Router | None = None, **kwargs) -> Evaluation:
    """:func:`evaluate` routing nothing: every candidate that can run scheduled and costed without routing
    (:func:`_cannot_win`'s bound), its schedule's transfers dropped. Its :meth:`Evaluation.time` (the fastest
    candidate at its fastest protocol, or the host's launch floor) is a lower bound on :func:`evaluate`'s at every
    size, whichever way that one chooses (NCCL's own choice is one of the candidates); None when no candidate runs.
    For times only (no bottleneck, no link loads).

    Parameters
    ----------
    fabric : Fabric
    collective : str
    options : EstimateOptions, optional
    router : Router, optional
        The router :func:`evaluate` would use (its ECMP mode decides the tiers' cuts).
    **kwargs
        Fields of :class:`EstimateOptions`, as :func:`evaluate` takes them.

    Returns
    -------
    Evaluation
    """
    opts = EstimateOptions.from_kwargs(options, **kwargs)
    coll = normalize_collective(collective)
    asked, candidates = algorithm_candidates(coll, opts.algorithm)
    pl = placement_for(fabric, opts)
    prof = resolve_profile(opts.profile, fabric)
    if router is None:
        router = Router(fabric, ecmp=opts.ecmp, subflows=opts.subflows, pxn=opts.pxn, salt=opts.hash_seed)
    run = _Candidates(fabric, coll, opts, pl, prof, router, None, {})
    for name in _without_scaled_pat(coll, opts, asked, candidates, run.unavailable):
        try:
            sched, run.protocols[name] = run.schedule(name)
        except AlgorithmUnavailable as exc:
            run.unavailable[name] = exc.reason
            continue
        run.costed[name] = _unrouted(sched, router, run.cap, drop_transfers=True)
    return Evaluation(coll, pl, prof, router, run.costed, run.unavailable, run.protocols, "fastest", opts.sharing,
                      opts.protocol, opts.op, {}, None, opts.gpus_per_process)


def estimate(fabric: Fabric, collective: str, sizes: int | str | Iterable = "1GiB",
             options: EstimateOptions | None = None, *, datatype: str | None = None, **kwargs) -> EstimateResult:
    """Estimate ``collective`` on ``fabric`` for each size.

    Parameters
    ----------
    fabric : Fabric
    collective : str
        all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, gather, scatter, sendrecv or
        pipeline (nccl-tests names; hyphens accepted).
    sizes : int, str or iterable
        Message sizes as nccl-tests counts them (bytes, or "64K", "1GiB").
    options : EstimateOptions, optional
        How to run it (see :class:`topo.engine.options.EstimateOptions`); keyword arguments (``gpus=64``,
        ``algorithm="ring"``, ...) replace its fields.
    datatype : str, optional
        nccl-tests' ``-d`` type (a key of :data:`~topo.engine.collectives.DATA_TYPES`): each size is then the one
        nccl-tests runs and prints for ``-b size`` (:func:`~topo.engine.collectives.nccl_tests_count`: whole
        elements, and whole 16 bytes a rank for all_gather, reduce_scatter, alltoall, gather and scatter) and the
        rows carry its count column; a size that leaves 0 elements a rank is left out with a note. None (the
        default) times the sizes as given, and a row's count is nccl-tests' float count only where nccl-tests runs
        that very size (None otherwise: no count multiplies back to it).

    Returns
    -------
    EstimateResult
        One :class:`~topo.engine.result.SizeResult` per size (``.results``): time, algbw, busbw, the algorithm
        and protocol, the latency and bandwidth parts, the bottleneck; plain, picklable data.

    Raises
    ------
    TopoError
        Unknown collective, algorithm or option, an algorithm that cannot run here, a bad size or placement; the
        error's key names the option.
    """
    opts = EstimateOptions.from_kwargs(options, **kwargs)
    sizes = _sizes(sizes)
    ev = evaluate(fabric, collective, opts)
    coll, pl = ev.collective, ev.placement
    trim_notes = []
    if datatype is not None:
        sizes, trim_notes = nccl_tests_sizes(coll, sizes, datatype, pl.num_ranks)
    asked, names = algorithm_candidates(coll, opts.algorithm)
    results = [size_result(ev, S) for S in sizes]
    cand_times: dict[str, list[float | None]] = {n: [] for n in names}
    for S in sizes:
        for name in names:
            t = ev.time(S, name) if name in ev.costed else None
            cand_times[name].append(t.time_s if t else None)
    router = ev.router
    loads_per_byte = {n: router.real_link_loads(c.loads.total()) for n, c in ev.costed.items()}
    notes = [n for c in ev.costed.values() for n in c.schedule.notes] + stand_in_notes(router.paths)
    if results and results[-1].algorithm in loads_per_byte:
        alg = results[-1].algorithm
        notes += off_bottleneck_notes(router.paths, pl, loads_per_byte[alg], alg)
    notes += trim_notes
    result = EstimateResult(
        spec=fabric.name, collective=coll, num_ranks=pl.num_ranks, algorithm=asked, placement=pl.describe(),
        ecmp=router.ecmp + (f" x{router.subflows} subflows" if router.subflows > 1 else "")
        + (f" seed {router.salt}" if router.ecmp == "hash" and router.salt else ""), sharing=opts.sharing,
        profile=ev.profile.name, results=results, candidates=cand_times, unavailable=ev.unavailable,
        phases={n: c.phase_info for n, c in ev.costed.items()}, notes=notes,
        protocol=opts.protocol or "auto", channels=opts.channels, choose=opts.choose,
        loads_per_byte=loads_per_byte,
        links=LinkTable.of(fabric))
    return result if datatype is None else result.with_datatype(datatype, opts.op)


def nccl_tests_sizes(collective: str, sizes: list[int], datatype: str, num_ranks: int) -> tuple[list[int], list[str]]:
    """``sizes`` as nccl-tests runs them for ``-d datatype`` over ``num_ranks`` ranks
    (:func:`~topo.engine.collectives.nccl_tests_count`), those of 0 bytes left out, and notes saying which moved.

    nccl-tests prints a row of size 0 and count 0 for a size below 16 bytes a rank (a collective of nothing,
    NVIDIA/nccl-tests@a0b82b22 src/common.cu lines 541-546); topo leaves it out: it has no time to model.

    Parameters
    ----------
    collective : str
    sizes : list of int
    datatype : str
    num_ranks : int

    Returns
    -------
    sizes : list of int
    notes : list of str

    Raises
    ------
    TopoError
        An unknown datatype, or every size 0 bytes a rank (key ``sizes``).
    """
    if datatype not in DATA_TYPES:
        raise TopoError(f"unknown data type {datatype!r}; allowed: {', '.join(DATA_TYPES)}", key="datatype")
    word = DATA_TYPES[datatype]
    run = [nccl_tests_count(collective, S, word, num_ranks)[0] for S in sizes]
    zero = [S for S, r in zip(sizes, run) if r == 0]
    kept = [r for r in run if r > 0]
    rule = (f"nccl-tests runs {collective} over {num_ranks} ranks as whole 16 bytes a rank (count = (size / "
            f"{word} / {num_ranks}) & ~{max(1, 16 // word) - 1} {datatype}s a rank, the count column)")
    if not kept:
        raise TopoError(f"{format_size(max(sizes))} and below: {rule}, 0 bytes here, a collective of nothing; allowed: "
                        f"{16 * num_ranks:,} bytes or more", key="sizes")
    notes = []
    moved = [f"{S:,} -> {r:,}" for S, r in zip(sizes, run) if r not in (0, S)]
    if collective in PER_RANK and moved:
        notes.append(f"sizes trimmed as {rule}: {', '.join(moved[:4])}{' ...' if len(moved) > 4 else ''} bytes")
    if zero:
        notes.append(f"sizes {', '.join(f'{S:,}' for S in zero[:4])}{' ...' if len(zero) > 4 else ''} bytes left "
                     f"out: {rule}, 0 bytes here (nccl-tests prints a row of size 0, a collective of nothing)")
    return kept, notes


def size_result(ev: Evaluation, size_bytes: int) -> SizeResult:
    """One size of an evaluated collective as nccl-tests reports it: the chosen algorithm and protocol, time,
    algbw, busbw, the latency and bandwidth parts and the bottleneck.

    What :func:`estimate` returns per size, without its per-link tables: a caller that needs one figure (the
    planner's network figures, a study's point) reads it from an :class:`Evaluation` here.

    Parameters
    ----------
    ev : Evaluation
        From :func:`evaluate`.
    size_bytes : int
        Message size in bytes.

    Returns
    -------
    SizeResult
        With ``time_low_s``/``time_high_s``, the range measured times fell in on clusters a bundled profile was
        not fitted on (:func:`topo.engine.interval.time_range_s`; None for other profiles). ``count`` is
        nccl-tests' count column for floats when nccl-tests runs exactly ``size_bytes``
        (:func:`~topo.engine.collectives.count_column`), else None: the size timed is not one nccl-tests runs
        (1,000 B of all_gather over 24 ranks runs 768 B, count 8), and no count multiplies back to it.
    """
    S = int(size_bytes)
    coll = ev.collective
    t, name, proto, lat, bw = ev.time(S)  # a CollectiveTime
    lo, hi = time_range_s(S, t) if ev.profile.bundled else (None, None)
    return SizeResult(
        size_bytes=S, count=count_column(coll, S, _TYPE_BYTES, ev.placement.num_ranks), type="float", redop=ev.op if coll in REDUCING else "none",
        root=0 if coll in ROOTED else -1, time_s=float(t), algbw_Bps=float(S / t),
        busbw_Bps=float(S / t * busbw_factor(coll, ev.placement.num_ranks)), algorithm=name, protocol=proto,
        latency_s=float(lat), bandwidth_s=float(bw), bottleneck=ev.bottleneck(S, name, t, lat, bw, proto),
        time_low_s=lo, time_high_s=hi)


def _sizes(sizes) -> list[int]:
    if isinstance(sizes, (int, str, np.integer)):
        sizes = [sizes]
    out = []
    for s in sizes:
        try:
            out.append(parse_size_bytes(s))
        except UnitError as exc:
            raise TopoError(str(exc), key="sizes") from None
    if not out:
        raise TopoError("no sizes given", key="sizes")
    return out
