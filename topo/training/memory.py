"""Memory per GPU of a training job: weights, gradients, optimizer state, activations, on every pipeline stage.

Model state (Rajbhandari et al. 2020, ZeRO): ``weight_bytes`` + ``grad_bytes`` + ``optimizer_bytes_per_param`` per
parameter; the default is Megatron-LM's bf16 mixed precision: bf16 weights (2), fp32 gradients (``main_grad``,
4) and fp32 main weights and two Adam moments (12), 18 bytes per parameter. The distributed optimizer (ZeRO-1)
shards the optimizer over the data x context parallel ranks (Megatron shards over its ``dp-cp`` group); ZeRO-2
and FSDP's SHARD_GRAD_OP also the gradients; ZeRO-3 / FSDP also the weights, plus the layers gathered at a time
(the one computing and the one prefetched: two units of the stage, :func:`gathered_unit_bytes`; the whole stage
when ``fsdp_reshard_after_forward`` is false keeps them from forward to backward), at the gather's bytes
(``gather_bytes``, default ``weight_bytes``). FSDP2 synced once a step under PyTorch's pipelining
(``fsdp_pipeline_sync = "step"``, torchtitan) holds the stage's gathered weights through the step and its gradients
unsharded, accumulated in the reduce dtype (``grad_reduce_bytes``, the experts' ``expert_grad_reduce_bytes``:
``FSDPParam.to_accumulated_grad_if_needed``, pytorch/pytorch@010ae4a8
``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``) until the reduce-scatter after the last backward, where
the sharded gradient is made: those count in place of the sharded gradients. MaxText (a JAX mesh, :data:`.jax_mesh.MAXTEXT_STATE`) keeps 4 + 4 + 8:
fp32 weights that are their own master copy, fp32 gradients, two fp32 Adam moments, no resident bf16 copy; the
bf16 copy of a layer it gathers is one of those transient units. With ``fp8_param_gather`` (FP8, ZeRO-1/2) the
layers' weights are held in FP8 with no BF16 copy (:func:`.fp8_params.fp8_param_bytes`: the rowwise byte and,
on Hopper or for block-scaled recipes, the column-wise copy Transformer Engine keeps), what is not a linear's
weight (the embedding, the output layer, the norms, an MoE router: :func:`bf16_kept_params`) at ``weight_bytes``;
MXFP8's BF16 gather buffer is the gradient buffer (Megatron-Core's ``reuse_grad_buf_for_mxfp8_param_ag``), so it
adds nothing. A GPU holds
``1 / tp`` of its stage's dense weights and ``1 / (ep x etp)`` of its experts; experts shard over their own
replicas (``edp``).

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", sec. 4,
Table 2), bytes per layer per micro-batch of ``b`` sequences of ``s`` tokens, 16-bit: with tensor and sequence
parallelism ``s b h (34 + 5 a s / h) / t``; selective recomputation drops the ``5 a s / h`` (attention scores)
term, as does fused (flash) attention; full recomputation keeps only the layer's input, ``2 s b h / t``; without
sequence parallelism the 10 of the 34 held by norms and dropouts are not divided by t. The 34 is the GPT layer
taken apart per block so other shapes follow: attention ``2 + 2 + 4 kv d / h + 2 + 1`` (input, Q, K and V, the
output projection's input, a dropout mask: 11 for MHA), MLP ``2 + 2 k f / h + 1`` (input, ``k`` f-wide
intermediates, mask: 19 for GeLU at f = 4h), two norms 4 (2 per block); no dropout: no masks, and ``2 a s / h``
of scores instead of 5; under FP8 / FP4 a linear layer's saved input is its module's quantised copy (1 byte per tensor,
0.5625 NVFP4, 2 for a module ``module_recipes`` keeps in BF16 or in a layer kept in BF16:
:func:`block_activation_bytes`). An MoE block stores its MLP part once per routed and shared expert a token visits plus
the permuted copies of its input; a Mamba-2 block its in_proj output, scan output and norm output (the
convolution's output is recomputed in the backward), its in_proj and out_proj inputs as those linears' copies.
Per-module recomputation (``recompute_modules``) keeps only the module's input; full recomputation of
``recompute_num_layers`` layers keeps their inputs. Context parallelism divides ``s``.

In flight: stage ``i`` of ``p`` holds ``p - i`` micro-batches under 1F1B; interleaved with ``v`` chunks per GPU
it holds ``2 (p - i - 1) + (v - 1) g + 1`` chunk-micro-batches (Megatron-Core's warm-up count plus the one
running, :meth:`.ParallelLayout.warmup_chunks`; ``g`` = ``microbatch_group_size_per_vp_stage``, default ``p``,
where the first stage's is Korthikanti's ``L (1 + (p - 1)/(p v))``), never more than ``m v``. The
last stage also holds the fp32 logits of one micro-batch, ``4 s b V / t``. The reported breakdown is the stage
that needs the most.

Activation offloading (``activation_offload_layers`` = N, Megatron-Core's ``cpu_offloading_num_layers``, pp = 1
only): the first N layers' saved activations go to host memory as the next layer computes and come back one layer
ahead of their backward, so of those N layers only one (the largest) counts, the layer in transit (Transformer
Engine's double-buffered offload handler). Per-module offloading (``offload_modules``, Megatron-Core's
``fine_grained_activation_offloading``): each offloaded module's saved tensors leave every block
(:func:`block_offload_bytes`), but one block's, the group of each module Megatron keeps on the GPU so the first
reload does not stall (``post_warmup_callback``'s offload margin), counted once per micro-batch as the part in
transit. Gradients: Megatron-Core allocates its gradient buffer in fp32 only
with ``grad_reduce_in_fp32``, otherwise in the parameters' dtype (``DistributedDataParallel``:
``grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype``): ``grad_bytes`` 2 for NeMo's and
Megatron-Bridge's recipes, which turn it off.

Meta's Llama 3 405B layout (tp 8, pp 16, dp 64, 8K, no recomputation; arXiv 2407.21783 sec. 3.3.2) has one unit
per chunk: taking one layer from the first stage leaves "the first model chunk on the first stage [with] only the
embedding", so a chunk held one layer, and the 126 layers, the embedding and the loss make V = 8 chunks on each of
16 ranks (``E|(t|)*126L``). Its second stage then holds 141 one-layer chunk-micro-batches (0.53 GB each): 82.3 GB
(83.4 GB with the process's own, below) of an H100's 85.5 GB. Read with V = 4 (77 two-layer chunks) it would need 89.2 GB. No chunk's output is counted:
Megatron-Core frees its data once sent (``deallocate_output_tensor``, NVIDIA/Megatron-LM@d98e8a64
``pipeline_parallel/schedules.py`` line 171, on in Megatron-LM's and NeMo's configs), as Meta frees "the input
and output tensors of each pipeline stage".

Besides its tensors a training process holds the CUDA context, NCCL's communicator setup and PyTorch's cuBLAS
workspace (``topo/data/compute/memory_reserve.toml``, :func:`process_reserve_bytes`, each with its source): every
layout's total adds them (``reserved_bytes``), so a layout that fills the GPU to its last gigabyte does not fit.
So do NCCL's channel buffers of the communicators the layout's step uses (``nccl_bytes``,
:func:`.nccl_buffers.nccl_buffer_bytes`: 12 MiB per channel and peer, by NVLink domain), and the flex
dispatcher's DeepEP or HybridEP buffer (``ep_buffers_bytes``, :func:`.ep_buffers.ep_buffer_bytes`). NCCL's NVLS
buffers (``nvls_bytes``, :func:`.nvls_buffers.step_nvls_bytes`) depend on the algorithm the step's collectives run:
:func:`.step.estimate_step` adds them; this module's figure leaves them at 0.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from ..resources import data_dir
from ..units import whole_bytes
from .parallel import ParallelLayout, divided
from .fp8_params import fp8_param_bytes, kept_in_fp8
from .ep_buffers import ep_buffer_bytes
from .nccl_buffers import nccl_buffer_bytes
from .model import BLOCK_KINDS, Block, ModelSpec
from .activation_bytes import block_activation_bytes, block_offload_bytes, fully_recomputed
from .operators import END_UNITS, bf16_layers, pipeline_units, rank_stages
from .unit_params import unit_bf16_params, unit_params

__all__ = ["ACTIVATION_PARTS", "MemoryBreakdown", "memory_per_gpu", "whole_parts", "fragmentation_margin_bytes", "activation_bytes_per_layer", "params_per_gpu",
           "stage_params", "units_holding", "gathered_unit_bytes", "block_activation_bytes", "block_offload_bytes",
           "bf16_kept_params",
           "state_convention", "process_reserve_bytes"]


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU on the stage that needs the most, and whether they fit."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float
    buffers_bytes: float = 0.0  # gathered FSDP units, communication buffers
    stage: int = 0
    reserved_bytes: float = 0.0  # the process's own: CUDA context, NCCL setup, cuBLAS workspace
    nccl_bytes: float = 0.0  # NCCL's channel buffers of the communicators a step uses (.nccl_buffers)
    ep_buffers_bytes: float = 0.0  # the flex dispatcher's DeepEP / HybridEP buffer (.ep_buffers)
    nvls_bytes: float = 0.0  # NCCL's NVLS buffers of the communicators whose collectives run NVLS (.nvls_buffers)
    activations_by_kind_bytes: dict = field(default_factory=dict)
    """``activations_bytes`` by what holds them (:data:`ACTIVATION_PARTS`; the parts present): one micro-batch's
    layers of each kind, the logits, and the pipeline's further micro-batches in flight; they sum to the total."""

    @property
    def total_bytes(self) -> float:
        return _total(self.weights_bytes, self.gradients_bytes, self.optimizer_bytes, self.activations_bytes,
                      self.buffers_bytes, self.reserved_bytes + self.nccl_bytes + self.ep_buffers_bytes + self.nvls_bytes)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def short_bytes(self) -> float:
        """How much more memory the layout needs than the GPU has (0 when it fits)."""
        return max(0.0, self.total_bytes - self.capacity_bytes)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(total_bytes=self.total_bytes, fits=self.fits, short_bytes=self.short_bytes)
        d = whole_bytes(d)
        d["activations_by_kind_bytes"] = whole_parts(self.activations_by_kind_bytes, d["activations_bytes"])
        return d


