"""FP8 attention (Transformer Engine's ``fp8_dpa``) over a sliding window: the backward computes the whole causal
square (the layout's ``attention_fp8``).

Published: cuDNN's own GPT-OSS attention benchmark (NVIDIA/cudnn-frontend@3929da2ef4c1
benchmark/sdpa_benchmark_training/results/gpt_oss/gb200/gpt_oss_20260424_100011.csv, cuDNN 9.22.0, GB200, hdim 64,
128 / 128 heads, batch 2, 128-key window): backward at 4,096 / 8,192 tokens 0.465 / 0.911 ms in bfloat16, 1.731 /
6.176 ms in fp8, 2.080 / 7.427 ms in mxfp8; forward 0.210 ms bfloat16, 0.195 fp8, 0.210 mxfp8 at 4,096."""

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.kernels import attention_rate_flops
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, op_time_s
from topo.training.parallel import check_layout, make_layout

# GPT-OSS 120B on one GB200 rack as the 26.06 MXFP8 preset lays it out: MBS 4 x 4,096 tokens, 64 query heads of 64
# (the benchmark's batch 2 x 128 heads: the same query-head tokens)
KW = dict(ep=64, dp=64, global_batch=1280, micro_batch=4, seq_len=4096, etp=1, precision="fp8", fp8_recipe="mxfp8",
          moe_imbalance=1.0)


def _ops(lay, kind="W"):
    return {op.name: op for op in block_ops(load_model("gpt-oss-120b"), lay, kind)}


@pytest.fixture(scope="module")
def gb200():
    return gpu_compute("GB200")


def test_the_window_backward_computes_the_causal_square_at_the_published_rate(gb200):
    """The forward keeps its band; the backward is one op over the causal square, 2 T (s / 2) heads (64 + 64) FLOPs,
    at the mxfp8 curve's 661 of 2,500 at 4,096 tokens (the file's 2.080 ms over that square)."""
    ops = _ops(make_layout(**KW, attention_fp8="mxfp8"))
    fwd, bwd = ops["core_attention"], ops["core_attention_fp8_grad"]
    assert (fwd.passes, bwd.passes, fwd.window, bwd.window) == ("forward", "backward", 128, 0.0)
    T = 4 * 4096
    assert bwd.flops == pytest.approx(2 * T * 4096 / 2 * 64 * (64 + 64))
    km = gb200.kernels
    rate = 661 / 2500 * km.attention_scale * km.sustained * km.peak_flops["bf16"]
    assert attention_rate_flops(km, 64, 4096, True, True, 0.0, "", "mxfp8") == pytest.approx(rate)
    assert op_time_s(bwd, gb200, "fp8", backward=True) == pytest.approx(2.5 * bwd.flops / rate + km.launch_gpu_s)
    assert op_time_s(bwd, gb200, "fp8") == op_time_s(fwd, gb200, "fp8", backward=True) == 0.0


def test_fp8_over_bf16_window_backward_is_the_published_ratio(gb200):
    """At cuDNN 9.22 (the table's own), the FP8 window backward over the BF16 one: 1.731 / 0.465 = 3.72 (fp8) and
    2.080 / 0.465 = 4.47 (mxfp8) measured; the forward unchanged (fp8 0.195 / 0.210: BF16's rate kept)."""
    bf16 = _ops(make_layout(**KW))["core_attention"]
    base_b = op_time_s(bf16, gb200, "fp8", backward=True)
    for scaling, measured in (("fp8", 1.731 / 0.465), ("mxfp8", 2.080 / 0.465)):
        ops = _ops(make_layout(**KW, attention_fp8=scaling))
        ratio = op_time_s(ops["core_attention_fp8_grad"], gb200, "fp8", backward=True) / base_b
        assert ratio == pytest.approx(measured, rel=0.10)
        assert op_time_s(ops["core_attention"], gb200, "fp8") == op_time_s(bf16, gb200, "fp8")


def test_the_fp8_window_backward_grows_as_the_square():
    """8,192 over 4,096 tokens: the fp8 backward 6.176 / 1.731 = 3.57 measured (the square), the bfloat16 band's
    0.911 / 0.465 = 1.96."""
    g = gpu_compute("GB200")
    t = {}
    for s in (4096, 8192):
        kw = {**KW, "seq_len": s, "global_batch": 1280}
        ops = _ops(make_layout(**kw, attention_fp8="fp8"))
        t[s] = op_time_s(ops["core_attention_fp8_grad"], g, "fp8", backward=True)
    assert t[8192] / t[4096] == pytest.approx(6.176 / 1.731, rel=0.03)


