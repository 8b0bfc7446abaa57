"""A named job on a planned design (``topo plan --model M --layout L``): its step, the GPUs it holds, the time to
train a token budget with the plan's goodput, and the cost of its work.

    time at the step      t_step = tokens x step_time / tokens_per_step        (topo train --tokens: no failures)
    time to train         t_wall = t_step / goodput                             (failures, restarts, checkpoints)
    at the interval's     the same with step_time at the step's out-of-family interval's ends (topo train --tokens's)
    GPU-hours             job GPUs x t_wall / 3,600 s
    cost per 1M tokens    cost per effective GPU-hour x job GPUs x step_time / tokens_per_step / 3,600 s x 1e6

The goodput is the plan's (:mod:`topo.plan.reliability`: the renewal process on the design's interruption rate,
checkpoint stall and recovery); the cost per effective GPU-hour is TCO over the GPU-hours that train (after goodput
and hot spares), so the cost per token carries the same losses as the wall time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["TrainingJob", "time_to_train_s", "time_to_train_interval_s", "cost_per_million_tokens_usd", "job_layer",
           "time_to_train", "region_job_layer"]

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class TrainingJob:
    """A job of ``topo train``'s step on the design: what the planner needs of it."""

    model: str
    gpus: int  # the GPUs the job holds
    step_time_s: float
    tokens_per_step: int
    tokens: float | None = None  # a token budget to train (None: no time to train)
    # the step's out-of-family interval (low_s, high_s), as topo train prints it (step_uncertainty.toml); None: none
    step_interval_s: tuple[float, float] | None = None

    @property
    def tokens_per_s(self) -> float:
        """Tokens a second at the step (no failures)."""
        return self.tokens_per_step / self.step_time_s

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["step_interval_s"] is not None:
            d["step_interval_s"] = list(d["step_interval_s"])
        return {**d, "tokens_per_s": self.tokens_per_s}


def time_to_train_s(tokens: float, tokens_per_s: float, goodput: float) -> tuple[float, float]:
    """``(at the step, with goodput)``: ``tokens / tokens_per_s`` and that over ``goodput``, seconds.

    >>> time_to_train_s(15e12, 5e6, 0.8)
    (3000000.0, 3750000.0)
    """
    at_step = tokens / tokens_per_s
    return at_step, at_step / goodput


def time_to_train_interval_s(tokens: float, tokens_per_step: float, step_interval_s, goodput: float = 1.0) -> list:
    """The time to train ``tokens`` with ``goodput`` at each end of a step's interval, seconds: :func:`time_to_train_s`
    with the tokens a second at each end's step (``tokens_per_step / end``). The one place ``topo train --tokens``
    (goodput 1: :meth:`topo.training.result.StepResult.train_budget`) and ``topo plan --model --tokens``
    (the plan's goodput: :attr:`topo.plan.result.PlanResult.time_to_train`) compute it.

    Parameters
    ----------
    tokens : float
        Tokens to train.
    tokens_per_step : float
        Tokens a step.
    step_interval_s : sequence of float
        The step's time at the interval's ends (low_s, high_s), seconds.
    goodput : float, optional
        The share of the wall time that trains (1: no failures or restarts).

    Returns
    -------
    list of float
        The time to train at each end, seconds.

    >>> time_to_train_interval_s(15e12, 5e6, (0.5, 2.0), 0.8)
    [1875000.0, 7500000.0]
    """
    return [time_to_train_s(tokens, tokens_per_step / end_s, goodput)[1] for end_s in step_interval_s]


def cost_per_million_tokens_usd(cost_per_effective_gpu_hour_usd: float, gpus: int, tokens_per_s: float) -> float:
    """The job's GPUs at the cost per effective GPU-hour over the tokens it trains in an hour at the step, per
    million tokens.

    >>> round(cost_per_million_tokens_usd(2.0, 1000, 1e6), 4)
    0.5556
    """
    return cost_per_effective_gpu_hour_usd * gpus / (tokens_per_s * SECONDS_PER_HOUR) * 1e6


def job_layer(model: str, step, precision: str, params: float, tokens: float | None = None):
    """``(layer, job)``: the catalog layer a job's step sets (``--model``: its MFU, precision and parameters) and its
    :class:`TrainingJob`, as ``plan --model`` and ``report --plan --train`` plan a job.

    Parameters
    ----------
    model : str
        The model's name.
    step : StepResult
        Its step on the design (:func:`topo.training.step.estimate_step`).
    precision : str
        The layout's precision.
    params : float
        The model's parameters.
    tokens : float, optional
        Tokens to train (None: no time to train).

    Returns
    -------
    tuple
        ``("--model", {"workload": {...}})`` and the :class:`TrainingJob`.
    """
    layer = ("--model", {"workload": {"mfu": float(step.mfu), "precision": precision, "params": params}})
    u = step.uncertainty  # tidy72: the step's interval (step_uncertainty.toml), as train --tokens gives it
    return layer, TrainingJob(model=model, gpus=int(step.gpus), step_time_s=float(step.step_time_s),
                              tokens_per_step=int(step.tokens_per_step), tokens=tokens,
                              step_interval_s=(float(u["low_s"]), float(u["high_s"])) if "low_s" in u else None)


def time_to_train(job: TrainingJob | None, goodput: float) -> dict | None:
    """With a job and its token budget: the time at the step, the time with ``goodput``
    (:func:`time_to_train_s`), the job's GPU-hours at the latter and, where the step has an interval, the time with
    the goodput at its ends (:func:`time_to_train_interval_s`); None otherwise. One site's plan
    (:attr:`topo.plan.result.PlanResult.time_to_train`) and a region's (:class:`topo.plan.region.RegionPlan`)."""
    if job is None or job.tokens is None:
        return None
    at_step, wall = time_to_train_s(job.tokens, job.tokens_per_s, goodput)
    out = {"tokens": job.tokens, "time_at_step_s": at_step, "time_to_train_s": wall, "goodput": goodput,
           "gpu_hours_to_train": job.gpus * wall / SECONDS_PER_HOUR}
    if job.step_interval_s is not None:  # walk30: the step's interval, as topo train --tokens gives it
        out["time_to_train_interval_s"] = time_to_train_interval_s(job.tokens, job.tokens_per_step,
                                                                   job.step_interval_s, goodput)
    return out


def region_job_layer(model: str, step, precision: str, params: float, tokens: float | None = None):
    """``(layer, job)`` of a job across a region's sites (``topo plan REGION --model``), as :func:`job_layer` of one
    site's: its MFU the job's across the sites the chosen way (one site's share's x throughput vs one site,
    :meth:`topo.training.multisite.MultisiteStep.mfu`), its GPUs every site's, its step the step across the sites.
    The step's interval is one site's share's (its bounds are ``one_site_step_s``), not the step across the sites,
    so the job carries none.

    Parameters
    ----------
    model : str
    step : MultisiteStep
        :func:`topo.training.multisite.estimate_across_sites`'s.
    precision : str
    params : float
    tokens : float, optional

    Returns
    -------
    tuple
        ``("--model", {"workload": {...}})`` and the :class:`TrainingJob`.
    """
    chosen = next(s for s in step.strategies if s.strategy == step.chosen)
    layer = ("--model", {"workload": {"mfu": float(step.mfu(chosen)), "precision": precision, "params": params}})
    return layer, TrainingJob(model=model, gpus=int(step.gpus), step_time_s=float(step.step_time_s),
                              tokens_per_step=int(step.tokens_per_step), tokens=tokens)
