"""The ``topo train`` command line that gives training_accuracy.py's prediction for one published row
(``python3 benchmarks/training_accuracy.py --command RUN_ID``; walk33: no README row could be reproduced from
README and ``--help`` alone).

The command names the row's spec (``--set`` for each of the benchmark's spec overrides), its model, the size flags
(``--tp`` ... ``--global-batch``, ``--seq``, ``--precision``) and ``--layout key=value`` for every other layout field
whose value differs from what those flags alone give (:func:`topo.training.parallel.make_layout`'s defaults,
resolved ones included, e.g. ``overlap_pp``). What the command line cannot say (a model the benchmark edits, a
release that runs NCCL without NVLS) is returned as notes.
"""

from __future__ import annotations

import shlex

from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.nvls_buffers import release_nvls_enabled
from topo.training.parallel import ParallelLayout, make_layout

SIZE_FLAGS = ("tp", "cp", "pp", "dp", "ep", "etp", "vpp", "global_batch", "micro_batch", "seq_len", "precision")
"""The layout fields ``topo train`` takes as flags of their own (``seq_len`` as ``--seq``)."""


def _flag(field: str) -> str:
    return "--seq" if field == "seq_len" else "--" + field.replace("_", "-")


def _toml(v) -> str:
    """A layout value as :func:`topo.training.parallel.layout_pairs` reads it back (strings always quoted)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_toml(x) for x in v) + "]"
    return repr(v)


def layout_arguments(lay: ParallelLayout) -> tuple[list[str], list[str]]:
    """``(argv, notes)``: the flags and ``--layout`` pairs that rebuild ``lay`` in ``topo train``, and the fields
    the command line cannot carry (a None where the flags' layout holds a value, a string with a comma)."""
    sizes = {k: getattr(lay, k) for k in SIZE_FLAGS if getattr(lay, k) is not None}
    base = make_layout(**sizes)
    fields = ParallelLayout.model_fields
    argv = [x for k, v in sizes.items() if v != fields[k].default or k in ("tp", "pp", "dp", "global_batch")
            for x in (_flag(k), str(v))]
    pairs, notes = [], []
    for k in ParallelLayout.model_fields:
        v = getattr(lay, k)
        if k in SIZE_FLAGS or v == getattr(base, k):
            continue
        if v is None or (isinstance(v, str) and "," in v):
            notes.append(f"layout field {k} = {v!r} cannot be given as --layout {k}=...")
            continue
        pairs.append(f"{k}={_toml(v)}")
    if pairs:
        argv += ["--layout", ",".join(pairs)]
    return argv, notes


def row_command(setup: dict) -> tuple[list[str], list[str]]:
    """``(argv, notes)`` of training_accuracy.py's run ``setup`` (one dict of its ``_setups()``): ``topo train``'s
    arguments after ``train`` and what they leave out."""
    name, overrides = setup["spec"]
    argv = ["train", name] + [x for o in overrides for x in ("--set", o)] + ["--model", setup["model"].name]
    lay_argv, notes = layout_arguments(setup["lay"])
    try:
        catalog = load_model(setup["model"].name)
    except TopoError:  # a model built in the benchmark, no catalog entry
        catalog = None
    if catalog != setup["model"]:
        notes.append(f"the benchmark edits {setup['model'].name} for this row (e.g. no multi-token prediction "
                     "module for NeMo AutoModel); --model gives the catalog's")
    row = setup.get("row") or {}
    if not release_nvls_enabled(row.get("software", ""), row.get("source_url", "")):
        notes.append("the row's release exports NCCL_NVLS_ENABLE=0, which the benchmark prices and topo train has "
                     "no flag for")
    return argv + lay_argv, notes


def command_text(runs: list[dict], run_id: str) -> str:
    """The shell line of ``run_id`` among ``runs`` (with its notes, one a line), or one line saying it is unknown."""
    match = [s for s in runs if s["run"] == run_id]
    if not match:
        return (f"--command: no published run {run_id!r}; allowed: a run_id of data/reference/"
                "training_runs_published.csv (e.g. mb2511_h100_llama3_70b)")
    argv, notes = row_command(match[0])
    return "\n".join(["topo " + shlex.join(argv)] + [f"note: {n}" for n in notes])
