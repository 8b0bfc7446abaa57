"""Phased deployment: the halls come online quarter by quarter, and with them the capex, the GPUs and the power.

The schedule is the catalog's ``deployment`` table: ``halls_per_quarter`` (the halls coming online in quarters 1, 2,
..., adding up to the plan's halls), or, when it is empty, a build pace of ``ramp_gpus`` GPUs in ``ramp_days`` days
(xAI Colossus' published 100,000 GPUs in 122 days by default): the halls come online in order, hall k in the first
quarter by whose end the pace has built the GPUs of halls 1..k (a quarter is 365.25 / 4 days).

Each capex line is booked in the quarter its hall comes online (not spread over the hall's construction), by the
line's own driver:

    servers, network, storage, front-end:  capex x (GPUs coming online) / (all GPUs)
    cooling equipment, facility:           capex x (IT power coming online) / (all IT power)

where a hall's IT power is its servers' and network racks', and the IT power outside the halls (the central network
room, storage and front-end) comes online with the first hall. The quarters' capex adds up to the plan's capex, and
the GPUs and power online at the end of the last quarter are the plan's. Power online is the IT power of the halls
online (plus the rooms outside them), and the facility's is that times the PUE.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from ..errors import TopoError
from .capex import Capex

__all__ = ["DAYS_PER_QUARTER", "Quarter", "Phasing", "hall_schedule", "phased_deployment", "ramp_gpus_per_quarter",
           "build_days"]

DAYS_PER_QUARTER = 365.25 / 4
"""Days in a quarter (a Julian year of 365.25 days over four)."""

_BY_GPUS = ("servers_usd", "network_capex_usd", "storage_usd", "frontend_usd")
_BY_POWER = ("cooling_usd", "facility_usd")


@dataclass(frozen=True)
class Quarter:
    """One quarter of the build: what comes online in it, and what is online at its end."""

    label: str  # "Q1", or "2026Q3" with a start_quarter
    halls: int  # coming online in this quarter
    halls_online: int  # at its end
    gpus: int  # coming online in this quarter
    gpus_online: int
    capex_usd: float  # spent in this quarter
    capex_to_date_usd: float
    it_power_W: float  # online at its end
    facility_power_W: float


@dataclass(frozen=True)
class Phasing:
    """The build quarter by quarter, and where its schedule came from."""

    quarters: list[Quarter]
    schedule: str  # "halls_per_quarter" or "ramp"
    ramp_gpus_per_quarter: float | None  # the pace, when the schedule is the ramp

    @property
    def num_quarters(self) -> int:
        return len(self.quarters)

    def to_dict(self) -> dict:
        return {"schedule": self.schedule, "ramp_gpus_per_quarter": self.ramp_gpus_per_quarter,
                "num_quarters": self.num_quarters, "quarters": [asdict(q) for q in self.quarters]}


def hall_schedule(hall_gpus: Sequence[int], halls_per_quarter: Sequence[int] = (),
                  gpus_per_quarter: float | None = None) -> list[int]:
    """The halls coming online in each quarter.

    Parameters
    ----------
    hall_gpus : sequence of int
        GPUs of each hall, in the order they are built.
    halls_per_quarter : sequence of int, optional
        An explicit schedule; it must add up to ``len(hall_gpus)``.
    gpus_per_quarter : float, optional
        The build pace, used when ``halls_per_quarter`` is empty: hall k comes online in quarter
        ceil(GPUs of halls 1..k / pace).

    Returns
    -------
    list of int

    Raises
    ------
    TopoError
        a schedule that does not add up to the halls (key ``plan.deployment.halls_per_quarter``), or neither a
        schedule nor a positive pace.

    >>> hall_schedule([100, 100, 50], gpus_per_quarter=120)
    [1, 1, 1]
    >>> hall_schedule([100, 100, 50], gpus_per_quarter=250)
    [3]
    """
    n = len(hall_gpus)
    if len(halls_per_quarter):
        given = sum(halls_per_quarter)
        if given != n:
            raise TopoError(f"adds up to {given} hall{'s' * (given != 1)}, the plan has {n} (floor: its halls); "
                            f"allowed: whole numbers >= 0 per quarter that add up to {n}, e.g. "
                            f"{_even_example(n)}", key="plan.deployment.halls_per_quarter")
        return list(halls_per_quarter)
    if gpus_per_quarter is None or not gpus_per_quarter > 0:
        raise TopoError(f"a build pace must be > 0 GPUs per quarter, got {gpus_per_quarter!r}",
                        key="plan.deployment.ramp_gpus")
    online_q = np.maximum(1, np.ceil(np.cumsum(hall_gpus) / gpus_per_quarter - 1e-9)).astype(np.int64)
    return np.bincount(online_q - 1, minlength=int(online_q[-1])).tolist() if n else []


def _even_example(n: int) -> list[int]:
    return [1] * n if n <= 4 else [n // 2, n - n // 2]


def _labels(num: int, start_quarter: str | None) -> list[str]:
    if start_quarter is None:
        return [f"Q{i + 1}" for i in range(num)]
    year, q = int(start_quarter[:4]), int(start_quarter[5]) - 1
    return [f"{year + (q + i) // 4}Q{(q + i) % 4 + 1}" for i in range(num)]


def phased_deployment(hall_gpus: Sequence[int], hall_it_W: Sequence[float], it_power_W: float, pue: float,
                      capex: Capex, halls_per_quarter: Sequence[int] = (), gpus_per_quarter: float | None = None,
                      start_quarter: str | None = None) -> Phasing:
    """Capex, GPUs and power by quarter as the halls come online (see the module doc for the rule).

    Parameters
    ----------
    hall_gpus, hall_it_W : sequence
        Each hall's GPUs and IT power, in the order they are built.
    it_power_W : float
        The plan's IT power (the halls' and the rooms' outside them).
    pue : float
        Facility power / IT power.
    capex : Capex
        The plan's capex, by line.
    halls_per_quarter, gpus_per_quarter : the schedule (see :func:`hall_schedule`).
    start_quarter : str, optional
        ``YYYYQn``: label the quarters by the calendar.

    Returns
    -------
    Phasing
    """
    per_q = hall_schedule(hall_gpus, halls_per_quarter, gpus_per_quarter)
    gpus, hall_W = np.asarray(hall_gpus, dtype=float), np.asarray(hall_it_W, dtype=float)
    ends = np.cumsum(per_q)  # halls online at each quarter's end
    gpus_online = np.concatenate([[0.0], np.cumsum(gpus)])[ends]
    rest_W = it_power_W - hall_W.sum()  # the central room, storage and front-end: with the first hall
    it_online = np.concatenate([[0.0], np.cumsum(hall_W)])[ends] + np.where(ends > 0, rest_W, 0.0)
    by_gpus = sum(getattr(capex, k) for k in _BY_GPUS)
    by_power = sum(getattr(capex, k) for k in _BY_POWER)
    capex_to_date = by_gpus * gpus_online / gpus.sum() + by_power * it_online / it_power_W
    spent = np.diff(np.concatenate([[0.0], capex_to_date]))
    new_gpus = np.diff(np.concatenate([[0.0], gpus_online]))
    quarters = [Quarter(label=lab, halls=int(h), halls_online=int(e), gpus=int(round(g)),
                        gpus_online=int(round(go)), capex_usd=float(c), capex_to_date_usd=float(ct),
                        it_power_W=float(w), facility_power_W=float(w * pue))
                for lab, h, e, g, go, c, ct, w in zip(_labels(len(per_q), start_quarter), per_q, ends, new_gpus,
                                                       gpus_online, spent, capex_to_date, it_online)]
    return Phasing(quarters, "halls_per_quarter" if len(halls_per_quarter) else "ramp",
                   None if len(halls_per_quarter) else float(gpus_per_quarter))


def ramp_gpus_per_quarter(ramp_gpus: float, ramp_days: float) -> float:
    """The pace of ``ramp_gpus`` GPUs built in ``ramp_days`` days, per quarter."""
    return ramp_gpus / ramp_days * DAYS_PER_QUARTER



def build_days(gpus: float, gpus_per_quarter: float) -> float:
    """The days a build pace of ``gpus_per_quarter`` takes to build ``gpus`` GPUs (the schedule rounds it up to
    whole quarters: a 64-GPU cluster at Colossus' pace is online in its first quarter, built in 0.08 days).

    Parameters
    ----------
    gpus : float
        The GPUs built.
    gpus_per_quarter : float
        The pace (:func:`ramp_gpus_per_quarter`).

    Returns
    -------
    float
        Days, ``gpus / gpus_per_quarter x`` :data:`DAYS_PER_QUARTER`.
    """
    return gpus / gpus_per_quarter * DAYS_PER_QUARTER
