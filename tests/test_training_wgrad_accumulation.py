"""The weight-gradient GEMM accumulates into the kept gradient (``operators.op_time_s``'s ``grad_bytes``: Megatron-LM's
gradient_accumulation_fusion hands Transformer Engine's layers ``fuse_wgrad_accumulation``, cuBLAS with beta = 1
on ``main_grad``): each output element is read and written at the gradient's bytes, which binds where the GEMM's
reduction, the tokens, is short against the weight: experts with few rows each."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import gemm_s
from topo.training.model import load_model
from topo.training.operators import block_ops, op_time_s
from topo.training.parallel import make_layout


def _fc1(lay):
    return next(o for o in block_ops(load_model("qwen3-235b-a22b"), lay, "E") if o.name == "fc1")


def test_an_expert_weight_gradient_reads_and_writes_the_fp32_main_grad():
    # Qwen3-235B at TP4 EP8 ETP1, MBS 1, 4,096 tokens (the ModelZoo's tp4_ep8_pp8): 1,024 sequence-parallel tokens
    # a rank x top-8 over 8 EP ranks = 512 rows for each of its 16 experts; fc1's weight gradient is 4,096 x 3,072
    # over 512 rows (the mean rank's: moe_imbalance pinned at 1, as drop35 did for the other MoE physics tests;
    # dropless routing's busiest rank carries 1.0153 x, 519.8 rows, which this test's closed forms do not need)
    lay = make_layout(tp=4, pp=8, dp=8, ep=8, etp=1, vpp=4, global_batch=2048, micro_batch=1, seq_len=4096,
                      moe_imbalance=1.0)
    op = _fc1(lay)
    assert (op.m, op.n, op.k, op.groups) == (512, 2 * 1536, 4096, 16)
    gpu = gpu_compute("H100")
    km = gpu.kernels
    bw = km.hbm_Bps * km.gemm_memory_efficiency
    # the closed form of the HBM side: bf16 inputs (512 x 4,096 and 512 x 3,072) and the output read and written
    # in FP32: 16 x (2 (512 x 4,096 + 512 x 3,072) + 8 x 4,096 x 3,072) bytes
    hbm_s = 16 * (2 * (4096 * 512 + 512 * 3072) + 8 * 4096 * 3072) / bw
    wgrad = gemm_s(km, 4096, 3072, 512, "bf16", 16, out_bytes=8.0)
    # written in bf16 the GEMM is tile-bound (its HBM side a third of the accumulating one)
    hbm_bf16_s = 16 * (2 * (4096 * 512 + 512 * 3072) + 2 * 4096 * 3072) / bw
    tiles_s = gemm_s(km, 4096, 3072, 512, "bf16", 16)
    assert hbm_bf16_s < tiles_s < hbm_s
    # Hopper's kernels add the accumulation's 6 bytes an element over the BF16 write after their tiles
    # (kernels.toml [gemm] epilogue_overlap.hopper = 0: tests/test_training_epilogue_overlap.py)
    assert km.epilogue_overlap == 0.0
    assert wgrad == pytest.approx(max(tiles_s + 16 * 6 * 4096 * 3072 / bw, hbm_s))
    assert wgrad > 1.4 * tiles_s
    # the backward pass charges it with the layout's gradient bytes, and only the weight gradient
    plain = op_time_s(op, gpu, "bf16", backward=True)
    fp32 = op_time_s(op, gpu, "bf16", backward=True, grad_bytes=4.0)
    bf16 = op_time_s(op, gpu, "bf16", backward=True, grad_bytes=2.0)
    assert fp32 - plain == pytest.approx(wgrad - tiles_s)
    # a bf16 gradient buffer: 4 bytes an element read and written, 2 over the BF16 write after the tiles
    assert bf16 - plain == pytest.approx(16 * 2 * 4096 * 3072 / bw)
    assert plain < bf16 < fp32
    assert op_time_s(op, gpu, "bf16", grad_bytes=4.0) == op_time_s(op, gpu, "bf16")  # forward: no gradient


def test_many_rows_an_expert_pay_the_accumulation_as_a_smaller_share():
    # EP32 at TP2 (the ModelZoo's ep32_pp8): 2,048 tokens a rank x 8 / 32 x 32 = 4,096 rows for each of 4 experts
    # (the mean rank's rows, moe_imbalance pinned): never HBM-bound, but the accumulation's extra bytes still follow
    # the tiles (epilogue_overlap 0), the same bytes as at 512 rows over 8 times the tile work
    lay = make_layout(tp=2, pp=8, dp=16, ep=32, etp=1, vpp=4, global_batch=2048, micro_batch=1, seq_len=4096,
                      moe_imbalance=1.0)
    op = _fc1(lay)
    assert (op.m, op.groups) == (4096, 4)
    gpu = gpu_compute("H100")
    km = gpu.kernels
    extra = 4 * 6 * 4096 * 3072 / (km.hbm_Bps * km.gemm_memory_efficiency)
    plain = op_time_s(op, gpu, "bf16", backward=True)
    assert op_time_s(op, gpu, "bf16", backward=True, grad_bytes=4.0) - plain == pytest.approx(extra, rel=1e-9)
    assert extra < 0.2 * plain


def test_the_layer_takes_the_layouts_gradient_bytes():
    from topo.training.operators import block_time
    model, gpu = load_model("qwen3-235b-a22b"), gpu_compute("H100")
    lay = make_layout(tp=4, pp=8, dp=8, ep=8, etp=1, vpp=4, global_batch=2048, micro_batch=1, seq_len=4096)
    fp32 = block_time(model, lay, gpu, "E").backward_s
    bf16 = block_time(model, lay.model_copy(update={"grad_bytes": 2.0}), gpu, "E").backward_s
    assert fp32 > bf16 * 1.05


def test_each_framework_writes_its_weight_gradient_its_own_way():
    """``wgrad_output``: Megatron-LM adds into the FP32 ``main_grad`` (8 bytes an element: read and written); PyTorch
    FSDP2 (NeMo AutoModel) writes a new bf16 gradient (2 bytes) and, on the compute stream, copies it into the
    reduce-scatter buffer at the reduction's dtype (``foreach_reduce``'s ``chunk_cat``, pytorch/pytorch@010ae4a8
    ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``: 2 bytes read, 4 written for an FP32
    ``reduce_dtype``, 2 for the experts' bf16); JAX (MaxText) writes the gradient once in the parameter's dtype
    (``weight_dtype: float32``: 4 bytes)."""
    from topo.training.kernels import memory_s
    from topo.training.operators import op_passes_s
    lay = make_layout(tp=4, pp=8, dp=8, ep=8, etp=1, vpp=4, global_batch=2048, micro_batch=1, seq_len=4096,
                      moe_imbalance=1.0)
    op = _fc1(lay)
    gpu = gpu_compute("H100")
    km = gpu.kernels
    base = op_time_s(op, gpu, "bf16", backward=True)  # the weight gradient written once in bf16
    plain = gemm_s(km, 4096, 3072, 512, "bf16", 16)
    elements = 16 * 4096 * 3072  # the 16 experts' fc1 weight gradients
    megatron = op_passes_s(op, gpu, lay)[1]
    assert megatron - base == pytest.approx(gemm_s(km, 4096, 3072, 512, "bf16", 16, out_bytes=8.0) - plain)
    fsdp2 = lay.model_copy(update={"wgrad_output": "fsdp2", "grad_bytes": 2.0, "grad_reduce_bytes": 4.0,
                                   "expert_grad_reduce_bytes": 2.0})
    assert op_passes_s(op, gpu, fsdp2)[1] - base == pytest.approx(memory_s(km, (2 + 2) * elements))
    dense_fp32 = fsdp2.model_copy(update={"expert_grad_reduce_bytes": None})  # the experts reduced as the rest
    assert op_passes_s(op, gpu, dense_fp32)[1] - base == pytest.approx(memory_s(km, (2 + 4) * elements))
    jax = lay.model_copy(update={"wgrad_output": "param_dtype"})
    assert op_passes_s(op, gpu, jax)[1] - base == pytest.approx(
        gemm_s(km, 4096, 3072, 512, "bf16", 16, out_bytes=4.0) - plain)
    assert op_passes_s(op, gpu, jax)[1] < megatron  # written once, not read and written
    assert op_passes_s(op, gpu, fsdp2)[0] == op_passes_s(op, gpu, lay)[0]  # the forward has no gradient


def test_megatron_fsdp_without_the_fusion_copies_each_weight_gradient_into_its_buffer():
    """``wgrad_output = "copied"``: Megatron-FSDP with ``gradient_accumulation_fusion`` off (Megatron-Bridge's FSDP
    Llama configs from v0.2.0) writes a new bf16 gradient and its post-backward hook copies it into the gradient
    buffer, ``param.main_grad.copy_(param.grad)`` (NVIDIA/Megatron-LM@d98e8a64 ``megatron_fsdp.py`` ``_grad_acc``):
    2 bytes written by the GEMM, then 2 read and the reduction's bytes written (bf16: 2) on the compute stream;
    FSDP2's gradient bytes but none of FSDP2's unit copies around the ZeRO-3 gathers."""
    from topo.training.kernels import memory_s
    from topo.training.operators import block_time, op_passes_s
    lay = make_layout(tp=1, dp=64, global_batch=256, micro_batch=2, seq_len=8192, dp_sharding="zero3",
                      weight_bytes=2.0, grad_bytes=2.0, grad_reduce_bytes=2.0)
    model = load_model("llama3-70b")
    gpu = gpu_compute("GB200")
    km = gpu.kernels
    (fc1,) = [o for o in block_ops(model, lay, "-") if o.name == "fc1"]
    N, K = 2 * 28672, 8192  # fc1's weight gradient: 8,192 x 57,344 (gate and up)
    base = op_time_s(fc1, gpu, "bf16", backward=True)  # written once in bf16
    copied = lay.model_copy(update={"wgrad_output": "copied"})
    assert op_passes_s(fc1, gpu, copied)[1] - base == pytest.approx(memory_s(km, (2 + 2) * N * K))
    fused = op_passes_s(fc1, gpu, lay)[1]  # Megatron's fusion: the bf16 main_grad read and written by the GEMM
    assert base < fused < op_passes_s(fc1, gpu, copied)[1]  # the fusion saves the copy's kernel
    # the layer's other time is the fused layout's: no FSDP2 copy-in / copy-out around the gathers
    fsdp2 = lay.model_copy(update={"wgrad_output": "fsdp2"})
    t = {w: block_time(model, x, gpu, "-") for w, x in (("copied", copied), ("fsdp2", fsdp2), ("fused", lay))}
    assert t["copied"].forward_s == pytest.approx(t["fused"].forward_s)
    assert t["fsdp2"].forward_s > t["copied"].forward_s  # FSDP2's copy-out of the gathered weights
