"""The fabric: every GPU, NVSwitch, NIC, switch and link of a cluster, as arrays, with a networkx view.

Node ids are contiguous blocks, in this order: GPUs, NVSwitches (one logical switch per NVLink domain), NICs,
then the switches of each scale-out tier (leaf, spine, core). Link ids are blocks too: NVLink (one per GPU, GPU to
its domain's NVSwitch), PCIe (GPU to NIC), NIC-leaf (one per NIC), then leaf-spine and spine-core, one link per
cable. A link is full duplex: its *directed* ids are ``2*link`` (up: from the lower end, ``link_src``, to the
upper end, ``link_dst``) and ``2*link + 1`` (down). Because the structure is regular, the id of the link between
any two adjacent nodes is index arithmetic (see :mod:`topo.engine.route`), so nothing at 100k GPUs loops per GPU.

Node attributes (arrays here, attributes in :meth:`Fabric.to_networkx`):

==========  =====================================================================================
role        ``gpu``, ``nvswitch``, ``nic`` or ``switch``
tier        the scale-out tier name for switches (``leaf``, ``spine``, ...), ``nvlink`` for NVSwitches
rail        NIC index within its server (NICs, GPUs by their NIC; leaves/spines of a rail in rail kinds)
server      server (host) index; -1 for NVSwitches and switches
domain      NVLink domain index; -1 for switches
unit        scalable unit (rack) index for GPUs, NICs and leaves; -1 above
pod         pod (tier-1 block) index for GPUs, NICs, leaves and spines; -1 above
plane       spine index within its pod (the plane it reaches) for spines and every switch above; -1 otherwise;
            a top switch hosting several planes' switches: its first one's (every one in ``planes``)
planes      (export and networkx view) every plane of ``plane``, ascending, joined by ``,`` (``"9,10"`` for a top
            switch hosting switches of planes 9 and 10; ``""`` where ``plane`` is -1)
failed      True when ``--fail`` took the node down whole (:func:`topo.fabric.failures.failed_nodes`)
==========  =====================================================================================

Link attributes: ``level`` (``nvlink``, ``pcie``, ``nic-<leaf>``, ``<leaf>-<spine>``, ``<spine>-<core>``, and one per
further tier boundary; :class:`topo.fabric.levels.Level` names them),
``bandwidth_Bps`` per direction, ``latency_s`` (half the latency of each end it joins; a path from GPU to GPU
thus counts every NVSwitch, NIC and switch it crosses once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .failures import failed_links, failed_nodes
from .hardware import gpu_pcie_Bps
from .hosts import gpu_beside, nic_beside
from .layout import ClosLayout
from .levels import Level
from ..spec.model import Spec

__all__ = ["Fabric", "ROLE_NAMES", "ROLE_GPU", "ROLE_NVSWITCH", "ROLE_NIC", "ROLE_SWITCH", "Level"]

ROLE_GPU, ROLE_NVSWITCH, ROLE_NIC, ROLE_SWITCH = 0, 1, 2, 3
ROLE_NAMES = ("gpu", "nvswitch", "nic", "switch")
# link-table codes of the fixed levels, for array comparisons; name a level with topo.fabric.levels.Level
LEVEL_NVLINK, LEVEL_PCIE, LEVEL_NIC = Level.NVLINK.code, Level.PCIE.code, Level.NIC.code


@dataclass
class Fabric:
    """A built cluster. Build one with :func:`topo.build_fabric`; do not construct directly."""

    spec: Spec
    layout: ClosLayout
    node_offset: dict[str, int]  # first node id of each block: gpu, nvswitch, nic, tier:<i>
    link_offset: dict[str, int]  # first link id of each block: nvlink, pcie, nic, up:<i> (tier i to i+1)
    num_nodes: int
    num_links: int
    _cache: dict = field(default_factory=dict, repr=False)
    failed: np.ndarray | None = field(default=None, repr=False)  # per link: True when failed
    failures: tuple[str, ...] = ()  # what failed, as given to with_failures

    # --- failures ------------------------------------------------------------------------------------------
    def with_failures(self, *failures: str) -> "Fabric":
        """The same fabric with parts failed (names as ``describe``/``export`` print them, a rail, a plane, or a
        random fraction of a level's links or a tier's switches; see :mod:`topo.fabric.failures`). Routing avoids
        failed links; a GPU cut off entirely is an error when a collective needs it."""
        if not failures:
            return self
        dead = failed_links(self, failures)
        if self.failed is not None:
            dead |= self.failed
        out = Fabric(spec=self.spec, layout=self.layout, node_offset=self.node_offset,
                     link_offset=self.link_offset, num_nodes=self.num_nodes, num_links=self.num_links,
                     failed=dead, failures=self.failures + tuple(str(f) for f in failures))
        out.__dict__["links"] = self.links  # the same cables; only their state differs
        return out

    @property
    def link_alive(self) -> np.ndarray:
        """Per link: True when it works."""
        if self.failed is None:
            return np.ones(self.num_links, dtype=bool)
        return ~self.failed

    # --- sizes ---------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def num_gpus(self) -> int:
        return self.layout.num_gpus

    @property
    def levels(self) -> tuple[Level, ...]:
        """Every level of links, in link-table order (see :mod:`topo.fabric.levels`)."""
        return Level.all(self.layout.num_tiers)

    @property
    def level_names(self) -> list[str]:
        names = [t.name for t in self.layout.tiers]
        return [lv.name_in(names) for lv in self.levels]

    def level_slice(self, level: Level) -> slice:
        """The link ids of one level (each level is one contiguous block)."""
        return slice(self._level_starts[level.code], self._level_starts[level.code + 1])

    def tier_slice(self, tier: int) -> slice:
        """The node ids of the switches of scale-out tier ``tier``."""
        start = self.node_offset[_tier_key(tier)]
        return slice(start, start + self.layout.tiers[tier].num_switches)

    def tier_start(self, tier: int) -> int:
        """The first node id of scale-out tier ``tier``."""
        return self.node_offset[_tier_key(tier)]

    def level_start(self, level: Level) -> int:
        """The first link id of ``level``."""
        return self._level_starts[level.code]

    @cached_property
    def _level_starts(self) -> tuple[int, ...]:
        lo = self.link_offset
        starts = [lo["nvlink"], lo["pcie"], lo["nic"]] + [lo[_uplink_key(k)] for k in range(self.layout.num_tiers - 1)]
        return tuple(starts) + (self.num_links,)

    def uplink_id(self, tier: int, switch, j, cable):
        """The link id of cable ``cable`` from switch ``switch`` of tier ``tier`` to switch ``j`` of its group above."""
        t = self.layout.tiers[tier]
        m = self.layout.tiers[tier + 1].links_from_below
        return self._level_starts[Level.uplink(tier).code] + np.asarray(switch) * t.up_ports + np.asarray(j) * m \
            + np.asarray(cable)

    @property
    def pcie_per_nic(self) -> bool:
        """True when each NIC has its own PCIe link to one GPU (NICs >= GPUs per server)."""
        return self.layout.nics_per_server >= self.layout.gpus_per_server

    # --- index arithmetic on the regular structure (vectorised; accept numpy arrays) ------------------------
    def gpu_server(self, gpu):
        return np.asarray(gpu) // self.layout.gpus_per_server

    def gpu_domain(self, gpu):
        return np.asarray(gpu) // self.layout.gpus_per_domain

    def gpu_nic(self, gpu, choice=0):
        """A NIC beside ``gpu`` (global NIC index). With several NICs per GPU, ``choice`` picks one of them."""
        return nic_beside(gpu, self.layout.gpus_per_server, self.layout.nics_per_server, choice)

    def nic_server(self, nic):
        return np.asarray(nic) // self.layout.nics_per_server

    def nic_rail(self, nic):
        return np.asarray(nic) % self.layout.nics_per_server

    def nic_gpu(self, nic):
        """The GPU whose PCIe link reaches ``nic`` (with fewer NICs than GPUs: the first GPU it serves)."""
        return gpu_beside(nic, self.layout.gpus_per_server, self.layout.nics_per_server)

    def nic_leaf(self, nic):
        """Leaf index (within the leaf tier) of each NIC."""
        L = self.layout
        nic = np.asarray(nic)
        server, n = nic // L.nics_per_server, nic % L.nics_per_server
        unit = server // L.servers_per_unit
        if L.leaves_per_unit == 1:
            return unit
        return unit * L.leaves_per_unit + n

    def leaf_group(self, leaf):
        """Spine group of each leaf (a pod, or a pod's rail in rail-only)."""
        return self.layout.leaf_aggregate(1, leaf)

    def spine_plane(self, spine):
        """Core plane of each spine (its index in its group; per rail in rail-only)."""
        return self.layout.switch_plane(1, spine)

    # --- arrays --------------------------------------------------------------------------------------------
    @cached_property
    def links(self) -> dict[str, np.ndarray]:
        """Link table: ``src``, ``dst`` (node ids, lower end first), ``bandwidth_Bps``, ``latency_s``, ``level``."""
        return _build_links(self)

    @cached_property
    def nodes(self) -> dict[str, np.ndarray]:
        """Node table: ``role``, ``tier`` (-1, or the scale-out tier index; NVSwitches -2), ``rail``, ``server``,
        ``domain``, ``unit``, ``pod``, ``plane``, ``index`` (within its block), ``latency_s``."""
        return _build_nodes(self)

    def node_names(self, ids=None) -> list[str]:
        """Readable names (``gpu12``, ``nvswitch1``, ``nic3.5``, ``leaf7``) for node ids (all by default)."""
        ids = np.arange(self.num_nodes) if ids is None else np.asarray(ids)
        return [self._name(int(i)) for i in ids]

    def _name(self, i: int) -> str:
        o = self.node_offset
        if i < o["nvswitch"]:
            return f"gpu{i}"
        if i < o["nic"]:
            return f"nvswitch{i - o['nvswitch']}"
        if i < self.tier_start(0):
            k = i - o["nic"]
            return f"nic{k // self.layout.nics_per_server}.{k % self.layout.nics_per_server}"
        for t in reversed(self.layout.tiers):
            if i >= self.tier_start(t.index):
                return f"{t.name}{i - self.tier_start(t.index)}"
        raise IndexError(i)  # pragma: no cover

    def switch_node(self, tier: int, index):
        """Node id of switch ``index`` of scale-out tier ``tier``."""
        return self.tier_start(tier) + np.asarray(index)

    # --- networkx view -------------------------------------------------------------------------------------
    @property
    def graph(self):
        """The networkx graph (built on first use and kept)."""
        if "graph" not in self._cache:
            self._cache["graph"] = self.to_networkx()
        return self._cache["graph"]

    NODE_ATTRS = ("role", "tier", "rail", "server", "domain", "unit", "pod", "plane", "planes", "failed")
    EDGE_ATTRS = ("level", "num_links", "bandwidth_Bps", "link_bandwidth_Bps", "latency_s", "num_failed")

    def node_records(self):
        """``(name, attrs)`` for every node, attributes as in the module doc (the networkx and export view)."""
        nodes = self.nodes
        names = self.node_names()
        tier_label = {-1: "", -2: "nvlink", **{t.index: t.name for t in self.layout.tiers}}
        roles = nodes["role"].tolist()
        tiers = nodes["tier"].tolist()
        cols = [nodes[k].tolist() for k in self.NODE_ATTRS[2:-2]]
        hosted = _hosted_planes(self)
        cols.append([hosted.get(i, str(p) if p >= 0 else "") for i, p in enumerate(cols[-1])])
        cols.append(failed_nodes(self, self.failures).tolist())
        for i in range(self.num_nodes):
            yield names[i], dict(zip(self.NODE_ATTRS, (ROLE_NAMES[roles[i]], tier_label[tiers[i]],
                                                       *(c[i] for c in cols))))

    def edge_records(self, names: list[str] | None = None):
        """``(u, v, attrs)`` for every pair of adjacent nodes; parallel cables between the same pair are one edge
        with ``num_links`` and the summed ``bandwidth_Bps`` (``link_bandwidth_Bps`` is one cable's);
        ``num_failed`` of them have failed (:meth:`with_failures`)."""
        links = self.links
        names = names if names is not None else self.node_names()
        src, dst = links["src"], links["dst"]
        key = src.astype(np.int64) * self.num_nodes + dst
        order = np.argsort(key, kind="stable")
        k_sorted = key[order]
        starts = np.flatnonzero(np.r_[True, k_sorted[1:] != k_sorted[:-1]])
        counts = np.diff(np.r_[starts, len(order)])
        first = order[starts]
        failed = (np.add.reduceat(self.failed[order].astype(np.int64), starts) if self.failed is not None
                  else np.zeros(starts.size, dtype=np.int64))
        level_names = self.level_names
        for s, d, lv, c, b, la, nf in zip(src[first].tolist(), dst[first].tolist(), links["level"][first].tolist(),
                                          counts.tolist(), links["bandwidth_Bps"][first].tolist(),
                                          links["latency_s"][first].tolist(), failed.tolist()):
            yield names[s], names[d], dict(zip(self.EDGE_ATTRS, (level_names[lv], c, b * c, b, la, nf)))

    def to_networkx(self):
        """A ``networkx.Graph``: one node per GPU, NVSwitch, NIC and switch (named as :meth:`node_names`), one
        edge per pair of adjacent nodes (see :meth:`edge_records`). Attributes: see the module doc.
        """
        import networkx as nx

        g = nx.Graph(name=self.name, num_gpus=self.num_gpus)
        g.add_nodes_from(self.node_records())
        g.add_edges_from(self.edge_records())
        return g


# --- construction -----------------------------------------------------------------------------------------

def _tier_key(tier: int) -> str:
    return f"tier:{tier}"


def _uplink_key(tier: int) -> str:
    return f"up:{tier}"


def make_fabric(spec: Spec, layout: ClosLayout) -> Fabric:
    """Lay out the node and link id blocks for ``layout``."""
    L = layout
    node_offset = {"gpu": 0, "nvswitch": L.num_gpus}
    node_offset["nic"] = node_offset["nvswitch"] + L.num_domains
    n = node_offset["nic"] + L.num_nics
    for t in L.tiers:
        node_offset[_tier_key(t.index)] = n
        n += t.num_switches
    link_offset = {"nvlink": 0, "pcie": L.num_gpus}
    link_offset["nic"] = link_offset["pcie"] + L.num_servers * max(L.nics_per_server, L.gpus_per_server)
    m = link_offset["nic"] + L.num_nics
    for t in L.tiers[:-1]:
        link_offset[_uplink_key(t.index)] = m
        m += t.num_switches * t.up_ports
    return Fabric(spec=spec, layout=L, node_offset=node_offset, link_offset=link_offset, num_nodes=n,
                  num_links=m)


def _node_latency(f: Fabric) -> np.ndarray:
    lat = np.zeros(f.num_nodes)
    o = f.node_offset
    lat[o["nvswitch"]:o["nic"]] = f.spec.scale_up.latency_s
    lat[o["nic"]:f.tier_start(0)] = f.spec.server.nic_latency_s
    for t in f.layout.tiers:
        lat[f.tier_slice(t.index)] = t.latency_s
    return lat


def _build_nodes(f: Fabric) -> dict[str, np.ndarray]:
    L, o, N = f.layout, f.node_offset, f.num_nodes
    role = np.full(N, ROLE_SWITCH, dtype=np.int8)
    tier = np.full(N, -1, dtype=np.int8)
    cols = {k: np.full(N, -1, dtype=np.int32) for k in ("rail", "server", "domain", "unit", "pod", "plane")}
    index = np.zeros(N, dtype=np.int32)

    gpus = np.arange(L.num_gpus)
    sl = slice(0, L.num_gpus)
    role[sl] = 0
    index[sl] = gpus
    cols["server"][sl] = gpus // L.gpus_per_server
    cols["domain"][sl] = gpus // L.gpus_per_domain
    cols["rail"][sl] = f.nic_rail(f.gpu_nic(gpus))
    cols["unit"][sl] = cols["server"][sl] // L.servers_per_unit
    cols["pod"][sl] = cols["unit"][sl] // L.units_per_pod

    sl = slice(o["nvswitch"], o["nic"])
    role[sl], tier[sl] = 1, -2
    index[sl] = np.arange(L.num_domains)
    cols["domain"][sl] = index[sl]

    nics = np.arange(L.num_nics)
    sl = slice(o["nic"], f.tier_start(0))
    role[sl] = 2
    index[sl] = nics
    cols["server"][sl] = nics // L.nics_per_server
    cols["rail"][sl] = nics % L.nics_per_server
    cols["domain"][sl] = (cols["server"][sl] * L.gpus_per_server) // L.gpus_per_domain
    cols["unit"][sl] = cols["server"][sl] // L.servers_per_unit
    cols["pod"][sl] = cols["unit"][sl] // L.units_per_pod

    for t in L.tiers:
        sl = f.tier_slice(t.index)
        ids = np.arange(t.num_switches)
        tier[sl] = t.index
        index[sl] = ids
        if t.index == 0:
            cols["unit"][sl] = ids // L.leaves_per_unit
            cols["pod"][sl] = cols["unit"][sl] // L.units_per_pod
            if L.leaves_per_unit > 1:
                cols["rail"][sl] = ids % L.leaves_per_unit
            continue
        first = L.first_logical(t.index, ids)  # a top switch hosting several: its first one's plane (all: _hosted_planes)
        if t.index == 1:
            cols["pod"][sl] = L.switch_block(1, first)
        cols["plane"][sl] = L.switch_plane(t.index, first)
        if L.rail_groups > 1:
            cols["rail"][sl] = L.switch_rail_group(t.index, first)
    out = {"role": role, "tier": tier, "index": index, "latency_s": _node_latency(f)}
    out.update(cols)
    return out


def _hosted_planes(f: Fabric) -> dict[int, str]:
    """``{node id: "9,10"}`` for each top switch hosting switches of several planes (``nodes["plane"]`` holds the
    first one's; rev73: GB200 at 912 racks hosts 9 consecutive plane switches of 19 on one super-spine)."""
    L = f.layout
    out: dict[int, str] = {}
    for t in L.tiers[1:]:
        if t.logical_per_switch == 1:
            continue
        ids = np.arange(t.num_switches)
        planes = L.switch_plane(t.index, L.first_logical(t.index, ids)[:, None] + np.arange(t.logical_per_switch))
        several = np.flatnonzero(planes.min(axis=1) != planes.max(axis=1))
        nodes = f.switch_node(t.index, several).tolist()
        out.update((n, ",".join(map(str, np.unique(row).tolist()))) for n, row in zip(nodes, planes[several]))
    return out


def _build_links(f: Fabric) -> dict[str, np.ndarray]:
    L, no = f.layout, f.node_offset
    M = f.num_links
    src = np.empty(M, dtype=np.int32)
    dst = np.empty(M, dtype=np.int32)
    bw = np.empty(M)
    level = np.empty(M, dtype=np.int8)

    # NVLink: GPU -> its domain's NVSwitch
    gpus = np.arange(L.num_gpus)
    sl = f.level_slice(Level.NVLINK)
    src[sl], dst[sl] = gpus, no["nvswitch"] + gpus // L.gpus_per_domain
    bw[sl], level[sl] = f.spec.nvlink_Bps, Level.NVLINK.code

    # PCIe: GPU -> NIC (one per NIC, or one per GPU when GPUs share a NIC). With k NICs per GPU, the k links
    # stand for the GPU's one x16 link, which they share: each gets at most 1/k of it (an H100's Gen5 x16, 64 GB/s,
    # cannot feed 4 x 400G NICs: nccl-tests issue #232 plateaus near 50 GB/s busbw with 1 H100 and 4 NICs)
    sl = f.level_slice(Level.PCIE)
    pcie = f.spec.server.pcie_bandwidth_Bps
    if f.pcie_per_nic:
        nics = np.arange(L.num_nics)
        src[sl], dst[sl] = f.nic_gpu(nics), no["nic"] + nics
        k = L.nics_per_server // L.gpus_per_server
        gpu_link = gpu_pcie_Bps(f.spec.gpu)
        if k > 1 and gpu_link is not None:
            pcie = min(pcie, gpu_link / k)
    else:
        src[sl], dst[sl] = gpus, no["nic"] + f.gpu_nic(gpus)
    bw[sl], level[sl] = pcie, Level.PCIE.code

    # NIC -> leaf
    nics = np.arange(L.num_nics)
    sl = f.level_slice(Level.NIC)
    src[sl], dst[sl] = no["nic"] + nics, f.tier_start(0) + f.nic_leaf(nics)
    bw[sl], level[sl] = L.nic_rate_Bps, Level.NIC.code

    # tier k -> tier k+1: lower switch x (switch of its group) x parallel cable
    for below in L.tiers[:-1]:
        lv = Level.uplink(below.index)
        sl = f.level_slice(lv)
        lower = np.repeat(np.arange(below.num_switches), below.up_ports)
        within = np.tile(np.arange(below.up_ports), below.num_switches)  # = j * m + cable
        j = within // L.tiers[below.index + 1].links_from_below
        src[sl] = f.tier_start(below.index) + lower
        dst[sl] = f.tier_start(below.index + 1) + L.physical_switch(below.index + 1,
                                                                    L.upper_switch(below.index, lower, j))
        bw[sl], level[sl] = below.up_rate_Bps, lv.code

    node_lat = _node_latency(f)
    return {"src": src, "dst": dst, "bandwidth_Bps": bw, "latency_s": 0.5 * (node_lat[src] + node_lat[dst]),
            "level": level}
