"""``topo profile list`` and ``topo profile show NAME|FILE``: the cost-model profiles and where each value comes from."""

from __future__ import annotations

from pathlib import Path

from ..errors import TopoError
from ..engine.profile_data import PARAMETERS, bundled_files
from ..engine.profiles import NCCL_VERSIONS, bundled_profile_names, resolve_profile
from .output import emit, emit_json, table


def register(sub) -> None:
    p = sub.add_parser("profile", help="list the cost-model profiles, or show one with the source of every value",
                       description="Profiles are data files (topo/data/profiles/): NCCL constants per NCCL version, "
                       "per GPU generation, per network. A profile is named GENERATION+NETWORK[@NCCL_VERSION], "
                       "or is a TOML file such as 'topo calibrate' writes.")
    ps = p.add_subparsers(dest="action", metavar="ACTION")
    ps.required = True
    pl = ps.add_parser("list", help="every bundled profile and data file")
    pl.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    pl.set_defaults(func=run_list)
    sh = ps.add_parser("show", help="one profile's values with their sources")
    sh.add_argument("name", metavar="NAME|FILE", help="e.g. hopper+infiniband_ndr, ampere+roce@2.7, my-cluster.toml")
    sh.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    sh.set_defaults(func=run_show)


def run_list(args) -> int:
    files = bundled_files()
    doc = {"profiles": bundled_profile_names(), "nccl_versions": list(NCCL_VERSIONS),
           "files": {kind: {name: {"description": f.description,
                                   "fitted": sorted(k for k, p in f.params.items() if p.fitted),
                                   "assumed": sorted(k for k, p in f.params.items() if p.assumed)}
                            for name, f in by_name.items()} for kind, by_name in files.items()}}
    if args.json:
        emit_json(doc)
        return 0
    rows = [(kind, name, info["description"], ", ".join(info["fitted"]) or "-", ", ".join(info["assumed"]) or "-")
            for kind, by_name in doc["files"].items() for name, info in by_name.items()]
    emit(table(rows, ["kind", "name", "description", "fitted", "assumed"]))
    emit("")
    emit(f"profiles: GENERATION+NETWORK, e.g. {bundled_profile_names()[0]} "
         f"(NCCL constants {NCCL_VERSIONS[-1]}; '@{NCCL_VERSIONS[0]}' for older ones)")
    emit("  " + " ".join(bundled_profile_names()))
    return 0


def _fmt(v) -> str:
    if isinstance(v, dict) and all(isinstance(x, list) for x in v.values()):  # per protocol (tree_correction)
        return "; ".join(f"{p} {x}" for p, x in v.items())
    if isinstance(v, dict):
        return "; ".join(f"{fam} " + "/".join(f"{p}={x}" for p, x in protos.items()) for fam, protos in v.items())
    return str(v)


def _profile(name: str):
    """The profile ``profile show`` shows; an error names the profile asked for (not the argument's metavar)
    and, for a name that is neither a file nor GENERATION+NETWORK, lists the bundled ones."""
    source = name or "''"
    if name == "nccl":
        raise TopoError("is the profile of a fabric's GPU generation and network, and profile show has no fabric: "
                        f"name one, e.g. {bundled_profile_names()[0]}; bundled: {', '.join(bundled_profile_names())}",
                        source=source)
    if name != "ideal" and "+" not in name and not name.endswith(".toml") and not Path(name).exists():
        raise TopoError(f"no such profile file or bundled profile; bundled: {', '.join(bundled_profile_names())} "
                        f"(GENERATION+NETWORK, '@{NCCL_VERSIONS[0]}' for older NCCL constants), or a profile file "
                        "(.toml) as topo calibrate writes", source=source)
    try:
        return resolve_profile(name)
    except TopoError as exc:
        if exc.key != "profile":
            raise
        named = f"{name!r}: "  # resolve_profile names the profile in its message; here it is the line's source
        raise TopoError(exc.message[len(named):] if exc.message.startswith(named) else exc.message,
                        source=source) from None


def run_show(args) -> int:
    prof = _profile(args.name)
    if not prof.sources:
        raise TopoError("has no data files: it is the textbook alpha-beta machine (line rates, link latencies "
                        "only)", source=args.name)
    doc = {"name": prof.name, "source": prof.source,
           "parameters": {k: {**s, "unit": _unit(k), "doc": PARAMETERS[k].doc} for k, s in prof.sources.items()}}
    if args.json:
        emit_json(doc)
        return 0
    emit(f"# profile {prof.name} ({prof.source})")
    for k, s in doc["parameters"].items():
        tag = "fitted" if s["fitted"] else ("assumed" if s["assumed"] else "published")
        emit(f"{k} = {_fmt(s['value'])}  [{tag}]")
        emit(f"    source: {s['source']}")
        if s["fitted"]:
            emit(f"    fitted on: {s['fitted_on']}")
    return 0


def _unit(name: str) -> str:
    for suffix, unit in (("_us", "us"), ("_GBps", "GB/s"), ("_bytes", "bytes")):
        if name.endswith(suffix):
            return unit
    return "1"
