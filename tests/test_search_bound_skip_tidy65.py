"""rev64's Left (section 257): the search's refined bound before a layout's EP cover is routed, and
``--skip-domains`` entries that skip nothing.

The refinement reads TP on cover 0's compute (the longest host waits, so the widest windows: a cover only
shortens the waits). TP hides behind one window, the micro-batches' compute, so its routed exposure there is at
most the step's whether the cover is routed or not; before tidy65 it fell back to TP's bytes-at-NVLink floor
until the cover was routed. DP keeps the gate: it hides behind the forward's and the backward's windows apart
(``step._dp_windows``), which cover 0's waits can shift."""

import pytest

import topo
from conftest import run_cli
from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.mapping import default_placement, map_layout
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.search import _bound, _comm_floor_s, _keys, _Search
from topo.training.tp_overlap import tp_overlap_on
from topo.training.step import estimate_step, routed_ep_cover_s, step_traffic, traffic_stage


def test_the_refinement_counts_routed_tp_before_the_ep_cover_is_routed(monkeypatch):
    """Qwen3-30B-A3B on 64 H100, TP8 PP2 VPP2 DP4 EP4, full recompute, ZeRO-1, DeepEP. Its TP groups routed by a
    layout of the same shape at EP 2 (the EP exchange not yet): the refinement is at least the compute without
    waits, the step's own TP and EP's floor (1.653 s; with TP's floor, 1.422 s), and at most the step (3.940 s)."""
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    D = fabric.spec.gpus_per_domain

    def placed(ep):
        lay = make_layout(tp=8, pp=2, dp=4, ep=ep, vpp=2, global_batch=64, recompute="full", dp_sharding="zero1",
                          ep_dispatcher="deepep")
        return default_placement(lay, D, fabric.layout.num_gpus)[0]

    lay = placed(4)
    s = _Search(fabric, m, CommEngine(fabric), gpu, 5, dict(convention="6n", efficiency=None), None, None)
    keys = _keys(lay)
    bound, _ = s.bound_of(lay, keys)
    estimate_step(fabric, m, placed(2), engine=s.engine, check=False, contention=False)
    mapping = map_layout(lay, D, fabric.layout.num_gpus)
    assert routed_ep_cover_s(s.engine, m, lay, mapping) is None  # the gate's other side
    refined = s.refined(lay, bound, keys)
    r = estimate_step(fabric, m, lay, engine=s.engine, check=False, contention=False)
    _, sc, tp_floor, _, amax = s.bound_cache[keys[1]]
    wide = s.waited(lay, sc, keys[1], 0.0)
    ep_floor = _comm_floor_s(s.spec, lay, step_traffic(m, lay, traffic_stage(lay, sc)), wide,
                             mapping.members_in_domain("ep"), tp_overlap=tp_overlap_on(lay, m))[1]
    assert r.breakdown_s["tp"] > 4 * tp_floor  # the case: TP's floor far under its routed exposure
    # the routed TP term: the step's TP less what its hidden exchanges' SMs cost their GEMMs (step._add_sm_losses,
    # tpsm99: the refinement counts no SM charge)
    import topo.training.step as step_module
    monkeypatch.setattr(step_module, "sm_loss_s", lambda hidden_s, full_s, reduced_s: 0.0)
    routed_tp = estimate_step(fabric, m, lay, engine=s.engine, check=False, contention=False).breakdown_s["tp"]
    assert routed_tp < r.breakdown_s["tp"]
    assert _bound(lay, sc, routed_tp, ep_floor, amax_s=amax) <= refined <= r.step_time_s


@pytest.mark.parametrize("flags, line", [
    (["--skip-domains", "3,3"], "error: --skip-domains: 3,3: domain 3 listed more than once; allowed: each domain "
                                "index once"),
    (["--first-gpu", "16", "--skip-domains", "0,5"],
     "error: --skip-domains: 0,5: domain 0 is below the first GPU's (16 is in domain 2), so the job never reaches "
     "it; allowed: domain indices 2 to 127"),
])
def test_a_skip_that_skips_nothing_is_refused_in_one_line(flags, line):
    """dgx-h100-superpod: 128 nodes of 8 GPUs. A repeated index and one below the first GPU's domain were no-ops."""
    out = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--gpus", "64",
                  "--global-batch", "64", *flags)
    assert out.returncode == 2 and out.stderr.strip() == line
