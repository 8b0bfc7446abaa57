"""Results of a training-step estimate and of a layout search: plain dataclasses, ``to_dict`` and ``to_frame``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..plan.train_time import time_to_train_interval_s, time_to_train_s
from ..units import whole_bytes
from .memory import MemoryBreakdown

__all__ = ["DimensionComm", "StepResult", "SearchResult", "BREAKDOWN_KEYS", "SHOWN_WHERE_RUN"]

BREAKDOWN_KEYS = ("compute", "bubble", "optimizer", "tp", "cp", "pp", "dp", "ep", "fp8_amax", "fp8_weight_cast")
SHOWN_WHERE_RUN = ("fp8_amax", "fp8_weight_cast")
"""The breakdown lines only some FP8 layouts' steps have (delayed scaling's amax reductions, the cast of BF16
weights): ``topo train``'s table and the report's step figure show them only where they are not 0."""


@dataclass(frozen=True)
class DimensionComm:
    """One collective of one parallel dimension, all of its groups at once."""

    dim: str  # tp, cp, pp, dp, ep (dp_experts for the experts' replicas); fp8_amax: the FP8 amax reduction
    collective: str
    size_bytes: float  # per call, nccl-tests' size
    calls_per_step: float  # on the critical path of the busiest stage
    time_s: float  # calls x one call's time
    exposed_s: float  # what remains after the overlap rules
    algorithm: str
    level: str | None  # the tier (link level) that bounds it
    link: str | None  # the bounding link, "src -> dst"
    utilization: float | None
    num_groups: int
    group_size: int
    domains_per_group: int  # NVLink domains one group spans
    slowdown: float = 1.0  # in the step's traffic mix, against the collective alone
    phase: str = ""  # when a TP exchange runs: "forward" (with any recomputed forward), "backward", "pipeline" or
    # "step" (once a step, after the backward: the replicated gradients' all-reduce)
    # (the next stage's gather of a pipeline send); "" for the other dimensions
    what: str = ""  # what a sequence-parallel TP exchange carries ("output gradient", "input again, for wgrad", ...)


@dataclass
class StepResult:
    """One training step of ``model`` with ``layout`` on a fabric."""

    spec: str
    model: str
    model_status: str
    layout: dict
    gpus: int
    gpu: str
    precision: str
    flop_convention: str
    efficiency: float
    peak_flop_per_s_per_gpu: float
    step_time_s: float
    breakdown_s: dict  # BREAKDOWN_KEYS -> seconds; they add up to step_time_s
    tokens_per_step: int
    model_flop_per_step: float
    executed_flop_per_step: float
    memory: MemoryBreakdown
    comm: list[DimensionComm] = field(default_factory=list)
    overlap: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    compute_by_module_s: dict = field(default_factory=dict)  # the busiest stage's compute per module, per step
    contention: dict = field(default_factory=dict)  # dimension -> slowdown in the step's traffic mix
    timeline: list = field(default_factory=list)  # one stage, one step: dicts of lane, start_s, end_s, label
    uncertainty: dict = field(default_factory=dict)  # the out-of-family error band (topo.training.uncertainty)
    host_cpu: dict = field(default_factory=dict)  # name, source ("spec" or "gpu default"), time_factor, reference
    chosen_by: dict = field(default_factory=dict)
    """Layout fields whose value follows other fields unless set -> who chose the value ``layout`` holds: ``layout``,
    ``default`` (``fp8_amax_reduction``: on with delayed scaling) or, from the CLI, ``jax_mesh``."""
    profile: str = ""  # the cost profile that priced the collectives (topo.training.comm.CommEngine.profile)
    ep_cover_s: float = 0.0  # GPU seconds of a dropless MoE layer's forward all-to-alls between its host syncs
    gather_lead_s: float = 0.0
    """The optimizer steps the first model chunk's weight all-gather runs behind before the next step's first forward
    (:func:`topo.training.step.gather_lead_s`; 0 without ``overlap_param_gather_with_optimizer_step``): the one-site
    step's and the cross-site gather window's (:func:`topo.training.multisite.dp_gather_window_s`)."""
    peak_precision: str = ""
    """The precision of ``peak_flop_per_s_per_gpu``, the one the layout's linear layers run at
    (:func:`topo.training.step.peak_precision`: ``fp4`` under ``fp8_recipe = "nvfp4"``); empty: ``precision``."""

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def tflop_per_s_per_gpu(self) -> float:
        """Model FLOPs (``flop_convention``) per second per GPU, in TFLOP/s."""
        return self.model_flop_per_step / self.step_time_s / self.gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.tflop_per_s_per_gpu * 1e12 / self.peak_flop_per_s_per_gpu

    @property
    def memory_per_gpu_bytes(self) -> float:
        return self.memory.total_bytes

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def time_to_train_s(self, tokens: float) -> float:
        """Seconds to train ``tokens`` tokens at this step time (no failures or restarts)."""
        return time_to_train_s(tokens, self.tokens_per_s, 1.0)[0]

    def train_budget(self, tokens: float) -> dict:
        """What training ``tokens`` tokens takes at this step (no failures or restarts): ``time_to_train_s``, the
        job's ``gpu_hours_to_train`` (its GPUs x that time) and, where the step has an uncertainty interval, the
        time at the interval's ends (``time_to_train_interval_s``: the steps of ``uncertainty`` low_s and high_s).

        Parameters
        ----------
        tokens : float
            Tokens to train.

        Returns
        -------
        dict
        """
        t = self.time_to_train_s(tokens)
        out = {"train_tokens": tokens, "time_to_train_s": t, "gpu_hours_to_train": self.gpus * t / 3600.0}
        if "low_s" in self.uncertainty and "high_s" in self.uncertainty:
            ends_s = (self.uncertainty["low_s"], self.uncertainty["high_s"])
            out["time_to_train_interval_s"] = time_to_train_interval_s(tokens, self.tokens_per_step, ends_s)
        return out

    def bound_by(self) -> dict:
        """For each dimension, the tier and link that bound its slowest collective."""
        out: dict = {}
        for c in self.comm:
            if c.time_s > 0 and (c.dim not in out or c.time_s > out[c.dim]["time_s"]):
                out[c.dim] = {"collective": c.collective, "level": c.level, "link": c.link,
                              "utilization": c.utilization, "time_s": c.time_s}
        return out

    def to_dict(self, train_tokens: float | None = None) -> dict:
        d = {
            "spec": self.spec, "model": self.model, "model_status": self.model_status, "layout": self.layout,
            "gpus": self.gpus, "gpu": self.gpu, "precision": self.precision,
            "step_time_s": self.step_time_s, "breakdown_s": dict(self.breakdown_s),
            "tokens_per_step": self.tokens_per_step, "tokens_per_s": self.tokens_per_s,
            "flop_convention": self.flop_convention, "model_flop_per_step": self.model_flop_per_step,
            "executed_flop_per_step": self.executed_flop_per_step,
            "tflop_per_s_per_gpu": self.tflop_per_s_per_gpu, "mfu": self.mfu, "efficiency": self.efficiency,
            "peak_flop_per_s_per_gpu": self.peak_flop_per_s_per_gpu,
            "peak_precision": self.peak_precision or self.precision,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes, "fits": self.fits,
            "memory": self.memory.to_dict(), "overlap": self.overlap,
            "comm": [whole_bytes(asdict(c)) for c in self.comm], "bound_by": self.bound_by(), "notes": self.notes,
            "compute_by_module_s": dict(self.compute_by_module_s), "contention": dict(self.contention),
            "timeline": list(self.timeline), "uncertainty": dict(self.uncertainty), "host_cpu": dict(self.host_cpu),
            "chosen_by": dict(self.chosen_by), "profile": self.profile,
        }
        if train_tokens:
            d.update(self.train_budget(train_tokens))
        return whole_bytes(d)

    def to_frame(self):
        """One row per breakdown component: seconds and share of the step."""
        import pandas as pd

        return pd.DataFrame({"component": list(self.breakdown_s), "time_s": list(self.breakdown_s.values()),
                             "share": [v / self.step_time_s for v in self.breakdown_s.values()]})


@dataclass
class SearchResult:
    """Layouts ranked by step time (those that fit), and how many were considered or rejected."""

    spec: str
    model: str
    gpus: int
    global_batch: int
    ranked: list[StepResult]
    considered: int
    rejected_memory: int
    rejected_invalid: int
    engine_calls: int
    elapsed_s: float
    evaluated: int = 0  # layouts whose communication was estimated
    pruned: int = 0  # layouts dropped because their compute-only bound could not beat the best kept
    notes: list[str] = field(default_factory=list)  # what holds for every layout tried (their placement)
    profile: str = ""  # the cost profile that priced every layout's collectives (on the searched fabric)
    # each ranked layout's step on the searched fabric, then on each of search_layouts' also_on (one: itself)
    site_steps: list[tuple] = field(default_factory=list)
    # what --fail took down on the searched fabric, then on each of also_on (each fabric's own, in ``notes`` too)
    failure_notes: list[list[str]] = field(default_factory=list)
    # how the searched fabric, then each of also_on, placed the layouts (each fabric's own, in ``notes`` too)
    placement_notes: list[list[str]] = field(default_factory=list)

    def to_dict(self, top: int | None = None) -> dict:
        rows = self.ranked[:top] if top else self.ranked
        return {"spec": self.spec, "model": self.model, "gpus": self.gpus, "global_batch": self.global_batch,
                "considered": self.considered, "evaluated": self.evaluated, "pruned": self.pruned,
                "rejected_memory": self.rejected_memory, "rejected_invalid": self.rejected_invalid,
                "engine_calls": self.engine_calls, "elapsed_s": self.elapsed_s, "notes": list(self.notes),
                "profile": self.profile,
                "ranked": [r.to_dict() for r in rows]}

    def to_frame(self):
        import pandas as pd

        rows = []
        for r in self.ranked:
            row = {k: r.layout[k] for k in ("tp", "cp", "pp", "dp", "ep", "vpp", "micro_batch", "recompute",
                                            "dp_sharding")}
            row.update(step_time_s=r.step_time_s, tflop_per_s_per_gpu=r.tflop_per_s_per_gpu, mfu=r.mfu,
                       memory_per_gpu_bytes=r.memory_per_gpu_bytes,
                       **{f"{k}_s": v for k, v in r.breakdown_s.items()})
            rows.append(row)
        return pd.DataFrame(rows)
