"""regions76 (section 357, item 2): the flat cross-DC ring's parameter gather in the next step's forward.

Megatron-Core's distributed optimizer all-gathers the updated parameters after the optimizer's step; with
``overlap_param_gather`` the gather is dispatched bucket by bucket ahead of the next step's forward (the first bucket
cannot hide), not in the last backward's window the gradients' reduce-scatter takes
(NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/distributed/param_and_grad_buffer.py lines
383-524, ``start_param_sync`` / ``start_grad_sync``). The one-site step hides its own gather that way
(``step.behind_window_s``); NCCL's flat cross-DC ring (one optimizer instance over the job) carries the gather across
the sites too, so its crossing takes the forward's window and the gradients' the backward's.

Closed form (Llama 3 8B, TP 8, dp 4 over two DGX H100 SUs 40 km apart on one 800 Gb/s wave, micro-batch 8, global
batch 64: the DCI binds and both parts outlast their windows): the flat ring's ZeRO-1 phase ``D`` carries ``0.75 (G +
G/2)`` across the boundary (``G`` the FP32 gradients, ``G/2`` the BF16 parameters), so the gather is 1/3 of its
bandwidth time and half of its ``2(D-1) = 6`` hops; the step exposes ``(D_grad - w) + (D_gather - w_f) + 2 L`` (the
gradient norm's crossing) ``+ 2 L`` (the logged loss's, item 3) less half the share's optimizer step (regions79: the
flat ring's one instance shards the state over both sites), ``w`` the window the in-site reduction leaves in the
last backward and ``w_f`` the one the in-site gather leaves in the first forward: ``w_f`` less than the whole phase
behind the backward alone.
"""

import pytest

from small_regions import loss_crossing_s, region_file, spy_dp_crossing, two_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import dp_gather_window_s, dp_window_s, estimate_across_sites
from topo.training.parallel import make_layout

FLAT = '[nccl]\ndp_reduction = "flat_ring"\n'
MODEL = load_model("llama3-8b")


def _text(rate_Gbps: float) -> str:
    return (two_sites("ga76", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")
            .replace('"800 Gb/s"', f'"{rate_Gbps!r} Gb/s"'))


def _run(tmp_path_factory, monkeypatch, nccl: str, rate_Gbps: float = 800.0):
    seen = spy_dp_crossing(monkeypatch)
    region = build_region(region_file(tmp_path_factory, _text(rate_Gbps) + nccl, "ga76"))
    job = estimate_across_sites(region, MODEL, make_layout(tp=8, dp=4, global_batch=64, micro_batch=8, seq_len=4096))
    seen["loss_s"] = loss_crossing_s(region, job)  # the logged loss's all-reduce, exposed at pp 1
    return job, seen


def test_the_gather_takes_the_next_forwards_window(tmp_path_factory, monkeypatch):
    """The flat ring's gather is 1/3 of the bandwidth time and 3 of the 6 hops; the step exposes each part beyond
    its own window, ``w_f`` less than with the whole phase behind the last backward."""
    job, seen = _run(tmp_path_factory, monkeypatch, FLAT)
    cross, one, lay = seen["cross"], seen["one"], seen["lay"]
    ph, g = cross.phase, cross.gather_phase
    assert cross.name == "flat_ring" and cross.steps == 6 and cross.gather_steps == 3
    assert g.bandwidth_s == pytest.approx(ph.bandwidth_s / 3, rel=1e-6)
    assert g.latency_s == pytest.approx(ph.latency_s / 2, rel=1e-12)
    w, wf = dp_window_s(one, lay), dp_gather_window_s(one, lay)
    assert 0 < wf < g.time_s and 0 < w < ph.time_s - g.time_s  # both parts outlast their windows
    s = job.strategies[0]
    saved = one.breakdown_s["optimizer"] / 2  # regions79: the flat ring's optimizer steps half the site's state
    assert s.exposed_s == pytest.approx(ph.time_s - w - wf + cross.norm_s + seen["loss_s"] - saved, rel=1e-9)


def test_the_hierarchical_form_gathers_inside_the_sites(tmp_path_factory, monkeypatch):
    """The hierarchical form (one instance a site) gathers inside each site: no gather phase, the whole phase behind
    the last backward."""
    # regions82: set, auto takes the flat ring here (its step the shorter)
    job, seen = _run(tmp_path_factory, monkeypatch, '[nccl]\ndp_reduction = "hierarchical"\n')
    cross = seen["cross"]
    assert cross.name == "hierarchical" and cross.gather_phase.time_s == 0.0
    one, lay = seen["one"], seen["lay"]
    w = dp_window_s(one, lay)
    assert job.strategies[0].exposed_s == pytest.approx(cross.phase.time_s - w + seen["loss_s"], rel=1e-9)


def test_each_window_less_its_own_in_site_collective(tmp_path_factory, monkeypatch):
    """The last backward (2/3 of a micro-batch's compute) less the in-site reduce-scatter alone, the first forward
    (1/3) less the in-site gather alone: the gather no longer taken out of the backward's window."""
    _, seen = _run(tmp_path_factory, monkeypatch, "")
    one, lay = seen["one"], seen["lay"]
    per_mb = one.breakdown_s["compute"] / lay.microbatches
    dp = [c for c in one.comm if c.dim == "dp"]
    gather = sum(c.time_s for c in dp if c.collective == "all_gather")
    reduce = sum(c.time_s for c in dp if c.collective == "reduce_scatter")
    assert gather > 0 and reduce > 0 and len(dp) == 2
    assert dp_window_s(one, lay) == pytest.approx(2 / 3 * per_mb - reduce, rel=1e-12)
    assert dp_gather_window_s(one, lay) == pytest.approx(1 / 3 * per_mb - gather, rel=1e-12)


def test_the_need_for_95pct_counts_both_windows(tmp_path_factory, monkeypatch):
    """At the DCI the rule asks for (one wave of that rate), the step is one site's / 0.95: the budget gives the
    gather the forward's window as the step does."""
    job, _ = _run(tmp_path_factory, monkeypatch, FLAT)
    need = job.strategies[0].dci_Bps_for_95pct
    at, _ = _run(tmp_path_factory, monkeypatch, FLAT, need * 8 / 1e9)
    s = at.strategies[0]
    assert s.bottleneck.startswith("dci:")
    assert s.throughput_vs_one_site == pytest.approx(0.95, rel=1e-6)
