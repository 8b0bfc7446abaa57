"""ECMP over the uplinks of a tier boundary: spreading an aggregate's load over its cables (ideal ECMP, and the
expected loads of hashed ECMP), and hashed ECMP's switch hops flow part by flow part.

- ``ideal``: every flow is split evenly over all equal-cost paths, so its load is spread evenly over the working
  uplinks of an *aggregate* (a leaf; the spines of a pod and rail group; ...; see :mod:`topo.fabric.layout`).
  :func:`spread_over_cables` is that spreading, the one place it is written.
- ``hash``: each flow part is pinned to one path by a hash of its two NICs, its sub-flow index and the salt
  (:mod:`topo.engine.ecmp_hash`): at each tier boundary the hash picks the switch above (the same plane on both
  sides, so the two halves meet) and, independently, the up cable and the down cable
  (:meth:`HashedECMP.hashed_hops`); where parts failed, it re-hashes over the survivors
  (:mod:`topo.engine.failed_parts`).
"""

from __future__ import annotations

import numpy as np

from .ecmp_hash import Hashes, flow_key, mod
from .failed_parts import Survivors

__all__ = ["ECMP_MODES", "spread_over_cables", "HashedECMP"]

ECMP_MODES = ("ideal", "hash")


def spread_over_cables(agg_bytes: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Each aggregate's bytes split equally over its working cables: none on a failed cable.

    Parameters
    ----------
    agg_bytes : numpy.ndarray
        Bytes of each of the ``n`` aggregates of a tier boundary (one direction).
    alive : numpy.ndarray
        Whether each uplink of the boundary works, in link order: aggregate by aggregate, each with the same
        number of cables.

    Returns
    -------
    numpy.ndarray
        Bytes per cable, in the order of ``alive``; an aggregate with no working cable puts nothing anywhere.
    """
    n = agg_bytes.size
    ok = np.asarray(alive).reshape(n, -1).astype(float)
    share = ok / np.maximum(ok.sum(axis=1, keepdims=True), 1.0)
    return (np.asarray(agg_bytes, dtype=float)[:, None] * share).ravel()


class HashedECMP:
    """Hashed ECMP's switch hops, the part of :class:`topo.engine.route.Router` that hashes (a mix-in: it reads
    the router's ``fabric``, ``paths``, ``salt``, ``subflows``, ``alive`` and ``num_res``)."""

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
        hashes = Hashes(flow_key(nic_s, nic_d, sub, self.salt))
        survivors = None if f.failed is None else Survivors(f, self.alive)
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
                j = mod(hj, s_k)
                ku = kd = 0
                if m_k > 1:
                    ku = mod(hashes.cable(k, False)[use], m_k)
                    kd = mod(hashes.cable(k, True)[use], m_k)
            else:
                j, ku, kd = survivors.pick(k, xs, xd, gs, gd, hj, hashes, use, src, dst)
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
