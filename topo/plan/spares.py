"""Spare pools sized from failure and restock rates.

A part with ``n`` installed units of mean time to failure MTTF fails at n / MTTF; while a failed unit is being
replaced from stock, a pool of k spares runs out when more than k fail within the restock lead time L. Failures in L
are Poisson with mean m = n x L / MTTF, so the pool is the smallest k with P(Poisson(m) <= k) >= the service level
(the probability of never waiting for a part in a lead time). Optics use each module type's catalog MTTF; servers
use the failure table's hardware rate (GPU, NIC, host causes) at this cluster's size over a repair
(``reliability.checkpoint.repair_s``): a failed server is repaired, not restocked.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["SparePool", "spare_pool", "poisson_quantile"]


@dataclass(frozen=True)
class SparePool:
    """A pool of spares for one kind of part."""

    item: str
    installed: int
    failures_per_year: float
    expected_in_lead_time: float
    spares: int
    price_usd_each: float

    @property
    def price_usd(self) -> float:
        return self.spares * self.price_usd_each

    def to_dict(self) -> dict:
        return {**asdict(self), "price_usd": self.price_usd}


def poisson_quantile(mean: float, level: float) -> int:
    """The smallest k with P(Poisson(mean) <= k) >= ``level`` (terms summed in log space: no underflow at large
    means, where the first terms are negligible)."""
    if mean <= 0:
        return 0
    k, log_p, cdf = 0, -mean, math.exp(-mean)
    while cdf < level:
        k += 1
        log_p += math.log(mean) - math.log(k)
        cdf += math.exp(log_p)
    return k


def spare_pool(item: str, installed: int, failures_per_year: float, *, lead_time_days: float, service_level: float,
               price_usd_each: float = 0.0) -> SparePool:
    """The spares of one part (see the module doc)."""
    m = failures_per_year * lead_time_days / 365
    return SparePool(item=item, installed=installed, failures_per_year=failures_per_year, expected_in_lead_time=m,
                     spares=poisson_quantile(m, service_level), price_usd_each=price_usd_each)
