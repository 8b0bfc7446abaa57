"""Concurrent traffic: several collectives, each on its own groups, sizes and algorithm, at the same time.

A training step is many collectives at once: tensor-parallel all-reduces in every NVLink domain, data-parallel
all-reduces across pods, pipeline sends between stages, expert all-to-alls. :func:`run_mix` estimates each member
alone (:func:`topo.engine.estimate.evaluate`, the fastest algorithm and protocol at its size), then lets all of
them share the fabric's links from t = 0:

- Each member is a fluid whose demand on a resource ``r`` is its average use of ``r`` when it runs alone:
  ``u_i(r) = S_i * load_i(r) / (efficiency * capacity(r) * bandwidth time alone)``, at most 1, where the
  protocol's efficiency counts its overhead bytes as wire use (the loads come from the same
  routed schedules; :mod:`topo.engine.loads`, which makes loads of different collectives addable). A member runs at a
  speed ``x_i`` (1 = as fast as alone) such that no resource is used beyond its capacity:
  ``sum_i x_i u_i(r) <= 1``.
- The speeds come from :mod:`topo.engine.contention`, the same interface and solver a single collective's
  steps use (each member one user, at most speed 1, every resource of capacity 1):
  ``sharing="equal"`` (default): on a resource whose summed demand exceeds its capacity, each of the ``k``
  members using it gets an equal share: ``x_i <= 1 / (k u_i(r))``; what a member leaves unused is not passed on.
  ``sharing="maxmin"``: max-min fair speeds by progressive filling (a member held back elsewhere leaves its
  share to the others).
- Speeds are recomputed each time a member finishes. A member's time in the mix is its latency (unchanged) plus
  the time to finish its bandwidth part at those speeds; its slowdown is that over its time alone.

Members that share no resource never slow each other; the links they fight over are those where the summed
demand exceeds the capacity, reported with each member's share, and each member's sharers (``MixResult.sharers``:
the members it meets on at least one such link, the only ones that can slow it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import TopoError, Unreachable
from ..fabric.fabric import Fabric
from ..units import UnitError, parse_size_bytes
from .collectives import normalize_collective
from .contention import check_sharing, finish_times
from .cost import usable_capacity
from .estimate import Evaluation, evaluate
from .flow_classes import FlowClasses
from .options import EstimateOptions
from .profiles import resolve_profile
from .result import LinkTable
from .route import Router

__all__ = ["Member", "MemberResult", "ContestedLink", "MixResult", "run_mix", "over_asked_sharers", "SYMBOLS"]


@dataclass(frozen=True)
class Member:
    """One collective of a mix: ``collective`` of ``size`` bytes (nccl-tests' size) on the placement and with
    the algorithm ``options`` describe (``groups`` identical communicators at once).

    ``evaluation``, when given, is that collective already routed and costed (:func:`topo.engine.estimate.evaluate`
    of these options, or of a collective the engine times and loads identically): the mix reads it instead of
    routing the member again (a training step's mix reuses what its collectives alone cost). Its router must have
    the mix's ECMP, sub-flows, PXN and seed, and its profile must be the mix's (else ``ValueError``)."""

    name: str
    collective: str
    size: int | str
    options: EstimateOptions = field(default_factory=EstimateOptions)
    symbolic: tuple = ()  # ((option, symbol), ...) resolved on the fabric, see SYMBOLS
    evaluation: Evaluation | None = field(default=None, compare=False, repr=False)

    def resolved(self, fabric: Fabric) -> EstimateOptions:
        """The options with symbolic counts (``groups = "per_domain"``, ``stages = "pods"``) made numbers.

        Parameters
        ----------
        fabric : Fabric

        Returns
        -------
        EstimateOptions

        Raises
        ------
        TopoError
            An unknown symbol, or a pod symbol on a cluster of one pod.
        """
        if not self.symbolic:
            return self.options
        L = fabric.layout
        values = {"per_domain": L.num_gpus // L.gpus_per_domain, "per_server": L.num_servers,
                  "per_pod_position": L.num_gpus // L.num_pods, "pods": L.num_pods,
                  "domains": L.num_gpus // L.gpus_per_domain}
        repl = {}
        for key, sym in self.symbolic:
            if sym not in values:
                raise TopoError(f"unknown symbol {sym!r}; allowed: {', '.join(SYMBOLS)}", key=key)
            if L.num_pods < 2 and (sym == "per_pod_position" or (sym, key) == ("pods", "stages")):
                what = "each communicator would be one GPU" if sym == "per_pod_position" else "one stage"
                raise TopoError(f"{key} = {sym!r} needs a cluster of several pods, and {fabric.name} has one "
                                f"({what}); give a number instead, or a spec of several pods", key=key)
            repl[key] = values[sym]
        return EstimateOptions.from_kwargs(self.options, **repl)


# symbolic counts a traffic file may use: per_domain / per_server (one communicator per NVLink domain / server,
# blocked), per_pod_position (one per GPU position of a pod: data parallelism across pods, strided), pods and
# domains (as counts, e.g. pipeline stages)
SYMBOLS = ("per_domain", "per_server", "per_pod_position", "pods", "domains")


@dataclass(frozen=True)
class MemberResult:
    """One member of a mix, alone and in the mix; plain data.

    Attributes
    ----------
    name, collective : str
    size_bytes : int
    placement : str
    num_groups, num_ranks : int
    algorithm, protocol : str
        Its fastest algorithm and protocol alone.
    latency_s : float
    alone_s, mix_s : float
        Its time alone and in the mix (the latency part is the same).
    slowdown : float
        ``mix_s / alone_s``.
    bottleneck_alone, bottleneck_alone_level : str or None
    bottleneck_mix, bottleneck_mix_level : str or None
        The resource that held it back in the mix (None: not slowed).
    """

    name: str
    collective: str
    size_bytes: int
    placement: str
    num_groups: int
    num_ranks: int
    algorithm: str
    protocol: str
    latency_s: float
    alone_s: float
    mix_s: float
    slowdown: float
    bottleneck_alone: str | None
    bottleneck_alone_level: str | None
    bottleneck_mix: str | None  # the resource that held it back in the mix (None: not slowed)
    bottleneck_mix_level: str | None


@dataclass(frozen=True)
class ContestedLink:
    """A resource whose summed demand exceeds its capacity: ``demand`` = sum of the members' utilizations when
    each runs alone (2.0: it would need twice its capacity), with each member's part."""

    src: str
    dst: str
    level: str
    direction: str
    num_links: int
    demand: float
    members: dict[str, float]
    alike: int = 1  # resources of the same level and direction with the same demand and shares (this one named)


@dataclass
class MixResult:
    """Members alone and together; plain data (picklable)."""

    spec: str
    name: str
    sharing: str
    ecmp: str
    profile: str
    members: list[MemberResult]
    contested: list[ContestedLink]
    makespan_s: float
    bytes_per_direction: np.ndarray = field(repr=False, default=None)  # summed over members, per directed link
    links: LinkTable | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)  # what the members' estimates approximated, "member: note"
    sharers: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)  # name -> the members it meets
    # on an over-asked resource (:func:`over_asked_sharers`)

    def to_dict(self) -> dict:
        """The document ``topo estimate --traffic F --json`` prints.

        Returns
        -------
        dict
        """
        return {"spec": self.spec, "name": self.name, "sharing": self.sharing, "ecmp": self.ecmp,
                "profile": self.profile, "makespan_s": self.makespan_s,
                "members": [asdict(m) for m in self.members], "contested": [asdict(c) for c in self.contested],
                "notes": list(self.notes)}

    def to_frame(self):
        """One row per member.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        return pd.DataFrame([asdict(m) for m in self.members])

    def link_loads(self):
        """Per directed link: the bytes all members put on it and its utilization over the mix's makespan.

        Returns
        -------
        pandas.DataFrame
        """
        frame = self.links.frame(self.bytes_per_direction, self.makespan_s)
        frame.attrs.update({"time_s": self.makespan_s, "algorithm": f"mix {self.name}"})
        return frame


def run_mix(fabric: Fabric, members: list[Member], *, sharing: str = "equal", ecmp: str = "ideal",
            subflows: int = 1, hash_seed: int = 0, pxn: bool | None = None, profile=None, name: str = "mix",
            max_contested: int = 10) -> MixResult:
    """Estimate ``members`` alone and running at once on ``fabric`` (see the module docstring).

    Parameters
    ----------
    fabric : Fabric
    members : list of Member
        Names must differ.
    sharing : {"equal", "maxmin"}
        How members share an over-asked link (:mod:`topo.engine.contention`).
    ecmp : {"ideal", "hash"}
    subflows : int
        Parts each hashed flow is split into.
    hash_seed : int
        Mixed into the ECMP hash (:class:`topo.engine.options.EstimateOptions`); 0, the default, is no seed.
    pxn : bool, optional
        Cross-rail data over NVLink first (default: on in rail fabrics).
    profile : str, Profile or None
        As :func:`topo.engine.profiles.resolve_profile` reads it.
    name : str
        The mix's name, for the result.
    max_contested : int
        The most contested links reported (0: none, and none looked for).

    Returns
    -------
    MixResult

    Raises
    ------
    TopoError
        A bad member (keyed ``member[NAME].option``), duplicate names, or a bad sharing model.
    """
    _check_members(members, sharing, hash_seed)
    prof = resolve_profile(profile, fabric)
    router = _mix_router(fabric, members, prof, ecmp=ecmp, subflows=subflows, pxn=pxn, salt=hash_seed)
    cap = usable_capacity(router, prof)
    rows, demand, loads_dir, notes = [], [], np.zeros(router.num_real), []
    for m in members:
        row, u, total, member_notes = _alone(fabric, m, router, prof, cap, ecmp=ecmp, subflows=subflows, pxn=pxn,
                                             hash_seed=hash_seed)
        rows.append(row)
        demand.append(u)
        loads_dir += router.real_link_loads(total)
        notes += member_notes
    U = np.vstack(demand)  # [members, resources]
    finish, limiter = _mix_finish_times(U, np.array([r["bw_s"] for r in rows]), sharing)
    results = [_member_result(router, r, done, lim) for r, done, lim in zip(rows, finish, limiter)]
    contested = _contested(router, U, [m.name for m in members], max_contested) if max_contested > 0 else []
    return MixResult(spec=fabric.name, name=name, sharing=sharing,
                     ecmp=router.ecmp + (f" x{router.subflows} subflows" if router.subflows > 1 else "")
                     + (f" seed {router.salt}" if router.ecmp == "hash" and router.salt else ""),
                     profile=prof.name, members=results, contested=contested,
                     makespan_s=float(max(m.mix_s for m in results)), bytes_per_direction=loads_dir,
                     links=LinkTable.of(fabric), notes=notes,
                     sharers=over_asked_sharers(U, [m.name for m in members]))


def over_asked_sharers(U: np.ndarray, names: list[str]) -> dict[str, tuple[str, ...]]:
    """Each member's sharers: the other members using at least one resource whose summed demand exceeds its capacity.

    Only an over-asked resource binds a member's speed (``sum_i x_i u_i(r) <= 1`` holds at ``x = 1`` elsewhere), so a
    member is slowed only while one of its sharers runs; members on disjoint or under-used links are not sharers.

    Parameters
    ----------
    U : numpy.ndarray
        ``[members, resources]`` utilizations, each member alone.
    names : list of str
        The members' names, in ``U``'s row order.

    Returns
    -------
    dict
        Name -> the names of its sharers, in ``names``' order (empty: nothing slows it).
    """
    used = U[:, _over_asked(U)] > 0  # the resources the solver is given (:func:`_mix_finish_times`)
    met = used.astype(np.int64) @ used.T.astype(np.int64)
    return {a: tuple(b for j, b in enumerate(names) if j != i and met[i, j] > 0) for i, a in enumerate(names)}


def _check_members(members: list[Member], sharing: str, hash_seed: int) -> None:
    """A known sharing model, at least one member, no two of one name, and a valid hash seed."""
    check_sharing(sharing)
    if not members:
        raise TopoError("a traffic mix needs at least one member", key="member")
    names = [m.name for m in members]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise TopoError(f"two members are named {dup!r}; names must differ", key="member")
    EstimateOptions.from_kwargs(hash_seed=hash_seed)  # its error names the option


def _alone(fabric: Fabric, m: Member, router: Router, prof, cap: np.ndarray, *, ecmp: str, subflows: int,
           pxn: bool | None, hash_seed: int):
    """Member ``m`` running alone: its result row (with ``bw_s``, the bandwidth part of its time), the share of
    each resource's usable capacity it asks per second of its bandwidth part, its bytes per resource and its
    notes."""
    try:
        opts = EstimateOptions.from_kwargs(m.resolved(fabric), ecmp=ecmp, subflows=subflows, pxn=pxn,
                                           hash_seed=hash_seed, profile=prof)
        coll = normalize_collective(m.collective)
        try:
            S = parse_size_bytes(m.size)
        except UnitError as exc:
            raise TopoError(str(exc), key="size") from None
        ev = m.evaluation if m.evaluation is not None else evaluate(fabric, coll, opts, router=router)
    except TopoError as exc:  # a cut stays Unreachable, which the report catches (tidy67)
        cls = Unreachable if isinstance(exc, Unreachable) else TopoError
        raise cls(exc.message, source=exc.source, key=f"member[{m.name}].{exc.key or 'options'}") from None
    t, algo, proto, lat, bw = ev.time(S)
    c = ev.costed[algo]
    total = c.loads.total() * S
    # a protocol's overhead travels on the wire too (LL128 sends 128 bytes per 120 of data): it uses the link
    eff = prof.efficiency(c.schedule.family, proto, ev.placement.num_domains)
    u = np.zeros_like(total)
    used = total > 0
    if bw > 0:
        u[used] = total[used] / (eff * cap[used] * bw)
    d = router.describe_resource(c.bottleneck_res) if c.bottleneck_res >= 0 else None
    row = dict(name=m.name, collective=coll, size_bytes=S, placement=ev.placement.describe(),
               num_groups=ev.placement.num_groups, num_ranks=ev.placement.num_ranks, algorithm=algo,
               protocol=proto, latency_s=float(lat), alone_s=float(t), bw_s=float(bw),
               bottleneck_alone=f"{d['src']} -> {d['dst']}" if d else None,
               bottleneck_alone_level=d["level"] if d else None)
    return row, u, total, [f"{m.name}: {n}" for n in c.schedule.notes]


def _member_result(router: Router, row: dict, done: float, lim: int) -> MemberResult:
    """A member's result from its row alone, the time its bandwidth part takes in the mix and what limits it."""
    mix = row["latency_s"] + done
    d = router.describe_resource(int(lim)) if lim >= 0 else None
    row.pop("bw_s")
    return MemberResult(**row, mix_s=float(mix), slowdown=float(mix / row["alone_s"]) if row["alone_s"] else 1.0,
                        bottleneck_mix=f"{d['src']} -> {d['dst']}" if d else None,
                        bottleneck_mix_level=d["level"] if d else None)


