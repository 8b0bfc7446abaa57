"""A parallel layout: how a training job splits a model over GPUs, validated against the model and the fabric.

Dimensions (Megatron-LM's names): ``tp`` tensor parallelism (with sequence parallelism by default), ``cp``
context parallelism, ``pp`` pipeline stages (``vpp`` interleaved virtual stages per GPU, 1F1B schedule), ``dp``
data parallelism (the dense weights' replicas; ``dp_sharding``: none, zero1, zero2, zero3/fsdp, or
fsdp_grad_op, PyTorch's SHARD_GRAD_OP: gradients and optimizer sharded, weights gathered once per step and kept,
as Llama 3 ran). ``tp * cp * pp * dp`` = the job's GPUs. Experts are laid out over the same ranks as Megatron-Core
folds them: each pipeline stage's ``tp x cp x dp`` ranks are ``etp x ep x edp`` for the MoE layers (``etp``
expert-tensor parallelism, default ``tp``; ``ep`` expert parallelism may span tensor and data ranks, e.g. TP2
EP64 DP32 with etp 1; ``edp`` the experts' replicas).

Everything a user can get wrong raises :class:`~topo.errors.TopoError` keyed by the option (``tp``, ``dp``...).
"""

from __future__ import annotations

import math
import re
import tomllib
from typing import Annotated, Literal, get_args

import numpy as np

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from .ring_attention import CP_COMM_TYPES, a2a_heads_error
from ..errors import TopoError
from ..inputs import is_input_file, loads_toml, read_toml
from ..resources import data_dir
from ..units import count_noun, format_count
from .model import ModelSpec, validation_error
from .module_recipes import duplicate_module_entries, entries_at, module_recipes_error
from .pipeline_layout import layout_chunks
from .recomputed_modules import modules_recomputed
from .remat import RematPolicyError, remat_settings
from .routing import ROUTINGS
from .tp_overlap import config_names
from .cudnn import NEWEST as CUDNN_NEWEST, parse_version as parse_cudnn
from .te_version import NEWEST as TE_NEWEST, parse_te_version

__all__ = ["ParallelLayout", "make_layout", "load_layout", "layout_fields", "check_layout", "check_model_split",
           "DIMENSIONS", "DP_SHARDING", "RECOMPUTE", "RECOMPUTE_MODULES", "MAMBA_MODULE_REFUSAL",
           "PIPELINE_SCHEDULES", "DEFAULT_ORDER", "batch_allowed", "check_batch", "delayed_scaling",
           "current_scaling", "divided", "hybrid_sharded", "sends_unoverlappable"]

DIMENSIONS = ("tp", "cp", "ep", "dp", "pp")
DEFAULT_ORDER = "tp-cp-ep-dp-pp"  # Megatron-LM's default rank order, fastest-varying first
DP_SHARDING = ("none", "zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op")
RECOMPUTE = ("none", "selective", "full")
PIPELINE_SCHEDULES = ("1f1b", "dualpipe")  # ParallelLayout.pipeline_schedule
MAX_COUNT = 2**53
"""The largest count a layout takes (a batch, a sequence length, a degree): the last whole number a float holds
exactly, as the step's arithmetic is in floats; a larger one (``--seq`` of 40 digits, ``--per-device-batch 1e300``)
overflowed or went NaN there, an internal error (fuzz136, section 472)."""
PositiveInt = Annotated[int, Field(strict=True, ge=1, le=MAX_COUNT)]


def _flag(value) -> bool:
    """A layout switch as written: a boolean (numpy's too), not a string or number pydantic would read as one
    (``"yes"``, ``1``)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise PydanticCustomError("bool_type", "Input should be a valid boolean")


Flag = Annotated[bool, BeforeValidator(_flag)]

MAX_ELEMENT_BYTES = 8.0
"""The widest element a layout's weights, gradients, gathers, reductions or dispatch may carry: 8 bytes, fp64
(``torch.float64``, ``jnp.float64``), the widest floating dtype PyTorch and JAX keep a tensor in; training runs
at 1 (FP8) to 4 (fp32). A larger figure is a typo: 1e30 was taken and failed later on a collective's size."""
ElementBytes = Annotated[float, Field(gt=0, le=MAX_ELEMENT_BYTES)]


def divided(dense: float, expert: float, divisors: tuple[int, int]) -> float:
    """``dense / divisors[0] + expert / divisors[1]``: what :meth:`ParallelLayout.sharded` leaves on one GPU, given
    :meth:`ParallelLayout.shard_divisors` (the ZeRO division, one place)."""
    return dense / divisors[0] + expert / divisors[1]


RecomputeModule = Literal["core_attn", "mlp", "moe", "moe_act", "layernorm", "mla_up_proj", "mlp_act", "mlp_wi",
                          "qkv_proj", "out_proj"]
"""The modules ``recompute_modules`` takes: Megatron-Core's (``transformer_config.py`` ``__post_init__``'s allowed
list) that topo prices, and MaxText's tensor names its remat policies set (:mod:`.remat`)."""
RECOMPUTE_MODULES = get_args(RecomputeModule)

MAMBA_MODULE_REFUSAL = (
    "mamba is not a recompute module: Megatron-Core has none for the Mamba-2 mixer (NVIDIA/Megatron-LM@d98e8a64 "
    "transformer_config.py lines 1945-1957 list none; its mamba_split_conv1d_scan_combined already recomputes the "
    "convolution in its own backward) and recomputes a Mamba-2 layer only whole, under recompute = \"full\" "
    "(hybrid_block.py line 360); allowed: " + ", ".join(RECOMPUTE_MODULES))
"""The one line for ``recompute_modules`` naming ``mamba`` (tidy122, docs/calibration-findings.md section 445). topo
used to price a ``mamba`` module (the whole mixer replayed, only its input kept) that no framework runs:
Megatron-Core @d98e8a64 gates every module's checkpoint on its allowed list, which has no Mamba entry, and its
``MambaLayer`` / ``MambaMixer`` build no checkpoint (``megatron/core/ssm/mamba_layer.py``, ``mamba_mixer.py``);
Megatron-Bridge @067f987d sets it in no recipe; MaxText, whose tensor names the other modules here include, has no
Mamba-2 layer. No published or hold-out run lists it."""


