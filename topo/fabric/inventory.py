"""Inventory and oversubscription: what a fabric is made of and how thin each tier is.

Everything here is arithmetic on the fabric's resolved layout (no per-GPU loops), so describing a 100k-GPU
cluster takes milliseconds once it is planned.

Bisection bandwidth (per direction) is half the smallest aggregate capacity of any boundary that a balanced cut of
the servers must cross: the NICs, the uplinks of the leaves (when there is more than one unit) and the uplinks of
the spines (when there is more than one pod). This is exact for a Clos whose units and pods split evenly into
halves; with an odd number of pods the true minimum cut is slightly larger. These are the installed figures: with
failed parts, :func:`topo.fabric.failures.degraded` reports the capacities left and :func:`topo.fabric.bisection.bisection` the
bisection left (a maximum flow between the same halves, equal to this closed form on a perfect fabric).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .fabric import Fabric
from .hardware import catalog_switch_power_W
from .host_link_note import host_link_cap
from .idle_ports import idle_ports_why
from ..units import count_noun, format_in, in_unit

__all__ = ["Inventory", "TierInventory", "LinkLevelInventory", "ScaleUpInventory", "inventory"]


@dataclass(frozen=True)
class TierInventory:
    """One scale-out switch tier."""

    name: str
    model: str
    num_switches: int
    radix: int
    down_ports_per_switch: int
    up_ports_per_switch: int
    down_port_rate_Bps: float
    up_port_rate_Bps: float
    down_capacity_Bps: float
    up_capacity_Bps: float
    oversubscription: float | None  # downlink:uplink capacity; None for the top tier
    ports_used: int
    ports_idle: int
    power_W: float | None  # all switches of the tier: the spec's per-switch power, else the switch catalog's
    power_source: str = "spec"  # where power_W comes from: "spec", "catalog" (its model's entry) or "unknown"
    block_name: str = ""  # what one block of this tier is (the unit for the leaves, "pod", "island", ...)
    num_blocks: int = 1  # blocks at this tier's depth (units for the leaves)
    joins: int = 1  # blocks of the tier below in one block of this tier (1 for the leaves)
    gpus_per_block: int = 0
    latency_s: float | None = None  # port-to-port latency of one switch of this tier (the spec's ``latency``);
    # None where the spec gives none (priced as 0 by the estimates: a latency not given, not a free switch)
    ports_idle_why: str = ""  # why each switch has idle ports and what would use them ("" where none is idle)


@dataclass(frozen=True)
class LinkLevelInventory:
    """All links (cables) of one level: NVLink, PCIe, NIC-leaf, leaf-spine, spine-core."""

    name: str
    num_links: int
    link_bandwidth_Bps: float  # one link, per direction
    capacity_Bps: float  # all links, per direction


@dataclass(frozen=True)
class ScaleUpInventory:
    """The NVLink domains, reported apart from the scale-out tiers."""

    gpus_per_domain: int
    num_domains: int
    bandwidth_per_gpu_Bps: float
    nvls: bool
    technology: str


@dataclass(frozen=True)
class Inventory:
    """The bill of materials and capacities of a fabric (see :func:`inventory`)."""

    name: str
    description: str
    sources: list[str]
    gpu: str
    kind: str
    technology: str
    num_gpus: int
    num_servers: int
    gpus_per_server: int
    num_nics: int
    nics_per_server: int
    nic_rate_Bps: float
    unit_name: str
    num_units: int
    servers_per_unit: int
    num_pods: int
    units_per_pod: int
    scale_up: ScaleUpInventory
    tiers: list[TierInventory]
    links: list[LinkLevelInventory]
    num_switches: int
    num_scale_out_links: int
    bisection_bandwidth_Bps: float
    bisection_bandwidth_per_gpu_Bps: float
    largest_nonblocking_gpus: int
    largest_nonblocking_group: str
    switch_power_W: float | None  # None when a tier has no power figure (power_unknown_tiers names them)
    power_unknown_tiers: list[str]
    power_from_catalog_tiers: list[str]  # tiers whose power is their switch model's in the catalog, not the spec's
    host_link_Bps: float  # GPU-to-NIC link (PCIe) per direction
    host_link: str  # where it comes from: "PCIe gen5 x16 (GPU gen5, ConnectX-7 gen5)" or "server.pcie_bandwidth"
    notes: list[str]
    # the longest switch path between two GPUs: up every tier to the top and down again (2 x tiers - 1 switches),
    # and its switch latency one way, every hop counted (as topo estimate's latency counts them); None where no
    # tier gives a latency (JSON null: not given, not a free switch)
    farthest_switch_hops: int = 0
    farthest_switch_latency_s: float | None = None
    host_cpu: str = ""  # a key of topo/data/compute/host_cpu.toml [cpu]
    host_cpu_source: str = ""  # "spec" (server.host_cpu) or "gpu default" (the GPU's catalog server's)
    cpu_vendor: str | None = None  # intel, amd or arm (NCCL's CPU-dependent terms): the spec's resolved vendor

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (the document ``topo describe --json`` prints)."""
        return asdict(self)

    def power_text(self) -> str:
        """The switches' power as text: ``3.87 MW``, or ``power unknown: ...`` naming the tiers without a figure."""
        if self.switch_power_W is not None:
            w = self.switch_power_W
            text = format_in(w, "MW", ".3g") if in_unit(w, "MW") >= 0.1 else format_in(w, "kW", ".3g")
            if self.power_from_catalog_tiers:
                text += f", {', '.join(self.power_from_catalog_tiers)} at the switch catalog's power per model"
            return text
        unknown = self.power_unknown_tiers
        unlisted = {t.model for t in self.tiers if t.name in unknown and t.model}
        why = (f"the switch catalog has no model {', '.join(map(repr, sorted(unlisted)))}" if unlisted else
               "no switch model is given (a tier's model, e.g. QM9700, takes its power from the switch catalog, "
               "topo/data/catalog/switches.toml)")
        return f"power unknown: the spec gives no power_W for {', '.join(unknown)}, and {why}"

    def to_frame(self):
        """The tiers as a pandas DataFrame, one row per tier."""
        import pandas as pd

        return pd.DataFrame([asdict(t) for t in self.tiers])


