"""Context-parallel attention (topo.training.ring_attention): the kernels, merges and sends of Transformer Engine's
ring (AttnFuncWithCPAndKVP2P, transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py,
NVIDIA/TransformerEngine@d0067d0) and of Meta's all-gather CP (arXiv 2407.21783 sec. 3.3.2)."""

import json

import pytest

import topo
from topo.errors import TopoError
from topo.training.comm_sms import reduced_gpu
from topo.training.gpus import gpu_compute
from topo.training.kernels import attention_rate_flops
from topo.training.model import load_model
from topo.training.operators import ATTENTION_BACKWARD_FLOPS, block_ops, op_time_s, ring_step_s, stage_compute
from topo.training.parallel import check_layout, make_layout
from topo.training.ring_attention import a2a_exchanges, cp_attention_calls, p2p_merge_bytes, ring_sends
from topo.training.step import estimate_step, exposed_comm_s, step_traffic

from conftest import run_cli
from published_setups import published_setups


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _lay(cp, **kw):
    base = dict(tp=1, cp=cp, dp=1, micro_batch=1, global_batch=1, seq_len=65536, flash_attention=True)
    return make_layout(**{**base, **kw})


@pytest.mark.parametrize("cp", [2, 4, 8, 16])
def test_each_rank_computes_its_share_of_the_causal_square(cp):
    """Load-balanced chunks: every rank's kernels cover s^2 / (2 cp) query-key pairs, either exchange. The ring's
    cp steps each cover (s/cp)^2 / 2 (TE's diagonal: s/cp causal; its lower/upper triangles: s/cp x s/2cp), one
    kernel each; the all-gather runs one kernel per local chunk (2)."""
    s = 65536
    ring = cp_attention_calls(s, cp, "p2p")
    gather = cp_attention_calls(s, cp, "all_gather")
    for calls in (ring, gather):
        assert sum(c.pairs for c in calls) == pytest.approx(s * s / (2 * cp), rel=1e-12)
    diagonal, steps = ring
    assert diagonal.causal and diagonal.block == s / cp and diagonal.launches == 1
    assert not steps.causal and steps.block == s / (2 * cp) and steps.launches == cp - 1
    assert steps.pairs / steps.launches == pytest.approx(diagonal.pairs)  # every step the same work
    assert sum(c.launches for c in gather) == 2
    sends = ring_sends(cp)  # chunks: cp - 1 forward, 2 (cp - 1) backward (K/V and dK/dV around the ring)
    assert sends["cp_ring_forward"] == (1.0, cp - 1)
    assert sum(k * n for p, (k, n) in sends.items() if p != "cp_ring_forward") == 2 * (cp - 1)
    with pytest.raises(ValueError, match="cp_comm_type"):
        cp_attention_calls(s, cp, "a2a+p2p")


