"""The runs CSVs' recipe columns that name a framework setting by its value, and their check.

A run's recipe settings reach topo as columns of ``data/reference/training_runs_published.csv`` and the hold-out
file (``recompute_modules``, ``cuda_graph_scope``, ...), each cited in the row's note and in
``data/reference/README.md``. These columns were Python literals of ``training_accuracy.py`` until tidy51
(docs/calibration-findings.md sections 169-171):

- ``jax_mesh``: a MaxText row's JAX mesh (``topo.training.jax_mesh.layout_from_mesh``), required on a ``maxtext_``
  row and refused on any other (only the MaxText rule reads it);
- ``remat_policy``: a MaxText row's remat policy (``topo/data/compute/remat_policies.toml``), the same;
- ``dp_overlap_policy``: ``ParallelLayout.dp_overlap_policy`` (``xla_lhs`` where the run's XLA flags enable the
  latency-hiding scheduler); empty: the layout's default;
- ``dp_all_reduce_combine_bytes``: XLA's ``--xla_gpu_all_reduce_combine_threshold_bytes`` where the script sets it
  and the combiner sees the gradients of many layers (``ParallelLayout.dp_all_reduce_combine_bytes``); empty: none;
- ``tp_overlap_config``: the userbuffers configuration the row's script names where it is not its model's entry of
  ``topo/data/compute/tp_overlap_recipes.toml`` (``training_accuracy.tp_overlap_config``); empty: that rule;
- ``moe_expert_kernels``: ``ParallelLayout.moe_expert_kernels``, ``fused_mlp`` where the recipe runs Transformer
  Engine's CuTe DSL fused grouped MLP; empty: ``multi_stream``;
- ``moe_grouped_gemm``: ``ParallelLayout.moe_grouped_gemm``, ``0`` where the recipe's model config builds a
  SequentialMLP (one GEMM per local expert), ``1`` grouped; empty: the layout's default (grouped).

And, until tidy52 (section 174's "left") rules of ``training_accuracy.py`` keyed on the run's id, family, release
or GPU, read by :func:`recipe_column_kw`:

- ``overlap_tp``, ``moe_router_fusion``: ``1`` / ``0`` on every row (required), the recipe's TP-communication
  overlap (userbuffers) and Megatron-Core's fused router (``ParallelLayout.overlap_tp``, ``.moe_router_fusion``);
- ``cross_entropy``: ``ParallelLayout.cross_entropy`` where the recipe's loss is not the layout's default (the
  Megatron-MoE-ModelZoo rows without ``--cross-entropy-loss-fusion``: ``megatron_unfused``); empty: the default
  (NeMo AutoModel's ``torch_bf16`` is its code's, ``_automodel_settings``);
- ``attention_fp8``: ``ParallelLayout.attention_fp8`` where the recipe sets ``fp8_dot_product_attention``;
- ``fp8_amax_reduction``, ``fp8_scale_inverse_kernel``: ``1`` where the run's Transformer Engine reduces its
  delayed-scaling amaxes / computes each scale inverse in a kernel of its own (TE 2.0-2.6); ``0``: not; empty: the
  layout's default (the amax reduction follows the recipe: on with delayed scaling; the scale inverse kernel off).

And, until amax52 (section 179's "left"), rules of ``training_accuracy.py`` keyed on the release or the source:

- ``fp8_amax_pass``: ``1`` where the run's TE (before v2.7) computes a current-scaling cast's amax in a kernel of
  its own (``ParallelLayout.fp8_amax_pass``); ``fp8_param_gather``: ``1`` where the recipe keeps FP8 weights and
  gathers them at 1 byte (``ParallelLayout.fp8_param_gather``); empty or ``0``: not;
- ``ep_comm_sms``: the SMs HybridEP's kernels hold where a row's own script sets ``--moe-hybridep-num-sms``
  (``ParallelLayout.ep_comm_sms``; Megatron-Bridge's per-release value stays in the HybridEP file); empty: the
  layout's default or that file's.

And, until tidy53 (section 190's "left"), per-source rules of ``training_accuracy.py`` (``_megatron_lm_kw``,
``_mlperf_kw``, ``_dgxc2505_kw``, ``_run_kw``, ``_recipe_layout_kw``'s release rule, ``_framework_kw``'s
Megatron-Bridge bucket), read by :func:`layout_column_kw` after every remaining rule (:data:`LAYOUT_COLUMNS`; empty:
what the rules and the layout give):

- ``grad_bytes``, ``grad_reduce_bytes``, ``optimizer_bytes_per_param``: bytes per parameter of the gradient buffer, of the
  gradient reduction and of the optimizer state (``ParallelLayout``'s fields of those names);
- ``moe_counts_aligned``, ``dp_align_grad_reduce``: ``1`` / ``0``, the router's padding of each expert's count for
  the quantised GEMMs, Megatron-Core's aligned gradient reduction across model chunks;
- ``overlap_dp``: ``0`` where the recipe sets ``overlap_grad_reduce = overlap_param_gather = False`` (the gradient
  reduce-scatter after the backward and the weight all-gather after the optimizer step, both exposed:
  ``ParallelLayout.overlap_dp``); ``1`` / empty: overlapped, the layout's default (superarch86);
- ``overlap_param_gather``: ``0`` where the recipe keeps ``overlap_grad_reduce`` but sets ``overlap_param_gather =
  False`` (the distributed optimizer's weight all-gather run synchronously after the optimizer step, every bucket
  exposed: ``ParallelLayout.overlap_param_gather``); ``1`` where it overlaps the gather with the gradients' reduction
  not overlapped; empty: ``overlap_dp``'s (pgather129, findings 460);
- ``overlap_param_gather_with_optimizer_step``: ``1`` where the run's Megatron-Bridge performance script or recipe
  function sets it (every run with dp, pp and vp > 1 at v0.1.0rc4-v0.2.0; from v0.3.0 not for ``fp8_mx`` /
  ``nvfp4``: ``ParallelLayout.overlap_param_gather_with_optimizer_step``); empty: off, Megatron-Core's default
  (ogpos133, findings 469);
- ``dp_bucket_params``: parameters per DP bucket (a whole number >= 1);
- ``dp_shard``, ``expert_dp_shard``, ``dp_outer_sharding``: Megatron-FSDP's HSDP, where the recipe sets
  ``num_distributed_optimizer_instances`` n > 1: the inner shard groups of ``dp / n`` data-parallel ranks and
  ``expert_dp / n`` expert replicas (Megatron-Core's intra-partial data-parallel groups, NVIDIA/Megatron-LM@24bad8e6
  ``megatron/core/parallel_state.py``), and the recipe's ``outer_dp_sharding_strategy`` (``no_shard`` / ``optim``)
  (``ParallelLayout``'s fields of those names; the layout checks that the groups divide); empty: ZeRO over every
  data-parallel rank (ultracol91);
- ``num_layers_at_end_in_bf16``, ``module_recipes``: the model's last layers an FP8 / FP4 recipe keeps in BF16 and
  modules at a recipe of their own, space-separated ``name=recipe`` (Megatron-Bridge's Nemotron 3 Super NVFP4
  recipes: ``nemotron_3_super_bf16_with_nvfp4_mixed``'s 14 and ``te_quant.cfg``'s matchers; ``ParallelLayout``'s
  fields of those names, :mod:`topo.training.module_recipes`; nvfp4c, findings 405); empty: 0 and none;
- ``pipeline_layout``, ``pipeline_schedule``, ``moe_expert_rank_capacity_factor``: a layout in Megatron-Core's
  notation (checked by :func:`topo.training.pipeline_layout.expand_layout`), ``1f1b`` / ``dualpipe``, HybridEP's
  static rank budget (>= 1).

And, until col57 (section 211), the note's recipe words read by ``training_accuracy.fp8_recipe``:

- ``fp8_recipe``: an FP8 row's scaling recipe, ``delayed``, ``current``, ``blockwise`` or ``mxfp8``
  (``ParallelLayout.fp8_recipe``), or ``unstated`` where its source names none (the layout leaves the recipe unset:
  Megatron-Core's default, :func:`topo.training.parallel.runs_delayed_scaling`); required on every FP8 row and empty
  on every BF16 row (:func:`fp8_recipe_of`).

The sources of every value: the row's note or ``data/reference/README.md`` ("Framework settings named by value").
Megatron-Bridge's HybridEP SM count is a release's, not a row's: ``data/reference/megatron_bridge_hybridep_sms.csv``
(:func:`hybridep_sms_table`).

:func:`check_recipe_columns` refuses a bad value on one line naming the file, the run, the column, the value and
what is allowed.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from pathlib import Path
from typing import get_args

from topo.errors import TopoError
from topo.training.cudnn import parse_published_date
from topo.training.grouped_gemm import EXPERT_KERNELS
from topo.training.jax_mesh import parse_mesh
from topo.training.module_recipes import module_recipes_error
from topo.training.parallel import MAX_ELEMENT_BYTES, PIPELINE_SCHEDULES, ParallelLayout
from topo.training.pipeline_layout import expand_layout
from topo.training.remat import remat_policies
from topo.training.tp_overlap import config_names

COLUMNS = ("jax_mesh", "remat_policy", "dp_overlap_policy", "dp_all_reduce_combine_bytes", "tp_overlap_config",
           "moe_expert_kernels", "moe_grouped_gemm", "overlap_tp", "moe_router_fusion", "cross_entropy",
           "attention_fp8", "fp8_amax_reduction", "fp8_scale_inverse_kernel", "fp8_amax_pass", "fp8_param_gather",
           "ep_comm_sms", "grad_bytes", "grad_reduce_bytes", "optimizer_bytes_per_param", "moe_counts_aligned",
           "dp_bucket_params", "dp_align_grad_reduce", "pipeline_layout", "pipeline_schedule",
           "moe_expert_rank_capacity_factor", "fp8_recipe", "overlap_dp", "overlap_param_gather",
           "overlap_param_gather_with_optimizer_step", "dp_shard", "expert_dp_shard",
           "dp_outer_sharding", "num_layers_at_end_in_bf16", "module_recipes")
MAXTEXT_ONLY = ("jax_mesh", "remat_policy")  # read by the MaxText rule alone: required there, refused elsewhere
EVERY_ROW = ("overlap_tp", "moe_router_fusion")  # required on every row: the setting has no default in the code
FP8_UNSTATED = "unstated"
"""``fp8_recipe``'s value on an FP8 row whose source names no recipe: the layout's recipe stays unset."""
FLAGS = ("overlap_tp", "moe_router_fusion", "fp8_amax_reduction", "fp8_scale_inverse_kernel", "fp8_amax_pass",
         "fp8_param_gather", "moe_counts_aligned", "dp_align_grad_reduce", "overlap_dp", "overlap_param_gather",
         "overlap_param_gather_with_optimizer_step")  # 1 / 0
LAYOUT_COLUMNS = {"grad_bytes": float, "grad_reduce_bytes": float, "optimizer_bytes_per_param": float,
                  "moe_counts_aligned": lambda v: v == "1", "dp_bucket_params": int,
                  "dp_align_grad_reduce": lambda v: v == "1", "pipeline_layout": str, "pipeline_schedule": str,
                  "moe_expert_rank_capacity_factor": float, "overlap_dp": lambda v: v == "1",
                  "overlap_param_gather": lambda v: v == "1",
                  "overlap_param_gather_with_optimizer_step": lambda v: v == "1", "dp_shard": int,
                  "expert_dp_shard": int, "dp_outer_sharding": str, "num_layers_at_end_in_bf16": int,
                  "module_recipes": lambda v: tuple(v.split())}
"""The memory, DP and pipeline columns (tidy53; were per-source rules of ``training_accuracy.py``), each with how
:func:`layout_column_kw` reads a checked value."""


class RunColumnError(ValueError):
    """A runs CSV's recipe column holds a value topo cannot use (the message is one line)."""


