"""The SMs Transformer Engine's userbuffers TP overlap takes from the GEMM beside it.

With TP communication overlap (``overlap_tp``, sequence parallelism, ``tp > 1``) each tensor-parallel linear
layer's GEMM is run by a userbuffers communicator, one per buffer name (``qkv_fprop``, ``proj_fprop``, ...). Its
``CommOverlapCore`` sets the GEMM's SMs once: ``_math_sms = set_sm_margin ? sm_count - num_comm_sm : sm_count``
(NVIDIA/TransformerEngine@d0067d0d ``transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp`` line
143), and every GEMM the communicator launches passes ``_math_sms`` to cuBLAS as
``CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET`` (``transformer_engine/common/gemm/cublaslt_gemm.cu`` lines 465-467): the
whole GEMM runs on ``sm_count - num_sm`` SMs, its tile shape chosen for them, whether or not the collective is
running at that moment. So a GEMM of ``w`` waves on the full GPU takes ``ceil(tiles / (sms - n))`` waves of the same
per-SM time (:func:`margin_kernels`, :func:`topo.training.kernels.gemm_s`).

Which GEMM each buffer name runs: a column-parallel layer (QKV, fc1; Mamba's in_proj, Megatron-Core's
``tp_comm_buffer_name`` ``fc1``) runs its forward GEMM with ``*_fprop`` (the input's all-gather), its
input-gradient GEMM with ``*_dgrad`` (the input gathered again, bulk) and its weight-gradient GEMM with ``*_wgrad``
(the input gradient's reduce-scatter, bulk); a row-parallel layer (the attention's output projection ``proj``, fc2;
Mamba's out_proj, ``fc2``) its forward GEMM with ``*_fprop`` (the output's reduce-scatter) and its input-gradient
GEMM with ``*_dgrad`` (the output gradient's all-gather). The row-parallel weight-gradient GEMM's ``external``
overlap (TE >= 2.x ``proj_wgrad`` / ``fc2_wgrad``) is not priced (no recipe row names it).

The configurations (method, ``num_sm``, ``set_sm_margin`` per buffer) are data:
``topo/data/compute/tp_overlap.toml``, NeMo's and Megatron-Bridge's named ones and Transformer Engine's defaults
(``te_default``: since TE 2.0, ``pipeline`` and ``bulk`` on 16 SMs with the margin, ring exchanges on 1 SM
without). The layout names one (``ParallelLayout.tp_overlap_config``, default ``te_default``).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from functools import lru_cache

from ..errors import TopoError
from ..resources import data_dir
from .comm_sms import reduced_gpu
from .module_recipes import entries_at
from .overlap_idle import idle_overlap_note

__all__ = ["configs", "config_names", "recipe_configs", "check_num_sm", "userbuffers_built", "tp_overlap_on",
           "first_proj_userbuffers", "userbuffers_on", "userbuffers_off_note", "tp_exposed_note", "buffer_name", "margin_sms",
           "pass_margins", "margin_kernels", "margins_note", "DEFAULT"]

DEFAULT = "te_default"
SOURCE = "tp_overlap.toml"
BUFFERS = ("qkv_fprop", "qkv_dgrad", "qkv_wgrad", "proj_fprop", "proj_dgrad", "fc1_fprop", "fc1_dgrad",
           "fc1_wgrad", "fc2_fprop", "fc2_dgrad")
METHODS = ("ring_exchange", "pipeline", "bulk")
ENTRY_KEYS = ("method", "num_sm", "sm_margin")
RECIPES = "tp_overlap_recipes.toml"
GPU_CLASSES = ("h100", "b200")  # the named configurations' GPU part (b200: every Blackwell, as the scripts run them)
RECIPE_KEYS = (*GPU_CLASSES, "source", "status")


@lru_cache(maxsize=1)
def configs() -> dict:
    """Every named configuration of ``tp_overlap.toml``: name -> {buffer: (method, num_sm, sm_margin)}, a buffer a
    configuration leaves out taking :data:`DEFAULT`'s.

    Raises
    ------
    TopoError
        A file that does not parse, or an entry that is not as the file's header says (source ``tp_overlap.toml``,
        key ``config.NAME.BUFFER``): one line naming the key, the value and what is allowed.
    """
    try:
        data = tomllib.loads((data_dir("compute") / SOURCE).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TopoError(f"invalid TOML: {exc}", source=SOURCE) from None
    table = data.get("config")
    if not isinstance(table, dict) or not isinstance(table.get(DEFAULT), dict):
        raise TopoError(f"no [config.{DEFAULT}] table (the buffers a configuration leaves out take its entries)",
                        source=SOURCE, key="config")
    missing = [b for b in BUFFERS if b not in table[DEFAULT]]
    if missing:
        raise TopoError(f"no {', '.join(missing)}; allowed: {DEFAULT} lists every buffer ({', '.join(BUFFERS)})",
                        source=SOURCE, key=f"config.{DEFAULT}")
    base = {b: _entry(table[DEFAULT][b], f"{DEFAULT}.{b}") for b in BUFFERS}
    return {name: _config(c, name, base) for name, c in table.items()}


def _config(c, name: str, base: dict) -> dict:
    """One configuration's buffers (each :func:`_entry`), those it leaves out from ``base``; it must cite its
    ``source`` and name no buffer Transformer Engine does not have (a typo would silently take the default)."""
    if not isinstance(c, dict):
        raise TopoError(f"must be a table, got {c!r}", source=SOURCE, key=f"config.{name}")
    unknown = [k for k in c if k not in BUFFERS and k != "source"]
    if unknown:
        raise TopoError(f"unknown key {unknown[0]!r}; allowed: source, {', '.join(BUFFERS)}", source=SOURCE,
                        key=f"config.{name}")
    if not isinstance(c.get("source"), str) or not c["source"].strip():
        raise TopoError("no source: every configuration cites the file it comes from", source=SOURCE,
                        key=f"config.{name}.source")
    return {b: _entry(c[b], f"{name}.{b}") if b in c else base[b] for b in BUFFERS}


def _entry(e, key: str) -> tuple[str, int, bool]:
    """One buffer's (method, num_sm, sm_margin); a bad one names its key in ``tp_overlap.toml``."""
    ok = (isinstance(e, dict) and set(e) == set(ENTRY_KEYS) and e["method"] in METHODS
          and type(e["num_sm"]) is int and e["num_sm"] >= 1 and type(e["sm_margin"]) is bool)
    if not ok:
        raise TopoError(f"{e!r}; allowed: {{ method = one of {', '.join(METHODS)}, num_sm = a whole number >= 1, "
                        "sm_margin = true or false }", source=SOURCE, key=f"config.{key}")
    return e["method"], e["num_sm"], e["sm_margin"]


