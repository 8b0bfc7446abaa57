"""Token-drop (padded-capacity) MoE layers inside CUDA graphs: what the graph captures and what the host still does.

A padded router has no tokens-per-expert device-to-host sync (NVIDIA/Megatron-LM@23e00ed0 core_v0.14.0
``megatron/core/transformer/moe/token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.preprocess``: ``drop_and_pad``
sizes every split from the capacity on the host, ``_maybe_dtoh_and_synchronize`` returns at once), so Megatron-Core
can graph the whole layer: at 0.14 (NeMo / Megatron-Bridge 25.09) ``enable_cuda_graph`` wraps the whole
``TransformerLayer`` in its ``CudaGraphManager`` (``transformer_layer.py`` ``__init__`` and ``__call__``); later
releases' ``moe`` scope takes ``pre_mlp_layernorm`` and the whole ``mlp``, router and shared experts included
(NVIDIA/Megatron-LM@d98e8a64dd ``transformer_layer.py``, the capture's submodules)."""

import sys
from pathlib import Path

import pytest
from published_setups import published_setups

from topo.training.gpus import gpu_compute
from topo.training.grad_hooks import grad_hook_host_s
from topo.training.model import load_model
from topo.training.operators import (MOE_ROUTER_OPS, SCOPE_PARTS, block_ops, block_time, captured, expert_host_s,
                                     host_launch_s, kernels_launched, launch_calls, stage_compute)
from topo.training.parallel import make_layout
from topo.training.weight_swizzle import swizzle_host_s

ROOT = Path(__file__).resolve().parents[1]
TOKEN_DROP_GB200 = ("mb2509_gb200_qwen3_30b_tokendrop", "mb2509_gb200_qwen3_30b_tokendrop_mxfp8",
                    "mb2509_gb200_qwen3_235b_tokendrop", "mb2509_gb200_qwen3_235b_tokendrop_mxfp8")


@pytest.fixture(scope="module")
def qwen235():
    return load_model("qwen3-235b-a22b")


def _padded(scope):
    # Megatron-Bridge 25.09's GB200 Qwen3-235B token-drop layout: TP2 EP64, MBS 1, capacity factor 1.0, padded
    return make_layout(tp=2, dp=32, ep=64, etp=1, micro_batch=1, global_batch=1024, seq_len=4096, precision="fp8",
                       moe_capacity_factor=1.0, moe_router_fusion=True, cuda_graph_scope=scope)


def test_the_moe_scope_captures_the_whole_moe_block(qwen235):
    """``moe`` captures every operator of the MoE block, the norm and router (the ``moe_router`` part) included;
    ``moe_router`` alone captures those and not the experts; nothing captures the other way round."""
    ops = block_ops(qwen235, _padded(("attn", "moe")), "E")
    assert {op.graph for op in ops} == {"moe", "moe_router"}
    assert all(captured(op, ("attn", "moe")) for op in ops)
    router_part = [op for op in ops if op.name in MOE_ROUTER_OPS]
    assert router_part and all(op.graph == "moe_router" for op in router_part)
    assert all(captured(op, ("attn", "moe_router")) for op in router_part)
    assert not any(captured(op, ("attn", "moe_router")) for op in ops if op.graph == "moe")
    assert SCOPE_PARTS["moe"] == ("moe", "moe_router", "moe_preprocess")


