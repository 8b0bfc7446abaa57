"""The tensors one block of a layer saves for its backward, and what offloading its modules moves and frees.

Per block kind (attention, MLP, MoE, Mamba-2, ...), one micro-batch on one GPU: the saved activations as
Korthikanti et al. (arXiv 2205.05198) count them, at each module's recipe (:mod:`.module_recipes`), with
selective recomputation's modules dropped (:func:`block_activation_bytes`), and what Megatron-Core's per-module
activation offloading (``offload_modules``) copies to host memory and frees on the GPU
(:func:`block_offload_bytes`). Whether a layer is recomputed whole, so that it keeps only its input and saves
nothing inside it (:func:`fully_recomputed`), is decided here for the memory, the recompute time and the offload
alike. :mod:`.memory` sums these over a stage's layers; :mod:`.activation_offload` prices the copies. The module
imports nothing of the step's operators, so both can read it.
"""

from __future__ import annotations

from .model import ATTENTION_BLOCKS, Block, ModelSpec
from .module_recipes import module_copy_bytes, op_recipes
from .parallel import ParallelLayout
from .recomputed_modules import modules_recomputed

__all__ = ["block_activation_bytes", "block_offload_bytes", "fully_recomputed", "modules_recomputed"]


def fully_recomputed(lay: ParallelLayout, layer: int) -> bool:
    """Whether the stage's ``layer``-th layer (from 0) is recomputed whole (``recompute`` full: every layer, or
    the first ``recompute_num_layers``), as :func:`.operators._stage_row` and :func:`.operators._recomputed` count them, the memory
    keeps only its input (:func:`block_activation_bytes`'s callers) and per-module offloading copies
    nothing of it (autograd saves nothing inside a checkpointed layer's no-grad forward, so Megatron-Core's
    ``saved_tensors_hooks`` see no tensor: :func:`.activation_offload.stage_offload_bytes`).

    Parameters
    ----------
    lay : ParallelLayout
    layer : int
        The layer's index in its stage, from 0.

    Returns
    -------
    bool
    """
    return lay.recompute == "full" and (lay.recompute_num_layers is None or layer < lay.recompute_num_layers)


def block_activation_bytes(model: ModelSpec, lay: ParallelLayout, kind: str, bf16_layer: bool = False) -> float:
    """Bytes one block of ``kind`` stores for the backward pass, one micro-batch, one GPU (see the module doc),
    less what ``offload_modules`` copies to host memory (:func:`block_offload_bytes`).

    Each linear module's saved input is its own quantised copy (:func:`.module_recipes.module_copy_bytes`): at its
    ``module_recipes`` recipe where the layout names one, else the layout's, 2 bytes (BF16) for a BF16 module or a
    layer run outside the FP8 context (``bf16_layer``: :func:`.operators.bf16_layers`). Transformer Engine saves the
    module's input as its input quantizer made it and keeps only the column-wise usage the weight gradient reads
    (NVIDIA/TransformerEngine@d0067d0d ``transformer_engine/pytorch/module/linear.py`` lines 616-621 and 1433-1434,
    ``layernorm_linear.py`` lines 469-485 and 526-536 (``ln_out``), ``layernorm_mlp.py`` lines 807-824 (``ln_out``,
    ``act_out``), ``grouped_linear.py`` lines 912-914 and 930-936 (each expert's input)); a module with no quantizer
    (BF16: no recipe of its own, or outside ``fp8_autocast``) saves its BF16 input (``linear.py`` line 439,
    ``cast_if_needed``).

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    kind : str
        The block's layer-pattern character.
    bf16_layer : bool, optional
        The block is in a layer an FP8 layout keeps in BF16.

    Returns
    -------
    float
        Bytes.
    """
    return _block_bytes(model, lay, kind, bf16_layer)[0]


