"""Per-tensor FP8 current scaling on every linear layer, as Transformer Engine runs it at the NeMo 26.04 pin
(NVIDIA/TransformerEngine v2.14, f031cf87; the same at v2.12 and v2.16):

- ``Float8CurrentScalingQuantizer::quantize_impl`` (pytorch/csrc/quantizer.cpp) runs ``nvte_compute_amax_with_config``
  (common/recipe/current_scaling.cu ``launch_amax_kernel``: ``zero_amax_kernel<<<1, 1>>>``, then the amax kernel,
  which reads the input), ``nvte_compute_scale_from_amax`` (one kernel), then the cast ``nvte_quantize_v2``: four
  kernels, the input read twice. Every linear input that no TE norm produced (the attention output into the output
  projection, an MLP's activation into fc2) and every output gradient is quantised so.
- A TE norm's output (``LayerNormLinear``: Megatron-Core's QKV and a dense MLP's fc1) is cast by
  ``quantize_with_amax`` (extensions/normalization.cpp ``FUSED_NORM_AMAX_FP8``): the norm computed the amax, so the
  scale and the cast kernels only, the input read once.
"""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s, quantize_kernels
from topo.training.model import load_model
from topo.training.operators import block_ops, kernels_launched, op_time_s
from topo.training.parallel import current_scaling, make_layout


def _ops(recipe):
    lay = make_layout(tp=1, dp=8, global_batch=8, precision="fp8", fp8_recipe=recipe)
    model = load_model("llama3-8b")
    return {op.name: op for kind in ("*", "-") for op in block_ops(model, lay, kind)}, lay


def test_current_scaling_kernels_are_te_s():
    """Four kernels a quantisation, two after a norm that computed the amax (TE v2.14, the module doc)."""
    assert quantize_kernels()["current"] == 4 and quantize_kernels()["current_norm_amax"] == 2


def test_dense_layers_quantise_in_te_s_kernels_under_current_scaling():
    """llama3-8b's attention and MLP under current scaling against delayed scaling (one cast kernel; after a norm
    the norm's FP8 output and its transpose, one kernel, section 418): QKV and fc1 forward add the scale kernel only
    (the norm computed the amax) and the cast's bytes; the output projection and fc2 forward, and every
    backward, add the amax zeroing, the amax and the scale kernels and read their input once more (2 bytes an
    element: X forward, dY backward)."""
    cur, lay = _ops("current")
    dly, _ = _ops("delayed")
    g = gpu_compute("H100")
    gap = g.kernels.launch_gpu_s
    for name, norm_fed in (("qkv", True), ("fc1", True), ("out_proj", False), ("fc2", False)):
        c, d = cur[name], dly[name]
        assert c.current_scaling and not d.current_scaling
        assert kernels_launched(c, "fp8") == 1 + (2 if norm_fed else 4)
        assert kernels_launched(c, "fp8", True) == 2 + 4
        fwd = op_time_s(c, g, "fp8", fp8_recipe="current") - op_time_s(d, g, "fp8", fp8_recipe="delayed")
        bwd = (op_time_s(c, g, "fp8", True, fp8_recipe="current")
               - op_time_s(d, g, "fp8", True, fp8_recipe="delayed"))
        # delayed scaling's norm writes X in FP8 with its transpose (1 - 2 + 2 bytes, one kernel: section 418)
        # where current scaling's cast reads the BF16 and writes both copies (2 + 2); the norm's bytes at the norm
        # kernel's rate (kernels.toml [memory.kernel_TBps.norm]: tidy118), the cast's at memory_efficiency
        read_x = (memory_s(g.kernels, 4 * c.m * c.k) - memory_s(g.kernels, 1 * c.m * c.k, op="norm") if norm_fed
                  else memory_s(g.kernels, 2 * c.m * c.k))
        assert fwd == pytest.approx(read_x + (1 if norm_fed else 3) * gap, rel=1e-9)
        assert bwd == pytest.approx(memory_s(g.kernels, 2 * c.m * c.n) + 3 * gap, rel=1e-9)
    # the attention core and the logits are not linear FP8 layers: no quantisation, the same under both recipes
    assert not cur["core_attention"].current_scaling


def test_the_amax_pass_takes_four_kernels_after_a_norm_too():
    """Before TE 2.7 (``fp8_amax_pass``) no norm computed the amax: QKV's forward cast is four kernels too."""
    cur, _ = _ops("current")
    assert kernels_launched(cur["qkv"], "fp8", amax_pass=True) == 1 + 4


@pytest.mark.parametrize("update", [{"fp8_recipe": "current"}, {"fp8_amax_pass": True}, {"fp8_recipe": "delayed"},
                                    {}, {"fp8_recipe": "blockwise"}, {"precision": "bf16"}])
def test_the_ops_mark_current_scaling_by_the_layouts_one_rule(update):
    """Which linear GEMMs are quantised by current scaling is one rule, :func:`topo.training.parallel.current_scaling`
    (``fp8_recipe`` current, or unset with ``fp8_amax_pass``: NeMo 25.04's GB200 rows), the rule that also decides
    the TP amax all-reduce (:func:`topo.training.fp8_amax.sp_amax_reduced`): every linear GEMM of a dense and of an
    MoE block (each routed expert's and the shared ones') is marked where it holds, none elsewhere; the attention
    core, the router and the logits never (not TE FP8 linear layers)."""
    lay = make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, precision="fp8").model_copy(update=update)
    for model, kinds in ((load_model("llama3-8b"), ("*", "-")), (load_model("qwen3-30b-a3b"), ("*", "E"))):
        ops = [op for kind in kinds for op in block_ops(model, lay, kind)]
        linear = {op.name for op in ops if op.kind == "gemm" and op.linear}
        assert {"qkv", "fc1", "fc2"} <= linear
        marked = {op.name for op in ops if op.current_scaling}
        assert marked == (linear if current_scaling(lay) else set()), update
