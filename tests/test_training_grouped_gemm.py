"""How Transformer Engine issues a grouped expert GEMM pass (topo/training/grouped_gemm.py), from its source: the
multi-stream cuBLASLt loop of ``GroupedLinear`` (4 streams, GEMM i on stream i mod 4: NVIDIA/TransformerEngine
v2.9-v2.16 ``common/util/multi_stream.cpp``, ``common/gemm/cublaslt_gemm.cu``) and the CuTe DSL fused grouped MLP
(one kernel a pass: ``pytorch/ops/fused/forward_grouped_mlp.py`` at v2.16), by closed form on the kernel model."""

import math
import tomllib
from dataclasses import replace

import pytest

from topo.errors import TopoError
from topo.resources import data_dir
from topo.training.gpus import gpu_compute
from topo.training.grouped_gemm import compute_streams, grouped_pass_s
from topo.training.kernels import fp8_recipe_costs, gemm_s, quantize_kernels
from topo.training.model import load_model
from topo.training.operators import block_ops, kernels_launched, op_time_s
from topo.training.parallel import check_layout, make_layout


@pytest.fixture(scope="module")
def b200():
    return gpu_compute("B200").kernels


def test_four_streams_from_transformer_engine():
    t = tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))["grouped_gemm"]
    assert compute_streams() == t["streams"] == 4
    assert t["status"] == "published" and "multi_stream.cpp" in t["source"] and "v2.16" in t["source"]


def test_one_expert_is_one_gemm_and_its_gap(b200):
    g = b200.launch_gpu_s
    assert grouped_pass_s(b200, 2064, 1536, 2048, "fp8", 1, "multi_stream", g) == pytest.approx(
        gemm_s(b200, 2064, 1536, 2048, "fp8") + g)


def test_a_full_gpu_shares_its_waves_and_hides_the_gaps(b200):
    """DeepSeek-V3's fc1 on B200 at EP 8 (32 local experts of 1,032 rows x 4,096 x 7,168): every stream's GEMMs
    one after another take less than the packed waves of all 32, so the pass is the packed time and one gap (the
    other 31 launch gaps pass behind the other streams' tiles), not 32 gaps in a row."""
    g, M, N, K, G = b200.launch_gpu_s, 1032, 4096, 7168, 32
    packed = gemm_s(b200, M, N, K, "fp8", G)
    chain = math.ceil(G / 4) * (gemm_s(b200, M, N, K, "fp8") + g)
    assert chain < packed
    assert grouped_pass_s(b200, M, N, K, "fp8", G, "multi_stream", g) == pytest.approx(packed + g)
    assert grouped_pass_s(b200, M, N, K, "fp8", G, "multi_stream", g) < packed + G * g  # what topo charged before


def test_small_experts_wait_for_their_stream(b200):
    """TE PR #3134's shape (SM100, 8 experts x 128 tokens, N = K = 2,048): each GEMM is one row tile, far from
    filling the GPU, so the pass lasts a stream's two GEMMs one after another, each with its gap, longer than the
    packed waves a single launch runs. The PR measured the multi-stream cuBLASLt loop at 0.267 ms against 0.069 ms
    for one CUTLASS grouped kernel (kernel-vs-kernel timing, NVFP4; its dispatch rows 0.272 / 0.184 ms): the
    model's GPU side (FP8, at most NVFP4's time) runs the same way and within both published times, which also
    carry each call's host work."""
    g, M, N, K, G = b200.launch_gpu_s, 128, 2048, 2048, 8
    one = gemm_s(b200, M, N, K, "fp8")
    multi = grouped_pass_s(b200, M, N, K, "fp8", G, "multi_stream", g)
    single = grouped_pass_s(b200, M, N, K, "fp8", G, "fused_mlp", g)
    assert multi == pytest.approx(2 * (one + g))
    assert single == pytest.approx(gemm_s(b200, M, N, K, "fp8", G) + g)
    assert single < multi <= 0.267e-3 and single <= 0.069e-3


