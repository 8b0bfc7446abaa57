"""Under sequence parallelism (TP > 1) Transformer Engine quantises the operand a linear all-gathers without GEMM-ready
scales, so each GEMM call reading it swizzles them (findings section 410).

Sources (``topo/data/compute/mxfp8_weight_swizzle.toml`` ``[sp_gathered]``): NVIDIA/TransformerEngine d0067d0d
``transformer_engine/pytorch/module/linear.py`` lines 2094 / 2102 (``layernorm_linear.py`` 1851 / 1859; v2.14
f031cf87 ``linear.py`` 1486 / 1494): ``optimize_for_gemm`` is set on the input quantizer only ``if not
(self.parallel_mode == "column" and self.sequence_parallel)`` and on the output-gradient quantizer only ``if not
(self.parallel_mode == "row" and self.sequence_parallel)``; ``pytorch/distributed.py`` ``_all_gather_mxfp8`` gathers
the compact scales; ``csrc/extensions/gemm.cpp`` lines 305-306 call ``swizzle_scales_for_gemm`` on both operands
(one kernel and one buffer each, ``swizzle.cpp`` lines 47-142). Column-parallel: fprop (gathered input) and wgrad
(the input gathered again); row-parallel: dgrad and wgrad (the gathered output gradient).
"""

from dataclasses import replace

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import block_ops, host_launch_s, kernels_launched, op_time_s
from topo.training.parallel import make_layout
from topo.training.weight_swizzle import gathered_swizzle_bytes, gathered_swizzles, weight_swizzles

SUPER = "nemotron-3-super-120b-a12b"


def _ops(kind, tp=2, sp=True, recipe="mxfp8"):
    """Nemotron 3 Super's block ``kind`` at TP ``tp`` (sequence parallel ``sp``), FP8 at ``recipe``, by name."""
    lay = make_layout(tp=tp, dp=8 // tp, ep=8, etp=1, global_batch=64, seq_len=8192, precision="fp8",
                      fp8_recipe=recipe, sequence_parallel=sp)
    return {op.name: op for op in block_ops(load_model(SUPER), lay, kind)}


def test_the_counts_from_source():
    """Column-parallel (``ag``): fprop and wgrad read the gathered input; row-parallel (``rs``): dgrad and wgrad read
    the gathered output gradient (the TOML's table, from linear.py's forward and backward)."""
    from topo.training.weight_swizzle import _gathered
    assert _gathered()["kernels_per_call"] == {"ag": {"fprop": 1, "dgrad": 0, "wgrad": 1},
                                               "rs": {"fprop": 0, "dgrad": 1, "wgrad": 1}}


def test_tp2_sequence_parallel_mxfp8_linears_swizzle_their_gathered_operand():
    """Mamba's in_proj (column) swizzles one gathered operand forward and one backward, out_proj (row) none forward
    and two backward, on top of the weight's (fprop 1, dgrad 1); the same for QKV / out_proj and the shared
    experts' fc1 / fc2. The routed experts (ETP 1) and the router gather nothing."""
    pairs = [("M", "in_proj", "out_proj"), ("*", "qkv", "out_proj")]
    for kind, col, row in pairs:
        ops = _ops(kind)
        c, r = ops[col], ops[row]
        assert (c.sp_gather, r.sp_gather) == ("ag", "rs")
        assert gathered_swizzles(c, "fp8") == 1 and gathered_swizzles(c, "fp8", True) == 1
        assert gathered_swizzles(r, "fp8") == 0 and gathered_swizzles(r, "fp8", True) == 2
        for op in (c, r):
            for bw in (False, True):
                assert kernels_launched(op, "fp8", bw) == kernels_launched(replace(op, sp_gather=""), "fp8", bw) + \
                    gathered_swizzles(op, "fp8", bw)
                assert weight_swizzles(op, "fp8", bw) == 1  # the weight's own, unchanged
    moe = {op.name + "/" + op.module: op for op in block_ops(
        load_model(SUPER), make_layout(tp=2, dp=4, ep=8, etp=1, global_batch=64, seq_len=8192, precision="fp8",
                                       fp8_recipe="mxfp8"), "E")}
    assert moe["fc1/shared_experts"].sp_gather == "ag" and moe["fc2/shared_experts"].sp_gather == "rs"
    assert moe["fc1/moe"].sp_gather == moe["fc2/moe"].sp_gather == ""
    assert gathered_swizzles(moe["fc1/moe"], "fp8", True) == 0


def test_nothing_is_gathered_at_tp1_without_sp_or_mxfp8():
    """TP 1, or TP 2 without sequence parallelism (the input is replicated, nothing gathered), or a recipe whose
    scales need no swizzle (delayed / current per-tensor scaling), or BF16: no gathered-operand swizzle."""
    assert gathered_swizzles(_ops("M", tp=1)["in_proj"], "fp8") == 0
    assert _ops("M", tp=2, sp=False)["in_proj"].sp_gather == ""
    assert gathered_swizzles(_ops("M", recipe="delayed")["in_proj"], "fp8") == 0
    assert gathered_swizzles(_ops("M")["in_proj"], "bf16") == 0


def test_the_swizzle_costs_a_gap_its_bytes_and_a_buffer():
    """Against the same op without the gather: GPU a launch gap and 2 x (gathered elements) / 32 bytes a kernel at
    HBM rate (E8M0 scales, one a block of 32: OCP MX v1.0 sec. 5); host (eager) one C++ launch and one tensor made
    from C++ a kernel. in_proj's gathered input is M x K (8,192 x 4,096), out_proj's output gradient M x N."""
    g = gpu_compute("GB200")
    km = g.kernels
    ops = _ops("M")
    for name, elements, kernels in (("in_proj", lambda o: o.m * o.k, (1, 1)),
                                    ("out_proj", lambda o: o.m * o.n, (0, 2))):
        op = ops[name]
        # eager, for the host price; its cast over the whole gathered rows as the bare twin's (sp_ranks 1: the
        # shard cast before the gather is section 414's, tests/test_training_fp8_gather_transpose.py)
        op = replace(op, graph="", sp_ranks=1)
        bare = replace(op, sp_gather="")
        assert op.m == 8192 and (op.k if name == "in_proj" else op.n) == 4096
        for bw, n in zip((False, True), kernels):
            nbytes = n * 2 * elements(op) / 32
            assert gathered_swizzle_bytes(op, "fp8", bw) == pytest.approx(nbytes)
            assert op_time_s(op, g, "fp8", bw, fp8_recipe="mxfp8") == pytest.approx(
                op_time_s(bare, g, "fp8", bw, fp8_recipe="mxfp8") + memory_s(km, nbytes) - memory_s(km, 0.0)
                + n * km.launch_gpu_s, rel=1e-9)
            assert host_launch_s(op, g, bw, precision="fp8") == pytest.approx(
                host_launch_s(bare, g, bw, precision="fp8") + n * (km.launch_cpp_s + km.launch_torch_cpp_op_s),
                rel=1e-12)