def whole_parts(parts: dict, total: int) -> dict:
    """``parts`` in whole bytes that sum to the whole ``total``: each rounded, the last given the rest (a JSON
    document's activations by kind add up to its ``activations_bytes``, to the byte).

    Parameters
    ----------
    parts : dict
        Name -> bytes (float), summing to ``total`` but for rounding.
    total : int
        Their sum, whole.

    Returns
    -------
    dict

    >>> whole_parts({"a": 1.4, "b": 1.4}, 3)
    {'a': 1, 'b': 2}
    """
    out = {k: round(v) for k, v in parts.items()}
    if out:
        last = list(out)[-1]
        out[last] = total - sum(v for k, v in out.items() if k != last)
    return out


@lru_cache(maxsize=None)
def process_reserve_bytes() -> float:
    """Bytes a training process holds on its GPU besides its tensors: the sum of ``memory_reserve.toml``'s items
    (the CUDA context and NCCL's communicator setup, NVIDIA/nccl#1685's 1.06 GB on an H100; PyTorch's 32 MiB cuBLAS
    workspace on Hopper and Blackwell).

    Returns
    -------
    float
        Bytes per GPU, whatever the layout.
    """
    table = tomllib.loads((data_dir("compute") / "memory_reserve.toml").read_text(encoding="utf-8"))
    return float(sum(item["bytes"] for item in table.values()))