def test_the_layout_reaches_the_expert_operators():
    """Qwen3-30B on 8 B200 (16 local experts), MXFP8: the multi-stream path prices each pass by grouped_pass_s
    in place of the packed time plus a gap per expert GEMM; the fused grouped MLP launches one kernel a pass and
    runs the GLU in fc1's epilogue (no activation kernel of its own)."""
    qwen = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=4096, etp=1, moe_imbalance=1.0)
    gpu = gpu_compute("B200")
    km, per = gpu.kernels, gpu.kernels.launch_gpu_s
    fc2 = {op.name: op for op in block_ops(qwen, lay, "E")}["fc2"]
    assert fc2.expert_kernels == "multi_stream" and fc2.launches == fc2.groups == 16
    old = replace(fc2, expert_kernels="")  # the packed waves with a gap per expert GEMM
    for backward in (False, True):
        shapes = [(fc2.m, fc2.n, fc2.k)] if not backward else [(fc2.m, fc2.k, fc2.n), (fc2.k, fc2.n, fc2.m)]
        new_s = sum(grouped_pass_s(km, *s, "bf16", 16, "multi_stream", per) for s in shapes)
        old_s = sum(gemm_s(km, *s, "bf16", 16) + 16 * per for s in shapes)
        assert op_time_s(fc2, gpu, "bf16", backward=backward) - op_time_s(old, gpu, "bf16", backward=backward) \
            == pytest.approx(new_s - old_s)
    fused = make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=4096, etp=1, moe_imbalance=1.0,
                        precision="fp8", fp8_recipe="mxfp8", moe_expert_kernels="fused_mlp")
    ops = {op.name: op for op in block_ops(qwen, fused, "E")}
    assert "activation" not in ops and "activation" in {op.name for op in block_ops(qwen, lay, "E")}
    assert ops["fc1"].launches == ops["fc2"].launches == 1 and ops["fc1"].expert_kernels == "fused_mlp"


def _qwen3_30b_expert_ops():
    """Qwen3-30B-A3B's MoE block on GB200 in MXFP8 (EP 8: 16 local experts), its expert operators by name on the
    fused grouped MLP and on TE's multi-stream GroupedLinear: ``(gpu, kernel model, launch gap, fused, multi)``."""
    qwen = load_model("qwen3-30b-a3b")
    kw = dict(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=4096, etp=1, moe_imbalance=1.0, precision="fp8",
              fp8_recipe="mxfp8")
    gpu = gpu_compute("GB200")
    fused = {op.name: op for op in block_ops(qwen, make_layout(**kw, moe_expert_kernels="fused_mlp"), "E")}
    multi = {op.name: op for op in block_ops(qwen, make_layout(**kw), "E")}
    return gpu, gpu.kernels, gpu.kernels.launch_gpu_s, fused, multi


def test_the_fused_mlp_casts_two_inputs_in_epilogues():
    """The fused grouped MLP quantises fc2's forward input in fc1's kernel (its ``d_tensor`` / ``d_col_tensor``
    outputs: NVIDIA/TransformerEngine@000c2736 ``pytorch/ops/fused/forward_grouped_mlp.py``) and fc1's output
    gradient in the dGLU kernel (``d_row_tensor`` / ``d_col_tensor``, which fc1's dgrad and wgrad read:
    @00a35218 ``backward_grouped_mlp.py``); NVIDIA's blog "Boosting MoE Training Throughput with Advanced Fusion
    Kernels" (2026-06-15) names the kernels "GroupGemm + Activation + Quantize/Transpose" and "GroupGemm +
    dActivation + Quantize/Transpose". Those two passes cast nothing (no bytes, no kernel); fc1's forward input
    and fc2's output gradient keep their casts, and TE's multi-stream GroupedLinear casts all four."""
    gpu, km, per, fused, multi = _qwen3_30b_expert_ops()
    assert (fused["fc1"].epilogue_cast, fused["fc2"].epilogue_cast) == ("backward", "forward")
    assert multi["fc1"].epilogue_cast == multi["fc2"].epilogue_cast == ""
    fc2, fc1 = fused["fc2"], fused["fc1"]
    ratio = fp8_recipe_costs("mxfp8", gpu.generation)[0]
    # fc2 forward: the grouped pass alone, no quantisation
    bare = grouped_pass_s(km, fc2.m, fc2.n, fc2.k, "fp8", fc2.groups, "fused_mlp", per, ratio)
    assert op_time_s(fc2, gpu, "fp8", fp8_recipe="mxfp8") == pytest.approx(bare)
    assert kernels_launched(fc2, "fp8") == fc2.launches == 1
    # fc1 backward: dgrad and wgrad, no quantisation of its output gradient
    back = sum(grouped_pass_s(km, *s, "fp8", fc1.groups, "fused_mlp", per, ratio)
               for s in [(fc1.m, fc1.k, fc1.n), (fc1.k, fc1.n, fc1.m)])
    assert op_time_s(fc1, gpu, "fp8", backward=True, fp8_recipe="mxfp8") == pytest.approx(back)
    assert kernels_launched(fc1, "fp8", backward=True) == 2
    # the other two passes cast their inputs (once for every expert: the next test)
    for op, backward in ((fc1, False), (fc2, True)):
        assert kernels_launched(op, "fp8", backward=backward) > (2 if backward else 1)
    q = quantize_kernels()["cast"]
    for name in ("fc1", "fc2"):
        for backward in (False, True):
            assert kernels_launched(multi[name], "fp8", backward=backward) == \
                multi[name].launches * (2 if backward else 1) + multi[name].groups * q + 1  # + the weights' swizzle


