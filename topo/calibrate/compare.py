"""Measured against modelled, per size, and a verdict a user can act on.

``efficiency = modelled time / measured time``: 1.0 means the run is as fast as the model says its hardware
allows, 0.5 that it takes twice as long. The headline is the median efficiency over the bandwidth regime (sizes
>= 64 MiB, else the largest quarter of the sweep); the gap is the contiguous band of sizes with the lowest
efficiency below 85%, and its regime is the model's: a size is latency-dominated where the modelled latency term
is at least half of the modelled time (:attr:`SizeComparison.regime`, the table's column), and a band is the regime
all its sizes share, else mixed, the verdict naming which of its sizes are which. Where the run beats the model by more than 15% over a band of sizes (the model is too slow
for the cluster there), the verdict says so too, so that "no size falls below 85%" never hides a model that is slow.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from ..engine.collectives import COLLECTIVES, busbw_factor, normalize_collective
from ..errors import TopoError
from ..engine.estimate import estimate
from ..engine.profiles import Profile, resolve_profile
from ..units import format_size
from .parse import COLLECTIVES_PERF, NcclRun
from .setup import Setup

# how every fitted value's source begins in a profile topo calibrate writes (topo.calibrate.write), by which compare
# tells such a profile from a bundled one
CALIBRATED_SOURCE = "fitted by topo calibrate"

__all__ = ["SizeComparison", "CompareResult", "compare_run", "BW_MIN_BYTES", "LAT_MAX_BYTES"]

BW_MIN_BYTES = 64 * 2**20
LAT_MAX_BYTES = 64 * 2**10
GAP_BELOW = 0.85
AHEAD_ABOVE = 1.15


@dataclass
class SizeComparison:
    size_bytes: int
    measured_s: float
    model_s: float
    model_latency_s: float
    measured_busbw_GBps: float
    model_busbw_GBps: float
    algorithm: str
    protocol: str
    wrong: float | None = None
    nccl_algorithm: str | None = None  # what NCCL_DEBUG_SUBSYS=TUNING lines say NCCL chose at this size
    nccl_protocol: str | None = None

    @property
    def efficiency(self) -> float:
        return self.model_s / self.measured_s

    @property
    def latency_bound(self) -> bool:
        return self.model_latency_s >= 0.5 * self.model_s

    @property
    def regime(self) -> str:
        """``latency`` where the modelled latency term is at least half the modelled time, else ``bandwidth``: the
        one rule for the table's column, ``--json`` and the verdict's bands."""
        return "latency" if self.latency_bound else "bandwidth"

    def to_dict(self) -> dict:
        """One size of ``topo compare --json``: SI base units with the unit in every key, as every topo document
        (bandwidths in B/s; the GB/s attributes are for the table)."""
        d = asdict(self)
        for k in ("measured_busbw_GBps", "model_busbw_GBps"):
            d[k.replace("_GBps", "_Bps")] = d.pop(k) * 1e9
        return {**d, "efficiency": self.efficiency, "error_pct": (self.model_s / self.measured_s - 1) * 100,
                "regime": self.regime}


@dataclass
class CompareResult:
    source: str
    collective: str
    ranks: int
    spec: str
    profile: str
    algorithm: str
    rows: list[SizeComparison]
    headline_efficiency: float | None
    headline_sizes: str
    gap: dict | None
    verdict: str
    assumptions: list[str] = field(default_factory=list)
    nccl_version: str | None = None
    ahead: dict | None = None  # the band of sizes where the run is > AHEAD_ABOVE x faster than the model
    notes: list[str] = field(default_factory=list)  # what the parser left out; NICs faster than carried (nic_notes)
    placement: str = ""  # which GPUs the ranks were modelled on, as topo estimate's header says it
    choose: str = "fastest"  # how the model's auto picks per size: routed fastest, or NCCL's tuner (topo.engine.tuner)
    # a profile topo calibrate wrote: True when it was fitted on this log (mdape_pct is in sample), False when on
    # others only (held out); None for a profile no calibration of logs wrote (a bundled one)
    in_sample: bool | None = None
    profile_fitted_on: str | None = None  # the logs such a profile was fitted on, as its fitted_on says

    @property
    def mdape_pct(self) -> float:
        return statistics.median(abs(r.model_s / r.measured_s - 1) * 100 for r in self.rows)

    def to_dict(self) -> dict:
        return {"source": self.source, "collective": self.collective, "ranks": self.ranks,
                "placement": self.placement, "spec": self.spec,
                "profile": self.profile, "algorithm": self.algorithm, "choose": self.choose,
                "nccl_version": self.nccl_version,
                "headline_efficiency": self.headline_efficiency, "headline_sizes": self.headline_sizes,
                "gap": self.gap, "ahead": self.ahead, "verdict": self.verdict, "mdape_pct": self.mdape_pct,
                "in_sample": self.in_sample, "profile_fitted_on": self.profile_fitted_on,
                "assumptions": self.assumptions, "notes": self.notes, "sizes": [r.to_dict() for r in self.rows]}

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows])


def run_collective(run: NcclRun, collective: str | None = None, several: bool = False) -> str:
    """The collective ``run`` measured: the one its log names, else ``collective`` (``-c``), else the one its table
    shows (busbw / algbw).

    Parameters
    ----------
    run : NcclRun
        A parsed run; its log names its collective where nccl-tests printed the binary's name (``# Collective test
        starting: all_gather_perf``, NVIDIA/nccl-tests src/util.cu:624 at a0b82b22, since dafb704 of 2025-06; or a
        launch line naming ``*_perf``).
    collective : str, optional
        ``-c``: for a run whose log names none; a contradicting one is an error.
    several : bool
        The run is one of several (logs of one calibration, runs of one file): ``-c`` is then for those that name
        none, and a run naming another collective keeps its own, with a note in ``run.notes`` (walk32: a log without
        a ``*_perf`` name beside logs with one could not be given ``-c``).
    """
    if collective is not None and collective not in COLLECTIVES_PERF.values():
        collective = normalize_collective(collective)  # a name nccl-tests does not have either: the option's fault
    certain = run.collective_from == "binary" or run.collective == "all_reduce"  # busbw > algbw: all-reduce only
    if several and collective and run.collective_from == "binary" and collective != run.collective:
        said = (f"the log names its collective, {run.collective} (its binary, {run.binary}): read as "
                f"{run.collective}; -c {collective} is for the logs that name none")
        if said not in run.notes:  # once, however often the run is compared (tidy76)
            run.notes.append(said)
        collective = None
    if collective and run.collective and collective != run.collective and certain:
        how = f"its binary, {run.binary}" if run.collective_from == "binary" else "busbw / algbw = 2(n-1)/n"
        raise TopoError(f"the log ran {run.collective} ({how}), not {collective}; name a collective only for a "
                        "log that does not say", source=run.source, key="collective")
    if collective and run.collective is None and run.collective_candidates and \
            collective not in run.collective_candidates:
        # walk42: a table whose busbw/algbw is (n-1)/n (nccl-tests' factor of all-gather, reduce-scatter and
        # all-to-all, PERFORMANCE.md) was modelled as -c all_reduce, whose factor is 2(n-1)/n
        raise TopoError(f"the log's table has busbw/algbw = (n-1)/n, nccl-tests' factor of "
                        f"{' or '.join(run.collective_candidates)}, not of {collective}; name one of those",
                        source=run.source, key="collective")
    coll = collective or run.collective
    if coll is None and run.rows and max(r.algbw_GBps for r in run.rows) < 0.5:
        cut = f", below its header's maxBytes {run.max_bytes} (cut short?)" if run.looks_cut_short else ""
        raise TopoError(f"the log stops at size {run.rows[-1].size_bytes} B{cut} and has no *_perf binary name: its "
                        "sizes are too small for busbw/algbw to tell which collective ran; give the whole log, or "
                        "name the collective", source=run.source, key="collective")
    if coll is None:
        fits = (f"its table fits {' or '.join(run.collective_candidates)}: busbw/algbw = (n-1)/n"
                if run.collective_candidates else "and its table could be several")
        raise TopoError(f"the log does not say which collective ran (no *_perf binary name; {fits}); name it",
                        source=run.source, key="collective")
    if coll not in COLLECTIVES:
        raise TopoError(f"{coll} is measured by nccl-tests but not modelled by topo; modelled: "
                        f"{', '.join(COLLECTIVES)}", source=run.source, key="collective")
    return coll


def modelled(setup: Setup, coll: str, sizes: list[int], profile: Profile):
    """The model of a run: one estimate call for the whole sweep (an :class:`topo.engine.result.EstimateResult`,
    whose ``placement`` says which GPUs the ranks are)."""
    return estimate(setup.fabric, coll, sizes, **setup.placement_options(),
                    algorithm=setup.algorithm if coll == "all_reduce" else "auto", profile=profile,
                    protocol=setup.protocol, channels=setup.channels, choose=setup.choose,
                    gpus_per_process=setup.gpus_per_process)


def modelled_times(setup: Setup, coll: str, sizes: list[int], profile: Profile):
    """The model's per-size results (one estimate call for the whole sweep)."""
    return modelled(setup, coll, sizes, profile).results


