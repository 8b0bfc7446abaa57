"""The SMs overlapped communication kernels hold, and what that costs the compute running beside them.

A collective that topo hides behind compute still runs on the GPU: NCCL launches one CTA per channel
(``src/enqueue.cc``: a plan's grid is its channel count, each CTA one SM), and those SMs are the compute's no
longer while the collective lasts.

- **SMs held by an NCCL collective**: NCCL's channel count, the fabric profile's ``channels`` (16 coll channels on
  8-GPU NVSwitch servers with 8 NICs, ``topo/data/profiles/nccl``), bounded by the recipe's ``NCCL_MIN_CTAS`` /
  ``NCCL_MAX_CTAS`` when it sets them: NCCL caps ``nChannels`` at ``maxCTAs`` and copies channels up to at least
  ``minCTAs`` (NVIDIA/nccl ``src/graph/connect.cc``@v2.28.3-1 lines 487-491; the environment overrides a
  communicator's config, ``src/init.cc`` ``envConfigOverride``). MLPerf v5.1 University of Florida Llama 3.1 8B
  (``b200_nemo/config_common.sh``): 16 and 32, so 16 SMs of B200's 148.
- **The compute's slowdown**: the same kernels on a GPU of ``SMs - held`` SMs (:func:`reduced_gpu`): a GEMM's
  waves are counted over the SMs left and each SM keeps its own rate (so a GEMM of one partial wave loses
  nothing and a many-wave one about ``held / SMs``), the attention kernels lose ``held / SMs`` of their rate, and
  the memory-bound kernels lose nothing (HBM stays the bound: a few SMs saturate it). A compute stretch of
  ``t`` seconds at full SMs takes ``t'`` on the rest.
- **The time added**: while ``hidden`` seconds of communication run, the compute does only ``t / t'`` of its
  work, and the rest, ``hidden x (1 - t / t')``, runs after (:func:`sm_loss_s`); with ``t' = t x SMs / (SMs -
  held)`` (every kernel linear in SMs) that is ``hidden x held / SMs``.
"""

from __future__ import annotations

from dataclasses import replace

__all__ = ["nccl_sms", "reduced_gpu", "sm_loss_s"]


def nccl_sms(channels: int, min_ctas: int | None = None, max_ctas: int | None = None) -> int:
    """SMs one NCCL collective holds: NCCL's ``channels`` capped at ``max_ctas``, then raised to ``min_ctas``
    (``src/graph/connect.cc``), one CTA (SM) per channel. A ``min_ctas`` above ``max_ctas`` is lowered to it, as
    NCCL does ("minCTAs %d is larger than maxCTAs %d, set both to %d": NVIDIA/nccl ``src/init.cc``
    ``envConfigOverride``).

    Parameters
    ----------
    channels : int
        NCCL's channel count on the fabric (the profile's ``channels``).
    min_ctas, max_ctas : int, optional
        The recipe's ``NCCL_MIN_CTAS`` and ``NCCL_MAX_CTAS`` (None: unset).

    Returns
    -------
    int
    """
    n = int(channels)
    if max_ctas is not None:
        n = min(n, int(max_ctas))
    if min_ctas is not None:
        n = max(n, int(min_ctas) if max_ctas is None else min(int(min_ctas), int(max_ctas)))
    return n


def reduced_gpu(gpu, held: int):
    """``gpu`` with ``held`` of its SMs taken (see the module doc): the kernel model's SMs and peak rates scaled
    to the SMs left, HBM unchanged. ``gpu`` itself when it has no SM count or nothing is held.

    Parameters
    ----------
    gpu : GpuCompute
    held : int
        SMs the communication kernels occupy.

    Returns
    -------
    GpuCompute
    """
    sms = gpu.sms
    if not sms or held <= 0:
        return gpu
    left = max(1, sms - min(int(held), sms - 1))
    km = gpu.kernels
    scale = left / km.sms
    kernels = replace(km, sms=left, peak_flops={p: v * scale for p, v in km.peak_flops.items()})
    return replace(gpu, kernels=kernels)


def sm_loss_s(hidden_s: float, full_s: float, reduced_s: float) -> float:
    """Seconds the compute loses to ``hidden_s`` of communication running beside it: ``hidden x (1 - t / t')``
    with ``t`` (``full_s``) the compute's time on all SMs and ``t'`` (``reduced_s``) on the SMs left.

    Parameters
    ----------
    hidden_s : float
        Seconds of communication overlapped with compute.
    full_s, reduced_s : float
        The overlapped compute's seconds on all SMs and on the SMs the communication leaves.

    Returns
    -------
    float
        Seconds added to the step (0 when nothing is hidden or the compute does not slow).
    """
    if hidden_s <= 0 or reduced_s <= 0 or reduced_s <= full_s:
        return 0.0
    return hidden_s * (1.0 - full_s / reduced_s)
