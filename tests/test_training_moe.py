"""An MoE block from its parts (issue 20): expert GEMMs at their real shapes in a grouped kernel, the router and the
permutation, a fixed cost per block and pass, the dispatch/combine all-to-alls (FP8 dispatch, DeepEP-style
de-duplication, node-limited routing), load imbalance, and the step's traffic mix by phase."""

import math

import pytest
from conftest import every_kernel_a_call

import topo
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, op_time_s
from topo.training.parallel import make_layout
from topo.training.step import _is_ep_a2a, ep_copies, estimate_step, step_traffic


@pytest.fixture(scope="module")
def qwen():
    # Qwen3-30B-A3B (arXiv 2505.09388, config.json): hidden 2,048, 128 experts of 768, 8 active per token
    return load_model("qwen3-30b-a3b")


def test_expert_gemm_rows_are_tokens_times_topk_over_experts(qwen):
    lay = make_layout(ep=8, dp=8, global_batch=64, micro_batch=2, seq_len=4096, etp=1, moe_imbalance=1.0)
    ops = {op.name: op for op in block_ops(qwen, lay, "E")}
    # each GPU holds 128 / 8 = 16 experts; each receives 8 ranks x 8,192 tokens x 8 / 128 rows
    rows = 8 * 8192 * 8 / 128
    assert ops["fc1"].m == rows and ops["fc1"].groups == 16 and ops["fc1"].n == 2 * 768 and ops["fc1"].k == 2048
    assert ops["fc1"].grouped and ops["fc2"].grouped and not ops["router"].grouped
    skew = {op.name: op for op in block_ops(qwen, lay.model_copy(update={"moe_imbalance": 1.5}), "E")}
    assert skew["fc1"].m == pytest.approx(1.5 * rows)


def test_grouped_experts_pack_waves_a_loop_quantises_each(qwen):
    """Expert GEMMs are dense GEMMs at their per-expert shapes (DeepGEMM's grouped GEMMs run within a few percent
    of a dense GEMM of the same per-group shape: ratio 0.95-1.04, deepseek-ai/DeepGEMM README.md@989c9e36): a
    grouped kernel packs every expert's tiles into one set of waves, exactly G GEMMs' work; a loop of per-expert
    GEMMs (moe_grouped_gemm = false) pays each expert's partial last wave. On one tile (128 x 256): Hopper's whole
    wgmma width grid has a tile that fills its waves at this shape (2,048 x 1,536 x 2,048: 128 x 192, 16 x 8 = 128
    tiles on 132 SMs), so the loop's waste shows on a single tile shape."""
    from dataclasses import replace
    from topo.training.kernels import gemm_s
    lay = make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=4096, etp=1, moe_imbalance=1.0)
    gpu = gpu_compute("H100")
    km = replace(gpu.kernels, tile_shapes={**gpu.kernels.tile_shapes, "bf16": ((128, 256, 1),)})
    gpu = replace(gpu, kernels=km)
    fc1 = {op.name: op for op in block_ops(qwen, lay, "E")}["fc1"]
    M, N, K, G = fc1.m, fc1.n, fc1.k, fc1.groups
    grouped = gemm_s(km, M, N, K, "bf16", G, packed=True)
    loop = gemm_s(km, M, N, K, "bf16", G, packed=False)
    one = gemm_s(km, M, N, K, "bf16")
    assert grouped < loop == pytest.approx(G * one)
    # a coarse expert is a dense GEMM: Mixtral's 8 experts of 14,336 at EP 8, one per GPU: 8 ranks x 8,192 tokens
    # x top-2 / 8 experts = 16,384 rows
    mix = load_model("mixtral-8x7b")
    mlay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, micro_batch=2, moe_imbalance=1.0)
    e = {op.name: op for op in block_ops(mix, mlay, "E")}["fc1"]
    dense = {op.name: op for op in block_ops(load_model("llama3-8b"), make_layout(global_batch=8, seq_len=8192), "-")}
    assert e.groups == 1 and e.m == 16384
    assert op_time_s(e, gpu, "bf16") == pytest.approx(gemm_s(km, 16384, 2 * 14336, 4096) + km.launch_gpu_s)
    assert dense["fc1"].grouped is False
    # the layout switch reaches the operator
    off = {op.name: op for op in block_ops(qwen, lay.model_copy(update={"moe_grouped_gemm": False}), "E")}["fc1"]
    assert op_time_s(off, gpu, "bf16") > op_time_s(fc1, gpu, "bf16")


def test_host_waits_per_layer_of_a_dropless_moe(qwen):
    """The host launches every kernel of an eager step (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization
    sec. 2: "host boundedness"). A dropless router syncs its tokens per expert to the host, so a layer with an MoE
    block lasts at least the host's launches of its forward kernels; the rest of the forward and the whole
    backward (no sync) last at least the host's launches of theirs. A padded router (capacity factor) has no
    sync: its forward is bound by all of its launches at once."""
    from topo.training.operators import stage_compute
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)  # 128 / 8 = 16 local experts

    def sc(host, **upd):  # every kernel priced as a call of its own (C++-launched ones too: launch_calls), the
        # experts' per-expert module work off (operators.expert_host_s): the test counts launches
        g = gpu_compute("H100", overrides={"launch": every_kernel_a_call(host)})
        return stage_compute(qwen, lay.model_copy(update=upd), g), g

    (fast, _), (slow, g) = sc(1e-9), sc(1e-3)
    launches = sum(op.launches for k in "*E" for op in block_ops(qwen, lay, k) if op.passes != "backward")
    assert launches > 2 * 16  # fc1 and fc2 of each of the 16 local experts, and the rest of the layer
    bt = {k: block_time(qwen, lay, g, k) for k in ("*", "E", "embedding", "logits")}
    assert bt["*"].host_s + bt["E"].host_s == pytest.approx(launches * 1e-3)
    L = qwen.layers
    layer_gpu = bt["*"].forward_s + bt["E"].forward_s
    ends_gpu = bt["embedding"].forward_s + bt["logits"].forward_s
    ends_host = bt["embedding"].host_s + bt["logits"].host_s
    # every kernel is host-bound: the GPU runs each as it is launched, so a layer (sync to sync) lasts the sync's
    # round trip, its launches (and the dispatch's and the combine's, two: BlockTime.calls_host_s) and the GPU time
    # of the last kernel before the sync (operators._synced_layer_wait_s)
    e = bt["E"]
    h_last, g_last, n_last = e.launch_seq[e.sync_at - 1]
    assert h_last / n_last > g_last / n_last
    assert layer_gpu < launches * 1e-3
    sync = g.kernels.sync_s
    assert e.calls_host_s == (1e-3,) * 4  # the all-to-all dispatcher: one launch a call
    assert slow.forward_s == pytest.approx(L * (sync + (launches + 2) * 1e-3 + g_last / n_last)
                                           + max(ends_gpu, ends_host))
    gpu_b = sum(n * bt[k].backward_s for k, n in (("*", L), ("E", L), ("embedding", 1), ("logits", 1)))
    host_b = sum(n * bt[k].host_backward_s for k, n in (("*", L), ("E", L), ("embedding", 1), ("logits", 1)))
    host_b += L * e.calls_host_s.backward_s  # the backward's dispatch and combine: two host calls, as the forward's
    assert host_b > gpu_b and slow.backward_s == pytest.approx(host_b)
    assert fast.forward_s < slow.forward_s / 10 and fast.backward_s < slow.backward_s / 10
    waited = (slow.forward_s + slow.backward_s) - (fast.forward_s + fast.backward_s)
    assert slow.by_module_s["host"] - fast.by_module_s["host"] == pytest.approx(waited, rel=1e-6)
    padded, _ = sc(1e-3, moe_capacity_factor=1.0)
    # no sync: the forward waits for all of its launches at once (the dispatch's and the combine's too; the same
    # here: every layer is host-bound); a
    # padded router has no token counts to copy to the host (the all-to-all dispatcher's 7 + 4 launches) and drops
    # tokens to capacity in 5 of its own (operators.CAPACITY_MASK_BYTES)
    pad_lay = lay.model_copy(update={"moe_capacity_factor": 1.0})
    pad_launches = sum(op.launches for k in "*E" for op in block_ops(qwen, pad_lay, k) if op.passes != "backward")
    assert pad_launches == launches - 11 + 5
    pad_gpu = sum(block_time(qwen, pad_lay, g, k).forward_s for k in "*E")
    assert padded.forward_s == pytest.approx(max(L * pad_gpu + ends_gpu, L * (pad_launches + 2) * 1e-3 + ends_host))


