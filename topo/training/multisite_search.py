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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..engine.region_estimate import check_region_profile, site_profile
from ..errors import TopoError
from ..fabric.region import Region
from .model import ModelSpec
from .multisite import MultisiteStep, estimate_across_sites, share_fabric, site_failure
from .parallel import ParallelLayout
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
                "global_batch": self.global_batch, "across": self.across, "search": dict(self.search),
                "skipped": dict(self.skipped), "notes": list(self.notes),
                "notes_sites": list(self.notes_sites),
                "other_notes": [dict(x) for x in self.other_notes],
                "ranked": [{"step_time_s": self.step_time_s(r), **r.to_dict()} for r in self.ranked]}


def search_across_sites(region: Region, model: ModelSpec, global_batch: int, *, gpus: int | None = None,
                        top: int = 5, across: str = "dp", outer_every: int | None = None, convention: str = "6n",
                        efficiency: float | None = None, contention: bool = True, profile=None,
                        **options) -> MultisiteSearch:
    """Search the layouts of one site's share by their step across the sites: its best ``top``.

    Parameters
    ----------
    region : Region
    model : ModelSpec
    global_batch : int
        The whole job's sequences per step; must divide by the number of sites.
    gpus : int, optional
        The whole job's GPUs (default: every GPU of the smallest site, on every site); must divide by the sites.
    top : int
        Layouts returned, the fastest across the sites.
    across, outer_every
        As :func:`topo.training.multisite.estimate_across_sites` takes them.
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
        A global batch or GPU count that does not divide by the sites, a share larger than the smallest site, or
        no layout of the share that can span the sites the way asked.
    """
    K = region.num_sites
    check_region_profile(region, profile)  # before the search: a calibrated file of no site's network
    fabric = share_fabric(region)  # the smallest site's (one with failed parts first): it bounds the share
    if global_batch % K:
        raise TopoError(f"{global_batch} sequences do not split over the {K} sites; allowed: a multiple of {K}",
                        key="global_batch")
    share = fabric.num_gpus if gpus is None else gpus // K
    if gpus is not None and (gpus % K or share > fabric.num_gpus):
        raise TopoError(f"{gpus:,} GPUs do not split over the {K} sites into shares of at most {fabric.num_gpus:,} "
                        f"(the smallest site); allowed: a multiple of {K} up to {K * fabric.num_gpus:,}", key="gpus")
    step_kw = dict(convention=convention, efficiency=efficiency, contention=contention, profile=profile)
    options = {**options, "pp_multiple": K} if across == "pp" else options  # walk16: pp 1 could not span the sites
    timed = _Timed(region, model, global_batch, across, outer_every, step_kw,
                   [k for k in ParallelLayout.model_fields if k != "gpus_per_domain_used" or k in options])
    res, group_steps, searched = _search_groups(region, fabric, model, share, global_batch // K, top,
                                                {**step_kw, **options}, timed.figure)  # searched: the notes' sites
    others = _other_notes(region, fabric, res)
    own = res.failure_notes[0] + res.placement_notes[0]
    mine = [n for n in res.notes if n in own or all(n not in x["notes"] for x in others)]
    out = MultisiteSearch(region=region.name, model=model.name, num_sites=K, gpus=share * K,
                          global_batch=global_batch, across=across,
                          search={k: getattr(res, k) for k in ("considered", "rejected_invalid", "rejected_memory",
                                                               "evaluated", "pruned", "engine_calls")},
                          notes=mine, notes_sites=searched, other_notes=others)  # walk23: a 72-a-rack share went unsaid
    for i, (one, steps) in enumerate(zip(res.ranked, group_steps), 1):
        got = timed.across(one, steps)
        if isinstance(got, TopoError):
            out.skipped[i] = got.message
        else:
            out.ranked.append(got)
    if not out.ranked:
        raise TopoError(f"none of the {len(res.ranked)} best layouts of a site's share spans the sites by {across}: "
                        f"{next(iter(out.skipped.values()))}", key="across")
    out.ranked.sort(key=out.step_time_s)
    return out