def block_offload_bytes(model: ModelSpec, lay: ParallelLayout, kind: str, bf16_layer: bool = False) -> tuple[float,
                                                                                                               float]:
    """Bytes one block of ``kind`` copies to host memory and back per micro-batch on one GPU under the layout's
    ``offload_modules`` (Megatron-Core's fine-grained activation offloading), and the bytes that frees on the GPU.

    Each module offloads the tensors autograd saves inside it (NVIDIA/Megatron-LM@2a75ac12
    ``megatron/core/pipeline_parallel/fine_grained_activation_offload.py``: ``group_start`` hooks
    ``saved_tensors_hooks``, ``bulk_offload_group`` copies each saved tensor of at least
    ``min_offloaded_tensor_size`` elements; module boundaries: ``moe/experts.py`` lines 813-923,
    ``attention.py`` lines 1543-1619), the same terms :func:`block_activation_bytes` counts:

    - ``expert_fc1``: the routed copies of the experts' fc1 input; below MXFP8 / NVFP4 Megatron makes fc1 save its
      BF16 input (``set_save_original_input``, ``experts.py`` lines 278-283), so 2 bytes an element move;
    - ``moe_act``: fc1's output, the activation's input (``2 (k - 1) f`` per routed expert);
    - ``fused_group_mlp``: the whole routed grouped MLP's (fc1's input, its output, fc2's input);
    - ``core_attn``: Q, K, V and the attention's output (which ``attn_proj`` also saves: moved, not freed, by
      ``core_attn`` alone); ``attn_proj``: the output projection's saved input.

    Parameters
    ----------
    model : ModelSpec
    lay : ParallelLayout
    kind : str
        The block's layer-pattern character.
    bf16_layer : bool, optional
        The block is in a layer an FP8 layout keeps in BF16.

    Returns
    -------
    tuple of float
        ``(moved_bytes, freed_bytes)``, one way; 0 and 0 without ``offload_modules``. Megatron-Core's
        ``min_offloaded_tensor_size`` (1 Mi elements) is not applied: every tensor counted moves.
    """
    _, moved, freed = _block_bytes(model, lay, kind, bf16_layer)
    return moved, freed


def _block_bytes(model: ModelSpec, lay: ParallelLayout, kind: str, bf16_layer: bool) -> tuple[float, float, float]:
    """:func:`block_activation_bytes` and :func:`block_offload_bytes`'s two: one accounting of a block's saved
    tensors."""
    s = (lay.seq_len or model.seq_len) / lay.cp
    b, h, t = lay.micro_batch, model.hidden, lay.tp
    sbh = s * b * h
    sp = lay.sequence_parallel or t == 1
    mask = 1 if model.dropout else 0
    mods = set(modules_recomputed(lay))
    norm = 0.0 if "layernorm" in mods else 2.0
    # a linear layer's saved input: under FP8 / FP4 Transformer Engine keeps its module's quantised column-wise
    # copy, scales included (NVFP4: 0.5 + 1/16 bytes an element), BF16 (2) for a BF16 module or layer
    own = op_recipes(lay.module_recipes) if lay.precision == "fp8" else {}
    precision = "bf16" if bf16_layer else lay.precision

    def x(module: str, op: str) -> float:
        return module_copy_bytes(own.get((module, op), ""), precision, lay.fp8_recipe)

    offload = set(lay.offload_modules)
    moved = freed = 0.0  # per s b h element, in the part divided by t
    if kind in ATTENTION_BLOCKS:  # a local window (W) stores the same tensors (its scores only without a fused kernel)
        x_in = module_copy_bytes("", precision, lay.fp8_recipe) if model.attention.kind == "mla" else x("attention", "qkv")
        replicated, rest, scores, terms = _attention_parts(model, lay, s, x_in, x("attention", "out_proj"), mask,
                                                           mods)
        replicated += norm
        if offload:
            moved, freed = _attention_offload(model, terms, offload)
    elif kind in (Block.MLP, Block.MOE):
        x_in, rest, terms = _mlp_parts(model, kind, x, mods)
        replicated, scores = norm + x_in + mask, 0.0
        if offload and kind == Block.MOE:
            moved, freed = _moe_offload(lay, precision, terms, offload)
    else:  # Mamba-2: mamba_ssm's mamba_split_conv1d_scan_combined saves in_proj's output z x B C dt and the
        # scan's output, not the convolution's (recomputed backward: ssd_combined.py@e9594ce1); the norm saves
        # its input, out_proj its input (the norm's output). in_proj and out_proj are Transformer Engine linears
        # (NVIDIA/Megatron-LM@d98e8a64 megatron/core/models/hybrid/hybrid_layer_specs.py lines 128-130:
        # TELayerNormColumnParallelLinear, TERowParallelLinear), so each saves its input as its quantised copy
        mb = model.mamba
        di, gN = model.mamba_inner, 2 * mb.groups * mb.d_state
        inner = (2 * (2 * di + gN + model.mamba_heads + di) + x("mamba", "out_proj") * di) / h
        replicated, rest, scores = norm + x("mamba", "in_proj"), inner, 0.0
    rest -= freed  # a part of rest by construction: each module frees terms rest holds
    if sp:
        return sbh * (replicated + rest + scores) / t, sbh * moved / t, sbh * freed / t
    return sbh * (replicated + (rest + scores) / t), sbh * moved / t, sbh * freed / t


