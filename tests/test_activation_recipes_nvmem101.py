"""Activation memory at each module's and layer's own recipe (docs/calibration-findings.md section 412): Transformer
Engine saves a linear module's input for its weight gradient as the module's own quantizer made it (its column-wise
copy: NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/linear.py lines 616-621,
layernorm_linear.py lines 469-485, grouped_linear.py lines 912-914), BF16 (2 bytes) where the module has no quantizer:
a module Megatron-Core's ``quant_recipe`` keeps in BF16 (NVIDIA-NeMo/Megatron-Bridge@4ab94dfa
src/megatron/bridge/perf_recipes/nemotronh/te_quant.cfg) or any module of a layer run outside the FP8 context
(``num_layers_at_end_in_bf16``, NVIDIA/Megatron-LM@f7a3dcc4 megatron/core/fp8_utils.py ``get_fp8_context``).
NVFP4's copy is 0.5 + 1/16 bytes an element (E2M1 data, one E4M3 scale per 16), MXFP8's 1 + 1/32."""

import pytest

from topo.training.memory import block_activation_bytes, memory_per_gpu
from topo.training.model import Block, load_model
from topo.training.parallel import make_layout

SUPER = "nemotron-3-super-120b-a12b"
NVFP4_COPY = 0.5 + 1 / 16
MXFP8_COPY = 1 + 1 / 32
S, T = 8192, 2


def _lay(**kw):
    return make_layout(tp=T, pp=1, dp=32, ep=64, etp=1, global_batch=512, micro_batch=1, seq_len=S,
                       precision="fp8", fp8_recipe="nvfp4", sequence_parallel=True, **kw)


def _linear_inputs(model):
    """Elements (over s b h / t, sequence parallel) of the linear modules' saved inputs in one block of each kind
    of Nemotron 3 Super, by module: attention qkv's and linear_proj's input (h each); a LatentMoE block's
    fc1_latent_proj input (h), its routed experts' fc1 copies (k x latent) and fc2 inputs (k x expert ffn), its
    shared experts' fc2 inputs, fc2_latent_proj's input (latent); Mamba's in_proj input (h), out_proj's (d_inner)."""
    h, m = model.hidden, model.moe
    return {
        Block.ATTENTION: {"qkv": 1.0, "out_proj": 1.0},
        Block.MOE: {"fc1_latent_proj": 1.0, "routed_fc1": m.active_experts * m.latent_size / h,
                    "routed_fc2": m.active_experts * m.expert_ffn_hidden / h,
                    "shared_fc2": m.shared_experts * m.expert_ffn_hidden / h, "fc2_latent_proj": m.latent_size / h},
        Block.MAMBA: {"in_proj": 1.0, "out_proj": model.mamba_inner / h},
    }


def test_a_bf16_layer_saves_its_linear_inputs_in_bf16():
    """Every block kind of a layer kept in BF16 saves its linear inputs at 2 bytes, the rest as before."""
    model, lay = load_model(SUPER), _lay()
    sbh_t = S * model.hidden / T
    for kind, parts in _linear_inputs(model).items():
        extra = block_activation_bytes(model, lay, kind, bf16_layer=True) - block_activation_bytes(model, lay, kind)
        assert extra == pytest.approx(sbh_t * sum(parts.values()) * (2 - NVFP4_COPY)), kind


def test_super_with_14_bf16_end_layers_saves_bf16_for_those_layers_only():
    """Super (88 layers, tp 2, one stage, one micro-batch in flight) with num_layers_at_end_in_bf16 = 14: the
    linear inputs of the last 14 layers' blocks at 2 bytes, every other layer's at NVFP4's 0.5625, so the
    activations exceed the all-NVFP4 figure by those 14 layers' elements x (2 - 0.5625)."""
    model = load_model(SUPER)
    sbh_t = S * model.hidden / T
    per = {k: sum(v.values()) for k, v in _linear_inputs(model).items()}
    end = [k for layer in model.blocks[-14:] for k in layer]
    elements = sum(per[k] for k in end) * sbh_t
    nvfp4 = memory_per_gpu(model, _lay(), 192e9).activations_bytes
    mixed = memory_per_gpu(model, _lay(num_layers_at_end_in_bf16=14), 192e9).activations_bytes
    assert mixed - nvfp4 == pytest.approx(elements * (2 - NVFP4_COPY))
    forty = memory_per_gpu(model, _lay(num_layers_at_end_in_bf16=40), 192e9).activations_bytes
    assert forty > mixed


def test_te_quant_cfg_modules_save_their_own_copies():
    """te_quant.cfg's modules: linear_qkv, linear_proj and both latent projections BF16 (2 bytes), mixer.out_proj
    MXFP8 (1 + 1/32), the rest NVFP4 (0.5625)."""
    model = load_model(SUPER)
    cfg = ("linear_qkv=bf16", "linear_proj=bf16", "fc1_latent_proj=bf16", "fc2_latent_proj=bf16",
           "mixer.out_proj=mxfp8")
    base, lay = _lay(), _lay(module_recipes=cfg)
    sbh_t = S * model.hidden / T
    parts = _linear_inputs(model)
    want = {Block.ATTENTION: (parts[Block.ATTENTION]["qkv"] + parts[Block.ATTENTION]["out_proj"]) * (2 - NVFP4_COPY),
            Block.MOE: (parts[Block.MOE]["fc1_latent_proj"] + parts[Block.MOE]["fc2_latent_proj"]) * (2 - NVFP4_COPY),
            Block.MAMBA: parts[Block.MAMBA]["out_proj"] * (MXFP8_COPY - NVFP4_COPY)}
    for kind, w in want.items():
        extra = block_activation_bytes(model, lay, kind) - block_activation_bytes(model, base, kind)
        assert extra == pytest.approx(sbh_t * w), kind


def test_mamba_linear_inputs_are_quantised_under_fp8():
    """Megatron-Core's Mamba in_proj and out_proj are Transformer Engine linears (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/models/hybrid/hybrid_layer_specs.py lines 128-130): under NVFP4 both save 0.5625-byte copies."""
    model = load_model(SUPER)
    bf16 = _lay().model_copy(update={"precision": "bf16", "fp8_recipe": None})
    fewer = block_activation_bytes(model, bf16, Block.MAMBA) - block_activation_bytes(model, _lay(), Block.MAMBA)
    assert fewer == pytest.approx(S * model.hidden / T * sum(_linear_inputs(model)[Block.MAMBA].values())
                                  * (2 - NVFP4_COPY))
