"""A JAX device mesh (MaxText's ``ici_*`` / ``dcn_*`` parallelism) as a parallel layout.

MaxText builds one mesh of named axes, each the product of its ICI (inside a slice or NVLink domain) and DCN
(across them) sizes (AI-Hypercomputer/maxtext ``MaxText/configs/base.yml``: ``ici_data_parallelism``,
``dcn_fsdp_parallelism``...). In :class:`~topo.training.parallel.ParallelLayout`'s terms:

- ``tensor`` is ``tp``, ``context`` is ``cp``, ``pipeline`` is ``pp``, ``expert`` is ``ep``;
- ``data``, ``fsdp`` and ``expert`` all split the batch: ``dp = data x fsdp x expert``;
- ``fsdp`` and ``expert`` shard the weights, gradients and optimizer state (``dp_sharding = "zero3"``), as
  MaxText's ``logical_axis_rules`` place a weight's dimensions: a dense (non-expert) weight's ``embed`` dimension
  over ``fsdp``, ``context`` and ``expert``, so dense weights are sharded over fsdp x expert ranks (x context, as
  topo's sharding always is), replicated over ``data`` only (hybrid sharding, ``dp_shard = fsdp x expert``, the
  fastest-varying data-parallel ranks, as MaxText's ICI-inside-DCN meshes place them); an expert's ``exp``
  dimension over ``expert`` and its ``embed_moe`` over ``fsdp`` and ``context``, not ``expert`` nor ``data``: the
  experts are sharded over fsdp (x context) of their replicas and replicated over ``data``
  (``expert_dp_shard = fsdp x context``, beside a data axis). With neither axis nothing is sharded.

Memory (:data:`MAXTEXT_STATE`): MaxText keeps what it trains in fp32, not Megatron-LM's bf16 working copy beside
fp32 main weights (2 + 4 + 12 bytes per parameter): ``base.yml`` ``weight_dtype: "float32"`` (the weights are their
own master copy, 4), ``grad_dtype: "float32"`` (4), ``opt_type: "adamw"`` whose ``mu_dtype`` and ``nu`` inherit the
weights' dtype (``optimizers/optimizers.py``: ``optax.adamw(..., mu_dtype=config.mu_dtype)``; 8), all sharded over
the fsdp axis: 16 bytes per parameter, no resident bf16 copy. Each layer casts its weights to ``dtype``
(``"bfloat16"``) inside the computation (``layers/linears.py``: ``jnp.asarray(kernel, self.dtype)``); the cast is
elementwise on the fsdp shard, so the all-gather XLA's partitioner inserts before the matmul carries bf16
(``gather_bytes`` 2, read from the code, not from an HLO dump), and the gathered bf16 layer is a transient, the
layer computing and the one prefetched (the layout's two gathered units, as for any ZeRO-3 layout). Read at
AI-Hypercomputer/maxtext@e591f30c (``src/maxtext/configs/base.yml``; its ``logical_axis_rules``: ``['embed',
['fsdp', 'context', 'context_usp_ulysses', 'expert']]``, ``['exp', 'expert']``, ``['embed_moe', ['fsdp', 'context',
'context_usp_ulysses']]``).

Axes topo does not model (``sequence``, ``tensor_transpose``, ``tensor_sequence``, ``fsdp_transpose``,
``autoregressive``, ``context_autoregressive``) are refused by name at any size but 1 (which splits nothing, as
MaxText's ``base.yml`` lists them).
"""

from __future__ import annotations

from fractions import Fraction

from ..errors import TopoError
from .parallel import DEFAULT_ORDER, MAX_COUNT

__all__ = ["MAXTEXT_STATE", "MAXTEXT_DP_OVERLAP", "MAXTEXT_FP8_AMAX", "MAXTEXT_REMAT", "MESH_AXES", "MAXTEXT_ORDER", "PLACEMENT_ORDER",
           "RANK_ORDER_AXES", "RECOMPUTE_FIELDS", "check_mesh_placement", "global_batch_per_device", "mesh_rank_order", "layout_from_mesh", "maxtext_micro_batch", "parse_mesh", "parse_mesh_parts"]

