"""Arguments shared by commands: the SPEC argument, ``--set`` overrides and outputs (the placement of ranks, which only
the estimating commands take, is :mod:`topo.cli.estimate_args`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from ..engine.nic_notes import technology_mismatch
from ..dp_fill import UndividedGpus, data_parallel as _data_parallel
from ..errors import TopoError
from ..fabric.builders import build_fabric
from ..spec import DEFAULT_SPEC, load_spec
from ..spec.overrides import Unset
from .design_sets import overrides_for

__all__ = ["add_spec_arguments", "add_override_arguments", "add_output_arguments", "fabric_from_args",
           "spec_from_args", "technology_note", "data_parallel", "UndividedGpus", "GivenOnce"]

class GivenOnce(argparse.Action):
    """An option that may be given once: a second ``--layout`` is a usage error, never silently the only one read
    (walk14: ``--layout tp=8,global_batch=8 --layout fp8_recipe=mxfp8`` dropped the first and asked for a batch)."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        if before is not None and before != self.default:
            parser.error(f"{option_string}: given twice ({before!r}, then {values!r}); give it once (one file, or "
                         "its pairs joined by commas)")
        setattr(namespace, self.dest, values)


def add_spec_arguments(p: argparse.ArgumentParser, many: bool = False) -> None:
    if many:
        p.add_argument("specs", nargs="*", metavar="SPEC",
                       help=f"spec files or bundled names (default: {DEFAULT_SPEC})")
    else:
        p.add_argument("spec", nargs="?", metavar="SPEC",
                       help=f"a spec file or bundled name (default: {DEFAULT_SPEC}); see 'topo list'")
    add_override_arguments(p)
    p.add_argument("--fail", dest="failures", action="append", default=[], metavar="PART",
                   help="fail a part: a switch (spine3), a NIC (nic12.3), a link (leaf3-spine0), rail:K, plane:J, "
                   "pod:N (every uplink of pod N) or random:LEVEL_OR_TIER:FRACTION[:SEED] (random:link:F: F of "
                   "every network cable); repeat for more")


