"""TP communication overlap GEMM by GEMM (Transformer Engine's userbuffers ring exchange, issue 29): each TP
collective hides only behind the GEMM of its own linear layer, and FP8 layouts gather 1-byte elements.

Sources: Transformer Engine ``CommOverlapP2PBase::split_overlap_ag`` / ``split_overlap_rs``
(NVIDIA/TransformerEngine transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp: ``tp`` GEMM chunks,
one chunk sent to the ring's next rank beside each); NeMo's userbuffers configurations (NVIDIA/NeMo
nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py, ``userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096``:
fprop and proj/fc2 dgrad ``ring_exchange``, qkv/fc1 dgrad ``bulk``); TE's ``Linear`` / ``LayerNormLinear`` quantise
their input before ``fill_userbuffers_buffer_for_all_gather`` (transformer_engine/pytorch/module/linear.py,
layernorm_linear.py)."""

import random

import pytest

import topo
from topo.training.gpus import gpu_compute
from topo.training.kernels import gemm_s
from topo.training.model import Block, load_model
from topo.training.operators import block_ops, kernels_launched, op_time_s, stage_compute, tp_paired_gemm_s
from topo.training.parallel import make_layout
from topo.training.step import GRAD_GATHER_PHASE, REPLICATED_GRADS_PHASE, estimate_step, step_traffic, tp_ring_exposed_s


def _ring_by_steps(c: float, g: float, tp: int) -> float:
    """Exposed seconds of a ring-exchange all-gather + GEMM, step by step: chunk ``j`` arrives after ``j`` sends
    of ``c / (tp - 1)`` each (every rank forwards what it received), the GEMM of chunk ``j`` (``g / tp``) starts
    when it has arrived and the previous chunk's GEMM is done."""
    end = 0.0
    for j in range(tp):
        end = max(end, j * c / (tp - 1)) + g / tp
    return end - g


def test_ring_exchange_closed_form_is_the_step_by_step_ring():
    rng = random.Random(29)
    for _ in range(200):
        tp = rng.choice([2, 4, 8])
        c, g = rng.uniform(0.01, 1.0), rng.uniform(0.01, 1.0)
        ex, rest = tp_ring_exposed_s(c, 1.0, [(g, 1)], 1, tp)
        assert ex == pytest.approx(_ring_by_steps(c, g, tp), abs=1e-12) and rest == 0.0


def test_each_collective_hides_behind_its_own_gemm_not_the_sum():
    """Two blocks: one GEMM shorter than its collective, one longer. The step exposes the short one's excess
    (1 - 0.8 x 7/8 = 0.3 per call of that block), not max(0, sum c - sum g) = 0; a bulk overlap (the input
    gradient's reduce-scatter beside the whole weight-gradient GEMM) hides g whole (1 - 0.8 = 0.2)."""
    pairs = [(0.8, 1), (2.0, 1)]
    ex, rest = tp_ring_exposed_s(1.0, 10.0, pairs, 2, 8)
    assert ex == pytest.approx(10 * 0.3 / 2) and rest == 0.0
    assert max(0.0, 2 * 1.0 - (0.8 + 2.0) * 7 / 8) == 0.0
    bulk, _ = tp_ring_exposed_s(1.0, 10.0, pairs, 2, 8, bulk=True)
    assert bulk == pytest.approx(10 * 0.2 / 2)
    # a third block per micro-batch with TP traffic and no paired GEMM (a Mamba mixer): its share of the calls
    # goes back to the caller's window whole
    ex3, rest3 = tp_ring_exposed_s(1.0, 9.0, pairs, 3, 8)
    assert ex3 == pytest.approx(9 * 0.3 / 3) and rest3 == pytest.approx(9 * 1.0 / 3)


@pytest.fixture(scope="module")
def gb200():
    return topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))


def _nemotron_fp8(**kw):
    # Nemotron-4 340B FP8 at TP8 PP4 (NeMo 25.04's GB200 layout, micro-batch 1, sequence 4,096)
    return make_layout(tp=8, pp=4, dp=1, global_batch=8, seq_len=4096, precision="fp8", overlap_tp=True, **kw)


