"""A multi-token-prediction depth as its model builds it: a hybrid's ``mtp_pattern`` and ``mtp_shared``.

Megatron-Core builds a hybrid's MTP depth from the part after ``/`` of its unified pattern and, with
``mtp_use_repeated_layer``, one module run at every depth (NVIDIA/Megatron-LM@2a75ac12, the Megatron-LM pin of
NVIDIA-NeMo/Megatron-Bridge@067f987d: megatron/core/models/hybrid/hybrid_layer_allocation.py
``parse_hybrid_pattern`` / ``get_hybrid_layer_counts``, megatron/core/transformer/multi_token_prediction.py
``MultiTokenPredictionBlock``). Nemotron 3.5 Lightning is Nemotron 3 Nano with ``mtp_num_layers = 2``,
``mtp_hybrid_override_pattern = "*E"``, ``mtp_use_repeated_layer = True`` (Megatron-Bridge@067f987d
src/megatron/bridge/perf_recipes/nemotronh/gb200/nemotronh.py).
"""

from __future__ import annotations

import pytest

from topo.errors import TopoError
from topo.training.flops_megatron_lm import megatron_lm_flops_per_token
from topo.training.memory import stage_params
from topo.training.model import load_model, model_from_dict
from topo.training.operators import pipeline_units
from topo.training.parallel import make_layout
from topo.training.unit_params import unit_params

LIGHTNING = "nemotron-3.5-lightning-30b-a3b"


def test_lightning_flops_per_token_are_megatron_bridges():
    # NVIDIA-NeMo/Megatron-Bridge@067f987d examples/model_verification_cards/nemotron-3.5-lightning/card.yaml,
    # pretrain_performance.GB200 (seq 8192, TP1): last_10_steps_model_tflops_per_gpu_avg 809.220 over
    # last_10_steps_tokens_per_second_per_gpu_avg 28,750.070 = 28.147 GFLOP a token (the 26.08 table's 807 / 28,672
    # gives the same). On main topo counted 26.51: the MTP depths' attention and MoE blocks were left out.
    card = 809.220e12 / 28_750.070
    got = megatron_lm_flops_per_token(load_model(LIGHTNING), 8192, 1, windows=True)
    assert got == pytest.approx(card, rel=1e-3)


def test_lightning_params_with_its_shared_mtp_module_are_the_cards():
    # the same card: "all 6,513 tensors and 32,913,266,240 parameters match": Nano's network plus one "*E" MTP
    # module held once for both depths (two depths' copies would be 34.25B)
    m = load_model(LIGHTNING)
    # tidy73: exact, as the card says its 6,513 tensors match: the 149,760 rev71 left untraced were each Mamba
    # layer's conv1d.bias (23 x 6,144), backbone.norm_f (2,688), each MoE router's e_score_correction_bias
    # (24 x 128, the MTP's included) and the MTP layer's final_layernorm (2,688): the tensors Megatron-Bridge@067f987d
    # nemotron_h_bridge.py maps
    assert m.total_params + m.mtp_params == 32_913_266_240


def test_each_depth_is_its_pattern_on_the_last_stage():
    m, d = load_model(LIGHTNING), load_model("deepseek-v3-671b")
    last = pipeline_units(m, make_layout(pp=2, dp=1, global_batch=8))[-1]
    assert last[-4:] == ["*E", "*E", "mtp_head", "mtp_head"]
    assert d.mtp_block == d.blocks[-1] == "*E"  # a transformer's depth: one layer like its last (MLA + MoE)


def test_a_shared_module_is_held_once():
    m = load_model(LIGHTNING)
    apart = m.model_copy(update={"mtp_shared": False})
    lay = make_layout(tp=1, ep=8, dp=8, global_batch=64)
    (d1, e1, _), (d2, e2, _) = stage_params(m, lay)[-1], stage_params(apart, lay)[-1]
    layer, head = unit_params(m, lay, "*E", True), unit_params(m, lay, "mtp_head", True)
    assert d2 - d1 == pytest.approx(layer[0] + head[0])
    assert e2 - e1 == pytest.approx(layer[1] + head[1])
    assert apart.mtp_params == 2 * m.mtp_params


BASE = {"name": "x", "source": "s", "layers": 2, "hidden": 64, "ffn_hidden": 128, "heads": 4, "vocab": 100,
        "seq_len": 32}
HYBRID = {**BASE, "layer_pattern": "ME", "mamba": {"d_state": 16}, "moe": {"experts": 4, "active_experts": 2,
                                                                             "expert_ffn_hidden": 32}}


@pytest.mark.parametrize("data, says", [
    ({**HYBRID, "mtp_layers": 1, "mtp_pattern": "*X"}, "mtp_pattern: unknown layer kind 'X' in '*X'; allowed: M"),
    ({**HYBRID, "mtp_pattern": "*E"}, "mtp_pattern describes multi-token-prediction depths, but mtp_layers is 0"),
    ({**HYBRID, "mtp_shared": True}, "mtp_shared describes multi-token-prediction depths, but mtp_layers is 0"),
    ({**HYBRID, "mtp_layers": 2}, "mtp_layers = 2 on a hybrid (layer_pattern) needs mtp_pattern"),
    ({**BASE, "mtp_layers": 1, "mtp_pattern": "*-"}, "mtp_pattern '*-' applies to a hybrid"),
    ({**HYBRID, "layer_pattern": "M-", "moe": None, "mtp_layers": 1, "mtp_pattern": "*E"},
     "mtp_pattern has an MoE layer (E) but the file has no [moe] table"),
])
def test_bad_mtp_keys_say_one_line(data, says):
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(TopoError) as err:
        model_from_dict(data, "m.toml")
    text = str(err.value)
    assert says in text and "\n" not in text and "Traceback" not in text
