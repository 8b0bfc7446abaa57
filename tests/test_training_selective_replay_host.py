"""A selectively recomputed module's replay runs inside the backward pass, where nothing syncs and the host runs
ahead of the GPU as across the forward (findings section 246 item 1, the rule of its item 2 for fully recomputed
layers): its launches and its GPU time join the backward's host balance (``operators._replay_terms``). Megatron-Core
replays each module of ``recompute_modules`` in the backward (NVIDIA/Megatron-LM@44151194
``megatron/core/transformer/transformer_layer.py``: ``CheckpointWithoutOutput`` around the input / pre-MLP norms
and the MLP's activation, ``tensor_parallel.checkpoint`` around the attention core, the MLP and ``MoELayer.forward``),
so the host launches each replayed kernel again. (No Mamba-2 module: ``megatron/core/ssm/mamba_layer.py`` builds no
checkpoint there or at any commit of the mirror's history, and topo refuses ``mamba``: tidy122, section 445.)

Each case, per module kind: with the stage's backward host-bound (an eager H100 at the top of the host's published
5-20 us a launch, short sequences) the replay costs exactly the host's launches of the replayed forward ops (and, for
a replayed ``moe`` module without a sync, its dispatch and combine calls); GPU-bound (0.1 us a launch) exactly
their GPU time. Both counted here op by op from the blocks' operators, not from ``BlockTime``."""

import pytest
from conftest import every_kernel_a_call

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import END_UNITS, block_ops, host_launch_s, op_time_s, pipeline_units, stage_compute
from topo.training.parallel import make_layout

LLAMA_TP8 = dict(tp=8, dp=1, micro_batch=1, global_batch=64, seq_len=256)  # per layer 0.30 ms of launches, 0.21 of GPU
MOE = dict(tp=1, ep=8, dp=8, micro_batch=1, global_batch=64, seq_len=512, etp=1)
PADDED = dict(MOE, moe_capacity_factor=1.0)  # no tokens-per-expert sync: the host runs ahead across the pass
SHARED = ("moe", "moe_act", "shared_experts", "shared_experts_act")  # what MoELayer.forward runs

# module recomputed -> (model, layout, the op modules and op tags it replays, its replay calls the all-to-alls)
CASES = {
    "core_attn": ("llama3-8b", LLAMA_TP8, {"core_attn"}, set(), False),
    "layernorm": ("llama3-8b", LLAMA_TP8, {"layernorm"}, set(), False),
    "mlp": ("llama3-8b", LLAMA_TP8, {"mlp", "mlp_act"}, set(), False),
    "mlp_act": ("llama3-8b", LLAMA_TP8, {"mlp_act"}, set(), False),
    "mlp_wi": ("llama3-8b", LLAMA_TP8, {"mlp_act"}, {"mlp_wi"}, False),  # fc1 and the activation after it
    "moe_act": ("qwen3-30b-a3b", MOE, {"moe_act"}, set(), False),  # in a synced layer: no sync of its own
    "moe": ("qwen3-30b-a3b", PADDED, set(SHARED), set(), True),  # without a sync: its own line is the balance
}


def _replayed_s(model, lay, gpu, mods, tags, calls):
    """The stage's replayed forward per micro-batch, op by op: (host launch seconds, GPU seconds)."""
    host = busy = 0.0
    for unit in pipeline_units(model, lay)[0]:
        if unit in END_UNITS:
            continue
        for kind in unit:
            for op in block_ops(model, lay, kind):
                if op.passes != "backward" and (op.module in mods or op.tag in tags):
                    host += host_launch_s(op, gpu, graphs=lay.cuda_graph_scope, precision=lay.precision)
                    busy += op_time_s(op, gpu, lay.precision)
            host += 2 * gpu.kernels.launch_host_s if calls and kind == "E" else 0.0  # one launch a call
    return host, busy


@pytest.mark.parametrize("module", sorted(CASES))
def test_a_selectively_recomputed_module_replays_its_host_launches(module):
    name, kw, mods, tags, calls = CASES[module]
    model = load_model(name)
    for host_s in (2e-5, 1e-7):
        gpu = gpu_compute("H100", overrides={"launch": every_kernel_a_call(host_s)})  # host- or GPU-bound by host_s
        none = stage_compute(model, make_layout(**kw), gpu)
        lay = make_layout(**kw, recompute="selective", recompute_modules=(module,))
        sc = stage_compute(model, lay, gpu)
        added = sc.backward_s + sc.recompute_s - none.backward_s - none.recompute_s
        host, busy = _replayed_s(model, lay, gpu, mods, tags, calls)
        assert busy > 0 and sc.forward_s == pytest.approx(none.forward_s, rel=1e-12)
        if host_s > 1e-6:  # host-bound: the replay at the host's pace, more than its GPU time
            assert host > busy * 1.05
            assert added == pytest.approx(host, rel=1e-9)
        else:  # GPU-bound: its GPU time only
            assert added == pytest.approx(busy, rel=1e-9)
