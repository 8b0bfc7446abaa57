"""A named job on a planned design (``topo plan --model M --layout L``): its step, the GPUs it holds, the time to
train a token budget with the plan's goodput, and the cost of its work.

    time at the step      t_step = tokens x step_time / tokens_per_step        (topo train --tokens: no failures)
    time to train         t_wall = t_step / goodput                             (failures, restarts, checkpoints)
    at the interval's     the same with step_time at the step's out-of-family interval's ends (topo train --tokens's)
    GPU-hours             job GPUs x t_wall / 3,600 s
    cost per 1M tokens    cost per effective GPU-hour x job GPUs x step_time / tokens_per_step / 3,600 s x 1e6
    job's power           job GPUs / GPUs x the plan's average facility power       (:func:`job_energy`)
    standing              its GPUs at their idle draw while the job stands (checkpoint stall, detection, restart,
                          reload: :data:`STANDING_PARTS` of the goodput's lost time), the rest at the same draw
    mean power            job's power - standing fraction x standing drop
    energy per token      mean power / (tokens_per_s x goodput);  to train: mean power x t_wall

The goodput is the plan's (:mod:`topo.plan.reliability`: the renewal process on the design's interruption rate,
checkpoint stall and recovery); the cost per effective GPU-hour is TCO over the GPU-hours that train (after goodput
and hot spares), so the cost per token carries the same losses as the wall time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["TrainingJob", "time_to_train_s", "time_to_train_interval_s", "cost_per_million_tokens_usd", "job_layer",
           "time_to_train", "region_job_layer", "job_energy", "STANDING_PARTS", "standing_fraction"]

SECONDS_PER_HOUR = 3600.0
J_PER_KWH = 3.6e6

# the parts of the goodput's lost time (Reliability.lost_fraction_by_part) in which the job's GPUs do no work and
# draw their idle power: the checkpoint's stall, the hang until detection, the restart (and any repair's wait), the
# reload. Not the catch-up: the work lost was computed at the working draw (its result, not its energy, was lost).
STANDING_PARTS = ("checkpoint_stall", "detection", "restart", "reload")


def standing_fraction(lost_fraction_by_part: dict) -> float:
    """The share of the wall time the job stands (:data:`STANDING_PARTS` of the lost time's parts).

    >>> standing_fraction({"checkpoint_stall": 0.25, "detection": 0.125, "restart": 0.5, "reload": 0.0625,
    ...                    "catch_up": 0.01})
    0.9375
    """
    return sum(lost_fraction_by_part.get(k, 0.0) for k in STANDING_PARTS)


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
    # GPUs of each NVLink domain the job's placement uses (64 of an NVL72 rack's 72; None: not given): where it leaves
    # whole servers idle inside its domains, those are its hot spares (topo.plan.reliability._domain_spares)
    gpus_per_domain_used: int | None = None

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
                              step_interval_s=(float(u["low_s"]), float(u["high_s"])) if "low_s" in u else None,
                              gpus_per_domain_used=step.layout.get("gpus_per_domain_used"))


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


def job_energy(job: TrainingJob | None, goodput: float, average_facility_power_W: float, num_gpus: int,
               electricity_usd_per_kWh: float, standing_drop_W: float = 0.0,
               standing_share: float = 0.0) -> dict | None:
    """A job's energy per token and, with its token budget, to train, from the plan's own power model
    (:mod:`topo.plan.power`): one site's plan and a region's.

    What is counted: the job's share ``job GPUs / GPUs`` of the plan's average facility power -- its GPU servers at
    their average draw (``facility.server_average_fraction``) with their front-end share, and that share of the
    switches, optics and storage, all times the PUE (cooling and the facility's losses); a region's adds that share
    of its DCI's power (the DCI bill's, at its own power, no PUE, as its energy cost counts it) -- drawn over the
    whole time to train with the goodput (``t_wall``), less, while the job stands (:func:`standing_fraction`), what
    its GPUs draw less idle (:meth:`~topo.plan.power.PowerBreakdown.standing_drop_W`). Not counted: the GPUs the job
    does not hold (hot spares, idle ones), the year's load factor. The energy's cost, at the plan's price, is inside
    the cost per million tokens already (the TCO's energy, the year at the average draw), not added to it.

        P_job               = job GPUs / GPUs x average facility power                       (at work)
        P_mean              = P_job - standing share x standing drop        (over the wall time, stands included)
        J per token         = P_mean / (tokens_per_s x goodput)
        kWh per 1M tokens   = J per token x 1e6 / 3.6e6
        energy to train     = P_mean x t_wall = J per token x tokens        (and at t_wall's interval's ends)

    Parameters
    ----------
    job : TrainingJob or None
        The job (None: no figures).
    goodput : float
        The plan's (a region's: its joint reliability's).
    average_facility_power_W : float
        The plan's facility power at the servers' average draw (:attr:`PowerBreakdown.average_facility_power_W`;
        a region's: its sites' and its DCI's).
    num_gpus : int
        The plan's GPUs (the job's are a share of them).
    electricity_usd_per_kWh : float
        The plan's price of energy.
    standing_drop_W, standing_share : float, optional
        What the job's GPUs draw less idle than at work, at the facility; the share of the wall time it stands.

    Returns
    -------
    dict or None
        ``job_power_W``, ``job_standing_power_W``, ``standing_fraction``, ``job_mean_power_W``, ``energy_per_token_J``, ``energy_per_million_tokens_kWh``,
        ``energy_cost_per_million_tokens_usd``; with tokens ``energy_to_train_J``, ``energy_to_train_kWh``,
        ``energy_cost_to_train_usd`` and, where the step has an interval, ``energy_to_train_interval_kWh``.

    >>> e = job_energy(TrainingJob("m", 500, 2.0, 4_000_000, tokens=1e12), 0.8, 2e6, 1000, 0.1)
    >>> e["job_power_W"], e["energy_per_token_J"], round(e["energy_to_train_kWh"])   # 1 MW / (2e6 x 0.8)
    (1000000.0, 0.625, 173611)
    >>> job_energy(TrainingJob("m", 500, 2.0, 4_000_000), 0.8, 2e6, 1000, 0.1, 400e3, 0.15)["energy_per_token_J"]
    0.5875
    """
    if job is None:
        return None
    busy_W = job.gpus / num_gpus * average_facility_power_W
    power_W = busy_W - standing_share * standing_drop_W  # the mean over the wall time (1 MW - 0.15 x 400 kW above)
    per_token_J = power_W / (job.tokens_per_s * goodput)
    per_million_kWh = per_token_J * 1e6 / J_PER_KWH
    out = {"job_power_W": busy_W, "job_standing_power_W": busy_W - standing_drop_W,
           "standing_fraction": standing_share, "job_mean_power_W": power_W, "energy_per_token_J": per_token_J,
           "energy_per_million_tokens_kWh": per_million_kWh,
           "energy_cost_per_million_tokens_usd": per_million_kWh * electricity_usd_per_kWh,
           "electricity_usd_per_kWh": electricity_usd_per_kWh}
    t = time_to_train(job, goodput)
    if t is not None:
        kWh = power_W * t["time_to_train_s"] / J_PER_KWH
        out.update(energy_to_train_J=power_W * t["time_to_train_s"], energy_to_train_kWh=kWh,
                   energy_cost_to_train_usd=kWh * electricity_usd_per_kWh)
        if "time_to_train_interval_s" in t:
            out["energy_to_train_interval_kWh"] = [power_W * x / J_PER_KWH for x in t["time_to_train_interval_s"]]
    return out


def region_job_layer(model: str, step, precision: str, params: float, tokens: float | None = None):
    """``(layer, job)`` of a job across a region's sites (``topo plan REGION --model``), as :func:`job_layer` of one
    site's: its MFU the job's across the sites the chosen way (one site's share's x throughput vs one site,
    :meth:`topo.training.multisite.MultisiteStep.mfu`), its GPUs every site's, its step the step across the sites.
    The step's interval is the step across the sites' (:attr:`~topo.training.multisite.MultisiteStep.
    step_interval`: the share's step at the step model's error, the DCI's exposed part at the collective model's;
    plan80), not one site's share's (``uncertainty``, bounds ``one_site_step_s``); none where it has none. Its
    placement (``gpus_per_domain_used``) is the sites' shares' where they all have one (plan134: a region's job
    kept the fraction rule for its hot spares), None where they differ (each site's own then:
    :attr:`~topo.training.multisite.MultisiteStep.site_gpus_per_domain_used`, :func:`topo.plan.region.plan_region`).

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
    u = step.step_interval
    placed = set(step.site_gpus_per_domain_used.values())  # plan134: one placement where every site's share has it
    return layer, TrainingJob(model=model, gpus=int(step.gpus), step_time_s=float(step.step_time_s),
                              tokens_per_step=int(step.tokens_per_step), tokens=tokens,
                              step_interval_s=(float(u["low_s"]), float(u["high_s"])) if "low_s" in u else None,
                              gpus_per_domain_used=placed.pop() if len(placed) == 1 else None)
