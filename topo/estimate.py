"""Estimate a collective: place the ranks, plan each algorithm, route and load the links, apply alpha-beta.

``time(size) = latency(algorithm, protocol) + size * sum over phases (repeat * drain time per byte) / efficiency``

where the drain time per byte of a phase is its most loaded resource's bytes over usable bandwidth (or the
max-min fair makespan). Routing is done once per algorithm; a whole size sweep is then arithmetic. ``auto``
evaluates NCCL's own algorithms with each protocol and keeps the fastest per size, as NCCL's tuner does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .algorithms import build_plan
from .algorithms.base import AlgorithmUnavailable, Plan, latency_s
from .collectives import NCCL_ALGORITHMS, REDUCING, busbw_factor, normalize_algorithm, \
    normalize_collective
from .contention import SHARING_MODES, drain_time
from .errors import TopoError
from .fabric import Fabric
from .placement import Placement, place
from .profiles import Profile, ideal_profile, profile_for
from .results import Bottleneck, EstimateResult, SizeResult
from .route import Router
from .units import UnitError, parse_size_bytes

__all__ = ["estimate", "default_profile", "size_sweep"]

_TYPE_BYTES = 4  # nccl-tests' default type: float


def default_profile(fabric: Fabric) -> Profile:
    """The NCCL-derived profile of the fabric's GPU generation and network technology."""
    return profile_for(fabric.spec.gpu_model.generation, fabric.spec.fabric.technology)


def size_sweep(min_bytes, max_bytes, factor: float = 2.0) -> list[int]:
    """nccl-tests' ``-b MIN -e MAX -f FACTOR`` sweep (sizes accept 8, 64K, 1M, 16G, 1GiB)."""
    try:
        lo, hi = parse_size_bytes(min_bytes), parse_size_bytes(max_bytes)
    except UnitError as exc:
        raise TopoError(str(exc), key="-b/-e") from None
    if hi < lo:
        raise TopoError(f"the largest size {hi} is below the smallest {lo}", key="-e")
    if not (isinstance(factor, (int, float)) and factor > 1):
        raise TopoError(f"the step factor must be > 1, got {factor!r}", key="-f")
    sizes, s = [], float(lo)
    while s <= hi * (1 + 1e-12) and len(sizes) < 10_000:
        sizes.append(int(round(s)))
        s *= factor
    return sizes


@dataclass
class _Evaluated:
    plan: Plan
    seconds_per_byte: float  # bandwidth part per byte, before the protocol's efficiency
    bottleneck_res: int
    bottleneck_bytes_per_byte: float  # bytes on the bottleneck resource per message byte
    loads_per_byte: np.ndarray  # bytes on every resource per message byte, all phases and repeats
    phase_info: list[dict]