def test_cuda_graphs_take_their_parts_off_the_host(qwen):
    """Megatron-Core's cuda_graph_scope (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization sec. 2.3):
    ``attn`` captures the attention block, ``moe_router`` the MoE block's norm, router and shared experts; the
    routed experts stay eager; ``full_iteration`` captures everything and needs no sync."""
    from topo.training.operators import stage_compute
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)
    g = gpu_compute("H100", overrides={"launch": {"host_s": 1e-3}})
    graphed = lay.model_copy(update={"cuda_graph_scope": ("attn", "moe_router")})
    assert block_time(qwen, graphed, g, "*").host_s == 0.0
    eager_e, graphed_e = block_time(qwen, lay, g, "E"), block_time(qwen, graphed, g, "E")
    static = sum(op.launches for op in block_ops(qwen, lay, "E") if op.name in ("norm", "router", "router_topk"))
    assert eager_e.host_s - graphed_e.host_s == pytest.approx(static * 1e-3)
    assert graphed_e.host_s > 0  # the experts' GEMMs are launched one by one all the same
    full = lay.model_copy(update={"cuda_graph_scope": ("full_iteration",)})
    no_host = gpu_compute("H100", overrides={"launch": {"host_s": 1e-12}})
    # a full-iteration graph's step does not depend on the host's launch time at all (its kernels pay the graph
    # node's GPU gap, not an eager launch's: test_training_launch_gap.py)
    sc_full, sc_free = stage_compute(qwen, full, g), stage_compute(qwen, full, no_host)
    assert sc_full.forward_s == pytest.approx(sc_free.forward_s) and "host" not in sc_full.by_module_s
    assert sc_full.forward_s < stage_compute(qwen, lay, no_host).forward_s


def test_router_kernels_are_the_published_counts(qwen):
    """Megatron-LM docs/discussions/deepseek-v3-gb200-optimization sec. 2.1.4 and 2.2.1: the router part
    launches 72 kernels, 31 with router fusion, 17 with the flex dispatcher's fused preprocess."""
    ds = qwen.model_copy(update={"moe": qwen.moe.model_copy(update={"router": "deepseek"})})

    def router(model=ds, **upd):
        lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, **upd)
        return sum(op.launches for op in block_ops(model, lay, "E") if op.name in ("router", "router_topk"))

    assert router() == 72
    assert router(moe_router_fusion=True) == 31
    assert router(moe_router_fusion=True, ep_dispatcher="deepep") == 17
    # cover64: DeepEP V1's get_dispatch_layout (the 17's fused preprocess kernel) is launched inside its dispatch
    # call (Megatron-LM@d98e8a64dd fused_a2a.py FusedDispatch.forward), whose price holds it (host_calls.toml
    # [call.deepep_v1_call]: 245 us = get_dispatch_layout 56 + dispatch 189): counted once, there
    assert router(moe_router_fusion=True, ep_dispatcher="deepep", ep_flex_backend="hybridep") == 17
    assert router(moe_router_fusion=True, ep_dispatcher="deepep", ep_flex_backend="deepep") == 16
    # Qwen3's router (Megatron-Bridge qwen3_moe_bridge.py: softmax, aux_loss): 25 ops against DeepSeek-V3's 46,
    # counted from Megatron-Core's router.py / moe_utils.py (kernels.toml [launch] router_ops), at 72/46 kernels
    # per op, rounded to a whole kernel (walk15: --ops showed router_topk at "38.13 / 38.13" kernels; the README
    # says 39); the fused paths keep the published counts
    assert qwen.moe.router == "softmax_aux_loss"
    assert router(qwen) == 39 == round(72 * 25 / 46)
    assert router(qwen, moe_router_fusion=True) == 31


@pytest.mark.parametrize("name, router, ops", [
    ("mixtral-8x7b", "softmax_aux_loss", 25),  # NVIDIA/NeMo@02f25a80 mixtral.py: top-2, aux_loss 0.01
    ("mixtral-8x22b", "softmax_aux_loss", 25),
    ("grok-1-314b", "softmax_aux_loss", 25),  # NeMo's Grok-1 script builds on MixtralConfig8x7B
    ("qwen3-235b-a22b", "softmax_aux_loss", 25),  # Megatron-Bridge qwen3_moe_bridge.py: aux_loss
    ("llama4-scout", "sigmoid_topk", 11),  # NeMo Llama4Config: sigmoid, top-1, aux-loss coefficient 0
    ("gpt-oss-120b", "softmax_topk", 11),  # Megatron-Bridge gpt_oss_bridge.py: load balancing "none"
    ("deepseek-v3-671b", "deepseek", 46)])  # the published 72
def test_router_kernels_follow_each_recipes_router(name, router, ops):
    """An eager router's kernels scale with the ops Megatron-Core's router runs for the recipe's configuration
    (counted in kernels.toml [launch] router_ops) at DeepSeek-V3's published 72 kernels for its 46 ops."""
    model = load_model(name)
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)
    launched = sum(op.launches for op in block_ops(model, lay, "E") if op.name in ("router", "router_topk"))
    assert model.moe.router == router
    assert launched == round(72 * ops / 46) and launched == int(launched)  # a launch is whole


def test_a_simpler_router_costs_the_host_less(qwen):
    """The host's time of an eager MoE block falls by the router kernels it no longer launches."""
    g = gpu_compute("H100", overrides={"launch": {"host_s": 1e-3}})
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)
    ds = qwen.model_copy(update={"moe": qwen.moe.model_copy(update={"router": "deepseek"})})
    saved = block_time(ds, lay, g, "E").host_s - block_time(qwen, lay, g, "E").host_s
    assert saved == pytest.approx((72 - 39) * 1e-3)


