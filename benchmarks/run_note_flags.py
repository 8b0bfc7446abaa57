"""The framework flags a training run's note names (``--tp-comm-overlap``, ``--moe-router-force-load-balancing``),
each with what the accuracy benchmark does with it.

A run's setting reaches topo in one of three ways: a CSV column (``recompute_modules``, ``cuda_graph_scope``,
``moe_capacity_factor``...), a rule of ``training_accuracy.py`` keyed on the run's source (``_framework_kw``,
``_run_kw``...), or not at all (a flag topo does not model). The note is where a row quotes its recipe's
flags, and the benchmark reads one of them from the note (``PAIR_NOTE_FLAGS``). A flag a new row's note names
that no rule reads was silently ignored (small50; docs/calibration-findings.md section 158 left ``note_flags`` with
one field): :func:`check_note_flags` refuses a flag this table does not list, naming the file, run and flag, so
whoever adds the row says where the flag goes (a column, a rule) or why topo leaves it out.
"""

from __future__ import annotations

import re

NOTE_FLAGS = {
    # flags a CSV column carries
    "--recompute-granularity": "column recompute_granularity",
    "--recompute-modules": "column recompute_modules",
    "--recompute_modules": "column recompute_modules (NeMo's launcher spelling)",
    "--cuda-graph-scope": "column cuda_graph_scope",
    "--cuda-graph-impl": "column cuda_graph_scope (transformer_engine is the only implementation the rows run)",
    "--cuda_graphs": "column cuda_graph_scope (NeMo's launcher switch)",
    "--moe-expert-capacity-factor": "column moe_capacity_factor",
    "--moe-pad-expert-input-to-capacity": "column moe_capacity_factor (padded to capacity whenever it is set)",
    "--moe-flex-dispatcher-backend": "columns moe_dispatcher and moe_flex_backend",
    "--overlap-moe-expert-parallel-comm": "column moe_a2a_overlap",
    "--fp8-recipe": "columns precision and fp8_recipe (col57)",
    "--fp8_recipe": "columns precision and fp8_recipe (NeMo's launcher spelling)",
    "--fp8-format": "not modelled: one FP8 GEMM rate per generation (kernels.toml), whatever the format",
    "--bf16": "column precision",
    # 2021 Megatron-LM (the SC21 artifact, NVIDIA/Megatron-LM@de7dc40f88 examples/sc21/: training_runs.csv)
    "--fp16": "not a setting: topo prices fp16 GEMMs at the bf16 rate (equal on A100); its fp16 gradients: column "
              "grad_bytes (training_runs.csv)",
    "--num-layers-per-virtual-pipeline-stage": "column vpp (layers a stage / this)",
    "--checkpoint-activations": "rule: _paper_setups' recompute = full (the row's column recompute says full)",
    "--checkpoint-num-layers": "rule: _paper_setups' recompute = full (its default 1: a checkpoint a layer)",
    "--xla_gpu_enable_latency_hiding_scheduler": "column dp_overlap_policy (xla_lhs where true)",
    "--xla_gpu_all_reduce_combine_threshold_bytes": "column dp_all_reduce_combine_bytes (where the layers are not "
                                                    "scanned: the combiner sees many layers' gradients)",
    "--tp-comm-overlap": "column overlap_tp",
    "--moe-router-fusion": "column moe_router_fusion",
    "--cross-entropy-loss-fusion": "column cross_entropy (megatron_unfused where the script omits it)",
    # memory and FP8 flags: columns since amax52 and tidy53 (the rules of training_accuracy.py they were)
    "--grad-reduce-in-bf16": "column grad_reduce_bytes",
    "--main-grads-dtype": "column grad_reduce_bytes",
    "--accumulate-allreduce-grads-in-fp32": "column grad_reduce_bytes (empty: _recipe_layout_kw's bf16 default)",
    "--fp8-param-gather": "column fp8_param_gather",
    "--use-precision-aware-optimizer": "column optimizer_bytes_per_param",
    "--moe-router-padding-for-quantization": "column moe_counts_aligned",
    "--moe-router-padding-for-fp8": "column moe_counts_aligned (the older name of "
                                    "--moe-router-padding-for-quantization)",
    "--mtp-num-layers": "rule: mtp_layers (_row_model drops MTP where the recipe has none)",
    "--make-vocab-size-divisible-by": "model file: the padded vocabulary (tests/test_training_runs_data.py)",
    # routing the pairs of runs must share
    "--moe-router-force-load-balancing": "PAIR_NOTE_FLAGS (topo prices every dropless router as forced "
                                         "balancing: topo.training.router_load)",
    # not modelled (the row's note says so)
    "--moe-permute-fusion": "not a setting: topo prices Transformer Engine's fused permutation always "
                            "(kernels.toml, operators._permute_ops)",
    "--fine-grained-activation-offloading": "not modelled (the note: topo's memory fits the run without it)",
    "--offload-modules": "not modelled (with --fine-grained-activation-offloading)",
    "--delay-offload-until-cuda-graph": "not modelled (with --fine-grained-activation-offloading)",
    "--use-separate-send-recv-groups": "not modelled (topo has no setting for separate send and receive groups)",
    "--reuse-grad-buf-for-mxfp8-param-ag": "not modelled (the note: gather through the gradient buffer)",
    "--log-params-norm": "not modelled (the note: a per-step pass over the weights)",
    "--log-num-zeros-in-grad": "not modelled (the note: a per-step pass over the gradients)",
}
"""Every flag a run's note may name: ``{flag: where topo takes it from, or why it is left out}``."""

_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9_-]*[a-z0-9]")


def note_flag_names(note: str) -> list[str]:
    """The ``--flags`` a note names, in order, each once (``--fp8_recipe`` as NeMo's launcher spells it too)."""
    return list(dict.fromkeys(_FLAG.findall(note or "")))


def check_note_flags(rows, file: str) -> None:
    """Refuse a row whose note names a flag :data:`NOTE_FLAGS` does not list.

    Parameters
    ----------
    rows : iterable of dict
        The file's rows (``run_id`` and ``note`` read).
    file : str
        The file's name, for the message.

    Raises
    ------
    ValueError
        One line naming the file, the run and the flag.
    """
    for row in rows:
        for flag in note_flag_names(row.get("note")):
            if flag not in NOTE_FLAGS:
                raise ValueError(f"{file}: run {row['run_id']}: its note names {flag}, which "
                                 f"benchmarks/run_note_flags.py NOTE_FLAGS does not list; add it with the column or "
                                 f"rule that sets it, or why topo leaves it out")
