"""Megatron-LM SC21's Table 1 rows as the paper's own artifact ran them (sc21art109, issue 29, findings 423).

The artifact: NVIDIA/Megatron-LM@de7dc40f88 (2021-08-10, "scripts for sc21") ``examples/sc21/run_table_1.sh``
(per model size ``MBS``, ``DDP``, ``MEGATRON_EXTRA_PARAMS``) and ``CONFIG.sh`` (``--DDP-impl ${DDP}`` line 37,
``--fp16`` line 54). Read through the benchmark's own ``_paper_setups``.
"""

import csv
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from run_recipe_columns import RunColumnError, paper_column_kw  # noqa: E402
from training_accuracy import _paper_setups  # noqa: E402

# run_table_1.sh @de7dc40f88: (MBS line, MBS, --num-layers-per-virtual-pipeline-stage or None, DDP)
ARTIFACT = {
    "megatron_1p7b": (17, 16, None, "torch"), "megatron_3p6b": (28, 16, None, "torch"),
    "megatron_7p5b": (39, 16, None, "torch"), "megatron_18b": (50, 8, None, "torch"),
    "megatron_39b": (61, 4, None, "local"), "megatron_76b": (72, 2, 5, "local"),
    "megatron_146b": (83, 2, 5, "local"), "megatron_310b": (94, 1, 3, "local"),
    "megatron_530b": (105, 1, 1, "local"), "megatron_1t": (116, 1, None, "local"),
}


@pytest.fixture(scope="module")
def setups():
    return {s["run"]: s for s in _paper_setups() if s["run"].startswith("megatron_")}


def test_every_sc21_row_is_in_the_artifact(setups):
    assert set(setups) == set(ARTIFACT)


@pytest.mark.parametrize("run", sorted(ARTIFACT))
def test_the_layout_carries_the_artifacts_settings(setups, run):
    """Micro-batch = the script's MBS; vpp = layers a stage / ``--num-layers-per-virtual-pipeline-stage`` (e.g.
    76B: 60 layers / PP 4 = 15, / 5 = 3); ``--DDP-impl torch``: PyTorch DDP's all-reduce hooked into the last
    micro-batch's backward (``schedules.py`` ``forward_backward_no_pipelining``: ``model.no_sync`` before it),
    ``local``: ``LocalDDP.allreduce_gradients`` after the backward (``training.py`` ``train_step``); ``--fp16``
    without ``--accumulate-allreduce-grads-in-fp32`` (``megatron/arguments.py`` lines 132-155): fp16 gradients,
    reduced in fp16, 2 bytes; full recomputation (``--checkpoint-activations``); pipeline sends blocking
    (``p2p_communication.py`` ``_communicate``: ``req.wait()``, ``torch.cuda.synchronize()``)."""
    _, mbs, per_virtual, ddp = ARTIFACT[run]
    s = setups[run]
    lay, model = s["lay"], s["model"]
    assert lay.micro_batch == mbs
    want_vpp = model.layers // lay.pp // per_virtual if per_virtual else 1
    assert lay.vpp == want_vpp
    assert lay.overlap_dp is (ddp == "torch")
    assert lay.grad_bytes == 2 and lay.reduce_bytes == 2
    assert lay.recompute == "full" and lay.dp_sharding == "none"
    assert lay.overlap_pp is False
    # the schedule the 2021 interleaved code requires: micro-batches a multiple of the stages (schedules.py line 34)
    if lay.vpp > 1:
        assert lay.microbatches % lay.pp == 0


def test_the_vpp_of_the_interleaved_rows():
    """Closed form: 76B 60 / 4 / 5 = 3, 145B 80 / 8 / 5 = 2, 310B 96 / 16 / 3 = 2, 530B 105 / 35 / 1 = 3."""
    rows = {r["run_id"]: r for r in csv.DictReader(open(ROOT / "data" / "reference" / "training_runs.csv"))}
    for run, want in (("megatron_76b", 3), ("megatron_146b", 2), ("megatron_310b", 2), ("megatron_530b", 3)):
        assert int(rows[run]["vpp"]) == want
        _, _, per_virtual, _ = ARTIFACT[run]
        assert int(rows[run]["layers"]) // int(rows[run]["pp"]) == want * per_virtual


def test_each_rows_note_cites_its_script_lines():
    rows = {r["run_id"]: r for r in csv.DictReader(open(ROOT / "data" / "reference" / "training_runs.csv"))}
    for run, (line, *_rest) in ARTIFACT.items():
        note = rows[run]["note"]
        assert "NVIDIA/Megatron-LM@de7dc40f88 examples/sc21/run_table_1.sh lines " + str(line) in note


@pytest.mark.parametrize("col, value", [("micro_batch", "0"), ("vpp", "two"), ("grad_bytes", "-2"),
                                        ("overlap_dp", "yes")])
def test_a_bad_artifact_column_is_refused_on_one_line(col, value):
    with pytest.raises(RunColumnError) as err:
        paper_column_kw({"run_id": "megatron_x", col: value}, "training_runs.csv")
    msg = str(err.value)
    assert "\n" not in msg and f"training_runs.csv: run megatron_x: {col} = {value!r}; allowed: " in msg


def test_empty_artifact_columns_leave_the_rule():
    assert paper_column_kw({"run_id": "llama3_x"}, "training_runs.csv") == {}
    assert paper_column_kw({"run_id": "m", "micro_batch": "8", "vpp": "3", "grad_bytes": "2", "overlap_dp": "0"},
                           "training_runs.csv") == dict(micro_batch=8, vpp=3, grad_bytes=2.0, overlap_dp=False)


@pytest.mark.parametrize("vpp, per, allowed", [("4", 15, "1, 3, 5, 15"), ("2", 15, "1, 3, 5, 15")])
def test_a_vpp_that_does_not_divide_a_stages_layers_is_refused(vpp, per, allowed):
    """2021's Megatron-LM made only whole, equal model chunks: ``vpp = layers a stage //
    --num-layers-per-virtual-pipeline-stage`` and each chunk ``layers a stage // vpp`` layers
    (NVIDIA/Megatron-LM@a8d172b3 megatron/arguments.py lines 118-127, megatron/model/transformer.py lines 551-580).
    The 76B row: 60 layers, pp 4, 15 layers a stage; its artifact's vpp 3 (5 layers a chunk) is read, 4 is not."""
    row = {"run_id": "megatron_76b", "layers": "60", "pp": "4", "vpp": vpp}
    with pytest.raises(RunColumnError) as err:
        paper_column_kw(row, "training_runs.csv")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"training_runs.csv: run megatron_76b: vpp = {vpp!r}; allowed: ")
    assert f"a divisor of the {per} layers a stage (60 layers / pp 4): {allowed}" in msg
    assert paper_column_kw({**row, "vpp": "3"}, "training_runs.csv") == dict(vpp=3)