def test_a_full_layer_backward_reads_the_same_square_rate(gb200):
    """The FP8 backward's rate over the causal square does not depend on the window (cuDNN 9.19 at a 1,024-key
    window, 64 heads: 0.862 ms at 4,096 tokens = 797 TFLOP/s over the square; 9.22 at 128 keys: 794): a full causal
    layer's backward reads it too; its forward keeps the BF16 rate."""
    model = load_model("gpt-oss-120b")
    bf16, fp8 = make_layout(**KW), make_layout(**KW, attention_fp8="mxfp8")
    core_b, core_f = _ops(bf16, "*")["core_attention"], _ops(fp8, "*")["core_attention"]
    assert op_time_s(core_f, gb200, "fp8") == op_time_s(core_b, gb200, "fp8")
    square = _ops(fp8)["core_attention_fp8_grad"]
    assert op_time_s(core_f, gb200, "fp8", backward=True) == pytest.approx(
        op_time_s(square, gb200, "fp8", backward=True))
    assert 2.5 * 2 * 64 * 64 * 4096 ** 2 / 2 * 4 / 0.862e-3 / 1e12 == pytest.approx(794, rel=0.01)
    w_b, w_f = block_time(model, bf16, gb200, "W"), block_time(model, fp8, gb200, "W")
    assert w_f.forward_s == pytest.approx(w_b.forward_s) and w_f.backward_s > w_b.backward_s
    # another head dim reads the BF16 causal rate (only hdim 64 is published)
    km = gb200.kernels
    assert attention_rate_flops(km, 128, 4096, True, True, 0.0, "", "mxfp8") == attention_rate_flops(
        km, 128, 4096, True, True)


def test_only_a_sliding_window_layer_splits_and_hopper_keeps_the_band():
    """rev54: the square is a measurement of cuDNN's FP8 backward on GB200 / GB300 at hdim 64 only (Hopper's cuDNN
    9.19 refuses an FP8 hdim-64 backward, section 173): where the GPU's table has no such curve, the window layer's
    backward stays its BF16 band (as the options line's "no effect" says), not the square at the causal rate."""
    fp8, bf16 = make_layout(**KW, attention_fp8="mxfp8"), make_layout(**KW)
    h100 = gpu_compute("H100")
    sq = _ops(fp8)["core_attention_fp8_grad"]
    band = _ops(bf16)["core_attention"]
    assert op_time_s(sq, h100, "fp8", backward=True) == pytest.approx(op_time_s(band, h100, "fp8", backward=True))
    model = load_model("gpt-oss-120b")
    assert block_time(model, fp8, h100, "W").backward_s == pytest.approx(block_time(model, bf16, h100, "W").backward_s)
    # a model without a sliding window has no such op (its causal backward carries the scaling)
    qwen = load_model("qwen3-30b-a3b")
    qlay = make_layout(ep=8, dp=8, global_batch=512, micro_batch=1, seq_len=4096, etp=1, precision="fp8",
                       attention_fp8="mxfp8")
    assert "core_attention_fp8_grad" not in {op.name for op in block_ops(qwen, qlay, "*")}
    assert {op.name: op for op in block_ops(qwen, qlay, "*")}["core_attention"].fp8_attention == "mxfp8"


def test_attention_fp8_needs_fp8():
    m = load_model("llama3-8b")
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=8, global_batch=8, attention_fp8="fp8"), gpus=8)
    assert e.value.key == "attention_fp8" and "precision bf16" in str(e.value)


def test_mxfp8_attention_on_hopper_is_refused_on_one_line():
    """rev54: MXFP8 attention, like an MXFP8 recipe, needs Blackwell's block-scaled tensor cores (cuDNN's MXFP8 SDPA
    is published on GB200 / GB300 only, kernels.toml [attention.<table>.fp8_band_backward]); an H100 layout with it
    was priced silently (as BF16 attention)."""
    out = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch",
                  "16", "--precision", "fp8", "--layout", "attention_fp8=mxfp8")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == ("error: --layout: attention_fp8: mxfp8 needs Blackwell's block-scaled tensor cores, "
                                  "H100 is hopper; allowed: fp8, or \"\" (BF16 attention)")