def test_ring_kernels_keep_the_flops_and_run_at_their_block_rate():
    """Llama 3 8B at CP8, 64k tokens on H100: the ring's kernels carry 1/8 of the one-GPU layer's attention FLOPs;
    the diagonal runs at cuDNN's causal rate at s/cp = 8,192, the 7 steps at its unmasked rate at s/2cp = 4,096
    (kernels.toml [attention], FlashAttention-3 Figs. 5-7), each kernel with its launch gap."""
    m, gpu = load_model("llama3-8b"), gpu_compute("H100")
    km = gpu.kernels

    def attention(lay):
        return [o for o in block_ops(m, lay, "*") if o.kind == "attention"]

    one, = attention(_lay(1))
    diag, steps = attention(_lay(8))
    assert diag.flops + steps.flops == pytest.approx(one.flops / 8, rel=1e-12)
    for op, causal in ((diag, True), (steps, False)):
        fwd = op.flops / attention_rate_flops(km, 128, op.block_seq, causal, False) + op.launches * km.launch_gpu_s
        bwd = ATTENTION_BACKWARD_FLOPS * op.flops / attention_rate_flops(km, 128, op.block_seq, causal, True) \
            + op.launches * km.launch_gpu_s
        assert op_time_s(op, gpu, "bf16") == pytest.approx(fwd, rel=1e-12)
        assert op_time_s(op, gpu, "bf16", backward=True) == pytest.approx(bwd, rel=1e-12)
    # the unmasked half-chunk steps run faster per FLOP than one causal kernel at s/cp would (609 vs 529 TFLOP/s)
    assert attention_rate_flops(km, 128, 4096, False, False) > attention_rate_flops(km, 128, 8192, True, False)
    f, b = ring_step_s(m, _lay(8), gpu)
    v = _lay(8).cudnn_version  # attnh71: the step runs the layout's cuDNN (Hopper's version sets)
    assert f == pytest.approx(op_time_s(steps, gpu, "bf16", cudnn=v) / 7) and b == pytest.approx(
        op_time_s(steps, gpu, "bf16", backward=True, cudnn=v) / 7)
    assert ring_step_s(m, _lay(8, cp_comm_type="all_gather"), gpu) == (0.0, 0.0)
    # attention captured in a CUDA graph: a ring step's kernel pays the graph node's gap (H100 1.3 us, not the
    # stream's 2.1 us), the same gap block_time charges it (rev40)
    fg, bg = ring_step_s(m, _lay(8, cuda_graph_scope=["attn"]), gpu)
    assert km.launch_gpu_graph_s < km.launch_gpu_s
    assert (f - fg, b - bg) == pytest.approx(((km.launch_gpu_s - km.launch_gpu_graph_s),) * 2, rel=1e-9)


def test_merge_kernels_move_the_outputs_and_gradients():
    """Llama 3 8B, CP2, 64k: a rank's 32,768 tokens x 32 heads x 128 of output, merged after each of 2 steps
    (step output and output read, output written: 3 x 2 bytes); backward, the second step's dQ (32 heads) and dK,
    dV (8 KV heads, 128 + 128) added into their buffers (3 x 2 bytes each); 2 cp - 1 and 3 (cp - 1) kernels."""
    m = load_model("llama3-8b")
    q, kv = 32768 * 32 * 128, 32768 * 8 * 256
    assert p2p_merge_bytes(2, q, kv) == (2 * 6 * q, 6 * (q + kv), 3, 3)
    ops = {o.name: o for o in block_ops(m, _lay(2), "*")}
    assert ops["cp_merge"].bytes == 2 * 6 * q and ops["cp_merge"].passes == "forward"
    assert ops["cp_grad_accumulate"].bytes == 6 * (q + kv) and ops["cp_grad_accumulate"].passes == "backward"
    assert "cp_merge" not in {o.name for o in block_ops(m, _lay(2, cp_comm_type="all_gather"), "*")}


def test_a_step_send_is_exposed_only_beyond_its_step():
    """Per-step overlap: 10 sends of 1.5 ms behind 10 steps of 1 ms expose 10 x 0.5 ms; behind 2.5 ms steps none;
    without overlap_cp all of it; the all-gather's phase has no window (Meta: exposed)."""
    lay = _lay(8)
    w = {"cp_ring_forward": 10 * 1e-3, "cp_ring_backward": 10 * 2.5e-3}
    assert exposed_comm_s("cp", "cp_ring_forward", 15e-3, dict(w), lay, None) == pytest.approx(5e-3)
    assert exposed_comm_s("cp", "cp_ring_backward", 15e-3, dict(w), lay, None) == 0.0
    assert exposed_comm_s("cp", "cp_ring_forward", 15e-3, dict(w), _lay(8, overlap_cp=False), None) == 15e-3
    assert exposed_comm_s("cp", "cp_gather", 15e-3, dict(w), lay, None) == 15e-3


