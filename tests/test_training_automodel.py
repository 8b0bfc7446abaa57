"""NeMo AutoModel's MoE runs as they ran (issue 29): its benchmark gate's expert placement, FSDP2 keeping gathered
weights from forward to backward under pipeline parallelism, its dense and expert reductions in their own dtypes,
and its rows' settings read from its code (NVIDIA-NeMo/Automodel@ce005dd)."""

import math

import pytest
from published_setups import published_setups

from topo.errors import TopoError
from topo.training.mapping import default_placement
from topo.training.memory import memory_per_gpu, stage_params, units_holding
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout
from topo.training.routing import consecutive_destinations, spread_destinations
from topo.training.step import ep_copies, step_traffic


def test_consecutive_routing_closed_forms():
    """AutoModel's FakeBalancedGate gives token t the experts (t k + i) mod E, i < k (Automodel@ce005dd
    nemo_automodel/components/moe/layers.py); experts sit in contiguous blocks of E / ep per rank. The distinct
    destinations, by hand:"""
    # DeepSeek-V3 on EP64 (256 experts, top-8, 4 per GPU, 32 per 8-GPU node): a start t*8 is 8-aligned, so the
    # 8 experts are exactly two GPUs' and always inside one node's 32
    assert consecutive_destinations(256, 8, 4) == 2.0
    assert consecutive_destinations(256, 8, 32) == 1.0
    # Qwen3-30B-A3B on EP8 (128 experts, top-8, 16 per GPU): one GPU per token
    assert consecutive_destinations(128, 8, 16) == 1.0
    # Kimi K2 on EP32 (384 experts, 12 per GPU): starts 0, 8, 4 (mod 12) repeat: 1, 2 and 1 GPUs
    assert consecutive_destinations(384, 8, 12) == pytest.approx(4 / 3)
    # Nemotron 3 Nano on EP8 (128 experts, top-6, 16 per GPU): starts run over the even offsets; a block of 6
    # crosses a GPU's 16 from offsets 12 and 14, two of eight (126, 127, 0, ... wraps onto GPU 0 likewise)
    assert consecutive_destinations(128, 6, 16) == pytest.approx(1.25)
    # the uniform spread of a learned router: k distinct experts (torch.topk), so a GPU of E/N is missed with
    # probability C(E - E/N, k) / C(E, k), not (1 - 1/N)^k: N (1 - C(E - E/N, k) / C(E, k))
    assert spread_destinations((16,) * 8, 8) == pytest.approx(_distinct(8, 16, 8))
    # Nemotron 3 Nano's 128 experts, top-6, over 16 ranks: 5.224, 1.7% above the 5.137 of repeatable draws
    assert spread_destinations((8,) * 16, 6) == pytest.approx(_distinct(16, 8, 6))
    assert _distinct(16, 8, 6) / (16 * (1 - (15 / 16) ** 6)) == pytest.approx(1.017, abs=5e-4)


def _distinct(n: int, per: int, k: int) -> float:
    """Expected distinct destinations of k distinct experts drawn uniformly from n destinations of ``per`` each
    (torch.topk picks distinct experts: NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/moe_utils.py
    topk_routing_with_score_function): n (1 - C(E - per, k) / C(E, k)), E = n per."""
    return n * (1 - math.comb(n * per - per, k) / math.comb(n * per, k))


def _limited(n: int, per: int, k: int, m: int) -> float:
    """E[min(m, D)] for node-limited routing whose group score is its best expert's (DeepEP's
    tests/test_internode.py at 567632dd: amax; module doc of topo.training.routing): D's law by inclusion-exclusion,
    P(D = d) = C(n, d) sum_i (-1)^i C(d, i) C((d - i) per, k) / C(n per, k)."""
    cover = [math.comb(n, d) * sum((-1) ** i * math.comb(d, i) * math.comb((d - i) * per, k) for i in range(d + 1))
             for d in range(n + 1)]
    return sum(min(d, m) * c for d, c in enumerate(cover)) / math.comb(n * per, k)