class ParallelLayout(BaseModel):
    """One training job's parallel layout and step settings. Defaults are Megatron-LM's unless noted."""

    # built when a layout is first validated, not when topo plan imports the training package; numbers are finite
    # (optimizer_bytes_per_param=inf had been taken, its memory "inf GB")
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    tp: PositiveInt = 1
    cp: PositiveInt = 1
    pp: PositiveInt = 1
    dp: PositiveInt = 1
    ep: PositiveInt = 1
    etp: PositiveInt | None = None
    """Expert-tensor parallelism (Megatron-Core's ``expert_tensor_parallel_size``); default: ``tp``."""
    vpp: PositiveInt = 1
    """Virtual pipeline stages per GPU (interleaved 1F1B); 1 = plain 1F1B."""
    micro_batch: PositiveInt = 1
    """Sequences per micro-batch per data-parallel replica."""
    global_batch: PositiveInt
    """Sequences per optimizer step (all replicas)."""
    seq_len: PositiveInt | None = None
    """Tokens per sequence (default: the model's)."""
    sequence_parallel: Flag = True
    """TP with sequence parallelism (Korthikanti et al. 2022): reduce-scatter + all-gather instead of all-reduce."""
    async_tp_grad_allreduce: Flag = True
    """Without sequence parallelism: a column-parallel linear's input-gradient all-reduce over TP is launched
    asynchronously and hidden beside its own weight-gradient GEMM (Megatron-LM's
    ``async_tensor_model_parallel_allreduce``, on unless ``--no-async-tensor-model-parallel-allreduce``: added
    2021-09-02, NVIDIA/Megatron-LM@6e1bde1e ``megatron/mpu/layers.py`` ``ColumnParallelLinearWithAsyncAllreduce``,
    ``all_reduce(..., async_op=True)`` before the weight-gradient GEMM). False: the all-reduce blocks, as Megatron-LM
    before it ran it (``copy_to_tensor_model_parallel_region``'s backward ``_reduce``, a synchronous
    ``torch.distributed.all_reduce``: NVIDIA/Megatron-LM@a8d172b3, April 2021, ``megatron/mpu/mappings.py`` lines
    22-32 and 76-89, ``megatron/mpu/layers.py`` line 280, ``megatron/model/language_model.py`` line 33), exposed
    whole (:func:`topo.training.step.tp_grad_allreduce_phase`). Read only with ``tp > 1`` and without sequence
    parallelism."""
    recompute: Literal["none", "selective", "full"] = "none"
    recompute_modules: tuple[RecomputeModule, ...] = ()
    """Modules recomputed in the backward pass (Megatron-Core's ``recompute_modules``): their activations are
    not stored, their forward runs again (``mla_up_proj``: MLA's query and key/value up-projections and their
    RoPE, so only the compressed latents are kept). No ``mamba``: Megatron-Core has no such module
    (:data:`MAMBA_MODULE_REFUSAL`)."""
    remat_policy: str | None = None
    """A JAX rematerialisation policy (MaxText's ``remat_policy``: ``save_dot_except_mlpwi``, ``minimal``...) in
    place of ``recompute`` and ``recompute_modules``, which it sets (:mod:`topo.training.remat`)."""
    recompute_num_layers: PositiveInt | None = None
    """With ``recompute = "full"``: only the first N layers of each stage (Megatron's ``block`` method)."""
    recompute_early_stop: Flag = False
    """With ``recompute = "full"``: the replay of a layer stops after its last kernel whose output the backward
    keeps, as PyTorch's non-reentrant checkpoint does with each decoder layer wrapped whole (NeMo AutoModel's MoE
    ``apply_ac``: ``checkpoint_wrapper``, whose default is ``CheckpointImpl.NO_REENTRANT``; ``torch.utils.checkpoint``
    "stops recomputation as soon as all needed intermediate activations have been recomputed", on by default): the
    layer's last residual add, and an MoE block's combine all-to-all after its un-permutation, are not run again
    (:func:`topo.training.operators.early_stopped_s`). False: Megatron-Core's reentrant checkpoint, which replays
    the whole layer."""
    activation_offload_layers: Annotated[int, Field(strict=True, ge=0)] = 0
    """Transformer layers whose saved activations are copied to host memory in the forward pass and back before
    their backward (Megatron-Core's ``cpu_offloading`` with ``cpu_offloading_num_layers`` = N and
    ``cpu_offloading_weights`` off, as Megatron-Bridge's performance recipes set it; GB200's Grace memory). The
    first N layers are offloaded; one of them is on the GPU at a time (double buffering). Megatron-Core allows it
    only without pipeline parallelism and without recomputation, and for fewer layers than the model has."""
    offload_modules: tuple[Literal["core_attn", "attn_proj", "expert_fc1", "moe_act", "fused_group_mlp"], ...] = ()
    """Modules whose saved inputs are copied to host memory after their forward and back before their backward
    (Megatron-Core's ``fine_grained_activation_offloading`` with ``offload_modules``, as Megatron-Bridge's
    Nemotron 3.5 Lightning H100 recipe sets ``["expert_fc1"]``; :mod:`topo.training.activation_offload`).
    Megatron's ``attn_norm``, ``mlp_norm`` and ``qkv_linear`` are not modelled. Its rules: not beside
    ``activation_offload_layers``; ``attn_proj`` only with ``core_attn``; no MoE module when the whole MoE block
    is recomputed (``moe`` in ``recompute_modules``, not under ``recompute = "full"``); ``fused_group_mlp`` only with the fused grouped MLP
    (``moe_expert_kernels = "fused_mlp"``), ``expert_fc1`` and ``moe_act`` only without it."""
    pipeline_embedding: Flag = False
    """Count the embedding and the loss as one pipeline layer each when splitting layers over ``pp x vpp``
    (Megatron-LM's ``account_for_embedding_in_pipeline_split`` and ``..._loss_...``; 126 layers on PP16 x VP8)."""
    pipeline_layout: str | None = None
    """Which layers each pipeline chunk holds, in Megatron-Core's ``pipeline_model_parallel_layout`` notation
    (``Et*4|(t*4|)*14tmL``: :mod:`topo.training.pipeline_layout`); default: an even split of the layers."""
    gpus_per_domain_used: PositiveInt | None = None
    """Use only the first N GPUs of each NVLink domain (64 of an NVL72 rack's 72, so power-of-two TP and EP
    groups stay inside a rack); default: all."""
    dp_sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op"] = "zero1"
    """Megatron's distributed optimizer is ZeRO-1 (the default here)."""
    dp_shard: PositiveInt | None = None
    """Hybrid sharding (PyTorch's HSDP, a JAX mesh's fsdp axis beside its data axis): what ``dp_sharding`` shards is
    sharded over groups of this many data-parallel ranks (the fastest-varying ones, times ``cp``) and replicated
    over the ``dp / dp_shard`` groups, whose gradients are all-reduced across them; default: all ``dp``. Dense
    weights only: the experts' is ``expert_dp_shard``."""
    expert_dp_shard: PositiveInt | None = None
    """Hybrid sharding of the experts (a JAX mesh's expert axis beside its data axis: MaxText shards an expert's
    weights over its fsdp and context axes, not its data axis): what ``dp_sharding`` shards of the experts is
    sharded over groups of this many of their replicas (the fastest-varying ones) and replicated over the
    ``expert_dp / expert_dp_shard`` groups, whose gradients are all-reduced across them; default: all the
    experts' replicas."""
    dp_outer_sharding: Literal["no_shard", "optim"] = "no_shard"
    """Hybrid ZeRO-3's replica groups (``dp / dp_shard``, the experts' ``expert_dp / expert_dp_shard``), as
    Megatron-FSDP's ``outer_dp_sharding_strategy``: ``no_shard`` (default) replicates the shard groups' state across
    them and all-reduces each unit's gradient shard across them every micro-batch; ``optim`` also shards the
    optimizer state (and the Adam step) across them, over every data x context rank (the experts' over all their
    replicas), the weights and gradients staying sharded over the shard groups: each unit's gradient shard is
    reduce-scattered across the replicas once a step, on the last micro-batch's backward, and its weight shard
    all-gathered back once, before the first micro-batch's forward (NVIDIA/Megatron-LM@24bad8e6
    ``megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py`` lines 2389-2424 and 4127-4206,
    ``megatron_fsdp.py`` lines 482-489 and 768-770; only with ``optim_grads_params``, line 2497). Needs a hybrid
    ZeRO-3 layout."""
    fsdp_reshard_after_forward: Flag = True
    """ZeRO-3 / FSDP: free each unit's gathered weights after its forward and gather them again for its backward
    (PyTorch FSDP2's ``reshard_after_forward``, its default); False keeps them from the forward to the backward:
    one gather per unit and micro-batch instead of two, with the stage's whole gathered weights held meanwhile
    (NeMo AutoModel's ``reshard_after_forward = not pp_enabled``)."""
    fsdp_pipeline_sync: Literal["microbatch", "step"] = "microbatch"
    """FSDP2 (``wgrad_output = "fsdp2"``, ZeRO-3) under pipeline parallelism: when each unit is gathered and its
    gradients reduce-scattered. ``microbatch`` (default): every micro-batch, the stage's units driven by their own
    hooks (NeMo AutoModel, whose stage module is not itself fully_shard-ed: docs/calibration-findings.md section
    18). ``step``: once per pipeline schedule run (``pipeline_flushes``), as PyTorch's pipelining runs a stage
    module that is an ``FSDPModule`` (torchtitan: ``fully_shard(model)`` over each stage's part,
    pytorch/torchtitan@b5bcd76c ``torchtitan/distributed/fsdp.py`` line 368, no ``reshard_after_forward`` under
    PP, lines 129-132): every backward but the last runs with ``set_requires_gradient_sync(False)`` and
    ``set_reshard_after_backward(False)`` (pytorch/pytorch@01386103 ``torch/distributed/pipelining/stage.py``
    ``backward_maybe_with_nosync``), after the stage's last backward one post-backward reduce-scatters every unit
    (``_post_backward``; ``perform_reduce_grad``, run by pytorch/pytorch@00722e64 ``schedules.py``
    ``Schedule1F1B`` after its cooldown and by the runtime schedules' ``REDUCE_GRAD`` after a stage's last
    backward, ``_add_reduce_grad``). Each unit is gathered once, in the first micro-batch's forward, and kept;
    its gradients accumulate unsharded in the reduce dtype (``FSDPParam.to_accumulated_grad_if_needed``,
    pytorch/pytorch@010ae4a8 ``torch/distributed/fsdp/_fully_shard/_fsdp_param.py``). Needs pp > 1,
    ``fsdp_reshard_after_forward`` false, ``vpp`` at most 3 (the runtime schedules keep at most 3 stages
    unsharded, ``_add_unshard_reshard(max_active_stages=3)``: a fourth chunk is re-gathered each round),
    the ``1f1b`` schedule and FSDP2's hooks (``dp_overlap_policy = "hooks"``, not XLA's scheduler)."""
    flash_attention: Flag = True
    """Fused attention that never stores the s x s scores (Dao et al. 2022) and recomputes them in the backward
    pass: no ``5 a s / h`` activation term, the scores' forward FLOPs once more. False for 2021-era runs."""
    precision: Literal["bf16", "fp8"] = "bf16"
    """Matmul precision: selects the GPU's peak (bf16 or fp8 dense)."""
    num_layers_at_start_in_bf16: Annotated[int, Field(strict=True, ge=0)] = 0
    """With ``precision = fp8``: the model's first this many layers (pattern characters of a hybrid model) run in
    BF16, as Megatron-Core's ``first_last_layers_bf16`` with ``num_layers_at_start_in_bf16`` does (its
    ``get_fp8_context`` gives those layers no FP8 context: NVIDIA/Megatron-LM ``megatron/core/fp8_utils.py`` and
    ``megatron/core/ssm/mamba_block.py`` @f7a3dcc4). NeMo's and Megatron-Bridge's
    ``nemotron_h_bf16_with_fp8_current_scaling_mixed`` set 2 and 2, ``bf16_with_fp8_current_scaling_mixed`` 1
    and 1; their performance scripts turn it off for current scaling, MXFP8 never sets it (0)."""
    num_layers_at_end_in_bf16: Annotated[int, Field(strict=True, ge=0)] = 0
    """With ``precision = fp8``: the model's last this many layers run in BF16 (``num_layers_at_end_in_bf16``;
    see ``num_layers_at_start_in_bf16``)."""
    fp8_recipe: Literal["delayed", "current", "mxfp8", "blockwise", "nvfp4"] | None = None
    """Transformer Engine's FP8 scaling recipe (``precision = "fp8"`` only). ``current`` (per-tensor current
    scaling) quantises each linear input (each expert's rows alone) in four kernels, the amax zeroed, its amax, its
    scale and the cast, reading the input twice (a TE norm's output: the scale and the cast); the others (and None) in one cast kernel each (``kernels.toml`` ``[launch]``
    ``fp8_current_scaling_kernels``). ``mxfp8`` needs a Blackwell GPU (checked by the step). ``nvfp4`` is TE's
    NVFP4BlockScaling (Megatron-Core's ``--fp4-format e2m1 --fp4-recipe nvfp4``, Megatron-Bridge's
    ``bf16_with_nvfp4_mixed``): the linear layers' fprop, dgrad and wgrad in E2M1 at the GPU's FP4 rate with an
    E4M3 scale per 16 elements, attention in BF16; it needs FP4 tensor cores (Blackwell; checked by the step)."""
    module_recipes: tuple[str, ...] = ()
    """Modules run at a recipe of their own inside an FP8 / FP4 layout (Megatron-Core's ``quant_recipe``, as
    Megatron-Bridge's Nemotron 3 Super NVFP4 recipes set it from ``perf_recipes/nemotronh/te_quant.cfg``): entries
    ``name=recipe``, a Megatron module name (``linear_qkv``, ``linear_proj``, ``mixer.in_proj``, ``mixer.out_proj``,
    ``fc1_latent_proj``, ``fc2_latent_proj``, ``experts.linear_fc1``, ``shared_experts.linear_fc2``, ``mtp``, ...:
    :data:`topo.training.module_recipes.MODULE_OPS`) and ``bf16``, ``mxfp8`` or ``nvfp4``; the other linear layers
    keep ``fp8_recipe`` (unset: delayed, Megatron-Core's default, which holds module recipes as any other). Needs
    ``precision = "fp8"``."""
    rank_order: str = DEFAULT_ORDER
    """Dimensions from fastest- to slowest-varying GPU id (Megatron: tp-cp-ep-dp-pp)."""
    tp_across_domains: Flag = False
    """Allow a TP group to span NVLink domains (otherwise an error)."""
    first_gpu: Annotated[int, Field(strict=True, ge=0)] = 0
    """The job runs on GPUs first_gpu .. first_gpu + gpus - 1 (packed: domains, servers, units, pods)."""
    skip_domains: tuple[Annotated[int, Field(strict=True, ge=0)], ...] = ()
    """NVLink domains (fabric-wide indices: ``nvswitchN``'s N) the job's placement passes over, as a scheduler
    places a job on the healthy racks: the job's domains are the ones from ``first_gpu``'s that are not listed,
    each holding ``gpus_per_domain_used`` of its ranks in order (:func:`.mapping.map_layout`)."""
    weight_bytes: ElementBytes = 2.0
    """Bytes per parameter of the weights kept (bf16: Megatron-LM's working copy beside its fp32 main weights; 4:
    MaxText's fp32 ``weight_dtype``, the weights being their own master copy)."""
    gather_bytes: ElementBytes | None = None
    """Bytes per parameter of the data-parallel weight all-gather (ZeRO-1/2's after the step, ZeRO-3's per unit) and
    of the gathered, transient ZeRO-3 unit copies; default ``weight_bytes``. MaxText keeps fp32 weights and casts
    each layer's to its bf16 ``dtype`` inside the computation (``layers/linears.py``: ``jnp.asarray(kernel,
    self.dtype)``): the cast is elementwise on the fsdp shard, so the all-gather XLA inserts before the matmul
    carries bf16, 2 (:data:`topo.training.jax_mesh.MAXTEXT_STATE`)."""
    fp8_param_gather: Flag = False
    """With ``precision = "fp8"``: the linear layers' weights are kept in FP8 and the data-parallel all-gather of
    the distributed optimizer (ZeRO-1/2; ZeRO-3's per-unit gathers too) carries them at 1 byte per parameter; the
    embedding and the output layer stay in ``weight_bytes`` (Megatron-Core's ``fp8_param_gather``: the FP8
    parameters are Transformer Engine ``Float8Tensor``s whose raw bytes the param buffer holds,
    ``megatron/core/fp8_utils.py`` ``quantize_param_shard`` casts the updated main-parameter shard into them
    before the gather). NeMo 2's ``bf16_with_fp8_mixed`` and ``bf16_with_fp8_current_scaling_mixed`` set it
    (NVIDIA/NeMo@b4148d21 nemo/collections/llm/recipes/precision/mixed_precision.py; its MXFP8 plugin from @f56c5608, 2025-07-04),
    as do Megatron-Bridge's (``src/megatron/bridge/training/mixed_precision.py``). Memory: no BF16 copy; the
    layers' weights are held at :func:`topo.training.fp8_params.fp8_param_bytes` (1 byte, plus the transpose or
    column-wise copy Transformer Engine makes after the gather: 2 on Hopper, 1 per-tensor on Blackwell) under
    ZeRO-1/2. MXFP8 (``fp8_recipe = "mxfp8"``) weights are gathered in BF16 through the gradient buffer and cast
    after, so their gather stays at ``weight_gather_bytes`` and takes no memory
    (:func:`topo.training.fp8_params.gathers_in_fp8`)."""
    grad_bytes: ElementBytes = 4.0
    """Bytes per parameter of the gradients kept (Megatron-LM's fp32 ``main_grad`` for bf16 training)."""
    wgrad_output: Literal["main_grad", "fsdp2", "copied", "param_dtype", "autograd"] = "main_grad"
    """How the framework's weight-gradient GEMM writes the gradient (:func:`topo.training.operators.wgrad_kw`):
    ``main_grad``, Megatron-LM's ``--gradient-accumulation-fusion`` (its default; NeMo, Megatron-Bridge): added
    into the kept gradient at ``grad_bytes``, each element read and written; ``fsdp2``, PyTorch FSDP2 (NeMo
    AutoModel, torchtitan): a new bf16 gradient, then copied into the reduce-scatter buffer at the reduction's
    bytes on the compute stream, and under ZeRO-3 each unit's gathers and reductions copied in and out as FSDP2
    does (:mod:`topo.training.fsdp2_copies`); ``copied``, Megatron-FSDP with ``gradient_accumulation_fusion`` off
    (Megatron-Bridge's FSDP Llama recipes from v0.2.0): a new bf16 gradient, then copied into the gradient buffer at
    the reduction's bytes on the compute stream (FSDP2's bytes, without FSDP2's unit copies); ``param_dtype``, JAX
    (MaxText): a new gradient in the parameter's dtype (``grad_bytes``), written once; ``autograd``, PyTorch's own
    accumulation into ``param.grad`` (Megatron-LM of 2021 with ``--fp16``, torch DDP or local DDP without contiguous
    buffers, NVIDIA/Megatron-LM@a8d172b3: no ``main_grad`` hook): each micro-batch's GEMM writes a new gradient,
    which from the second micro-batch on an add kernel sums into ``param.grad`` at ``grad_bytes``, and the
    optimizer copies ``param.grad`` into its fp32 main gradient (:func:`topo.training.operators.wgrad_kw`,
    :func:`topo.training.operators.optimizer_step_bytes`)."""
    loss_scaling: Flag = False
    """FP16 training's gradient scaler (Megatron-LM ``--fp16``, a constant ``--loss-scale`` or the dynamic one):
    each step the optimizer unscales every fp32 main gradient and checks it for inf / NaN in one pass
    (``Float16OptimizerWithFloat16Params._unscale_main_grads_and_check_for_nan``,
    :func:`topo.training.operators.optimizer_step_bytes`). Default off: BF16 runs have no scaler."""
    grad_reduce_bytes: ElementBytes | None = None
    """Bytes per parameter of the data-parallel reduction (default ``grad_bytes``: Megatron-LM reduces in fp32
    for bf16; NeMo's performance recipes set ``grad_reduce_in_fp32 = False``: 2)."""
    expert_grad_reduce_bytes: ElementBytes | None = None
    """Bytes per parameter of the experts' data-parallel reduction, where it differs from the dense weights' (NeMo
    AutoModel's FSDP2 reduces the dense weights in fp32, its MixedPrecisionPolicy's ``reduce_dtype``, and the
    experts, sharded without that policy, in their bf16); default ``grad_reduce_bytes``'s."""
    optimizer_bytes_per_param: Annotated[float, Field(ge=0)] = 12.0
    """Adam in mixed precision: fp32 main weights + two fp32 moments (Rajbhandari et al. 2020, ZeRO, K = 12);
    with bf16 weights and fp32 gradients, 18 bytes per parameter. Bytes per parameter; the memory breakdown's
    ``optimizer_bytes`` is the optimizer state's bytes on one GPU."""
    dp_bucket_params: PositiveInt | None = None
    """Gradient bucket (parameters) of the data-parallel reduction and gather, one collective per bucket; default
    Megatron-Core's ``max(40M, 1M x dp_cp size)`` (:func:`dp_bucket_params`)."""
    dp_all_reduce_combine_bytes: PositiveInt | None = None
    """XLA's all-reduce combine threshold (``--xla_gpu_all_reduce_combine_threshold_bytes``): the data-parallel
    gradient all-reduces (ZeRO-0's, and hybrid sharding's across the replicas under ZeRO-3 / FSDP) merged into
    collectives of up to this many bytes instead of one a bucket or unit (:func:`xla_all_reduce_calls`); each
    merged all-reduce starts when its last gradient exists. None (default): Megatron-Core's buckets, or one a unit.
    MaxText's A3 scripts set it per job size (AI-Hypercomputer/maxtext@efb6d9e4
    ``MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh``: 128 MiB, 64 MiB, 512 MiB, 1 GiB, 1 GiB)."""
    dp_overlap_policy: Literal["hooks", "xla_lhs"] = "hooks"
    """Who lays out the data-parallel collectives beside the compute (with ``overlap_dp``). ``hooks`` (default):
    the framework launches each when its data is ready and it hides behind the compute from then on (Megatron-Core's
    and PyTorch FSDP's hooks, :mod:`topo.training.dp_overlap`). ``xla_lhs``: a JAX run whose XLA flags set
    ``--xla_gpu_enable_latency_hiding_scheduler=true``; XLA's scheduler keeps one collective in flight on one
    stream and gives each the same share of the pass's compute, whatever its bytes
    (:func:`topo.training.dp_overlap.xla_lhs_exposed_s`, ``topo/data/compute/xla_scheduler.toml``). MaxText's
    recipes set it (AI-Hypercomputer/maxtext@efb6d9e4 ``MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh``;
    gpu-recipes@2e1fd5ef ``training/a4/*/maxtext-pretraining-gke/values.yaml``; NVIDIA/JAX-Toolbox@67b79492
    ``docs/frameworks/maxtext/README.md``)."""
    overlap_dp: Flag = True
    """Gradient reduction overlaps the last micro-batch's backward except the last bucket; the weights'
    all-gather overlaps the first micro-batch's forward except the first bucket; interleaved, chunk by chunk
    (:mod:`topo.training.dp_overlap`). False is refused where the layout names Megatron-FSDP sharding the gradients
    (``dp_outer_sharding = "optim"``, or ``wgrad_output = "copied"`` under ZeRO-2/3), which overlaps them whatever
    its config says (:func:`_check_megatron_fsdp_overlap`)."""
    overlap_param_gather: Flag | None = None
    """The distributed optimizer's once-a-step gather of the updated weights (the ``gather`` phase of ZeRO-1/2)
    overlapped with the next step's first forward, apart from the
    gradients' reduction (Megatron-Core's ``overlap_param_gather``, which Megatron-LM, NeMo and Megatron-Bridge set
    apart from ``overlap_grad_reduce``). True: each bucket's gather is waited for in the forward pre-hook of the
    first module using it, which dispatches the next (NVIDIA/Megatron-LM@7094270c6fa1dbc6b2e99072171e3a559ca36d0f
    ``megatron/core/distributed/param_and_grad_buffer.py`` lines 193-277, ``distributed_data_parallel.py`` lines
    322-391): all but the first bucket hide behind the forward. False: after the optimizer step each model chunk's
    buckets are all-gathered synchronously (``distrib_optimizer.py`` ``step_with_ready_grads``, lines 2088-2112),
    every bucket exposed; the buckets stay ``overlap_dp``'s (Megatron-Core buckets by ``overlap_grad_reduce`` alone,
    ``distributed_data_parallel.py`` lines 60-62). None (the default): ``overlap_dp``'s value, both DP overlaps
    together (:func:`dp_overlapped`). True needs a distributed optimizer (a ``dp_sharding`` other than none):
    Megatron-Core's gather asserts ``use_distributed_optimizer`` (``param_and_grad_buffer.py`` line 205). True with
    ``overlap_dp`` false is allowed: Megatron-LM's training script refuses it (``megatron/training/arguments.py``
    lines 502-506) but Megatron-Core and Megatron-Bridge run it (one bucket a chunk, its gather the first and
    exposed). ZeRO-3 / FSDP's gathers follow ``overlap_dp``, the per-unit ones and Megatron-FSDP's
    optimizer-sharded replicas' once-a-step one: Megatron-FSDP sets ``overlap_param_gather`` True whenever it shards
    the weights (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    ``megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py`` lines 328-330) and gathers the replicas'
    shards with the first unit's, in the step's first forward (lines 482-490; rev109)."""
    overlap_param_gather_with_optimizer_step: Flag = False
    """Megatron-Core's ``overlap_param_gather_with_optimizer_step``: the first model chunk gets an optimizer of its
    own, stepped first, and its weights' all-gather is dispatched right after that step, behind the other chunks'
    (and the experts') optimizer steps. Read at NVIDIA/Megatron-LM@14346b65a2d0790e451919858f7771078105c5f0:
    ``megatron/core/optimizer/__init__.py`` lines 1056-1062 and 1167-1181 (chunk 0 apart, the expert optimizer last,
    lines 1207-1243); ``optimizer.py`` ``ChainedOptimizer._step`` lines 1667-1675 (``start_param_sync(force_dispatch=
    True)`` after optimizer 0); ``distributed_data_parallel.py`` lines 443-475 (the forward pre-hook waits for the
    gather and dispatches no next bucket) and 539-559 (the schedule's dispatch of chunk 0 at the step's start,
    ``pipeline_parallel/schedules.py`` lines 1201-1203, skipped; chunk 1's still made there); chunk 0 is not
    bucketed (``megatron/training/training.py`` lines 1954-1964; Megatron-Bridge's ``model_provider.py``
    ``disable_bucketing=(model_chunk_idx > 0) or overlap_param_gather_with_optimizer_step``, v0.2.0 line 689).
    So every chunk is one collective (:func:`dp_bucket_calls`) and chunk 0's gather hides behind the later
    optimizers' steps, the rest of it waited for by the next step's first forward
    (:func:`topo.training.dp_overlap.interleaved_gather_exposed_s`, ``lead_s``). Needs ``vpp > 1``, ZeRO-1/2 and the
    gather overlapped (Megatron-LM ``megatron/training/arguments.py`` lines 1032-1040). Default off, Megatron-Core's
    (``optimizer_config.py`` line 340); Megatron-Bridge's performance scripts turn it on for every run with dp, pp
    and vp > 1 (v0.1.0rc4 ``scripts/performance/run_script.py`` lines 189-193; from v0.3.0 ``utils/overrides.py``
    lines 430-434 except ``fp8_mx`` / ``nvfp4``)."""
    dp_align_grad_reduce: Flag = True
    """Interleaved (``vpp > 1``): each chunk's gradient reduction is started by the schedule after the chunk's last
    backward, chunk 0's when the backward ends (Megatron-LM's ``align_grad_reduce``, its and Megatron-Bridge's
    default); false: by the gradient hooks as each bucket is ready (NeMo 2, 25.02-25.07:
    :mod:`topo.training.dp_overlap`). No effect at ``vpp`` 1: the first stage, which ends the step, runs the hooks
    either way."""
    overlap_tp: Flag = False
    """TP collectives hidden behind the layer's matmuls (Transformer Engine's userbuffers); with sequence
    parallelism each behind the GEMM of its own linear layer, run as a ring exchange of ``tp`` chunks
    (:func:`topo.training.step.tp_ring_steps`, :func:`topo.training.step.tp_ring_exposed_s`), FP8 layouts
    gathering 1-byte elements; without it behind the micro-batch's compute. Default exposed."""
    tp_overlap_config: str = "te_default"
    """The userbuffers configuration TP overlap runs (``topo/data/compute/tp_overlap.toml``: NeMo's and
    Megatron-Bridge's named ones, e.g. ``userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192``, or Transformer
    Engine's defaults): the SMs each TP GEMM gives up to the communication beside it (``set_sm_margin``,
    :mod:`topo.training.tp_overlap`). Default ``te_default``, what TE >= 2.0 runs when the recipe names none: the
    forward reduce-scatters (``pipeline``) and the backward's bulk exchanges on 16 SMs, taken from their GEMMs.
    Read only with ``overlap_tp``, sequence parallelism and ``tp > 1``."""
    overlap_cp: Flag = True
    """CP K/V exchange hidden behind the attention it feeds (ring attention: each step's send behind that step's
    attention, as far as it fits); the all-gather exchange is exposed either way."""
    cp_comm_type: Literal[CP_COMM_TYPES] = "p2p"
    """How context parallelism exchanges K and V (:mod:`topo.training.ring_attention`): ``p2p``, ring attention
    (Megatron-Core's default ``cp_comm_type``; Transformer Engine's ``AttnFuncWithCPAndKVP2P``); ``all_gather``: K
    and V all-gathered before the attention (again before its backward), their gradients reduce-scattered after
    it, exposed (Meta's Llama 3, arXiv 2407.21783 sec. 3.3.2; Transformer Engine's ``AttnFuncWithCPAndKVAllGather``);
    ``a2a``: DeepSpeed-Ulysses' all-to-alls of Q, K, V and the output (Transformer Engine's
    ``AttnFuncWithCPAndQKVOA2A``), exposed, the kernel over the whole sequence at ``1 / cp`` of the heads (each TP
    rank's query and key/value heads must divide by cp)."""
    pp_scatter_gather: Flag = True
    """Megatron's scatter/gather of pipeline sends (Narayanan et al. 2021, sec. 4.1): each TP rank sends 1/tp of
    the activation and the next stage all-gathers it over NVLink (False: every TP rank sends all of it)."""
    pipeline_schedule: Literal[PIPELINE_SCHEDULES] = "1f1b"
    """``1f1b``: (interleaved) 1F1B, bubble ``(p - 1) / v`` of a micro-batch's forward + backward (Narayanan et al.
    2021); ``dualpipe``: DeepSeek-V3's bidirectional schedule (arXiv 2412.19437 sec. 3.2.1, Table 2): bubble
    ``(p/2 - 1)(F&B + B - 3W)``, which with the backward split evenly into input (B) and weight (W) gradients and
    F&B = F + B + W is ``(p/2 - 1) F``; needs an even ``pp`` and ``vpp = 1``."""
    microbatch_group_size_per_vp_stage: PositiveInt | None = None
    """Interleaved 1F1B (``vpp > 1``): micro-batches each virtual stage runs back to back, forward and backward
    (Megatron-Core's ``microbatch_group_size_per_vp_stage``, default ``pp``, the depth-first schedule; Meta's
    ``N``, arXiv 2407.21783 sec. 3.3.2, Figure 6). Sets the warm-up (:meth:`warmup_chunks`). Megatron-Core allows
    ``pp <= g <= m`` with ``m mod g`` 0 or at least ``pp`` (NVIDIA/Megatron-LM@d98e8a64
    ``pipeline_parallel/schedules.py`` lines 1160-1180: else "dependency bubbles")."""
    pipeline_flushes: PositiveInt = 1
    """Pipeline schedules run per optimizer step, each over ``microbatches / pipeline_flushes`` micro-batches and
    each filling and draining the pipeline (NeMo AutoModel runs one per gradient-accumulation step,
    ``GBS / (LBS x dp)``; Megatron-LM one per step)."""
    overlap_pp: Flag | None = None
    """Pipeline sends hidden behind compute (Megatron-LM's ``overlap_p2p_comm``); false: exposed on the critical
    path. None (the default): on with an interleaved pipeline (``vpp > 1``), off at ``vpp`` 1, as Megatron-LM and
    NeMo set it: Megatron-LM's training script turns it on unless ``--no-overlap-p2p-communication`` is given and
    off without the interleaved schedule (NVIDIA/Megatron-LM@d98e8a64 ``megatron/training/arguments.py`` lines
    1000-1018 and 3118-3120); NeMo's ``MegatronCommOverlapCallback`` sets it exactly when ``pp > 1`` and ``vpp >
    1`` (NVIDIA/NeMo@8cfedd72 ``nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py`` lines 153-163).
    Resolved when the layout is built (:meth:`_pp_overlap_default`), so a layout always holds true or false. True
    at vpp 1 under 1F1B (pp > 1) is refused (:func:`check_layout`): Megatron-Core's non-interleaved schedule raises
    "Non-interleaved pipeline parallelism does not support overlapping p2p communication"
    (``megatron/core/pipeline_parallel/schedules.py`` lines 2181-2184 at the same commit)."""
    fp8_amax_pass: Flag = False
    """FP8 per-tensor current scaling as Transformer Engine ran it before v2.7: each cast to FP8 first reads its
    bf16 input once more, for the tensor's amax, in a kernel of its own (``nvte_compute_amax``, TE PR #1471), then
    casts. TE v2.7 (2025-10-01) fused the amax into the activation and norm kernels that produce the input (PRs
    #2004, #2013); delayed scaling and MXFP8 find their scales inside the cast. Needs ``precision = "fp8"`` and ``fp8_recipe``
    current (or unrecorded)."""
    fp8_amax_reduction: Flag | None = None
    """FP8 per-tensor delayed scaling as Transformer Engine runs it under Megatron-Core: each model chunk's forward
    of each micro-batch, and its backward, ends in a reduction of the rank's amaxes over the tensor x data x context
    parallel group (``torch.cat``, a blocking all-reduce on the compute stream, a fused history and scale update):
    :mod:`topo.training.fp8_amax`. None (the default): on with ``precision = "fp8"`` and ``fp8_recipe =
    "delayed"`` or unset (Megatron-Core's default recipe; :func:`delayed_scaling`), as TE's
    ``DelayedScaling(reduce_amax=True)`` default runs it, off otherwise
    (:func:`topo.training.fp8_amax.amax_reduced`); ``--jax-mesh`` sets it false (Flax's FP8 ops reduce no amax
    buffer, :data:`topo.training.jax_mesh.MAXTEXT_FP8_AMAX`). Under current scaling TE has no switch: with
    sequence parallelism and ``tp > 1`` each gathered input's amax is all-reduced over TP
    (:func:`topo.training.fp8_amax.sp_amax_reduced`), and false says no TE runs it (a JAX mesh). True needs precision
    fp8 with ``fp8_recipe`` delayed, current or unset. Its group: ``tp_only_amax_red``."""
    tp_only_amax_red: Flag = False
    """Megatron-Core's ``TransformerConfig.tp_only_amax_red`` (NVIDIA/Megatron-LM@d98e8a64
    ``megatron/core/transformer/transformer_config.py`` line 646): delayed scaling's amax reduction runs over the
    tensor x context parallel group instead of tensor x data x context (``parallel_state.get_amax_reduction_group``
    lines 1877-1900), so it stays inside each data-parallel replica (and each site when DP spans sites):
    :func:`topo.training.fp8_amax.amax_group`. True needs the reduction to run (delayed scaling,
    ``fp8_amax_reduction`` not false)."""
    fp8_scale_inverse_kernel: Flag = False
    """FP8 per-tensor delayed scaling as Transformer Engine 2.0-2.6 ran it: each quantisation first computes its
    scale inverse in a kernel of its own (``Float8Quantizer::create_tensor``'s ``at::reciprocal(scale)``), then
    casts; TE v2.7 (PR #1952) lets the cast write it (``kernels.toml`` ``[launch]``
    ``fp8_delayed_scale_inverse_kernels``). Needs ``precision = "fp8"`` and ``fp8_recipe = "delayed"`` or unset."""
    cudnn_version: str = CUDNN_NEWEST
    """The cuDNN the fused attention runs (the container's: ``topo/data/compute/cudnn_releases.toml`` lists each
    framework release's, with its source), ``9.MINOR[.PATCH[.BUILD]]``: Hopper and Blackwell attention read the
    published set of that version, the nearest older one between them (``kernels.toml [attention.cudnn]``,
    ``[attention.blackwell.cudnn]``, :mod:`topo.training.cudnn`). Default the newest published version (on Hopper
    cuDNN 9.19's set); no effect on Ampere (one table)."""
    te_version: str = TE_NEWEST
    """The Transformer Engine the run's container ships (``topo/data/compute/te_releases.toml`` lists each
    framework release's, with its source), ``1.MINOR`` or ``2.MINOR`` (optionally ``.PATCH``, ``.devN``): where
    TE's major versions differ in what a step pays (:mod:`topo.training.te_version`: 2.x copies a row-parallel
    FP8 layer's quantised output gradient into userbuffers' buffer, 1.x casts it there). Default the newest the file
    lists."""
    attention_fp8: Literal["", "fp8", "mxfp8"] = ""
    """Fused attention in FP8 (Transformer Engine's ``fp8_dpa``, Megatron-Core's ``fp8_dot_product_attention``) and
    the scaling its cuDNN SDPA runs: ``fp8`` (per-tensor) or ``mxfp8`` (TE's default under an MXFP8 recipe); ""
    BF16. Its backward computes the whole causal square, a sliding-window layer's too, at cuDNN's published FP8
    rate at that rate's head dim (64; ``kernels.toml [attention.<table>.fp8_band_backward]``,
    :func:`topo.training.kernels.attention_rate_flops`); the forward and other head dims keep the BF16 table's rate
    (assumption). Needs ``precision = "fp8"``."""
    overlap_ep: Flag = False
    """Expert all-to-alls hidden behind another micro-batch's compute (DeepSeek's DualPipe, Megatron-Core's
    ``overlap_moe_expert_parallel_comm``), as far as they fit."""
    ep_dispatcher: Literal["alltoall", "deepep"] = "alltoall"
    """How tokens reach their experts: ``alltoall`` (Megatron-Core's: one copy per (token, expert) pair) or
    ``deepep`` (DeepEP / HybridEP, Megatron-Core's flex dispatcher: a token crosses the scale-out network once per
    destination node and is forwarded over NVLink, inside a domain once per destination GPU)."""
    ep_flex_backend: Literal["hybridep", "deepep"] = "hybridep"
    """The flex dispatcher's kernels (``ep_dispatcher = "deepep"``; Megatron-Core's ``moe_flex_dispatcher_backend``):
    ``hybridep``, NVIDIA's HybridEP (Megatron-Bridge's performance recipes), whose forward dispatch all-gathers the
    routing map over the EP group and whose published figures bound its calls (:mod:`topo.training.ep_internode`);
    ``deepep``, DeepSeek's DeepEP V1, which counts its tokens per rank locally and whose kernels' published rates
    bound its calls. Only an EP group across NVLink domains tells them apart."""
    ep_comm_sms: PositiveInt = 20
    """Streaming multiprocessors the flex dispatcher's (``ep_dispatcher = "deepep"``) all-to-all kernels occupy
    while ``overlap_ep`` hides them behind compute: that compute runs on the GPU's other SMs meanwhile
    (DeepSeek-V3 report sec. 3.2.2: 20 of 132 SMs; DeepEP's and Megatron-Core's ``moe_deepep_num_sms`` default 20;
    HybridEP: the recipe's ``moe_hybridep_num_sms``). The ``alltoall`` dispatcher's NCCL send/recv kernels hold
    NCCL's p2p channels instead (:func:`topo.training.step.ep_held_sms`)."""
    nccl_min_ctas: Annotated[int, Field(strict=True, ge=1, le=64)] | None = None
    """The recipe's ``NCCL_MIN_CTAS``: NCCL raises every collective's channels (one CTA, one SM each) to at least
    this (``src/graph/connect.cc``); what the overlapped DP and CP collectives take from the compute beside them
    (:mod:`topo.training.comm_sms`). None: unset (NCCL's own channel count, the fabric profile's)."""
    nccl_max_ctas: Annotated[int, Field(strict=True, ge=1, le=64)] | None = None
    """The recipe's ``NCCL_MAX_CTAS``: NCCL caps every collective's channels at this; None: unset."""
    ep_dispatch_bytes: ElementBytes = 2.0
    """Bytes per element of the forward dispatch: 1 (FP8 dispatch, DeepSeek-V3 sec. 3.3.2) or 2 (BF16), nothing
    else (:data:`EP_DISPATCH_BYTES`); the combine and the backward all-to-alls stay BF16 (2)."""
    moe_grouped_gemm: Flag = True
    """The experts' GEMMs as one grouped kernel whose waves pack every local expert's tiles (Megatron-Core's
    ``moe_grouped_gemm``); False: a loop of per-expert GEMMs (``SequentialMLP``), each quantised alone."""
    moe_expert_kernels: Literal["multi_stream", "fused_mlp"] = "multi_stream"
    """How the grouped experts' GEMMs are issued (:mod:`topo.training.grouped_gemm`): ``multi_stream``, Transformer
    Engine's ``GroupedLinear`` (one cuBLASLt GEMM per local expert over 4 CUDA streams; every Hopper and Blackwell
    recipe up to 26.04); ``fused_mlp``, the op fuser's CuTe DSL fused grouped MLP (one kernel a pass for every
    expert, the GLU in fc1's epilogue; ``NVTE_CUTEDSL_FUSED_GROUPED_MLP=1``, MXFP8 on Blackwell: Megatron-Bridge's
    GB200 MXFP8 recipes from 26.06)."""
    moe_capacity_factor: Annotated[float, Field(gt=0)] | None = None
    """Experts padded (and tokens dropped) to this factor of the mean load (Megatron-Core's
    ``moe_expert_capacity_factor`` with ``moe_pad_expert_input_to_capacity``): static shapes, every expert GEMM
    that many rows; None: dropless (each rank its own load, the busiest rank's: ``moe_imbalance``)."""
    moe_expert_rank_capacity_factor: Annotated[float, Field(ge=1)] | None = None
    """HybridEP's static per-rank budget (Megatron-Core's ``moe_expert_rank_capacity_factor``): each expert rank's
    receive buffer and fused grouped-MLP buffer hold ``tokens x top-k x factor`` rows (its own tokens entering the
    MoE block), so no token count goes to the host (sync-free, CUDA-graph capturable); the dispatch still moves and
    the grouped GEMM still computes the rows actually routed (split sizes read on the device), and rows beyond the
    budget are dropped, after which Megatron-Core reruns the step unpadded (NVIDIA/Megatron-LM@d98e8a64
    ``token_dispatcher.py`` ``_HybridEPManager.setup_metadata``, ``moe/paged_stash.py``). Megatron-Bridge's
    full-iteration MXFP8 MoE recipes set 1.5. Needs ``ep_dispatcher = deepep`` with ``ep_flex_backend = hybridep``;
    None: dropless with a host sync per MoE layer (:func:`topo.training.operators.host_syncs`)."""
    moe_counts_aligned: Flag = False
    """Each local expert's token count arrives as a multiple of the FP8 row alignment: the router pads the counts
    (Megatron-Core's ``moe_router_padding_for_fp8``, since ``moe_router_padding_for_quantization``; off by
    default and in Megatron-Bridge's H100 / B200 Qwen3 and DeepSeek-V3 recipes) or the dispatch does (DeepEP's
    ``expert_alignment``; HybridEP's ``pad_multiple`` is always taken as such). Then the grouped experts' FP8
    padding copies are not run (:func:`topo.training.operators.fp8_padding_copies`)."""
    moe_routing: Literal[ROUTINGS] = "spread"  # routing.ROUTINGS: the routings it counts destinations of
    """Where a token's ``k`` routed experts land, which sets the copies a deduplicating dispatcher (``deepep``)
    sends (:mod:`topo.training.routing`): ``spread``, uniformly over the experts (a learned router, Megatron-Core's
    forced balancing); ``consecutive``, experts ``(t k + i) mod E`` for token ``t`` (NeMo AutoModel's
    ``FakeBalancedGate``, its benchmarks' balanced gate): one or two neighbouring ranks of one node; that gate
    computes no scores (no router GEMM, top-k or backward: :data:`topo.training.operators.FAKE_GATE_BYTES`)."""
    moe_router_fusion: Flag = False
    """The router's top-k, softmax and auxiliary-loss kernels fused (Megatron-Core's ``moe_router_fusion``): 31
    kernels instead of 72 to launch per MoE layer (``kernels.toml`` ``[launch]``)."""
    expert_bias_eager: Literal["fc2", "fc1_fc2", "none"] = "fc2"
    """Which expert biases (a model with ``moe.expert_bias``) the framework adds in eager per-expert passes
    outside the GEMM and activation kernels (:data:`topo.training.operators.EXPERT_BIAS_MOVES`): ``fc2``,
    Megatron-Core's ``TEGroupedMLP`` (fc1's bias added by Transformer Engine's ``GroupedLinear`` itself, built with
    ``skip_bias_add=False``, so the fused activation gets none: NVIDIA/Megatron-LM@92c8482e and @a811ac17
    ``moe/experts.py``; fc2's,
    weighted by the routing probabilities, through ``_apply_bias``); ``fc1_fc2``, NeMo AutoModel's
    ``GroupedExpertsDeepEP`` (both through its ``_apply_bias``); ``none``, both inside fused kernels (a fused
    grouped MLP whose epilogue adds them)."""
    expert_clamp_eager: Flag = True
    """The experts' activation clamp (a model with ``moe.glu_clamp``) runs in eager kernels of its own before the
    fused activation: Megatron-Core's ``weighted_bias_quick_geglu_impl`` chunks fc1's output, clamps each half and
    concatenates them outside its compiled kernel (:data:`topo.training.operators.EXPERT_CLAMP_MOVES`). False: the
    activation kernel clamps (NeMo AutoModel's compiled ``quick_geglu_deepep``; Transformer Engine's op fuser,
    ``ScaledClampedQGeGLU``)."""
    attention_bias_eager: Flag = True
    """The attention output projection's bias (a model with ``attention.out_bias``) is added in an eager pass
    of its own: Megatron-Core's ``linear_proj`` returns its bias (``skip_bias_add``) to the layer's
    bias-dropout-add, which runs unfused (``bias_dropout_fusion = False``, which Megatron-Core requires when the
    experts carry biases; :data:`topo.training.operators.ATTENTION_BIAS_MOVES`). False: the GEMM's epilogue adds
    it (NeMo AutoModel's ``o_proj``, a Transformer Engine ``Linear`` with its bias)."""
    rope_kernel: Literal["megatron", "te_fused"] = "megatron"
    """How the rotary embedding runs: ``megatron``, Megatron-Core's ``apply_rotary_pos_emb`` with
    ``apply_rope_fusion`` (Transformer Engine's fused kernel, one pass), which falls back to its unfused path when
    the model's ``attention.rope_concentration`` is not 1 (:data:`topo.training.operators.ROPE_UNFUSED_MOVES`);
    ``te_fused``, Transformer Engine's fused kernel whatever the factor (NeMo AutoModel's ``rope_fusion``)."""
    cross_entropy: Literal["fused", "te", "te_fp32_grad", "torch_bf16", "megatron_unfused"] = "fused"
    """The loss over the logits, by the implementation the framework calls (bytes per logit and kernels:
    ``topo/data/compute/cross_entropy.toml``, :func:`topo.training.cross_entropy.cross_entropy_moves`): ``fused``,
    Megatron-Core's native fused cross-entropy (``--cross-entropy-loss-fusion``, ``cross_entropy_fusion_impl``
    ``native``, Megatron-Core's default impl); ``te``, Transformer Engine's Triton cross-entropy of releases
    2.2-2.17 (``cross_entropy_fusion_impl = "te"``, the Megatron-Bridge performance recipes); ``te_fp32_grad``, the
    same from Transformer Engine 2.18 (an FP32 gradient); ``torch_bf16``, PyTorch's ``F.cross_entropy`` on bf16
    logits (NeMo AutoModel's ``MaskedCrossEntropy`` with ``fp32_upcast: false``); ``megatron_unfused``,
    Megatron-Core's ``vocab_parallel_cross_entropy`` without ``--cross-entropy-loss-fusion`` (the logits upcast to
    FP32 and worked on in place)."""
    mamba_mixer: Literal["megatron", "mamba_ssm"] = "megatron"
    """How the framework runs a Mamba-2 mixer in training (:func:`topo.training.operators._mamba_ops`):
    ``megatron``, Megatron-Core's ``MambaMixer`` (sequence-major activations copied to batch-major and back around
    ``mamba_split_conv1d_scan_combined``, ``z`` gating the SSD scan, then an ungated RMSNorm and ``out_proj``
    outside it); ``mamba_ssm``, the batch-major path of mamba_ssm's own ``Mamba2`` module and of NeMo AutoModel's
    ``NemotronV3Mamba2Mixer``, which hands the gated RMSNorm's weight and ``out_proj`` to
    ``mamba_split_conv1d_scan_combined``: no copies, an ungated scan, ``z`` applied in the norm kernel."""
    cuda_graph_scope: tuple[Literal["attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba",
                                    "full_iteration"], ...] = ()
    """Parts captured in CUDA graphs (Megatron-Core's ``cuda_graph_scope``; ``full_iteration`` for
    ``cuda_graph_impl = "full_iteration"``): their kernels cost the host no launches. ``moe_router`` takes the
    MoE layer's norm, router and shared experts; ``moe`` the whole MoE block (token-drop only); default: none
    (eager: the host launches every kernel)."""
    moe_imbalance: Annotated[float, Field(ge=1)] | None = None
    """Tokens on the busiest expert rank over the mean under dropless routing, an override (1: exactly balanced);
    None: the expected maximum over the EP ranks of a uniform router's load
    (:func:`topo.training.operators.busiest_rank_load`; exact for forced balancing, a floor for a trained router;
    1 under the ``consecutive`` gate). A capacity factor pads every expert to its capacity instead."""

    @field_validator("recompute_modules", mode="before")
    @classmethod
    def _no_mamba_module(cls, v):
        if isinstance(v, (list, tuple)) and "mamba" in v:
            raise ValueError(MAMBA_MODULE_REFUSAL)
        return v

    @field_validator("cudnn_version", mode="before")
    @classmethod
    def _known_cudnn(cls, v):
        if not isinstance(v, str):  # a TOML number: 9.10 would read as 9.1
            what = "a number" if isinstance(v, (int, float)) and not isinstance(v, bool) else "not text"
            raise ValueError(f"{v!r} is {what}; write the version as text, quoted: \"9.13.1\"")
        parse_cudnn(v)  # a ValueError naming the value and the form allowed
        return v.strip()

    @field_validator("te_version", mode="before")
    @classmethod
    def _known_te(cls, v):
        parse_te_version(v)  # a ValueError naming the value and the form allowed (text only: 2.10 would read 2.1)
        return v.strip()

    @field_validator("tp_overlap_config")
    @classmethod
    def _known_tp_overlap(cls, v):
        if v not in config_names():
            raise ValueError(f"unknown userbuffers configuration {v!r}; allowed: {', '.join(config_names())}")
        return v

    @field_validator("remat_policy")
    @classmethod
    def _known_policy(cls, v, info: ValidationInfo):
        if v is None:
            return v
        settings = remat_settings(v)  # RematPolicyError (a ValueError) names what is allowed
        given = {k: info.data.get(k) for k in settings}
        if given != settings:  # the user set recompute or recompute_modules beside the policy
            raise ValueError(f"{v!r} sets recompute and recompute_modules itself; give one or the other")
        return v

    @model_validator(mode="before")
    @classmethod
    def _remat_sets_recompute(cls, data):
        if not isinstance(data, dict) or data.get("remat_policy") is None:
            return data
        try:
            settings = remat_settings(data["remat_policy"])
        except RematPolicyError:
            return data  # the field's validator names it
        if data.get("recompute_modules") or data.get("recompute") not in (None, settings["recompute"]):
            return data  # the field's validator says that both were given (an explicit "none" too: walk3)
        return {**data, **settings}

    @model_validator(mode="before")
    @classmethod
    def _pp_overlap_default(cls, data):
        """The one place ``overlap_pp``'s default is decided (see the field): on with ``vpp > 1``."""
        if not isinstance(data, dict) or data.get("overlap_pp") is not None:
            return data
        try:
            interleaved = int(data.get("vpp") or 1) > 1
        except (TypeError, ValueError):
            return data  # the vpp field's validator names the bad value
        return {**data, "overlap_pp": interleaved}

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def expert_tp(self) -> int:
        """Expert-tensor parallel size (``etp``, default ``tp``)."""
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        """The experts' replicas: ``tp x cp x dp / (etp x ep)``."""
        return max(1, self.tp * self.cp * self.dp // (self.expert_tp * self.ep))

    @property
    def reduce_bytes(self) -> float:
        """Bytes per parameter the data-parallel gradient reduction moves."""
        return self.grad_reduce_bytes or self.grad_bytes

    @property
    def weight_gather_bytes(self) -> float:
        """Bytes per parameter of the data-parallel weight all-gather and the gathered unit copies."""
        return self.gather_bytes or self.weight_bytes

    @property
    def expert_reduce_bytes(self) -> float:
        """Bytes per expert parameter the experts' data-parallel gradient reduction moves."""
        return self.expert_grad_reduce_bytes or self.reduce_bytes

    @property
    def microbatches(self) -> int:
        """Micro-batches per replica per step (m)."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def zero_stage(self) -> int:
        """What is sharded over data parallelism: 0 none, 1 optimizer, 2 + gradients, 3 + weights."""
        return {"none": 0, "zero1": 1, "zero2": 2, "fsdp_grad_op": 2, "zero3": 3, "fsdp": 3}[self.dp_sharding]

    @property
    def fsdp_unit_rounds(self) -> int:
        """Times a step each ZeRO-3 / FSDP unit is gathered (before its forward, and before its backward too when
        it reshards after the forward) and its gradients reduce-scattered: every micro-batch, or with
        ``fsdp_pipeline_sync = "step"`` once per pipeline schedule run (``pipeline_flushes``). The one rule the
        step's traffic, its DP exposure and the regions' passes read."""
        return self.pipeline_flushes if self.fsdp_pipeline_sync == "step" else self.microbatches

    @property
    def dp_reduce_behind_backward(self) -> bool:
        """Whether the gradients' data-parallel reduction runs behind backward compute: True but with
        ``fsdp_pipeline_sync = "step"``, where PyTorch's pipelining reduce-scatters every unit after the stage's last
        backward (pytorch/pytorch@01386103 ``torch/distributed/pipelining/stage.py`` ``_post_backward``, run by
        pytorch/pytorch@00722e64 ``schedules.py`` ``Schedule1F1B`` after its cooldown) and the optimizer waits for
        them: behind no compute. The one rule of the one-site step's exposure (``step._dp_exposed``) and of the
        backward a region's cross-site phase hides behind (:func:`topo.training.multisite.dp_window_s`)."""
        return self.fsdp_pipeline_sync != "step"

    @property
    def dp_shard_size(self) -> int:
        """Data-parallel ranks the sharding spans (``dp_shard``, default ``dp``)."""
        return self.dp_shard or self.dp

    @property
    def expert_dp_shard_size(self) -> int:
        """The experts' replicas their sharding spans (``expert_dp_shard``, default ``expert_dp``)."""
        return self.expert_dp_shard or self.expert_dp

    def sharded(self, dense: float, expert: float, stage: int) -> float:
        """``dense`` and ``expert`` (parameters, or bytes of them) left on one GPU when ZeRO stage ``stage`` or
        above shards them: dense ones over the data x context ranks of a shard group (all of them without
        ``dp_shard``), experts over their replicas (those of a shard group with ``expert_dp_shard``; the ZeRO
        divisor, one place)."""
        return divided(dense, expert, self.shard_divisors(stage))

    def shard_divisors(self, stage: int) -> tuple[int, int]:
        """The divisors :meth:`sharded` applies at ZeRO stage ``stage``, (dense, expert): the data x context ranks
        of a shard group and the experts' replicas of theirs where that stage or above shards, else 1 and 1 (a loop
        over a layout's pipeline ranks reads them once, :func:`divided`); the optimizer's (stage 1) over all of
        them with ``dp_outer_sharding = "optim"``."""
        on = self.zero_stage >= stage
        if on and stage == 1 and self.dp_outer_sharding == "optim":  # the replicas shard the optimizer state too
            return self.dp * self.cp, self.expert_dp
        return (self.dp_shard_size * self.cp if on else 1), (self.expert_dp_shard_size if on else 1)

    @property
    def vp_group(self) -> int:
        """Micro-batches per virtual stage group, ``g`` (``microbatch_group_size_per_vp_stage``, default ``pp``)."""
        return self.microbatch_group_size_per_vp_stage or self.pp

    def warmup_chunks(self, stage: int, extra: int = 0) -> int:
        """Forward chunk-micro-batches pipeline rank ``stage`` runs before its first backward, as Megatron-Core
        counts them (NVIDIA/Megatron-LM@d98e8a64 ``pipeline_parallel/schedules.py`` ``get_pp_rank_microbatches``,
        lines 955-972): ``p - i - 1`` for 1F1B, ``2 (p - i - 1) + (v - 1) g`` interleaved, ``extra`` more (1
        with ``overlap_moe_expert_parallel_comm``), never more than the schedule's ``m v``.

        Parameters
        ----------
        stage : int
            The pipeline rank ``i``, 0-based.
        extra : int
            Forwards the interleaved schedule adds before its steady state.

        Returns
        -------
        int
        """
        p, v, m = self.pp, self.vpp, self.microbatches // self.pipeline_flushes
        if p == 1:
            return 0
        if v == 1:
            n = p - stage - 1
        else:
            n = 2 * (p - stage - 1) + (v - 1) * self.vp_group + extra
        return min(m * v, n)

    def order(self) -> list[str]:
        return [d.strip() for d in self.rank_order.replace(",", "-").split("-") if d.strip()]

    def describe(self) -> str:
        parts = [f"{d}={getattr(self, d)}" for d in ("tp", "cp", "pp", "dp", "ep") if getattr(self, d) > 1]
        if self.vpp > 1:
            parts.append(f"vpp={self.vpp}")
        return " ".join(parts or ["dp=1"]) + f" mb={self.micro_batch} {self.recompute} {self.dp_sharding}"


def make_layout(source: str = "layout", **kw) -> ParallelLayout:
    """A ParallelLayout from keyword values; bad values raise TopoError keyed by the option."""
    try:
        return ParallelLayout.model_validate({k: v for k, v in kw.items() if v is not None})
    except ValidationError as exc:
        raise validation_error(exc, source, ParallelLayout) from None


def layout_pairs(text: str) -> dict:
    """The fields of ``key=value`` pairs separated by commas (``tp=8,pp=16,dp=64,global_batch=2048``; values read
    as TOML values, else as text; a list keeps its commas: ``cuda_graph_scope=["attn","moe_router"]``); a key
    given twice is refused, as a TOML file's would be."""
    kw = {}
    for part in re.split(r",(?![^\[]*\])", text):  # a comma inside [...] belongs to a list value
        key, eq, value = part.strip().partition("=")
        if not eq or not key.strip():
            raise TopoError(f"cannot read {part!r}; write key=value pairs such as tp=8,pp=16,dp=64,global_batch=2048",
                            key="layout")
        if key.strip() in kw:  # a TOML table refuses a key given twice too (tomllib); one of them is a mistake
            raise TopoError(f"{key.strip()} is given twice ({text!r}); give each key once", key="layout")
        try:
            kw[key.strip()] = loads_toml(f"v = {value.strip()}", "layout")["v"]
        except tomllib.TOMLDecodeError:
            kw[key.strip()] = value.strip()
        except TopoError as exc:  # nested too deep to read
            raise TopoError(f"{key.strip()}: {exc.message}", key="layout") from None
    return kw


def load_layout(path, **overrides) -> ParallelLayout:
    """A ParallelLayout from a TOML file (keys as :class:`ParallelLayout`'s fields), or from ``key=value`` pairs
    (:func:`layout_pairs`) when ``path`` is no file and holds an ``=``, with keyword ``overrides`` on top; bad
    values raise TopoError naming the file (or ``layout``) and the key."""
    data, source = layout_fields(path)
    data.update({k: v for k, v in overrides.items() if v is not None})
    return make_layout(source=source, **data)


def layout_fields(path) -> tuple[dict, str]:
    """The fields a layout gives, unvalidated, and the source its errors name: a TOML file's keys (source: its
    path), or ``key=value`` pairs (:func:`layout_pairs`; source ``layout``) when ``path`` is no file and holds an
    ``=``."""
    text = str(path)
    if "=" in text and not text.endswith(".toml") and not is_input_file(text):
        return layout_pairs(text), "layout"
    if not text.endswith(".toml") and not is_input_file(text):  # walk41: `tp8` was "--layout: no such layout file"
        raise TopoError("no such layout file, and no key=value pairs; give a layout file (.toml) or pairs such as "
                        "tp=8,pp=16,dp=64,global_batch=2048", source=text)
    return read_toml(path, "layout file"), text


def sends_unoverlappable(pp: int, vpp: int, pipeline_schedule: str) -> bool:
    """Whether a pipeline's sends cannot overlap compute (``overlap_pp`` true is refused): Megatron-Core's
    non-interleaved 1F1B with sends to make (``pp > 1``, ``vpp`` 1) raises on ``overlap_p2p_comm``
    (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/pipeline_parallel/schedules.py`` lines 2181-2184) and its training
    script turns it off there (``megatron/training/arguments.py`` lines 1010-1018). DualPipe overlaps its sends by
    design; with ``pp`` 1 there are none.

    Parameters
    ----------
    pp, vpp : int
        Pipeline stages and virtual stages a rank.
    pipeline_schedule : str
        ``1f1b`` or ``dualpipe``.

    Returns
    -------
    bool
    """
    return pp > 1 and vpp == 1 and pipeline_schedule == "1f1b"


def check_layout(model: ModelSpec, lay: ParallelLayout, *, gpus: int | None = None, gpus_per_domain: int | None = None,
                 source: str = "layout") -> None:
    """Raise TopoError (keyed by option) if ``lay`` cannot run ``model`` on ``gpus`` GPUs."""
    def bad(key, msg):
        raise TopoError(msg, source=source, key=key)

    if gpus is not None and lay.gpus != gpus:
        bad("dp", f"tp x cp x pp x dp = {lay.tp} x {lay.cp} x {lay.pp} x {lay.dp} = {format_count(lay.gpus)}, "
                  f"not the {format_count(gpus)} GPUs of the job")
    check_model_split(model, lay, gpus_per_domain=gpus_per_domain, source=source)
    _check_options(model, lay, bad, source)
    units = model.layers + (2 if lay.pipeline_embedding else 0)
    if lay.pipeline_layout is None and units < lay.pp * lay.vpp:
        what = f"the {model.layers} layers" + (" + embedding + loss" if lay.pipeline_embedding else "")
        hint = "" if lay.pipeline_embedding else "; pipeline_embedding counts the embedding and loss as layers"
        bad("pp", f"{lay.pp} stages x {lay.vpp} virtual stages = {lay.pp * lay.vpp} chunks exceed {what}; "
                  f"allowed: pp x vpp <= {units}{hint}")
    _check_vp_group(lay, check_batch(lay, bad), bad)
    if lay.ep > 1:
        _check_ep(model, lay, bad)
    elif lay.etp is not None and lay.etp != lay.tp and model.moe is None:
        bad("etp", f"{lay.etp} needs a mixture-of-experts model; {model.name} is dense")
    if lay.gpus_per_domain_used is not None and gpus_per_domain is not None \
            and lay.gpus_per_domain_used > gpus_per_domain:
        bad("gpus_per_domain_used", f"{lay.gpus_per_domain_used} exceeds the {gpus_per_domain} GPUs of an NVLink "
                                    f"domain; allowed: 1 to {gpus_per_domain}")


def _check_ep(model: ModelSpec, lay: ParallelLayout, bad) -> None:
    """Expert parallelism against the model's experts and a stage's ranks, each refusal with what is allowed; and
    ``moe_imbalance`` within what one EP rank can hold: a token sends at most ``min(k, E / ep)`` of its ``k``
    copies to one rank (its top-k experts are distinct, the rank holds ``E / ep``), the mean is ``k / ep``."""
    if model.moe is None:
        bad("ep", f"{lay.ep} needs a mixture-of-experts model; {model.name} is dense")
    m = model.moe
    if m.experts % lay.ep:
        bad("ep", f"{lay.ep} does not divide the {m.experts} experts; allowed: a divisor of {m.experts}")
    ranks = lay.tp * lay.cp * lay.dp
    if ranks % (lay.ep * lay.expert_tp):
        fits = [d for d in range(1, m.experts + 1) if m.experts % d == 0 and ranks % (d * lay.expert_tp) == 0]
        bad("ep", f"ep x etp = {lay.ep} x {lay.expert_tp} does not divide the tp x cp x dp = {ranks} ranks of a "
                  f"pipeline stage (experts are laid out over them); allowed at etp {lay.expert_tp}, the divisors of the "
                  f"{m.experts} experts that do: ep {', '.join(map(str, fits))}")
    if m.expert_ffn_hidden % lay.expert_tp:
        bad("etp", f"{lay.expert_tp} does not divide the experts' FFN size {m.expert_ffn_hidden}")
    local = m.experts // lay.ep
    most = lay.ep * min(m.active_experts, local) / m.active_experts
    if lay.moe_imbalance is not None and lay.moe_imbalance > most:
        bad("moe_imbalance", f"{lay.moe_imbalance:g} is more than one of {lay.ep} EP ranks can carry: a token sends "
                             f"it at most min(top-k {m.active_experts}, {count_noun(local, 'local expert')}) of "
                             f"its {m.active_experts} copies, against {m.active_experts}/{lay.ep} on average; "
                             f"allowed: 1 to {most:g}")


def check_model_split(model: ModelSpec, lay: ParallelLayout, *, gpus_per_domain: int | None = None,
                      source: str = "layout") -> None:
    """:func:`check_layout`'s first rules, those of the model and the sizes alone (no dp, no batch): the rank order,
    tp against the heads and the FFN, Mamba and all-to-all splits, tp against the NVLink domain, cp against the
    sequence, the pipeline's interleaving and schedule. A region's job runs them before its batch's split over the
    sites, in one site's order (tidy84).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    gpus_per_domain : int, optional
        The NVLink domain's GPUs (``tp`` larger is refused without ``tp_across_domains``); ``None`` skips it.
    source : str
        The refusal's source.

    Raises
    ------
    TopoError
        Keyed by the layout field at fault, saying what is allowed.
    """
    def bad(key, msg):
        raise TopoError(msg, source=source, key=key)

    order = lay.order()
    if sorted(order) != sorted(DIMENSIONS):
        bad("rank_order", f"must name each of {', '.join(DIMENSIONS)} once, got {lay.rank_order!r}")
    if model.heads % lay.tp:
        bad("tp", f"{lay.tp} does not divide the {model.heads} attention heads; allowed: a divisor of "
                  f"{model.heads}")
    kv = model.num_kv_heads
    if kv % lay.tp and lay.tp % kv:
        bad("tp", f"{lay.tp} neither divides nor is a multiple of the {kv} key/value heads; allowed: a divisor or "
                  f"a multiple of {kv}")
    if model.ffn_hidden % lay.tp:
        bad("tp", f"{lay.tp} does not divide ffn_hidden {model.ffn_hidden}")
    _check_mamba(model, lay, bad)
    _check_a2a(model, lay, bad)
    if gpus_per_domain is not None and lay.tp > gpus_per_domain and not lay.tp_across_domains:
        bad("tp", f"{lay.tp} is larger than the {gpus_per_domain}-GPU NVLink domain; allow it with "
                  f"tp_across_domains")
    seq = lay.seq_len or model.seq_len
    if seq % (lay.cp * (2 if lay.cp > 1 else 1)):
        bad("cp", f"sequence length {seq} does not split into 2 x {lay.cp} chunks (load-balanced causal CP)")
    if lay.vpp > 1 and lay.pp == 1:
        bad("vpp", f"interleaving ({lay.vpp} virtual stages) needs pp > 1")
    if lay.overlap_pp and sends_unoverlappable(lay.pp, lay.vpp, lay.pipeline_schedule):
        bad("overlap_pp", "true needs an interleaved pipeline (vpp > 1): Megatron-Core's non-interleaved 1F1B "
                          "schedule raises on overlap_p2p_comm (its training script turns it off at vpp 1); "
                          "allowed at vpp 1: false")
    if lay.pipeline_schedule == "dualpipe" and (lay.vpp > 1 or lay.pp % 2):
        bad("pipeline_schedule", f"dualpipe needs an even pp and vpp = 1, got pp {lay.pp}, vpp {lay.vpp}; "
                                 f"allowed: 1f1b")


def check_batch(lay: ParallelLayout, bad) -> int:
    """The global batch's splits: into dp x micro_batch, into the pipeline flushes, and (interleaved 1F1B) into
    groups of pp micro-batches; each refusal says what is allowed.

    Parameters
    ----------
    lay : ParallelLayout
        The layout whose ``global_batch`` is checked, in its own figures (a region's: the whole job's, walk29).
    bad : callable
        ``bad(key, message)``, which raises.

    Returns
    -------
    int
        The micro-batches per pipeline flush.
    """
    if lay.global_batch % (lay.dp * lay.micro_batch):
        bad("global_batch", f"{lay.global_batch} sequences do not split into dp ({lay.dp}) x micro_batch "
                            f"({lay.micro_batch}) = {lay.dp * lay.micro_batch}; "
                            f"{batch_allowed(lay.global_batch, lay.dp * lay.micro_batch)}")
    if lay.microbatches % lay.pipeline_flushes:
        bad("pipeline_flushes", f"{lay.pipeline_flushes} does not divide the {lay.microbatches} micro-batches per "
                                f"step; allowed: a divisor of {lay.microbatches}")
    per_flush = lay.microbatches // lay.pipeline_flushes
    if lay.vpp > 1 and per_flush % lay.pp:
        unit = lay.dp * lay.micro_batch * lay.pipeline_flushes * lay.pp
        bad("global_batch", f"interleaved 1F1B needs micro-batches per schedule ({per_flush}) divisible by pp "
                            f"({lay.pp}); {batch_allowed(lay.global_batch, unit)} (dp x micro_batch x "
                            f"pipeline_flushes x pp)")
    return per_flush


def batch_allowed(global_batch: int, unit: int) -> str:
    """The ``allowed:`` part of an error for a global batch that is not a multiple of ``unit`` sequences (dp x
    micro_batch, or more): the rule and its nearest values.

    Parameters
    ----------
    global_batch : int
        The sequences asked for.
    unit : int
        What the batch must be a multiple of.

    Returns
    -------
    str
        ``allowed: a multiple of UNIT (nearest: BELOW or ABOVE)``; only ABOVE when BELOW would be 0.

    Examples
    --------
    >>> batch_allowed(2320, 48)
    'allowed: a multiple of 48 (nearest: 2,304 or 2,352)'
    >>> batch_allowed(10, 48)
    'allowed: a multiple of 48 (nearest: 48)'
    """
    below, above = global_batch // unit * unit, (global_batch // unit + 1) * unit
    near = f"{format_count(below)} or {format_count(above)}" if below else format_count(above)
    return f"allowed: a multiple of {unit:,} (nearest: {near})"


def _check_vp_group(lay: ParallelLayout, m: int, bad) -> None:
    """Megatron-Core's bounds on ``microbatch_group_size_per_vp_stage`` (its doc; ``m``: one schedule's
    micro-batches)."""
    g = lay.microbatch_group_size_per_vp_stage
    key = "microbatch_group_size_per_vp_stage"
    if g is None:
        return
    if lay.vpp == 1:
        bad(key, f"{g} needs an interleaved pipeline (vpp > 1), got vpp 1; allowed: unset")
    if not lay.pp <= g <= m:
        bad(key, f"{g} is outside [pp, micro-batches per schedule] = [{lay.pp}, {m}] (Megatron-Core's range)")
    if 0 < m % g < lay.pp:
        bad(key, f"{g} leaves a last group of {m % g} micro-batches, fewer than pp ({lay.pp}); allowed: a g with "
                 f"{m} mod g = 0 or >= {lay.pp}")


def _check_offload_modules(model: ModelSpec, lay: ParallelLayout, bad) -> None:
    """Megatron-Core's rules for ``offload_modules`` (NVIDIA/Megatron-LM@2a75ac12, the submodule
    NVIDIA-NeMo/Megatron-Bridge@067f987d pins: ``megatron/core/transformer/transformer_config.py`` lines 1905-1959;
    ``megatron/core/transformer/moe/experts.py`` lines 349-350: ``expert_fc1`` / ``moe_act`` only unfused). The
    whole-MoE-block refusal reads :func:`.recomputed_modules.modules_recomputed`, as the step does: Megatron-Core
    refuses MoE offloading beside ``moe`` only under selective granularity (NVIDIA/Megatron-LM@d98e8a64
    ``transformer_config.py`` lines 2165-2175), and under full the modules recompute nothing."""
    mods, key = set(lay.offload_modules), "offload_modules"
    if not mods:
        return
    shown = ",".join(lay.offload_modules)
    if lay.activation_offload_layers:
        bad(key, f"{shown} beside activation_offload_layers {lay.activation_offload_layers}: Megatron-Core offloads "
                 f"whole layers or modules, not both; allowed with it: none")
    if "attn_proj" in mods and "core_attn" not in mods:
        bad(key, f"{shown}: attn_proj needs core_attn (its input is core_attn's output, which core_attn's backward "
                 f"reads); allowed: core_attn,attn_proj")
    moe_mods = mods & {"expert_fc1", "moe_act", "fused_group_mlp"}
    if moe_mods and model.moe is None:
        bad(key, f"{shown}: {','.join(sorted(moe_mods))} are MoE modules and {model.name} has no MoE block; "
                 f"allowed: core_attn, attn_proj")
    if moe_mods and "moe" in modules_recomputed(lay):  # not under full: Megatron-Core's rule is selective-only
        bad(key, f"{shown}: the whole MoE block is recomputed (moe in recompute_modules), so nothing inside it is "
                 f"saved to offload; allowed with it: core_attn, attn_proj")
    if "fused_group_mlp" in mods and lay.moe_expert_kernels != "fused_mlp":
        bad(key, f"{shown}: fused_group_mlp offloads the fused grouped MLP, which moe_expert_kernels "
                 f"{lay.moe_expert_kernels} does not run; allowed with it: expert_fc1, moe_act")
    if "fused_group_mlp" in mods and mods & {"expert_fc1", "moe_act"}:
        bad(key, f"{shown}: fused_group_mlp offloads the whole grouped MLP; allowed with it: not expert_fc1 or moe_act")
    if mods & {"expert_fc1", "moe_act"} and lay.moe_expert_kernels == "fused_mlp":
        bad(key, f"{shown}: expert_fc1 and moe_act are offloaded only from the unfused experts; moe_expert_kernels "
                 f"fused_mlp allows fused_group_mlp")


def _check_options(model: ModelSpec, lay: ParallelLayout, bad, source: str) -> None:
    """:func:`check_layout`'s rules for the options beside the sizes: activation offloading, hybrid sharding, CUDA
    graph scopes, the FP8 recipe and a recipe's pipeline layout (``bad(key, message)`` raises)."""
    if lay.activation_offload_layers:
        n = lay.activation_offload_layers
        if n >= model.layers:
            bad("activation_offload_layers", f"{n} is not fewer than the model's {model.layers} layers; allowed: "
                                             f"0 to {model.layers - 1}")
        if lay.pp > 1:
            bad("activation_offload_layers", f"{n} needs pp = 1 (Megatron-Core offloads activations only without "
                                             f"pipeline parallelism), got pp {lay.pp}; allowed with pp > 1: 0")
        if lay.recompute != "none" or lay.recompute_modules:
            bad("activation_offload_layers", f"{n} needs no recomputation (Megatron-Core offloads activations only "
                                             f"without it); allowed with recompute: 0")
    _check_offload_modules(model, lay, bad)
    if lay.wgrad_output == "autograd" and lay.grad_bytes != 2:
        bad("grad_bytes", f"{lay.grad_bytes:g} with wgrad_output autograd: PyTorch keeps param.grad in the "
                          f"parameter's 16-bit dtype, as the GEMM writes it (accumulate_grad.h); allowed with "
                          f"autograd: grad_bytes 2, or wgrad_output main_grad for an fp32 gradient")
    _check_dp_overlaps(lay, bad)
    if not lay.fsdp_reshard_after_forward and lay.zero_stage < 3:
        bad("fsdp_reshard_after_forward", f"false keeps gathered weights, which only ZeRO-3 / FSDP gathers per "
                                          f"unit; dp_sharding is {lay.dp_sharding}; allowed with it: true")
    _check_shard_groups(lay, bad)
    _check_pipeline_sync(lay, bad)
    _check_bf16_layers(model, lay, bad)
    _check_applies(model, lay, bad)
    if lay.fp8_amax_pass and lay.precision != "fp8":
        bad("fp8_amax_pass", f"true prices the amax pass of FP8 casts, which precision {lay.precision} has none "
                             f"of; allowed with precision {lay.precision}: false")
    if lay.fp8_param_gather and lay.precision != "fp8":
        bad("fp8_param_gather", f"true gathers FP8 weights, which precision {lay.precision} has none of; "
                                f"allowed with precision {lay.precision}: false")
    if lay.attention_fp8 and lay.precision != "fp8":
        bad("attention_fp8", f"{lay.attention_fp8} runs attention in FP8, which precision {lay.precision} has none "
                             f"of; allowed with precision {lay.precision}: \"\" (BF16 attention)")
    if lay.fp8_recipe is not None and lay.precision != "fp8":
        bad("fp8_recipe", f"{lay.fp8_recipe} needs precision fp8, got {lay.precision}; allowed with "
                          f"{lay.precision}: none")
    if lay.fp8_amax_pass and lay.fp8_recipe not in (None, "current"):
        bad("fp8_amax_pass", f"true is current scaling's amax pass; fp8_recipe {lay.fp8_recipe} finds its scales "
                             f"inside the cast; allowed with fp8_recipe {lay.fp8_recipe}: false")
    for key in ("fp8_scale_inverse_kernel", "tp_only_amax_red"):
        _check_delayed(lay, key, bad)
    if lay.fp8_amax_reduction and not (delayed_scaling(lay) or current_scaling(lay)):
        bad("fp8_amax_reduction", f"true is Transformer Engine's per-tensor amax all-reduce; got precision "
                                  f"{lay.precision}, fp8_recipe {_shown(lay.fp8_recipe)}; allowed: precision fp8 "
                                  f"with fp8_recipe delayed, current or unset, else false")
    if lay.tp_only_amax_red and lay.fp8_amax_reduction is False:
        bad("tp_only_amax_red", "true picks the amax reduction's group; fp8_amax_reduction false runs none; "
                                "allowed with it: false")
    if lay.moe_expert_kernels == "fused_mlp" and (lay.fp8_recipe != "mxfp8" or not lay.moe_grouped_gemm):
        bad("moe_expert_kernels", f"fused_mlp is the CuTe DSL fused grouped MLP, which runs MXFP8 grouped experts "
                                  f"only; got fp8_recipe {_shown(lay.fp8_recipe)}, moe_grouped_gemm "
                                  f"{_shown(lay.moe_grouped_gemm)}; allowed with them: multi_stream")
    _check_userbuffers_recipe(lay, bad)
    _check_nvfp4(lay, bad)
    _check_module_recipes(lay, bad)
    _check_graph_scope(lay, bad)
    _check_flex_dispatcher(model, lay, bad)
    if lay.pipeline_layout is not None:
        if lay.pipeline_embedding:
            bad("pipeline_embedding", "a pipeline_layout places the embedding and the loss itself; allowed with "
                                      "pipeline_layout: false")
        layout_chunks(lay.pipeline_layout, chunks=lay.pp * lay.vpp, layers=model.layers,
                      mtp_layers=model.mtp_layers, source=source)


EP_DISPATCH_BYTES = {1.0: "FP8", 2.0: "BF16"}
"""The widths a forward dispatch carries its tokens at: FP8 (DeepSeek-V3 sec. 3.3.2; DeepEP's ``use_fp8``,
Megatron-Core's ``fused_a2a.py`` ``fp8_dispatch``) or BF16, the activations' 16 bits; no framework dispatches at
another width."""


def deepep_config_ranks() -> tuple[int, ...]:
    """EP sizes DeepEP's recommended dispatch and combine configs cover (``topo/data/compute/ep_buffers.toml``,
    deepseek-ai/DeepEP@94a9f8f6 ``Buffer.get_dispatch_config``): Megatron-Core's ``get_buffer`` asks them for its
    group, and DeepEP asserts on any other size."""
    global _DEEPEP_RANKS
    if _DEEPEP_RANKS is None:
        table = tomllib.loads((data_dir("compute") / "ep_buffers.toml").read_text(encoding="utf-8"))
        _DEEPEP_RANKS = tuple(sorted(int(k) for k in table["deepep_dispatch_config"]["ranks"]))
    return _DEEPEP_RANKS


_DEEPEP_RANKS: tuple[int, ...] | None = None


def _check_flex_dispatcher(model: ModelSpec, lay: ParallelLayout, bad) -> None:
    """The dispatchers' rules: the forward dispatch's width (:data:`EP_DISPATCH_BYTES`); HybridEP's static rank
    budget needs HybridEP, an EP group and dropless routing; the dispatcher itself needs an expert group
    (``ep x etp > 1``)."""
    if lay.ep_dispatch_bytes not in EP_DISPATCH_BYTES:
        bad("ep_dispatch_bytes", f"{lay.ep_dispatch_bytes:g} is not a width the forward dispatch carries tokens at; "
                                 f"allowed: 1 (FP8 dispatch) or 2 (BF16, the default)")
    if lay.moe_expert_rank_capacity_factor is not None and (lay.ep_dispatcher, lay.ep_flex_backend) != (
            "deepep", "hybridep"):
        backend = lay.ep_dispatcher if lay.ep_dispatcher != "deepep" else f"deepep/{lay.ep_flex_backend}"
        bad("moe_expert_rank_capacity_factor", f"{lay.moe_expert_rank_capacity_factor} is HybridEP's static rank "
                                               f"budget, got dispatcher {backend}; allowed with it: none (or set "
                                               f"ep_dispatcher=deepep, ep_flex_backend=hybridep)")
    if lay.moe_expert_rank_capacity_factor is not None and lay.ep == 1:
        # topo's limit, not Megatron's: at etp > 1 the flex dispatcher runs over the etp group (rev48 (b))
        mcore = (f"Megatron-Core's flex dispatcher runs over the etp group at etp {lay.expert_tp}; topo does not "
                 "model its buffer there" if lay.expert_tp > 1 else "nor does Megatron-Core's flex dispatcher run "
                 "at ep x etp = 1")
        bad("moe_expert_rank_capacity_factor", f"{lay.moe_expert_rank_capacity_factor} budgets each expert rank's "
                                               f"HybridEP receive buffer, but at ep 1 topo prices no expert-parallel "
                                               f"exchange ({mcore}); allowed with ep 1: none")
    if lay.moe_expert_rank_capacity_factor is not None and lay.moe_capacity_factor is not None:
        bad("moe_expert_rank_capacity_factor", f"{lay.moe_expert_rank_capacity_factor} budgets dropless routing, "
                                               f"but moe_capacity_factor {lay.moe_capacity_factor} pads every "
                                               f"expert already; allowed with it: none")
    if model.moe is not None and lay.ep_dispatcher == "deepep" and lay.ep * lay.expert_tp == 1:
        # Megatron-Core's MoEFlexTokenDispatcher: assert tp_size * ep_size > 1 (its tp the experts' TP group)
        bad("ep_dispatcher", "deepep is Megatron-Core's flex dispatcher, which needs ep x etp > 1 ('Flex token "
                             "dispatcher requires TPxEP > 1'), got ep 1, etp 1; allowed with them: alltoall")
    elif (model.moe is not None and lay.ep_dispatcher == "deepep" and lay.ep_flex_backend == "deepep"
          and lay.ep * lay.expert_tp not in deepep_config_ranks()):
        bad("ep", f"{lay.ep} (x etp {lay.expert_tp}) ranks have no DeepEP config (deep_ep/buffer.py "
                  f"get_dispatch_config asserts 'Unsupported number of EP ranks'); allowed with ep_flex_backend=deepep: "
                  f"ep x etp in {', '.join(map(str, deepep_config_ranks()))}")
    if model.moe is not None and lay.ep_dispatcher == "deepep" and lay.ep_flex_backend == "deepep" \
            and lay.ep_comm_sms % 2:  # Megatron-Core's set_deepep_num_sms(moe_deepep_num_sms) -> Buffer.set_num_sms
        bad("ep_comm_sms", f"{lay.ep_comm_sms} SMs: DeepEP's Buffer.set_num_sms asserts 'The SM count must be even' "
                           f"(two SMs a channel; deepseek-ai/DeepEP@94a9f8f6 deep_ep/buffer.py); allowed with "
                           f"ep_flex_backend=deepep: an even count, e.g. {lay.ep_comm_sms + 1}")


def _check_shard_groups(lay: ParallelLayout, bad) -> None:
    """Hybrid sharding's groups: ``dp_shard`` divides dp, ``expert_dp_shard`` the experts' replicas, and each
    needs a sharding to shard."""
    for key, size, of, what in (("dp_shard", lay.dp_shard, lay.dp, "dp"),
                                ("expert_dp_shard", lay.expert_dp_shard, lay.expert_dp,
                                 "the experts' replicas (tp x cp x dp / (etp x ep))")):
        if size is None:
            continue
        if of % size:
            bad(key, f"{size} does not divide {what} {of}; allowed: a divisor of {of}")
        if lay.zero_stage == 0:
            bad(key, f"{size} shards nothing with dp_sharding = none; allowed: a dp_sharding of zero1, zero2, "
                     f"zero3, fsdp or fsdp_grad_op")
    if lay.dp_outer_sharding == "optim" and (lay.zero_stage < 3 or not any(hybrid_sharded(lay))):
        bad("dp_outer_sharding", f"optim needs hybrid ZeRO-3 (dp_sharding zero3 or fsdp, with dp_shard below dp or "
                                 f"expert_dp_shard below the experts' replicas), got dp_sharding {lay.dp_sharding}, "
                                 f"dp_shard {lay.dp_shard}, expert_dp_shard {lay.expert_dp_shard}; allowed "
                                 f"otherwise: no_shard")


def _check_pipeline_sync(lay: ParallelLayout, bad) -> None:
    """``fsdp_pipeline_sync = "step"``: PyTorch pipelining's FSDP branch, which only FSDP2 units under pp with
    their weights kept from forward to backward, on a schedule that keeps every chunk gathered, run."""
    if lay.fsdp_pipeline_sync != "step":
        return
    why = None
    if lay.pp == 1:
        why = ("pp 1: without pipelining FSDP2 reduces every micro-batch (torchtitan's gradient accumulation); "
               "allowed with pp 1: microbatch")
    elif lay.zero_stage != 3 or lay.wgrad_output != "fsdp2":
        why = (f"PyTorch pipelining's FSDP2 branch, with dp_sharding {lay.dp_sharding} and wgrad_output "
               f"{lay.wgrad_output}; allowed: dp_sharding zero3 or fsdp with wgrad_output fsdp2, else microbatch")
    elif lay.fsdp_reshard_after_forward:
        why = ("with fsdp_reshard_after_forward true, which gathers again each micro-batch between forward and "
               "backward (torchtitan's fsdp_reshard_after_forward 'always' under pp: not priced); allowed: "
               "fsdp_reshard_after_forward false (torchtitan's default under pp)")
    elif lay.vpp > 3:
        why = (f"vpp {lay.vpp}: PyTorch's runtime schedules keep at most 3 stages gathered "
               f"(_add_unshard_reshard max_active_stages=3), re-gathering the others each round: not priced; "
               f"allowed: vpp 1 to 3")
    elif lay.pipeline_schedule != "1f1b":
        why = f"pipeline_schedule {lay.pipeline_schedule} is not PyTorch's pipelining; allowed: 1f1b"
    elif lay.dp_outer_sharding != "no_shard":
        why = "dp_outer_sharding optim is Megatron-FSDP's, not FSDP2's; allowed: no_shard"
    elif lay.dp_overlap_policy != "hooks":  # rev108: XLA's scheduler priced PyTorch's pipelining
        why = ("dp_overlap_policy xla_lhs is XLA's latency-hiding scheduler (a JAX run), not PyTorch's "
               "pipelining with FSDP2's hooks; allowed: hooks")
    if why:
        bad("fsdp_pipeline_sync", f"step {why}")


def hybrid_sharded(lay: ParallelLayout) -> tuple[bool, bool]:
    """Whether the dense weights' and the experts' shard groups are smaller than their data-parallel replicas
    (``dp_shard`` below ``dp``, ``expert_dp_shard`` below ``expert_dp``): hybrid sharding, each, (dense, experts).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    tuple of bool
        (dense, experts).
    """
    return (lay.dp_shard is not None and lay.dp_shard < lay.dp,
            lay.expert_dp_shard is not None and lay.expert_dp_shard < lay.expert_dp)


def _check_bf16_layers(model: ModelSpec, lay: ParallelLayout, bad) -> None:
    """BF16 layers at the start and end of an FP8 model: only with ``precision = fp8``, and fewer than its layers
    (Megatron-Core would run the whole model in BF16)."""
    start, end = lay.num_layers_at_start_in_bf16, lay.num_layers_at_end_in_bf16
    if not (start or end):
        return
    key = "num_layers_at_start_in_bf16" if start else "num_layers_at_end_in_bf16"
    if lay.precision != "fp8":
        bad(key, f"{start or end} BF16 layers need precision = fp8 (every layer is BF16 already), got precision "
                 f"{lay.precision}; allowed with bf16: 0")
    if start + end >= model.layers:
        bad(key, f"{start} at the start + {end} at the end = {start + end} BF16 layers leave none of the model's "
                 f"{model.layers} in FP8; allowed: a sum of 0 to {model.layers - 1}")


MOE_FIELDS = ("moe_grouped_gemm", "moe_expert_kernels", "moe_capacity_factor", "moe_expert_rank_capacity_factor",
              "moe_routing", "moe_router_fusion",
              "moe_imbalance", "overlap_ep", "ep_comm_sms", "ep_dispatch_bytes", "expert_grad_reduce_bytes",
              "expert_dp_shard")
"""Layout fields that set what a mixture-of-experts block runs (its expert GEMMs, padding, routing, load, overlap
and dispatch bytes): on a dense model they would change nothing. The fields that say how a framework release
implements a part a model may lack (``ep_dispatcher``, ``ep_flex_backend``, ``moe_counts_aligned``,
``expert_bias_eager``, ``expert_clamp_eager``, ``mamba_mixer``, ``rope_kernel``) are taken for any model, as a
release sets them (benchmarks/training_accuracy.py), and ``topo train``'s options line marks them "no effect"."""


def _check_applies(model: ModelSpec, lay: ParallelLayout, bad) -> None:
    """An MoE option set away from its default on a dense model is refused, naming the field, as ``ep`` on a dense
    model is: the user meant a model with experts, and would get a dense one silently (issue 29's bad-input
    rule)."""
    if model.moe is not None:
        return
    for key in MOE_FIELDS:
        value, default = getattr(lay, key), ParallelLayout.model_fields[key].default
        if value != default:
            bad(key, f"{_shown(value)} applies to a mixture-of-experts model's experts; {model.name} is dense; "
                     f"allowed: the default {_shown(default)} (or no {key})")


def delayed_scaling(lay: ParallelLayout) -> bool:
    """Whether ``lay`` runs per-tensor delayed FP8 scaling: precision fp8 with ``fp8_recipe`` delayed, or unset
    (Megatron-Core's default ``--fp8-recipe``, :mod:`topo.training.fp8_amax`) unless ``fp8_amax_pass`` (current
    scaling's amax pass) says current scaling.

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    bool
    """
    unset_as_delayed = lay.fp8_recipe is None and not lay.fp8_amax_pass
    return lay.precision == "fp8" and (lay.fp8_recipe == "delayed" or unset_as_delayed)


def current_scaling(lay: ParallelLayout) -> bool:
    """Whether ``lay`` runs per-tensor current FP8 scaling: precision fp8 with ``fp8_recipe`` current, or unset with
    ``fp8_amax_pass`` (current scaling's amax pass; see :func:`delayed_scaling`).

    Parameters
    ----------
    lay : ParallelLayout

    Returns
    -------
    bool
    """
    unset_as_current = lay.fp8_recipe is None and lay.fp8_amax_pass
    return lay.precision == "fp8" and (lay.fp8_recipe == "current" or unset_as_current)


def _check_nvfp4(lay: ParallelLayout, bad) -> None:
    """What ``fp8_recipe = "nvfp4"`` does not run: FP8 attention (TE's NVFP4BlockScaling sets ``fp8_dpa = False``:
    NVIDIA/TransformerEngine@d0067d0d transformer_engine/common/recipe/__init__.py) and an FP4 weight gather
    (Megatron-Bridge's ``fp4_param_gather``, not priced: :mod:`.fp8_params` knows FP8 tensors only); TP overlap
    through userbuffers: :func:`_check_userbuffers_recipe`."""
    if lay.fp8_recipe != "nvfp4":
        return
    if lay.attention_fp8:
        bad("attention_fp8", f"{lay.attention_fp8} quantises attention, which Transformer Engine's NVFP4 recipe "
                             f"leaves in BF16 (fp8_dpa false); allowed with fp8_recipe nvfp4: \"\"")
    if lay.fp8_param_gather:
        bad("fp8_param_gather", "true gathers FP8 weights, which fp8_recipe nvfp4 keeps in BF16 here (an FP4 "
                                "weight gather is not modelled); allowed with fp8_recipe nvfp4: false")


def _check_graph_scope(lay: ParallelLayout, bad) -> None:
    """What Megatron-Core refuses of a ``cuda_graph_scope``: ``moe_preprocess`` without ``moe_router``, CUDA graphs
    with full recomputation (walk43: NVIDIA/Megatron-LM@000c4ac2 ``megatron/training/arguments.py``), the whole MoE
    block captured under dropless routing."""
    scope = set(lay.cuda_graph_scope)
    if "moe_preprocess" in scope and "moe_router" not in scope:
        bad("cuda_graph_scope", "moe_preprocess needs moe_router captured too (Megatron-Core); allowed: "
                                "moe_router moe_preprocess")
    if scope and lay.recompute == "full":
        bad("remat_policy" if lay.remat_policy else "recompute",
            f"full recomputation with CUDA graphs (cuda_graph_scope {', '.join(lay.cuda_graph_scope)}): Megatron-LM "
            f"refuses it ('recompute_granularity must not be full when CUDA Graphs are enabled'); allowed with "
            f"CUDA graphs: none or selective (recompute modules), or no cuda_graph_scope")
    if "moe" in scope and lay.moe_capacity_factor is None:
        bad("cuda_graph_scope", "moe captures the whole MoE block, which only token-drop routing allows "
                                "(moe_capacity_factor); allowed with dropless routing: moe_router, moe_preprocess")


USERBUFFERS_REFUSED = {"nvfp4": "NVFP4", "blockwise": "block-wise FP8"}
"""The FP8 recipes whose inputs Transformer Engine's userbuffers refuse, by how a message names them:
``fill_userbuffers_buffer_for_all_gather`` takes per-tensor FP8 (delayed or current scaling) and MXFP8 quantizers
only and raises "Unsupported quantizer for Userbuffers" for any other (NVIDIA/TransformerEngine@d0067d0d
``transformer_engine/pytorch/module/base.py`` lines 607-754: NVFP4's ``NVFP4Quantizer`` and block-wise FP8's
``Float8BlockQuantizer``); Megatron-Bridge turns ``tp_comm_overlap`` off for every NVFP4 recipe
(NVIDIA-NeMo/Megatron-Bridge@21d102f5 ``scripts/performance/configs/llama/llama3_llm_pretrain.py`` line 80)."""


def _check_userbuffers_recipe(lay: ParallelLayout, bad) -> None:
    """TP overlap through userbuffers (``overlap_tp`` with sequence parallelism and tp > 1) with an ``fp8_recipe``
    of :data:`USERBUFFERS_REFUSED`: one line, as Transformer Engine raises."""
    name = USERBUFFERS_REFUSED.get(lay.fp8_recipe or "")
    if name and lay.overlap_tp and lay.sequence_parallel and lay.tp > 1:
        bad("overlap_tp", f"true runs TP collectives through userbuffers, which Transformer Engine refuses for "
                          f"{name} inputs; allowed with fp8_recipe {lay.fp8_recipe} and tp > 1: false")


def _check_module_recipes(lay: ParallelLayout, bad) -> None:
    """``module_recipes``: each entry ``name=recipe`` of a known module and recipe
    (:func:`.module_recipes.module_recipes_error`), inside a layout with ``precision = "fp8"`` (Megatron-Core's
    ``quant_recipe`` overrides modules of an FP8 / FP4 model). Any ``fp8_recipe`` holds them, unset (delayed, as
    everywhere: Megatron-Core's default ``fp8_recipe = "delayed"``) too: a module's recipe is its own
    ``fp8_autocast`` nested in the layer's, and Megatron-Core refuses delayed scaling only as a module's own recipe
    (NVIDIA/Megatron-LM@d98e8a64 megatron/core/extensions/transformer_engine.py lines 190-191, ``Delayed scaling not
    in scope of te per-module quantization config``; lines 312-360 the nested autocast; no check of the layer's
    recipe: transformer_config.py line 594 ``fp8_recipe`` default ``"delayed"``, argument_utils.py lines 365-368
    ``--te-precision-config-file``)."""
    if not lay.module_recipes:
        return
    if lay.precision != "fp8":
        bad("module_recipes", f"{' '.join(lay.module_recipes)} overrides modules of an FP8 / FP4 recipe; got "
                              f"precision {lay.precision}; allowed: precision fp8 (any fp8_recipe, unset is "
                              f"delayed), else empty")
    for entry in lay.module_recipes:
        why = module_recipes_error(entry)
        if why:
            bad("module_recipes", why)
    twice = duplicate_module_entries(lay.module_recipes)
    if twice:  # dict(...) would keep the last silently; which matcher Megatron-Core applies is not modelled
        bad("module_recipes", f"{' and '.join(twice)} name one module more than once; allowed: each module once")
    nvfp4 = entries_at(lay.module_recipes, "nvfp4")
    if nvfp4 and lay.overlap_tp and lay.sequence_parallel and lay.tp > 1:  # as _check_userbuffers_recipe
        bad("module_recipes", f"{' '.join(nvfp4)} runs NVFP4 inputs, which Transformer Engine's userbuffers refuse; "
                              f"allowed with overlap_tp true and tp > 1: bf16 or mxfp8 modules")


def _check_delayed(lay: ParallelLayout, key: str, bad) -> None:
    """A delayed-scaling setting ``key`` (true) needs precision fp8 with ``fp8_recipe`` delayed or unset."""
    if getattr(lay, key) and not delayed_scaling(lay):
        bad(key, f"true is Transformer Engine's delayed FP8 scaling; got precision {lay.precision}, fp8_recipe "
                 f"{_shown(lay.fp8_recipe)}; allowed: precision fp8 with fp8_recipe delayed or unset, else false")


def _shown(value) -> str:
    """A layout value as the user writes it (``false``, ``1.25``, ``none``)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _check_a2a(model: ModelSpec, lay: ParallelLayout, bad) -> None:
    """Ulysses CP splits each TP rank's query and key/value heads over the CP ranks (Transformer Engine's
    ``AttnFuncWithCPAndQKVOA2A`` asserts ``num_heads % cp_size == 0`` for both; a rank holds one replicated K/V
    head where ``tp`` exceeds them; MLA's K and V have every query head)."""
    if lay.cp <= 1 or lay.cp_comm_type != "a2a":
        return
    q = model.heads // lay.tp
    kv = q if model.attention.kind == "mla" else max(1, model.num_kv_heads // lay.tp)
    if why := a2a_heads_error(lay.cp, q, kv):
        bad("cp_comm_type", why)


def _check_mamba(model: ModelSpec, lay: ParallelLayout, bad) -> None:
    """Megatron-Core's Mamba mixer splits its heads and its B/C groups over TP, then the heads over CP
    (NVIDIA/Megatron-LM ``megatron/core/ssm/mamba_mixer.py`` and ``mamba_context_parallel.py`` @d98e8a64 assert
    ``nheads % tp``, ``ngroups % tp`` and ``(nheads / tp) % cp``); under FP8 its in_proj's output width
    ``2 d_inner + 2 ngroups d_state + nheads`` is a multiple of 16 (``mamba_mixer.py`` @00bebb45, "For FP8, the
    innermost dimension of the Mamba layer input projection output tensor must be a multiple of 16")."""
    if model.mamba is None:
        return
    heads, groups = model.mamba_heads, model.mamba.groups
    width = model.mamba_in_proj_width
    # walk43: Megatron-Core asserts it under config.fp8 (@d98e8a64 mamba_mixer.py 253-257), which NVFP4 (its fp4
    # options, exclusive of fp8) does not set (rev106 Left 1)
    if lay.precision == "fp8" and lay.fp8_recipe != "nvfp4" and width % 16:
        bad("precision", f"fp8 needs the Mamba-2 in_proj's output width, 2 x d_inner + 2 x groups x d_state + heads "
                         f"= {width}, to be a multiple of 16 (Megatron-Core's MambaMixer asserts it for FP8); "
                         f"allowed: bf16, or Mamba-2 sizes whose width is")
    if heads % lay.tp or groups % lay.tp:
        bad("tp", f"{lay.tp} does not divide the {heads} Mamba-2 heads and {groups} groups; allowed: a divisor "
                  f"of {math.gcd(heads, groups)}")
    seq, chunk = lay.seq_len or model.seq_len, model.mamba.chunk_size
    if chunk > seq:  # walk21 (section 232): a chunk of 100,000 tokens priced a 1,501 s step without a word
        bad("seq_len", f"{seq} tokens is shorter than one Mamba-2 chunk of {chunk} (the model's mamba.chunk_size): "
                       f"mamba_ssm's SSD kernels would run a whole chunk's tiles for each sequence; allowed: a "
                       f"sequence of at least {chunk} tokens, or a chunk_size up to {seq} in the model file")
    h, g, cp = heads // lay.tp, groups // lay.tp, lay.cp
    if cp > 1 and (h % cp or (cp % g if g < cp else g % cp)):
        bad("cp", f"{cp} does not split the {h} Mamba-2 heads and {g} groups per TP rank (the heads evenly, the "
                  f"groups evenly or each group's heads); allowed: a divisor of {h} that divides or is a multiple "
                  f"of {g}")


def dp_bucket_params(lay: ParallelLayout) -> int:
    """Parameters per data-parallel bucket: the layout's ``dp_bucket_params``, else Megatron-Core's default
    ``max(40000000, 1000000 x dp_cp size)`` (NVIDIA/Megatron-LM ``DistributedDataParallelConfig.bucket_size``:
    "larger DP sizes need larger buckets to ensure collectives do not become latency-bound").

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``dp_bucket_params``, ``dp``, ``cp``).

    Returns
    -------
    int
        Parameters per bucket.
    """
    return lay.dp_bucket_params or max(40_000_000, 1_000_000 * lay.dp * lay.cp)


def dp_overlapped(lay: ParallelLayout, phase: str) -> bool:
    """Whether the data-parallel collectives of ``phase`` (a step traffic item's) overlap the compute: the
    distributed optimizer's once-a-step weight gather (``gather`` under ZeRO-1/2) by ``overlap_param_gather`` (None:
    ``overlap_dp``), every other (the gradients' reduction, ZeRO-3 / FSDP's gathers and reductions, Megatron-FSDP's
    optimizer-sharded replicas' ``gather`` among them: Megatron-FSDP overlaps it whatever ``overlap_param_gather``
    says, :attr:`ParallelLayout.overlap_param_gather`) by ``overlap_dp``. The
    one place the step (:func:`topo.training.step._dp_exposed`, :func:`topo.training.step.dp_floor_s`) and the
    cross-site gather's window (:func:`topo.training.multisite.dp_gather_window_s`) read either.

    Parameters
    ----------
    lay : ParallelLayout
    phase : str
        ``gather``, ``reduce``, ``gather_unit`` or ``reduce_unit``.

    Returns
    -------
    bool

    >>> lay = make_layout(dp=2, global_batch=2, overlap_param_gather=False)
    >>> dp_overlapped(lay, "gather"), dp_overlapped(lay, "reduce")
    (False, True)
    """
    if phase == "gather" and lay.zero_stage < 3 and lay.overlap_param_gather is not None:
        return lay.overlap_param_gather
    return lay.overlap_dp


def _check_dp_overlaps(lay: ParallelLayout, bad) -> None:
    """The data-parallel overlap fields where the framework runs them: ``overlap_param_gather`` with a distributed
    optimizer, ``overlap_param_gather_with_optimizer_step`` (:func:`_check_gather_with_step`), ``overlap_dp`` under
    Megatron-FSDP (:func:`_check_megatron_fsdp_overlap`)."""
    _check_gather_with_step(lay, bad)
    _check_megatron_fsdp_overlap(lay, bad)
    if lay.overlap_param_gather and lay.zero_stage == 0:
        bad("overlap_param_gather", "true overlaps the distributed optimizer's weight gather, which dp_sharding none "
                                    "has none of (Megatron-Core's gather asserts use_distributed_optimizer); allowed "
                                    "with dp_sharding none: false, or unset")


def _check_megatron_fsdp_overlap(lay: ParallelLayout, bad) -> None:
    """``overlap_dp`` false where the layout names Megatron-FSDP sharding the gradients (``dp_outer_sharding =
    "optim"``, its ``optim_grads_params`` only; ``wgrad_output = "copied"`` under ZeRO-2/3, its ``optim_grads`` /
    ``optim_grads_params``): a run Megatron-FSDP never makes. From Megatron-Core 0.14 it sets ``overlap_grad_reduce``
    (and, fully sharding, ``overlap_param_gather``) True whatever the config says (NVIDIA/Megatron-LM@d98e8a64ddf3
    ``megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py`` lines 327-337; core_v0.14.0 lines
    259-270); 0.13's ``custom_fsdp`` asserts both instead (``fully_sharded_data_parallel.py`` lines 196-204).
    PyTorch FSDP2 and DeepSpeed ZeRO-3 layouts name neither field and are left as they are."""
    if lay.overlap_dp:
        return
    if lay.dp_outer_sharding == "optim":
        named = "dp_outer_sharding optim"
    elif lay.wgrad_output == "copied" and lay.zero_stage >= 2:
        named = f"wgrad_output copied under dp_sharding {lay.dp_sharding}"
    else:
        return
    bad("overlap_dp", f"false with {named}, which is Megatron-FSDP sharding the gradients: it overlaps their "
                      f"reduction whatever overlap_grad_reduce says (Megatron-LM@d98e8a64 megatron_fsdp.py lines "
                      f"331-333); allowed with it: true")


def _check_gather_with_step(lay: ParallelLayout, bad) -> None:
    """``overlap_param_gather_with_optimizer_step`` where Megatron-LM runs it (``megatron/training/arguments.py``
    lines 1032-1040 at 14346b65: the distributed optimizer, ``--overlap-param-gather``, interleaving)."""
    key = "overlap_param_gather_with_optimizer_step"
    if not lay.overlap_param_gather_with_optimizer_step:
        return
    if lay.vpp <= 1:
        bad(key, f"true needs vpp > 1 (Megatron-Core gives the first of several model chunks its own optimizer), "
                 f"got vpp {lay.vpp}; allowed with vpp 1: false")
    elif lay.zero_stage not in (1, 2):
        bad(key, f"true needs Megatron-Core's distributed optimizer, dp_sharding zero1 or zero2, got "
                 f"{lay.dp_sharding}; allowed with it: false")
    elif not dp_overlapped(lay, "gather"):
        bad(key, "true needs the weight gather overlapped (Megatron-LM: 'Must use "
                 "--overlap-param-gather-with-optimizer-step with --overlap-param-gather'), which overlap_dp / "
                 "overlap_param_gather turn off; allowed with them off: false")


def dp_bucket_calls(lay: ParallelLayout, params: float) -> int:
    """Data-parallel collectives pipeline rank 0 issues per step for ``params`` parameters (of each kind:
    reduction, gather): one per bucket. Megatron-Core buckets the first model chunk only (``disable_bucketing=
    (model_chunk_idx > 0)`` in ``training.py get_model``: each later interleaved chunk is one bucket), of pipeline
    rank 0 only (a later rank: one collective a chunk, :func:`topo.training.step.pp_rank_shares`), and not at all
    without the overlap (``overlap_grad_reduce`` off: ``bucket_size = None``, one collective).

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``overlap_dp``, ``vpp``, the bucket; ``overlap_param_gather_with_optimizer_step``: chunk 0
        not bucketed either, one collective a chunk).
    params : float
        Parameters of this rank's stage that the collectives carry.

    Returns
    -------
    int
        Collectives per step, at least 1.
    """
    if not lay.overlap_dp or params <= 0:
        return 1
    if lay.overlap_param_gather_with_optimizer_step:  # chunk 0 not bucketed either: one collective a chunk
        return lay.vpp
    return bucket_count(params / lay.vpp, dp_bucket_params(lay)) + lay.vpp - 1


def bucket_count(amount: float, bucket: float) -> int:
    """Collectives that carry ``amount`` (parameters or bytes) in buckets of at most ``bucket``, filled in order:
    ``ceil(amount / bucket)``, at least 1. Megatron-Core's DDP buckets (parameters, :func:`dp_bucket_calls`) and
    XLA's collective combiner (bytes, :func:`xla_all_reduce_calls`) both fill them so.

    Parameters
    ----------
    amount : float
        What the collectives carry in all (same unit as ``bucket``).
    bucket : float
        The most one collective carries (> 0).

    Returns
    -------
    int
        Collectives, at least 1.
    """
    return max(1, math.ceil(amount / bucket)) if amount > 0 else 1


def xla_all_reduce_calls(lay: ParallelLayout, unit_calls: int, total_bytes: float) -> int:
    """All-reduces left of ``unit_calls`` gradient all-reduces (one a unit, ``total_bytes`` in all) after XLA's
    all-reduce combiner (``--xla_gpu_all_reduce_combine_threshold_bytes``: the layout's
    ``dp_all_reduce_combine_bytes``; None: ``unit_calls``, as a framework that reduces unit by unit).

    XLA's combiner (openxla/xla ``xla/service/collective_combiner_utils.h`` ``CombineInstructionsByKey``) walks
    the computation's all-reduces in post order and merges independent ones greedily while the merged output
    stays within the threshold; it never merges one already above it. The partitioner's gradient all-reduces
    are one a parameter tensor, smaller than a unit (Llama 2 7B's largest is an MLP matrix, 22.5 MiB of a
    layer's 96 MiB fp32 shard over 8 FSDP ranks), so the buckets fill at tensor granularity: :func:`bucket_count`
    of the bytes and the threshold (equal buckets; topo's unit, a layer, is coarser than XLA's tensor).
    Computations are combined apart, so this holds for unrolled layers only (MaxText's ``scan_layers=false``); a
    scanned layer's all-reduces sit in the loop body and merge only with each other.

    Parameters
    ----------
    lay : ParallelLayout
        The layout (``dp_all_reduce_combine_bytes``).
    unit_calls : int
        All-reduces one a unit, without combining.
    total_bytes : float
        What they carry in all.

    Returns
    -------
    int
        All-reduces after combining (``unit_calls`` without a threshold), at least 1.
    """
    threshold = lay.dp_all_reduce_combine_bytes
    if threshold is None:
        return unit_calls
    return bucket_count(total_bytes, threshold)
