"""An FP8 linear layer's TP-gathered operand under sequence parallelism is quantised on the rank's shard before the
gather, and per-tensor FP8 on Hopper transposes the whole gathered tensor after it (docs/calibration-findings.md
section 414). NVIDIA/TransformerEngine v2.12 (5671fd36) ``transformer_engine/pytorch/distributed.py``
``_all_gather_fp8`` lines 961-1048 (the shard cast with ``set_usage(rowwise=True, columnwise=False)``;
``needs_transpose = quantizer.columnwise_usage and not is_non_tn_fp8_gemm_supported()``, then
``out._create_transpose()`` on the gathered tensor), ``module/layernorm_linear.py`` lines 204-205 (forward: the
input cast row-wise only under the gather), 670-672 and 825 (the input regathered row-wise, then
``update_usage(columnwise_usage=True)``: ``tex.fp8_transpose``), ``tensor/storage/float8_tensor_storage.py`` lines
181-227 (no transpose where non-TN FP8 GEMMs run: Blackwell). The same at v1.13 (``module/base.py`` lines 844-856:
``cast_to_fp8`` of the shard, gather, ``tex.fp8_transpose``)."""

from dataclasses import replace

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s, quantize_s
from topo.training.model import load_model
from topo.training.operators import block_ops, kernels_launched, launch_calls, op_time_s
from topo.training.parallel import make_layout

BF16, FP8 = 2.0, 1.0
TP, SEQ = 8, 8192


def _ops(gpu, precision="fp8", recipe="delayed", tp=TP, sp=True, **kw):
    lay = make_layout(tp=tp, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=SEQ, precision=precision,
                      fp8_recipe=recipe if precision == "fp8" else None, sequence_parallel=sp, **kw)
    return {op.name: op for op in block_ops(load_model("llama3-8b"), lay, "*", gpu.generation)
            if op.kind == "gemm" and op.linear}


def test_hopper_tp8_delayed_casts_the_shard_and_transposes_the_gathered_tensor():
    """H100, TP8 with SP, delayed scaling: the column-parallel QKV's input cast forward is its shard's, row-wise
    only (2 read + 1 written an element, T / 8 rows), where a whole-tensor cast with both copies (4 bytes, T rows)
    was priced; backward the regathered input's transpose (2 bytes an element of T x hidden) and one more kernel.
    The row-parallel output projection's output gradient likewise: cast on its shard row-wise (3 bytes, T / 8
    rows), transposed whole (2 bytes, T rows)."""
    g = gpu_compute("h100")
    km = g.kernels
    ops = _ops(g)
    qkv, out = ops["qkv"], ops["out_proj"]
    assert (qkv.sp_gather, qkv.sp_ranks, qkv.gather_transpose_elem_bytes) == ("ag", TP, 2.0)
    assert (out.sp_gather, out.sp_ranks, out.gather_transpose_elem_bytes) == ("rs", TP, 2.0)
    whole = {n: _ops(g, sp=False)[n] for n in ("qkv", "out_proj")}  # TP8 without SP: nothing gathered
    T, h = SEQ, 4096
    # QKV forward: delayed scaling's norm writes X (T x h) in FP8 (section 418): on the shard row-wise only (1 byte
    # in place of BF16's 2, no kernel); without SP the whole tensor and its transpose in the norm's call (2 bytes,
    # one kernel)
    fwd = op_time_s(whole["qkv"], g, "fp8", fp8_recipe="delayed") - op_time_s(qkv, g, "fp8", fp8_recipe="delayed")
    # (the norm's bytes at the norm kernel's rate, kernels.toml [memory.kernel_TBps.norm]: tidy118)
    assert fwd == pytest.approx(memory_s(km, (FP8 - BF16 + 2 * FP8) * T * h, op="norm")
                                - memory_s(km, (FP8 - BF16) * T / TP * h, op="norm") + km.launch_gpu_s)
    # QKV backward: its output gradient is not gathered (cast as before); the regathered input transposed
    bwd = op_time_s(qkv, g, "fp8", backward=True, fp8_recipe="delayed") - op_time_s(
        whole["qkv"], g, "fp8", backward=True, fp8_recipe="delayed")
    assert bwd == pytest.approx(memory_s(km, 2 * FP8 * T * h) + km.launch_gpu_s)
    # the output projection: forward unchanged, backward its dY (T x h) shard cast row-wise and transposed whole
    assert op_time_s(out, g, "fp8", fp8_recipe="delayed") == pytest.approx(
        op_time_s(whole["out_proj"], g, "fp8", fp8_recipe="delayed"))
    bwd = op_time_s(out, g, "fp8", backward=True, fp8_recipe="delayed") - op_time_s(
        whole["out_proj"], g, "fp8", backward=True, fp8_recipe="delayed")
    assert bwd == pytest.approx(quantize_s(km, (BF16 + FP8) * T / TP * h, "delayed", "hopper")
                                - quantize_s(km, (BF16 + 2 * FP8) * T * h, "delayed", "hopper")
                                + memory_s(km, 2 * FP8 * T * h) + km.launch_gpu_s)
    for op, w in ((qkv, whole["qkv"]), (out, whole["out_proj"])):  # one more kernel backward, a call of its own
        assert kernels_launched(op, "fp8", True) == kernels_launched(w, "fp8", True) + 1
        assert launch_calls(op, "fp8", True)[0] == launch_calls(w, "fp8", True)[0] + 1
    # forward: the norm's transpose without SP only (QKV); the output projection's X is not gathered
    assert kernels_launched(qkv, "fp8", False) == kernels_launched(whole["qkv"], "fp8", False) - 1
    assert kernels_launched(out, "fp8", False) == kernels_launched(whole["out_proj"], "fp8", False)