def test_step_exposes_each_tp_collective_beyond_its_own_gemm(gb200):
    """Nemotron-4 340B FP8 at TP8 on GB200: the output projection's forward GEMM (4,096 x 18,432 x 2,304) is
    shorter than its 151 MB reduce-scatter, so part of it shows, though the whole micro-batch's compute would
    hide all the TP traffic (the old rule: nothing exposed). The step's TP seconds are the sum, by hand, over
    the four collectives of each attention and MLP block, of what exceeds its own GEMM."""
    m = load_model("nemotron4-340b")
    # TE 1.x's userbuffers defaults (no SM margin): each GEMM on the whole GPU, as the hand sum times it (the margin
    # that lengthens the paired GEMMs is tests/test_training_tp_overlap.py's)
    lay = _nemotron_fp8(tp_overlap_config="te_default_v1")
    r = estimate_step(gb200, m, lay, contention=False)
    gpu = gpu_compute("GB200")
    km = gpu.kernels
    ops = {o.name: o for k in (Block.ATTENTION, Block.MLP) for o in block_ops(m, lay, k) if o.kind == "gemm"}
    fwd = {n: gemm_s(km, o.m, o.n, o.k, "fp8") for n, o in ops.items()}
    dgrad = {n: gemm_s(km, o.m, o.k, o.n, "fp8") for n, o in ops.items()}
    wgrad = {n: gemm_s(km, o.k, o.n, o.m, "fp8") for n, o in ops.items()}
    # the traffic's order: forward all-gather, reduce-scatter (ring exchanges); backward the output gradient's
    # all-gather (ring, beside out_proj's / fc2's input gradient), the input's second all-gather (bulk, beside
    # qkv's / fc1's input gradient), the input gradient's reduce-scatter (bulk, beside their weight gradient)
    pairs = [(("qkv", "fc1"), fwd, 7 / 8), (("out_proj", "fc2"), fwd, 7 / 8), (("out_proj", "fc2"), dgrad, 7 / 8),
             (("qkv", "fc1"), dgrad, 1.0), (("qkv", "fc1"), wgrad, 1.0)]
    tp = [c for c in r.comm if c.dim == "tp" and not c.what.startswith("head")  # the stage's heads: apart
          and c.what != "replicated gradients"]  # and the once-a-step replicated gradients (tidy76)
    assert len(tp) == 5
    expected = 0.0
    for c, (names, gemm, hidden) in zip(tp, pairs):
        one = c.time_s / c.calls_per_step
        expected += c.calls_per_step * sum(max(0.0, one - gemm[n] * hidden) for n in names) / 2
    # the paced stage's heads (step._head_traffic): no userbuffers GEMM; the blocking ones exposed whole, those
    # beside the output layer's own GEMM (NCCL, async: tpmla103) expose what outlasts it (bulk) plus what their
    # NCCL kernels' SMs cost that GEMM (tests/test_tp_mla_heads_tpmla103.py checks both in closed form)
    heads = [c for c in r.comm if c.dim == "tp" and c.what.startswith("head")]
    own = [c for c in heads if c.what.endswith(("for wgrad", "input gradient"))]
    blocking = sum(c.time_s for c in heads if c not in own)
    (logits,) = [o for o in block_ops(m, lay, "logits") if o.name == "logits"]
    beyond = sum(c.calls_per_step * max(0.0, c.time_s / c.calls_per_step - gemm_s(km, *shape, "bf16"))
                 for c, shape in zip(own, ((logits.m, logits.k, logits.n), (logits.k, logits.n, logits.m))))
    assert len(own) == 2 and sum(c.exposed_s for c in own) >= beyond
    (grads,) = [c.time_s for c in r.comm if c.what == "replicated gradients"]  # once a step, blocking (tidy76)
    assert heads and expected > 0 and r.breakdown_s["tp"] == pytest.approx(
        expected + blocking + grads + sum(c.exposed_s for c in own), rel=1e-9)
    assert fwd["out_proj"] < tp[1].time_s / tp[1].calls_per_step  # the collective longer than its GEMM
    sc = stage_compute(m, lay, gpu)
    assert sum(c.time_s for c in tp) < lay.microbatches * sc.microbatch_s  # what the micro-batch would hide
    # interleaved stages (NeMo's VP 12): each collective still pairs with its own block's GEMM, so the exposed
    # seconds per call are the same
    vp = estimate_step(gb200, m, lay.model_copy(update={"vpp": 12}), contention=False)
    tp_vp = [c for c in vp.comm if c.dim == "tp" and not c.what.startswith("head") and c.what != "replicated gradients"]
    per_call = [c.exposed_s / c.calls_per_step for c in tp]
    assert [c.exposed_s / c.calls_per_step for c in tp_vp] == pytest.approx(per_call)
    # without sequence parallelism no framework runs userbuffers (Megatron-LM refuses --tp-comm-overlap,
    # Megatron-Bridge turns it off; walk40, section 416): priced as without overlap_tp, the layers' forward
    # all-reduces exposed whole (they had been hidden behind the micro-batch's compute)
    no_sp = estimate_step(gb200, m, lay.model_copy(update={"sequence_parallel": False}), contention=False)
    plain = estimate_step(gb200, m, lay.model_copy(update={"sequence_parallel": False, "overlap_tp": False}),
                          contention=False)
    assert no_sp.breakdown_s["tp"] == pytest.approx(plain.breakdown_s["tp"], rel=1e-9)
    fwd = [c for c in no_sp.comm if c.dim == "tp" and c.phase == "forward" and not c.what]
    assert fwd and all(c.time_s > 0 and c.exposed_s == pytest.approx(c.time_s) for c in fwd)


