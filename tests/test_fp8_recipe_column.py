"""The runs CSVs' ``fp8_recipe`` column (col57, docs/calibration-findings.md section 211; rev60's "Left" item 1).

Until col57 ``benchmarks/training_accuracy.py`` read a run's FP8 recipe from its note's words ("current scaling",
"mxfp8", "--fp8-recipe blockwise", "delayed scaling") and, for Megatron-Bridge's H100 rows, from the GPU; 13 of the
263 FP8 rows' notes fired two of those tests and the order of the reader's ``if``s decided. The column holds what the
reader gave each row (the step of all 369 runs identical before and after: the findings section), and the benchmark
reads the column alone.

The 13 rows' recipes, from their sources: Megatron-Bridge's 25.09 table prints the FP8 figure with the "other FP8
granularity" (32x32 MXFP8 on GB200 / B200) in parentheses (NVIDIA-NeMo/Megatron-Bridge@0a25f911
docs/performance-summary-archive.md, the 25.09 tables' footnote), so the row's figure is the per-tensor recipe,
current scaling (Megatron-Bridge's ``fp8_cs``); the 26.02 / 26.02.01 / 26.06 GB200 Llama rows print FP8 beside their
MXFP8 rows with the layouts of ``LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_V2`` / ``LLAMA31_405B_..._FP8_CS_V2``
(current scaling; the rows' notes, audit31); Megatron-LM PR #5728's H100 row sets ``_perf_precision('fp8_cs')`` then
``mixed_precision.fp8_recipe = "blockwise"`` (NVIDIA/Megatron-LM@71464846 examples/moe_recipes/README.md).
"""

import csv
import shutil
import sys

import pytest

from conftest import ROOT
from published_setups import published_rows, published_setups

sys.path.insert(0, str(ROOT / "benchmarks"))
import training_accuracy as ta  # noqa: E402
from run_recipe_columns import RunColumnError, check_recipe_columns, fp8_recipe_of  # noqa: E402

REF = ROOT / "data" / "reference"
FILES = ("training_runs_published.csv", "training_runs_holdout.csv")
ALLOWED = ("delayed", "current", "blockwise", "mxfp8", "nvfp4", "unstated")
TWO_RECIPE_NOTES = {  # the 13 rows whose notes name two recipes, with the recipe their sources state
    **{rid: "current" for rid in (
        "mb2602_gb200_llama3_70b", "mb2602_gb200_llama31_405b", "mb2509_gb200_llama3_8b", "mb2509_gb200_llama3_70b",
        "mb2509_gb200_llama31_405b", "mb2509_b200_llama3_8b", "mb2509_b200_llama31_405b", "mb260201_gb200_llama3_70b",
        "mb260201_gb200_llama31_405b", "mb2606_gb200_llama31_405b", "mb2509_gb200_qwen3_30b_tokendrop",
        "mb2509_gb200_qwen3_235b_tokendrop")},
    "mb5728_h100_qwen3_30b_fp8_blockwise": "blockwise"}


def test_every_fp8_row_names_an_allowed_recipe_and_no_bf16_row_one():
    rows = published_rows()
    for rid, r in rows.items():
        assert (r["fp8_recipe"] in ALLOWED) if r["precision"] == "fp8" else r["fp8_recipe"] == "", rid
    counts = {v: sum(r["fp8_recipe"] == v for r in rows.values()) for v in ALLOWED}
    # 293 FP8 rows; unstated: NeMo 24.07 / 25.02 tables and DeepSeek-V3's H800 run (sources name no recipe);
    # runs57 (section 227): DGX Cloud's later Nemotron-H rows, the H100 one delayed, the GB200 one current scaling;
    # runs68 (section 277): Together's three B200 Nemotron-H rows, current scaling on every layer (dgxc v26.02);
    # runs69 (section 286): Together's B200 DeepSeek-V3 and Qwen3 235B MXFP8 rows;
    # runs70: Megatron-Bridge 26.08's GB200 Nemotron 3.5 Lightning MXFP8 row (held out); super80: 26.08's GB200
    # (fitted) and GB300 (held out) Nemotron 3 Super MXFP8 rows; data81: 26.08's five DGX-GB300 MXFP8 rows (held out);
    # ultra85: 26.08's GB200 (fitted) and GB300 (held out) Nemotron 3 Ultra MXFP8 rows; superarch86: the archive's 13
    # Nemotron 3 Super MXFP8 rows of 26.04-26.06.01 (held out); nvfp4 (section 397): 26.04.01's four dense NVFP4
    # Llama rows (held out); nvfp4c (section 405): the 15 Nemotron 3 Super NVFP4 rows of 26.04-26.08 (held out); data128:
    # Together AI's B200 Llama 3.1 runs of dgxc v26.02, two current scaling (launch.sh's default cs) and three NVFP4, and
    # its Nemotron4 340B FP8 run (launch.sh's -fr cs; held out)
    assert counts == {"delayed": 54, "current": 85, "blockwise": 2, "mxfp8": 134, "nvfp4": 22, "unstated": 21}
    assert all(r["gpu"] in ("H100", "H200", "H800") for r in rows.values() if r["fp8_recipe"] == "blockwise")
    assert all(r["gpu"].startswith(("B", "GB")) for r in rows.values() if r["fp8_recipe"] in ("mxfp8", "nvfp4"))


