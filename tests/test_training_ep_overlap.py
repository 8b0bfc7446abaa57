"""Megatron-Core's EP all-to-all overlap (combined 1F1B) hides phase by phase, not behind the whole step
(issue 29: the overlapped Hopper MoE runs were 15-21% too fast; topo.training.ep_overlap)."""

import pytest

import topo
from topo.training.ep_overlap import LayerParts, layer_exposed_s, moe_layer_parts, unpaired_note, unpaired_share
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, op_passes_s, op_time_s
from topo.training.parallel import make_layout
from topo.training.step import estimate_step


def test_each_phase_lasts_its_longer_stream():
    """NVIDIA/Megatron-LM@6cd6ea530e (the pin of Megatron-Bridge@7ded17dae, PR #5094's A/B)
    model_chunk_schedule_plan.py TransformerLayerSchedulePlan.run, each node waiting on its micro-batch's event
    (pipeline_parallel/utils.py ScheduleNode.stream_acquire_context), delay_wgrad_compute off:
    comm  combine_bwd | dispatch_fwd | dispatch_bwd | combine_fwd
    comp  attn_fwd    | mlp_bwd      | mlp_fwd      | attn_bwd"""
    p = LayerParts(attn_f=1.0, attn_b=2.0, mlp_f=1.0, mlp_b=2.0)
    # 1.5 s all-to-alls: the combine's backward outlasts the attention's forward by 0.5, the dispatch's backward
    # the MLP's forward by 0.5 (it cannot start before the MLP's backward ends, so the 0.5 the dispatch's forward
    # leaves of that backward does not hide it); the combine's forward fits the attention's backward
    assert layer_exposed_s(p, 1.5, 1.5, 1.5, 1.5) == pytest.approx(1.0)
    # the same 6 s of all-to-alls under 6 s of compute: one window would hide all of it
    assert layer_exposed_s(p, 2.5, 2.5, 0.5, 0.5) == pytest.approx(2.0)  # 0.5 past the MLP's backward, 1.5 its forward
    # each call against its own partner: a dispatch forward of 1 beside the 2 s MLP backward hides, a 2 s dispatch
    # backward beside the 1 s MLP forward exposes 1 (one window over both MLP passes would expose none)
    assert layer_exposed_s(p, 1.0, 2.0, 0.0, 0.0) == pytest.approx(1.0)
    assert layer_exposed_s(p, 0.0, 0.0, 0.0, 0.0) == 0.0


def test_unpaired_passes_follow_megatrons_warmup():
    """Interleaved 1F1B: stage 0 runs (p - 1) x 2 + (v - 1) x p warm-up forwards, one more under the EP overlap
    (NVIDIA/Megatron-LM@00611e6e schedules.py get_pp_rank_microbatches), and as many backwards alone at the end;
    plain 1F1B p - 1; no pipeline: 1."""
    lay = make_layout(tp=2, pp=8, vpp=4, ep=64, dp=64, global_batch=8192, seq_len=4096)
    assert lay.microbatches == 128
    assert unpaired_share(lay) == pytest.approx((7 * 2 + 3 * 8 + 1) / (128 * 4))
    assert unpaired_share(make_layout(pp=4, dp=16, ep=8, global_batch=1280, seq_len=4096)) == pytest.approx(3 / 80)
    assert unpaired_share(make_layout(dp=16, ep=16, global_batch=64, seq_len=4096)) == pytest.approx(1 / 4)
    # fewer micro-batches than the warm-up: nothing is paired
    assert unpaired_share(make_layout(pp=8, vpp=4, dp=4, global_batch=8, seq_len=4096)) == 1.0