def test_deepep_copies_follow_the_routing():
    ds, qwen = load_model("deepseek-v3-671b"), load_model("qwen3-30b-a3b")
    ep64 = default_placement(make_layout(pp=4, dp=64, ep=64, etp=1, global_batch=64, ep_dispatcher="deepep"),
                             8, 256)[0]
    gate = ep64.model_copy(update={"moe_routing": "consecutive"})
    # DeepSeek-V3's 256 experts, top-8, over 8 nodes of 32: 5.295 distinct nodes unlimited; node-limited to 4
    # (arXiv 2412.19437 sec. 2.1.2) the router keeps 4 nodes, and a kept node may still get none of the top 8:
    # E[min(4, D)] = 3.983, not min(5.25, 4) = 4
    assert ep_copies(ds, ep64) == pytest.approx(_limited(8, 32, 8, 4))
    assert _limited(8, 32, 8, 4) == pytest.approx(3.9831, abs=1e-4)
    assert ep_copies(ds.model_copy(update={"moe": ds.moe.model_copy(update={"max_nodes_per_token": None})}),
                     ep64) == pytest.approx(_distinct(8, 32, 8))
    # the same 256 experts over 64 ranks in one NVLink domain: 64 (1 - C(252, 8) / C(256, 8)) = 7.625 ranks
    nvl = ep64.model_copy(update={"gpus_per_domain_used": 64})
    assert ep_copies(ds, nvl) == pytest.approx(_distinct(64, 4, 8))
    assert ep_copies(ds, gate) == 1.0  # one node per token under the benchmark gate
    ep8 = default_placement(make_layout(dp=8, ep=8, etp=1, global_batch=8, ep_dispatcher="deepep"), 8, 8)[0]
    assert ep_copies(qwen, ep8) == pytest.approx(_distinct(8, 16, 8))
    assert ep_copies(qwen, ep8.model_copy(update={"moe_routing": "consecutive"})) == 1.0
    # Megatron's all-to-all sends one copy per (token, expert) pair whatever the placement
    a2a = gate.model_copy(update={"ep_dispatcher": "alltoall"})
    assert ep_copies(qwen, a2a.model_copy(update={"ep": 64})) == 8.0
    # the dispatch the step carries: tokens x copies x hidden x 2 bytes
    ep_item = [t for t in step_traffic(ds, gate.model_copy(update={"seq_len": 4096})) if t["dim"] == "ep"][0]
    assert ep_item["size_bytes"] == 4096 * 1.0 * ds.hidden * 2


def _ds_fsdp(**kw):
    return make_layout(pp=4, vpp=8, dp=256, ep=64, etp=1, global_batch=8192, seq_len=4096, dp_sharding="zero3",
                       pipeline_embedding=True, **kw)


def test_fsdp_kept_weights_gather_once_per_microbatch():
    """PyTorch FSDP2 with ``reshard_after_forward = False`` (AutoModel's setting under PP) keeps each unit's gathered
    weights from its forward to its backward: one all-gather per unit and micro-batch, not two, and the stage's
    whole gathered weights in memory meanwhile (instead of the two units computing and prefetched)."""
    ds = load_model("deepseek-v3-671b")
    lay, kept = _ds_fsdp(), _ds_fsdp(fsdp_reshard_after_forward=False)
    rows = stage_params(ds, lay)
    i = max(range(len(rows)), key=lambda k: rows[k][0] + rows[k][1])
    nd, ne = units_holding(ds, lay)[i]
    m = lay.microbatches

    def gathers(x):
        return {t["groups"]: t for t in step_traffic(ds, x) if t["dim"] == "dp" and t["collective"] == "all_gather"}

    g2, g1 = gathers(lay), gathers(kept)
    assert (g2["dpcp"]["calls"], g1["dpcp"]["calls"]) == (2 * m * nd, m * nd)
    assert (g2["edp"]["calls"], g1["edp"]["calls"]) == (2 * m * ne, m * ne)
    assert g1["dpcp"]["size_bytes"] == g2["dpcp"]["size_bytes"]
    reduces = [t for t in step_traffic(ds, kept) if t["collective"] == "reduce_scatter" and t["dim"] == "dp"]
    assert {t["calls"] for t in reduces} == {m * nd, m * ne}  # still reduced every micro-batch
    cap = 85.5e9  # the stage memory_per_gpu reports: its two largest units' bf16, or all of its weights
    two = memory_per_gpu(ds, lay, cap)
    assert two.buffers_bytes == pytest.approx(2 * rows[two.stage][2] * 2)
    held = memory_per_gpu(ds, kept, cap)
    assert held.buffers_bytes == pytest.approx((rows[held.stage][0] + rows[held.stage][1]) * 2)
    assert held.buffers_bytes > 3 * two.buffers_bytes  # 16 layers and the embedding against two units


