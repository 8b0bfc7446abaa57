"""Operator compute, the GPU catalog, memory rules and layouts as frameworks run them (issue 20)."""

import pytest

import topo
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.parallel import check_layout, make_layout
from topo.training.mapping import map_layout
from topo.training.memory import memory_per_gpu, stage_params
from topo.training.model import load_model, model_from_dict
from topo.training.operators import Op, block_ops, op_time_s, OPTIMIZER_STEP_BYTES
from topo.training.step import estimate_step, step_traffic


@pytest.fixture(scope="module")
def h100():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_catalog_published_figures():
    # NVIDIA datasheets: H100 SXM BF16 989 / FP8 1,979 TFLOP/s dense, 3.35 TB/s; A100 312, 2.039 TB/s, no FP8;
    # GB200 NVL72 180 / 360 PFLOP/s and 576 TB/s over 72 GPUs
    h = gpu_compute("H100")
    assert (h.peak_bf16_flops, h.peak_fp8_flops, h.hbm_Bps) == (989e12, 1979e12, 3.35e12)
    a = gpu_compute("A100")
    assert a.peak_fp8_flops is None and a.hbm_Bps == pytest.approx(2.039e12)
    g = gpu_compute("GB200")
    # HBM: the device's own query (openxla/xla@4336d12e0706 specs/gb200.txtpb memory_bandwidth 7.928 TB/s, gpus.toml),
    # within 1% of the rack's 576 TB/s / 72
    assert g.peak_bf16_flops * 72 == pytest.approx(180e15) and g.hbm_Bps * 72 == pytest.approx(576e12, rel=0.01)
    assert g.hbm_Bps == pytest.approx(7.928064e12, rel=1e-3)
    for name in ("H200", "H800", "B200", "GB300"):
        assert gpu_compute(name).hbm_Bps > 0
    # an "80GB" H100 holds what its driver reports: 81,559 MiB = 85.5e9 bytes (nvidia-smi), not 80e9 (issue 30)
    assert h.memory_bytes == 81559 * 2**20 and gpu_compute("B200").memory_bytes == 183359 * 2**20


def test_roofline_closed_forms():
    """An operator's time is its kernels' (topo.training.kernels) plus a launch gap per kernel: a memory-bound
    op moves its bytes at 90% of HBM (twice backward); a GEMM is the tile model's, backward its input- and
    weight-gradient GEMMs; in FP8 a linear GEMM also quantises its input, once a pass, in a kernel of its own: on
    Hopper 4 bytes per element (read 2, write the FP8 data and its transpose for the TN-only FP8 GEMMs: TE
    quantizer.cpp create_tensor), X forward (M x K), dY backward (M x N)."""
    from topo.training.kernels import gemm_s
    gpu = gpu_compute("H100")
    k = gpu.kernels
    gap = k.launch_gpu_s
    mem = Op("residual", "layernorm", "memory", 0.0, 1e9)  # a norm: its kernel's rate (membw116)
    assert op_time_s(mem, gpu, "bf16") == pytest.approx(1e9 / (3.35e12 * 0.90) + gap)
    assert op_time_s(mem, gpu, "bf16", backward=True) == pytest.approx(2e9 / (3.35e12 * 0.90) + gap)
    M, N, K = 8192.0, 4096.0, 2048.0
    g = Op("fc", "mlp", "gemm", 2 * M * N * K, 0.0, M, N, K, 1.0, True)
    assert op_time_s(g, gpu, "bf16") == pytest.approx(gemm_s(k, M, N, K) + gap)
    assert op_time_s(g, gpu, "bf16", backward=True) == pytest.approx(gemm_s(k, M, K, N) + gemm_s(k, K, N, M)
                                                                     + 2 * gap)
    cast = 4 * M * K / (3.35e12 * 0.90)
    assert op_time_s(g, gpu, "fp8") == pytest.approx(gemm_s(k, M, N, K, "fp8") + cast + 2 * gap)  # the cast's launch
    cast_dy = 4 * M * N / (3.35e12 * 0.90)
    assert op_time_s(g, gpu, "fp8", backward=True) == pytest.approx(
        gemm_s(k, M, K, N, "fp8") + gemm_s(k, K, N, M, "fp8") + cast_dy + 3 * gap)  # dgrad, wgrad, one cast
    # current scaling before Transformer Engine 2.7 (no fused amax): the input is read once more (2 bytes per
    # element) by an amax kernel of its own, after the amax is zeroed, and a scale kernel runs, before the cast (TE
    # PR #1471's nvte_compute_amax, a cudaMemsetAsync of the amax before v2.8; nvte_compute_scale_from_amax, then
    # the cast: kernels.toml fp8_current_scaling_kernels = 4)
    amax = 2 * M * K / (3.35e12 * 0.90)
    assert op_time_s(g, gpu, "fp8", amax_pass=True) == pytest.approx(gemm_s(k, M, N, K, "fp8") + cast + amax
                                                                     + 5 * gap)
    assert op_time_s(g, gpu, "bf16", amax_pass=True) == op_time_s(g, gpu, "bf16")
    # a non-linear GEMM (attention scores, logits) stays in BF16 whatever the layout's precision
    s = Op("logits", "logits", "gemm", 2 * M * N * K, 0.0, M, N, K, 1.0, False)
    assert op_time_s(s, gpu, "fp8") == op_time_s(s, gpu, "bf16")


