"""The network figures a design comparison needs, from the existing cost model: bisection, and the cross-pod
all-reduce and all-to-all times of :func:`topo.estimate.estimate`.

- all-reduce: 1 GiB, data parallelism across two pods: every GPU of pod 0 with its peer in pod 1
  (``gpus = 2 x GPUs per pod, groups = GPUs per pod``), as the README's "Estimating collectives" does;
- all-to-all: 1 GiB over ``ALLTOALL_SERVERS`` servers in each of two pods (all their GPUs: 256 GPUs on 8-GPU
  servers), a scale at which today's all-to-all runs in well under a second; a larger one waits for the fast
  all-to-all (raise ``ALLTOALL_SERVERS``).

Both are None on a single-pod fabric (no cross-pod traffic).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..fabric import Fabric

__all__ = ["NetworkFigures", "crosspod_collectives", "ALLTOALL_SERVERS", "COLLECTIVE_SIZE"]

ALLTOALL_SERVERS = 16
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
        from ..estimate import estimate

        r = estimate(fabric, "all_reduce", COLLECTIVE_SIZE, gpus=2 * pod, groups=pod).results[0]
        ar = (2 * pod, r.time_s, r.busbw_GBps, r.bottleneck.level if r.bottleneck else None)
        n = min(ALLTOALL_SERVERS, L.servers_per_unit * L.units_per_pod) * L.gpus_per_server
        ranks = np.r_[np.arange(n), pod + np.arange(n)].tolist()
        r = estimate(fabric, "alltoall", COLLECTIVE_SIZE, ranks=ranks).results[0]
        a2a = (2 * n, r.time_s, r.bottleneck.level if r.bottleneck else None)
    return NetworkFigures(bisection_bandwidth_Bps=bisection_Bps, bisection_bandwidth_per_gpu_Bps=bisection_per_gpu_Bps,
                          gpus_per_pod=pod, all_reduce_gpus=ar and ar[0], all_reduce_s=ar and ar[1],
                          all_reduce_busbw_GBps=ar and ar[2], all_reduce_bottleneck=ar and ar[3],
                          alltoall_gpus=a2a and a2a[0], alltoall_s=a2a and a2a[1],
                          alltoall_bottleneck=a2a and a2a[2])
