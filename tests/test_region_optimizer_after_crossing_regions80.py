"""regions80 (section 374, item 1): the optimizer steps after the gradients' reduction across the sites.

Megatron-Core's schedule ends the last backward with ``finalize_model_grads`` (``finish_grad_sync``: the buckets'
reductions waited for), and ``train_step`` runs ``optimizer.step()`` after it (NVIDIA/Megatron-LM@d98e8a64
megatron/core/distributed/finalize_model_grads.py, megatron/training/training.py ``train_step``): the cross-site
phase starts when the last backward's in-site reduction ends, and each site's optimizer runs after that phase.

In lockstep, site ``i`` starts step ``n + 1`` when the phase of step ``n`` ends (``P_n``) and its optimizer
(``o_i``) has run; it is ready at ``P_n + o_i + B_i - w_i`` (``B_i = T_i - o_i`` its forwards and backwards), so
``P_{n+1} - P_n = max_i (T_i + max(e, D - w_i))``: the step the model prints, whichever end of the step the
optimizer is drawn at (``SiteReady``'s readiness counted from the previous phase's end). What the order changes is
where the step's time goes: the timeline's optimizer segment now follows the exposed part of the crossing, and
the crossing's hidden part ends where the last backward does (``T_1 - o``), not at the one-site step's end.
"""

import pytest

from small_regions import region_file, two_sites
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

MODEL = load_model("llama3-8b")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """ZeRO-1 over two SUs on one 800 Gb/s wave (the crossing exposes some 100 ms, section 373's figures)."""
    text = two_sites("oa80", "two SUs", "dgx-h100-superpod", 1).replace("waves = 16", "waves = 1")
    region = build_region(region_file(tmp_path_factory, text, "oa80"))
    lay = make_layout(tp=8, dp=4, global_batch=64, micro_batch=8, seq_len=4096, dp_sharding="zero1")
    return estimate_across_sites(region, MODEL, lay)


def _lane(job, lane):
    return [x for x in job.timeline if x["lane"] == lane]


def test_the_optimizer_follows_the_crossing(job):
    """The optimizer's segment starts where the crossing's exposed part ends and ends the step; it keeps its
    length (the share's optimizer line)."""
    s = job.strategies[0]
    o = job.one_site["breakdown_s"]["optimizer"]
    (opt,) = _lane(job, "optimizer")
    exposed = [x for x in _lane(job, "dci") if x["exposed"]]
    assert o > 0 and s.step_time_s - job.one_site_step_s > o  # the exposed part outlasts the optimizer
    assert opt["end_s"] == pytest.approx(s.step_time_s, rel=1e-12)
    assert opt["end_s"] - opt["start_s"] == pytest.approx(o, rel=1e-12)
    assert exposed and exposed[-1]["end_s"] == pytest.approx(opt["start_s"], rel=1e-12)


def test_the_crossing_hides_behind_the_backward_not_the_optimizer(job):
    """The hidden part ends, and the exposed part starts, at the last backward's end (one site's step less its
    optimizer step): ``[T_1 - o - hidden, T_1 - o]``, then ``[T_1 - o, T - o]``."""
    s = job.strategies[0]
    T1, o = job.one_site_step_s, job.one_site["breakdown_s"]["optimizer"]
    hidden = [x for x in _lane(job, "dci") if not x["exposed"]]
    exposed = [x for x in _lane(job, "dci") if x["exposed"]]
    assert hidden[-1]["end_s"] == pytest.approx(T1 - o, rel=1e-12)
    assert exposed[0]["start_s"] == pytest.approx(T1 - o, rel=1e-12)
    assert exposed[0]["end_s"] - exposed[0]["start_s"] == pytest.approx(s.step_time_s - T1, rel=1e-12)
    compute = max(x["end_s"] for x in _lane(job, "compute"))
    assert compute <= T1 - o + 1e-12  # nothing of one site's forwards and backwards moved
