"""Every framework flag a training run's note names is one the accuracy benchmark knows what to do with
(benchmarks/run_note_flags.py NOTE_FLAGS): a column, a rule of training_accuracy.py, or a reason topo leaves it out.

small50: the notes named 35 flags; the benchmark read one of them from the note (``force-load-balancing``, for the
FP8 pairs) and set the others by rules keyed on the run's source. One was read by no rule:
``--moe-router-padding-for-fp8`` on the Mixtral 8x22B block-wise FP8 run (Megatron-MoE-ModelZoo's
sbatch_benchmarking.sh adds it for PR=fp8), so topo priced the grouped experts' FP8 padding copies the run does not
make."""

import csv
import sys

import pytest

from conftest import ROOT
from published_setups import published_setups

sys.path.insert(0, str(ROOT / "benchmarks"))
from run_note_flags import NOTE_FLAGS, check_note_flags, note_flag_names  # noqa: E402

REF = ROOT / "data" / "reference"


def _rows(name):
    with open(REF / name, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("name", ["training_runs.csv", "training_runs_published.csv", "training_runs_holdout.csv"])
def test_every_flag_a_note_names_is_listed(name):
    check_note_flags(_rows(name), name)


def test_every_listed_flag_is_named_by_some_note():
    named = {f for name in ("training_runs.csv", "training_runs_published.csv", "training_runs_holdout.csv")
             for r in _rows(name) for f in note_flag_names(r.get("note"))}
    assert set(NOTE_FLAGS) == named


def test_an_unlisted_flag_is_one_line_naming_file_run_and_flag():
    row = {"run_id": "x_run", "note": "the recipe adds --moe-router-dtype fp32 and --tp-comm-overlap"}
    with pytest.raises(ValueError) as err:
        check_note_flags([row], "training_runs_published.csv")
    msg = str(err.value)
    assert msg.startswith("training_runs_published.csv: run x_run: its note names --moe-router-dtype, which ")
    assert "\n" not in msg
    assert note_flag_names("NeMo's --fp8_recipe and -fsdp 0 --cuda_graphs true") == ["--fp8_recipe", "--cuda_graphs"]


def test_the_mixtral_block_wise_fp8_run_pads_its_expert_counts_in_the_router():
    setups = {s["run"]: s for s in published_setups()}
    assert setups["mcore_h100_mixtral_8x22b_fp8blockwise"]["lay"].moe_counts_aligned
    assert "--moe-router-padding-for-fp8" in setups["mcore_h100_mixtral_8x22b_fp8blockwise"]["row"]["note"]
    assert not setups["mcore_h100_mixtral_8x22b_dropless"]["lay"].moe_counts_aligned  # BF16: no FP8 padding