def test_sequence_parallel_backward_gathers_the_input_again():
    """A column-parallel layer keeps its input's shard and gathers it again in the backward for its weight
    gradient (TE LayerNormLinear / LayerNormMLP backward: ``gather_along_first_dim(ln_out, ...)``, or the
    userbuffers bulk all-gather): per block and micro-batch two all-gathers and one reduce-scatter backward, one
    of each forward."""
    m = load_model("nemotron4-340b")
    lay = _nemotron_fp8()
    calls = {}
    for t in step_traffic(m, lay):
        if t["dim"] == "tp" and not t.get("what", "").startswith("head") and t["phase"] != REPLICATED_GRADS_PHASE:
            calls[(t["phase"], t["collective"])] = calls.get((t["phase"], t["collective"]), 0) + t["calls"]
    blocks = 2 * 96 / 4 * lay.microbatches  # attention + MLP per layer, 24 layers per stage
    # the output gradient's all-gather in its own, blocking phase (step.GRAD_GATHER_PHASE: synchronous in TE)
    assert calls == {("microbatch", "all_gather"): blocks, ("microbatch", "reduce_scatter"): blocks,
                     ("backward", "all_gather"): blocks, (GRAD_GATHER_PHASE, "all_gather"): blocks,
                     ("backward", "reduce_scatter"): blocks}


def test_fp8_userbuffers_gather_one_byte_elements():
    """TE quantises a linear layer's input (and its output gradient) before the all-gather: an FP8 layout with TP
    overlap, or without it (section 404), gathers b s h x 1 byte; the reduce-scatters (the GEMMs' BF16 outputs)
    and BF16 layouts stay 2 bytes."""
    m = load_model("nemotron4-340b")
    act = 4096 * 18432 * 2

    def sizes(lay):
        return {(t["phase"], t["collective"]): t["size_bytes"] for t in step_traffic(m, lay)
                if t["dim"] == "tp" and t["phase"] != REPLICATED_GRADS_PHASE}  # once a step, FP32 (tidy76)

    fp8 = sizes(_nemotron_fp8())  # (the two backward all-gathers are alike)
    assert fp8[("microbatch", "all_gather")] == fp8[("backward", "all_gather")] == act / 2
    assert fp8[("microbatch", "reduce_scatter")] == fp8[("backward", "reduce_scatter")] == act
    bf16 = sizes(_nemotron_fp8().model_copy(update={"precision": "bf16"}))
    assert set(bf16.values()) == {act}
    # without userbuffers too (NCCL, per-tensor delayed scaling: row-wise uint8 data, section 404)
    no_ub = sizes(_nemotron_fp8().model_copy(update={"overlap_tp": False}))
    assert no_ub[("microbatch", "all_gather")] == no_ub[("backward", "all_gather")] == act / 2
    assert no_ub[("microbatch", "reduce_scatter")] == no_ub[("backward", "reduce_scatter")] == act


