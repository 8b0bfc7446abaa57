"""Blast radius: what one failed part takes out, read from the fabric's link table (not from formulas per kind).

For one NIC, one leaf and one switch of each tier above (the first of its tier; every switch of a tier is alike in
these regular fabrics):

- ``gpus_disconnected``: GPUs whose only scale-out path goes through it (the GPUs behind a NIC; behind a leaf, the
  GPUs of its NICs);
- ``servers_affected``, ``gpus_in_affected_servers``: the servers that lose a NIC path (a synchronous job that
  cannot route around a lost rail must drop these servers: the job-level blast radius);
- ``gpus_below``: GPUs whose traffic can cross it (everything under it);
- ``capacity_lost_fraction``: its share of the uplink capacity of the GPUs below it, at its level (one spine of
  32 in a pod: 1/32 of the pod's leaf uplinks; 1.0 means the GPUs below it are cut off from the rest). Switches
  above the leaves disconnect no GPU from the network: ``gpus_disconnected`` counts only NICs and leaves.

The collective time with the part failed comes from the engine's failures (:func:`collective_times_with_failures`).
A part whose failure the failure table counts as an interruption (a NIC: Llama 3 Table 5 lists 7 of its 419
interruptions as NIC failures) stops the job first; its slowdown is the step after the restart, on the parts left
(:func:`with_interruptions`: the cause's rate, counted in the goodput, on its row).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from ..engine.estimate import evaluate, size_result
from ..errors import Unreachable
from ..fabric.fabric import Fabric
from ..fabric.levels import Level
from ..units import parse_size_bytes
from .network import COLLECTIVE_SIZE

__all__ = ["BlastRadius", "blast_radius", "collective_times_with_failures", "FailureImpact", "with_interruptions",
           "INTERRUPTING_CAUSE"]

# the failure table's cause (topo/data/catalog/reliability.toml) under which a part's failure interrupts the job
INTERRUPTING_CAUSE = {"nic": "nic"}


@dataclass(frozen=True)
class BlastRadius:
    part: str
    gpus_disconnected: int
    servers_affected: int
    gpus_in_affected_servers: int
    gpus_below: int
    capacity_lost_fraction: float

    def to_dict(self) -> dict:
        return asdict(self)


def blast_radius(fabric: Fabric) -> list[BlastRadius]:
    L, links, nodes = fabric.layout, fabric.links, fabric.nodes
    src, dst, level = links["src"], links["dst"], links["level"]
    gps = L.gpus_per_server
    out = []

    # NIC 0: the GPUs whose PCIe link reaches it
    pcie = level == Level.PCIE.code
    nic0 = fabric.node_offset["nic"]
    gpus_nic = int(np.count_nonzero(pcie & (dst == nic0)))
    out.append(BlastRadius("nic", gpus_disconnected=gpus_nic, servers_affected=1, gpus_in_affected_servers=gps,
                           gpus_below=gpus_nic, capacity_lost_fraction=1 / L.nics_per_server))

    # GPUs behind each NIC (for leaf counts)
    gpus_per_nic = np.bincount(dst[pcie] - nic0, minlength=L.num_nics)
    nic_links = level == Level.NIC.code
    below = {}  # tier -> GPUs below each switch
    lo0 = fabric.node_offset["tier:0"]
    nics_of_leaf = src[nic_links] - nic0
    leaf_of_nic = dst[nic_links] - lo0
    below[0] = np.bincount(leaf_of_nic, weights=gpus_per_nic[nics_of_leaf], minlength=L.tiers[0].num_switches)
    leaf0 = leaf_of_nic == 0
    servers = np.unique(nodes["server"][src[nic_links][leaf0]])
    out.append(BlastRadius(L.tiers[0].name, gpus_disconnected=int(below[0][0]), servers_affected=len(servers),
                           gpus_in_affected_servers=len(servers) * gps, gpus_below=int(below[0][0]),
                           capacity_lost_fraction=1 / max(1, L.leaves_per_unit)))
    # each tier's links once: (lower switch, upper switch) per link, indices within their tiers
    edges = {}
    for t in L.tiers[1:]:
        sel = level == Level.into_tier(t.index).code
        edges[t.index] = (src[sel] - fabric.node_offset[f"tier:{t.index - 1}"],
                          dst[sel] - fabric.node_offset[f"tier:{t.index}"])
    total = max(1.0, float(below[0].sum()))
    for t in L.tiers[1:]:
        lower, upper = edges[t.index]
        # GPUs below the tier's first switch: walk down from it, marking the switches it reaches at each level
        # (boolean masks over each tier's links: no loop per switch), then add the GPUs of the leaves reached
        reach = np.zeros(t.num_switches, dtype=bool)
        reach[0] = True
        for k in range(t.index, 0, -1):
            lo_k, up_k = edges[k]
            down = np.zeros(L.tiers[k - 1].num_switches, dtype=bool)
            down[lo_k[reach[up_k]]] = True
            reach = down
        gpus_below = float(below[0][reach].sum())
        # capacity: its links over the links of this level that carry the uplinks of the GPUs below it
        mine = int(np.count_nonzero(upper == 0))
        peers_links = len(upper) * gpus_below / total
        out.append(BlastRadius(t.name, gpus_disconnected=0, servers_affected=0, gpus_in_affected_servers=0,
                               gpus_below=int(gpus_below),
                               capacity_lost_fraction=float(mine / peers_links) if peers_links else 0.0))
    return out


@dataclass(frozen=True)
class FailureImpact:
    """A data-parallel all-reduce across two pods (see :func:`collective_times_with_failures`) with one part
    failed."""

    part: str  # nic, leaf, spine
    name: str  # the failed node, as describe prints it
    all_reduce_s: float
    healthy_s: float
    slowdown: float  # infinite when the part cuts GPUs of the collective off (see ``stops``)
    bottleneck: str | None
    stops: str | None = None  # why the collective cannot run at all with the part failed (a GPU cut off)
    over: str = "two pods (one GPU of each)"  # the communicators: two pods', or one over every GPU of a one-pod fabric
    # the failure table's cause that counts this part's failures as interruptions of the job (None: the model routes
    # around it with no stop) and that cause's rate a day, in the goodput; the slowdown is then after the restart
    interrupts_as: str | None = None
    interruptions_per_day: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _first_left(prefix: str, failures, count: int) -> str:
    """``prefix`` + the first index below ``count`` that ``failures`` does not name (0 when every one is named)."""
    return prefix + str(next((k for k in range(count) if f"{prefix}{k}" not in failures), 0))


def collective_times_with_failures(fabric: Fabric, parts=("nic", "leaf", "spine"), profile=None) -> list[FailureImpact]:
    """A 1 GiB all-reduce over every GPU of two pods, one communicator per GPU position (the whole cluster on a
    one-pod fabric), with the first NIC, leaf or spine failed (:meth:`topo.fabric.Fabric.with_failures`): its time,
    its slowdown and its new bottleneck. The parts are those of pod 0, so two pods show their effect at a fraction of
    the cost of the plan's whole-cluster figures (:func:`topo.plan.network.crosspod_collectives`); ``profile``: their
    cost profile, as :func:`topo.engine.profiles.resolve_profile` takes it (None: the fabric's own)."""
    L = fabric.layout
    pod = L.servers_per_unit * L.units_per_pod * L.gpus_per_server
    kw = dict(gpus=2 * pod, groups=pod) if L.num_pods >= 2 else dict(gpus=L.num_gpus)
    kw["profile"] = profile
    over = "two pods (one GPU of each)" if L.num_pods >= 2 else f"every GPU ({L.num_gpus:,}: the cluster is one pod)"
    # the first of each kind that --fail left working (walk27: with --fail ctsw0 the row failed ctsw0 again, 1.00x)
    names = {"nic": _first_left("nic0.", fabric.failures, L.nics_per_server),
             "leaf": _first_left(L.tiers[0].name, fabric.failures, pod)}
    if len(L.tiers) > 1:
        names["spine"] = _first_left(L.tiers[1].name, fabric.failures, pod)
    size = parse_size_bytes(COLLECTIVE_SIZE)
    healthy = size_result(evaluate(fabric, "all_reduce", at_sizes=[size], **kw), size).time_s
    out = []
    for part in parts:
        if part not in names:
            continue
        try:
            r = size_result(evaluate(fabric.with_failures(names[part]), "all_reduce", at_sizes=[size], **kw), size)
        except Unreachable as exc:  # e.g. one leaf per server (fat tree racks): its GPUs are cut off, the job stops
            out.append(FailureImpact(part, names[part], float("inf"), healthy, float("inf"), None, exc.message,
                                     over))
            continue
        b = r.bottleneck
        out.append(FailureImpact(part, names[part], r.time_s, healthy, r.time_s / healthy,
                                 f"{b.src} -> {b.dst} ({b.level})" if b else None, over=over))
    return out


def with_interruptions(impact: list[FailureImpact], per_day_by_cause: dict[str, float]) -> list[FailureImpact]:
    """``impact`` with each part whose failure the failure table counts as an interruption
    (:data:`INTERRUPTING_CAUSE`) given that cause and its rate a day (``per_day_by_cause``: the plan's reliability,
    the job's or the cluster's): the stop is in the goodput, the slowdown is the collective after the restart."""
    return [replace(x, interrupts_as=cause, interruptions_per_day=per_day_by_cause[cause])
            if (cause := INTERRUPTING_CAUSE.get(x.part)) in per_day_by_cause else x for x in impact]
