"""Mapping a layout onto GPU ids: each parallel dimension's group matrix ``[num_groups, group_size]``.

The job's ranks are laid on GPUs ``first_gpu ..`` packed by NVLink domain, server, unit, pod (see
:mod:`topo.engine.placement`); with ``gpus_per_domain_used = N`` only the first N GPUs of each domain are used
(64 of an NVL72 rack's 72). The rank order lists dimensions from the fastest-varying rank to the slowest;
Megatron-LM's default ``tp-cp-ep-dp-pp`` puts a TP group on consecutive GPUs (one NVLink domain), then CP, then
data parallelism, and pipeline stages outermost (stage k = one block of GPUs). ``ep`` in the order is accepted
for Megatron's spelling and has no axis of its own: experts are folded over the ranks of each stage as
Megatron-Core does (``MoE parallel folding``): a stage's ranks, TP fastest, then CP, then DP, read as
``[edp, ep, etp]`` (etp fastest). So with etp = tp an EP group strides over data ranks (the old "EP carved out of
DP"), and with etp = 1 it runs over tensor and data ranks (TP2 EP64 DP32).

Groups: ``tp``, ``cp``, ``pp``, ``dp`` (dense weights' replicas), ``dpcp`` (data x context: the distributed
optimizer's and the gradient reduction's group), ``tpcp`` (tensor x context: the ranks that split one sequence,
Megatron-Core's ``tp_cp`` group, over which an MoE router reduces its token counts), ``tpdpcp`` (tensor x data x
context: Megatron-Core's amax reduction group, over which Transformer Engine's delayed FP8 scaling reduces its
amaxes, :mod:`.fp8_amax`), ``dps`` and ``dpr`` (with hybrid sharding, ``dp_shard``: a shard group of context x the
fastest ``dp_shard`` data ranks, and the replicas across them), ``ep``, ``etp``, ``edp`` (experts' replicas), ``edps``
and ``edpr`` (with the experts' hybrid sharding, ``expert_dp_shard``: the fastest ``expert_dp_shard`` of an expert's
replicas, and the replicas across them). Every
matrix is built with numpy reshapes and transposes, never a loop per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..dp_fill import placement_fields
from ..engine.paths import Paths
from ..errors import TopoError
from ..fabric.cut import cut_off_words, gpu_pieces
from ..fabric.failures import failed_gpu_ids, nvswitch_domains
from .parallel import ParallelLayout

__all__ = ["EXPERT_DP_GROUPS", "FEWER_GPUS", "FLEX_GROUP", "Mapping", "default_placement", "first_group_offsets",
           "first_group_reach", "free_gpus", "map_layout", "placed_gpus_used", "recipe_gpus_used", "refuse_failed_gpus", "refuse_failed_placement", "refuse_cut_off_servers", "refuse_cut_apart", "refuse_cut_off",
           "spare_domains_text"]

_DENSE = ("tp", "cp", "dp", "pp")
EXPERT_FOLD = ("dp", "cp", "tp")
"""How a stage's ranks are read as ``[edp, ep, etp]`` (Megatron-Core's MoE folding, the module doc): slowest
first, TP fastest, whatever the rank order."""
EXPERT_DP_GROUPS = ("edp", "edps", "edpr")
"""The groups over which the experts' data parallelism runs (its collectives report as ``dp_experts``)."""
FLEX_GROUP = "tpep"
"""The flex dispatcher's process group: Megatron-Core's ``tp_ep`` group, a stage's ``ep x etp`` expert ranks of one
expert-DP replica (an EP member's ``etp`` ranks together). ``MoEFlexTokenDispatcher`` hands it to DeepEP's and to
HybridEP's manager alike (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/moe/token_dispatcher.py`` lines
1836-1850, ``group=self.tp_ep_group``; ``_HybridEPManager``'s doc: "This should be the ETPxEP group"), and
``fused_a2a.py``'s ``init_hybrid_ep_buffer`` builds HybridEP's buffer over it (lines 340-347), whose
``allgather_routing_map`` gathers over the buffer's group (deepseek-ai/DeepEP@94a9f8f6
``csrc/hybrid_ep/executor/executor.cu`` lines 23-44). Its size is ``ep x etp`` (``step.group_degree``)."""


