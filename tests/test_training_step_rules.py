"""The step's overlap and traffic rules that issue 29's audit found wrong, and the one step-time formula the step
and the layout search share (issue 30): each test fails on the code before the fix."""

from pathlib import Path

import pytest

import topo
from topo.training.comm_sms import reduced_gpu, sm_loss_s
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import stage_compute
from topo.training.parallel import make_layout
from topo.training.step import REPLICATED_GRADS_PHASE, ROUTER_PHASE, _is_ep_a2a, estimate_step, step_breakdown, step_traffic


@pytest.fixture(scope="module")
def fab():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_expert_all_to_all_carries_each_rank_its_own_tokens():
    """Megatron-Core's all-to-all dispatcher sends each rank's own tokens (b s / (cp tp), top-k copies) across the
    EP group, then the expert-tensor-parallel ranks all-gather what they received over ETP (and reduce-scatter
    it back in the combine): the all-to-all does not grow with etp."""
    m = load_model("mixtral-8x7b")
    base = dict(tp=4, dp=2, global_batch=16, seq_len=4096)
    size = {}
    for etp in (1, 4):
        lay = make_layout(ep=2 if etp == 4 else 8, etp=etp, moe_imbalance=1.0, **base)  # the mean rank's load
        items = step_traffic(m, lay)
        a2a = [it for it in items if _is_ep_a2a(it)]
        size[etp] = a2a[0]["size_bytes"]
        tokens = 4096 / 4  # b s / tp, micro-batch 1
        assert size[etp] == pytest.approx(tokens * 2 * 4096 * 2)  # top-2 copies x hidden x 2 bytes
        gathers = [it for it in items if it["groups"] == "etp"]
        if etp == 1:
            assert not gathers
        else:  # dispatch all-gather and combine reduce-scatter over the 4 ETP ranks, forward and backward
            assert {it["collective"] for it in gathers} == {"all_gather", "reduce_scatter"}
            assert all(it["size_bytes"] == pytest.approx(4 * size[etp]) for it in gathers)
            assert sum(it["calls"] for it in gathers) == sum(it["calls"] for it in a2a)
    assert size[1] == size[4]
    # the routed experts' gather replaces the sequence-parallel one: an MoE block is no TP block (no shared expert)
    lay = make_layout(ep=2, etp=4, **base)
    # (the router's token-count all-reduce over TP, one a MoE forward, is no block exchange: counted apart)
    tp_calls = sum(it["calls"] for it in step_traffic(m, lay) if it["dim"] == "tp" and it["phase"] != ROUTER_PHASE
                   and not it.get("what", "").startswith("head")
                   and it["phase"] != REPLICATED_GRADS_PHASE)  # the once-a-step replicated gradients (tidy76)
    dense_blocks = m.layers  # Mixtral: one attention block per layer, every MLP an MoE
    # AG + RS forward; backward the output gradient's AG, the input's AG again (for the weight gradient) and RS
    assert tp_calls == (2 + 3) * dense_blocks * lay.microbatches


def test_prediction_interval_is_what_the_error_allows_either_way():
    """Errors are (predicted - measured) / measured: a prediction p90 too fast stands for a measured step of
    predicted / (1 - p90), one p90 too slow for predicted / (1 + p90)."""
    from topo.training.uncertainty import step_interval
    m = load_model("qwen3-30b-a3b")
    u = step_interval(m, "fp8", 10.0)
    assert u["group"] == "moe_fine" and 0 < u["p50"] <= u["p90"] < 1
    assert u["low_s"] == pytest.approx(10.0 / (1 + u["p90"])) and u["high_s"] == pytest.approx(10.0 / (1 - u["p90"]))


def test_interval_names_its_group_as_the_accuracy_table_does():
    """The interval's group label is the README accuracy table's row name (walk7: it printed "moe fine")."""
    from topo.training.uncertainty import step_interval
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for name, precision, label in (("qwen3-30b-a3b", "fp8", "fine-grained MoE"), ("llama3-8b", "bf16", "dense BF16"),
                                   ("llama3-8b", "fp8", "dense FP8")):
        u = step_interval(load_model(name), precision, 1.0)
        assert u["label"] == label and f"| {label} |" in readme


