r"""How a training job's gradient reduction crosses the sites (the ``dp`` way of
:func:`topo.training.multisite.estimate_across_sites`): two forms, the faster taken unless the region's
``nccl.dp_reduction`` names one.

- ``hierarchical`` (NeMo's multi-DC run, NVIDIA/NeMo@aed13ee8d5ada1722e84909e4d185fbba3b1e87e
  examples/llm/pretrain/multi_datacenter.py: ``num_distributed_optimizer_instances=2``, ``grad_reduce_in_fp32=True``;
  Megatron-Core's distributed-optimizer instances, one a site): each GPU of a site's share reduce-scatters the
  gradients inside its instance, all-reduces its own shard with the other instances through its own NIC, and
  gathers the updated parameters inside its instance again (NVIDIA/Megatron-LM core_v0.11.0
  megatron/core/distributed/param_and_grad_buffer.py ``start_grad_sync`` lines 333-353: "With multiple DistOpt
  instances, we need to all-reduce across instances", on ``bucket.grad_data``, the gradient-reduction dtype;
  ``start_param_sync`` lines 191-205: the all-gather over ``intra_distributed_optimizer_instance_group``; the same
  at d98e8a64, lines 383-524). So only the gradients cross, ``2(K-1)/K`` of one replica's across each site boundary
  of the ring of sites, ``2(K-1)`` cross-site steps; the parameters' gather stays inside each site. Without a
  distributed optimizer (DDP's all-reduce) and with hybrid sharding (shards replicated across the sites) the same
  all-reduce of the site's reduced gradients crosses.
- ``flat_ring`` (one NCCL communicator a data-parallel group, over all ``D`` replicas of every site: one
  distributed-optimizer instance over the job, Megatron-Core's default ``num_distributed_optimizer_instances = 1``;
  NVIDIA/nccl branch ``cross-dc`` commit 18a07eeebe485ae00755615ced44739d20970560, PR #1659, src/graph/connect.cc
  ``connectRings`` lines 143-158: ring channel ``c`` leaves each DC from one node and enters the next at one node):
  each of the step's data-parallel collectives runs on the ring of ``D`` ranks and carries, across each boundary,
  ``2(D-1)/D`` of its bytes for an all-reduce and ``(D-1)/D`` for a reduce-scatter or an all-gather (a ring moves
  one ``1/D`` chunk a step, ``D - 1`` steps, twice for the all-reduce). So with the distributed optimizer (ZeRO-1/2)
  the gradients' reduce-scatter at the gradient-reduction dtype and the parameters' all-gather at the gather dtype
  cross, ``(D-1)/D (grad + param)``; with DDP the all-reduce, ``2(D-1)/D grad``; with FSDP / ZeRO-3 every unit's
  gathers and reduce-scatters, as often as the one-site step runs them (:class:`ReplicaBytes`). With hybrid sharding
  (``dp_shard`` below ``dp``: PyTorch's HSDP, Megatron's hybrid FSDP) the shard group's reduce-scatter and gather stay
  inside it and the ring that crosses is the replicate group's all-reduce of each rank's shard
  (:func:`hybrid_ring_shard`): ``D / dp_shard`` ranks, ``dp_shard`` times the groups, so ``2(D_r-1)/D_r grad``
  across a boundary in ``2(D_r-1)`` steps, ``D_r = D / dp_shard`` (the one-site step's ``dpr`` all-reduce,
  :func:`topo.training.step.step_traffic`; pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471
  torch/distributed/fsdp/_runtime_utils.py ``_post_backward_hook``: the shard group's reduce-scatter through the
  communication hook, then for ``HYBRID_SHARD`` ``default_hooks.allreduce_hook(state=state._inter_node_state,
  grad=new_sharded_grad)``, the replicate group's all-reduce of the shard). ``2(D-1)`` steps
  each wait for the cross-site hop (the estimator's flat ring, :func:`topo.engine.algorithms.across_sites.flat_ring`).
  Each group's ``c`` channels cross through a rank each (``NCCL_SCATTER_XDC=1``, ``channelToNode`` lines 94-105:
  each channel from another node; with the region's ``nccl.scatter_xdc = false`` every channel of a group from the
  same node, the group's one rank there: one NIC a group), so ``G x c`` NICs at most (``G`` without scattering), at
  most the share's; and each channel has one NCCL_BUFFSIZE buffer in flight a round trip
  (:func:`topo.engine.algorithms.across_sites.window_s`, ``G x c`` channels).

Megatron-FSDP's hybrid sharding with an optimizer-sharded outer group (layout ``dp_outer_sharding = "optim"``,
regions83; NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/distributed/fsdp/src/megatron_fsdp/): the shard group's per-unit gathers and reduce-scatters stay
inside the sites every micro-batch; what crosses is the outer (replica) group's, once a step: on the last
micro-batch's backward (``megatron_fsdp.py`` lines 765-785, 883-898: ``outer_fsdp_group_grad_reduce`` only when
``is_last_microbatch``) each unit's inner gradient shard reduce-scattered over ``outer_fsdp_group`` on its own stream
after the unit's inner reduce-scatter (``param_and_grad_buffer.py`` lines 4134-4139, 4183-4208:
``reduce_scatter_tensor``, where ``no_shard`` all-reduces), and before the first micro-batch's forward (lines 482-490
of ``megatron_fsdp.py``: ``microbatch_count == 0``) each unit's updated weight shard all-gathered back into its inner
shard, ``inner_dp_wbuf.data_size // outer_fsdp_group.size()`` a rank, the unit's gather stream waiting for it
(``param_and_grad_buffer.py`` lines 4543-4565). So one replica's crossing is its gradients once at the
gradient-reduction dtype and its weights once at the gather dtype (:attr:`ReplicaBytes.outer_sharded`): the flat ring
over the replicate group carries ``(D_r-1)/D_r`` of both across a boundary, and the hierarchical form (the
instances a site) ``(K-1)/K`` of both in ``2(K-1)`` crossings, its gather in the next step's first forward; the
optimizer state over every data-parallel rank (lines 2423-2425) in either form, so the gradient norm sums shards
held across the sites and crosses in both.

The bytes are the one-site step's (:func:`topo.training.step.step_traffic`'s data-parallel collectives, read by
:func:`topo.training.multisite.replica_dp_bytes`): the in-site part moves what the one-site step's reduction moves (a
ring of ``D`` ranks moves ``2(D-1)/D`` of a shard per rank inside a site, the one-site reduction ``2(d-1)/d``: equal
to within ``1/d``), so the two forms differ in the crossing alone.

The gradient norm (Megatron's gradient clipping, NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
megatron/core/optimizer/optimizer.py ``clip_grad_norm`` lines 374-388, run when ``clip_grad > 0`` (line 830; default
1.0, optimizer_config.py line 374); clip_grads.py ``get_grad_norm_fp32`` lines 55-139: one FP32 ``all_reduce`` of
the squared norm over the optimizer's ``grad_stats_parallel_group``, then the clip, before the optimizer's step) is
summed over the ranks that hold distinct gradients. With the distributed optimizer the group is
``intra_dist_opt_group`` (optimizer/__init__.py lines 671-674: "weight gradients are all-reduced across optimizer
instances, so each instance has the duplicated weight gradients, need to reduce gradient stats inside each
instance"), one instance's ranks (parallel_state.py lines 1562-1576): every rank of the job with one instance (the
flat ring), one site's with one instance a site (the hierarchical form). Megatron-FSDP's is its data-parallel group
(lines 675-679); DDP's (``Float16OptimizerWithFloat16Params``) the model-parallel group (lines 680-682), inside a
replica. So the flat ring of a sharded optimizer (its gradients reduce-scattered over the job) pays one small
all-reduce across the sites a step (:data:`GRAD_NORM_BYTES`,
:func:`~topo.engine.region_estimate.small_all_reduce_dci_s`), exposed: it follows the last gradient's reduction
and the optimizer's step waits for it; the hierarchical form and DDP pay none across.

The flat ring's crossing assumes each data-parallel group has one rank a node (TP x CP filling a node): where a
placement puts several of a group's ranks on one node (tp 1 or 4 on 8-GPU servers), NCCL's ring links them inside
the node and ``channelToNode`` picks nodes, not ranks, so which of their NICs a channel leaves by is not modelled.
There the flat ring is not priced: ``auto`` takes the hierarchical reduction and says why, and
``nccl.dp_reduction = "flat_ring"`` is refused in one line (:func:`pick_dp_crossing`; regpp73's Left 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.algorithms.across_sites import Phase, window_s
from ..engine.placement import distinct_per_row
from ..engine.region_estimate import dci_phase, nccl_buffer_bytes, small_all_reduce_dci_s
from ..errors import TopoError
from ..fabric.region import Region

__all__ = ["DP_REDUCTIONS", "GRAD_NORM_BYTES", "LOSS_BYTES", "DpCrossing", "ReplicaBytes", "dp_crossings",
           "dp_ranks_per_node", "fastest_dp_crossing", "hybrid_ring_shard", "pick_dp_crossing"]

GRAD_NORM_BYTES = 4
"""The gradient norm's all-reduced buffer: one FP32 element (``total_norm = torch.zeros(1, dtype=torch.float)``,
NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/optimizer/clip_grads.py line 108)."""

LOSS_BYTES = 8
"""The logged loss's all-reduced buffer a step: the loss summed over the micro-batches and their token count, two
elements promoted to FP32 (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 pretrain_gpt.py lines
254-259: ``torch.cat([loss.clone().detach().view(1), num_tokens.view(1)])`` of an FP32 loss and an int32 count;
megatron/training/training.py lines 3232-3242: ``torch.vstack(val).sum(dim=0)`` then
``torch.distributed.all_reduce(val, group=dp_cp_group)`` on the last pipeline stage, after the optimizer's step,
line 3165). One key, ``lm loss``, for a GPT model."""

DP_REDUCTIONS = ("hierarchical", "flat_ring")
"""The forms a region's ``nccl.dp_reduction`` names (besides ``auto``, the faster)."""