def compare_run(run: NcclRun, setup: Setup, profile=None, collective: str | None = None,
                several: bool = False) -> CompareResult:
    """Compare one parsed run with the model of ``setup`` under ``profile`` (default: the fabric's); ``collective``
    and ``several`` as :func:`run_collective`."""
    coll = run_collective(run, collective, several)
    prof = resolve_profile(profile, setup.fabric)
    rows = [r for r in run.rows if r.time_s > 0]
    if not rows:
        raise TopoError("no row with a positive time to compare", source=run.source)
    model = modelled(setup, coll, [r.size_bytes for r in rows], prof)
    est = model.results
    factor = busbw_factor(coll, setup.gpus)
    chosen = {t["size_bytes"]: t for t in run.tuning}
    comps = [SizeComparison(r.size_bytes, r.time_s, e.time_s, e.latency_s, r.size_bytes / r.time_s / 1e9 * factor,
                            e.busbw_GBps, e.algorithm, e.protocol, r.wrong,
                            chosen.get(r.size_bytes, {}).get("algorithm"), chosen.get(r.size_bytes, {}).get("protocol"))
             for r, e in zip(rows, est)]
    head, head_sizes = _headline(comps)
    gap = _gap(comps)
    ahead = _ahead(comps, head)
    # a profile topo calibrate fitted to this very log names its sha256 in every fitted value's fitted_on
    fitted_here = bool(run.sha256) and any(run.sha256[:16] in (src.get("fitted_on") or "")
                                           for src in prof.sources.values())
    calibrated_on = next((src["fitted_on"] for src in prof.sources.values()
                          if str(src.get("source") or "").startswith(CALIBRATED_SOURCE) and src.get("fitted_on")),
                         None)
    return CompareResult(run.source, coll, setup.gpus, setup.spec_name, prof.name, setup.algorithm, comps, head,
                         head_sizes, gap, _verdict(run, comps, head, head_sizes, gap, prof.name, ahead, fitted_here),
                         list(setup.assumptions), run.nccl_version, ahead, [*run.notes, *setup.notes], model.placement,
                         setup.choose, fitted_here if calibrated_on else None, calibrated_on)


