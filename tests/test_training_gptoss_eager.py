"""gpt-oss's eager passes under Megatron-Core: the experts' activation clamp outside the fused quick-GeGLU, and the
unfused RoPE that YaRN's concentration factor forces (closed forms on the GB200 recipe's layout: EP 64, two local
experts, micro-batch 4 x 4,096 tokens, 65,536 expert rows)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import (EXPERT_CLAMP_MOVES, ROPE_UNFUSED_MOVES, block_ops, block_time, expert_rows,
                                     op_time_s)
from topo.training.parallel import make_layout


@pytest.fixture(scope="module")
def oss():
    model = load_model("gpt-oss-120b")
    lay = make_layout(ep=64, dp=64, global_batch=1280, micro_batch=4, seq_len=4096, etp=1)
    return model, lay, gpu_compute("GB200")


def test_the_eager_clamp_moves_8_bytes_forward_and_15_backward_per_fc1_output_element(oss):
    """``weighted_bias_quick_geglu_impl`` (NVIDIA/Megatron-LM@2e29a5e1, unchanged at @d98e8a64) clamps the gate half
    (``clamp(max=7)``) and the linear half (``clamp(-7, 7)``) and concatenates them before its compiled kernel:
    forward 2 B read + 2 B written per element by the two clamps together, 2 + 2 by ``cat``: 8 B, 3 kernels.
    Backward (PyTorch ``clamp_backward``): gate half ``le`` (2 read, 1 written) and ``where`` (1 + 2 read, 2
    written), 8 B; linear half ``ge``, ``le`` (3 each), ``logical_and_`` (2 + 1) and ``where`` (5), 14 B; the
    halves' gradients concatenated, 4 B per element: (8 + 14) / 2 + 4 = 15 B; kernels 3 + 5 + 1 = 9."""
    model, lay, gpu = oss
    rows = expert_rows(model, lay) * model.moe.experts / lay.ep  # both local experts' rows
    assert rows == pytest.approx(65536)
    elems = rows * 2 * 2880  # fc1's output: gate and linear halves of 2,880
    ops = {op.name: op for op in block_ops(model, lay, "E")}
    fwd, bwd = ops["expert_clamp"], ops["expert_clamp_grad"]
    assert (fwd.bytes, bwd.bytes) == (pytest.approx(8 * elems), pytest.approx(15 * elems))
    assert (fwd.launches, bwd.launches) == (3, 9)
    assert fwd.module == bwd.module == "moe_act"
    km = gpu.kernels
    assert op_time_s(fwd, gpu, "bf16") == pytest.approx(memory_s(km, 8 * elems) + 3 * km.launch_gpu_s)
    assert op_time_s(fwd, gpu, "bf16", backward=True) == 0.0
    assert op_time_s(bwd, gpu, "bf16", backward=True) == pytest.approx(memory_s(km, 15 * elems) + 9 * km.launch_gpu_s)
    assert EXPERT_CLAMP_MOVES == ((4.0, 0.0, 3), (5.5, 4.0, 9))


def test_the_clamp_is_priced_only_where_it_runs_eagerly_and_recomputing_moe_act_repeats_it(oss):
    model, lay, gpu = oss
    clamp_f = op_time_s(next(o for o in block_ops(model, lay, "E") if o.name == "expert_clamp"), gpu, "bf16")
    clamp_b = op_time_s(next(o for o in block_ops(model, lay, "E") if o.name == "expert_clamp_grad"), gpu, "bf16",
                        backward=True)
    fused = lay.model_copy(update={"expert_clamp_eager": False})  # AutoModel's compiled kernel, TE's op fuser
    assert not [o for o in block_ops(model, fused, "E") if o.name.startswith("expert_clamp")]
    eager_t, fused_t = block_time(model, lay, gpu, "E"), block_time(model, fused, gpu, "E")
    assert eager_t.forward_s - fused_t.forward_s == pytest.approx(clamp_f)
    assert eager_t.backward_s - fused_t.backward_s == pytest.approx(clamp_b)
    # recompute_modules = moe_act re-runs bias_act_func, the clamp with it
    assert eager_t.recompute_s["moe_act"] - fused_t.recompute_s["moe_act"] == pytest.approx(clamp_f)
    # a model without a clamp has no such pass
    qwen = load_model("qwen3-30b-a3b")
    qlay = make_layout(ep=8, dp=8, global_batch=512, micro_batch=1, seq_len=4096, etp=1)
    assert not [o for o in block_ops(qwen, qlay, "E") if o.name.startswith("expert_clamp")]


