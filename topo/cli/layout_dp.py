"""dp of a ``--layout`` that gives none: the job's GPUs over tp x cp x pp. One rule for ``topo train`` (walk24:
``--layout ep_dispatcher=deepep`` beside the flags kept their job) and for ``topo plan`` / ``topo report``, where
each design of several fills its own GPUs (plan65: one dp fitted one design only)."""

from __future__ import annotations

import math

from ..errors import TopoError
from .. import training  # lazy (PEP 562): topo plan without --model imports no step model (test_startup)
from .common import UndividedGpus, data_parallel

__all__ = ["layout_dp", "design_dp", "layout_source", "on_design"]


def layout_dp(layout: str, gpus: int, sizes: dict | None = None, where: str = "", dp_as: str = "--dp N") -> int | None:
    """The dp of ``layout`` (pairs or a TOML file) when it gives none: ``gpus`` over tp x cp x pp, as without
    ``--layout`` (req48: it stayed 1 and ``--gpus`` refused the job as 1 GPU; walk24: without ``--gpus`` it stayed
    1, so ``--layout ep_dispatcher=deepep`` beside a job's flags refused it as ep not dividing tp x cp x dp = 4).

    Parameters
    ----------
    layout : str
        ``--layout``'s value.
    gpus : int
        The job's GPUs (``--gpus``, else every GPU of the fabric).
    sizes : dict, optional
        The sizes given as flags (``tp``, ``cp``, ``pp``; None where not given): they win over the layout's.
    where, dp_as : str
        Which GPUs, and how dp is given instead, for the error (:func:`~topo.cli.common.data_parallel`).

    Returns
    -------
    int or None
        None where the layout gives dp, or a size that is no whole number (left to the layout's own checks).

    Raises
    ------
    UndividedGpus
        tp x cp x pp does not divide ``gpus``.
    """
    fields, _ = training.layout_fields(layout)
    if "dp" in fields:
        return None
    sizes = sizes or {}
    given = {d: sizes[d] if sizes.get(d) is not None else fields.get(d, 1) for d in ("tp", "cp", "pp")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in given.values()):
        return None
    flags = {f"--{d}": sizes.get(d) for d in ("tp", "cp", "pp")}  # a product that does not divide: the flag, else --dp
    return data_parallel(math.prod(given.values()), gpus, flags, where=where, dp_as=dp_as)


def layout_source(layout: str) -> str:
    """What an error of ``layout`` names: ``--layout`` for pairs, the file's path for a file."""
    _, source = training.layout_fields(layout)
    return "--layout" if source == "layout" else source


def design_dp(layout: str, gpus: int, design: str) -> int | None:
    """:func:`layout_dp` on every GPU of one ``design`` of several (``topo plan``, ``topo report``): each fills its
    own; a tp x cp x pp that does not divide its GPUs is refused naming the design and ``--layout``."""
    try:
        return layout_dp(layout, gpus, where=f"of {design}", dp_as="dp=N in the layout")
    except UndividedGpus as exc:
        raise TopoError(exc.message, source=layout_source(layout), key="dp") from None


def on_design(exc: TopoError, layout: str, design: str) -> TopoError:
    """A layout's error on one design, named by ``--layout`` (or its file) and the design (a SPEC as given)."""
    source = layout_source(layout) if exc.source in ("layout", layout) else exc.source
    text = f"{exc.message} (on {design})"
    if exc.key == "gpus" and "dp" in training.layout_fields(layout)[0]:
        text += "; leave dp out of the layout and each design fills its own GPUs"
    return TopoError(text, source=source, key=exc.key)