def test_kept_weights_need_fsdp():
    ds = load_model("deepseek-v3-671b")
    with pytest.raises(TopoError) as e:
        check_layout(ds, _ds_fsdp(fsdp_reshard_after_forward=False).model_copy(update={"dp_sharding": "zero1"}))
    assert e.value.key == "fsdp_reshard_after_forward" and "zero1" in e.value.message


def test_experts_reduce_in_their_own_dtype():
    """AutoModel's FSDP2 reduces the dense weights in fp32 (MixedPrecisionPolicy reduce_dtype) and the experts,
    sharded without that policy, in bf16: the two reductions' sizes differ by 4 / 2 per parameter."""
    ds = load_model("deepseek-v3-671b")
    base = _ds_fsdp(grad_reduce_bytes=4.0)
    split = _ds_fsdp(grad_reduce_bytes=4.0, expert_grad_reduce_bytes=2.0)

    def rs(x):
        return {t["groups"]: t["size_bytes"] for t in step_traffic(ds, x)
                if t["dim"] == "dp" and t["collective"] == "reduce_scatter"}

    assert rs(split)["dpcp"] == rs(base)["dpcp"]
    assert rs(split)["edp"] * 2 == pytest.approx(rs(base)["edp"])
    assert base.expert_reduce_bytes == 4.0 and split.expert_reduce_bytes == 2.0


def test_automodel_rows_read_as_its_code_runs():
    """The AutoModel rows of the accuracy benchmark: bf16 parameters (initialize_weights casts to bf16), Adam's
    moments in that dtype, the benchmark gate, FSDP2 keeping gathered weights under PP only; Llama 3 70B with the
    published config's activation checkpointing (Automodel@2013a4dd6)."""
    import sys
    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy

    setups = {s["run"]: s for s in published_setups() if s["run"].startswith("automodel_")}
    rows = {k: s["lay"] for k, s in setups.items()}
    assert len(rows) == 8
    ds, qwen, llama = (rows[k] for k in ("automodel_h100_deepseekv3_1024", "automodel_h100_qwen3_30b",
                                         "automodel_h100_llama3_70b"))
    assert (ds.weight_bytes, ds.grad_bytes, ds.optimizer_bytes_per_param) == (2.0, 2.0, 4.0)
    assert (ds.reduce_bytes, ds.expert_reduce_bytes) == (4.0, 2.0)
    assert ds.moe_routing == "consecutive" and not ds.fsdp_reshard_after_forward
    assert qwen.fsdp_reshard_after_forward  # no PP: FSDP2's default
    # the table's GA column: 4 schedule runs of 8 micro-batches (LBS 8, MBS 1) on 1,024 GPUs, 2 for Kimi K2
    assert (ds.pipeline_flushes, rows["automodel_h100_kimik2"].pipeline_flushes) == (4, 2)
    assert (llama.optimizer_bytes_per_param, llama.reduce_bytes, llama.recompute) == (8.0, 2.0, "full")
    # AutoModel's DeepSeek-V3 class has no MTP module; its split of 61 layers over 32 stages (layers_per_stage 2):
    # 29 stages of two layers, then three of one, the embedding first and the head last
    assert setups["automodel_h100_deepseekv3_1024"]["model"].mtp_layers == 0
    assert ds.pipeline_layout == "E" + "tt|" * 29 + "t|t|tL"
    assert training_accuracy.automodel_pipeline_layout(10, 4) == "Ettt|ttt|tt|ttL"
    # the MoE benchmark configs' MaskedCrossEntropy(fp32_upcast: false): PyTorch's loss on bf16 logits
    assert {rows[k].cross_entropy for k in rows if k != "automodel_h100_llama3_70b"} == {"torch_bf16"}
    assert llama.cross_entropy == "fused"  # its config keeps fp32_upcast's default (True): not modelled apart
    # Nemotron 3 Nano's mixer hands its gated norm and out_proj to mamba_ssm's fused function, batch-major
    # (Automodel@08a48f76 components/models/nemotron_v3/layers.py); the Megatron-Bridge Nano rows keep Megatron's
    assert rows["automodel_h100_nemotron3_nano"].mamba_mixer == "mamba_ssm"
    assert ds.mamba_mixer == "megatron"  # no Mamba layers: the default, unused
    mb = [s["lay"] for s in published_setups() if s["run"] == "mb2606_h100_nemotron3_nano"]
    assert mb[0].mamba_mixer == "megatron"