def test_ring_exposure_in_a_step(fabric):
    """Llama 3 70B, TP8 CP16 (16 servers), 128k: each forward send of the rank's 8,192 tokens x 1 KV head x 256 x 2
    bytes hides behind one step's kernel, backward K/V with dK/dV (2 chunks) in the 14 middle steps and one chunk
    in the first and last; what a step's send takes beyond the step is exposed, every step alike."""
    m = load_model("llama3-70b")
    lay = make_layout(tp=8, cp=16, dp=1, pp=1, micro_batch=1, global_batch=2, seq_len=131072)
    r = estimate_step(fabric, m, lay, check=False)
    f, b = ring_step_s(m, lay, gpu_compute("H100"))
    ring = [c for c in r.comm if c.dim == "cp"]
    chunk = 8192 * 1 * 256 * 2
    assert [c.collective for c in ring] == ["sendrecv"] * 3
    assert [c.size_bytes for c in ring] == [chunk, 2 * chunk, chunk]
    assert [c.calls_per_step for c in ring] == [2 * 80 * 15, 2 * 80 * 14, 2 * 80 * 2]
    want = sum(max(0.0, c.time_s - c.calls_per_step * s) for c, s in zip(ring, (f, b, b)))
    assert want > 0
    # the hidden rest holds NCCL's 16 channels' SMs (topo.training.comm_sms): the attention it hides behind runs on
    # 116 of 132 SMs, losing hidden x (1 - t/t'), about 16/132 (its kernels' fixed launch gaps lose nothing)
    hidden = sum(c.time_s for c in ring) - want
    gpu = gpu_compute("H100")
    t, t_less = (stage_compute(m, lay, g).attention_s for g in (gpu, reduced_gpu(gpu, 16)))
    assert 1 - t / t_less == pytest.approx(16 / 132, rel=0.01)
    assert r.breakdown_s["cp"] == pytest.approx(want + hidden * (1 - t / t_less), rel=1e-9)


def test_all_gather_cp_is_exposed(fabric):
    """Meta's CP (arXiv 2407.21783 sec. 3.3.2): the K/V all-gather exposed on the critical path, and the gradients'
    reduce-scatter with it: the step's CP time is all of their time, with overlap_cp on."""
    m = load_model("llama3-405b")
    lay = make_layout(tp=8, cp=16, pp=8, global_batch=8, seq_len=131072, cp_comm_type="all_gather")
    r = estimate_step(fabric, m, lay, check=False)
    cp = [c for c in r.comm if c.dim == "cp"]
    assert {c.collective for c in cp} == {"all_gather", "reduce_scatter"} and lay.overlap_cp
    assert r.breakdown_s["cp"] > 0
    assert r.breakdown_s["cp"] == pytest.approx(sum(c.time_s for c in cp), rel=1e-12)
    sends = [t for t in step_traffic(m, lay.model_copy(update={"cp_comm_type": "p2p"})) if t["dim"] == "cp"]
    assert {t["phase"] for t in sends} == {"cp_ring_forward", "cp_ring_backward", "cp_ring_backward_ends"}


def test_all_gather_cp_gathers_again_backward():
    """Transformer Engine's all-gather CP keeps only the rank's own K and V and gathers them again before the
    backward kernels (``AttnFuncWithCPAndKVAllGather.backward``: ``k_ag, _ = gather_along_first_dim(k,
    ctx.cp_group)`` and the same for ``v``, then ``reduce_scatter_along_first_dim`` of dK and dV;
    transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py, NVIDIA/TransformerEngine@d0067d0
    lines 3788-3789 and 4107-4108; v2.8 lines 2849-2850 and 3009-3010). Per layer and micro-batch: two gathers of
    the sequence's K/V (forward, backward) and one reduce-scatter; recomputing the attention core gathers once more
    (its forward runs again), the backward's do not change. The exchange's time is all exposed."""
    m = load_model("llama3-8b")
    lay = _lay(4, cp_comm_type="all_gather")
    passes = lay.microbatches * m.layers

    def calls(**kw):
        out = {}
        for t in step_traffic(m, lay.model_copy(update=kw)):
            if t["dim"] == "cp":
                out[t["collective"]] = out.get(t["collective"], 0) + t["calls"]
        return out

    assert calls() == {"all_gather": 2 * passes, "reduce_scatter": passes}
    again = calls(recompute_modules=("core_attn",))
    assert again == {"all_gather": 3 * passes, "reduce_scatter": passes}
    gathers = [t for t in step_traffic(m, lay) if t["dim"] == "cp" and t["collective"] == "all_gather"]
    assert {t["size_bytes"] for t in gathers} == {65536 * m.kv_width(1) * 2}  # the whole sequence's K and V
    w = {}
    assert all(exposed_comm_s("cp", t["phase"], 1e-3, w, lay, None) == 1e-3 for t in gathers)


