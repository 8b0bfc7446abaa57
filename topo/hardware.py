"""Catalog of accelerator facts that a spec may leave out.

A spec names its GPU (``gpu = "H100"``); fields it does not set (NVLink bandwidth, NVLS support, the size of the
NVLink domain) are taken from this table. Every number carries its source; ``topo describe`` prints the values it
used, so no default changes a result unseen.

Sources (see ``../shared/data/hardware.md``):
- NVLink4 (H100/H200): 900 GB/s bidirectional = 450 GB/s per direction, 18 links: NVIDIA DGX SuperPOD H100
  reference architecture; stas00/ml-engineering network/README.md. NVLS (NVLink SHARP) from Hopper on.
- NVLink3 (A100): 600 GB/s bidirectional = 300 GB/s per direction, 12 links: stas00/ml-engineering.
- NVLink5 (B200/GB200/GB300): 1.8 TB/s bidirectional = 900 GB/s per direction, 18 links: NVIDIA GB200 SuperPOD
  reference architecture. GB200/GB300 NVL72: 72 GPUs per NVLink domain, 4 GPUs per compute tray (host).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuModel", "GPU_MODELS", "lookup_gpu"]


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
        GpuModel("GB200", "blackwell", "nvlink5", 18, 900e9, True, 72, 4, _NVL72),
        GpuModel("GB300", "blackwell", "nvlink5", 18, 900e9, True, 72, 4, _NVL72),
    )
}


def lookup_gpu(name: str) -> GpuModel | None:
    """The catalog entry for ``name`` (case-insensitive), or None."""
    return GPU_MODELS.get(name.upper())
