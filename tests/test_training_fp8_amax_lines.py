"""Where the ``fp8_amax`` line shows (rev57a, section 190/195/198's leftovers): the search table's "largest
overhead" cell names it with its closed-form seconds, and the step's breakdown shows the line only where Transformer
Engine runs an amax reduction: delayed scaling even on a one-rank group (TE@bee4649c ``fp8.py`` lines 334-385: the
concatenation and fused update run, the all-reduce is skipped), current scaling under sequence parallelism with
TP > 1 (TE v2.2 ``module/linear.py`` lines 1242-1266), and not without sequence parallelism, under a JAX mesh (Flax's
FP8 ops) or in BF16."""

import json

import pytest

from conftest import run_cli
from topo.training.fp8_amax import fp8_amax_table
from topo.training.gpus import gpu_compute

ONE_GPU = ["train", "dgx-h100-superpod", "--model", "megatron-gpt-1.7b", "--gpus", "1", "--global-batch", "8",
           "--precision", "fp8", "--no-contention"]
TP8 = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--global-batch", "16",
       "--no-contention"]


def _amax_rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.split()[:1] == ["fp8_amax"]]


def test_the_search_names_the_amax_line_as_the_largest_overhead_on_one_gpu():
    """One GPU, delayed scaling, micro-batch 4 of 8 (2 micro-batches): no collective at all, so the largest overhead
    is the amax line, 2 ways x 2 micro-batches x 2 kernels (torch.cat, the fused update) x the launch gap; with
    fp8_amax_reduction false no line is priced and the cell names something else."""
    args = [*ONE_GPU, "--micro-batch", "4", "--search", "--top", "1"]
    text = run_cli(*args, "--layout", "fp8_recipe=delayed", check=True).stdout
    (row,) = [ln for ln in text.splitlines() if ln.startswith("1 ")]
    want_s = 2 * 2 * fp8_amax_table()["kernels_per_reduction"] * gpu_compute("H100").kernels.launch_gpu_s
    value, unit = row.split("fp8_amax ")[1].split()[:2]
    assert float(value) * {"us": 1e-6, "ms": 1e-3}[unit] == pytest.approx(want_s, rel=5e-3)
    off = run_cli(*args, "--layout", "fp8_recipe=delayed,fp8_amax_reduction=false", check=True).stdout
    (row,) = [ln for ln in off.splitlines() if ln.startswith("1 ")]
    assert "fp8_amax" not in row


@pytest.mark.parametrize("args, layout, shown", [
    (ONE_GPU, "fp8_recipe=delayed", True),  # a one-rank group: kernels, no collective
    ([*TP8, "--precision", "fp8"], "fp8_recipe=current", True),  # current scaling, SP, TP8
    ([*TP8, "--precision", "fp8"], "fp8_recipe=current,sequence_parallel=false", False),
    ([*TP8, "--precision", "fp8"], "fp8_recipe=current,fp8_amax_reduction=false", False),
    (TP8, "", False),  # BF16
])
def test_the_breakdown_shows_the_line_only_where_te_reduces(args, layout, shown):
    argv = [*args, *(["--layout", layout] if layout else [])]
    text = run_cli(*argv, check=True).stdout
    js = json.loads(run_cli(*argv, "--json", check=True).stdout)
    assert bool(_amax_rows(text)) == shown and (js["breakdown_s"]["fp8_amax"] > 0) == shown
    comms = [c for c in js["comm"] if c["phase"] == "fp8_amax"]
    if args is ONE_GPU:
        assert comms == []  # TE skips a one-rank group's all-reduce
    elif shown:
        assert [(c["group_size"], c["size_bytes"]) for c in comms] == [(8, 4.0)]


def test_a_jax_mesh_shows_no_amax_line():
    """--jax-mesh sets fp8_amax_reduction false (Flax's FP8 ops, jax_mesh.MAXTEXT_FP8_AMAX): no line, no comm."""
    mesh = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--jax-mesh", "ici_fsdp=8",
            "--global-batch", "16", "--precision", "fp8", "--layout", "fp8_recipe=delayed", "--no-contention"]
    assert not _amax_rows(run_cli(*mesh, check=True).stdout)
    js = json.loads(run_cli(*mesh, "--json", check=True).stdout)
    assert js["breakdown_s"]["fp8_amax"] == 0.0 and not [c for c in js["comm"] if c["phase"] == "fp8_amax"]
