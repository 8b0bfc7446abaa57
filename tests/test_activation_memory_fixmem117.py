"""fixmem117: the five activation-memory and rule faults rev103 left (findings 433 "Left", fixed in 434).

Closed forms from Megatron-Core at the commit Megatron-Bridge@067f987d pins (NVIDIA/Megatron-LM@2a75ac12):
``megatron/core/transformer/moe/experts.py`` lines 268-275 and 904-915 (``moe_act`` recompute:
``CheckpointWithoutOutput`` keeps fc1's output, frees the activation's output once fc2 ran);
``megatron/core/pipeline_parallel/fine_grained_activation_offload.py`` ``post_warmup_callback`` (lines 566-596: the
last group of *each* module name stays on the GPU); ``transformer_config.py`` lines 1905-1959 (no rule against
full recomputation); PyTorch's ``torch/csrc/autograd/functions/accumulate_grad.h`` (``param.grad`` in the
parameter's dtype).
"""

import pytest

from topo.cli.train import _framework_options
from topo.errors import TopoError
from topo.training.activation_offload import stage_offload_bytes
from topo.training.gpus import gpu_compute
from topo.training.memory import block_activation_bytes, block_offload_bytes, memory_per_gpu
from topo.training.model import load_model
from topo.training.operators import END_UNITS, bf16_layers, pipeline_units
from topo.training.parallel import ParallelLayout, check_layout, make_layout

NANO, QWEN = "nemotron-3.5-lightning-30b-a3b", "qwen3-30b-a3b"
S, B = 8192, 2


def _lay(**kw):
    base = dict(tp=1, pp=1, dp=16, ep=8, micro_batch=B, global_batch=512, seq_len=S)
    return ParallelLayout(**{**base, **kw})


@pytest.mark.parametrize("name", [QWEN, NANO])
def test_moe_act_recompute_drops_the_routed_fc2_input_only(name):
    """BF16: recomputing the experts' activation frees fc2's saved input, ``2 f`` bytes a routed row (s b top-k
    rows), nothing else: not the routed copies of fc1's input, not fc1's output, not the shared experts' (an MLP
    ``moe_act`` does not reach). The old ``(k - 1) / k`` of the whole block also took a third (Qwen3, SwiGLU k = 3)
    or half (Nano, squared ReLU k = 2) of fc1's routed copies and of the shared experts."""
    m = load_model(name)
    kept = block_activation_bytes(m, _lay(), "E")
    rec = block_activation_bytes(m, _lay(recompute="selective", recompute_modules=("moe_act",)), "E")
    assert kept - rec == pytest.approx(S * B * m.moe.active_experts * 2 * m.moe.expert_ffn_hidden)


@pytest.mark.parametrize("name, kind, kw", [
    (NANO, "E", dict(offload_modules=("fused_group_mlp",), precision="fp8", fp8_recipe="mxfp8",
                     moe_expert_kernels="fused_mlp")),
    (NANO, "E", dict(offload_modules=("expert_fc1", "moe_act"))),
    (QWEN, "E", dict(offload_modules=("expert_fc1",), precision="fp8", fp8_recipe="current")),
    (NANO, "*", dict(offload_modules=("core_attn", "attn_proj"))),
    ("llama3-8b", "*", dict(ep=1, offload_modules=("core_attn", "attn_proj"))),
])
@pytest.mark.parametrize("mods", [(), ("moe_act",), ("core_attn",), ("qkv_proj",), ("moe_act", "layernorm")])
def test_offload_frees_exactly_what_the_block_saved(name, kind, kw, mods):
    """What a block offloads is part of what it saves, by construction: the saved bytes with the offload are those
    without it less the freed ones, exactly (no cap hides a module freeing more than the block held)."""
    m = load_model(name)
    rec = dict(recompute="selective", recompute_modules=mods) if mods else {}
    if kind == "E" and "qkv_proj" in mods or kind == "*" and "moe_act" in mods:
        pytest.skip("the module is not in the block")
    lay = _lay(**kw, **rec)
    without = block_activation_bytes(m, lay.model_copy(update={"offload_modules": ()}), kind)
    freed = block_offload_bytes(m, lay, kind)[1]
    assert freed > 0 or "qkv_proj" in mods
    assert without - block_activation_bytes(m, lay, kind) == pytest.approx(freed)


