"""A training step: the engine adapter, the breakdown, the bubble and the overlap rules."""

import math

import numpy as np
import pytest

import topo
from topo.engine.estimate import estimate
from topo.training.comm import CommEngine
from topo.training.parallel import make_layout
from topo.training.model import load_model
from topo.training.search import search_layouts
from topo.training.step import estimate_step


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))  # 1,024 H100, rail-optimized NDR


def test_adapter_matches_the_engine(fabric):
    # the cached size grid, interpolated, against the exact engine call (all groups at once)
    ids = np.arange(1024).reshape(8, 16, 8).transpose(0, 2, 1).reshape(-1, 16)
    eng = CommEngine(fabric)
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        for size in (3.7e5, 1.23e8, 5.5e9):
            got = eng.time(coll, ids, size).time_s
            exact = estimate(fabric, coll, [int(size)], ranks=ids.ravel(), groups=ids.shape[0],
                             group_layout="blocked", rank_order="given").results[0].time_s
            assert got == pytest.approx(exact, rel=0.01)
    calls = eng.engine_calls
    eng.time("all_reduce", ids, 7e7)
    assert eng.engine_calls == calls  # cached per (collective, group matrix)


def test_breakdown_adds_up_and_bubble(fabric):
    m = load_model("llama3-70b")
    lay = make_layout(tp=8, pp=4, dp=32, vpp=2, global_batch=256, overlap_pp=True)
    r = estimate_step(fabric, m, lay)
    assert r.step_time_s == pytest.approx(sum(r.breakdown_s.values()))
    mcount = lay.microbatches
    per_mb = (r.breakdown_s["compute"] + r.breakdown_s["tp"] + r.breakdown_s["cp"] + r.breakdown_s["ep"]) / mcount
    # Narayanan et al. 2021: bubble = (p - 1) / v micro-batch times = (p - 1)/(m v) of the ideal time
    assert r.breakdown_s["bubble"] == pytest.approx((4 - 1) / 2 * per_mb)
    assert r.tokens_per_s == pytest.approx(256 * m.seq_len / r.step_time_s)
    assert r.mfu == pytest.approx(r.tflop_per_s_per_gpu / 989)
    no_pp = estimate_step(fabric, m, make_layout(tp=8, dp=128, global_batch=256))
    assert no_pp.breakdown_s["bubble"] == 0 and no_pp.breakdown_s["pp"] == 0


def test_overlap_rules_switch(fabric):
    m = load_model("llama3-8b")
    on = estimate_step(fabric, m, make_layout(tp=2, dp=512, global_batch=512, dp_sharding="none"))
    off = estimate_step(fabric, m, make_layout(tp=2, dp=512, global_batch=512, dp_sharding="none", overlap_dp=False))
    dp = next(c for c in off.comm if c.dim == "dp")
    assert off.breakdown_s["dp"] == pytest.approx(dp.time_s)  # not overlapped: the whole all-reduce
    assert on.breakdown_s["dp"] < off.breakdown_s["dp"]
    tp_on = estimate_step(fabric, m, make_layout(tp=2, dp=512, global_batch=512, overlap_tp=True))
    assert tp_on.breakdown_s["tp"] < on.breakdown_s["tp"]


def test_dp_bound_by_network_tp_by_nvlink(fabric):
    r = estimate_step(fabric, load_model("llama3-70b"), make_layout(tp=8, dp=128, global_batch=256))
    b = r.bound_by()
    assert b["tp"]["level"] == "nvlink"
    assert b["dp"]["level"] != "nvlink"


def test_search_ranks_fitting_layouts(fabric):
    res = search_layouts(fabric, load_model("llama3-70b"), 1024, 512, max_layouts=40)
    times = [r.step_time_s for r in res.ranked]
    assert times == sorted(times) and len(times) > 5
    assert all(r.fits for r in res.ranked)
    assert res.engine_calls < len(res.ranked) * 3  # the cache shares group matrices between layouts


def test_model_that_fits_nowhere(fabric):
    with pytest.raises(topo.TopoError) as e:
        search_layouts(fabric, load_model("gpt4-1.8t-moe"), 8, 8)
    assert e.value.key == "model" and "GB more than" in e.value.message


