"""A transformer's shape (a TOML file in ``topo/data/models/``): validated, with its parameter counts.

A model file gives layers, hidden, FFN hidden, heads, KV heads, vocabulary and sequence length, the MLP kind
(``gelu``: 2 matrices, ``swiglu``: 3, ``relu2``: squared ReLU, 2), optionally Multi-head Latent Attention
(``[attention] kind = "mla"``), a mixture of experts (``[moe]``: experts, active experts per token, shared
experts, their FFN size, how many leading layers stay dense, MoE on every k-th layer ``every``, and node-limited
routing ``max_nodes_per_token``, LatentMoE's ``latent_size``), local attention (``[attention] window``: a sliding window or chunks, on every
layer or all but every ``full_every``-th; such a layer's attention block is ``W``)
and Mamba-2 state-space mixers (``[mamba]``, with ``layer_pattern``: one character per layer, ``M`` Mamba-2,
``*`` attention, ``-`` MLP, ``E`` MoE, as Megatron-LM's ``hybrid_override_pattern`` writes Nemotron-H; a
transformer without a pattern has layers of ``*-`` or ``*E``). Every bundled file cites its source; unpublished
figures say so in ``status``.

Parameter counts (weights only; biases and norm gains are counted as 2 h per layer, embeddings as V h, the
output projection as another V h unless tied) are what FLOPs (:mod:`topo.training.flops`) and memory
(:mod:`topo.training.memory`) are built on.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from ..errors import TopoError, closest
from ..inputs import is_input_file, read_toml, shown_value
from ..resources import data_dir
from .framework_names import other_framework_hint

__all__ = ["ATTENTION_BLOCKS", "BLOCK_KINDS", "Block", "ModelSpec", "MoeSpec", "MambaSpec", "AttentionSpec", "load_model", "bundled_models",
           "models_dir", "validation_error"]

PositiveInt = Annotated[int, Field(strict=True, ge=1)]
class Block(StrEnum):
    """A block of a layer, as a model's ``layer_pattern`` writes it (Megatron-LM's hybrid pattern characters)."""

    ATTENTION = "*"
    LOCAL = "W"  # attention over a local window (sliding or chunked)
    MLP = "-"
    MOE = "E"
    MAMBA = "M"


ATTENTION_BLOCKS = (Block.ATTENTION, Block.LOCAL)
BLOCK_KINDS = "".join(Block)
"""Block kinds of a layer: attention over the whole prefix (``*``) or a local window (``W``), dense MLP (``-``),
MoE (``E``), Mamba-2 (``M``)."""


class _Strict(BaseModel):
    # booleans are StrictBool: a model file's "yes" or 1 is refused ('must be true or false'), not read as true
    # schemas built when a model is first validated (topo train, report --train, sweep), not when topo plan imports
    # the training package for its MFU prediction (AttentionSpec, a default below, is built at import all the same)
    # numbers are finite: a model file's inf or nan is refused ("Input should be a finite number"), not carried
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)


class AttentionSpec(_Strict):
    """Attention projections. ``gqa`` (default): Q and O of hidden x hidden, K and V of hidden x kv_heads x
    head_dim. ``mla`` (DeepSeek-V2/V3): low-rank query and key/value compression."""

    kind: Literal["gqa", "mla"] = "gqa"
    head_dim: PositiveInt | None = None
    """Per-head dimension (default hidden / heads)."""
    q_lora_rank: PositiveInt | None = None
    kv_lora_rank: PositiveInt | None = None
    qk_nope_head_dim: PositiveInt | None = None
    qk_rope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None
    window: PositiveInt | None = None
    """Local attention: the keys a query attends to at most (``sliding``: its own and the ``window - 1``
    before it, gpt-oss's ``sliding_window``; ``chunked``: the causal part of its ``window``-token chunk, Llama 4's
    ``attention_chunk_size``). Default: every layer attends to the whole causal prefix."""
    window_kind: Literal["sliding", "chunked"] = "sliding"
    rope: StrictBool = True
    """Rotary position embedding applied to Q and K (one elementwise pass). False: none (Megatron-Core's
    ``MambaModel`` defaults ``position_embedding_type`` to ``'none'``; NeMo AutoModel's ``NemotronV3Attention``
    applies none, "matching the HF NemotronHAttention implementation")."""
    rope_concentration: Annotated[float, Field(gt=0)] = 1.0
    """The factor the rotary embedding scales Q and K by (YaRN's attention factor, ``0.1 ln s + 1`` for a
    scaling factor ``s``: gpt-oss 1.3466 at ``s = 32``; Megatron-Core's ``_yarn_get_concentration_factor``, its
    ``mscale``). Default 1: plain RoPE. Transformer Engine's fused RoPE takes no such factor, so Megatron-Core runs
    RoPE unfused when it is not 1 (the layout's ``rope_kernel``)."""
    qk_norm: StrictBool = False
    """Megatron-Core's ``qk_layernorm``: under GQA an RMSNorm over each query and each key head before RoPE
    (Qwen3's QK-Norm, arXiv 2505.09388 sec. 2; ``q_layernorm`` and ``k_layernorm`` over the head dimension in
    ``SelfAttention.get_query_key_value_tensors``, NVIDIA/Megatron-LM@c2d1a8f7e5
    megatron/core/transformer/attention.py); under MLA the RMSNorms after the compressed query and key-value
    latents (DeepSeek-V3, arXiv 2412.19437 sec. 4.2, following DeepSeek-V2). One memory-bound pass over each."""
    out_bias: StrictBool = False
    """The output projection carries a bias (gpt-oss: ``o_proj.bias``; Megatron-Core's ``add_bias_linear``):
    its weights are not counted, but Megatron-Core adds it in an eager pass of its own where the layout's
    ``attention_bias_eager`` says so (:data:`topo.training.operators.ATTENTION_BIAS_MOVES`)."""
    sinks: Literal["none", "learnable", "off-by-one"] = "none"
    """Attention sinks: an extra logit in every softmax, learnable a head (gpt-oss's ``sinks``; Megatron-Core's
    ``softmax_type``) or fixed at zero (``off-by-one``). They select the attention kernel (no FlashAttention; cuDNN's
    fused attention from cuDNN 9.13.1, else unfused: :func:`topo.training.attention_sinks.sink_backend`); their
    weights (one scalar a head) are not counted. Default ``none``: a plain softmax."""
    full_every: PositiveInt | None = None
    """With ``window``: layer ``i`` (0-based) attends to the whole prefix when ``(i + 1) % full_every == 0``,
    the others are local (gpt-oss: 2, ``layer_types`` alternating sliding and full; Llama 4: 4, every fourth
    layer global without RoPE). Default: every layer local."""

    @model_validator(mode="after")
    def _mla_complete(self):
        if self.kind == "mla":
            missing = [k for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                   "v_head_dim") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"mla attention needs {', '.join(missing)}")
        if self.full_every is not None and self.window is None:
            raise ValueError("attention.full_every needs attention.window (the local layers' window)")
        return self