@lru_cache(maxsize=None)
def fragmentation_margin_bytes() -> float:
    """The free memory per GPU below which a layout that fits may still run out (the caching allocator's
    fragmentation, not counted in the total): ``memory_headroom.toml``'s GMLake mean, 9.2 GB on A100-80GB
    (arXiv 2401.08156).

    Returns
    -------
    float
        Bytes per GPU.
    """
    table = tomllib.loads((data_dir("compute") / "memory_headroom.toml").read_text(encoding="utf-8"))
    return float(table["fragmentation"]["bytes"])


_CONVENTIONS = {(2.0, 4.0, 12.0): "Megatron-LM's bf16 mixed precision: bf16 weights, fp32 grads and main weights",
                (2.0, 2.0, 12.0): "Megatron-Core's with a bf16 gradient buffer",
                (4.0, 4.0, 8.0): "MaxText's and torchtitan's (FSDP2, fp32 parameters, bf16 gathers): fp32 weights "
                                 "as their own master copy, no resident bf16 copy"}
# torchtitan: pytorch/torchtitan@b5bcd76c torchtitan/config/configs.py lines 87-105 (training dtype float32,
# fully_shard's mixed_precision_param bfloat16 for the gathers, mixed_precision_reduce float32).


def state_convention(layout) -> str:
    """The model state a layout keeps, in bytes per parameter, and whose convention it is.

    Parameters
    ----------
    layout : Mapping or ParallelLayout
        ``weight_bytes``, ``grad_bytes``, ``optimizer_bytes_per_param`` and ``gather_bytes`` (None: as the weights).

    Returns
    -------
    str
        E.g. ``"state 4 + 4 + 8 B/param, MaxText's: ...; gathers 2 B/param"``.
    """
    get = layout.get if hasattr(layout, "get") else lambda k: getattr(layout, k)
    key = (float(get("weight_bytes")), float(get("grad_bytes")), float(get("optimizer_bytes_per_param")))
    text = f"state {key[0]:g} + {key[1]:g} + {key[2]:g} B/param, " + _CONVENTIONS.get(key, "as the layout sets")
    gather = get("gather_bytes")
    if gather is not None and float(gather) != key[0]:
        text += f"; gathers {float(gather):g} B/param"
    if get("fp8_param_gather") and get("precision") == "fp8":
        text += "; the layers' weights in FP8 instead (fp8_param_gather: no BF16 copy)"
    return text