def test_fp8_only_on_linear_gemms():
    m = load_model("llama3-70b")
    gpu = gpu_compute("H100")
    for prec in ("bf16", "fp8"):
        lay = make_layout(tp=8, global_batch=8, precision=prec)
        ops = {o.name: o for o in block_ops(m, lay, "*")}
        assert ops["qkv"].linear and ops["out_proj"].linear and not ops["core_attention"].linear
    bf, f8 = (make_layout(tp=8, global_batch=8, precision=p) for p in ("bf16", "fp8"))
    att = next(o for o in block_ops(m, bf, "*") if o.name == "core_attention")
    assert op_time_s(att, gpu, "fp8") == op_time_s(att, gpu, "bf16")
    t = {p: sum(op_time_s(o, gpu, p) for o in block_ops(m, lay, "-")) for p, lay in (("bf16", bf), ("fp8", f8))}
    assert t["bf16"] / 2 < t["fp8"] < t["bf16"]  # faster, far from twice as fast


def test_gemm_shapes_follow_tp_and_experts():
    m = load_model("llama3-70b")
    lay = make_layout(tp=4, global_batch=1)
    ops = {o.name: o for o in block_ops(m, lay, "-")}
    # SwiGLU: fc1 is gate + up, 2 x 28,672 / 4 columns; fc2 reads 28,672 / 4
    assert (ops["fc1"].n, ops["fc1"].k) == (2 * 28672 / 4, 8192) and ops["fc1"].m == m.seq_len
    assert (ops["fc2"].n, ops["fc2"].k) == (8192, 28672 / 4)
    ds = load_model("deepseek-v3-671b")
    lay = make_layout(tp=1, dp=64, ep=64, global_batch=64, moe_imbalance=1.0)
    fc1 = next(o for o in block_ops(ds, lay, "E") if o.name == "fc1")
    # 256 experts over EP 64: 4 local GEMMs of 64 x 4096 x 8 / 256 rows (balanced tokens)
    assert fc1.groups == 4 and fc1.m == 64 * 4096 * 8 / 256 and fc1.n == 2 * 2048


def test_optimizer_step_time(h100):
    # a fused Adam step reads and writes 34 bytes per local parameter (the distributed optimizer's shard)
    m = load_model("llama3-8b")
    lay = make_layout(tp=8, dp=16, global_batch=64)
    r = estimate_step(h100, m, lay)
    dense, _, _ = stage_params(m, lay)[0]
    gpu = gpu_compute("H100")
    assert r.breakdown_s["optimizer"] == pytest.approx(dense / 16 * OPTIMIZER_STEP_BYTES
                                                       / (3.35e12 * gpu.kernels.memory_efficiency))


