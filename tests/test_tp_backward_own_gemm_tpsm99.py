"""A layer's backward TP exchanges without userbuffers hide behind its own GEMM, and their NCCL kernels' SMs cost
that GEMM (tpsm99, issue 29).

Transformer Engine's column-parallel layer launches its input's second all-gather ``async_op=True`` before its
dgrad GEMM and waits for it before its wgrad GEMM, and launches its input gradient's reduce-scatter (all-reduce
without sequence parallelism) after the dgrad GEMM and waits for it after the wgrad GEMM
(NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/layernorm_linear.py lines 787-790, 851-876,
904-910, 985-987, 1050-1083, 1125-1130; linear.py 993-996, 1086, 1126-1132, 1172-1174, 1285, 1347-1352): each
hides behind that layer's own GEMM, and its NCCL kernels hold SMs and HBM bandwidth while they run, as the hidden
DP collectives' do (topo.training.comm_sms).
"""

from types import SimpleNamespace

import pytest

import topo
from topo.training.comm import CommEngine
from topo.training.comm_sms import nccl_sms, reduced_gpu, sm_loss_s
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import rank_computes, stage_compute
from topo.training.parallel import make_layout
from topo.training.result import DimensionComm
from topo.training.step import (GRAD_GATHER_PHASE, _add_sm_losses, comm_windows, estimate_step, exposed_comm_s,
                                stage_tp_blocks, step_traffic, tp_exposed_s)


@pytest.fixture(scope="module")
def fab():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _sc(pairs: dict, wgrad_s: float = 1.0):
    return SimpleNamespace(tp_pairs=pairs, wgrad_s=wgrad_s, microbatch_s=10.0)


def test_a_layers_exchange_that_outlasts_its_own_gemm_exposes_the_excess():
    """Two block kinds of 2 blocks a micro-batch each, their column-parallel wgrad GEMMs 1 ms and 5 ms; a 3 ms
    reduce-scatter a block, 2 micro-batches (8 calls): the short layer exposes 2 ms a call, the long one none,
    ``8 x (2 x 2 ms) / 4 = 8 ms``; the stage's weight-gradient GEMMs pooled (here 2 s) would have hidden all
    24 ms."""
    lay = make_layout(tp=4, sequence_parallel=True, global_batch=2, micro_batch=1)
    sc = _sc({"ag_wgrad": [(1e-3, 2), (5e-3, 2)]})
    item = {"dim": "tp", "collective": "reduce_scatter", "phase": "backward", "pair": "ag_wgrad", "calls": 8.0}
    windows = comm_windows(lay, sc, ring=False, tp_hidden=False)
    assert tp_exposed_s(item, 3e-3, sc, 4, windows, lay, ring=False, tp_hidden=False) == pytest.approx(8e-3)
    assert exposed_comm_s("tp", "backward", 8 * 3e-3, {"tp_backward": 2.0}, lay) == 0.0  # the pooled rule
    # the pool left to the unpaired items: the weight-gradient GEMMs less those the layers' exchanges hold
    assert windows["tp_backward"] == pytest.approx(lay.microbatches * (1.0 - (2e-3 + 10e-3)))
    # the output gradient's gather blocks either way; with TP overlap (no userbuffers) the micro-batch's window
    assert tp_exposed_s({**item, "phase": GRAD_GATHER_PHASE}, 3e-3, sc, 4, windows, lay, ring=False,
                        tp_hidden=False) == pytest.approx(24e-3)
    assert tp_exposed_s(item, 3e-3, sc, 4, {"tp": 1.0}, lay, ring=False, tp_hidden=True) == 0.0


def test_without_sequence_parallelism_the_input_gradients_all_reduce_pairs_with_its_wgrad_gemm():
    """Without sequence parallelism the column-parallel layer's input gradient is all-reduced
    ``async_op=True`` beside its wgrad GEMM (layernorm_linear.py line 910): its item names that pair."""
    m = load_model("llama3-70b")
    lay = make_layout(tp=8, pp=4, dp=2, global_batch=16, seq_len=4096, sequence_parallel=False)
    (item,) = [it for it in step_traffic(m, lay) if it["dim"] == "tp" and it["phase"] == "backward"]
    assert item["collective"] == "all_reduce" and item["pair"] == "ag_wgrad"


def test_a_hidden_tp_exchange_costs_its_gemm_the_sms_nccl_holds(fab):
    """A hidden backward TP reduce-scatter of 0.6 s (1 s, 0.4 exposed) beside its layers' wgrad GEMMs: the step
    adds ``sm_loss_s(0.6, G, G')``, ``G`` those GEMMs' seconds on the whole H100 and ``G'`` on the 16 SMs fewer
    NCCL's 16 channels leave (its bytes a second too few to take 1% of HBM); none with userbuffers (their GEMMs
    run on the SMs the communicator leaves already, tp_overlap.pass_margins) or without the items."""
    m = load_model("llama3-8b")
    lay = make_layout(tp=4, dp=2, global_batch=8, seq_len=4096)
    gpu, engine = gpu_compute("H100"), CommEngine(fab)
    (sc,) = rank_computes(m, lay, gpu)
    (slow,) = rank_computes(m, lay, reduced_gpu(gpu, nccl_sms(16)))

    def charged(lay, items):
        comms = [DimensionComm(dim="tp", collective="reduce_scatter", size_bytes=1e6, calls_per_step=1, time_s=1.0,
                               exposed_s=0.4, algorithm="ring", level=None, link=None, utilization=None,
                               num_groups=2, group_size=4, domains_per_group=1, phase="backward")]
        exposed = {k: 0.0 for k in ("tp", "cp", "pp", "dp", "ep")}
        _add_sm_losses(m, lay, gpu, sc, 0.0, engine, comms, exposed, None, items)
        assert comms[0].exposed_s == pytest.approx(0.4 + exposed["tp"])
        return exposed["tp"]

    item = {"dim": "tp", "phase": "backward", "pair": "ag_wgrad"}
    g, g_slow = (sum(x * n for x, n in r.tp_pairs["ag_wgrad"]) for r in (sc, slow))
    assert sm_loss_s(0.6, g, g_slow) > 0
    assert charged(lay, [item]) == pytest.approx(sm_loss_s(0.6, g, g_slow), rel=1e-9)
    assert charged(lay, None) == 0.0
    assert charged(lay.model_copy(update={"overlap_tp": True}), [item]) == 0.0
    assert charged(lay, [{**item, "phase": GRAD_GATHER_PHASE}]) == 0.0  # a blocking one hides nothing


def test_the_search_bound_prices_each_layer_against_its_own_gemm_and_stays_below_the_step(fab):
    """The search's TP floor (each call at NVLink rate) by the same rule: at least the pooled floor, at most the
    step's exposed TP."""
    from topo.training.search import _comm_floor_s
    m = load_model("llama3-70b")
    lay = make_layout(tp=8, pp=4, dp=2, global_batch=16, seq_len=4096)
    sc = stage_compute(m, lay, gpu_compute("H100"))
    traffic = step_traffic(m, lay)
    own, _ = _comm_floor_s(fab.spec, lay, traffic, sc, tp_overlap=False, tp_blocks=stage_tp_blocks(m, lay))
    pooled, _ = _comm_floor_s(fab.spec, lay, traffic, sc, tp_overlap=False)
    assert pooled < own <= estimate_step(fab, m, lay, contention=False).breakdown_s["tp"]