def test_recomputed_attention_sends_again():
    """Recomputing the attention core (Megatron-Core's ``recompute_modules = core_attn``) or whole layers runs the
    ring's forward again: its forward sends double; the backward's do not change."""
    m = load_model("llama3-8b")

    def sends(**kw):
        return {t["phase"]: t["calls"] for t in step_traffic(m, _lay(4, **kw)) if t["dim"] == "cp"}

    base = sends()
    assert base["cp_ring_forward"] == 32 * 3
    for kw in (dict(recompute_modules=("core_attn",)), dict(recompute="full")):
        again = sends(**kw)
        assert again["cp_ring_forward"] == 2 * base["cp_ring_forward"]
        assert again["cp_ring_backward"] == base["cp_ring_backward"]


def test_unknown_exchange_is_refused():
    with pytest.raises(TopoError,
                       match="cp_comm_type: must be one of 'p2p', 'all_gather' or 'a2a', got 'a2a\\+p2p'"):
        make_layout(cp=2, global_batch=1, cp_comm_type="a2a+p2p")


def test_cli_takes_the_exchange():
    """``--cp-comm-type all_gather`` is the layout's ``cp_comm_type``: the CP rows of the output become the exposed
    all-gather and reduce-scatter; the default is the ring's sends; a bad value is one line and exit 2."""
    base = ("train", "dgx-h100-superpod", "--model", "llama3-70b", "--tp", "8", "--cp", "4", "--dp", "1",
            "--seq", "32768", "--global-batch", "1", "--json")
    ring = json.loads(run_cli(*base, check=True).stdout)
    gather = json.loads(run_cli(*base, "--cp-comm-type", "all_gather", check=True).stdout)
    assert ring["layout"]["cp_comm_type"] == "p2p" and gather["layout"]["cp_comm_type"] == "all_gather"
    assert {c["collective"] for c in ring["comm"] if c["dim"] == "cp"} == {"sendrecv"}
    cp = [c for c in gather["comm"] if c["dim"] == "cp"]
    assert {c["collective"] for c in cp} == {"all_gather", "reduce_scatter"}
    assert gather["breakdown_s"]["cp"] > 0
    assert gather["breakdown_s"]["cp"] == pytest.approx(sum(c["time_s"] for c in cp))
    bad = run_cli(*base, "--cp-comm-type", "a2a+p2p")
    assert bad.returncode == 2 and "a2a+p2p" in bad.stderr and "Traceback" not in bad.stderr


