"""A region of several sites (``[[sites]]``) on the command line: telling one from a fabric, building it with its
``--set`` and ``--fail``, and ``describe`` of it (``estimate`` of it is :mod:`topo.cli.region_estimate`)."""

from __future__ import annotations

from ..errors import TopoError
from ..fabric.region import Region, build_region
from ..fabric.region_inventory import RegionInventory, cut_apart_text, region_inventory
from ..spec.load import resolve_spec_path
from ..spec.region_load import is_region_file, site_spec_files
from ..units import format_bandwidth, format_count, format_in, format_time
from .common import naming_overrides, own_text, with_failures_named, with_overrides
from .output import emit, emit_json, note, table

__all__ = ["is_region_args", "region_from_args", "region_inputs", "run_describe", "render_region"]


def is_region_args(args) -> bool:
    """True when the SPEC argument names a region file (or bundled region)."""
    return is_region_file(getattr(args, "spec", None))


def region_from_args(args) -> Region:
    """The region the arguments name, with ``--set`` overrides of the region file and ``--fail dci:A-B``."""
    overrides = getattr(args, "overrides", None) or []
    try:
        region = build_region(args.spec, overrides)
    except TopoError as exc:  # walk16: a rule the region checks after its fields named no --set, as a site's does
        raise naming_overrides(exc, overrides) from None
    return with_failures_named(region, getattr(args, "failures", None))


def region_inputs(name: str, region: Region) -> list[str]:
    """The files a region reads (the region file and its sites' spec files): never an output."""
    paths = [str(resolve_spec_path(name))]
    for f in site_spec_files(region.spec):
        try:
            paths.append(str(resolve_spec_path(f)))
        except TopoError:
            pass  # the region was built, so every site's spec was read: a name this cannot resolve is not a file
    return paths


def run_describe(args) -> int:
    region = region_from_args(args)
    if region.default_waves_note():
        note(f"note: {region.default_waves_note()}")
    inv = region_inventory(region)
    if args.json:
        emit_json(inv.to_dict())
    else:
        own = own_text(args, lambda a: render_region(region_inventory(region_from_args(a))))
        emit(with_overrides(render_region(inv), args, own))
    return 0


def render_region(inv: RegionInventory) -> str:
    lines = [f"{inv.name}: {inv.description}" if inv.description else inv.name]
    lines += [f"  source: {s}" for s in inv.sources]
    lines += [f"  assumed: {a}" for a in inv.assumptions]
    lines.append("")
    lines.append(f"sites     {inv.num_sites}, {format_count(inv.num_gpus)} GPUs; DCI {inv.topology}, attached at "
                 + ("the top tier" if inv.attach == "top" else
                    f"border leaves ({inv.border_oversubscription:g}:1 oversubscribed)"))
    rows = [[s.name, s.spec, format_count(s.num_gpus), s.attach_tier, format_bandwidth(s.bisection_bandwidth_Bps)
             + (f" ({format_bandwidth(s.bisection_without_failures_Bps)} without failures)" if s.failures else ""),
             format_bandwidth(s.dci_Bps), format_time(s.up_latency_s) if s.up_latency_s > 0 else "not given",
             f"{s.power_limit_MW:g} MW" if s.power_limit_MW else "-"] for s in inv.sites]
    lines.append(table(rows, ["site", "spec", "GPUs", "attach", "bisection", "to DCI", "GPU to DCI", "power limit"],
                       right=[False, False, True, False, True, True, True, True]))
    if any(s.up_latency_s <= 0 for s in inv.sites):  # 0 is 'not given', not free switches (as describe says)
        lines.append("GPU to DCI: one way from a GPU up to its DCI port (its NIC and every switch up to the attach "
                     "tier); not given: the site's spec gives no NIC or tier latency, and the DCI phase counts none "
                     "there (the span's latency still counts)")
    for s in inv.sites:
        if s.dci_as_built_Bps > s.attach_idle_Bps * (1 + 1e-9):  # as `topo plan` prices them: failed spans too
            lines.append(f"note: site {s.name}: its {s.attach_tier} switches have {format_bandwidth(s.attach_idle_Bps)} "
                         f"of idle ports for its {format_bandwidth(s.dci_as_built_Bps)} to the DCI (per direction, "
                         f"as built); the model "
                         f"attaches the DCI there anyway, beyond the radix: free ports (fewer units, a larger radix), "
                         f"or let `topo plan` price the DCI border switches the missing ones need")
    lines.append("")
    rows = [[s.name, f"{s.distance_km:,.0f} km", f"{s.waves} x {format_in(s.wave_rate_Bps, 'Gb/s', 'g')}",
             format_bandwidth(s.bandwidth_Bps) + (" (failed)" if s.failed else ""), format_time(s.latency_s)]
            for s in inv.spans]
    lines.append(table(rows, ["DCI span", "distance", "waves", "capacity", "latency one way"],
                       right=[False, True, True, True, True]))
    lines.append("")
    lines.append(f"cut between sites           {format_bandwidth(inv.min_cut_Bps)} per direction at the weakest split, "
                 f"{format_bandwidth(inv.bisection_cut_Bps)} across the most even split (a site's bisection: "
                 f"{format_bandwidth(min(s.bisection_bandwidth_Bps for s in inv.sites))} at the least)")
    if inv.cut_apart:  # the longest working route no longer crosses between every pair of sites
        lines.append(f"farthest GPUs               {format_time(inv.farthest_latency_s)} one way over the routes that "
                     "still work (sites cut apart below)")
    else:
        lines.append(f"farthest GPUs               {format_time(inv.farthest_latency_s)} one way across the DCI")
    if inv.cut_apart:
        lines.append(f"cut apart                   {cut_apart_text(inv)}")
    if inv.failures:
        lines.append(f"with failures: {', '.join(inv.failures)}")
    return "\n".join(lines)