def _headline(comps: list[SizeComparison]) -> tuple[float | None, str]:
    big = [c for c in comps if c.size_bytes >= BW_MIN_BYTES]
    label = f"sizes >= {format_size(BW_MIN_BYTES)}"
    if not big:
        k = max(1, len(comps) // 4)
        big = sorted(comps, key=lambda c: c.size_bytes)[-k:]
        label = (f"its largest size ({format_size(big[0].size_bytes)})" if k == 1 else
                 f"its largest {k} sizes ({format_size(big[0].size_bytes)} and up)")
    return statistics.median(c.efficiency for c in big), label


def _ahead(comps: list[SizeComparison], head: float | None) -> dict | None:
    """The contiguous run of sizes where the run beats the model by more than AHEAD_ABOVE; where the headline
    already says the run is faster at the sizes >= BW_MIN_BYTES, the run of such sizes below them, which the
    headline does not speak for (walk32: 2.2x faster from 8 B to 8 MiB went unsaid beside a 1.17x headline, the
    band reaching 512 MiB)."""
    band = _band(comps, lambda c: c.efficiency > AHEAD_ABOVE, lambda c: c.efficiency - 1)
    if band and head is not None and head > 1.1 and band["max_bytes"] >= BW_MIN_BYTES:
        band = _band([c for c in comps if c.size_bytes < BW_MIN_BYTES], lambda c: c.efficiency > AHEAD_ABOVE,
                     lambda c: c.efficiency - 1)
    return band


def _gap(comps: list[SizeComparison]) -> dict | None:
    """The contiguous run of sizes below GAP_BELOW with the largest total shortfall."""
    return _band(comps, lambda c: c.efficiency < GAP_BELOW, lambda c: 1 - c.efficiency)


def _band(comps: list[SizeComparison], inside, weight) -> dict | None:
    """The contiguous run of sizes where ``inside`` holds with the largest total ``weight``, and its regime."""
    best, cur = None, []
    for c in sorted(comps, key=lambda c: c.size_bytes) + [None]:
        if c is not None and inside(c):
            cur.append(c)
            continue
        if cur:
            total = sum(weight(x) for x in cur)
            if best is None or total > best[0]:
                best = (total, cur)
        cur = []
    if best is None:
        return None
    band = best[1]
    regimes = {c.regime for c in band}
    return {"min_bytes": band[0].size_bytes, "max_bytes": band[-1].size_bytes,
            "median_efficiency": statistics.median(c.efficiency for c in band),
            "regime": regimes.pop() if len(regimes) == 1 else "mixed", "sizes": len(band),
            "latency_bound_bytes": [c.size_bytes for c in band if c.latency_bound],
            "bandwidth_bound_bytes": [c.size_bytes for c in band if not c.latency_bound]}


def _sizes_text(sizes: list[int], band: dict) -> str:
    """``sizes`` (some of a band's) as ranges of consecutive sizes of the band: ``128 KiB-8 MiB, 32 MiB``."""
    every = sorted(band["latency_bound_bytes"] + band["bandwidth_bound_bytes"])
    runs: list[list[int]] = []
    for s in sorted(sizes):
        if runs and every.index(s) == every.index(runs[-1][-1]) + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(_range({"min_bytes": r[0], "max_bytes": r[-1]}) for r in runs)


def _mixed_text(band: dict) -> str:
    """Which sizes of a mixed band are latency-bound and which bandwidth-bound in the model."""
    return (f"where latency dominates in the model at {_sizes_text(band['latency_bound_bytes'], band)} and "
            f"bandwidth at {_sizes_text(band['bandwidth_bound_bytes'], band)}")


def _range(band: dict) -> str:
    return (format_size(band["min_bytes"]) if band["min_bytes"] == band["max_bytes"]
            else f"{format_size(band['min_bytes'])}-{format_size(band['max_bytes'])}")


_LATENCY_WHY = ("per-call software latency or network round trips (check the NCCL_PROTO/NCCL_ALGO settings, CPU "
                "affinity, and the network's small-message latency)")
_BANDWIDTH_WHY = ("a slow or missing link (check that every NIC is used and at line rate, GPUDirect RDMA, PCIe, "
                  "NVLink)")


def _verdict(run, comps, head, head_sizes, gap, profile_name, ahead=None, fitted_here=False) -> str:
    parts = []
    advice = ("the profile was already calibrated on this log: these sizes have a shape the model does not follow"
              if fitted_here else "calibrate the profile on this log")
    # the headline is the median over its sizes (one may still lie in a band named below), unless it is one size
    one_size = head_sizes.startswith("its largest size ")
    median = "" if one_size else " (their median)"
    if head is not None:
        if head > 1.1:
            parts.append(f"this run is {head:.2f}x faster than the model at {head_sizes}{median}: the model "
                         f"({profile_name}) "
                         "is too slow for this cluster, or the cluster differs from the spec (more NICs, faster "
                         f"links); {advice}")
        else:
            parts.append(f"this run reaches {min(head, 1.0) * 100:.0f}% of what its hardware allows at "
                         f"{head_sizes} ({'' if one_size else 'their median; '}model: {profile_name})")
    if gap and head is not None and head > 1.1 and gap["regime"] == "bandwidth":
        # walk25: "1.21x faster than the model", then "a slow or missing link" for one slower size: the same links
        # carry the headline sizes faster than the model, so no link of them is slow
        these = "that size" if gap["sizes"] == 1 else "those sizes"
        parts.append(f"but at {_range(gap)} it is slower ({gap['median_efficiency'] * 100:.0f}% of the model, where "
                     "bandwidth dominates): not a slow link, which would slow the other sizes over the same links "
                     f"too; a dip of this run at {these} (rerun to see whether it holds)")
    elif gap:
        if gap["regime"] == "latency":
            why = f"where latency dominates: {_LATENCY_WHY}"
        elif gap["regime"] == "bandwidth":
            why = f"where bandwidth dominates: {_BANDWIDTH_WHY}"
        else:
            why = (f"{_mixed_text(gap)}, so both fall short: "
                   f"{_LATENCY_WHY}; and {_BANDWIDTH_WHY}; or the cluster is not the one modelled (see the "
                   "assumptions)")
        parts.append(f"the gap is at {_range(gap)} ({gap['median_efficiency'] * 100:.0f}% of the model), {why}")
        if gap["regime"] != "bandwidth" and (run.ngpus or 1) > 1:
            parts.append(_single_process_note(run))
    elif head is not None and head <= 1.1 and not ahead:
        parts.append(f"no size falls below {GAP_BELOW * 100:.0f}% of the model")
    if ahead and (head is None or head <= 1.1 or ahead["max_bytes"] < BW_MIN_BYTES):
        where = {"latency": "where latency dominates in the model",
                 "bandwidth": "where bandwidth dominates in the model"}.get(ahead["regime"]) or _mixed_text(ahead)
        said = head is not None and head > 1.1  # the headline gave the advice already
        parts.append(f"at {_range(ahead)} the run is {ahead['median_efficiency']:.2f}x faster than the model "
                     f"({where}): the model ({profile_name}) is too slow for this "
                     f"cluster there" + ("" if said else f"; {advice}"))
    if run.failed_validation:
        parts.append("WARNING: the log reports wrong results (#wrong > 0)")
    return "; ".join(parts) + "."


def _single_process_note(run) -> str:
    """Why a latency gap may be the harness, not the cluster: one thread launching on several GPUs."""
    return (f"this log launches {run.ngpus} GPUs from each thread (nGpus {run.ngpus}), which adds CUDA launch "
            "latency beyond the host's bare launches topo models (NCCL's per-GPU group work); NVIDIA recommends one process per GPU (mpirun ... -g 1) to measure "
            "latency (NVIDIA/nccl-tests issue #333): rerun that way before reading this gap as the cluster's")
