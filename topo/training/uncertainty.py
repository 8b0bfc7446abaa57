"""How far a step-time prediction may be off: the out-of-family error of its group of models.

``benchmarks/training_accuracy.py --fit`` predicts every published run with the fitted values refitted without
its model family and writes each group's absolute errors' 50th and 90th percentiles to
``topo/data/compute/step_uncertainty.toml``, for the group and, where a GPU generation has at least the file's
``generation_min_runs`` of them, for the group on that generation (``[moe_fine.hopper]``). A prediction carries its
group's on its generation when the file has it, else its group's across generations: half of the runs of unseen
families there were within ``p50`` of their measured step, nine in ten within ``p90``. ``median`` is their signed
median error (negative: predicted faster than measured), shown, never applied to the prediction.

Each row also says what its runs span (written by the same ``--fit``, or alone by ``--spans``, from the runs CSVs'
layouts on their fabrics: :func:`job_reach` of each run): their model ``families``, their GPU ``generations``
with the ``generation_runs`` on each,
``gpus_min`` / ``gpus_max``, the largest ``pp_max``, ``cp_max``, ``ep_max`` and ``ep_domains_max`` (NVLink domains
the widest expert group spans; 1: every run's all-to-all stayed inside a domain). :func:`step_interval` compares a
job's own reach with them and lists where it lies outside every run (``outside``); a row without them (a file from
before they were written) gives neither.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from ..resources import data_dir
from .model import ModelSpec
from .module_recipes import parse_module_recipes

__all__ = ["COARSE_EXPERTS", "GROUP_LABELS", "SPAN_KEYS", "job_reach", "left_out_measured", "model_group",
           "outside_span", "runs_fp4", "step_interval"]

COARSE_EXPERTS = 16
"""An MoE of at most this many experts is coarse (Mixtral's 8, Llama 4 Scout's 16); more is fine-grained."""


GROUP_LABELS = {"dense_bf16": "dense BF16", "dense_fp8": "dense FP8", "moe_coarse": "coarse MoE (up to 16 experts)",
                "moe_fine": "fine-grained MoE", "hybrid_ssm": "hybrid Mamba-2 / attention"}
"""Each group's name as README's and RESULTS.md's accuracy tables print it."""


SPAN_KEYS = ("families", "generations", "generation_runs", "gpus_min", "gpus_max", "pp_max", "cp_max", "ep_max", "ep_domains_max")
"""What a row of step_uncertainty.toml says its runs span (the module doc)."""


def job_reach(lay, mapping) -> dict:
    """What a job's layout reaches, as a row's span counts it: its ``gpus``, ``pp``, ``cp``, ``ep`` and
    ``ep_domains``, the NVLink domains its widest expert group spans (1: the all-to-all stays inside a domain).

    Parameters
    ----------
    lay : ParallelLayout
        The layout as placed (:func:`topo.training.mapping.default_placement`).
    mapping : Mapping
        ``lay`` on its fabric (:func:`topo.training.mapping.map_layout`).

    Returns
    -------
    dict
    """
    return {"gpus": int(lay.gpus), "pp": int(lay.pp), "cp": int(lay.cp), "ep": int(lay.ep),
            "ep_domains": int(mapping.domains_spanned("ep")), "fp4": runs_fp4(lay)}


def runs_fp4(lay) -> bool:
    """Whether ``lay`` runs any GEMM in NVFP4: ``fp8_recipe = "nvfp4"`` or a ``module_recipes`` entry in ``nvfp4``
    (with ``precision = "fp8"``)."""
    recipes = {lay.fp8_recipe, *parse_module_recipes(tuple(lay.module_recipes or ())).values()}
    return lay.precision == "fp8" and "nvfp4" in recipes


def outside_span(span: dict, job: dict, generation: str | None) -> dict:
    """Where a job lies outside every run of a row's ``span`` (:data:`SPAN_KEYS`): each of its ``job``
    (:func:`job_reach`) figures beyond the runs' range, and its ``generation`` when no run was on it.

    Parameters
    ----------
    span : dict
        A row's span keys.
    job : dict
        :func:`job_reach` of the job.
    generation : str, optional
        The job's GPU generation.

    Returns
    -------
    dict
        Of ``gpus``, ``pp``, ``cp``, ``ep``, ``ep_domains`` and ``generation``, those outside, with the job's value,
        and ``recipe`` (``"nvfp4"``) for a job with NVFP4 GEMMs while no scored run has any (step_uncertainty.toml
        ``fp4_scored_runs``); empty when the job lies inside.
    """
    out = {}
    if not span["gpus_min"] <= job["gpus"] <= span["gpus_max"]:
        out["gpus"] = job["gpus"]
    for k in ("pp", "cp", "ep", "ep_domains"):
        if job[k] > span[f"{k}_max"]:
            out[k] = job[k]
    if generation is not None and generation not in span["generations"]:
        out["generation"] = generation
    if job.get("fp4") and not int(_table().get("fp4_scored_runs", 0)):  # every NVFP4 run is held out
        out["recipe"] = "nvfp4"
    return out


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


def step_interval(model: ModelSpec, precision: str, step_time_s: float, generation: str | None = None,
                  job: dict | None = None) -> dict:
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
    job : dict, optional
        What the job reaches (:func:`job_reach`): compared with the runs' span.

    Returns
    -------
    dict
        ``group``, its ``label`` (:data:`GROUP_LABELS`), ``basis`` (step_uncertainty.toml's ``source``),
        ``generation`` (the GPU generation whose runs these are, or ``"all"``: the group's across generations),
        ``runs`` (published runs behind it), ``p50`` and ``p90`` (fractions of the measured step), ``median`` (the
        signed median error, not applied), and
        ``low_s`` / ``high_s``: the measured steps a prediction off by at most ``p90`` either way stands for,
        ``step / (1 + p90)`` to ``step / (1 - p90)`` (empty of figures when the group has no scored run); where the
        row has them, ``span`` (its :data:`SPAN_KEYS`) and, given ``job``, ``outside`` (:func:`outside_span`).
    """
    g = model_group(model, precision)
    row = _table().get(g)
    if not row:
        return {"group": g, "label": GROUP_LABELS[g], "runs": 0, "basis": _basis()}
    gen = generation if isinstance(row.get(generation), dict) else "all"
    if gen != "all":
        row = row[gen]
    p90 = float(row["p90"])
    span = {k: row[k] for k in SPAN_KEYS if k in row}
    extra = {}
    if len(span) == len(SPAN_KEYS):
        extra["span"] = span
        if job is not None:
            extra["outside"] = outside_span(span, job, generation)
    return {"group": g, "label": GROUP_LABELS[g], "basis": _basis(), "generation": gen, "runs": int(row["runs"]),
            "p50": float(row["p50"]), "p90": p90, "median": float(row.get("median", float("nan"))),
            "low_s": step_time_s / (1 + p90), "high_s": step_time_s / (1 - p90) if p90 < 1 else float("inf"), **extra}
