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
- **The GEMM's launch**: a GEMM's tile shape is chosen for the whole GPU (cuBLAS's heuristics see the device's
  SMs unless ``cublasSetSmCountTarget`` says otherwise) and its tiles run in waves over the SMs left, so a GEMM of
  exactly one wave of the GPU's SMs takes two beside any communication kernel (an H100 GEMM of 132 CTAs beside a
  24-CTA NCCL all-gather "nearly doubles", 80% -> 47% MFU: NVIDIA developer forum, "Compute-Communication Overlap
  Causes Severe GEMM Performance Degradation because of Tail Effect", 2025).
- **Memory traffic**: the communication kernels also move ``bytes_per_byte_moved`` HBM bytes for each byte the
  collective moves (store, read back, the user data: ``topo/data/compute/comm_interference.toml``, NCCL's
  maintainer), taken from the HBM bandwidth the memory-bound kernels and the GEMMs' operand streams see
  (:func:`comm_hbm_Bps`).

Every overlapped collective, the DP/CP NCCL ones and the expert all-to-alls alike, is charged this way
(:mod:`topo.training.step`); the one measured figure it does not reach (DeepEP V1's ~20% GEMM loss at 20 of an
H100's 132 SMs) stays as a floor where it applies (:func:`topo.training.ep_overlap.published_gemm_loss`).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from functools import lru_cache

from ..engine.collectives import busbw_factor
from ..resources import data_dir

__all__ = ["nccl_sms", "nccl_p2p_sms", "reduced_gpu", "sm_loss_s", "comm_hbm_Bps", "moved_Bps", "hbm_bytes_per_byte"]


@lru_cache(maxsize=1)
def hbm_bytes_per_byte() -> float:
    """HBM bytes the communication kernels move per byte the collective moves (``comm_interference.toml``)."""
    data = tomllib.loads((data_dir("compute") / "comm_interference.toml").read_text(encoding="utf-8"))
    return float(data["hbm"]["bytes_per_byte_moved"])


def moved_Bps(collective: str, size_bytes: float, group_size: int, call_s: float) -> float:
    """Bytes a second each GPU of a collective sends (and receives) while it runs: its bus bandwidth,
    nccl-tests' ``size / time x`` :func:`topo.engine.collectives.busbw_factor`; 0 for a call of no time.

    Parameters
    ----------
    collective : str
    size_bytes : float
        One call's nccl-tests size.
    group_size : int
    call_s : float
        One call's seconds.

    Returns
    -------
    float
    """
    if call_s <= 0 or size_bytes <= 0:
        return 0.0
    return size_bytes * busbw_factor(collective, max(1, int(group_size))) / call_s


def comm_hbm_Bps(moved: float) -> float:
    """HBM bandwidth the communication kernels take while they move ``moved`` bytes a second:
    :func:`hbm_bytes_per_byte` x ``moved``.

    Parameters
    ----------
    moved : float
        The collective's bytes a second per GPU (:func:`moved_Bps`).

    Returns
    -------
    float
    """
    return hbm_bytes_per_byte() * max(0.0, moved)


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


MAX_CHANNELS = 64
"""NCCL's ``MAXCHANNELS`` (NVIDIA/nccl ``src/include/device.h``), the default of ``NCCL_MAX_P2P_NCHANNELS``
(``src/graph/paths.cc``) and the bound of ``ncclDevMaxChannelsForArgsBytes`` at the default
``NCCL_WORK_ARGS_BYTES``."""


def nccl_p2p_sms(channels: int, min_ctas: int | None = None, max_ctas: int | None = None) -> int:
    """SMs an all-to-all of NCCL send/recv pairs holds (PyTorch's ``all_to_all_single``, which Megatron-Core's
    ``alltoall`` token dispatcher calls): NCCL's p2p channels, one CTA (SM) each.

    NVIDIA/nccl ``src/graph/paths.cc`` ``ncclTopoComputeP2pChannels`` (v2.28.3-1 f1308997 and master 5067397c, the
    same since v2.21): ``p2pnChannels = pow2Up(max(min(nChannels, NCCL_MAX_P2P_NCHANNELS = 64),
    NCCL_MIN_P2P_NCHANNELS = 1))``, ``nChannels`` the communicator's collective channels (already bounded by
    ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``: :func:`nccl_sms`). Each peer's send and receive is striped over
    ``p2pnChannelsPerPeer`` channels from a base that differs per peer (``src/include/channel.h``
    ``ncclP2pChannelBaseForRound``, ``src/enqueue.cc`` ``ncclP2pChannelForPart``), and the kernel's grid is the
    channels the plan touches (``src/enqueue.cc`` ``ncclLaunchKernel``: ``countOneBits(plan->channelMask)``). An
    NVLink peer takes ``2 x`` its NVLink bandwidth in links channels (``ncclTopoGetNchannels``: 36 through an
    H100's NVSwitch, more than the 16 of ``p2pnChannels``), and across nodes the peers per round times the
    channels per peer are kept at ``p2pnChannels``: an all-to-all over two or more GPUs touches every p2p channel.

    Parameters
    ----------
    channels : int
        NCCL's collective channel count on the fabric (the profile's ``channels``).
    min_ctas, max_ctas : int, optional
        The recipe's ``NCCL_MIN_CTAS`` and ``NCCL_MAX_CTAS`` (None: unset).

    Returns
    -------
    int
    """
    n = max(1, min(nccl_sms(channels, min_ctas, max_ctas), MAX_CHANNELS))
    return min(1 << (n - 1).bit_length(), MAX_CHANNELS)


def reduced_gpu(gpu, held: int, hbm_taken_Bps: float = 0.0):
    """``gpu`` with ``held`` of its SMs and ``hbm_taken_Bps`` of its HBM bandwidth taken (see the module doc):
    the kernel model's SMs and peak rates scaled to the SMs left (its GEMMs' tile shapes still chosen for all of
    them), its HBM bandwidth less the communication's traffic, at most half of it (both streams' requests
    queued, the arbitration shares HBM at worst evenly: an assumption no accuracy row reaches). ``gpu`` itself
    when nothing is taken.

    Parameters
    ----------
    gpu : GpuCompute
    held : int
        SMs the communication kernels occupy.
    hbm_taken_Bps : float
        HBM bandwidth their traffic takes (:func:`comm_hbm_Bps`).

    Returns
    -------
    GpuCompute
    """
    sms = gpu.sms
    held = int(held) if sms else 0
    if held <= 0 and hbm_taken_Bps <= 0:
        return gpu
    km = gpu.kernels
    if held > 0:
        left = max(1, sms - min(held, sms - 1))
        scale = left / km.sms
        km = replace(km, sms=left, launch_sms=km.launch_sms or km.sms,
                     peak_flops={p: v * scale for p, v in km.peak_flops.items()})
    if hbm_taken_Bps > 0:
        km = replace(km, hbm_Bps=km.hbm_Bps - min(hbm_taken_Bps, km.hbm_Bps / 2))
    return replace(gpu, kernels=km)


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
