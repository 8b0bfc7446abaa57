"""dp of a ``--layout`` that gives none: the job's GPUs over tp x cp x pp. One rule for ``topo train`` (walk24:
``--layout ep_dispatcher=deepep`` beside the flags kept their job) and for ``topo plan`` / ``topo report``, where
each design of several fills its own GPUs (plan65: one dp fitted one design only)."""

from __future__ import annotations

import math
import re

from ..errors import TopoError
from .. import training  # lazy (PEP 562): topo plan without --model imports no step model (test_startup)
from ..dp_fill import placement_fields
from .common import UndividedGpus, data_parallel

__all__ = ["layout_dp", "design_dp", "layout_source", "on_design", "filled_dp", "sized_by", "placed_by",
           "skip_way_dp", "skip_offered", "placement_fields"]


def sized_by(exc: TopoError, gpus: int | None, dp: int | None, placed: str | None = None) -> TopoError:
    """An error about the job's GPUs (key ``gpus``: the placement's, a job larger than its fabric; a search's, no
    layout divides them) named by the flag that sized it: ``--gpus``, else ``--dp`` (rev65: a region's share refused
    at the site's size named ``--gpus`` when the user gave ``--dp``), else ``placed`` (:func:`placed_by`: rev66, a
    search filled from ``--first-gpu`` named ``--gpus``); any other error, or a job none sized, as it is."""
    flag = "--gpus" if gpus else "--dp" if dp else placed
    if exc.source in (None, "layout") and exc.key == "gpus" and flag:
        return TopoError(exc.message, key=flag)
    return exc


def placed_by(args, filled: str) -> str | None:
    """The flags that sized a job filled from its first GPU past its skipped domains (``filled``: :func:`~topo.training.mapping.job_gpus`'
    words, "" where the job is the whole fabric and no flag sized it): ``--first-gpu``, ``--skip-domains``,
    ``--gpus-per-domain-used`` as given (rev95: a search filled at 61 of each domain by the flag was refused naming
    ``--gpus``, not given), else the layout that gave them."""
    if not filled:
        return None
    flags = [f"--{k.replace('_', '-')}" for k in ("first_gpu", "skip_domains", "gpus_per_domain_used")
             if getattr(args, k, None) is not None]
    return " and ".join(flags) or (layout_source(args.layout) if getattr(args, "layout", None) else None)