def test_kept_weights_hide_behind_the_forward_only():
    """A unit's one gather per micro-batch is prefetched behind the previous unit's forward; the first of each
    micro-batch cannot hide: ``m (k max(0, g - F / k) + g)`` for ``k`` gathers of ``g`` seconds per pass."""
    from topo.training.step import _dp_exposed
    lay = _ds_fsdp(fsdp_reshard_after_forward=False)
    m, k, g, t_f, t_b = lay.microbatches, 10, 0.05, 0.3, 0.6
    item = {"calls": m * k, "phase": "gather_unit", "groups": "dpcp", "size_bytes": 1e9}
    assert _dp_exposed(None, item, None, g, 1.0, t_f, t_b, k, lay) == pytest.approx(m * (k * (g - t_f / k) + g))
    both = {**item, "calls": 2 * m * k}  # gathered again before the backward: also behind it
    assert _dp_exposed(None, both, None, g, 1.0, t_f, t_b, k, _ds_fsdp()) == pytest.approx(m * (k * (g - t_f / k) + g))
    assert _dp_exposed(None, both, None, 0.08, 1.0, t_f, t_b, k, _ds_fsdp()) == \
        pytest.approx(m * (k * ((0.08 - t_f / k) + (0.08 - t_b / k)) + 0.08))


def test_each_schedule_run_pays_the_bubble():
    """AutoModel runs one pipeline schedule per gradient-accumulation step (benchmark.py: ga_steps schedule.step
    calls, Automodel@ce005dd): the interleaved 1F1B bubble, (p - 1) / v of a micro-batch, is paid that many times,
    and so are the p - 1 pipeline sends of each fill."""
    from topo.training.step import bubble_s
    one = make_layout(pp=4, vpp=8, dp=8, global_batch=256, seq_len=4096)
    four = one.model_copy(update={"pipeline_flushes": 4})
    assert bubble_s(one, 0.1, 1.0) == pytest.approx(3 / 8) and bubble_s(four, 0.1, 1.0) == pytest.approx(4 * 3 / 8)
    ds = load_model("deepseek-v3-671b")

    def sends(x):
        return [t["calls"] for t in step_traffic(ds, x) if t["dim"] == "pp"][0]

    assert sends(four) - sends(one) == 2 * 3 * 3  # three more fills of p - 1 = 3 sends, forward and backward
    check_layout(ds, four)
    with pytest.raises(TopoError) as e:
        check_layout(ds, one.model_copy(update={"pipeline_flushes": 3}))
    assert e.value.key == "pipeline_flushes"
    with pytest.raises(TopoError) as e:  # 32 micro-batches in 16 runs of 2: interleaving needs pp | 2
        check_layout(ds, one.model_copy(update={"pipeline_flushes": 16}))
    assert e.value.key == "global_batch" and "per schedule (2)" in e.value.message


def test_duty_weighted_slowdowns_closed_form():
    """A collective meets the others only while they run: over a 10 s window where EP is busy 4 s and DP 1 s (each
    alone), EP shares links at most 1/10 of its time and DP at most 4/10."""
    from topo.training.step import duty_weighted_slowdowns
    w = duty_weighted_slowdowns({"ep": 2.0, "dp": 3.0}, {"ep": 4.0, "dp": 1.0}, 10.0)
    assert w == pytest.approx({"ep": 1.1, "dp": 1.8})
    assert duty_weighted_slowdowns({"ep": 2.0}, {"ep": 4.0, "dp": 20.0}, 10.0) == {"ep": 2.0}  # capped at all


