"""gpt-oss's eager passes under Megatron-Core: the experts' activation clamp outside the fused quick-GeGLU, and the
unfused RoPE that YaRN's concentration factor forces (closed forms on the GB200 recipe's layout: EP 64, two local
experts, micro-batch 4 x 4,096 tokens, 65,536 expert rows)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import (ATTENTION_BIAS_MOVES, EXPERT_CLAMP_MOVES, ROPE_UNFUSED_MOVES, block_ops,
                                     block_time, expert_rows, op_time_s)
from topo.training.parallel import make_layout


@pytest.fixture(scope="module")
def oss():
    model = load_model("gpt-oss-120b")
    lay = make_layout(ep=64, dp=64, global_batch=1280, micro_batch=4, seq_len=4096, etp=1, moe_imbalance=1.0)
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


def _options_line(stdout: str) -> list[str]:
    """``topo train``'s framework-options line(s) in ``stdout``."""
    return [ln for ln in stdout.splitlines() if ln.startswith("framework options: ")]


def _llama3_8b_options(*args: str) -> list[str]:
    """The framework-options line of dense Llama 3 8B on 8 H100 with ``args`` (a model with neither switch's part)."""
    from conftest import run_cli
    return _options_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "1", "--dp", "8", *args,
                                 check=True).stdout)


def test_topo_train_names_the_two_switches_and_when_they_change_nothing():
    """``topo train``'s framework-options line shows ``expert_clamp_eager`` and ``rope_kernel`` when set away from
    Megatron-Core's defaults, marked "no effect" on a model without a clamp or a rotary factor (llama3-8b), unmarked
    on gpt-oss (rev37: no test read the line for these two)."""
    from conftest import run_cli
    switches = ["--layout", "expert_clamp_eager=false,rope_kernel=te_fused", "--global-batch", "16"]
    assert _llama3_8b_options(*switches) == [
        "framework options: expert_clamp_eager false (no effect: llama3-8b has no activation clamp), rope_kernel "
        "te_fused (no effect: llama3-8b's rotary has no concentration factor) (layout fields)"]
    oss = run_cli("train", "dgx-h100-superpod", "--model", "gpt-oss-20b", "--tp", "1", "--ep", "8", "--dp", "8",
                  *switches, check=True).stdout
    assert [ln for ln in oss.splitlines() if ln.startswith("framework options: ")] == [
        "framework options: expert_clamp_eager false, rope_kernel te_fused (layout fields)"]


def test_the_attention_output_bias_adds_4_bytes_forward_and_2_backward_per_output_element(oss):
    """Megatron-Core's ``linear_proj`` returns its bias (``skip_bias_add``) and, with ``bias_dropout_fusion = False``
    (Megatron-Bridge@067f987d ``gpt_oss_bridge.py``; required beside expert biases by ``TEGroupedMLP.__init__``'s
    assert, Megatron-LM@d98e8a64), ``_bias_dropout_add_func`` runs ``x + bias`` (2 B read, 2 written per element),
    a dropout of probability 0 that returns its input (PyTorch ``_dropout_impl``), and ``residual + out`` (the
    residual add every layer has). Backward: the bias's gradient sums the output's gradient over the tokens (2 B
    read). Per layer and micro-batch on the GB200 layout: 4 x 4,096 tokens x 2,880."""
    model, lay, gpu = oss
    elems = 4 * 4096 * 2880
    km = gpu.kernels
    for kind in ("W", "*"):
        ops = {op.name: op for op in block_ops(model, lay, kind)}
        fwd, bwd = ops["attention_bias"], ops["attention_bias_grad"]
        assert (fwd.bytes, bwd.bytes) == (pytest.approx(4 * elems), pytest.approx(2 * elems))
        assert (fwd.launches, bwd.launches) == (1, 1)
        assert op_time_s(fwd, gpu, "bf16") == pytest.approx(memory_s(km, 4 * elems) + km.launch_gpu_s)
        assert op_time_s(bwd, gpu, "bf16", backward=True) == pytest.approx(memory_s(km, 2 * elems) + km.launch_gpu_s)
    assert ATTENTION_BIAS_MOVES == ((2.0, 1), (1.0, 1))
    # the MoE block's bias-dropout-add has no bias (the experts add theirs): nothing there
    assert not [o for o in block_ops(model, lay, "E") if o.name.startswith("attention_bias")]
    # a model without the bias, or a framework whose GEMM adds it (AutoModel's TE Linear), has no such pass
    fused = lay.model_copy(update={"attention_bias_eager": False})
    assert not [o for o in block_ops(model, fused, "*") if o.name.startswith("attention_bias")]
    qwen = load_model("qwen3-30b-a3b")
    assert not qwen.attention.out_bias
    assert not [o for o in block_ops(qwen, make_layout(ep=8, dp=8, global_batch=512, micro_batch=1, seq_len=4096,
                                                       etp=1), "*") if o.name.startswith("attention_bias")]


def test_the_step_carries_the_attention_bias_pass_per_layer_and_micro_batch(oss):
    """Through ``estimate_step`` on 64 GB200 of a GB200 NVL72 SuperPOD: the attention module's time per step grows by the
    pass's forward and backward seconds times 36 layers times 5 micro-batches (1,280 sequences over 64 ranks of 4),
    and the step by that much or more (the GPU's time, no pipeline); the pass dropped gives it back."""
    import topo
    from topo.training.step import estimate_step
    model, lay, gpu = oss
    fab = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod"))
    on = estimate_step(fab, model, lay, check=False)
    off = estimate_step(fab, model, lay.model_copy(update={"attention_bias_eager": False}), check=False)
    ops = {op.name: op for op in block_ops(model, lay, "*")}
    per = (op_time_s(ops["attention_bias"], gpu, "bf16")
           + op_time_s(ops["attention_bias_grad"], gpu, "bf16", backward=True))
    grown = on.compute_by_module_s["attention"] - off.compute_by_module_s["attention"]
    assert grown == pytest.approx(36 * 5 * per, rel=1e-6)
    assert on.step_time_s - off.step_time_s >= 0.99 * grown > 0


def test_topo_train_names_the_attention_bias_switch_and_when_it_changes_nothing():
    """``attention_bias_eager=false`` (a framework whose GEMM adds the output projection's bias) is shown on
    ``topo train``'s framework-options line, marked "no effect" on a model without that bias (llama3-8b), and it
    shortens gpt-oss's step."""
    from conftest import run_cli
    switch = ["--layout", "attention_bias_eager=false", "--global-batch", "16"]
    assert _llama3_8b_options(*switch) == [
        "framework options: attention_bias_eager false (no effect: llama3-8b's attention output has no bias) "
        "(layout fields)"]
    args = ["train", "dgx-h100-superpod", "--model", "gpt-oss-20b", "--tp", "1", "--ep", "8", "--dp", "8",
            "--global-batch", "16", "--json"]
    import json
    eager = json.loads(run_cli(*args, check=True).stdout)
    fused = json.loads(run_cli(*args[:-1], "--layout", "attention_bias_eager=false", "--json", check=True).stdout)
    assert fused["step_time_s"] < eager["step_time_s"]
    assert fused["compute_by_module_s"]["attention"] < eager["compute_by_module_s"]["attention"]
