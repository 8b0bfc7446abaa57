"""Routing: flows between GPUs become the directed links they load, by index arithmetic on the fabric.

Paths are the shortest up/down paths of a folded Clos:

- inside an NVLink domain: GPU -> NVSwitch -> GPU;
- across domains: GPU -> [NVLink to the GPU beside the chosen NIC, if not itself] -> PCIe -> NIC -> leaf ->
  [spine -> [core -> spine] ->] leaf -> NIC -> PCIe -> GPU.

NIC choice ("rail" policy, NCCL's PXN): the receiver's NIC is the one beside the destination GPU; the sender uses
its server's NIC on the same rail, moving the data over NVLink first when that NIC is not its own. Traffic thus
stays on one rail wherever the fabric allows (and must, in a rail-only fabric). With ``pxn=False`` (and always in a
fat tree, where rails do not matter) each GPU uses its own NIC.

ECMP, where a leaf has several spines (and a spine several cores) to choose from:

- ``ideal``: every flow is split evenly over all equal-cost paths. Its load is then spread evenly over a leaf's
  (or a spine group's) uplinks, so those uplinks are represented by one *virtual resource* each with their summed
  capacity: exact for the fluid model, and O(flows) at any scale.
- ``hash``: each flow (or each of its ``subflows`` parts) is pinned to one path by a deterministic hash of its
  endpoints, which reproduces the collisions of real ECMP.

The result is a list of (resource, bytes, flow) entries; :mod:`topo.contention` turns it into times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopoError
from ..fabric.fabric import Fabric
from .schedule import AlgorithmUnavailable, AllPairs, InNetworkReduce, InSwitchReduce, Transfers

if TYPE_CHECKING:
    from .maxmin import FlowClasses

__all__ = ["Router", "Routed", "ECMP_MODES", "EXPLICIT_FLOWS", "MAX_ROUTED_PARTS"]

ECMP_MODES = ("ideal", "hash")
_MAX_HOPS = 12  # NVLink to the sending NIC's GPU (2), PCIe, NIC, up to 4 switch hops, NIC, PCIe, NVLink (2)
EXPLICIT_FLOWS = 1_000_000  # up to this many flows of one part are kept one by one (max-min sharing needs them)
MAX_ENUMERATED_FLOWS = 100_000_000  # an all-to-all enumerated pair by pair beyond this takes minutes
MAX_ROUTED_PARTS = 16_000_000  # flows x hashed sub-flows routed at once (about 1.3 GB of path table)
# a hashed all-to-all of more than EXPLICIT_FLOWS flows gets its loads from max-min classes (topo.alltoall_classes:
# the hash's own collisions, exactly) up to this many class paths (the 4,096-GPU one: 2.1 million, ~1.2 GB, ~5 s);
# beyond (or where classes do not apply: no PXN), flows routed in chunks up to MAX_HASHED_CHUNKED (~1.2 us each);
# beyond that, the expected loads over the hash, with a note
MAX_HASHED_CLASS_PATHS = 2_500_000
MAX_HASHED_CHUNKED = 4_000_000
# max-min of an all-to-all as classes: about 600 bytes per class path (5.6 million, the expert all-to-all of the
# 100k default with 1,792 communicators of 56: 3.3 GB, 37 s); beyond this, an error instead of exhausting memory
MAX_MAXMIN_CLASS_PATHS = 6_000_000


@dataclass
class Routed:
    """Flows routed onto resources: entry ``i`` puts ``weight[i]`` bytes of flow ``flow[i]`` on ``res[i]``."""

    res: np.ndarray
    weight: np.ndarray
    flow: np.ndarray
    num_flows: int
    flow_bytes: np.ndarray  # bytes of each flow
    latency_s: np.ndarray  # routed latency of each flow (sum of its links' latencies)
    network: np.ndarray  # True where the flow leaves its NVLink domain
    aggregated: bool = False  # True: only the summed load per resource is kept (res, weight); no per-flow data
    classes: "FlowClasses | None" = None  # the flows merged into max-min classes (topo.maxmin), when kept so

    @staticmethod
    def concat(parts: list["Routed"]) -> "Routed":
        parts = [p for p in parts if p.num_flows]
        if not parts:
            return Routed.empty()
        if any(p.classes is not None for p in parts) and all(p.classes is not None or not p.aggregated
                                                                for p in parts):
            from .maxmin import FlowClasses

            out = Routed.summed(np.concatenate([p.res for p in parts]), np.concatenate([p.weight for p in parts]),
                                sum(p.num_flows for p in parts), max(float(p.latency_s.max()) for p in parts),
                                any(bool(p.network.any()) for p in parts))
            out.classes = FlowClasses.concat([p.classes if p.classes is not None else
                                              FlowClasses.single(p.res, p.flow, p.weight, p.flow_bytes)
                                              for p in parts])
            return out
        if any(p.aggregated for p in parts):
            return Routed.summed(np.concatenate([p.res for p in parts]), np.concatenate([p.weight for p in parts]),
                                 sum(p.num_flows for p in parts), max(float(p.latency_s.max()) for p in parts),
                                 any(bool(p.network.any()) for p in parts))
        offs = np.cumsum([0] + [p.num_flows for p in parts[:-1]])
        return Routed(
            res=np.concatenate([p.res for p in parts]),
            weight=np.concatenate([p.weight for p in parts]),
            flow=np.concatenate([p.flow + o for p, o in zip(parts, offs)]),
            num_flows=int(sum(p.num_flows for p in parts)),
            flow_bytes=np.concatenate([p.flow_bytes for p in parts]),
            latency_s=np.concatenate([p.latency_s for p in parts]),
            network=np.concatenate([p.network for p in parts]),
        )

    @staticmethod
    def summed(res: np.ndarray, weight: np.ndarray, num_flows: int, max_latency_s: float, network: bool) -> "Routed":
        """Flows kept only as their summed load per resource (too many to keep one by one)."""
        res = np.asarray(res, dtype=np.int64)
        if res.size:
            loads = np.bincount(res, weights=weight)
            res = np.flatnonzero(loads)
            weight = loads[res]
        return Routed(res=res, weight=np.asarray(weight, dtype=float), flow=np.zeros(res.size, dtype=np.int64),
                      num_flows=int(num_flows), flow_bytes=np.zeros(0), latency_s=np.array([max_latency_s]),
                      network=np.array([network]), aggregated=True)

    @staticmethod
    def empty() -> "Routed":
        z = np.zeros(0, dtype=np.int64)
        return Routed(z, np.zeros(0), z, 0, np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))

    def scaled(self, factor: float) -> "Routed":
        return Routed(self.res, self.weight * factor, self.flow, self.num_flows, self.flow_bytes * factor,
                      self.latency_s, self.network)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fast, well-spread deterministic hash of uint64 keys."""
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class Router:
    """Routes flows on one fabric. Also defines the resource space (directed links plus ECMP aggregates).

    Resource ids: ``2*link`` (up) and ``2*link + 1`` (down) for every link, then, when ``ecmp="ideal"``, one
    resource per leaf for its uplinks going up and one going down, and one per spine group (pod) for its spines'
    uplinks going up and down.
    """

    def __init__(self, fabric: Fabric, ecmp: str = "ideal", subflows: int = 1, pxn: bool | None = None,
                 salt: int = 0):
        if ecmp not in ECMP_MODES:
            raise TopoError(f"unknown ECMP mode {ecmp!r}; allowed: {', '.join(ECMP_MODES)}", key="ecmp")
        if not isinstance(subflows, (int, np.integer)) or subflows < 1:
            raise TopoError(f"subflows must be a whole number >= 1, got {subflows!r}", key="subflows")
        self.fabric = fabric
        self.ecmp = ecmp
        self.subflows = int(subflows) if ecmp == "hash" else 1
        L = fabric.layout
        self.pxn = (L.leaves_per_unit > 1) if pxn is None else bool(pxn)
        self.salt = int(salt)
        self.merge_classes = True  # max-min: an all-to-all may merge flows that share their path (alltoall_classes)
        self.notes: list[str] = []  # what routing approximated (topo.loads hands them to the schedule)
        links = fabric.links
        M = fabric.num_links
        self.num_real = 2 * M
        tiers = L.tiers
        self.n_leaves = tiers[0].num_switches
        self.n_groups = tiers[1].num_groups if len(tiers) > 1 else 0
        virt = ecmp == "ideal" and len(tiers) > 1
        self.v_leaf_up = self.num_real
        self.v_leaf_down = self.v_leaf_up + (self.n_leaves if virt else 0)
        self.v_grp_up = self.v_leaf_down + (self.n_leaves if virt else 0)
        self.v_grp_down = self.v_grp_up + (self.n_groups if virt and len(tiers) > 2 else 0)
        self.num_res = self.v_grp_down + (self.n_groups if virt and len(tiers) > 2 else 0)

        cap = np.empty(self.num_res)
        cap[0:self.num_real:2] = links["bandwidth_Bps"]
        cap[1:self.num_real:2] = links["bandwidth_Bps"]
        level = np.empty(self.num_res, dtype=np.int8)
        level[0:self.num_real:2] = links["level"]
        level[1:self.num_real:2] = links["level"]
        lat = np.empty(self.num_res)
        lat[0:self.num_real:2] = links["latency_s"]
        lat[1:self.num_real:2] = links["latency_s"]
        if virt:
            t0 = tiers[0]
            sl = slice(self.v_leaf_up, self.v_grp_up)
            cap[sl] = t0.up_ports * t0.up_rate_Bps
            level[sl] = 3
            lat[sl] = self._level_latency(3)
            if len(tiers) > 2:
                t1 = tiers[1]
                sl = slice(self.v_grp_up, self.num_res)
                cap[sl] = t1.switches_per_group * t1.up_ports * t1.up_rate_Bps
                level[sl] = 4
                lat[sl] = self._level_latency(4)
        self.alive = fabric.link_alive
        if fabric.failed is not None:
            self._fail(cap, virt)
        self.capacity_Bps = cap
        self.level = level
        self.res_latency_s = lat

    def _fail(self, cap: np.ndarray, virt: bool) -> None:
        """Failed links carry nothing; ECMP aggregates keep the capacity of their surviving links."""
        dead = np.flatnonzero(self.fabric.failed)
        cap[2 * dead] = 0.0
        cap[2 * dead + 1] = 0.0
        if not virt:
            return
        L = self.fabric.layout
        lo = self.fabric.link_offset
        t0 = L.tiers[0]
        alive0 = self.alive[lo["up:0"]:lo["up:0"] + self.n_leaves * t0.up_ports].reshape(self.n_leaves, t0.up_ports)
        per_leaf = alive0.sum(axis=1) * t0.up_rate_Bps
        cap[self.v_leaf_up:self.v_leaf_down] = per_leaf
        cap[self.v_leaf_down:self.v_grp_up] = per_leaf
        if len(L.tiers) > 2:
            t1 = L.tiers[1]
            alive1 = self.alive[lo["up:1"]:lo["up:1"] + t1.num_switches * t1.up_ports]
            per_group = alive1.reshape(t1.num_groups, -1).sum(axis=1) * t1.up_rate_Bps
            cap[self.v_grp_up:self.v_grp_down] = per_group
            cap[self.v_grp_down:self.num_res] = per_group

    def _alive_nics(self, nic: np.ndarray, gpu: np.ndarray) -> np.ndarray:
        """Each NIC, or the next working NIC of its server when its PCIe or leaf link failed."""
        f = self.fabric
        L = f.layout
        lo = f.link_offset
        N = L.nics_per_server
        pcie = lo["pcie"] + (nic if f.pcie_per_nic else f.nic_gpu(nic))
        ok = self.alive[lo["nic"] + nic] & self.alive[pcie]
        if ok.all():
            return nic
        bad = np.flatnonzero(~ok)
        server, rail = nic[bad] // N, nic[bad] % N
        cand = server[:, None] * N + (rail[:, None] + np.arange(1, N)[None, :]) % N
        cp = lo["pcie"] + (cand if f.pcie_per_nic else f.nic_gpu(cand))
        good = self.alive[lo["nic"] + cand] & self.alive[cp]
        if not good.any(axis=1).all():
            k = int(np.flatnonzero(~good.any(axis=1))[0])
            raise TopoError(f"GPU {int(gpu[bad[k]])} is cut off: every NIC of server {int(server[k])} failed "
                            f"(failures: {', '.join(f.failures)})", key="fail")
        out = nic.copy()
        out[bad] = cand[np.arange(bad.size), np.argmax(good, axis=1)]
        return out

    def _common_rail(self, nic_s, nic_d, src, dst):
        """Rail-only with failed NICs: no spine joins two rails, so a flow whose sending stand-in NIC left the
        receiving NIC's rail moves, at both ends, to the first rail (from the receiving NIC's) that works at both
        servers (NVLink carries the data to and from those NICs' GPUs)."""
        f = self.fabric
        N = f.layout.nics_per_server
        off = np.flatnonzero(nic_s % N != nic_d % N)
        if off.size == 0:
            return nic_s, nic_d
        rails = (nic_d[off, None] % N + np.arange(N)[None, :]) % N
        cs = (nic_s[off] // N)[:, None] * N + rails
        cd = (nic_d[off] // N)[:, None] * N + rails
        good = self._nic_ok(cs) & self._nic_ok(cd)
        if not good.any(axis=1).all():
            k = int(np.flatnonzero(~good.any(axis=1))[0])
            raise TopoError(f"GPU {int(src[off[k]])} cannot reach GPU {int(dst[off[k]])} in a rail-only fabric: no "
                            f"rail has a working NIC at both servers (failures: {', '.join(f.failures)})", key="fail")
        pick = np.argmax(good, axis=1)
        nic_s, nic_d = nic_s.copy(), nic_d.copy()
        nic_s[off] = cs[np.arange(off.size), pick]
        nic_d[off] = cd[np.arange(off.size), pick]
        return nic_s, nic_d

    def _nic_ok(self, nic: np.ndarray) -> np.ndarray:
        """Whether each NIC works: its link to the leaf and its host link."""
        f = self.fabric
        lo = f.link_offset
        pcie = lo["pcie"] + (nic if f.pcie_per_nic else f.nic_gpu(nic))
        return self.alive[lo["nic"] + nic] & self.alive[pcie]

    def _level_latency(self, level: int) -> float:
        links = self.fabric.links
        sel = np.flatnonzero(links["level"] == level)
        return float(links["latency_s"][sel[0]]) if sel.size else 0.0

    # --- routing --------------------------------------------------------------------------------------------
    def route(self, src, dst, nbytes, choice=None) -> Routed:
        """Route flows ``src[i] -> dst[i]`` (GPU ids) of ``nbytes[i]`` bytes.

        ``choice`` picks among a GPU's NICs when it has several (e.g. the channel index); default 0.
        """
        f = self.fabric
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        F = src.size
        nbytes = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), (F,)).copy()
        choice = np.zeros(F, dtype=np.int64) if choice is None else np.broadcast_to(
            np.asarray(choice, dtype=np.int64), (F,)).copy()
        if F == 0:
            return Routed.empty()
        if F * self.subflows > MAX_ROUTED_PARTS:
            raise TopoError(f"{F:,} flows x {self.subflows:,} sub-flows is {F * self.subflows:,} hashed paths, more "
                            f"than the {MAX_ROUTED_PARTS:,} routed at once; use fewer sub-flows (as the number grows, "
                            "hashed ECMP approaches ecmp=ideal, which is exact for that limit)", key="subflows")
        if self.subflows > 1:
            K = self.subflows
            src, dst, choice = np.repeat(src, K), np.repeat(dst, K), np.repeat(choice, K)
            flow_id = np.repeat(np.arange(F), K)
            sub = np.tile(np.arange(K), F)
            part_bytes = np.repeat(nbytes / K, K)
        else:
            flow_id = np.arange(F)
            sub = np.zeros(F, dtype=np.int64)
            part_bytes = nbytes
        cols, inter = self._columns(src, dst, choice, sub)
        mask = cols >= 0
        rows, _ = np.nonzero(mask)
        res = cols[mask]
        if f.failed is not None:
            broken = self.capacity_Bps[res] <= 0
            if broken.any():
                k = int(np.flatnonzero(broken)[0])
                r, fl = int(res[k]), int(rows[k])
                d = self.describe_resource(r)
                raise TopoError(f"GPU {int(src[fl])} cannot reach GPU {int(dst[fl])}: every path crosses failed "
                                f"parts ({d['src']} -> {d['dst']}, {d['level']}; failures: {', '.join(f.failures)})",
                                key="fail")
        lat_parts = np.bincount(rows, weights=self.res_latency_s[res], minlength=src.size)
        # per original flow: the latency of its (first) part; bytes summed
        latency = np.zeros(F)
        latency[flow_id] = lat_parts
        return Routed(res=res, weight=part_bytes[rows], flow=flow_id[rows].astype(np.int32), num_flows=F,
                      flow_bytes=nbytes,
                      latency_s=latency, network=(inter.reshape(-1)[::self.subflows] if self.subflows > 1
                                                  else inter))

    def _columns(self, src, dst, choice, sub):
        """The path of every flow part ``src[i] -> dst[i]`` as a table of resource ids (-1: no hop there).
        Columns: 0-1 NVLink to the sending NIC's GPU (PXN), 2 its host link, 3 the NIC, 4-7 switch hops, 8 the
        receiving NIC, 9 its host link, 10-11 NVLink from a stand-in NIC's GPU."""
        P = src.size
        f = self.fabric
        L = f.layout
        cols = np.full((P, _MAX_HOPS), -1, dtype=np.int32)  # resource ids < 2^31 (a fabric of ~10^9 links)
        lo = f.link_offset
        dom_s, dom_d = src // L.gpus_per_domain, dst // L.gpus_per_domain
        self_flow = src == dst
        intra = (dom_s == dom_d) & ~self_flow
        inter = dom_s != dom_d

        # inside the NVLink domain
        i = np.flatnonzero(intra)
        cols[i, 0] = 2 * (lo["nvlink"] + src[i])
        cols[i, 1] = 2 * (lo["nvlink"] + dst[i]) + 1

        i = np.flatnonzero(inter)
        if i.size:
            s, d = src[i], dst[i]
            nic_d = f.gpu_nic(d, choice[i])
            failed = f.failed is not None
            if failed:  # a failed NIC's traffic goes through the next working NIC of its server, over NVLink
                nic_d = self._alive_nics(nic_d, d)
            N = L.nics_per_server
            if self.pxn:
                nic_s = f.gpu_server(s) * N + nic_d % N
            else:
                nic_s = f.gpu_nic(s, choice[i])
            if failed:
                nic_s = self._alive_nics(nic_s, s)
                if self.pxn and L.rail_groups > 1:
                    nic_s, nic_d = self._common_rail(nic_s, nic_d, s, d)
            recv = f.nic_gpu(nic_d) if f.pcie_per_nic else np.where(f.gpu_nic(d) == nic_d, d, f.nic_gpu(nic_d))
            if f.pcie_per_nic:
                proxy = f.nic_gpu(nic_s)
                pcie_s, pcie_d = nic_s, nic_d
            else:
                own = f.gpu_nic(s) == nic_s
                proxy = np.where(own, s, f.nic_gpu(nic_s))
                pcie_s, pcie_d = proxy, recv
            hop = proxy != s
            cols[i[hop], 0] = 2 * (lo["nvlink"] + s[hop])
            cols[i[hop], 1] = 2 * (lo["nvlink"] + proxy[hop]) + 1
            back = recv != d  # the receiving NIC is not beside the destination (a failed NIC's stand-in)
            if back.any():
                cols[i[back], 10] = 2 * (lo["nvlink"] + recv[back])
                cols[i[back], 11] = 2 * (lo["nvlink"] + d[back]) + 1
            cols[i, 2] = 2 * (lo["pcie"] + pcie_s)
            cols[i, 3] = 2 * (lo["nic"] + nic_s)
            cols[i, 8] = 2 * (lo["nic"] + nic_d) + 1
            cols[i, 9] = 2 * (lo["pcie"] + pcie_d) + 1
            self._middle(cols, i, nic_s, nic_d, src[i], dst[i], sub[i])

        return cols, inter

    def _middle(self, cols, i, nic_s, nic_d, src, dst, sub) -> None:
        """Leaf and above, for the inter-domain flows ``i``."""
        f = self.fabric
        L = f.layout
        tiers = L.tiers
        ls, ld = f.nic_leaf(nic_s), f.nic_leaf(nic_d)
        up = ls != ld
        if not np.any(up):
            return
        if len(tiers) == 1:
            k = np.flatnonzero(up)[0]
            raise TopoError(f"GPU {int(src[k])} cannot reach GPU {int(dst[k])}: their NICs sit on different "
                            "leaves and the fabric has no spine" + ("; turn PXN on" if not self.pxn else ""),
                            key="fabric.tiers")
        gs, gd = f.leaf_group(ls), f.leaf_group(ld)
        cross = up & (gs != gd)
        if L.rail_groups > 1:
            bad = up & (f.nic_rail(nic_s) != f.nic_rail(nic_d))
            if np.any(bad):
                k = np.flatnonzero(bad)[0]
                raise TopoError(f"GPU {int(src[k])} cannot reach GPU {int(dst[k])} in a rail-only fabric: their "
                                "NICs are on different rails; route through NVLink (pxn=True)", key="pxn")
        if len(tiers) < 3 and np.any(cross):
            raise TopoError("flows cross spine groups but the fabric has no core tier", key="fabric.tiers")
        iu, ic = i[up], i[cross]
        lo = f.link_offset
        t0 = tiers[0]
        t1 = tiers[1]
        S2, m1, u0 = t1.switches_per_group, t1.links_from_below, t0.up_ports
        if self.ecmp == "ideal":
            cols[iu, 4] = self.v_leaf_up + ls[up]
            cols[iu, 7] = self.v_leaf_down + ld[up]
            if ic.size:
                cols[ic, 5] = self.v_grp_up + gs[cross]
                cols[ic, 6] = self.v_grp_down + gd[cross]
            return
        key = (nic_s.astype(np.uint64) * np.uint64(0x100000001B3) ^ nic_d.astype(np.uint64)) \
            + sub.astype(np.uint64) * np.uint64(0x9E3779B1)
        if self.salt:  # a salt mixed in whole: neighbouring salts give unrelated hashes
            key = key ^ _mix64(np.array([self.salt], dtype=np.uint64))[0]
        h1 = _mix64(key)
        h2 = _mix64(h1)
        if f.failed is not None:
            self._hash_survivors(cols, iu, ic, up, cross, ls, ld, gs, gd, h1, h2, src, dst)
            return
        j = (h1 % np.uint64(S2)).astype(np.int64)
        k1 = ((h1 >> np.uint64(32)) % np.uint64(m1)).astype(np.int64)
        k2 = ((h2 >> np.uint64(32)) % np.uint64(m1)).astype(np.int64)
        cols[iu, 4] = 2 * (lo["up:0"] + ls[up] * u0 + j[up] * m1 + k1[up])
        cols[iu, 7] = 2 * (lo["up:0"] + ld[up] * u0 + j[up] * m1 + k2[up]) + 1
        if ic.size:
            t2 = tiers[2]
            C3, m2, u1 = t2.switches_per_group, t2.links_from_below, t1.up_ports
            h3 = _mix64(h2)
            c = (h2 % np.uint64(C3)).astype(np.int64)
            k3 = (h3 % np.uint64(m2)).astype(np.int64)
            k4 = ((h3 >> np.uint64(32)) % np.uint64(m2)).astype(np.int64)
            sig_s = gs * S2 + j
            sig_d = gd * S2 + j
            cols[ic, 5] = 2 * (lo["up:1"] + sig_s[cross] * u1 + c[cross] * m2 + k3[cross])
            cols[ic, 6] = 2 * (lo["up:1"] + sig_d[cross] * u1 + c[cross] * m2 + k4[cross]) + 1

    # --- router services: the parts of a schedule that are not plain transfers ------------------------------
    def route_part(self, part, keep_flows: bool = False) -> Routed:
        """Route one part of a schedule phase (see :mod:`topo.schedule`)."""
        if isinstance(part, Transfers):
            return self.route_transfers(part)
        if isinstance(part, AllPairs):
            return self.route_all_pairs(part, keep_flows)
        if isinstance(part, InSwitchReduce):
            return self.in_switch_reduce(part.gpus, part.per_msg_byte)
        if isinstance(part, InNetworkReduce):
            return self.in_network_reduce(part.gpus, part.communicator, part.per_msg_byte)
        raise TypeError(f"cannot route {type(part).__name__}")  # pragma: no cover

    def route_transfers(self, t: Transfers) -> Routed:
        """Transfers, each spread over the destination GPU's NICs when ``t.split_nics``."""
        k = self.fabric.layout.nics_per_server // self.fabric.layout.gpus_per_server
        if not t.split_nics or k <= 1:
            return self.route(t.src, t.dst, t.per_msg_byte, t.choice)
        nbytes = np.asarray(t.per_msg_byte, dtype=float) / k
        return Routed.concat([self.route(t.src, t.dst, nbytes, choice=c) for c in range(k)])

    def route_all_pairs(self, a: AllPairs, keep_flows: bool = False) -> Routed:
        """A uniform all-to-all. Its loads come from the fabric's structure (:func:`topo.alltoall.
        uniform_alltoall_loads`: exact for ideal ECMP) unless every flow must be kept (max-min sharing), or parts
        have failed (then every pair is routed, in chunks). With hashed ECMP the hash's own collisions are kept:
        every flow routed (up to ``EXPLICIT_FLOWS``), else max-min classes with PXN (up to
        ``MAX_HASHED_CLASS_PATHS`` paths), else every flow in chunks (up to ``MAX_HASHED_CHUNKED``); beyond, the
        expected loads over the hash, with a note in ``self.notes``."""
        n = a.num_flows
        p = a.groups.shape[1]
        structural = not keep_flows and self.fabric.failed is None and (self.ecmp == "ideal" or n > EXPLICIT_FLOWS)
        if structural and self.ecmp == "hash":
            from .alltoall_classes import alltoall_classes, class_paths, classes_apply

            if classes_apply(self) and class_paths(self, a) <= MAX_HASHED_CLASS_PATHS:
                out = alltoall_classes(self, a)  # the hash's collisions, as routing every flow would give them
                out.classes = None
                return out
            structural = n * self.subflows > MAX_HASHED_CHUNKED  # else every flow hashed, in chunks (below)
        if structural and self.ecmp == "hash":
            note = (f"ecmp=hash: the all-to-all's {n:,} flows are too many to hash one by one; its loads are the "
                    "expected loads over the hash (as ideal ECMP gives them), without the hash's collisions")
            self.notes.append(note)
        if structural:
            from .alltoall import uniform_alltoall_loads

            loads = uniform_alltoall_loads(self, a.groups, a.per_msg_byte)
            # the longest path: rank 0 of the first communicator to every other rank of it
            probe = self.route_transfers(Transfers(np.repeat(a.groups[0, :1], p - 1), a.groups[0, 1:], a.per_msg_byte,
                                                   split_nics=True))
            res = np.flatnonzero(loads)
            return Routed.summed(res, loads[res], n, float(probe.latency_s.max()), bool(probe.network.any()))
        if keep_flows:
            from .alltoall_classes import alltoall_classes, class_paths, classes_apply

            if classes_apply(self):  # max-min on classes of flows that share their network path (exact)
                paths = class_paths(self, a)
                if paths > MAX_MAXMIN_CLASS_PATHS:
                    raise TopoError(f"max-min sharing of this all-to-all ({n:,} flows) needs {paths:,} flow classes, "
                                    f"more than the {MAX_MAXMIN_CLASS_PATHS:,} topo keeps (about 600 bytes each); "
                                    "use sharing=equal", key="sharing")
                return alltoall_classes(self, a)
        if n <= EXPLICIT_FLOWS:
            i, j = np.nonzero(~np.eye(p, dtype=bool))
            return self.route_transfers(Transfers(a.groups[:, i].ravel(), a.groups[:, j].ravel(), a.per_msg_byte,
                                                  split_nics=True))
        if keep_flows:
            raise TopoError(f"max-min sharing needs every flow, and this all-to-all has {n:,}, more than the "
                            f"{EXPLICIT_FLOWS:,} kept one by one (flows are merged into classes only with PXN and "
                            "nothing failed); use sharing=equal", key="sharing")
        if n > MAX_ENUMERATED_FLOWS:
            raise AlgorithmUnavailable(f"an all-to-all of {n:,} flows with failed parts; topo routes up to "
                                       f"{MAX_ENUMERATED_FLOWS:,} pair by pair")
        k = max(1, self.fabric.layout.nics_per_server // self.fabric.layout.gpus_per_server)
        chunks = ((t.src, t.dst, t.per_msg_byte / k, c) for t in a.transfers(EXPLICIT_FLOWS // k) for c in range(k))
        return self.route_summed(chunks)

    def in_switch_reduce(self, gpus: np.ndarray, nbytes: float) -> Routed:
        """NVLS: every GPU moves ``nbytes`` each way over its NVLink to its switch (reduce, then multicast)."""
        lo = self.fabric.link_offset["nvlink"]
        link = lo + np.asarray(gpus)
        n = link.size
        return Routed(res=np.r_[2 * link, 2 * link + 1], weight=np.full(2 * n, float(nbytes)),
                      flow=np.r_[np.arange(n), np.arange(n)], num_flows=n, flow_bytes=np.full(n, 2.0 * nbytes),
                      latency_s=self.res_latency_s[2 * link] * 2, network=np.zeros(n, dtype=bool))

    def in_network_reduce(self, gpus: np.ndarray, communicator: np.ndarray, nbytes: float) -> Routed:
        """SHARP: each GPU sends ``nbytes`` up through its NIC into its rail's reduction tree (one per
        communicator) and receives the result back; above the leaf each (communicator, leaf, rail) sends one
        reduced stream up to the tree's spine, spines of different pods to one core."""
        f = self.fabric
        L = f.layout
        gpus = np.asarray(gpus)
        nics = f.gpu_nic(gpus)
        leaves = f.nic_leaf(nics)
        groups = f.leaf_group(leaves)
        tiers_used = 1 + (np.unique(leaves).size > 1) + (np.unique(groups).size > 1)
        if tiers_used > len(L.tiers):
            raise AlgorithmUnavailable(f"the GPUs sit under {np.unique(leaves).size} {L.tiers[0].name} switches "
                                       "and no tier above joins them, so no switch can reduce all of them")
        lacking = [t.name for t in L.tiers[:tiers_used] if not t.sharp]
        if lacking:
            raise AlgorithmUnavailable(f"the {', '.join(lacking)} switches cannot reduce in the network "
                                       "(set sharp = true on their tier)")
        lo = f.link_offset
        lat = self.res_latency_s
        parts = []
        pcie = lo["pcie"] + (nics if f.pcie_per_nic else gpus)
        nic = lo["nic"] + nics
        path_s = lat[2 * nic] + lat[2 * pcie]  # per GPU: its way up to the leaf
        for ids in (pcie, nic):
            parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], nbytes, np.r_[lat[2 * ids], lat[2 * ids + 1]]))
        rails = f.nic_rail(nics)
        if tiers_used >= 2:
            t0, t1 = L.tiers[0], L.tiers[1]
            S2, m1, u0 = t1.switches_per_group, t1.links_from_below, t0.up_ports
            leaf_rail = np.unique(np.c_[leaves, rails, communicator], axis=0)
            j = leaf_rail[:, 1] % S2
            ids = lo["up:0"] + leaf_rail[:, 0] * u0 + j * m1
            parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], nbytes, np.r_[lat[2 * ids], lat[2 * ids]]))
            path_s = path_s + float(lat[2 * ids].max())
            if tiers_used >= 3:
                u1 = t1.up_ports
                grp_rail = np.unique(np.c_[f.leaf_group(leaf_rail[:, 0]), leaf_rail[:, 1], leaf_rail[:, 2]], axis=0)
                spine = grp_rail[:, 0] * S2 + grp_rail[:, 1] % S2
                ids = lo["up:1"] + spine * u1
                parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], nbytes, np.r_[lat[2 * ids], lat[2 * ids]]))
                path_s = path_s + float(lat[2 * ids].max())
        r = Routed.concat(parts)
        # one entry per GPU for the latency of its way up the tree
        return Routed(r.res, r.weight, r.flow, r.num_flows, r.flow_bytes, np.resize(path_s, r.num_flows),
                      np.ones(r.num_flows, dtype=bool))

    def _hash_survivors(self, cols, iu, ic, up, cross, ls, ld, gs, gd, h1, h2, src, dst) -> None:
        """Hashed ECMP over the paths that survive: a spine with a working cable from both leaves (and, across
        pods, a working core link from both spines), then a working cable of each hop, each picked by hash."""
        f = self.fabric
        L = f.layout
        lo = f.link_offset
        t0, t1 = L.tiers[0], L.tiers[1]
        S2, m1, u0 = t1.switches_per_group, t1.links_from_below, t0.up_ports
        cab0 = self.alive[lo["up:0"]:lo["up:0"] + self.n_leaves * u0].reshape(self.n_leaves, S2, m1)
        via = cab0.any(axis=2)  # [leaf, spine of its group]: some cable works
        ls, ld, gs, gd = ls[up], ld[up], gs[up], gd[up]
        cr = cross[up]
        h1, h2 = h1[up], h2[up]
        valid = via[ls] & via[ld]
        if len(L.tiers) > 2:
            t2 = L.tiers[2]
            C3, m2, u1 = t2.switches_per_group, t2.links_from_below, t1.up_ports
            cab1 = self.alive[lo["up:1"]:lo["up:1"] + t1.num_switches * u1].reshape(t1.num_switches, C3, m2)
            core_ok = cab1.any(axis=2)  # [spine, core of its plane]
            if cr.any():
                js = np.arange(S2)
                both = (core_ok[gs[cr, None] * S2 + js] & core_ok[gd[cr, None] * S2 + js]).any(axis=2)
                valid[cr] &= both
        j = _pick(h1, valid, "spine", src[up], dst[up], f)
        k1 = _pick(h1 >> np.uint64(32), cab0[ls, j], "cable", src[up], dst[up], f)
        k2 = _pick(h2 >> np.uint64(32), cab0[ld, j], "cable", src[up], dst[up], f)
        cols[iu, 4] = 2 * (lo["up:0"] + ls * u0 + j * m1 + k1)
        cols[iu, 7] = 2 * (lo["up:0"] + ld * u0 + j * m1 + k2) + 1
        if ic.size:
            h3 = _mix64(h2[cr])
            ss, sd = gs[cr] * S2 + j[cr], gd[cr] * S2 + j[cr]
            c = _pick(h2[cr], core_ok[ss] & core_ok[sd], "core", src[up][cr], dst[up][cr], f)
            k3 = _pick(h3, cab1[ss, c], "cable", src[up][cr], dst[up][cr], f)
            k4 = _pick(h3 >> np.uint64(32), cab1[sd, c], "cable", src[up][cr], dst[up][cr], f)
            cols[ic, 5] = 2 * (lo["up:1"] + ss * u1 + c * m2 + k3)
            cols[ic, 6] = 2 * (lo["up:1"] + sd * u1 + c * m2 + k4) + 1

    def route_summed(self, chunks) -> Routed:
        """Route flows given in chunks ``(src, dst, nbytes, choice)`` and keep only their summed loads: memory
        stays bounded by the chunk size however many flows there are (for equal-share contention)."""
        loads = np.zeros(self.num_res)
        n, lat, net = 0, 0.0, False
        for src, dst, nbytes, choice in chunks:
            r = self.route(src, dst, nbytes, choice)
            if r.num_flows:
                loads += np.bincount(r.res, weights=r.weight, minlength=self.num_res)
                n += r.num_flows
                lat = max(lat, float(r.latency_s.max()))
                net = net or bool(r.network.any())
        res = np.flatnonzero(loads)
        return Routed.summed(res, loads[res], n, lat, net)

    # --- loads ----------------------------------------------------------------------------------------------
    def loads(self, routed: Routed) -> np.ndarray:
        """Bytes on every resource."""
        return np.bincount(routed.res, weights=routed.weight, minlength=self.num_res)

    def real_link_loads(self, res_loads: np.ndarray) -> np.ndarray:
        """Bytes on every directed link (``2*link`` up, ``2*link+1`` down), spreading ECMP aggregates evenly."""
        out = res_loads[: self.num_real].copy()
        if self.num_res == self.num_real:
            return out
        L = self.fabric.layout
        lo = self.fabric.link_offset
        t0 = L.tiers[0]
        u0 = t0.up_ports
        base = lo["up:0"]
        ids = base + np.arange(self.n_leaves * u0)
        leaf = np.repeat(np.arange(self.n_leaves), u0)
        share = self._shares(ids, leaf, self.n_leaves)
        out[2 * ids] += res_loads[self.v_leaf_up + leaf] * share
        out[2 * ids + 1] += res_loads[self.v_leaf_down + leaf] * share
        if len(L.tiers) > 2:
            t1 = L.tiers[1]
            per_group = t1.switches_per_group * t1.up_ports
            ids = lo["up:1"] + np.arange(t1.num_switches * t1.up_ports)
            grp = np.repeat(np.arange(t1.num_groups), per_group)
            share = self._shares(ids, grp, t1.num_groups)
            out[2 * ids] += res_loads[self.v_grp_up + grp] * share
            out[2 * ids + 1] += res_loads[self.v_grp_down + grp] * share
        return out

    def _shares(self, ids: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
        """Each link's share of its aggregate's load: equal over the aggregate's working links."""
        alive = self.alive[ids].astype(float)
        count = np.bincount(owner, weights=alive, minlength=n)
        return alive / np.maximum(count[owner], 1.0)

    def describe_resource(self, r: int) -> dict:
        """Endpoints, level and direction of a resource (a directed link or an ECMP aggregate)."""
        f = self.fabric
        names = f.level_names
        if r < self.num_real:
            link, down = divmod(int(r), 2)
            a, b = int(f.links["src"][link]), int(f.links["dst"][link])
            if down:
                a, b = b, a
            return {"link": link, "src": f._name(a), "dst": f._name(b), "level": names[int(self.level[r])],
                    "direction": "down" if down else "up", "num_links": 1}
        L = f.layout
        if r < self.v_grp_up:
            down = r >= self.v_leaf_down
            leaf = int(r - (self.v_leaf_down if down else self.v_leaf_up))
            leaf_name = f._name(int(f.switch_node(0, leaf)))
            spines = f"{L.tiers[1].name}s of its group"
            src, dst = (spines, leaf_name) if down else (leaf_name, spines)
            return {"link": None, "src": src, "dst": dst, "level": names[3], "direction": "down" if down else "up",
                    "num_links": L.tiers[0].up_ports}
        down = r >= self.v_grp_down
        g = int(r - (self.v_grp_down if down else self.v_grp_up))
        who = f"{L.tiers[1].name}s of group {g}"
        cores = f"{L.tiers[2].name}s"
        src, dst = (cores, who) if down else (who, cores)
        t1 = L.tiers[1]
        return {"link": None, "src": src, "dst": dst, "level": names[4], "direction": "down" if down else "up",
                "num_links": t1.switches_per_group * t1.up_ports}


def _direct(res: np.ndarray, weight: float, latency: np.ndarray) -> Routed:
    """Loads put straight on directed links ``res`` (one flow each)."""
    n = res.size
    return Routed(res=res, weight=np.full(n, float(weight)), flow=np.arange(n), num_flows=n,
                  flow_bytes=np.full(n, float(weight)), latency_s=latency, network=np.ones(n, dtype=bool))


def _pick(h: np.ndarray, valid: np.ndarray, what: str, src, dst, fabric) -> np.ndarray:
    """For each row, the ``h mod (number of True)``-th True column of ``valid`` (hashed choice among survivors)."""
    cnt = valid.sum(axis=1)
    if (cnt == 0).any():
        k = int(np.flatnonzero(cnt == 0)[0])
        raise TopoError(f"GPU {int(src[k])} cannot reach GPU {int(dst[k])}: no working {what} joins their paths "
                        f"(failures: {', '.join(fabric.failures)})", key="fail")
    idx = (h % cnt.astype(np.uint64)).astype(np.int64)
    out = np.empty(valid.shape[0], dtype=np.int64)
    step = 1 << 18
    for a in range(0, valid.shape[0], step):  # bounded memory for the running counts
        run = np.cumsum(valid[a:a + step], axis=1, dtype=np.int32)
        out[a:a + step] = np.argmax(run > idx[a:a + step, None], axis=1)
    return out