def skip_way_dp(exc: TopoError, fabric, known: int, first_gpu: int = 0, sites: int = 1,
                gpus_per_domain_used: int | None = None, batch: int | None = None) -> TopoError:
    """A failure's refusal (key ``fail``) whose way past it skips NVLink domains (``skip_domains = [..]``,
    :func:`~topo.training.mapping.refuse_failed_gpus`), for a job whose dp was filled from the GPUs: where tp x cp
    x pp (``known``) does not divide the GPUs a filled dp would fill past those domains (:func:`~topo.training.mapping.job_gpus`; on
    ``fabric``, a region's smallest site), the skip alone is refused in turn, so the way names dp too (walk29:
    ``--skip-domains [3]`` on a region, then "does not divide the 16,056 GPUs", ``--dp N`` named only then), at the
    job's ``gpus_per_domain_used`` of each domain (rev95: a job at 64 of each NVL72 rack was told the skip alone
    would fill 216 GPUs of 3 racks, which 32 does not divide, where it fills 3 x 64 = 192 and runs). Where tp x cp x
    pp divides them and the refusal offers the skip only with spare domains (the job at its filled size), the skip
    alone is said first with the dp it then fills (tidy96: a job at 64 of each of 4 NVL72 racks, rack 3 failed, was
    offered "1 more NVLink domain" only, where the skip alone runs at dp 6).

    Parameters
    ----------
    exc : TopoError
        The step's refusal.
    fabric : Fabric
        The fabric the job fills (a region's smallest site).
    known : int
        tp x cp x pp.
    first_gpu : int
        The job's first GPU.
    sites : int
        Sites that each run the share (dp counts every site's).
    gpus_per_domain_used : int, optional
        The job's GPUs of each NVLink domain (None: every one).
    batch : int, optional
        Micro-batches a step (global batch over micro-batch): a refilled dp that does not divide them is not offered.

    Returns
    -------
    TopoError
        ``exc``, with ``--dp N`` (the most the GPUs past the skipped domains hold) after the skip where it is needed.
    """
    found, skip = skip_offered(exc)
    if found is None:
        return exc
    gpus, words = training.job_gpus(fabric, first_gpu, skip, gpus_per_domain_used)
    where = " of the smallest site (every site runs that share)" if sites > 1 else ""
    spare = exc.message[found.end():].startswith(" with ")  # the skip that keeps the job's dp on spare domains
    if gpus % known == 0:
        dp = sites * (gpus // known)
        if not spare or (batch and batch % dp):
            return exc
        way = (f"{found[0]} (a dp left to fill the GPUs is then {dp:,}: tp x cp x pp = {known} into the {gpus:,} "
               f"GPUs{where} {words}), or {found[0]}")
        return TopoError(exc.message.replace(found[0], way, 1), source=exc.source, key=exc.key)
    way = (f"{found[0]} with --dp {sites * (gpus // known)} (a dp left to fill the GPUs would take the {gpus:,}"
           f"{where} past the skipped domain{'s' if len(skip) > 1 else ''}, which tp x cp x pp = {known} does not "
           f"divide)")
    if spare:
        way += f", or {found[0]}"
    return TopoError(exc.message.replace(found[0], way, 1), source=exc.source, key=exc.key)


def skip_offered(exc: TopoError) -> tuple:
    """The way past a failure a refusal (key ``fail``) offers by skipping NVLink domains
    (:func:`~topo.training.mapping.refuse_failed_gpus`): its match (``skip_domains = [..]`` and the parenthesis
    after it, if any) and the domains, else ``(None, ())``."""
    found = re.search(r"skip_domains = \[([0-9,]+)\]( \([^()]*\))?", exc.message)
    if exc.key != "fail" or found is None:
        return None, ()
    return found, tuple(int(d) for d in found[1].split(","))


def filled_dp(known: int, fabric, flags: dict | None = None, gpus: int | None = None, placement: dict | None = None,
              where: str = "", dp_as: str = "--dp N") -> int:
    """dp where neither the flags nor the layout give it: ``gpus`` (``--gpus``), else the GPUs the job fills on
    ``fabric`` from its ``placement`` (``first_gpu``, ``skip_domains``, ``gpus_per_domain_used``;
    :func:`~topo.training.mapping.job_gpus`), over ``known`` = tp x cp
    x pp (:func:`~topo.cli.common.data_parallel`: ``flags`` name the size at fault, ``where`` and ``dp_as`` the
    GPUs and how dp is given instead). One rule for ``topo train``, ``topo plan`` and ``topo report``."""
    if gpus:
        return data_parallel(known, gpus, flags, where=where, dp_as=dp_as)
    placement = placement or {}
    gpus, filled = training.job_gpus(fabric, placement.get("first_gpu"), placement.get("skip_domains"),
                                     placement.get("gpus_per_domain_used"))
    return data_parallel(known, gpus, flags, where=" ".join(w for w in (where, filled) if w), dp_as=dp_as)


def layout_dp(layout: str, fabric, sizes: dict | None = None, gpus: int | None = None, placement: dict | None = None,
              where: str = "", dp_as: str = "--dp N") -> int | None:
    """The dp of ``layout`` (pairs or a TOML file) when it gives none: the job's GPUs over tp x cp x pp, as without
    ``--layout`` (req48: it stayed 1 and ``--gpus`` refused the job as 1 GPU; walk24: without ``--gpus`` it stayed
    1, so ``--layout ep_dispatcher=deepep`` beside a job's flags refused it as ep not dividing tp x cp x dp = 4).

    Parameters
    ----------
    layout : str
        ``--layout``'s value.
    fabric : Fabric
        The fabric the job runs on.
    sizes : dict, optional
        The sizes given as flags (``tp``, ``cp``, ``pp``; None where not given): they win over the layout's.
    gpus : int, optional
        The job's GPUs (``--gpus``); else those it fills from its first GPU past its skipped domains
        (:func:`~topo.training.mapping.job_gpus`).
    placement : dict, optional
        ``first_gpu`` and ``skip_domains`` given as flags (None where not given): they win over the layout's.
    where, dp_as : str
        Which GPUs, and how dp is given instead, for the error (:func:`~topo.cli.common.data_parallel`).

    Returns
    -------
    int or None
        None where the layout gives dp, or a size that is no whole number (left to the layout's own checks).

    Raises
    ------
    UndividedGpus
        tp x cp x pp does not divide the job's GPUs.
    """
    fields, _ = training.layout_fields(layout)
    if "dp" in fields:
        return None
    sizes, placement = sizes or {}, placement or {}
    given = {d: sizes[d] if sizes.get(d) is not None else fields.get(d, 1) for d in ("tp", "cp", "pp")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in given.values()):
        return None
    flags = {f"--{d}": sizes.get(d) for d in ("tp", "cp", "pp")}  # a product that does not divide: the flag, else --dp
    placed = {k: placement[k] if placement.get(k) is not None else fields.get(k)
              for k in ("first_gpu", "skip_domains", "gpus_per_domain_used")}
    return filled_dp(math.prod(given.values()), fabric, flags, gpus, placed, where=where, dp_as=dp_as)


def layout_source(layout: str) -> str:
    """What an error of ``layout`` names: ``--layout`` for pairs, the file's path for a file."""
    _, source = training.layout_fields(layout)
    return "--layout" if source == "layout" else source


def design_dp(layout: str, fabric, design: str) -> int | None:
    """:func:`layout_dp` on the GPUs of one ``design`` of several (``topo plan``, ``topo report``) the job fills (every
    GPU from its first past its skipped domains, as ``topo train`` fills them); a tp x cp x pp that does not divide
    them is refused naming the design and ``--layout``."""
    try:
        return layout_dp(layout, fabric, where=f"of {design}", dp_as="dp=N in the layout")
    except UndividedGpus as exc:
        raise TopoError(exc.message, source=layout_source(layout), key="dp") from None


def on_design(exc: TopoError, layout: str, design: str) -> TopoError:
    """A layout's error on one design, named by ``--layout`` (or its file) and the design (a SPEC as given)."""
    source = layout_source(layout) if exc.source in ("layout", layout) else exc.source
    text = f"{exc.message} (on {design})"
    if exc.key == "gpus" and "dp" in training.layout_fields(layout)[0]:
        text += "; leave dp out of the layout and each design fills its own GPUs"
    return TopoError(text, source=source, key=exc.key)