def config_names() -> tuple[str, ...]:
    """The configuration names a layout may give (``tp_overlap_config``)."""
    return tuple(configs())


@lru_cache(maxsize=1)
def recipe_configs() -> dict:
    """The named configuration each model's NeMo 2 / Megatron-Bridge recipe runs TP overlap with, from
    ``tp_overlap_recipes.toml`` (its header gives the sources): model name -> {(GPU class, precision): name}, the
    GPU class ``h100`` or ``b200``, the precision ``bf16`` or ``fp8``, the name
    ``userbuffers_{precision}_{class}_{entry}`` (NeMo's naming), each a configuration of :func:`configs`. What the
    accuracy benchmark reads for the published rows; the step model reads a layout's ``tp_overlap_config`` only.

    Raises
    ------
    TopoError
        Source ``tp_overlap_recipes.toml``, key ``named.MODEL[.KEY]``: one line naming the value and what is allowed.
    """
    try:
        data = tomllib.loads((data_dir("compute") / RECIPES).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TopoError(f"invalid TOML: {exc}", source=RECIPES) from None
    out = {}
    for model, e in (data.get("named") or {}).items():
        if not isinstance(e, dict) or set(e) != set(RECIPE_KEYS) or not str(e["source"]).strip():
            raise TopoError(f"{e!r}; allowed: a table of {', '.join(RECIPE_KEYS)} (source not empty)",
                            source=RECIPES, key=f"named.{model}")
        out[model] = {}
        for cls in GPU_CLASSES:
            for precision in ("bf16", "fp8"):
                name = f"userbuffers_{precision}_{cls}_{e[cls]}"
                if name not in configs():
                    raise TopoError(f"{e[cls]!r} makes {name}, not a configuration of {SOURCE}; allowed: an entry "
                                    f"whose bf16 and fp8 {cls} configurations it has", source=RECIPES,
                                    key=f"named.{model}.{cls}")
                out[model][(cls, precision)] = name
    return out


def check_num_sm(config: str, gpu) -> None:
    """Refuse a ``num_sm`` of configuration ``config`` (or of :data:`DEFAULT`, whose entries it inherits) that
    ``gpu`` does not have: more SMs than the GPU's (``gpus.toml`` ``sms``), or with ``sm_margin`` all of them
    (``_math_sms = sm_count - num_comm_sm`` would leave the GEMM none; :func:`.comm_sms.reduced_gpu` would
    silently keep one). A GPU without an SM count is not checked, nor a name that is no configuration (the
    layout's own validation names it).

    Parameters
    ----------
    config : str
        A name of :func:`config_names`.
    gpu : GpuCompute

    Raises
    ------
    TopoError
        Source ``tp_overlap.toml``, key ``config.NAME.BUFFER.num_sm``: the value and the range the GPU allows.
    """
    table = configs()
    if not gpu.sms or config not in table:
        return
    for name in dict.fromkeys((DEFAULT, config)):  # te_default first: what a configuration leaves out is its entry
        for buffer, (_, n, margin) in table[name].items():
            top = gpu.sms - 1 if margin else gpu.sms
            if n > top:
                why = "less one for the GEMM beside it (sm_margin)" if margin else ""
                raise TopoError(f"{n}; allowed: 1 to {top} on {gpu.name} ({gpu.sms} SMs{' ' + why if why else ''})",
                                source=SOURCE, key=f"config.{name}.{buffer}.num_sm")


def userbuffers_built(model) -> bool:
    """Whether Megatron-Core builds the model's TP linear layers with userbuffers when TP overlap is asked for
    (``--tp-comm-overlap``): not for a model with MLA attention. The one rule :func:`tp_overlap_on`,
    :func:`userbuffers_on` and the operators (:func:`topo.training.operators.block_ops`, an op's ``tp_overlap``)
    read.

    ``TELinear.__init__`` sets ``self.config.tp_comm_overlap = False`` for a ``tp_comm_buffer_name`` other than
    ``qkv``, ``proj``, ``fc1``, ``fc2`` (NVIDIA/Megatron-LM@d98e8a64
    ``megatron/core/extensions/transformer_engine.py`` lines 1176-1187), and ``self.config`` is the
    ``TransformerConfig`` every layer of the model chunk shares (``transformer_block.py`` lines 347-350: each
    layer gets ``self.config`` unless ``heterogeneous_block_specs``; ``MultiLatentAttention`` passes it on). MLA's
    down projection ``q_down_proj`` (``kv_down_proj`` without a query LoRA, ``multi_latent_attention.py`` lines
    537-617) is the first such linear built, so every TE linear built after it has no userbuffers: the rest of
    that layer and every later layer, the shared experts' ``deepcopy`` of the config included
    (``moe/shared_experts.py`` line 123). Only the first layer's output projection, built before the down
    projections (``multi_latent_attention.py`` line 221), keeps them: one layer a pipeline rank under
    Megatron-Bridge / NeMo (a model chunk under Megatron-LM's own ``pretrain_gpt.py``), :func:`first_proj_userbuffers`.
    The names came in with 4e6ae3a2 ("Fix a bug about tp_comm_buffer_name in MultiLatentAttention", April 2025,
    Megatron-Core 0.13.0 on); before it, an MLA linear without a buffer name failed ``TELinear``'s
    ``assert tp_comm_buffer_name is not None`` under TP overlap, so no Megatron-Core MLA run overlapped TP with
    userbuffers either way. Unchanged at d98e8a64 (2026-08-22).

    Parameters
    ----------
    model : ModelSpec

    Returns
    -------
    bool
    """
    return model.attention.kind != "mla"


def tp_overlap_on(lay, model) -> bool:
    """Whether the layout's TP overlap (``overlap_tp``) takes effect for ``model``: asked for with sequence
    parallelism and ``tp > 1``, and the model's linear layers built with userbuffers (:func:`userbuffers_built`).
    What the step's exposed-TP rule (:func:`topo.training.step.exposed_comm_s`) reads; False prices the TP
    collectives as without it. Without sequence parallelism no framework runs it: Megatron-LM refuses
    ``--tp-comm-overlap`` ("Tensor parallel communication/GEMM overlap can happen only when sequence parallelism
    is enabled", NVIDIA/Megatron-LM@d98e8a64 ``megatron/training/arguments.py`` line 1442) and Megatron-Bridge
    turns it off with a warning, as at TP 1 (NVIDIA-NeMo/Megatron-Bridge@067f987d
    ``src/megatron/bridge/training/comm_overlap.py`` lines 442-448); walk40: the TP all-reduces were hidden
    behind the micro-batch instead (:func:`userbuffers_off_note` says so).

    Parameters
    ----------
    lay : ParallelLayout
    model : ModelSpec

    Returns
    -------
    bool
    """
    return userbuffers_on(lay, model)


def first_proj_userbuffers(lay, model) -> bool:
    """Whether a pipeline rank's first MLA layer runs its output projection's (``linear_proj``, buffer ``proj``)
    TP collectives through userbuffers while the rest of the model has none (:func:`userbuffers_built`): the
    layout asks for userbuffers (``overlap_tp``, sequence parallelism, ``tp > 1``) and the model is built
    without. ``MultiLatentAttention.__init__`` builds ``linear_proj`` (NVIDIA/Megatron-LM@d98e8a64
    ``megatron/core/transformer/multi_latent_attention.py`` line 221) before ``MLASelfAttention`` builds its down
    projections, so ``TELinear.__init__`` still reads ``tp_comm_overlap`` true and, ``proj`` being a Transformer
    Engine buffer name, passes ``ub_overlap_rs`` / ``ub_overlap_ag`` and ``ub_name`` on
    (``megatron/core/extensions/transformer_engine.py`` lines 1176-1187, 1189-1218): its forward reduce-scatter
    and its input gradient's all-gather of the output gradient run beside its GEMMs. One such layer a pipeline
    rank: Megatron-Bridge's one provider config serves every virtual-pipeline chunk (section 372).

    Parameters
    ----------
    lay : ParallelLayout
    model : ModelSpec

    Returns
    -------
    bool
    """
    return _layout_userbuffers(lay) and not userbuffers_built(model)


def _layout_userbuffers(lay) -> bool:
    """The layout's part of :func:`userbuffers_on`: ``overlap_tp``, sequence parallelism and ``tp > 1``."""
    return bool(lay.overlap_tp and lay.sequence_parallel and lay.tp > 1)


def userbuffers_on(lay, model) -> bool:
    """Whether the layout runs its TP collectives through userbuffers, each beside its linear layer's GEMM: TP
    overlap (``overlap_tp``) with sequence parallelism and ``tp > 1`` (Megatron-LM's ``--tp-comm-overlap`` needs
    both), for a model Megatron-Core builds with userbuffers (:func:`userbuffers_built`). The one rule
    :func:`margins_note` and :func:`topo.training.step.tp_ring_steps` read; :func:`pass_margins` reads its
    layout part, the operator carrying the model's (``tp_overlap``).

    Parameters
    ----------
    lay : ParallelLayout
    model : ModelSpec

    Returns
    -------
    bool
    """
    return _layout_userbuffers(lay) and userbuffers_built(model)


def userbuffers_off_note(lay, model) -> str | None:
    """The step's one-line note when the layout asks for TP overlap and gets none: at ``tp`` 1 (nothing to overlap),
    without sequence parallelism (:func:`tp_overlap_on`), or for a model whose linear layers have no userbuffers
    (:func:`userbuffers_built`); None otherwise.

    Parameters
    ----------
    lay : ParallelLayout
    model : ModelSpec

    Returns
    -------
    str or None
    """
    if not lay.overlap_tp:
        return None
    if lay.tp == 1:  # walk43: --overlap tp=on at tp 1 was silent
        return idle_overlap_note("TP", "tp", "TP collectives",
                                 "Megatron-LM turns sequence parallelism off at tp 1, then refuses --tp-comm-overlap "
                                 "without it: NVIDIA/Megatron-LM@000c4ac2 megatron/training/arguments.py")
    if not lay.sequence_parallel:
        return ("TP overlap off: userbuffers need sequence parallelism (Megatron-LM refuses --tp-comm-overlap "
                "without it, Megatron-Bridge turns it off); the TP all-reduces priced as without overlap_tp")
    if userbuffers_built(model):
        return None
    return ("TP overlap off: Megatron-Core builds an MLA model without userbuffers (the first MLA down projection's "
            "buffer name sets the shared config's tp_comm_overlap False, Megatron-LM 4e6ae3a2 on); "
            "its TP collectives priced as without overlap_tp, but the first MLA layer's linear_proj a pipeline rank, "
            "built before it")


def tp_exposed_note(lay, model) -> str | None:
    """The step's one-line note on why its TP collectives are exposed where no userbuffers run them (walk40: the
    table showed what is exposed, nothing said why): ``tp > 1`` without :func:`userbuffers_on`; None otherwise.
    With sequence parallelism, Transformer Engine's forward all-gather / reduce-scatter and the row-parallel
    layer's output-gradient gather are synchronous, the column-parallel layer's input gathered again and its input
    gradient's reduce-scatter ``async_op`` beside its own dgrad / wgrad GEMM (NVIDIA/TransformerEngine@d0067d0d
    ``transformer_engine/pytorch/module/base.py`` lines 1702-1709, ``layernorm_linear.py`` lines 787-790,
    904-907; findings sections 409, 411); without it, each forward all-reduce blocks and the backward's hides
    behind its layer's wgrad GEMM (line 910). The last clause names the remedy where one exists: not for NVFP4
    (``topo.training.parallel`` refuses userbuffers with it) nor an MLA model
    (:func:`userbuffers_built`), nor where the layout asked for it (:func:`userbuffers_off_note` says why not)."""
    if lay.tp <= 1 or userbuffers_on(lay, model):
        return None
    if lay.sequence_parallel:
        text = ("TP without userbuffers: each forward all-gather / reduce-scatter and each row-parallel layer's "
                "output-gradient gather block the compute stream (exposed whole); the input gathered again and the "
                "input gradient's reduce-scatter hide behind their own layer's dgrad / wgrad GEMM, what outlasts it "
                "exposed")
    else:
        text = ("TP without sequence parallelism: each forward all-reduce blocks the compute stream (exposed "
                "whole); the backward's hides behind its own layer's wgrad GEMM, what outlasts it exposed")
    nvfp4 = lay.fp8_recipe == "nvfp4" or bool(entries_at(lay.module_recipes, "nvfp4"))
    if lay.overlap_tp or nvfp4 or not userbuffers_built(model):
        return text
    return text + ("; overlap_tp=true runs them through userbuffers beside their GEMMs" if lay.sequence_parallel
                   else "; overlap_tp=true needs sequence parallelism")


def buffer_name(module: str, tp_overlap: str, gemm_pass: str) -> str | None:
    """Transformer Engine's buffer name of a TP linear layer's GEMM pass, or None where no communicator runs it.

    Parameters
    ----------
    module : str
        The operator's module (``attention``, ``mlp``, ``shared_experts``, ``mamba``).
    tp_overlap : str
        ``ag`` (column-parallel) or ``rs`` (row-parallel); empty: not a TP linear layer.
    gemm_pass : str
        ``fprop``, ``dgrad`` or ``wgrad``.

    Returns
    -------
    str or None
    """
    if tp_overlap not in ("ag", "rs"):
        return None
    if tp_overlap == "rs" and gemm_pass == "wgrad":
        return None
    layer = {("attention", "ag"): "qkv", ("attention", "rs"): "proj"}.get((module, tp_overlap),
                                                                       "fc1" if tp_overlap == "ag" else "fc2")
    return f"{layer}_{gemm_pass}"


def margin_sms(config: str, buffer: str | None) -> int:
    """SMs the GEMM of ``buffer`` gives up under configuration ``config``: its ``num_sm`` with ``sm_margin``, else 0.

    Parameters
    ----------
    config : str
        A name of :func:`config_names`.
    buffer : str or None
        A buffer name (:func:`buffer_name`); None: 0.

    Returns
    -------
    int
    """
    if buffer is None:
        return 0
    _, n, margin = configs()[config][buffer]
    return n if margin else 0


def pass_margins(op, lay) -> dict[str, int]:
    """SMs each GEMM pass of operator ``op`` runs without under layout ``lay`` (``{"fprop": 24, ...}``; only the
    passes with a margin): none unless the layout overlaps TP with userbuffers (``overlap_tp``, sequence
    parallelism, ``tp > 1``: :func:`userbuffers_on`'s layout part) and ``op`` is a TP linear layer's GEMM run by
    a communicator (its ``tp_overlap``: none in a model built without userbuffers, :func:`userbuffers_built`).

    Parameters
    ----------
    op : Op
        A block operator (:class:`topo.training.operators.Op`).
    lay : ParallelLayout

    Returns
    -------
    dict
    """
    if op.kind != "gemm" or not op.tp_overlap or not _layout_userbuffers(lay):
        return {}
    out = {}
    for p in ("fprop", "dgrad", "wgrad"):
        n = margin_sms(lay.tp_overlap_config, buffer_name(op.module, op.tp_overlap, p))
        if n:
            out[p] = n
    return out


def margin_kernels(gpu, sms: int):
    """The kernel model of ``gpu`` for a GEMM launched on ``gpu.sms - sms`` SMs with cuBLAS told so
    (``CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET``): :func:`.comm_sms.reduced_gpu`'s SMs and per-SM rates, its tile
    shape chosen for the SMs it gets (``launch_sms``); ``gpu.kernels`` when ``sms`` is 0.

    Parameters
    ----------
    gpu : GpuCompute
    sms : int

    Returns
    -------
    KernelModel
    """
    if sms <= 0 or not gpu.sms:
        return gpu.kernels
    km = reduced_gpu(gpu, sms).kernels
    return replace(km, launch_sms=km.sms)


def margins_note(lay, model, sms: int) -> str | None:
    """What the layout's userbuffers configuration takes from the TP GEMMs, for the step's notes; None when it
    takes nothing (no TP overlap, a model built without userbuffers, or no buffer with a margin)."""
    if not userbuffers_on(lay, model):
        return None
    cfg = configs()[lay.tp_overlap_config]
    taken = [f"{b} {n}" for b, (_, n, m) in cfg.items() if m]
    if not taken:
        return None
    return (f"TP overlap ({lay.tp_overlap_config}): the GEMMs of {', '.join(taken)} run on the {sms} SMs less "
            f"that many (Transformer Engine's set_sm_margin)")
