"""One point of a study, computed: the sweep's only door to the engine, the training model and the planner.

Everything a point needs from the rest of topo is imported here and nowhere else in :mod:`topo.sweep`, so the
sweep depends on the engine through one short list of public functions.

A worker process keeps a small cache of *intact* fabrics, keyed by the spec's text and its overrides: every point
of the same design reuses the fabric (its link arrays and derived tables), and a failure draw is the cached intact
fabric with a failure mask on top (:meth:`topo.Fabric.with_failures`), never a rebuilt one. The router is
rebuilt per point: it costs about 30 ms at 100k GPUs against about 1 s of routing, and the engine keeps its state
inside one estimate, so a point's figures do not depend on which points ran before it on the same worker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import tomllib
from collections import OrderedDict
from pathlib import Path

from ..engine.estimate import estimate
from ..engine.region_estimate import estimate_region
from ..engine.options import EstimateOptions
from ..engine.traffic import run_mix
from ..engine.traffic_file import load_traffic
from ..errors import TopoError
from ..fabric.builders import build_fabric
from ..fabric.inventory import inventory
from ..fabric.region import Region, region_from_specs
from ..plan import plan
from ..plan.train_time import TrainingJob
from ..spec import spec_from_dict
from ..spec.region_load import region_from_dict, site_specs
from ..spec.sites import is_region_data
from ..training.parallel import ParallelLayout, layout_pairs, make_layout
from ..training.model import load_model
from ..training.multisite import DEFAULT_SHARES, estimate_across_sites
from ..training.step import estimate_step
from ..units import parse_size_bytes
from .files import file_digest

__all__ = ["toml_value", "overrides_of", "COMPUTES", "FIGURES", "ESTIMATE_KEYS", "TRAIN_KEYS", "PLAN_KEYS", "POINT_KEYS", "run_batch",
           "run_point", "clear_cache"]

COMPUTES = ("estimate", "train", "plan", "describe")

# point keys (beside "spec", "seed" and spec field paths) that each computation reads
ESTIMATE_KEYS = ("collective", "size", "traffic") + tuple(
    f.name for f in dataclasses.fields(EstimateOptions) if f.name != "ranks")
_LAYOUT_FIELDS = tuple(n for n in ParallelLayout.model_fields if n not in ESTIMATE_KEYS)
# "profile" is an estimate option too: a train point prices its step's collectives with it as estimate does (tidy67)
# "shares" reaches a region's point only: its replicas' split over the sites, as topo train REGION --shares (tidy72)
TRAIN_KEYS = ("model", "layout", "efficiency", "profile", "shares") + _LAYOUT_FIELDS
PLAN_KEYS = ("days", "mfu", "pue", "plan_collectives")
POINT_KEYS = tuple(dict.fromkeys(("spec", "fail") + ESTIMATE_KEYS + TRAIN_KEYS + PLAN_KEYS))

# figure columns per computation: name -> (arrow type, which way is worse: "high", "low" or None)
FIGURES: dict[str, dict[str, tuple[str, str | None]]] = {
    "estimate": {
        "time_s": ("float64", "high"), "algbw_GBps": ("float64", "low"), "busbw_GBps": ("float64", "low"),
        "latency_s": ("float64", "high"), "bandwidth_s": ("float64", "high"), "slowdown": ("float64", "high"),
        "num_ranks": ("int64", None), "algorithm": ("string", None), "protocol": ("string", None),
        "bottleneck": ("string", None), "bottleneck_level": ("string", None),
        "bottleneck_utilization": ("float64", None), "bound": ("string", None)},
    "train": {
        "step_time_s": ("float64", "high"), "mfu": ("float64", "low"), "tflop_per_s_per_gpu": ("float64", "low"),
        "tokens_per_s": ("float64", "low"), "exposed_comm_s": ("float64", "high"),
        "memory_per_gpu_bytes": ("float64", "high"), "fits": ("bool", None), "train_gpus": ("int64", None),
        "slowest_dim": ("string", None), "slowest_dim_level": ("string", None),
        "throughput_vs_one_site": ("float64", "low"), "shares": ("string", None)},
    "plan": {
        "capex_usd": ("float64", "high"), "network_capex_usd": ("float64", "high"),
        "capex_per_gpu_usd": ("float64", "high"), "it_power_W": ("float64", "high"),
        "facility_power_W": ("float64", "high"), "network_power_W": ("float64", "high"),
        "energy_per_year_Wh": ("float64", "high"), "energy_cost_per_year_usd": ("float64", "high"),
        "switches": ("int64", None), "transceivers": ("int64", None), "cables": ("int64", None),
        "network_share": ("float64", None), "goodput": ("float64", "low"), "effective_flop": ("float64", "low"),
        "first_optical_failure_s": ("float64", "low")},
    "describe": {
        "num_gpus": ("int64", None), "num_switches": ("int64", None), "num_scale_out_links": ("int64", None),
        "bisection_bandwidth_per_gpu_Bps": ("float64", "low"), "largest_nonblocking_gpus": ("int64", None),
        "switch_power_W": ("float64", "high"), "max_oversubscription": ("float64", "high"),
        "failed_links": ("int64", None)},
}

_CACHE_FABRICS = 4  # intact fabrics kept per worker (a 100k-GPU fabric with its tables is a few hundred MB)
_fabrics: OrderedDict = OrderedDict()
_models: dict = {}


def clear_cache() -> None:
    """Forget the cached fabrics and models of this process."""
    _fabrics.clear()
    _models.clear()


def toml_value(v) -> str:
    """The text of an override's value: ``v`` written so that :func:`topo.spec.load.apply_overrides` reads back the same value and type."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if v == "":
        return ""  # KEY= removes the key, as --set KEY= does
    import json

    return json.dumps(str(v))


