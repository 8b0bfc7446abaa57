"""What a JAX mesh chose, said truly (tidy123, section 448; walk44's Left 7).

``topo train --jax-mesh`` fills MaxText's defaults where no flag or layout field sets them: one micro-batch per
replica (no gradient accumulation, ``pyconfig``'s ``calculate_global_batch_sizes``), ``remat_policy: 'full'``
(AI-Hypercomputer/maxtext@315ebb59 ``MaxText/configs/base.yml``), the fp32 state bytes, XLA's latency-hiding
scheduler, and on an FP8 run no Transformer Engine amax reduction. ``--json``'s ``chosen_by`` said
``fp8_amax_reduction: jax_mesh`` on BF16 runs and named neither the micro-batch nor the remat policy.
"""

import json

from conftest import run_cli

BASE = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "128",
        "--jax-mesh", "ici_fsdp=8,dcn_fsdp=4"]
PREFIX = "chosen by the JAX mesh (MaxText's defaults; a flag or layout field sets each): "


def _json(*extra):
    proc = run_cli(*BASE, *extra, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _mesh(doc):
    return {k for k, by in doc["chosen_by"].items() if by == "jax_mesh"}


def test_bf16_mesh_names_its_defaults_and_not_the_fp8_amax():
    doc = _json()
    assert doc["precision"] == "bf16"
    assert doc["chosen_by"].get("fp8_amax_reduction") != "jax_mesh"
    assert {"micro_batch", "remat_policy", "dp_overlap_policy", "weight_bytes"} <= _mesh(doc)
    # the value it chose: 128 sequences over 32 replicas, one micro-batch each
    assert doc["layout"]["micro_batch"] == 128 // 32 and doc["layout"]["remat_policy"] == "full"


def test_fields_a_flag_set_are_not_the_meshs():
    doc = _json("--micro-batch", "1", "--remat-policy", "minimal")
    assert not {"micro_batch", "remat_policy"} & _mesh(doc)
    assert "dp_overlap_policy" in _mesh(doc)


def test_fp8_mesh_names_the_amax():
    assert "fp8_amax_reduction" in _mesh(_json("--precision", "fp8"))


def test_text_line_names_the_same_fields_as_chosen_by():
    proc = run_cli(*BASE)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith(PREFIX))
    named = {pair.split(" ")[0] for pair in line.removeprefix(PREFIX).split(", ")}
    assert named == _mesh(_json())
    assert "micro_batch 4" in line and "remat_policy full" in line