def test_the_exchange_and_the_merges_count_the_same_kv_width():
    """One K/V width per token and TP rank (``ModelSpec.kv_width``) for the ring's sends, the all-gather and the
    backward's dK/dV accumulation. Llama 3 70B (8 KV heads of 128): TP 4, 2 heads x (128 + 128) = 512; TP 16, the
    one head a rank holds a replica of, 256. DeepSeek-V3 (MLA, per head after the up-projection: 192 + 128), TP 8:
    16 heads x 320 = 5,120."""
    llama, ds = load_model("llama3-70b"), load_model("deepseek-v3-671b")
    assert (llama.kv_width(4), llama.kv_width(16), ds.kv_width(8)) == (512, 256, 5120)
    lay = _lay(4, tp=4, cp_comm_type="all_gather")
    gather = next(t for t in step_traffic(llama, lay) if t["dim"] == "cp" and t["collective"] == "all_gather")
    assert gather["size_bytes"] == 65536 * 512 * 2  # the sequence's K and V in 2-byte elements
    ring = [t for t in step_traffic(llama, lay.model_copy(update={"cp_comm_type": "p2p"})) if t["dim"] == "cp"]
    assert {t["size_bytes"] for t in ring} == {65536 / 4 * 512 * 2, 2 * 65536 / 4 * 512 * 2}  # K/V; with dK/dV
    acc = next(o for o in block_ops(llama, _lay(4, tp=4), "*") if o.name == "cp_grad_accumulate")
    q, kv = 65536 / 4 * 64 / 4 * 128, 65536 / 4 * 512
    assert acc.bytes == pytest.approx(3 * 6 * (q + kv))


# --- Ulysses CP (cp_comm_type = "a2a"): Transformer Engine's AttnFuncWithCPAndQKVOA2A, context_parallel.py,
# NVIDIA/TransformerEngine@d0067d0 (flash_attn_a2a_communicate; DeepSpeed-Ulysses, arXiv 2309.14509)

@pytest.mark.parametrize("cp", [2, 4, 8])
def test_a2a_runs_one_causal_kernel_over_the_whole_sequence(cp):
    """After the all-to-all a rank holds all s tokens of 1/cp of its heads: one causal kernel at block s, s^2/2
    pairs of 1/cp of the heads (s^2 / (2 cp) per head of the rank's), the same FLOPs as the ring's kernels, no
    merges (one kernel sees every key)."""
    s = 65536
    call, = cp_attention_calls(s, cp, "a2a")
    assert (call.launches, call.block, call.causal) == (1, s, True)
    assert call.pairs == pytest.approx(s * s / (2 * cp), rel=1e-12)
    m = load_model("llama3-8b")
    ring = [o for o in block_ops(m, _lay(cp), "*") if o.kind == "attention"]
    ops = block_ops(m, _lay(cp, cp_comm_type="a2a"), "*")
    a2a, = [o for o in ops if o.kind == "attention"]
    assert a2a.flops == pytest.approx(sum(o.flops for o in ring), rel=1e-12)
    assert (a2a.block_seq, a2a.causal, a2a.launches) == (s, True, 1.0)
    assert not {"cp_merge", "cp_grad_accumulate"} & {o.name for o in ops}



@pytest.mark.parametrize("name, s, block, window", [
    ("gpt-oss-20b", 65536, 65536, 128),  # a 128-token sliding window: the kernel over all s tokens, masked
    ("llama4-scout", 8192, 8192, 0.0),  # an 8,192-token chunk: the whole sequence, where a ring rank holds 4,096
])
def test_a2a_local_attention_sees_the_whole_sequence(name, s, block, window):
    """A local-window layer under Ulysses: after the all-to-all the rank holds all ``s`` tokens of its heads, so its
    kernel's side is ``s``, not the ring's ``s / cp`` (rev52: pricing it at ``s / cp`` passed every test)."""
    m = load_model(name)
    a2a, = [o for o in block_ops(m, _lay(2, seq_len=s, cp_comm_type="a2a"), "W") if o.kind == "attention"]
    if m.attention.sinks != "none":  # Transformer Engine runs sink attention under CP only with a2a (section 329)
        with pytest.raises(TopoError, match="cp_comm_type a2a"):
            block_ops(m, _lay(2, seq_len=s), "W")
        # the ring's geometry on the same network without its sinks (the window is the question here)
        m = m.model_copy(update={"attention": m.attention.model_copy(update={"sinks": "none"})})
    ring, = [o for o in block_ops(m, _lay(2, seq_len=s), "W") if o.kind == "attention"]
    assert (a2a.block_seq, a2a.window) == (block, window)
    assert ring.block_seq == (s / 2 if window else min(s / 2, 8192))
    assert a2a.flops == pytest.approx(ring.flops, rel=1e-12)


