"""``topo export``: the fabric's graph as GraphML or node-link JSON."""

from __future__ import annotations

from ..atomic import STDOUT, safe_file_name
from ..fabric.export import EXPORT_FORMATS, export_fabric
from ..fabric.region_export import export_region
from .common import add_output_arguments, add_spec_arguments, fabric_from_args
from ..units import count_noun
from .output import note
from .output_suffix import check_output_suffix
from .region import is_region_args, region_from_args, region_inputs


def register(sub) -> None:
    p = sub.add_parser("export", help="write the fabric's graph (GraphML or node-link JSON)",
                       description="Write every GPU, NVSwitch, NIC, switch and link as a graph file, atomically. "
                       "Parallel links between two nodes are one edge whose num_links counts them. A region of several "
                       "sites: every site's graph (names SITE:NAME), a SITE:dci node per site joined to its attach "
                       "tier's switches, and one edge per DCI span (level dci, distance_km).")
    add_spec_arguments(p)
    p.add_argument("--format", default="graphml", choices=EXPORT_FORMATS, help="file format (default: graphml)")
    add_output_arguments(p, "<spec name>.<format> in the working folder")
    p.set_defaults(func=run)


SUFFIXES = {".graphml": "graphml", ".json": "json"}


def run(args) -> int:
    if args.output is not None:  # before the fabric is built (a default name has the format's own suffix)
        check_output_suffix(args.output, args.format, SUFFIXES, default="graphml")
    if is_region_args(args):
        return _run_region(args)
    fabric = fabric_from_args(args)
    suffix = ".graphml" if args.format == "graphml" else ".json"
    out = args.output if args.output is not None else safe_file_name(fabric.name, suffix)
    export_fabric(fabric, out, args.format, force=args.force, key="-o", force_option="--force")
    where = "standard output" if out == STDOUT else out
    note(f"wrote {where} ({fabric.num_nodes:,} nodes, {fabric.num_links:,} links; parallel links between two nodes "
         f"are merged into one edge, counted in its num_links attribute)")
    return 0


def _run_region(args) -> int:
    """A region of several sites: its sites' graphs and the DCI (:mod:`topo.fabric.region_export`)."""
    region = region_from_args(args)
    suffix = ".graphml" if args.format == "graphml" else ".json"
    out = args.output if args.output is not None else safe_file_name(region.name, suffix)
    export_region(region, out, args.format, inputs=region_inputs(args.spec, region), force=args.force, key="-o",
                  force_option="--force")
    where = "standard output" if out == STDOUT else out
    note(f"wrote {where} ({region.num_sites} sites, {region.num_gpus:,} GPUs, "
         f"{count_noun(region.num_spans, 'DCI span')}; each "
         f"site's nodes are named SITE:NAME, its DCI equipment SITE:dci, joined to every switch of its attach tier "
         f"with an equal share of its DCI capacity; parallel links between two nodes are one edge, counted in its "
         f"num_links attribute)")
    return 0
