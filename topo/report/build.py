"""The report's scenarios: which library calls it makes for a spec, and what it keeps of them.

For each spec: the fabric and its inventory; then a data-parallel ``all_reduce`` from 8 B to 16 GiB (factors of
2, nccl-tests' default sweep) with ``algorithm="auto"`` on every GPU, and the same on one pod (the first pod's
GPUs, packed; in a fabric of one pod, the first unit instead). Each scenario also estimates the algorithms NCCL
does not choose among (hierarchical, halving-doubling, ...) for the curves, where they can run, and keeps the
link loads of one size (1 GiB by default) reduced to a :class:`~topo.report.link_summary.LoadSummary`.
On a fabric of three tiers or more, also the all-reduce and all-to-all across the top tier at 1 GiB
(:func:`topo.plan.network.crosspod_collectives`, the figures ``topo plan`` compares), which the tier above the pods
bounds. Nothing is recomputed here: every number comes from :func:`topo.engine.estimate.estimate` and the inventory
(and, with failed parts, :func:`topo.fabric.bisection.bisection` for the bisection without them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections.abc import Mapping, Sequence

from ..fabric.bisection import Bisection, bisection
from ..fabric.builders import build_fabric
from ..engine.collectives import ALGORITHMS, NCCL_ALGORITHMS
from ..errors import AlgorithmUnavailable, TopoError, Unreachable
from ..engine.estimate import estimate, size_sweep
from ..engine.profiles import resolve_profile
from ..fabric.fabric import Fabric
from ..fabric.cut import cut_message
from ..fabric.inventory import Inventory, inventory
from ..engine.result import EstimateResult
from ..spec import load_spec
from ..spec.load import bundled_dir, display_path, resolve_spec_path
from ..spec.model import Spec
from ..spec.overrides import override_label
from ..engine.traffic import MixResult, run_mix
from ..engine.traffic_file import load_traffic
from ..plan.network import NetworkFigures, crosspod_collectives
from ..units import parse_size_bytes
from .link_summary import LoadSummary, summarize_loads

__all__ = ["Scenario", "MixScenario", "SpecReport", "build_spec_report", "build_reports", "DEFAULT_SIZES",
           "DEFAULT_LOAD_SIZE", "MIXES"]

# traffic mixes the report runs on fabrics of several pods (bundled files, topo/data/traffic/): a training step's
# 3D-parallel traffic, and an expert-parallel all-to-all across pods beside data parallelism
MIXES = ("3d-parallel", "moe-alltoall")

DEFAULT_SIZES = ("8", "16G", 2)  # nccl-tests' -b 8 -e 16G -f 2
DEFAULT_LOAD_SIZE = "1GiB"
COLLECTIVE = "all_reduce"


@dataclass
class Scenario:
    """One collective on one placement: the auto sweep, the extra algorithms' sweeps, the link loads."""

    key: str  # "cluster" or "pod"
    label: str  # "whole cluster", "one pod", "one scalable unit"
    result: EstimateResult
    extra: list[EstimateResult]
    unavailable: dict[str, str]  # algorithm -> why it cannot run here
    loads: LoadSummary | None
    seconds: float


@dataclass
class MixScenario:
    """Several collectives at once (a bundled traffic mix) and the link loads they make together."""

    name: str
    result: MixResult
    loads: LoadSummary
    seconds: float


@dataclass
class SpecReport:
    """Everything the page shows of one spec."""

    spec: Spec
    source: str  # the file it was read from (and the --set overrides)
    overrides: list[str]
    fabric: Fabric
    inventory: Inventory
    scenarios: list[Scenario]
    timings: dict[str, float] = field(default_factory=dict)
    mixes: list[MixScenario] = field(default_factory=list)
    mix_note: str = ""  # why no mix is shown
    degraded_bisection: Bisection | None = None  # with failed parts: the max flow between the halves without them
    top_tier: NetworkFigures | None = None  # the collectives across the tier above the pods (as `topo plan`'s)
    profile: str = ""  # the cost profile every collective of the page was priced with (its name)
    cut: str = ""  # failed parts that cut GPUs apart: the router's line (which GPUs, which parts); the collectives
    # over the GPUs it names are left out (no route carries them), the rest of the page is drawn

    @property
    def bisection_per_gpu_Bps(self) -> float:
        """The bisection per GPU the page shows: the degraded one when parts have failed, else the inventory's."""
        if self.degraded_bisection is not None:
            return self.degraded_bisection.bandwidth_per_gpu_Bps
        return self.inventory.bisection_bandwidth_per_gpu_Bps