@pytest.mark.parametrize("scope, needle", [(("moe_preprocess",), "needs moe_router"),
                                           (("moe",), "only token-drop routing")])
def test_graph_scopes_megatron_refuses_are_refused(qwen, scope, needle):
    from topo.errors import TopoError
    from topo.training.parallel import check_layout
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, cuda_graph_scope=scope)
    with pytest.raises(TopoError) as e:
        check_layout(qwen, lay, gpus=8)
    assert e.value.key == "cuda_graph_scope" and needle in str(e.value)


def test_graph_scope_as_layout_pairs_and_a_bare_name_in_one_line():
    """walk2: ``--layout 'pp=4,...,cuda_graph_scope=["attn","moe_router"]'`` was cut at the list's comma (a list of
    two parts could not be written as pairs); a bare name said pydantic's "Input should be a valid tuple"."""
    from topo.errors import TopoError
    from topo.training.parallel import layout_pairs, load_layout
    pairs = layout_pairs('ep=8,dp=8,global_batch=64,cuda_graph_scope=["attn","moe_router"],moe_router_fusion=true')
    assert pairs["cuda_graph_scope"] == ["attn", "moe_router"] and pairs["moe_router_fusion"] is True
    assert load_layout('ep=8,dp=8,global_batch=64,cuda_graph_scope=["attn","moe_router"]').cuda_graph_scope == (
        "attn", "moe_router")
    with pytest.raises(TopoError) as e:
        load_layout("ep=8,dp=8,global_batch=64,cuda_graph_scope=attn")
    assert e.value.key == "cuda_graph_scope" and e.value.message == 'must be a list, e.g. ["a", "b"], got \'attn\''


def test_permutation_bytes(qwen):
    # permute: read the 8,192 tokens, write their 8 routed copies; un-permute the reverse; with ep > 1 the received
    # rows are sorted by local expert and back: 2 (T h + 8 T h) + 4 (8 T h) elements of 2 bytes
    lay = make_layout(ep=8, dp=8, global_batch=64, micro_batch=2, seq_len=4096, etp=1, moe_imbalance=1.0)
    op = {o.name: o for o in block_ops(qwen, lay, "E")}["permute"]
    T, h = 8192, 2048
    assert op.bytes == pytest.approx(2 * (2 * T * h + 2 * 8 * T * h) + 4 * 2 * 8 * T * h)


def test_ep_copies_closed_forms():
    from topo.training.mapping import default_placement
    ds = load_model("deepseek-v3-671b")  # 8 routed experts, node-limited to 4 nodes (arXiv 2412.19437 sec. 2.1.2)
    qwen = load_model("qwen3-30b-a3b")

    def placed(lay, domain):  # the placement reads the domain once; the copies read it from the layout
        return default_placement(lay, domain, 4096)[0]

    a2a = placed(make_layout(ep=32, dp=32, global_batch=32, etp=1), 8)
    assert ep_copies(qwen, a2a) == 8  # Megatron's all-to-all: one copy per routed expert
    # node-limited routing changes which experts a token reaches, not the all-to-all dispatcher's rows: one per
    # token and expert ("output size is static (num_tokens * topk)", NVIDIA/Megatron-LM@d98e8a64dd
    # megatron/core/transformer/moe/token_dispatcher.py)
    assert ep_copies(ds, a2a) == 8
    deep = a2a.model_copy(update={"ep_dispatcher": "deepep"})
    # 32 GPUs on 4 servers of 8: distinct destination nodes of 8 distinct uniform experts (torch.topk: they cannot
    # repeat), a node of E/4 missed with probability C(3E/4, 8) / C(E, 8): 4 (1 - C(96, 8) / C(128, 8)) for Qwen3's
    # 128 experts, 4 (1 - C(192, 8) / C(256, 8)) for DeepSeek-V3's 256 (not 4 (1 - (3/4)^8) = 3.600)
    assert ep_copies(qwen, deep) == pytest.approx(4 * (1 - math.comb(96, 8) / math.comb(128, 8)))
    # 4 nodes under a 4-node limit: the router's group step keeps every node, so the limit changes nothing
    assert ep_copies(ds, deep) == pytest.approx(4 * (1 - math.comb(192, 8) / math.comb(256, 8)))
    inside = make_layout(ep=8, dp=8, global_batch=8, etp=1, ep_dispatcher="deepep")
    # inside one NVLink domain: distinct destination GPUs of 16 experts each, 8 (1 - C(112, 8) / C(128, 8))
    assert ep_copies(qwen, placed(inside, 8)) == pytest.approx(8 * (1 - math.comb(112, 8) / math.comb(128, 8)))
    assert ep_copies(qwen, placed(inside, 72)) == pytest.approx(8 * (1 - math.comb(112, 8) / math.comb(128, 8)))
    assert placed(inside, 72).gpus_per_domain_used == 64 and placed(inside, 8).gpus_per_domain_used == 8


def test_fp8_dispatch_halves_the_forward_dispatch_only(qwen):
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, moe_imbalance=1.0)
    bf16 = [it for it in step_traffic(qwen, lay) if _is_ep_a2a(it)]  # the tokens' (not the probs' or counts')
    fp8 = [it for it in step_traffic(qwen, lay.model_copy(update={"ep_dispatch_bytes": 1.0})) if _is_ep_a2a(it)]
    assert len(bf16) == 1 and len(fp8) == 2
    m, layers = lay.microbatches, qwen.layers
    assert bf16[0]["calls"] == 4 * m * layers
    small, big = sorted(fp8, key=lambda it: it["size_bytes"])
    assert small["size_bytes"] * 2 == big["size_bytes"] == bf16[0]["size_bytes"]
    assert (small["calls"], big["calls"]) == (m * layers, 3 * m * layers)
    # 4,096 tokens x 8 copies x 2,048 x 2 bytes
    assert bf16[0]["size_bytes"] == 4096 * 8 * 2048 * 2


def test_steady_collectives_are_not_slowed_by_the_step_tail():
    """EP's all-to-all runs every micro-batch; a ZeRO-1 DP reduction on the same NICs runs once at the step's end,
    so it slows DP (the tail mix) and not EP (the steady mix)."""
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=32, dp=32, global_batch=64, seq_len=4096, etp=1, rank_order="tp-cp-ep-dp-pp")
    r = estimate_step(fabric, m, lay)
    assert r.contention.get("dp", 1.0) > 1.05  # the reduction shares the NICs with the all-to-all
    assert r.contention.get("ep", 1.0) == 1.0  # alone in the steady state


def test_gpu_catalog_sm_counts():
    # NVIDIA's architecture whitepapers: A100 108, H100 SXM5 132 SMs; B200 2 dies x 74; GB200, GB300 and B300 as the
    # devices report them in XLA's stored device specs (openxla/xla specs/gb200.txtpb '152 cores', gb300.txtpb
    # '152 cores', b300.txtpb core_count 158), not Blackwell Ultra's whole-chip 160
    assert [gpu_compute(g).sms for g in ("A100", "H100", "H800", "B200", "GB200", "GB300", "B300")] == \
        [108, 132, 132, 148, 152, 152, 158]


@pytest.fixture(scope="module")
def h100_fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))