def _mesh_fault(value: str) -> str | None:
    """None for a mesh :func:`topo.training.jax_mesh.parse_mesh` reads, else what is allowed (with its reason)."""
    try:
        parse_mesh(value)
    except TopoError as exc:
        return f"a JAX mesh of ici_<axis>=n / dcn_<axis>=n pairs ({exc.message})"
    return None


def _number_fault(low: float, high: float | None, what: str, low_open: bool = False) -> Callable[[str], str | None]:
    """A check that allows a decimal number from ``low`` (excluded where ``low_open``) to ``high`` (None: no upper
    end); ``what``: the unit, for the message."""
    def check(value: str) -> str | None:
        try:
            x = float(value)
        except ValueError:
            x = math.nan
        ok = math.isfinite(x) and (x > low if low_open else x >= low) and (high is None or x <= high)
        return None if ok else (f"a number of {what} {'>' if low_open else '>='} {low:g}"
                                + (f" and <= {high:g}" if high is not None else ""))
    return check


def _layout_fault(value: str) -> str | None:
    """None for a pipeline layout :func:`topo.training.pipeline_layout.expand_layout` reads, else what is allowed."""
    try:
        expand_layout(value)
    except TopoError as exc:
        return f"a pipeline layout in Megatron-Core's notation ({exc.message})"
    return None


