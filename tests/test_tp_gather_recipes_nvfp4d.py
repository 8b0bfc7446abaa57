"""TP all-gathers at each module's own recipe (docs/calibration-findings.md section 408): Transformer Engine
quantises a linear module's gathered input and output gradient by the module's own recipe, so a module
Megatron-Core's ``quant_recipe`` keeps in BF16 (NVIDIA-NeMo/Megatron-Bridge@4ab94dfa
src/megatron/bridge/perf_recipes/nemotronh/te_quant.cfg: ``*.linear_qkv``, ``*.linear_proj`` in BF16) and every
module of a layer kept in BF16 (``num_layers_at_end_in_bf16``, NVIDIA/Megatron-LM@f7a3dcc4 megatron/core/fp8_utils.py
``get_fp8_context``) gathers 2-byte BF16, not NVFP4's 0.5 + 1/16 bytes (NVIDIA/TransformerEngine@4220403e
transformer_engine/pytorch/distributed.py ``gather_along_first_dim``: the quantised path only with a quantizer)."""

import pytest

from topo.training.model import Block, load_model
from topo.training.operators import END_UNITS, pipeline_units
from topo.training.parallel import make_layout
from topo.training.step import step_traffic, tp_gather_groups

SUPER = "nemotron-3-super-120b-a12b"
NVFP4_COPY = 0.5 + 1 / 16  # E2M1 data + one E4M3 scale per 16 elements (TE's NVFP4 tensor)


def _lay(**kw):
    return make_layout(tp=2, pp=1, dp=32, ep=64, etp=1, global_batch=512, micro_batch=1, seq_len=8192,
                       precision="fp8", fp8_recipe="nvfp4", sequence_parallel=True, **kw)


def _tp_blocks(blocks):
    """Attention, Mamba and shared-expert MoE blocks: every block of Super has TP traffic."""
    return {k: sum(b.count(k) for b in blocks) for k in (Block.ATTENTION, Block.MAMBA, Block.MOE)}


def _layers(model, lay):
    """The one stage's layers (the model's and its MTP depths' layers, as the step counts them)."""
    return [u for u in pipeline_units(model, lay)[0] if u not in END_UNITS]


def _gathers(model, lay, what):
    return [it for it in step_traffic(model, lay) if it["dim"] == "tp" and it["collective"] == "all_gather"
            and it.get("what") == what]


def test_a_bf16_qkv_gathers_bf16_under_tp2():
    """linear_qkv=bf16: the attention blocks' input (and input-again) gathers move 2 bytes an element, the Mamba
    and MoE blocks' NVFP4's 0.5625; the output gradient (linear_proj NVFP4 here) two NVFP4 copies, 1.125."""
    model = load_model(SUPER)
    lay = _lay(module_recipes=("linear_qkv=bf16",))
    n = _tp_blocks(_layers(model, lay))
    total = sum(n.values())
    groups = {(role, b): share for role, b, share in tp_gather_groups(model, lay)}
    assert groups[(0, 2.0)] == pytest.approx(n[Block.ATTENTION] / total)
    assert groups[(0, NVFP4_COPY)] == pytest.approx(1 - n[Block.ATTENTION] / total)
    assert groups[(2, 2.0)] == pytest.approx(n[Block.ATTENTION] / total)
    assert groups == {**groups, (1, 2 * NVFP4_COPY): 1.0}
    m = lay.microbatches
    bf16 = [it for it in _gathers(model, lay, "input") if it["elem_bytes"] == 2.0]
    assert len(bf16) == 1 and bf16[0]["calls"] == pytest.approx(m * n[Block.ATTENTION])
    act = 8192 / 1 * model.hidden * 2  # one micro-batch's BF16 activations, h wide
    assert bf16[0]["size_bytes"] == pytest.approx(act)
    fp4 = [it for it in _gathers(model, lay, "input") if it["elem_bytes"] == pytest.approx(NVFP4_COPY)]
    assert fp4[0]["size_bytes"] == pytest.approx(act * NVFP4_COPY / 2)
    assert fp4[0]["calls"] == pytest.approx(m * (total - n[Block.ATTENTION]))


def test_last_bf16_layers_gather_bf16():
    """num_layers_at_end_in_bf16 = 14: the last 14 layers' TP blocks gather BF16 in all three gathers; with none,
    every gather is NVFP4's."""
    model = load_model(SUPER)
    total = sum(_tp_blocks(_layers(model, _lay())).values())
    end = sum(_tp_blocks(model.blocks[-14:]).values())
    kept = {(role, b): share for role, b, share in tp_gather_groups(model, _lay(num_layers_at_end_in_bf16=14))}
    for role in range(3):
        assert kept[(role, 2.0)] == pytest.approx(end / total)
    none = tp_gather_groups(model, _lay())
    assert sorted(none) == [(0, NVFP4_COPY, 1.0), (1, 2 * NVFP4_COPY, 1.0), (2, NVFP4_COPY, 1.0)]
    sent = sum(it["size_bytes"] * it["calls"] for it in _gathers(model, _lay(num_layers_at_end_in_bf16=14),
                                                                    "output gradient"))
    m, act = _lay().microbatches, 8192 * model.hidden * 2
    assert sent == pytest.approx(m * act * (end * 2 + (total - end) * 2 * NVFP4_COPY) / 2)