def stage_params(model: ModelSpec, lay: ParallelLayout) -> list[tuple[float, float, float]]:
    """Per stage: (dense, expert, largest unit) parameters one GPU holds, before ZeRO sharding."""
    return [(d, e, big) for d, e, big, _, _, _ in _stage_rows(model, lay)]


def busiest_stage(rows: list[tuple[float, float, float]]) -> int:
    """The index of the pipeline rank holding the most parameters (dense + expert) among :func:`stage_params`'s
    ``rows``: the rank whose gradients size a step's data-parallel traffic and whose optimizer step is the longest."""
    return max(range(len(rows)), key=lambda i: rows[i][0] + rows[i][1])


def units_holding(model: ModelSpec, lay: ParallelLayout) -> list[tuple[int, int]]:
    """Per stage: how many of its units hold dense and how many hold expert parameters (FSDP gathers each unit's
    part over its group's data-parallel ranks: one gather per such unit and pass)."""
    return [(nd, ne) for _, _, _, nd, ne, _ in _stage_rows(model, lay)]


_ROWS: dict = {}
""":func:`_stage_rows` per model (by identity, the model kept beside its rows so its id cannot be reused) and the
layout fields it reads (:data:`ROWS_READ`), a few hundred at most: a layout search asks for the same pipeline
split under every data-parallel size, sharding, micro-batch and recomputation."""
ROWS_READ = ("tp", "ep", "etp", "pp", "vpp", "pipeline_embedding", "pipeline_layout", "pipeline_schedule")
"""The layout fields :func:`_stage_rows` reads (:func:`.operators.pipeline_units`, :func:`.operators.rank_stages`,
:func:`.unit_params.unit_params`); ``tests/test_training_block_cache.py`` records them."""


