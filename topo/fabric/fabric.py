"""The fabric: every GPU, NVSwitch, NIC, switch and link of a cluster, as arrays, with a networkx view.

Node ids are contiguous blocks, in this order: GPUs, NVSwitches (one logical switch per NVLink domain), NICs,
then the switches of each scale-out tier (leaf, spine, core). Link ids are blocks too: NVLink (one per GPU, GPU to
its domain's NVSwitch), PCIe (GPU to NIC), NIC-leaf (one per NIC), then leaf-spine and spine-core, one link per
cable. A link is full duplex: its *directed* ids are ``2*link`` (up: from the lower end, ``link_src``, to the
upper end, ``link_dst``) and ``2*link + 1`` (down). Because the structure is regular, the id of the link between
any two adjacent nodes is index arithmetic (see :mod:`topo.route`), so nothing at 100k GPUs loops per GPU.

Node attributes (arrays here, attributes in :meth:`Fabric.to_networkx`):

==========  =====================================================================================
role        ``gpu``, ``nvswitch``, ``nic`` or ``switch``
tier        the scale-out tier name for switches (``leaf``, ``spine``, ...), ``nvlink`` for NVSwitches
rail        NIC index within its server (NICs, GPUs by their NIC; leaves/spines of a rail in rail kinds)
server      server (host) index; -1 for NVSwitches and switches
domain      NVLink domain index; -1 for switches
unit        scalable unit (rack) index for GPUs, NICs and leaves; -1 above
pod         pod index for everything below the top tier of a 3-tier fabric; -1 for cores
plane       spine index within its pod (the core plane it reaches) for spines and cores; -1 otherwise
==========  =====================================================================================

Link attributes: ``level`` (``nvlink``, ``pcie``, ``nic-<leaf>``, ``<leaf>-<spine>``, ``<spine>-<core>``),
``bandwidth_Bps`` per direction, ``latency_s`` (half the latency of each end it joins; a path from GPU to GPU
thus counts every NVSwitch, NIC and switch it crosses once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .builders.clos import ClosLayout
from .hardware import gpu_pcie_Bps
from ..spec.model import Spec

__all__ = ["Fabric", "ROLE_NAMES", "ROLE_GPU", "ROLE_NVSWITCH", "ROLE_NIC", "ROLE_SWITCH"]

ROLE_GPU, ROLE_NVSWITCH, ROLE_NIC, ROLE_SWITCH = 0, 1, 2, 3
ROLE_NAMES = ("gpu", "nvswitch", "nic", "switch")
LEVEL_NVLINK, LEVEL_PCIE, LEVEL_NIC = 0, 1, 2  # then 3 = leaf-spine, 4 = spine-core


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
        random fraction of a level's links or a tier's switches; see :mod:`topo.failures`). Routing avoids
        failed links; a GPU cut off entirely is an error when a collective needs it."""
        from .failures import failed_links

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
    def level_names(self) -> list[str]:
        names = [t.name for t in self.layout.tiers]
        out = ["nvlink", "pcie", f"nic-{names[0]}"]
        out += [f"{a}-{b}" for a, b in zip(names, names[1:])]
        return out

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
        L = self.layout
        gpu = np.asarray(gpu)
        server, local = gpu // L.gpus_per_server, gpu % L.gpus_per_server
        if L.nics_per_server >= L.gpus_per_server:
            per = L.nics_per_server // L.gpus_per_server
            first = (local * L.nics_per_server) // L.gpus_per_server
            return server * L.nics_per_server + first + np.asarray(choice) % per
        return server * L.nics_per_server + (local * L.nics_per_server) // L.gpus_per_server

    def nic_server(self, nic):
        return np.asarray(nic) // self.layout.nics_per_server

    def nic_rail(self, nic):
        return np.asarray(nic) % self.layout.nics_per_server

    def nic_gpu(self, nic):
        """The GPU whose PCIe link reaches ``nic`` (with fewer NICs than GPUs: the first GPU it serves)."""
        L = self.layout
        nic = np.asarray(nic)
        server, n = nic // L.nics_per_server, nic % L.nics_per_server
        if L.nics_per_server >= L.gpus_per_server:
            return server * L.gpus_per_server + (n * L.gpus_per_server) // L.nics_per_server
        per = L.gpus_per_server // L.nics_per_server
        return server * L.gpus_per_server + n * per

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
        L = self.layout
        leaf = np.asarray(leaf)
        unit, rail = leaf // L.leaves_per_unit, leaf % L.leaves_per_unit
        pod = unit // L.units_per_pod
        if L.rail_groups == 1:
            return pod
        return pod * L.rail_groups + rail

    def spine_plane(self, spine):
        """Core plane of each spine (its index in its group; per rail in rail-only)."""
        L = self.layout
        s = L.tiers[1].switches_per_group
        spine = np.asarray(spine)
        group, j = spine // s, spine % s
        if L.rail_groups == 1:
            return j
        return (group % L.rail_groups) * s + j

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
        if i < o["tier:0"]:
            k = i - o["nic"]
            return f"nic{k // self.layout.nics_per_server}.{k % self.layout.nics_per_server}"
        for t in reversed(self.layout.tiers):
            if i >= o[f"tier:{t.index}"]:
                return f"{t.name}{i - o[f'tier:{t.index}']}"
        raise IndexError(i)  # pragma: no cover

    def switch_node(self, tier: int, index):
        """Node id of switch ``index`` of scale-out tier ``tier``."""
        return self.node_offset[f"tier:{tier}"] + np.asarray(index)

    # --- networkx view -------------------------------------------------------------------------------------
    @property
    def graph(self):
        """The networkx graph (built on first use and kept)."""
        if "graph" not in self._cache:
            self._cache["graph"] = self.to_networkx()
        return self._cache["graph"]

    NODE_ATTRS = ("role", "tier", "rail", "server", "domain", "unit", "pod", "plane")
    EDGE_ATTRS = ("level", "num_links", "bandwidth_Bps", "link_bandwidth_Bps", "latency_s", "num_failed")

    def node_records(self):
        """``(name, attrs)`` for every node, attributes as in the module doc (the networkx and export view)."""
        nodes = self.nodes
        names = self.node_names()
        tier_label = {-1: "", -2: "nvlink", **{t.index: t.name for t in self.layout.tiers}}
        roles = nodes["role"].tolist()
        tiers = nodes["tier"].tolist()
        cols = [nodes[k].tolist() for k in self.NODE_ATTRS[2:]]
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

