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

- ``ideal``: every flow is split evenly over all equal-cost paths. Its load is then spread evenly over the uplinks
  of an *aggregate* (a leaf; the spines of a pod and rail group; the cores of an island; ... see
  :mod:`topo.fabric.layout`), so those uplinks are represented by one *virtual resource* each with their summed
  capacity: exact for the fluid model, and O(flows) at any scale, at any number of tiers.
- ``hash``: each flow (or each of its ``subflows`` parts) is pinned to one path by a deterministic hash of its
  endpoints, which reproduces the collisions of real ECMP. At each tier boundary the hash picks the switch above
  (the same plane on both sides, so the two halves meet) and, independently, the up cable and the down cable.

The two halves of every path (which NIC, proxy GPU, host link, leaf) come from :class:`topo.engine.paths.Paths`; the
hop slots of the path table are named by :class:`topo.fabric.levels.PathSlots`. Which way an all-to-all is loaded
(from counts, as classes, flow by flow) is decided in :mod:`topo.engine.allpairs`, not here. A router does not
change once made: estimating with it leaves it as it was.

The result is a list of (resource, bytes, flow) entries; :mod:`topo.engine.contention` turns it into times.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from ..errors import TopoError, Unreachable
from ..fabric.fabric import Fabric
from ..fabric.levels import Level, PathSlots
from .flow_classes import FlowClasses
from .paths import Paths
from .schedule import AlgorithmUnavailable, InNetworkReduce, InSwitchReduce, Transfers

__all__ = ["Router", "Routed", "ECMP_MODES", "MAX_ROUTED_PARTS"]