def _second_scope(fabric: Fabric) -> tuple[str, str, int] | None:
    L = fabric.layout
    unit_gpus = L.servers_per_unit * L.gpus_per_server
    if L.num_pods > 1:
        n = L.units_per_pod * unit_gpus
        return "pod", "one pod", n
    if L.num_units > 1:
        return "unit", f"one {L.unit_name}", unit_gpus
    return None


def _scenario(fabric: Fabric, key: str, label: str, gpus: int | None, sizes: list[int], load_size: int,
              extra_algorithms: Sequence[str], profile) -> Scenario:
    t0 = time.perf_counter()
    result = estimate(fabric, COLLECTIVE, sizes, gpus=gpus, algorithm="auto", profile=profile)
    unavailable = dict(result.unavailable)
    extra = []
    for name in extra_algorithms:
        try:
            extra.append(estimate(fabric, COLLECTIVE, sizes, gpus=gpus, algorithm=name, profile=profile))
        except AlgorithmUnavailable as exc:
            unavailable[name] = exc.reason
        except TopoError as exc:
            unavailable[name] = exc.message
    loads = None
    if load_size in sizes:
        loads = summarize_loads(result.link_loads(load_size), fabric)
    return Scenario(key, label, result, extra, unavailable, loads, time.perf_counter() - t0)


def build_spec_report(spec: str | Spec | None = None, overrides: Sequence[str] = (), sizes=DEFAULT_SIZES,
                      load_size=DEFAULT_LOAD_SIZE, extra_algorithms: Sequence[str] | None = None,
                      failures: Sequence[str] = (), top_tier: bool = True, profile=None) -> SpecReport:
    """Run the report's scenarios on one spec (a file, a bundled name, a :class:`Spec`, or None: the default).

    ``sizes`` is ``(min, max, factor)`` as nccl-tests' ``-b -e -f``; ``load_size`` the size whose link loads are
    shown; ``extra_algorithms`` defaults to every modelled all_reduce algorithm NCCL's ``auto`` does not try;
    ``top_tier``: also the collectives across the top tier (``SpecReport.top_tier``, shown only where specs are
    compared; about 2 s on the 100k-GPU default, so a report of one spec leaves them out); ``profile``: the cost
    profile of every collective, as :func:`topo.engine.profiles.resolve_profile` takes it (None: the fabric's own),
    resolved once here for the fabric.
    """
    timings: dict[str, float] = {}
    t = time.perf_counter()
    spec_obj = spec if isinstance(spec, Spec) else load_spec(spec, overrides)
    fabric = build_fabric(spec_obj)
    if failures:
        try:
            fabric = fabric.with_failures(*failures)
        except TopoError as exc:
            raise TopoError(f"{exc.message} (on {fabric.name})", key="--fail") from None  # which of several specs
    prof = resolve_profile(profile, fabric)
    inv = inventory(fabric)
    degraded_bisection = bisection(fabric) if fabric.failures else None
    timings["fabric"] = time.perf_counter() - t
    t = time.perf_counter()
    figures = _top_tier(fabric, inv, degraded_bisection, prof) if top_tier else None
    timings["top tier"] = time.perf_counter() - t
    sweep = size_sweep(*sizes)
    load_bytes = parse_size_bytes(load_size)
    if extra_algorithms is None:
        extra_algorithms = [a for a in ALGORITHMS[COLLECTIVE] if a not in NCCL_ALGORITHMS[COLLECTIVE]]
    scenarios, cut = _scenarios(fabric, sweep, load_bytes, extra_algorithms, prof, timings)
    mixes, note, mix_cut = _mixes(fabric, prof, timings)
    source = _source(spec, spec_obj, overrides)
    return SpecReport(spec=spec_obj, source=source, overrides=list(overrides), fabric=fabric, inventory=inv,
                      scenarios=scenarios, timings=timings, mixes=mixes, mix_note=note,
                      degraded_bisection=degraded_bisection, top_tier=figures, profile=prof.name,
                      cut=cut or mix_cut)