def test_yarn_forces_megatron_cores_unfused_rope_and_te_fused_keeps_one_pass(oss):
    """Megatron-Core falls back to ``_apply_rotary_pos_emb_bshd`` when ``mscale`` (YaRN's 0.1 ln 32 + 1 = 1.3466)
    is not 1 (``apply_rotary_pos_emb``, Megatron-LM@98739581): per element of Q and K 12 moves forward (``* cos``
    2, ``-x2`` 1, ``cat`` 2, ``* sin`` 2, add 3, closing ``cat`` 2) and 10 backward (``* sin`` 2, ``neg`` 1,
    ``chunk``'s ``cat`` 2, ``* cos`` 2, the two paths summed 3) and 4 more for the empty ``t_pass`` slice, whose
    ``slice_backward`` fills a full-size zero gradient (1) that is added into ``t``'s (3) (pytorch/pytorch
    ``aten/src/ATen/native/TensorShape.cpp`` ``slice_backward``: ``at::zeros(input_sizes)``), 14, Q and K apart: 12
    and 7 kernels each. The fused kernel reads and writes once (4 B per element forward)."""
    model, lay, gpu = oss
    elems = 4 * 4096 * (64 + 8) * 64  # micro-batch x sequence x (query + key heads) x head_dim
    assert model.attention.rope_concentration == pytest.approx(1.3466)
    for kind in ("W", "*"):  # the sliding-window and the full layers alike
        ops = {op.name: op for op in block_ops(model, lay, kind)}
        assert "rope" not in ops
        fwd, bwd = ops["rope_unfused"], ops["rope_unfused_grad"]
        assert (fwd.bytes, bwd.bytes) == (pytest.approx(24 * elems), pytest.approx(28 * elems))
        assert (fwd.launches, bwd.launches) == (24, 14)
    km = gpu.kernels
    assert op_time_s(fwd, gpu, "bf16") == pytest.approx(memory_s(km, 24 * elems) + 24 * km.launch_gpu_s)
    assert op_time_s(bwd, gpu, "bf16", backward=True) == pytest.approx(memory_s(km, 28 * elems) + 14 * km.launch_gpu_s)
    assert ROPE_UNFUSED_MOVES == ((12.0, 12), (14.0, 7))
    te = {op.name: op for op in block_ops(model, lay.model_copy(update={"rope_kernel": "te_fused"}), "*")}
    assert "rope_unfused" not in te and te["rope"].bytes == pytest.approx(4 * elems)
    # plain RoPE (factor 1) stays fused under Megatron-Core
    qwen = load_model("qwen3-30b-a3b")
    assert qwen.attention.rope_concentration == 1.0
    assert "rope" in {op.name for op in block_ops(qwen, make_layout(ep=8, dp=8, global_batch=512, micro_batch=1,
                                                                      seq_len=4096, etp=1), "*")}


def test_an_unknown_rope_kernel_is_refused():
    with pytest.raises(Exception, match="rope_kernel"):
        make_layout(dp=8, global_batch=64, micro_batch=1, seq_len=4096, rope_kernel="unfused")


def test_topo_train_names_the_two_switches_and_when_they_change_nothing():
    """``topo train``'s framework-options line shows ``expert_clamp_eager`` and ``rope_kernel`` when set away from
    Megatron-Core's defaults, marked "no effect" on a model without a clamp or a rotary factor (llama3-8b), unmarked
    on gpt-oss (rev37: no test read the line for these two)."""
    from conftest import run_cli
    switches = ["--layout", "expert_clamp_eager=false,rope_kernel=te_fused", "--global-batch", "16"]
    llama = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "1", "--dp", "8", *switches,
                    check=True).stdout
    assert [ln for ln in llama.splitlines() if ln.startswith("framework options: ")] == [
        "framework options: expert_clamp_eager false (no effect: llama3-8b has no activation clamp), rope_kernel "
        "te_fused (no effect: llama3-8b's rotary has no concentration factor) (layout fields)"]
    oss = run_cli("train", "dgx-h100-superpod", "--model", "gpt-oss-20b", "--tp", "1", "--ep", "8", "--dp", "8",
                  *switches, check=True).stdout
    assert [ln for ln in oss.splitlines() if ln.startswith("framework options: ")] == [
        "framework options: expert_clamp_eager false, rope_kernel te_fused (layout fields)"]