def test_every_tp_block_of_a_hybrid_pairs_its_collectives():
    """Mamba's in_proj / out_proj are Transformer Engine linears on the same userbuffers as an MLP's
    (NVIDIA/Megatron-LM megatron/core/ssm/mamba_mixer.py: ``tp_comm_buffer_name="fc1"``): Nemotron Nano 9B v2's
    27 Mamba, 4 attention and 25 MLP blocks each pair all five of their TP collectives with a GEMM."""
    m = load_model("nemotron-nano-9b-v2")
    lay = make_layout(tp=2, dp=4, global_batch=8, overlap_tp=True)
    sc = stage_compute(m, lay, gpu_compute("H100"))
    # (and the output layer's backward pairs, its NCCL exchanges beside its own GEMMs: tpmla103)
    assert set(sc.tp_pairs) == {"ag_fprop", "rs_fprop", "rs_dgrad", "ag_dgrad", "ag_wgrad", "head_dgrad", "head_wgrad"}
    assert all(sum(n for _, n in pairs) == 27 + 4 + 25 for k, pairs in sc.tp_pairs.items() if k.startswith(("ag", "rs")))
    assert sc.tp_pairs["head_wgrad"][0][1] == 1  # the one output layer
    # the traffic counts the same blocks (8 sequences over DP 4: 2 micro-batches), so every call has its GEMM
    ag = [t for t in step_traffic(m, lay) if t["dim"] == "tp" and t.get("pair") == "ag_fprop"]
    assert len(ag) == 1 and ag[0]["calls"] == 2 * (27 + 4 + 25)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_paired_gemms_are_the_gemms_the_step_times(precision):
    """The GEMM seconds a TP collective hides behind are the same GEMMs :func:`op_time_s` times (one formula for a
    GEMM's shapes and precision by pass): a column-parallel layer's fprop, dgrad and wgrad add up to its forward and
    backward seconds less their launch gaps and FP8 casts, a row-parallel layer's fprop and dgrad to its forward
    and its backward less the weight gradient."""
    gpu, model = gpu_compute("H100"), load_model("llama3-8b")
    lay = make_layout(tp=4, global_batch=8, seq_len=4096, sequence_parallel=True, overlap_tp=True,
                      precision=precision)
    ops = {o.name: o for o in block_ops(model, lay, "-")}
    km = gpu.kernels
    fc1, fc2 = ops["fc1"], ops["fc2"]
    prec = precision if fc1.linear else "bf16"
    assert tp_paired_gemm_s(fc1, gpu, precision) == pytest.approx(
        {"ag_fprop": gemm_s(km, fc1.m, fc1.n, fc1.k, prec), "ag_dgrad": gemm_s(km, fc1.m, fc1.k, fc1.n, prec),
         "ag_wgrad": gemm_s(km, fc1.k, fc1.n, fc1.m, prec)})
    if precision == "bf16":  # no casts: op_time_s is the GEMMs and their launch gaps
        gaps = km.launch_gpu_s * kernels_launched(fc1, precision, backward=True)
        paired = tp_paired_gemm_s(fc1, gpu, precision)
        assert paired["ag_dgrad"] + paired["ag_wgrad"] == pytest.approx(
            op_time_s(fc1, gpu, precision, backward=True) - gaps)
    assert set(tp_paired_gemm_s(fc2, gpu, precision)) == {"rs_fprop", "rs_dgrad"}
    assert tp_paired_gemm_s(ops["activation"], gpu, precision) == {}
