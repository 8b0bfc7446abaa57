"""The parts of a schedule a router loads other than plain flows: transfers split over a GPU's NICs, NVLS's
in-switch reduction, SHARP's in-network reduction trees, and flows given in chunks kept only as their summed loads
(bounded memory however many flows there are).

A mix-in of :class:`topo.engine.route.Router`: it routes through the router's ``route`` and reads its ``fabric``,
``paths``, ``res_latency_s`` and ``num_res``.
"""

from __future__ import annotations

import numpy as np

from ..fabric.levels import Level
from .profile_data import in_network_reduction
from .routed import Routed
from .schedule import AlgorithmUnavailable, Transfers

__all__ = ["ScheduleParts"]


class ScheduleParts:
    """Routing the parts of a schedule that are not plain flows (a mix-in of :class:`topo.engine.route.Router`)."""

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
                                       + _sharp_hint(f.spec.fabric.technology))
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

def _direct(res: np.ndarray, weight: float, latency: np.ndarray) -> Routed:
    """Loads put straight on directed links ``res`` (one flow each)."""
    n = res.size
    return Routed(res=res, weight=np.full(n, float(weight)), flow=np.arange(n), num_flows=n,
                  flow_bytes=np.full(n, float(weight)), latency_s=latency, network=np.ones(n, dtype=bool))


def _sharp_hint(technology: str) -> str:
    """What a fabric without in-network reduction may do about it: where the technology's switches can reduce (its
    network file's ``in_network_reduction``, InfiniBand's: NVIDIA SHARP lists only Quantum, Quantum-2, Quantum-3
    switches), turn SHARP on for the tiers; on any other network, nothing a spec field can change (the spec loader
    refuses ``sharp = true`` there)."""
    if in_network_reduction(technology)[0]:
        return "(set sharp = true on their tier)"
    return f"(SHARP runs on InfiniBand Quantum switches; this fabric's technology is {technology})"

