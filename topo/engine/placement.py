"""Placement: which GPUs take part in a collective, and in which rank order.

GPU ids are packed by NVLink domain, then server, then scalable unit and pod, so "the first N GPUs" fills domains,
then servers, then leaves, then pods, as a scheduler packing a job would. Ranks are ordered as NCCL orders its
ring (by domain, then by GPU within the domain) unless an explicit order is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TopoError
from ..fabric.fabric import Fabric
from ..units import count_noun, format_count

__all__ = ["Placement", "place", "PLACEMENTS", "distinct_per_row"]

PLACEMENTS = ("packed", "one_per_server", "spread_pods", "list")


def distinct_per_row(a) -> np.ndarray:
    """The distinct values in each row of a 2-D integer array (a 1-D array is one row), without a Python loop:
    each row sorted, one more than its changes.

    Parameters
    ----------
    a : array_like of int
        One row per communicator (GPU ids, or their servers or domains).

    Returns
    -------
    numpy.ndarray
        The count of distinct values of each row.

    >>> distinct_per_row([[0, 0, 1], [2, 3, 4]]).tolist()
    [2, 3]
    """
    s = np.sort(np.atleast_2d(np.asarray(a)), axis=1)
    return 1 + np.count_nonzero(np.diff(s, axis=1), axis=1)


@dataclass(frozen=True)
class Placement:
    """The GPUs of a job in rank order, split into one or more identical communicators that run at once.

    ``groups[j]`` holds the GPU ids of communicator ``j`` in rank order. One communicator is the usual case;
    several model data or tensor parallelism, where every group runs the same collective at the same time
    (e.g. each GPU of one pod all-reducing with its peer in another pod).
    """

    groups: np.ndarray  # [num_groups, ranks per group] GPU ids
    kind: str
    gpus_per_domain: int

    @property
    def gpus(self) -> np.ndarray:
        """Every GPU taking part (all groups), flattened group by group."""
        return self.groups.ravel()

    @property
    def num_groups(self) -> int:
        """Communicators running the collective at once."""
        return int(self.groups.shape[0])

    @property
    def num_ranks(self) -> int:
        """Ranks of one communicator (what busbw's factor counts)."""
        return int(self.groups.shape[1])

    @property
    def domains(self) -> np.ndarray:
        """The NVLink domain of each rank, one row per communicator (as :attr:`groups`)."""
        return self.groups // self.gpus_per_domain

    @property
    def num_domains(self) -> int:
        """NVLink domains a communicator spans: the most any communicator spans (groups of 3 on 4-GPU domains
        span 1 or 2), the one that paces the collective."""
        return int(distinct_per_row(self.domains).max())

    def ranks_per_domain(self) -> int | None:
        """Ranks of a communicator in each domain it spans, if the same everywhere (in every group), else None.
        Ranks of one domain must be consecutive in rank order (as NCCL orders them).

        Returns
        -------
        int or None
        """
        doms = self.groups // self.gpus_per_domain
        G, n = doms.shape
        change = np.flatnonzero(np.diff(doms[0]) != 0)
        g = int(change[0] + 1) if change.size else n
        if n % g:
            return None
        blocks = doms.reshape(G, n // g, g)
        if not np.all(blocks == blocks[:, :, :1]):
            return None
        heads = blocks[:, :, 0]
        if n // g > 1 and (not np.all(np.diff(heads, axis=1) != 0) or np.unique(heads[0]).size != n // g):
            return None
        return g

    def describe(self) -> str:
        """One line: ``16 GPUs (packed) over 2 NVLink domains, 8 per domain``; with groups, what one group spans
        (``1,792 concurrent groups of 2 GPUs (strided, 3,584 GPUs), each group over 2 NVLink domains, 1 per
        domain``).

        Returns
        -------
        str
        """
        rpd = self.ranks_per_domain()
        per = f", {rpd} per domain" if rpd else ", unevenly"
        where = ("in one NVLink domain" if self.num_domains == 1 else
                 f"over {count_noun(self.num_domains, 'NVLink domain')}{per}")
        what = f"{format_count(self.num_ranks)} GPUs ({self.kind})"
        if self.num_groups > 1:
            what = (f"{format_count(self.num_groups)} concurrent groups of {format_count(self.num_ranks)} GPUs "
                    f"({self.kind}, {format_count(self.gpus.size)} GPUs), each group")
        return f"{what} {where}"


def place(fabric: Fabric, num_gpus: int | None = None, kind: str = "packed", gpus=None, rail: int = 0,
          order: str = "nccl", groups: int = 1, group_layout: str = "strided") -> Placement:
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
    groups : int
        Split the chosen GPUs into this many communicators running the same collective at once.
    group_layout : {"strided", "blocked"}
        ``strided``: communicator ``j`` takes GPUs ``j, j+groups, j+2*groups, ...`` of the chosen list (data
        parallelism: one GPU per model replica); ``blocked``: consecutive blocks (tensor parallelism).

    Returns
    -------
    Placement
        The communicators' GPU ids, one row per communicator in rank order.

    Raises
    ------
    TopoError
        An unknown placement or order; an empty, repeated or out-of-range GPU list; more GPUs, servers or a rail
        than the fabric has; GPUs that do not spread evenly over the pods or split into ``groups`` communicators.
    """
    L = fabric.layout
    if gpus is not None:
        kind = "list"
    if kind not in PLACEMENTS:
        raise TopoError(f"unknown placement {kind!r}; allowed: {', '.join(PLACEMENTS)}", key="placement")
    if kind == "list":
        ids = _listed(gpus, L.num_gpus, order)
    else:
        n = L.num_gpus if num_gpus is None else int(num_gpus)
        if n < 1:
            raise TopoError(f"the number of GPUs must be >= 1, got {n}", key="gpus")
        ids = _chosen(L, kind, n, rail)
    table = _split_groups(ids, groups, group_layout)
    if order == "nccl" and groups > 1:
        table = np.sort(table, axis=1)
    return Placement(groups=table, kind=kind, gpus_per_domain=L.gpus_per_domain)


def _listed(gpus, total: int, order: str) -> np.ndarray:
    """The GPU ids of an explicit list, checked to exist once each; sorted for NCCL's order."""
    ids = np.asarray(list(gpus), dtype=np.int64)
    if ids.size == 0:
        raise TopoError("the GPU list is empty", key="ranks")
    bad = ids[(ids < 0) | (ids >= total)]
    if bad.size:
        raise TopoError(f"GPU id {int(bad[0])} does not exist; this fabric has GPUs 0 to {total - 1}",
                        key="ranks")
    uniq, counts = np.unique(ids, return_counts=True)
    if np.any(counts > 1):
        raise TopoError(f"GPU {int(uniq[counts > 1][0])} is listed twice", key="ranks")
    return np.sort(ids) if order == "nccl" else ids


def _chosen(L, kind: str, n: int, rail: int) -> np.ndarray:
    """The ids of ``n`` GPUs chosen by placement ``kind`` (not ``list``) in layout ``L``."""
    total = L.num_gpus
    if kind == "packed":
        if n > total:
            raise TopoError(f"{format_count(n)} GPUs asked, but the fabric has {format_count(total)}",
                            key="gpus")
        return np.arange(n, dtype=np.int64)
    if kind == "one_per_server":
        if n > L.num_servers:
            raise TopoError(f"one GPU per server for {format_count(n)} GPUs needs {format_count(n)} servers, "
                            f"but the fabric has {format_count(L.num_servers)}", key="gpus")
        if not 0 <= rail < L.gpus_per_server:
            raise TopoError(f"rail {rail} does not exist; servers have GPUs 0 to {L.gpus_per_server - 1}",
                            key="rail")
        return np.arange(n, dtype=np.int64) * L.gpus_per_server + rail
    # spread_pods
    pods = L.num_pods
    per_pod = L.num_gpus // pods
    if n > total:
        raise TopoError(f"{format_count(n)} GPUs asked, but the fabric has {format_count(total)}",
                        key="gpus")
    if n % pods:
        raise TopoError(f"spreading {format_count(n)} GPUs over {pods} pods needs a multiple of {pods}",
                        key="gpus")
    k = n // pods
    return (np.arange(pods, dtype=np.int64)[:, None] * per_pod + np.arange(k)[None, :]).ravel()


def _split_groups(ids: np.ndarray, groups: int, group_layout: str) -> np.ndarray:
    """``ids`` split into ``groups`` communicators, one row each, strided or blocked."""
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise TopoError(f"the number of groups must be a whole number >= 1, got {groups!r}", key="groups")
    if ids.size % groups:
        raise TopoError(f"{format_count(ids.size)} GPUs do not split into {groups} equal groups", key="groups")
    if group_layout == "strided":
        return ids.reshape(ids.size // groups, groups).T.copy()
    if group_layout == "blocked":
        return ids.reshape(groups, ids.size // groups)
    raise TopoError(f"unknown group layout {group_layout!r}; allowed: strided, blocked", key="group_layout")
