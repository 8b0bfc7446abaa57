"""Arguments of the commands that estimate collectives on a fabric (``topo estimate``, ``compare``, ``calibrate``):
which GPUs the ranks are, and a note when a profile was fitted on another cluster.

Apart from :mod:`topo.cli.common` (the spec and its overrides, which every command takes) so that a command that
does not estimate (``topo describe``, ``plan``) does not import the engine's options, router and profiles.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..engine.options import CHOICES, EstimateOptions
from ..engine.profile_data import load_profile_file
from ..engine.profiles import resolve_profile
from ..errors import TopoError
from .flags import FLAGS

__all__ = ["add_placement_arguments", "parse_ranks", "placement_from_args", "check_placement_flags",
           "profile_mismatch", "PLACEMENT_FLAGS", "add_profile_argument", "profile_notes",
           "check_profile_flag", "as_profile_flag"]

# the placement options of topo.engine.options.EstimateOptions -> the flags that set them (estimate, compare,
# calibrate), read from the one flag map; their defaults are the options object's, declared there once
PLACEMENT_FLAGS = {k: FLAGS[k] for k in ("gpus", "ranks", "placement", "rail", "rank_order")}


def add_placement_arguments(p: argparse.ArgumentParser,
                            gpus_help: str = "number of GPUs (default: all)") -> None:
    """Declare which GPUs the ranks are: ``-g/--gpus N``, ``--ranks IDS``, ``--rank-order``, ``--placement``,
    ``--rail``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser (estimate, compare, calibrate).
    gpus_help : str
        The help of ``--gpus`` (a count of GPUs, or of a log's ranks).

    Notes
    -----
    The placement fields of :class:`topo.engine.options.EstimateOptions`: their choices (:data:`CHOICES`) and
    defaults (:meth:`EstimateOptions.default`) are declared there once; read the flags back with
    :func:`placement_from_args`.
    """
    def default(option):
        return f"default {EstimateOptions.default(option)}"

    p.add_argument("-g", "--gpus", default=None, metavar="N", help=gpus_help)
    p.add_argument("--ranks", default=None, metavar="IDS",
                   help="explicit GPU ids, e.g. 0-7,64-71 (0-63,72-135: 16 trays in each of two NVL72 racks)")
    p.add_argument("--rank-order", default=None, choices=CHOICES["rank_order"],
                   help="with --ranks: order ranks as NCCL forms its ring (nccl) or exactly as listed (given; "
                   f"{default('rank_order')})")
    p.add_argument("--placement", default=None, choices=CHOICES["placement"],
                   help=f"how --gpus are chosen ({default('placement')}; packed: fill domains, servers, leaves, pods "
                   "in order)")
    p.add_argument("--rail", default=None, metavar="R",
                   help=f"GPU index within the server for one_per_server ({default('rail')})")


def parse_ranks(text: str, key: str = "--ranks") -> list[int]:
    """``0-7,64,70-71`` -> GPU ids.

    >>> parse_ranks("0-3,8")
    [0, 1, 2, 3, 8]
    """
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise TopoError(f"cannot read {part!r}; write GPU ids and ranges such as 0-7,64-71", key=key)
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a:
            raise TopoError(f"range {part!r} runs backwards", key=key)
        out.extend(range(a, b + 1))
    return out


def _whole_number(text, key):
    try:
        return int(text)
    except (TypeError, ValueError):
        raise TopoError(f"must be a whole number, got {text!r}", key=key) from None


def check_placement_flags(args) -> None:
    """Refuse placement flags that would be ignored: ``--placement`` or ``--rail`` beside ``--ranks`` (the list
    names the GPUs), ``--rail`` without ``--placement one_per_server``, ``--rank-order`` without ``--ranks``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``gpus``, ``ranks``, ``placement``, ``rail`` and ``rank_order`` (None: not given).

    Raises
    ------
    TopoError
        Keyed by the flag that would be ignored, or ``--ranks`` for both ``--gpus`` and ``--ranks``.
    """
    if args.gpus is not None and args.ranks is not None:
        raise TopoError("give either --gpus or --ranks, not both", key="--ranks")
    if args.ranks is not None and args.placement is not None:
        raise TopoError(f"{args.placement} chooses which GPUs run; --ranks lists them: give one, not both",
                        key="--placement")
    if args.rail is not None and args.ranks is not None:
        raise TopoError("picks the GPU of each server for --placement one_per_server; --ranks lists the GPUs: "
                        "give one, not both", key="--rail")
    if args.rail is not None and args.placement != "one_per_server":
        raise TopoError(f"picks the GPU of each server for --placement one_per_server, and the placement is "
                        f"{args.placement or 'packed (the default)'}: add --placement one_per_server or leave "
                        "--rail out", key="--rail")
    if args.rank_order is not None and args.ranks is None:
        raise TopoError("orders the GPUs --ranks lists; without --ranks there is nothing to order",
                        key="--rank-order")


def placement_from_args(args) -> dict:
    """The placement options the flags of :func:`add_placement_arguments` give.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``gpus``, ``ranks``, ``placement``, ``rail`` and ``rank_order``.

    Returns
    -------
    dict
        Keyword arguments of :class:`topo.engine.options.EstimateOptions`, only those given (the options' own
        defaults apply to the rest).

    Raises
    ------
    TopoError
        Keyed by the flag: both ``--gpus`` and ``--ranks``, a flag that would be ignored
        (:func:`check_placement_flags`), a count that is not a whole number, a bad rank list.
    """
    check_placement_flags(args)
    out = {}
    if args.gpus is not None:
        out["gpus"] = _whole_number(args.gpus, "--gpus")
    if args.ranks is not None:
        out["ranks"] = parse_ranks(args.ranks)
    if args.placement is not None:
        out["placement"] = args.placement
    if args.rail is not None:
        out["rail"] = _whole_number(args.rail, "--rail")
    if args.rank_order is not None:
        out["rank_order"] = args.rank_order
    return out


def add_profile_argument(p, what: str) -> None:
    """``--profile NAME|FILE`` on a command that prices collectives on a spec's fabric (``what``: which ones)."""
    p.add_argument("--profile", default=None, metavar="NAME|FILE",
                   help=f"cost profile of {what} (default nccl: the fabric's own GPU generation and network); a "
                   "file topo calibrate wrote, a bundled name (topo profile list) or ideal, as topo estimate "
                   "--profile takes it")


def profile_notes(profile, fabrics) -> list[str]:
    """:func:`profile_mismatch`'s note for each of ``fabrics`` that has one, each note once (a region's sites, a
    report's specs)."""
    return list(dict.fromkeys(n for n in (profile_mismatch(profile, f) for f in fabrics) if n))


def as_profile_flag(exc: TopoError) -> TopoError:
    """An unknown profile name said by its flag, ``--profile``, as ``topo estimate`` says it (the library's key is
    ``profile``); any other error (a file's own errors name the file) as it is."""
    return TopoError(exc.message, key="--profile") if exc.key == "profile" and exc.source is None else exc


def check_profile_flag(profile, fabrics) -> None:
    """Resolve ``--profile`` on each of ``fabrics`` before any work (:func:`as_profile_flag`)."""
    for fabric in fabrics if profile is not None else ():
        try:
            resolve_profile(profile, fabric)
        except TopoError as exc:
            raise as_profile_flag(exc) from None


def profile_mismatch(profile, fabric) -> str | None:
    """A note when a calibrated profile file (``kind = "user"``) was fitted from another GPU generation or network
    than the fabric's own profile: its fitted values then describe another cluster. For a bundled name, a note only
    when its GPU generation is not the fabric's (another network is a what-if the user chose knowingly)."""
    if not isinstance(profile, str):
        return None
    if "+" in profile and not (profile.endswith(".toml") or Path(profile).is_file()):
        gen, own_gen = profile.split("+")[0], fabric.spec.gpu_model.generation
        if gen != own_gen:
            return (f"note: profile {profile} prices {gen} GPUs, but this spec ({fabric.spec.name}) has "
                    f"{fabric.spec.gpu_model.name} ({own_gen}): NVLink and protocol constants of another generation")
        return None
    if not (profile.endswith(".toml") or Path(profile).is_file()):
        return None
    pf = load_profile_file(profile)
    if pf.kind != "user" or not pf.base or pf.base == "nccl":
        return None
    own = resolve_profile("nccl", fabric).name
    if pf.base.split("@")[0] == own.split("@")[0]:
        return None
    return (f"note: {profile} was fitted on a {pf.base.split('@')[0]} cluster, but this spec ({fabric.spec.name}) "
            f"is {own.split('@')[0]}: its fitted values describe another cluster; give the calibrated cluster's "
            "spec (GPU, NICs, network)")