MESH_AXES = ("data", "fsdp", "tensor", "context", "expert", "pipeline")
MAXTEXT_STATE = dict(weight_bytes=4.0, grad_bytes=4.0, optimizer_bytes_per_param=8.0, gather_bytes=2.0)
"""Bytes per parameter MaxText keeps and gathers (see the module doc): a mesh's defaults, which a layout or flag
overrides."""
MAXTEXT_DP_OVERLAP = dict(dp_overlap_policy="xla_lhs")
"""How a mesh's data-parallel collectives overlap the compute by default: XLA's latency-hiding scheduler
(:func:`topo.training.dp_overlap.xla_lhs_exposed_s`). A JAX program has no backward hooks (the layout's default,
``hooks``, is Megatron-Core's and FSDP's rule), and every published MaxText GPU recipe sets
``--xla_gpu_enable_latency_hiding_scheduler=true`` (AI-Hypercomputer/maxtext@efb6d9e4
``MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh`` line 28; gpu-recipes@2e1fd5ef
``training/a4/*/maxtext-pretraining-gke/values.yaml``; NVIDIA/JAX-Toolbox@67b79492
``docs/frameworks/maxtext/README.md``), though XLA's own default is off. A layout's ``dp_overlap_policy``
overrides it."""
MAXTEXT_FP8_AMAX = dict(fp8_amax_reduction=False)
"""A mesh's FP8 amax handling: no Transformer Engine amax reduction. MaxText's ``quantization: "fp8"`` runs Flax's
``Fp8DotGeneralOp`` (``flax/linen/fp8_ops.py``, google/flax@02913030, the stored copy; the release the A4 containers ran is not established): each cast quantises with the scale of the
*previous* amax history (``qdq_and_return``: ``new_scale`` from ``amax_history`` before ``compute_amax_history(x,
...)``), and the new history, ``jnp.max(jnp.abs(x))`` of the whole (sharded) tensor, leaves the step as the
``_overwrite_with_gradient`` variables' "gradient". XLA's partitioner reduces that max across the shards, but no
kernel of the step waits for it and no buffer is concatenated and reduced per model chunk as TE's
``reduce_and_update_fp8_tensors`` does; its scalar all-reduces are not priced (assumption: hidden). A layout's
``fp8_amax_reduction`` overrides it."""
PLACEMENT_ORDER = ("tensor", "context", "expert", "fsdp", "data", "pipeline")
"""The mesh's axes as topo places a layout's ranks, fastest-varying first: Megatron's rank order ``tp-cp-ep-dp-pp``
with the sharded data-parallel ranks (fsdp x expert, ``dp_shard``) inside the replicated ones (data)."""
RANK_ORDER_AXES = {DEFAULT_ORDER: PLACEMENT_ORDER,
                   "tp-cp-ep-pp-dp": ("tensor", "context", "pipeline", "expert", "fsdp", "data")}
"""The rank orders a mesh may be placed in, each with the mesh's axes as it places them, fastest first (``ep`` has no
axis of its own: the expert ranks are the fastest of ``dp``, :mod:`topo.training.mapping`); the default first."""
MAXTEXT_ORDER = ("tensor", "context", "expert", "fsdp", "pipeline", "data")
"""The mesh's axes as MaxText orders its devices, fastest first, as far as topo tells them apart: ``mesh_axes`` lists
them slowest first, ``['data', 'stage', 'fsdp', ..., 'context', ..., 'tensor', ..., 'expert', ...]``
(AI-Hypercomputer/maxtext@315ebb59 ``MaxText/configs/base.yml``), so the stages lie inside the data replicas.
``create_device_mesh`` (maxtext@f4f08fa4 ``MaxText/maxtext_utils.py``) hands the ICI and DCN sizes in that order to
``jax.experimental.mesh_utils.create_hybrid_device_mesh``, which numbers the granules (VMs) in the DCN mesh's order
(``np.arange(len(granules)).reshape(dcn_mesh_shape)``) and lays each granule's devices as the ICI mesh, so a
device's rank varies fastest over the ICI axes, then over the DCN axes, each in this order. MaxText places expert
fastest, before tensor and context; topo's order of those three is kept (they differ only inside an NVLink
domain, section 448's Left)."""
MAXTEXT_REMAT = dict(remat_policy="full")
"""A mesh's recomputation where no flag or layout field gives one: MaxText's default ``remat_policy: 'full'``
(AI-Hypercomputer/maxtext@315ebb59 ``MaxText/configs/base.yml``, under "Choose 'remat_policy'")."""
RECOMPUTE_FIELDS = ("remat_policy", "recompute", "recompute_modules", "recompute_num_layers",
                    "activation_offload_layers")