def test_overlapped_all_to_alls_slow_the_compute_by_their_sms(qwen, h100_fabric, monkeypatch):
    """With overlap_ep the hidden all-to-alls still cost the compute beside them what their kernels take (the
    ``alltoall`` dispatcher's NCCL send/recv: NCCL's 16 p2p channels of an H100's 132 SMs, NVIDIA/nccl
    src/graph/paths.cc ncclTopoComputeP2pChannels, pow2Up of the 16 collective channels; 32 with NCCL_MIN_CTAS 32;
    and 3 HBM bytes per byte moved: topo.training.comm_sms), the loss of the DP collectives' model; what is hidden
    is what each phase of Megatron-Core's combined 1F1B hides (topo.training.ep_overlap), the first forward's and
    the last backward's all-to-alls (no partner without pipelining) exposed whole."""
    from topo.training import step as st
    from topo.training.comm_sms import comm_hbm_Bps, moved_Bps, reduced_gpu
    from topo.training.ep_overlap import moe_layer_parts
    from topo.training.operators import stage_compute

    # the same host cover as the stage computes below (none): the host's waits do not shrink with the SMs
    monkeypatch.setattr(st, "_ep_cover_s", lambda *a: 0.0)
    lay = make_layout(ep=32, dp=32, etp=1, global_batch=256, seq_len=4096, overlap_ep=True)
    r = estimate_step(h100_fabric, qwen, lay, contention=False)
    # the tokens' all-to-all (the largest; the probs' all-to-all and the counts' gather are the dispatcher's own)
    a2a = max((c for c in r.comm if c.dim == "ep"), key=lambda c: c.size_bytes)
    total, one = a2a.time_s, a2a.time_s / a2a.calls_per_step
    # the probs' all-to-all runs in the dispatch node beside the tokens' (Megatron-Core's ``token_dispatch``), forward
    # and backward: paired with them; the counts' gather in the attn node on the compute stream
    # (``MoELayer.preprocess``): exposed whole, and the partner's combine backward runs beside it
    # (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/gpt/fine_grained_callables.py, moe/moe_layer.py)
    probs = next(c for c in r.comm if c.dim == "ep" and c.collective == "alltoall" and c is not a2a)
    counts = next(c for c in r.comm if c.dim == "ep" and c.collective == "all_gather")
    pr, g = probs.time_s / probs.calls_per_step, counts.time_s / counts.calls_per_step
    gpu = gpu_compute("H100")
    p = moe_layer_parts(qwen, lay, gpu)
    m = lay.microbatches
    paired = (max(0.0, one - p.attn_f - g) + max(0.0, one + pr - p.mlp_b) + max(0.0, one + pr - p.mlp_f)
              + max(0.0, one - p.attn_b))
    exposed = 48 * ((m - 1) * paired + 4 * one + 2 * pr)  # 48 MoE layers (Qwen3 30B-A3B config.json), m - 1 pairs
    hidden = total + probs.time_s - exposed
    assert hidden > 0.05 and exposed > max(0.0, total - r.breakdown_s["compute"])  # more than one window gives
    assert probs.exposed_s / probs.time_s == pytest.approx(a2a.exposed_s / a2a.time_s)
    assert counts.exposed_s == pytest.approx(counts.time_s)
    side = counts.exposed_s
    t = stage_compute(qwen, lay, gpu).microbatch_s
    taken = comm_hbm_Bps(moved_Bps("alltoall", a2a.size_bytes, a2a.group_size, one))
    taken = round(taken / gpu.hbm_Bps, 2) * gpu.hbm_Bps  # the step's rounding (one reduced compute per 1% of HBM)

    def loss(sms):  # 1 - t / t' on the GPU the all-to-all's kernels leave
        return 1 - t / stage_compute(qwen, lay, reduced_gpu(gpu, sms, taken)).microbatch_s
    # about the linear 16/132: partial waves lose less, a GEMM's tiles chosen for 132 SMs and run in waves over
    # 116 (one more wave) and the all-to-all's HBM traffic (~2% of HBM) more: 0.141
    assert 0.5 * 16 / 132 < loss(16) < 1.25 * 16 / 132
    assert r.breakdown_s["ep"] == pytest.approx(exposed + hidden * loss(16) + side, rel=1e-9)
    # the alltoall dispatcher does not launch on the flex dispatcher's ep_comm_sms: NCCL's channels decide
    same = estimate_step(h100_fabric, qwen, lay.model_copy(update={"ep_comm_sms": 40}), contention=False)
    assert same.breakdown_s["ep"] == r.breakdown_s["ep"]
    more = estimate_step(h100_fabric, qwen, lay.model_copy(update={"nccl_min_ctas": 32}), contention=False)
    more_side = next(c.exposed_s for c in more.comm if c.dim == "ep" and c.collective == "all_gather")
    assert (more.breakdown_s["ep"] - more_side) - (r.breakdown_s["ep"] - side) == pytest.approx(
        hidden * (loss(32) - loss(16)), rel=1e-9)
    assert more.step_time_s > r.step_time_s
    # not overlapped: the all-to-alls are exposed whole and take no share of any compute
    plain = estimate_step(h100_fabric, qwen, lay.model_copy(update={"overlap_ep": False}), contention=False)
    plain_side = sum(c.time_s for c in plain.comm if c.dim == "ep" and c.size_bytes < a2a.size_bytes)
    assert plain.breakdown_s["ep"] == pytest.approx(total + plain_side, rel=1e-9)


def test_mla_up_projection_recompute(h100_fabric):
    """``mla_up_proj`` (Megatron-Core's recompute module) repeats MLA's query and key/value up-projections and
    their RoPE in the backward pass, and stores only the latents."""
    from topo.training.memory import block_activation_bytes
    from topo.training.operators import stage_compute

    ds = load_model("deepseek-v3-671b")
    lay = make_layout(tp=2, pp=8, ep=64, dp=64, etp=1, global_batch=1024, seq_len=4096, precision="fp8")
    rec = lay.model_copy(update={"recompute_modules": ("mla_up_proj",)})
    gpu = gpu_compute("H100")
    base, up = stage_compute(ds, lay, gpu), stage_compute(ds, rec, gpu)
    assert base.recompute_s == 0.0
    ops = [o for o in block_ops(ds, rec, "*") if o.name in ("q_up", "kv_up", "rope")]
    assert len(ops) == 3 and all(o.tag == "mla_up_proj" for o in ops)
    per_block = sum(op_time_s(o, gpu, "fp8") for o in ops)
    assert up.recompute_s == pytest.approx(up.blocks["*"] * per_block, rel=1e-12)
    assert up.forward_s == base.forward_s and up.backward_s == base.backward_s
    # memory: Q (2 bytes x 128 heads x 192) and the per-head K/V are not stored, the 1,536 + 512 + 64 latents are
    a = ds.attention
    h = ds.hidden
    s_b_h = 4096 * h
    saved = block_activation_bytes(ds, lay, "*") - block_activation_bytes(ds, rec, "*")
    kv_frac = (a.kv_lora_rank + a.qk_rope_head_dim + ds.heads * (a.qk_nope_head_dim + a.v_head_dim)) / h
    want = s_b_h * (2 + 4 * kv_frac - 2 * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) / h) / 2
    assert saved == pytest.approx(want, rel=1e-12) and saved > 0


