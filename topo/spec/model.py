"""The typed cluster spec: what a TOML file in ``topologies/`` may say, field by field.

Quantities are written with their units in the file (``nic_rate = "400 Gb/s"``, ``latency = "130 ns"``) and
stored in SI units in fields whose names carry the unit (``nic_rate_Bps``, ``latency_s``). Unknown keys are
rejected. Checks that need the whole design (ports beyond a switch's radix, counts that do not divide) are made
when the fabric is built (:mod:`topo.fabric.builders`), with the same one-line errors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationInfo,
                      field_validator, model_validator)

from ..fabric.hardware import GPU_MODELS, HostLink, host_link, lookup_gpu
from ..fabric.server_cpu import default_host_cpu, host_cpu_names, host_cpu_vendor, server_cpu_vendor
from ..units import UnitError, parse_bandwidth_Bps, parse_time_s
from .overrides import override_label

__all__ = ["Spec", "ScaleUpSpec", "ServerSpec", "ClusterSpec", "FabricSpec", "TierSpec", "FABRIC_KINDS",
           "TECHNOLOGIES"]


def _bandwidth(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"give a unit, e.g. '400 Gb/s' or '450 GB/s', got {value!r}")
    try:
        return parse_bandwidth_Bps(value)
    except UnitError as exc:
        raise ValueError(str(exc)) from None


def _time(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"give a unit, e.g. '500 ns' or '1.5 us', got {value!r}")
    try:
        return parse_time_s(value)
    except UnitError as exc:
        raise ValueError(str(exc)) from None


def _known_gpu(value: str) -> str:
    if lookup_gpu(value) is None:
        raise ValueError(f"unknown GPU model {value!r}; allowed: {', '.join(GPU_MODELS)}")
    return lookup_gpu(value).name


def _printable_name(value: str) -> str:
    bad = next((ch for ch in value if not (ch.isprintable() or ch == " ")), None)
    if bad is not None:
        raise ValueError(f"a name is printable text on one line, got {value!r} (with the control character "
                         f"U+{ord(bad):04X}); allowed: letters, digits, spaces and punctuation")
    return value


Name = Annotated[str, AfterValidator(_printable_name)]


MAX_RADIX = 4096
"""The most ports a tier's switch may have. The largest switch chip has 1,024 ports (Broadcom Tomahawk 6:
1,024 x 100G SerDes, 102.4 Tb/s, June 2025 press release) and chassis ("director") switches, themselves small Clos
fabrics, have up to a few thousand; a radix beyond 4,096 is a typo or a whole fabric, not a switch."""


def _plausible_radix(value: int) -> int:
    if value > MAX_RADIX:
        raise ValueError(f"a radix of {value:,} ports is no switch: the largest switch chip has 1,024 ports "
                         f"(Broadcom Tomahawk 6) and chassis switches a few thousand; allowed: 1 to {MAX_RADIX:,} "
                         "(model a larger switch as a tier of smaller ones)")
    return value


MAX_TIERS = 8
"""The most scale-out switch tiers a spec may give (a 5-tier fat tree of 64-port switches already reaches 2 x 32^5 =
67 million ports)."""

LINK_RATE_FACTOR = 10
"""A link in a spec runs at most this many times the fastest link published in topo's GPU catalog
(:func:`max_link_Bps`)."""


def max_link_Bps() -> float:
    """The fastest rate a spec's link may have: :data:`LINK_RATE_FACTOR` times the fastest per-GPU NVLink in
    topo's GPU catalog (900 GB/s a direction, NVLink 5 on B200/GB200/B300: the fastest link of any kind there; the
    fastest switch port in topo/data/catalog/switches.toml is 800 Gb/s). NVLink 6 as NVIDIA announced it for Rubin
    (3.6 TB/s per GPU, both directions: NVIDIA's NVLink page as wheelersnetwork.com/2025/11/
    decoding-nvidias-rubin-networking-math.html quotes it, secondary) is within it; a rate beyond it is a unit typo
    ("TB/s" for "GB/s"), not hardware.

    Returns
    -------
    float
        Bytes per second, per direction.
    """
    return LINK_RATE_FACTOR * max(g.nvlink_Bps for g in GPU_MODELS.values())


MAX_LATENCY_S = 1e-3
"""The longest latency of one switch, NIC or NVSwitch hop in a site. Light in fibre takes 4.9 us a km
(multisite.md section 4), so 1 ms is 200 km of fibre, farther than any building or campus; switch port-to-port
latencies are 0.1-1 us (130 ns for InfiniBand NDR). A longer one is a unit typo ("ms" for "us") or a span between
sites, which a region file gives (docs/multisite.md)."""


def _link_rate(value):
    rate = _bandwidth(value)
    top = max_link_Bps()
    if rate > top:
        raise ValueError(f"{value!r} is faster than any link: allowed up to {top / 1e12:g} TB/s a direction "
                         f"({LINK_RATE_FACTOR} x the fastest GPU link in topo's catalog, "
                         f"{top / LINK_RATE_FACTOR / 1e9:g} GB/s NVLink 5)")
    return rate


def _site_latency(value):
    t = _time(value)
    if t > MAX_LATENCY_S:
        raise ValueError(f"{value!r} is longer than any hop inside a site: allowed up to {MAX_LATENCY_S * 1e3:g} ms "
                         "(200 km of fibre; a span between sites belongs in a region file)")
    return t


Bandwidth = Annotated[float, BeforeValidator(_bandwidth)]
Duration = Annotated[float, BeforeValidator(_time)]
LinkRate = Annotated[float, BeforeValidator(_link_rate)]
SiteLatency = Annotated[float, BeforeValidator(_site_latency)]
PositiveInt = Annotated[int, Field(strict=True, ge=1)]

FABRIC_KINDS = ("fat_tree", "rail_optimized", "rail_only")
TECHNOLOGIES = ("infiniband_hdr", "infiniband_ndr", "infiniband_xdr", "roce", "oci_roce", "gcp_roce", "efa", "efa_v1",
                "efa_v3", "efa_v4", "gcp_tcpx", "gcp_tcpxo")


class _Strict(BaseModel):
    # docs/spec-reference.md is generated from the docstring under each field, read from the source by
    # topo.spec.reference.field_docs; pydantic's use_attribute_docstrings read the source of every model whenever
    # this module was imported (inspect.getsource per class: about 90 ms of every command's start-up)
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ScaleUpSpec(_Strict):
    """The NVLink (scale-up) domain: GPUs joined by NVSwitch, one logical switch per domain."""

    gpus_per_domain: PositiveInt | None = None
    """GPUs in one NVLink domain: 8 for HGX H100/H200/B200/B300, 72 for GB200/GB300 NVL72. Default: the GPU's."""
    bandwidth_per_gpu_Bps: LinkRate | None = Field(None, alias="bandwidth_per_gpu")
    """NVLink bandwidth of one GPU, per direction ("450 GB/s" for H100). Default: the GPU's."""
    latency_s: SiteLatency = Field(0.0, alias="latency")
    """NVSwitch port-to-port latency added to each NVLink hop (default 0: covered by the cost profile)."""
    nvls: bool | None = None
    """The NVSwitch can reduce in the switch (NVLink SHARP, Hopper and newer). Default: the GPU's."""