def test_backward_tp_traffic_hides_behind_weight_gradients(fab):
    """With TP overlap off, Transformer Engine still overlaps the column-parallel layer's backward all-gather
    (its input again) and reduce-scatter (its input gradient) with the dgrad / wgrad GEMMs (``async_op=True``,
    NVIDIA/TransformerEngine@d0067d0d layernorm_linear.py lines 787-790, 904-907): the forward's TP traffic is
    exposed. The row-parallel layer's output gradient is gathered synchronously before its dgrad GEMM (base.py
    ``grad_output_preprocess``, lines 1702-1709): exposed whole. The gather is waited before the layer's wgrad GEMM
    (line 985) and the reduce-scatter after it (line 1128): each hides behind its own layer's GEMM only, block kind
    by block kind (``sc.tp_pairs``: the gather beside ``ag_dgrad``, the reduce-scatter beside ``ag_wgrad``), not
    behind the stage's weight-gradient GEMMs pooled (the rule before tpsm99, which hid all of both here), and their
    NCCL kernels' SMs and HBM traffic slow that GEMM (:func:`topo.training.comm_sms.sm_loss_s` on the reduced GPU).
    The heads' exchanges draw on the pooled window less the column-parallel layers' wgrad GEMMs."""
    m = load_model("llama3-70b")
    lay = make_layout(tp=8, pp=4, dp=2, global_batch=16, seq_len=4096)
    r = estimate_step(fab, m, lay, contention=False)
    tp = [c for c in r.comm if c.dim == "tp" and not c.what.startswith("head")  # the stage's heads: apart
          and c.what != "replicated gradients"]  # and the once-a-step replicated gradients (tidy76)
    total = sum(c.time_s for c in tp)
    # forward: an all-gather and a reduce-scatter per block; backward two all-gathers (the output gradient; the
    # input again, for the weight gradient) and a reduce-scatter
    assert [c.collective for c in tp] == ["all_gather", "reduce_scatter", "all_gather", "all_gather",
                                          "reduce_scatter"]
    forward = sum(c.time_s for c in tp[:2])
    assert [c.what for c in tp[2:]] == ["output gradient", "input again, for wgrad", "input gradient"]
    assert tp[2].exposed_s == pytest.approx(tp[2].time_s) and tp[2].phase == "backward"  # blocking
    output_grad = tp[2].time_s
    backward = total - forward - output_grad
    assert forward <= r.breakdown_s["tp"] < total
    gpu = gpu_compute("H100")
    sc = stage_compute(m, lay, gpu)
    # the window: the weight-gradient GEMMs of the busiest stage, half of each weight GEMM's backward (by hand:
    # every GEMM of these blocks has a weight; fused attention and norms have none)
    # (each backward as the layout prices it: op_passes_s, its weight gradient added into the layout's main_grad)
    from topo.training.operators import block_ops, op_passes_s, pipeline_units
    units = pipeline_units(m, lay)[sc.busiest]
    kinds = [k for u in units for k in ([u] if u in ("embedding", "logits") else u)]
    wgrad = sum(op_passes_s(o, gpu, lay)[1] / 2 for k in kinds for o in block_ops(m, lay, k)
                if o.kind == "gemm")
    assert sc.wgrad_s == pytest.approx(wgrad, rel=1e-9) and 0 < sc.wgrad_s < sc.backward_s / 2
    # the last stage's output layer (step._head_traffic): its input's forward all-gather blocks; its backward
    # all-gather and reduce-scatter run beside its own dgrad / wgrad GEMMs (tpmla103: Megatron's
    # LinearWithGradAccumulationAndAsyncCommunication), exposing what outlasts them and their SMs' cost
    heads = [c for c in r.comm if c.dim == "tp" and c.what.startswith("head")]
    beside = [c for c in heads if c.what.endswith(("for wgrad", "input gradient"))]
    blocking = sum(c.time_s for c in heads) - sum(c.time_s for c in beside)
    assert [c.what for c in heads] == ["head: output layer input", "head: output layer input again, for wgrad",
                                       "head: output layer input gradient", "head: loss, max logit",
                                       "head: loss, target logit and sum of exponentials"]
    # the replicated gradients' all-reduce, once a step after the backward, blocking (tidy76): exposed whole
    (grads,) = [c.time_s for c in r.comm if c.what == "replicated gradients"]
    from topo.training.comm_sms import comm_hbm_Bps, moved_Bps, nccl_sms
    m_ = lay.microbatches
    layers = []
    for c, pair in ((tp[3], "ag_dgrad"), (tp[4], "ag_wgrad")):
        pairs = sc.tp_pairs[pair]
        one, blocks = c.time_s / c.calls_per_step, sum(n for _, n in pairs)
        own = c.calls_per_step * sum(n * max(0.0, one - g) for g, n in pairs) / blocks  # each beside its own GEMM
        # the NCCL kernels beside it: the profile's 16 channels' SMs, and their HBM traffic (to 1%, as the step)
        hbm = round(comm_hbm_Bps(moved_Bps(c.collective, c.size_bytes, c.group_size, one)) / gpu.hbm_Bps, 2)
        slow = stage_compute(m, lay, reduced_gpu(gpu, nccl_sms(16), hbm * gpu.hbm_Bps))
        g_full, g_slow = (sum(g * n for g, n in x.tp_pairs[pair]) for x in (sc, slow))
        assert c.exposed_s == pytest.approx(own + sm_loss_s(c.time_s - own, g_full, g_slow), rel=1e-9)
        layers.append(own)
    # the attention blocks' QKV dgrad GEMM is shorter than the gather: its excess exposed, which the stage's pooled
    # weight-gradient GEMMs (the old rule) would have hidden
    assert layers[0] > 0 and backward < m_ * sc.wgrad_s
    for c, pair in zip(beside, ("head_dgrad", "head_wgrad")):  # the paced stage holds the output layer
        ((g, _),) = sc.tp_pairs[pair]
        assert c.exposed_s >= c.calls_per_step * max(0.0, c.time_s / c.calls_per_step - g)
    assert r.breakdown_s["tp"] == pytest.approx(forward + output_grad + blocking + grads + tp[3].exposed_s
                                                + tp[4].exposed_s + sum(c.exposed_s for c in beside))
    on = estimate_step(fab, m, lay.model_copy(update={"overlap_tp": True}), contention=False)
    assert on.breakdown_s["tp"] < r.breakdown_s["tp"]