def test_dualpipe_bubble_closed_form(h100_fabric):
    """DeepSeek-V3's DualPipe (arXiv 2412.19437 Table 2): bubble (p/2 - 1)(F&B + B - 3W) = (p/2 - 1) F with the
    backward split evenly into B and W; 1F1B: (p - 1)(F + B + W) plus the exposed per-micro-batch traffic."""
    from topo.errors import TopoError
    from topo.training.operators import stage_compute
    from topo.training.parallel import check_layout

    m = load_model("llama3-8b")
    lay = make_layout(pp=8, dp=2, global_batch=64, seq_len=4096)
    dual = lay.model_copy(update={"pipeline_schedule": "dualpipe"})
    sc = stage_compute(m, lay, gpu_compute("H100"))
    sc2 = stage_compute(m, dual, gpu_compute("H100"))
    one = estimate_step(h100_fabric, m, lay, contention=False)
    two = estimate_step(h100_fabric, m, dual, contention=False)
    assert two.breakdown_s["bubble"] == pytest.approx(3 * sc2.forward_s, rel=1e-12)
    assert one.breakdown_s["bubble"] >= 7 * sc.microbatch_s
    # rank i runs stage i and stage 7 - i on half the micro-batches each: the busiest rank's mean sets the pace
    mirrored = max((sc.stage_s[i] + sc.stage_s[7 - i]) / 2 for i in range(8))
    assert two.breakdown_s["compute"] == pytest.approx(lay.microbatches * mirrored, rel=1e-12)
    assert two.breakdown_s["compute"] < one.breakdown_s["compute"]  # the embedding and the head share a rank
    for bad in (dict(pp=8, vpp=2), dict(pp=3)):
        with pytest.raises(TopoError, match="dualpipe needs an even pp") as e:
            check_layout(m, make_layout(dp=2, global_batch=48, seq_len=4096, pipeline_schedule="dualpipe", **bad))
        assert e.value.key == "pipeline_schedule"


def test_dualpipe_holds_two_stages_and_shares_the_embedding():
    """DualPipe keeps 2x parameters per device (deepseek-ai/DualPipe@3da1bbe README table; rank r holds stages r
    and pp - 1 - r, examples/example_dualpipe.py), and the rank of the first and last stages shares the embedding
    and the output head with the MTP module (DeepSeek-V3, arXiv 2412.19437 sec. 3.2.4): no copy of the
    embedding for the MTP's next tokens."""
    from topo.training.memory import stage_params

    m = load_model("deepseek-v3-671b")
    lay = make_layout(pp=16, dp=8, ep=8, global_batch=256, seq_len=4096, precision="fp8")
    dual = lay.model_copy(update={"pipeline_schedule": "dualpipe"})
    one, two = stage_params(m, lay), stage_params(m, dual)
    for r in range(1, 15):  # the middle ranks: exactly their two stages' parameters
        assert two[r][0] == pytest.approx(one[r][0] + one[15 - r][0], rel=1e-12)
        assert two[r][1] == pytest.approx(one[r][1] + one[15 - r][1], rel=1e-12)
    emb = m.vocab * m.hidden  # tp = 1
    assert two[0][0] == pytest.approx(one[0][0] + one[15][0] - emb, rel=1e-12)
    assert two[0][1] == pytest.approx(one[0][1] + one[15][1], rel=1e-12)


def test_multi_token_prediction_runs_on_the_last_stage():
    """DeepSeek-V3's MTP module (arXiv 2412.19437 sec. 2.2; config.json num_nextn_predict_layers = 1): one more
    layer of the model's last kind (attention + MoE), a 2h -> h projection and the shared output head, on the
    last pipeline stage: its compute, its parameters and its expert all-to-alls."""
    from topo.training.memory import stage_params
    from topo.training.operators import pipeline_units, stage_compute

    ds = load_model("deepseek-v3-671b")
    assert ds.mtp_layers == 1
    plain = ds.model_copy(update={"mtp_layers": 0})
    lay = make_layout(pp=4, dp=2, ep=8, etp=1, global_batch=16, seq_len=4096)
    last = pipeline_units(ds, lay)[-1]
    assert last[-2:] == ["*E", "mtp_head"] and pipeline_units(plain, lay)[-1] == last[:-2]
    gpu = gpu_compute("H100")
    with_mtp, without = stage_compute(ds, lay, gpu), stage_compute(plain, lay, gpu)
    layer = block_time(ds, lay, gpu, "*").forward_s + block_time(ds, lay, gpu, "E").forward_s
    head = block_time(ds, lay, gpu, "mtp_head").forward_s
    assert with_mtp.stage_s[-1] > without.stage_s[-1] and with_mtp.stage_s[0] == without.stage_s[0]
    assert head > block_time(ds, lay, gpu, "logits").forward_s
    assert with_mtp.stage_s[-1] - without.stage_s[-1] >= layer + head
    h = ds.hidden
    assert stage_params(ds, lay)[-1][0] - stage_params(plain, lay)[-1][0] >= 2 * h * h


def test_fsdp_gathers_each_units_part_over_its_own_group():
    """FSDP / ZeRO-3 gathers each unit's (layer's) parameters before its forward and backward: its dense part over
    the dense data-parallel ranks, its experts over the experts' replicas, one gather per unit holding some. The
    per-gather size is the group's share of one unit, not the whole largest unit (which counted each dense gather
    as a whole MoE layer: DeepSeek-V3's dense gathers 1.6x too large and, exposed against one layer's compute each,
    a 1,024-GPU AutoModel step 144 s where 38 s was measured)."""
    from topo.training.memory import stage_params, units_holding
    ds = load_model("deepseek-v3-671b")
    lay = make_layout(pp=4, vpp=8, dp=128, ep=64, etp=1, global_batch=2048, seq_len=4096, dp_sharding="zero3",
                      pipeline_embedding=True)
    rows = stage_params(ds, lay)
    i = max(range(len(rows)), key=lambda k: rows[k][0] + rows[k][1])
    dense, expert, _ = rows[i]
    nd, ne = units_holding(ds, lay)[i]
    m = lay.microbatches
    items = {(t["groups"], t["collective"]): t for t in step_traffic(ds, lay) if t["dim"] == "dp"}
    gd, ge = items[("dpcp", "all_gather")], items[("edp", "all_gather")]
    assert gd["calls"] == 2 * m * nd and ge["calls"] == 2 * m * ne
    assert gd["size_bytes"] * nd == pytest.approx(dense * lay.weight_bytes)
    assert ge["size_bytes"] * ne == pytest.approx(expert * lay.weight_bytes)
    assert ge["size_bytes"] < expert * lay.weight_bytes / ne * 1.0001 and nd > ne > 0