def _stage_rows(model: ModelSpec, lay: ParallelLayout) -> tuple[tuple[float, float, float, int, int, float], ...]:
    """Per pipeline rank: the parameters of every stage it holds (:func:`.operators.rank_stages`; DualPipe: two):
    dense, expert, the largest unit's, the units holding dense and expert ones, the dense ones outside FP8 linears."""
    key = (id(model), *(getattr(lay, f) for f in ROWS_READ))
    hit = _ROWS.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    rows = tuple(_stage_rows_of(model, lay))
    if len(_ROWS) >= 512:
        _ROWS.pop(next(iter(_ROWS)))
    _ROWS[key] = (model, rows)
    return rows


def _stage_rows_of(model: ModelSpec, lay: ParallelLayout) -> list[tuple[float, float, float, int, int, float]]:
    """:func:`_stage_rows`, computed."""
    out = []
    memo: dict[tuple, tuple[float, float] | float] = {}
    stages = pipeline_units(model, lay)
    for held in rank_stages(lay):
        d = e = big = bf16 = 0.0
        nd = ne = 0
        units = [u for i in held for u in stages[i]]
        with_emb = "embedding" in units
        for u in _held_units(model, units):
            ab = memo.get((u, with_emb))
            if ab is None:
                ab = memo[(u, with_emb)] = unit_params(model, lay, u, with_emb)
            d, e, big = d + ab[0], e + ab[1], max(big, ab[0] + ab[1])
            nd, ne = nd + (ab[0] > 0), ne + (ab[1] > 0)
            b16 = memo.get((u, with_emb, "bf16"))
            if b16 is None:
                b16 = memo[(u, with_emb, "bf16")] = unit_bf16_params(model, lay, u, with_emb)
            bf16 += b16
        out.append((d, e, big, nd, ne, bf16))
    return out


def _held_units(model: ModelSpec, units: list[str]) -> list[str]:
    """The units whose weights a GPU running ``units`` holds: all of them, but one MTP depth (its layer unit and
    its ``mtp_head``) where the depths share one module (``model.mtp_shared``, Megatron-Core's
    ``mtp_use_repeated_layer``). The depths are the stage's last units (:func:`.operators.pipeline_units`): each
    MTP layer unit precedes the heads, or its own head under a ``pipeline_layout``."""
    extra = units.count("mtp_head") - 1
    if not model.mtp_shared or extra <= 0:
        return units
    kept, drop = list(units), {"mtp_head": extra, model.mtp_block: extra}
    for i in range(len(kept) - 1, -1, -1):  # the later depths' units are the last ones placed
        if drop.get(kept[i], 0) > 0:
            drop[kept[i]] -= 1
            del kept[i]
    return kept


def bf16_kept_params(model: ModelSpec, lay: ParallelLayout) -> list[float]:
    """Per stage (as :func:`stage_params`): the dense parameters one GPU holds outside FP8 linear layers (the
    embedding, the output layer, every norm, an MoE router, a Mamba mixer's convolution and scalars:
    :func:`.unit_params.unit_bf16_params`), which stay in BF16 when the linear layers' weights are kept in FP8
    (``fp8_param_gather``); kept with the stage's other parameters (:func:`_stage_rows`)."""
    return [bf16 for _, _, _, _, _, bf16 in _stage_rows(model, lay)]