def _mix_router(fabric: Fabric, members: list[Member], prof, *, ecmp: str, subflows: int, pxn: bool | None,
               salt: int) -> Router:
    """The router of a mix: the one its members' given evaluations share (their resource ids), else a new one;
    ``ValueError`` when a given evaluation was routed or costed otherwise than the mix asks."""
    given = [m for m in members if m.evaluation is not None]
    if not given:
        return Router(fabric, ecmp=ecmp, subflows=subflows, pxn=pxn, salt=salt)
    want = (ecmp, int(subflows) if ecmp == "hash" else 1,
            (fabric.layout.leaves_per_unit > 1) if pxn is None else bool(pxn), salt)
    for m in given:
        r, ev = m.evaluation.router, m.evaluation
        have = (r.ecmp, r.subflows, r.pxn, r.salt)
        if r.fabric is not fabric or have != want or ev.profile != prof:
            raise ValueError(f"member {m.name}: its evaluation was routed or costed otherwise than the mix (ECMP, "
                             f"sub-flows, PXN, seed {have}, profile {ev.profile.name}; the mix: {want}, profile "
                             f"{prof.name})")
    return given[0].evaluation.router


def _over_asked(U: np.ndarray) -> np.ndarray:
    """The resources whose summed demand reaches their capacity (1, ``U`` a utilization, to 1e-9): the only ones that
    can hold a member below its speed alone; one test for the solver and for :func:`over_asked_sharers`."""
    return U.sum(axis=0) > 1 - 1e-9