def test_an_fp8_linear_launches_its_casts(qwen):
    """Transformer Engine quantises an FP8 linear layer's GEMM inputs once a pass: one more kernel forward (the
    input, row- and column-wise), one backward (the output gradient, which the input- and weight-gradient GEMMs
    share; the weight-gradient GEMM reads the input's column-wise copy from the forward); a grouped
    expert GEMM quantises each expert's rows once a pass (TransformerEngine@d0067d0 pytorch/module/grouped_linear.py:
    its input forward, row- and column-wise, its output gradient backward); BF16 launches the GEMMs alone."""
    from topo.training.operators import kernels_launched
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1)
    ops = {op.name: op for k in "*E" for op in block_ops(qwen, lay, k)}
    qkv, fc1 = ops["qkv"], ops["fc1"]
    assert (kernels_launched(qkv, "bf16"), kernels_launched(qkv, "bf16", True)) == (1, 2)
    assert (kernels_launched(qkv, "fp8"), kernels_launched(qkv, "fp8", True)) == (2, 3)
    g_ = fc1.groups  # 16 local experts: one GEMM and one cast each forward, two GEMMs and one cast backward
    assert (kernels_launched(fc1, "bf16"), kernels_launched(fc1, "bf16", True)) == (g_, 2 * g_)
    assert (kernels_launched(fc1, "fp8"), kernels_launched(fc1, "fp8", True)) == (2 * g_, 3 * g_)
    g = gpu_compute("H100", overrides={"launch": {"host_s": 1e-3}})
    fp8 = lay.model_copy(update={"precision": "fp8"})
    # the host's forward: out_proj's input cast is one more call; qkv's is none since section 418 (delayed
    # scaling's norm writes its FP8 input inside the norm's call, TE's LayerNormLinear), whose C++ launches the
    # transpose of an unsharded input on Hopper (one kernel at the C++ launch price)
    from topo.training.operators import launch_calls
    ops8 = {op.name: op for op in block_ops(qwen, fp8, "*")}
    assert launch_calls(ops8["qkv"], "fp8") == (1.0, 0.0, 1.0) and launch_calls(ops8["out_proj"], "fp8") == (2.0, 0.0, 0.0)
    assert block_time(qwen, fp8, g, "*").host_s - block_time(qwen, lay, g, "*").host_s == pytest.approx(
        1e-3 + g.kernels.launch_cpp_s)


def test_the_step_says_when_the_gpu_waits_for_the_host(tmp_path):
    """Eager Qwen3-30B on one H100 node (its recipes capture no CUDA graph; EP 8 on NVLink, whose short
    all-to-alls leave the host little cover) waits for the host's launches: the text says how long; a
    full-iteration graph takes the host off and the line goes. At 2,048 tokens a micro-batch (at 4,096 the wait
    was 19 ms of an 11.4 s step, and one FP8 quantisation a pass in place of two backward leaves none)."""
    from conftest import run_cli
    base = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "256",
            "--seq", "2048", "--precision", "fp8"]
    eager = run_cli(*base, "--dp", "8", "--ep", "8", "--etp", "1")
    assert eager.returncode == 0, eager.stderr
    line = [x for x in eager.stdout.splitlines() if x.startswith("host-bound: ")]
    assert len(line) == 1 and "waiting for the host's kernel launches" in line[0]
    js = run_cli(*base, "--dp", "8", "--ep", "8", "--etp", "1", "--json")
    import json
    host = json.loads(js.stdout)["compute_by_module_s"]["host"]
    value, unit = line[0].split()[1:3]  # the CLI prints seconds or milliseconds
    assert host > 0 and float(value) * {"s": 1.0, "ms": 1e-3}[unit] == pytest.approx(host, rel=1e-3)
    layout = tmp_path / "graphs.toml"
    layout.write_text('tp = 1\ndp = 8\nep = 8\netp = 1\ncuda_graph_scope = ["full_iteration"]\n'
                      'moe_capacity_factor = 1.0\n')
    graphed = run_cli(*base, "--layout", str(layout))
    assert graphed.returncode == 0, graphed.stderr
    assert not any(x.startswith("host-bound: ") for x in graphed.stdout.splitlines())


def test_current_scaling_quantises_each_expert_in_four_kernels(qwen):
    """Per-tensor current scaling quantises each expert's GEMM input in four kernels, the amax zeroed, the amax,
    the scale and the cast, reading the input twice (NVIDIA/TransformerEngine v2.14, f031cf87, the NeMo 26.04 pin:
    csrc/quantizer.cpp Float8CurrentScalingQuantizer::quantize_impl; common/recipe/current_scaling.cu
    launch_amax_kernel: zero_amax_kernel<<<1, 1>>> then the amax kernel; split_quantize quantises each expert's rows
    on their own, csrc/extensions/cast.cpp multi_tensor_quantize_impl "Currently only have fused kernel for FP8
    delayed scaling"): 16 local experts launch 16 GEMMs + 16 x 4 forward and 32 + 16 x 4 backward; the amax pass
    reads the 2-byte input once more (forward the expert's rows x K, backward its output gradient rows x N)."""
    from topo.training.kernels import memory_s
    from topo.training.operators import kernels_launched
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, precision="fp8")
    cur = lay.model_copy(update={"fp8_recipe": "current"})
    fc1 = {op.name: op for op in block_ops(qwen, lay, "E")}["fc1"]
    fc1_cs = {op.name: op for op in block_ops(qwen, cur, "E")}["fc1"]
    assert not fc1.current_scaling and fc1_cs.current_scaling and fc1.groups == 16
    assert (kernels_launched(fc1_cs, "fp8"), kernels_launched(fc1_cs, "fp8", True)) == (16 + 64, 32 + 64)
    g = gpu_compute("H100")
    gap = g.kernels.launch_gpu_s
    m, n, k = fc1.m, fc1.n, fc1.k
    fwd = op_time_s(fc1_cs, g, "fp8") - op_time_s(fc1, g, "fp8")
    bwd = op_time_s(fc1_cs, g, "fp8", True) - op_time_s(fc1, g, "fp8", True)
    assert fwd == pytest.approx(memory_s(g.kernels, 2 * m * k * 16) + 48 * gap)
    assert bwd == pytest.approx(memory_s(g.kernels, 2 * m * n * 16) + 48 * gap)
    # BF16 experts and the delayed-scaling / MXFP8 recipes cast in one kernel: unchanged, but for MXFP8's one
    # swizzle of every expert's weight scales a GEMM call (mxfp8_weight_swizzle.toml: a gap, 2 x N x K / 32 bytes)
    mx = lay.model_copy(update={"fp8_recipe": "mxfp8"})
    swizzle = memory_s(g.kernels, 2 * n * k * 16 / 32) + gap + 2 * 16 * gap  # and each expert cast's 2 scale memsets
    assert op_time_s({op.name: op for op in block_ops(qwen, mx, "E")}["fc1"], g, "fp8") == pytest.approx(
        op_time_s(fc1, g, "fp8") + swizzle, rel=1e-12)