def add_override_arguments(p: argparse.ArgumentParser, what: str = "a spec field") -> None:
    """``--set KEY=VALUE`` and ``--unset KEY`` (the same as ``--set KEY=``), applied in the order given."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override {what} by dotted path, e.g. --set fabric.tiers[1].oversubscription=3; "
                   "KEY= removes the key")
    p.add_argument("--unset", dest="overrides", action="append", metavar="KEY", type=lambda k: Unset(f"{k}="),
                   help="remove a spec field (or a list item such as fabric.tiers[core]), e.g. --unset "
                   "cluster.num_units --set cluster.num_gpus=512")


def add_output_arguments(p: argparse.ArgumentParser, default: str) -> None:
    """``-o FILE`` (``-`` for standard output) and ``--force`` (see :func:`topo.atomic.open_output`)."""
    p.add_argument("-o", "--output", metavar="FILE",
                   help=f"output file, '-' for standard output (default: {default}); never written over a SPEC, "
                   "and an existing file topo did not write is kept unless --force")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output file even if topo did not write it (never a SPEC)")


_CLUSTER_SIZES = ("num_gpus", "num_servers", "num_units", "num_pods")


def spec_from_args(args, name=None):
    """The spec the arguments name, with their ``--set``/``--unset`` overrides. A cluster size set with ``--set``
    beside the one the file gives gets the ``--unset`` that resolves it."""
    overrides = overrides_for(args, name)
    try:
        return load_spec(name if name is not None else getattr(args, "spec", None), overrides)
    except TopoError as exc:
        if exc.key != "cluster" or "give exactly one of" not in exc.message:
            raise
        set_now = {o.split("=", 1)[0].strip() for o in overrides if not o.endswith("=")}
        mine = [k for k in _CLUSTER_SIZES if f"cluster.{k}" in set_now]
        others = [k for k in _CLUSTER_SIZES if k not in mine and k in exc.message.split("got ", 1)[-1]]
        if not mine or not others:
            raise
        unset = " ".join(f"--unset cluster.{k}" for k in others)
        raise TopoError(f"{exc.message}: add {unset} to replace the file's {' and '.join(others)} by the "
                        f"{' and '.join(mine)} you set", source=exc.source, key=exc.key) from None


def fabric_from_args(args, name=None, spec=None):
    """The fabric the arguments describe (``spec``: the spec to build in place of the one they name, e.g. sized
    to a power budget), with the parts ``--fail`` names failed. A design the overrides made impossible names them
    (``server.nics=1000``), as a spec error names the override it is about."""
    spec = spec if spec is not None else spec_from_args(args, name)
    try:
        fabric = build_fabric(spec)
    except TopoError as exc:
        raise naming_overrides(exc, overrides_for(args, name), "with --set") from None
    return with_failures_named(fabric, getattr(args, "failures", None))


def naming_overrides(exc: TopoError, overrides: Sequence[str], lead: str = "--set") -> TopoError:
    """``exc``, a rule a fabric or region checks once built, with the ``--set`` overrides it was built with named
    after its source (``FILE (with --set server.nics=1000)``, as a spec error names the override it is about):
    ``exc`` itself where none was set (removals, ``KEY=``, are not named), it names no source, or its source names
    them already.

    Parameters
    ----------
    exc : TopoError
        The error building raised.
    overrides : sequence of str
        The ``KEY=VALUE`` overrides the build was given.
    lead : str
        What precedes the overrides in the parentheses (``--set``; ``with --set`` for a fabric's design rule).

    Returns
    -------
    TopoError
        The error to raise.
    """
    given = [o for o in overrides if not o.endswith("=")]
    if not given or not exc.source or "(--set" in exc.source:
        return exc
    return TopoError(exc.message, source=f"{exc.source} ({lead} {', '.join(given)})", key=exc.key)


def with_failures_named(built, failures: Sequence[str] | None):
    """``built`` (a fabric or a region) with the parts ``--fail`` names failed (``built.with_failures``), ``built``
    itself without any; a part it cannot fail raises a :class:`TopoError` keyed ``--fail`` that names ``built``
    (which of several specs).

    Parameters
    ----------
    built : Fabric or Region
    failures : sequence of str or None
        The ``--fail`` values.

    Returns
    -------
    Fabric or Region
    """
    if not failures:
        return built
    try:
        return built.with_failures(*failures)
    except TopoError as exc:
        raise TopoError(f"{exc.message} (on {built.name})", key="--fail") from None


_FIGURE = re.compile(r"\d[\d,.:]*\d|\d")  # 1,792 and 7:1 and 12.8 as written


def without_overrides(args) -> argparse.Namespace:
    """``args`` without its ``--set``/``--unset`` overrides and ``--fail`` parts: the file as it is."""
    return argparse.Namespace(**{**vars(args), "overrides": [], "failures": None})


def own_text(args, render) -> str | None:
    """``render(args)`` without the ``--set``/``--unset`` overrides and ``--fail`` parts, the file's own text that
    :func:`with_overrides` compares with; None without overrides, or where the file alone fails (describe of one
    site and of a region alike).

    Parameters
    ----------
    args : argparse.Namespace
    render : callable
        Takes the arguments, returns the text.

    Returns
    -------
    str or None
    """
    if not getattr(args, "overrides", None):
        return None
    try:
        return render(without_overrides(args))
    except TopoError:
        return None


def _header_contradicted(own: str, text: str) -> bool:
    """Whether a figure of the header's prose (not its sources) that the file's own table shows is gone from the
    overridden table (walk16: "pods of 1,792 GPUs, 7:1 between pods" over 1,536-GPU pods at 3:1)."""
    def parts(t: str) -> tuple[str, set[str]]:
        lines = t.split("\n")
        at = lines.index("") if "" in lines else 1
        head = "\n".join(x for x in lines[:at] if not x.strip().startswith("source"))
        return head, set(_FIGURE.findall("\n".join(lines[at:])))
    head, own_body = parts(own)
    new_body = parts(text)[1]
    return any(f in own_body and f not in new_body for f in _FIGURE.findall(head))


def with_overrides(text: str, args, own: str | None = None) -> str:
    """``describe``'s text with a line under its header (name, description, sources, assumptions) naming the
    ``--set``/``--unset`` overrides, since that header is the file's own prose, written before them (walk16: ``--set
    fabric.units_per_pod=6`` still read "non-blocking pods of 1,792 GPUs, 7:1 between pods" above a 1,536-GPU, 3:1
    table). With ``own``, the file's text without the overrides, the line is printed only where a figure of the
    header that ``own``'s table shows is gone (walk17: ``--set cluster.num_units=1`` on ``dgx-h100-superpod``
    contradicts nothing in "scalable units of 32 DGX H100")."""
    given = [f"--unset {o[:-1]}" if o.endswith("=") else f"--set {o}" for o in getattr(args, "overrides", None) or []]
    if not given or (own is not None and not _header_contradicted(own, text)):
        return text
    lines = text.split("\n")
    at = lines.index("") if "" in lines else 1
    line = f"  with {' '.join(given)}: the lines above are the file's own, written before these overrides"
    return "\n".join(lines[:at] + [line] + lines[at:])


def technology_note(fabric) -> str | None:
    """A note when the spec's NICs are faster than its network technology's fastest port (800 Gb/s NICs on
    ``infiniband_ndr``, 400 Gb/s): the costs are that technology's constants, likely not what was meant
    (:func:`topo.engine.nic_notes.technology_mismatch`)."""
    said = technology_mismatch(fabric.spec)
    return f"note: {said}" if said else None


def data_parallel(known: int, gpus: int, flags: dict | None = None, where: str = "", dp_as: str = "--dp N",
                  sites: int = 1) -> int:
    """``--dp`` when it is not given: :func:`topo.dp_fill.data_parallel` in the flags' words (``flags``: flag ->
    size, the sizes the user gave as flags; with none at fault, ``--dp``)."""
    return _data_parallel(known, gpus, flags, where=where, dp_as=dp_as, sites=sites, dp_name="--dp")