"""Layout fields that say what a step recomputes or offloads: any one given keeps :data:`MAXTEXT_REMAT` off."""
_NOT_MODELLED = ("sequence", "tensor_transpose", "tensor_sequence", "fsdp_transpose", "autoregressive",
                 "context_autoregressive")


def parse_mesh_parts(text: str, source: str = "jax_mesh") -> tuple[dict[str, int], dict[str, int]]:
    """``({axis: ICI size}, {axis: DCN size})`` of ``ici_<axis>=n,dcn_<axis>=m`` pairs (``_parallelism`` may follow
    the axis), every axis of :data:`MESH_AXES` in both, 1 where not given.

    Parameters
    ----------
    text : str
        The mesh, comma-separated ``ici_<axis>=n`` / ``dcn_<axis>=m`` pairs as MaxText's ``ici_parallelism`` /
        ``dcn_parallelism`` give them (``ici_fsdp=8,dcn_data=4``).
    source : str
        Where the mesh came from (a flag or a layout field), named in the errors.

    Returns
    -------
    ici, dcn : dict of str to int
        Each axis of :data:`MESH_AXES` and its size inside an NVLink domain (ICI) and across domains (DCN).

    Raises
    ------
    TopoError
        A pair that is not ``key=whole number >= 1``, an axis topo does not know or model (naming the allowed),
        one given twice, or no pair at all.
    """
    parts = {"ici": {a: 1 for a in MESH_AXES}, "dcn": {a: 1 for a in MESH_AXES}}
    seen: set[str] = set()
    allowed = ", ".join(f"ici_{a}, dcn_{a}" for a in MESH_AXES)
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, eq, value = part.partition("=")
        key = key.strip().removesuffix("_parallelism")
        scope, _, axis = key.partition("_")
        if not eq or scope not in ("ici", "dcn"):
            raise TopoError(f"cannot read {part!r}; write ici_<axis>=n or dcn_<axis>=n pairs; allowed axes: "
                            f"{allowed}", source=source)
        if axis in _NOT_MODELLED and value.strip() != "1":  # walk44: size 1 splits nothing (a pasted base.yml)
            raise TopoError(f"{key}: topo does not model the {axis} axis; allowed: {allowed} (any axis at size 1)",
                            source=source)
        if axis in _NOT_MODELLED:
            continue
        if axis not in parts[scope]:
            raise TopoError(f"unknown mesh axis {key!r}; allowed: {allowed}", source=source)
        if key in seen:
            raise TopoError(f"{key} is given twice; allowed: each of {allowed} at most once", source=source)
        seen.add(key)
        try:
            n = int(value.strip())
        except ValueError:
            n = 0
        if n < 1:
            raise TopoError(f"{key}: must be a whole number >= 1, got {value.strip()!r} (MaxText's -1, \"the rest\", "
                            f"is not taken: give the size)", source=source)
        parts[scope][axis] = n
    if not seen:
        raise TopoError(f"is empty, got {text!r}; write ici_<axis>=n or dcn_<axis>=n pairs, e.g. "
                        f"ici_fsdp=8,dcn_data=4; allowed axes: {allowed}", source=source)
    return parts["ici"], parts["dcn"]


def parse_mesh(text: str, source: str = "jax_mesh") -> dict[str, int]:
    """``{axis: size}`` of ``ici_<axis>=n,dcn_<axis>=m`` pairs, each axis the product of its ICI and DCN sizes
    (:func:`parse_mesh_parts`, whose errors it raises).

    Parameters
    ----------
    text : str
        The mesh, comma-separated ``ici_<axis>=n`` / ``dcn_<axis>=m`` pairs as MaxText's ``ici_parallelism`` /
        ``dcn_parallelism`` give them (``ici_fsdp=8,dcn_data=4``).
    source : str
        Where the mesh came from (a flag or a layout field), named in the errors.

    Returns
    -------
    dict of str to int
        Each axis of :data:`MESH_AXES` and its size, ICI x DCN.
    """
    ici, dcn = parse_mesh_parts(text, source)
    return {a: ici[a] * dcn[a] for a in MESH_AXES}


def _digits(ici: dict, dcn: dict, order: tuple, ici_first: bool) -> list[tuple[str, str]]:
    """The ``(axis, "ici" | "dcn")`` parts of a rank larger than 1, fastest first: every ICI part before every DCN
    part (a hybrid mesh, ``ici_first``), or each axis's ICI then DCN part side by side (topo's placement)."""
    if ici_first:
        parts = [(a, "ici") for a in order] + [(a, "dcn") for a in order]
    else:
        parts = [(a, scope) for a in order for scope in ("ici", "dcn")]
    return [(a, scope) for a, scope in parts if (ici if scope == "ici" else dcn)[a] > 1]


