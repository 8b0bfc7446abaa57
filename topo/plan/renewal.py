"""Goodput of checkpoint/restart as a renewal process (failures during recovery included).

Failures arrive as a Poisson process of rate lambda = 1 / MTBF, during work, checkpoints and recovery alike. The job
runs segments of ``w`` seconds of work followed by a checkpoint stall of ``C`` seconds. A failure loses the segment's
progress, then costs a recovery of ``R`` seconds (detection, restart, reload); a failure during the recovery starts
the recovery again. The expected wall time to complete one segment is (Bougeret et al., "Checkpointing strategies
for parallel jobs", SC 2011, eq. 1 with no downtime; Daly, FGCS 2006, derives the same renewal form)

    E(w) = exp(lambda R) (exp(lambda (w + C)) - 1) / lambda

so goodput = w / E(w). It is exact for exponential failures, where the first-order form
1 - C/w - (R + w/2)/MTBF (Young, CACM 1974) breaks down once R or w is a fair part of the MTBF: that form can go
negative; this one stays in (0, 1).

E(w) splits exactly into the segment's work w, its stall C, the work redone after failures (the failed attempts'
time, (exp(lambda a) - 1)/lambda - a with a = w + C) and recovery ((exp(lambda a) - 1)(exp(lambda R) - 1)/lambda).

The optimum work per segment maximises w / (exp(lambda (w + C)) - 1): with x = lambda w, it solves
ln(1 - x) + x + lambda C = 0, i.e. x = 1 + W0(-exp(-1 - lambda C)) (Lambert's W); for small lambda C,
x ~ sqrt(2 lambda C), Young's interval.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["renewal_goodput", "optimum_work_s", "segment_time_parts_s"]


def renewal_goodput(work_s, stall_s: float, recovery_s: float, mtbf_s: float):
    """Fraction of wall time spent on useful work (vectorised over ``work_s``).

    Parameters
    ----------
    work_s : work between checkpoints (s), scalar or array, > 0.
    stall_s : training stopped per checkpoint (s).
    recovery_s : per failure: detection, restart and reload (s); failures during it restart it.
    mtbf_s : the job's mean time between failures (s), finite and > 0.
    """
    lam = 1.0 / mtbf_s
    w = np.asarray(work_s, dtype=float)
    return lam * w / (math.exp(lam * recovery_s) * np.expm1(lam * (w + stall_s)))


def optimum_work_s(stall_s: float, mtbf_s: float) -> float:
    """Work between checkpoints that maximises :func:`renewal_goodput` (s); it does not depend on the recovery."""
    c = stall_s / mtbf_s
    if c <= 0:
        raise ValueError("the checkpoint stall must be positive for an optimum interval")
    if c > 30:  # the root is 1 - exp(-1 - c) to double precision
        return -math.expm1(-1 - c) * mtbf_s
    # Newton on h(x) = ln(1 - x) + x + c, concave and decreasing on (0, 1): from a start where h < 0 (right of the
    # root: ln(1 - x) + x < -x^2 / 2, so sqrt(2c) is one) it converges monotonically from the right, never past 1.
    # Where sqrt(2c) >= 1 (a stall of half the MTBF or more), 1 - e^(-1 - c) is one inside (0, 1): h there is
    # -e^(-1 - c) < 0 (a start left of the root overshoots past 1, where ln(1 - x) is undefined)
    x = math.sqrt(2 * c)
    if x >= 1:
        x = -math.expm1(-1 - c)
    for _ in range(100):
        step = (math.log1p(-x) + x + c) * (1 - x) / x
        x += step
        if abs(step) <= 1e-15 * x:
            break
    return x * mtbf_s


def segment_time_parts_s(work_s: float, stall_s: float, recovery_s: float, mtbf_s: float) -> dict[str, float]:
    """Expected wall time of one segment by part (s): work, stall, redone work, recovery; they add up to E(w)."""
    lam = 1.0 / mtbf_s
    a = work_s + stall_s
    failed = math.expm1(lam * a)  # expected failed attempts of the segment
    return {"work": work_s, "stall": stall_s, "redone": failed / lam - a,
            "recovery": failed * math.expm1(lam * recovery_s) / lam}
