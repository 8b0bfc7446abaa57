"""benchmarks/training_accuracy.py's runs as it builds them (``_setups()``: one dict per published and held-out
row, with its layout and model), built once per test session.

About 25 tests read these runs to check how the benchmark turns a row into a layout; each built all 358 anew
(1.4 s on 2 shared cores). The layouts and models are frozen pydantic models, and each caller gets its own shallow
copy of every run's dict (``_engines`` adds keys to them), so a test cannot change what another reads. A test that
edits the rows or monkeypatches the benchmark (its ``ROOT``, a reference file) calls ``_setups()`` itself.

:func:`published_rows` reads the two runs CSVs' rows as written (strings), by run id, for the tests that check a
row's cells.
"""

from __future__ import annotations

import csv
import functools
import sys

import pytest

from conftest import ROOT

RUNS_FILES = ("training_runs_published.csv", "training_runs_holdout.csv")
"""The runs CSVs the benchmark reads (data/reference/), published then held out."""

sys.path.insert(0, str(ROOT / "benchmarks"))
import training_accuracy  # noqa: E402


@functools.cache
def _built() -> tuple[dict, ...]:
    return tuple(training_accuracy._setups())


def published_setups() -> list[dict]:
    """``training_accuracy._setups()`` of the unpatched benchmark: a new list of shallow copies of the cached runs."""
    return [dict(s) for s in _built()]


def published_rows() -> dict[str, dict]:
    """Every row of :data:`RUNS_FILES` as ``csv.DictReader`` reads it, by ``run_id``: read anew at each call."""
    out = {}
    for name in RUNS_FILES:
        with open(ROOT / "data" / "reference" / name, newline="") as f:
            out.update({r["run_id"]: r for r in csv.DictReader(f)})
    return out


def assert_printed_row(r: dict, rid: str, model: str, system: str, software: str, sizes: tuple, layout: str,
                       tokens: float, tflops: int, rel: float) -> None:
    """A run row against its source table's printed line: model, system and release; (GPUs, global batch,
    micro-batch, sequence) as ``sizes``; TP/PP/CP/VP/EP as ``layout`` ("1/2/1/8/32"); the printed tokens/s/GPU as
    its value and the printed model TFLOP/s/GPU in its note; its step time GBS x sequence / (tokens/s/GPU x GPUs)
    to ``rel`` (data81's 26.08 GB300 rows, ultra85's Nemotron 3 Ultra rows)."""
    gpus, gbs, mbs, seq = sizes
    assert (r["model"], r["system"], r["software"]) == (model, system, software), rid
    assert (int(r["num_gpus"]), int(r["global_batch_seqs"]), int(r["micro_batch"]), int(r["seq_len"])) == sizes, rid
    assert "/".join(r[k] for k in ("tp", "pp", "cp", "vpp", "ep")) == layout, rid
    assert float(r["value"]) == tokens and f"{tflops:,} model TFLOP/s/GPU" in r["note"], rid
    assert float(r["step_time_s"]) == pytest.approx(gbs * seq / (tokens * gpus), rel=rel), rid