def mesh_rank_order(text: str, source: str = "jax_mesh") -> str | None:
    """The rank order of :data:`RANK_ORDER_AXES` (the default first) under which topo's ranks lie on the GPUs as
    MaxText's hybrid mesh lays them (:data:`MAXTEXT_ORDER`), or None where none does.

    With data and pipeline ranks both across VMs (``dcn_data=2,dcn_pipeline=4``) MaxText puts the stages inside
    the data replicas, which ``tp-cp-ep-pp-dp`` places; with sharded data-parallel ranks (fsdp or expert) besides,
    MaxText's fsdp lies inside the stages and data outside them, which no topo order places (``dp`` is one axis).

    Parameters
    ----------
    text : str
        The mesh, comma-separated ``ici_<axis>=n`` / ``dcn_<axis>=m`` pairs as MaxText's ``ici_parallelism`` /
        ``dcn_parallelism`` give them (``ici_fsdp=8,dcn_data=4``).
    source : str
        Where the mesh came from (a flag or a layout field), named in the errors.

    Returns
    -------
    str or None
        A key of :data:`RANK_ORDER_AXES`, or None where no topo order lays the ranks as the hybrid mesh does.

    Raises
    ------
    TopoError
        The mesh's own errors (:func:`parse_mesh_parts`).
    """
    ici, dcn = parse_mesh_parts(text, source)
    want = _digits(ici, dcn, MAXTEXT_ORDER, ici_first=True)
    return next((order for order, axes in RANK_ORDER_AXES.items() if _digits(ici, dcn, axes, False) == want), None)


def check_mesh_placement(text: str, gpus_per_domain: int, source: str = "jax_mesh",
                         domain_gpus: int | None = None) -> str:
    """Refuse a mesh whose ICI part topo would not place inside an NVLink domain.

    A JAX hybrid mesh (``jax.experimental.mesh_utils.create_hybrid_device_mesh``, which MaxText's
    ``create_device_mesh`` calls with its ``ici_parallelism`` and ``dcn_parallelism``) lays the ICI mesh over one
    granule's devices (a slice; on GPUs a process's or an NVLink clique's) and the DCN mesh across granules, so
    every axis varies over its ICI ranks inside a granule and over its DCN ranks across them; MaxText asserts
    that the ICI sizes multiply to the devices of a slice (``fill_unspecified_mesh_axes``). On GPUs the ICI is
    NVLink, so:

    - the ICI sizes multiply to a divisor of ``gpus_per_domain`` (the GPUs of an NVLink domain the job uses), so
      no ICI group straddles two domains;
    - topo places the axes in :data:`PLACEMENT_ORDER`, fastest first, each axis's ranks side by side; that is the
      hybrid mesh only if no axis has ICI ranks (> 1) after an axis with DCN ranks in that order: an
      ``ici_data=8,dcn_fsdp=32`` mesh puts the fsdp groups one GPU per VM across the DCN, while topo would place
      them side by side on 4 VMs, a different job.

    A mesh that ``tp-cp-ep-pp-dp`` places as the hybrid mesh does (:func:`mesh_rank_order`: ``ici_pipeline=8,
    dcn_data=4``, the stages inside a VM and the data replicas across) passes in that order.

    Parameters
    ----------
    text : str
        The mesh, ``ici_*`` and ``dcn_*`` sizes (:func:`parse_mesh_parts`).
    gpus_per_domain : int
        GPUs of each NVLink domain the job is placed at (``gpus_per_domain_used``, else the step's default
        placement's, :func:`topo.training.mapping.placed_gpus_used`).
    source : str
        What names the mesh in an error (a flag or a layout field).
    domain_gpus : int, optional
        Every GPU of a domain, where the job is placed at fewer (64 of an NVL72 rack's 72); a refusal then names
        ``gpus_per_domain_used = domain_gpus`` as allowed where the ICI product divides it.

    Returns
    -------
    str
        The rank order to place the mesh in: :func:`mesh_rank_order`'s, else the default (whose order of data and
        pipeline ranks across VMs then differs from MaxText's, which no topo order places).

    Raises
    ------
    TopoError
        Either rule broken, naming the axes, their sizes and what is allowed.
    """
    ici, dcn = parse_mesh_parts(text, source)
    ici_total = 1
    for a in MESH_AXES:
        ici_total *= ici[a]
    given = ",".join(f"ici_{a}={ici[a]}" for a in PLACEMENT_ORDER if ici[a] > 1)
    _check_ici_domain(given, ici_total, gpus_per_domain, domain_gpus, source)
    order = mesh_rank_order(text, source)
    if order is not None:
        return order
    outer = None
    for a in PLACEMENT_ORDER:
        if ici[a] > 1 and outer is not None:
            raise TopoError(f"ici_{a}={ici[a]} with dcn_{outer}={dcn[outer]}: topo places the axes "
                            f"{', '.join(PLACEMENT_ORDER)} fastest first, so ICI ranks of {a} under DCN ranks of "
                            f"{outer} would not lie in one NVLink domain as JAX's hybrid mesh lays them; allowed: "
                            f"ICI sizes on the axes before the first with a DCN size in that order (e.g. "
                            f"ici_{a}=1 and its ranks on dcn_{a}, or the ICI on {outer})", source=source)
        if dcn[a] > 1 and outer is None:
            outer = a
    return DEFAULT_ORDER


