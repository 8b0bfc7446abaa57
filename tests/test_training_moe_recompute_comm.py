"""A recomputed MoE module dispatches and combines again: Megatron-Core's MoELayer with ``"moe"`` in
``recompute_modules`` (``moe_layer_recompute``) checkpoints its whole forward, router, token dispatch, experts and
combine (NVIDIA/Megatron-LM@00119989 megatron/core/transformer/moe/moe_layer.py ``MoELayer.forward``: ``te_checkpoint(custom_forward,
...)``), so the backward replays the dispatch and combine all-to-alls before its own two. Nemotron 3 Nano's H100
FP8 recipe recomputes ``moe`` (Megatron-Bridge nemotron_3_nano_workload_base_configs.py
NEMOTRON_3_NANO_PRETRAIN_CONFIG_H100_FP8_CS_V1, zidanehuang001/Megatron-Bridge@8e0fe90)."""

import pytest

from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import _is_ep_a2a, step_traffic


def _ep_calls(model, lay):
    return sum(t["calls"] for t in step_traffic(model, lay) if _is_ep_a2a(t))


def test_recomputing_the_moe_module_adds_a_dispatch_and_a_combine_per_moe_layer():
    """Nemotron 3 Nano (23 MoE layers) at EP8, 64 micro-batches: 4 all-to-alls per MoE layer and micro-batch
    (dispatch, combine, and their gradients), 6 when ``moe`` is recomputed; other recomputed modules add none."""
    nano = load_model("nemotron-3-nano-30b-a3b")
    assert nano.layer_pattern.count("E") == 23
    kw = dict(tp=1, ep=8, dp=16, micro_batch=1, global_batch=1024, seq_len=8192, precision="fp8", etp=1)
    plain = make_layout(**kw)
    assert plain.microbatches == 64
    assert _ep_calls(nano, plain) == pytest.approx(64 * 23 * 4)
    moe = make_layout(**kw, recompute_modules=("moe", "layernorm", "core_attn", "moe_act"))
    assert _ep_calls(nano, moe) == pytest.approx(64 * 23 * 6)
    act = make_layout(**kw, recompute_modules=("layernorm", "core_attn", "moe_act"))
    assert _ep_calls(nano, act) == _ep_calls(nano, plain)


def test_fp8_dispatch_of_a_recomputed_forward_is_fp8_too():
    """With FP8 dispatch (ep_dispatch_bytes = 1) the recomputed forward's dispatch is FP8 like the forward's:
    2 of the 6 all-to-alls per MoE layer carry 1 byte per element, 4 carry 2."""
    nano = load_model("nemotron-3-nano-30b-a3b")
    lay = make_layout(tp=1, ep=8, dp=16, micro_batch=1, global_batch=1024, seq_len=8192, precision="fp8", etp=1,
                      recompute_modules=("moe",), ep_dispatch_bytes=1.0)
    items = [t for t in step_traffic(nano, lay) if _is_ep_a2a(t)]
    by_size = sorted(items, key=lambda t: t["size_bytes"])
    assert by_size[0]["calls"] == pytest.approx(64 * 23 * 2) and by_size[1]["calls"] == pytest.approx(64 * 23 * 4)
    assert by_size[1]["size_bytes"] == pytest.approx(2 * by_size[0]["size_bytes"])