class ServerSpec(_Strict):
    """One server (host): its GPUs and scale-out NICs."""

    gpus: PositiveInt | None = None
    """GPUs per server; default: the GPU model's (8 for HGX, 4 per compute tray in an NVL72 rack)."""
    nics: PositiveInt = 8
    """Scale-out NICs per server; NIC n sits beside GPU n*gpus/nics (or serves several GPUs)."""
    nic_rate_Bps: LinkRate = Field(50e9, alias="nic_rate")
    """Line rate of one NIC per direction (default "400 Gb/s", ConnectX-7 NDR)."""
    nic_model: str = ""
    """The NIC (free text; a name from ``topo/data/hardware/host_links.toml`` at its start, e.g. "ConnectX-7",
    sets the host link's PCIe generation). Default: the first catalog NIC fast enough for ``nic_rate``."""
    nic_latency_s: SiteLatency = Field(0.0, alias="nic_latency")
    """Latency through one NIC added to each network hop (default 0: covered by the cost profile)."""
    pcie_bandwidth_Bps: LinkRate | None = Field(None, alias="pcie_bandwidth")
    """GPU-to-NIC (host link) bandwidth per direction. Default: PCIe x16 at the lower generation of the GPU and
    the NIC (topo/data/hardware/host_links.toml): Gen4 32, Gen5 64, Gen6 128 GB/s, so H100 with ConnectX-7 gets
    64 GB/s and B200 with an 800G ConnectX-8 128 GB/s."""
    cpu_vendor: Literal["intel", "amd", "arm"] | None = None
    """The host CPU's vendor: NCCL's network overhead per step is 2 us on AMD x86 hosts, 1 us on Intel and Arm
    (tuning.cc getNetOverhead). Default: ``host_cpu``'s vendor when that is given (a different vendor in both is
    an error), else the catalog server's (``[plan] server_model``, else the first in topo/data/catalog/servers.toml
    holding the GPU: AMD for DGX A100, Arm for the NVL72 trays, else Intel)."""
    host_cpu: str | None = None
    """The host CPU, by its key in topo/data/compute/host_cpu.toml ``[cpu]`` (``xeon_8480c``, ``xeon_8570``,
    ``xeon_6776p``, ``epyc_7742``, ``grace``): ``topo train`` scales the host's time per launched op by its ``time_factor``, and
    the CPU sets ``cpu_vendor``. Default: the GPU's catalog server's (that file's ``[gpu]`` table)."""

    @field_validator("host_cpu")
    @classmethod
    def _known_host_cpu(cls, value, info: ValidationInfo):
        if value is None:
            return value
        names = host_cpu_names()
        if value not in names:
            raise ValueError(f"unknown host CPU {value!r} (topo/data/compute/host_cpu.toml [cpu]); allowed: "
                             f"{', '.join(names)}")
        vendor, given = host_cpu_vendor(value), info.data.get("cpu_vendor")
        if given is not None and given != vendor:
            raise ValueError(f"{value!r} is an {vendor} CPU but server.cpu_vendor is {given!r}; allowed: drop "
                             f"cpu_vendor (host_cpu sets it) or a host CPU by {given}: "
                             f"{', '.join(n for n in names if host_cpu_vendor(n) == given) or 'none in the file'}")
        return value


