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

:func:`check_recipe_columns` refuses a bad value on one line naming the file, the run, the column, the value and
what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from topo.errors import TopoError
from topo.training.grouped_gemm import EXPERT_KERNELS
from topo.training.jax_mesh import parse_mesh
from topo.training.parallel import ParallelLayout
from topo.training.remat import remat_policies
from topo.training.tp_overlap import config_names

COLUMNS = ("jax_mesh", "remat_policy", "dp_overlap_policy", "dp_all_reduce_combine_bytes", "tp_overlap_config",
           "moe_expert_kernels", "moe_grouped_gemm")
MAXTEXT_ONLY = ("jax_mesh", "remat_policy")  # read by the MaxText rule alone: required there, refused elsewhere


class RunColumnError(ValueError):
    """A runs CSV's recipe column holds a value topo cannot use (the message is one line)."""


def _mesh_fault(value: str) -> str | None:
    """None for a mesh :func:`topo.training.jax_mesh.parse_mesh` reads, else what is allowed (with its reason)."""
    try:
        parse_mesh(value)
    except TopoError as exc:
        return f"a JAX mesh of ici_<axis>=n / dcn_<axis>=n pairs ({exc.message})"
    return None


def _whole_fault(value: str) -> str | None:
    """None for a whole number >= 1 (digits only), else what is allowed."""
    return None if value.isdigit() and int(value) >= 1 else "a whole number of bytes >= 1"


def _one_of(names, where: str = "") -> Callable[[str], str | None]:
    """A check that allows exactly ``names`` (``where``: the file that lists them, for the message)."""
    allowed = tuple(names)
    return lambda value: None if value in allowed else f"one of{where} " + ", ".join(allowed)


def _checks() -> dict:
    """Each column's check: the value -> None, or what is allowed."""
    policies = get_args(ParallelLayout.model_fields["dp_overlap_policy"].annotation)
    return {"jax_mesh": _mesh_fault, "remat_policy": _one_of(remat_policies(), " topo/data/compute/remat_policies.toml's policies:"),
            "dp_overlap_policy": _one_of(policies), "dp_all_reduce_combine_bytes": _whole_fault,
            "tp_overlap_config": _one_of(config_names(), " topo/data/compute/tp_overlap.toml's configurations:"),
            "moe_expert_kernels": _one_of(EXPERT_KERNELS), "moe_grouped_gemm": _one_of(("0", "1"))}


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
            if col in MAXTEXT_ONLY and bool(value) != maxtext:
                what = ("a value on every maxtext_ row" if maxtext else
                        "empty on a row that is not maxtext_ (only the MaxText rule reads it)")
                raise RunColumnError(f"{file}: run {rid}: {col} = {value!r}; allowed: {what}")
            fault = checks[col](value) if value else None
            if fault:
                empty = "" if col in MAXTEXT_ONLY else ", or empty"
                raise RunColumnError(f"{file}: run {rid}: {col} = {value!r}; allowed: {fault}{empty}")