@dataclass(frozen=True)
class ReplicaBytes:
    """One replica's data-parallel bytes a step, by the collective that moves them in the one-site step
    (:func:`topo.training.step.step_traffic`), each summed over the replica's GPUs and the step's calls.

    ``all_reduce_bytes``: gradients all-reduced (DDP; hybrid sharding's shards, whose gathers stay in their shard
    group), at the gradient-reduction dtype; ``reduce_scatter_bytes``: gradients reduce-scattered over the whole
    data-parallel group (the distributed optimizer, FSDP), at the same dtype; ``all_gather_bytes``: parameters
    all-gathered over it, at the gather dtype (BF16, or FP8 with ``fp8_param_gather``); ``forward_gather_share``:
    the share of that gather that runs in a forward (:func:`topo.training.step.forward_gather_share`: all of the
    distributed optimizer's, ZeRO-1/2's updated parameters before the next step's forward; of FSDP's per-unit
    gathers the forward's, the rest before each backward); ``outer_sharded``: the bytes are Megatron-FSDP's
    optimizer-sharded outer group's (``dp_outer_sharding = "optim"``), its reduce-scatter of the gradient shards and
    all-gather of the updated weight shards across the replicas once a step, so the hierarchical form crosses them
    too (see the module doc)."""

    all_reduce_bytes: float
    reduce_scatter_bytes: float = 0.0
    all_gather_bytes: float = 0.0
    forward_gather_share: float = 0.0  # the gather's share that runs in a forward (regions76/79)
    outer_sharded: bool = False  # regions83: Megatron-FSDP's optimizer-sharded outer group (see the module doc)

    @property
    def gradient_bytes(self) -> float:
        """The gradients the step reduces, all-reduced or reduce-scattered: the hierarchical form's ``V``."""
        return self.all_reduce_bytes + self.reduce_scatter_bytes

    def ring_crossing_bytes(self, ranks: int) -> float:
        """Bytes a ring of ``ranks`` over every replica carries across one site boundary: ``2(n-1)/n`` of the
        all-reduced, ``(n-1)/n`` of the reduce-scattered and the gathered."""
        f = (ranks - 1) / ranks
        return 2 * f * self.all_reduce_bytes + f * (self.reduce_scatter_bytes + self.all_gather_bytes)