def _kv_frac(model: ModelSpec) -> float:
    """K and V's elements per hidden element (MLA: its latents and per-head K and V)."""
    h = model.hidden
    if model.attention.kind == "mla":
        a = model.attention
        return (a.kv_lora_rank + a.qk_rope_head_dim + model.heads * (a.qk_nope_head_dim + a.v_head_dim)) / h
    return model.num_kv_heads * model.head_dim / h


def _attention_offload(model: ModelSpec, terms: dict, offload: set) -> tuple[float, float]:
    """``(moved, freed)`` bytes per ``s b h`` element of an attention block's offloaded modules
    (:func:`block_offload_bytes`) from :func:`_attention_parts`' ``terms``: ``core_attn`` Q, K, V (none saved when
    ``qkv_proj`` or MLA's ``mla_up_proj`` is recomputed) and the output (``heads x v_dim`` wide, BF16), moved but
    kept (``attn_proj`` saves it too); ``attn_proj`` its saved input (none when ``core_attn`` is recomputed)."""
    moved = freed = 0.0
    if "core_attn" in offload:
        moved, freed = terms["qkv"] + 2 * _attention_widths(model)[1], terms["qkv"]
    if "attn_proj" in offload:
        moved, freed = moved + terms["out"], freed + terms["out"]
    return moved, freed


def _moe_offload(lay: ParallelLayout, precision: str, terms: dict, offload: set) -> tuple[float, float]:
    """``(moved, freed)`` bytes per ``s b h`` element of an MoE block's offloaded expert modules
    (:func:`block_offload_bytes`) from :func:`_mlp_parts`' routed ``terms`` (``fc2_in`` 0 where ``moe_act`` is
    recomputed: fc2's input is not saved)."""
    fc1_in, act_in, fc2_in, fc1_elems = terms["fc1_in"], terms["act_in"], terms["fc2_in"], terms["fc1_elems"]
    moved = freed = 0.0
    if "expert_fc1" in offload:  # below MXFP8 / NVFP4 fc1 saves its BF16 input to offload it
        block_scaled = precision == "fp8" and lay.fp8_recipe in ("mxfp8", "nvfp4")
        moved, freed = (fc1_in if block_scaled or precision != "fp8" else 2 * fc1_elems), fc1_in
    if "moe_act" in offload:
        moved, freed = moved + act_in, freed + act_in
    if "fused_group_mlp" in offload:
        moved, freed = fc1_in + act_in + fc2_in, fc1_in + act_in + fc2_in
    return moved, freed


def _attention_parts(model: ModelSpec, lay: ParallelLayout, s: float, x_in: float, x_out: float, mask: int,
                     mods: set) -> tuple[float, float, float, dict]:
    """An attention block's saved bytes per ``s b h`` element as :func:`block_activation_bytes` splits them:
    ``(replicated, rest, scores, terms)`` without the norm's output; ``x_in`` / ``x_out`` are the saved copies' bytes
    an element of qkv's input (an MLA block's down projections', at the layout's recipe: module_recipes names none)
    and of the output projection's. Q is ``heads x qk_dim`` wide and the attention's output (the projection's input)
    ``heads x v_dim`` (:func:`_attention_widths`), not ``h``. ``terms``: the part of ``rest`` that is Q, K and V
    (``qkv``) and the projection's saved input (``out``), which :func:`_attention_offload` moves."""
    h, kv_frac = model.hidden, _kv_frac(model)
    q, o = _attention_widths(model)
    qkv, out = 2 * q + 4 * kv_frac, x_out * o
    if model.attention.kind == "mla" and "mla_up_proj" in mods:  # Q, K, V recomputed from the latents
        a = model.attention
        qkv = 0.0
        latents = 2 * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) / h
    else:
        latents = 0.0
    scores = 0.0
    if not (lay.recompute == "selective" or lay.flash_attention or "core_attn" in mods):
        scores = (5 if model.dropout else 2) * model.heads * s / h  # the s x s square, masked or not
    if "core_attn" in mods:
        out = 0.0  # the attention output (the projection's input) is recomputed
    if "qkv_proj" in mods and model.attention.kind != "mla":
        qkv = 0.0  # Q, K and V recomputed from the norm's output
    # without SP the norm's output, its input and the mask are on every rank
    return x_in + mask, latents + qkv + out, scores, {"qkv": qkv, "out": out}