def test_a2a_splits_mla_keys_and_values_by_the_query_heads():
    """MLA's up-projection gives K and V every query head (DeepSeek-V3: 128), so a2a at TP8 splits 16 heads a rank
    for Q, K and V alike: CP 2, 4, 8 and 16 run, 3 does not (rev52: counting one K/V head refused CP 2)."""
    m = load_model("deepseek-v3-671b")
    for cp in (2, 4, 8, 16):
        check_layout(m, make_layout(tp=8, cp=cp, global_batch=1, seq_len=32768, cp_comm_type="a2a"))
    with pytest.raises(TopoError, match=r"16 query and 16 key/value heads"):
        check_layout(m, make_layout(tp=8, cp=3, global_batch=1, seq_len=32768, cp_comm_type="a2a"))

def test_a2a_exchanges_q_k_v_and_the_output_each_pass():
    """Llama 3 8B (32 query heads, 8 KV heads of 128), TP1 CP8, 64k: each rank's 8,192 tokens. Forward one
    all_to_all_single each for Q (8,192 x 32 x 128 x 2 B = 64 MiB), K and V (8,192 x 8 x 128 x 2 B = 16 MiB each)
    before the kernel and one for the output (64 MiB) after it; backward dO, then dQ, dK, dV: four a pass, per
    layer. Recomputing the attention core runs the forward's four again. No window hides them (exposed)."""
    m = load_model("llama3-8b")
    lay = _lay(8, cp_comm_type="a2a")
    q, kv = 8192 * 32 * 128 * 2, 8192 * 8 * 128 * 2
    assert a2a_exchanges(q, kv, kv, q) == {"forward": [q, kv, kv, q], "backward": [q, q, kv, kv]}

    def calls(**kw):
        out = {}
        for t in step_traffic(m, lay.model_copy(update=kw)):
            if t["dim"] == "cp":
                assert t["collective"] == "alltoall"
                out[(t["phase"], t["size_bytes"])] = out.get((t["phase"], t["size_bytes"]), 0) + t["calls"]
        return out

    L = m.layers
    assert calls() == {("cp_a2a_forward", q): 2 * L, ("cp_a2a_forward", kv): 2 * L,
                       ("cp_a2a_backward", q): 2 * L, ("cp_a2a_backward", kv): 2 * L}
    again = calls(recompute_modules=("core_attn",))
    assert again[("cp_a2a_forward", q)] == 4 * L and again[("cp_a2a_backward", q)] == 2 * L
    w = {"cp_ring_forward": 1.0, "cp_ring_backward": 1.0}
    assert all(exposed_comm_s("cp", ph, 1e-3, dict(w), lay, None) == 1e-3 for ph, _ in calls())


def test_a2a_sends_mla_keys_and_values_at_their_own_widths():
    """MLA's K and V differ in width (DeepSeek-V3, arXiv 2412.19437 sec. 4.2 / its config.json: qk_nope_head_dim
    128 + qk_rope_head_dim 64 = 192 a key head, v_head_dim 128 a value head; 128 heads). At TP8 CP2 and 32K each
    rank holds 16,384 tokens of 16 heads: Q and K 16,384 x 16 x 192 x 2 B = 96 MiB each, V and the output
    16,384 x 16 x 128 x 2 B = 64 MiB each, per layer and pass (rev52: K and V were priced at half their sum,
    80 MiB each; the bytes a pass were right, the per-call sizes not)."""
    m = load_model("deepseek-v3-671b")
    assert (m.qk_dim, m.v_dim, m.heads) == (192, 128, 128)
    lay = make_layout(tp=8, cp=2, dp=1, micro_batch=1, global_batch=1, seq_len=32768, cp_comm_type="a2a")
    big, small = 16384 * 16 * 192 * 2, 16384 * 16 * 128 * 2
    assert (big, small) == (96 * 2**20, 64 * 2**20)
    calls = {}
    for t in step_traffic(m, lay):
        if t["dim"] == "cp":
            calls[(t["phase"], t["size_bytes"])] = calls.get((t["phase"], t["size_bytes"]), 0) + t["calls"]
    n = calls[("cp_a2a_forward", big)]
    assert n > 0 and calls == {("cp_a2a_forward", big): n, ("cp_a2a_forward", small): n,
                               ("cp_a2a_backward", big): n, ("cp_a2a_backward", small): n}


