"""Megatron-LM SC21's rows as 2021's Megatron-LM ran them (sc21sp108, issue 29, findings 420): no sequence
parallelism, and the TP input-gradient all-reduce synchronous.

Before NVIDIA/Megatron-LM@6e1bde1e (2021-09-02, ``ColumnParallelLinearWithAsyncAllreduce``, ``all_reduce(...,
async_op=True)`` before the weight-gradient GEMM, off with ``--no-async-tensor-model-parallel-allreduce``), a
column-parallel linear's input gradient was all-reduced by ``_CopyToModelParallelRegion.backward`` -> ``_reduce``,
a plain ``torch.distributed.all_reduce`` (NVIDIA/Megatron-LM@a8d172b3, April 2021, ``megatron/mpu/mappings.py``
lines 22-32 and 76-89; ``megatron/model/language_model.py`` line 33 for the output layer): nothing hides it.
Sequence parallelism came in 2022 (Korthikanti et al., arXiv 2205.05198).
"""

import csv
import sys
from types import SimpleNamespace

import pytest

import topo
from conftest import ROOT
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import (GRAD_GATHER_PHASE, comm_windows, estimate_step, stage_tp_blocks, step_traffic,
                                tp_exposed_s, tp_grad_allreduce_phase)

sys.path.insert(0, str(ROOT / "benchmarks"))
from run_recipe_columns import RunColumnError, paper_column_kw  # noqa: E402

M = "megatron-gpt-18b"


def _lay(**kw):
    """A no-SP TP8 layout as SC21's 18B row (Table 1: TP8, DP32 there; 4 replicas here)."""
    return make_layout(tp=8, dp=4, global_batch=64, seq_len=2048, sequence_parallel=False, flash_attention=False,
                       recompute="full", dp_sharding="none", overlap_dp=False, **kw)


def _block_all_reduce(lay):
    m = load_model(M)
    return [it for it in step_traffic(m, lay) if it["dim"] == "tp" and it["collective"] == "all_reduce"
            and it["phase"] in ("backward", GRAD_GATHER_PHASE)]


def test_the_backward_all_reduce_hides_beside_its_own_wgrad_gemm_only_when_asynchronous():
    """Closed form on the items :func:`step_traffic` gives: a block's input-gradient all-reduce of ``c`` = 3 ms a
    call beside a column-parallel wgrad GEMM of ``g`` = 5 ms exposes ``max(0, c - g)`` = 0 asynchronously and
    ``calls x c`` whole when synchronous; the same calls and bytes either way."""
    m = load_model(M)
    on, off = _lay(), _lay(async_tp_grad_allreduce=False)
    (a,), (b,) = _block_all_reduce(on), _block_all_reduce(off)
    assert a["phase"] == "backward" and a["pair"] == "ag_wgrad"
    assert b["phase"] == GRAD_GATHER_PHASE and "pair" not in b
    assert (a["calls"], a["size_bytes"]) == (b["calls"], b["size_bytes"])
    # the 18B model's 40 layers, 2 TP blocks each (attention, MLP), 16 micro-batches of 1: 1280 calls
    assert a["calls"] == 40 * 2 * 16
    blocks = stage_tp_blocks(m, on)
    sc = SimpleNamespace(tp_pairs={"ag_wgrad": [(5e-3, blocks)]}, wgrad_s=1.0, microbatch_s=10.0)
    for lay, item, want in ((on, a, 0.0), (off, b, a["calls"] * 3e-3)):
        windows = comm_windows(lay, sc, ring=False, tp_hidden=False)
        assert tp_exposed_s(item, 3e-3, sc, blocks, windows, lay, ring=False, tp_hidden=False) == pytest.approx(want)


def test_the_output_layers_all_reduce_blocks_too():
    """The output layer's input gradient (``parallel_lm_logits``' ``copy_to_tensor_model_parallel_region``, the
    same synchronous ``_reduce``): ``head_backward`` (blocking) in place of ``head_wgrad`` (beside its own GEMM)."""
    m = load_model(M)
    for lay, phase, paired in ((_lay(), "head_wgrad", True), (_lay(async_tp_grad_allreduce=False), "head_backward",
                                                                False)):
        (it,) = [it for it in step_traffic(m, lay) if it.get("what") == "head: output layer input gradient"]
        assert it["phase"] == phase and ("pair" in it) == paired
    assert tp_grad_allreduce_phase(_lay(), "backward") == "backward"
    assert tp_grad_allreduce_phase(_lay(async_tp_grad_allreduce=False), "backward") == GRAD_GATHER_PHASE


def test_the_step_exposes_the_synchronous_all_reduce_whole():
    """On DGX A100 (no contention): with the field false the backward all-reduces' exposed seconds are their
    seconds, and the step grows by what the asynchronous ones hid; their seconds are the same."""
    fab = topo.build_fabric(topo.load_spec("dgx-a100-superpod"))
    m = load_model(M)
    res = {a: estimate_step(fab, m, _lay(async_tp_grad_allreduce=a), contention=False) for a in (True, False)}
    back = {a: [c for c in r.comm if c.dim == "tp" and c.collective == "all_reduce" and c.phase == "backward"]
            for a, r in res.items()}
    assert [c.time_s for c in back[True]] == pytest.approx([c.time_s for c in back[False]])
    assert all(c.exposed_s == pytest.approx(c.time_s) for c in back[False])
    hidden = sum(c.time_s - c.exposed_s for c in back[True])
    assert hidden > 0
    assert res[False].breakdown_s["tp"] - res[True].breakdown_s["tp"] == pytest.approx(hidden, rel=1e-6)


def test_with_sequence_parallelism_the_field_is_not_read():
    """Sequence parallelism reduce-scatters instead (Megatron-LM's own async path): no all-reduce to change."""
    m = load_model(M)
    sp = dict(tp=8, dp=4, global_batch=64, seq_len=2048)
    a = step_traffic(m, make_layout(**sp))
    b = step_traffic(m, make_layout(**sp, async_tp_grad_allreduce=False))
    assert a == b


def test_a_bad_value_is_refused():
    with pytest.raises(TopoError) as e:
        _lay(async_tp_grad_allreduce="no")
    assert str(e.value) == "layout: async_tp_grad_allreduce: must be true or false, got 'no'"
    with pytest.raises(RunColumnError) as e:
        paper_column_kw({"run_id": "megatron_18b", "async_tp_grad_allreduce": "false"}, "training_runs.csv")
    assert str(e.value) == ("training_runs.csv: run megatron_18b: async_tp_grad_allreduce = 'false'; "
                            "allowed: one of 0, 1, or empty")


def test_the_sc21_rows_run_without_sequence_parallelism_and_synchronously():
    """training_runs.csv's megatron_ rows say 0 and 0 (their notes give the source), the Llama 3 rows the default;
    the benchmark's layouts hold them."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from training_accuracy import _paper_setups
    with open(ROOT / "data" / "reference" / "training_runs.csv", newline="") as f:
        rows = {r["run_id"]: r for r in csv.DictReader(f)}
    for rid, r in rows.items():
        sc21 = rid.startswith("megatron_")
        assert (r["sequence_parallel"], r["async_tp_grad_allreduce"]) == (("0", "0") if sc21 else ("", ""))
        assert not sc21 or "_CopyToModelParallelRegion" in r["note"]
    for s in _paper_setups():
        sc21 = s["run"].startswith("megatron_")
        assert (s["lay"].sequence_parallel, s["lay"].async_tp_grad_allreduce) == ((False, False) if sc21
                                                                                  else (True, True))
