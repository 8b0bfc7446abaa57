"""CUDA graphs with full recomputation are refused in one line, as Megatron-LM refuses them (walk43,
docs/calibration-findings.md section 440): NVIDIA/Megatron-LM@000c4ac2 megatron/training/arguments.py,
``validate_args``: with ``cuda_graph_impl`` not "none", ``assert args.recompute_granularity != 'full',
'recompute_granularity must not be full when CUDA Graphs are enabled.'`` topo priced the pair (949 ms on 576 GB200)."""

from __future__ import annotations

import pytest

from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout

NANO = load_model("nemotron-3-nano-30b-a3b")


@pytest.mark.parametrize("scope", [("attn", "mamba"), ("full_iteration",)])
def test_full_recompute_with_graphs_is_refused(scope):
    with pytest.raises(TopoError) as exc:
        check_layout(NANO, make_layout(tp=1, dp=8, ep=8, global_batch=8, recompute="full", cuda_graph_scope=scope))
    assert exc.value.key == "recompute"
    assert exc.value.message.startswith(f"full recomputation with CUDA graphs (cuda_graph_scope {', '.join(scope)}): "
                                        "Megatron-LM refuses it")


def test_selective_recompute_with_graphs_and_full_without_them_stand():
    check_layout(NANO, make_layout(tp=1, dp=8, ep=8, global_batch=8, recompute_modules=("moe_act",),
                                   cuda_graph_scope=("attn", "mamba")))
    check_layout(NANO, make_layout(tp=1, dp=8, ep=8, global_batch=8, recompute="full"))
