"""Review of the session's changes (docs/calibration-findings.md section 413): the mutations of sections 410 and
412 no test caught, each now caught by a closed form.

Sources: each linear saves its input as its own module's quantised copy, BF16 where it has no quantizer
(NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/linear.py lines 616-621, layernorm_linear.py
469-485, grouped_linear.py 912-914; linear.py line 439 ``cast_if_needed``); Megatron-Core's module names
(``linear_qkv``, ``shared_experts.linear_fc1``, ...: NVIDIA/Megatron-LM@d98e8a64 megatron/core/extensions/
transformer_engine.py, the MLA attention has ``linear_q_down_proj`` / ``linear_kv_down_proj`` and no
``linear_qkv``: megatron/core/transformer/multi_latent_attention.py); the gathered operand's scales swizzled by each
GEMM reading it (TE@d0067d0d linear.py lines 2094 / 2102, gemm.cpp 305-306); MXFP8 is 1 + 1/32 bytes an element
(E4M3 data, one E8M0 scale per 32: OCP MX v1.0 sec. 5), NVFP4 0.5 + 1/16 (E2M1, one E4M3 scale per 16)."""

import pytest

from topo.training.memory import block_activation_bytes
from topo.training.model import Block, load_model
from topo.training.operators import END_UNITS, block_ops, pipeline_units
from topo.training.parallel import make_layout
from topo.training.step import tp_gather_groups
from topo.training.weight_swizzle import gathered_swizzle_bytes, gathered_swizzles

MXFP8_COPY = 1 + 1 / 32
NVFP4_COPY = 0.5 + 1 / 16
S, T = 8192, 2


def _lay(recipe, modules=()):
    return make_layout(tp=T, pp=1, dp=8, ep=8, etp=1, global_batch=64, micro_batch=1, seq_len=S, precision="fp8",
                       fp8_recipe=recipe, sequence_parallel=True, module_recipes=modules)


def _extra(model, recipe, entry, kind):
    """Bytes block ``kind`` saves with ``entry`` in ``module_recipes`` beyond without, over s b h / t."""
    base = block_activation_bytes(model, _lay(recipe), kind)
    return (block_activation_bytes(model, _lay(recipe, (entry,)), kind) - base) / (S * model.hidden / T)


def test_each_moe_linear_saves_its_own_input_copy():
    """DeepSeek-V3 (one shared expert, no latent projections), MXFP8, one module in BF16 at a time: the shared
    expert's fc1 saves the norm's output (h wide: 1 x (2 - copy)), the routed experts' fc1 their k permuted copies
    (k x 1), the shared expert's fc2 its f-wide input (f / h)."""
    m = load_model("deepseek-v3-671b")
    moe, gap = m.moe, 2 - MXFP8_COPY
    f_h = moe.expert_ffn_hidden / m.hidden
    assert _extra(m, "mxfp8", "shared_experts.linear_fc1=bf16", Block.MOE) == pytest.approx(gap)
    assert _extra(m, "mxfp8", "experts.linear_fc1=bf16", Block.MOE) == pytest.approx(moe.active_experts * gap)
    assert _extra(m, "mxfp8", "shared_experts.linear_fc2=bf16", Block.MOE) == pytest.approx(
        moe.shared_experts * f_h * gap)
    assert _extra(m, "mxfp8", "experts.linear_fc2=bf16", Block.MOE) == pytest.approx(
        moe.active_experts * f_h * gap)


def test_a_dense_mlp_saves_fc1_and_fc2_inputs_at_their_own_recipes():
    """Llama 3 8B, MXFP8: mlp.linear_fc1 in BF16 adds the h-wide norm output's 2 - copy, mlp.linear_fc2 the
    f-wide activation's (f / h)."""
    m = load_model("llama3-8b")
    gap = 2 - MXFP8_COPY
    assert _extra(m, "mxfp8", "mlp.linear_fc1=bf16", Block.MLP) == pytest.approx(gap)
    assert _extra(m, "mxfp8", "mlp.linear_fc2=bf16", Block.MLP) == pytest.approx(m.ffn_hidden / m.hidden * gap)