@dataclass(frozen=True)
class DpCrossing:
    """One form's cross-site phase: its ``phase`` and the bytes on every directed span (``loads``), with what the
    need for 95% re-prices (``nbytes`` across each boundary, ``steps``, ``channels``: the NICs a site's bytes may
    cross through at most, None every NIC of the share; ``floor_s``: a bandwidth time no span's capacity shortens,
    the ring's window; ``norm_s``: the gradient norm's all-reduce across the sites after the phase, exposed, see the
    module doc; ``gather_bytes`` and ``gather_steps``: the part of ``nbytes`` and ``steps`` that gathers parameters
    in a forward, :attr:`gather_phase`)."""

    name: str
    phase: Phase
    loads: np.ndarray
    nbytes: float
    steps: int
    channels: int | None
    floor_s: float
    norm_s: float = 0.0
    gather_bytes: float = 0.0
    gather_steps: int = 0
    passes: int = 1
    fits: bool | None = None  # regions81: the job fits in GPU memory in this form (None: not asked)
    step_s: float | None = None  # regions82: the job's step in this form (None: not asked)

    @property
    def gather_phase(self) -> Phase:
        """The part of :attr:`phase` that gathers parameters in a forward (the flat ring's: a distributed
        optimizer's updated parameters before the next step's forward, FSDP's per-unit forward gathers;
        ``gather_bytes`` across each boundary in ``gather_steps`` steps, its share of the phase's latency and
        bandwidth time); zero where none crosses."""
        if not self.gather_bytes:
            return Phase(0.0, 0.0, self.phase.bound)
        return Phase(self.phase.latency_s * self.gather_steps / self.steps,
                     self.phase.bandwidth_s * self.gather_bytes / self.nbytes, self.phase.bound)

    @property
    def time_s(self) -> float:
        """The form's cross-site seconds a step: its phase and the gradient norm's crossing."""
        return self.phase.time_s + self.norm_s

    @property
    def paid_s(self) -> float:
        """What the job pays for this form, the figure ``auto`` compares: its step (:attr:`step_s`, regions82: the
        crossing behind its windows, the optimizer step and gathers the form sets), else its crossing's seconds."""
        return self.time_s if self.step_s is None else self.step_s


