"""The GPU catalog for training estimates and the kernel efficiencies of the operator roofline.

Both are data files with a source and a status per entry: ``topo/data/compute/gpus.toml`` (dense peak math rate
per precision, HBM capacity and bandwidth for A100, H100, H200, H800, B200, GB200, GB300) and
``topo/data/compute/efficiency.toml`` (GEMM efficiency per precision and generation, the GEMM shape scale, the
attention kernels' efficiency and the elementwise kernels' share of HBM bandwidth; fitted, published or assumed).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from functools import lru_cache

from ..errors import TopoError
from ..fabric.hardware import lookup_gpu
from ..resources import data_dir

__all__ = ["GpuCompute", "KernelEfficiency", "gpu_compute", "kernel_efficiency", "PRECISIONS"]

_DIR = data_dir("compute")
PRECISIONS = ("bf16", "fp8")


@dataclass(frozen=True)
class KernelEfficiency:
    """Achievable fractions of a GPU's peaks (see ``efficiency.toml``).

    Attributes
    ----------
    gemm_bf16, gemm_fp8 : float
        Large-GEMM efficiency relative to the BF16 / FP8 dense peak.
    attention : float
        Fused attention (forward and backward together) relative to the BF16 peak.
    memory : float
        Elementwise kernels' fraction of HBM bandwidth.
    grouped_gemm : float
        An MoE block's grouped expert GEMMs relative to a dense GEMM of the same shape (one kernel over many
        skinny per-expert GEMMs: uneven tiles, per-group scheduling); fitted across generations.
    moe_host_per_expert_s : float
        Host seconds per local expert of an eager MoE block's forward pass (twice that backward): the launches
        of the per-expert GEMMs and their FP8 casts (Transformer Engine's grouped linear loops over the local
        experts), the router and the dispatcher around them. The block takes the longer of its GPU time and
        this; fitted across generations.
    shape_dim : float
        GEMM shape scale ``d``: a GEMM of ``M x N x K`` runs at ``1 / (1 + d/M + d/N + d/K)`` of the large-GEMM
        rate.
    """

    gemm_bf16: float
    gemm_fp8: float
    attention: float
    memory: float
    shape_dim: float
    source: str
    grouped_gemm: float = 1.0
    moe_host_per_expert_s: float = 0.0

    def scaled(self, gemm_efficiency: float) -> "KernelEfficiency":
        """The same with the large-GEMM efficiency (both precisions) set to ``gemm_efficiency`` times the data's
        ratio fp8/bf16 (``--efficiency``)."""
        ratio = self.gemm_fp8 / self.gemm_bf16
        return replace(self, gemm_bf16=gemm_efficiency, gemm_fp8=min(1.0, gemm_efficiency * ratio),
                       source=f"given: gemm efficiency {gemm_efficiency}")


@dataclass(frozen=True)
class GpuCompute:
    """One GPU's rates (from ``gpus.toml``) and its generation's kernel efficiencies.

    Attributes
    ----------
    peak_bf16_flops, peak_fp8_flops : float
        Dense FLOP/s (``peak_fp8_flops`` None: no FP8 tensor cores).
    memory_bytes : float
        HBM capacity.
    hbm_Bps : float
        HBM bandwidth, bytes/s.
    sms : int or None
        Streaming multiprocessors (what overlapped communication kernels take a share of).
    """

    name: str
    generation: str
    peak_bf16_flops: float
    peak_fp8_flops: float | None
    memory_bytes: float
    hbm_Bps: float
    kernels: KernelEfficiency
    source: str
    sms: int | None = None

    @property
    def efficiency(self) -> float:
        """The large-GEMM BF16 efficiency (what ``--efficiency`` sets)."""
        return self.kernels.gemm_bf16

    @property
    def efficiency_source(self) -> str:
        return self.kernels.source

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s at ``precision`` (bf16 or fp8); TopoError for FP8 on a GPU without it."""
        if precision == "fp8":
            if self.peak_fp8_flops is None:
                raise TopoError(f"{self.name} has no FP8 tensor cores; allowed: bf16", source="layout",
                                key="precision")
            return self.peak_fp8_flops
        return self.peak_bf16_flops


@lru_cache(maxsize=None)
def _tables():
    gpus = tomllib.loads((_DIR / "gpus.toml").read_text(encoding="utf-8"))
    eff = tomllib.loads((_DIR / "efficiency.toml").read_text(encoding="utf-8"))
    return gpus, eff


def kernel_efficiency(generation: str, overrides: dict | None = None) -> KernelEfficiency:
    """Kernel efficiencies of ``generation`` (ampere, hopper, blackwell) from ``efficiency.toml``, with
    ``overrides`` (keys as the file's) on top: how the accuracy script tries candidate values."""
    _, eff = _tables()
    if generation not in eff:
        raise TopoError(f"no kernel efficiencies for GPU generation {generation!r}; known: "
                        f"{', '.join(k for k in eff if k not in ('shape', 'memory', 'moe'))}", key="gpu")
    g = {**eff[generation], **(overrides or {}).get(generation, {})}
    shape = {**eff["shape"], **(overrides or {}).get("shape", {})}
    mem = {**eff["memory"], **(overrides or {}).get("memory", {})}
    moe = {**eff.get("moe", {}), **(overrides or {}).get("moe", {})}
    return KernelEfficiency(gemm_bf16=float(g["gemm_efficiency_bf16"]),
                            gemm_fp8=float(g.get("gemm_efficiency_fp8", g["gemm_efficiency_bf16"])),
                            attention=float(g["attention_efficiency"]), memory=float(mem["memory_efficiency"]),
                            shape_dim=float(shape["gemm_shape_dim"]), source=f"{g['status']}: {g['source']}",
                            grouped_gemm=float(moe.get("grouped_gemm_efficiency", 1.0)),
                            moe_host_per_expert_s=float(moe.get("moe_host_per_expert_s", 0.0)))


def gpu_compute(name: str, efficiency: float | None = None, overrides: dict | None = None) -> GpuCompute:
    """Facts for GPU model ``name`` (as a spec names it).

    Parameters
    ----------
    name : str
        A GPU model the hardware catalog knows (A100, H100, H200, H800, B200, GB200, GB300).
    efficiency : float, optional
        Large-GEMM efficiency (0 < e <= 1) instead of the generation's.
    overrides : dict, optional
        ``{section: {key: value}}`` over ``efficiency.toml`` (used by the accuracy fit).

    Raises
    ------
    TopoError
        Unknown GPU, or ``efficiency`` outside (0, 1].
    """
    gpus, _ = _tables()
    model = lookup_gpu(name)
    row = gpus.get(model.name if model else name)
    if row is None or model is None:
        raise TopoError(f"no compute figures for GPU {name!r}; known: {', '.join(gpus)}", key="gpu")
    k = kernel_efficiency(model.generation, overrides)
    if efficiency is not None:
        if not 0 < efficiency <= 1:
            raise TopoError(f"must be a fraction of the GPU's peak in (0, 1], got {efficiency:g}", key="efficiency")
        k = k.scaled(float(efficiency))
    fp8 = row.get("peak_fp8_TFLOPs")
    return GpuCompute(name=model.name, generation=model.generation, peak_bf16_flops=row["peak_bf16_TFLOPs"] * 1e12,
                      peak_fp8_flops=fp8 * 1e12 if fp8 else None, memory_bytes=row["memory_GB"] * 1e9,
                      hbm_Bps=row["hbm_TBps"] * 1e12, kernels=k, source=row["source"], sms=row.get("sms"))
