"""Arguments shared by commands: the SPEC argument and ``--set`` overrides."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..engine.profile_data import load_profile_file
from ..engine.profiles import resolve_profile
from ..errors import TopoError
from ..fabric.builders import build_fabric
from ..spec import DEFAULT_SPEC, load_spec

__all__ = ["add_spec_arguments", "add_override_arguments", "add_output_arguments", "fabric_from_args", "spec_from_args"]


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


def spec_from_args(args, name=None):
    return load_spec(name if name is not None else getattr(args, "spec", None), args.overrides)


def fabric_from_args(args, name=None):
    """The fabric the arguments describe, with the parts ``--fail`` names failed."""
    fabric = build_fabric(spec_from_args(args, name))
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