def test_message_sizes_ep_cp_tp(fabric):
    # EP: each rank sends its tokens x top-k x hidden x 2 bytes per all-to-all, 4 per MoE layer (dispatch and
    # combine, forward and backward); the busiest stage of 61 layers over 16 stages holds 4 MoE layers
    m = load_model("deepseek-v3-671b")
    lay = make_layout(pp=16, dp=64, ep=64, global_batch=1024, moe_imbalance=1.0)  # the mean rank's load
    r = estimate_step(fabric, m, lay)
    ep = next(c for c in r.comm if c.dim == "ep")
    # Megatron-Core's all-to-all dispatcher sends one row per token and routed expert, node-limited routing or
    # not ("for dropless training, output size is static (num_tokens * topk)", NVIDIA/Megatron-LM@d98e8a64dd
    # megatron/core/transformer/moe/token_dispatcher.py): 8 copies of each token
    assert m.moe.max_nodes_per_token == 4
    assert ep.size_bytes == m.seq_len * 8 * m.hidden * 2
    assert ep.calls_per_step == lay.microbatches * 4 * 4
    assert ep.group_size == 64 and ep.num_groups == 16
    # DeepEP's internode kernels send a token once per destination node, at most 4 with node-limited routing
    # (DeepSeek-V3 sec. 2.1.2): the router keeps 4 of the 8 nodes (32 experts each) and takes its 8 distinct experts
    # inside them, a kept node possibly getting none: E[min(4, D)], D the distinct nodes of 8 distinct experts of
    # 256, P(D = d) = C(8, d) sum_i (-1)^i C(d, i) C(32 (d - i), 8) / C(256, 8) (inclusion-exclusion): 3.983 copies
    law = [math.comb(8, d) * sum((-1) ** i * math.comb(d, i) * math.comb(32 * (d - i), 8) for i in range(d + 1))
           for d in range(9)]
    copies = sum(min(d, 4) * w for d, w in enumerate(law)) / math.comb(256, 8)
    assert copies == pytest.approx(3.9831, abs=1e-4)
    deep = estimate_step(fabric, m, lay.model_copy(update={"ep_dispatcher": "deepep"}))
    assert next(c for c in deep.comm if c.dim == "ep").size_bytes == pytest.approx(m.seq_len * copies * m.hidden * 2)
    assert not any(c.dim == "dp_experts" for c in r.comm)  # dp / ep = 1: nothing to reduce over
    # CP (Llama 3 405B, GQA, as Meta ran it: arXiv 2407.21783 sec. 3.3.2): all-gather of the full sequence's K and
    # V, this TP rank's KV heads
    m = load_model("llama3-405b")
    lay = make_layout(tp=8, cp=16, pp=8, global_batch=8, seq_len=131072, cp_comm_type="all_gather")
    r = estimate_step(fabric, m, lay, check=False)
    cp = [c for c in r.comm if c.dim == "cp"]
    assert {c.collective for c in cp} == {"all_gather", "reduce_scatter"}
    assert cp[0].size_bytes == 131072 * 2 * (8 // 8) * 128 * 2
    # ring attention (the default, Transformer Engine's p2p): each send one rank's s / cp tokens of K and V,
    # backward K/V and dK/dV together
    ring = [c for c in estimate_step(fabric, m, lay.model_copy(update={"cp_comm_type": "p2p"}), check=False).comm
            if c.dim == "cp"]
    chunk = 131072 / 16 * 2 * 128 * 2
    assert [c.collective for c in ring] == ["sendrecv"] * 3
    assert [c.size_bytes for c in ring] == [chunk, 2 * chunk, chunk]
    # TP with sequence parallelism, per layer (attention and MLP blocks) of the layer's activations: an all-gather
    # and a reduce-scatter per block forward; backward two all-gathers (the output gradient; the input again for
    # the weight gradient) and a reduce-scatter
    tp = [c for c in r.comm if c.dim == "tp" and not c.what.startswith("head")  # the stage's heads: apart
          and c.what != "replicated gradients"]  # and the once-a-step replicated gradients (tidy76)
    assert tp[0].size_bytes == 131072 / 16 * m.hidden * 2
    assert sum(c.calls_per_step for c in tp) == lay.microbatches * 16 * 2 * (2 + 3)


def test_precision_and_time_to_train(fabric):
    m = load_model("llama3-8b")
    bf16 = estimate_step(fabric, m, make_layout(tp=8, dp=128, global_batch=256))
    fp8 = estimate_step(fabric, m, make_layout(tp=8, dp=128, global_batch=256, precision="fp8"))
    # H100 dense peaks (data/reference/planner.md): BF16 989, FP8 1,979 TFLOP/s; MFU is against the one used
    assert bf16.peak_flop_per_s_per_gpu == 989e12 and fp8.peak_flop_per_s_per_gpu == 1979e12
    # FP8 runs the linear layers' GEMMs only (issue 20): faster than BF16, far from twice as fast, and the
    # attention core and the norms take exactly as long
    assert bf16.breakdown_s["compute"] * 989 / 1979 < fp8.breakdown_s["compute"] < bf16.breakdown_s["compute"]
    for module in ("core_attn", "layernorm"):
        assert fp8.compute_by_module_s[module] == pytest.approx(bf16.compute_by_module_s[module])
    assert bf16.time_to_train_s(15e12) == pytest.approx(15e12 / bf16.tokens_per_s)
    frame = bf16.to_frame()
    assert frame["time_s"].sum() == pytest.approx(bf16.step_time_s) and frame["share"].sum() == pytest.approx(1)
    a100 = topo.build_fabric(topo.load_spec("dgx-a100-superpod"))
    with pytest.raises(topo.TopoError) as e:
        estimate_step(a100, m, make_layout(tp=8, dp=8, global_batch=64, precision="fp8"))
    assert e.value.key == "precision"
