"""Which NIC sits beside which GPU inside a server: the one home of that arithmetic.

NICs and GPUs of a server are spread evenly: with ``N`` NICs and ``g`` GPUs per server, NIC ``n`` is beside GPU
``n * g // N`` (several NICs per GPU when ``N > g``, several GPUs per NIC when ``N < g``). Both the fabric
(:meth:`topo.fabric.Fabric.gpu_nic`) and the schedules (:meth:`topo.engine.schedule.NodeShape.nic_of`), which know
the server's shape but not the fabric, use these functions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nic_beside", "gpu_beside"]


def nic_beside(gpu, gpus_per_server: int, nics_per_server: int, choice=0) -> np.ndarray:
    """Global index of a NIC beside each GPU; with several NICs per GPU, ``choice`` (mod their number) picks one."""
    gpu = np.asarray(gpu)
    g, N = gpus_per_server, nics_per_server
    server, local = gpu // g, gpu % g
    first = (local * N) // g
    if N > g:
        return server * N + first + np.asarray(choice) % (N // g)
    return server * N + first


def gpu_beside(nic, gpus_per_server: int, nics_per_server: int) -> np.ndarray:
    """The GPU whose host link reaches each NIC (with fewer NICs than GPUs: the first GPU it serves)."""
    nic = np.asarray(nic)
    g, N = gpus_per_server, nics_per_server
    server, n = nic // N, nic % N
    if N >= g:
        return server * g + (n * g) // N
    return server * g + n * (g // N)