def test_an_fp8_recipe_needs_fp8():
    """fp8_recipe with BF16 matmuls is refused in one line naming the key."""
    from topo.errors import TopoError
    from topo.training.parallel import check_layout
    model = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, fp8_recipe="current")
    with pytest.raises(TopoError, match="fp8_recipe.*current needs precision fp8, got bf16"):
        check_layout(model, lay)
    check_layout(model, lay.model_copy(update={"precision": "fp8"}))
    # MXFP8 needs Blackwell's block-scaled tensor cores: refused on H100, run on B200
    h100 = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    mx = lay.model_copy(update={"precision": "fp8", "fp8_recipe": "mxfp8"})
    with pytest.raises(TopoError, match="fp8_recipe.*mxfp8 needs Blackwell.*H100 is hopper"):
        estimate_step(h100, model, mx, contention=False)
    b200 = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1", "gpu=B200"]))
    assert estimate_step(b200, model, mx, contention=False).step_time_s > 0


def test_the_flex_dispatcher_has_no_global_permutation(qwen):
    """Megatron-Core's all-to-all dispatcher copies each token top-k times before the all-to-all (the global
    permutation) and sorts the received rows by local expert after it; the flex dispatcher (DeepEP / HybridEP)
    sends each token once per destination rank and only permutes what it received into its local experts' rows
    (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization@1d9edcf8 sec. 2.1.1). Qwen3-30B at EP 8, top-8 of
    128 experts: a token's 8 distinct experts (torch.topk) reach 8 (1 - C(112, 8) / C(128, 8)) = 5.34 ranks of 16
    experts on average (not the 5.25 of repeatable draws)."""
    lay = make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=4096, etp=1, moe_imbalance=1.0)
    tokens, h = 4096, 2048
    routed = 2 * tokens * 8 * h
    plain = {op.name: op for op in block_ops(qwen, lay, "E")}["permute"]
    assert plain.bytes == pytest.approx(2 * (2 * tokens * h + routed) + 4 * routed)
    flex = {op.name: op for op in block_ops(qwen, lay.model_copy(update={"ep_dispatcher": "deepep"}), "E")}["permute"]
    received = 2 * tokens * h * 8 * (1 - math.comb(112, 8) / math.comb(128, 8))
    assert flex.bytes == pytest.approx(2 * (received + routed))
    assert received / (2 * tokens * h) == pytest.approx(5.34, abs=0.01)


def test_padded_router_sends_each_expert_its_capacity():
    """Drop and pad (NeMo's MegatronTokenDropCallback): Megatron-Core's all-to-all dispatcher sends every expert
    ``capacity = ceil(tokens x top-k / experts x capacity_factor)`` rows of the rank's own tokens, ``capacity x
    experts`` in all, and each local expert computes ``capacity x etp x ep`` rows (NVIDIA/Megatron-LM@ff45bd42
    moe_utils.py get_capacity, token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess), whatever the
    routing's imbalance."""
    mixtral = load_model("mixtral-8x22b")  # 8 experts, 2 per token, hidden 6,144, experts 16,384 wide
    lay = make_layout(tp=2, dp=8, ep=8, etp=1, global_batch=64, micro_batch=1, seq_len=4096,
                      moe_capacity_factor=1.1, moe_imbalance=1.3)
    cap = math.ceil(4096 / 2 * 2 / 8 * 1.1)  # 2,048 tokens per rank (sequence parallel): 563.2 -> 564
    a2a = [it for it in step_traffic(mixtral, lay) if _is_ep_a2a(it)]
    assert len(a2a) == 1 and a2a[0]["size_bytes"] == cap * 8 * 6144 * 2
    fc1 = {op.name: op for op in block_ops(mixtral, lay, "E")}["fc1"]
    assert fc1.m == cap * 1 * 8 and fc1.groups == 1 and fc1.n == 2 * 16384
    # dropless: the rank's tokens x top-k, the busiest rank's imbalance on both
    free = lay.model_copy(update={"moe_capacity_factor": None})
    a2a = [it for it in step_traffic(mixtral, free) if _is_ep_a2a(it)]
    assert a2a[0]["size_bytes"] == pytest.approx(2048 * 2 * 6144 * 2 * 1.3)
    assert {op.name: op for op in block_ops(mixtral, free, "E")}["fc1"].m == pytest.approx(8 * 2048 * 2 / 8 * 1.3)


def test_tp_overlap_does_not_hide_the_expert_tensor_parallel_gathers(h100_fabric):
    """Expert-tensor parallelism's all-gather (after the dispatch) and reduce-scatter (before the combine) are the
    token dispatcher's own collectives: Megatron-Core builds the expert GEMMs with TE's parallel mode off ("The
    comms between TP and EP group is explicitly handled by MoE token dispatcher", NVIDIA/Megatron-LM@ff45bd42
    megatron/core/extensions/transformer_engine.py TEGroupedLinear; token_dispatcher.py
    gather_from_sequence_parallel_region / reduce_scatter_to_sequence_parallel_region over expt_tp), so TP
    communication overlap (userbuffers) cannot hide them: exposed whole, as the all-to-all, unless EP overlap."""
    mixtral = load_model("mixtral-8x7b")
    lay = make_layout(tp=4, etp=4, ep=2, dp=2, global_batch=64, seq_len=4096, overlap_tp=False)
    items = {(t["groups"], t["collective"]) for t in step_traffic(mixtral, lay) if t["dim"] == "ep"}
    assert {("etp", "all_gather"), ("etp", "reduce_scatter"), ("ep", "alltoall")} <= items
    off = estimate_step(h100_fabric, mixtral, lay, contention=False)
    on = estimate_step(h100_fabric, mixtral, lay.model_copy(update={"overlap_tp": True}), contention=False)
    ep_total = sum(c.time_s for c in off.comm if c.dim == "ep")
    assert ep_total > 0 and off.breakdown_s["ep"] == pytest.approx(ep_total, rel=1e-9)
    assert on.breakdown_s["ep"] == pytest.approx(off.breakdown_s["ep"], rel=1e-9)
    assert on.breakdown_s["tp"] < off.breakdown_s["tp"]  # the attention's TP traffic is what overlap hides


