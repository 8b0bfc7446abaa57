"""walk45: a torchtitan user's names for settings topo spells its own way (PyTorch pipelining's ``Interleaved1F1B``,
``ZBVZeroBubble``, ``DualPipeV``; torchao's ``tensorwise`` / ``rowwise``; torchtitan's ``op`` checkpointing, ``float8``,
HSDP) are refused in one line that says what topo calls the setting or that it is not modelled, from the flag and
from ``--layout`` alike (they had been argparse's bare ``invalid choice`` or pydantic's ``must be one of``, with no
word on what the name is in topo). Sources: pytorch/torchtitan@b5bcd76c ``torchtitan/config/configs.py`` lines
216-223 (schedule names), ``torchtitan/components/quantization/float8.py`` line 58 (``rowwise``,
``rowwise_with_gw_hp``), ``torchtitan/distributed/activation_checkpoint.py`` lines 243-272 (per-op SAC)."""

import tomllib

import pytest

from conftest import run_cli
from topo.resources import data_dir
from topo.training.framework_names import other_framework_hint

JOB = ("train", "dgx-h100-superpod", "--model", "llama3-70b", "--global-batch", "512", "--tp", "8", "--pp", "4",
       "--dp", "2")
NAMES = tomllib.loads((data_dir("compute") / "framework_names.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("flag,field,value", [
    ("--pipeline-schedule", "pipeline_schedule", "Interleaved1F1B"),
    ("--pipeline-schedule", "pipeline_schedule", "ZBVZeroBubble"),
    ("--pipeline-schedule", "pipeline_schedule", "DualPipeV"),
    ("--pipeline-schedule", "pipeline_schedule", "ScheduleGPipe"),
    ("--recompute", "recompute", "op"),
    ("--precision", "precision", "float8"),
    ("--dp-sharding", "dp_sharding", "hsdp"),
])
def test_a_flag_given_another_frameworks_name_says_what_topo_calls_it(flag, field, value, tmp_path):
    proc = run_cli(*JOB, flag, value, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    hint = other_framework_hint(field, value)
    assert hint and hint in NAMES[field]["names"].values()
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: topo train: argument {flag}: {value!r} is not one of ")
    assert hint in proc.stderr


@pytest.mark.parametrize("pairs,field,value", [
    ("pipeline_schedule=Interleaved1F1B", "pipeline_schedule", "Interleaved1F1B"),
    ("pipeline_schedule=1F1B", "pipeline_schedule", "1F1B"),
    ("fp8_recipe=tensorwise", "fp8_recipe", "tensorwise"),
    ("fp8_recipe=rowwise", "fp8_recipe", "rowwise"),
    ("recompute=layer", "recompute", "layer"),
])
def test_a_layout_given_another_frameworks_name_says_what_topo_calls_it(pairs, field, value, tmp_path):
    proc = run_cli(*JOB, "--precision", "fp8", "--layout", pairs, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: --layout: {field}: must be one of ")
    assert proc.stderr.rstrip("\n").endswith(f"got {value!r}; {other_framework_hint(field, value)}")


def test_what_each_name_is_in_topo():
    """The hints say the mapping the sources give: PyTorch's Interleaved1F1B is the interleaved 1F1B topo runs with
    vpp (torchtitan's stages per rank); torchao's tensorwise is per-tensor current scaling (torchtitan docs/float8.md:
    "tensor-wise scaling with dynamic scales"); ZBV, DualPipeV and rowwise are not modelled."""
    assert "'1f1b' with vpp" in other_framework_hint("pipeline_schedule", "interleaved1f1b")
    assert "'current'" in other_framework_hint("fp8_recipe", "TensorWise")
    for field, value in (("pipeline_schedule", "ZBVZeroBubble"), ("pipeline_schedule", "DualPipeV"),
                         ("fp8_recipe", "rowwise"), ("recompute", "op")):
        assert "not modelled" in other_framework_hint(field, value)
    assert other_framework_hint("pipeline_schedule", "foo") is None
    assert other_framework_hint("pipeline_schedule", 3) is None


def test_an_unknown_name_keeps_the_plain_message(tmp_path):
    proc = run_cli(*JOB, "--pipeline-schedule", "foo", cwd=tmp_path)
    assert proc.returncode == 2 and "invalid choice: 'foo'" in proc.stderr
    proc = run_cli(*JOB, "--layout", "pipeline_schedule=foo", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "error: --layout: pipeline_schedule: must be one of '1f1b' or 'dualpipe', got 'foo'\n"


def test_plan_reads_the_same_layout_rule(tmp_path):
    proc = run_cli("plan", "dgx-h100-superpod", "--model", "llama3-70b", "--no-collectives", "--layout",
                   "tp=8,pp=4,dp=2,global_batch=512,pipeline_schedule=ZBVZeroBubble", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert other_framework_hint("pipeline_schedule", "ZBVZeroBubble") in proc.stderr


def test_torchtitans_state_is_named_as_its_own():
    """walk45: torchtitan's FSDP2 state (fp32 parameters, ``training.dtype = "float32"``; bf16 gathers,
    ``mixed_precision_param``; fp32 gradients, ``mixed_precision_reduce``; two fp32 AdamW moments: 4 + 4 + 8 B,
    pytorch/torchtitan@b5bcd76c ``torchtitan/config/configs.py`` lines 87-105) was labelled MaxText's alone."""
    from topo.training.memory import state_convention

    text = state_convention({"weight_bytes": 4, "grad_bytes": 4, "optimizer_bytes_per_param": 8, "gather_bytes": 2,
                             "fp8_param_gather": False, "precision": "bf16"})
    assert text.startswith("state 4 + 4 + 8 B/param, ") and "torchtitan's" in text and text.endswith(
        "; gathers 2 B/param")


PP_FSDP2 = ("train", "dgx-h100-superpod", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--dp", "16",
            "--global-batch", "256", "--recompute", "full", "--json")


@pytest.mark.parametrize("sharding,wgrad,pp,noted", [("zero3", "fsdp2", "4", True), ("zero3", "main_grad", "4", False),
                                                     ("fsdp_grad_op", "fsdp2", "4", False),
                                                     ("zero3", "fsdp2", "1", False)])
def test_fsdp2_under_pipelining_says_what_it_priced(sharding, wgrad, pp, noted, tmp_path):
    """walk45: torchtitan fully_shard-s each stage's model (pytorch/torchtitan@b5bcd76c torchtitan/distributed/
    fsdp.py line 368), so PyTorch's pipelining keeps its units gathered and its gradients unsynced until the last
    backward (pytorch/pytorch@01386103 torch/distributed/pipelining/stage.py backward_maybe_with_nosync): one gather
    and one reduce-scatter a step. topo's ZeRO-3 prices them every micro-batch; the step now says so, under FSDP2
    with pp > 1 only."""
    import json

    argv = list(PP_FSDP2)
    argv[argv.index("--pp") + 1] = pp
    if pp == "1":
        argv[argv.index("--dp") + 1] = "64"
    proc = run_cli(*argv, "--dp-sharding", sharding, "--layout", f"wgrad_output={wgrad}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    notes = json.loads(proc.stdout)["notes"]
    said = [n for n in notes if n.startswith("FSDP2 under pp: priced gathering and reduce-scattering each unit every "
                                             "micro-batch")]
    assert len(said) == (1 if noted else 0)
    if noted:  # fsdp2pp128: torchtitan's way is priced now, and the note names the field that selects it
        assert "one gather and one reduce-scatter a schedule run" in said[0] and "fsdp_pipeline_sync step" in said[0]


@pytest.mark.parametrize("pair,says", [("compile=true", "torch.compile is not modelled"),
                                       ("enable_async_tensor_parallel=true", "async TP"),
                                       ("data_parallel_shard_degree=8", "is topo's dp_shard"),
                                       ("selective_ac_option=2", "recompute_num_layers"),
                                       ("enable_fsdp_float8_all_gather=true", "fp8_param_gather = true")])
def test_a_torchtitan_key_says_what_topo_calls_it_or_that_it_is_not_modelled(pair, says, tmp_path):
    """walk45: ``--layout compile=true`` (torchtitan's ``[compile]``) was an unknown key with the list of keys and
    no word that topo does not model torch.compile; a torchtitan parallelism key did not say topo's name for it."""
    key = pair.split("=")[0]
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--dp", "64", "--global-batch", "64",
                   "--layout", pair, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1
    hint = other_framework_hint("layout_keys", key)
    assert says in hint
    assert proc.stderr.startswith(f"error: --layout: {key}: unknown key {key!r} ({hint}); allowed: tp, cp, pp, ")
    assert "did you mean" not in proc.stderr


def test_an_unknown_key_of_no_framework_keeps_its_did_you_mean(tmp_path):
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--dp", "64", "--global-batch", "64",
                   "--layout", "recompte=full", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --layout: recompte: unknown key 'recompte'; ")
    assert proc.stderr.endswith("; did you mean 'recompute'?\n")
