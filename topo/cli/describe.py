"""``topo describe``: inventory, tiers, oversubscription and bisection of a cluster."""

from __future__ import annotations

from ..failures import Degraded, degraded
from ..inventory import Inventory, inventory
from ..units import format_bandwidth, format_count, format_rate
from .common import add_spec_arguments, fabric_from_args
from .output import emit, emit_json, ratio, table


def register(sub) -> None:
    p = sub.add_parser("describe", help="inventory, tiers, oversubscription and bisection bandwidth",
                       description="Describe a cluster: GPUs, servers, NVLink domains, switches and links per "
                       "tier, downlink vs uplink capacity per tier, bisection bandwidth.")
    add_spec_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    fabric = fabric_from_args(args)
    inv = inventory(fabric)
    deg = degraded(fabric) if fabric.failures else None
    if args.json:
        doc = inv.to_dict()
        if deg is not None:
            doc["failures"] = deg.to_dict()
        emit_json(doc)
    else:
        emit(render(inv))
        if deg is not None:
            emit(render_degraded(deg))
    return 0


def render_degraded(d: Degraded) -> str:
    lines = ["", f"with failures: {', '.join(d.failures)}"]
    rows = [[x.name, format_count(x.num_links), format_count(x.num_failed), format_bandwidth(x.capacity_Bps)]
            for x in d.levels if x.num_failed]
    if rows:
        lines.append(table(rows, ["links", "count", "failed", "working capacity"], right=[False, True, True, True]))
    rows = [[t.name, format_bandwidth(t.down_capacity_Bps),
             format_bandwidth(t.up_capacity_Bps) if t.oversubscription is not None else "-",
             ratio(t.oversubscription) if t.oversubscription is not None else "top",
             f"{t.worst_switch} {ratio(t.worst_oversubscription)}" if t.worst_switch else "-"]
            for t in d.tiers]
    lines.append(table(rows, ["tier", "down capacity", "up capacity", "oversub", "worst switch"],
                       right=[False, True, True, True, False]))
    return "\n".join(lines)


def render(inv: Inventory) -> str:
    su = inv.scale_up
    gpus_per_unit = inv.servers_per_unit * inv.gpus_per_server
    lines = [f"{inv.name}: {inv.description}" if inv.description else inv.name]
    for s in inv.sources:
        lines.append(f"  source: {s}")
    lines.append("")
    lines.append(f"GPUs      {format_count(inv.num_gpus)} x {inv.gpu} in {format_count(inv.num_servers)} servers of "
                 f"{inv.gpus_per_server}")
    lines.append(f"NVLink    {format_count(su.num_domains)} domains of {su.gpus_per_domain} GPUs, "
                 f"{format_bandwidth(su.bandwidth_per_gpu_Bps)} per GPU per direction ({su.technology}"
                 f"{', NVLS' if su.nvls else ''})")
    lines.append(f"NICs      {format_count(inv.num_nics)} x {format_rate(inv.nic_rate_Bps)} "
                 f"({inv.nics_per_server} per server)")
    lines.append(f"fabric    {inv.kind}, {inv.technology}, {len(inv.tiers)} tier{'s' * (len(inv.tiers) > 1)}; "
                 f"{inv.unit_name} = {inv.servers_per_unit} servers ({format_count(gpus_per_unit)} GPUs), "
                 f"{format_count(inv.num_units)} {inv.unit_name}{'s' * (inv.num_units != 1)}"
                 + (f"; pod = {inv.units_per_pod} {inv.unit_name}s "
                    f"({format_count(inv.units_per_pod * gpus_per_unit)} GPUs), {inv.num_pods} pods"
                    if len(inv.tiers) > 2 else ""))
    lines.append("")
    rows = [[t.name, t.model or "-", format_count(t.num_switches), t.radix,
             f"{t.down_ports_per_switch}/{t.up_ports_per_switch}", format_bandwidth(t.down_capacity_Bps),
             format_bandwidth(t.up_capacity_Bps) if t.up_ports_per_switch else "-",
             ratio(t.oversubscription) if t.oversubscription is not None else "top",
             format_count(t.ports_idle)]
            for t in inv.tiers]
    lines.append(table(rows, ["tier", "model", "switches", "radix", "down/up", "down capacity", "up capacity",
                              "oversub", "idle ports"],
                       right=[False, False, True, True, True, True, True, True, True]))
    lines.append("")
    rows = [[x.name, format_count(x.num_links), format_bandwidth(x.link_bandwidth_Bps),
             format_bandwidth(x.capacity_Bps)] for x in inv.links]
    lines.append(table(rows, ["links", "count", "each", "total"], right=[False, True, True, True]))
    lines.append("")
    lines.append(f"switches                    {format_count(inv.num_switches)}"
                 + (f" ({inv.switch_power_W / 1e6:.3g} MW)" if inv.switch_power_W else ""))
    lines.append(f"scale-out cables            {format_count(inv.num_scale_out_links)}")
    lines.append(f"bisection bandwidth         {format_bandwidth(inv.bisection_bandwidth_Bps)} per direction "
                 f"({format_bandwidth(inv.bisection_bandwidth_per_gpu_Bps)} per GPU)")
    lines.append(f"largest non-blocking group  {format_count(inv.largest_nonblocking_gpus)} GPUs "
                 f"({inv.largest_nonblocking_group})")
    for n in inv.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)
