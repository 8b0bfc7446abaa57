"""topo's price of Megatron-Core's whole MoE layer on one H100 against Megatron-LM's measured layer (issue 29).

SonicMoE's Figure 14 (Guo et al., arXiv 2512.14080; Dao-AILab/sonic-moe@8565e849 ``assets/tput.png``; read into
``data/reference/moe_layer_sonicmoe_h100.csv`` by findings section 351) gives Megatron-LM's whole MoE layer (router,
permutation, expert GEMMs, activation, un-permutation) on one H100 in BF16 at 12 configurations, forward and
backward TFLOP/s in SonicMoE's convention (``benchmarks/moe-cute.py`` @8565e849: forward ``6 T n d K`` over the
forward's ``triton.testing.do_bench`` time, backward ``12 T n d K`` over the forward-and-backward time less the
forward's; ``do_bench`` times the GPU between CUDA events, so an eager host that cannot keep ahead shows in it).

Neither the repository nor the stored excerpts of the paper say how the Megatron bars were run (Megatron-Core
version, dispatcher, ``moe_grouped_gemm``, permute fusion, router fusion, CUDA graphs): findings section 358. The
price here is Megatron-Core's defaults as topo models them at one GPU (``make_layout``: the all-to-all dispatcher at
EP 1, which still runs its permutation, its tokens-per-expert sync and its sort by local expert; Transformer
Engine's ``GroupedLinear``, one cuBLAS GEMM per expert; router fusion off; eager, no CUDA graphs), without the
block's norm and residual (the benchmark's layer has neither). Each pass is one host thread launching the ops in
order (:func:`topo.training.operators._launch_line_s`, the step's own flow line) from the sync on, the forward's
ops before the sync launched behind it (the next call's, as ``do_bench`` repeats the layer), after the sync's
round trip; the backward is the forward-and-backward line less the forward's, as the benchmark takes it.

So the test is a bound, not a fit: at hidden 4,096 (the 30B and 120B panels, the widths of Qwen3-30B-A3B and
DeepSeek-class models) topo's layer runs at 0.87-1.15x Megatron's measured rate, and at the Qwen3-30B-like row
(n 512, 128 experts, top-8) at 0.93 / 0.94: topo's single-GPU MoE layer is no faster than Megatron's measured one
where issue 29's fine-grained rows are too fast.
"""

import csv
from pathlib import Path

from topo.training.gpus import gpu_compute
from topo.training.model import Block, load_model
from topo.training.operators import (SYNC_OP, _launch_line_s, block_ops, block_time, host_launch_s,
                                     kernels_launched, op_passes_s)
from topo.training.parallel import make_layout

ROOT = Path(__file__).resolve().parents[1]


def _rows(kernel: str) -> dict:
    with open(ROOT / "data" / "reference" / "moe_layer_sonicmoe_h100.csv") as f:
        return {(r["model"], r["pass"], r["expert_ffn"]): r for r in csv.DictReader(f) if r["kernel"] == kernel}


def megatron_layer_s(T: int, d: int, n: int, E: int, K: int, **layout) -> tuple[float, float]:
    """topo's forward and backward seconds of one Megatron-Core MoE layer (SwiGLU experts, softmax top-k router, no
    shared expert) over ``T`` tokens on one H100, as the benchmark times it (module doc)."""
    gpu = gpu_compute("H100")
    base = load_model("qwen3-30b-a3b")  # its block structure; every size below is the figure's
    moe = base.moe.model_copy(update=dict(experts=E, active_experts=K, expert_ffn_hidden=n, shared_experts=0,
                                          router="softmax_topk"))
    model = base.model_copy(update=dict(hidden=d, moe=moe))
    lay = make_layout(tp=1, dp=1, ep=1, etp=1, micro_batch=1, global_batch=1, seq_len=T, **layout)
    fwd, bwd = [], []
    for op in block_ops(model, lay, Block.MOE):
        if op.module == "layernorm":  # the block's norm and residual: not in the benchmark's layer
            continue
        f, b = op_passes_s(op, gpu, lay)
        if op.passes != "backward":
            fwd.append((op.name, (host_launch_s(op, gpu, precision="bf16"), f, kernels_launched(op, "bf16"))))
        if op.passes != "forward":
            bwd.append((host_launch_s(op, gpu, backward=True, precision="bf16"), b,
                        kernels_launched(op, "bf16", backward=True)))
    at = [name for name, _ in fwd].index(SYNC_OP)
    before, after = [x for _, x in fwd[:at]], [x for _, x in fwd[at:]]
    sync_s = block_time(model, lay, gpu, Block.MOE).sync_s
    forward = sync_s + _launch_line_s(after + before)
    both = sync_s + _launch_line_s(after + bwd[::-1] + before)
    return forward, both - forward