def overrides_of(point: dict) -> tuple[str, ...]:
    """The ``KEY=VALUE`` overrides of a point's spec field paths (keys with a dot or a bracket), in order."""
    return tuple(f"{k}={toml_value(v)}" for k, v in point.items() if "." in k or "[" in k)


def _fabric(point: dict, specs: dict):
    ref = point["spec"]
    source, text = specs[ref]
    sets = overrides_of(point)
    key = (hashlib.sha256(text.encode()).hexdigest(), source, sets)
    hit = _fabrics.get(key)
    if hit is None:
        try:
            data = tomllib.loads(text)
            if is_region_data(data):  # several sites: their specs are bundled names or inline (the text travels)
                region = region_from_dict(data, source, sets)
                hit = region_from_specs(region, site_specs(region, Path("."), source), source)
            else:
                hit = build_fabric(spec_from_dict(data, source=source, overrides=sets))
        except TopoError as exc:
            hit = exc
        _fabrics[key] = hit
        while len(_fabrics) > _CACHE_FABRICS:
            _fabrics.popitem(last=False)
    else:
        _fabrics.move_to_end(key)
    if isinstance(hit, TopoError):
        raise hit
    fail = str(point.get("fail") or "").strip()
    if not fail:
        return hit
    return hit.with_failures(*[p.strip() for p in fail.split(",") if p.strip()])


def _estimate(fabric, point: dict) -> dict:
    opts = {k: point[k] for k in ESTIMATE_KEYS if k in point and k not in ("collective", "size", "traffic")}
    if isinstance(fabric, Region):
        return _estimate_region(fabric, point, opts)
    if "traffic" in point:
        settings, members = load_traffic(point["traffic"])
        kw = {k: opts.get(k, settings[k]) for k in ("sharing", "ecmp", "subflows")}
        kw["hash_seed"] = opts.get("hash_seed", EstimateOptions.default("hash_seed"))
        try:
            r = run_mix(fabric, members, pxn=opts.get("pxn"), profile=opts.get("profile"), name=settings["name"],
                        **kw)
        except TopoError as exc:
            raise TopoError(exc.message, source=exc.source or str(point["traffic"]), key=exc.key) from None
        worst = max(r.members, key=lambda m: m.slowdown)
        return {"time_s": r.makespan_s, "slowdown": worst.slowdown, "algorithm": "mix",
                "num_ranks": sum(m.num_ranks for m in r.members), "bottleneck": worst.bottleneck_mix,
                "bottleneck_level": worst.bottleneck_mix_level}
    r = estimate(fabric, point.get("collective", "all_reduce"), [point.get("size", "1GiB")], **opts)
    x = r.results[0]
    b = x.bottleneck
    return {"time_s": x.time_s, "algbw_GBps": x.algbw_GBps, "busbw_GBps": x.busbw_GBps, "latency_s": x.latency_s,
            "bandwidth_s": x.bandwidth_s, "num_ranks": r.num_ranks, "algorithm": x.algorithm, "protocol": x.protocol,
            "bottleneck": f"{b.src} -> {b.dst}" if b else None, "bottleneck_level": str(b.level) if b else None,
            "bottleneck_utilization": b.utilization if b else None,
            "bound": "latency" if x.latency_s > x.bandwidth_s else "bandwidth"}