def inventory(fabric: Fabric) -> Inventory:
    """Count and size everything in ``fabric``.

    >>> from topo import load_spec, build_fabric
    >>> inv = inventory(build_fabric(load_spec("dgx-h100-superpod")))
    >>> [(t.name, t.num_switches) for t in inv.tiers]
    [('leaf', 32), ('spine', 16)]
    """
    L, spec = fabric.layout, fabric.spec
    given = spec.fabric.tiers  # a tier fabric.grow_tiers added is a copy of the top one, its latency too
    tiers = [_tier_inventory(L, t, given[min(t.index, len(given) - 1)]) for t in L.tiers]
    links = _link_levels(fabric)
    bisection = _bisection_Bps(L)
    group, gpus = _largest_nonblocking(L)
    host_Bps = spec.server.pcie_bandwidth_Bps
    host = spec.host_link.describe() if spec.host_link else "server.pcie_bandwidth"
    num_switches = sum(t.num_switches for t in tiers)
    powers = [t.power_W for t in tiers]
    return Inventory(
        name=spec.name, description=spec.description, sources=spec.sources, gpu=spec.gpu, kind=L.kind,
        technology=spec.fabric.technology, num_gpus=L.num_gpus, num_servers=L.num_servers,
        gpus_per_server=L.gpus_per_server, num_nics=L.num_nics, nics_per_server=L.nics_per_server,
        nic_rate_Bps=L.nic_rate_Bps, unit_name=L.unit_name, num_units=L.num_units,
        servers_per_unit=L.servers_per_unit, num_pods=L.num_pods, units_per_pod=L.units_per_pod,
        scale_up=ScaleUpInventory(L.gpus_per_domain, L.num_domains, spec.nvlink_Bps, spec.nvls,
                                  spec.gpu_model.nvlink),
        tiers=tiers, links=links, num_switches=num_switches,
        num_scale_out_links=sum(x.num_links for x in links[2:]),
        bisection_bandwidth_Bps=bisection, bisection_bandwidth_per_gpu_Bps=bisection / (L.num_gpus / 2),
        largest_nonblocking_gpus=gpus, largest_nonblocking_group=group,
        switch_power_W=None if any(p is None for p in powers) else float(sum(powers)),
        power_unknown_tiers=[t.name for t in tiers if t.power_W is None],
        power_from_catalog_tiers=[t.name for t in tiers if t.power_source == "catalog"],
        host_link_Bps=host_Bps, host_link=host,
        notes=_notes(L, spec, num_switches) + [t.ports_idle_why for t in tiers if t.ports_idle_why],
        farthest_switch_hops=2 * len(tiers) - 1,
        farthest_switch_latency_s=_farthest_latency_s(tiers),
        host_cpu=spec.host_cpu[0], host_cpu_source=spec.host_cpu[1], cpu_vendor=spec.cpu_vendor,
    )


def _tier_inventory(L, t, spec_tier) -> TierInventory:
    """One tier's switches, ports, capacities and power (the spec's, else the catalog's, else unknown)."""
    used = t.down_ports + t.up_ports
    each_W, source = t.power_W, "spec"
    if each_W is None:
        each_W = catalog_switch_power_W(t.model)
        source = "unknown" if each_W is None else "catalog"
    return TierInventory(
        name=t.name, model=t.model, num_switches=t.num_switches, radix=t.radix,
        down_ports_per_switch=t.down_ports, up_ports_per_switch=t.up_ports,
        down_port_rate_Bps=t.down_rate_Bps, up_port_rate_Bps=t.up_rate_Bps,
        down_capacity_Bps=t.down_capacity_Bps, up_capacity_Bps=t.up_capacity_Bps,
        oversubscription=t.oversubscription, ports_used=used * t.num_switches,
        ports_idle=t.idle_ports,
        power_W=None if each_W is None else each_W * t.num_switches, power_source=source,
        block_name=t.block_name, num_blocks=t.num_blocks, joins=t.joins,
        gpus_per_block=L.units_per_block(t.index) * L.servers_per_unit * L.gpus_per_server,
        latency_s=t.latency_s if "latency_s" in spec_tier.model_fields_set else None,
        ports_idle_why=idle_ports_why(L, t, spec_tier.up_ports is not None))


