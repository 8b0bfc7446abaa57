"""``topo train``'s options line marks a ``cuda_graph_scope`` part no block of the model holds "no effect", as it
marks a recompute module (walk43, docs/calibration-findings.md section 440: ``["attn", "mlp"]`` on a hybrid with no
dense MLP layer said nothing of ``mlp``, whose graph captures nothing there). Megatron-Core's ``CudaGraphScope``
(NVIDIA/Megatron-LM@01b9cb23 megatron/core/transformer/enums.py): ``mlp`` "Captures MLP layers (dense layers only)",
``moe`` MoE layers, ``mamba`` Mamba layers."""

from __future__ import annotations

import topo
from topo.cli.train import _framework_options
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

NANO = "nemotron-3-nano-30b-a3b"  # "MEMEM*E...": Mamba-2, MoE and attention layers, no dense MLP layer


def _line(model, scope) -> str:
    lay = make_layout(tp=1, dp=8, ep=8, global_batch=8, cuda_graph_scope=scope)
    return _framework_options(lay.model_dump(), model, gpu_compute("H100"))


def test_a_part_without_blocks_is_marked_and_the_rest_are_not():
    nano = load_model(NANO)
    assert nano.num_dense_layers == 0 and nano.num_mamba_layers and nano.num_moe_layers
    assert _line(nano, ("attn", "mamba", "moe_router")) == 'cuda_graph_scope ["attn", "mamba", "moe_router"]'
    assert _line(nano, ("attn", "mlp")) == ('cuda_graph_scope ["attn", "mlp"] (no effect on mlp: '
                                            f'{NANO} has no dense MLP layers)')
    assert _line(nano, ("mlp",)) == f'cuda_graph_scope ["mlp"] (no effect: {NANO} has no dense MLP layers)'
    assert _line(nano, ("full_iteration",)) == 'cuda_graph_scope ["full_iteration"]'
    llama = load_model("llama3-8b")  # dense: attention and MLP, no Mamba-2, no experts
    assert _line(llama, ("attn", "mamba", "moe_router", "moe_preprocess")) == (
        'cuda_graph_scope ["attn", "mamba", "moe_router", "moe_preprocess"] (no effect on mamba, moe_router, '
        'moe_preprocess: llama3-8b has no Mamba-2 layers, no MoE layers)')


def test_the_marked_part_indeed_changes_nothing():
    """The mark says what the step model does: ``mlp`` beside ``attn`` on Nemotron 3 Nano prices the same step."""
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    nano = load_model(NANO)
    steps = [estimate_step(fabric, nano, make_layout(tp=1, dp=8, ep=8, global_batch=8, cuda_graph_scope=s)).step_time_s
             for s in (("attn",), ("attn", "mlp"), ("attn", "mamba"))]
    assert steps[0] == steps[1] and steps[2] < steps[0]