def layout_from_mesh(text: str, source: str = "jax_mesh", moe: bool = False) -> dict:
    """The layout fields of a mesh (see the module doc): ``tp``, ``cp``, ``pp``, ``dp``, ``ep`` and, with an
    ``fsdp``, ``expert`` or ``context`` axis, ``dp_sharding = "zero3"``, beside a data axis ``dp_shard`` (fsdp x expert) and,
    for a model with experts (an expert axis, or ``moe``), ``expert_dp_shard`` (fsdp x context: the experts'
    replicas but those of the data axis; ``embed_moe`` names no data axis with or without an expert axis).

    Parameters
    ----------
    text : str
        The mesh, comma-separated ``ici_<axis>=n`` / ``dcn_<axis>=m`` pairs as MaxText's ``ici_parallelism`` /
        ``dcn_parallelism`` give them (``ici_fsdp=8,dcn_data=4``).
    source : str
        Where the mesh came from (a flag or a layout field), named in the errors.
    moe : bool
        The model has experts (their state's shard group is set without an expert axis too).

    Returns
    -------
    dict
        Layout fields and their values.

    Raises
    ------
    TopoError
        The mesh's own errors (:func:`parse_mesh_parts`).
    """
    s = parse_mesh(text, source)
    out = dict(tp=s["tensor"], cp=s["context"], pp=s["pipeline"], ep=s["expert"],
               dp=s["data"] * s["fsdp"] * s["expert"])
    shard = s["fsdp"] * s["expert"]  # the ranks a dense weight's 'embed' dimension is split over (times context)
    if shard * s["context"] == 1:  # 'embed' and 'embed_moe' name no other axis: nothing is sharded
        out["dp_sharding"] = "none"
        return out
    out["dp_sharding"] = "zero3"
    if s["data"] > 1:
        out["dp_shard"] = shard
        if s["expert"] > 1 or moe:  # 'embed_moe': fsdp and context; the experts' replicas data x fsdp x context
            out["expert_dp_shard"] = s["fsdp"] * s["context"]
    return out


def _check_ici_domain(given: str, ici_total: int, gpus_per_domain: int, domain_gpus: int | None, source: str) -> None:
    """:func:`check_mesh_placement`'s first rule: the ICI product ``ici_total`` divides ``gpus_per_domain``."""
    # rev108: the fill is named only where it would pass (ici_fsdp=128 or 48 at 64 of a 72-GPU rack were told
    # gpus_per_domain_used = 72, which this check then refused too)
    fill = (f", or gpus_per_domain_used = {domain_gpus} (the job is placed at {gpus_per_domain} of each "
            f"{domain_gpus}-GPU domain)" if domain_gpus and domain_gpus > gpus_per_domain
            and domain_gpus % ici_total == 0 else "")
    if ici_total > gpus_per_domain:
        raise TopoError(f"the ICI sizes {given} multiply to {ici_total:,} GPUs, more than the {gpus_per_domain:,} "
                        f"the job uses of an NVLink domain (ICI is NVLink on GPUs; a JAX hybrid mesh lays ici_* over one "
                        f"slice's devices); allowed: ici_* sizes whose product divides {gpus_per_domain:,} (the "
                        f"rest on dcn_*){fill}", source=source)
    if gpus_per_domain % ici_total:
        raise TopoError(f"the ICI sizes {given} multiply to {ici_total:,} GPUs, which does not divide the "
                        f"{gpus_per_domain:,} the job uses of an NVLink domain, so some ICI groups would straddle two "
                        f"domains (MaxText asserts the ICI sizes multiply to a slice's devices); allowed: ici_* sizes "
                        f"whose product divides {gpus_per_domain:,}{fill}", source=source)