def test_the_fused_mlp_casts_its_other_two_inputs_once_for_every_expert():
    """fc1's forward input and fc2's output gradient, which no epilogue casts, are quantised by one
    ``tex.group_quantize`` call for all local experts (TransformerEngine v2.16 ``pytorch/ops/fused/
    forward_grouped_mlp.py`` "Group-quantize input tensor", ``backward_grouped_mlp.py``; v2.17
    ``ops/fused/grouped_mlp.py``): one ``group_quantize_mxfp8_kernel``, no descriptor update, since the experts'
    rows share their width (``VARYING_FIRST_DIM`` is a single tensor: ``common/cast/mxfp8/group_quantize_mxfp8.cuh``).
    TE's multi-stream ``GroupedLinear`` casts each expert on its own (``split_quantize``). The bytes are the same;
    the kernels, their gaps and the host's launches are one a pass, not one an expert."""
    gpu, km, per, fused, multi = _qwen3_30b_expert_ops()  # 128 experts: 16 local at EP 8
    fc1, fc2 = fused["fc1"], fused["fc2"]
    assert fc1.groups == fc2.groups == 16
    assert kernels_launched(fc1, "fp8") == 1 + 1  # the fused kernel, the grouped cast
    assert kernels_launched(fc2, "fp8", backward=True) == 2 + 1
    # a GEMM and a cast an expert, one swizzle of every expert's weight scales (mxfp8_weight_swizzle.toml)
    assert kernels_launched(multi["fc1"], "fp8") == 16 + 16 * quantize_kernels()["cast"] + 1
    # the pass's time: the grouped kernel, the cast's bytes, one launch gap for the cast (not 16)
    ratio = fp8_recipe_costs("mxfp8", gpu.generation)[0]
    bare = grouped_pass_s(km, fc1.m, fc1.n, fc1.k, "fp8", fc1.groups, "fused_mlp", per, ratio)
    with_cast = op_time_s(fc1, gpu, "fp8", fp8_recipe="mxfp8")
    no_gaps = replace(gpu, kernels=replace(km, launch_gpu_s=0.0))
    cast_bytes_s = op_time_s(fc1, no_gaps, "fp8", fp8_recipe="mxfp8") - grouped_pass_s(
        km, fc1.m, fc1.n, fc1.k, "fp8", fc1.groups, "fused_mlp", 0.0, ratio)
    assert cast_bytes_s > 0
    assert with_cast == pytest.approx(bare + cast_bytes_s + per, rel=1e-9)


def test_the_fused_mlp_runs_squared_relu_experts_at_their_width():
    """Nemotron 3 Nano's squared-ReLU experts (1,856 wide, hidden 2,688) on the fused grouped MLP: Transformer
    Engine fuses GroupedLinear + ScaledSReLU + GroupedLinear with fc1's out_features = fc2's in_features, where a GLU
    takes twice that (NVIDIA/TransformerEngine v2.17.1 4329ff84 ``pytorch/ops/fused/grouped_mlp.py``
    ``validate_grouped_mlp_dims``), the squared ReLU in fc1's kernel (``grouped_gemm_srelu_wrapper_sm100``) and its
    backward in fc2's dgrad (``grouped_gemm_dsrelu_wrapper_sm100``, which writes fc1's output gradient quantised:
    ``d_row_tensor`` / ``d_col_tensor``). So fc1 is ``rows x 1,856 x 2,688`` a local expert (Qwen3-30B's SwiGLU fc1
    twice its 768), no activation kernel, and fc1's backward is its two grouped passes at that N, nothing else."""
    nano, qwen = load_model("nemotron-3-nano-30b-a3b"), load_model("qwen3-30b-a3b")
    kw = dict(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=8192, etp=1, moe_imbalance=1.0, precision="fp8",
              fp8_recipe="mxfp8")
    gpu = gpu_compute("GB300")
    km, per = gpu.kernels, gpu.kernels.launch_gpu_s
    ratio = fp8_recipe_costs("mxfp8", gpu.generation)[0]
    def routed(model, **extra):  # the routed experts' operators (Nano's shared expert is a dense MLP beside them)
        ops = block_ops(model, make_layout(**kw, **extra), "E")
        return {op.name: op for op in ops if op.module in ("moe", "moe_act")}
    fused, multi = routed(nano, moe_expert_kernels="fused_mlp"), routed(nano)
    fc1 = fused["fc1"]
    assert (fc1.n, fc1.k, fc1.groups, fc1.expert_kernels) == (1856, 2688, 128 / 8, "fused_mlp")
    assert multi["fc1"].n == 1856 and routed(qwen, moe_expert_kernels="fused_mlp")["fc1"].n == 2 * 768
    assert "activation" not in fused and "activation" in multi
    back = sum(grouped_pass_s(km, *s, "fp8", fc1.groups, "fused_mlp", per, ratio)
               for s in [(fc1.m, 2688, 1856), (2688, 1856, fc1.m)])
    assert op_time_s(fc1, gpu, "fp8", backward=True, fp8_recipe="mxfp8") == pytest.approx(back)


