"""Bisection bandwidth of a fabric as it is, failed parts included: the maximum flow between two halves.

The halves are the GPUs by id: ``gpu < num_gpus // 2`` sends, the rest receive. Ids run in whole NVLink domains,
servers, units and pods, so this is the split :func:`topo.fabric.inventory.inventory`'s closed form assumes (half of the
smallest of the NIC, leaf-uplink and spine-uplink boundaries); on a perfect fabric whose units and pods split
evenly the two are equal (tests/test_bisection.py checks it on every bundled spec and the small fabrics). When
the split falls inside a pod or unit (an odd number of them) the flow between these two halves can exceed the
closed form, which is then the conservative figure: compare a degraded flow with ``bisection(fabric,
ignore_failures=True)``, not with the closed form.

What counts (the scale-out network's bisection, as the closed form's):

- NVLink and PCIe are not limits: a GPU reaches every NIC its working PCIe links reach, so a NIC serves its half
  when at least one of its PCIe links works (a failed GPU takes its PCIe links, and so its NICs' traffic, with it).
  A NIC shared by GPUs of both halves (only when the split falls inside a server) counts on the first half's side.
- Every network link counts at its bandwidth per direction; failed links count nothing. A link is full duplex, so
  each carries up to its bandwidth from either end.

The flow runs on a switch-level graph, so a 100k-GPU fabric takes a fraction of a second: the NICs of each leaf
on each side are one edge from the source (or to the sink) of their summed working capacity, the parallel cables
between two switches one edge of their summed working capacity. ``scipy.sparse.csgraph.maximum_flow`` needs
integer capacities (int32): they are counted in a unit equal to the greatest common divisor of the link rates in
whole bytes per second (50 GB/s for a fabric of 400 Gb/s links), which makes the result exact. Only when that count
would not fit in 31 bits (rates with no large common divisor) is the unit made coarser and each capacity rounded
down; ``exact`` is then False and the figure is a lower bound, within ``unit_Bps`` per edge of the switch graph.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import gcd

import numpy as np

from .levels import Level

__all__ = ["Bisection", "bisection"]

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Bisection:
    """The maximum flow from the first half of the GPUs to the second (see the module doc)."""

    bandwidth_Bps: float  # per direction
    bandwidth_per_gpu_Bps: float  # bandwidth_Bps over num_gpus / 2, as inventory's
    gpus_per_half: int  # the first half: GPUs 0 to gpus_per_half - 1
    failures: tuple[str, ...]  # the failed parts it was computed with (empty: the perfect fabric)
    unit_Bps: float  # the integer unit the flow was counted in
    exact: bool  # False only when capacities had to be rounded down to a coarser unit

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        return asdict(self)

    def to_frame(self):
        """One row as a pandas DataFrame."""
        import pandas as pd

        d = self.to_dict()
        d["failures"] = ", ".join(self.failures)
        return pd.DataFrame([d])


def bisection(fabric, ignore_failures: bool = False) -> Bisection:
    """Maximum flow between the two halves of ``fabric``'s GPUs, its failed links removed (all links kept with
    ``ignore_failures``: the same fabric before anything failed).

    >>> from topo import load_spec, build_fabric
    >>> f = build_fabric(load_spec("dgx-h100-superpod"))
    >>> bisection(f).bandwidth_Bps / 1e12, bisection(f.with_failures("spine0")).bandwidth_Bps / 1e12
    (25.6, 24.0)
    """
    L, o = fabric.layout, fabric.node_offset
    links = fabric.links
    alive = np.ones(fabric.num_links, dtype=bool) if ignore_failures else fabric.link_alive
    level, src, dst, bw = links["level"], links["src"], links["dst"], links["bandwidth_Bps"]
    half = L.num_gpus // 2

    # NICs on each side: reached by a working PCIe link from a GPU of that half
    pcie = np.flatnonzero((level == Level.PCIE.code) & alive)
    nic_of = dst[pcie] - o["nic"]
    first = np.zeros(L.num_nics, dtype=bool)
    first[nic_of[src[pcie] < half]] = True
    second = np.zeros(L.num_nics, dtype=bool)
    second[nic_of[src[pcie] >= half]] = True
    second &= ~first

    # NIC -> leaf: summed per leaf and side
    nl = np.flatnonzero((level == Level.NIC.code) & alive)
    nic = src[nl] - o["nic"]
    leaf = dst[nl] - fabric.tier_start(0)
    n_leaves = L.tiers[0].num_switches
    from_source = np.bincount(leaf[first[nic]], weights=bw[nl][first[nic]], minlength=n_leaves)
    to_sink = np.bincount(leaf[second[nic]], weights=bw[nl][second[nic]], minlength=n_leaves)

    # switch <-> switch: every working cable, both directions (parallel cables summed by the sparse matrix)
    up = np.flatnonzero((level > Level.NIC.code) & alive)
    a, b, cap = src[up] - fabric.tier_start(0), dst[up] - fabric.tier_start(0), bw[up]

    n_switches = fabric.num_nodes - fabric.tier_start(0)
    source, sink = n_switches, n_switches + 1
    leaves = np.arange(n_leaves)
    rows = np.concatenate([a, b, np.full(n_leaves, source), leaves])
    cols = np.concatenate([b, a, leaves, np.full(n_leaves, sink)])
    caps = np.concatenate([cap, cap, from_source, to_sink])
    keep = caps > 0
    rows, cols, caps = rows[keep], cols[keep], caps[keep]

    unit, exact = _unit(bw[level >= Level.NIC.code], caps, n_switches + 2, rows, cols)
    value = _max_flow(rows, cols, np.floor(caps / unit + 1e-9), n_switches + 2, source, sink)
    total = value * unit
    return Bisection(bandwidth_Bps=float(total), bandwidth_per_gpu_Bps=float(total) / (L.num_gpus / 2),
                     gpus_per_half=half, failures=() if ignore_failures else tuple(fabric.failures),
                     unit_Bps=float(unit), exact=exact)


def _unit(rates: np.ndarray, caps: np.ndarray, n: int, rows, cols) -> tuple[float, bool]:
    """The capacity unit: the gcd of the link rates in whole bytes per second, coarsened (inexact) if the largest
    summed edge would not fit in int32."""
    rates = np.unique(rates[rates > 0])
    whole = rates.size > 0 and bool(np.all(np.abs(rates - np.round(rates)) < 1e-6))
    unit = 1
    if whole:
        unit = 0
        for r in np.round(rates).astype(np.int64).tolist():
            unit = gcd(unit, r)
    largest = _largest_edge(caps, n, rows, cols)
    if largest / unit <= _INT32_MAX and whole:
        return float(unit), True
    coarse = float(unit)
    while largest / coarse > _INT32_MAX:
        coarse *= 2
    return coarse, False


def _largest_edge(caps, n, rows, cols) -> float:
    if caps.size == 0:
        return 0.0
    key = rows.astype(np.int64) * n + cols
    _, inv = np.unique(key, return_inverse=True)
    return float(np.bincount(inv, weights=caps).max())


def _max_flow(rows, cols, caps, n: int, source: int, sink: int) -> int:
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_flow

    m = sp.csr_array((caps, (rows, cols)), shape=(n, n))
    m.sum_duplicates()
    m.sort_indices()
    # int32 on purpose: scipy reads wider integers wrongly (an int64 graph can give a flow of 0)
    m = sp.csr_array((m.data.astype(np.int32), m.indices.astype(np.int32), m.indptr.astype(np.int32)), shape=(n, n))
    return int(maximum_flow(m, source, sink).flow_value)