def _mix_finish_times(U: np.ndarray, work_s: np.ndarray, sharing: str) -> tuple[np.ndarray, np.ndarray]:
    """Each member's time to finish its bandwidth part in the mix and the resource that held it back (-1: none).

    Speeds are at most 1 (as fast as alone) and every resource has capacity 1 (``U`` is a utilization), so with
    equal shares a resource whose summed demand is not above 1 is never over-asked: only the others go to the
    solver, and of those only one per distinct column of demands (:func:`_distinct_columns`), which gives the same
    speeds and limiters (the lowest resource of a tie, as before): at 100k GPUs ~600,000 resources a mix of five
    members can bind are 1-8 distinct columns. Max-min gets them all (its choice among tied limiters follows
    their ids)."""
    if sharing != "equal":
        keep = np.arange(U.shape[1])
    else:
        keep = np.flatnonzero(_over_asked(U))
        keep = keep[_distinct_columns(U[:, keep])]
    users = _members_as_users(U[:, keep], work_s)
    finish, limiter = finish_times(users, np.ones(keep.size), sharing, max_rate=1.0)
    return finish, np.where(limiter >= 0, keep[np.maximum(limiter, 0)] if keep.size else -1, -1)


def _distinct_columns(U: np.ndarray) -> np.ndarray:
    """The first column of each set of columns of ``U`` equal bit for bit, increasing.

    Under equal shares (:func:`topo.engine.contention.rates`) a resource's over-asking and each member's bound on
    it read only its column of demands and its capacity (1 for all here): equal columns bound every member alike,
    and a tie goes to the lowest resource, the first of its set. So the solver on these columns alone gives each
    member the same speed and, mapped back, the same limiter, at every re-computation."""
    if U.shape[1] < 2:
        return np.arange(U.shape[1])
    rows = np.ascontiguousarray(U.T)  # a column's bytes as one value: equal bytes, equal demands
    _, first = np.unique(rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel(),
                         return_index=True)
    return np.sort(first)