class ClusterSpec(_Strict):
    """How big the cluster is: exactly one of the four counts."""

    num_gpus: PositiveInt | None = None
    """GPUs in the cluster (whole servers)."""
    num_servers: PositiveInt | None = None
    """Servers (hosts) in the cluster."""
    num_units: PositiveInt | None = None
    """Scalable units (racks in a fat tree): the servers under one leaf (or one leaf per rail)."""
    num_pods: PositiveInt | None = None
    """Pods (3 or more tiers): units under one set of spines; needs ``fabric.units_per_pod``."""

    @model_validator(mode="after")
    def _exactly_one(self):
        given = [k for k in ("num_gpus", "num_servers", "num_units", "num_pods") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of num_gpus, num_servers, num_units, num_pods"
                + (f", got {', '.join(given)}" if given else ", got none")
            )
        return self


def _tier_name(value: str) -> str:
    bad = next((ch for ch in value if not (ch.isascii() and (ch.isalnum() or ch in "-_"))), None)
    if not value or bad is not None or not value[0].isalpha():
        what = ("empty" if not value else f"{bad!r} in it" if bad is not None else "not starting with a letter")
        raise ValueError(f"a tier name is a letter then letters, digits, '-' or '_', got {value!r} ({what}): it "
                         f"names switches and links (spine0, leaf-spine) and is written in --set "
                         f"fabric.tiers[NAME] and --fail; allowed: e.g. 'spine', 'super-spine', 'tier_a'")
    if value[-1:].isdigit():
        raise ValueError(f"a tier name must not end in a digit, got {value!r}: switches are named tier name + index "
                         f"({value}0 would read as switch {value[-1]}0 of tier {value[:-1]!r} too); allowed: a name "
                         "ending in a letter or punctuation, e.g. 'spine-a' or 'super-spine'")
    return value


def _tier_count(value):
    # before pydantic's own "list should have at most 8 items after validation, not 10, got [every tier]"
    if isinstance(value, list) and not value:
        raise ValueError(f"a fabric has 1 to {MAX_TIERS} tiers, got none: add a [[fabric.tiers]] entry per switch "
                         "tier, from the leaves up")
    if isinstance(value, list) and len(value) > MAX_TIERS:
        raise ValueError(f"a fabric has 1 to {MAX_TIERS} tiers, got {len(value)} [[fabric.tiers]] entries; with "
                         f"more, raise the radix (fewer tiers hold as many GPUs)")
    return value