def _module_recipes_fault(value: str) -> str | None:
    """None for space-separated ``name=recipe`` entries :mod:`topo.training.module_recipes` takes, else why not."""
    faults = [module_recipes_error(entry) for entry in value.split()]
    return next((f"name=recipe entries ({f})" for f in faults if f), None)


def _whole_fault(unit: str) -> Callable[[str], str | None]:
    """A check that allows a whole number of ``unit`` >= 1 (digits only): the value -> None, or what is allowed."""
    return lambda value: None if value.isdigit() and int(value) >= 1 else f"a whole number of {unit} >= 1"


def _one_of(names, where: str = "") -> Callable[[str], str | None]:
    """A check that allows exactly ``names`` (``where``: the file that lists them, for the message)."""
    allowed = tuple(names)
    return lambda value: None if value in allowed else f"one of{where} " + ", ".join(allowed)


def _literal(field: str) -> list[str]:
    """``ParallelLayout.<field>``'s allowed strings (its ``Literal``'s values, also inside ``Literal[...] | None``)."""
    args = get_args(ParallelLayout.model_fields[field].annotation)
    return [v for a in args for v in (get_args(a) or (a,)) if isinstance(v, str) and v]


FP8_RECIPES = (*_literal("fp8_recipe"), FP8_UNSTATED)
"""``fp8_recipe``'s values on an FP8 row."""


