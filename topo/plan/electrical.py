"""Electrical redundancy: UPS modules and generators for N, N+1 or 2N.

Each data hall is an electrical block (the rest of the IT load, the network rooms and storage and front-end, one more
block). A block's UPS carries its IT load in modules of ``ups_module_W``; its generators carry its facility load
(IT x PUE: the cooling too) in units of ``generator_W``:

    N    : ceil(load / unit) units per block;
    N+1  : one spare unit per block;
    2N   : two full systems (twice N), each able to carry the block alone.

Installed capacity = units x unit size. The build cost per W (facility.toml ``capex_usd_per_W``) already includes
the electrical plant; these are counts and capacities to check a design against, not a new cost line.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..units import format_in

__all__ = ["Electrical", "electrical", "REDUNDANCY"]

REDUNDANCY = ("N", "N+1", "2N")


@dataclass(frozen=True)
class Electrical:
    """UPS and generator counts and installed capacity (W) of a design."""

    redundancy: str
    blocks: int
    ups_module_W: float
    ups_modules: int
    ups_capacity_W: float
    generator_W: float
    generators: int
    generator_capacity_W: float
    largest_block_facility_W: float = 0.0  # the largest block's facility load (IT x PUE), what a generator carries

    def to_dict(self) -> dict:
        return asdict(self)

    def oversized_note(self) -> str:
        """A note when even the largest block's facility load is under one generator (walk28: 12 MW of sets for a
        lab's 2 MW): the installed capacity is then the unit size's, not the load's; "" otherwise."""
        if not 0 < self.largest_block_facility_W < self.generator_W:
            return ""
        return (f"each electrical block's facility load (the largest {format_in(self.largest_block_facility_W, 'MW', ',.2f')}) is "
                f"under one {format_in(self.generator_W, 'MW', ',.2f')} generator (plan.facility.generator_W, an assumption), "
                f"so {self.redundancy} installs {format_in(self.generator_capacity_W, 'MW', ',.2f')} of sets: set "
                "plan.facility.generator_W and ups_module_W to the units your site buys, or read the electrical "
                "plant as the colocation's where you rent the space")


def _units(load_W: float, unit_W: float, redundancy: str) -> int:
    n = math.ceil(load_W / unit_W - 1e-9) if load_W > 0 else 0
    return {"N": n, "N+1": n + 1 if n else 0, "2N": 2 * n}[redundancy]


def electrical(block_it_W: list[float], pue: float, *, redundancy: str, ups_module_W: float,
               generator_W: float) -> Electrical:
    """UPS modules and generators for blocks of IT load ``block_it_W`` (see the module doc).

    Parameters
    ----------
    block_it_W : IT load of each electrical block (W): each hall, and the rest of the site.
    pue : facility power / IT power (the generators carry the cooling too).
    redundancy : ``"N"``, ``"N+1"`` or ``"2N"``.
    ups_module_W, generator_W : the size of one UPS module and one generator (W).
    """
    blocks = [x for x in block_it_W if x > 0]
    ups = sum(_units(x, ups_module_W, redundancy) for x in blocks)
    gens = sum(_units(x * pue, generator_W, redundancy) for x in blocks)
    return Electrical(redundancy=redundancy, blocks=len(blocks), ups_module_W=ups_module_W, ups_modules=ups,
                      ups_capacity_W=ups * ups_module_W, generator_W=generator_W, generators=gens,
                      generator_capacity_W=gens * generator_W,
                      largest_block_facility_W=max(blocks, default=0.0) * pue)