@dataclass(frozen=True)
class Mapping:
    """GPU ids of a job as an array with one axis per dense dimension (slowest first) and the expert view.

    Attributes
    ----------
    grid : numpy.ndarray
        GPU ids, axes ``axes`` (the rank order reversed: slowest first) of sizes tp, cp, dp, pp.
    experts : numpy.ndarray
        GPU ids ``[pp, edp, ep, etp]``.
    """

    grid: np.ndarray
    axes: tuple[str, ...]
    experts: np.ndarray
    gpus_per_domain: int
    dp_shard: int | None = None
    expert_dp_shard: int | None = None
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    """Each dimension's group matrix (read-only) and span, built once: a step and a search ask for them again."""

    def groups(self, dim: str) -> np.ndarray:
        """``[num_groups, group_size]`` GPU ids of dimension ``dim`` (see the module doc), read-only (kept for the
        next ask). Ranks inside a group follow the grid (the fastest-varying member first)."""
        got = self._memo.get(dim)
        if got is None:
            got = self._memo[dim] = self._groups(dim)
            got.flags.writeable = False
        return got

    def group_key(self, dim: str) -> tuple | None:
        """A key naming :meth:`groups` of ``dim`` (equal keys, equal matrices): what :func:`map_layout` read to
        build this mapping, and ``dim``; None for a mapping built otherwise. A :class:`.comm.CommEngine` keeps a
        matrix's signature by it (a search remaps each layout it refines: the matrices are new objects)."""
        key = self._memo.get(_MAP_KEY)
        return None if key is None else (key, dim)

    def _groups(self, dim: str) -> np.ndarray:
        if dim == FLEX_GROUP:  # [pp, edp, ep, etp]: an expert-DP replica's ep x etp ranks
            return self.experts.reshape(-1, self.experts.shape[2] * self.experts.shape[3])
        if dim in ("ep", "etp", "edp"):
            ax = {"edp": 1, "ep": 2, "etp": 3}[dim]
            rest = [i for i in range(4) if i != ax]
            return np.transpose(self.experts, rest + [ax]).reshape(-1, self.experts.shape[ax])
        if dim in ("dps", "dpr"):
            return self._hybrid_groups(dim)
        if dim == "emb":  # Megatron-LM's embedding group: the first and the last pipeline stage's rank alike placed
            ax = self.axes.index("pp")
            ends = np.take(self.grid, [0, self.grid.shape[ax] - 1], axis=ax)
            return np.moveaxis(ends, ax, -1).reshape(-1, 2)
        if dim in ("edps", "edpr"):
            return self._expert_hybrid_groups(dim)
        names = {"dpcp": ("cp", "dp"), "tpcp": ("tp", "cp"), "tpdpcp": ("tp", "cp", "dp")}.get(dim, (dim,))
        idx = sorted(self.axes.index(n) for n in names)
        rest = [i for i in range(self.grid.ndim) if i not in idx]
        moved = np.transpose(self.grid, rest + idx)
        size = int(np.prod([self.grid.shape[i] for i in idx]))
        return moved.reshape(-1, size)

    def _hybrid_groups(self, dim: str) -> np.ndarray:
        """Hybrid sharding's groups: ``dps`` a shard group (context x the ``dp_shard`` fastest data ranks),
        ``dpr`` the replicas of one shard position (the ``dp / dp_shard`` slow data ranks)."""
        dp = self.grid.shape[self.axes.index("dp")]
        S = self.dp_shard or dp
        ax = self.axes.index("dp")
        split = self.grid.reshape(self.grid.shape[:ax] + (dp // S, S) + self.grid.shape[ax + 1:])
        axes = list(self.axes[:ax]) + ["dpr", "dps"] + list(self.axes[ax + 1:])
        names = ("cp", "dps") if dim == "dps" else ("dpr",)
        idx = sorted(axes.index(n) for n in names)
        rest = [i for i in range(split.ndim) if i not in idx]
        size = int(np.prod([split.shape[i] for i in idx]))
        return np.transpose(split, rest + idx).reshape(-1, size)

    def _expert_hybrid_groups(self, dim: str) -> np.ndarray:
        """The experts' hybrid sharding groups: ``edps`` the fastest ``expert_dp_shard`` of an expert's replicas,
        ``edpr`` the replicas of one shard position across them."""
        pp, E, ep, etp = self.experts.shape
        S = self.expert_dp_shard or E
        split = self.experts.reshape(pp, E // S, S, ep, etp)  # [pp, edpr, edps, ep, etp]
        ax = 2 if dim == "edps" else 1
        rest = [i for i in range(5) if i != ax]
        return np.transpose(split, rest + [ax]).reshape(-1, split.shape[ax])

    def domains_spanned(self, dim: str) -> int:
        """NVLink domains the widest group of ``dim`` spans."""
        return self._scalar("span", dim, _widest_span)

    def members_in_domain(self, dim: str) -> float:
        """How many members of its own ``dim`` group a GPU finds in its own NVLink domain (itself included),
        averaged over the GPUs of one domain, in the domain where that is least: what an all-to-all over ``dim``
        keeps off the domain's NICs (each GPU sends ``1 - members / group size`` of its buffer out of the domain).

        Parameters
        ----------
        dim : str
            A group name (:meth:`groups`).

        Returns
        -------
        float
            Between 1 and the group size (the group size when every group lies inside one domain).
        """
        return self._scalar("members", dim, _fewest_members_in_domain)

    def _scalar(self, kind: str, dim: str, of) -> float:
        """``of(groups(dim), gpus_per_domain)``, built once per mapping and, for one :func:`map_layout` gave, kept
        by what it mapped (:data:`_SCALARS`, a few bytes each) after the mapping itself is dropped: a search
        remaps a layout each time it refines its bound, and the span of a group matrix of 100k GPUs takes ms."""
        got = self._memo.get((kind, dim))
        if got is None:
            key = self._memo.get(_MAP_KEY)
            got = None if key is None else _SCALARS.get((key, kind, dim))
            if got is None:
                got = of(self.groups(dim), self.gpus_per_domain)
                if key is not None:
                    while len(_SCALARS) >= SCALARS_KEPT:
                        _SCALARS.pop(next(iter(_SCALARS)))
                    _SCALARS[(key, kind, dim)] = got
            self._memo[(kind, dim)] = got
        return got

    def straddles(self, dim: str, used: int, first_gpu: int = 0, other: int | None = None,
                  skip: tuple[int, ...] = ()) -> tuple[int, int]:
        """NVLink domains the widest group of ``dim`` spans as placed (``used`` GPUs of each domain from
        ``first_gpu``), and as it would at ``other`` of each domain (default the largest power of two in it: 64 of
        an NVL72 rack's 72): the first above the second means the placement itself makes the group cross domains.

        Parameters
        ----------
        dim : str
            A group name (:meth:`groups`).
        used : int
            GPUs used of each domain (the layout's ``gpus_per_domain_used``).
        first_gpu : int
            The job's first GPU id.
        other : int, optional
            GPUs of each domain to compare with (default :func:`recipe_gpus_used` of ``used``).
        skip : tuple of int
            NVLink domains the placement passes over (the layout's ``skip_domains``).

        Returns
        -------
        tuple of int
            ``(domains spanned as placed, domains spanned at other's placement)``.
        """
        D = self.gpus_per_domain
        g = self.groups(dim)
        ranks = _placed_ranks(g, used, D, first_gpu, skip)  # the placement's inverse (map_layout's ids)
        p2 = recipe_gpus_used(used) if other is None else other
        return _widest_span(g, D), _widest_span(_placed_ids(ranks, p2, D, first_gpu, skip), D)


def recipe_gpus_used(gpus_per_domain: int) -> int:
    """GPUs of each NVLink domain production recipes use: the largest power of two in it (64 of an NVL72 rack's 72).

    Parameters
    ----------
    gpus_per_domain : int
        GPUs in a domain (or used of it).

    Returns
    -------
    int
        The largest power of two at most ``gpus_per_domain``.
    """
    return 1 << (int(gpus_per_domain).bit_length() - 1)


def _widest_span(ids: np.ndarray, gpus_per_domain: int) -> int:
    """NVLink domains the widest of the groups ``ids`` (one group a row of GPU ids) spans: the distinct domains of
    a row, counted as the changes between neighbours once the row is sorted. Rows whose domains never fall from one
    member to the next (every dense group: a grid's axes run up in GPU id) are sorted already, and the sort (most
    of the cost at 100k GPUs) is skipped for them."""
    if ids.shape[1] <= 1:
        return 1
    d = ids // gpus_per_domain
    step = np.diff(d, axis=1)
    if not (step >= 0).all():
        step = np.diff(np.sort(d, axis=1), axis=1)
    return int(1 + (step != 0).sum(axis=1).max())


def _fewest_members_in_domain(ids: np.ndarray, gpus_per_domain: int) -> float:
    """:meth:`Mapping.members_in_domain` of the groups ``ids`` (one group a row of GPU ids): a group with ``c``
    members in a domain gives each of them ``c``, so a domain's GPUs find ``sum c^2 / sum c`` on average; the least
    over the domains. Each row's domains sorted (skipped where they never fall, as :func:`_widest_span`), a run of
    equal domains is one ``c``."""
    d = ids // gpus_per_domain
    if ids.shape[1] > 1 and not (np.diff(d, axis=1) >= 0).all():
        d = np.sort(d, axis=1)
    flat = d.ravel()
    starts = np.ones(flat.size, dtype=bool)
    starts[1:] = flat[1:] != flat[:-1]
    starts[::ids.shape[1]] = True  # a new row starts a new run
    first = np.flatnonzero(starts)
    runs = np.diff(np.append(first, flat.size)).astype(np.float64)
    dom = flat[first]
    dom = dom - dom.min()
    s1, s2 = np.bincount(dom, runs), np.bincount(dom, runs * runs)
    held = s1 > 0
    return float((s2[held] / s1[held]).min())


def _placed_ids(ranks, used: int, gpus_per_domain: int, first_gpu: int = 0, skip: tuple[int, ...] = ()):
    """GPU ids of ``ranks`` placed ``used`` to each NVLink domain of ``gpus_per_domain`` from ``first_gpu`` (the
    placement :func:`map_layout` makes; an int or an array of ranks), passing over the domains ``skip`` lists (the
    layout's ``skip_domains``): the k-th domain of ranks is the k-th from ``first_gpu``'s not skipped."""
    D, start = gpus_per_domain, first_gpu // gpus_per_domain
    dom = start + ranks // used
    for s in sorted(set(skip)):  # ascending: each skipped domain at or below a slot's moves it one further
        if s >= start:
            dom = dom + (dom >= s)
    return first_gpu % D + dom * D + ranks % used


def _placed_ranks(ids, used: int, gpus_per_domain: int, first_gpu: int = 0, skip: tuple[int, ...] = ()):
    """The ranks :func:`_placed_ids` puts on GPU ``ids`` (its inverse; an id it gives no rank maps past them)."""
    D, start = gpus_per_domain, first_gpu // gpus_per_domain
    off = np.asarray(ids) - first_gpu % D
    dom = off // D
    passed = np.searchsorted(np.array(sorted(s for s in set(skip) if s >= start), dtype=np.int64), dom)
    return (dom - start - passed) * used + off % D


def _domains_from(first_gpu: int, gpus_per_domain: int, num_fabric_gpus: int, skip=()) -> int:
    """NVLink domains a job may use: those from ``first_gpu``'s to the fabric's last, less the ones ``skip`` lists
    (an index below the first GPU's or past the fabric skips nothing here; :func:`_refuse_idle_skip` and the
    placement's range check name it)."""
    start, total = first_gpu // gpus_per_domain, num_fabric_gpus // gpus_per_domain
    return total - start - len({s for s in skip if start <= s < total})


def free_gpus(num_fabric_gpus: int, gpus_per_domain: int, first_gpu: int = 0, skip_domains=(),
              gpus_per_domain_used: int | None = None) -> int:
    """GPUs a job that fills the fabric takes, as a scheduler runs it: every GPU from ``first_gpu`` to the fabric's
    last, less those of the NVLink domains ``skip_domains`` passes over (the domains :func:`_placed_ids` places
    ranks on at every GPU of each, the count :func:`default_placement` then picks for a job that needs more than a
    recipe's 64 of an NVL72 rack); with ``first_gpu`` 0 and no skip, every GPU of the fabric. With
    ``gpus_per_domain_used`` (a layout that names it), the most :func:`_placed_ids` places at that many a domain
    before the fabric's last GPU: what a job's placement holds on the fabric (skip72: a region's by-size shares are
    capped by it, :func:`~topo.training.multisite.site_shares`).

    Parameters
    ----------
    num_fabric_gpus, gpus_per_domain : int
        The fabric's GPUs and GPUs per NVLink domain.
    first_gpu : int, optional
        The job's first GPU id.
    skip_domains : iterable of int, optional
        NVLink domain indices the job passes over (the layout's ``skip_domains``).
    gpus_per_domain_used : int, optional
        The job's GPUs of each domain (None: every GPU of each, as :func:`default_placement` places a job that
        needs them).

    Returns
    -------
    int
        At least 0.
    """
    D = gpus_per_domain
    used = gpus_per_domain_used or D
    # the last domain's run from first_gpu's place in its domain: what reaches past the fabric's last GPU is not held
    over = max(0, first_gpu % D + used - D)
    return max(0, _domains_from(first_gpu, D, num_fabric_gpus, skip_domains) * used - over)


def default_placement(lay: ParallelLayout, gpus_per_domain: int, num_fabric_gpus: int
                      ) -> tuple[ParallelLayout, str | None]:
    """The layout as production recipes place it, with ``gpus_per_domain_used`` always set (what every later step
    reads the placement from), and a note saying so (None: the placement a user expects).

    On NVLink domains that are not a power of two (an NVL72 rack's 72 GPUs), recipes run the largest power of two
    of each domain (64 of 72: Megatron-Bridge's GB200 recipes), so that power-of-two TP, EP and DP groups stay
    inside a rack. A layout that names ``gpus_per_domain_used`` keeps it; a job too large for that many per
    domain uses every GPU (and the step's notes say when a group then straddles domains)."""
    D = gpus_per_domain
    if lay.gpus_per_domain_used is not None:
        return lay, None
    placed = lay.model_copy(update={"gpus_per_domain_used": placed_gpus_used(lay.gpus, D, num_fabric_gpus,
                                                                              lay.first_gpu, lay.skip_domains)})
    used = recipe_gpus_used(D)
    if used == D:  # a power-of-two domain: every GPU, the placement a user expects
        return placed, None
    if placed.gpus_per_domain_used == D:
        healthy = _domains_from(lay.first_gpu, D, num_fabric_gpus, lay.skip_domains)
        spare = (_spare_text(lay, D, used, healthy, num_fabric_gpus)
                 if lay.skip_domains and -(-lay.gpus // used) > healthy else "")  # place64: the skipped made it so
        return placed, (
            f"placement: every GPU of the {D}-GPU NVLink domains (the job needs more than {used} of each; "
            f"groups of a power of two may straddle domains){spare}")
    return (placed,
            f"placement: {used} of each {D}-GPU NVLink domain, as production recipes run NVL72 racks "
            f"(power-of-two TP/EP/DP groups inside a rack); gpus_per_domain_used = {D} fills the domains")


def placed_gpus_used(gpus: int, gpus_per_domain: int, num_fabric_gpus: int, first_gpu: int = 0,
                     skip_domains=()) -> int:
    """GPUs of each NVLink domain :func:`default_placement` places a job at when its layout names none: every GPU
    of a power-of-two domain; else :func:`recipe_gpus_used` (64 of an NVL72 rack's 72), unless the job's last GPU
    at that many a domain lies past the fabric, then every GPU. The one rule the step's placement and ``topo train
    --jax-mesh``'s ICI check (:func:`topo.training.jax_mesh.check_mesh_placement`) read.

    Parameters
    ----------
    gpus : int
        The job's GPUs (tp x cp x pp x dp).
    gpus_per_domain : int
        GPUs of an NVLink domain of the fabric.
    num_fabric_gpus : int
        The fabric's GPUs.
    first_gpu : int
        The job's first GPU.
    skip_domains : tuple of int
        NVLink domains the job passes over.

    Returns
    -------
    int
        GPUs used of each domain.
    """
    D, used = gpus_per_domain, recipe_gpus_used(gpus_per_domain)
    # rev65: the job's last GPU at ``used`` a domain, as _map places it (first_gpu + gpus > domains x used mixed an
    # id with a count: 128 GPUs from GPU 72 of three racks, which fit at 64 on racks 1 and 2, took 72 a rack)
    if used == D or (gpus and _placed_ids(gpus - 1, used, D, first_gpu, skip_domains) >= num_fabric_gpus):
        return D
    return used


def _spare_text(lay: ParallelLayout, D: int, used: int, healthy: int, num_fabric_gpus: int) -> str:
    """What a job past skipped NVLink domains that does not fit at ``used`` of each is told: the spare racks it needs
    (:func:`spare_domains_text`), or, where its GPUs are every GPU of the domains it may use (:func:`free_gpus`: the
    size ``topo train`` fills without dp, tidy66), that it fills them and what runs at ``used`` of each (tidy67: a
    size the fill chose is no size the user needs racks for)."""
    if lay.gpus == free_gpus(num_fabric_gpus, D, lay.first_gpu, lay.skip_domains):
        return (f"; the job's {lay.gpus:,} GPUs are every GPU of the {healthy:,} NVLink domain"
                f"{'s' if healthy > 1 else ''} past the skipped ones: at {used} of each they hold {healthy * used:,} "
                f"(a job of {healthy * used:,} GPUs runs {used} a rack)")
    return f"; at {used} of each it needs {spare_domains_text(lay.gpus, used, healthy)}"


# what to do when a job needs more GPUs than the fabric has (the step's and the search's message)
FEWER_GPUS = ("; grow the spec's [cluster] (e.g. --set cluster.num_units=N: topo describe says what a unit holds) or give the job fewer GPUs")


def refuse_failed_gpus(lay: ParallelLayout, gpus_per_domain: int, failures: tuple[str, ...],
                       num_fabric_gpus: int | None = None) -> None:
    """Refuse a job placed on a GPU that ``failures`` (``gpuN``) names, before any routing; ``num_fabric_gpus``
    (the fabric's GPUs) lets the line say what the job becomes past the failed domain (:func:`_past_failed`).

    The router's own error for it speaks of "a rank of the communicator" and asks to "place the ranks", which
    a job's placement (``first_gpu``, ``gpus_per_domain_used``) does, not a communicator's.

    Raises
    ------
    TopoError
        Keyed ``fail``: the first failed GPU among the job's, the job's GPU range and what is allowed.
    """
    _refuse_failed_nvswitches(lay, gpus_per_domain, failures, num_fabric_gpus)
    dead = failed_gpu_ids(failures).tolist()
    if not dead:
        return
    used = lay.gpus_per_domain_used or gpus_per_domain
    n, first = lay.gpus, lay.first_gpu
    skip = lay.skip_domains
    for g in dead:
        off = g - first
        if off < 0 or off % gpus_per_domain >= used or g // gpus_per_domain in skip \
                or _placed_ranks(g, used, gpus_per_domain, first, skip) >= n:
            continue
        last = int(_placed_ids(n - 1, used, gpus_per_domain, first, skip))
        after = (g // gpus_per_domain + 1) * gpus_per_domain
        raise TopoError(f"GPU {g} failed and is one of the job's GPUs ({first:,} to {last:,}); allowed: "
                        f"{_past_failed(lay, gpus_per_domain, after, num_fabric_gpus)}, or gpu{g} left out of the "
                        f"failures", key="fail")


def refuse_cut_off_servers(lay: ParallelLayout, fabric) -> None:
    """Refuse a job placed on a server none of whose NICs reaches a switch (its NICs, their cables or its leaf
    failed), before any routing, with the ways past it that :func:`refuse_failed_gpus` offers (walk27: a rack's
    leaf failed under Llama 3 405B on meta-llama3-24k; the router's line named GPU 0 and no way round the rack).

    Raises
    ------
    TopoError
        Keyed ``fail``: the first cut-off GPU among the job's, its server, the failures and what is allowed.
    """
    if not fabric.failures:
        return
    L, D = fabric.layout, fabric.spec.gpus_per_domain
    nic = np.arange(L.num_nics)
    reaching = np.bincount(nic // L.nics_per_server, weights=Paths(fabric, pxn=False).nic_ok(nic),
                           minlength=L.num_servers)
    used = lay.gpus_per_domain_used or D
    ids = _placed_ids(np.arange(lay.gpus), used, D, lay.first_gpu, lay.skip_domains)
    cut = ids[reaching[ids // L.gpus_per_server] == 0]
    if not cut.size:
        return
    g, domains = int(cut[0]), {int(d) for d in np.unique(cut // D)}
    after = (max(domains) + 1) * D
    raise TopoError(f"GPU {g} is cut off: no NIC of server {g // L.gpus_per_server} reaches a switch (failures: "
                    f"{', '.join(fabric.failures)}), and it is one of the job's GPUs ({lay.first_gpu:,} to "
                    f"{int(ids[-1]):,}); allowed: {_past_failed(lay, D, after, L.num_gpus, domains)}, or the parts "
                    f"that cut it off left out of the failures", key="fail")


def refuse_failed_placement(lay: ParallelLayout, fabric) -> None:
    """Refuse placed layout ``lay`` on ``fabric`` where its failed parts are under the job, before any routing: a
    failed GPU or NVLink switch of it (:func:`refuse_failed_gpus`), then GPUs of it cut off (:func:`refuse_cut_off`).
    The step's check, and the search's before a bound routes anything (fixb74: the search's NVLS memory check routed
    first and surfaced the router's "a rank of the communicator" line)."""
    refuse_failed_gpus(lay, fabric.spec.gpus_per_domain, fabric.failures, fabric.layout.num_gpus)
    refuse_cut_off(lay, fabric)


def refuse_cut_off(lay: ParallelLayout, fabric) -> None:
    """Refuse a job some of whose GPUs the failures cut off: a server of it none of whose NICs reaches a switch
    (:func:`refuse_cut_off_servers`), then GPUs of it no working path joins (:func:`refuse_cut_apart`)."""
    refuse_cut_off_servers(lay, fabric)
    refuse_cut_apart(lay, fabric)


def refuse_cut_apart(lay: ParallelLayout, fabric) -> None:
    """Refuse a job whose GPUs sit in more than one connected piece of ``fabric``'s working links
    (:func:`topo.fabric.cut.gpu_pieces`: a pod whose uplinks all failed, a rack's leaf, ...), naming the GPUs cut off
    as ranges and the ways past them: ``first_gpu`` past the cut where it holds the job's first GPUs (walk27: pod 0 of
    meta-llama3-24k cut off said "GPU 2048 cannot reach GPU 3072" and offered no ``first_gpu = 3072``), else
    :func:`_past_failed`'s with the cut's NVLink domains skipped.

    Raises
    ------
    TopoError
        Keyed ``fail``: the GPUs cut off, the job's GPU range, the failures and what is allowed.
    """
    piece = gpu_pieces(fabric)
    if piece is None:
        return
    L, D = fabric.layout, fabric.spec.gpus_per_domain
    used = lay.gpus_per_domain_used or D
    ids = _placed_ids(np.arange(lay.gpus), used, D, lay.first_gpu, lay.skip_domains)
    held = piece[ids]
    if (held == held[0]).all():
        return
    largest = int(np.bincount(piece).max())
    main = 0 if (held == 0).any() else np.bincount(held).argmax()  # the fabric's largest piece, else the job's
    away = np.unique(ids[held != main] // D)
    after = (int(away.max()) + 1) * D
    if lay.gpus > largest:  # no piece holds the job
        ways = f"a job of at most {largest:,} GPUs placed inside one piece"
    elif away.max() < np.min(ids[held == main] // D):  # the cut holds the job's first GPUs
        ways = _past_by_first_gpu(lay, D, after, L.num_gpus, "the first GPU past the cut")
    else:
        ways = _past_failed(lay, D, after, L.num_gpus, {int(d) for d in away})
    touched = np.unique(held).size
    sides = "on both sides of the cut" if touched == 2 else f"in {touched} of its pieces"
    raise TopoError(f"{cut_off_words(fabric) or 'the failures cut the fabric apart'} (failures: "
                    f"{', '.join(fabric.failures)}), and the job's GPUs ({lay.first_gpu:,} to {int(ids[-1]):,}) "
                    f"fall {sides}; allowed: {ways}, or the parts that cut it off left out of the "
                    f"failures", key="fail")


def _past_failed(lay: ParallelLayout, gpus_per_domain: int, after: int, num_fabric_gpus: int | None,
                 failed: set[int] | None = None) -> str:
    """The ways past failed NVLink domains (``failed``; default the one ending at GPU ``after - 1``, the last) a
    refusal offers: where the domains from the job's first one, less the failed ones and those it skips already,
    hold the job at its GPUs per domain, ``skip_domains`` with the failed ones added (place61: the job placed on the
    healthy racks, as a scheduler does); then :func:`_past_by_first_gpu`'s."""
    rest = _past_by_first_gpu(lay, gpus_per_domain, after, num_fabric_gpus)
    if num_fabric_gpus is None:
        return rest
    D, used = gpus_per_domain, lay.gpus_per_domain_used or gpus_per_domain
    skip = sorted({*lay.skip_domains, *(failed or {after // D - 1})})
    healthy = _domains_from(lay.first_gpu, D, num_fabric_gpus, skip)
    if not _skip_fits(lay.first_gpu, used, D):  # a skip it would then refuse (rev64)
        return rest
    skipped = f"skip_domains = [{','.join(map(str, skip))}]"
    if lay.gpus > healthy * used:  # walk23: 7,168 GPUs at 64 on exactly 112 racks need a 113th, a spare
        return f"{skipped} with {spare_domains_text(lay.gpus, used, healthy)}, or {rest}"
    return f"{skipped} (the job on the other domains, {used} of each), or {rest}"


def spare_domains_text(gpus: int, used: int, healthy: int) -> str:
    """What a job of ``gpus`` GPUs at ``used`` a domain needs beyond the ``healthy`` NVLink domains it may use (those
    from its first past the skipped ones): ``ceil(gpus / used) - healthy`` more, a scheduler's spare racks (place64:
    walk23's 7,168 GB200 on exactly 112 NVL72 racks, one failed, 111 x 64 = 7,104: one spare)."""
    more = -(-gpus // used) - healthy
    return (f"{more:,} more NVLink domain{'s' if more > 1 else ''} in the fabric (spare racks: the {healthy:,} left "
            f"hold {healthy * used:,} of the job's {gpus:,} GPUs at {used} of each; grow the spec's [cluster])")


def _past_by_first_gpu(lay: ParallelLayout, gpus_per_domain: int, after: int, num_fabric_gpus: int | None,
                       there: str = "the next NVLink domain") -> str:
    """The way past a failed NVLink domain (ending at GPU ``after - 1``) a refusal offers: ``first_gpu = after``
    (the next domain), and, where the fabric's GPUs are known, what the job becomes there (walk23: 7,168 GB200 on
    112 NVL72 racks at 64 a rack, rack 5 failed: from rack 6 the job fit only at all 72 of each rack, its EP groups
    straddling racks, 3.4x the step, and asking for 64 a rack again was refused) or, where it no longer fits, the
    largest job past the domain and before it, at the job's GPUs per domain; ``there`` names where ``after`` is."""
    past = f"a first_gpu = {after} or past it ({there})"
    if num_fabric_gpus is None:
        return past
    D, used = gpus_per_domain, lay.gpus_per_domain_used or gpus_per_domain
    left = max(0, num_fabric_gpus - after) // D
    before = max(0, after - D - lay.first_gpu) // D * used
    def smaller(start: str) -> str:
        return f"a job of at most {left * used:,} GPUs {start}" + (f" or of at most {before:,} before it"
                                                                     if before else "")
    if lay.gpus > left * D:
        return smaller(f"from first_gpu = {after} ({there})")
    if used < D and lay.gpus > left * used:
        return (f"{past}, where the job's {lay.gpus:,} GPUs fit only at all {D} of each domain (the {left:,} "
                f"domains left hold {left * used:,} at {used}: its power-of-two groups then straddle domains), or "
                f"{smaller('from there')}")
    return past


def _refuse_failed_nvswitches(lay: ParallelLayout, gpus_per_domain: int, failures: tuple[str, ...],
                              num_fabric_gpus: int | None = None) -> None:
    """Refuse a job with two or more GPUs in an NVLink domain whose switch ``failures`` (``nvswitchN``, domain N)
    names: their traffic inside the domain has no path, and the router's error named one GPU pair and no way out
    (walk21: a rack's NVLink switch failed under a GB200 job)."""
    dead = nvswitch_domains(failures, gpus_per_domain)
    if not dead:
        return
    used = lay.gpus_per_domain_used or gpus_per_domain
    ids = _placed_ids(np.arange(lay.gpus), used, gpus_per_domain, lay.first_gpu, lay.skip_domains)
    held = np.bincount(ids // gpus_per_domain, minlength=dead[-1][0] + 1)
    for d, hi, domain in dead:
        if held[d] < 2:
            continue
        raise TopoError(f"{domain} holds {held[d]} of the "
                        f"job's GPUs ({lay.first_gpu:,} to {int(ids[-1]):,}), which reach each other only through "
                        f"it; allowed: {_past_failed(lay, gpus_per_domain, hi + 1, num_fabric_gpus)}, or nvswitch{d} "
                        f"left out of the failures", key="fail")


def map_layout(lay: ParallelLayout, gpus_per_domain: int, num_fabric_gpus: int) -> Mapping:
    """Lay ``lay``'s dimensions onto GPU ids in its rank order (see the module doc). The last few mappings are
    kept (:data:`MAPS_KEPT`, by what this reads of the layout: :func:`_map_key`) and given again, read-only: a
    search maps each layout it evaluates three times, and many share their groups.

    Raises
    ------
    TopoError
        The job does not fit in the fabric, or a TP group spans NVLink domains without ``tp_across_domains``.
    """
    key = _map_key(lay, gpus_per_domain, num_fabric_gpus)
    hit = _MAPS.pop(key, None)
    if hit is None:
        hit = _map(lay, gpus_per_domain, num_fabric_gpus)
        hit.grid.flags.writeable = False
        hit.experts.flags.writeable = False
        hit._memo[_MAP_KEY] = key  # its groups' scalars outlive it (Mapping._scalar)
        while _MAPS and len(_MAPS) >= MAPS_KEPT:
            _MAPS.pop(next(iter(_MAPS)))
    if MAPS_KEPT > 0:
        _MAPS[key] = hit  # most recent last
    return hit


MAPS_KEPT = 8
"""Mappings :func:`map_layout` keeps (each up to a few MiB at 100k GPUs with its group matrices)."""
_MAPS: dict = {}
SCALARS_KEPT = 1 << 16
"""Spans and members per domain kept by (what :func:`map_layout` read, kind, dimension): numbers, not matrices."""
_SCALARS: dict = {}
_MAP_KEY = ("map key",)  # where a mapping's _memo holds what map_layout read to build it


def _map_key(lay: ParallelLayout, gpus_per_domain: int, num_fabric_gpus: int) -> tuple:
    """What :func:`_map` reads: the layout's sizes, rank order, placement and sharding group, and the fabric's."""
    return (lay.tp, lay.cp, lay.dp, lay.pp, lay.ep, lay.etp, lay.rank_order, lay.gpus_per_domain_used,
            lay.first_gpu, lay.skip_domains, lay.dp_shard, lay.expert_dp_shard, lay.tp_across_domains, gpus_per_domain,
            num_fabric_gpus)


def _map(lay: ParallelLayout, gpus_per_domain: int, num_fabric_gpus: int) -> Mapping:
    """:func:`map_layout`, built."""
    n = lay.gpus
    used = lay.gpus_per_domain_used or gpus_per_domain
    domains = num_fabric_gpus // gpus_per_domain
    absent = sorted(d for d in lay.skip_domains if d >= domains)
    if absent:  # a domain the fabric does not have skips nothing: a typo, said
        raise TopoError(f"{','.join(map(str, absent))}: the fabric has {domains:,} NVLink domains; allowed: domain "
                        f"indices 0 to {domains - 1:,}", source="layout", key="skip_domains")
    _refuse_idle_skip(lay, gpus_per_domain, domains)
    _refuse_straddled_skip(lay, used, gpus_per_domain)
    # the last rank's GPU id, before any array of n: a job of 10^8 GPUs on 1,024 is refused at once (it took 19 s
    # and 2.4 GB to build the ids it then refused)
    last = _placed_ids(n - 1, used, gpus_per_domain, lay.first_gpu, lay.skip_domains) if n else 0
    if last >= num_fabric_gpus:
        how = f" ({used} of each {gpus_per_domain}-GPU domain)" if used != gpus_per_domain else ""
        if lay.first_gpu and _placed_ids(n - 1, used, gpus_per_domain, 0, lay.skip_domains) < num_fabric_gpus:  # walk14: was --gpus
            raise TopoError(f"the job needs GPUs {lay.first_gpu:,} to {last:,}{how} from this first GPU, but the "
                            f"fabric has {num_fabric_gpus:,}; allowed: a first GPU from which its {n:,} GPUs fit "
                            f"(0 fits)", source="layout", key="first_gpu")
        raise TopoError(f"the job needs GPUs {lay.first_gpu:,} to {last:,}{how}, but the fabric has "
                        f"{num_fabric_gpus:,}{FEWER_GPUS}",
                        source="layout", key="gpus")
    placed = (n, used, lay.first_gpu, tuple(lay.skip_domains))
    ids = _job_ids(n, used, gpus_per_domain, *placed[2:])
    axes = tuple(reversed(_rank_axes(lay)))
    grid = ids.reshape([getattr(lay, a) for a in axes])
    # experts: each stage's ranks as EXPERT_FOLD (tp fastest) read as [edp, ep, etp]
    stage_major = np.transpose(grid, [axes.index(a) for a in ("pp", *EXPERT_FOLD)])
    experts = stage_major.reshape(lay.pp, lay.expert_dp, lay.ep, lay.expert_tp)
    mapping = Mapping(grid=grid, axes=axes, experts=experts, gpus_per_domain=gpus_per_domain, dp_shard=lay.dp_shard,
                      expert_dp_shard=lay.expert_dp_shard)
    if lay.tp > 1 and not lay.tp_across_domains and _tp_span(mapping, placed) > 1:
        raise TopoError(f"a TP group of {lay.tp} GPUs spans {mapping.domains_spanned('tp')} NVLink domains of "
                        f"{gpus_per_domain} under rank order {lay.rank_order} and first GPU {lay.first_gpu}; "
                        f"allow it with tp_across_domains", source="layout", key="tp")
    return mapping


def _job_ids(n: int, used: int, gpus_per_domain: int, first_gpu: int, skip: tuple[int, ...]) -> np.ndarray:
    """GPU ids of ranks 0 to ``n - 1`` as :func:`_placed_ids` places them, read-only, kept by exactly what it reads
    (:data:`PLACEMENTS_KEPT`): a search maps ~2,000 layouts whose 100,352 ranks are placed alike."""
    key = (n, used, gpus_per_domain, first_gpu, skip)
    got = _PLACEMENTS.get(key)
    if got is None:
        got = _placed_ids(np.arange(n, dtype=np.int64), used, gpus_per_domain, first_gpu, skip)
        got.flags.writeable = False
        while _PLACEMENTS and len(_PLACEMENTS) >= PLACEMENTS_KEPT:
            _PLACEMENTS.pop(next(iter(_PLACEMENTS)))
        _PLACEMENTS[key] = got
    return got


def _tp_span(mapping: Mapping, placed: tuple) -> int:
    """``mapping.domains_spanned("tp")``, kept in :data:`_SCALARS` by what the TP groups read: the placement
    (``placed``: :func:`_job_ids`' arguments but the domain size, which ``mapping`` holds), the grid's axes and
    sizes (the same placement in another ep, etp or sharding has the same TP groups)."""
    key = ("tp span", placed, mapping.gpus_per_domain, mapping.axes, mapping.grid.shape)
    got = _SCALARS.get(key)
    if got is None:
        got = mapping.domains_spanned("tp")
        while len(_SCALARS) >= SCALARS_KEPT:
            _SCALARS.pop(next(iter(_SCALARS)))
        _SCALARS[key] = got
    mapping._memo[("span", "tp")] = got
    return got


PLACEMENTS_KEPT = 4
"""Placements :func:`_job_ids` keeps (0.8 MB each at 100k GPUs)."""
_PLACEMENTS: dict = {}


def _skip_fits(first_gpu: int, used: int, gpus_per_domain: int) -> bool:
    """Whether ``skip_domains`` can pass over whole domains from ``first_gpu``: each domain's ``used`` GPUs of the
    job, counted from ``first_gpu``'s place in its domain, stay inside that domain (:func:`_placed_ids` skips the
    k-th such run of ``used`` GPUs, which otherwise reaches into the next domain)."""
    return first_gpu % gpus_per_domain + used <= gpus_per_domain


def _refuse_idle_skip(lay: ParallelLayout, gpus_per_domain: int, domains: int) -> None:
    """Refuse a ``skip_domains`` entry that skips nothing (rev64): an index listed twice, or a domain below the first
    GPU's, which the job never reaches (the k-th domain of ranks counts from ``first_gpu``'s, :func:`_placed_ids`)."""
    listed = ",".join(map(str, lay.skip_domains))
    twice = sorted({d for d in lay.skip_domains if lay.skip_domains.count(d) > 1})
    if twice:
        raise TopoError(f"{listed}: domain {','.join(map(str, twice))} listed more than once; allowed: each domain "
                        f"index once", source="layout", key="skip_domains")
    first = lay.first_gpu // gpus_per_domain
    below = sorted(d for d in lay.skip_domains if d < first)
    if below:
        raise TopoError(f"{listed}: domain {','.join(map(str, below))} is below the first GPU's ({lay.first_gpu:,} "
                        f"is in domain {first:,}), so the job never reaches it; allowed: domain indices {first:,} to "
                        f"{domains - 1:,}", source="layout", key="skip_domains")


def _refuse_straddled_skip(lay: ParallelLayout, used: int, gpus_per_domain: int) -> None:
    """Refuse ``skip_domains`` where the job's runs of ``used`` GPUs straddle two domains (:func:`_skip_fits`): a
    skipped domain would still hold the tail of the run before it (first GPU 104 of 72-GPU domains at 64 each,
    domain 2 skipped, put 24 of the job's GPUs on domain 2, and a failed nvswitch2 was refused offering the same
    skip again)."""
    D, at = gpus_per_domain, lay.first_gpu % gpus_per_domain
    if not lay.skip_domains or _skip_fits(lay.first_gpu, used, D):
        return
    aligned = lay.first_gpu - at
    raise TopoError(f"{','.join(map(str, lay.skip_domains))}: first GPU {lay.first_gpu:,} is GPU {at} of its "
                    f"{D}-GPU NVLink domain, so the job's {used} GPUs of each domain from there reach into the next "
                    f"one and a skipped domain would still hold some; allowed with skip_domains: a first GPU at a "
                    f"domain's start ({aligned:,} or {aligned + D:,}) or at most {D - at} GPUs of each domain "
                    f"(gpus_per_domain_used)", source="layout", key="skip_domains")


def _rank_axes(lay: ParallelLayout) -> list[str]:
    """The dense dimensions in the layout's rank order, fastest-varying first (any the order leaves out last)."""
    order = [d for d in lay.order() if d in _DENSE]
    return order + [d for d in _DENSE if d not in order]


def first_group_offsets(lay: ParallelLayout, group: str) -> list[int]:
    """Rank offsets (from its first) of the first group of ``group``, ascending, as :func:`map_layout` lays the
    ranks (its GPU ids before placement), without building the job's arrays: what a per-layout figure at 100k GPUs
    needs of one group (:mod:`.nccl_buffers`).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (its sizes and rank order).
    group : str
        ``tp``, ``cp``, ``dp``, ``pp`` (a dense dimension: it strides by the sizes of the dimensions faster than it
        in the rank order), ``ep`` (the stage's ranks read in :data:`EXPERT_FOLD`, an EP member ``etp`` ranks
        after the last) or :data:`FLEX_GROUP` (the first ``ep x etp`` of those ranks).

    Returns
    -------
    list of int
        The group's ``size`` offsets, the first 0.
    """
    return list(_group_offsets(_axes(lay), group, lay.ep, lay.expert_tp))


def first_group_reach(lay: ParallelLayout, group: str, dom: int) -> tuple[int, int]:
    """How far the first group of ``group`` reaches (its offsets as :func:`first_group_offsets` lays them): its
    members among the first ``dom`` rank offsets (the NVLink domain of its first GPU) and its last member's offset.
    Cached on the layout's sizes and rank order: a search at 100k GPUs asks it of tens of thousands of layouts
    that share a few hundred shapes (:mod:`.nccl_buffers`, :mod:`.ep_buffers`).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (its sizes and rank order).
    group : str
        As :func:`first_group_offsets`.
    dom : int
        GPUs of one NVLink domain.

    Returns
    -------
    tuple of int
        (members with an offset below ``dom``, the last member's offset).
    """
    return _group_reach(_axes(lay), group, lay.ep, lay.expert_tp, dom)


def _axes(lay: ParallelLayout) -> tuple:
    """The dense dimensions in rank order with their sizes: what :func:`_group_offsets` reads of a layout."""
    return tuple((d, getattr(lay, d)) for d in _rank_axes(lay))


@lru_cache(maxsize=4096)
def _group_reach(axes: tuple, group: str, ep: int, etp: int, dom: int) -> tuple[int, int]:
    offsets = _group_offsets(axes, group, ep, etp)
    return sum(1 for o in offsets if o < dom), offsets[-1]


@lru_cache(maxsize=1024)
def _group_offsets(axes: tuple, group: str, ep: int, etp: int) -> tuple[int, ...]:
    """:func:`first_group_offsets` of the layout whose :func:`_axes` are ``axes``."""
    stride, size, sizes = {}, 1, dict(axes)
    for d, n in axes:
        stride[d] = size
        size *= n
    if group not in ("ep", FLEX_GROUP):
        return tuple(i * stride[group] for i in range(sizes[group]))
    out = []
    for pos in range(0, ep * etp, etp if group == "ep" else 1):  # fold positions: an EP member's, or every rank's
        r, gpu = pos, 0
        for d in reversed(EXPERT_FOLD):  # tp's digit first
            r, digit = divmod(r, sizes[d])
            gpu += digit * stride[d]
        out.append(gpu)
    return tuple(sorted(out))


def job_gpus(fabric, first_gpu=None, skip_domains=None, gpus_per_domain_used=None) -> tuple[int, str]:
    """The GPUs a job given neither dp nor its GPUs fills on ``fabric``, as a scheduler runs it: every GPU from its
    first past the NVLink domains it skips, at ``gpus_per_domain_used`` of each where the job names it, else at the
    production placement's (:func:`recipe_gpus_used`: 64 of an NVL72 rack's 72, as :func:`default_placement` then
    places it; every GPU of a power-of-two domain) (:func:`free_gpus`; rev65: the whole fabric's count from GPU 4, or
    past a skipped domain, could never be placed; walk37: a job at 64 of each 72-GPU domain filled all 72, then its
    placement refused it; tidy122: ``topo train`` without ``--gpus``, ``topo plan`` and ``topo report`` filled all 72
    of each rack, where ``topo train --gpus`` of the same job placed 64, so an EP-64 job straddled racks on the page
    and stayed on NVLink in ``topo train``), and the words after "the N GPUs" naming them where the placement made
    them fewer ("" for the whole fabric). The one rule by which ``topo train``, ``topo plan`` and ``topo report``
    size a job that gives no dp (:func:`topo.cli.layout_dp.filled_dp`).

    Parameters
    ----------
    fabric : Fabric
    first_gpu, skip_domains, gpus_per_domain_used : optional
        The job's placement fields as given (a flag's or a layout's; a value of the wrong kind counts as not given:
        the layout's own checks name it).

    Returns
    -------
    tuple of (int, str)
    """
    total = fabric.layout.num_gpus
    placed = placement_fields({"first_gpu": first_gpu, "skip_domains": skip_domains,
                               "gpus_per_domain_used": gpus_per_domain_used})
    first, skip, used = placed["first_gpu"], placed["skip_domains"], placed["gpus_per_domain_used"]
    D = fabric.spec.gpus_per_domain
    used = recipe_gpus_used(D) if used is None else used  # the production placement, as default_placement's
    used = used if used < D else None  # more than a domain holds: the layout's check names it
    gpus = free_gpus(total, D, first, skip, used)
    if gpus in (0, total):  # a first GPU past the fabric: the placement's own check names it
        return total, ""
    words = ([f"at {used} of each {D}-GPU NVLink domain"] if used else []) + (
        [f"from GPU {first:,}"] if first else []) + (
        [f"past skipped NVLink domain{'s' if len(skip) > 1 else ''} {','.join(map(str, skip))}"] if skip else [])
    return gpus, " ".join(words + ["to the fabric's last"])
