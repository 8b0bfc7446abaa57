"""The flex dispatcher (DeepEP / HybridEP) inside one NVLink domain runs at its authors' published rate
(topo/data/compute/ep_dispatch.toml; issue 29: the dispatch and combine as Megatron-Core runs them)."""

import pytest

import topo
from topo.training.ep_dispatch import flex_dispatch_s, flex_rates
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


def test_rates_are_the_published_table():
    # deepseek-ai/DeepEP@94a9f8f6 (hybrid-ep) docs/README_Hybrid-EP.md, GB200, HybridEP, Torch API, 32 SMs:
    # 8 ranks: dispatch BF16 545.71, FP8 455.35, combine 568.94 GB/s; 36 ranks: 479.02, 361.13, 447.89
    assert flex_rates("GB200", 8) == pytest.approx({"dispatch": 545.71e9, "dispatch_fp8": 455.35e9,
                                                    "combine": 568.94e9})
    assert flex_rates("GB200", 12)["dispatch"] == pytest.approx(523.48e9)  # the next published size, 16
    assert flex_rates("GB200", 64)["combine"] == pytest.approx(447.89e9)  # beyond the table: the largest, 36
    assert flex_rates("B200", 8)["combine"] == pytest.approx(530.86e9)
    assert flex_rates("A100", 8) is None
    # a BF16 call: half dispatch, half combine; an FP8 dispatch at the FP8 rate
    assert flex_dispatch_s("GB200", 8, 1e9, 2) == pytest.approx(0.5 * (1 / 545.71 + 1 / 568.94))
    assert flex_dispatch_s("GB200", 8, 1e9, 1) == pytest.approx(1 / 455.35)
    assert flex_dispatch_s("A100", 8, 1e9, 2) is None


@pytest.fixture(scope="module")
def nvl72():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=1"]))


def test_an_expert_all_to_all_in_one_domain_runs_at_the_dispatchers_rate(nvl72):
    """Qwen3-30B-A3B at EP 8 on GB200 (one NVL72 rack): the flex dispatcher's all-to-all takes its bytes at the
    published rate, slower than NVLink5's all-to-all; Megatron-Core's own all-to-all dispatcher keeps the
    fabric's time."""
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=64, micro_batch=4, seq_len=4096, precision="fp8")
    flex = estimate_step(nvl72, model, lay.model_copy(update={"ep_dispatcher": "deepep"}), contention=False)
    (a2a,) = [c for c in flex.comm if c.dim == "ep" and c.collective == "alltoall"]
    per_call = a2a.time_s / a2a.calls_per_step
    assert a2a.algorithm == "flex dispatcher rate"
    assert per_call == pytest.approx(0.5 * (a2a.size_bytes / 545.71e9 + a2a.size_bytes / 568.94e9))
    plain = estimate_step(nvl72, model, lay, contention=False)
    (b2b,) = [c for c in plain.comm if c.dim == "ep" and c.collective == "alltoall"]
    assert b2b.algorithm != "flex dispatcher rate"
    # the fabric's all-to-all of the same bytes is faster than the dispatcher's published rate
    assert b2b.time_s / b2b.calls_per_step * a2a.size_bytes / b2b.size_bytes < per_call


def test_across_domains_the_in_domain_rate_does_not_apply():
    """EP 16 on DGX H100 (two NVLink domains): the in-domain rate does not apply; the call across domains has its
    own bound (tests/test_training_ep_internode_call.py)."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    lay = make_layout(ep=16, dp=16, etp=1, global_batch=64, seq_len=4096, precision="fp8", ep_dispatcher="deepep")
    r = estimate_step(fab, load_model("qwen3-30b-a3b"), lay, contention=False)
    (a2a,) = [c for c in r.comm if c.dim == "ep" and c.collective == "alltoall"]
    assert a2a.algorithm != "flex dispatcher rate" and a2a.domains_per_group == 2


def test_the_search_bound_reads_the_same_rate(nvl72):
    """The search's refinement from routed collectives (exposed_routed) gives the step's EP term with the
    dispatcher's rate, so a bound never exceeds the step it bounds."""
    from topo.training.comm import CommEngine
    from topo.training.gpus import gpu_compute
    from topo.training.mapping import default_placement, map_layout
    from topo.training.operators import stage_compute
    from topo.training.step import exposed_routed
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=64, micro_batch=4, seq_len=4096, precision="fp8",
                      ep_dispatcher="deepep")
    lay, _ = default_placement(lay, nvl72.spec.gpus_per_domain, nvl72.layout.num_gpus)
    eng = CommEngine(nvl72)
    r = estimate_step(nvl72, model, lay, engine=eng, contention=False)
    mapping = map_layout(lay, nvl72.spec.gpus_per_domain, nvl72.layout.num_gpus)
    sc = stage_compute(model, lay, gpu_compute(nvl72.spec.gpu))
    assert r.breakdown_s["ep"] > 0
    assert exposed_routed(eng, model, lay, mapping, sc)["ep"] == pytest.approx(r.breakdown_s["ep"], rel=1e-9)
