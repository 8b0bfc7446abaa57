"""NVFP4 as Transformer Engine runs it (docs/calibration-findings.md section 402): the cast's three kernels, the
saved column-wise copy at 0.5 + 1/16 bytes an element, the TP all-gathers through NCCL in NVFP4 (userbuffers
refused), and the MFU against the FP4 peak. Sources: NVIDIA/TransformerEngine@d0067d0d (file and line in each
test), NVIDIA-NeMo/Megatron-Bridge@21d102f5."""

import subprocess
from dataclasses import replace
import sys
from pathlib import Path

import pytest

from topo.training.gpus import gpu_compute
from topo.training.memory import block_activation_bytes
from topo.training.model import Block, load_model
from topo.training.kernels import memory_s
from topo.training.operators import block_ops, kernels_launched, launch_calls, op_time_s, quantize_bytes
from topo.training.parallel import make_layout
from topo.training.step import step_traffic
from topo.training.weight_swizzle import gathered_swizzles, weight_swizzles

ROOT = Path(__file__).resolve().parents[1]
E2M1_BYTES, E4M3_PER_16 = 0.5, 1 / 16  # TE docs features/low_precision_training/nvfp4: 4-bit data, a scale per 16
COPY = E2M1_BYTES + E4M3_PER_16


def _lay(recipe, **kw):
    return make_layout(tp=2, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=8192, precision="fp8",
                       fp8_recipe=recipe, sequence_parallel=True, **kw)


def _linear(recipe):
    m = load_model("llama3-8b")
    return next(op for op in block_ops(m, _lay(recipe), Block.MLP) if op.kind == "gemm" and op.linear)


def test_nvfp4_cast_is_three_kernels():
    """NVFP4Quantizer::quantize_impl with RHT (quantizer.cpp lines 2641 and 2709): hadamard_transform_amax
    launches ZeroAmaxKernel<<<1, 1>>> and HadamardAmaxTmaKernel (hadamard_transform.cu lines 596 and 669), then the
    fused row-wise + RHT column-wise cast: 3 kernels a cast, one framework call, against MXFP8's one kernel."""
    nv, mx = _linear("nvfp4"), _linear("mxfp8")
    assert nv.fp4_cast and not mx.fp4_cast
    for backward, gemms in ((False, 1), (True, 2)):  # forward: fprop; backward: dgrad and wgrad, one dY cast
        assert kernels_launched(nv, "fp8", backward) == nv.launches * gemms + 3
        # MXFP8: one cast, and the weight-scale swizzle of its fprop (forward) or dgrad (backward) call (section 396)
        assert weight_swizzles(mx, "fp8", backward) == 1 and weight_swizzles(nv, "fp8", backward) == 0
        # and, at TP 2 with sequence parallelism, fc1's gathered input's swizzle, fprop and wgrad (section 410)
        assert gathered_swizzles(mx, "fp8", backward) == 1 and gathered_swizzles(nv, "fp8", backward) == 0
        assert kernels_launched(mx, "fp8", backward) == mx.launches * gemms + 1 + 1 + 1
        calls, cpp_gemms, cpp_kernels = launch_calls(nv, "fp8", backward)
        assert (calls, cpp_kernels) == (nv.launches * gemms + 1, 2)  # one quantize call, its C++ launches the rest


def test_nvfp4_cast_time_is_its_bytes_and_three_launch_gaps():
    """The cast's bytes (amax read 2; cast read 2 and two copies at 0.5 + 1/16) at HBM rate, plus 3 launch gaps."""
    gpu = gpu_compute("GB200")
    op = _linear("nvfp4")
    no_cast = replace(op, epilogue_cast="forward")  # the same GEMM with its input cast elsewhere
    assert quantize_bytes("blackwell", "nvfp4") == pytest.approx(2 + 2 + 2 * COPY)
    cast = op_time_s(op, gpu, "fp8", fp8_recipe="nvfp4") - op_time_s(no_cast, gpu, "fp8", fp8_recipe="nvfp4")
    k = gpu.kernels
    # fc1's input at TP 2 with sequence parallelism is cast on the rank's shard, half the rows, before its gather
    # (section 414: TE distributed.py _all_gather_nvfp4 quantises the shard)
    assert op.sp_gather == "ag" and op.sp_ranks == 2
    expect = memory_s(k, (2 + 2 + 2 * COPY) * op.m / 2 * op.k * op.groups) + 3 * k.launch_gpu_s  # no NVFP4 cast rate
    assert cast == pytest.approx(expect, rel=1e-6)