def test_mixed_precision_state_is_18_bytes_and_dist_opt_over_dp_cp():
    # Megatron-LM bf16: bf16 weights 2 + fp32 main_grad 4 + fp32 main weights and two moments 12 = 18 B/param
    m = load_model("llama3-8b")
    one = memory_per_gpu(m, make_layout(global_batch=1, dp_sharding="none"), 80e9)
    assert (one.weights_bytes + one.gradients_bytes + one.optimizer_bytes) == pytest.approx(18 * m.total_params)
    # the distributed optimizer shards over data x context ranks: CP 2 halves it at the same dp
    m = load_model("llama3-405b")
    base = dict(tp=8, pp=8, dp=4, global_batch=64, seq_len=8192)
    a = memory_per_gpu(m, make_layout(cp=1, **base), 80e9)
    b = memory_per_gpu(m, make_layout(cp=2, **base), 80e9)
    assert b.optimizer_bytes == pytest.approx(a.optimizer_bytes / 2)


def test_expert_parallelism_over_tensor_and_data_ranks(h100):
    # Megatron-Core runs TP2 EP64 DP32 with expert-tensor-parallel 1: EP spans tensor x data ranks
    m = load_model("deepseek-v3-671b")
    lay = make_layout(tp=2, ep=64, etp=1, dp=32, pp=16, global_batch=1024)
    check_layout(m, lay, gpus=1024)
    mp = map_layout(lay, 8, 1024)
    ep = mp.groups("ep")
    assert ep.shape == (16, 64) and list(ep[0]) == list(range(64))  # a stage's 64 ranks, TP fastest
    assert mp.groups("tp")[0].tolist() == [0, 1]
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=2, ep=48, etp=1, dp=32, pp=16, global_batch=1024), gpus=1024)
    assert e.value.key == "ep" and "256 experts" in e.value.message


def test_nvl72_64_of_72_keeps_ep_in_a_rack():
    nvl = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))
    m = load_model("deepseek-v3-671b")
    spread = make_layout(ep=64, dp=64, pp=4, global_batch=256)
    packed = make_layout(ep=64, dp=64, pp=4, global_batch=256, gpus_per_domain_used=64)
    assert map_layout(spread, 72, nvl.layout.num_gpus).domains_spanned("ep") == 2
    mp = map_layout(packed, 72, nvl.layout.num_gpus)
    assert mp.domains_spanned("ep") == 1 and int(mp.groups("ep")[1][0]) == 72  # the second rack's first GPU
    r = estimate_step(nvl, m, spread, contention=False)
    assert any("gpus_per_domain_used" in n for n in r.notes)


def test_embedding_and_loss_as_pipeline_layers():
    m = load_model("llama3-405b")
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=8, pp=16, vpp=8, dp=1, global_batch=16), gpus=128)
    assert e.value.key == "pp" and "pipeline_embedding" in e.value.message
    check_layout(m, make_layout(tp=8, pp=16, vpp=8, dp=1, global_batch=16, pipeline_embedding=True), gpus=128)
    small = load_model("megatron-gpt-3.6b")  # 30 layers on PP4 x VP8 = 32 chunks: 30 + embedding + loss
    check_layout(small, make_layout(pp=4, vpp=8, global_batch=32, pipeline_embedding=True), gpus=4)


def test_fsdp_gathers_one_layer_at_a_time(h100):
    m = load_model("gpt3-175b")
    lay = make_layout(tp=8, dp=128, global_batch=1024, dp_sharding="zero3")
    dp = [it for it in step_traffic(m, lay) if it["dim"] == "dp"]
    largest_unit = max(r[2] for r in stage_params(m, lay)) * lay.weight_bytes
    gathers = [it["size_bytes"] for it in dp if it["collective"] == "all_gather"]
    reduces = [it["size_bytes"] for it in dp if it["collective"] == "reduce_scatter"]
    assert gathers and max(gathers) <= largest_unit * 1.0000001
    assert reduces and max(reduces) <= largest_unit / lay.weight_bytes * lay.reduce_bytes * 1.0000001
    mem = memory_per_gpu(m, lay, 80e9)
    assert mem.buffers_bytes == pytest.approx(2 * largest_unit)  # the layer computing and the one prefetched