def maxtext_micro_batch(global_batch: int, dp: int, pp: int = 1) -> int | None:
    """Sequences per micro-batch of a data-parallel replica as MaxText runs a global batch by default: no gradient
    accumulation, and under pipelining as many micro-batches as stages.

    MaxText trains ``per_device_batch_size x devices x gradient_accumulation_steps`` sequences a step
    (``calculate_global_batch_sizes`` in ``pyconfig``), ``gradient_accumulation_steps`` 1 unless set, and splits a
    pipelined replica's batch into ``num_pipeline_microbatches``, by default (-1) the number of stages (``pyconfig``'s
    pipeline settings; twice that with ``pipeline_delay_activation_forwarding``). Read at AI-Hypercomputer/maxtext
    (the stored ``pyconfig`` whose ``set_and_validate_pipeline_config`` and ``calculate_global_batch_sizes`` these
    are; no commit pinned, see docs/calibration-findings.md section 447).

    Parameters
    ----------
    global_batch : int
        Sequences per optimizer step.
    dp : int
        Data-parallel replicas (data x fsdp x expert ranks of the mesh).
    pp : int
        Pipeline stages.

    Returns
    -------
    int or None
        ``global_batch / (dp x pp)`` sequences, or None where that is not a whole number (the layout's own check
        then names the batch).
    """
    per = dp * max(pp, 1)
    return global_batch // per if global_batch > 0 and global_batch % per == 0 else None


def global_batch_per_device(per_device: float | str, devices: int, source: str = "per_device_batch_size") -> int:
    """Sequences a step trains on from MaxText's ``per_device_batch_size``: exactly ``per_device x devices``.

    MaxText states its batch per device, an ``int | float`` (AI-Hypercomputer/maxtext@e591f30c
    ``src/maxtext/configs/types.py`` line 1400, ``per_device_batch_size: int | float``, "The batch size per
    device"; ``base.yml`` line 731), and trains ``int(num_devices x per_device_batch_size x
    gradient_accumulation_steps)`` sequences a step (``types.py`` lines 3458-3466, ``calculate_global_batch_sizes``;
    ``gradient_accumulation_steps`` 1 in ``base.yml`` line 968). Below 1 it loads one sequence a device and trains on
    the first ``int(num_devices x per_device_batch_size)`` of them (the same lines); topo prices the trained ones.
    ``int`` truncates a product that is not whole; here it is refused, since the step would then train a batch
    the user did not write. The value is read as its decimal text (``Fraction``), so ``0.1 x 30`` is 3 exactly.

    Parameters
    ----------
    per_device : float or str
        Sequences per device, > 0 (``0.5``: one sequence per two devices).
    devices : int
        GPUs of the mesh (its ``ici_*`` x ``dcn_*`` product).
    source : str
        What names the value in an error (a flag).

    Returns
    -------
    int
        The global batch, ``per_device x devices``.

    Raises
    ------
    TopoError
        A value that is not a number > 0, or a product that is not a whole number of sequences.
    """
    text = str(per_device).strip()
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError, OverflowError):
        value = Fraction(0)
    if value <= 0:
        raise TopoError(f"must be a number of sequences per device > 0 (MaxText's per_device_batch_size, e.g. 8 or "
                        f"0.5), got {text!r}", source=source)
    batch = value * devices
    if batch > MAX_COUNT:  # 1e300 went on to a NaN in the step, an internal error (fuzz136)
        raise TopoError(f"{text} x {devices:,} GPUs is more than {MAX_COUNT:,} sequences, the most a layout takes "
                        f"(topo.training.parallel.MAX_COUNT); allowed: up to {MAX_COUNT // devices:,} per device",
                        source=source)
    if batch.denominator != 1:
        raise TopoError(f"{text} x {devices:,} GPUs = {float(batch):g} sequences, not a whole number (MaxText's "
                        f"int() would train {batch.numerator // batch.denominator:,}); allowed: a per-device batch "
                        f"whose product with {devices:,} GPUs is whole (a multiple of 1/{devices:,})", source=source)
    return int(batch)
