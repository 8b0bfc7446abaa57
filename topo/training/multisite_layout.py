"""The whole job's layout across a region's sites from a layout request (fields as given; dp filled where none is
given), for ``topo train REGION`` and ``topo plan REGION --model``. Errors name the layout's keys (``tp``, ``cp``,
``pp``, ``dp``); each command words them with its own flags (:meth:`topo.dp_fill.UndividedGpus.named`)."""

from __future__ import annotations

import math

from ..dp_fill import data_parallel, placement_fields
from .mapping import job_gpus
from ..fabric.region import Region
from .multisite import DEFAULT_SHARES, site_capacities
from .parallel import ParallelLayout, make_layout

__all__ = ["region_layout", "fill_region_dp", "split_by_size", "largest_dp", "share_gpus"]


def region_layout(region: Region, fields: dict, *, gpus: int | None = None, shares: str = DEFAULT_SHARES,
                  across: str | None = "dp", named=("tp", "cp", "pp"), source: str = "layout") -> ParallelLayout:
    """The job's layout from ``fields`` (the layout's keys as given; None values dropped), dp filled when absent
    (:func:`fill_region_dp`).

    Parameters
    ----------
    region : Region
    fields : dict
        Layout fields (``tp``, ``pp``, ``global_batch``, ``first_gpu``, ...); no ``dp``: it is filled.
    gpus : int, optional
        The whole job's GPUs (dp = gpus / (tp x cp x pp)); None: each site's share fills its GPUs.
    shares : str
        ``by-size`` or ``equal`` (:data:`topo.training.multisite.SHARES`).
    across : str, optional
        How the job spans the sites (``dp``, ``pp``, ``outer``; pp keeps equal shares).
    named : sequence of str
        The sizes an undivided-GPUs error may name (the others count in tp x cp x pp, the error then names dp).
    source : str
        What a field's error names (the layout's file, or ``layout`` for pairs).

    Returns
    -------
    ParallelLayout

    Raises
    ------
    UndividedGpus
        tp x cp x pp does not divide the GPUs dp was to fill (keys: ``tp``, ``cp``, ``pp`` or ``dp``).
    TopoError
        A field the layout refuses (:func:`~topo.training.parallel.make_layout`).
    """
    fields = {k: v for k, v in fields.items() if v is not None}
    if "dp" not in fields:
        fields["dp"] = fill_region_dp(region, fields, gpus=gpus, shares=shares, across=across, named=named)
    return make_layout(source=source, **fields)


def fill_region_dp(region: Region, fields: dict, *, gpus: int | None = None, shares: str = DEFAULT_SHARES,
                   across: str | None = "dp", named=("tp", "cp", "pp")) -> int:
    """The whole job's dp where the layout gives none: ``gpus`` over tp x cp x pp; else, alike sites, every GPU of
    each site (every site runs the same share, :func:`~topo.training.multisite.estimate_across_sites`; walk34: 128
    GPUs a replica filled 387 of 2 x 24,768, a dp no equal split runs); unlike sites split by size, the most replicas
    the sites hold together that the global batch splits into (:func:`largest_dp`, regshare71); else the smallest
    site's GPUs on every site (walk14: 512 + 1,024 + 1,024 filled 2,560 GPUs, a dp no site's share could run). The
    GPUs a site fills start at the job's ``first_gpu`` past its ``skip_domains`` (:func:`share_gpus`).

    Parameters are :func:`region_layout`'s.

    Returns
    -------
    int
    """
    known = [fields.get(d, 1) for d in ("tp", "cp", "pp")]  # a bad size: make_layout names it
    known = math.prod(k if type(k) is int and k > 0 else 1 for k in known)
    sizes = {d: fields.get(d) for d in ("tp", "cp", "pp") if d in named}
    site = min(region.fabrics, key=lambda f: f.num_gpus)
    share, filled = share_gpus(region, fields)
    if gpus:
        return data_parallel(known, gpus, sizes)
    if site.num_gpus * region.num_sites == region.num_gpus and not filled:
        return region.num_sites * data_parallel(
            known, site.num_gpus, sizes, where="of each site (alike sites: every site runs the same share)",
            sites=region.num_sites)
    if split_by_size(region, shares, across):
        return largest_dp(region, known, fields)
    return region.num_sites * data_parallel(
        known, share, sizes, where=f"of the smallest site{' ' + filled if filled else ''} (every site runs that "
        f"share)", sites=region.num_sites)


def split_by_size(region: Region, shares: str = DEFAULT_SHARES, across: str | None = "dp") -> bool:
    """Whether the job's replicas split over the sites by their size (``by-size`` shares on sites of different
    sizes, not pipeline stages across them)."""
    return shares == "by-size" and across != "pp" and len({f.num_gpus for f in region.fabrics}) > 1


def largest_dp(region: Region, known: int, fields: dict) -> int:
    """The most replicas of ``known`` GPUs each that every site's GPUs hold together (each site its own: what the
    job's placement holds there, :func:`~topo.training.multisite.site_capacities`; skip72: not the whole site past a
    skipped domain) and the global batch splits into (whole micro-batches a replica; at least one a site)."""
    most = sum(n // known for n in site_capacities(region, **placement_fields(fields)))
    batch = fields.get("global_batch") or 0
    mb = fields.get("micro_batch") or 1
    fits = [d for d in range(most, region.num_sites - 1, -1) if batch and batch % (d * mb) == 0]
    return fits[0] if fits else most


def share_gpus(region: Region, placement: dict) -> tuple[int, str]:
    """The GPUs of one site's share that a job given neither dp nor its GPUs fills: the smallest site's from the
    job's ``first_gpu`` past its ``skip_domains`` (indices within a site; :func:`topo.training.mapping.job_gpus`, as on one
    site), and the words naming them ("" for the whole site)."""
    site = min(region.fabrics, key=lambda f: f.num_gpus)
    return job_gpus(site, placement.get("first_gpu"), placement.get("skip_domains"),
                    placement.get("gpus_per_domain_used"))