def test_pipeline_scatter_gather(h100):
    # without SP each TP rank sends 1/tp of the activation and the next stage all-gathers it (SC21 sec. 4.1)
    m = load_model("megatron-gpt-146b")
    lay = make_layout(tp=8, pp=8, dp=16, global_batch=128, sequence_parallel=False)
    items = step_traffic(m, lay)
    pp = next(i for i in items if i["dim"] == "pp")
    assert pp["size_bytes"] == m.seq_len * m.hidden * 2 / 8
    assert any(i["dim"] == "tp" and i["phase"] == "pp_gather" for i in items)
    old = step_traffic(m, make_layout(tp=8, pp=8, dp=16, global_batch=128, sequence_parallel=False,
                                      pp_scatter_gather=False))
    assert next(i for i in old if i["dim"] == "pp")["size_bytes"] == m.seq_len * m.hidden * 2


def test_mamba_layers_are_described_and_evaluated(h100):
    m = load_model("nemotron-nano-9b-v2")
    assert (m.num_mamba_layers, m.num_attention_layers, m.num_dense_layers) == (27, 4, 25)
    lay = make_layout(tp=2, dp=64, global_batch=128)
    r = estimate_step(h100, m, lay, contention=False)
    assert r.compute_by_module_s["mamba"] > 0
    gathers = [i for i in step_traffic(m, lay) if i["dim"] == "tp" and i["collective"] == "all_gather"]
    tp = sum(i["calls"] for i in gathers if not i.get("what", "").startswith("head:"))
    # every block (Mamba, attention, MLP) gathers forward, and twice backward (the output gradient; its input again
    # for the weight gradient)
    assert tp == lay.microbatches * 3 * 56
    # section 341 (stagetp73): the single stage's heads gather three times a micro-batch under sequence parallelism
    # (the embedding's output gradient backward; the output layer's input forward and again for wgrad:
    # Megatron-LM@7094270c tensor_parallel/layers.py lines 241-271, 434, 468)
    assert sum(i["calls"] for i in gathers if i.get("what", "").startswith("head:")) == lay.microbatches * 3
    bad = {**m.model_dump(), "layer_pattern": "MX" + m.layer_pattern[2:]}
    with pytest.raises(TopoError) as e:
        model_from_dict(bad, "nh.toml")
    assert "layer_pattern" in str(e.value) and "allowed" in str(e.value)


def test_missing_or_negative_dimension_names_the_field():
    base = load_model("llama3-8b").model_dump()
    with pytest.raises(TopoError) as e:
        model_from_dict({**base, "hidden": -4096}, "m.toml")
    assert e.value.key == "hidden" and ">= 1" in e.value.message
    del base["layers"]
    with pytest.raises(TopoError) as e:
        model_from_dict(base, "m.toml")
    assert e.value.key == "layers" and "required" in e.value.message


def test_the_amax_pass_needs_fp8():
    """``fp8_amax_pass`` prices a step of FP8 casts: with BF16 matmuls it is refused, naming the key."""
    m = load_model("llama3-8b")
    check_layout(m, make_layout(tp=8, global_batch=8, precision="fp8", fp8_amax_pass=True), gpus=8)
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=8, global_batch=8, fp8_amax_pass=True), gpus=8)
    assert e.value.key == "fp8_amax_pass" and "precision bf16" in str(e.value)


