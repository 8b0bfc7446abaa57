"""Arguments shared by commands: the SPEC argument, ``--set`` overrides, outputs and the placement of ranks."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..engine.profile_data import bundled_files, load_profile_file
from ..engine.profiles import resolve_profile
from ..engine.options import CHOICES, EstimateOptions
from ..errors import TopoError
from ..fabric.builders import build_fabric
from ..spec import DEFAULT_SPEC, load_spec

__all__ = ["add_spec_arguments", "add_override_arguments", "add_output_arguments", "add_placement_arguments",
           "fabric_from_args", "spec_from_args", "parse_ranks", "placement_from_args", "check_placement_flags",
           "PLACEMENT_FLAGS"]

# the placement options of topo.engine.options.EstimateOptions -> the flags that set them (estimate, compare,
# calibrate); their defaults are the options object's, declared there once
PLACEMENT_FLAGS = {"gpus": "--gpus", "ranks": "--ranks", "placement": "--placement", "rail": "--rail",
                   "rank_order": "--rank-order"}


def add_spec_arguments(p: argparse.ArgumentParser, many: bool = False) -> None:
    if many:
        p.add_argument("specs", nargs="*", metavar="SPEC",
                       help=f"spec files or bundled names (default: {DEFAULT_SPEC})")
    else:
        p.add_argument("spec", nargs="?", metavar="SPEC",
                       help=f"a spec file or bundled name (default: {DEFAULT_SPEC}); see 'topo list'")
    add_override_arguments(p)
    p.add_argument("--fail", dest="failures", action="append", default=[], metavar="PART",
                   help="fail a part: a switch (spine3), a NIC (nic12.3), a link (leaf3-spine0), rail:K, plane:J "
                   "or random:LEVEL_OR_TIER:FRACTION[:SEED]; repeat for more")


def add_override_arguments(p: argparse.ArgumentParser, what: str = "a spec field") -> None:
    """``--set KEY=VALUE`` and ``--unset KEY`` (the same as ``--set KEY=``), applied in the order given."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override {what} by dotted path, e.g. --set fabric.tiers[1].oversubscription=3; "
                   "KEY= removes the key")
    p.add_argument("--unset", dest="overrides", action="append", metavar="KEY", type=lambda k: f"{k}=",
                   help="remove a spec field (or a list item such as fabric.tiers[core]), e.g. --unset "
                   "cluster.num_units --set cluster.num_gpus=512")


def add_output_arguments(p: argparse.ArgumentParser, default: str) -> None:
    """``-o FILE`` (``-`` for standard output) and ``--force`` (see :func:`topo.atomic.open_output`)."""
    p.add_argument("-o", "--output", metavar="FILE",
                   help=f"output file, '-' for standard output (default: {default}); never written over a SPEC, "
                   "and an existing file topo did not write is kept unless --force")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output file even if topo did not write it (never a SPEC)")


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
_CLUSTER_SIZES = ("num_gpus", "num_servers", "num_units", "num_pods")


def spec_from_args(args, name=None):
    """The spec the arguments name, with their ``--set``/``--unset`` overrides. A cluster size set with ``--set``
    beside the one the file gives gets the ``--unset`` that resolves it."""
    overrides = getattr(args, "overrides", None) or []
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


def fabric_from_args(args, name=None):
    """The fabric the arguments describe, with the parts ``--fail`` names failed. A design the overrides made
    impossible names them (``server.nics=1000``), as a spec error names the override it is about."""
    spec = spec_from_args(args, name)
    try:
        fabric = build_fabric(spec)
    except TopoError as exc:
        given = [o for o in (getattr(args, "overrides", None) or []) if not o.endswith("=")]
        if not given or not exc.source or "(--set" in exc.source:
            raise
        raise TopoError(exc.message, source=f"{exc.source} (with --set {', '.join(given)})", key=exc.key) from None
    failures = getattr(args, "failures", None)
    if failures:
        try:
            fabric = fabric.with_failures(*failures)
        except TopoError as exc:
            raise TopoError(f"{exc.message} (on {fabric.name})", key="--fail") from None  # which of several specs
    return fabric


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


def technology_note(fabric) -> str | None:
    """A note when the spec's NICs are faster than its network technology's fastest port (800 Gb/s NICs on
    ``infiniband_ndr``, 400 Gb/s): the costs are that technology's constants, likely not what was meant."""
    tech = fabric.spec.fabric.technology
    pf = bundled_files()["network"].get(tech)
    p = pf.params.get("max_port_rate_Gbps") if pf else None
    nic_Gbps = fabric.spec.server.nic_rate_Bps * 8 / 1e9
    if p is None or nic_Gbps <= p.value * (1 + 1e-9):
        return None
    faster = sorted((q.params["max_port_rate_Gbps"].value, n) for n, q in bundled_files()["network"].items()
                    if "max_port_rate_Gbps" in q.params and q.params["max_port_rate_Gbps"].value >= nic_Gbps)
    hint = f"; {faster[0][1]} runs {faster[0][0]:g} Gb/s ports (fabric.technology)" if faster else ""
    return (f"note: the NICs run {nic_Gbps:g} Gb/s but {tech} ports run at most {p.value:g} Gb/s: the network's "
            f"constants are {tech}'s{hint}")
