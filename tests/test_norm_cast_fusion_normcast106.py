"""Transformer Engine fuses a LayerNormLinear's input cast into the norm under per-tensor delayed scaling only
(docs/calibration-findings.md section 418). NVIDIA/TransformerEngine v2.12 (5671fd36)
``transformer_engine/pytorch/csrc/extensions/normalization.cpp`` lines 97-130 (FULLY_FUSED for a ``Float8Quantizer``;
MXFP8 only with ``NVTE_NORM_FWD_USE_CUDNN``; current scaling FUSED_NORM_AMAX_FP8, a cast after the norm),
``common/normalization/layernorm/ln_api.cpp`` lines 116-121 (``nvte_transpose`` of the FP8 output where it has
column-wise data: TN-only GPUs), ``module/layernorm_linear.py`` lines 211-228 and 278 (no cast after a quantised
norm)."""

from dataclasses import replace

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s, norm_writes_quantised, quantize_s
from topo.training.model import load_model
from topo.training.operators import (block_ops, cast_kind, kernels_launched, launch_calls, norm_cast_bytes,
                                     op_time_s)
from topo.training.parallel import make_layout

BF16, FP8 = 2.0, 1.0
SEQ, H = 8192, 4096


def _ops(gpu, recipe="delayed", tp=1, sp=False):
    lay = make_layout(tp=tp, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=SEQ, precision="fp8",
                      fp8_recipe=recipe, sequence_parallel=sp)
    m = load_model("llama3-8b")
    return {op.name: op for kind in ("*", "-") for op in block_ops(m, lay, kind, gpu.generation)
            if op.kind == "gemm" and op.linear}


def test_only_delayed_scaling_writes_the_norm_quantised():
    assert norm_writes_quantised("delayed")
    assert not any(norm_writes_quantised(r) for r in ("current", "blockwise", "mxfp8", "nvfp4"))


def test_hopper_delayed_norm_fed_linears_have_no_cast_kernel():
    """H100, TP1, delayed: QKV and fc1 forward move 1 - 2 + 2 = 1 byte an element of X (the norm's FP8 write in
    place of BF16, the transpose read and written) where the cast kernel moved 2 + 2 x 1 = 4; one kernel (the
    transpose) launched by the norm's call, no call of its own. The output projection and fc2 keep their cast."""
    g = gpu_compute("h100")
    km = g.kernels
    ops = _ops(g)
    for name in ("qkv", "fc1"):
        op = ops[name]
        assert op.norm_cast and op.norm_transpose_elem_bytes == 2.0 and cast_kind(op) == "norm"
        assert norm_cast_bytes(op, "hopper", "delayed") == FP8 - BF16 + 2 * FP8
        bare = replace(op, norm_cast=False, norm_transpose_elem_bytes=0.0)  # priced as a cast kernel of its own
        diff = op_time_s(bare, g, "fp8", fp8_recipe="delayed") - op_time_s(op, g, "fp8", fp8_recipe="delayed")
        # the norm's extra bytes at the norm kernel's rate: cuDNN 9.10.1 RMSNorm forward, 2.742 of H100's 3.35 TB/s
        # (kernels.toml [memory.kernel_TBps.norm]; findings 432), not memory_efficiency's 0.90 (tidy118)
        norm_share = 2.742 / 3.35
        assert diff == pytest.approx(quantize_s(km, (BF16 + 2 * FP8) * SEQ * op.k, "delayed", "hopper")
                                     - (FP8 - BF16 + 2 * FP8) * SEQ * op.k / (km.hbm_Bps * norm_share))
        assert kernels_launched(op, "fp8") == kernels_launched(bare, "fp8") == 2  # GEMM + transpose / cast
        assert launch_calls(op, "fp8") == (1.0, 0.0, 1.0)  # the transpose a C++ kernel of the norm's call
        assert launch_calls(bare, "fp8") == (2.0, 0.0, 0.0)
        # backward: the output gradient's cast as before
        assert op_time_s(op, g, "fp8", True, fp8_recipe="delayed") == op_time_s(bare, g, "fp8", True,
                                                                                fp8_recipe="delayed")
    for name in ("out_proj", "fc2"):
        assert not ops[name].norm_cast and cast_kind(ops[name]) == "cast"


def test_te_2_0_to_2_6_scale_inverse_kernel_stays_with_the_fused_norm():
    """TE 2.0-2.6 (``fp8_scale_inverse_kernel``): ``Float8Quantizer::create_tensor``'s ``at::reciprocal`` runs for
    the norm's FP8 output too, one kernel inside the norm's call."""
    g = gpu_compute("h100")
    op = _ops(g)["qkv"]
    assert kernels_launched(op, "fp8", scale_kernel=True) == 3
    assert launch_calls(op, "fp8", scale_kernel=True) == (1.0, 0.0, 2.0)


def test_blackwell_and_sp_fused_norm_writes_one_byte_less():
    """B200 (non-TN FP8 GEMMs: no transpose) and H100 with SP (the gathered tensor transposed backward, section
    414): the norm's FP8 write saves 1 byte an element of its rows (the shard under SP), no kernel."""
    b = gpu_compute("b200")
    op = _ops(b)["qkv"]
    assert op.norm_cast and op.norm_transpose_elem_bytes == 0.0
    assert norm_cast_bytes(op, "blackwell", "delayed") == FP8 - BF16
    assert kernels_launched(op, "fp8") == 1
    h = gpu_compute("h100")
    sp = _ops(h, tp=8, sp=True)["fc1"]
    assert sp.norm_cast and sp.norm_transpose_elem_bytes == 0.0 and sp.gather_transpose_elem_bytes == 2.0
    assert kernels_launched(sp, "fp8") == 1
    bare = replace(sp, norm_cast=False)
    diff = op_time_s(bare, h, "fp8", fp8_recipe="delayed") - op_time_s(sp, h, "fp8", fp8_recipe="delayed")
    rows = SEQ / 8
    assert diff == pytest.approx(quantize_s(h.kernels, (BF16 + FP8) * rows * sp.k, "delayed", "hopper")
                                 - memory_s(h.kernels, (FP8 - BF16) * rows * sp.k, op="norm")
                                 + h.kernels.launch_gpu_s)


@pytest.mark.parametrize("recipe", ["current", "blockwise", "mxfp8"])
def test_other_recipes_cast_after_the_norm(recipe):
    gen = "b200" if recipe == "mxfp8" else "h100"
    ops = _ops(gpu_compute(gen), recipe=recipe)
    assert not ops["qkv"].norm_cast and cast_kind(ops["qkv"]) != "norm"
