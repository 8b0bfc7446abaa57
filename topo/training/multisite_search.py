"""``topo train REGION --search``: the best layouts of one site's share of the job, ranked again across the sites.

The job's ``K`` sites each run ``global_batch / K`` sequences on their share of the GPUs (as
:func:`topo.training.multisite.estimate_across_sites` times one layout). The sites step in lockstep, so the search
ranks every layout of that share by its slowest site's step (:func:`topo.training.search.search_layouts`, with its
traffic mix, on every distinct site fabric, :meth:`~topo.fabric.region.Region.site_groups`: alike healthy sites are
one fabric, searched once as one site; a site with failed parts is its own, and a layout's bound is the largest of
its bounds on each, so only layouts that could win are timed on every one), then times its best ``top`` across the
sites (data parallelism across them, pipeline stages across them, or the outer
synchronisation) and ranks those by the step across sites (pipeline stages across the sites: only layouts of pp a
multiple of the sites are searched, their stages split at the sites as
:func:`~topo.training.multisite.estimate_across_sites` splits them): a layout with fewer gradient bytes per site (more
pipeline stages, expert sharding) may overtake a faster one-site layout once the DCI is added. Only the ``top``
best one-site layouts are ranked again, not every layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.region_estimate import check_region_profile
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
    the way asked (by their one-site rank), ``notes`` what the one-site search said of its layouts (their placement
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

    def step_time_s(self, r: MultisiteStep) -> float:
        """The step across sites of ``r`` the way this search spans them."""
        return next(s.step_time_s for s in r.strategies if s.strategy == r.chosen)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (``topo train REGION --search --json``)."""
        return {"region": self.region, "model": self.model, "num_sites": self.num_sites, "gpus": self.gpus,
                "global_batch": self.global_batch, "across": self.across, "search": dict(self.search),
                "skipped": dict(self.skipped), "notes": list(self.notes),
                "notes_sites": list(self.notes_sites),
                "ranked": [{"step_time_s": self.step_time_s(r), **r.to_dict()} for r in self.ranked]}


def search_across_sites(region: Region, model: ModelSpec, global_batch: int, *, gpus: int | None = None,
                        top: int = 5, across: str = "dp", outer_every: int | None = None, convention: str = "6n",
                        efficiency: float | None = None, contention: bool = True, profile=None,
                        **options) -> MultisiteSearch:
    """Search the layouts of one site's share, then rank the best ``top`` by their step across the sites.

    Parameters
    ----------
    region : Region
    model : ModelSpec
    global_batch : int
        The whole job's sequences per step; must divide by the number of sites.
    gpus : int, optional
        The whole job's GPUs (default: every GPU of the smallest site, on every site); must divide by the sites.
    top : int
        One-site layouts timed across the sites.
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
    res, group_steps, searched = _search_groups(region, fabric, model, share, global_batch // K, top,
                                                {**step_kw, **options})  # searched: the sites the notes are of
    out = MultisiteSearch(region=region.name, model=model.name, num_sites=K, gpus=share * K,
                          global_batch=global_batch, across=across,
                          search={k: getattr(res, k) for k in ("considered", "rejected_invalid", "rejected_memory",
                                                               "evaluated", "pruned", "engine_calls")},
                          notes=list(res.notes), notes_sites=searched)  # walk23: a 72-a-rack share went unsaid
    # each site places the share as its own step does (64 or 72 of an NVL72 rack by the site's size), as the search
    # placed it on each: the placement the slowest site's step chose is not every site's (regsearch66's Left)
    fields = [k for k in ParallelLayout.model_fields if k != "gpus_per_domain_used" or k in options]
    for i, (one, steps) in enumerate(zip(res.ranked, group_steps), 1):
        site_lay = ParallelLayout.model_validate({k: v for k, v in one.layout.items() if k in fields})
        lay = site_lay.model_copy(update={"dp": site_lay.dp * K, "global_batch": global_batch})
        try:
            out.ranked.append(estimate_across_sites(region, model, lay, across=across, outer_every=outer_every,
                                                    one_site=steps, **step_kw))
        except TopoError as exc:
            if exc.key != "pp":
                raise
            out.skipped[i] = exc.message
    if not out.ranked:
        raise TopoError(f"none of the {len(res.ranked)} best layouts of a site's share spans the sites by {across}: "
                        f"{next(iter(out.skipped.values()))}", key="across")
    out.ranked.sort(key=out.step_time_s)
    return out


def _search_groups(region: Region, fabric, model: ModelSpec, share: int, batch: int, top: int, options: dict):
    """The share's layouts searched on every site group's fabric (:meth:`~topo.fabric.region.Region.site_groups`),
    each layout's step its slowest group's (:func:`~topo.training.search.search_layouts`' ``also_on``), ``fabric``'s
    group first: ``(the search, each ranked layout's steps in the groups' order, the names of fabric's group's
    sites)``."""
    groups = region.site_groups()
    first = next(g for g, (_, sites) in enumerate(groups) if any(region.fabrics[i] is fabric for i in sites))
    order = [first] + [g for g in range(len(groups)) if g != first]  # the share's fabric searched first
    try:
        res = search_layouts(groups[first][0], model, share, batch, top=top,
                             also_on=tuple(groups[g][0] for g in order[1:]), **options)
    except TopoError as exc:  # a failed part under the share: its site named, as estimate_across_sites names it
        raise site_failure(region, getattr(exc, "fabric", fabric), exc) from None
    return (res, [tuple(steps[order.index(g)] for g in range(len(groups))) for steps in res.site_steps],
            [region.site_names[i] for i in groups[first][1]])
