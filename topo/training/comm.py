"""The one door from the workload to the collective engine (:func:`topo.engine.estimate.estimate`).

Every group of a dimension runs at once: a group matrix ``M [num_groups, group_size]`` of GPU ids goes to the
engine as ``ranks=M.ravel(), groups=M.shape[0], group_layout="blocked", rank_order="given"``, so the links the
groups share are loaded by all of them together.

Speed: routing is the expensive part and a size after it is arithmetic, so each (collective, group matrix) is
routed and costed once (:func:`topo.engine.estimate.evaluate`) and cached; every size is then read exactly from the
cached evaluation (no interpolation). A search over hundreds of layouts reuses the same few matrices.

A reduce-scatter and an all-gather of the same size on the same groups take the same time and load the same
links in the engine (NCCL runs both as a ring of p - 1 steps of S/p; checked by ``tests/test_training_comm.py``
on four bundled fabrics), so the adapter routes one curve for both (``SAME_CURVE``): at 100k GPUs each routing
costs about a second.

Symmetry: when every group lies inside one block of a switch tier above the leaves (a pod, an island) and each
block holds a translate of the first block's groups, the fabric's blocks are alike (same subtree, ideal ECMP, no
failures) and no flow leaves its block, so every block's links carry the first block's loads shifted: the time
is the first block's. :meth:`CommEngine.time` routes only those groups (at 100k GPUs in 56 pods, an expert
all-to-all of 1,568 groups costs the routing of 28); link loads (:meth:`CommEngine.link_loads`) route them all.

Row order: the groups of a matrix run at once and their loads add on the links they share; the engine reads
the first group alone for the communicator's shape (its NVLink domains, multi-node NVLink, the algorithms'
domain runs: ``topo/engine/estimate.py``, ``algorithms/ring.py``, ``tree.py``), so its time does not depend on
the order of the other rows. Different layouts (rank orders, expert vs data ranks) often give the same groups in
another row order; the adapter keeps the first row and sorts the others by their first GPU (the groups of one
dimension are disjoint, so their first GPUs differ), and routes each such matrix once.
``tests/test_training_comm_rows.py`` checks the times equal the engine's on the matrix as given, to 1e-9, on
three fabrics.

Memory: each routed evaluation is kept with its loads summed over phases (:meth:`Evaluation.summed
<topo.engine.estimate.Evaluation.summed>`: the same times, bottlenecks and traffic-mix loads, bit for bit): PAT's
all-gather over 100,352 GPUs holds one phase's loads instead of 13 and no transfers (ring and PAT: 9 MiB instead of
110), which took the 100k search's peak from 3.5 GiB to 1.0 GiB.

Keep every call to the engine in this module: its keyword interface is being replaced by an options object.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..engine.estimate import Evaluation, evaluate, evaluate_unrouted
from ..engine.options import EstimateOptions
from ..engine.profiles import resolve_profile
from ..engine.route import Router
from ..errors import TopoError
from ..fabric.fabric import Fabric
from ..engine.result import LinkTable

__all__ = ["CommTime", "CommEngine", "SAME_CURVE", "engine_for"]

SAME_CURVE = {"reduce_scatter": "all_gather"}  # collectives the engine times identically (see above)
MAX_TIMES = 1 << 14
"""Collective times :meth:`CommEngine.time` keeps (a few MiB): the accuracy fit asks each run's collectives once per
candidate fraction, hundreds of times over, and a search each layout's several times."""
MAX_FLOORS = 256
"""Unrouted evaluations :meth:`CommEngine.time_floor` keeps (latency counts and a bound a candidate, no transfers)."""
MAX_KEYED = 1 << 16
"""Signatures :meth:`CommEngine.time` keeps by the caller's key of a group matrix (a tuple each): a search remaps
each layout it refines, and signing a 100k-GPU matrix again takes a ms."""



@dataclass(frozen=True)
class CommTime:
    """Time of one collective (every group at once) and the link that bounds it."""

    collective: str
    size_bytes: float
    time_s: float
    algorithm: str
    level: str | None  # the bottleneck's link level (tier): nvlink, pcie, nic-leaf, leaf-spine, ...
    link: str | None  # "src -> dst"
    utilization: float | None


