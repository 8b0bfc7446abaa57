"""The memory per GPU of a region's job as the way it spans the sites shards its state (regions76, section 352's
item 4).

The one-site share's step (:func:`topo.training.step.estimate_step` of ``dp / K`` replicas on one site) shards the
ZeRO state (the optimizer state; ZeRO-2 also the gradients; ZeRO-3 / FSDP also the weights) over the share's data x
context ranks: one distributed-optimizer instance a site. That is what runs where the state's data-parallel group
stays inside a site: the hierarchical reduction (NeMo's multi-DC run sets ``num_distributed_optimizer_instances``
to the sites, NVIDIA/NeMo@aed13ee8d5ada1722e84909e4d185fbba3b1e87e examples/llm/pretrain/multi_datacenter.py;
Megatron-Core shards each instance's buffers over ``intra_distributed_optimizer_instance_group``,
NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/distributed/param_and_grad_buffer.py
lines 383-524), and pipeline stages or an outer synchronisation across the sites (data parallelism inside each).

NCCL's flat cross-DC ring is one communicator a data-parallel group over every site's replicas: Megatron-Core's
default ``num_distributed_optimizer_instances = 1`` (megatron/core/distributed/distributed_data_parallel_config.py
line 34 at d98e8a64), whose one instance spans the whole data x context group (parallel_state.py lines 927-929:
``intra_partial_data_parallel_size = data_parallel_size * context_parallel_size //
num_distributed_optimizer_instances``; distributed_data_parallel.py lines 283-299: each buffer is sharded over
``intra_dp_cp_group``, the whole ``dp_cp`` group with one instance), so each rank keeps ``1 / D`` of the state,
``D`` the job's ranks, ``K`` times less than a site's instance keeps (``K`` sites of equal shares). Hybrid sharding
(``dp_shard`` below ``dp``) shards over its shard group in either form.

So the state follows the form taken: :func:`job_memory` times the share's memory with the job's data-parallel
degree (:func:`topo.training.memory.memory_per_gpu`, the one formula), everything but the sharding the share's
(the same micro-batches and activations; NCCL's, the expert-parallel and NVLS buffers the share's step counted).
The optimizer's step follows it too (regions79): each rank steps its own ``1 / D`` shard
(NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/optimizer/distrib_optimizer.py
``_build_model_and_main_param_groups``: the inner optimizer steps ``shard_fp32_from_float16_groups``, the main
parameters of the rank's own ``param_range`` alone), so :func:`job_optimizer_s` is
the share's ``optimizer`` line over the parameters the job's sharding leaves a GPU
(:func:`topo.training.step.optimizer_params`; the step is linear in them), ``K`` times shorter for ``K`` equal
shares.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from .gpus import gpu_compute
from .memory import MemoryBreakdown, memory_per_gpu
from .parallel import ParallelLayout
from .step import optimizer_params

__all__ = ["JobForm", "job_memory", "job_optimizer_s", "may_shard_over_job", "sharding_text", "state_layout"]

_STATE = {1: "the optimizer state", 2: "the optimizer state and gradients",
          3: "the optimizer state, gradients and weights"}
"""What each ZeRO stage shards over data parallelism (:attr:`~topo.training.parallel.ParallelLayout.zero_stage`)."""


def may_shard_over_job(dp_reduction: str, across: str) -> bool:
    """Whether a region's job may take NCCL's flat cross-DC ring, whose one optimizer instance shards the ZeRO state
    over the job's data-parallel ranks: data parallelism across the sites (``across`` ``dp``) with the region's
    ``nccl.dp_reduction`` not fixed to the hierarchical form (``flat_ring``, or ``auto`` where the ring may be the
    faster; see the module doc).

    Parameters
    ----------
    dp_reduction : str
        The region's ``nccl.dp_reduction`` (``auto``, ``hierarchical`` or ``flat_ring``).
    across : str
        The way the job spans the sites (``dp``, ``pp`` or ``outer``).

    Returns
    -------
    bool
    """
    return across == "dp" and dp_reduction != "hierarchical"


def state_layout(lay: ParallelLayout, state_dp: int) -> ParallelLayout:
    """``lay`` (a site's share) with its ZeRO state sharded over ``state_dp`` data-parallel ranks: its ``dp`` those,
    its global batch scaled with it so each replica keeps the same micro-batches (the layout :func:`job_memory` and
    a region search's memory check read; ``lay`` itself where ``state_dp`` is its own ``dp``).

    Parameters
    ----------
    lay : ParallelLayout
    state_dp : int
        The data-parallel ranks the state shards over (the job's under the flat cross-DC ring).

    Returns
    -------
    ParallelLayout
    """
    if state_dp == lay.dp:
        return lay
    return lay.model_copy(update={"dp": state_dp, "global_batch": lay.global_batch * state_dp // lay.dp})


@dataclass(frozen=True)
class JobForm:
    """How a search judges a layout's memory where its job may shard the ZeRO state wider than the layout's own
    ``dp`` (a region's flat cross-DC ring: over the job's replicas, regions77; see the module doc).

    ``state_dp(lay)``: the data-parallel ranks the state of ``lay`` (as the search's walk gives it: the job's where
    the search splits it into shares) may shard over, at or above its own ``dp``; the memory check reads the share
    with its state so sharded (:func:`state_layout`), the least the layout can hold, so none that could fit is
    dropped. ``fits_by(step, steps)`` (as a search's ``rank_by`` takes them): whether a layout whose step does not
    fit as one fabric shards it fits in the form its job takes (a region's:
    :attr:`~topo.training.multisite.MultisiteStep.fits`). ``said``: how that sharding is taken, in words, after
    "its ZeRO state sharded over N data-parallel ranks" where a search finds none that fits (its closest's
    memory so counted is the least it could hold)."""

    state_dp: Callable
    fits_by: Callable
    said: str = ""


def job_memory(fabric, model, job: ParallelLayout, share_memory: MemoryBreakdown) -> MemoryBreakdown:
    """The memory per GPU of one site's share with the ZeRO state sharded over the job's replicas (one optimizer
    instance over every site, see the module doc).

    Parameters
    ----------
    fabric : Fabric
        The site's fabric (its GPU's capacity and generation, its NVLink domain).
    model : ModelSpec
    job : ParallelLayout
        The job's layout as placed on the site (a site's share with ``dp`` every site's replicas and the global batch
        to match: the same micro-batches).
    share_memory : MemoryBreakdown
        The share's step's memory (:attr:`topo.training.result.StepResult.memory`): its NCCL, expert-parallel and
        NVLS buffers are kept.

    Returns
    -------
    MemoryBreakdown
    """
    spec = fabric.spec
    gpu = gpu_compute(spec.gpu, host_cpu=spec.host_cpu[0])
    mem = memory_per_gpu(model, job, gpu.memory_bytes, generation=gpu.generation,
                         gpus_per_domain=spec.gpus_per_domain)
    return replace(mem, nccl_bytes=share_memory.nccl_bytes, ep_buffers_bytes=share_memory.ep_buffers_bytes,
                   nvls_bytes=share_memory.nvls_bytes)


def job_optimizer_s(model, share: ParallelLayout, share_optimizer_s: float, job_dp: int) -> float:
    """The optimizer step of a site's share with its state sharded over the job's ``job_dp`` replicas (one
    optimizer instance over every site, see the module doc): the share's step's ``share_optimizer_s`` times the
    parameters a GPU then steps over those it steps in the share (:func:`topo.training.step.optimizer_params`);
    the share's own where the sharding is its (hybrid sharding's shard group, ZeRO-0's replicas).

    Parameters
    ----------
    model : ModelSpec
    share : ParallelLayout
        The site's share (its ``dp`` the site's replicas).
    share_optimizer_s : float
        The share's step's ``optimizer`` line.
    job_dp : int
        Every site's replicas.

    Returns
    -------
    float
    """
    own = optimizer_params(model, share)
    return share_optimizer_s * optimizer_params(model, state_layout(share, job_dp)) / own if own else 0.0


def sharding_text(lay: ParallelLayout, where: str, experts: bool = False) -> str:
    """What ``lay`` (the layout whose data-parallel degree shards the state) shards, over how many ranks, and
    ``where`` (which optimizer instance and why), in words.

    Parameters
    ----------
    lay : ParallelLayout
    where : str
    experts : bool
        The model has routed experts (their replicas said too).

    Returns
    -------
    str
    """
    z = lay.zero_stage
    if z == 0:
        return "no state sharded over data parallelism (dp_sharding none)"
    dense, expert = lay.shard_divisors(1)
    experts = f", the experts' over {expert:,} replicas" if experts else ""
    state = _STATE[min(z, 3)]
    if lay.dp_outer_sharding == "optim" and z >= 3:  # regions83: the optimizer wider than the weights' shard group
        inner, inner_e = lay.shard_divisors(3)
        state = (f"the optimizer state sharded over {dense:,} data x context ranks{experts}, the gradients and "
                 f"weights over {inner:,}")
        experts = f", the experts' over {inner_e:,}" if experts else ""
        return f"{state}{experts} ({where})"
    return f"{state} sharded over {dense:,} data x context ranks{experts} ({where})"