def _attention_widths(model: ModelSpec) -> tuple[float, float]:
    """Q's and the attention output's elements per hidden element: ``heads x head_dim / h`` each (Nemotron 3 Nano:
    32 x 128 = 4,096 against h = 2,688; Megatron-Core's ``linear_qkv`` and ``linear_proj`` are ``heads x
    kv_channels`` wide, as :func:`.operators` prices their GEMMs). MLA keeps its own approximate terms
    (:func:`_kv_frac`: latents and per-head K and V, Q and the output at ``h``), not re-derived here."""
    if model.attention.kind == "mla":
        return 1.0, 1.0
    return model.heads * model.qk_dim / model.hidden, model.heads * model.v_dim / model.hidden


def _mlp_parts(model: ModelSpec, kind: str, x, mods: set) -> tuple[float, float, dict]:
    """A dense MLP or MoE block's ``(x_in, inner, terms)`` per ``s b h`` element for :func:`block_activation_bytes`:
    the bytes an element of the norm's output as the block's first linear saves it, the intermediates, and an MoE
    block's routed experts' share of them as its offloadable modules save them (``fc1_in``, ``act_in``, ``fc2_in``,
    and ``fc1_elems``, fc1's input in elements; empty for an MLP); ``x(module, op)`` gives a linear's saved copy's
    bytes an element.

    Recomputing the activation drops only its output, fc2's saved input: Megatron-Core's ``moe_act`` checkpoints
    the routed experts' activation with ``CheckpointWithoutOutput``, which keeps its input (fc1's output) and, once
    fc2 has run, frees its output (``discard_output_and_register_recompute``), under FP8 / FP4 the BF16 input fc2 is
    made to save (``set_save_original_input``) (NVIDIA/Megatron-LM@2a75ac12
    ``megatron/core/transformer/moe/experts.py`` lines 268-275 and 904-915); the routed copies of fc1's input,
    fc2_latent_proj's input and the shared experts (an ``MLP``, which ``moe_act`` does not reach) stay. MaxText's
    ``mlp_act`` (the activation not saved, remat_policies.toml) drops a dense MLP's fc2 input the same way."""
    h, k = model.hidden, model.mlp_matrices
    if kind == Block.MLP:
        x_in = x("mlp", "fc1")
        inner = (2 * (k - 1) + x("mlp", "fc2")) * model.ffn_hidden / h  # k f-wide intermediates, the last fc2's input
        mod, terms = "mlp", {}
    else:
        m = model.moe
        # the norm's output as the block's first linear saves it: fc1_latent_proj's under LatentMoE, else the
        # shared experts' fc1's, else the routed experts' (the layout's recipe without module_recipes)
        x_in = x("moe", "fc1_latent_proj") if m.latent_size else x(
            "shared_experts" if m.shared_experts else "moe", "fc1")
        # each routed and shared expert's k intermediates (the last its fc2's input), the routed copies of fc1's
        # input at the routed width and, under LatentMoE, fc2_latent_proj's input
        w, fh = model.moe_width / h, m.expert_ffn_hidden / h
        inner = ((m.active_experts * (2 * (k - 1) + x("moe", "fc2"))
                  + m.shared_experts * (2 * (k - 1) + x("shared_experts", "fc2"))) * m.expert_ffn_hidden / h
                 + x("moe", "fc1") * m.active_experts * w + (x("moe", "fc2_latent_proj") * w if m.latent_size else 0.0))
        mod = "moe"
        terms = {"fc1_in": x("moe", "fc1") * m.active_experts * w, "fc1_elems": m.active_experts * w,
                 "act_in": m.active_experts * 2 * (k - 1) * fh, "fc2_in": m.active_experts * x("moe", "fc2") * fh}
    if mod in mods or "mlp_wi" in mods:  # the input projection and the activation recomputed: fc2's input too
        inner, terms = 0.0, {k_: 0.0 for k_ in terms}
    elif "moe_act" in mods and kind == Block.MOE:  # the routed experts' fc2 input only (see the docstring)
        inner, terms = inner - terms["fc2_in"], {**terms, "fc2_in": 0.0}
    elif "mlp_act" in mods and kind == Block.MLP:  # fc2's input, recomputed from fc1's output (which stays)
        inner -= x("mlp", "fc2") * model.ffn_hidden / h
    return x_in, inner, terms