def dp_crossings(region: Region, V: ReplicaBytes, replicas: int, replica_gpus: int, channels: int,
                 site_gpus=None, ranks_per_node: int = 1, passes: int = 1) -> dict[str, DpCrossing]:
    """Both forms of the gradients' crossing (see the module doc), by name; the hierarchical alone where a
    data-parallel group has several ranks on one node (``ranks_per_node`` above 1: the flat ring not priced). Each
    form's bytes cross in ``passes`` collectives a step, each paying its ring's latency (``steps`` hops) once
    (regions81: ZeRO-3 / FSDP's in every micro-batch, :func:`topo.training.multisite.dp_passes`).

    Parameters
    ----------
    region : Region
    V : ReplicaBytes
        One replica's data-parallel bytes a step, by collective.
    replicas : int
        ``D``, the job's replicas over every site.
    replica_gpus : int
        ``G``, a replica's GPUs (its data-parallel groups).
    channels : int
        NCCL's channels (:func:`~topo.engine.region_estimate.region_channels`).
    site_gpus : sequence of int, optional
        Each site's share's GPUs, whose NICs carry its bytes (None: every GPU of each site).
    ranks_per_node : int, optional
        The most ranks of one data-parallel group on one node (:func:`dp_ranks_per_node`).
    passes : int, optional
        The collectives a step the bytes split among (1: one).

    Returns
    -------
    dict of str to DpCrossing
    """
    K = region.num_sites
    a = np.arange(K)
    b = (a + 1) % K
    # regions83: under the optimizer-sharded outer group the instances' reduce-scatter and gather cross, not an
    # all-reduce, and the gradient norm sums shards held across the sites
    X = V.ring_crossing_bytes(K) if V.outer_sharded else 2 * (K - 1) / K * V.gradient_bytes
    ph, loads = dci_phase(region, a, b, X, 2 * (K - 1) * passes, site_gpus=site_gpus)
    norm = small_all_reduce_dci_s(region, GRAD_NORM_BYTES, channels, site_gpus) if V.reduce_scatter_bytes else 0.0
    h_gather = (K - 1) / K * V.all_gather_bytes if V.outer_sharded else 0.0
    out = {"hierarchical": DpCrossing("hierarchical", ph, loads, X, 2 * (K - 1), None, 0.0,
                                      norm if V.outer_sharded else 0.0, h_gather, (K - 1) if h_gather else 0,
                                      passes)}
    if ranks_per_node > 1:
        return out
    D = replicas
    Xr = V.ring_crossing_bytes(D)
    nics = replica_gpus * (channels if region.spec.nccl.scatter_xdc else 1)
    steps = 2 * (D - 1)
    ph, loads = dci_phase(region, a, b, Xr, steps * passes, nics, site_gpus)
    hop = ph.latency_s / (steps * passes) if steps else 0.0
    win = window_s(Xr, 2 * hop, replica_gpus * channels, nccl_buffer_bytes()) if Xr else 0.0
    bound = ph.bound if ph.bandwidth_s >= win else f"window:{replica_gpus * channels} channels"
    gather = (D - 1) / D * V.all_gather_bytes * V.forward_gather_share
    out["flat_ring"] = DpCrossing("flat_ring", Phase(ph.latency_s, max(ph.bandwidth_s, win), bound), loads, Xr,
                                  steps, nics, win, norm, gather, (D - 1) if gather else 0, passes)
    return out