def _checks() -> dict:
    """Each column's check: the value -> None, or what is allowed."""
    return {"jax_mesh": _mesh_fault, "remat_policy": _one_of(remat_policies(), " topo/data/compute/remat_policies.toml's policies:"),
            "dp_overlap_policy": _one_of(_literal("dp_overlap_policy")), "dp_all_reduce_combine_bytes": _whole_fault("bytes"),
            "tp_overlap_config": _one_of(config_names(), " topo/data/compute/tp_overlap.toml's configurations:"),
            "moe_expert_kernels": _one_of(EXPERT_KERNELS), "moe_grouped_gemm": _one_of(("0", "1")),
            "cross_entropy": _one_of(_literal("cross_entropy")), "attention_fp8": _one_of(_literal("attention_fp8")),
            "ep_comm_sms": _whole_fault("SMs"),
            "grad_bytes": _number_fault(0, MAX_ELEMENT_BYTES, "bytes", low_open=True),
            "grad_reduce_bytes": _number_fault(0, MAX_ELEMENT_BYTES, "bytes", low_open=True),
            "optimizer_bytes_per_param": _number_fault(0, None, "bytes"),
            "dp_bucket_params": _whole_fault("parameters"),
            "pipeline_layout": _layout_fault, "pipeline_schedule": _one_of(PIPELINE_SCHEDULES),
            "moe_expert_rank_capacity_factor": _number_fault(1, None, "tokens' shares"),
            "fp8_recipe": _one_of(FP8_RECIPES),
            **{col: _whole_fault("ranks") for col in ("dp_shard", "expert_dp_shard")},
            "dp_outer_sharding": _one_of(_literal("dp_outer_sharding")),
            "num_layers_at_end_in_bf16": _whole_fault("layers"), "module_recipes": _module_recipes_fault,
            **{col: _one_of(("0", "1")) for col in FLAGS}}