def test_the_amax_pass_slows_an_fp8_step():
    """The same current-scaling FP8 layout with the amax pass (TE before 2.7, fedd9ddc): a norm-fed linear's input
    cast (fc1 after the MLP's norm) reads its input once more, since the norm no longer computes the amax
    (``current_norm_amax``: the scale and the cast kernels) and the amax pass runs its own (``current``: the amax
    zeroed, the amax, the scale, the cast); every other quantisation reads its input twice either way (current
    scaling's amax kernel, or the amax pass) and launches as many kernels, so nothing else changes. The amax pass is
    current scaling's (TE PR #1471); a delayed-scaling layout with it is refused (below), and since section 418 its
    norm writes fc1's input in FP8, no cast to slow."""
    from topo.training.kernels import quantize_kernels
    m = load_model("llama3-8b")
    gpu = gpu_compute("B200")
    lay, amax = (make_layout(tp=1, dp=8, global_batch=8, precision="fp8", fp8_recipe="current", fp8_amax_pass=a)
                 for a in (False, True))
    k, q = gpu.kernels, quantize_kernels()
    extra = 0.0
    for op in block_ops(m, lay, "-"):
        if op.kind == "gemm" and op.linear and op.norm_amax:  # the forward input's BF16 read and its two kernels
            extra += 2 * op.m * op.k * op.groups / (k.hbm_Bps * k.memory_efficiency)
            extra += (q["current"] - q["current_norm_amax"]) * k.launch_gpu_s
    t0 = sum(op_time_s(o, gpu, "fp8") + op_time_s(o, gpu, "fp8", backward=True) for o in block_ops(m, lay, "-"))
    t1 = sum(op_time_s(o, gpu, "fp8", amax_pass=True) + op_time_s(o, gpu, "fp8", backward=True, amax_pass=True)
             for o in block_ops(m, amax, "-"))
    assert extra > 0 and t1 - t0 == pytest.approx(extra, rel=1e-9)


def test_amax_pass_needs_current_scaling():
    """The amax pass is per-tensor current scaling's (TE PR #1471); delayed scaling and MXFP8 find their scales
    inside the cast, so a layout asking for both is refused in one line naming the key."""
    from topo.errors import TopoError
    from topo.training.model import load_model
    from topo.training.parallel import check_layout, make_layout

    m = load_model("llama3-8b")
    for recipe in ("delayed", "mxfp8"):
        lay = make_layout(dp=8, global_batch=64, seq_len=4096, precision="fp8", fp8_recipe=recipe,
                          fp8_amax_pass=True)
        with pytest.raises(TopoError, match="amax pass") as e:
            check_layout(m, lay)
        assert e.value.key == "fp8_amax_pass"
    check_layout(m, make_layout(dp=8, global_batch=64, seq_len=4096, precision="fp8", fp8_recipe="current",
                                fp8_amax_pass=True))


def test_a_job_larger_than_the_fabric_is_refused_before_its_gpu_ids_are_built():
    # tidy13: `topo train dgx-h100-superpod --gpus 100000000 --global-batch 100000000` took 19 s and 2.4 GB to build
    # the 10^8 GPU ids it then refused; the last rank's id is a closed form (first + (n-1) // used x D + (n-1) % used)
    import tracemalloc

    lay = make_layout(dp=10**7, global_batch=10**7)
    tracemalloc.start()
    try:
        with pytest.raises(TopoError, match=r"the job needs GPUs 0 to 9,999,999, but the fabric has 1,024"):
            map_layout(lay, 8, 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1e6  # the ids of 10^7 ranks are 80 MB of int64
    # the closed form is the id the arrays give: 6 of each 8-GPU domain, 100 ranks end on GPU 16 x 8 + 3 = 131
    with pytest.raises(TopoError, match=r"GPUs 0 to 131 \(6 of each 8-GPU domain\), but the fabric has 128"):
        map_layout(make_layout(dp=100, global_batch=100, gpus_per_domain_used=6), 8, 128)
    assert map_layout(make_layout(dp=100, global_batch=100, gpus_per_domain_used=6), 8, 132).groups("dp").max() == 131
