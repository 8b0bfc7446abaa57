"""``topo describe``: inventory, tiers, oversubscription and bisection of a cluster."""

from __future__ import annotations

import math

from ..fabric.cut import cut_words
from ..fabric.failures import Degraded, degraded
from ..fabric.inventory import Inventory, inventory
from ..units import count_noun, format_bandwidth, format_count, format_rate, format_time
from .common import add_spec_arguments, fabric_from_args, own_text, technology_note, with_overrides
from .region import is_region_args, run_describe as run_region
from .output import emit, emit_json, note, ratio, table


def register(sub) -> None:
    p = sub.add_parser("describe", help="inventory, tiers, oversubscription and bisection bandwidth",
                       description="Describe a cluster: GPUs, servers, NVLink domains, switches and links per "
                       "tier, downlink vs uplink capacity per tier, bisection bandwidth.")
    add_spec_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    if is_region_args(args):
        return run_region(args)
    fabric = fabric_from_args(args)
    tech = technology_note(fabric)
    if tech:
        note(tech)
    inv = inventory(fabric)
    deg = degraded(fabric) if fabric.failures else None
    if args.json:
        doc = inv.to_dict()
        if deg is not None:
            doc["failures"] = {**deg.to_dict(), "cut": cut_words(fabric)}
        emit_json(doc)
    else:
        emit(with_overrides(render(inv), args, own_text(args, lambda a: render(inventory(fabric_from_args(a))))))
        if deg is not None:
            emit(render_degraded(deg, cut_words(fabric)))
    return 0


def render_degraded(d: Degraded, cut: list[str] = ()) -> str:
    """The failed fabric's capacities, oversubscription and bisection, after the GPUs the failures cut off
    (``cut``: :func:`topo.fabric.cut.cut_words`; walk27: pod 0's uplinks failed showed 66 TB/s and "ctsw0: no
    uplinks left", not that 3,072 GPUs cannot reach the rest)."""
    lines = ["", f"with failures: {', '.join(d.failures)}"] + [f"cut apart: {w}" for w in cut]
    rows = [[x.name, format_count(x.num_links), format_count(x.num_failed), format_bandwidth(x.capacity_Bps)]
            for x in d.levels if x.num_failed]
    if rows:
        lines.append(table(rows, ["links", "count", "failed", "working capacity"], right=[False, True, True, True]))
    rows = [[t.name, format_bandwidth(t.down_capacity_Bps),
             format_bandwidth(t.up_capacity_Bps) if t.oversubscription is not None else "-",
             ratio(t.oversubscription) if t.oversubscription is not None else "top",
             _worst(t.worst_switch, t.worst_oversubscription)]
            for t in d.tiers]
    lines.append(table(rows, ["tier", "down capacity", "up capacity", "oversub", "worst switch"],
                       right=[False, True, True, True, False]))
    lines.append(f"bisection bandwidth         {format_bandwidth(d.bisection_bandwidth_Bps)} per direction "
                 f"({format_bandwidth(d.bisection_bandwidth_per_gpu_Bps)} per GPU; "
                 f"{format_bandwidth(d.bisection_without_failures_Bps)} without failures)")
    return "\n".join(lines)


def _worst(switch: str | None, oversubscription: float | None) -> str:
    """The most oversubscribed switch of a tier with failures: ``spine0 8:1``, or that it has no uplink left."""
    if not switch:
        return "-"
    if oversubscription is not None and math.isinf(oversubscription):
        return f"{switch}: no uplinks left"
    return f"{switch} {ratio(oversubscription)}"


def render(inv: Inventory) -> str:
    su = inv.scale_up
    gpus_per_unit = inv.servers_per_unit * inv.gpus_per_server
    lines = [f"{inv.name}: {inv.description}" if inv.description else inv.name]
    for s in inv.sources:
        lines.append(f"  source: {s}")
    lines.append("")
    unit, units = inv.unit_name, inv.unit_name + "s"
    lines.append(f"GPUs      {format_count(inv.num_gpus)} x {inv.gpu} in {count_noun(inv.num_servers, 'server')} of "
                 f"{count_noun(inv.gpus_per_server, 'GPU')}")
    lines.append(f"NVLink    {count_noun(su.num_domains, 'domain')} of {count_noun(su.gpus_per_domain, 'GPU')}, "
                 f"{format_bandwidth(su.bandwidth_per_gpu_Bps)} per GPU per direction ({su.technology}"
                 f"{', NVLS' if su.nvls else ''})"
                 + ("; a domain spans servers: its NVLink switches are not among the switches below (topo plan "
                    "adds them where the server's catalog entry has them, as the NVL72 trays')"
                    if su.gpus_per_domain > inv.gpus_per_server else ""))
    lines.append(f"NICs      {format_count(inv.num_nics)} x {format_rate(inv.nic_rate_Bps)} "
                 f"({inv.nics_per_server} per server), host link {format_bandwidth(inv.host_link_Bps)} per direction "
                 f"({inv.host_link})")
    if inv.host_cpu:
        origin = "server.host_cpu" if inv.host_cpu_source == "spec" else "the GPU's default"
        lines.append(f"host CPU  {inv.host_cpu} ({inv.cpu_vendor or 'vendor unknown'}; {origin}, "
                     f"topo/data/compute/host_cpu.toml)")
    lines.append(f"fabric    {inv.kind}, {inv.technology}, {count_noun(len(inv.tiers), 'tier')}; "
                 f"{unit} = {count_noun(inv.servers_per_unit, 'server')} ({count_noun(gpus_per_unit, 'GPU')}), "
                 f"{count_noun(inv.num_units, unit, units)}"
                 + (f"; pod = {count_noun(inv.units_per_pod, unit, units)} "
                    f"({count_noun(inv.units_per_pod * gpus_per_unit, 'GPU')}), {count_noun(inv.num_pods, 'pod')}"
                    if len(inv.tiers) > 2 else "")
                 + "".join(f"; {t.block_name} = {count_noun(t.joins, below.block_name)} "
                           f"({count_noun(t.gpus_per_block, 'GPU')}), {count_noun(t.num_blocks, t.block_name)}"
                           for below, t in zip(inv.tiers[1:], inv.tiers[2:-1])))
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
    lines.append(f"switches                    {format_count(inv.num_switches)} ({inv.power_text()})")
    lines.append(f"scale-out cables            {format_count(inv.num_scale_out_links)}")
    lines.append(f"bisection bandwidth         {format_bandwidth(inv.bisection_bandwidth_Bps)} per direction "
                 f"({format_bandwidth(inv.bisection_bandwidth_per_gpu_Bps)} per GPU)")
    lines.append(f"largest non-blocking group  {count_noun(inv.largest_nonblocking_gpus, 'GPU')} "
                 f"({inv.largest_nonblocking_group})")
    top = inv.tiers[-1].name
    latency = (f"{format_time(inv.farthest_switch_latency_s)} of switch latency one way"
               if inv.farthest_switch_latency_s is not None else  # not given, not a free switch: say what is priced
               "no switch latency given (the tiers' latency), only the cost profile's per-step network latency")
    lines.append(f"farthest GPUs               {count_noun(inv.farthest_switch_hops, 'switch hop')} (up to {top} "
                 f"and down), {latency}")
    for n in inv.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)