def test_the_two_recipe_notes_rows_carry_their_sources_recipe():
    rows = published_rows()
    for rid, recipe in TWO_RECIPE_NOTES.items():
        note = rows[rid]["note"].lower()
        assert rows[rid]["fp8_recipe"] == recipe, rid
        if recipe == "current":  # the note names MXFP8 as the table's other figure, and current scaling as the row's
            assert "current scaling" in note and "mxfp8" in note, rid
        else:
            assert "--fp8-recipe blockwise" in note and rows[rid]["gpu"] == "H100", rid


def test_the_column_is_the_layouts_recipe():
    rows = published_rows()
    for s in published_setups():
        if "row" in s:
            assert s["lay"].fp8_recipe == fp8_recipe_of(rows[s["run"]]), s["run"]
            assert ta.fp8_recipe(s["row"]) == fp8_recipe_of(s["row"]), s["run"]


def _tmp_reference(tmp_path, name, run, changes):
    """A copy of data/reference with ``changes`` made to run ``run``'s cells of ``name`` (the file's own line
    style: each cell replaced in place)."""
    ref = tmp_path / "data" / "reference"
    shutil.copytree(REF, ref)
    with open(ref / name, newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    for r in rows:
        if r[0] == run:
            for k, v in changes.items():
                r[head.index(k)] = v
    with open(ref / name, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return tmp_path


def test_the_note_no_longer_sets_the_recipe_and_the_column_does(tmp_path, monkeypatch):
    run = "mb2509_gb200_llama3_70b"  # current scaling
    note = "--fp8-recipe blockwise; MXFP8; delayed scaling"
    monkeypatch.setattr(ta, "ROOT", _tmp_reference(tmp_path, FILES[0], run, {"note": note}))
    assert {s["run"]: s["lay"] for s in ta._setups()}[run].fp8_recipe == "current"
    monkeypatch.setattr(ta, "ROOT", _tmp_reference(tmp_path / "b", FILES[0], run, {"fp8_recipe": "mxfp8"}))
    assert {s["run"]: s["lay"] for s in ta._setups()}[run].fp8_recipe == "mxfp8"


@pytest.mark.parametrize("run, value, allowed", [
    ("mb2509_gb200_llama3_70b", "MXFP8",
     "allowed: one of delayed, current, mxfp8, blockwise, nvfp4, unstated"),
    ("mb2509_gb200_llama3_70b", "", "allowed: one of delayed, current, mxfp8, blockwise, nvfp4, unstated on every row of "
     "precision fp8"),
    ("mb2602_gb200_gptoss_120b", "current", "allowed: empty on a row whose precision is not fp8"),
])
def test_the_loader_refuses_a_bad_recipe_on_one_line(tmp_path, monkeypatch, run, value, allowed):
    monkeypatch.setattr(ta, "ROOT", _tmp_reference(tmp_path, FILES[0], run, {"fp8_recipe": value}))
    with pytest.raises(RunColumnError) as e:
        ta._published_rows()
    assert str(e.value) == f"{FILES[0]}: run {run}: fp8_recipe = {value!r}; {allowed}"


def test_a_file_without_the_column_is_refused_on_its_fp8_rows():
    row = {k: v for k, v in published_rows()["mb2509_gb200_llama3_70b"].items() if k != "fp8_recipe"}
    with pytest.raises(RunColumnError, match=r"^runs.csv: run mb2509_gb200_llama3_70b: fp8_recipe = ''; allowed: "):
        check_recipe_columns([row], "runs.csv")
