"""``topo export``: the fabric's graph as GraphML or node-link JSON."""

from __future__ import annotations

from ..export import EXPORT_FORMATS, export_fabric
from .common import add_spec_arguments, fabric_from_args
from .output import note


def register(sub) -> None:
    p = sub.add_parser("export", help="write the fabric's graph (GraphML or node-link JSON)",
                       description="Write every GPU, NVSwitch, NIC, switch and link as a graph file, atomically.")
    add_spec_arguments(p)
    p.add_argument("--format", default="graphml", choices=EXPORT_FORMATS, help="file format (default: graphml)")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (default: <spec name>.<format>)")
    p.set_defaults(func=run)


def run(args) -> int:
    fabric = fabric_from_args(args)
    out = args.output or f"{fabric.name}.{'graphml' if args.format == 'graphml' else 'json'}"
    path = export_fabric(fabric, out, args.format)
    note(f"wrote {path} ({fabric.num_nodes:,} nodes, {fabric.num_links:,} links)")
    return 0
