"""The range of the cost lines: capex by part, energy cost, TCO by part and cost per GPU-hour with every price at its
low end together, at its expected value, and at its high end together (the catalog's ``price_ranges``,
:meth:`topo.plan.catalog.Catalog.prices`).

Every cost line is a sum of count x price terms (capex), or a sum of those and of rates x prices (energy = kWh x
price per kWh, staff and site = MW x price per MW-year, maintenance = a fraction of the hardware capex), so each
line's low end is the line computed at the low prices, by the same formulas. The ends are corners (every price at
once at its low or high end), not a confidence interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .capex import Capex
from .catalog import ENDS
from .power import PowerBreakdown
from .tco import OwnershipCost

__all__ = ["CostRange", "cost_lines"]


def cost_lines(capex: Capex, power: PowerBreakdown, ownership: OwnershipCost) -> dict[str, float]:
    """The cost lines that depend on prices, by name (USD; USD per GPU-hour for ``cost_per_gpu_hour_usd``).

    Parameters
    ----------
    capex, power, ownership : the plan's capital cost, power (for the energy cost) and cost of ownership.

    Returns
    -------
    dict
        ``capex.<key>`` for each part of :meth:`Capex.parts` (its key in ``--json`` 'capex', e.g.
        ``capex.frontend_usd``), ``capex_usd``, ``capex_per_gpu_usd``, ``network_capex_usd``,
        ``energy_cost_per_year_usd``, ``ownership.<key>`` for each part of :meth:`OwnershipCost.parts` (its key in
        ``--json`` 'ownership'), ``tco_usd`` and ``cost_per_gpu_hour_usd``.
    """
    out = {f"capex.{capex.PART_KEYS[k]}": v for k, v in capex.parts().items()}
    out.update(capex_usd=capex.capex_usd, capex_per_gpu_usd=capex.capex_per_gpu_usd,
               network_capex_usd=capex.network_capex_usd, energy_cost_per_year_usd=power.energy_cost_per_year_usd)
    out.update({f"ownership.{ownership.PART_KEYS[k]}": v for k, v in ownership.parts().items()})
    out.update(tco_usd=ownership.tco_usd, cost_per_gpu_hour_usd=ownership.cost_per_gpu_hour_usd)
    return out


@dataclass(frozen=True)
class CostRange:
    """Each cost line at the low, expected and high prices, and the prices used with each end's source."""

    low: dict[str, float]
    expected: dict[str, float]
    high: dict[str, float]
    prices: list[dict] = field(default_factory=list)  # rows of Catalog.prices() for the parts this plan uses

    def line(self, name: str) -> tuple[float, float, float]:
        """(low, expected, high) of one line (a key of :func:`cost_lines`)."""
        return self.low[name], self.expected[name], self.high[name]

    def to_dict(self) -> dict:
        return {"ends": list(ENDS), "lines": {k: {"low": self.low[k], "expected": self.expected[k],
                                                   "high": self.high[k]} for k in self.expected},
                "prices": list(self.prices),
                "note": "every price at its low end together, at its expected value, and at its high end together: "
                        "corners, not a confidence interval"}