def test_gpt_oss_experts_add_their_biases_in_eager_passes():
    """gpt-oss's experts carry biases (config.json / the checkpoint's gate_up_proj_bias and down_proj_bias).
    Megatron-Core adds fc1's inside the fused quick-GeGLU and fc2's, weighted by the routing probability, in an
    eager per-expert pass (``TEGroupedMLP._apply_bias``, NVIDIA/Megatron-LM@a329dd6d): ``b * p``, the add and
    ``cat`` move 6 elements forward; backward 8: ``mul``'s 6 (grad * p, its row sum; grad * b, its width sum) and
    ``torch.split``'s backward, a ``cat`` of the experts' gradient slices (PyTorch ``split_with_sizes_backward``), 2;
    NeMo AutoModel (Automodel@ce005dd ``GroupedExpertsDeepEP``) adds fc1's too, unweighted (``t + b`` and ``cat``: 4
    forward; the bias's gradient, a row sum, and the split's ``cat``: 3). Closed form on a GB200-like layout: EP 64,
    MBS 4 x 4,096."""
    from topo.training.kernels import memory_s
    from topo.training.operators import expert_rows
    model = load_model("gpt-oss-120b")
    assert model.moe.expert_bias and not load_model("qwen3-30b-a3b").moe.expert_bias
    gpu = gpu_compute("GB200")
    lay = make_layout(ep=64, dp=64, global_batch=1280, micro_batch=4, seq_len=4096, etp=1, moe_imbalance=1.0)
    rows = expert_rows(model, lay) * model.moe.experts / 64  # every local expert's rows on this rank
    assert rows == pytest.approx(64 * 4 * 4096 * 4 / 64)  # 65,536: each rank receives its share of the routed copies
    h, up = 2880, 2 * 2880
    ops = {op.name: op for op in block_ops(model, lay, "E")}
    assert ops["expert_bias_weighted"].bytes == pytest.approx(2 * 6 * rows * h)
    assert ops["expert_bias_weighted_grad"].bytes == pytest.approx(2 * 8 * rows * h)
    assert "expert_bias_plain" not in ops  # Megatron-Core: fc1's bias rides in the fused activation
    # the passes are priced at HBM rate in their own pass only, one mul and add per local expert and a cat forward
    f = op_time_s(ops["expert_bias_weighted"], gpu, "bf16")
    km = gpu.kernels
    assert f == pytest.approx(memory_s(km, 2 * 6 * rows * h) + km.launch_gpu_s * (2 * 2 + 1))
    assert op_time_s(ops["expert_bias_weighted"], gpu, "bf16", backward=True) == 0.0
    auto = {op.name: op for op in block_ops(model, lay.model_copy(update={"expert_bias_eager": "fc1_fc2"}), "E")}
    assert auto["expert_bias_plain"].bytes == pytest.approx(2 * 4 * rows * up)
    assert auto["expert_bias_plain_grad"].bytes == pytest.approx(2 * 3 * rows * up)
    # backward kernels: the bias's sum per expert (2 local experts) and the split's cat
    assert auto["expert_bias_plain_grad"].launches == 2 * 1 + 1
    # fused (TE's op fuser scales and adds fc2's bias in the grouped MLP): the block is the bias-free model's
    fused = block_time(model, lay.model_copy(update={"expert_bias_eager": "none"}), gpu, "E")
    plain = load_model("gpt-oss-120b")
    plain = type(plain).model_validate({**plain.model_dump(), "moe": {**plain.moe.model_dump(), "expert_bias": False}})
    bare = block_time(plain, lay, gpu, "E")
    assert (fused.forward_s, fused.backward_s) == pytest.approx((bare.forward_s, bare.backward_s))
    eager = block_time(model, lay, gpu, "E")
    assert eager.forward_s - bare.forward_s == pytest.approx(f)
    assert eager.backward_s - bare.backward_s == pytest.approx(
        memory_s(km, 2 * 8 * rows * h) + km.launch_gpu_s * (2 * 4 + 2))  # 4 per expert, the two splits' cats


def test_the_flex_dispatchers_fp32_probabilities_promote_the_weighted_bias_add():
    """DeepEP and HybridEP take FP32 routing probabilities and Megatron-Core casts them before dispatch
    (NVIDIA/Megatron-LM@d98e8a64 ``moe/token_dispatcher.py``: "DeepEP only supports float32 probs"; AutoModel's
    copy of the dispatcher, Automodel@ce005dd, likewise), so in ``t + b * p`` (``TEGroupedMLP._apply_bias``,
    @d98e8a64 ``moe/experts.py``) ``b * p``, the add and ``cat`` are FP32 and ``.to(out.dtype)`` casts back.
    Forward per output element: ``b * p`` writes 4 B, the add reads 2 + 4 and writes 4, ``cat`` 4 + 4, the cast
    4 + 2: 28 B (12 B with bf16 probabilities). Backward: the cast's backward 2 + 4, the engine's cast of ``t``'s
    gradient 4 + 2, ``mul``'s products and sums 6 x 4, the split's ``cat`` 2 + 2: 40 B (16). Kernels: forward
    ``mul`` and add per expert, ``cat`` and the cast; backward 4 + 2 casts per expert, the two splits' ``cat`` and
    the widening cast. Same GB200-like layout as above (EP 64, 2 local experts, 65,536 rows x 2,880)."""
    from topo.training.kernels import memory_s
    from topo.training.operators import expert_rows
    model, gpu = load_model("gpt-oss-120b"), gpu_compute("GB200")
    lay = make_layout(ep=64, dp=64, global_batch=1280, micro_batch=4, seq_len=4096, etp=1, ep_dispatcher="deepep")
    rows, h, up = expert_rows(model, lay) * model.moe.experts / 64, 2880, 2 * 2880
    ops = {op.name: op for op in block_ops(model, lay, "E")}
    assert "expert_bias_weighted" not in ops
    fwd, bwd = ops["expert_bias_weighted_fp32"], ops["expert_bias_weighted_fp32_grad"]
    assert fwd.bytes == pytest.approx(28 * rows * h) and bwd.bytes == pytest.approx(40 * rows * h)
    assert (fwd.launches, bwd.launches) == (2 * 2 + 2, 2 * 6 + 3)
    km = gpu.kernels
    assert op_time_s(fwd, gpu, "bf16") == pytest.approx(memory_s(km, 28 * rows * h) + km.launch_gpu_s * 6)
    assert op_time_s(bwd, gpu, "bf16", backward=True) == pytest.approx(
        memory_s(km, 40 * rows * h) + km.launch_gpu_s * 15)
    # the all-to-all dispatcher keeps the router's bf16 probabilities: 12 and 16 bytes
    a2a = {op.name: op for op in block_ops(model, lay.model_copy(update={"ep_dispatcher": "alltoall"}), "E")}
    assert a2a["expert_bias_weighted"].bytes * 28 / 12 == pytest.approx(fwd.bytes)
    # AutoModel's unweighted fc1 add (``t + b``, both bf16) is not promoted
    auto = {op.name: op for op in block_ops(model, lay.model_copy(update={"expert_bias_eager": "fc1_fc2"}), "E")}
    assert auto["expert_bias_plain"].bytes == pytest.approx(2 * 4 * rows * up)
    assert auto["expert_bias_weighted_fp32"].bytes == pytest.approx(fwd.bytes)


def test_an_unknown_expert_bias_path_is_refused():
    with pytest.raises(Exception, match="expert_bias_eager"):
        make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=4096, expert_bias_eager="fc1")


def test_dualpipe_without_overlap_ep_says_its_all_to_alls_are_exposed(qwen, h100_fabric):
    """misc46's finding: DualPipe's point is to hide each chunk pair's all-to-alls (DeepSeek-V3 report, arXiv
    2412.19437 sec. 3.2.1), but topo hides them only with overlap_ep: without it the step says they are exposed
    whole, and the exposed EP time is the one without overlap."""
    base = dict(pp=2, dp=8, ep=8, global_batch=64, seq_len=4096, pipeline_schedule="dualpipe")
    bare = estimate_step(h100_fabric, qwen, make_layout(**base))
    over = estimate_step(h100_fabric, qwen, make_layout(**base, overlap_ep=True))
    note = "dualpipe without overlap_ep"
    assert any(n.startswith(note) for n in bare.notes) and not any(n.startswith(note) for n in over.notes)
    assert bare.breakdown_s["ep"] > over.breakdown_s["ep"]
    flat = estimate_step(h100_fabric, qwen, make_layout(**{**base, "pipeline_schedule": "1f1b"}))
    assert not any(n.startswith(note) for n in flat.notes)