def _scenarios(fabric: Fabric, sweep, load_bytes: int, extra_algorithms, prof, timings: dict) -> tuple[list, str]:
    """The whole cluster's all_reduce and the second scope's (:func:`_second_scope`), each kept where it runs, and
    the line of the first that failed parts cut apart ("" when both run): the page names the cut and draws the
    rest (tidy67: it wrote no page)."""
    scopes = [("cluster", "whole cluster", None), *([_second_scope(fabric)] if _second_scope(fabric) else [])]
    scenarios, cut = [], ""
    for key, label, n in scopes:
        try:
            scenarios.append(_scenario(fabric, key, label, n, sweep, load_bytes, extra_algorithms, prof))
        except Unreachable as exc:
            cut = cut or cut_message(fabric, exc.message)
            continue
        timings[key] = scenarios[-1].seconds
    return scenarios, cut


def _mixes(fabric: Fabric, prof, timings: dict) -> tuple[list, str, str]:
    """The bundled traffic mixes on a fabric of several pods, why the rest are not shown (one pod; or failed parts
    cut a mix's GPUs apart), and the router's line for that cut ("" when none)."""
    if fabric.layout.num_pods <= 1:
        return [], ("The traffic mixes (tensor parallelism in every NVLink domain with data parallelism and pipeline "
                    "sends across pods; an all-to-all across pods) need a fabric of several pods."), ""
    mixes = []
    for name in MIXES:
        t = time.perf_counter()
        settings, members = load_traffic(name)
        try:
            mix = run_mix(fabric, members, sharing=settings["sharing"], ecmp=settings["ecmp"], name=name,
                          profile=prof)
        except Unreachable as exc:
            return mixes, f"Traffic mix {name} not drawn: {exc.message}.", cut_message(fabric, exc.message)
        mixes.append(MixScenario(name, mix, summarize_loads(mix.link_loads(), fabric), time.perf_counter() - t))
        timings[f"mix {name}"] = mixes[-1].seconds
    return mixes, "", ""


def _top_tier(fabric: Fabric, inv: Inventory, degraded: Bisection | None, profile) -> NetworkFigures | None:
    """The all-reduce across the top tier's blocks and the all-to-all over every GPU at 1 GiB, as ``topo plan``
    computes them (:func:`topo.plan.network.crosspod_collectives`): the figures a tier above the pods bounds when
    the cluster's own all-reduce is bound at the NICs; None where failed parts cut GPUs apart."""
    try:
        if degraded is not None:
            return crosspod_collectives(fabric, degraded.bandwidth_Bps, degraded.bandwidth_per_gpu_Bps,
                                        profile=profile)
        return crosspod_collectives(fabric, inv.bisection_bandwidth_Bps, inv.bisection_bandwidth_per_gpu_Bps,
                                    profile=profile)
    except Unreachable:  # failed parts cut GPUs apart: SpecReport.cut names it, the comparison shows "-"
        return None


def _source(asked, spec: Spec, overrides: Sequence[str]) -> str:
    """Where the spec came from, as the page shows it: a bundled name (with its checkout path when the checkout's
    ``topologies/`` is below the working folder; a wheel's has none), or the file as given."""
    where = spec.error_source(None)
    if not isinstance(asked, Spec):
        path = resolve_spec_path(asked)
        if path.resolve().parent == bundled_dir().resolve():
            shown = display_path(path)  # as errors name it (walk14)
            where = shown if shown.startswith("bundled spec ") else f"bundled spec {path.stem} ({shown})"
    return where + "".join(f" {override_label(o)}" for o in overrides)


def build_reports(specs: Sequence[str | None] = (None,), overrides: Sequence[str] | Mapping = (),
                  failures: Sequence[str] = (), **kw) -> list[SpecReport]:
    """:func:`build_spec_report` for each spec (the default cluster when none is given); the collectives across the
    top tier only where several specs are compared (the comparison table is their one use).

    Parameters
    ----------
    specs : sequence of str or None
        Spec files or bundled names (None: the default spec).
    overrides : sequence of str or mapping
        The ``KEY=VALUE`` overrides every spec takes, or a mapping from each spec (as given) to its own (walk43: a
        design set apart from the others, as ``topo report`` takes ``SPEC:KEY=VALUE``).
    failures : sequence of str
        Parts to fail in every spec.
    **kw
        Passed to :func:`build_spec_report`.

    Returns
    -------
    list of SpecReport
        One a spec, in order.
    """
    specs = list(specs) or [None]
    own = overrides.get if isinstance(overrides, Mapping) else (lambda s: overrides)
    return [build_spec_report(s, own(s) or (), failures=failures, top_tier=len(specs) > 1, **kw) for s in specs]