def estimate(fabric: Fabric, collective: str, sizes: int | str | Iterable = "1GiB", *, gpus: int | None = None,
             ranks: Sequence[int] | None = None, placement: str = "packed", rail: int = 0,
             algorithm: str = "auto", ecmp: str = "ideal", subflows: int = 1, sharing: str = "equal",
             profile: Profile | str | None = None, pxn: bool | None = None, chunks: int | None = None,
             stages: int = 2, groups: int = 1, group_layout: str = "strided",
             rank_order: str = "nccl") -> EstimateResult:
    """Estimate ``collective`` on ``fabric`` for each size.

    Parameters
    ----------
    fabric : Fabric
    collective : str
        all_reduce, all_gather, reduce_scatter, alltoall, broadcast, sendrecv or pipeline (nccl-tests names;
        hyphens accepted).
    sizes : int, str or iterable
        Message sizes as nccl-tests counts them (bytes, or "64K", "1GiB").
    gpus, ranks, placement, rail
        Which GPUs take part: ``gpus`` of them placed by ``placement`` (see :func:`topo.placement.place`),
        or the explicit GPU ids ``ranks``. Default: every GPU.
    groups, group_layout
        Run ``groups`` identical communicators at once over those GPUs (``strided``: data-parallel groups, one
        GPU from each block; ``blocked``: consecutive blocks, as tensor parallelism). busbw counts one group.
    rank_order : {"nccl", "given"}
        Ranks ordered as NCCL forms its ring (by domain), or exactly as listed in ``ranks``.
    algorithm : str
        ``auto`` (NCCL's algorithms, fastest per size) or one of :data:`topo.collectives.ALGORITHMS`.
    ecmp : {"ideal", "hash"}, subflows : int
        ECMP model (see :mod:`topo.route`).
    sharing : {"equal", "maxmin"}
        Contention model (see :mod:`topo.contention`).
    profile : Profile, "nccl" or "ideal"
        Efficiencies and latencies; default: the fabric's generation and network (:mod:`topo.profiles`);
        ``ideal`` is the textbook alpha-beta machine (line rates, link latencies only).
    pxn : bool
        Route cross-rail traffic over NVLink first (default: on in rail fabrics).
    chunks : int
        Store-and-forward chunks for pipelined algorithms (tree, broadcast); default: streaming, as NCCL.
    stages : int
        Pipeline stages for ``pipeline`` (the ranks are split into this many consecutive blocks).

    Raises
    ------
    TopoError
        Unknown collective or algorithm, an algorithm that cannot run here, a bad size or placement.
    """
    coll = normalize_collective(collective)
    algo = normalize_algorithm(coll, algorithm)
    if sharing not in SHARING_MODES:
        raise TopoError(f"unknown sharing model {sharing!r}; allowed: {', '.join(SHARING_MODES)}", key="--sharing")
    sizes = _sizes(sizes)
    if ranks is not None:
        if rank_order not in ("nccl", "given"):
            raise TopoError(f"unknown rank order {rank_order!r}; allowed: nccl, given", key="--rank-order")
        pl = place(fabric, gpus=ranks, groups=groups, group_layout=group_layout, order=rank_order)
    else:
        pl = place(fabric, gpus, kind=placement, rail=rail, groups=groups, group_layout=group_layout)
    prof = _profile(fabric, profile)
    router = Router(fabric, ecmp=ecmp, subflows=subflows, pxn=pxn)
    router.keep_flows = sharing == "maxmin"
    candidates = list(NCCL_ALGORITHMS[coll]) if algo == "auto" else [algo]

    evaluated: dict[str, _Evaluated] = {}
    unavailable: dict[str, str] = {}
    for name in candidates:
        try:
            plan = build_plan(name, coll, router, pl, prof, chunks=chunks, stages=stages)
        except AlgorithmUnavailable as exc:
            if algo != "auto":
                raise TopoError(f"{name} cannot run here: {exc}", key="--algorithm") from None
            unavailable[name] = str(exc)
            continue
        evaluated[name] = _evaluate(plan, router, prof, sharing)
    if not evaluated:
        raise TopoError(f"no algorithm can run {coll} here: " + "; ".join(f"{k}: {v}" for k, v in
                                                                          unavailable.items()), key="--algorithm")

    factor = busbw_factor(coll, pl.num_ranks)
    results: list[SizeResult] = []
    cand_times: dict[str, list[float | None]] = {n: [] for n in candidates}
    for S in sizes:
        best = None
        for name in candidates:
            ev = evaluated.get(name)
            if ev is None:
                cand_times[name].append(None)
                continue
            t_best = None
            for proto in prof.protocols(ev.plan.family):
                lat = latency_s(ev.plan.latency, prof, proto)
                # the first min(S, window) bytes go at half speed while the pipeline fills (topo.profiles)
                bw = (S + min(S, prof.pipeline_window_bytes)) / _rate_Bps(ev, prof, proto, coll, pl)
                t = lat + bw
                if t_best is None or t < t_best[0]:
                    t_best = (t, proto, lat, bw)
            cand_times[name].append(t_best[0])
            if best is None or t_best[0] < best[0][0]:
                best = (t_best, name)
        (t, proto, lat, bw), name = best
        ev = evaluated[name]
        results.append(SizeResult(
            size_bytes=S, count=S // _TYPE_BYTES, type="float", redop="sum" if coll in REDUCING else "none",
            root=0 if coll == "broadcast" else -1, time_s=float(t), algbw_GBps=float(S / t / 1e9),
            busbw_GBps=float(S / t / 1e9 * factor), algorithm=name, protocol=proto, latency_s=float(lat),
            bandwidth_s=float(bw),
            bottleneck=_bottleneck(router, ev, S, t)))

    def link_loads(name: str, S: int):
        return _link_loads_frame(router, evaluated[name], S, _time_of(results, cand_times, name, S))

    notes = [n for ev in evaluated.values() for n in ev.plan.notes]
    return EstimateResult(
        spec=fabric.name, collective=coll, num_ranks=pl.num_ranks, algorithm=algo, placement=pl.describe(),
        ecmp=router.ecmp + (f" x{router.subflows} subflows" if router.subflows > 1 else ""), sharing=sharing,
        profile=prof.name, results=results, candidates=cand_times, unavailable=unavailable,
        phases={n: ev.phase_info for n, ev in evaluated.items()}, notes=notes, _link_loads=link_loads)