@pytest.mark.parametrize("recipe", [None, "blockwise"])
def test_layer_parts_are_the_layer_split_by_node(recipe):
    """The attention node and the MLP node add up to the layer's attention and MoE blocks; the MLP node is the
    routed experts (fc1, activation, fc2); the shared expert runs in the attention node (NVIDIA/Megatron-LM@01cf4fb5
    megatron/core/models/gpt/fine_grained_callables.py submodule_pre_dispatch_forward: shared_experts_compute
    beside the router, before the dispatch). Under block-wise FP8 too: the nodes pay the recipe's GEMM ratio and
    quantisation bytes as the blocks do (rev42: dropping the recipe from the nodes' timing failed no test)."""
    ds = load_model("deepseek-v3-671b")
    lay = make_layout(tp=2, pp=8, vpp=4, ep=64, dp=64, global_batch=8192, seq_len=4096, precision="fp8",
                      fp8_recipe=recipe)
    gpu = gpu_compute("H100")
    p = moe_layer_parts(ds, lay, gpu)
    att, moe = block_time(ds, lay, gpu, "*"), block_time(ds, lay, gpu, "E")
    assert p.attn_f + p.mlp_f == pytest.approx(att.forward_s + moe.forward_s, rel=1e-12)
    assert p.attn_b + p.mlp_b == pytest.approx(att.backward_s + moe.backward_s, rel=1e-12)
    routed = sum(v for k, v in moe.by_module_s.items() if k.startswith("moe"))
    shared = sum(v for k, v in moe.by_module_s.items() if k.startswith("shared_experts"))
    # the router, its top-k, the all-to-all dispatcher's token counts and the permutation are module "moe" too,
    # but run before the dispatch
    pre_ops = ("router", "router_topk", "dispatch_preprocess", "dispatch_dtoh", "permute", "permute_grad")
    pre = sum(op_time_s(o, gpu, "fp8") + op_time_s(o, gpu, "fp8", backward=True, grad_bytes=lay.grad_bytes)
              for o in block_ops(ds, lay, "E") if o.name in pre_ops)
    assert pre > 0 and shared > 0
    assert p.mlp_f + p.mlp_b == pytest.approx(routed - pre, rel=1e-12)


def test_shared_expert_runs_beside_the_combine_backward():
    """With the shared expert in the attention node, phase 1 (the combine's backward beside the attention's
    forward) hides its forward more and phase 2 (the dispatches beside the MLP node) its forward and backward less
    than with it in the MLP node: DeepSeek-V3 (one shared expert of 2,048) on B200, EP32 over four DGX nodes, the
    mb260401 layout (TP1 PP8 VP2); the nodes rebuilt here from the block's operators."""
    ds = load_model("deepseek-v3-671b")
    lay = make_layout(pp=8, vpp=2, ep=32, dp=32, global_batch=4096, seq_len=4096, precision="fp8",
                      ep_dispatcher="deepep", overlap_ep=True)
    gpu = gpu_compute("B200")
    att = block_time(ds, lay, gpu, "*")
    ops = block_ops(ds, lay, "E")
    before = ("norm", "router", "router_topk", "permute", "permute_grad", "residual")

    def f(o):  # as the layout prices it (op_passes_s: the weight gradient added into its main_grad)
        return op_passes_s(o, gpu, lay)[0]

    def b(o):
        return op_passes_s(o, gpu, lay)[1]

    sf = sum(f(o) for o in ops if o.module.startswith("shared_experts"))
    sb = sum(b(o) for o in ops if o.module.startswith("shared_experts"))
    pre_f, pre_b = sum(f(o) for o in ops if o.name in before), sum(b(o) for o in ops if o.name in before)
    routed_f = sum(f(o) for o in ops if o.name not in before and not o.module.startswith("shared_experts"))
    routed_b = sum(b(o) for o in ops if o.name not in before and not o.module.startswith("shared_experts"))
    assert sf > 0 and sb > 0
    in_mlp = LayerParts(att.forward_s + pre_f, att.backward_s + pre_b, routed_f + sf, routed_b + sb)
    p = moe_layer_parts(ds, lay, gpu)
    c = 1.1 * (p.attn_f + p.mlp_f)  # 4.7 ms a call (topo's EP32 B200 call: 3.7 ms)
    # each all-to-all outlasts the attention's forward and half the MLP node, not the attention's backward
    assert p.attn_f < c and (in_mlp.mlp_f + in_mlp.mlp_b) / 2 < c < in_mlp.attn_b
    assert layer_exposed_s(p, c, c, c, c) - layer_exposed_s(in_mlp, c, c, c, c) == pytest.approx(sb, rel=1e-9)


