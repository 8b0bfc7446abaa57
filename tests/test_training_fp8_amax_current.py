"""Per-tensor current FP8 scaling's amax all-reduce under sequence parallelism (rev57a): Transformer Engine gives a
column-parallel layer's input quantizer and a row-parallel layer's output-gradient quantizer the TP group as their
``amax_reduction_group`` when the module runs sequence parallel (NVIDIA/TransformerEngine v2.2
``transformer_engine/pytorch/module/linear.py`` lines 1242-1266, ``layernorm_linear.py`` 1441-1448,
``layernorm_mlp.py`` 1623-1653), and each such quantisation all-reduces its one FP32 amax and waits for it
(``csrc/extensions/cast.cpp`` lines 54-62). Megatron-Core's QKV and fc1 are column-parallel, the output projection
and fc2 row-parallel (``megatron/core/models/gpt/gpt_layer_specs.py`` at core_v0.14.0): one all-reduce forward and
one backward per TP block and micro-batch."""

import pytest

import topo
from topo.training.comm import CommEngine
from topo.training.fp8_amax import (AMAX_PHASE, AMAX_SP_GROUP, fp8_amax_current_table, fp8_amax_table,
                                    sp_amax_reduced)
from topo.training.mapping import map_layout
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step, sp_quantisations

_CURRENT = dict(precision="fp8", fp8_recipe="current")


@pytest.fixture(scope="module")
def fab():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))


def test_the_table_is_te_s_one_amax_and_no_kernel_beside():
    """One FP32 amax per quantisation (cast.cpp: the quantizer's ``amax`` tensor); the amax, scale and cast kernels
    are the quantisation's own, so none beside the all-reduce."""
    t = fp8_amax_current_table()
    assert (t["amaxes_per_quantisation"], t["kernels_beside_reduction"], fp8_amax_table()["amax_bytes"]) == (1, 0, 4)
    assert t["status"] == "published" and "TransformerEngine" in t["source"]


def test_where_te_runs_it():
    """Current scaling (or the unset recipe with current scaling's amax pass), sequence parallelism and TP > 1;
    not under delayed scaling (its own buffer reduction), block-wise scaling, BF16, TP 1, without SP, or with
    fp8_amax_reduction false (a JAX mesh's: Flax, not Transformer Engine)."""
    on = make_layout(tp=4, dp=2, global_batch=8, **_CURRENT)
    assert sp_amax_reduced(on)
    assert sp_amax_reduced(make_layout(tp=4, dp=2, global_batch=8, precision="fp8", fp8_amax_pass=True))
    for upd in ({"sequence_parallel": False}, {"tp": 1, "dp": 8}, {"fp8_amax_reduction": False},
                {"fp8_recipe": "delayed"}, {"fp8_recipe": "blockwise"}, {"fp8_recipe": None},
                {"precision": "bf16", "fp8_recipe": None}):
        assert not sp_amax_reduced(on.model_copy(update=upd)), upd


def test_calls_per_step_by_closed_form():
    """Llama 3 8B (32 layers, each an attention and an MLP block) at TP4 PP2, 16 micro-batches: a stage holds 16
    layers, 32 TP blocks, so 16 x 32 = 512 quantisations each way; full recomputation of every layer runs the
    forward's again (1,024 forward); none without SP or at TP 1."""
    m = load_model("llama3-8b")
    lay = make_layout(tp=4, pp=2, dp=4, global_batch=64, **_CURRENT)
    assert lay.microbatches == 16
    assert sp_quantisations(m, lay) == (512.0, 512.0)
    assert sp_quantisations(m, lay.model_copy(update={"recompute": "full"})) == (1024.0, 512.0)
    assert sp_quantisations(m, lay.model_copy(update={"sequence_parallel": False})) == (0.0, 0.0)
    assert sp_quantisations(m, make_layout(tp=1, pp=2, dp=16, global_batch=64, **_CURRENT)) == (0.0, 0.0)


def test_the_step_exposes_them_on_the_fp8_amax_line(fab):
    """The same layout on DGX H100 (TP4 inside a node): the fp8_amax line is 1,024 all-reduces of 4 bytes over the
    TP groups, alone on the fabric, and no kernel gap; the comm table shows them under fp8_amax with the TP group;
    the bubble grows by its share, (p - 1) / (v m) = 1 / 16 of it (they run inside each micro-batch's forward and
    backward); tp's and the compute's lines do not change (dp's may: a longer last backward hides more of it)."""
    m = load_model("llama3-8b")
    lay = make_layout(tp=4, pp=2, dp=4, global_batch=64, **_CURRENT)
    on = estimate_step(fab, m, lay, contention=False)
    off = estimate_step(fab, m, lay.model_copy(update={"fp8_amax_reduction": False}), contention=False)
    groups = map_layout(lay, fab.spec.gpus_per_domain, fab.layout.num_gpus).groups(AMAX_SP_GROUP)
    want = 1024 * CommEngine(fab).time("all_reduce", groups, 4.0).time_s
    assert on.breakdown_s[AMAX_PHASE] == pytest.approx(want, rel=1e-9)
    (got,) = [c for c in on.comm if c.phase == AMAX_PHASE]
    assert (got.dim, got.group_size, got.size_bytes, got.calls_per_step) == (AMAX_PHASE, 4, 4.0, 1024.0)
    assert on.breakdown_s["tp"] == pytest.approx(off.breakdown_s["tp"], rel=1e-9)
    assert on.breakdown_s["compute"] == off.breakdown_s["compute"]
    assert on.breakdown_s["bubble"] - off.breakdown_s["bubble"] == pytest.approx(want / 16, rel=1e-6)
    assert off.breakdown_s[AMAX_PHASE] == 0.0 and not [c for c in off.comm if c.phase == AMAX_PHASE]
    assert on.layout["fp8_amax_reduction"] is True and on.chosen_by["fp8_amax_reduction"] == "default"