def params_per_gpu(model: ModelSpec, lay: ParallelLayout) -> tuple[float, float]:
    """(dense, expert) parameters one GPU of the stage with the most holds, before any ZeRO sharding."""
    rows = stage_params(model, lay)
    d, e, _ = max(rows, key=lambda r: r[0] + r[1])
    return d, e


def gathered_unit_bytes(model: ModelSpec, lay: ParallelLayout) -> float:
    """Bytes of the largest unit's weights (a layer, or the embedding) one GPU gathers under ZeRO-3 / FSDP."""
    return max(r[2] for r in stage_params(model, lay)) * lay.weight_gather_bytes


def activation_bytes_per_layer(model: ModelSpec, lay: ParallelLayout) -> float:
    """One average layer, one micro-batch, on one GPU (Korthikanti et al. 2022, generalized as the module
    says); under full recomputation, its input only."""
    s = (lay.seq_len or model.seq_len) / lay.cp
    if lay.recompute == "full" and lay.recompute_num_layers is None:
        return 2 * s * lay.micro_batch * model.hidden / (lay.tp if lay.sequence_parallel else 1)
    total = sum(block_activation_bytes(model, lay, k) for layer in model.blocks for k in layer)
    return total / model.layers


ACTIVATION_PARTS = {"attention": "attention", "mlp": "MLP", "moe": "MoE", "mamba": "Mamba-2",
                    "recomputed_inputs": "recomputed layers' inputs", "offloaded_in_transit": "offloaded layer in transit",
                    "logits": "embedding / loss (logits)", "pipeline_in_flight": "pipeline micro-batches in flight"}
"""The parts of :attr:`MemoryBreakdown.activations_by_kind_bytes`, as the text names them: the saved tensors of
one micro-batch's attention (``*``, ``W``), MLP (``-``), MoE (``E``) and Mamba-2 (``M``) blocks on the rank (a
fully recomputed layer: its input; an offloaded one: the one in transit), its heads' FP32 logits, and the further
micro-batches (chunks) the pipeline schedule holds in flight on it, of those same layers."""
_PART_OF_BLOCK = {Block.ATTENTION: "attention", Block.LOCAL: "attention", Block.MLP: "mlp", Block.MOE: "moe",
                  Block.MAMBA: "mamba"}


def _in_flight_chunks(lay: ParallelLayout, stage: int) -> int:
    m, v = lay.microbatches // lay.pipeline_flushes, lay.vpp  # one schedule's micro-batches
    if lay.pipeline_schedule == "dualpipe":  # DualPipe's README table: PP + 1 per device, of its two stages
        return min(m, lay.pp + 1)
    return min(m * v, lay.warmup_chunks(stage) + 1)  # the warm-up and the one running


ACTIVATIONS_READ = ("seq_len", "cp", "micro_batch", "tp", "sequence_parallel", "recompute", "recompute_num_layers",
                    "activation_offload_layers", "offload_modules", "recompute_modules", "precision", "fp8_recipe", "flash_attention",
                    "module_recipes", "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16")
"""The layout fields :func:`_stage_activations` reads besides its stages (``tests/test_training_block_cache.py``
records them); with :data:`STAGES_READ` they key ``memory_per_gpu``'s ``activations``."""
STAGES_READ = ("pp", "vpp", "pipeline_embedding", "pipeline_layout")
"""The layout fields :func:`.operators.pipeline_units` reads (the stages' units; recorded by the same test)."""
_ACTIVATIONS_KEY = ACTIVATIONS_READ + STAGES_READ


