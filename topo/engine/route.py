"""Routing: flows between GPUs become the directed links they load, by index arithmetic on the fabric.

Paths are the shortest up/down paths of a folded Clos:

- inside an NVLink domain: GPU -> NVSwitch -> GPU;
- across domains: GPU -> [NVLink to the GPU beside the chosen NIC, if not itself] -> PCIe -> NIC -> leaf ->
  [spine -> [core -> spine] ->] leaf -> NIC -> PCIe -> GPU.

NIC choice ("rail" policy, NCCL's PXN): the receiver's NIC is the one beside the destination GPU; the sender uses
its server's NIC on the same rail, moving the data over NVLink first when that NIC is not its own. Traffic thus
stays on one rail wherever the fabric allows (and must, in a rail-only fabric). With ``pxn=False`` (and always in a
fat tree, where rails do not matter) each GPU uses its own NIC.

ECMP, where a leaf has several spines (and a spine several cores) to choose from (:mod:`topo.engine.ecmp`):

- ``ideal``: every flow is split evenly over all equal-cost paths. Its load is then spread evenly over the uplinks
  of an *aggregate* (a leaf; the spines of a pod and rail group; the cores of an island; ... see
  :mod:`topo.fabric.layout`), so those uplinks are represented by one *virtual resource* each with their summed
  capacity: exact for the fluid model, and O(flows) at any scale, at any number of tiers.
- ``hash``: each flow (or each of its ``subflows`` parts) is pinned to one path by a deterministic hash of its
  endpoints (:mod:`topo.engine.ecmp_hash`, the salt included), which reproduces the collisions of real ECMP,
  re-hashed over the parts that still work where some failed (:mod:`topo.engine.failed_parts`).

Where each idea lives: this module is the router's public face, the resource space (ids, capacities, failed
links, per-link loads, names) and the path table of plain flows; :mod:`topo.engine.ecmp` and its two helpers the
switch hops; :mod:`topo.engine.route_parts` the parts of a schedule that are not plain flows (transfers over
several NICs, NVLS, SHARP, flows in chunks); :mod:`topo.engine.routed` the result type.

The two halves of every path (which NIC, proxy GPU, host link, leaf) come from :class:`topo.engine.paths.Paths`; the
hop slots of the path table are named by :class:`topo.fabric.levels.PathSlots`. Which way an all-to-all is loaded
(from counts, as classes, flow by flow) is decided in :mod:`topo.engine.allpairs`, not here. A router does not
change once made: estimating with it leaves it as it was.

The result is a list of (resource, bytes, flow) entries; :mod:`topo.engine.contention` turns it into times.
"""

from __future__ import annotations

import numpy as np

from ..errors import TopoError, Unreachable
from ..fabric.fabric import Fabric
from ..fabric.levels import Level, PathSlots
from .ecmp import ECMP_MODES, HashedECMP, spread_over_cables
from .paths import Paths
from .route_parts import ScheduleParts
from .routed import Routed

__all__ = ["Router", "Routed", "ECMP_MODES", "MAX_ROUTED_PARTS"]

MAX_ROUTED_PARTS = 16_000_000  # flows x hashed sub-flows routed at once (about 1.3 GB of path table)


class Router(HashedECMP, ScheduleParts):
    """Routes flows on one fabric; defines the resource space (directed links plus ECMP aggregates).

    Hashed ECMP's switch hops come from :class:`topo.engine.ecmp.HashedECMP`, the non-flow parts of a schedule
    from :class:`topo.engine.route_parts.ScheduleParts`.

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
        # per original flow: the latency of its (first) part; bytes summed. One part per flow (no sub-flows): a
        # part's row is its flow's id, so neither is looked up (fast67: the same arrays, two gathers fewer per entry)
        if self.subflows > 1:
            latency = np.zeros(F)
            latency[flow_id] = lat_parts
            flow = flow_id[rows].astype(np.int32)
        else:
            latency, flow = lat_parts, rows.astype(np.int32)
        return Routed(res=res, weight=part_bytes[rows], flow=flow, num_flows=F,
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
            ih = i[hop]
            cols[ih, S.TO_NVSWITCH] = 2 * (nv + s[hop])
            cols[ih, S.TO_PROXY] = 2 * (nv + send.proxy[hop]) + 1
            back = recv.nic_gpu != d  # the receiving NIC is not beside the destination (a failed NIC's stand-in)
            if back.any():
                ib = i[back]
                cols[ib, S.back_to_nvswitch] = 2 * (nv + recv.nic_gpu[back])
                cols[ib, S.back_to_gpu] = 2 * (nv + d[back]) + 1
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
        apart = ls != ld
        if not np.any(apart):
            return
        if L.num_tiers == 1:
            k = int(np.flatnonzero(apart)[0])
            raise Unreachable(f"GPU {int(src[k])} cannot reach GPU {int(dst[k])}: their NICs sit on different "
                            "leaves and the fabric has no spine" + ("; turn PXN on" if not self.pxn else ""),
                            key="fabric.tiers")
        if L.rail_groups > 1:
            bad = apart & (f.nic_rail(send.nic) != f.nic_rail(recv.nic))
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
                iu = i[use]
                cols[iu, S.up(k)] = self.aggregate_start(k) + agg_s[k][use]
                cols[iu, S.down(k)] = self.aggregate_start(k, True) + agg_d[k][use]
            return
        for k, use, up, down in self.hashed_hops(ls, ld, send.nic, recv.nic, sub, src, dst, (agg_s, agg_d)):
            iu = i[use]
            cols[iu, S.up(k)] = up
            cols[iu, S.down(k)] = down

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
            out[2 * ids] += spread_over_cables(res_loads[up:up + na], self.alive[sl])
            out[2 * ids + 1] += spread_over_cables(res_loads[down:down + na], self.alive[sl])
        return out

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
                return self._describe_aggregate(k, int(r - (down_start if down else up)), down)
        raise IndexError(r)  # pragma: no cover

    def _describe_aggregate(self, k: int, g: int, down: bool) -> dict:
        """An ECMP aggregate named by a real cable of it (walk18: ``spines_of_group_0->cores`` could be neither
        failed nor looked up): ECMP loads its working cables equally, so its first working cable is as loaded as
        any; ``aggregate`` says what it stands for."""
        f, L = self.fabric, self.fabric.layout
        per = L.switches_per_aggregate(k) * L.tiers[k].up_ports
        sl = self._uplinks(k)
        first = sl.start + g * per
        alive = np.flatnonzero(self.alive[first:first + per])
        link = first + (int(alive[0]) if alive.size else 0)
        a, b = f._name(int(f.links["src"][link])), f._name(int(f.links["dst"][link]))
        lower, upper = L.tiers[k].name, L.tiers[k + 1].name
        if k == 0:
            whose = a
        else:
            block = L.tiers[k].block_name or "block"
            rails = L.rail_groups
            where = f"{block} {g // rails}" + (f", rail {g % rails}" if rails > 1 else "")
            first_switch = int(f.links["src"][first]) - int(f.switch_node(k, 0))
            whose = (f"the {lower}s of {where} ({lower}{first_switch} to "
                     f"{lower}{first_switch + L.switches_per_aggregate(k) - 1})")
        what = (f"{a}-{b} stands for the {per:,} {lower}-{upper} cables of {whose}, which ECMP loads equally"
                + ("" if alive.size == per else f" ({alive.size:,} working)"))
        src, dst = (b, a) if down else (a, b)
        return {"link": None, "src": src, "dst": dst, "level": f.level_names[Level.uplink(k).code],
                "direction": "down" if down else "up", "num_links": per, "aggregate": what}