def hybrid_ring_shard(lay) -> int:
    """The ranks of a data-parallel group's shard group where the dense weights are hybrid-sharded (``dp_shard``
    below ``dp``), else 1: the flat ring then runs over the replicate group, ``D / dp_shard`` of the job's ``D``
    ranks, in ``dp_shard`` times the groups (see the module doc).

    Parameters
    ----------
    lay : ParallelLayout
        The whole job's layout.

    Returns
    -------
    int
    """
    return lay.dp_shard_size if lay.dp_shard_size < lay.dp else 1


def pick_dp_crossing(region: Region, forms: dict[str, DpCrossing]) -> DpCrossing:
    """The form the region's ``nccl.dp_reduction`` names, or (``auto``) the faster of those in which the job fits in
    GPU memory (:func:`fastest_dp_crossing`: the job's step in each form where known; :attr:`DpCrossing.fits`; every
    form where none does; the hierarchical among equals). regions81: the
    flat ring shards the ZeRO state over the job's replicas and the hierarchical form over one site's, so a job may
    fit in the slower form alone; a job that does not fit does not run, whatever its speed.

    Parameters
    ----------
    region : Region
    forms : dict of str to DpCrossing
        :func:`dp_crossings`'.

    Returns
    -------
    DpCrossing
    """
    want = region.spec.nccl.dp_reduction
    if want not in ("auto", *forms):
        raise TopoError(f"{want!r}: NCCL's flat cross-DC ring is priced where each data-parallel "
                        f"group has one rank a node (its crossings leave by one rank's NICs a node), and this placement "
                        f"puts several of a group's ranks on one node; allowed here: hierarchical or auto (or a tp x cp "
                        f"that fills a node)", key="nccl.dp_reduction")
    if want != "auto":
        return forms[want]
    fitting = {n: f for n, f in forms.items() if f.fits is not False}
    return fastest_dp_crossing(fitting or forms)


def fastest_dp_crossing(forms: dict[str, DpCrossing]) -> DpCrossing:
    """The form the job steps fastest in (:attr:`DpCrossing.paid_s`: its step where known, regions82; before, the
    crossings' own seconds, which missed what a form changes around its crossing: the flat ring's optimizer over the
    job's shard, its gathers behind a forward), the hierarchical among equals (the first).

    Parameters
    ----------
    forms : dict of str to DpCrossing

    Returns
    -------
    DpCrossing
    """
    return min(forms.values(), key=lambda f: f.paid_s)


def dp_ranks_per_node(groups: np.ndarray, gpus_per_node: int) -> int:
    """The most ranks any data-parallel group has on one node: its size over the nodes it spans, at the widest
    crowding (1 where every group has one rank a node).

    Parameters
    ----------
    groups : numpy.ndarray
        ``[groups, size]`` GPU ids of the data-parallel groups (:meth:`topo.training.mapping.Mapping.groups`).
    gpus_per_node : int
        GPUs a server holds.

    Returns
    -------
    int

    >>> dp_ranks_per_node(np.array([[0, 4, 8, 12]]), 8), dp_ranks_per_node(np.array([[0, 8, 16]]), 8)
    (2, 1)
    """
    g = np.asarray(groups)
    return int(np.max(-(-g.shape[1] // distinct_per_row(g // gpus_per_node))))
