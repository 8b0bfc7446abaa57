"""Per-GPU compute facts for training estimates: dense peak (bf16, fp8), memory, and the achievable efficiency of
the GPU's generation. Both are data files with sources (``topo/data/compute/gpus.toml``, ``efficiency.toml``)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import TopoError
from ..fabric.hardware import lookup_gpu
from ..resources import data_dir

__all__ = ["GpuCompute", "gpu_compute"]

_DIR = data_dir("compute")


@dataclass(frozen=True)
class GpuCompute:
    name: str
    generation: str
    peak_bf16_flops: float  # FLOP/s, dense
    peak_fp8_flops: float | None
    memory_bytes: float
    efficiency: float  # achievable fraction of peak for a training step's compute
    source: str
    efficiency_source: str

    def peak_flops(self, precision: str) -> float:
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


def gpu_compute(name: str, efficiency: float | None = None) -> GpuCompute:
    """Facts for GPU model ``name`` (as a spec names it); ``efficiency`` overrides the generation's value."""
    gpus, eff = _tables()
    model = lookup_gpu(name)
    row = gpus.get(model.name if model else name)
    if row is None or model is None:
        raise TopoError(f"no compute figures for GPU {name!r}; known: {', '.join(gpus)}", key="gpu")
    e = eff[model.generation]
    fp8 = row.get("peak_fp8_TFLOPs")
    return GpuCompute(name=model.name, generation=model.generation, peak_bf16_flops=row["peak_bf16_TFLOPs"] * 1e12,
                      peak_fp8_flops=fp8 * 1e12 if fp8 else None, memory_bytes=row["memory_GB"] * 1e9,
                      efficiency=float(efficiency if efficiency is not None else e["efficiency"]),
                      source=row["source"], efficiency_source=e["source"])
