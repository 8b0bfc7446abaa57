"""The host's launch floor: one thread launching the kernels of several GPUs in turn.

nccl-tests run as ``all_reduce_perf -g N`` drives N GPUs from one process and thread: every call groups N NCCL
calls (ncclGroupStart/End), and the host launches the N GPUs' kernels one after the other. In a back-to-back loop the
GPUs run ahead of the host only while a collective takes longer than the host needs to launch it, so the time per
collective is ``max(GPU time, N x host time per launch)``. NVIDIA (NVIDIA/nccl-tests #333, 2025-07-21) names the cause
of the higher small-message times of such runs: "the CUDA latency overheads of single process jobs". With one GPU
per process (MPI ranks, the recommended way) every host launches one kernel per collective, which the GPU hides.
"""

from __future__ import annotations

from .profiles import Profile

__all__ = ["host_floor_s"]


def host_floor_s(profile: Profile, gpus_per_process: int) -> float:
    """The least time per collective when one host thread launches ``gpus_per_process`` GPUs' kernels in turn.

    Parameters
    ----------
    profile : Profile
        Its ``host_launch_per_gpu_s`` is the host's time per launch.
    gpus_per_process : int
        GPUs one process (thread) drives, as nccl-tests' ``-g``; 1 has no floor (the GPU hides one launch).

    Returns
    -------
    float
        Seconds: ``gpus_per_process x host_launch_per_gpu_s``, or 0 for one GPU per process.
    """
    if gpus_per_process <= 1:
        return 0.0
    return gpus_per_process * profile.host_launch_per_gpu_s
