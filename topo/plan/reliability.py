"""Failures, checkpoints and goodput.

- Interruption rate per GPU-hour from a published failure table (default: Llama 3's 419 unexpected interruptions
  in 54 days on 16,384 H100, Table 5, planner.md lines 49-57): rate = count / (GPUs x hours). At N GPUs the job's
  mean time between interruptions is 1 / (rate x N): about 30 minutes at 100,000 GPUs.
- Optical modules fail independently with a mean time to failure each (planner.md line 26); the expected time to
  the first failure among n modules is MTTF / n (the minimum of n exponentials). The table above already counts
  "network switch or cable" interruptions, so optics are reported apart and not added to the job's rate.
- Checkpoint: size = parameters x bytes per parameter (14 for mixed-precision Adam, planner.md line 61); write
  time = size / storage write bandwidth; Young's interval T = sqrt(2 x write time x MTBF) (Young, CACM 1974);
  lost fraction = write/T + T/(2 MTBF) + restart/MTBF (planner.md lines 58-60); goodput = 1 - lost fraction.
- Hot spares: a failed server is swapped for a spare and the job restarts after ``restart_s``; if fewer spares
  are kept than servers expected to be in repair at once (hardware failure rate x repair time), a restart also
  waits ``repair_s``. Spare servers do not train: effective compute = FLOP x goodput x (GPUs - spare GPUs) / GPUs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Reliability", "reliability", "interruption_rate_per_gpu_h", "first_failure_s", "young_interval_s",
           "lost_fraction", "SECONDS_PER_YEAR"]

SECONDS_PER_YEAR = 365 * 86_400
HARDWARE_CAUSES = ("gpu", "nic", "host")  # causes that take a server out until it is swapped or repaired


def interruption_rate_per_gpu_h(causes: dict[str, float], observed_gpus: float, observed_days: float
                                ) -> dict[str, float]:
    """Interruptions per GPU-hour for each cause of a failure table."""
    gpu_hours = observed_gpus * observed_days * 24
    return {k: v / gpu_hours for k, v in causes.items()}


def first_failure_s(mttf_s: float, n: float) -> float:
    """Expected time to the first failure among ``n`` independent parts of mean life ``mttf_s`` each."""
    return mttf_s / n if n else math.inf


def young_interval_s(write_s: float, mtbf_s: float) -> float:
    """Young's (1974) first-order optimum checkpoint interval sqrt(2 x write time x MTBF)."""
    return math.sqrt(2 * write_s * mtbf_s)


def lost_fraction(interval_s, write_s: float, restart_s: float, mtbf_s: float):
    """Expected fraction of time lost: write/T + T/(2 MTBF) + restart/MTBF (vectorised over T)."""
    T = np.asarray(interval_s, dtype=float)
    return write_s / T + T / (2 * mtbf_s) + restart_s / mtbf_s


@dataclass(frozen=True)
class Reliability:
    interruptions_per_day: float
    interruptions_per_day_by_cause: dict[str, float]
    mtbf_s: float
    optical_modules: int
    first_optical_failure_s: float
    checkpoint_bytes: float
    checkpoint_write_s: float
    checkpoint_interval_s: float  # Young's
    restart_s: float  # including a wait for repair when spares run short
    hot_spare_servers: int
    servers_in_repair: float  # expected at any time
    spares_enough: bool
    lost_fraction: float
    goodput: float
    training_gpus: int
    effective_flop: float
    goodput_vs_interval: dict  # {"interval_s": [...], "goodput": [...]}: Young's interval / 10 to x 10

    def to_dict(self) -> dict:
        return asdict(self)


def reliability(num_gpus: int, gpus_per_server: int, *, causes: dict[str, float], observed_gpus: float,
                observed_days: float, modules: list[tuple[int, float]], params: float, bytes_per_param: float,
                write_Bps: float, restart_s: float, repair_s: float, hot_spare_fraction: float,
                flop: float) -> Reliability:
    """``modules``: (count, MTTF in years) per transceiver line of the bill of materials."""
    rates = interruption_rate_per_gpu_h(causes, observed_gpus, observed_days)
    per_h = {k: r * num_gpus for k, r in rates.items()}
    total_per_h = sum(per_h.values())
    mtbf_s = 3600 / total_per_h if total_per_h else math.inf
    inv_first = sum(n / (y * SECONDS_PER_YEAR) for n, y in modules if n)
    first_opt = 1 / inv_first if inv_first else math.inf
    ckpt = params * bytes_per_param
    write_s = ckpt / write_Bps
    servers = num_gpus // gpus_per_server
    spares = int(math.floor(hot_spare_fraction * servers))
    hw_per_s = sum(per_h.get(k, 0.0) for k in HARDWARE_CAUSES) / 3600
    in_repair = hw_per_s * repair_s
    enough = spares >= in_repair
    restart = restart_s if enough else restart_s + repair_s
    T = young_interval_s(write_s, mtbf_s) if math.isfinite(mtbf_s) else math.inf
    lost = float(lost_fraction(T, write_s, restart, mtbf_s)) if math.isfinite(T) else 0.0
    goodput = max(0.0, 1.0 - lost)
    training = num_gpus - spares * gpus_per_server
    curve = {"interval_s": [], "goodput": []}
    if math.isfinite(T):
        grid = T * np.logspace(-1, 1, 41)
        curve = {"interval_s": grid.tolist(),
                 "goodput": np.clip(1 - lost_fraction(grid, write_s, restart, mtbf_s), 0, 1).tolist()}
    return Reliability(interruptions_per_day=total_per_h * 24,
                       interruptions_per_day_by_cause={k: v * 24 for k, v in per_h.items()}, mtbf_s=mtbf_s,
                       optical_modules=int(sum(n for n, _ in modules)), first_optical_failure_s=first_opt,
                       checkpoint_bytes=ckpt, checkpoint_write_s=write_s, checkpoint_interval_s=T,
                       restart_s=restart, hot_spare_servers=spares, servers_in_repair=in_repair,
                       spares_enough=enough, lost_fraction=lost, goodput=goodput, training_gpus=training,
                       effective_flop=flop * goodput * training / num_gpus, goodput_vs_interval=curve)