def test_full_recompute_offloads_nothing_and_says_so():
    """Megatron-Core does not refuse ``offload_modules`` with full recomputation (transformer_config.py
    1905-1959), but a checkpointed layer's forward runs without grad: autograd saves nothing for the offload hooks
    to copy. Every layer recomputed: 0 bytes move, and the options line says "no effect"; the first N layers
    recomputed: the rest move their modules' bytes."""
    m = load_model(NANO)
    lay = _lay(offload_modules=("expert_fc1",), recompute="full")
    check_layout(m, lay)
    units, flags = pipeline_units(m, lay)[0], bf16_layers(m, lay)[0]
    assert stage_offload_bytes(m, lay, units, flags) == 0.0
    line = _framework_options(lay.model_dump(), m, gpu_compute("H100"))
    assert "offload_modules" in line and "no effect: recompute full" in line
    n = 10
    part = lay.model_copy(update={"recompute_num_layers": n})
    layers = [u for u in units if u not in END_UNITS]
    want = sum(u.count("E") for u in layers[n:]) * block_offload_bytes(m, part, "E")[0]
    assert stage_offload_bytes(m, part, units, flags) == pytest.approx(want) and want > 0
    assert "no effect" not in _framework_options(part.model_dump(), m, gpu_compute("H100"))


def test_autograd_with_fp32_gradients_is_refused_on_one_line():
    """PyTorch keeps ``param.grad`` in the parameter's dtype (accumulate_grad.h): ``wgrad_output = "autograd"``
    with 4-byte gradients does not exist."""
    m = load_model("llama3-8b")
    with pytest.raises(TopoError) as e:
        check_layout(m, _lay(ep=1, wgrad_output="autograd", grad_bytes=4))
    msg = e.value.message
    assert e.value.key == "grad_bytes" and "wgrad_output autograd" in msg and "allowed" in msg and "\n" not in msg
    check_layout(m, _lay(ep=1, wgrad_output="autograd", grad_bytes=2))


def test_the_margin_keeps_one_group_of_each_module():
    """Nano's attention and MoE blocks are separate units: offloading ``core_attn`` and ``expert_fc1`` keeps one
    attention block's and one MoE block's freed bytes on the GPU (``post_warmup_callback``: one group per module
    name), their sum, not the larger."""
    m = load_model(NANO)
    lay = _lay(offload_modules=("core_attn", "expert_fc1"))
    kept = memory_per_gpu(m, lay, 80e9).activations_by_kind_bytes["offloaded_in_transit"]
    assert kept == pytest.approx(block_offload_bytes(m, lay, "*")[1] + block_offload_bytes(m, lay, "E")[1])


def test_attention_saves_q_and_its_output_at_heads_x_head_dim():
    """Nemotron 3 Nano: h = 2,688, Q and the attention output 32 x 128 = 4,096 wide, K and V 2 x 128. BF16, flash,
    no dropout, tp 1: the norm's input and output (2 h each), Q, K, V, the output projection's input, 2 bytes each:
    ``s b (4 h + 2 (4096 + 256 + 256 + 4096))``."""
    m = load_model(NANO)
    h, qo, kv = 2688, 32 * 128, 2 * 128
    assert (m.hidden, m.heads * m.head_dim, m.num_kv_heads * m.head_dim) == (h, qo, kv)
    got = block_activation_bytes(m, _lay(), "*")
    assert got == pytest.approx(S * B * (4 * h + 2 * (qo + kv + kv + qo)))
    # core_attn moves Q, K, V and the output (4,096 wide), frees Q, K, V
    moved, freed = block_offload_bytes(m, _lay(offload_modules=("core_attn",)), "*")
    assert moved == pytest.approx(S * B * 2 * (qo + 2 * kv + qo)) and freed == pytest.approx(S * B * 2 * (qo + 2 * kv))


def test_a_fused_grouped_mlp_offloaded_under_moe_act_recompute_frees_all_it_moves():
    """rev103's capped case (section 433): Nemotron 3.5 Lightning, MXFP8 with the fused grouped MLP, its routed MLP
    offloaded (`fused_group_mlp`) while `moe_act` is recomputed. Megatron-Core copies every tensor the module saves to
    host memory and drops it on the GPU (NVIDIA/Megatron-LM@2a75ac12 fine_grained_activation_offload.py
    `bulk_offload_group`), so the bytes freed are the bytes moved, and the block keeps its total less them. Before
    section 434 `moe_act` recompute scaled the whole block by (k-1)/k and the freed bytes were capped at that
    remainder: 505 MB freed of 637 MB moved (seen failing against 8163385f's memory.py)."""
    saved = block_activation_bytes
    m = load_model("nemotron-3.5-lightning-30b-a3b")
    lay = make_layout(dp=8, ep=8, global_batch=64, seq_len=8192, micro_batch=2, precision="fp8", fp8_recipe="mxfp8",
                      moe_expert_kernels="fused_mlp", offload_modules=("fused_group_mlp",), recompute="selective",
                      recompute_modules=("moe_act",))
    moved, freed = block_offload_bytes(m, lay, "E")
    assert moved > 0 and freed == pytest.approx(moved, rel=1e-12)
    kept = saved(m, lay.model_copy(update={"offload_modules": ()}), "E")
    assert saved(m, lay, "E") == pytest.approx(kept - freed, rel=1e-12)
