"""`topo plan --model M --layout L`: the MFU, precision and parameters come from `topo train`'s step."""

import json

import pytest

import topo
from conftest import run_cli
from topo.training.parallel import make_layout
from topo.training.mfu import parse_layout, predict_mfu
from topo.training.model import load_model
from topo.training.step import estimate_step

LAYOUT = "tp=8,pp=4,dp=3136,global_batch=12544"


def test_plan_takes_the_mfu_of_the_training_step():
    spec = topo.load_spec()
    step = estimate_step(topo.build_fabric(spec), load_model("llama3-70b"),
                    make_layout(tp=8, pp=4, dp=3136, global_batch=12544))
    mfu, precision, params = predict_mfu(spec, "llama3-70b", LAYOUT)
    assert mfu == pytest.approx(step.mfu, rel=1e-12) and precision == "bf16"
    assert params == load_model("llama3-70b").total_params
    doc = json.loads(run_cli("plan", "--model", "llama3-70b", "--layout", LAYOUT, "--json", check=True).stdout)
    c = doc["compute"]
    assert c["mfu"] == pytest.approx(mfu, rel=1e-9) and c["precision"] == "bf16"
    # FLOP in the planned days at that MFU: peak bf16 x MFU x days (989 TFLOP/s per H100, planner.md)
    assert c["flop"] == pytest.approx(100_352 * 989e12 * mfu * c["days"] * 86400, rel=1e-3)
    # the checkpoint is the model's (issue 22: every plan checkpointed a 1.8T model)
    assert doc["reliability"]["params"] == load_model("llama3-70b").total_params
    assert doc["reliability"]["params_source"].startswith("--model")


def test_layout_text_and_errors():
    assert parse_layout("tp=8, pp=2,dp=4,global_batch=64,recompute=\"full\"").recompute == "full"
    p = run_cli("plan", "--model", "llama3-70b", "--layout", "tp=8,pp=4")
    assert p.returncode == 2 and "global_batch" in p.stderr and p.stderr.count("\n") == 1
    p = run_cli("plan", "--model", "llama3-70b", "--layout", "tp8")
    assert p.returncode == 2 and "key=value" in p.stderr


def test_the_text_gives_the_steps_mfu_to_three_figures():
    """walk7: the compute line printed the step's MFU as a raw float ('MFU 0.110905'); it is given to three
    figures, as the JSON's value rounds (the catalog's 0.35 stays 0.35)."""
    args = ["plan", "dgx-h100-superpod", "--no-collectives", "--model", "llama3-8b", "--layout",
            "tp=8,pp=2,dp=64,global_batch=256"]
    mfu = json.loads(run_cli(*args, "--json", check=True).stdout)["compute"]["mfu"]
    (line,) = [ln for ln in run_cli(*args, check=True).stdout.splitlines() if " and MFU " in ln]
    assert f" and MFU {mfu:.3g}: " in line and len(f"{mfu:g}") > len(f"{mfu:.3g}")
    default = run_cli("plan", "dgx-h100-superpod", "--no-collectives", check=True).stdout
    assert " days at fp8 and MFU 0.35: " in default


def test_the_plan_says_where_its_mfu_came_from_and_how_large_the_job_was():
    """walk8: `topo plan gb200-nvl72-superpod --model deepseek-v3-671b --layout pp=4,...` printed 'MFU 0.175' with
    no word that it is a 256-GPU job's on a 2,304-GPU cluster, nor (side by side) that every design takes the
    first's. The note gives the MFU, the job's GPUs (tp x cp x pp x dp = 8 x 1 x 2 x 8 = 128) and the cluster's."""
    layout = "tp=8,pp=2,dp=8,global_batch=64"
    args = ["plan", "dgx-h100-superpod", "--no-collectives", "--model", "llama3-8b", "--layout", layout]
    doc = json.loads(run_cli(*args, "--json", check=True).stdout)
    want = (f"MFU {doc['compute']['mfu']:.3g} is topo train's step of llama3-8b as --layout {layout} on "
            f"dgx-h100-superpod, a job of 128 of its 1,024 GPUs; the compute budget takes that MFU for every GPU")
    assert want in doc["notes"]
    assert f"note: {want}" in run_cli(*args, check=True).stdout.splitlines()
    both = run_cli("plan", "dgx-h100-superpod", "dgx-a100-superpod", *args[2:], check=True).stdout.splitlines()
    # plan65 changed this pin: the step ran on the first design only and its MFU went to every design ("... for
    # every GPU of every design (the step runs on the first, dgx-h100-superpod, only)"); each design now runs its
    # own step, and its note says so
    assert f"note: {want}" in both
    a100 = next(n for n in both if n.startswith("note: MFU ") and " on dgx-a100-superpod, " in n)
    assert "a job of 128 of its 4,480 GPUs; the compute budget takes that MFU for every GPU" in a100
    # --mfu wins over the step's: then no such note
    assert not any("topo train's" in n for n in json.loads(
        run_cli(*args, "--mfu", "0.3", "--json", check=True).stdout)["notes"])
