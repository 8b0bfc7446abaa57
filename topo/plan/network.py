"""The network figures a design comparison needs, from the existing cost model: bisection, and the all-reduce and
all-to-all across the *top tier* (the tier that joins the fabric's largest blocks: the cores above the pods of a
3-tier fabric, the tier above the islands of a 4-tier islands design) from :func:`topo.engine.estimate.estimate`.

- all-reduce: 1 GiB, data parallelism across the top tier's blocks: every GPU, one communicator per GPU position
  with one GPU in every block (``gpus = all, groups = GPUs per block``: on ``h100-100k-islands`` 24,576
  communicators of 4, one GPU per island on every rail), so every ring edge crosses the top tier;
- all-to-all: 1 GiB over every GPU (one communicator), its loads from the fabric's structure
  (:mod:`topo.engine.alltoall`): ``1 - 1/blocks`` of every GPU's bytes cross the top tier.

Both carry their busbw (nccl-tests' definition, :func:`topo.engine.collectives.busbw_factor`) and name the level
that binds (the top tier's uplinks when it is oversubscribed, e.g. 7:1). Both are None on a
fabric of fewer than three tiers or with a single block under its top tier (no tier joins blocks of blocks).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..engine.estimate import evaluate, size_result
from ..fabric.fabric import Fabric
from ..fabric.layout import ClosLayout
from ..units import parse_size_bytes

__all__ = ["NetworkFigures", "crosspod_collectives", "top_blocks", "COLLECTIVE_SIZE"]

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
    alltoall_busbw_GBps: float | None
    alltoall_bottleneck: str | None
    top_tier: str | None = None  # the tier the two collectives cross (its name)
    block_name: str | None = None  # what one of the blocks it joins is called ("pod", "island")
    num_blocks: int | None = None  # blocks under the top tier (ranks per all-reduce communicator)
    gpus_per_block: int | None = None
    profile: str | None = None  # the cost profile that priced the plan's collectives (None: none priced)

    def to_dict(self) -> dict:
        return asdict(self)


def top_blocks(layout: ClosLayout) -> tuple[int, int, str] | None:
    """The blocks the top tier joins: their number, GPUs in each and their name.

    Parameters
    ----------
    layout : ClosLayout
        The fabric's layout.

    Returns
    -------
    tuple of (int, int, str) or None
        ``(num_blocks, gpus_per_block, block_name)`` for a fabric of three tiers or more: the blocks of tier
        ``T - 2`` (pods under the cores of a 3-tier fabric, islands under a 4-tier islands design's top), whole
        blocks only; None when it has fewer tiers or fewer than two whole blocks.
    """
    T = layout.num_tiers
    if T < 3:
        return None
    below = layout.tiers[T - 2]
    gpus = layout.units_per_block(T - 2) * layout.servers_per_unit * layout.gpus_per_server
    whole = min(below.num_blocks, layout.num_gpus // gpus)  # a partly filled last block has no GPU at every position
    if whole < 2:
        return None
    return whole, gpus, below.block_name or f"{below.name} block"


def crosspod_collectives(fabric: Fabric, bisection_Bps: float, bisection_per_gpu_Bps: float,
                         collectives: bool = True, profile=None) -> NetworkFigures:
    """Bisection and the two collectives across the top tier (see the module doc).

    Parameters
    ----------
    fabric : Fabric
        The fabric (failed parts included).
    bisection_Bps, bisection_per_gpu_Bps : float
        Its bisection bandwidth, whole and per GPU.
    collectives : bool
        Run the two estimates (else only the bisection is filled in).
    profile : Profile, optional
        Their cost profile, resolved (:func:`topo.engine.profiles.resolve_profile`; None: the fabric's own); its
        name is the figures' ``profile`` (None where none was given or no collective ran).

    Returns
    -------
    NetworkFigures
    """
    L = fabric.layout
    pod = L.servers_per_unit * L.units_per_pod * L.gpus_per_server
    top = top_blocks(L)
    ar = a2a = None
    if collectives and top is not None:
        n, per, _ = top
        size = parse_size_bytes(COLLECTIVE_SIZE)
        r = size_result(evaluate(fabric, "all_reduce", gpus=n * per, groups=per, at_sizes=[size],
                                 profile=profile), size)
        ar = (n * per, r.time_s, r.busbw_GBps, r.bottleneck.level if r.bottleneck else None)
        r = size_result(evaluate(fabric, "alltoall", gpus=n * per, at_sizes=[size], profile=profile), size)
        a2a = (n * per, r.time_s, r.busbw_GBps, r.bottleneck.level if r.bottleneck else None)
    return NetworkFigures(bisection_bandwidth_Bps=bisection_Bps, bisection_bandwidth_per_gpu_Bps=bisection_per_gpu_Bps,
                          gpus_per_pod=pod, all_reduce_gpus=ar and ar[0], all_reduce_s=ar and ar[1],
                          all_reduce_busbw_GBps=ar and ar[2], all_reduce_bottleneck=ar and ar[3],
                          alltoall_gpus=a2a and a2a[0], alltoall_s=a2a and a2a[1],
                          alltoall_busbw_GBps=a2a and a2a[2], alltoall_bottleneck=a2a and a2a[3], top_tier=top and L.tiers[-1].name,
                          block_name=top and top[2], num_blocks=top and top[0], gpus_per_block=top and top[1],
                          profile=profile.name if collectives and profile is not None else None)