def _members_as_users(U: np.ndarray, work_s: np.ndarray) -> FlowClasses:
    """Each member as one user of the resources it uses: ``U[i, r]`` of resource ``r`` per unit of speed, and
    ``work_s[i]`` seconds of work at speed 1."""
    i, r = np.nonzero(U)
    return FlowClasses(work_s.astype(float), np.ones(U.shape[0], dtype=np.int64), i.astype(np.int64),
                       r.astype(np.int64), U[i, r])


def _contested(router: Router, U: np.ndarray, names: list[str], top: int) -> list[ContestedLink]:
    total = U.sum(axis=0)
    shared = (U > 0).sum(axis=0) > 1
    cand = np.flatnonzero((total > 1 + 1e-9) & shared)
    if cand.size == 0:
        return []
    # resources alike (same level, direction, demand and shares) are reported once, with their count
    sig = np.round(U[:, cand], 9)
    key = np.vstack([router.level[cand], _direction(router, cand), sig])
    _, first, counts = np.unique(key, axis=1, return_index=True, return_counts=True)
    order = np.argsort(-total[cand[first]], kind="stable")[:top]
    out = []
    for k in order:
        r = int(cand[first[k]])
        d = router.describe_resource(r)
        out.append(ContestedLink(src=d["src"], dst=d["dst"], level=d["level"], direction=d["direction"],
                                 num_links=d["num_links"], demand=float(total[r]),
                                 members={names[i]: float(U[i, r]) for i in np.flatnonzero(U[:, r] > 0)},
                                 alike=int(counts[k])))
    return out


def _direction(router: Router, res: np.ndarray) -> np.ndarray:
    """0 up, 1 down for every resource id (directed links and ECMP aggregates alike)."""
    out = res % 2
    virt = res >= router.num_real
    if virt.any():
        out[virt] = [router.describe_resource(int(r))["direction"] == "down" for r in res[virt]]
    return out
