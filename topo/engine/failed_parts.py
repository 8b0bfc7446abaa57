"""Failed-part avoidance for hashed ECMP: at each tier boundary, a flow part whose hashed switch or cable lost
a part re-hashes over the next hops that still work, as a switch re-hashes over the routes it still has.

A switch above is a survivor for a flow part when a working cable joins it to both sides and the two sides still
meet through working parts at any depth above (:meth:`Survivors.meets`); a cable is a survivor when it works.
Where nothing is lost for a flow part, the pick is the intact fabric's (hash modulo the number of choices). The
NICs' failover (a failed NIC's stand-in) is :class:`topo.engine.paths.Paths`'; the capacity of what failed is
the router's (:class:`topo.engine.route.Router`).
"""

from __future__ import annotations

import numpy as np

from ..errors import Unreachable
from ..fabric.fabric import Fabric
from ..fabric.levels import Level
from .ecmp_hash import mod

__all__ = ["Survivors"]


class Survivors:
    """The working parts of a fabric's switch tiers, and hashed choices among them.

    Parameters
    ----------
    fabric : Fabric
        A fabric with failed parts.
    alive : numpy.ndarray
        Per link: True when it works (``fabric.link_alive``).
    """

    def __init__(self, fabric: Fabric, alive: np.ndarray):
        self.fabric = fabric
        self.alive = alive

    def cables_alive(self, k: int) -> np.ndarray:
        """The working cables of boundary ``k``.

        Parameters
        ----------
        k : int
            The tier boundary (cables from tier ``k`` up to tier ``k + 1``).

        Returns
        -------
        numpy.ndarray
            ``[lower switch, switch of its group above, cable]``: True where the cable works.
        """
        L = self.fabric.layout
        above = L.tiers[k + 1]
        return self.alive[self.fabric.level_slice(Level.uplink(k))].reshape(
            L.tiers[k].num_switches, above.switches_per_group, above.links_from_below)

    def meets(self, k: int, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """``[pair, j]``: whether switch ``j`` of group ``g1`` and switch ``j`` of group ``g2`` (groups of tier
        ``k + 1``) are the same switch or are joined by working parts above them, at any depth.

        Parameters
        ----------
        k : int
            The tier boundary below the groups.
        g1, g2 : numpy.ndarray
            Pairs of groups of tier ``k + 1``.

        Returns
        -------
        numpy.ndarray
            ``[pair, j]`` booleans.
        """
        L = self.fabric.layout
        s = L.tiers[k + 1].switches_per_group
        out = np.repeat((g1 == g2)[:, None], s, axis=1)
        diff = np.flatnonzero(g1 != g2)
        if diff.size == 0 or k + 2 >= L.num_tiers:  # tier k + 1 is the top: two of its switches never meet
            return out
        n2 = int(L.tiers[k + 1].logical_switches // s) + 1
        pairs, inv = np.unique(g1[diff] * n2 + g2[diff], return_inverse=True)
        u = ((pairs // n2)[:, None] * s + np.arange(s)).ravel()
        v = ((pairs % n2)[:, None] * s + np.arange(s)).ravel()
        out[diff] = self._joined(k + 1, u, v).reshape(pairs.size, s)[inv.ravel()]
        return out

    def _joined(self, t: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Whether switches ``u`` and ``v`` of tier ``t`` (below the top, different) reach a common switch above
        through working cables: some switch ``j`` of their groups above with a working cable from both that
        still meets (:meth:`meets`)."""
        L = self.fabric.layout
        via = self.cables_alive(t).any(axis=2)
        ok = via[u] & via[v]
        ok &= self.meets(t, L.upper_group(t, u), L.upper_group(t, v))
        return ok.any(axis=1)

    def pick(self, k, xs, xd, gs, gd, hj, hashes, use, src, dst):
        """Hashed ECMP over the live next hops at boundary ``k``, as a switch re-hashes over the routes it still
        has: a switch above (``j`` of groups ``gs`` and ``gd``) with a working cable from both sides from which the
        two sides still meet through working parts at any depth above (:meth:`meets`), then a working cable on
        each side, each picked by hash among the survivors. Where nothing is lost for a flow part, the pick is the
        intact fabric's (hash modulo the number of choices); only the others build their rows of survivors.

        Parameters
        ----------
        k : int
            The tier boundary.
        xs, xd : numpy.ndarray
            The switches of tier ``k`` on the sending and the receiving side of each flow part.
        gs, gd : numpy.ndarray or None
            Their groups of tier ``k + 1`` (None at the top, where both sides climb to the same switches).
        hj : numpy.ndarray
            The switch-above hash values of the flow parts (:meth:`topo.engine.ecmp_hash.Hashes.switch`).
        hashes : topo.engine.ecmp_hash.Hashes
            All the hash values of the flow parts, of which ``use`` are these.
        use : slice or numpy.ndarray
            The flow parts (of ``hashes``, ``src`` and ``dst``) still going up.
        src, dst : numpy.ndarray
            The GPUs of every flow part (named in errors).

        Returns
        -------
        tuple
            ``(j, ku, kd)``: the switch above of each part's group, and its up and down cable (0 where there is
            one cable per switch pair).

        Raises
        ------
        Unreachable
            No working switch or cable joins some part's two sides.
        """
        f = self.fabric
        above = f.layout.tiers[k + 1]
        s_k, m_k = above.switches_per_group, above.links_from_below
        cab = self.cables_alive(k)
        via = cab.any(axis=2)  # [lower switch, switch above]: some cable works
        meets, pidx, full = self._routes_whole(k, xs, xd, gs, gd, via.all(axis=1))
        j = mod(hj, s_k)
        bad = np.flatnonzero(~full)

        def rows(b):  # flow parts of src and dst
            return b if isinstance(use, slice) else use[b]

        if bad.size:
            valid = via[xs[bad]] & via[xd[bad]] & meets[pidx[bad]]
            j[bad] = _pick_alive(hj[bad], valid, above.name, src[rows(bad)], dst[rows(bad)], f)
        if m_k == 1:  # the one cable of the switch pair chosen works (it was a choice because it does)
            return j, 0, 0
        whole = cab.all(axis=2)  # [lower switch, switch above]: every cable works
        out = []
        for x, down in ((xs, False), (xd, True)):
            h = hashes.cable(k, down)[use]
            kk = mod(h, m_k)
            bad = np.flatnonzero(~whole[x, j])
            if bad.size:
                kk[bad] = _pick_alive(h[bad], cab[x[bad], j[bad]], "cable", src[rows(bad)], dst[rows(bad)], f)
            out.append(kk)
        return j, out[0], out[1]

    def _routes_whole(self, k, xs, xd, gs, gd, whole_s):
        """For the flow parts of :meth:`pick`: ``(meets, pidx, full)``, whether each pair of groups present meets
        through switch ``j`` above ([pair, j]), each part's pair, and whether nothing is lost for it (all cables of
        both its lower switches work, ``whole_s``, and its pair meets through every switch above)."""
        if gs is None:  # the top: both sides climb to the same switches
            s_k = self.fabric.layout.tiers[k + 1].switches_per_group
            return np.ones((1, s_k), dtype=bool), np.zeros(xs.size, dtype=np.int64), whole_s[xs] & whole_s[xd]
        above = self.fabric.layout.tiers[k + 1]
        ng = int(above.logical_switches // above.switches_per_group)
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
        meets = self.meets(k, present // ng, present % ng)  # [pair present, j]
        return meets, pidx, whole_s[xs] & whole_s[xd] & meets.all(axis=1)[pidx]


def _pick_alive(h: np.ndarray, valid: np.ndarray, what: str, src, dst, fabric) -> np.ndarray:
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