class CommEngine:
    """Collective times on one fabric, cached per (collective, group matrix, stages), priced with one profile.

    ``profile``: what :func:`topo.engine.profiles.resolve_profile` takes (None: the fabric's own; a bundled name,
    ``ideal``, a file ``topo calibrate`` wrote). It is resolved once here, the one place a training step's profile
    enters the engine: every evaluation, traffic mix and profile read of the step (NCCL's channels and buffers)
    reads :attr:`profile`. :attr:`profile_given` keeps what was asked, for another fabric's engine (a region's
    other sites), where ``nccl`` or a file based on it resolves to that fabric's own.
    """

    def __init__(self, fabric: Fabric, *, algorithm: str = "auto", max_curves: int = 64, profile=None):
        self.fabric = fabric
        self.algorithm = algorithm
        self.profile_given = profile
        self.profile = resolve_profile(profile, fabric)
        # routed evaluations kept, oldest dropped first, up to max_curves of the whole fabric's size counted in
        # ranks routed (a first pod's groups count as a pod): a search's memory stays bounded
        self.max_curves = max_curves
        self._budget = max_curves * max(1, fabric.layout.num_gpus)
        self._held = 0
        self._curves: dict[tuple, Evaluation] = {}
        self.engine_calls = 0
        self.mix_cache: dict[tuple, tuple] = {}  # the step's traffic mix per members (topo.training.step)
        self._blocks: list[int] | None = None
        self._recent: dict[int, tuple] = {}
        self._parts: dict[tuple, tuple] = {}  # group matrix -> its first block's groups or None (bounded)
        self._router: Router | None = None  # one for every evaluation (a router does not change once made): each
        # cached evaluation holding its own cost ~24 MiB at 100k GPUs
        self._times: dict[tuple, CommTime] = {}  # (collective, canonical matrix's signature, size) -> its time
        # (bounded, oldest dropped first): a fit or a search asks for the same collective again and again
        self._floors: dict[tuple, Evaluation] = {}  # (collective, signature) -> unrouted evaluation (bounded)
        self._keyed: dict = {}  # a caller's key of a group matrix -> its canonical signature (bounded, MAX_KEYED)

    @property
    def router(self) -> Router:
        """The router every evaluation shares, with :class:`~topo.engine.options.EstimateOptions`' defaults."""
        if self._router is None:
            o = EstimateOptions()
            self._router = Router(self.fabric, ecmp=o.ecmp, subflows=o.subflows, pxn=o.pxn, salt=o.hash_seed)
        return self._router

    @staticmethod
    def signature(groups: np.ndarray) -> tuple:
        """``(shape, digest)`` of a group matrix: the cache key of its routing. GPU ids are digested as 32-bit
        integers when they fit (every fabric's do; SHA-256 of 400 KB: 0.2 ms, where BLAKE2b of the 64-bit ids took
        0.6 ms at 100,352 GPUs, a search digests thousands)."""
        g = np.asarray(groups)
        fits = g.size == 0 or (int(g.min()) >= -2**31 and int(g.max()) < 2**31)
        g = np.ascontiguousarray(g, dtype=np.int32 if fits else np.int64)
        return g.shape, g.dtype.itemsize, hashlib.sha256(g.data if g.size else b"").hexdigest()[:32]

    @staticmethod
    def canonical(groups: np.ndarray) -> np.ndarray:
        """``groups`` with its first row kept and the others sorted by their first GPU (the same groups, timed
        alike; see the module doc); unchanged when two rows share a first GPU (not disjoint groups) or the rows
        are in that order already."""
        G = np.ascontiguousarray(groups, dtype=np.int64)
        if G.ndim != 2 or G.shape[0] < 3:
            return G
        first = G[1:, 0]
        if np.all(first[1:] > first[:-1]):
            return G
        order = np.argsort(first, kind="stable")
        if np.any(first[order][1:] == first[order][:-1]) or np.any(first == G[0, 0]):
            return G
        return np.concatenate([G[:1], G[1:][order]])

    def _canonical(self, groups: np.ndarray) -> tuple[np.ndarray, tuple]:
        """:meth:`canonical` and its :meth:`signature`, remembered for the last few matrices (a step asks about
        each several times)."""
        hit = self._recent.get(id(groups))
        if hit is not None and hit[0] is groups and hit[1] is not None:
            return hit[1], hit[2]
        canon = self.canonical(groups)
        sig = self.signature(canon) if hit is None or hit[0] is not groups else hit[2]
        self._remember(groups, canon, sig)
        return canon, sig

    def _remember(self, groups: np.ndarray, canon: np.ndarray | None, sig: tuple) -> None:
        """Keep ``groups``' canonical matrix (None: not made yet) and signature by identity (the last 16)."""
        self._recent.pop(id(groups), None)
        if len(self._recent) >= 16:
            self._recent.pop(next(iter(self._recent)))
        self._recent[id(groups)] = (groups, canon, sig)  # the reference keeps the id from being reused

    def _signature_of(self, groups: np.ndarray, key=None) -> tuple:
        """The signature of ``groups``' canonical matrix (:meth:`_canonical`), without signing it again where the
        caller's ``key`` was given with it before: ``key`` names the matrix (equal keys, equal matrices; e.g.
        :meth:`topo.training.mapping.Mapping.group_key`)."""
        hit = self._recent.get(id(groups))
        if hit is not None and hit[0] is groups:
            return hit[2]
        sig = None if key is None else self._keyed.get(key)
        if sig is None:
            sig = self._canonical(groups)[1]
            if key is not None:
                if len(self._keyed) >= MAX_KEYED:
                    self._keyed.pop(next(iter(self._keyed)))
                self._keyed[key] = sig
        else:
            self._remember(groups, None, sig)
        return sig

    def _block_sizes(self) -> list[int]:
        """GPUs in one block of each switch tier above the leaves that has more than one block (smallest first);
        none on a fabric with failed parts (its blocks differ)."""
        if self._blocks is None:
            L = self.fabric.layout
            per_unit = L.num_gpus // L.num_units
            sizes = [L.units_per_block(t) * per_unit for t in range(1, L.num_tiers)]
            failed = self.fabric.failed is not None and bool(np.any(self.fabric.failed))
            self._blocks = [] if failed else [b for b in sizes if 0 < b < L.num_gpus and L.num_gpus % b == 0]
        return self._blocks

    def first_block(self, groups: np.ndarray) -> np.ndarray:
        """The groups of the first block when the matrix is a translate, block by block, of them (see the module
        doc); else ``groups``."""
        G = np.asarray(groups)
        for size in self._block_sizes():
            b = G // size
            if not np.all(b == b[:, :1]):
                continue
            first = b[:, 0]
            blocks, counts = np.unique(first, return_counts=True)
            if blocks.size < 2 or np.any(counts != counts[0]):
                return G
            order = np.argsort(first, kind="stable")
            stacked = G[order].reshape(blocks.size, counts[0], G.shape[1])
            shifted = stacked - ((blocks - blocks[0]) * size)[:, None, None]
            return stacked[0].copy() if np.array_equal(shifted, np.broadcast_to(stacked[:1], shifted.shape)) else G
        return G

    def _curve(self, collective: str, groups: np.ndarray, every_block: bool = False,
               cached_only: bool = False, sig: tuple | None = None) -> Evaluation | None:
        collective = SAME_CURVE.get(collective, collective)
        stages = groups.shape[1] if collective == "pipeline" else 2
        part = None if sig is None or every_block else self._parts.get(sig)
        if part is not None:  # its first block known by the signature: a held curve needs no canonical matrix
            ev = self._curves.get((collective, part[1], stages))
            if ev is not None or cached_only:
                return ev
        groups, sig = self._canonical(groups)
        if not every_block:
            groups, sig = self._first_block_of(groups, sig)
        key = (collective, sig, stages)
        ev = self._curves.get(key)
        if ev is None and cached_only:
            return None
        if ev is None:
            kw = {"stages": stages} if collective == "pipeline" else {}
            ev = evaluate(self.fabric, collective, router=self.router, ranks=groups.ravel(),
                          groups=int(groups.shape[0]), group_layout="blocked", rank_order="given",
                          algorithm=self.algorithm, profile=self.profile,
                          **kw).summed()  # kept with its loads summed over phases
            self.engine_calls += 1
            while self._curves and self._held + groups.size > self._budget:
                old = self._curves.pop(next(iter(self._curves)))
                self._held -= old.placement.groups.size
            self._curves[key] = ev
            self._held += groups.size
        return ev

    def _first_block_of(self, groups: np.ndarray, sig: tuple) -> tuple[np.ndarray, tuple]:
        """The canonical ``groups`` (signature ``sig``) reduced to their first block (:meth:`first_block`), and its
        signature; remembered per signature (a whole matrix is not kept here, only a first block)."""
        part = self._parts.get(sig)
        if part is None:
            if len(self._parts) >= 4096:
                self._parts.pop(next(iter(self._parts)))
            reduced = self.first_block(groups)
            part = self._parts[sig] = (reduced, self.signature(reduced)) if reduced is not groups else (None, sig)
        return part if part[0] is not None else (groups, sig)

    def time_floor(self, collective: str, groups: np.ndarray, size_bytes: float, key=None) -> float:
        """A lower bound on :meth:`time`'s seconds, routing nothing (:func:`topo.engine.estimate.evaluate_unrouted`
        on the first block, as :meth:`time` routes it): what a search bounds a layout's collectives with before
        they are routed. The unrouted evaluation is kept per (collective, group matrix); a size is arithmetic.
        ``key``: as :meth:`time`'s."""
        groups = np.asarray(groups)
        if groups.shape[1] < 2 or size_bytes <= 0:
            return 0.0
        collective = SAME_CURVE.get(collective, collective)
        part = self._parts.get(self._signature_of(groups, key))
        ev = None if part is None else self._floors.get((collective, part[1]))
        if ev is None:
            groups, sig = self._first_block_of(*self._canonical(groups))
            if len(self._floors) >= MAX_FLOORS:
                self._floors.pop(next(iter(self._floors)))
            ev = self._floors[(collective, sig)] = evaluate_unrouted(
                self.fabric, collective, router=self.router, ranks=groups.ravel(), groups=int(groups.shape[0]),
                group_layout="blocked", rank_order="given", algorithm=self.algorithm, profile=self.profile)
        got = ev.time(float(size_bytes))
        return 0.0 if got is None else float(got.time_s)

    def time(self, collective: str, groups: np.ndarray, size_bytes: float,
             cached_only: bool = False, key=None) -> CommTime | None:
        """``collective`` of ``size_bytes`` (nccl-tests' size: one rank's larger buffer) on every group of
        ``groups`` at once. Groups of one GPU, or zero bytes, take no time. ``cached_only``: None unless this
        collective on these groups was routed already (a search's cheap refinement of its bounds). ``key``: a
        hashable naming ``groups`` (equal keys only for equal matrices, e.g.
        :meth:`topo.training.mapping.Mapping.group_key`), by which the matrix's signature is kept: a matrix
        built again under the same key is not signed again."""
        groups = np.asarray(groups)
        if groups.shape[1] < 2 or size_bytes <= 0:
            return CommTime(collective, float(size_bytes), 0.0, "none", None, None, None)
        S = float(size_bytes)
        sig = self._signature_of(groups, key)
        held = (collective, sig, S)  # the signature holds the matrix's shape (its stages)
        hit = self._times.get(held)
        if hit is not None:  # held only once routed: cached_only's answer too (a search asks it thousands of times)
            return hit
        ev = self._curve(collective, groups, cached_only=cached_only, sig=sig)
        if ev is None:
            return None
        t, name, _, lat, bw = ev.time(S)
        b = ev.bottleneck(S, name, t, lat, bw)
        out = CommTime(collective, S, float(t), name, b.level if b else None,
                       f"{b.src} -> {b.dst}" if b else None, b.utilization if b else None)
        if len(self._times) >= MAX_TIMES:
            self._times.pop(next(iter(self._times)))
        self._times[held] = out
        return out

    def evaluation(self, collective: str, groups: np.ndarray) -> Evaluation | None:
        """The routed and costed ``collective`` on every group of ``groups`` (none reduced to a first block),
        cached as :meth:`time`'s: what a traffic mix of the step's collectives reuses
        (:attr:`topo.engine.traffic.Member.evaluation`). None when this engine pins an algorithm (a mix member
        chooses its own)."""
        if self.algorithm != EstimateOptions().algorithm:
            return None
        return self._curve(collective, np.asarray(groups), every_block=True)

    def link_loads(self, collective: str, groups: np.ndarray, size_bytes: float):
        """Per directed link bytes of one such collective at ``size_bytes`` (a pandas frame, as
        :meth:`topo.results.EstimateResult.link_loads`)."""
        ev = self._curve(collective, np.asarray(groups), every_block=True)
        t, name, *_ = ev.time(size_bytes)
        frame = LinkTable.of(self.fabric).frame(ev.link_bytes(size_bytes, name), t)
        frame.attrs.update({"size_bytes": size_bytes, "time_s": t, "algorithm": name})
        return frame


def engine_for(fabric: Fabric, engine: CommEngine | None, profile=None) -> CommEngine:
    """``engine``, or a new :class:`CommEngine` on ``fabric`` pricing with ``profile`` (None: the fabric's own).

    Parameters
    ----------
    fabric : Fabric
    engine : CommEngine or None
        A shared engine (a search's), which carries its own profile.
    profile : optional
        As :func:`topo.engine.profiles.resolve_profile` takes it; only without ``engine``.

    Returns
    -------
    CommEngine

    Raises
    ------
    TopoError
        Keyed ``profile``: both an engine and a profile given (the engine's profile would be the one used).
    """
    if engine is None:
        return CommEngine(fabric, profile=profile)
    if profile is not None:
        raise TopoError("is given with an engine, which prices with its own profile; give the profile to the "
                        "engine (CommEngine(fabric, profile=...)) or no engine", key="profile")
    return engine
