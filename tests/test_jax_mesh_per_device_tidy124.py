"""MaxText's per-device batch with ``--jax-mesh`` (tidy124, section 454; walk44's Left 1).

MaxText states its batch as ``per_device_batch_size`` (``int | float``) and trains
``int(num_devices x per_device_batch_size x gradient_accumulation_steps)`` sequences a step
(AI-Hypercomputer/maxtext@e591f30c ``src/maxtext/configs/types.py`` line 1400 and lines 3458-3466,
``calculate_global_batch_sizes``). gpu-recipes@2e1fd5ef ``training/a4/llama3-1-70b/maxtext-pretraining-gke``
runs ``per_device_batch_size 8`` on 256 B200: a global batch of 2,048 (the holdout row
``maxtext_a4_llama31_70b_fp8_256``).
"""

import json

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.jax_mesh import global_batch_per_device

BASE = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--jax-mesh", "ici_tensor=2,ici_fsdp=4,dcn_fsdp=4"]


@pytest.mark.parametrize("per_device, devices, batch", [
    ("8", 256, 2048),     # the A4 recipe: 8 x 256
    ("0.5", 32, 16),      # fractional: one sequence per two GPUs
    ("0.1", 30, 3),       # read as its decimal text, not a float's 3.0000000000000004
    (2, 16, 32),
])
def test_global_batch_is_per_device_times_devices(per_device, devices, batch):
    assert global_batch_per_device(per_device, devices) == batch


@pytest.mark.parametrize("per_device", ["0.03", "0", "-1", "abc", "nan", "inf"])
def test_bad_per_device_batch_refused(per_device):
    with pytest.raises(TopoError):
        global_batch_per_device(per_device, 32)


def _json(*extra):
    proc = run_cli(*BASE, *extra, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cli_per_device_batch_sets_the_global_batch():
    doc = _json("--per-device-batch", "0.5")
    # 0.5 x (2 x 4 x 4 = 32 GPUs) = 16 sequences; dp = fsdp 16, so one micro-batch of 1 a replica (MaxText's)
    assert doc["layout"]["global_batch"] == 16
    assert doc["layout"]["micro_batch"] == 1
    assert doc["step_time_s"] == _json("--global-batch", "16")["step_time_s"]


def test_cli_agreeing_global_batch_is_taken():
    assert _json("--per-device-batch", "2", "--global-batch", "64")["layout"]["global_batch"] == 64


@pytest.mark.parametrize("extra, words", [
    (["--per-device-batch", "0.5", "--global-batch", "17"], "0.5 x 32 GPUs = 16 sequences, but --global-batch is 17"),
    (["--per-device-batch", "0.03"], "0.03 x 32 GPUs = 0.96 sequences, not a whole number"),
    (["--per-device-batch", "-2"], "must be a number of sequences per device > 0"),
    # 8 sequences over dp = fsdp 16 replicas: named by the flag given, not --global-batch
    (["--per-device-batch", "0.25"], "0.25 x 32 GPUs = 8 sequences, which do not split into the mesh's 16"),
])
def test_cli_refusals_are_one_line(extra, words):
    proc = run_cli(*BASE, *extra)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --per-device-batch: ") and words in lines[0], proc.stderr


def test_cli_per_device_batch_needs_a_mesh():
    proc = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--per-device-batch", "2")
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--per-device-batch" in lines[0] and "--jax-mesh" in lines[0], proc.stderr
