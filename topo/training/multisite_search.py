"""``topo train REGION --search``: the layouts of one site's share of the job, ranked by their step across the sites.

The job's ``K`` sites each run ``global_batch / K`` sequences on their share of the GPUs (as
:func:`topo.training.multisite.estimate_across_sites` times one layout). The sites step in lockstep, so the search
times every layout of that share on every distinct site fabric (:func:`topo.training.search.search_layouts`, with
its traffic mix, :meth:`~topo.fabric.region.Region.site_groups`: alike healthy sites are one fabric, searched once
as one site; a site with failed parts is its own, and a layout's bound is the largest of its bounds on each, so only
layouts that could win are timed on every one) and ranks them by their step across the sites (data parallelism
across them, pipeline stages across them, or the outer synchronisation), which is at or above the slowest site's
step: the search's bounds bound it too, and its re-ranking walks the layouts until none left can step faster across
the sites (regsearch67: ranked by the slowest site's step, then its best ``top`` again, a layout outside them with
a wider window for the DCI phase could step faster across). Pipeline stages across the sites: only layouts of pp a
multiple of the sites are searched, their stages split at the sites as
:func:`~topo.training.multisite.estimate_across_sites` splits them.

By-size shares (``shares="by-size"`` on sites of different sizes, the default ``topo train REGION`` runs;
regsearch72): the search enumerates the whole job's layouts, splits each one's replicas over the sites as
:func:`~topo.training.multisite.site_shares` splits them, and times each site's own share on its own fabric
(:func:`~topo.training.search.search_layouts`' ``split``); a layout's bound is the largest of its shares' bounds,
its step the slowest share's, and its figure the step across the sites of those shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..engine.region_estimate import check_region_profile, site_profile
from ..errors import TopoError
from ..fabric.region import Region
from .model import ModelSpec
from .multisite import (DEFAULT_SHARES, MultisiteStep, estimate_across_sites, share_fabric, shares_run,
                        site_capacities, site_failure, site_shares)
from .multisite_memory import JobForm, may_shard_over_job
from .parallel import ParallelLayout, check_layout
from .search import search_layouts

__all__ = ["MultisiteSearch", "search_across_sites"]


@dataclass
class MultisiteSearch:
    """The best layouts of a site's share, each timed across the sites (:class:`MultisiteStep`), fastest across the
    sites first; ``search`` holds the one-site search's counts, ``skipped`` the layouts that cannot span the sites
    the way asked (by their rank in the search), ``notes`` what the one-site search said of its layouts (their placement
    in each NVLink domain, a GPU count and batch with few factors in common, failed parts) and ``notes_sites`` the
    sites whose fabric they describe (the share was searched on their fabric first: a failed site's alone)."""

    region: str
    model: str
    num_sites: int
    gpus: int
    global_batch: int
    across: str
    ranked: list[MultisiteStep] = field(default_factory=list)  # fastest across sites first
    shares: str = "equal"  # how each ranked job splits its replicas over the sites (multisite.SHARES)
    skipped: dict = field(default_factory=dict)  # one-site rank -> why it cannot span the sites that way
    search: dict = field(default_factory=dict)  # the one-site search's counts (considered, evaluated, ...)
    notes: list[str] = field(default_factory=list)  # the one-site search's notes (placement, common factor, failures)
    notes_sites: list[str] = field(default_factory=list)  # the sites of the fabric the notes are of (rev66)
    # what --fail took down on each other site fabric searched, as {"sites": [...], "notes": [...]} (rev68: a second
    # failed site's notes were said as the first's)
    other_notes: list[dict] = field(default_factory=list)

    def step_time_s(self, r: MultisiteStep) -> float:
        """The step across sites of ``r`` the way this search spans them."""
        return next(s.step_time_s for s in r.strategies if s.strategy == r.chosen)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (``topo train REGION --search --json``)."""
        return {"region": self.region, "model": self.model, "num_sites": self.num_sites, "gpus": self.gpus,
                "global_batch": self.global_batch, "across": self.across, "shares": self.shares,
                "search": dict(self.search),
                "skipped": dict(self.skipped), "notes": list(self.notes),
                "notes_sites": list(self.notes_sites),
                "other_notes": [dict(x) for x in self.other_notes],
                "ranked": [{"step_time_s": self.step_time_s(r), **r.to_dict()} for r in self.ranked]}


def search_across_sites(region: Region, model: ModelSpec, global_batch: int, *, gpus: int | None = None,
                        top: int = 5, across: str = "dp", outer_every: int | None = None, convention: str = "6n",
                        efficiency: float | None = None, contention: bool = True, profile=None,
                        shares: str = DEFAULT_SHARES, **options) -> MultisiteSearch:
    """Search the job's layouts by their step across the sites: its best ``top``.

    Parameters
    ----------
    region : Region
    model : ModelSpec
    global_batch : int
        The whole job's sequences per step (equal shares: must divide by the number of sites).
    gpus : int, optional
        The whole job's GPUs. Equal shares: a multiple of the sites, each share at most the smallest site (default:
        every GPU of the smallest site, on every site). By-size shares: at most what the sites' placements hold
        (default: all of it, :func:`~topo.training.multisite.site_capacities`).
    top : int
        Layouts returned, the fastest across the sites.
    across, outer_every, shares
        As :func:`topo.training.multisite.estimate_across_sites` takes them (``shares``: by-size is run on sites of
        different sizes, not with ``across="pp"``; else equal).
    convention, efficiency, contention, profile
        As :func:`topo.training.step.estimate_step` takes them (``profile``: each site's, None its own).
    **options
        Enumeration choices and fixed layout fields, as :func:`topo.training.search.search_layouts` takes them.

    Returns
    -------
    MultisiteSearch

    Raises
    ------
    TopoError
        A global batch or GPU count that does not split over the sites, a share larger than its site, or no layout
        that can span the sites the way asked.
    """
    K = region.num_sites
    check_region_profile(region, profile)  # before the search: a calibrated file of no site's network
    fabric = share_fabric(region)  # the smallest site's (one with failed parts first): it bounds the share
    run = shares_run(region, shares, across, None)
    step_kw = dict(convention=convention, efficiency=efficiency, contention=contention, profile=profile)
    options = {**options, "pp_multiple": K} if across == "pp" else options  # walk16: pp 1 could not span the sites
    timed = _Timed(region, model, global_batch, across, outer_every, step_kw,
                   [k for k in ParallelLayout.model_fields if k != "gpus_per_domain_used" or k in options], run)
    if run == "equal":
        job, batch, split = _equal_job(region, fabric, global_batch, gpus), global_batch // K, None
    else:
        job, batch = _by_size_job(region, gpus, options), global_batch
        split = _BySize(region, model, options)
    options = {**step_kw, **options, "job_form": _job_form(region, across, split, timed)}
    res, unit_steps, searched, units = _search_units(region, fabric, model, job, batch, top, options, timed.figure,
                                                     split)  # searched: the notes' sites
    others = _other_notes(region, res, units)
    own = res.failure_notes[0] + res.placement_notes[0]
    mine = [n for n in res.notes if n in own or all(n not in x["notes"] for x in others)]
    out = MultisiteSearch(region=region.name, model=model.name, num_sites=K, gpus=job * K if split is None else job,
                          global_batch=global_batch, across=across, shares=run,
                          search={k: getattr(res, k) for k in ("considered", "rejected_invalid", "rejected_memory",
                                                               "evaluated", "pruned", "engine_calls")},
                          notes=mine, notes_sites=searched, other_notes=others)  # walk23: a 72-a-rack share went unsaid
    _span(out, res, unit_steps, timed)
    return out


def _span(out: MultisiteSearch, res, unit_steps, timed: "_Timed") -> None:
    """Time each of the one-site search ``res``'s ranked layouts (its steps ``unit_steps``) across the sites into
    ``out``, fastest across first, one that cannot span them by ``out.across`` in ``out.skipped`` by its rank;
    none that can refused."""
    for i, (one, steps) in enumerate(zip(res.ranked, unit_steps), 1):
        got = timed.across(one, steps)
        if isinstance(got, TopoError):
            out.skipped[i] = got.message
        else:
            out.ranked.append(got)
    if not out.ranked:
        raise TopoError(f"none of the {len(res.ranked)} best layouts of a site's share spans the sites by "
                        f"{out.across}: {next(iter(out.skipped.values()))}", key="across")
    out.ranked.sort(key=out.step_time_s)


FLAT_RING_SAID = (", every site's, as NCCL's flat cross-DC ring's one optimizer instance shards it: the least any form "
                  "the job may take holds")
"""How a search that finds no layout words its closest's memory where the job may take the flat cross-DC ring
(:class:`~topo.training.multisite_memory.JobForm`'s ``said``; regions78)."""


def _job_form(region: Region, across: str, split, timed: "_Timed") -> JobForm | None:
    """How the search judges a layout's memory where the job may take the flat cross-DC ring
    (:func:`~topo.training.multisite_memory.may_shard_over_job`; regions77): the state over the job's replicas
    (``K`` times a share's with equal shares; the job's layout's own ``dp`` with ``split``, which walks the job's
    layouts), a layout kept where its job fits in the form taken (``timed.fits``). None: each share's own."""
    if not may_shard_over_job(region.spec.nccl.dp_reduction, across):
        return None
    K = region.num_sites
    return JobForm(state_dp=(lambda lay: lay.dp * K) if split is None else (lambda lay: lay.dp), fits_by=timed.fits,
                   said=FLAT_RING_SAID)


def _equal_job(region: Region, fabric, global_batch: int, gpus: int | None) -> int:
    """The GPUs of one site's equal share (every site the same): ``gpus`` over the sites, else every GPU of the
    smallest site (``fabric``); a batch or GPU count that does not split over the sites refused."""
    K = region.num_sites
    if global_batch % K:
        raise TopoError(f"{global_batch} sequences do not split over the {K} sites; allowed: a multiple of {K}",
                        key="global_batch")
    share = fabric.num_gpus if gpus is None else gpus // K
    if gpus is not None and (gpus % K or share > fabric.num_gpus):
        raise TopoError(f"{gpus:,} GPUs do not split over the {K} sites into shares of at most {fabric.num_gpus:,} "
                        f"(the smallest site); allowed: a multiple of {K} up to {K * fabric.num_gpus:,}", key="gpus")
    return share


def _by_size_job(region: Region, gpus: int | None, options: dict) -> int:
    """The whole job's GPUs split by the sites' sizes: ``gpus``, else every GPU the job's placement holds on the
    sites (:func:`~topo.training.multisite.site_capacities`, from ``options``' first GPU and skipped domains); more
    than they hold refused."""
    most = sum(site_capacities(region, options.get("first_gpu") or 0, options.get("skip_domains") or (),
                               options.get("gpus_per_domain_used")))
    if gpus is not None and not 0 < gpus <= most:
        raise TopoError(f"{gpus:,} GPUs asked, but the job's placement holds {most:,} on the {region.num_sites} "
                        f"sites; allowed: 1 to {most:,}", key="gpus")
    return most if gpus is None else gpus


class _BySize:
    """A job layout's by-size shares, each site's (:func:`~topo.training.multisite.site_shares`: its replicas, its
    part of the global batch), in site order; None where one cannot run on its site (no replica, more GPUs than
    the site's placement holds, or a layout its site refuses, as ``estimate_step`` refuses it). Kept by the job
    layout's identity (the search asks again for each fabric and each step)."""

    def __init__(self, region: Region, model: ModelSpec, options: dict):
        self.region, self.model = region, model
        self.caps = site_capacities(region, options.get("first_gpu") or 0, options.get("skip_domains") or (),
                                    options.get("gpus_per_domain_used"))
        self.made: dict = {}  # id(job layout) -> (it, its shares or None)

    def __call__(self, lay: ParallelLayout):
        got = self.made.get(id(lay))
        if got is None:
            if len(self.made) > 65536:  # a long walk: the layouts of its earlier passes are not asked again
                self.made.clear()
            got = self.made[id(lay)] = (lay, self._shares(lay))
        return got[1]

    def _shares(self, lay: ParallelLayout):
        dps = site_shares(self.region, lay, "by-size")
        replica = lay.gpus // lay.dp
        if any(d < 1 or d * replica > c for d, c in zip(dps, self.caps)):
            return None
        out = tuple(lay.model_copy(update={"dp": d, "global_batch": lay.global_batch * d // lay.dp}) for d in dps)
        try:
            for f, share in zip(self.region.fabrics, out):
                check_layout(self.model, share, gpus_per_domain=f.spec.gpus_per_domain)
        except TopoError:
            return None
        return out


class _Timed:
    """Each searched layout timed across the sites once (:func:`estimate_across_sites` from its step on each
    unit's fabric: a site group's with equal shares, a site's with by-size shares), kept for the result.
    ``fields``: the layout fields the share keeps; each site places the share as its own step does (64 or 72 of an
    NVL72 rack by the site's size), as the search placed it on each, so ``gpus_per_domain_used`` only where the
    options fix it (regsearch66's Left)."""

    def __init__(self, region, model, global_batch, across, outer_every, step_kw, fields, shares="equal"):
        self.region, self.model, self.global_batch, self.fields = region, model, global_batch, fields
        self.kw = dict(across=across, outer_every=outer_every, shares=shares, **step_kw)
        self.made: dict = {}  # id(the share's step) -> (it, its step across the sites or why it cannot span them)

    def job(self, one, steps) -> ParallelLayout:
        """The whole job's layout of share step ``one``: equal shares, its replicas on every site; by-size, the
        replicas and batch of every site's share (``steps``, one a site) together."""
        site_lay = ParallelLayout.model_validate({k: v for k, v in one.layout.items() if k in self.fields})
        if self.kw["shares"] == "equal":
            return site_lay.model_copy(update={"dp": site_lay.dp * self.region.num_sites,
                                               "global_batch": self.global_batch})
        return site_lay.model_copy(update={"dp": sum(r.layout["dp"] for r in steps),
                                           "global_batch": sum(r.layout["global_batch"] for r in steps)})

    def across(self, one, steps) -> MultisiteStep | TopoError:
        """The layout of step ``one`` across the sites, from its step on each unit's fabric (``steps``); the error
        (key ``pp``) where it cannot span the sites the way asked."""
        got = self.made.get(id(one))
        if got is None:
            try:
                got = (one, estimate_across_sites(self.region, self.model, self.job(one, steps), one_site=steps,
                                                  **self.kw))
            except TopoError as exc:
                if exc.key not in ("pp", "nccl.dp_reduction"):  # regions77: a flat ring it cannot take, skipped
                    raise
                got = (one, exc)
            self.made[id(one)] = got
        return got[1]

    def fits(self, one, steps) -> bool:
        """Whether the layout of step ``one`` fits as its job runs across the sites
        (:attr:`~topo.training.multisite.MultisiteStep.fits`: its memory as the form taken shards the state, as
        ``topo train REGION`` shows it); one that cannot span the sites does not."""
        got = self.across(one, steps)
        return not isinstance(got, TopoError) and got.fits

    def figure(self, one, steps) -> float:
        """The step across the sites the search ranks by (inf where the layout cannot span them), at or above the
        slowest site's step (:func:`_search_units`)."""
        got = self.across(one, steps)
        return math.inf if isinstance(got, TopoError) else got.step_time_s


def _other_notes(region: Region, res, units) -> list[dict]:
    """What ``--fail`` took down on each unit searched after the first (``units`` in :func:`_search_units`' order),
    and how it placed the share where the first unit did not say the same (walk29: 64 of each rack on the larger sites,
    every GPU on the smallest, both said as the smallest's), with the unit's site names (units with the same notes
    said once): ``[{"sites": [...], "notes": [...]}]``, units with nothing of their own left out."""
    rest = [sites for _, sites in units[1:]]
    placed = [[n for n in per if n not in res.placement_notes[0]] for per in res.placement_notes[1:]]
    out: list[dict] = []
    for sites, notes, own in zip(rest, res.failure_notes[1:], placed):
        said = list(notes) + own
        same = next((x for x in out if x["notes"] == said), None)
        if same is not None:
            same["sites"] += [region.site_names[i] for i in sites]
        elif said:
            out.append({"sites": [region.site_names[i] for i in sites], "notes": said})
    return out


def _share_said(exc: TopoError, K: int, job: int, batch: int, split) -> TopoError:
    """``exc`` saying that its GPUs and batch are one site's equal share of the job's, where the search of that
    share found no layout (walk31: "no layout on 32,256 GPUs with a global batch of 8,192" for a job of 64,512
    GPUs and 16,384 sequences the user gave); by-size shares (``split``) search the whole job: ``exc`` as it is."""
    if split is not None or exc.key not in ("gpus", "model"):
        return exc
    return TopoError(f"{exc.message} (one site's equal share of the job's {K * job:,} GPUs and global batch of "
                     f"{K * batch:,} over its {K} sites)", source=exc.source, key=exc.key)


def _search_units(region: Region, fabric, model: ModelSpec, job: int, batch: int, top: int, options: dict,
                  figure, split=None):
    r"""The layouts searched on every unit's fabric (``split`` None: every site group's,
    :meth:`~topo.fabric.region.Region.site_groups`, each timing the same share of ``job`` GPUs; else every site's,
    each timing its own share of the job of ``job`` GPUs, ``split(lay)`` in site order), each layout's step its
    slowest unit's (:func:`~topo.training.search.search_layouts`' ``also_on``), ``fabric``'s unit first, ranked
    by ``figure(step, its steps in the units' order)``, its step across the sites: ``(the search, each ranked
    layout's steps in the units' order, the names of fabric's unit's sites, the units in the search's order)``.

    The figure is at or above the slowest unit's step, which the search bounds (``rank_by``), in each way across
    the sites (:func:`~topo.training.multisite.estimate_across_sites`): ``dp`` is
    :math:`\max_i (T_i + \max(e, D - w_i)) + a` with the last bucket's crossing :math:`e`, the phase :math:`D`
    and the amax crossings :math:`a` at least 0; ``pp`` a site's :math:`T_i` plus the fill's and drain's latency and
    what of the crossings' bandwidth time its compute does not hide; ``outer`` :math:`T_i + D / H`; each the
    largest over the sites, whatever each site's share (``T_i`` its own share's step; by-size shares run no ``pp``
    row). So the ranking by the step across the sites is exact (regsearch67: ranked by the slowest site's step and
    then again by its best ``top``, a layout outside them could step faster across)."""
    units = region.site_groups() if split is None else [(f, (i,)) for i, f in enumerate(region.fabrics)]
    first = next(g for g, (f, sites) in enumerate(units) if f is fabric or any(region.fabrics[i] is fabric
                                                                                 for i in sites))
    order = [first] + [g for g in range(len(units)) if g != first]  # the share's fabric searched first

    def in_units(steps) -> tuple:
        return tuple(steps[order.index(g)] for g in range(len(units)))

    def ordered(lay):
        got = split(lay)
        return None if got is None else tuple(got[units[g][1][0]] for g in order)

    form = options.pop("job_form", None)  # regions77: the layout's memory as its job runs across the sites
    given = options.get("profile")  # reg70: each unit's sites' profile key where none is given
    options = {**options, "profile": site_profile(region, given, units[first][1][0])}
    try:
        res = search_layouts(units[first][0], model, job, batch, top=top,
                             also_on=tuple(units[g][0] for g in order[1:]),
                             also_profiles=tuple(site_profile(region, given, units[g][1][0]) for g in order[1:]),
                             rank_by=lambda one, steps: figure(one, in_units(steps)),
                             split=None if split is None else ordered,
                             job_form=None if form is None else replace(form, fits_by=lambda one, steps:
                                                                        form.fits_by(one, in_units(steps))),
                             **options)
    except TopoError as exc:  # a failed part under the share: its site named, as estimate_across_sites names it
        raise _share_said(site_failure(region, getattr(exc, "fabric", fabric), exc), region.num_sites, job, batch,
                          split) from None
    return (res, [in_units(steps) for steps in res.site_steps], [region.site_names[i] for i in units[first][1]],
            [units[g] for g in order])
