"""Compute: peak FLOP/s per precision, FLOP delivered in N days at a model-FLOPs utilisation (MFU), and the ratio
to a reference run (GPT-4: about 2.15e25 FLOP on about 20,000 A100, planner.md lines 22-24).

    peak = N_gpu x peak per GPU;  FLOP(days) = peak(precision) x MFU x days x 86,400 s

The MFU is an input (default from the catalog's workload, with its source); when ``topo train`` predicts one for
a model and layout, pass it here (:func:`compute_budget`'s ``mfu``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import TopoError

__all__ = ["ComputeBudget", "compute_budget", "SECONDS_PER_DAY"]

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class ComputeBudget:
    peak_flop_per_s: dict[str, float]  # per precision, whole cluster
    precision: str
    mfu: float
    mfu_source: str
    days: float
    flop: float  # in ``days`` at ``mfu`` and ``precision``
    reference_name: str
    reference_flop: float
    reference_ratio: float  # flop / reference_flop
    reference_cluster_flop_per_s: float  # peak of the reference cluster at its precision
    peak_ratio_to_reference_cluster: dict[str, float]  # per precision

    def to_dict(self) -> dict:
        return asdict(self)


def compute_budget(num_gpus: int, peak_per_gpu: dict[str, float], *, precision: str, mfu: float, days: float,
                   mfu_source: str, reference_name: str, reference_flop: float, reference_gpus: int,
                   reference_peak_per_gpu: float) -> ComputeBudget:
    if precision not in peak_per_gpu:
        raise TopoError(f"the GPU has no peak for precision {precision!r}; allowed: {', '.join(peak_per_gpu)}",
                        key="plan.workload.precision")
    peak = {p: num_gpus * f for p, f in peak_per_gpu.items()}
    flop = peak[precision] * mfu * days * SECONDS_PER_DAY
    ref_cluster = reference_gpus * reference_peak_per_gpu
    return ComputeBudget(peak_flop_per_s=peak, precision=precision, mfu=mfu, mfu_source=mfu_source, days=days, flop=flop,
                         reference_name=reference_name, reference_flop=reference_flop,
                         reference_ratio=flop / reference_flop, reference_cluster_flop_per_s=ref_cluster,
                         peak_ratio_to_reference_cluster={p: f / ref_cluster for p, f in peak.items()})
