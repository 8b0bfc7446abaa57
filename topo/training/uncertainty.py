"""How far a step-time prediction may be off: the out-of-family error of its group of models.

``benchmarks/training_accuracy.py --fit`` predicts every published run with the fitted values refitted without
its model family and writes each group's absolute errors' 50th and 90th percentiles to
``topo/data/compute/step_uncertainty.toml``, for the group and, where a GPU generation has at least the file's
``generation_min_runs`` of them, for the group on that generation (``[moe_fine.hopper]``). A prediction carries its
group's on its generation when the file has it, else its group's across generations: half of the runs of unseen
families there were within ``p50`` of their measured step, nine in ten within ``p90``. ``median`` is their signed
median error (negative: predicted faster than measured), shown, never applied to the prediction.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from .model import ModelSpec

__all__ = ["COARSE_EXPERTS", "GROUP_LABELS", "left_out_measured", "model_group", "step_interval"]

COARSE_EXPERTS = 16
"""An MoE of at most this many experts is coarse (Mixtral's 8, Llama 4 Scout's 16); more is fine-grained."""


GROUP_LABELS = {"dense_bf16": "dense BF16", "dense_fp8": "dense FP8", "moe_coarse": "coarse MoE (up to 16 experts)",
                "moe_fine": "fine-grained MoE", "hybrid_ssm": "hybrid Mamba-2 / attention"}
"""Each group's name as README's and RESULTS.md's accuracy tables print it."""


def model_group(model: ModelSpec, precision: str) -> str:
    """The accuracy group of a model at a precision: ``dense_bf16``, ``dense_fp8``, ``moe_coarse``, ``moe_fine``
    or ``hybrid_ssm`` (any Mamba layer)."""
    if model.mamba is not None:
        return "hybrid_ssm"
    if model.moe is not None:
        return "moe_coarse" if model.moe.experts <= COARSE_EXPERTS else "moe_fine"
    return f"dense_{precision}"


@lru_cache(maxsize=None)
def _table() -> dict:
    path = data_dir("compute") / "step_uncertainty.toml"
    return tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


@lru_cache(maxsize=None)
def _left_out() -> dict:
    return tomllib.loads((data_dir("compute") / "left_out.toml").read_text(encoding="utf-8"))


def left_out_measured(kind: str) -> str:
    """The measured size of what a ``not modelled:`` note's ``kind`` misses (``eager_moe_host``,
    ``blackwell_mamba``), with the findings' section: ``topo/data/compute/left_out.toml``'s ``measured``.

    Parameters
    ----------
    kind : str
        A table of left_out.toml.

    Returns
    -------
    str
    """
    return str(_left_out()[kind]["measured"])


def _basis() -> str:
    """Where ``p50`` and ``p90`` come from, as ``--json`` says it: step_uncertainty.toml's ``source``."""
    return str(_table().get("source", ""))


def step_interval(model: ModelSpec, precision: str, step_time_s: float, generation: str | None = None) -> dict:
    """The out-of-family error band of a step-time prediction.

    Parameters
    ----------
    model : ModelSpec
    precision : str
        ``bf16`` or ``fp8``.
    step_time_s : float
        The prediction.
    generation : str, optional
        The GPU's generation (``ampere``, ``hopper``, ``blackwell``): its own figures when the file has them.

    Returns
    -------
    dict
        ``group``, its ``label`` (:data:`GROUP_LABELS`), ``basis`` (step_uncertainty.toml's ``source``),
        ``generation`` (the GPU generation whose runs these are, or ``"all"``: the group's across generations),
        ``runs`` (published runs behind it), ``p50`` and ``p90`` (fractions of the measured step), ``median`` (the
        signed median error, not applied), and
        ``low_s`` / ``high_s``: the measured steps a prediction off by at most ``p90`` either way stands for,
        ``step / (1 + p90)`` to ``step / (1 - p90)`` (empty of figures when the group has no scored run).
    """
    g = model_group(model, precision)
    row = _table().get(g)
    if not row:
        return {"group": g, "label": GROUP_LABELS[g], "runs": 0, "basis": _basis()}
    gen = generation if isinstance(row.get(generation), dict) else "all"
    if gen != "all":
        row = row[gen]
    p90 = float(row["p90"])
    return {"group": g, "label": GROUP_LABELS[g], "basis": _basis(), "generation": gen, "runs": int(row["runs"]),
            "p50": float(row["p50"]), "p90": p90, "median": float(row.get("median", float("nan"))),
            "low_s": step_time_s / (1 + p90), "high_s": step_time_s / (1 - p90) if p90 < 1 else float("inf")}
