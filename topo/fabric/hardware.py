"""Catalog of accelerator facts that a spec may leave out.

A spec names its GPU (``gpu = "H100"``); fields it does not set (NVLink bandwidth, NVLS support, the size of the
NVLink domain) are taken from this table. Every number carries its source; ``topo describe`` prints the values it
used, so no default changes a result unseen.

Sources (see ``../shared/data/hardware.md``):
- NVLink4 (H100/H200): 900 GB/s bidirectional = 450 GB/s per direction, 18 links: NVIDIA DGX SuperPOD H100
  reference architecture; stas00/ml-engineering network/README.md. NVLS (NVLink SHARP) from Hopper on.
- NVLink3 (A100): 600 GB/s bidirectional = 300 GB/s per direction, 12 links: stas00/ml-engineering.
- NVLink5 (B200/B300/GB200/GB300): 1.8 TB/s bidirectional = 900 GB/s per direction, 18 links: NVIDIA GB200 SuperPOD
  reference architecture. GB200/GB300 NVL72: 72 GPUs per NVLink domain, 4 GPUs per compute tray (host).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache

from ..units import parse_bandwidth_Bps
from ..resources import data_dir

__all__ = ["GpuModel", "GPU_MODELS", "lookup_gpu", "HostLink", "host_link"]


@dataclass(frozen=True)
class GpuModel:
    """Facts about one accelerator model."""

    name: str
    generation: str  # "ampere", "hopper", "blackwell": selects the cost-model profile
    nvlink: str  # "nvlink3", "nvlink4", "nvlink5"
    nvlink_links: int
    nvlink_Bps: float  # per GPU, per direction
    nvls: bool  # NVLink SHARP (in-switch reduction)
    domain_gpus: int  # GPUs in one NVLink domain by default
    host_gpus: int  # GPUs per server (host) by default
    source: str


_HGX = "NVIDIA DGX SuperPOD H100 RA; stas00/ml-engineering network/README.md"
_NVL72 = "NVIDIA DGX SuperPOD GB200 RA (72-GPU NVLink domain, 18 compute trays of 4 GPUs)"

GPU_MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel("A100", "ampere", "nvlink3", 12, 300e9, False, 8, 8, "stas00/ml-engineering network/README.md"),
        GpuModel("H100", "hopper", "nvlink4", 18, 450e9, True, 8, 8, _HGX),
        GpuModel("H200", "hopper", "nvlink4", 18, 450e9, True, 8, 8, _HGX),
        GpuModel("H800", "hopper", "nvlink4", 8, 200e9, True, 8, 8,
                 "Alibaba HPN (SIGCOMM'24): 'NVLink 400 GB/s' bidirectional per H800"),
        GpuModel("B200", "blackwell", "nvlink5", 18, 900e9, True, 8, 8, "NVIDIA GB200 SuperPOD RA; stas00"),
        GpuModel("B300", "blackwell", "nvlink5", 18, 900e9, True, 8, 8,
                 "NVIDIA HGX B300 spec table: NVLink 5, 1.8 TB/s GPU-to-GPU (both directions), 8 GPUs per board"),
        GpuModel("GB200", "blackwell", "nvlink5", 18, 900e9, True, 72, 4, _NVL72),
        GpuModel("GB300", "blackwell", "nvlink5", 18, 900e9, True, 72, 4, _NVL72),
    )
}


def lookup_gpu(name: str) -> GpuModel | None:
    """The catalog entry for ``name`` (case-insensitive), or None."""
    return GPU_MODELS.get(name.upper())


# --- the host link between a GPU and its NIC (topo/data/hardware/host_links.toml) ----------------------------

@dataclass(frozen=True)
class HostLink:
    """The PCIe x16 link between a GPU and its NIC: the lower generation of the two ends."""

    bandwidth_Bps: float  # per direction
    generation: str  # "gen4", "gen5", "gen6"
    gpu_generation: str
    nic: str  # the catalog NIC it was resolved with ("" if the spec's NIC is not in the catalog)
    nic_generation: str  # "" if unknown
    source: str
    nic_assumed: bool = False  # the NIC taken from the port rate alone (the spec names none): an assumption

    def describe(self) -> str:
        """E.g. ``PCIe gen5 x16: GPU gen5, ConnectX-7 gen5``; a NIC taken from the rate alone is said to be assumed
        (a 200 Gb/s cloud NIC is not a ConnectX-6 for being 200 Gb/s: Google's A3 Mega, section 458)."""
        nic = f"{self.nic} {self.nic_generation}" if self.nic else "NIC not in the catalog"
        if self.nic_assumed:
            nic += ", assumed from the port rate: the spec names no server.nic_model"
        return f"PCIe {self.generation} x16: GPU {self.gpu_generation}, {nic}"


@lru_cache(maxsize=1)
def _host_links() -> dict:
    path = data_dir("hardware", "host_links.toml")
    return tomllib.loads(path.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _switch_catalog() -> dict:
    path = data_dir("catalog", "switches.toml")
    return tomllib.loads(path.read_text(encoding="utf-8"))


def catalog_switch_power_W(model: str | None) -> float | None:
    """A switch model's power (W, without optics) from the switch catalog (topo/data/catalog/switches.toml, the
    planner's), or None for a model it does not list.

    >>> catalog_switch_power_W("QM9700")
    747.0
    """
    entry = _switch_catalog().get(model or "")
    if not isinstance(entry, dict) or "power_W" not in entry:
        return None
    v = entry["power_W"]
    return float(v["value"] if isinstance(v, dict) else v)


def gpu_pcie_Bps(gpu: str) -> float | None:
    """Bandwidth per direction of the GPU's own PCIe x16 link (its generation), or None for a GPU not in
    topo/data/hardware/host_links.toml. Every NIC a GPU reaches over PCIe shares this one link.

    >>> gpu_pcie_Bps("H100")
    64000000000.0
    """
    data = _host_links()
    entry = data["gpus"].get(gpu.upper())
    if entry is None:
        return None
    return parse_bandwidth_Bps(data["pcie"][entry["pcie"]]["bandwidth_per_direction"])


def host_link(gpu: str, nic_model: str, nic_rate_Bps: float) -> HostLink:
    """The GPU-to-NIC link of ``gpu`` with a NIC ``nic_model`` (catalog name as prefix, case-insensitive; if
    empty or unknown, the first catalog NIC whose port takes ``nic_rate_Bps``).

    >>> host_link("H100", "ConnectX-7", 50e9).bandwidth_Bps
    64000000000.0
    >>> host_link("B200", "", 100e9).describe()
    'PCIe gen6 x16: GPU gen6, ConnectX-8 gen6, assumed from the port rate: the spec names no server.nic_model'
    """
    data = _host_links()
    gens = data["pcie"]
    gpu_gen = data["gpus"][gpu.upper()]["pcie"]
    nics = data["nics"]
    nic = next((n for n in nics if nic_model.lower().startswith(n.lower())), "") if nic_model else ""
    if not nic and not nic_model:
        nic = next((n for n, v in nics.items() if parse_bandwidth_Bps(v["max_rate"]) >= nic_rate_Bps * (1 - 1e-9)),
                   "")
    nic_gen = nics[nic]["pcie"] if nic else ""
    gen = min(gpu_gen, nic_gen) if nic_gen else gpu_gen  # "gen4" < "gen5" < "gen6"
    sources = [gens[gen]["source"], data["gpus"][gpu.upper()]["source"]] + ([nics[nic]["source"]] if nic else [])
    return HostLink(parse_bandwidth_Bps(gens[gen]["bandwidth_per_direction"]), gen, gpu_gen, nic, nic_gen,
                    "; ".join(sources), nic_assumed=bool(nic) and not nic_model)
