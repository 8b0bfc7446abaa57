"""``--across`` and ``--outer-every``: how a job spans a region's sites, the same flags, words and errors on ``topo
train REGION`` and ``topo plan REGION --model`` (the library's ways: :data:`topo.training.ACROSS_SITES`)."""

from __future__ import annotations

from ..errors import TopoError
from ..training import ACROSS_SITES

__all__ = ["add_across_arguments", "check_across", "check_across_use", "across_of", "REGION_ONLY"]

# a region's flag given on one site's spec
REGION_ONLY = "applies to a region of several sites (a spec with [[sites]], e.g. two-site-h100)"


def add_across_arguments(p, what: str = "") -> None:
    """Add ``--across`` (one of :data:`~topo.training.ACROSS_SITES`) and ``--outer-every H`` to parser ``p``;
    ``what`` ends ``--across``'s help (what else the way sets in that command)."""
    p.add_argument("--across", choices=ACROSS_SITES, default=None,
                   help="a region of several sites: the dimension across sites (default dp, the hierarchical "
                   "reduction); outer: a low-communication outer synchronisation every --outer-every steps. Each "
                   "way's 'vs one site' is the slowest site's share's step (what the job steps at over a free DCI) "
                   "over the step across sites, and its 'DCI for 95%%' the capacity at which that is 95%%" + what)
    p.add_argument("--outer-every", type=int, default=None, metavar="H",
                   help="a region: inner steps between outer synchronisations (DiLoCo-like)")


def check_across(args) -> None:
    """The one-line errors of ``--outer-every`` below 1 and of ``--across outer`` without it (before any work).

    Raises
    ------
    TopoError
        Keyed ``--outer-every``.
    """
    every = getattr(args, "outer_every", None)
    if every is not None and every < 1:
        raise TopoError(f"must be a whole number >= 1, got {every}", key="--outer-every")
    if getattr(args, "across", None) == "outer" and every is None:
        raise TopoError("--across outer needs the outer synchronisation's period: give --outer-every H (inner "
                        "steps)", key="--outer-every")


def check_across_use(args, region: bool, job: bool) -> None:
    """``--across`` and ``--outer-every`` refused where nothing spans sites -- one site's spec, or a region without
    a job (``--model``; ``topo report``'s ``--train`` is its alias) -- in the same words on ``topo plan`` and ``topo
    report`` (tidy84), then :func:`check_across`.

    Parameters
    ----------
    args : argparse.Namespace
        The command's parsed flags (``across``, ``outer_every``).
    region : bool
        The spec is a region of several sites.
    job : bool
        A job is given (its model and layout).

    Raises
    ------
    TopoError
        Keyed by the flag at fault.
    """
    for flag in ("--across", "--outer-every"):
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is None:
            continue
        if not region:
            raise TopoError(REGION_ONLY, key=flag)
        if not job:  # plan81: the way a job spans the sites; no job, no way
            raise TopoError(f"{value}: a region's plan without --model times no job, so nothing spans the sites; "
                            f"allowed: {flag} with --model M --layout L", key=flag)
    check_across(args)


def across_of(args) -> str:
    """The way the job spans the sites: ``--across``'s, else ``outer`` with ``--outer-every``, else ``dp`` (a
    command without the flags: ``dp``)."""
    return getattr(args, "across", None) or ("outer" if getattr(args, "outer_every", None) else "dp")