def test_fused_mlp_needs_mxfp8_grouped_experts():
    qwen = load_model("qwen3-30b-a3b")
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, precision="fp8", fp8_recipe="current",
                      moe_expert_kernels="fused_mlp")
    with pytest.raises(TopoError, match="fused_mlp is the CuTe DSL fused grouped MLP, which runs MXFP8 grouped "
                                        "experts only; got fp8_recipe current, moe_grouped_gemm true; allowed "
                                        "with them: multi_stream"):
        check_layout(qwen, lay)
    with pytest.raises(ValueError, match="moe_expert_kernels 'cutlass'"):
        grouped_pass_s(gpu_compute("B200").kernels, 128, 128, 128, "fp8", 4, "cutlass", 1e-6)


DENSE = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch", "16"]


@pytest.mark.parametrize("pair, needle", [
    ("moe_expert_kernels=cutlass", "error: --layout: moe_expert_kernels: must be one of 'multi_stream' or "
                                   "'fused_mlp', got 'cutlass'"),
    ("moe_expert_kernels=fused_mlp", "error: --layout: moe_expert_kernels: fused_mlp applies to a "
                                     "mixture-of-experts model's experts; llama3-8b is dense; allowed: the default "
                                     "multi_stream (or no moe_expert_kernels)"),
])
def test_bad_value_is_one_line(pair, needle):
    from conftest import run_cli
    p = run_cli(*DENSE, "--layout", pair)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.strip() == needle, p.stderr


def test_options_line_names_the_fused_grouped_mlp():
    from conftest import run_cli
    out = run_cli("train", "gb200-nvl72-superpod", "--model", "qwen3-30b-a3b", "--ep", "8", "--dp", "8",
                  "--global-batch", "64", "--precision", "fp8", "--layout",
                  "fp8_recipe=mxfp8,moe_expert_kernels=fused_mlp", check=True).stdout
    assert [ln for ln in out.splitlines() if ln.startswith("framework options: ")] == [
        "framework options: fp8_recipe mxfp8, moe_expert_kernels fused_mlp (layout fields)"]


def test_each_row_takes_its_recipes_path():
    """The benchmark reads the path from the recipe: Megatron-Bridge's GB200/GB300 MXFP8 Qwen3, DeepSeek-V3 and
    GPT-OSS recipes from 26.06 on (v0.5.0 presets ``cutedsl_fused_grouped_mlp=True``; 26.06.01 and 26.08 recipe
    functions ``NVTE_CUTEDSL_FUSED_GROUPED_MLP: 1``) and MLPerf v6.0's DeepSeek-V3 run the fused grouped MLP; 26.04
    and earlier, B200 and H100 run Transformer Engine's multi-stream GroupedLinear."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import training_accuracy as ta
    rows = {r["run_id"]: r for r, _ in ta._published_rows()}
    path = {k: ta.expert_kernels(rows[k], ta._row_model(rows[k])) for k in (
        "mb2606_gb200_qwen3_30b", "mb260601_gb200_deepseekv3", "mb2608_gb200_qwen3_235b",
        "mlperf60_gb200_deepseekv3_512", "mbvc_gb300_qwen3_30b", "mb260401_gb200_qwen3_30b",
        "mb2604_gb200_deepseekv3", "mb260401_b200_qwen3_30b", "mb2606_h100_qwen3_30b", "mb260601_gb200_nemotron3_nano")}
    assert {k for k, v in path.items() if v == "fused_mlp"} == {
        "mb2606_gb200_qwen3_30b", "mb260601_gb200_deepseekv3", "mb2608_gb200_qwen3_235b",
        "mlperf60_gb200_deepseekv3_512", "mbvc_gb300_qwen3_30b"}
    assert set(path.values()) == {"fused_mlp", "multi_stream"}