def test_latent_projections_save_their_own_inputs():
    """Nemotron 3 Super, NVFP4: fc1_latent_proj in BF16 adds the h-wide norm output's 2 - copy, fc2_latent_proj
    the latent-wide input's (latent / h)."""
    m = load_model("nemotron-3-super-120b-a12b")
    gap = 2 - NVFP4_COPY
    assert _extra(m, "nvfp4", "fc1_latent_proj=bf16", Block.MOE) == pytest.approx(gap)
    assert _extra(m, "nvfp4", "fc2_latent_proj=bf16", Block.MOE) == pytest.approx(m.moe.latent_size / m.hidden * gap)


def test_mla_has_no_linear_qkv_to_save_at_its_own_recipe():
    """DeepSeek-V3's MLA attention: ``linear_qkv`` names no module of it (its down projections keep the layout's
    recipe, as its GEMMs do), ``linear_proj`` is its output projection (h wide input: 1 x (2 - copy))."""
    m = load_model("deepseek-v3-671b")
    assert not any(op.name == "qkv" for op in block_ops(m, _lay("mxfp8"), Block.ATTENTION))
    assert _extra(m, "mxfp8", "linear_qkv=bf16", Block.ATTENTION) == 0.0
    assert _extra(m, "mxfp8", "linear_proj=bf16", Block.ATTENTION) == pytest.approx(2 - MXFP8_COPY)


def test_an_mxfp8_module_gathers_its_output_gradient_at_mxfp8():
    """Super under NVFP4 with te_quant.cfg's ``mixer.out_proj=mxfp8``: the Mamba blocks' row-parallel output
    gradient is gathered as MXFP8's row- and column-wise copies (2 x (1 + 1/32)), every other TP block's at NVFP4's
    two (2 x 0.5625); the inputs (column-parallel in_proj, not named) stay NVFP4."""
    m = load_model("nemotron-3-super-120b-a12b")
    lay = _lay("nvfp4", ("mixer.out_proj=mxfp8",))
    layers = [u for u in pipeline_units(m, lay)[0] if u not in END_UNITS]
    tp_blocks = sum(u.count(k) for u in layers for k in (Block.ATTENTION, Block.MAMBA, Block.MOE))
    mamba = sum(u.count(Block.MAMBA) for u in layers)
    got = {(role, b): share for role, b, share in tp_gather_groups(m, lay)}  # exact binary fractions
    assert got[(1, 2 * MXFP8_COPY)] == pytest.approx(mamba / tp_blocks)
    assert got[(1, 2 * NVFP4_COPY)] == pytest.approx(1 - mamba / tp_blocks)
    assert got[(0, NVFP4_COPY)] == got[(2, NVFP4_COPY)] == 1.0


def test_every_gathered_operand_is_tokens_by_hidden():
    """Under sequence parallelism a column linear gathers its s b x h input and a row linear its s b x h output
    gradient: each swizzle kernel reads and writes 2 x s b h / 32 bytes of E8M0 scales, whatever the linear's other
    dimension (attention's out_proj reads heads x head_dim / t = 2,048 columns, its output gradient is 4,096 wide)."""
    m = load_model("nemotron-3-super-120b-a12b")
    lay = _lay("mxfp8")
    per_kernel = 2 * S * m.hidden / 32
    seen = 0
    for kind in (Block.ATTENTION, Block.MAMBA, Block.MOE):
        for op in block_ops(m, lay, kind):
            for bw in (False, True):
                n = gathered_swizzles(op, "fp8", bw)
                assert gathered_swizzle_bytes(op, "fp8", bw) == pytest.approx(n * per_kernel)
                seen += n
    assert seen == 3 * 4  # three blocks' column and row linears, two kernels each


def test_held_fields_and_the_flex_dispatcher_share_one_layout_flag():
    """A MoE search row on DeepEP with a held field: ``topo train`` takes ``--layout`` once (a second is refused,
    ``GivenOnce``), so the held fields and the row's dispatcher are one quoted ``--layout`` of pairs."""
    import shlex

    from topo.cli.train_text import row_flags
    L = make_layout(tp=2, dp=4, ep=8, etp=1, global_batch=64, ep_dispatcher="deepep", ep_flex_backend="hybridep").model_dump()
    flags = shlex.split(row_flags(L, True, {"fp8_recipe": "mxfp8", "overlap_tp": True}))
    assert flags.count("--layout") == 1
    assert flags[flags.index("--layout") + 1].split(",") == [
        'fp8_recipe="mxfp8"', "overlap_tp=true", "ep_dispatcher=deepep", "ep_flex_backend=hybridep"]