def test_current_scaling_reads_the_shard_for_its_amax():
    """Current scaling's amax kernel reads the shard it casts (then the amax is all-reduced over TP): the output
    projection's backward dY amax over T / 8 rows, the cast row-wise on the shard, the transpose whole."""
    g = gpu_compute("h100")
    km = g.kernels
    out, whole = _ops(g, recipe="current")["out_proj"], _ops(g, recipe="current", sp=False)["out_proj"]
    T, h = SEQ, 4096
    bwd = op_time_s(out, g, "fp8", backward=True, fp8_recipe="current") - op_time_s(
        whole, g, "fp8", backward=True, fp8_recipe="current")
    assert bwd == pytest.approx(quantize_s(km, (BF16 + FP8) * T / TP * h, "current", "hopper")
                                - quantize_s(km, (BF16 + 2 * FP8) * T * h, "current", "hopper")
                                + memory_s(km, BF16 * T / TP * h) - memory_s(km, BF16 * T * h)
                                + memory_s(km, 2 * FP8 * T * h) + km.launch_gpu_s)


def test_no_transpose_at_tp1_under_bf16_or_on_blackwell():
    """TP1 gathers nothing; BF16 casts nothing; Blackwell's per-tensor FP8 keeps no transpose
    (``is_non_tn_fp8_gemm_supported``), so its shard cast writes its one copy (3 bytes, T / 8 rows) and no
    kernel is added; MXFP8 casts both copies on the shard (no transpose either)."""
    h100, b200 = gpu_compute("h100"), gpu_compute("b200")
    for op in _ops(h100, tp=1, sp=False).values():
        assert (op.sp_gather, op.sp_ranks, op.gather_transpose_elem_bytes) == ("", 1, 0.0)
    for op in _ops(h100, precision="bf16").values():
        assert op.gather_transpose_elem_bytes == 0.0
        assert kernels_launched(op, "bf16", True) == 2.0
    T, h = SEQ, 4096
    for recipe, copies in (("delayed", 1), ("mxfp8", 2)):
        out = _ops(b200, recipe=recipe)["out_proj"]
        assert out.gather_transpose_elem_bytes == 0.0 and out.sp_ranks == TP
        cast_whole = replace(out, sp_ranks=1)  # the same op with its cast over the whole gathered tensor
        assert kernels_launched(out, "fp8", True) == kernels_launched(cast_whole, "fp8", True)
        per = BF16 + copies * (FP8 + (1 / 32 if recipe == "mxfp8" else 0.0))
        bwd = op_time_s(cast_whole, b200, "fp8", backward=True, fp8_recipe=recipe) - op_time_s(
            out, b200, "fp8", backward=True, fp8_recipe=recipe)
        assert bwd == pytest.approx(quantize_s(b200.kernels, per * T * h * (1 - 1 / TP), recipe, "blackwell"))


def test_userbuffers_transpose_the_gathered_buffer_too():
    """Through userbuffers the shard is cast row-wise into the buffer and the gathered buffer transposed before
    wgrad (layernorm_linear.py line 832 ``grad_output.update_usage(columnwise_usage=True)``): the same ops."""
    g = gpu_compute("h100")
    ub, nccl = _ops(g, overlap_tp=True), _ops(g)
    for name in ("qkv", "out_proj"):
        assert ub[name].gather_transpose_elem_bytes == nccl[name].gather_transpose_elem_bytes == 2.0
        assert ub[name].sp_ranks == TP
