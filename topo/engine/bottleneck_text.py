"""What bounds a link-bound time, in words: the factors that take the busiest link from its line rate to its
utilization (``topo estimate``'s ``# util`` line and ``topo report``'s bottleneck caption say the same sentence).
"""

from __future__ import annotations

from ..units import format_size
from .result import SizeResult

__all__ = ["utilization_factors"]

_CLASS = {"nvlink": "NVLink", "pcie": "PCIe"}  # a link's class, as the profile's efficiencies name it (else network)


def utilization_factors(x: SizeResult, link: str) -> str | None:
    """The factors whose product is the utilization of the busiest link of a row it bounds.

    Parameters
    ----------
    x : SizeResult
        One size of an estimate.
    link : str
        The busiest link's name as the caller shows it (a column token, or text the caller escapes).

    Returns
    -------
    str or None
        ``"util 26% at 1 GiB = 71.3% of L's line rate usable (...) x ..."``: the profile's efficiency for the
        link's class, the protocol's for the algorithm, the pipeline fill (the first bytes at half speed while
        NCCL's buffers fill), the bandwidth part's share of the time and, below 99.5%, the rest (phases or flows
        where another link binds). None for a row another limit (latency, a cap) bounds.
    """
    b = x.bottleneck
    if b is None or b.limit not in ("link", "link+protocol"):
        return None
    part = (f"all {format_size(x.size_bytes)}" if b.fill_bytes >= x.size_bytes else
            f"{format_size(b.fill_bytes)} of {format_size(x.size_bytes)}")
    fill = (f" x {b.fill_share:.1%} steady ({part} go at half speed while NCCL's buffers fill)"
            if b.fill_bytes > 0 else "")
    # a schedule of several phases (or max-min sharing) leaves the link idle where another one binds
    others = f" x {b.other_share:.1%} (phases or flows where another link binds)" if b.other_share < 0.995 else ""
    return (f"util {b.utilization:.0%} at {format_size(x.size_bytes)} = {b.class_efficiency:.1%} of {link}'s line "
            f"rate usable ({_CLASS.get(b.level, 'network')} efficiency, the profile's) x {b.protocol_efficiency:.1%} "
            f"carried by {x.algorithm} {x.protocol} (its protocol efficiency){fill} x {b.bandwidth_share:.1%} of the "
            f"time in the bandwidth part{others}: these factors bound the time, not a saturated link"
            + (f"; {b.aggregate}" if b.aggregate else ""))
