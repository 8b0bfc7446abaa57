"""A kernel captured in a CUDA graph pays the graph's per-node GPU gap, an eagerly launched one the stream's
(``kernels.toml`` ``[launch] gpu_s_by_generation``): H100 2.1 / 1.3 us (Hazy Research, "Look Ma, No Bubbles!",
2025-05-27), B200 2.4 / 0.8 us (the graph figure from Mirage Persistent Kernel, arXiv 2512.22219; its eager 3.8 us is
host-paced, so the eager gap is the generation-free queue figure ``gpu_s``); a generation without figures
(Ampere) keeps ``gpu_s`` both ways."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import _table
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, captured, kernels_launched, op_time_s
from topo.training.parallel import make_layout

QWEN_B200 = dict(tp=1, ep=8, dp=8, micro_batch=4, global_batch=512, seq_len=4096, precision="fp8", etp=1,
                 fp8_recipe="mxfp8")


def test_launch_gaps_are_the_cited_figures():
    """The data file holds the sources' figures (eager, graph) per generation, in seconds."""
    launch = _table()["launch"]
    assert launch["gpu_s_by_generation"]["hopper"] == pytest.approx([2.1e-6, 1.3e-6])
    assert launch["gpu_s_by_generation"]["blackwell"] == pytest.approx([2.4e-6, 0.8e-6])
    assert "ampere" not in launch["gpu_s_by_generation"]
    b200, h100, a100 = (gpu_compute(g).kernels for g in ("B200", "H100", "A100"))
    assert (b200.launch_gpu_s, b200.launch_gpu_graph_s) == pytest.approx((2.4e-6, 0.8e-6))
    assert (h100.launch_gpu_s, h100.launch_gpu_graph_s) == pytest.approx((2.1e-6, 1.3e-6))
    assert a100.launch_gpu_s == a100.launch_gpu_graph_s == pytest.approx(launch["gpu_s"])


def test_a_graphed_op_saves_the_gap_difference_per_kernel():
    """One FP8 grouped expert GEMM on B200: captured, forward and backward are each shorter by (2.4 - 0.8) us
    per kernel on the pass's critical path: each per-expert cast (on the main stream), and one gap per GEMM pass,
    whose 16 per-expert GEMMs run on Transformer Engine's 4 streams with the GPU full, the other gaps behind the
    other streams' tiles (topo/training/grouped_gemm.py)."""
    model, gpu = load_model("qwen3-30b-a3b"), gpu_compute("B200")
    lay = make_layout(**QWEN_B200)
    fc1 = next(op for op in block_ops(model, lay, "E") if op.name == "fc1")
    assert fc1.expert_kernels == "multi_stream" and fc1.launches == 16
    for backward in (False, True):
        eager = op_time_s(fc1, gpu, lay.precision, backward=backward)
        graph = op_time_s(fc1, gpu, lay.precision, backward=backward, graphed=True)
        passes = 2 if backward else 1
        kernels = kernels_launched(fc1, lay.precision, backward)
        assert kernels >= 32  # 16 local experts: a GEMM and a cast each forward
        critical = kernels - fc1.launches * passes + passes
        assert eager - graph == pytest.approx(1.6e-6 * critical, rel=1e-9)


def test_block_time_charges_the_graph_gap_only_to_captured_ops():
    """Capturing ``attn`` shortens the attention block by the gap difference times its kernels, and leaves the
    MoE block's uncaptured ops (permutation, experts) at the eager gap; the router part captured by
    ``moe_router`` is shorter by its own kernels' difference."""
    model, gpu = load_model("qwen3-30b-a3b"), gpu_compute("B200")
    eager = make_layout(**QWEN_B200)
    graphed = make_layout(**QWEN_B200, cuda_graph_scope=("attn", "moe_router"))
    for kind in ("*", "E"):
        ops = block_ops(model, graphed, kind)
        kernels = sum(kernels_launched(op, "fp8", b) for op in ops for b in (False, True)
                      if captured(op, graphed.cuda_graph_scope)
                      and (op.passes == "both" or b == (op.passes == "backward")))
        assert kernels > 0
        e, g = block_time(model, eager, gpu, kind), block_time(model, graphed, gpu, kind)
        assert (e.forward_s + e.backward_s) - (g.forward_s + g.backward_s) == pytest.approx(1.6e-6 * kernels,
                                                                                         rel=1e-9)
    moe = [op for op in block_ops(model, graphed, "E") if op.name in ("permute", "fc1", "fc2")]
    assert not any(captured(op, graphed.cuda_graph_scope) for op in moe)
