"""Fit a profile's free parameters to measured sweeps with ``scipy.optimize.least_squares``.

The residual of one measured size is ``log(model time / measured time)``: a relative error, symmetric in too fast
and too slow, so a 10 us and a 100 ms point weigh alike. Parameters are bounded to physical ranges
(:data:`topo.engine.profile_data.PARAMETERS`) and gently pulled toward their starting value (a ridge of
:data:`PRIOR_WEIGHT` per parameter), so a parameter the data cannot see (the network on a one-node run) stays
where it was instead of wandering. The robust ``cauchy`` loss (scale 5%) keeps one odd size (a dip the hardware
does not explain) from dragging the rest; it fitted every reference sweep better than plain or ``soft_l1`` least
squares (benchmarks/RESULTS.md). On a short sweep that starts far off, though, it can call most sizes outliers and
end worse than it started; plain least squares is then tried. The model is piecewise (the fastest algorithm and
protocol per size), so a fit can stop in a local minimum: a fit that ends worse than its start returns the start.

Free parameters (:func:`calibration_params`) are multipliers on the starting profile, fitted in log space, except
the efficiencies and the pipeline window, which are fitted as values:

- ``base_latency_LL|LL128|Simple`` -- NCCL's per-call base latency of each protocol (every algorithm);
- ``nvlink_hop``, ``net_hop`` -- per-step latency over NVLink and over the network;
- ``nvlink_efficiency``, ``network_efficiency`` -- usable fraction of each link class;
- ``nvls_efficiency`` -- NVLS and NVLSTree bandwidth (when the GPU has NVLS);
- ``pipeline_window_MiB`` -- topo's pipeline-fill term (written as ``pipeline_window_bytes``), at least one NCCL
  chunk (:meth:`topo.engine.profiles.Profile.smallest_chunk_bytes`: 64 KiB with NVLS, 128 KiB without);
- ``peer_overhead`` -- per-peer set-up of all-to-all (when an all-to-all is measured).

``topo calibrate`` fits only the parameters its logs determine (:func:`fit_identified`, :func:`identified`): a
3-size bandwidth-only sweep cannot fix a latency, and a sweep of one shape cannot tell a base latency from a per-hop
one; those keep the base profile's values and are reported as not fitted (issue 30).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..engine.estimate import evaluate, placement_for
from ..engine.options import EstimateOptions
from ..engine.profile_data import PARAMETERS
from ..engine.profiles import US, Profile
from ..engine.schedule import NodeShape
from ..errors import TopoError
from .compare import modelled_times
from .setup import Setup

__all__ = ["Case", "FreeParam", "FitResult", "calibration_params", "fit_cases", "apply_params", "case_errors",
           "identified", "fit_identified", "unmoved", "at_bound", "PRIOR_WEIGHT", "SEEN_PCT", "INDEPENDENT"]

PRIOR_WEIGHT = 0.05
_PROTOS = ("LL", "LL128", "Simple")


@dataclass
class Case:
    """One measured sweep: where it ran, which collective, the sizes and the measured times."""

    setup: Setup
    collective: str
    sizes: list[int]
    measured_s: list[float]
    profile: Profile
    label: str = ""
    tags: frozenset = frozenset()  # e.g. {"gpu:hopper", "network:roce"}: which shared parameters apply


@dataclass(frozen=True)
class FreeParam:
    """One fitted quantity: ``log`` ones are multipliers (x = log m), ``linear`` ones values."""

    name: str
    kind: str  # "log" or "linear"
    x0: float
    lo: float
    hi: float
    apply: Callable[[Profile, float], Profile]
    tag: str | None = None  # applies only to cases carrying this tag (None: every case)

    def value(self, x: float) -> float:
        return math.exp(x) if self.kind == "log" else x


def _scale_table(table: dict, m: float, proto: str | None = None) -> dict:
    def sc(v):
        return tuple(x * m for x in v) if isinstance(v, tuple) else v * m
    return {f: {p: (sc(v) if proto in (None, p) else v) for p, v in d.items()} for f, d in table.items()}


def _base(proto):
    return lambda prof, m: replace(prof, base_latency_s=_scale_table(prof.base_latency_s, m, proto))


def _nvls(prof: Profile, e: float) -> Profile:
    eff = dict(prof.proto_efficiency)
    ratio = e / eff["nvls"]["Simple"]
    eff["nvls"] = {"Simple": e}
    if "nvls_tree" in eff:
        eff["nvls_tree"] = {"Simple": eff["nvls_tree"]["Simple"] * ratio}
    return replace(prof, proto_efficiency=eff)


def _bounded(name, e0):
    spec = PARAMETERS[name]
    return max(spec.lo, 1e-3), min(spec.hi, 1.0), min(max(e0, spec.lo), spec.hi)


def _max_multiplier(cap: float, *limits: tuple[str, float]) -> float:
    """log of the largest multiplier (at most ``cap``) that keeps each written value within its physical range:
    ``limits`` are (parameter, its largest starting value in the parameter's own unit)."""
    m = cap
    for key, v0 in limits:
        if v0 > 0:
            m = min(m, PARAMETERS[key].hi / v0)
    return math.log(max(m, 1.0))


def _table_max_us(table: dict, proto: str | None = None) -> float:
    vals = [x for d in table.values() for p, v in d.items() if proto in (None, p)
            for x in (v if isinstance(v, tuple) else (v,))]
    return max(vals, default=0.0) / US


def _mnnvl(prof: Profile, m: float) -> Profile:
    return replace(prof, mnnvl_hop_extra_s=prof.mnnvl_hop_extra_s * m, mnnvl_extra_s=prof.mnnvl_extra_s * m)


def _spans_trays(case: Case) -> bool:
    """The run puts ranks of one NVLink domain on several servers (an NVL72 rack): its multi-node NVLink terms,
    decided as ``estimate`` decides them (on the run's placement)."""
    return NodeShape.of(case.setup.fabric).spans_servers(_placement(case).groups)


def _placement(case: Case):
    """The run's placement on its fabric, as ``estimate`` makes it."""
    return placement_for(case.setup.fabric, EstimateOptions.from_kwargs(**case.setup.placement_options()))


def calibration_params(profile: Profile, cases: list[Case], tag: str | None = None) -> list[FreeParam]:
    """The parameters the cases can inform, starting from ``profile``."""
    multi = any(c.setup.fabric.num_gpus > 0 and _domains(c) > 1 for c in cases)
    colls = {c.collective for c in cases}
    # multipliers, bounded so the written profile stays within topo.engine.profile_data's physical ranges
    out = [FreeParam(f"base_latency_{p}", "log", 0.0, math.log(0.2),
                     _max_multiplier(10.0, ("base_latency_us", _table_max_us(profile.base_latency_s, p))),
                     _base(p), tag) for p in _PROTOS]
    out.append(FreeParam("nvlink_hop", "log", 0.0, math.log(0.2),
                         _max_multiplier(10.0, ("nvlink_hop_us", _table_max_us(profile.nvlink_hop_s))),
                         lambda pr, m: replace(pr, nvlink_hop_s=_scale_table(pr.nvlink_hop_s, m)), tag))
    lo, hi, e0 = _bounded("nvlink_efficiency", profile.nvlink_efficiency)
    out.append(FreeParam("nvlink_efficiency", "linear", e0, lo, hi,
                         lambda pr, e: replace(pr, nvlink_efficiency=e), tag))
    if multi:
        scale0 = profile.sources.get("net_hop_scale", {}).get("value", 1.0)
        out.append(FreeParam("net_hop", "log", 0.0, math.log(0.1), _max_multiplier(20.0, ("net_hop_scale", scale0)),
                             lambda pr, m: replace(pr, net_hop_s=_scale_table(pr.net_hop_s, m)), tag))
        lo, hi, e0 = _bounded("network_efficiency", profile.network_efficiency)
        out.append(FreeParam("network_efficiency", "linear", e0, lo, hi,
                             lambda pr, e: replace(pr, network_efficiency=e), tag))
    if (profile.mnnvl_hop_extra_s > 0 or profile.mnnvl_extra_s > 0) and any(_spans_trays(c) for c in cases):
        out.append(FreeParam("mnnvl_latency", "log", 0.0, math.log(0.1),
                             _max_multiplier(10.0, ("mnnvl_hop_extra_us", profile.mnnvl_hop_extra_s / US),
                                             ("mnnvl_extra_us", profile.mnnvl_extra_s / US)), _mnnvl, tag))
    if "nvls" in profile.proto_efficiency and "all_reduce" in colls:
        lo, hi, e0 = _bounded("nvls_efficiency", profile.proto_efficiency["nvls"]["Simple"])
        out.append(FreeParam("nvls_efficiency", "linear", e0, lo, hi, _nvls, tag))
    if "alltoall" in colls and profile.peer_overhead_s > 0:
        out.append(FreeParam("peer_overhead", "log", 0.0, math.log(0.1),
                             _max_multiplier(20.0, ("peer_overhead_us", profile.peer_overhead_s / US)),
                             lambda pr, m: replace(pr, peer_overhead_s=pr.peer_overhead_s * m), tag))
    big = max(s for c in cases for s in c.sizes)
    if big >= 2**20:  # the window only shows on multi-MiB sizes
        # no pipelined collective fills its pipeline with less than one NCCL chunk (Profile.smallest_chunk_bytes):
        # a pure alpha-beta log would otherwise fit a window of a few bytes
        lo = profile.smallest_chunk_bytes() / 2**20
        w0 = max(profile.pipeline_window_bytes / 2**20, lo)
        out.append(FreeParam("pipeline_window_MiB", "linear", w0, lo, 1024.0,
                             lambda pr, w: replace(pr, pipeline_window_bytes=w * 2**20), tag))
    return out


def _domains(case: Case) -> int:
    """The NVLink domains the run's ranks sit in (as placed: a rank list may span more than its count fills)."""
    return _placement(case).num_domains


def apply_params(profile: Profile, params: list[FreeParam], x, tags=frozenset()) -> Profile:
    for p, xi in zip(params, x):
        if p.tag is None or p.tag in tags:
            profile = p.apply(profile, p.value(xi))
    return profile


def _times(case: Case, profile: Profile) -> np.ndarray:
    return np.array([r.time_s for r in modelled_times(case.setup, case.collective, case.sizes, profile)])


def _routed(case: Case):
    """The case's collective placed, scheduled and routed once (its profile's costs; re-costed per profile)."""
    s = case.setup
    return evaluate(s.fabric, case.collective, **s.placement_options(),
                    algorithm=s.algorithm if case.collective == "all_reduce" else "auto", profile=case.profile, protocol=s.protocol, channels=s.channels, choose=s.choose,
                    gpus_per_process=s.gpus_per_process)


def _recosted_times(case: Case, ev, profile: Profile) -> np.ndarray:
    """What :func:`_times` gives, from the routed loads of ``ev`` (the same numbers, without routing again)."""
    try:
        ev = ev.with_profile(profile)
    except ValueError:
        return _times(case, profile)
    return np.array([ev.time(s).time_s for s in case.sizes])


def case_errors(case: Case, profile: Profile | None = None) -> np.ndarray:
    """Signed relative errors (model / measured - 1) of one case."""
    return _times(case, profile or case.profile) / np.asarray(case.measured_s) - 1.0


@dataclass
class FitResult:
    params: list[FreeParam]
    x: np.ndarray
    values: dict[str, float]
    mdape_before_pct: float
    mdape_after_pct: float
    nfev: int
    seconds: float
    profiles: list[Profile] = field(default_factory=list)  # one per case, fitted
    # parameters the data could not determine (kept at their starting value, not written as fitted), with why
    not_identified: dict[str, str] = field(default_factory=dict)
    sizes: int = 0  # measured sizes the fit saw (every case)
    kept_start: bool = False  # the fit ended worse than its start and returned the start
    # fitted parameters that ended at a bound of their physical range (the logs would take them past it), with which
    at_bound: dict[str, str] = field(default_factory=dict)

    def multipliers(self) -> list[str]:
        """The keys of :attr:`values` that are multipliers of the base profile's values (``log`` parameters:
        latencies scaled as a table), not values in the parameter's own unit."""
        return [p.name + (f"[{p.tag}]" if p.tag else "") for p in self.params if p.kind == "log"]

    def to_dict(self) -> dict:
        return {"values": self.values, "multipliers": self.multipliers(), "mdape_before_pct": self.mdape_before_pct,
                "mdape_after_pct": self.mdape_after_pct, "evaluations": self.nfev, "seconds": self.seconds,
                "sizes": self.sizes, "not_identified": self.not_identified, "at_bound": self.at_bound}


def _mdape(errs: list[np.ndarray]) -> float:
    return float(statistics.median(np.abs(np.concatenate(errs)) * 100))


DIFF_STEPS = (1e-2,)
FAR_OFF_PCT = 10.0  # a start this far off (median) that the robust fit makes worse is refitted by plain least squares


def fit_cases(cases: list[Case], params: list[FreeParam], max_nfev: int = 200, diff_steps=None,
              start=None) -> FitResult:
    """Least-squares fit of ``params`` over every case (each from its own starting profile); ``start`` (one value
    per parameter, in its fitted unit) starts the search elsewhere than ``x0``, which stays the prior's centre."""
    from scipy.optimize import least_squares

    if not cases or not any(c.sizes for c in cases):
        raise TopoError("nothing to fit: no measured sizes", key="logs")
    t0 = time.perf_counter()
    logm = [np.log(np.asarray(c.measured_s)) for c in cases]
    x0 = np.array([p.x0 for p in params], dtype=float)
    lo = np.array([p.lo for p in params], dtype=float)
    hi = np.array([p.hi for p in params], dtype=float)
    width = np.where(hi > lo, hi - lo, 1.0)
    scale = np.array([1.0 if p.kind == "log" else w / 4 for p, w in zip(params, width)])

    # Each case depends only on the parameters its tags select: a finite-difference step in one of the others
    # leaves it unchanged, so its last residuals are reused (a fit over many setups evaluates each setup only for
    # the columns of the Jacobian that concern it)
    uses = [[i for i, p in enumerate(params) if p.tag is None or p.tag in c.tags] for c in cases]
    memo: list[dict] = [{} for _ in cases]
    routed = [_routed(c) for c in cases]  # routed once; each step only re-costs them under its profile

    def residuals(x):
        res = []
        for k, (c, lm) in enumerate(zip(cases, logm)):
            key = tuple(float(x[i]) for i in uses[k])
            if key not in memo[k]:
                if len(memo[k]) > 4 * len(params) + 8:  # the points of the last Jacobian or two
                    memo[k].clear()
                prof = apply_params(c.profile, params, x, c.tags)
                memo[k][key] = np.log(_recosted_times(c, routed[k], prof)) - lm
            res.append(memo[k][key])
        res.append(PRIOR_WEIGHT * (x - x0) / scale)
        return np.concatenate(res)

    before = [case_errors(c) for c in cases]
    if params:
        x, nfev = np.clip(x0 if start is None else np.asarray(start, dtype=float), lo, hi), 0
        for step in diff_steps or DIFF_STEPS:  # coarse steps first see past the model's kinks
            sol = least_squares(residuals, x, bounds=(lo, hi), loss="cauchy", f_scale=0.05,
                                diff_step=step, x_scale=scale, max_nfev=max_nfev)
            x, nfev = sol.x, nfev + int(sol.nfev)
    else:
        x, nfev = x0, 0
    profiles = [apply_params(c.profile, params, x, c.tags) for c in cases]
    after = [case_errors(c, p) for c, p in zip(cases, profiles)]
    if params and _mdape(after) > _mdape(before) > FAR_OFF_PCT:
        # On a short sweep that starts far off (4 sizes, all ~50% too fast), the cauchy loss calls most sizes
        # outliers and fits the rest: retry with plain least squares before keeping the start (a start already
        # close is kept without the extra fit)
        sol = least_squares(residuals, np.clip(x0, lo, hi), bounds=(lo, hi), loss="linear",
                            diff_step=(diff_steps or DIFF_STEPS)[0], x_scale=scale, max_nfev=max_nfev)
        nfev += int(sol.nfev)
        plain = [apply_params(c.profile, params, sol.x, c.tags) for c in cases]
        plain_after = [case_errors(c, p) for c, p in zip(cases, plain)]
        if _mdape(plain_after) < _mdape(after):
            x, profiles, after = sol.x, plain, plain_after
    kept = _mdape(after) > _mdape(before)
    if kept:  # a local minimum worse than the start: keep the start
        x = np.clip(x0, lo, hi)
        profiles = [apply_params(c.profile, params, x, c.tags) for c in cases]
        after = [case_errors(c, p) for c, p in zip(cases, profiles)]
    values = {p.name + (f"[{p.tag}]" if p.tag else ""): p.value(xi) for p, xi in zip(params, x)}
    return FitResult(params, x, values, _mdape(before), _mdape(after), nfev, time.perf_counter() - t0, profiles,
                     sizes=sum(len(c.sizes) for c in cases), kept_start=bool(params) and kept)


SEEN_PCT = 1.0  # a parameter moved by its probe step must move some size's time by this much to be seen
INDEPENDENT = 0.1  # ... and by this fraction of its effect beyond what the parameters kept before it explain
_LOG_STEP = math.log(1.25)  # the probe of a multiplier: x1.25 and /1.25
_LINEAR_STEP = 0.05  # of an efficiency (a window in MiB: 1/20 of its range)


def _log_times(cases: list[Case], routed, params: list[FreeParam], x) -> np.ndarray:
    """The log model times of every case's sizes at ``x`` (from each case's routed loads)."""
    return np.concatenate([np.log(_recosted_times(c, ev, apply_params(c.profile, params, x, c.tags)))
                           for c, ev in zip(cases, routed)])


def identified(cases: list[Case], params: list[FreeParam], x) -> dict[str, str]:
    """The parameters the cases cannot determine at ``x``, with the reason (empty: every one is determined).

    Each parameter is probed by a central difference of the log model times over every case's sizes (a
    multiplier x1.25 either way, an efficiency +-0.05, the window +-1/20 of its range): the column of the fit's
    Jacobian, taken wide enough to see past the model's kinks (the fastest algorithm and protocol change with the
    parameters). A parameter whose probe moves no size by :data:`SEEN_PCT` percent is not seen by the data (a
    latency on a bandwidth-only sweep). The rest are taken in order of effect; one whose column is, within
    :data:`INDEPENDENT` of its length, a combination of those kept before it cannot be told from them (on a sweep
    of one shape, a base latency and a per-hop latency both add a constant; with fewer sizes than parameters the
    columns run out): the first of them carries the fit, as the Jacobian's rank says.

    Parameters
    ----------
    cases : list of Case
    params : list of FreeParam
    x : array-like
        Where to probe (the fitted point: at the start a kink can hide a parameter the fit then needs).

    Returns
    -------
    dict of str to str
        Parameter name (with ``[tag]``) -> why it is not determined.
    """
    x = np.asarray(x, dtype=float)
    routed = [_routed(c) for c in cases]

    def logt(xv):
        return _log_times(cases, routed, params, xv)

    cols = []
    for i, p in enumerate(params):
        h = _LOG_STEP if p.kind == "log" else (_LINEAR_STEP if p.hi <= 1.0 else (p.hi - p.lo) / 20)
        up, down = x.copy(), x.copy()
        up[i], down[i] = min(x[i] + h, p.hi), max(x[i] - h, p.lo)
        cols.append(logt(up) - logt(down) if up[i] > down[i] else np.zeros(sum(len(c.sizes) for c in cases)))
    why: dict[str, str] = {}
    name = [p.name + (f"[{p.tag}]" if p.tag else "") for p in params]
    order = sorted(range(len(params)), key=lambda i: -np.linalg.norm(cols[i]))
    basis, kept = np.zeros((cols[0].size if cols else 0, 0)), []
    for i in order:
        col = cols[i]
        if np.abs(col).max(initial=0.0) * 100 < SEEN_PCT:
            linear = "+-0.05" if params[i].hi <= 1.0 else "+-5% of its range"
            probe = "x1.25" if params[i].kind == "log" else linear
            why[name[i]] = f"no measured size moves by {SEEN_PCT:g}% when it changes by {probe}: the logs do not see it"
            continue
        rest = col - basis @ (basis.T @ col) if basis.shape[1] else col
        if np.linalg.norm(rest) < INDEPENDENT * np.linalg.norm(col):
            why[name[i]] = (f"its effect on the measured sizes is that of {', '.join(kept)} (the Jacobian's rank): "
                            "the logs cannot tell them apart")
            continue
        basis = np.column_stack([basis, rest / np.linalg.norm(rest)])
        kept.append(name[i])
    return why


def fit_identified(cases: list[Case], params: list[FreeParam], max_nfev: int = 200) -> FitResult:
    """Fit ``params``, then fit again only those the cases determine at the first fit's point
    (:func:`identified`); the others keep their starting values and are listed in
    :attr:`FitResult.not_identified`, as are those the final fit left where they started (:func:`unmoved`).

    Parameters
    ----------
    cases : list of Case
    params : list of FreeParam
    max_nfev : int

    Returns
    -------
    FitResult
    """
    first = fit_cases(cases, params, max_nfev=max_nfev)
    again = _restart_below_a_cap(cases, params, first, max_nfev)
    first = again or first
    why = identified(cases, params, first.x)
    if why:
        keep = [p for p in params if _name(p) not in why]
        start = [x for p, x in zip(params, first.x) if _name(p) not in why] if again else None
        res = fit_cases(cases, keep, max_nfev=max_nfev, start=start)
        res.nfev += first.nfev
    else:
        res = first
    why.update(unmoved(cases, res))
    _drop(res, why)
    res.not_identified = why
    res.at_bound = at_bound(res)
    return res


RESTART_BELOW = 0.8  # a fit whose model is still this much faster than a log's largest size is restarted


def _restart_below_a_cap(cases: list[Case], params: list[FreeParam], first: FitResult, max_nfev: int
                         ) -> FitResult | None:
    """A second fit, from efficiencies scaled to the bandwidth the largest sizes measured, where the first left them
    at their start while the model stays faster than a log's largest size (``RESTART_BELOW``); the better of the two
    by the fit's own objective, or None to keep the first (also where the second takes a restarted efficiency to a
    bound of its physical range: a run no efficiency describes keeps the first fit and its warning).

    Where a cap binds at the start (NCCL's per-channel protocol cap, another link), a small step of an efficiency
    moves no time, so least squares never reaches the value at which the link would bind (walk38: a 2-host GB300
    log made by the model at network_efficiency 0.3 was fitted with 0.94 and a 256 MiB window, its 8 GiB 67% off).
    """
    still = [i for i, p in enumerate(params)
             if p.kind == "linear" and p.hi <= 1.0 and _at_start(p, first.x[i])]
    ratio = min(float(_times(c, prof)[int(np.argmax(c.sizes))] / c.measured_s[int(np.argmax(c.sizes))])
                for c, prof in zip(cases, first.profiles))
    if not still or ratio >= RESTART_BELOW:
        return None
    start = first.x.copy()
    for i in still:
        start[i] = params[i].x0 * ratio
    second = fit_cases(cases, params, max_nfev=max_nfev, start=start)
    second.nfev += first.nfev
    if any(_name(params[i]) in at_bound(second) for i in still):
        return None  # the logs would take it past its physical range: the first fit stands, with its warning
    return second if _objective(cases, params, second.x) < _objective(cases, params, first.x) else None


def _objective(cases: list[Case], params: list[FreeParam], x) -> float:
    """The data part of :func:`fit_cases`' robust objective at ``x`` (cauchy, f_scale 0.05, on log time error)."""
    routed = [_routed(c) for c in cases]
    r = _log_times(cases, routed, params, x) - np.concatenate([np.log(np.asarray(c.measured_s)) for c in cases])
    return float(np.log1p((r / 0.05) ** 2).sum())


def _name(p: FreeParam) -> str:
    return p.name + (f"[{p.tag}]" if p.tag else "")


def _drop(res: FitResult, names) -> None:
    """Remove ``names`` from a fit's parameters: each sits at its starting value, so the profiles are unchanged."""
    keep = [i for i, p in enumerate(res.params) if _name(p) not in names]
    res.params, res.x = [res.params[i] for i in keep], res.x[keep]
    res.values = {k: v for k, v in res.values.items() if k not in names}


def _at_start(p: FreeParam, x: float) -> bool:
    return abs(x - p.x0) <= (1e-6 if p.kind == "log" else 1e-6 * (p.hi - p.lo))


UNMOVED_SEEN_PCT = 0.1  # a one-sided probe of an unmoved parameter that moves no size by this much is flat


def unmoved(cases: list[Case], res: FitResult) -> dict[str, str]:
    """The parameters the fit left at their starting value, with why (a fit that kept its start leaves all).

    The identification probe (:func:`identified`) is central and wide; the fit's own steps are small and one-sided.
    Where the fitted point sits on a kink of the piecewise model (raising the network's efficiency past the point
    where NVLink binds changes no time), the wide probe sees the parameter, yet the fit finds no slope on one side
    and the other side fits worse: the logs bound it from one side only. Each unmoved parameter is probed on each
    side by a small step (an efficiency 0.01, a window 1/100 of its range, a multiplier x1.05).

    Parameters
    ----------
    cases : list of Case
    res : FitResult

    Returns
    -------
    dict of str to str
        Parameter name (with ``[tag]``) -> why it was not moved.
    """
    still = [i for i, p in enumerate(res.params) if _at_start(p, res.x[i])]
    if not still:
        return {}
    if res.kept_start:
        return {_name(res.params[i]): "the fit ended worse than its start (a local minimum of the piecewise model), "
                "so the start was kept" for i in still}
    routed = [_routed(c) for c in cases]
    at = _log_times(cases, routed, res.params, res.x)
    why = {}
    for i in still:
        p = res.params[i]
        h = math.log(1.05) if p.kind == "log" else (0.01 if p.hi <= 1.0 else (p.hi - p.lo) / 100)
        moved = []
        for step in (h, -h):
            xs = res.x.copy()
            xs[i] = min(max(xs[i] + step, p.lo), p.hi)
            seen = xs[i] != res.x[i] and np.abs(_log_times(cases, routed, res.params, xs) - at).max() * 100 >= (
                UNMOVED_SEEN_PCT)
            moved.append(seen)
        v = f"{p.value(res.x[i]):.4g}"
        if moved == [False, True]:
            why[_name(p)] = (f"the fit left it at its start, {v}: raising it moves no measured size (another term "
                             "binds there) and lowering it fits worse; the logs say only that it is at least that")
        elif moved == [True, False]:
            why[_name(p)] = (f"the fit left it at its start, {v}: lowering it moves no measured size (another term "
                             "binds there) and raising it fits worse; the logs say only that it is at most that")
        elif moved == [False, False]:
            why[_name(p)] = (f"the fit left it at its start, {v}: no measured size moves by {UNMOVED_SEEN_PCT:g}% "
                             "when it changes a little either way")
    return why


def at_bound(res: FitResult) -> dict[str, str]:
    """The fitted parameters that ended at a bound of their physical range, with which bound.

    Parameters
    ----------
    res : FitResult

    Returns
    -------
    dict of str to str
        Parameter name (with ``[tag]``) -> the bound, in the parameter's written value.
    """
    out = {}
    for p, x in zip(res.params, res.x):
        tol = 1e-6 if p.kind == "log" else 1e-6 * (p.hi - p.lo)
        for bound, side in ((p.lo, "lower"), (p.hi, "upper")):
            if abs(x - bound) <= tol:
                out[_name(p)] = (f"at the {side} bound of its physical range ({p.value(bound):.4g}): the logs would "
                                 "take it further, so the model lacks something there or the cluster is not the one "
                                 "assumed")
    return out
