"""rev103: what the mutation check of sections 426 / 428 / 431 found unheld (findings 433).

Closed forms of Megatron-Core's per-module activation offload (NVIDIA/Megatron-LM@2a75ac12, the submodule
NVIDIA-NeMo/Megatron-Bridge@067f987d pins: ``megatron/core/transformer/transformer_config.py`` lines 1905-1959, the
rules; ``megatron/core/transformer/moe/experts.py`` lines 278-283, fc1 saving its BF16 input to offload it, and
813-923, the expert modules; ``megatron/core/transformer/attention.py`` lines 1543-1619, ``core_attn`` and
``attn_proj``; ``megatron/core/pipeline_parallel/fine_grained_activation_offload.py``, the reload waited for before a
group's backward).
"""

import pytest

import topo.training.operators as operators
from topo.training.activation_offload import stage_offload_bytes
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.memory import block_activation_bytes, block_offload_bytes
from topo.training.model import load_model
from topo.training.operators import END_UNITS, bf16_layers, pipeline_units, stage_compute
from topo.training.parallel import ParallelLayout, check_layout

NANO = "nemotron-3.5-lightning-30b-a3b"
S, B = 8192, 2


def _lay(**kw):
    base = dict(tp=1, pp=1, dp=16, ep=8, micro_batch=B, global_batch=512, seq_len=S)
    return ParallelLayout(**{**base, **kw})


def test_moe_act_moves_fc1s_output():
    """``moe_act`` offloads the activation's saved input, fc1's BF16 output: ``2 (k - 1) f`` bytes a routed row
    (squared ReLU, k = 2 matrices: f wide), s b top-k rows."""
    m = load_model(NANO)
    assert m.mlp_matrices == 2
    moved, freed = block_offload_bytes(m, _lay(offload_modules=("moe_act",)), "E")
    want = S * B * m.moe.active_experts * 2 * (m.mlp_matrices - 1) * m.moe.expert_ffn_hidden
    assert moved == pytest.approx(want) and freed == pytest.approx(want)
    # SwiGLU experts (Qwen3-30B-A3B, k = 3): fc1's output is 2 f wide, 4 bytes a routed row per f (fc2's input: 2)
    q = load_model("qwen3-30b-a3b")
    moved = block_offload_bytes(q, _lay(offload_modules=("moe_act",)), "E")[0]
    assert moved == pytest.approx(S * B * q.moe.active_experts * 2 * 2 * q.moe.expert_ffn_hidden)


def test_expert_fc1_under_per_tensor_fp8_moves_the_bf16_input_and_frees_the_fp8_copy():
    """Below MXFP8 / NVFP4 Megatron has fc1 save its BF16 input when it is offloaded (``set_save_original_input``,
    experts.py lines 278-283): 2 bytes an element move; the block's own accounting held the 1-byte FP8 copy."""
    m = load_model(NANO)
    rows = S * B * m.moe.active_experts * m.moe_width
    moved, freed = block_offload_bytes(m, _lay(offload_modules=("expert_fc1",), precision="fp8",
                                               fp8_recipe="current"), "E")
    assert moved == pytest.approx(2 * rows) and freed == pytest.approx(rows)


def test_core_attn_and_attn_proj_on_llama3_8b():
    """Llama 3 8B (h = 32 x 128 = 4096, 8 KV heads of 128), BF16: ``core_attn`` moves Q, K, V and the output
    (2 h + 2 x 2 kv + 2 h bytes a token) and frees Q, K, V only (the output is ``attn_proj``'s saved input);
    with ``attn_proj`` the output is freed too."""
    m = load_model("llama3-8b")
    h, kv = 4096, 8 * 128
    moved, freed = block_offload_bytes(m, _lay(ep=1, offload_modules=("core_attn",)), "*")
    assert moved == pytest.approx(S * B * (2 * h + 4 * kv + 2 * h))
    assert freed == pytest.approx(S * B * (2 * h + 4 * kv))
    moved, freed = block_offload_bytes(m, _lay(ep=1, offload_modules=("core_attn", "attn_proj")), "*")
    assert moved == pytest.approx(S * B * (2 * h + 4 * kv + 2 * h + 2 * h))
    assert freed == pytest.approx(S * B * (2 * h + 4 * kv + 2 * h))


def test_fused_group_mlp_with_the_activation_recomputed_moves_no_fc2_input():
    """Megatron-Bridge's Nemotron 3 Ultra MXFP8 recipe: ``offload_modules = ["fused_group_mlp"]`` with ``moe_act``
    recomputed ("FC1 output (activation input) is saved and offloaded"): fc1's input and output move, not fc2's
    input, which the recomputation makes. MXFP8: fc1's saved input is its MXFP8 copy (1 byte + a scale per 32)."""
    m = load_model(NANO)
    kw = dict(offload_modules=("fused_group_mlp",), precision="fp8", fp8_recipe="mxfp8", moe_expert_kernels="fused_mlp")
    full = block_offload_bytes(m, _lay(**kw), "E")[0]
    rec = block_offload_bytes(m, _lay(recompute="selective", recompute_modules=("moe_act",), **kw), "E")[0]
    fc2_in = S * B * m.moe.active_experts * (1 + 1 / 32) * m.moe.expert_ffn_hidden
    assert full - rec == pytest.approx(fc2_in)


@pytest.mark.parametrize("model, kw, says", [
    (NANO, {"offload_modules": ("fused_group_mlp", "expert_fc1"), "precision": "fp8", "fp8_recipe": "mxfp8",
            "moe_expert_kernels": "fused_mlp"}, "not expert_fc1 or moe_act"),
    ("llama3-8b", {"ep": 1, "offload_modules": ("expert_fc1",)}, "has no MoE block"),
])
def test_two_more_of_megatrons_rules_refused_in_one_line(model, kw, says):
    with pytest.raises(TopoError) as e:
        check_layout(load_model(model), _lay(**kw))
    assert says in e.value.message and "\n" not in e.value.message and e.value.key == "offload_modules"


def test_the_reload_hides_behind_the_backward_and_its_recomputation(monkeypatch):
    """The copies back run beside the backward and the recomputation in it: at a link slow enough to expose them
    (1 GB/s, monkeypatched), the backward grows by ``moved / rate - (backward + recompute)``."""
    m = load_model(NANO)
    g = gpu_compute("H100")
    monkeypatch.setattr(operators, "host_link_Bps", lambda gpu: 1e9)  # the name the stage reads
    lay = _lay(offload_modules=("expert_fc1",), recompute="selective", recompute_modules=("moe_act",))
    ref = stage_compute(m, lay.model_copy(update={"offload_modules": ()}), g)
    assert ref.recompute_s > 0
    n_moe = sum(u.count("E") for u in pipeline_units(m, lay)[0] if u not in END_UNITS)
    moved = n_moe * block_offload_bytes(m, lay, "E")[0]
    sc = stage_compute(m, lay, g)
    assert sc.backward_s == pytest.approx(ref.backward_s + moved / 1e9 - ref.backward_s - ref.recompute_s)
    assert sc.forward_s == pytest.approx(moved / 1e9)


def test_whole_layer_offload_moves_its_first_layers_only():
    """``activation_offload_layers`` = N: the first N layers' saved activations move, the rest stay."""
    m = load_model(NANO)
    lay = _lay(activation_offload_layers=5)
    units, flags = pipeline_units(m, lay)[0], bf16_layers(m, lay)[0]
    layers = [u for u in units if u not in END_UNITS][:5]
    want = sum(block_activation_bytes(m, lay, k) for u in layers for k in u)
    assert stage_offload_bytes(m, lay, units, flags) == pytest.approx(want)