def test_a2a_is_refused_where_the_heads_do_not_split():
    """TE asserts ``num_heads % cp_size == 0`` for Q and for K and V (``AttnFuncWithCPAndQKVOA2A.forward``): Meta's
    Llama 3 405B at TP8 leaves each rank 16 query heads and 1 KV head, so CP16 cannot run a2a (the paper's reason
    for gathering K and V, arXiv 2407.21783 sec. 3.3.2); Llama 3 70B at TP2 (32 and 4 heads) runs CP 2 or 4, not
    8. The error is one line naming the key and what is allowed."""
    big, mid = load_model("llama3-405b"), load_model("llama3-70b")
    with pytest.raises(TopoError) as e:
        check_layout(big, make_layout(tp=8, cp=16, pp=16, dp=8, global_batch=128, seq_len=131072,
                                      cp_comm_type="a2a"))
    assert str(e.value) == ("layout: cp_comm_type: a2a splits each tensor-parallel rank's 16 query and 1 key/value "
                            "heads over the 16 CP ranks and needs both divisible by cp; allowed: p2p or all_gather "
                            "(no cp > 1 divides both)")
    check_layout(mid, make_layout(tp=2, cp=4, global_batch=1, seq_len=32768, cp_comm_type="a2a"))
    with pytest.raises(TopoError, match=r"32 query and 4 key/value heads .* allowed: cp 2, 4, or p2p or all_gather"):
        check_layout(mid, make_layout(tp=2, cp=8, global_batch=1, seq_len=32768, cp_comm_type="a2a"))


def test_cli_a2a_is_exposed_and_a_bad_split_is_one_line():
    base = ("train", "dgx-h100-superpod", "--model", "llama3-70b", "--cp", "4", "--dp", "1", "--seq", "32768",
            "--global-batch", "1", "--cp-comm-type", "a2a")
    out = json.loads(run_cli(*base, "--tp", "2", "--json", check=True).stdout)
    cp = [c for c in out["comm"] if c["dim"] == "cp"]
    assert {c["collective"] for c in cp} == {"alltoall"} and out["layout"]["cp_comm_type"] == "a2a"
    assert out["breakdown_s"]["cp"] == pytest.approx(sum(c["time_s"] for c in cp), rel=1e-9)
    bad = run_cli(*base, "--tp", "8")
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    assert bad.stderr.startswith("error: --cp-comm-type: a2a splits") and "allowed: p2p or all_gather" in bad.stderr


def test_the_benchmark_runs_each_cp_row_with_its_frameworks_exchange():
    """Every published CP row runs its framework's exchange: Meta's rows all-gather K and V (arXiv 2407.21783 sec.
    3.3.2); every Megatron-LM / NeMo / Megatron-Bridge / MLPerf / ModelZoo row the ring, Megatron-Core's default
    (``--cp-comm-type`` default ``["p2p"]``; ``TEDotProductAttention``: None -> ``"p2p"``), since none of their
    recipes sets another (calibration-findings, section 16x cp49); the AutoModel row is the ring approximation of
    PyTorch's all-gather rotater (section 33)."""
    from conftest import ROOT
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))

    rows = [s for s in published_setups() if s["lay"].cp > 1]
    assert len(rows) > 60
    for s in rows:
        want = "all_gather" if s["run"].startswith("llama3_405b") else "p2p"
        assert s["lay"].cp_comm_type == want, s["run"]
