"""Transformer Engine's FP8 padding around Megatron-Core's grouped experts (issue 29, Hopper FP8 MoE kernels).

``TEGroupedMLP.forward`` pads every local expert's rows to the FP8 alignment whenever FP8 is on
(NVIDIA/Megatron-LM@c2d1a8f7e5 megatron/core/transformer/moe/experts.py, the same at @1c0eb4a030); TE's
``Fp8Padding`` copies the rows into a padded buffer unless every count is already aligned, and ``Fp8Unpadding``
copies the output back (NVIDIA/TransformerEngine@d0067d0da transformer_engine/pytorch/module/fp8_padding.py). The
copies are priced here from their bytes at the HBM rate: 4 activation elements a row and hidden unit and 2
probabilities a row in each pass (operators.FP8_PADDING_MOVES), 3 kernels a pass (kernels.toml [launch])."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import fp8_padding, memory_s
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, op_time_s
from topo.training.parallel import make_layout


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-235b-a22b")  # 128 experts, top-8, hidden 4,096 (arXiv 2505.09388 table 2)


def _lay(**upd):
    kw = dict(ep=32, dp=32, global_batch=64, seq_len=4096, etp=1, precision="fp8", fp8_recipe="current",
              moe_imbalance=1.0)  # exact balance: these tests price the copies per row
    kw.update(upd)
    return make_layout(**kw)


def _ops(model, lay):
    return {op.name: op for op in block_ops(model, lay, "E")}


def test_alignment_and_kernels_are_megatron_cores():
    """get_fp8_align_size: 32 rows for MXFP8, 16 for every other FP8 recipe; padding of the hidden states and the
    probabilities and the output's unpadding, 3 kernels a pass."""
    assert fp8_padding("mxfp8") == (32, 3.0, 3.0)
    assert fp8_padding("current") == fp8_padding("delayed") == fp8_padding(None) == (16, 3.0, 3.0)


def test_the_all_to_all_dispatchers_fp8_experts_copy_their_rows(qwen):
    """EP 32, 4,096 tokens of one sequence a rank: 32 x 4,096 x 8 / 128 = 8,192 rows an expert, 4 local experts:
    32,768 rows of 4,096 BF16 moved 4 times a pass, and the BF16 probabilities twice."""
    ops = _ops(qwen, _lay())
    rows = 32 * 4096 * 8 / 128 * 4
    nbytes = (2 * 4 * 4096 + 2 * 2) * rows
    assert ops["fp8_padding"].bytes == pytest.approx(nbytes)
    assert ops["fp8_padding_grad"].bytes == pytest.approx(nbytes)
    g = gpu_compute("H100")
    fwd = op_time_s(ops["fp8_padding"], g, "fp8")
    assert fwd == pytest.approx(memory_s(g.kernels, nbytes) + 3 * g.kernels.launch_gpu_s)
    assert op_time_s(ops["fp8_padding"], g, "fp8", backward=True) == 0.0
    assert op_time_s(ops["fp8_padding_grad"], g, "fp8", backward=True) == pytest.approx(fwd)
    # 1.07 GB a pass at 90% of 3.35 TB/s: about 0.36 ms a layer and micro-batch each way
    assert 0.3e-3 < fwd < 0.4e-3


def test_deepep_copies_fp32_probabilities_and_hybridep_pads_in_its_dispatch(qwen):
    """DeepEP hands the experts FP32 probabilities (4 bytes each); HybridEP's dispatch pads each count to the
    alignment itself (``pad_multiple``), so TE's padding is a no-op."""
    deepep = _ops(qwen, _lay(ep_dispatcher="deepep", ep_flex_backend="deepep"))
    rows = 32 * 4096 * 8 / 128 * 4
    assert deepep["fp8_padding"].bytes == pytest.approx((2 * 4 * 4096 + 4 * 2) * rows)
    assert "fp8_padding" not in _ops(qwen, _lay(ep_dispatcher="deepep", ep_flex_backend="hybridep"))


def test_no_copies_without_fp8_or_with_aligned_counts(qwen):
    """BF16 has no alignment to meet; a router that pads its counts (moe_router_padding_for_fp8) leaves them
    aligned; a capacity router's static count copies only when it is not a multiple of 16."""
    assert "fp8_padding" not in _ops(qwen, _lay(precision="bf16", fp8_recipe=None))
    assert "fp8_padding" not in _ops(qwen, _lay(moe_counts_aligned=True))
    assert "fp8_padding" not in _ops(qwen, _lay(moe_grouped_gemm=False))
    # capacity ceil(4,096 x 8 / 128 x 1.0) = 256 a rank, x 32 ranks: 8,192 rows an expert, aligned
    assert "fp8_padding" not in _ops(qwen, _lay(moe_capacity_factor=1.0))
    # ceil(256 x 1.1) = 282 a rank: x 32 ranks 9,024 = 564 x 16 (aligned), but at EP 1 282 rows (not)
    assert "fp8_padding" in _ops(qwen, _lay(ep=1, dp=32, moe_capacity_factor=1.1))


def test_the_block_pays_them(qwen):
    """The MoE block's forward and backward each grow by the copies' time (nothing else changes)."""
    g = gpu_compute("H100")
    on, off = block_time(qwen, _lay(), g, "E"), block_time(qwen, _lay(moe_counts_aligned=True), g, "E")
    ops = _ops(qwen, _lay())
    assert on.forward_s - off.forward_s == pytest.approx(op_time_s(ops["fp8_padding"], g, "fp8"))
    assert on.backward_s - off.backward_s == pytest.approx(
        op_time_s(ops["fp8_padding_grad"], g, "fp8", backward=True))


def test_train_names_aligned_counts_and_when_they_have_no_effect(capsys):
    """``topo train``'s framework-options line shows ``moe_counts_aligned``, of no effect in BF16 or without
    experts."""
    from topo.cli.main import main

    def line(model, layout):
        assert main(["train", "--model", model, "--layout", layout, "--global-batch", "64"]) == 0
        return [x for x in capsys.readouterr().out.splitlines() if x.startswith("framework options:")]

    assert line("qwen3-30b-a3b", "tp=1,ep=8,dp=8,precision=fp8,moe_counts_aligned=true") == [
        "framework options: fp8_amax_reduction true (the default: fp8_recipe unset runs Megatron-Core's default "
        "recipe, delayed, and Transformer Engine's reduce_amax), moe_counts_aligned true (layout fields)"]
    assert line("qwen3-30b-a3b", "tp=1,ep=8,dp=8,moe_counts_aligned=true") == [
        "framework options: moe_counts_aligned true (no effect: only FP8 pads the experts' rows) (layout fields)"]
    assert line("llama3-8b", "dp=8,moe_counts_aligned=true") == [
        "framework options: moe_counts_aligned true (no effect: llama3-8b has no experts) (layout fields)"]
