"""Activation offloading per module (Megatron-Core's ``offload_modules``) and its copy time.

Sources: NVIDIA/Megatron-LM@2a75ac12 (the submodule NVIDIA-NeMo/Megatron-Bridge@067f987d pins)
``megatron/core/transformer/transformer_config.py`` lines 1905-1959 (the rules),
``megatron/core/transformer/moe/experts.py`` lines 813-823 (``expert_fc1`` offloads fc1's saved input),
``megatron/core/pipeline_parallel/fine_grained_activation_offload.py`` (side streams, reload before the backward).
"""

import pytest

from topo.errors import TopoError
from topo.training.activation_offload import exposed_copy_s, host_link_Bps, offload_exposed_s, stage_offload_bytes
from topo.training.gpus import gpu_compute
from topo.training.memory import block_activation_bytes, block_offload_bytes, memory_per_gpu
from topo.training.model import load_model
from topo.training.operators import END_UNITS, bf16_layers, pipeline_units, stage_compute
from topo.training.parallel import ParallelLayout, check_layout

NANO = "nemotron-3.5-lightning-30b-a3b"


def _lay(**kw):
    base = dict(tp=1, pp=1, dp=16, ep=8, micro_batch=2, global_batch=512, seq_len=8192)
    return ParallelLayout(**{**base, **kw})


def test_expert_fc1_moves_the_routed_copies_of_fc1s_input():
    # closed form: s b x top-k routed rows of h BF16 elements (Megatron saves fc1's BF16 input): 8192 x 2 x k x h x 2
    m = load_model(NANO)
    moved, freed = block_offload_bytes(m, _lay(offload_modules=("expert_fc1",)), "E")
    rows = 8192 * 2 * m.moe.active_experts
    assert moved == pytest.approx(rows * m.moe_width * 2)
    assert freed == pytest.approx(moved)
    assert block_offload_bytes(m, _lay(), "E") == (0.0, 0.0)


def test_offloaded_bytes_leave_the_block_and_one_block_stays():
    m = load_model(NANO)
    off, on = _lay(offload_modules=("expert_fc1",)), _lay()
    freed = block_offload_bytes(m, off, "E")[1]
    assert block_activation_bytes(m, on, "E") - block_activation_bytes(m, off, "E") == pytest.approx(freed)
    g = gpu_compute("H100")
    a_on, a_off = memory_per_gpu(m, on, g.memory_bytes), memory_per_gpu(m, off, g.memory_bytes)
    n_moe = sum(u.count("E") for u in pipeline_units(m, on)[0] if u not in END_UNITS)  # the MTP depths' too
    # every MoE block's fc1 input leaves, but one block's (Megatron's offload margin) is counted in transit
    assert a_on.activations_bytes - a_off.activations_bytes == pytest.approx((n_moe - 1) * freed)
    assert a_off.activations_by_kind_bytes["offloaded_in_transit"] == pytest.approx(freed)


def test_exposed_copy_is_what_exceeds_its_window():
    assert exposed_copy_s(128e9, 64e9, 0.5) == pytest.approx(1.5)
    assert exposed_copy_s(16e9, 64e9, 0.5) == 0.0
    assert offload_exposed_s(64e9, 64e9, 0.25, 2.0) == (pytest.approx(0.75), 0.0)


def test_host_links_are_pcie_gen5_for_h100_and_c2c_for_gb200():
    # PCIe Gen5 x16: 32 GT/s x 16 lanes / 8 = 64 GB/s a direction; NVLink-C2C 900 GB/s both ways
    assert host_link_Bps("H100") == 64e9
    assert host_link_Bps("GB200") == 450e9
    with pytest.raises(TopoError, match="known: "):
        host_link_Bps("X1")