def _estimate_region(region: Region, point: dict, opts: dict) -> dict:
    other = sorted(set(opts) - {"algorithm", "profile"}) + (["traffic"] if "traffic" in point else [])
    if other:
        raise TopoError(f"across sites, a point takes collective, size, algorithm and profile; not {other[0]}",
                        key=other[0])
    # the profile prices each site's in-site collectives, never the DCI (regprof68), as its train point's (tidy67)
    r = estimate_region(region, point.get("collective", "all_reduce"), [parse_size_bytes(point.get("size", "1GiB"))],
                        opts.get("algorithm", "auto"), profile=opts.get("profile"))
    x = r.results[0]
    return {"time_s": x.time_s, "algbw_GBps": x.algbw_Bps / 1e9, "busbw_GBps": x.busbw_Bps / 1e9,
            "latency_s": x.latency_s, "bandwidth_s": x.bandwidth_s, "num_ranks": r.num_ranks, "algorithm": x.algorithm,
            "bottleneck": x.bottleneck_name,
            "bottleneck_level": str(x.bottleneck.level) if x.bottleneck.level else None,
            "bound": "latency" if x.latency_s > x.bandwidth_s else "bandwidth"}


def _layout(fabric, point: dict) -> ParallelLayout:
    kw: dict = {}
    text = point.get("layout")
    if text:
        try:
            kw = layout_pairs(str(text))
        except TopoError as exc:
            raise TopoError(f"{exc.message} (in {text!r})", key="layout") from None
    for k in _LAYOUT_FIELDS:
        if k in point:
            if k in kw and kw[k] != point[k]:
                raise TopoError(f"{k} is {kw[k]!r} in layout {text!r} and {point[k]!r} as an axis; give it once",
                                key=k)
            kw[k] = point[k]
    if kw.get("dp") is None:
        known = kw.get("tp", 1) * kw.get("cp", 1) * kw.get("pp", 1)
        if not isinstance(known, int) or known < 1 or fabric.num_gpus % known:
            raise TopoError(f"tp x cp x pp = {known!r} does not divide the {fabric.num_gpus} GPUs; give dp", key="dp")
        kw["dp"] = fabric.num_gpus // known
    return make_layout("layout", **kw)


def _job(mfu: float, precision: str, model) -> dict:
    """The plan's ``workload`` of a train point, as ``topo plan --model M --layout L`` takes it from the step (its
    MFU, its precision, whose peak that MFU is of, and the model's parameters, the checkpoint)."""
    return {"mfu": mfu, "precision": precision, "params": float(model.total_params)}


def _train(fabric, point: dict):
    name = point["model"]
    key = (name, file_digest(name))  # a model file is cached by its content: an edited file is read again
    model = _models.get(key)
    if model is None:
        model = _models[key] = load_model(name)
    lay = _layout(fabric, point)
    if isinstance(fabric, Region):
        return _train_region(fabric, model, lay, point)
    r = estimate_step(fabric, model, lay, efficiency=point.get("efficiency"), profile=point.get("profile"))
    b = r.breakdown_s
    comm = {k: v for k, v in b.items() if k not in ("compute", "bubble", "optimizer")}
    slow = max(comm, key=lambda k: comm[k]) if comm else None
    bound = r.bound_by().get(slow, {}) if slow else {}
    job = TrainingJob(model=name, gpus=int(r.gpus), step_time_s=float(r.step_time_s),
                      tokens_per_step=int(r.tokens_per_step),
                      gpus_per_domain_used=r.layout.get("gpus_per_domain_used"))  # spares132: its spares in its racks
    return (_job(r.mfu, r.precision, model), job), {
        "step_time_s": r.step_time_s, "mfu": r.mfu, "tflop_per_s_per_gpu": r.tflop_per_s_per_gpu,
        "tokens_per_s": r.tokens_per_s, "exposed_comm_s": float(sum(comm.values())),
        "memory_per_gpu_bytes": r.memory_per_gpu_bytes, "fits": r.fits, "train_gpus": r.gpus,
        "slowest_dim": slow, "slowest_dim_level": bound.get("level")}


def _train_region(region: Region, model, lay, point: dict):
    m = estimate_across_sites(region, model, lay, efficiency=point.get("efficiency"), profile=point.get("profile"),
                              shares=point.get("shares", DEFAULT_SHARES))
    one, ratio = m.one_site, m.throughput_vs_one_site
    step = m.one_site_step_s / ratio
    figs = {"step_time_s": step, "mfu": one["mfu"] * ratio, "tflop_per_s_per_gpu": one["tflop_per_s_per_gpu"] * ratio,
            "tokens_per_s": lay.global_batch * (lay.seq_len or model.seq_len) / step,
            "memory_per_gpu_bytes": m.memory["total_bytes"], "fits": m.fits, "train_gpus": m.gpus,
            "slowest_dim": "dci" if ratio < 1 else None, "throughput_vs_one_site": ratio, "shares": m.shares}
    return (_job(figs["mfu"], lay.precision, model), None), figs