def _rate_Bps(ev: _Evaluated, prof: Profile, proto: str, coll: str, pl: Placement) -> float:
    """Steady algorithm bandwidth (bytes of message per second): the routed bottleneck at the protocol's
    efficiency, or NCCL's cap on the protocol's bus bandwidth, whichever is lower."""
    fam = ev.plan.family
    D = pl.num_domains
    rate = prof.efficiency(fam, proto, D) / ev.seconds_per_byte if ev.seconds_per_byte > 0 else np.inf
    cap = prof.busbw_cap(fam, proto, D)
    if np.isfinite(cap):
        p = pl.num_ranks
        if fam in ("tree", "collnet"):
            ratio = 0.5
        else:
            steps = 2 * (p - 1) if coll == "all_reduce" else (p - 1 if coll in ("all_gather", "reduce_scatter")
                                                              else p)
            ratio = p / steps
        rate = min(rate, cap * ratio)
    return float(rate)


def _sizes(sizes) -> list[int]:
    if isinstance(sizes, (int, str, np.integer)):
        sizes = [sizes]
    out = []
    for s in sizes:
        try:
            out.append(parse_size_bytes(s))
        except UnitError as exc:
            raise TopoError(str(exc), key="--size") from None
    if not out:
        raise TopoError("no sizes given", key="--size")
    return out


def _profile(fabric: Fabric, profile) -> Profile:
    if profile is None or profile == "nccl":
        return default_profile(fabric)
    if profile == "ideal":
        return ideal_profile()
    if isinstance(profile, Profile):
        return profile
    raise TopoError(f"unknown profile {profile!r}; allowed: nccl, ideal", key="--profile")


def _usable_capacity(router: Router, prof: Profile) -> np.ndarray:
    lvl = router.level
    eff = np.where(lvl == 0, prof.nvlink_efficiency, np.where(lvl == 1, prof.pcie_efficiency,
                                                              prof.network_efficiency))
    return router.capacity_Bps * eff


def _evaluate(plan: Plan, router: Router, prof: Profile, sharing: str) -> _Evaluated:
    cap = _usable_capacity(router, prof)
    total = 0.0
    worst, r_worst = -1.0, -1  # the phase that takes longest names the bottleneck
    info = []
    total_loads = np.zeros(router.num_res)
    for ph in plan.phases:
        t, r, loads = drain_time(ph.routed, cap, sharing, router.num_res)
        total += ph.repeat * t
        total_loads += ph.repeat * loads
        if ph.repeat * t > worst:
            worst, r_worst = ph.repeat * t, r
        d = router.describe_resource(r) if r >= 0 else {}
        info.append({"phase": ph.label, "flows": ph.routed.num_flows, "repeat": ph.repeat,
                     "seconds_per_byte": t, "bottleneck": f"{d.get('src')} -> {d.get('dst')}" if d else None,
                     "bottleneck_level": d.get("level")})
    r = r_worst
    return _Evaluated(plan, total, r, float(total_loads[r]) if r >= 0 else 0.0, total_loads, info)


def _bottleneck(router: Router, ev: _Evaluated, S: int, t: float) -> Bottleneck | None:
    r = ev.bottleneck_res
    if r < 0:
        return None
    d = router.describe_resource(r)
    per_link = ev.bottleneck_bytes_per_byte * S / d["num_links"]
    line = router.capacity_Bps[r] / d["num_links"]
    return Bottleneck(src=d["src"], dst=d["dst"], level=d["level"], direction=d["direction"],
                      num_links=d["num_links"], bytes=float(per_link),
                      utilization=float(per_link / (line * t)) if t > 0 else 0.0)


def _time_of(results, cand_times, name, S) -> float:
    for i, r in enumerate(results):
        if r.size_bytes == S:
            return cand_times[name][i]
    raise ValueError(f"size {S} was not estimated")


def _link_loads_frame(router: Router, ev: _Evaluated, S: int, t: float):
    import pandas as pd

    loads = ev.loads_per_byte
    per_link = router.real_link_loads(loads) * S
    f = router.fabric
    links = f.links
    M = f.num_links
    names = f.level_names
    lvl = np.repeat(links["level"], 2)
    src = np.empty(2 * M, dtype=np.int64)
    dst = np.empty(2 * M, dtype=np.int64)
    src[0::2], dst[0::2] = links["src"], links["dst"]
    src[1::2], dst[1::2] = links["dst"], links["src"]
    cap = np.repeat(links["bandwidth_Bps"], 2)
    frame = pd.DataFrame({
        "link": np.repeat(np.arange(M), 2),
        "direction": np.tile(np.array(["up", "down"]), M),
        "src": src, "dst": dst,
        "level": pd.Categorical.from_codes(lvl, categories=names),
        "bandwidth_Bps": cap,
        "bytes": per_link,
        "utilization": per_link / (cap * t) if t > 0 else 0.0,
    })
    frame.attrs.update({"size_bytes": S, "time_s": t, "algorithm": ev.plan.algorithm})
    return frame