def _farthest_latency_s(tiers: list[TierInventory]) -> float | None:
    """One way up every tier and down again (each tier below the top twice); None when no tier gives a latency.

    A tier without a latency counts 0 in the sum where others give one, as the estimates price it.
    """
    if all(t.latency_s is None for t in tiers):
        return None
    each = [t.latency_s or 0.0 for t in tiers]
    return 2 * sum(each[:-1]) + each[-1]


def _link_levels(fabric: Fabric) -> list[LinkLevelInventory]:
    """The links of each level, in the order of Level.all: NVLink, PCIe, NIC, then each boundary between tiers."""
    L, spec = fabric.layout, fabric.spec
    counts = [L.num_gpus, L.num_servers * max(L.nics_per_server, L.gpus_per_server), L.num_nics]
    rates = [spec.nvlink_Bps, spec.server.pcie_bandwidth_Bps, L.nic_rate_Bps]
    for t in L.tiers[:-1]:
        counts.append(t.num_switches * t.up_ports)
        rates.append(t.up_rate_Bps)
    return [LinkLevelInventory(n, c, r, c * r) for n, c, r in zip(fabric.level_names, counts, rates)]


def _bisection_Bps(L) -> float:
    """Half the least capacity of the boundaries a balanced cut must cross: the NICs, and the uplinks of every tier
    whose blocks (units for the leaves, pods for tier 1, ...) are more than one."""
    boundaries = [L.num_nics * L.nic_rate_Bps]
    for t in L.tiers[:-1]:
        if t.num_blocks > 1:
            boundaries.append(t.up_capacity_Bps)
    return min(boundaries) / 2


def _largest_nonblocking(L) -> tuple[str, int]:
    """The largest non-blocking group, a block under the lowest oversubscribed tier: its name and GPUs."""
    group, gpus = "cluster", L.num_gpus
    for t in L.tiers[:-1]:
        if t.num_blocks > 1 and (t.oversubscription or 1) > 1 + 1e-9:
            group = L.unit_name if t.index == 0 else t.block_name
            gpus = L.units_per_block(t.index) * L.servers_per_unit * L.gpus_per_server
            break
    if gpus < L.gpus_per_domain:
        group, gpus = "NVLink domain", L.gpus_per_domain
    return group, gpus


def _notes(L, spec, num_switches: int) -> list[str]:
    """What the figures do not say alone: rail-only traffic, a host link slower than the NIC, a cluster of one
    NVLink domain or one unit."""
    notes = []
    one_tier_rails = L.kind == "rail_optimized" and L.num_tiers == 1 and L.leaves_per_unit > 1  # walk28: no spine
    if L.kind == "rail_only" or one_tier_rails:
        clos = (f"each rail its own {len(L.tiers)}-tier Clos: {', '.join(t.name for t in L.tiers)}"
                if len(L.tiers) > 1 else "each rail its own leaf")
        clos += "; a rail-optimized of one tier has no spine to join them" if one_tier_rails else ""
        notes.append(f"rail-only: no switch joins two rails, at any tier ({clos}); traffic between rails first "
                     "crosses the NVLink domain "
                     "(PXN), so the bisection and non-blocking figures hold only for rail-aligned traffic plus "
                     "that NVLink hop")
    capped = host_link_cap(spec)
    if capped:
        notes.append(capped)
    if L.num_gpus <= L.gpus_per_domain:
        notes.append(f"the whole cluster is one NVLink domain ({count_noun(L.num_gpus, 'GPU')}): its GPUs talk over "
                     f"NVLink only, and the scale-out fabric ({count_noun(num_switches, 'switch', 'switches')}) "
                     "carries none of their traffic")
    elif L.num_units == 1 and L.num_tiers > 1:
        if L.leaves_per_unit > 1 and L.kind == "rail_optimized":
            notes.append(f"a single {L.unit_name}: one {L.tiers[0].name} per rail already joins every server; the "
                         f"{L.tiers[1].name} tier only carries traffic between rails, which NCCL's PXN moves to "
                         "NVLink first")
        else:
            notes.append(f"a single {L.unit_name}: its {L.tiers[0].name} switches already join every server, so "
                         f"the {L.tiers[1].name} tier carries no traffic between these GPUs")
    return notes