class MoeSpec(_Strict):
    """Mixture of experts in the FFN of every layer after the first ``dense_layers``."""

    experts: PositiveInt
    """Routed experts per MoE layer."""
    active_experts: PositiveInt
    """Routed experts each token goes to (top-k)."""
    shared_experts: Annotated[int, Field(strict=True, ge=0)] = 0
    """Experts every token goes to (DeepSeek's shared expert)."""
    expert_ffn_hidden: PositiveInt
    dense_layers: Annotated[int, Field(strict=True, ge=0)] = 0
    """Leading layers with a dense FFN (``ffn_hidden``) instead of experts."""
    every: PositiveInt = 1
    """Interleaving: a layer after the ``dense_layers`` is MoE when its index ``i`` (0-based, counted from the
    model's first layer) has ``(i + 1) % every == 0``, and has a dense FFN (``ffn_hidden``) otherwise (Llama 4 Maverick: 2, Hugging Face's
    ``interleave_moe_layer_step``, MoE layers 1, 3, 5, ...). Default: every layer MoE."""
    router: Literal["deepseek", "softmax_aux_loss", "sigmoid_topk", "softmax_topk"] = "deepseek"
    """The router's configuration, which sets the kernels its eager forward launches (``kernels.toml``
    ``[launch] router_ops``): ``deepseek``, DeepSeek-V3's (sigmoid scores, expert bias, group-limited top-k,
    sequence aux loss; Megatron-Bridge deepseek_v3_bridge.py, nemotron_h_bridge.py); ``softmax_aux_loss``,
    softmax scores, plain top-k and the switch aux loss (Mixtral, Qwen3); ``sigmoid_topk``, sigmoid scores and
    plain top-k without an aux loss (Llama 4); ``softmax_topk``, top-k then softmax without one (gpt-oss)."""
    expert_bias: StrictBool = False
    """Each expert's fc1 and fc2 carry a bias (gpt-oss: ``gate_up_proj_bias`` and ``down_proj_bias``,
    Megatron-Core's ``add_bias_linear``): the weights are not counted (under 0.1%), but a framework may add them in
    passes of their own over the experts' rows (the layout's ``expert_bias_eager``)."""
    glu_clamp: Annotated[float, Field(gt=0)] | None = None
    """The experts' gated activation clamps its inputs (gpt-oss: 7.0, the gate half at most 7 and the linear half
    within +-7; its config.json ``swiglu_limit``, Megatron-Bridge's ``activation_func_clamp_value``): free when the
    activation kernel does it, passes of their own when the framework clamps eagerly (the layout's
    ``expert_clamp_eager``). Default: no clamp."""
    latent_size: PositiveInt | None = None
    """LatentMoE (Nemotron 3 Super; Megatron-Core's ``moe_latent_size``): each MoE block projects its tokens from
    ``hidden`` down to this width before the dispatch (``fc1_latent_proj``) and back up after the combine
    (``fc2_latent_proj``), two dense ``hidden x latent_size`` linears duplicated on every tensor-parallel rank
    (``parallel_mode="duplicated"``); the routed experts run and the all-to-all carries the latent width, the
    router and the shared experts the full hidden state (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/transformer/moe/moe_layer.py lines 266-304 and 466-491, ``preprocess`` and ``postprocess``;
    moe/experts.py lines 219 and 241; transformer/mlp.py line 217). Default: none (the experts at ``hidden``)."""
    max_nodes_per_token: PositiveInt | None = None
    """Node-limited routing (DeepSeek-V3 sec. 2.1.2: each token goes to experts on at most 4 nodes, and is sent
    once per node, then forwarded over NVLink): the copies of a token that cross the scale-out network."""

    @model_validator(mode="after")
    def _k_le_e(self):
        if self.active_experts > self.experts:
            raise ValueError(f"active_experts: {self.active_experts} is more than the {self.experts} experts (a "
                             f"token's top-k picks distinct experts); allowed: 1 to {self.experts}")
        return self


class MambaSpec(_Strict):
    """A Mamba-2 mixer (Dao and Gu 2024, "Transformers are SSMs", arXiv 2405.21060): ``in_proj`` to
    ``2 d_inner + 2 groups d_state + heads``, a causal depthwise convolution of ``conv_kernel`` over
    ``d_inner + 2 groups d_state`` channels, the chunked state-space scan, a gated norm and ``out_proj``."""

    d_state: PositiveInt
    head_dim: PositiveInt = 64
    num_heads: PositiveInt | None = None
    """SSM heads; ``d_inner = num_heads x head_dim`` (default ``expand x hidden``)."""
    expand: PositiveInt = 2
    groups: PositiveInt = 8
    conv_kernel: PositiveInt = 4
    chunk_size: PositiveInt = 256