def _plan(fabric, point: dict, job: tuple | None) -> dict:
    """A plan point: after a train point, with its step's workload (:func:`_job`) and its job (its GPUs: the hot
    spares it leaves and the interruptions of its parts) as ``topo plan --model`` takes them; an ``mfu`` axis wins
    over the step's."""
    workload, training = job if job else (None, None)
    layers = [("--model", {"workload": workload})] if workload else []
    r = plan(fabric, layers=layers, days=point.get("days"), mfu=point.get("mfu"), pue=point.get("pue"),
             collectives=bool(point.get("plan_collectives", False)), training=training)
    h = r.headline()
    return {"capex_usd": h["capex_usd"], "network_capex_usd": h["network_capex_usd"],
            "capex_per_gpu_usd": h["capex_per_gpu_usd"], "it_power_W": h["it_power_W"],
            "facility_power_W": h["facility_power_W"], "network_power_W": h["network_power_W"],
            "energy_per_year_Wh": h["energy_per_year_Wh"],
            "energy_cost_per_year_usd": h["energy_cost_per_year_usd"], "switches": h["switches"],
            "transceivers": h["transceivers"], "cables": h["cables"], "network_share": h["network_share"],
            "goodput": h["goodput"], "effective_flop": h["effective_flop"],
            "first_optical_failure_s": h["first_optical_failure_s"]}


def _describe(fabric) -> dict:
    inv = inventory(fabric)
    ratios = [t.oversubscription for t in inv.tiers if t.oversubscription is not None]
    return {"num_gpus": inv.num_gpus, "num_switches": inv.num_switches, "num_scale_out_links": inv.num_scale_out_links,
            "bisection_bandwidth_per_gpu_Bps": inv.bisection_bandwidth_per_gpu_Bps,
            "largest_nonblocking_gpus": inv.largest_nonblocking_gpus, "switch_power_W": inv.switch_power_W,
            "max_oversubscription": max(ratios) if ratios else None,
            "failed_links": int(fabric.failed.sum()) if fabric.failed is not None else 0}


def run_point(point: dict, compute, specs: dict) -> dict:
    """The figures of one point (a dict of column -> value), or ``{"error": ..., "error_kind": ...}``.

    Parameters
    ----------
    point : dict
        The point's inputs: ``spec`` (a key of ``specs``), spec field paths, ``fail``, options (see
        :data:`POINT_KEYS`).
    compute : sequence of str
        Which of :data:`COMPUTES` to run, in order.
    specs : dict
        Spec reference -> ``(source, TOML text)``: the spec travels as text, so a worker on another machine needs
        no file of the user's.

    Returns
    -------
    dict
        Figure columns (:data:`FIGURES`) plus ``error`` (None, or the one-line message) and ``error_kind``
        (None, ``"input"`` for bad input at this point, ``"internal"`` for a bug), and ``compute_s``.
    """
    start = time.perf_counter()
    row: dict = {"error": None, "error_kind": None}
    try:
        fabric = _fabric(point, specs)
        job = None
        for what in compute:
            if what == "estimate":
                row.update(_estimate(fabric, point))
            elif what == "train":
                job, figs = _train(fabric, point)
                row.update(figs)
            elif what in ("plan", "describe") and isinstance(fabric, Region):
                raise TopoError(f"a sweep over a region computes estimate and train; {what} of a region is "
                                f"topo {what} REGION", key="compute")
            elif what == "plan":
                row.update(_plan(fabric, point, job))
            elif what == "describe":
                row.update(_describe(fabric))
    except TopoError as exc:
        row = {"error": exc.line(), "error_kind": "input"}
    except MemoryError:
        row = {"error": "out of memory at this point", "error_kind": "internal"}
    except Exception as exc:  # a bug at one point must not abort the study: recorded, and the study goes on
        row = {"error": f"internal error ({type(exc).__name__}: {exc})", "error_kind": "internal"}
    row["compute_s"] = time.perf_counter() - start
    return row


def run_batch(points: list[dict], compute, specs: dict) -> list[dict]:
    """:func:`run_point` for each point of a batch (one Dask task), in order."""
    return [run_point(p, compute, specs) for p in points]