def test_fsdp_gathers_slow_the_all_to_all_only_while_they_run():
    """AutoModel's DeepSeek-V3 on 256 H100 (PP4 VP8, EP64, FSDP over 64): the dense weights' per-layer gathers share
    the NICs with the expert all-to-all, but they are busy a small part of the steady phase, so the all-to-all's
    slowdown is the mix's weighted by that share, not the mix's whole."""
    import topo
    from topo.training.comm import CommEngine
    from topo.training.mapping import map_layout
    from topo.training.operators import stage_compute
    from topo.training.gpus import gpu_compute
    from topo.training.step import _ep_cover_s, _mix_slowdowns, _timed_traffic, estimate_step

    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    ds = load_model("deepseek-v3-671b")
    lay = make_layout(pp=4, vpp=8, dp=64, ep=64, etp=1, global_batch=512, seq_len=4096, dp_sharding="zero3",
                      recompute="full", ep_dispatcher="deepep", moe_routing="consecutive", weight_bytes=2.0,
                      grad_bytes=2.0, optimizer_bytes_per_param=4.0, grad_reduce_bytes=4.0, fsdp_reshard_after_forward=False,
                      pipeline_embedding=True)
    r = estimate_step(fabric, ds, lay)
    lay_p = default_placement(lay, 8, fabric.layout.num_gpus)[0]
    mapping, engine = map_layout(lay_p, 8, fabric.layout.num_gpus), CommEngine(fabric)
    traffic = step_traffic(ds, lay_p)
    groups = {t["groups"]: mapping.groups(t["groups"]) for t in traffic}
    timed = [(t, engine.time(t["collective"], groups[t["groups"]], t["size_bytes"])) for t in traffic]
    whole = _mix_slowdowns(fabric, timed, groups, engine)
    assert whole["ep"] > 1.5  # all at once, the all-to-all would run at under 2/3 speed
    busy = {}
    for t, one in timed:
        busy[t["dim"]] = busy.get(t["dim"], 0.0) + one.time_s * t["calls"]
    cover = _ep_cover_s(lay_p, _timed_traffic(fabric, ds, lay_p, mapping, engine)[3])  # as estimate_step's
    window = lay.microbatches * stage_compute(ds, lay_p, gpu_compute("H100"), cover).microbatch_s
    f = (sum(busy.values()) - busy["ep"]) / window
    assert 0.05 < f < 0.5
    assert r.contention["ep"] == pytest.approx(1 + (whole["ep"] - 1) * f, rel=1e-6)


def test_the_layout_takes_exactly_the_routings_routing_counts():
    """``moe_routing``'s allowed values are :data:`topo.training.routing.ROUTINGS` (one list, not two), and a value
    outside it is a one-line layout error naming them."""
    from typing import get_args

    from topo.training.parallel import ParallelLayout
    from topo.training.routing import ROUTINGS

    assert get_args(ParallelLayout.model_fields["moe_routing"].annotation) == ROUTINGS
    with pytest.raises(TopoError, match="moe_routing.*'spread' or 'consecutive'.*'bogus'"):
        make_layout(dp=8, ep=8, global_batch=64, moe_routing="bogus")


def test_flex_permutation_counts_the_ranks_the_routing_reaches():
    """The flex dispatcher's permutation reads one copy of each token per receiving rank (Megatron-LM
    docs/discussions/deepseek-v3-gb200-optimization sec. 2.1.1): as many ranks as the all-to-all sends it to. Under
    AutoModel's consecutive gate Qwen3-30B's 8 experts of a token sit on 1 of 8 EP ranks (16 experts each; 8
    divides 16), under spread routing on 8 (1 - C(112, 8) / C(128, 8)) = 5.34: the received bytes differ by exactly that
    ratio."""
    from topo.training.operators import block_ops

    q = load_model("qwen3-30b-a3b")
    base = make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=4096, etp=1, ep_dispatcher="deepep",
                       moe_imbalance=1.0)  # the same load under both routings
    cons = base.model_copy(update={"moe_routing": "consecutive"})
    tokens, h, routed = 4096, q.hidden, 2 * 4096 * 8 * q.hidden

    def permute(lay):
        return {op.name: op for op in block_ops(q, lay, "E")}["permute"].bytes

    assert permute(cons) == pytest.approx(2 * (2 * tokens * h * 1.0 + routed))
    assert permute(base) == pytest.approx(2 * (2 * tokens * h * _distinct(8, 16, 8) + routed))
    assert ep_copies(q, cons) == pytest.approx(1.0)  # the all-to-all's count: the same routing


