"""The network figures a design comparison needs, from the existing cost model: bisection, and the cross-pod
all-reduce and all-to-all times of :func:`topo.estimate.estimate`.

- all-reduce: 1 GiB, data parallelism across two pods: every GPU of pod 0 with its peer in pod 1
  (``gpus = 2 x GPUs per pod, groups = GPUs per pod``), as the README's "Estimating collectives" does;
- all-to-all: 1 GiB over every GPU of the first two pods (one communicator), its loads from the fabric's
  structure (:mod:`topo.alltoall`), so half of every GPU's traffic crosses the tier above the pods.

Both are None on a single-pod fabric (no cross-pod traffic).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..engine.estimate import estimate
from ..fabric.fabric import Fabric

__all__ = ["NetworkFigures", "crosspod_collectives", "COLLECTIVE_SIZE"]

COLLECTIVE_SIZE = "1GiB"


@dataclass(frozen=True)
class NetworkFigures:
    bisection_bandwidth_Bps: float
    bisection_bandwidth_per_gpu_Bps: float
    gpus_per_pod: int
    all_reduce_gpus: int | None
    all_reduce_s: float | None
    all_reduce_busbw_GBps: float | None
    all_reduce_bottleneck: str | None
    alltoall_gpus: int | None
    alltoall_s: float | None
    alltoall_bottleneck: str | None

    def to_dict(self) -> dict:
        return asdict(self)


def crosspod_collectives(fabric: Fabric, bisection_Bps: float, bisection_per_gpu_Bps: float,
                         collectives: bool = True) -> NetworkFigures:
    L = fabric.layout
    pod = L.servers_per_unit * L.units_per_pod * L.gpus_per_server
    ar = a2a = None
    if collectives and L.num_pods >= 2:
        r = estimate(fabric, "all_reduce", COLLECTIVE_SIZE, gpus=2 * pod, groups=pod).results[0]
        ar = (2 * pod, r.time_s, r.busbw_GBps, r.bottleneck.level if r.bottleneck else None)
        r = estimate(fabric, "alltoall", COLLECTIVE_SIZE, gpus=2 * pod).results[0]
        a2a = (2 * pod, r.time_s, r.bottleneck.level if r.bottleneck else None)
    return NetworkFigures(bisection_bandwidth_Bps=bisection_Bps, bisection_bandwidth_per_gpu_Bps=bisection_per_gpu_Bps,
                          gpus_per_pod=pod, all_reduce_gpus=ar and ar[0], all_reduce_s=ar and ar[1],
                          all_reduce_busbw_GBps=ar and ar[2], all_reduce_bottleneck=ar and ar[3],
                          alltoall_gpus=a2a and a2a[0], alltoall_s=a2a and a2a[1],
                          alltoall_bottleneck=a2a and a2a[2])