def _required_fault(col: str, value: str, maxtext: bool, fp8: bool) -> str | None:
    """What a MaxText-only, every-row or FP8-only column must hold where ``value`` breaks it, else None."""
    if col == "fp8_recipe" and bool(value) != fp8:
        return (f"one of {', '.join(FP8_RECIPES)} on every row of precision fp8" if fp8 else
                "empty on a row whose precision is not fp8")
    if col in MAXTEXT_ONLY and bool(value) != maxtext:
        return ("a value on every maxtext_ row" if maxtext else
                "empty on a row that is not maxtext_ (only the MaxText rule reads it)")
    if col in EVERY_ROW and not value:
        return "one of 0, 1 on every row (the recipe's setting; its source in the note or data/reference/README.md)"
    return None


def check_recipe_columns(rows, file: str) -> None:
    """Refuse a row whose recipe column (:data:`COLUMNS`) holds a value topo cannot use.

    Parameters
    ----------
    rows : iterable of dict
        The file's rows (``run_id`` and the columns read; a column the file lacks counts as empty).
    file : str
        The file's name, for the message.

    Raises
    ------
    RunColumnError
        One line: ``FILE: run RUN: COLUMN = 'VALUE'; allowed: ...``.
    """
    checks = _checks()
    for row in rows:
        rid, maxtext = row["run_id"], row["run_id"].startswith("maxtext_")
        for col in COLUMNS:
            value = row.get(col) or ""
            what = _required_fault(col, value, maxtext, row.get("precision") == "fp8")
            if what:
                raise RunColumnError(f"{file}: run {rid}: {col} = {value!r}; allowed: {what}")
            fault = checks[col](value) if value else None
            if fault:
                empty = "" if col in (*MAXTEXT_ONLY, *EVERY_ROW, "fp8_recipe") else ", or empty"
                raise RunColumnError(f"{file}: run {rid}: {col} = {value!r}; allowed: {fault}{empty}")


def check_published_dates(rows, file: str) -> None:
    """Refuse a row whose ``published_date`` is neither a date ``YYYY-MM-DD`` nor ``unknown``, or whose date names
    no source (``published_date_source``): the date bounds the cuDNN a run with no named container is priced at
    (:func:`topo.training.cudnn.run_cudnn`).

    Parameters
    ----------
    rows : iterable of dict
        The file's rows (``run_id``, ``published_date``, ``published_date_source``; a column the file lacks counts
        as empty).
    file : str
        The file's name, for the message.

    Raises
    ------
    RunColumnError
        One line: ``FILE: run RUN: published_date = 'VALUE'; allowed: ...``.
    """
    for row in rows:
        value = row.get("published_date") or ""
        try:
            parse_published_date(value)
        except ValueError as exc:
            raise RunColumnError(f"{file}: run {row['run_id']}: {exc}") from None
        if not (row.get("published_date_source") or "").strip():
            raise RunColumnError(f"{file}: run {row['run_id']}: published_date_source = ''; allowed: where the date "
                                 f"{value!r} comes from (or why it is unknown)")