ECMP_MODES = ("ideal", "hash")
MAX_ROUTED_PARTS = 16_000_000  # flows x hashed sub-flows routed at once (about 1.3 GB of path table)


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
    classes: "FlowClasses | None" = None  # the flows merged into max-min classes (topo.engine.flow_classes), when kept so
    notes: tuple[str, ...] = ()  # what routing approximated (e.g. expected loads over the hash)

    @staticmethod
    def concat(parts: list["Routed"]) -> "Routed":
        """Several routed sets of flows as one (flow ids renumbered in order; summed if any part is summed).

        Parameters
        ----------
        parts : list of Routed
            On the same router; empty parts are dropped.

        Returns
        -------
        Routed
            Their entries together; kept one by one unless a part keeps only summed loads or max-min classes.
        """
        parts = [p for p in parts if p.num_flows]
        if not parts:
            return Routed.empty()
        notes = tuple(dict.fromkeys(n for p in parts for n in p.notes))
        if any(p.classes is not None for p in parts) and all(p.classes is not None or not p.aggregated
                                                                for p in parts):
            out = Routed.summed(np.concatenate([p.res for p in parts]), np.concatenate([p.weight for p in parts]),
                                sum(p.num_flows for p in parts), max(float(p.latency_s.max()) for p in parts),
                                any(bool(p.network.any()) for p in parts))
            out.classes = FlowClasses.concat([p.classes if p.classes is not None else
                                              FlowClasses.single(p.res, p.flow, p.weight, p.flow_bytes)
                                              for p in parts])
            out.notes = notes
            return out
        if any(p.aggregated for p in parts):
            out = Routed.summed(np.concatenate([p.res for p in parts]), np.concatenate([p.weight for p in parts]),
                                sum(p.num_flows for p in parts), max(float(p.latency_s.max()) for p in parts),
                                any(bool(p.network.any()) for p in parts))
            out.notes = notes
            return out
        offs = np.cumsum([0] + [p.num_flows for p in parts[:-1]])
        return Routed(
            res=np.concatenate([p.res for p in parts]),
            weight=np.concatenate([p.weight for p in parts]),
            flow=np.concatenate([p.flow + o for p, o in zip(parts, offs)]),
            num_flows=int(sum(p.num_flows for p in parts)),
            flow_bytes=np.concatenate([p.flow_bytes for p in parts]),
            latency_s=np.concatenate([p.latency_s for p in parts]),
            network=np.concatenate([p.network for p in parts]),
            notes=notes,
        )

    @staticmethod
    def summed(res: np.ndarray, weight: np.ndarray, num_flows: int, max_latency_s: float, network: bool) -> "Routed":
        """Flows kept only as their summed load per resource (too many to keep one by one).

        Parameters
        ----------
        res, weight : numpy.ndarray
            Resource ids and bytes of every entry (repeats are summed).
        num_flows : int
            How many flows the entries came from.
        max_latency_s : float
            The largest routed latency among them.
        network : bool
            Whether any of them leaves its NVLink domain.

        Returns
        -------
        Routed
            ``aggregated``: one entry per loaded resource, no per-flow data.
        """
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
        """No flows.

        Returns
        -------
        Routed
        """
        z = np.zeros(0, dtype=np.int64)
        return Routed(z, np.zeros(0), z, 0, np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))

    def scaled(self, factor: float) -> "Routed":
        """The same flows carrying ``factor`` times the bytes.

        Parameters
        ----------
        factor : float

        Returns
        -------
        Routed
        """
        return Routed(self.res, self.weight * factor, self.flow, self.num_flows, self.flow_bytes * factor,
                      self.latency_s, self.network, notes=self.notes)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fast, well-spread deterministic hash of uint64 keys (in place on one new array)."""
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    t = x >> np.uint64(30)
    x ^= t
    x *= np.uint64(0xBF58476D1CE4E5B9)
    np.right_shift(x, np.uint64(27), out=t)
    x ^= t
    x *= np.uint64(0x94D049BB133111EB)
    np.right_shift(x, np.uint64(31), out=t)
    x ^= t
    return x


class _Hashes:
    """The hash values of flow parts, per tier boundary: which switch above (``switch``), which up cable
    (``up_cable``) and which down cable (``down_cable``), each an independent 64-bit value (the up and the down
    cable of a boundary never share one: they would always pick the same index).

    The values come from one chain ``v0 = mix(key)``, ``v(i+1) = mix(v(i))``: boundary 0 takes ``v0`` (switch, its
    high half the up cable) and ``v1``'s high half (down cable); boundary 1 ``v1`` and ``v2`` (up; high half:
    down); boundary ``k >= 2`` ``v(2k-1)`` (switch; high half: up) and ``v(2k)``'s high half (down). Links of
    the chain are computed when first asked for: a boundary with one cable per switch pair never needs its cable
    values."""

    def __init__(self, key: np.ndarray):
        self._chain = [_mix64(key)]

    def _v(self, i: int) -> np.ndarray:
        while len(self._chain) <= i:
            self._chain.append(_mix64(self._chain[-1]))
        return self._chain[i]

    def switch(self, k: int) -> np.ndarray:
        """The switch-above hash values at boundary ``k``."""
        return self._v(max(0, 2 * k - 1))

    def cable(self, k: int, down: bool) -> np.ndarray:
        """The up (or down) cable hash values at boundary ``k``."""
        if k == 1:
            return self._v(2) >> np.uint64(32) if down else self._v(2)
        if k == 0:
            return self._v(int(down)) >> np.uint64(32)
        return self._v(2 * k if down else 2 * k - 1) >> np.uint64(32)


def _mod(h: np.ndarray, n: int) -> np.ndarray:
    """``h mod n`` as int64 (a mask when ``n`` is a power of two: the same value, faster)."""
    if n & (n - 1) == 0:
        return (h & np.uint64(n - 1)).astype(np.int64)
    return (h % np.uint64(n)).astype(np.int64)


class Router:
    """Routes flows on one fabric; defines the resource space (directed links plus ECMP aggregates).

    Resource ids: ``2*link`` (up) and ``2*link + 1`` (down) for every link, then, when ``ecmp="ideal"``, for each
    tier boundary ``k`` (leaf-spine, spine-core, ...) one resource per aggregate of tier ``k`` for its uplinks going
    up, and one going down (``aggregate_start(k, down)``). A router does not change once made.

    ``salt`` (the estimate option ``hash_seed``) is a whole number mixed into hashed ECMP's key: another salt draws
    other collisions; 0 is the hash without a salt; ideal ECMP has no hash and ignores it.
    """

    def __init__(self, fabric: Fabric, ecmp: str = "ideal", subflows: int = 1, pxn: bool | None = None,
                 salt: int = 0, merge_classes: bool = True):
        if ecmp not in ECMP_MODES:
            raise TopoError(f"unknown ECMP mode {ecmp!r}; allowed: {', '.join(ECMP_MODES)}", key="ecmp")
        if not isinstance(subflows, (int, np.integer)) or subflows < 1:
            raise TopoError(f"subflows must be a whole number >= 1, got {subflows!r}", key="subflows")
        self.fabric = fabric
        self.ecmp = ecmp
        self.subflows = int(subflows) if ecmp == "hash" else 1
        L = fabric.layout
        self.pxn = (L.leaves_per_unit > 1) if pxn is None else bool(pxn)
        if isinstance(salt, bool) or not isinstance(salt, (int, np.integer)) or not 0 <= salt < 2**64:
            raise TopoError(f"a hash seed must be a whole number from 0 to 2^64 - 1, got {salt!r}", key="hash_seed")
        self.salt = int(salt)
        # max-min: an all-to-all may merge flows that share their path (alltoall_classes); see without_merging
        self.merge_classes = bool(merge_classes)
        self.paths = Paths(fabric, self.pxn)
        self.slots: PathSlots = self.paths.slots
        links = fabric.links
        M = fabric.num_links
        self.num_real = 2 * M
        self.n_leaves = L.tiers[0].num_switches
        virt = ecmp == "ideal" and L.num_tiers > 1
        self.virtual = virt
        starts, n = [], self.num_real
        for k in range(L.num_tiers - 1 if virt else 0):
            na = L.num_aggregates(k)
            starts.append((n, n + na))
            n += 2 * na
        self._agg_start = tuple(starts)
        self.num_res = n

        cap = np.empty(self.num_res)
        cap[0:self.num_real:2] = links["bandwidth_Bps"]
        cap[1:self.num_real:2] = links["bandwidth_Bps"]
        level = np.empty(self.num_res, dtype=np.int8)
        level[0:self.num_real:2] = links["level"]
        level[1:self.num_real:2] = links["level"]
        lat = np.empty(self.num_res)
        lat[0:self.num_real:2] = links["latency_s"]
        lat[1:self.num_real:2] = links["latency_s"]
        for k, (up, down) in enumerate(self._agg_start):
            t = L.tiers[k]
            sl = slice(up, down + L.num_aggregates(k))
            cap[sl] = L.switches_per_aggregate(k) * t.up_ports * t.up_rate_Bps
            level[sl] = Level.uplink(k).code
            lat[sl] = self._level_latency(Level.uplink(k))
        self.alive = fabric.link_alive
        if fabric.failed is not None:
            self._fail(cap)
        self.capacity_Bps = cap
        self.level = level
        self.res_latency_s = lat

    def without_merging(self) -> "Router":
        """The same router, but an all-to-all under max-min keeps its flows one by one (no classes).

        Returns
        -------
        Router
            A shallow copy; this router is left as it was.
        """
        out = Router.__new__(Router)
        out.__dict__.update(self.__dict__)
        out.merge_classes = False
        return out

    # --- the resource space ---------------------------------------------------------------------------------
    def aggregate_start(self, boundary: int, down: bool = False) -> int:
        """First resource id of the ECMP aggregates of tier boundary ``boundary`` (ideal ECMP only).

        Parameters
        ----------
        boundary : int
            ``k`` for the cables from tier ``k`` up to tier ``k + 1``.
        down : bool
            The aggregates of the cables coming down instead of going up.

        Returns
        -------
        int
            Aggregate ``a`` of that boundary is resource ``aggregate_start(boundary, down) + a``.
        """
        return self._agg_start[boundary][1 if down else 0]

    # the first two boundaries by their familiar names (leaf uplinks, spine-group uplinks)
    v_leaf_up = property(lambda self: self.aggregate_start(0))
    v_leaf_down = property(lambda self: self.aggregate_start(0, True))
    v_grp_up = property(lambda self: self.aggregate_start(1))
    v_grp_down = property(lambda self: self.aggregate_start(1, True))

    def _uplinks(self, k: int) -> slice:
        return self.fabric.level_slice(Level.uplink(k))

    def _fail(self, cap: np.ndarray) -> None:
        """Failed links carry nothing; ECMP aggregates keep the capacity of their surviving links."""
        dead = np.flatnonzero(self.fabric.failed)
        cap[2 * dead] = 0.0
        cap[2 * dead + 1] = 0.0
        L = self.fabric.layout
        for k, (up, down) in enumerate(self._agg_start):
            na = L.num_aggregates(k)
            alive = self.alive[self._uplinks(k)].reshape(na, -1)
            per = alive.sum(axis=1) * L.tiers[k].up_rate_Bps
            cap[up:up + na] = per
            cap[down:down + na] = per

    def _level_latency(self, level: Level) -> float:
        sl = self.fabric.level_slice(level)
        lat = self.fabric.links["latency_s"][sl]
        return float(lat[0]) if lat.size else 0.0

    # --- routing --------------------------------------------------------------------------------------------
    def route(self, src, dst, nbytes, choice=None) -> Routed:
        """Route flows ``src[i] -> dst[i]`` (GPU ids) of ``nbytes[i]`` bytes.

        Parameters
        ----------
        src, dst : arrays of GPU ids
        nbytes : bytes of each flow (broadcast)
        choice : which of a GPU's NICs each flow uses when it has several (e.g. the channel index); default 0

        Returns
        -------
        Routed
            One entry per (flow part, resource it crosses); hashed sub-flows split a flow's bytes.
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
        cols, inter = self.path_table(src, dst, choice, sub)
        flat = cols.reshape(-1)  # entries flow by flow, hop by hop (one pass over a 1-D array: faster than a
        hit = np.flatnonzero(flat >= 0)  # 2-D nonzero)
        res = flat[hit]
        rows = hit // cols.shape[1]
        del flat, hit, cols
        if f.failed is not None:
            broken = self.capacity_Bps[res] <= 0
            if broken.any():
                k = int(np.flatnonzero(broken)[0])
                r, fl = int(res[k]), int(rows[k])
                d = self.describe_resource(r)
                dead = [g for g in (int(src[fl]), int(dst[fl])) if f"gpu{g}" in f.failures]
                if dead:  # the rank's own GPU failed: no path is the problem
                    raise Unreachable(f"GPU {dead[0]} itself failed (failures: {', '.join(f.failures)}) and is a rank "
                                      "of the communicator: place the ranks on working GPUs", key="fail")
                raise Unreachable(f"GPU {int(src[fl])} cannot reach GPU {int(dst[fl])}: every path crosses failed "
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

    def path_table(self, src, dst, choice, sub):
        """The path of every flow part ``src[i] -> dst[i]`` as a table of resource ids, one column per hop slot
        of :attr:`slots` (-1: no hop there), and whether each part leaves its NVLink domain.

        Parameters
        ----------
        src, dst : numpy.ndarray
            GPU ids of each flow part.
        choice : numpy.ndarray
            Which of a GPU's NICs each part uses when it has several.
        sub : numpy.ndarray
            The sub-flow index of each part (hashed ECMP hashes it with the endpoints).

        Returns
        -------
        tuple of (numpy.ndarray, numpy.ndarray)
            The ``(parts, slots.width)`` table of resource ids and the boolean mask of parts that leave their
            NVLink domain.

        Raises
        ------
        Unreachable
            A part has no path (see :meth:`route`).
        """
        P = src.size
        f = self.fabric
        L = f.layout
        S = self.slots
        cols = np.full((P, S.width), -1, dtype=np.int32)  # resource ids < 2^31 (a fabric of ~10^9 links)
        nv = f.level_start(Level.NVLINK)
        dom_s, dom_d = src // L.gpus_per_domain, dst // L.gpus_per_domain
        intra = (dom_s == dom_d) & (src != dst)
        inter = dom_s != dom_d

        # inside the NVLink domain
        i = np.flatnonzero(intra)
        cols[i, S.TO_NVSWITCH] = 2 * (nv + src[i])
        cols[i, S.TO_PROXY] = 2 * (nv + dst[i]) + 1

        i = np.flatnonzero(inter)
        if i.size:
            s, d = src[i], dst[i]
            send, recv = self.paths.endpoints(s, d, choice[i])
            hop = send.proxy != s
            cols[i[hop], S.TO_NVSWITCH] = 2 * (nv + s[hop])
            cols[i[hop], S.TO_PROXY] = 2 * (nv + send.proxy[hop]) + 1
            back = recv.nic_gpu != d  # the receiving NIC is not beside the destination (a failed NIC's stand-in)
            if back.any():
                cols[i[back], S.back_to_nvswitch] = 2 * (nv + recv.nic_gpu[back])
                cols[i[back], S.back_to_gpu] = 2 * (nv + d[back]) + 1
            cols[i, S.SEND_PCIE] = 2 * send.pcie
            cols[i, S.SEND_NIC] = 2 * self.paths.nic_link(send.nic)
            cols[i, S.recv_nic] = 2 * self.paths.nic_link(recv.nic) + 1
            cols[i, S.recv_pcie] = 2 * recv.pcie + 1
            self._switch_hops(cols, i, send, recv, sub[i])
        return cols, inter

    def _switch_hops(self, cols, i, send, recv, sub) -> None:
        """The cables between the two leaves, for the inter-domain flow parts ``i``."""
        f = self.fabric
        L = f.layout
        S = self.slots
        ls, ld = send.leaf, recv.leaf
        src, dst = send.gpu, recv.gpu
        if not np.any(ls != ld):
            return
        if L.num_tiers == 1:
            k = int(np.flatnonzero(ls != ld)[0])
            raise Unreachable(f"GPU {int(src[k])} cannot reach GPU {int(dst[k])}: their NICs sit on different "
                            "leaves and the fabric has no spine" + ("; turn PXN on" if not self.pxn else ""),
                            key="fabric.tiers")
        if L.rail_groups > 1:
            bad = (ls != ld) & (f.nic_rail(send.nic) != f.nic_rail(recv.nic))
            if np.any(bad):
                k = int(np.flatnonzero(bad)[0])
                raise Unreachable(f"GPU {int(src[k])} cannot reach GPU {int(dst[k])} in a rail-only fabric: their "
                                "NICs are on different rails; route through NVLink (pxn=True)", key="pxn")
        top = self.paths.top_aggregate(ls) != self.paths.top_aggregate(ld)
        if np.any(top):
            raise Unreachable(f"flows cross {L.tiers[-1].name} groups but the fabric has no tier above "
                            f"{L.tiers[-1].name}", key="fabric.tiers")
        agg_s, agg_d = self.paths.aggregates(ls), self.paths.aggregates(ld)
        if self.ecmp == "ideal":
            for k in range(L.num_tiers - 1):
                use = np.flatnonzero(agg_s[k] != agg_d[k])
                if use.size == 0:
                    break
                cols[i[use], S.up(k)] = self.aggregate_start(k) + agg_s[k][use]
                cols[i[use], S.down(k)] = self.aggregate_start(k, True) + agg_d[k][use]
            return
        for k, use, up, down in self.hashed_hops(ls, ld, send.nic, recv.nic, sub, src, dst, (agg_s, agg_d)):
            cols[i[use], S.up(k)] = up
            cols[i[use], S.down(k)] = down

    def hashed_hops(self, ls, ld, nic_s, nic_d, sub, src, dst, aggs=None):
        """Hashed ECMP's switch hops of flow parts from NIC ``nic_s`` (under leaf ``ls``) to NIC ``nic_d`` (under
        leaf ``ld``), hashed part ``sub``, boundary by boundary (``src`` and ``dst``, their GPUs, name them in
        errors).

        Parameters
        ----------
        ls, ld : numpy.ndarray
            The leaves of the sending and receiving NICs.
        nic_s, nic_d : numpy.ndarray
            The sending and receiving NICs (the hash's key).
        sub : numpy.ndarray or int
            Each flow part's index among its flow's hashed sub-flows.
        src, dst : numpy.ndarray
            The GPUs of each flow part.
        aggs : tuple of two lists of numpy.ndarray, optional
            ``Paths.aggregates`` of ``ls`` and of ``ld``, when the caller has them.

        Yields
        ------
        tuple
            ``(k, rows, up, down)``: at tier boundary ``k``, the flow parts ``rows`` (indices into the arguments;
            a slice when all of them) cross resource ``up`` going up and ``down`` coming down.

        Raises
        ------
        Unreachable
            Failed parts leave some flow part no working path.
        """
        f = self.fabric
        L = f.layout
        agg_s, agg_d = aggs if aggs is not None else (self.paths.aggregates(ls), self.paths.aggregates(ld))
        key = nic_s.astype(np.uint64) * np.uint64(0x100000001B3)
        key ^= nic_d.astype(np.uint64)
        key += np.asarray(sub).astype(np.uint64) * np.uint64(0x9E3779B1)
        if self.salt:  # a salt mixed in whole: neighbouring salts give unrelated hashes
            key ^= _mix64(np.array([self.salt], dtype=np.uint64))[0]
        hashes = _Hashes(key)
        del key
        go = agg_s[0] != agg_d[0]  # flow parts still going up
        use = slice(None) if go.all() else np.flatnonzero(go)
        xs, xd = ls[use], ld[use]
        for k in range(L.num_tiers - 1):
            if xs.size == 0:
                break
            above = L.tiers[k + 1]
            s_k, m_k = above.switches_per_group, above.links_from_below
            hj = hashes.switch(k)[use]
            last = k + 2 >= L.num_tiers  # the top: both sides climb to one group (its tier joins all below)
            # the groups above (the aggregates of tier k + 1 for the leaves), where they matter
            gs = gd = None
            if not last:
                gs = agg_s[1][use] if k == 0 else L.upper_group(k, xs)
                gd = agg_d[1][use] if k == 0 else L.upper_group(k, xd)
            if f.failed is None:
                j = _mod(hj, s_k)
                ku = kd = 0
                if m_k > 1:
                    ku = _mod(hashes.cable(k, False)[use], m_k)
                    kd = _mod(hashes.cable(k, True)[use], m_k)
            else:
                j, ku, kd = self._pick_surviving(k, xs, xd, gs, gd, hj, hashes, use, src, dst)
            del hj
            yield k, use, 2 * f.uplink_id(k, xs, j, ku), 2 * f.uplink_id(k, xd, j, kd) + 1
            if not last:
                xs, xd = gs * s_k + j, gd * s_k + j  # switch j of each group above (Layout.upper_switch)
                go = agg_s[k + 1][use] != agg_d[k + 1][use]
                if not go.all():
                    use = (np.flatnonzero(go) if isinstance(use, slice) else use[go])
                    xs, xd = xs[go], xd[go]

    def hashed_switch_loads(self, nic_s, nic_d, nbytes: float, src, dst, aggs=None) -> np.ndarray:
        """Bytes on every resource from the switch hops alone (leaf uplinks and above) of flows between NICs
        routed with hashed ECMP, each split over :attr:`subflows` parts: what :meth:`route` puts on those
        resources, without the NVLink, PCIe and NIC hops (an all-to-all takes those from counts).

        Parameters
        ----------
        nic_s, nic_d : numpy.ndarray
            The sending and receiving NIC of each flow (after failover).
        nbytes : float
            Bytes of every flow.
        src, dst : numpy.ndarray
            The GPUs of each flow (named in errors).
        aggs : tuple of two lists of numpy.ndarray, optional
            ``Paths.aggregates`` of the two NICs' leaves, when the caller has them.

        Returns
        -------
        numpy.ndarray
            ``num_res`` bytes.

        Raises
        ------
        Unreachable
            Some flow has no working path.
        """
        f = self.fabric
        nic_s, nic_d = np.asarray(nic_s, dtype=np.int64), np.asarray(nic_d, dtype=np.int64)
        if aggs is None:
            aggs = self.paths.aggregates(f.nic_leaf(nic_s)), self.paths.aggregates(f.nic_leaf(nic_d))
        count = np.zeros(self.num_res)
        K = self.subflows
        for c in range(K):
            for _, _, r_up, r_down in self.hashed_hops(aggs[0][0], aggs[1][0], nic_s, nic_d, c, src, dst, aggs):
                count += np.bincount(r_up, minlength=count.size)
                count += np.bincount(r_down, minlength=count.size)
        return count * (float(nbytes) / K)

    def _cables_alive(self, k: int) -> np.ndarray:
        """``[lower switch, switch of its group above, cable]``: the working cables of boundary ``k``."""
        L = self.fabric.layout
        above = L.tiers[k + 1]
        return self.alive[self._uplinks(k)].reshape(L.tiers[k].num_switches, above.switches_per_group,
                                                    above.links_from_below)

    def _meets(self, k: int, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """``[pair, j]``: whether switch ``j`` of group ``g1`` and switch ``j`` of group ``g2`` (groups of tier
        ``k + 1``) are the same switch or are joined by working parts above them, at any depth."""
        L = self.fabric.layout
        s = L.tiers[k + 1].switches_per_group
        out = np.repeat((g1 == g2)[:, None], s, axis=1)
        diff = np.flatnonzero(g1 != g2)
        if diff.size == 0 or k + 2 >= L.num_tiers:  # tier k + 1 is the top: two of its switches never meet
            return out
        n2 = int(L.tiers[k + 1].num_switches // s) + 1
        pairs, inv = np.unique(g1[diff] * n2 + g2[diff], return_inverse=True)
        u = ((pairs // n2)[:, None] * s + np.arange(s)).ravel()
        v = ((pairs % n2)[:, None] * s + np.arange(s)).ravel()
        out[diff] = self._joined(k + 1, u, v).reshape(pairs.size, s)[inv.ravel()]
        return out

    def _joined(self, t: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Whether switches ``u`` and ``v`` of tier ``t`` (below the top, different) reach a common switch above
        through working cables: some switch ``j`` of their groups above with a working cable from both that
        still meets (:meth:`_meets`)."""
        L = self.fabric.layout
        via = self._cables_alive(t).any(axis=2)
        ok = via[u] & via[v]
        ok &= self._meets(t, L.upper_group(t, u), L.upper_group(t, v))
        return ok.any(axis=1)

    def _pick_surviving(self, k, xs, xd, gs, gd, hj, hashes, use, src, dst):
        """Hashed ECMP over the live next hops at boundary ``k``, as a switch re-hashes over the routes it still
        has: a switch above (``j`` of groups ``gs`` and ``gd``) with a working cable from both sides from which the
        two sides still meet through working parts at any depth above (:meth:`_meets`), then a working cable on
        each side, each picked by hash among the survivors. Where nothing is lost for a flow part, the pick is the
        intact fabric's (hash modulo the number of choices); only the others build their rows of survivors."""
        f = self.fabric
        L = f.layout
        above = L.tiers[k + 1]
        s_k, m_k = above.switches_per_group, above.links_from_below
        cab = self._cables_alive(k)
        via = cab.any(axis=2)  # [lower switch, switch above]: some cable works
        whole_s = via.all(axis=1)
        if gs is None:  # the top: both sides climb to the same switches
            meets = np.ones((1, s_k), dtype=bool)
            pidx = np.zeros(xs.size, dtype=np.int64)
            full = whole_s[xs] & whole_s[xd]
        else:
            ng = int(above.num_switches // s_k)
            pair = gs * ng + gd
            if ng * ng <= 1 << 22:  # the pairs present, by counting (no sort of the flow parts)
                present = np.flatnonzero(np.bincount(pair, minlength=ng * ng))
                idx = np.zeros(ng * ng, dtype=np.int64)
                idx[present] = np.arange(present.size)
                pidx = idx[pair]
            else:
                present, pidx = np.unique(pair, return_inverse=True)
                pidx = pidx.ravel()
            del pair
            meets = self._meets(k, present // ng, present % ng)  # [pair present, j]
            full = whole_s[xs] & whole_s[xd] & meets.all(axis=1)[pidx]
        j = _mod(hj, s_k)
        bad = np.flatnonzero(~full)

        def rows(b):  # flow parts of src and dst
            return b if isinstance(use, slice) else use[b]

        if bad.size:
            valid = via[xs[bad]] & via[xd[bad]] & meets[pidx[bad]]
            j[bad] = _pick(hj[bad], valid, above.name, src[rows(bad)], dst[rows(bad)], f)
        if m_k == 1:  # the one cable of the switch pair chosen works (it was a choice because it does)
            return j, 0, 0
        whole = cab.all(axis=2)  # [lower switch, switch above]: every cable works
        out = []
        for x, down in ((xs, False), (xd, True)):
            h = hashes.cable(k, down)[use]
            kk = _mod(h, m_k)
            bad = np.flatnonzero(~whole[x, j])
            if bad.size:
                kk[bad] = _pick(h[bad], cab[x[bad], j[bad]], "cable", src[rows(bad)], dst[rows(bad)], f)
            out.append(kk)
        return j, out[0], out[1]

    # --- router services: the parts of a schedule that are not plain transfers ------------------------------
    def route_transfers(self, t: Transfers) -> Routed:
        """Transfers, each spread over the destination GPU's NICs when ``t.split_nics``.

        Parameters
        ----------
        t : Transfers
            A schedule part of point-to-point transfers.

        Returns
        -------
        Routed
        """
        k = self.fabric.layout.nics_per_server // self.fabric.layout.gpus_per_server
        if not t.split_nics or k <= 1:
            return self.route(t.src, t.dst, t.per_msg_byte, t.choice)
        nbytes = np.asarray(t.per_msg_byte, dtype=float) / k
        return Routed.concat([self.route(t.src, t.dst, nbytes, choice=c) for c in range(k)])

    def in_switch_reduce(self, gpus: np.ndarray, nbytes: float) -> Routed:
        """NVLS: every GPU moves ``nbytes`` each way over its NVLink to its switch (reduce, then multicast).

        Parameters
        ----------
        gpus : numpy.ndarray
            GPU ids.
        nbytes : float
            Bytes each GPU moves each way.

        Returns
        -------
        Routed
            One flow per GPU, on its NVLink up and down.
        """
        link = self.fabric.level_start(Level.NVLINK) + np.asarray(gpus)
        n = link.size
        return Routed(res=np.r_[2 * link, 2 * link + 1], weight=np.full(2 * n, float(nbytes)),
                      flow=np.r_[np.arange(n), np.arange(n)], num_flows=n, flow_bytes=np.full(n, 2.0 * nbytes),
                      latency_s=self.res_latency_s[2 * link] * 2, network=np.zeros(n, dtype=bool))

    def in_network_reduce(self, gpus: np.ndarray, communicator: np.ndarray, nbytes: float) -> Routed:
        """SHARP: each GPU sends ``nbytes`` up through its NIC into its rail's reduction tree (one per
        communicator) and receives the result back; above the leaf each (communicator, aggregate, rail) sends one
        reduced stream up the tree: to spine ``rail mod s`` of its pod, then to the first switch of that plane's
        group at every tier above, as high as the GPUs' aggregates differ.

        Parameters
        ----------
        gpus : numpy.ndarray
            GPU ids.
        communicator : numpy.ndarray
            The communicator of each GPU (one reduction tree each).
        nbytes : float
            Bytes each GPU sends up and receives back.

        Returns
        -------
        Routed
            The host links, NIC links and one up-and-down stream per tree switch and tier, with the latency of
            each GPU's way up the tree.

        Raises
        ------
        AlgorithmUnavailable
            No tier joins all the GPUs, or a tier the tree needs cannot reduce (``sharp = false``).
        """
        f = self.fabric
        L = f.layout
        gpus = np.asarray(gpus)
        nics = f.gpu_nic(gpus)
        leaves = f.nic_leaf(nics)
        aggs = self.paths.aggregates(leaves)
        tiers_used = 1 + sum(np.unique(a).size > 1 for a in aggs)
        if np.unique(self.paths.top_aggregate(leaves)).size > 1 or tiers_used > L.num_tiers:
            raise AlgorithmUnavailable(f"the GPUs sit under {np.unique(leaves).size} {L.tiers[0].name} switches "
                                       "and no tier above joins them, so no switch can reduce all of them")
        lacking = [t.name for t in L.tiers[:tiers_used] if not t.sharp]
        if lacking:
            raise AlgorithmUnavailable(f"the {', '.join(lacking)} switches cannot reduce in the network "
                                       "(set sharp = true on their tier)")
        lat = self.res_latency_s
        parts = []
        pcie = self.paths.pcie_link(nics, f.nic_gpu(nics) if f.pcie_per_nic else gpus)
        nic = self.paths.nic_link(nics)
        path_s = lat[2 * nic] + lat[2 * pcie]  # per GPU: its way up to the leaf
        for ids in (pcie, nic):
            parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], nbytes, np.r_[lat[2 * ids], lat[2 * ids + 1]]))
        rails = f.nic_rail(nics)
        # the tree's switch of tier k for each (communicator, rail, aggregate of tier k)
        node = np.unique(np.c_[leaves, rails, communicator], axis=0)  # (switch, rail, communicator)
        for k in range(tiers_used - 1):
            s1 = L.tiers[1].switches_per_group
            j = node[:, 1] % s1 if k == 0 else np.zeros(node.shape[0], dtype=np.int64)
            ids = f.uplink_id(k, node[:, 0], j, 0)
            parts.append(_direct(np.r_[2 * ids, 2 * ids + 1], nbytes, np.r_[lat[2 * ids], lat[2 * ids]]))
            path_s = path_s + float(lat[2 * ids].max())
            node = np.unique(np.c_[L.upper_switch(k, node[:, 0], j), node[:, 1], node[:, 2]], axis=0)
        r = Routed.concat(parts)
        # one entry per GPU for the latency of its way up the tree
        return Routed(r.res, r.weight, r.flow, r.num_flows, r.flow_bytes, np.resize(path_s, r.num_flows),
                      np.ones(r.num_flows, dtype=bool))

    def route_summed(self, chunks) -> Routed:
        """Route flows given in chunks ``(src, dst, nbytes, choice)`` and keep only their summed loads: memory
        stays bounded by the chunk size however many flows there are (for equal-share contention).

        Parameters
        ----------
        chunks : iterable of tuple
            ``(src, dst, nbytes, choice)`` arrays, as :meth:`route` takes them.

        Returns
        -------
        Routed
            ``aggregated``: the summed load per resource, the largest latency.
        """
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
        """Bytes on every resource.

        Parameters
        ----------
        routed : Routed
            Flows routed by this router.

        Returns
        -------
        numpy.ndarray
            One value per resource id.
        """
        return np.bincount(routed.res, weights=routed.weight, minlength=self.num_res)

    def real_link_loads(self, res_loads: np.ndarray) -> np.ndarray:
        """Bytes on every directed link (``2*link`` up, ``2*link+1`` down), spreading ECMP aggregates evenly.

        Parameters
        ----------
        res_loads : numpy.ndarray
            Bytes per resource id (:meth:`loads`).

        Returns
        -------
        numpy.ndarray
            Bytes per directed link; an aggregate's load split equally over its working uplinks.
        """
        out = res_loads[: self.num_real].copy()
        L = self.fabric.layout
        for k, (up, down) in enumerate(self._agg_start):
            sl = self._uplinks(k)
            ids = np.arange(sl.start, sl.stop)
            na = L.num_aggregates(k)
            owner = np.repeat(np.arange(na), ids.size // na)
            share = self._shares(ids, owner, na)
            out[2 * ids] += res_loads[up + owner] * share
            out[2 * ids + 1] += res_loads[down + owner] * share
        return out

    def _shares(self, ids: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
        """Each link's share of its aggregate's load: equal over the aggregate's working links."""
        alive = self.alive[ids].astype(float)
        count = np.bincount(owner, weights=alive, minlength=n)
        return alive / np.maximum(count[owner], 1.0)

    def describe_resource(self, r: int) -> dict:
        """Endpoints, level and direction of a resource (a directed link or an ECMP aggregate).

        Parameters
        ----------
        r : int
            A resource id.

        Returns
        -------
        dict
            ``link`` (None for an aggregate), ``src``, ``dst`` (node names, or the switches an aggregate joins),
            ``level``, ``direction`` and ``num_links``.
        """
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
        for k, (up, down_start) in enumerate(self._agg_start):
            na = L.num_aggregates(k)
            if r < down_start + na:
                down = r >= down_start
                g = int(r - (down_start if down else up))
                if k == 0:
                    who = f._name(int(f.switch_node(0, g)))
                    above = f"{L.tiers[1].name}s of its group"
                else:
                    who = f"{L.tiers[k].name}s of group {g}"
                    above = f"{L.tiers[k + 1].name}s"
                src, dst = (above, who) if down else (who, above)
                return {"link": None, "src": src, "dst": dst, "level": names[Level.uplink(k).code],
                        "direction": "down" if down else "up",
                        "num_links": L.switches_per_aggregate(k) * L.tiers[k].up_ports}
        raise IndexError(r)  # pragma: no cover


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
        raise Unreachable(f"GPU {int(src[k])} cannot reach GPU {int(dst[k])}: no working {what} joins their paths "
                        f"(failures: {', '.join(fabric.failures)})", key="fail")
    idx = (h % cnt.astype(np.uint64)).astype(np.int64)
    out = np.empty(valid.shape[0], dtype=np.int64)
    step = 1 << 18
    for a in range(0, valid.shape[0], step):  # bounded memory for the running counts
        run = np.cumsum(valid[a:a + step], axis=1, dtype=np.int32)
        out[a:a + step] = np.argmax(run > idx[a:a + step, None], axis=1)
    return out