def memory_per_gpu(model: ModelSpec, lay: ParallelLayout, capacity_bytes: float, *,
                   generation: str | None = None, activations: dict | None = None,
                   gpus_per_domain: int | None = None) -> MemoryBreakdown:
    """Memory of every pipeline rank of ``lay`` (see the module doc); the rank that needs the most is returned
    (its ``stage``: the rank). ``generation``: the GPU's (:func:`.fp8_params.fp8_param_bytes`: what FP8-kept
    weights hold there; None counts their transposes). ``activations``: a dict kept by the caller for one model
    (a layout search's), holding each stage's activations per micro-batch by :data:`ACTIVATIONS_READ` and
    :data:`STAGES_READ`: layouts that differ in their sharding, data or expert parallelism share them.
    ``gpus_per_domain``: GPUs of one NVLink domain the job uses (the layout's ``gpus_per_domain_used`` first, NCCL's
    node), which sets NCCL's send/receive buffers (:func:`.nccl_buffers.nccl_buffer_bytes`; None: none counted over
    NVLink)."""
    z = lay.zero_stage
    s = (lay.seq_len or model.seq_len) / lay.cp
    stages = pipeline_units(model, lay)
    if activations is None:
        per_mb, parts = _stage_activations(model, lay, stages)
    else:
        key = tuple([tuple(v) if type(v) is list else v for v in map(lay.__getattribute__, _ACTIVATIONS_KEY)])
        got = activations.get(key)
        if got is None:
            got = activations[key] = _stage_activations(model, lay, stages)
        per_mb, parts = got
    bf16 = bf16_kept_params(model, lay) if kept_in_fp8(lay) and z < 3 else None
    div3, div2, div1 = lay.shard_divisors(3), lay.shard_divisors(2), lay.shard_divisors(1)  # lay.sharded's, once
    nccl = nccl_buffer_bytes(lay, model.moe is not None, gpus_per_domain)
    reserved, gather_b = process_reserve_bytes(), lay.weight_gather_bytes
    ep_buf = ep_buffer_bytes(model, lay, gpus_per_domain)
    fixed = reserved + nccl + ep_buf  # as MemoryBreakdown.total_bytes adds them
    wb, gb, ob, reshard = lay.weight_bytes, lay.grad_bytes, lay.optimizer_bytes_per_param, lay.fsdp_reshard_after_forward
    heads_of = [units.count("logits") + units.count("mtp_head") for units in stages]  # each head's fp32 logits
    best, best_total = None, None  # the first rank with the largest total; only its breakdown is built
    for i, (held, (dense, expert, big)) in enumerate(zip(rank_stages(lay), stage_params(model, lay))):
        w = divided(dense, expert, div3) * wb
        if bf16 is not None:  # the linears' weights in FP8, the rest (embedding, output layer, norms) in weight_bytes
            w = (dense + expert - bf16[i]) * fp8_param_bytes(lay, generation) + bf16[i] * wb
        buf = (2 * big if reshard else dense + expert) * gather_b if z >= 3 else 0.0
        g = divided(dense, expert, div2) * gb
        if lay.fsdp_pipeline_sync == "step":  # the unsharded accumulators, in the reduce dtype (module doc)
            g = dense * lay.reduce_bytes + expert * lay.expert_reduce_bytes
        o = divided(dense, expert, div1) * ob
        act = sum([per_mb[j] for j in held]) / len(held) / lay.vpp * _in_flight_chunks(lay, i)
        heads = sum([heads_of[j] for j in held])
        if heads:
            act += heads * 4 * s * lay.micro_batch * model.vocab / lay.tp
        total = _total(w, g, o, act, buf, fixed)
        if best is None or total > best_total:
            best, best_total = (w, g, o, act, buf, i), total
    w, g, o, act, buf, i = best
    held = rank_stages(lay)[i]
    logits = sum([heads_of[j] for j in held]) * 4 * s * lay.micro_batch * model.vocab / lay.tp
    return MemoryBreakdown(weights_bytes=w, gradients_bytes=g, optimizer_bytes=o, activations_bytes=act,
                           capacity_bytes=capacity_bytes, buffers_bytes=buf, stage=i, reserved_bytes=reserved,
                           nccl_bytes=nccl, ep_buffers_bytes=ep_buf,
                           activations_by_kind_bytes=_activation_parts([parts[j] for j in held], act, logits))


