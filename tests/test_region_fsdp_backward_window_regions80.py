"""regions80 (section 374, item 2): FSDP's crossing in every micro-batch's backward.

PyTorch FSDP gathers each unit before its backward (with ``reshard_after_forward``) and reduce-scatters its
gradients after it, every micro-batch outside ``no_sync`` (pytorch/pytorch@3ade90a6aaa939cd6238e314c321b9f920db1471
torch/distributed/fsdp/_runtime_utils.py ``_pre_backward_hook``, ``_post_backward_hook``): the one-site step counts
them ``m x calls`` (``step.step_traffic``). Their crossing of the sites runs in the same backwards, so its window is
every micro-batch's backward (``BACKWARD_SHARE`` of the whole compute) less the in-site reduce-scatters and backward
gathers, not the last micro-batch's alone; the distributed optimizer (ZeRO-1) keeps the last backward's (its buckets
reduce once, after the last micro-batch's backward).

Closed form (Llama 3 8B, TP 8, dp 4 over two DGX H100 SUs 40 km apart on one 800 Gb/s wave, micro-batch 8, ``m``
micro-batches): ``w = 2/3 x compute x (m if FSDP else 1) / m - (in-site DP seconds but the forward gathers)``; with
the hierarchical form the step exposes ``D - w`` plus the logged loss's crossing.
"""

import pytest

from small_regions import loss_crossing_s, region_file, spy_dp_crossing, two_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import dp_passes, dp_window_s, estimate_across_sites
from topo.training.parallel import make_layout

MODEL = load_model("llama3-8b")


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    text = two_sites("bw80", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")
    return build_region(region_file(tmp_path_factory, text, "bw80"))


def _run(region, monkeypatch, sharding: str, batch: int):
    seen = spy_dp_crossing(monkeypatch)
    lay = make_layout(tp=8, dp=4, global_batch=batch, micro_batch=8, seq_len=4096, dp_sharding=sharding)
    return estimate_across_sites(region, MODEL, lay), seen


def _in_site_rest_s(one, lay) -> float:
    """The in-site DP seconds but the gathers that run in a forward (half of FSDP's, with two passes; all of the
    distributed optimizer's)."""
    dp = [c for c in one.comm if c.dim == "dp"]
    gather = sum(c.time_s for c in dp if c.collective == "all_gather")
    return sum(c.time_s for c in dp) - (gather / 2 if lay.zero_stage >= 3 else gather)


@pytest.mark.parametrize("sharding, batch, passes", [("fsdp", 64, 2), ("fsdp", 128, 4), ("zero1", 64, 1),
                                                     ("zero1", 128, 1)])
def test_the_backward_window_is_every_micro_batch_s_for_fsdp(region, monkeypatch, sharding, batch, passes):
    """FSDP's window is all ``m`` backwards less the in-site backward collectives; ZeRO-1's the last one's."""
    _, seen = _run(region, monkeypatch, sharding, batch)
    one, lay = seen["one"], seen["lay"]
    m = lay.microbatches
    assert m == batch // 64 * 2 and dp_passes(lay) == passes
    expect = 2 / 3 * one.breakdown_s["compute"] * passes / m - _in_site_rest_s(one, lay)
    assert expect > 0
    assert dp_window_s(one, lay) == pytest.approx(expect, rel=1e-12)


@pytest.mark.parametrize("batch", [64, 128])
def test_fsdp_exposes_the_phase_beyond_every_backward(region, monkeypatch, batch):
    """The hierarchical form's phase (no gather phase: the parameters gathered inside each site) exposes what
    outlasts all the backwards' window, and the logged loss's crossing."""
    job, seen = _run(region, monkeypatch, "fsdp", batch)
    one, lay, cross = seen["one"], seen["lay"], seen["cross"]
    assert cross.name == "hierarchical" and cross.gather_phase.time_s == 0.0
    w = 2 / 3 * one.breakdown_s["compute"] - _in_site_rest_s(one, lay)
    assert 0 < w < cross.phase.time_s
    assert job.strategies[0].exposed_s == pytest.approx(cross.phase.time_s - w + loss_crossing_s(region, job),
                                                        rel=1e-9)