def recipe_column_kw(row) -> dict:
    """The layout settings of a row's tidy52 columns: ``overlap_tp`` and ``moe_router_fusion`` always, the others
    where the row names them (:func:`check_recipe_columns` has checked the values).

    Parameters
    ----------
    row : dict
        A runs CSV row.

    Returns
    -------
    dict
        ``ParallelLayout`` keyword arguments.
    """
    kw = {"overlap_tp": row["overlap_tp"] == "1", "moe_router_fusion": row["moe_router_fusion"] == "1"}
    for col in ("cross_entropy", "attention_fp8"):
        if row.get(col):
            kw[col] = row[col]
    for col in ("fp8_amax_reduction", "fp8_scale_inverse_kernel", "fp8_amax_pass", "fp8_param_gather"):
        if row.get(col):
            kw[col] = row[col] == "1"
    if row.get("ep_comm_sms"):
        kw["ep_comm_sms"] = int(row["ep_comm_sms"])
    return kw


def fp8_recipe_of(row) -> str | None:
    """A row's FP8 scaling recipe from its ``fp8_recipe`` column (:func:`check_recipe_columns` has checked it).

    Parameters
    ----------
    row : dict
        A runs CSV row.

    Returns
    -------
    str or None
        ``delayed``, ``current``, ``blockwise`` or ``mxfp8``; None on a BF16 row and where the column says
        ``unstated`` (the layout's ``fp8_recipe`` stays unset).
    """
    value = row.get("fp8_recipe") or ""
    return None if value in ("", FP8_UNSTATED) else value


def layout_column_kw(row) -> dict:
    """The layout settings of a row's memory, DP and pipeline columns (:data:`LAYOUT_COLUMNS`), where the row names
    them (:func:`check_recipe_columns` has checked the values); applied after every rule of ``training_accuracy.py``.

    Parameters
    ----------
    row : dict
        A runs CSV row.

    Returns
    -------
    dict
        ``ParallelLayout`` keyword arguments.
    """
    return {col: read(row[col]) for col, read in LAYOUT_COLUMNS.items() if row.get(col)}


PAPER_FLAGS = ("sequence_parallel", "async_tp_grad_allreduce")
"""``data/reference/training_runs.csv``'s layout switches (sc21sp108, findings 420): ``1`` / ``0`` where the run's
framework ran it so (``ParallelLayout``'s fields of those names; the SC21 Megatron-LM rows: ``0`` and ``0``, 2021's
Megatron-LM had no sequence parallelism and all-reduced the TP input gradient synchronously, the source in each
row's note), empty: the layout's default (on)."""

PAPER_COLUMNS = ("micro_batch", "vpp", "grad_bytes", "overlap_dp")
"""``data/reference/training_runs.csv``'s per-run settings where a run's own scripts give them (sc21art109, findings
423; the names of ``training_runs_published.csv`` and :data:`LAYOUT_COLUMNS`): ``micro_batch`` and ``vpp`` (whole
numbers >= 1), ``grad_bytes`` (bytes per parameter of the gradient kept and, unless the layout says otherwise,
reduced), ``overlap_dp`` (``1`` / ``0``: the DP reduction overlapped with the backward or after it). The SC21
Megatron-LM rows: the paper's artifact, NVIDIA/Megatron-LM@de7dc40f88 ``examples/sc21/run_table_1.sh`` (MBS, the
virtual stages, ``--DDP-impl``) and ``CONFIG.sh`` (``--fp16``), cited in each row's note. Empty: the source's rule
in ``training_accuracy._paper_setups`` and the layout's defaults."""


def _paper_checks() -> dict:
    """Each :data:`PAPER_FLAGS` and :data:`PAPER_COLUMNS` column's check: the value -> None, or what is allowed."""
    checks = _checks()
    return {**{col: _one_of(("0", "1")) for col in PAPER_FLAGS}, "micro_batch": _whole_fault("sequences"),
            "vpp": _whole_fault("virtual stages"), "grad_bytes": checks["grad_bytes"],
            "overlap_dp": checks["overlap_dp"]}


