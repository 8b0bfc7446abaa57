"""The flex dispatcher (DeepEP / HybridEP) inside one NVLink domain runs at its authors' published rate
(topo/data/compute/ep_dispatch.toml; issue 29: the dispatch and combine as Megatron-Core runs them)."""

import math

import pytest

import topo
from topo.training.ep_dispatch import flex_dispatch_s, flex_rates
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


def test_rates_are_the_published_kernel_table():
    # deepseek-ai/DeepEP@94a9f8f6 (hybrid-ep) docs/README_Hybrid-EP.md, GB200, HybridEP, Kernel Only, 32 SMs:
    # 8 ranks: dispatch BF16 764.03, FP8 713.98, combine 737.13 GB/s; 36 ranks: 632.31, 489.27, 596.99;
    # B200 (Only Kernel Time, 16 SMs): 734.95, 599.27, 673.84; H100: Megatron-LM's one figure (368.9)
    assert flex_rates("GB200", 8) == pytest.approx({"dispatch": 764.03e9, "dispatch_fp8": 713.98e9,
                                                    "combine": 737.13e9})
    assert flex_rates("GB200", 12)["dispatch"] == pytest.approx(706.95e9)  # the next published size, 16
    assert flex_rates("GB200", 64)["combine"] == pytest.approx(596.99e9)  # beyond the table: the largest, 36
    assert flex_rates("B200", 8) == pytest.approx({"dispatch": 734.95e9, "dispatch_fp8": 599.27e9,
                                                   "combine": 673.84e9})
    assert flex_rates("H100", 8)["dispatch"] == pytest.approx(368.9e9)
    assert flex_rates("A100", 8) is None
    # a BF16 call: half dispatch, half combine; an FP8 dispatch at the FP8 rate
    assert flex_dispatch_s("GB200", 8, 1e9, 2) == pytest.approx(0.5 * (1 / 764.03 + 1 / 737.13))
    assert flex_dispatch_s("GB200", 8, 1e9, 1) == pytest.approx(1 / 713.98)
    assert flex_dispatch_s("A100", 8, 1e9, 2) is None


def test_the_framework_call_is_the_kernel_and_the_copy_topo_prices_apart():
    """HybridEP's call through the framework (Torch API) is its kernel plus the copy of the received tokens out of
    its registered buffer (docs/Hybrid-EP_Implementation.md sec. 7.2; Megatron-Core's dispatch_with_permute makes
    that copy the permutation into the experts' order), which topo prices as the MoE block's ``permute``: at the
    published shape (GB200, 8 ranks, 32 SMs; 4,096 tokens of hidden 7,168, top-8, 8 local experts) the kernel's
    time plus topo's permutation fit inside the Torch API's time, so pricing the call at the Torch API rate besides
    the permutation counts the copy twice (issue 29, bw30)."""
    from topo.training.gpus import gpu_compute
    from topo.training.model import MoeSpec
    from topo.training.operators import block_ops, op_time_s
    base = load_model("deepseek-v3-671b")
    moe = MoeSpec.model_validate({**base.moe.model_dump(), "experts": 64, "shared_experts": 0,
                                  "max_nodes_per_token": None})
    model = type(base).model_validate({**base.model_dump(), "moe": moe})
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=8, seq_len=4096, precision="bf16", ep_dispatcher="deepep")
    gpu = gpu_compute("GB200")
    (permute,) = [op for op in block_ops(model, lay, "E") if op.name == "permute"]
    copy_s = op_time_s(permute, gpu, "bf16") / 2  # the dispatch's half (the combine's unpermute is the other)
    dests = 8 * (1 - math.comb(56, 8) / math.comb(64, 8))  # ranks a token reaches, its own included
    received = 4096 * dests * 7168 * 2
    kernel_s, torch_s = received / 764.03e9, received / 545.71e9
    assert kernel_s == pytest.approx(flex_dispatch_s("GB200", 8, received, 2), rel=0.05)
    assert kernel_s + copy_s < torch_s
    assert copy_s > 0.4 * (torch_s - kernel_s)  # the copy is most of what the framework's call adds


@pytest.fixture(scope="module")
def nvl72():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=1"]))


def test_an_expert_all_to_all_in_one_domain_runs_at_the_slower_of_fabric_and_kernel(nvl72):
    """Qwen3-30B-A3B on GB200 (one NVL72 rack): at EP 8 HybridEP's kernel (764 / 737 GB/s) outruns NVLink5's
    all-to-all, so the fabric's time stands, as for Megatron-Core's own all-to-all dispatcher; at EP 32 an FP8
    dispatch runs at the kernel's FP8 rate (538.86 GB/s), slower than the fabric."""
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, etp=1, global_batch=64, micro_batch=4, seq_len=4096, precision="fp8")
    flex = estimate_step(nvl72, model, lay.model_copy(update={"ep_dispatcher": "deepep"}), contention=False)
    (a2a,) = [c for c in flex.comm if c.dim == "ep" and c.collective == "alltoall"]
    per_call = a2a.time_s / a2a.calls_per_step
    assert a2a.algorithm != "flex dispatcher rate"
    assert per_call < 0.5 * (a2a.size_bytes / 545.71e9 + a2a.size_bytes / 568.94e9)  # not the Torch API rate
    assert per_call > 0.5 * (a2a.size_bytes / 764.03e9 + a2a.size_bytes / 737.13e9)
    lay32 = make_layout(ep=32, dp=32, etp=1, global_batch=128, micro_batch=4, seq_len=4096, precision="fp8",
                        ep_dispatcher="deepep", ep_dispatch_bytes=1)
    r = estimate_step(nvl72, model, lay32, contention=False)
    fp8 = [c for c in r.comm if c.dim == "ep" and c.collective == "alltoall" and c.algorithm == "flex dispatcher rate"]
    assert len(fp8) == 1
    assert fp8[0].time_s / fp8[0].calls_per_step == pytest.approx(fp8[0].size_bytes / 538.86e9)


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