def test_the_stage_charges_the_copy_its_compute_does_not_hide():
    m = load_model(NANO)
    g = gpu_compute("H100")
    base = stage_compute(m, _lay(), g)
    for mods, kw in ((("expert_fc1",), {}), (("fused_group_mlp",), {"moe_expert_kernels": "fused_mlp"})):
        lay = _lay(offload_modules=mods, **kw)
        sc = stage_compute(m, lay, g)
        ref = stage_compute(m, lay.model_copy(update={"offload_modules": ()}), g)
        moved = stage_offload_bytes(m, lay, pipeline_units(m, lay)[0], bf16_layers(m, lay)[0])
        ex_f, ex_b = offload_exposed_s(moved, 64e9, ref.forward_s, ref.backward_s + ref.recompute_s)
        assert sc.forward_s == pytest.approx(ref.forward_s + ex_f)
        assert sc.backward_s == pytest.approx(ref.backward_s + ex_b)
    # expert_fc1 on H100: 23 blocks x 0.53 GB at 64 GB/s (0.19 s) hide behind the forward and the backward
    sc = stage_compute(m, _lay(offload_modules=("expert_fc1",)), g)
    assert sc.forward_s == pytest.approx(base.forward_s) and "offload" not in sc.by_module_s
    # a slow enough link exposes it: one micro-batch of 8 sequences over the same link
    big = _lay(offload_modules=("fused_group_mlp",), moe_expert_kernels="fused_mlp", micro_batch=8, global_batch=512)
    sc = stage_compute(m, big, g)
    moved = stage_offload_bytes(m, big, pipeline_units(m, big)[0], bf16_layers(m, big)[0])
    ref = stage_compute(m, big.model_copy(update={"offload_modules": ()}), g)
    want = sum(offload_exposed_s(moved, 64e9, ref.forward_s, ref.backward_s + ref.recompute_s))
    assert sc.by_module_s.get("offload", 0.0) == pytest.approx(want)


def test_whole_layer_offload_is_timed_too():
    m = load_model(NANO)
    g = gpu_compute("H100")
    lay = _lay(activation_offload_layers=m.layers - 1, micro_batch=8)
    moved = stage_offload_bytes(m, lay, pipeline_units(m, lay)[0], bf16_layers(m, lay)[0])
    ref = stage_compute(m, lay.model_copy(update={"activation_offload_layers": 0}), g)
    ex_f, ex_b = offload_exposed_s(moved, 64e9, ref.forward_s, ref.backward_s + ref.recompute_s)
    assert ex_f > 0  # the whole layers' activations over PCIe outlast the forward
    assert stage_compute(m, lay, g).forward_s == pytest.approx(ref.forward_s + ex_f)


@pytest.mark.parametrize("kw, says", [
    ({"offload_modules": ("attn_proj",)}, "attn_proj needs core_attn"),
    ({"offload_modules": ("expert_fc1",), "activation_offload_layers": 2}, "whole layers or modules"),
    ({"offload_modules": ("expert_fc1",), "recompute": "selective", "recompute_modules": ("moe",)},
     "whole MoE block is recomputed"),
    ({"offload_modules": ("fused_group_mlp",)}, "allowed with it: expert_fc1, moe_act"),
    ({"offload_modules": ("expert_fc1",), "moe_expert_kernels": "fused_mlp"}, "allows fused_group_mlp"),
])
def test_megatrons_rules_refused_in_one_line(kw, says):
    m = load_model(NANO)
    with pytest.raises(TopoError) as e:
        check_layout(m, _lay(**kw))
    assert says in e.value.message and "\n" not in e.value.message and e.value.key == "offload_modules"


def test_unknown_module_names_the_allowed_ones():
    with pytest.raises(Exception) as e:
        _lay(offload_modules=("qkv_linear",))
    assert "expert_fc1" in str(e.value)


def test_the_cli_names_the_offloaded_modules_on_its_options_line():
    """`topo train` prints a non-default layout field on its `framework options:` line (README: "How the framework
    runs a step is set by layout fields ... printed on the output's `framework options:` line when not the
    default"), and `--json` carries it under `layout`; a newcomer's bad module name is one line, exit 2."""
    import json
    import subprocess
    import sys

    base = [sys.executable, "-m", "topo", "train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8",
            "--global-batch", "64", "--layout"]
    text = subprocess.run(base + ['offload_modules=["core_attn"]'], capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    assert 'framework options: offload_modules ["core_attn"]' in text.stdout
    js = subprocess.run(base + ['offload_modules=["core_attn"]', "--json"], capture_output=True, text=True)
    assert json.loads(js.stdout)["layout"]["offload_modules"] == ["core_attn"]
    bad = subprocess.run(base + ['offload_modules=["qkv"]'], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "core_attn" in bad.stderr