def paper_column_kw(row, file: str) -> dict:
    """The layout settings of a ``training_runs.csv`` row's :data:`PAPER_FLAGS` and :data:`PAPER_COLUMNS` columns,
    where the row names them.

    Parameters
    ----------
    row : dict
        A runs CSV row (``run_id`` and the columns read; a column the file lacks counts as empty).
    file : str
        The file's name, for the message.

    Returns
    -------
    dict
        ``ParallelLayout`` keyword arguments.

    Raises
    ------
    RunColumnError
        One line: ``FILE: run RUN: COLUMN = 'VALUE'; allowed: ..., or empty``.
    """
    read = {**{col: (lambda v: v == "1") for col in PAPER_FLAGS}, "micro_batch": int, "vpp": int,
            "grad_bytes": LAYOUT_COLUMNS["grad_bytes"], "overlap_dp": LAYOUT_COLUMNS["overlap_dp"]}
    kw = {}
    for col, fault_of in _paper_checks().items():
        value = row.get(col) or ""
        fault = fault_of(value) if value else None
        if fault:
            raise RunColumnError(f"{file}: run {row['run_id']}: {col} = {value!r}; allowed: {fault}, or empty")
        if value:
            kw[col] = read[col](value)
    fault = _uneven_chunks(row, kw.get("vpp"))
    if fault:
        raise RunColumnError(f"{file}: run {row['run_id']}: vpp = {row['vpp']!r}; allowed: {fault}, or empty")
    return kw


def _uneven_chunks(row, vpp) -> str | None:
    """What is allowed where a row's ``vpp`` does not cut each of its stages' layers into whole, equal model chunks
    (None where it does, or where the row gives no ``vpp``, ``layers`` or ``pp``). 2021's Megatron-LM took the
    chunks as ``--num-layers-per-virtual-pipeline-stage`` layers each, ``vpp = layers a stage // that``
    (NVIDIA/Megatron-LM@a8d172b3 megatron/arguments.py lines 118-127), and built each chunk of ``layers a stage //
    vpp`` layers (megatron/model/transformer.py lines 551-580): only a divisor of a stage's layers is a run it could
    make; topo would place any other as uneven chunks. A ``pp`` not dividing the layers is not this column's fault."""
    if not vpp or not row.get("layers") or not row.get("pp"):
        return None
    layers, pp = int(row["layers"]), int(row["pp"])
    if layers % pp == 0 and (layers // pp) % vpp:
        per = layers // pp
        divisors = ", ".join(str(d) for d in range(1, per + 1) if per % d == 0)
        return (f"a divisor of the {per} layers a stage ({layers} layers / pp {pp}): {divisors} "
                f"(2021 Megatron-LM's whole model chunks, megatron/arguments.py @a8d172b3 lines 118-127)")
    return None


def hybridep_sms_table(path) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Megatron-Bridge's ``moe_hybridep_num_sms`` per NeMo release (``data/reference/
    megatron_bridge_hybridep_sms.csv``: one row per release whose scripts were read, with its source).

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    dict
        Release (``26.04.01``) -> (SMs, the model-name prefixes whose configs were read for it).

    Raises
    ------
    RunColumnError
        One line naming the file, the release, the column, the value and what is allowed.
    """
    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rel, sms, prefixes = row["release"], row["moe_hybridep_num_sms"], tuple(row["model_prefixes"].split())
            if not (sms.isdigit() and int(sms) >= 1):
                raise RunColumnError(f"{Path(path).name}: release {rel}: moe_hybridep_num_sms = {sms!r}; "
                                     "allowed: a whole number of SMs >= 1")
            if not prefixes:
                raise RunColumnError(f"{Path(path).name}: release {rel}: model_prefixes = ''; allowed: the "
                                     "model-name prefixes whose configs were read, space-separated")
            out[rel] = (int(sms), prefixes)
    return out