def test_nvfp4_saves_the_column_wise_copy():
    """TE linear.py lines 600-616: the saved input keeps its column-wise copy only; under NVFP4 0.5 + 1/16 bytes an
    element against per-tensor FP8's 1. A SwiGLU MLP block saves two linear inputs (fc1's, h wide; fc2's, ffn
    wide): the difference is s x h x (1 + ffn / h) / tp x (1 - 0.5625)."""
    m = load_model("llama3-8b")
    fp8 = block_activation_bytes(m, _lay("current"), Block.MLP)
    fp4 = block_activation_bytes(m, _lay("nvfp4"), Block.MLP)
    assert fp8 - fp4 == pytest.approx(8192 * m.hidden * (1 + m.ffn_hidden / m.hidden) / 2 * (1 - COPY))


def test_nvfp4_tp_gathers_are_nvfp4_through_nccl():
    """No userbuffers (Megatron-Bridge turns tp_comm_overlap off for nvfp4): TE gathers the quantised input
    row-wise forward (layernorm_linear.py lines 296-312), the output gradient row- and column-wise (linear.py line
    905, base.py grad_output_preprocess) and the input column-wise again for wgrad (_common.py lines 35-55),
    each copy's data and scales (distributed.py _all_gather_nvfp4): 0.5625, 1.125 and 0.5625 bytes an element
    against BF16's 2 (the other recipes': tests/test_training_tp_gather_quantised.py)."""
    m = load_model("llama3-8b")
    tp = {it["what"]: it for it in step_traffic(m, _lay("nvfp4")) if it["dim"] == "tp" and "what" in it}
    bf16 = make_layout(tp=2, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=8192, precision="bf16",
                       sequence_parallel=True)
    bf = {it["what"]: it for it in step_traffic(m, bf16) if it["dim"] == "tp" and "what" in it}
    for what, per in (("input", COPY), ("output gradient", 2 * COPY), ("input again, for wgrad", COPY)):
        assert tp[what]["elem_bytes"] == pytest.approx(per), what
        assert tp[what]["size_bytes"] == pytest.approx(bf[what]["size_bytes"] * per / 2), what
        assert bf[what]["elem_bytes"] == 2.0  # BF16


def test_nvfp4_refuses_userbuffers():
    """TE base.py fill_userbuffers_buffer_for_all_gather raises for an NVFP4 quantizer (line 754): one line."""
    out = subprocess.run([sys.executable, "-m", "topo", "train", "gb200-nvl72-superpod", "--model", "llama3-8b",
                          "--tp", "2", "--global-batch", "2048", "--precision", "fp8", "--layout",
                          'fp8_recipe="nvfp4",sequence_parallel=true,overlap_tp=true'],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "overlap_tp: true runs TP collectives through userbuffers" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_nvfp4_mfu_is_of_the_fp4_peak():
    """MFU of an nvfp4 layout is of the FP4 peak its linear layers run at (GB200: 10,000 TFLOP/s dense, GB200
    NVL72's 1,440 PF sparse / 72 / 2), the JSON key's name and unit unchanged."""
    import json
    out = subprocess.run([sys.executable, "-m", "topo", "train", "gb200-nvl72-superpod", "--model", "llama3-8b",
                          "--tp", "1", "--global-batch", "2048", "--precision", "fp8", "--layout",
                          'fp8_recipe="nvfp4"', "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    d = d[0] if isinstance(d, list) else d
    assert d["peak_flop_per_s_per_gpu"] == pytest.approx(1440e15 / 72 / 2)
    assert d["peak_precision"] == "fp4"
    assert d["mfu"] == pytest.approx(d["tflop_per_s_per_gpu"] * 1e12 / d["peak_flop_per_s_per_gpu"])