def test_cp_exchange_hides_behind_the_attention_kernels(fab):
    """Ring attention's K/V exchange hides behind the fused attention's forward and backward seconds."""
    m = load_model("llama3-8b")
    lay = make_layout(cp=8, dp=2, global_batch=8, seq_len=65536)
    r = estimate_step(fab, m, lay, contention=False)
    sc = stage_compute(m, lay, gpu_compute("H100"))
    total = sum(c.time_s for c in r.comm if c.dim == "cp")
    assert total > 0
    rule = max(0.0, total - lay.microbatches * sc.attention_s)
    # the hidden sends hold NCCL's 16 channels' SMs of 132 (topo.training.comm_sms): the attention loses 16/132
    slow = stage_compute(m, lay, reduced_gpu(gpu_compute("H100"), 16))
    assert r.breakdown_s["cp"] == pytest.approx(rule + sm_loss_s(total - rule, sc.attention_s, slow.attention_s))
    # attention kernels lose 16/132 of their rate (their fixed launch gaps nothing)
    assert sm_loss_s(total - rule, sc.attention_s, slow.attention_s) == pytest.approx((total - rule) * 16 / 132,
                                                                                       rel=0.01)
    off = estimate_step(fab, m, lay.model_copy(update={"overlap_cp": False}), contention=False)
    assert off.breakdown_s["cp"] == pytest.approx(total)


@pytest.mark.parametrize("schedule", ["1f1b", "dualpipe"])
def test_step_and_search_bound_share_one_formula(fab, schedule):
    """The step time is step_breakdown's sum, and the search's bound (the same formula with floors for the
    exposed traffic) never exceeds it, DualPipe's bubble included (the bound once assumed 1F1B's)."""
    from topo.training.search import _bound

    m = load_model("llama3-8b")
    lay = make_layout(pp=8, dp=2, global_batch=64, seq_len=4096, pipeline_schedule=schedule)
    r = estimate_step(fab, m, lay, contention=False)
    sc = stage_compute(m, lay, gpu_compute("H100"))
    ex = {k: r.breakdown_s[k] for k in ("tp", "cp", "pp", "dp", "ep")}
    parts = step_breakdown(lay, sc, ex, r.breakdown_s["optimizer"])
    assert parts == pytest.approx(r.breakdown_s) and sum(parts.values()) == pytest.approx(r.step_time_s)
    assert _bound(lay, sc, 0.0, 0.0) <= r.step_time_s
    if schedule == "dualpipe":
        assert _bound(lay, sc, 0.0, 0.0) == pytest.approx(lay.microbatches * sc.microbatch_s + 3 * sc.forward_s)


def test_nvl72_jobs_take_64_of_each_rack_by_default():
    """Production recipes run 64 of each NVL72 rack's 72 GPUs (Megatron-Bridge's GB200 recipes), so that power-of-two
    TP/EP/DP groups stay inside a rack; the step says so, a layout that names gpus_per_domain_used keeps it, and a
    job larger than 64 per rack uses them all and says that too."""
    f = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=8"]))  # 8 racks, 576 GPUs
    m = load_model("llama3-8b")
    r = estimate_step(f, m, make_layout(tp=8, dp=64, global_batch=128, seq_len=4096), contention=False)
    assert r.layout["gpus_per_domain_used"] == 64 and any("64 of each 72-GPU" in n for n in r.notes)
    ep = [c for c in r.comm if c.dim == "tp"]
    assert all(c.domains_per_group == 1 for c in ep)
    full = estimate_step(f, m, make_layout(tp=8, dp=64, global_batch=128, seq_len=4096, gpus_per_domain_used=72),
                         contention=False)
    assert full.layout["gpus_per_domain_used"] == 72 and not any("placement" in n for n in full.notes)
    big = estimate_step(f, m, make_layout(tp=8, dp=72, global_batch=144, seq_len=4096), contention=False)
    assert big.layout["gpus_per_domain_used"] == 72 and any("every GPU of the 72-GPU" in n for n in big.notes)