def make_fabric(spec: Spec, layout: ClosLayout) -> Fabric:
    """Lay out the node and link id blocks for ``layout``."""
    L = layout
    node_offset = {"gpu": 0, "nvswitch": L.num_gpus}
    node_offset["nic"] = node_offset["nvswitch"] + L.num_domains
    n = node_offset["nic"] + L.num_nics
    for t in L.tiers:
        node_offset[f"tier:{t.index}"] = n
        n += t.num_switches
    link_offset = {"nvlink": 0, "pcie": L.num_gpus}
    link_offset["nic"] = link_offset["pcie"] + L.num_servers * max(L.nics_per_server, L.gpus_per_server)
    m = link_offset["nic"] + L.num_nics
    for t in L.tiers[1:]:
        link_offset[f"up:{t.index - 1}"] = m
        m += L.tiers[t.index - 1].num_switches * L.tiers[t.index - 1].up_ports
    return Fabric(spec=spec, layout=L, node_offset=node_offset, link_offset=link_offset, num_nodes=n,
                  num_links=m)


def _node_latency(f: Fabric) -> np.ndarray:
    lat = np.zeros(f.num_nodes)
    o = f.node_offset
    lat[o["nvswitch"]:o["nic"]] = f.spec.scale_up.latency_s
    lat[o["nic"]:o["tier:0"]] = f.spec.server.nic_latency_s
    for t in f.layout.tiers:
        start = o[f"tier:{t.index}"]
        lat[start:start + t.num_switches] = t.latency_s
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
    sl = slice(o["nic"], o["tier:0"])
    role[sl] = 2
    index[sl] = nics
    cols["server"][sl] = nics // L.nics_per_server
    cols["rail"][sl] = nics % L.nics_per_server
    cols["domain"][sl] = (cols["server"][sl] * L.gpus_per_server) // L.gpus_per_domain
    cols["unit"][sl] = cols["server"][sl] // L.servers_per_unit
    cols["pod"][sl] = cols["unit"][sl] // L.units_per_pod

    for t in L.tiers:
        start = o[f"tier:{t.index}"]
        sl = slice(start, start + t.num_switches)
        ids = np.arange(t.num_switches)
        tier[sl] = t.index
        index[sl] = ids
        if t.index == 0:
            cols["unit"][sl] = ids // L.leaves_per_unit
            cols["pod"][sl] = cols["unit"][sl] // L.units_per_pod
            if L.leaves_per_unit > 1:
                cols["rail"][sl] = ids % L.leaves_per_unit
        elif t.index == 1:
            group = ids // t.switches_per_group
            cols["pod"][sl] = group // L.rail_groups
            cols["plane"][sl] = f.spine_plane(ids)
            if L.rail_groups > 1:
                cols["rail"][sl] = group % L.rail_groups
        else:
            plane = ids // t.switches_per_group
            cols["plane"][sl] = plane
            if L.rail_groups > 1:
                cols["rail"][sl] = plane // L.tiers[1].switches_per_group
    out = {"role": role, "tier": tier, "index": index, "latency_s": _node_latency(f)}
    out.update(cols)
    return out


