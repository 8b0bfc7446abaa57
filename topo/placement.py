"""Placement: which GPUs take part in a collective, and in which rank order.

GPU ids are packed by NVLink domain, then server, then scalable unit and pod, so "the first N GPUs" fills domains,
then servers, then leaves, then pods, as a scheduler packing a job would. Ranks are ordered as NCCL orders its
ring (by domain, then by GPU within the domain) unless an explicit order is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import TopoError
from .fabric import Fabric
from .units import format_count

__all__ = ["Placement", "place", "PLACEMENTS"]

PLACEMENTS = ("packed", "one_per_server", "spread_pods", "list")


@dataclass(frozen=True)
class Placement:
    """The GPUs of a job, in rank order, and how they sit in the fabric."""

    gpus: np.ndarray  # global GPU id of each rank
    kind: str
    domains: np.ndarray  # NVLink domain of each rank

    @property
    def num_ranks(self) -> int:
        return int(self.gpus.size)

    @property
    def num_domains(self) -> int:
        return int(np.unique(self.domains).size)

    def ranks_per_domain(self) -> int | None:
        """Ranks in each spanned domain if every domain holds the same number, else None."""
        _, counts = np.unique(self.domains, return_counts=True)
        return int(counts[0]) if np.all(counts == counts[0]) else None

    def describe(self) -> str:
        rpd = self.ranks_per_domain()
        per = f"{rpd} per domain" if rpd else "uneven per domain"
        return f"{format_count(self.num_ranks)} GPUs ({self.kind}) in {format_count(self.num_domains)} NVLink domains, {per}"


def place(fabric: Fabric, num_gpus: int | None = None, kind: str = "packed", gpus=None, rail: int = 0,
          order: str = "nccl") -> Placement:
    """Choose the ranks of a job.

    Parameters
    ----------
    fabric : Fabric
    num_gpus : int, optional
        How many GPUs (default: all of them).
    kind : {"packed", "one_per_server", "spread_pods", "list"}
        ``packed``: the first ``num_gpus`` GPUs. ``one_per_server``: GPU ``rail`` of each of the first
        ``num_gpus`` servers (one rail of a rail-optimized fabric). ``spread_pods``: the same number of GPUs from
        every pod, packed inside each pod (a data-parallel job spanning pods). ``list``: the GPU ids in ``gpus``.
    gpus : sequence of int, optional
        Explicit GPU ids (implies ``kind="list"``).
    order : {"nccl", "given"}
        Rank order: as NCCL forms its ring (sorted by domain and GPU), or as given in ``gpus``.
    """
    L = fabric.layout
    total = L.num_gpus
    if gpus is not None:
        kind = "list"
    if kind not in PLACEMENTS:
        raise TopoError(f"unknown placement {kind!r}; allowed: {', '.join(PLACEMENTS)}", key="--placement")
    if kind == "list":
        ids = np.asarray(list(gpus), dtype=np.int64)
        if ids.size == 0:
            raise TopoError("the GPU list is empty", key="--ranks")
        bad = ids[(ids < 0) | (ids >= total)]
        if bad.size:
            raise TopoError(f"GPU id {int(bad[0])} does not exist; this fabric has GPUs 0 to {total - 1}",
                            key="--ranks")
        uniq, counts = np.unique(ids, return_counts=True)
        if np.any(counts > 1):
            raise TopoError(f"GPU {int(uniq[counts > 1][0])} is listed twice", key="--ranks")
        if order == "nccl":
            ids = np.sort(ids)
    else:
        n = total if num_gpus is None else int(num_gpus)
        if n < 1:
            raise TopoError(f"the number of GPUs must be >= 1, got {n}", key="--gpus")
        if kind == "packed":
            if n > total:
                raise TopoError(f"{format_count(n)} GPUs asked, but the fabric has {format_count(total)}",
                                key="--gpus")
            ids = np.arange(n, dtype=np.int64)
        elif kind == "one_per_server":
            if n > L.num_servers:
                raise TopoError(f"one GPU per server for {format_count(n)} GPUs needs {format_count(n)} servers, "
                                f"but the fabric has {format_count(L.num_servers)}", key="--gpus")
            if not 0 <= rail < L.gpus_per_server:
                raise TopoError(f"rail {rail} does not exist; servers have GPUs 0 to {L.gpus_per_server - 1}",
                                key="--rail")
            ids = np.arange(n, dtype=np.int64) * L.gpus_per_server + rail
        else:  # spread_pods
            pods = L.num_pods
            per_pod = L.num_gpus // pods
            if n > total:
                raise TopoError(f"{format_count(n)} GPUs asked, but the fabric has {format_count(total)}",
                                key="--gpus")
            if n % pods:
                raise TopoError(f"spreading {format_count(n)} GPUs over {pods} pods needs a multiple of {pods}",
                                key="--gpus")
            k = n // pods
            ids = (np.arange(pods, dtype=np.int64)[:, None] * per_pod + np.arange(k)[None, :]).ravel()
    return Placement(gpus=ids, kind=kind, domains=ids // L.gpus_per_domain)