def _ratios(**layout) -> dict:
    """topo's rate over Megatron's measured rate, by (model, pass, expert FFN)."""
    out = {}
    for key, r in _rows("megatron").items():
        T, d, n, E, K = (int(r[k]) for k in ("tokens", "hidden", "expert_ffn", "experts", "top_k"))
        f, b = megatron_layer_s(T, d, n, E, K, **layout)
        flops, t = (6 * T * n * d * K, f) if r["pass"] == "forward" else (12 * T * n * d * K, b)
        out[key] = flops / t / 1e12 / float(r["tflops"])
    return out


def test_megatron_layer_at_hidden_4096_is_priced_within_the_bars():
    """Hidden 4,096 (12 rows): topo's layer within 0.85-1.17x of Megatron's measured rate (0.87-1.15x), and at the
    fine-grained rows (top-8 and top-16: Qwen3-30B-A3B's 128 experts top-8 is the 30B n 512 row) no faster than the
    bars beyond the figure's reading (+-2 TFLOP/s of ~130-290) and do_bench's spread: at most 1.08x (0.87-1.07x)."""
    r = _ratios()
    wide = {k: v for k, v in r.items() if k[0] in ("30B", "120B")}
    assert len(wide) == 12
    assert 0.85 < min(wide.values()) and max(wide.values()) < 1.17, wide
    fine = {k: v for k, v in wide.items() if int(_rows("megatron")[k]["top_k"]) >= 8}
    assert len(fine) == 8 and max(fine.values()) < 1.08, fine
    assert r[("30B", "forward", "512")] < 1.0 and r[("30B", "backward", "512")] < 1.0


def test_the_permutation_is_what_brings_topo_down_to_megatrons_bars():
    """The bound has teeth: the same layer without its permutation and un-permutation (what SonicMoE's fused gather
    and aggregation avoid) would run at 1.5x Megatron's bars or more at every hidden-4,096 top-8 / top-16 row, so
    the all-to-all dispatcher's copies at EP 1 (permutation 1, the sort by local expert and their reverses:
    ``operators._alltoall_permute_bytes``) are the piece that takes topo's layer down to Megatron's measured one."""
    for key, r in _rows("megatron").items():
        T, d, n, E, K = (int(r[k]) for k in ("tokens", "hidden", "expert_ffn", "experts", "top_k"))
        if d != 4096 or K < 8:
            continue
        gpu = gpu_compute("H100")
        base = load_model("qwen3-30b-a3b")
        moe = base.moe.model_copy(update=dict(experts=E, active_experts=K, expert_ffn_hidden=n, shared_experts=0,
                                              router="softmax_topk"))
        model = base.model_copy(update=dict(hidden=d, moe=moe))
        lay = make_layout(tp=1, dp=1, ep=1, etp=1, micro_batch=1, global_batch=1, seq_len=T)
        perm = [op_passes_s(op, gpu, lay) for op in block_ops(model, lay, Block.MOE) if op.name.startswith("permute")]
        f, b = megatron_layer_s(T, d, n, E, K)
        flops, t, p = ((6 * T * n * d * K, f, sum(x[0] for x in perm)) if r["pass"] == "forward"
                       else (12 * T * n * d * K, b, sum(x[1] for x in perm)))
        assert flops / (t - p) / 1e12 > 1.5 * float(r["tflops"]), key


def test_the_small_models_are_left_unexplained_both_ways():
    """Hidden 768 / 1,536 (the 1.4B / 7B panels): topo's layer spans 0.50-1.31x the bars, too slow at 128 experts
    (the backward's per-expert host: TE's GroupedLinear launches a GEMM per expert and per gradient, 128 of each,
    eager), too fast at 32 experts top-2 (n 1,024: 1.22-1.31x). Recorded, not fitted (section 358's Left): the
    figure does not say which of Megatron's paths ran. This test pins the spread so a change to either side shows."""
    small = {k: v for k, v in _ratios().items() if k[0] in ("1.4B", "7B")}
    assert len(small) == 12
    assert 0.45 < min(small.values()) < 0.65 and 1.2 < max(small.values()) < 1.4, small
    assert min(small, key=small.get)[2] == "256" and max(small, key=small.get)[2] == "1024"