class TierSpec(_Strict):
    """One tier of scale-out switches (leaf, spine, core; the names are the user's)."""

    name: Annotated[Name, Field(max_length=64), AfterValidator(_tier_name)]
    """The tier's name ("leaf", "spine", "core"), used in messages and by ``--set fabric.tiers[NAME]``: a letter
    then letters, digits, '-' or '_', not ending in a digit (switch names are the tier's name and an index)."""
    model: str = ""
    """The switch model (free text, e.g. "QM9700"), shown in the inventory."""
    radix: Annotated[int, Field(strict=True, ge=1), AfterValidator(_plausible_radix)]
    """Ports per switch at ``port_rate`` (1 to 4,096: the largest switch chip has 1,024)."""
    port_rate_Bps: LinkRate = Field(alias="port_rate")
    """Line rate of one port per direction; must equal the rate of the links from below (NICs or uplinks)."""
    up_port_rate_Bps: LinkRate | None = Field(None, alias="up_port_rate")
    """Rate of the uplink ports when it differs from ``port_rate`` (default: the same)."""
    oversubscription: Annotated[float, Field(ge=1.0, allow_inf_nan=False)] | None = None
    """Downlink:uplink capacity, e.g. 7 for 7:1 (default 1, non-blocking, unless ports are given)."""
    down_ports: PositiveInt | None = None
    """Ports facing down per switch (default: as the servers and lower tier fill them)."""
    up_ports: Annotated[int, Field(strict=True, ge=0)] | None = None
    """Ports facing up per switch (default: down ports / oversubscription)."""
    latency_s: SiteLatency = Field(0.0, alias="latency")
    """Port-to-port latency of one switch of this tier."""
    sharp: bool = False
    """The switches reduce in the network (SHARP / CollNet). Only where ``fabric.technology``'s network file says its
    switches can (``in_network_reduction``: InfiniBand; NVIDIA SHARP runs on Quantum switches only)."""
    power_W: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """Power of one switch in watts, for the inventory's totals (not set: the power of the switch the planner's
    catalog prices for this tier, as describe says; unknown where the catalog has none)."""
    joins: PositiveInt | None = None
    """How many blocks of the tier below one block of this tier joins: units for the tier above the leaves (a pod;
    the same as ``fabric.units_per_pod``), pods for the next (an island), and so on. Default: as many as its
    switches hold; the top tier joins everything. Not for the leaf tier."""
    block_name: Annotated[Name, Field(max_length=64)] = ""
    """What one block of this tier is called in messages ("pod", "island"). Default: pod, island, zone, region
    from tier 1 up."""

    @field_validator("down_ports", "up_ports")
    @classmethod
    def _ports_within_radix(cls, value, info: ValidationInfo):
        radix = info.data.get("radix")  # validated before (declared first); absent if it was bad
        if value is None or radix is None:
            return value
        if info.field_name == "down_ports" and value > radix:
            raise ValueError(f"{value:,} down ports are more than the radix of {radix}")
        if info.field_name == "up_ports" and value >= radix:
            raise ValueError(f"{value:,} up ports leave no down port in a radix of {radix}")
        return value