class ModelSpec(_Strict):
    """One model's shape."""

    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    source: str | list[str]
    """Where the figures come from (URLs)."""
    status: str = "published"
    """``published``, or what else the figures are (``unpublished (rumoured)``)."""
    published_params_B: Annotated[float, Field(gt=0)] | None = None
    """The parameter count the source prints (billions), to check the shape against."""
    layers: PositiveInt
    hidden: PositiveInt
    ffn_hidden: PositiveInt
    heads: PositiveInt
    kv_heads: PositiveInt | None = None
    """Key/value heads (grouped-query attention); default: heads."""
    vocab: PositiveInt
    seq_len: PositiveInt
    """Pre-training sequence length (a layout may override it)."""
    mlp: Literal["gelu", "swiglu", "relu2"] = "gelu"
    tied_embeddings: StrictBool = False
    dropout: StrictBool = False
    """The layers apply dropout (GPT-2/3, Megatron's GPTs: true; Llama 3, DeepSeek-V3: false): its masks are
    activations (1 byte per element after attention and after the MLP, Korthikanti et al. 2022)."""
    attention: AttentionSpec = AttentionSpec()
    moe: MoeSpec | None = None
    mamba: MambaSpec | None = None
    mtp_layers: Annotated[int, Field(strict=True, ge=0)] = 0
    """Multi-token prediction depths trained with the model (DeepSeek-V3 sec. 2.2: each is the embedding and hidden
    norms, a projection of ``2 h`` to ``h``, the depth's layers (:attr:`mtp_block`) and the shared output head;
    config.json's ``num_nextn_predict_layers``, Megatron-Core's ``mtp_num_layers``), on the last pipeline stage."""
    mtp_pattern: Annotated[str, Field(min_length=1)] | None = None
    """A hybrid model's MTP depth, its blocks on ``layer_pattern``'s alphabet (``"*E"``: attention then MoE), as
    Megatron-Core's ``HybridModel`` builds each depth from the part after ``/`` of its unified pattern
    (NVIDIA/Megatron-LM@2a75ac12 ``megatron/core/models/hybrid/hybrid_layer_allocation.py``
    ``parse_hybrid_pattern``; Megatron-Bridge's ``mtp_hybrid_override_pattern``). Required on a hybrid with
    ``mtp_layers``: without it Megatron-Core builds no MTP there. A model without a ``layer_pattern`` takes none:
    its depth is one transformer layer like its last (Megatron-Core's GPT path)."""
    mtp_shared: StrictBool = False
    """Every MTP depth runs one shared module (Megatron-Core's ``mtp_use_repeated_layer``: "only 1 layer is created
    and applied mtp_num_layers times", ``megatron/core/transformer/multi_token_prediction.py`` @2a75ac12): priced
    once per depth, its weights held once."""
    layer_pattern: str | None = None
    """One character per layer: ``M`` Mamba-2 mixer, ``*`` attention, ``-`` MLP, ``E`` MoE (Megatron-LM's
    ``hybrid_override_pattern``); ``layers`` must equal its length. Default: every layer attention + MLP (MoE
    after ``moe.dense_layers``)."""

    @model_validator(mode="after")
    def _shape(self):
        if self.layer_pattern is not None:
            bad = sorted(set(self.layer_pattern) - set("M*-E"))
            if bad:
                raise ValueError(f"layer_pattern: unknown layer kind {bad[0]!r}; allowed: M (Mamba-2), * "
                                 f"(attention), - (MLP), E (MoE)")
            if len(self.layer_pattern) != self.layers:
                raise ValueError(f"layer_pattern has {len(self.layer_pattern)} layers, layers is {self.layers}")
            if Block.MAMBA in self.layer_pattern and self.mamba is None:
                raise ValueError("layer_pattern has Mamba-2 layers (M) but the file has no [mamba] table")
            if Block.MOE in self.layer_pattern and self.moe is None:
                raise ValueError("layer_pattern has MoE layers (E) but the file has no [moe] table")
        elif self.mamba is not None:
            raise ValueError("a [mamba] table needs a layer_pattern saying which layers are Mamba-2 (M)")
        self._check_mtp()
        self._check_mamba_shape()
        kv = self.kv_heads or self.heads
        if self.heads % kv:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({kv})")
        if self.attention.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads}) or give "
                             f"attention.head_dim")
        if self.layer_pattern is not None and (self.attention.window is not None
                                               or (self.moe is not None and self.moe.every > 1)):
            raise ValueError("attention.window and moe.every apply to layers without a layer_pattern; with a "
                             "layer_pattern each character is one layer's block")
        w = self.attention.window
        if w is not None and w > self.seq_len:
            raise ValueError(f"attention.window: {w} is longer than seq_len ({self.seq_len}), so no layer's "
                             f"window would bound its keys; allowed: 1 to {self.seq_len} (a window as long as "
                             f"the sequence is full causal attention), or drop window")
        if self.moe and self.moe.dense_layers > self.layers:
            raise ValueError(f"moe.dense_layers: {self.moe.dense_layers} is more than the {self.layers} layers; "
                             f"allowed: 0 to {self.layers}")
        return self

    def _check_mamba_shape(self) -> None:
        """The ``[mamba]`` table's heads, head size, width and groups agree, as Megatron-Core's ``MambaMixer``
        asserts them (NVIDIA/Megatron-LM@00bebb45 megatron/core/ssm/mamba_mixer.py, ``__init__``: "d_inner must be
        evenly divisible by headdim" where ``mamba_num_heads`` is unset, ``d_inner = nheads x headdim`` where it
        is set, "nheads must be evenly divisible by ngroups"); one line each, never a floored head count."""
        mb = self.mamba
        if mb is None:
            return
        if mb.num_heads is None:
            width = mb.expand * self.hidden
            if width % mb.head_dim:
                raise ValueError(f"mamba.head_dim: {mb.head_dim} does not divide d_inner = expand x hidden = "
                                 f"{mb.expand} x {self.hidden} = {width}; allowed: a divisor of {width}, or "
                                 f"mamba.num_heads (then d_inner = num_heads x head_dim)")
        elif "expand" in mb.model_fields_set and mb.num_heads * mb.head_dim != mb.expand * self.hidden:
            raise ValueError(f"mamba.expand: {mb.expand} gives d_inner = {mb.expand} x hidden {self.hidden} = "
                             f"{mb.expand * self.hidden}, but num_heads x head_dim = {mb.num_heads} x "
                             f"{mb.head_dim} = {mb.num_heads * mb.head_dim} (Megatron-Core takes the heads and "
                             f"ignores expand); allowed: drop expand, or sizes that agree")
        heads = mb.num_heads or mb.expand * self.hidden // mb.head_dim
        if heads % mb.groups:
            raise ValueError(f"mamba.groups: {mb.groups} does not divide the {heads} Mamba-2 heads (each group "
                             f"holds whole heads); allowed: a divisor of {heads}")

    def _check_mtp(self) -> None:
        """``mtp_pattern`` and ``mtp_shared`` against ``mtp_layers`` and the model's kind; one line each."""
        if self.mtp_layers == 0 and (self.mtp_pattern is not None or self.mtp_shared):
            key = "mtp_pattern" if self.mtp_pattern is not None else "mtp_shared"
            raise ValueError(f"{key} describes multi-token-prediction depths, but mtp_layers is 0; set mtp_layers "
                             f">= 1 or drop {key}")
        if self.mtp_pattern is None:
            if self.mtp_layers and self.layer_pattern is not None:
                raise ValueError(f"mtp_layers = {self.mtp_layers} on a hybrid (layer_pattern) needs mtp_pattern, "
                                 f"one MTP depth's blocks (e.g. \"*E\"): Megatron-Core builds a hybrid's MTP "
                                 f"only from its pattern")
            return
        if self.layer_pattern is None:
            raise ValueError(f"mtp_pattern {self.mtp_pattern!r} applies to a hybrid (a model with layer_pattern); "
                             f"a transformer's MTP depth is one layer like its last")
        bad = sorted(set(self.mtp_pattern) - set("M*-E"))
        if bad:
            raise ValueError(f"mtp_pattern: unknown layer kind {bad[0]!r} in {self.mtp_pattern!r}; allowed: M "
                             f"(Mamba-2), * (attention), - (MLP), E (MoE)")
        if Block.MAMBA in self.mtp_pattern and self.mamba is None:
            raise ValueError("mtp_pattern has a Mamba-2 layer (M) but the file has no [mamba] table")
        if Block.MOE in self.mtp_pattern and self.moe is None:
            raise ValueError("mtp_pattern has an MoE layer (E) but the file has no [moe] table")

    # --- derived shape -------------------------------------------------------------------------------------
    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.attention.head_dim or self.hidden // self.heads

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one FFN: 2 for GeLU (up, down), 3 for SwiGLU (gate, up, down)."""
        return 3 if self.mlp == "swiglu" else 2

    @property
    def fc1_width_factor(self) -> int:
        """fc1's output columns per column of the FFN width: 2 for SwiGLU (gate and up side by side, the GLU halves
        them), 1 for GeLU and squared ReLU (``relu2``: an element-wise activation keeps the width). The one formula
        of fc1's N, dense or grouped, on every issue path: Transformer Engine's fused grouped MLP checks the same
        (``validate_grouped_mlp_dims``: ``2 x fc2.in_features`` for a GLU, ``fc2.in_features`` for ``ScaledSReLU``;
        NVIDIA/TransformerEngine v2.17.1 4329ff84 ``pytorch/ops/fused/grouped_mlp.py``)."""
        return 2 if self.mlp == "swiglu" else 1

    @cached_property
    def blocks(self) -> tuple[str, ...]:
        """Each layer's blocks in order (``"*-"``: attention then MLP; ``"M"``: one Mamba-2 mixer; ...)."""
        if self.layer_pattern is not None:
            return tuple(self.layer_pattern)
        dense = 0 if self.moe is None else self.moe.dense_layers
        every = 1 if self.moe is None else self.moe.every
        return tuple(self.attention_kind(i) + (Block.MLP if (self.moe is None or i < dense or (i + 1) % every)
                                                 else Block.MOE)
                     for i in range(self.layers))

    @property
    def mtp_block(self) -> str:
        """The blocks of one MTP depth, as one pipeline unit: a hybrid's ``mtp_pattern`` (``"*E"``), else the
        model's last layer (a transformer's, ``"*E"`` on DeepSeek-V3); ``""`` without layers."""
        if self.mtp_pattern is not None:
            return self.mtp_pattern
        return self.blocks[-1] if self.blocks else ""

    def attention_kind(self, layer: int) -> str:
        """``*``: layer ``layer`` (0-based) attends to the whole causal prefix; ``W``: a local window
        (``attention.window``, see :class:`AttentionSpec`)."""
        a = self.attention
        if a.window is None or (a.full_every is not None and (layer + 1) % a.full_every == 0):
            return Block.ATTENTION
        return Block.LOCAL

    def attended_keys(self, kind: str, seq: int, causal: bool = True) -> float:
        """Keys one query attends to on average in an attention block of ``kind`` at sequence ``seq``.

        ``causal``: what a fused causal kernel computes, the area of the mask over ``seq`` (continuous, as the
        half square ``seq / 2`` of full attention): sliding window ``w``: ``w - w^2 / (2 seq)`` (``seq >= w``);
        chunks of ``c``: ``(n c^2 + r^2) / (2 seq)`` for ``seq = n c + r``. Not causal (the square a FLOP
        convention counts): ``seq``, or ``min(w, seq)`` for a local layer (Megatron-Bridge's count takes a
        window's causal context instead: :func:`.flops_megatron_lm.swa_context`).

        Parameters
        ----------
        kind : str
            ``*`` (full) or ``W`` (local).
        seq : int
            Sequence length in tokens.
        causal : bool
            The causal mask's area (``True``) or the full band (``False``).

        Returns
        -------
        float
            Mean keys per query.
        """
        a = self.attention
        if kind != Block.LOCAL or a.window is None or a.window >= seq:
            return seq / 2 if causal else float(seq)
        w = a.window
        if not causal:
            return float(w)
        if a.window_kind == "sliding":
            return w - w * w / (2 * seq)
        n, r = divmod(seq, w)
        return (n * w * w + r * r) / (2 * seq)

    def count(self, kind: str) -> int:
        """Blocks of ``kind`` (``*``, ``-``, ``E``, ``M``) in the whole model (counted once per kind: a layout
        search asks millions of times)."""
        if len(kind) != 1:
            return sum(b.count(kind) for b in self.blocks)
        return self.block_counts.get(kind, 0)

    @cached_property
    def block_counts(self) -> dict[str, int]:
        """Blocks per kind (:meth:`count`), counted once from :attr:`blocks`."""
        joined = "".join(self.blocks)
        return {k: joined.count(k) for k in set(joined)}

    @property
    def num_moe_layers(self) -> int:
        return self.count(Block.MOE)

    @property
    def num_dense_layers(self) -> int:
        """Blocks with a dense MLP."""
        return self.count(Block.MLP)

    @property
    def num_attention_layers(self) -> int:
        """Blocks with attention, full (``*``) or local (``W``)."""
        return self.count(Block.ATTENTION) + self.count(Block.LOCAL)

    @property
    def num_mamba_layers(self) -> int:
        return self.count(Block.MAMBA)

    @property
    def mamba_inner(self) -> int:
        """``d_inner = expand x hidden`` of a Mamba-2 mixer (0 without one)."""
        if self.mamba is None:
            return 0
        mb = self.mamba
        return mb.num_heads * mb.head_dim if mb.num_heads else mb.expand * self.hidden

    @property
    def mamba_heads(self) -> int:
        return 0 if self.mamba is None else self.mamba_inner // self.mamba.head_dim

    @cached_property
    def mamba_params(self) -> int:
        """Weights of one Mamba-2 mixer: in_proj, the convolution and its bias (Megatron-Core's MambaMixer asserts
        ``conv_bias``, NVIDIA/Megatron-LM@2a75ac12 megatron/core/ssm/mamba_mixer.py; Hugging Face's ``conv1d.bias``),
        A/D/dt biases, the gated norm, out_proj."""
        if self.mamba is None:
            return 0
        return self.hidden * self.mamba_in_proj_width + self.mamba_nonlinear_params + self.mamba_inner * self.hidden

    @property
    def mamba_in_proj_width(self) -> int:
        """Output width of one Mamba-2 mixer's ``in_proj``: ``2 d_inner + 2 ngroups d_state + nheads`` (z and x, B
        and C, dt: NVIDIA/Megatron-LM@d98e8a64 megatron/core/ssm/mamba_mixer.py); 0 without a ``[mamba]`` table."""
        if self.mamba is None:
            return 0
        return 2 * self.mamba_inner + 2 * self.mamba.groups * self.mamba.d_state + self.mamba_heads

    @property
    def mamba_nonlinear_params(self) -> int:
        """Weights of one Mamba-2 mixer outside its two linear layers (``in_proj``, ``out_proj``): the convolution's
        weight and bias, ``A_log``, ``D`` and ``dt_bias`` (one a head each) and the gated norm (``d_inner``), each
        split over tensor parallelism (``tensor_model_parallel``: NVIDIA/Megatron-LM@d98e8a64
        ``megatron/core/ssm/mamba_mixer.py`` lines 325-345, 390, 402, 414 and 424); part of :attr:`mamba_params`,
        0 without Mamba."""
        if self.mamba is None:
            return 0
        mb, di = self.mamba, self.mamba_inner
        conv_ch = di + 2 * mb.groups * mb.d_state
        return conv_ch * (mb.conv_kernel + 1) + 3 * self.mamba_heads + di

    def block_params(self, kind: str, active: bool = False) -> int:
        """Weights of one block of ``kind`` with its norm (``active``: the routed top-k experts only); an MoE block's
        router with its expert bias where it has one (:attr:`router_bias_params`)."""
        h = self.hidden
        if kind in ATTENTION_BLOCKS:
            return self.attention_params + h + self.mla_norm_params
        if kind == Block.MLP:
            return self.dense_mlp_params + h
        if kind == Block.MAMBA:
            return self.mamba_params + h
        m = self.moe
        n = m.active_experts if active else m.experts
        return (n * self.expert_params + self.shared_expert_params + self.latent_proj_params
                + self.router_and_norm_params + self.router_bias_params)

    @property
    def router_params(self) -> int:
        """The router's weight of an MoE block: ``hidden x experts`` (one score a routed expert from the token's
        hidden state); 0 without MoE."""
        return self.hidden * self.moe.experts if self.moe is not None else 0

    @property
    def router_and_norm_params(self) -> int:
        """An MoE block's weights outside its experts that train: the router's (:attr:`router_params`) and the
        block's norm (``hidden``); not the router's expert bias (:attr:`router_bias_params`, a buffer). The one
        place :meth:`block_params` and :func:`topo.training.unit_params.block_params_on_gpu` take it from."""
        return self.router_params + self.hidden if self.moe is not None else 0

    @property
    def router_bias_params(self) -> int:
        """The router's expert bias, one a routed expert, on a ``deepseek`` router (sigmoid scores with an expert
        bias: Megatron-Core's ``moe_router_enable_expert_bias``, a float32 buffer of ``num_moe_experts`` saved with
        the checkpoint, NVIDIA/Megatron-LM@2a75ac12 megatron/core/transformer/moe/router.py; Hugging Face's
        ``gate.e_score_correction_bias``). Counted in the model's weights, not in its trained parameters' memory (no
        gradient or optimizer state: :func:`topo.training.unit_params.block_params_on_gpu`)."""
        m = self.moe
        return m.experts if m is not None and m.router == "deepseek" else 0

    @property
    def qk_dim(self) -> int:
        """Per-head dimension of queries and keys (the attention scores' inner dimension)."""
        a = self.attention
        return a.qk_nope_head_dim + a.qk_rope_head_dim if a.kind == "mla" else self.head_dim

    @property
    def v_dim(self) -> int:
        return self.attention.v_head_dim if self.attention.kind == "mla" else self.head_dim

    def kv_heads_per_rank(self, tp: int) -> float:
        """Key/value heads on one of ``tp`` tensor-parallel ranks: ``max(1, num_kv_heads / tp)`` (a rank holds a
        replica where ``tp`` exceeds them); MLA's K and V have every attention head after the up-projection,
        ``heads / tp``.

        Parameters
        ----------
        tp : int
            Tensor-parallel degree.

        Returns
        -------
        float
        """
        return self.heads / tp if self.attention.kind == "mla" else max(1.0, self.num_kv_heads / tp)

    def kv_width(self, tp: int) -> float:
        """Elements of K and V per token on one of ``tp`` tensor-parallel ranks (what context parallelism
        exchanges): its key/value heads (at least one: a rank holds a replica where ``tp`` exceeds them) times
        ``qk_dim + v_dim``; MLA's K and V are per attention head after the up-projection.

        Parameters
        ----------
        tp : int
            Tensor-parallel degree.

        Returns
        -------
        float
            Elements per token (``max(1, num_kv_heads / tp) x (qk_dim + v_dim)``; MLA ``heads / tp x (qk_dim +
            v_dim)``).
        """
        return self.kv_heads_per_rank(tp) * (self.qk_dim + self.v_dim)

    @cached_property
    def attention_params(self) -> int:
        """Weights of one layer's attention projections."""
        h, a = self.hidden, self.attention
        if a.kind == "mla":
            n = self.heads
            q = h * a.q_lora_rank + a.q_lora_rank * n * (a.qk_nope_head_dim + a.qk_rope_head_dim)
            kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * n * (a.qk_nope_head_dim
                                                                                     + a.v_head_dim)
            return q + kv + n * a.v_head_dim * h
        d = self.head_dim
        return h * self.heads * d * 2 + h * self.num_kv_heads * d * 2  # Q, O; K, V

    @property
    def mla_down_params(self) -> int:
        """Weights of one MLA layer's down projections, ``h x q_lora_rank`` (none without a query LoRA) plus
        ``h x (kv_lora_rank + qk_rope_head_dim)``: part of :attr:`attention_params`, which Megatron-Core with
        Transformer Engine builds ``TELinear(parallel_mode='duplicated')``, whole on every tensor-parallel rank
        (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/multi_latent_attention.py`` lines 526-527 and
        573-574, the TE spec's ``backend.linear()`` at ``megatron/core/models/gpt/gpt_layer_specs.py`` lines
        302-304); 0 without MLA."""
        a = self.attention
        if a.kind != "mla":
            return 0
        return self.hidden * ((a.q_lora_rank or 0) + a.kv_lora_rank + a.qk_rope_head_dim)

    @property
    def mla_norm_params(self) -> int:
        """Weights of one MLA layer's latents' norms, ``q_lora_rank`` (none without a query LoRA) plus
        ``kv_lora_rank``: Megatron-Core builds ``q_layernorm`` and ``kv_layernorm`` on every MLA layer
        (NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/multi_latent_attention.py`` lines 619-630; fused
        into the up projections' ``TELayerNormColumnParallelLinear`` with ``qk_layernorm``, their weights whole on
        each TP rank either way), as DeepSeek-V3's ``q_a_layernorm`` / ``kv_a_layernorm``; 0 without MLA."""
        a = self.attention
        return (a.q_lora_rank or 0) + a.kv_lora_rank if a.kind == "mla" else 0

    def tp_whole_params(self, kind: str) -> int:
        """Weights of one block of ``kind`` that every tensor-parallel rank holds whole: its input norm (``h``,
        Megatron-Core's ``TENorm`` or the norm of a ``TELayerNormColumnParallelLinear`` / ``LayerNormMLP``, whose
        weight is not split over TP: NVIDIA/TransformerEngine ``transformer_engine/pytorch/module/
        layernorm_linear.py``, ``layer_norm_weight`` of ``in_features``), an MoE block's router
        (:attr:`router_and_norm_params`) and latent projections (:attr:`latent_proj_params`, ``parallel_mode=
        "duplicated"``), an MLA attention block's down projections (:attr:`mla_down_params`) and
        latents' norms (:attr:`mla_norm_params`). The one rule :func:`topo.training.unit_params.block_params_on_gpu`
        splits a block by."""
        if kind == Block.MOE:
            return self.router_and_norm_params + self.latent_proj_params
        if kind in ATTENTION_BLOCKS:
            return self.hidden + self.mla_down_params + self.mla_norm_params
        return self.hidden

    @property
    def mla_tp_latents(self) -> tuple[tuple[str, int, bool], ...]:
        """What an MLA block's attention exchanges over tensor parallelism on its input side, in place of the
        ``h``-wide input a QKV projection gathers: ``(name, elements a token, linear)``, one collective each.
        Under sequence parallelism each rank's duplicated down projections make its own tokens' latents, then the
        up projections (``TEColumnParallelLinear`` / ``TELayerNormColumnParallelLinear``, ``linear=True``)
        all-gather their input over the sequence (and gather it again for the weight gradient; backward the input
        gradient reduce-scattered), and ``k_pos_emb`` is gathered on its own
        (``gather_from_sequence_parallel_region``, backward a reduce-scatter): NVIDIA/Megatron-LM@d98e8a64
        ``megatron/core/transformer/multi_latent_attention.py`` lines 638-664 ("q_compressed: [s / TP, b,
        q_lora_rank]", "kv_combined: [s / TP, b, (kv_lora_rank + qk_pos_emb_head_dim)]"), 757-763 (the
        ``k_pos_emb`` gather), 777-797 (the norms on the shards, then ``linear_q_up_proj`` /
        ``linear_kv_up_proj``). Without a query LoRA the query projection (``linear_q_proj``, column-parallel)
        takes the ``h``-wide input. Empty without MLA."""
        a = self.attention
        if a.kind != "mla":
            return ()
        return (("query latent", a.q_lora_rank or self.hidden, True), ("key-value latent", a.kv_lora_rank, True),
                ("k_pos_emb", a.qk_rope_head_dim, False))

    @property
    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn_hidden

    @property
    def moe_width(self) -> int:
        """Width of a routed token: what the all-to-all carries and the routed experts' GEMMs take and give, the
        latent size under LatentMoE (:attr:`MoeSpec.latent_size`), else ``hidden``; 0 without MoE."""
        if self.moe is None:
            return 0
        return self.moe.latent_size or self.hidden

    @property
    def expert_params(self) -> int:
        """Weights of one routed expert's FFN: ``mlp_matrices x moe_width x expert_ffn_hidden`` (fc1 from and fc2 to
        :attr:`moe_width`: NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/experts.py lines 219, 241)."""
        return 0 if self.moe is None else self.mlp_matrices * self.moe_width * self.moe.expert_ffn_hidden

    @property
    def shared_expert_params(self) -> int:
        """Weights of one MoE block's shared experts, on the full hidden state whatever the latent size
        (``is_expert`` false: NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/mlp.py lines 215-220)."""
        m = self.moe
        return 0 if m is None else self.mlp_matrices * self.hidden * m.shared_experts * m.expert_ffn_hidden

    @property
    def latent_proj_params(self) -> int:
        """Weights of one MoE block's latent projections, ``hidden -> latent_size`` and back (``2 h l``; no bias:
        ``add_bias_linear`` false); 0 without a latent (NVIDIA/Megatron-LM@d98e8a64 moe_layer.py lines 280-304;
        megatron/training/theoretical_memory_usage.py lines 122-126 counts the same ``2 h l``)."""
        m = self.moe
        return 0 if m is None or m.latent_size is None else 2 * self.hidden * m.latent_size

    @property
    def moe_token_params(self) -> int:
        """Weights one token goes through in an MoE block's experts, the router aside: the routed top-k at
        :attr:`moe_width`, the shared experts at ``hidden`` and a LatentMoE block's two latent projections
        (Megatron-LM's ``moe_layer_flops``: routed experts "run on moe_latent_size" plus "4 x tokens x hidden x
        latent" for the up and down projections, NVIDIA/Megatron-LM@d98e8a64 megatron/training/training.py lines
        846-860); the one count both FLOP conventions (:mod:`.flops`, :mod:`.flops_megatron_lm`) take. 0 without
        MoE."""
        m = self.moe
        if m is None:
            return 0
        return m.active_experts * self.expert_params + self.shared_expert_params + self.latent_proj_params

    @property
    def embedding_params(self) -> int:
        """Input embedding plus the output projection (once if tied)."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def final_norm_params(self) -> int:
        """The norm before the output projection (Megatron-Core's ``decoder.final_layernorm``, Hugging Face's
        ``model.norm`` / Nemotron-H's ``backbone.norm_f``): ``h`` weights."""
        return self.hidden

    @cached_property
    def total_params(self) -> int:
        """Every weight (all experts)."""
        return (sum(self.count(k) * self.block_params(k) for k in BLOCK_KINDS if self.count(k)) + self.embedding_params
                + self.final_norm_params)

    @cached_property
    def active_params(self) -> int:
        """Weights one token goes through (routed top-k plus shared experts), with embeddings."""
        return (sum(self.count(k) * self.block_params(k, active=True) for k in BLOCK_KINDS if self.count(k))
                + self.embedding_params + self.final_norm_params)

    @cached_property
    def mtp_params(self) -> int:
        """Weights of the multi-token-prediction modules (not in :attr:`total_params`, as the published counts
        leave them out): per depth held, its blocks (:attr:`mtp_block`) and :attr:`mtp_head_params` (the output
        head is the model's); one depth held where they share one module (:attr:`mtp_shared`)."""
        held = 1 if self.mtp_shared else self.mtp_layers
        return held * (sum(self.block_params(k) for k in self.mtp_block) + self.mtp_head_params) if held else 0

    @property
    def mtp_head_params(self) -> int:
        """Weights of one multi-token-prediction depth outside its blocks: the ``2 h -> h`` projection and three
        norms, ``enorm`` and ``hnorm`` before it and ``final_layernorm`` after the depth's layers (Megatron-Core's
        MultiTokenPredictionLayer, NVIDIA/Megatron-LM@2a75ac12 megatron/core/transformer/multi_token_prediction.py;
        Megatron-Bridge@067f987d nemotron_h_bridge.py maps all three); the output head is the model's."""
        return 2 * self.hidden * self.hidden + self.mtp_norm_params

    @property
    def mtp_norm_params(self) -> int:
        """The three norms of one multi-token-prediction depth (:attr:`mtp_head_params`), ``h`` each, whole on each
        tensor-parallel rank as every norm (:meth:`tp_whole_params`)."""
        return 3 * self.hidden

    @property
    def sources(self) -> list[str]:
        return [self.source] if isinstance(self.source, str) else list(self.source)


def models_dir() -> Path:
    """The bundled model files (``topo/data/models/``, package data)."""
    return data_dir("models")


def bundled_models() -> list[str]:
    return sorted(p.stem for p in models_dir().glob("*.toml"))


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A model by bundled name (``llama3-405b``) or TOML path; bad files raise TopoError with file and key."""
    p = Path(name_or_path)
    if not is_input_file(p):
        stem = p.name[:-5] if p.name.endswith(".toml") else p.name
        p = models_dir() / f"{stem}.toml"
        if not p.is_file():
            names = bundled_models()
            close = closest(stem, names)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TopoError(f"no such model file or bundled model; bundled: {', '.join(names)}{hint}",
                            source=str(name_or_path), key="model")
    source = str(p) if p.parent != models_dir() else f"models/{p.name}"
    return model_from_dict(read_toml(p, "model file", source=source), source)


def model_from_dict(data: dict, source: str = "<model>") -> ModelSpec:
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source, ModelSpec) from None


def _other_table(key: str, where: tuple) -> str | None:
    """Where a model file's ``key``, unknown at ``where`` (``()``: the top level, ``("moe",)``: the ``[moe]``
    table), is a key: ``"a key of the [attention] table"``, or None (a top-level ``head_dim`` had been offered
    ``did you mean 'heads'?``, a different key)."""
    tables = {"": ModelSpec, "attention": AttentionSpec, "moe": MoeSpec, "mamba": MambaSpec}
    here = ".".join(str(x) for x in where)
    for name, spec in tables.items():
        if name != here and key in spec.model_fields:
            return f"a key of the [{name}] table" if name else "a top-level key, above the tables"
    return None


def validation_error(exc: ValidationError, source: str, root: type[BaseModel]) -> TopoError:
    """The first problem of a pydantic error as one TopoError line: file, dotted key, value, what is allowed; an
    unknown key first and a missing one last, as the spec loader orders them (a typo'd key explains a missing one).
    A validator's own :class:`TopoError` that names its source (a bundled data file a field is checked against,
    ``tp_overlap.toml``) is that file's fault, not the field's: it is returned as it is."""
    for e in exc.errors():
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, TopoError) and cause.source:
            return cause
    errs = exc.errors()
    err = min(errs, key=lambda e: (e["type"] != "extra_forbidden", e["type"] == "missing"))
    loc = err["loc"]
    key = ".".join(str(x) for x in loc) or None
    value = err.get("input")
    kind = err["type"]
    if kind == "extra_forbidden":
        model = root
        for part in loc[:-1]:
            f = model.model_fields.get(part)
            ann = getattr(f, "annotation", None)
            args = getattr(ann, "__args__", ()) or (ann,)
            model = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), model)
        allowed = list(model.model_fields)
        close = closest(str(loc[-1]), allowed)
        if root.__name__ == "ParallelLayout":
            hint = other_framework_hint("layout_keys", str(loc[-1]))
        elif root is ModelSpec:
            hint = other_framework_hint("model_keys", str(loc[-1])) or _other_table(str(loc[-1]), loc[:-1])
        else:
            hint = None
        msg = f"unknown key {loc[-1]!r}" + (f" ({hint})" if hint else "") + f"; allowed: {', '.join(allowed)}" + (
            f"; did you mean {close[0]!r}?" if close and not hint else "")
    elif kind == "missing":  # sorted last: every fault is a missing key, each named (walk20: one a run)
        rest = [".".join(str(x) for x in e["loc"]) for e in errs if e is not err]
        msg = "is required but missing" + (f" (also missing: {', '.join(rest)})" if rest else "")
    elif kind == "literal_error":
        msg = f"must be one of {err.get('ctx', {}).get('expected', '')}, got {shown_value(value)}"
        hint = other_framework_hint(str(loc[-1]), value) if loc else None
        msg += f"; {hint}" if hint else ""
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        msg = f"must be {op} {next(iter(err.get('ctx', {}).values()), '?')}, got {shown_value(value)}"
    elif kind in ("int_type", "int_from_float", "int_parsing"):
        msg = f"must be a whole number, got {shown_value(value)}"
    elif kind in ("bool_type", "bool_parsing"):
        msg = f"must be true or false, got {shown_value(value)}"
    elif kind in ("float_type", "float_parsing", "finite_number"):  # the spec loader's words (topo/spec/load.py)
        msg = f"must be a finite number, got {shown_value(value)}"
    elif kind in ("tuple_type", "list_type"):
        msg = f"must be a list, e.g. [\"a\", \"b\"], got {shown_value(value)}"
    else:
        msg = err["msg"].removeprefix("Value error, ")
        if kind not in ("value_error",):
            msg += f", got {shown_value(value)}"
    return TopoError(msg, source=source, key=key)