def test_a_whole_layer_graph_leaves_the_host_nothing_to_launch(qwen235):
    """Closed form: eager, the block's host time is the host's time per call, per C++-launched GEMM and per
    C++-launched kernel times their counts over every operator of its pass (:func:`launch_calls`, which sum to the
    kernels launched); graphed by ``attn moe`` it is none, forward and backward (the router's 30-odd kernels were
    the part left to the host before), so a layer costs the host no time on a Grace host either."""
    g = gpu_compute("GB200")
    km = g.kernels
    eager, graphed = _padded(("attn",)), _padded(("attn", "moe"))
    ops = block_ops(qwen235, eager, "E")

    def host(backward):
        n = [launch_calls(op, "fp8", backward) for op in ops if op.passes != ("forward" if backward else "backward")]
        assert sum(map(sum, n)) == pytest.approx(sum(kernels_launched(op, "fp8", backward) for op in ops
                                                     if op.passes != ("forward" if backward else "backward")))
        experts = sum(expert_host_s(op, g, "fp8", backward) for op in ops
                      if op.passes != ("forward" if backward else "backward"))  # per-expert module work
        experts += sum(swizzle_host_s(op, km.launch_torch_cpp_op_s, "fp8", backward)  # MXFP8 weight swizzles
                       + grad_hook_host_s(op, km.launch_py_s, backward) for op in ops  # DDP hooks, backward
                       if op.passes != ("forward" if backward else "backward"))
        return sum(c * km.launch_host_s + m * km.launch_cpp_gemm_s + k * km.launch_cpp_s for c, m, k in n) + experts

    bt = block_time(qwen235, eager, g, "E")
    assert bt.host_s == pytest.approx(host(False), rel=1e-12)
    assert bt.host_backward_s == pytest.approx(host(True), rel=1e-12)
    assert sum(host_launch_s(op, g, graphs=("attn", "moe_router"), precision="fp8")
               for op in ops if op.name in MOE_ROUTER_OPS) == 0.0
    bt = block_time(qwen235, graphed, g, "E")
    assert bt.host_s == 0.0 and bt.host_backward_s == 0.0 and bt.sync_s == 0.0
    assert "host" not in stage_compute(qwen235, graphed, g).by_module_s
    assert stage_compute(qwen235, eager, g).by_module_s.get("host", 0.0) > 0  # the eager layer is host-bound


def test_the_2509_token_drop_recipes_graph_whole_layers(monkeypatch):
    """The 25.09 GB200 token-drop rows by their own fields (the recipe's ``cuda_graphs: true``, Megatron-Core
    0.14's whole-layer graph, recorded as ``attn moe``; capacity factor 1.0, padded, all-to-all dispatcher): no
    host wait in any layer, and the experts' rows are exactly the capacity (no busiest-rank expectation)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))

    from topo.training.operators import expert_capacity, expert_rows

    rows = [s for s in published_setups() if s["run"] in TOKEN_DROP_GB200]
    assert len(rows) == len(TOKEN_DROP_GB200)
    for s in rows:
        lay, model = s["lay"], s["model"]
        assert set(lay.cuda_graph_scope) == {"attn", "moe"} and lay.moe_capacity_factor == 1.0
        assert lay.ep_dispatcher == "alltoall"
        assert expert_rows(model, lay) == lay.ep * expert_capacity(model, lay)
        assert "host" not in stage_compute(model, lay, gpu_compute("GB200")).by_module_s, s["run"]


def test_the_router_drops_tokens_in_its_own_kernels(qwen235):
    """Closed form of ``apply_router_token_dropping`` (Megatron-Core 0.14 ``moe_utils.py``, ``drop_policy
    "probs"``) on Qwen3-235B at TP2, 4,096 tokens: 2,048 tokens a rank (sequence parallel) x 128 experts, FP32
    scores, capacity ceil(2,048 x 8 / 128) = 128 a expert. Forward: top-k read (4), ``zeros_like`` (4), ``scatter``
    (8 + 4 a slot), ``.bool()`` (4 + 1), the masked product (4 + 1 + 4) in 5 kernels; backward ``grad * mask``
    (4 + 1 + 4) in one. A dropless router runs none of them."""
    lay = _padded(("attn", "moe"))
    ops = {op.name: op for op in block_ops(qwen235, lay, "E")}
    scores, slots = 2048 * 128, 128 * 128
    fwd, bwd = ops["router_capacity"], ops["router_capacity_grad"]
    assert fwd.bytes == (4 + 4 + 5 + 9) * scores + 12 * slots and fwd.launches == 5 and fwd.passes == "forward"
    assert bwd.bytes == 9 * scores and bwd.launches == 1 and bwd.passes == "backward"
    assert fwd.graph == bwd.graph == "moe_router"  # the router's part: graphed by moe_router and by moe
    dropless = lay.model_copy(update={"moe_capacity_factor": None, "cuda_graph_scope": ("attn",)})
    assert not {"router_capacity", "router_capacity_grad"} & {op.name for op in block_ops(qwen235, dropless, "E")}