class FabricSpec(_Strict):
    """The scale-out fabric joining the NVLink domains."""

    kind: Literal["fat_tree", "rail_optimized", "rail_only"]
    """fat_tree: a server's NICs share one leaf (ToR); rail_optimized: NIC r of every server in a scalable unit
    goes to the unit's leaf of rail r, spines join all rails; rail_only: one Clos per rail, no switch of any tier
    (spine, core, ...) between rails (cross-rail traffic crosses the NVLink domain)."""
    technology: Literal["infiniband_hdr", "infiniband_ndr", "infiniband_xdr", "roce", "oci_roce", "gcp_roce", "efa",
                        "efa_v1", "efa_v3", "efa_v4", "gcp_tcpx", "gcp_tcpxo"] = "infiniband_ndr"
    """The network technology; selects the cost profile's per-hop latencies and efficiencies (one file each in
    topo/data/profiles/network/). Provider stacks differ in small-message latency: roce is NCCL's own RDMA transport
    over RoCE, oci_roce the OCI cluster network, gcp_roce GCP's A3 Ultra/A4 RDMA with NCCL/gIB; efa is AWS EFA
    (p5/p5e), efa_v1 the p4d/p4de generation (Simple protocol only; what efa means on A100), efa_v3 p5en, efa_v4
    p6-b200 and later (what efa means on Blackwell)."""
    servers_per_unit: PositiveInt | None = None
    """Servers under one leaf (fat_tree) or one leaf per rail (rail kinds). Default: as many as the leaf holds."""
    units_per_pod: PositiveInt | None = None
    """Scalable units under one set of spines (3 or more tiers; the same as ``tiers[1].joins``). Default: as many
    as the spines hold."""
    unit_name: Name = ""
    """What a unit is called ("rack", "scalable unit"); default by kind."""
    tiers: Annotated[list[TierSpec], BeforeValidator(_tier_count), Field(min_length=1, max_length=MAX_TIERS)]
    """The switch tiers from the bottom (leaf) up: 1 to 8 ``[[fabric.tiers]]`` entries."""
    grow_tiers: bool = False
    """When the top tier cannot connect everything, add tiers like it (spine, core, super-spine, super-core, ...) as
    needed, up to 8 in all, instead of failing."""

    @model_validator(mode="after")
    def _unique_tier_names(self):
        names = [t.name for t in self.tiers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tier names must be unique, got {', '.join(repr(d) for d in dup)} twice")
        return self


class Spec(_Strict):
    """A whole cluster: accelerators, servers, the NVLink domain and the scale-out fabric."""

    name: Annotated[Name, Field(min_length=1)]
    """The cluster's name; default output files are named after it (made safe for a file name)."""
    description: str = ""
    """One line on what the cluster is."""
    source: str | list[str] = ""
    """Where the design comes from (URLs), cited in reports."""
    gpu: Annotated[str, AfterValidator(_known_gpu)]
    """GPU model; one of the catalog's (A100, H100, H200, H800, B200, B300, GB200, GB300)."""
    scale_up: ScaleUpSpec = ScaleUpSpec()
    """The NVLink domain (``[scale_up]``)."""
    server: ServerSpec = ServerSpec()
    """One server (``[server]``)."""
    cluster: ClusterSpec
    """The cluster's size (``[cluster]``)."""
    fabric: FabricSpec
    """The scale-out fabric (``[fabric]`` and its ``[[fabric.tiers]]``)."""
    plan: dict = {}
    """Inputs of ``topo plan`` (catalog overrides, floor layout, multi-stage tiers), validated by
    :mod:`topo.plan.catalog` when a plan is made: e.g. ``[plan.facility] pue = 1.3``."""

    _origin: str = PrivateAttr("")
    _path: str = PrivateAttr("")
    _host_link: HostLink | None = PrivateAttr(None)
    _set_paths: dict = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _resolve_host_link(self):
        """Fill ``server.pcie_bandwidth`` from the hardware catalog when the spec does not give it."""
        if self.server.pcie_bandwidth_Bps is None:
            link = host_link(self.gpu, self.server.nic_model, self.server.nic_rate_Bps)
            object.__setattr__(self, "server", self.server.model_copy(update={"pcie_bandwidth_Bps": link.bandwidth_Bps}))
            self._host_link = link
        return self

    @property
    def host_link(self) -> HostLink | None:
        """Where the host link's bandwidth came from (None when the spec gives ``server.pcie_bandwidth``)."""
        return self._host_link

    @property
    def input_path(self) -> str:
        """The file this spec was read from ("" for a spec made in Python): outputs never overwrite it."""
        return self._path

    def error_source(self, key: str | None) -> str:
        """Where a problem with ``key`` comes from: the file, and the ``--set`` that changed it if one did."""
        origin = next((o for p, o in self._set_paths.items()
                       if key and (key == p or key.startswith(p + ".") or key.startswith(p + "["))), None)
        base = self._origin or "<spec>"
        return f"{base} ({override_label(origin)})" if origin else base

    # Resolved values (spec value, else the GPU catalog's) -------------------------------------------------
    @property
    def gpu_model(self):
        return lookup_gpu(self.gpu)

    @property
    def cpu_vendor(self) -> str | None:
        """The host CPU's vendor: ``server.cpu_vendor``, else ``server.host_cpu``'s, else the catalog server's (None:
        none holds the GPU)."""
        if self.server.cpu_vendor is not None:
            return self.server.cpu_vendor
        if self.server.host_cpu is not None:
            return host_cpu_vendor(self.server.host_cpu)
        model = self.plan.get("server_model") if isinstance(self.plan, dict) else None
        return server_cpu_vendor(self.gpu, model if isinstance(model, str) else None)

    @property
    def host_cpu(self) -> tuple[str, str]:
        """The host CPU (a key of topo/data/compute/host_cpu.toml ``[cpu]``) and where it came from: ``"spec"``
        (``server.host_cpu``) or ``"gpu default"`` (the GPU's catalog server's, that file's ``[gpu]``)."""
        if self.server.host_cpu is not None:
            return self.server.host_cpu, "spec"
        return default_host_cpu(self.gpu), "gpu default"

    @property
    def gpus_per_domain(self) -> int:
        return self.scale_up.gpus_per_domain or self.gpu_model.domain_gpus

    @property
    def gpus_per_server(self) -> int:
        if self.server.gpus is not None:
            return self.server.gpus
        return min(self.gpu_model.host_gpus, self.gpus_per_domain)

    @property
    def nvlink_Bps(self) -> float:
        return self.scale_up.bandwidth_per_gpu_Bps or self.gpu_model.nvlink_Bps

    @property
    def nvls(self) -> bool:
        return self.gpu_model.nvls if self.scale_up.nvls is None else self.scale_up.nvls

    @property
    def sources(self) -> list[str]:
        return [self.source] if isinstance(self.source, str) and self.source else list(self.source or [])
