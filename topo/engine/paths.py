"""The path of a flow, in two halves: the one home of "which NIC, which proxy GPU, which host link, which cables".

A route between GPUs in different NVLink domains of a folded Clos is the *sending half* of its source and the
*receiving half* of its destination, joined at the lowest tier where they meet:

- receiving half of destination ``d`` (with NIC ``choice`` when ``d`` has several NICs): the NIC beside ``d`` (or,
  when it failed, the next working NIC of its server), the host link (PCIe) into it, the GPU beside that NIC (``d``
  itself unless a stand-in NIC forwards over NVLink), its leaf;
- sending half of source ``s`` towards that NIC: with PXN (NCCL's default where rails matter) the NIC of ``s``'s
  server on the receiving NIC's rail, reached over NVLink through the GPU beside it (the *proxy*); without PXN
  the NIC beside ``s``; then its host link and its leaf;
- between the two leaves: one up cable and one down cable per tier boundary crossed. Boundary ``k`` (tier ``k`` to
  ``k + 1``) is crossed when the two leaves sit in different aggregates of tier ``k`` (different leaves for
  ``k = 0``, different (pod, rail group) for ``k = 1``, ...; see :mod:`topo.fabric.layout`). Which cables is the
  router's ECMP policy (:mod:`topo.engine.route`).

Every user of a path (collectives routing, the all-to-all loads from counts, the all-to-all flow classes, failures
and NIC failover) gets it from :class:`Paths`; the hop slots of a routed path table are named by
:class:`topo.fabric.levels.PathSlots`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import Unreachable
from ..fabric.fabric import Fabric
from ..fabric.levels import Level, PathSlots

__all__ = ["Paths", "Sending", "Receiving", "stand_in_notes"]


@dataclass
class Receiving:
    """The receiving halves of flows (arrays, one entry per flow)."""

    gpu: np.ndarray  # the destination GPU
    nic: np.ndarray  # the NIC the data arrives through
    nic_gpu: np.ndarray  # the GPU beside that NIC (the destination unless a stand-in NIC forwards over NVLink)
    pcie: np.ndarray  # link id of the host link into the destination side
    leaf: np.ndarray


@dataclass
class Sending:
    """The sending halves of flows (arrays, one entry per flow)."""

    gpu: np.ndarray  # the source GPU
    nic: np.ndarray  # the NIC the data leaves through
    proxy: np.ndarray  # the GPU beside that NIC (the source unless PXN or a stand-in NIC moves it over NVLink)
    pcie: np.ndarray  # link id of the host link out of the source side
    leaf: np.ndarray


class Paths:
    """Both halves of every route on ``fabric`` (see the module doc), with NIC failover when parts failed."""

    def __init__(self, fabric: Fabric, pxn: bool):
        self.fabric = fabric
        self.pxn = bool(pxn)
        self.slots = PathSlots(fabric.layout.num_tiers)
        self.alive = fabric.link_alive
        self._pcie0 = fabric.level_start(Level.PCIE)
        self._nic0 = fabric.level_start(Level.NIC)

    # --- index tables (fast67): the fabric's own index arithmetic, done once for every GPU, NIC and leaf ---------
    # A router routes millions of flows per estimate on one fabric that does not change; each flow's NIC, leaf and
    # aggregates were divisions and remainders of its GPU id, now one gather from a table those same functions filled
    # (the same integers, so the same routes and loads bit for bit). Failures are not in them: failover is applied to
    # the looked-up NICs afterwards, as before.
    @cached_property
    def _nic_table(self) -> np.ndarray:
        """``(choices, gpus)``: :meth:`Fabric.gpu_nic` of every GPU for each NIC choice that differs."""
        L = self.fabric.layout
        k = max(1, L.nics_per_server // L.gpus_per_server)
        gpus = np.arange(L.num_gpus)
        return np.stack([self.fabric.gpu_nic(gpus, c) for c in range(k)])

    @cached_property
    def _nic_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`Fabric.nic_gpu` and :meth:`Fabric.nic_leaf` of every NIC."""
        nics = np.arange(self.fabric.layout.num_nics)
        return self.fabric.nic_gpu(nics), self.fabric.nic_leaf(nics)

    @cached_property
    def _aggregate_tables(self) -> list[np.ndarray]:
        """:meth:`topo.fabric.layout.Layout.leaf_aggregate` of every leaf, for every tier."""
        L = self.fabric.layout
        leaves = np.arange(L.tiers[0].num_switches)
        return [L.leaf_aggregate(k, leaves) for k in range(L.num_tiers)]

    def gpu_nic(self, gpu, choice=0) -> np.ndarray:
        """:meth:`Fabric.gpu_nic` by table: a NIC beside each GPU, ``choice`` picking one where it has several.

        Parameters
        ----------
        gpu : int or ndarray
            GPU ids.
        choice : int or ndarray
            Which of a GPU's NICs (taken modulo the NICs it has).

        Returns
        -------
        ndarray
            NIC ids, as :meth:`Fabric.gpu_nic` computes them (the table is filled by it once per router).
        """
        t = self._nic_table
        return t[0][gpu] if t.shape[0] == 1 else t[np.asarray(choice) % t.shape[0], gpu]

    def nic_gpu(self, nic) -> np.ndarray:
        """:meth:`Fabric.nic_gpu` by table.

        Parameters
        ----------
        nic : int or ndarray
            NIC ids.

        Returns
        -------
        ndarray
            The GPU beside each NIC, as :meth:`Fabric.nic_gpu` computes it.
        """
        return self._nic_tables[0][nic]

    def nic_leaf(self, nic) -> np.ndarray:
        """:meth:`Fabric.nic_leaf` by table.

        Parameters
        ----------
        nic : int or ndarray
            NIC ids.

        Returns
        -------
        ndarray
            The leaf each NIC's cable reaches, as :meth:`Fabric.nic_leaf` computes it (failover is applied after).
        """
        return self._nic_tables[1][nic]

    # --- the host side ------------------------------------------------------------------------------------
    def pcie_link(self, nic: np.ndarray, gpu: np.ndarray) -> np.ndarray:
        """Link id of the host link between ``gpu`` and ``nic`` (one per NIC, or one per GPU when GPUs share one).

        Parameters
        ----------
        nic, gpu : numpy.ndarray
            Global NIC and GPU ids.

        Returns
        -------
        numpy.ndarray
            Link ids.
        """
        return self._pcie0 + (nic if self.fabric.pcie_per_nic else gpu)

    def nic_link(self, nic) -> np.ndarray:
        """Link id of each NIC's cable to its leaf.

        Parameters
        ----------
        nic : array_like of int

        Returns
        -------
        numpy.ndarray
            Link ids.
        """
        return self._nic0 + np.asarray(nic)

    def receiving(self, d: np.ndarray, choice=0, failover: bool = True) -> Receiving:
        """The receiving half of each destination GPU ``d``.

        Parameters
        ----------
        d : numpy.ndarray
            Destination GPU ids.
        choice : int or array
            Which of a GPU's NICs, when it has several.
        failover : bool
            Move a failed NIC's traffic to the next working NIC of its server.

        Returns
        -------
        Receiving
        """
        f = self.fabric
        nic = self.gpu_nic(d, choice)
        if failover and f.failed is not None:
            nic = self.alive_nics(nic, d)
        return self._receiving(d, nic)

    def _receiving(self, d, nic) -> Receiving:
        f = self.fabric
        if f.pcie_per_nic:
            at = self.nic_gpu(nic)
            pcie = self.pcie_link(nic, at)
        else:
            at = np.where(self.gpu_nic(d) == nic, d, self.nic_gpu(nic))
            pcie = self.pcie_link(nic, at)
        return Receiving(d, nic, at, pcie, self.nic_leaf(nic))

    def pxn_rail(self, d: np.ndarray, choice: int = 0) -> np.ndarray:
        """PXN's rail towards destination ``d``: the index on its server of ``d``'s own NIC, before any failover,
        as NCCL picks a sender's NIC (:meth:`endpoints`).

        Parameters
        ----------
        d : numpy.ndarray
            Destination GPU ids.
        choice : int
            Which of a GPU's NICs, where it has several.

        Returns
        -------
        numpy.ndarray
            The rail (NIC index on its server) per destination.
        """
        return self.fabric.nic_rail(self.gpu_nic(d, choice))

    def sending_nic(self, s: np.ndarray, rail_or_choice) -> np.ndarray:
        """The NIC each source sends through: with PXN its server's NIC on rail ``rail_or_choice`` (the receiving
        NIC's), without PXN the NIC beside it (``rail_or_choice`` is then the NIC choice).

        Parameters
        ----------
        s : numpy.ndarray
            Source GPU ids.
        rail_or_choice : int or array

        Returns
        -------
        numpy.ndarray
            Global NIC ids.
        """
        f = self.fabric
        if self.pxn:
            return f.gpu_server(s) * f.layout.nics_per_server + rail_or_choice
        return self.gpu_nic(s, rail_or_choice)

    def sending(self, s: np.ndarray, nic: np.ndarray) -> Sending:
        """The sending half of each source GPU ``s`` through NIC ``nic`` of its server.

        Parameters
        ----------
        s, nic : numpy.ndarray
            Source GPU ids and the NICs they send through.

        Returns
        -------
        Sending
        """
        f = self.fabric
        if f.pcie_per_nic:
            proxy = self.nic_gpu(nic)
        else:
            proxy = np.where(self.gpu_nic(s) == nic, s, self.nic_gpu(nic))
        return Sending(s, nic, proxy, self.pcie_link(nic, proxy), self.nic_leaf(nic))

    def endpoints(self, s: np.ndarray, d: np.ndarray, choice) -> tuple[Sending, Receiving]:
        """Both halves of flows ``s[i] -> d[i]`` between NVLink domains, NIC failover included.

        Parameters
        ----------
        s, d : numpy.ndarray
            Source and destination GPU ids.
        choice : int or array
            NIC choice per flow.

        Returns
        -------
        tuple of Sending and Receiving
        """
        f = self.fabric
        recv = self.receiving(d, choice)
        # with PXN the rail is the destination's own NIC's, before its failover: NCCL picks a sender's NIC on its
        # own server (NVIDIA/nccl@5067397c src/graph/search.cc ncclTopoGetNetDev, lines 1400-1470): for ring and
        # tree channels its own graph's NIC of the channel (graph->inter), for p2p the NIC local to its GPU of the
        # peer's device index (NCCL_P2P_PXN_LEVEL 2); neither reads where the peer's traffic fails over to
        nic_s = self.sending_nic(s, self.pxn_rail(d, choice) if self.pxn else choice)
        if f.failed is not None:
            nic_s = self.alive_nics(nic_s, s)
            if self.pxn and f.layout.rail_groups > 1:
                nic_s, nic_d = self._common_rail(nic_s, recv.nic, s, d)
                recv = self._receiving(d, nic_d)
        return self.sending(s, nic_s), recv

    # --- the switch side ------------------------------------------------------------------------------------
    def aggregates(self, leaf: np.ndarray) -> list[np.ndarray]:
        """For each tier boundary ``k`` (0 to tiers - 2), the aggregate of tier ``k`` above each leaf: a flow
        between two leaves crosses boundary ``k`` exactly when these differ.

        Parameters
        ----------
        leaf : numpy.ndarray
            Leaf ids.

        Returns
        -------
        list of numpy.ndarray
            One array of aggregate ids per boundary.
        """
        return [t[leaf] for t in self._aggregate_tables[:-1]]

    def top_aggregate(self, leaf: np.ndarray) -> np.ndarray:
        """The aggregate of the top tier above each leaf: two leaves in different ones cannot reach each other
        (rail-only: different rails).

        Parameters
        ----------
        leaf : numpy.ndarray

        Returns
        -------
        numpy.ndarray
        """
        return self._aggregate_tables[-1][leaf]

    # --- NIC failover ---------------------------------------------------------------------------------------
    def nic_ok(self, nic: np.ndarray) -> np.ndarray:
        """Whether each NIC works: its link to the leaf and its host link.

        Parameters
        ----------
        nic : numpy.ndarray

        Returns
        -------
        numpy.ndarray of bool
        """
        f = self.fabric
        return self.alive[self.nic_link(nic)] & self.alive[self.pcie_link(nic, f.nic_gpu(nic))]

    def alive_nics(self, nic: np.ndarray, gpu: np.ndarray) -> np.ndarray:
        """Each NIC, or the next working NIC of its server when its host link or leaf link failed.

        Parameters
        ----------
        nic, gpu : numpy.ndarray
            NICs, and the GPUs they serve (named in the error).

        Returns
        -------
        numpy.ndarray
            NIC ids.

        Raises
        ------
        Unreachable
            No NIC of a server reaches a switch (its NICs, their cables or its leaf failed).
        """
        f = self.fabric
        N = f.layout.nics_per_server
        ok = self.nic_ok(nic)
        if ok.all():
            return nic
        bad = np.flatnonzero(~ok)
        server, rail = nic[bad] // N, nic[bad] % N
        cand = server[:, None] * N + (rail[:, None] + np.arange(1, N)[None, :]) % N
        good = self.nic_ok(cand)
        if not good.any(axis=1).all():
            k = int(np.flatnonzero(~good.any(axis=1))[0])
            raise Unreachable(f"GPU {int(gpu[bad[k]])} is cut off: no NIC of server {int(server[k])} reaches a switch "
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
        good = self.nic_ok(cs) & self.nic_ok(cd)
        if not good.any(axis=1).all():
            k = int(np.flatnonzero(~good.any(axis=1))[0])
            raise Unreachable(f"GPU {int(src[off[k]])} cannot reach GPU {int(dst[off[k]])} in a rail-only fabric: no "
                            f"rail has a working NIC at both servers (failures: {', '.join(f.failures)})", key="fail")
        pick = np.argmax(good, axis=1)
        nic_s, nic_d = nic_s.copy(), nic_d.copy()
        nic_s[off] = cs[np.arange(off.size), pick]
        nic_d[off] = cd[np.arange(off.size), pick]
        return nic_s, nic_d


def failed_nic_stand_ins(paths: Paths) -> tuple[np.ndarray, np.ndarray] | None:
    """The failed NICs and the working NIC of each one's server that stands in for it (:meth:`Paths.alive_nics`).

    Parameters
    ----------
    paths : Paths

    Returns
    -------
    tuple of numpy.ndarray or None
        ``(failed, stand_in)`` NIC indices, or None when no NIC failed or a server lost every NIC (the routing
        refuses that).
    """
    f = paths.fabric
    if f.failed is None:
        return None
    nic = np.arange(f.layout.num_nics)
    bad = nic[~paths.nic_ok(nic)]
    if bad.size == 0:
        return None
    try:
        return bad, paths.alive_nics(bad, f.nic_gpu(bad))
    except Unreachable:
        return None


def stand_in_notes(paths: Paths, most: int = 3) -> list[str]:
    """What a failed NIC's traffic does, in words: its server's GPUs send and receive through the next working NIC
    (:meth:`Paths.alive_nics`), over NVLink; with PXN the other servers' GPUs keep sending on their own NIC of the
    failed one's index, as NCCL picks a sender's NIC on its own server (:meth:`Paths.endpoints`), without PXN on
    each sending GPU's own NIC (the same NIC for a ring's or tree's channel, not for an all-to-all); in a rail-only
    fabric with PXN no spine joins two rails, so they move to the stand-in's rail (``Paths._common_rail``).

    Parameters
    ----------
    paths : Paths
    most : int
        The failed NICs named at most.

    Returns
    -------
    list of str
        One note, or none when no NIC failed or a server lost every NIC (the routing refuses that).
    """
    f = paths.fabric
    pairs = failed_nic_stand_ins(paths)
    if pairs is None:
        return []
    bad, to = pairs
    first = f.node_offset["nic"]
    names, subs = f.node_names(first + bad[:most]), f.node_names(first + to[:most])
    moved = ", ".join(f"{a} -> {b}" for a, b in zip(names, subs)) + (", ..." if bad.size > most else "")
    text = f"failed NICs' traffic rerouted to the next working NIC of their server, over NVLink ({moved})"
    N = f.layout.nics_per_server
    if paths.pxn and f.layout.rail_groups > 1:
        text += (f"; rail-only: no spine joins two rails, so the other servers send to a stand-in from their NIC "
                 f"of its rail (to {subs[0]}: nic<server>.{int(to[0] % N)})")
    elif paths.pxn:
        text += (f"; the other servers send to it from their own NIC of the failed one's index (to {subs[0]}: "
                 f"nic<server>.{int(bad[0] % N)}), as NCCL picks a sender's NIC on its own server")
    else:
        text += "; without PXN the other servers' GPUs send to it from each GPU's own NIC"
    return [text]
