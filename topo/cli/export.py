"""``topo export``: the fabric's graph as GraphML or node-link JSON."""

from __future__ import annotations

from ..atomic import STDOUT, safe_file_name
from ..fabric.export import EXPORT_FORMATS, export_fabric
from .common import add_output_arguments, add_spec_arguments, fabric_from_args
from .output import note


def register(sub) -> None:
    p = sub.add_parser("export", help="write the fabric's graph (GraphML or node-link JSON)",
                       description="Write every GPU, NVSwitch, NIC, switch and link as a graph file, atomically. "
                       "Parallel links between two nodes are one edge whose num_links counts them.")
    add_spec_arguments(p)
    p.add_argument("--format", default="graphml", choices=EXPORT_FORMATS, help="file format (default: graphml)")
    add_output_arguments(p, "<spec name>.<format> in the working folder")
    p.set_defaults(func=run)


def run(args) -> int:
    fabric = fabric_from_args(args)
    suffix = ".graphml" if args.format == "graphml" else ".json"
    out = args.output if args.output is not None else safe_file_name(fabric.name, suffix)
    export_fabric(fabric, out, args.format, force=args.force, key="-o", force_option="--force")
    where = "standard output" if out == STDOUT else out
    note(f"wrote {where} ({fabric.num_nodes:,} nodes, {fabric.num_links:,} links; parallel links between two nodes "
         f"are merged into one edge, counted in its num_links attribute)")
    return 0