@pytest.fixture(scope="module")
def h100():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_overlap_gain_of_the_modelzoo_pair(h100):
    """yanring/Megatron-MoE-ModelZoo@798dfb50 best_practice/qwen3/readme.md, Qwen3 235B-A22B on 256 H100 (TP2 PP8
    VP4 EP32 ETP1, GBS 2048, DeepEP): 19.7 s per step without the EP overlap, 17.6 s with it: 1.12x. One window hid all but the SMs' share (1.50x); phase by
    phase topo's gain is smaller, and more of the all-to-alls stay exposed."""
    q = load_model("qwen3-235b-a22b")
    lay = make_layout(tp=2, pp=8, vpp=4, ep=32, etp=1, dp=16, global_batch=2048, seq_len=4096, ep_dispatcher="deepep",
                      overlap_ep=True, pipeline_embedding=False)
    on = estimate_step(h100, q, lay, contention=False)
    off = estimate_step(h100, q, lay.model_copy(update={"overlap_ep": False}), contention=False)
    total = off.breakdown_s["ep"]
    one_window = max(0.0, total - on.breakdown_s["compute"])  # 0 here: the step's compute exceeds its all-to-alls
    assert on.breakdown_s["ep"] > one_window + (total - one_window) * 20 / 132 + 0.05 * total
    assert 1.0 < off.step_time_s / on.step_time_s < 1.45


def test_an_overlap_that_pairs_nothing_says_so(h100):
    """walk23: pp 2 x vpp 4 with 2 micro-batches a step: stage 0's warm-up, 2 (p - 1) + (v - 1) p + 1 = 9 forwards
    (Megatron-LM@00611e6e get_pp_rank_microbatches), covers all 2 x 4 of them, so the overlap hides none of the
    expert all-to-alls; the step said so nowhere (it was slower than without the overlap). Four micro-batches, 16
    forwards, pair 7 of them: no note."""
    q = load_model("qwen3-30b-a3b")
    lay = make_layout(pp=2, vpp=4, dp=8, ep=8, global_batch=16, seq_len=4096, overlap_ep=True)
    assert lay.microbatches == 2 and unpaired_share(lay) == 1.0
    note = unpaired_note(lay)
    assert "hides nothing" in note and "warm-up holds 8 forwards" in note and "has 8 (micro-batches 2 x vpp 4)" in note
    on = estimate_step(h100, q, lay, contention=False)
    assert note in on.notes
    off = estimate_step(h100, q, lay.model_copy(update={"overlap_ep": False}), contention=False)
    assert not any("hides nothing" in n for n in off.notes)
    paired = lay.model_copy(update={"global_batch": 32})  # 4 x 4 = 16 forwards, 9 alone
    assert unpaired_share(paired) == pytest.approx(9 / 16) and unpaired_note(paired) == ""
    assert not any("hides nothing" in n for n in estimate_step(h100, q, paired, contention=False).notes)
    assert "first forward" in unpaired_note(make_layout(dp=8, ep=8, global_batch=8, seq_len=4096, overlap_ep=True))


def test_the_benchmark_gate_runs_in_the_attn_node():
    """AutoModel's benchmark gate (moe_routing consecutive, ``router_fake``) stands where a learned router does,
    before the dispatch: in the ``attn`` node, so the routed experts' node is the same whichever gate routes."""
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    lays = {r: make_layout(ep=8, dp=8, etp=1, global_batch=64, seq_len=4096, moe_routing=r, overlap_ep=True,
                           moe_imbalance=1.0)  # the same load under both: only the gate differs
            for r in ("spread", "consecutive")}
    parts = {r: moe_layer_parts(m, lay, gpu) for r, lay in lays.items()}

    def fwd_s(r, names):
        return sum(op_time_s(o, gpu, lays[r].precision) for o in block_ops(m, lays[r], "E") if o.name in names)
    assert fwd_s("consecutive", ("router_fake",)) > 0
    assert parts["consecutive"].mlp_f == pytest.approx(parts["spread"].mlp_f, rel=1e-12)
    assert parts["consecutive"].mlp_b == pytest.approx(parts["spread"].mlp_b, rel=1e-12)
    assert parts["consecutive"].attn_f - parts["spread"].attn_f == pytest.approx(
        fwd_s("consecutive", ("router_fake", "permute")) - fwd_s("spread", ("router", "router_topk", "permute")),
        rel=1e-9)