def _activation_parts(held_parts: list[dict], act: float, logits: float) -> dict:
    """A rank's activations by part (:data:`ACTIVATION_PARTS`): one micro-batch's layers by kind (the mean over
    the stages it holds, as :func:`memory_per_gpu` counts them), the logits, and what the schedule's further
    micro-batches in flight add, the rest of ``act`` (0 where only one is in flight)."""
    out = {}
    for k in ACTIVATION_PARTS:
        v = sum(p.get(k, 0.0) for p in held_parts) / len(held_parts)
        if v:
            out[k] = v
    if logits:
        out["logits"] = logits
    rest = act - sum(out.values())
    if abs(rest) > 1e-9 * max(act, 1.0):
        out["pipeline_in_flight"] = rest
    return out


def _total(weights: float, gradients: float, optimizer: float, activations: float, buffers: float,
           reserved: float) -> float:
    """A breakdown's total bytes (:attr:`MemoryBreakdown.total_bytes`, and the per-rank comparison in
    :func:`memory_per_gpu`): one sum in one order."""
    return weights + gradients + optimizer + activations + buffers + reserved


def _stage_activations(model: ModelSpec, lay: ParallelLayout, stages: list[list[str]]) -> tuple[list[float],
                                                                                                   list[dict]]:
    """Activation bytes each stage keeps for one micro-batch (its layers' saved tensors; fully recomputed layers
    their input; offloaded layers only the one in transit), and the same by part (:data:`ACTIVATION_PARTS`)."""
    s = (lay.seq_len or model.seq_len) / lay.cp
    full_input = 2 * s * lay.micro_batch * model.hidden / (lay.tp if lay.sequence_parallel else 1)
    # every kind a unit holds, an MTP depth's too (rev106: an MTP block of a kind the main layers lack, attention
    # after Mamba-2 and MoE layers only, was a KeyError), in BF16 (f) or not: a BF16 layer saves its linears' inputs
    # in BF16
    mtp = model.mtp_block if model.mtp_layers else ""
    per_kind = {(k, f): block_activation_bytes(model, lay, k, f) for k in BLOCK_KINDS if model.count(k) or k in mtp
                for f in (False, True)}
    per_unit: dict[tuple, float] = {}
    out, parts = [], []
    for units, flags in zip(stages, bf16_layers(model, lay)):
        act_stage, layer_i, in_transit = 0.0, 0, 0.0
        part: dict[str, float] = {}
        margin: dict[str, float] = {}  # per block part: one block's offloaded modules kept on the GPU
        for u, f in zip(units, flags):
            if u in END_UNITS:
                continue
            if fully_recomputed(lay, layer_i):
                act_stage += full_input
                part["recomputed_inputs"] = part.get("recomputed_inputs", 0.0) + full_input
            else:
                a = per_unit.get((u, f))
                if a is None:
                    a = per_unit[(u, f)] = sum(per_kind[(k, f)] for k in u)
                for k in u if lay.offload_modules else ():  # the margin: one group of each module name
                    margin[_PART_OF_BLOCK[k]] = max(margin.get(_PART_OF_BLOCK[k], 0.0),
                                                    block_offload_bytes(model, lay, k, f)[1])
                if layer_i < lay.activation_offload_layers:  # in host memory but the one being copied
                    in_transit = max(in_transit, a)
                else:
                    act_stage += a
                    for k in u:
                        part[_PART_OF_BLOCK[k]] = part.get(_PART_OF_BLOCK[k], 0.0) + per_kind[(k, f)]
            layer_i += 1
        in_transit += sum(margin.values())  # 0 beside activation_offload_layers (check_layout refuses both)
        if in_transit:
            part["offloaded_in_transit"] = in_transit
        out.append(act_stage + in_transit)
        parts.append(part)
    return out, parts
