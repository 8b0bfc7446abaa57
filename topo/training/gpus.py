"""The GPU catalog for training estimates and each GPU's kernel model.

``topo/data/compute/gpus.toml``: dense peak math rate per precision, HBM capacity and bandwidth and SMs for A100,
H100, H200, H800, B200, B300, GB200, GB300, each with its source and status; the kernel model built on them
(:mod:`topo.training.kernels`, ``topo/data/compute/kernels.toml``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache

from ..errors import TopoError
from ..fabric.hardware import lookup_gpu
from ..resources import data_dir
from .kernels import KernelModel, kernel_model

__all__ = ["GpuCompute", "gpu_compute", "PRECISIONS"]

_DIR = data_dir("compute")
PRECISIONS = ("bf16", "fp8", "fp4")


@dataclass(frozen=True)
class GpuCompute:
    """One GPU's rates (from ``gpus.toml``) and its generation's kernel efficiencies.

    Attributes
    ----------
    peak_bf16_flops, peak_fp8_flops, peak_fp4_flops : float
        Dense FLOP/s (``peak_fp8_flops`` None: no FP8 tensor cores; ``peak_fp4_flops`` None: no FP4 ones, the GEMMs
        of ``fp8_recipe = "nvfp4"``).
    memory_bytes : float
        HBM a job can fill: the device memory the driver reports (``usable_memory_MiB``; an "80GB" H100 has
        85.5e9 bytes).
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
    kernels: KernelModel
    source: str
    sms: int | None = None
    peak_fp4_flops: float | None = None

    @property
    def efficiency(self) -> float:
        """The large-GEMM BF16 efficiency at the sustained clock (what ``--efficiency`` sets)."""
        return self.kernels.efficiency["bf16"]

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s at ``precision`` (bf16, fp8 or fp4); TopoError for FP8 or FP4 on a GPU without it."""
        if precision == "fp4":
            if self.peak_fp4_flops is None:
                raise TopoError(f"{self.name} has no FP4 tensor cores; allowed: bf16, fp8", source="layout",
                                key="fp8_recipe")
            return self.peak_fp4_flops
        if precision == "fp8":
            if self.peak_fp8_flops is None:
                raise TopoError(f"{self.name} has no FP8 tensor cores; allowed: bf16", source="layout",
                                key="precision")
            return self.peak_fp8_flops
        return self.peak_bf16_flops


@lru_cache(maxsize=None)
def _tables():
    return tomllib.loads((_DIR / "gpus.toml").read_text(encoding="utf-8"))


def gpu_compute(name: str, efficiency: float | None = None, overrides: dict | None = None,
                host_cpu: str | None = None) -> GpuCompute:
    """Facts for GPU model ``name`` (as a spec names it).

    Parameters
    ----------
    name : str
        A GPU model the hardware catalog knows (A100, H100, H200, H800, B200, B300, GB200, GB300).
    efficiency : float, optional
        Large-GEMM efficiency (0 < e <= 1) instead of the generation's.
    overrides : dict, optional
        ``{section: {key: value}}`` over ``kernels.toml`` (how a fit tries candidate values).
    host_cpu : str, optional
        The host CPU that launches the kernels (a key of ``topo/data/compute/host_cpu.toml``'s ``[cpu]``: a spec's
        ``server.host_cpu``); default: the GPU's catalog server's.

    Raises
    ------
    TopoError
        Unknown GPU, or ``efficiency`` outside (0, 1].
    """
    gpus = _tables()
    model = lookup_gpu(name)
    row = gpus.get(model.name if model else name)
    if row is None or model is None:
        raise TopoError(f"no compute figures for GPU {name!r}; known: {', '.join(gpus)}", key="gpu")
    fp8, fp4 = row.get("peak_fp8_TFLOPs"), row.get("peak_fp4_TFLOPs")
    peaks = {"bf16": row["peak_bf16_TFLOPs"] * 1e12, **({"fp8": fp8 * 1e12} if fp8 else {}),
             **({"fp4": fp4 * 1e12} if fp4 else {})}
    k = kernel_model(model.name, model.generation, row["sms"], peaks, row["hbm_TBps"] * 1e12, overrides, host_cpu,
                     row.get("attention_table"), row["sm_clock_MHz"] * 1e6)
    if efficiency is not None:
        if not 0 < efficiency <= 1:
            raise TopoError(f"must be a fraction of the GPU's peak in (0, 1], got {efficiency:g}", key="efficiency")
        k = k.with_efficiency(float(efficiency))
    return GpuCompute(name=model.name, generation=model.generation, peak_bf16_flops=row["peak_bf16_TFLOPs"] * 1e12,
                      peak_fp8_flops=fp8 * 1e12 if fp8 else None, memory_bytes=row["usable_memory_MiB"] * 2**20,
                      hbm_Bps=row["hbm_TBps"] * 1e12, kernels=k, source=row["source"], sms=row.get("sms"),
                      peak_fp4_flops=fp4 * 1e12 if fp4 else None)