def _build_links(f: Fabric) -> dict[str, np.ndarray]:
    L, no, lo = f.layout, f.node_offset, f.link_offset
    M = f.num_links
    src = np.empty(M, dtype=np.int32)
    dst = np.empty(M, dtype=np.int32)
    bw = np.empty(M)
    level = np.empty(M, dtype=np.int8)

    # NVLink: GPU -> its domain's NVSwitch
    gpus = np.arange(L.num_gpus)
    sl = slice(lo["nvlink"], lo["pcie"])
    src[sl], dst[sl] = gpus, no["nvswitch"] + gpus // L.gpus_per_domain
    bw[sl], level[sl] = f.spec.nvlink_Bps, LEVEL_NVLINK

    # PCIe: GPU -> NIC (one per NIC, or one per GPU when GPUs share a NIC). With k NICs per GPU, the k links
    # stand for the GPU's one x16 link, which they share: each gets at most 1/k of it (an H100's Gen5 x16, 64 GB/s,
    # cannot feed 4 x 400G NICs: nccl-tests issue #232 plateaus near 50 GB/s busbw with 1 H100 and 4 NICs)
    sl = slice(lo["pcie"], lo["nic"])
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
    bw[sl], level[sl] = pcie, LEVEL_PCIE

    # NIC -> leaf
    nics = np.arange(L.num_nics)
    end = lo.get("up:0", M)
    sl = slice(lo["nic"], end)
    src[sl], dst[sl] = no["nic"] + nics, no["tier:0"] + f.nic_leaf(nics)
    bw[sl], level[sl] = L.nic_rate_Bps, LEVEL_NIC

    # tier i -> tier i+1: lower switch x (switch of its group) x parallel cable
    for t in L.tiers[1:]:
        below = L.tiers[t.index - 1]
        start = lo[f"up:{below.index}"]
        n = below.num_switches * below.up_ports
        sl = slice(start, start + n)
        lower = np.repeat(np.arange(below.num_switches), below.up_ports)
        within = np.tile(np.arange(below.up_ports), below.num_switches)  # = j * m + cable
        j = within // t.links_from_below
        if t.index == 1:
            group = f.leaf_group(lower)
        else:
            group = f.spine_plane(lower)
        upper = group * t.switches_per_group + j
        src[sl] = no[f"tier:{below.index}"] + lower
        dst[sl] = no[f"tier:{t.index}"] + upper
        bw[sl], level[sl] = below.up_rate_Bps, LEVEL_NIC + t.index

    node_lat = _node_latency(f)
    return {"src": src, "dst": dst, "bandwidth_Bps": bw, "latency_s": 0.5 * (node_lat[src] + node_lat[dst]),
            "level": level}
