"""``topo list``: the bundled specs."""

from __future__ import annotations

from ..errors import TopoError
from ..spec import DEFAULT_SPEC, bundled_specs, load_spec
from ..spec.load import bundled_dir, bundled_regions
from ..spec.region_load import load_region
from .output import emit, emit_json, table


def register(sub) -> None:
    p = sub.add_parser("list", help="list the bundled specs")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=run)


def run(args) -> int:
    names = bundled_specs()
    if not names:  # a broken installation, not an empty catalog (issue 8: an empty table with exit status 0)
        raise TopoError(f"no bundled specs in {bundled_dir()}: this installation of topo is incomplete; reinstall "
                        "it (the specs ship as package data)")
    rows = []
    for name in names:
        spec = load_spec(name)
        rows.append({"name": name, "default": name == DEFAULT_SPEC, "gpu": spec.gpu, "kind": spec.fabric.kind,
                     "description": spec.description})
    for name in bundled_regions():  # several sites: the GPU of their first site, the DCI's topology
        region, specs = load_region(name)
        rows.append({"name": name, "default": False, "gpu": specs[0].gpu,
                     "kind": f"{len(region.site_names)} sites, {region.interconnect.topology} DCI",
                     "description": region.description})
    if args.json:
        emit_json(rows)
    else:
        emit(table([[r["name"] + (" (default)" if r["default"] else ""), r["gpu"], r["kind"], r["description"]]
                    for r in rows], ["spec", "gpu", "fabric", "description"]))
    return 0