def test_torch_cross_entropy_on_bf16_logits_closed_form():
    """PyTorch's F.cross_entropy on bf16 logits (pytorch/pytorch aten/src/ATen/native/cuda/SoftMax.cu): a
    131,072-long row is too long for the shared-memory softmax, so cunn_SoftMaxForward reads the row three times
    (max, sum of exponentials, epilogue) and writes it once: 4 x 2 bytes per logit; backward, nll_loss's
    zero-filled gradient (1) and cunn_SoftMaxBackward's row sum, reads of the gradient and output and write (4):
    5 x 2 bytes. Megatron's native fused loss (the default) moves 28.4 bytes forward, 16.5 backward
    (topo/data/compute/cross_entropy.toml [impl.fused], from Liger-Kernel's H100 timing)."""
    from topo.training.gpus import gpu_compute
    from topo.training.kernels import memory_s
    from topo.training.operators import block_ops, op_time_s

    model = load_model("nemotron-3-nano-30b-a3b")
    lay = make_layout(dp=8, ep=8, global_batch=32, micro_batch=4, seq_len=4096)
    T, V = 4 * 4096, 131072
    fused = {o.name: o for o in block_ops(model, lay, "logits")}
    torch_ = {o.name: o for o in block_ops(model, lay.model_copy(update={"cross_entropy": "torch_bf16"}), "logits")}
    assert fused["cross_entropy"].bytes == pytest.approx(28.4 * T * V)
    assert fused["cross_entropy_bwd"].bytes == pytest.approx(16.5 * T * V)
    assert torch_["cross_entropy"].bytes == pytest.approx(8 * T * V)
    assert torch_["cross_entropy_bwd"].bytes == pytest.approx(10 * T * V)
    gpu = gpu_compute("H100")
    km = gpu.kernels
    fwd = op_time_s(torch_["cross_entropy"], gpu, "bf16")
    bwd = op_time_s(torch_["cross_entropy_bwd"], gpu, "bf16", backward=True)
    assert fwd == pytest.approx(memory_s(km, 8 * T * V) + 2 * km.launch_gpu_s)
    assert bwd == pytest.approx(memory_s(km, 10 * T * V) + 3 * km.launch_gpu_s)
    assert op_time_s(torch_["cross_entropy"], gpu, "bf16", backward=True) == 0.0
    native = (op_time_s(fused["cross_entropy"], gpu, "bf16")
              + op_time_s(fused["cross_entropy_bwd"], gpu, "bf16", backward=True))
    assert fwd + bwd < 0.6 * native  # 18 bytes a logit against 32


def test_the_benchmark_gate_computes_no_scores():
    """AutoModel's FakeBalancedGate (fake_balanced_gate: true, routing "consecutive"; Automodel@08a48f76
    components/moe/layers.py) builds its weights as ones / k and its experts as arange(n k) % E: no router GEMM,
    no softmax or top-k, nothing backward; 6 small kernels moving 58 bytes per routed copy. A learned router
    (the uniform spread) keeps its GEMM and top-k kernels."""
    from topo.training.gpus import gpu_compute
    from topo.training.kernels import memory_s
    from topo.training.operators import block_ops, op_time_s

    model = load_model("nemotron-3-nano-30b-a3b")
    lay = make_layout(dp=8, ep=8, global_batch=32, micro_batch=4, seq_len=4096, ep_dispatcher="deepep")
    learned = {o.name for o in block_ops(model, lay, "E")}
    gate = {o.name: o for o in block_ops(model, lay.model_copy(update={"moe_routing": "consecutive"}), "E")}
    assert {"router", "router_topk"} <= learned and "router_fake" not in learned
    assert "router" not in gate and "router_topk" not in gate
    fake = gate["router_fake"]
    assert fake.bytes == pytest.approx(58 * 4 * 4096 * 6) and fake.launches == 6 and fake.flops == 0
    gpu = gpu_compute("H100")
    assert op_time_s(fake, gpu, "bf16", backward=True) == 0.0
    assert op_time_s(fake, gpu, "bf16") == pytest.approx(memory_s(gpu.kernels, fake.bytes)
                                                         + 6 * gpu.kernels.launch_gpu_s)
