"""regions79 (section 373, item 1): FSDP's forward gathers under the flat cross-DC ring in the forwards' window.

FSDP unshards each unit before its forward and, with ``reshard_after_forward``, again before its backward
(pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471 torch/distributed/fsdp/_runtime_utils.py
``_pre_forward_unshard``, ``_pre_backward_hook``), every micro-batch. NCCL's flat cross-DC ring carries those
gathers across the sites too: the forward's run in the forwards, as the distributed optimizer's parameter gather
runs in the next step's first forward (regions76, Megatron-Core's ``overlap_param_gather``,
NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/distributed/param_and_grad_buffer.py
lines 383-524), so one rule (``step.forward_gather_share``) gives both their forward window.

Closed form (Llama 3 8B, TP 8, dp 4 FSDP over two DGX H100 SUs 40 km apart on one 800 Gb/s wave, micro-batch 8,
global batch 64, two micro-batches: the DCI binds and both parts outlast their windows): the flat ring carries
``0.75 (R + A)`` across the boundary, ``R`` the FP32 gradients' reduce-scatters (4 B a parameter a micro-batch),
``A`` the BF16 gathers (2 B a parameter a pass a micro-batch: two passes, or one with ``reshard_after_forward``
off). The forward's gathers are half of ``A`` (one of two passes), so ``2 / (4 + 4) = 1/4`` of the bandwidth time,
or all of it (``2 / (4 + 2) = 1/3``); half the ``2(D-1) = 6`` hops either way. Their window is every micro-batch's
forward (1/3 of the compute) less the in-site forward gathers; the backward's window (every micro-batch's since
regions80, 2/3 of the compute) less the rest of the in-site DP seconds. The step exposes ``(D_rest - w) +
(D_fwd - w_f) + 2 L`` (the gradient norm's crossing) ``+ 2 L`` (the logged loss's).
"""

import pytest

from small_regions import loss_crossing_s, region_file, spy_dp_crossing, two_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import dp_gather_window_s, dp_window_s, estimate_across_sites
from topo.training.parallel import make_layout

FLAT = '[nccl]\ndp_reduction = "flat_ring"\n'
MODEL = load_model("llama3-8b")


def _text() -> str:
    return two_sites("fs79", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")


def _run(tmp_path_factory, monkeypatch, nccl: str, reshard: bool = True):
    seen = spy_dp_crossing(monkeypatch)
    region = build_region(region_file(tmp_path_factory, _text() + nccl, "fs79"))
    lay = make_layout(tp=8, dp=4, global_batch=64, micro_batch=8, seq_len=4096, dp_sharding="fsdp",
                      fsdp_reshard_after_forward=reshard)
    job = estimate_across_sites(region, MODEL, lay)
    seen["loss_s"] = loss_crossing_s(region, job)  # the logged loss's all-reduce, exposed at pp 1
    return job, seen


@pytest.mark.parametrize("reshard, share", [(True, 1 / 4), (False, 1 / 3)])
def test_fsdp_forward_gathers_take_the_forwards_window(tmp_path_factory, monkeypatch, reshard, share):
    """The forward's gathers are ``share`` of the flat ring's bandwidth time and 3 of its 6 hops; the step exposes
    each part beyond its own window."""
    job, seen = _run(tmp_path_factory, monkeypatch, FLAT, reshard)
    cross, one, lay = seen["cross"], seen["one"], seen["lay"]
    ph, g = cross.phase, cross.gather_phase
    assert cross.name == "flat_ring" and cross.steps == 6 and cross.gather_steps == 3
    assert g.bandwidth_s == pytest.approx(share * ph.bandwidth_s, rel=1e-6)
    assert g.latency_s == pytest.approx(ph.latency_s / 2, rel=1e-12)
    w, wf = dp_window_s(one, lay), dp_gather_window_s(one, lay)
    assert 0 < wf < g.time_s and 0 < w < ph.time_s - g.time_s  # both parts outlast their windows
    s = job.strategies[0]
    assert s.exposed_s == pytest.approx(ph.time_s - w - wf + cross.norm_s + seen["loss_s"] - _saved_s(one, lay),
                                        rel=1e-9)


def _saved_s(one, lay) -> float:
    """What the flat ring's optimizer step saves (item 2, its own test): the state over twice the ranks."""
    return one.breakdown_s["optimizer"] / 2 if lay.zero_stage >= 1 else 0.0


@pytest.mark.parametrize("reshard", [True, False])
def test_each_window_less_its_own_in_site_gathers(tmp_path_factory, monkeypatch, reshard):
    """Every micro-batch's forward (1/3 of the compute) less the in-site forward gathers (half the in-site gathers
    with two passes, all with one); every micro-batch's backward (2/3 of the compute, regions80: FSDP reduces
    each micro-batch) less the reduce-scatters and the backward's gathers."""
    _, seen = _run(tmp_path_factory, monkeypatch, "", reshard)
    one, lay = seen["one"], seen["lay"]
    compute = one.breakdown_s["compute"]
    dp = [c for c in one.comm if c.dim == "dp"]
    gather = sum(c.time_s for c in dp if c.collective == "all_gather")
    reduce = sum(c.time_s for c in dp if c.collective == "reduce_scatter")
    assert gather > 0 and reduce > 0 and len(dp) == 2 and lay.microbatches == 2
    fwd = gather / 2 if reshard else gather
    assert dp_gather_window_s(one, lay) == pytest.approx(compute / 3 - fwd, rel=1e-12)
    assert dp_window_s(one, lay) == pytest.approx(2 / 3 * compute - (reduce + gather - fwd), rel=1e-12)


def test_the_hierarchical_form_gathers_inside_the_sites(tmp_path_factory, monkeypatch):
    """The hierarchical form gathers inside each site: no gather phase, the whole phase behind the last backward."""
    job, seen = _run(tmp_path_factory, monkeypatch, "")
    cross = seen["cross"]
    assert cross.name == "hierarchical" and cross.gather_phase.time_s == 0.0
    w = dp_window_s(seen["one"], seen["lay"])
    assert job.strategies[0].exposed_s == pytest.approx(cross.phase.time_s - w + seen["loss_s"], rel=1e-9)