class _Timed:
    """Each searched layout of the share timed across the sites once (:func:`estimate_across_sites` from its step on
    each group's fabric), kept for the result. ``fields``: the layout fields the share keeps; each site places the
    share as its own step does (64 or 72 of an NVL72 rack by the site's size), as the search placed it on each, so
    ``gpus_per_domain_used`` only where the options fix it (regsearch66's Left)."""

    def __init__(self, region, model, global_batch, across, outer_every, step_kw, fields):
        self.region, self.model, self.global_batch, self.fields = region, model, global_batch, fields
        self.kw = dict(across=across, outer_every=outer_every, **step_kw)
        self.made: dict = {}  # id(the share's step) -> (it, its step across the sites or why it cannot span them)

    def across(self, one, steps) -> MultisiteStep | TopoError:
        """The share's layout of step ``one`` across the sites, from its step on each group's fabric (``steps``);
        the error (key ``pp``) where it cannot span the sites the way asked."""
        got = self.made.get(id(one))
        if got is None:
            K = self.region.num_sites
            site_lay = ParallelLayout.model_validate({k: v for k, v in one.layout.items() if k in self.fields})
            lay = site_lay.model_copy(update={"dp": site_lay.dp * K, "global_batch": self.global_batch})
            try:
                got = (one, estimate_across_sites(self.region, self.model, lay, one_site=steps, **self.kw))
            except TopoError as exc:
                if exc.key != "pp":
                    raise
                got = (one, exc)
            self.made[id(one)] = got
        return got[1]

    def figure(self, one, steps) -> float:
        """The step across the sites the search ranks by (inf where the layout cannot span them), at or above the
        slowest site's step (:func:`_search_groups`)."""
        got = self.across(one, steps)
        return math.inf if isinstance(got, TopoError) else got.step_time_s


def _other_notes(region: Region, fabric, res) -> list[dict]:
    """What ``--fail`` took down on each site group searched after ``fabric``'s (:func:`_search_groups`' order), and
    how it placed the share where ``fabric``'s group did not say the same (walk29: 64 of each rack on the larger
    sites, every GPU on the smallest, both said as the smallest's), with the group's site names:
    ``[{"sites": [...], "notes": [...]}]``, groups with nothing of their own left out."""
    groups = region.site_groups()
    rest = [sites for f, sites in groups if not any(region.fabrics[i] is fabric for i in sites)]
    placed = [[n for n in per if n not in res.placement_notes[0]] for per in res.placement_notes[1:]]
    return [{"sites": [region.site_names[i] for i in sites], "notes": list(notes) + own}
            for sites, notes, own in zip(rest, res.failure_notes[1:], placed) if notes or own]


def _search_groups(region: Region, fabric, model: ModelSpec, share: int, batch: int, top: int, options: dict,
                   figure):
    r"""The share's layouts searched on every site group's fabric (:meth:`~topo.fabric.region.Region.site_groups`),
    each layout's step its slowest group's (:func:`~topo.training.search.search_layouts`' ``also_on``), ``fabric``'s
    group first, ranked by ``figure(step, its steps in the groups' order)``, its step across the sites:
    ``(the search, each ranked layout's steps in the groups' order, the names of fabric's group's sites)``.

    The figure is at or above the slowest group's step, which the search bounds (``rank_by``), in each way across
    the sites (:func:`~topo.training.multisite.estimate_across_sites`): ``dp`` is
    :math:`\max_i (T_i + \max(e, D - w_i)) + a` with the last bucket's crossing :math:`e`, the phase :math:`D`
    and the amax crossings :math:`a` at least 0; ``pp`` a site's :math:`T_i` plus the fill's and drain's latency and
    what of the crossings' bandwidth time its compute does not hide; ``outer`` :math:`T_i + D / H`; each the
    largest over the sites. So the ranking by the step across the sites is exact (regsearch67: ranked by the
    slowest site's step and then again by its best ``top``, a layout outside them could step faster across)."""
    groups = region.site_groups()
    first = next(g for g, (_, sites) in enumerate(groups) if any(region.fabrics[i] is fabric for i in sites))
    order = [first] + [g for g in range(len(groups)) if g != first]  # the share's fabric searched first

    def in_groups(steps) -> tuple:
        return tuple(steps[order.index(g)] for g in range(len(groups)))

    given = options.get("profile")  # reg70: each group's sites' profile key where none is given
    options = {**options, "profile": site_profile(region, given, groups[first][1][0])}
    try:
        res = search_layouts(groups[first][0], model, share, batch, top=top,
                             also_on=tuple(groups[g][0] for g in order[1:]),
                             also_profiles=tuple(site_profile(region, given, groups[g][1][0]) for g in order[1:]),
                             rank_by=lambda one, steps: figure(one, in_groups(steps)), **options)
    except TopoError as exc:  # a failed part under the share: its site named, as estimate_across_sites names it
        raise site_failure(region, getattr(exc, "fabric", fabric), exc) from None
    return res, [in_groups(steps) for steps in res.site_steps], [region.site_names[i] for i in groups[first][1]]
