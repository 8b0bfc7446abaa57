"""The all-to-all dispatcher's token counts (issue 29: launch and host costs from kernel counts): what Megatron-Core's
``MoEAlltoAllTokenDispatcher`` launches besides the tokens' all-to-alls in a dropless MoE block, counted from its
code (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/token_dispatcher.py ``preprocess``,
``_maybe_dtoh_and_synchronize``, ``token_dispatch``; kernels.toml ``[launch]`` alltoall_preprocess_kernels)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import alltoall_preprocess_kernels
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, ep_calls_host, host_launch_s
from topo.training.parallel import make_layout
from topo.training.step import _is_ep_a2a, step_traffic

HOST_S = 1e-3  # a host time per launch large enough to read counts off the block's host seconds


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-30b-a3b")  # 128 experts, top-8, hidden 2,048 (arXiv 2505.09388)


def _lay(**upd):
    return make_layout(ep=8, dp=8, global_batch=64, seq_len=4096, etp=1, moe_imbalance=1.0, moe_router_fusion=True, **upd)


def _launches(model, lay):
    return {op.name: op.launches for op in block_ops(model, lay, "E")}


def test_counts_follow_megatron_cores_preprocess(qwen):
    """EP > 1: routing_map.sum, the input splits' sum, the counts' all-gather, the local slice's copy and three
    sums (7); four device-to-host copies (tokens per expert, input / output splits, the TP output splits)."""
    assert alltoall_preprocess_kernels(True) == {"preprocess": 7.0, "dtoh": 4.0}
    assert alltoall_preprocess_kernels(False) == {"preprocess": 1.0, "dtoh": 1.0}
    ops = _launches(qwen, _lay())
    assert (ops["dispatch_preprocess"], ops["dispatch_dtoh"]) == (7.0, 4.0)
    one = _launches(qwen, make_layout(ep=1, dp=8, global_batch=64, seq_len=4096, etp=1))
    assert (one["dispatch_preprocess"], one["dispatch_dtoh"]) == (1.0, 1.0)


def test_no_counts_for_the_flex_dispatcher_or_a_padded_router(qwen):
    """The flex dispatcher's preprocess is inside the router's published 17 kernels; a capacity factor sizes every
    buffer statically, so nothing is copied to the host."""
    for lay in (_lay(ep_dispatcher="deepep"), _lay(moe_capacity_factor=1.0)):
        ops = _launches(qwen, lay)
        assert "dispatch_preprocess" not in ops and "dispatch_dtoh" not in ops


def test_the_host_launches_them_forward_only_and_graphs_capture_the_preprocess(qwen):
    g = gpu_compute("H100", overrides={"launch": {"host_s": HOST_S}})
    eager = block_time(qwen, _lay(), g, "E")
    flex = block_time(qwen, _lay(ep_dispatcher="deepep"), g, "E")
    # the same block but for the dispatcher: the flex router's 17 against the fused router's 31 plus 7 + 4, and
    # the permutation's 9 forward launches against none of HybridEP's own (its 2 are launched from C++ inside its
    # two calls, whose host time the block's call_host_s prices: Op.in_call)
    assert eager.host_s - flex.host_s == pytest.approx((31 - 17 + 7 + 4 + 9 - 0) * HOST_S)
    # no backward kernels: autograd does not replay the counts
    mine = [op for op in block_ops(qwen, _lay(), "E") if op.name.startswith("dispatch_")]
    assert len(mine) == 2 and all(host_launch_s(op, g, backward=True) == 0.0 for op in mine)
    assert sum(host_launch_s(op, g) for op in mine) == pytest.approx(11 * HOST_S)
    graphed = block_time(qwen, _lay(cuda_graph_scope=("moe_router", "moe_preprocess")), g, "E")
    router_only = block_time(qwen, _lay(cuda_graph_scope=("moe_router",)), g, "E")
    # moe_preprocess captures the 7; the 4 copies stay eager (Megatron-Core moves them after the graph)
    assert router_only.host_s - graphed.host_s == pytest.approx(7 * HOST_S)
    assert eager.host_s - router_only.host_s == pytest.approx((1 + 1 + 30) * HOST_S)  # norm, gating GEMM, top-k


def test_the_probs_all_to_all_and_the_counts_gather_are_in_the_traffic(qwen):
    """token_dispatch sends the probabilities in an all-to-all of their own (FP32 per routed copy), forward and
    backward (and again in a recomputed ``moe`` forward); preprocess all-gathers each rank's int64 count per expert
    over the EP group, forward only."""
    lay = _lay()
    m, layers = lay.microbatches, qwen.layers
    items = [it for it in step_traffic(qwen, lay) if it["dim"] == "ep"]
    probs = [it for it in items if it.get("pair") == "ep_probs"]
    counts = [it for it in items if it["collective"] == "all_gather"]
    tokens = [it for it in items if _is_ep_a2a(it)]
    assert len(probs) == len(counts) == len(tokens) == 1 and len(items) == 3
    # 4,096 tokens a rank x 8 routed copies x 4 bytes; the tokens' call carries 2,048 x 2 bytes a copy
    assert probs[0]["size_bytes"] == 4096 * 8 * 4 and tokens[0]["size_bytes"] == 4096 * 8 * 2048 * 2
    assert probs[0]["calls"] == 2 * m * layers and tokens[0]["calls"] == 4 * m * layers
    assert counts[0]["size_bytes"] == 128 * 8 * 8 and counts[0]["calls"] == m * layers
    rec = [it for it in step_traffic(qwen, _lay(recompute_modules=("moe",))) if it.get("pair") == "ep_probs"]
    assert rec[0]["calls"] == 3 * m * layers
    # the flex dispatcher's kernels carry the probabilities with the tokens and gather no counts; HybridEP's forward
    # dispatch gathers its bool routing map instead, 4,096 tokens x 128 experts a rank over the 8 ranks (section 382:
    # deepseek-ai/DeepEP@94a9f8f6 hybrid-ep executor.cu allgather_routing_map, NCCL inside one node too), DeepEP none
    flex = [it for it in step_traffic(qwen, _lay(ep_dispatcher="deepep")) if it["dim"] == "ep"]
    assert not [it for it in flex if it.get("pair") == "ep_probs"]
    assert [(it["size_bytes"], it["calls"]) for it in flex if it["collective"] == "all_gather"] == [
        (4096 * 128 * 8, m * layers)]
    deepep = step_traffic(qwen, _lay(ep_dispatcher="deepep", ep_flex_backend="deepep"))
    assert not [it for it in deepep if it["dim"] == "ep" and it["collective"] == "all_gather"]
    padded = [it for it in step_traffic(qwen, _lay(moe_capacity_factor=1.0)) if it["dim"] == "ep"]
    assert [it.get("pair") for it in padded if it["collective"] == "alltoall"].count("ep_probs") == 1
    assert not [it for it in padded if it["collective"] == "all_gather"]


@pytest.mark.parametrize("upd, local, launches, back", [
    ({}, 16, (9, 4), 2),  # all-to-all: permute (3 row-id-map kernels + 1), sort by expert (2), sort back (2), unpermute
    ({"ep_dispatcher": "deepep", "ep_flex_backend": "deepep"}, 16, (5, 2), 2),  # DeepEP: permute and unpermute only
    ({"ep_dispatcher": "deepep"}, 16, (2, 2), 1),  # HybridEP: one permute, one un-permute, inside its calls
])
def test_the_permutation_launches_transformer_engines_kernels(qwen, upd, local, launches, back):
    """Transformer Engine's fused permutation (NVIDIA/TransformerEngine@d0067d0da pytorch/permutation.py, triton
    make_row_id_map's three passes, permute / unpermute / chunk-sort kernels; each backward one kernel) as each
    Megatron-Core dispatcher calls it; bytes: the forward's, and backward twice that for Transformer Engine's
    kernels, once for HybridEP's, whose backward runs its forward's permute and un-permute the other way on the
    gradients (NVIDIA/Megatron-LM@6cd6ea530e ``fused_a2a.py``: ``HybridEPDispatch.backward`` is
    ``combine_with_unpermute``, ``HybridEPCombine.backward`` is ``dispatch_with_permute``; the forward combine is
    unweighted, so no forward rows are read again: kernels.toml ``permute_backward_bytes``)."""
    g = gpu_compute("H100", overrides={"launch": {"host_s": HOST_S}})
    lay = _lay(**upd)
    ops = {op.name: op for op in block_ops(qwen, lay, "E")}
    assert qwen.moe.experts / lay.ep == local
    assert (ops["permute"].launches, ops["permute_grad"].launches) == launches
    assert ops["permute_grad"].bytes == back * ops["permute"].bytes
    own = 0.0 if ops["permute"].in_call else 1.0  # HybridEP's: launched inside its calls (test below)
    assert host_launch_s(ops["permute"], g) == pytest.approx(own * launches[0] * HOST_S)
    assert host_launch_s(ops["permute_grad"], g, backward=True) == pytest.approx(own * launches[1] * HOST_S)
    assert host_launch_s(ops["permute_grad"], g) == 0.0 and host_launch_s(ops["permute"], g, backward=True) == 0.0


def test_one_local_expert_needs_no_sort():
    """Mixtral 8x7B at EP 8: one expert a rank, so the all-to-all dispatcher sorts nothing (num_local_experts > 1
    gates sort_chunks_by_idxs): permute and unpermute, 5 forward and 2 backward launches."""
    mix = load_model("mixtral-8x7b")
    ops = {op.name: op for op in block_ops(mix, _lay(), "E")}
    assert (ops["permute"].launches, ops["permute_grad"].launches) == (5, 2)


@pytest.mark.parametrize("ep, sorts", [(8, False), (4, True), (2, True)])
def test_the_sort_by_local_expert_moves_bytes_and_launches_together(ep, sorts):
    """Mixtral 8x7B (8 experts): at EP 8 a rank holds one expert and Megatron-Core's permutation 2 (``if
    self.num_local_experts > 1``) does not run, at EP 4 / 2 it does. Its bytes (4 x the rows received a forward,
    read + write each way) and its 4 forward / 2 backward launches (sort and sort back) come from one test
    (``sorts_by_local_expert``), so a layout never pays the launches of a sort whose bytes it skips."""
    mix = load_model("mixtral-8x7b")
    lay = make_layout(ep=ep, dp=8, global_batch=64, seq_len=4096, etp=1, moe_imbalance=1.0, moe_router_fusion=True)
    ops = {op.name: op for op in block_ops(mix, lay, "E")}
    t_in, h, k = 4096, mix.hidden, mix.moe.active_experts
    routed_bytes = 2 * t_in * k * h  # BF16 routed copies of the rank's tokens (load 1: a uniform router)
    plain = 2 * (2 * t_in * h + routed_bytes)  # permutation 1 and its reverse
    assert ops["permute"].bytes == pytest.approx(plain + (4 * routed_bytes if sorts else 0.0))
    assert (ops["permute"].launches, ops["permute_grad"].launches) == ((9, 4) if sorts else (5, 2))


def test_hybridep_permutes_in_its_calls_two_gaps_a_pass_and_no_launch_of_the_hosts(qwen):
    """deepseek-ai/DeepEP@94a9f8f6 (hybrid-ep) ``csrc/hybrid_ep/executor/executor.cu``: ``dispatch_postprocess``
    launches one permute kernel (``permute_launcher``), ``combine_preprocess`` one un-permute
    (``unpermute_launcher``), inside ``dispatch_with_permute`` / ``combine_with_unpermute``; the backward calls the
    other one (NVIDIA/Megatron-LM@6cd6ea530e ``fused_a2a.py``). So 2 kernels a pass on the GPU, each paying its
    launch gap, and no host launch of their own (the calls' measured host time holds them:
    ``operators.ep_calls_host``). Transformer Engine's permutation (DeepEP's backend) keeps its host launches."""
    g = gpu_compute("H100", overrides={"launch": {"host_s": HOST_S}})
    ops = {op.name: op for op in block_ops(qwen, _lay(ep_dispatcher="deepep"), "E")}
    for name, backward in (("permute", False), ("permute_grad", True)):
        assert ops[name].launches == 2 and ops[name].in_call
        assert host_launch_s(ops[name], g, backward=backward) == 0.0
    te = {op.name: op for op in block_ops(qwen, _lay(ep_dispatcher="deepep", ep_flex_backend="deepep"), "E")}
    assert not te["permute"].in_call and host_launch_s(te["permute"], g) == pytest.approx(5 * HOST_S)


def test_a_hybridep_calls_host_is_pr_5094s_figure_times_the_hosts_factor():
    """Each HybridEP all-to-all call costs the host the profile's 186.2 us on DGX H100 (host_calls.toml
    ``hybridep_dispatch_with_permute``: PR #5094's range mixes the forward dispatch and the combine's backward and
    times no part apart, so every call kind alike), on Grace times 37.08 / 13.48 (host_cpu.toml's factor, TE
    #2053); the all-to-all dispatcher's calls one kernel launch each (``launch_host_s``); DeepEP V1's its own
    figures (below)."""
    h100, gb200 = gpu_compute("H100"), gpu_compute("GB200")
    hybrid = _lay(ep_dispatcher="deepep")
    assert ep_calls_host(hybrid, h100) == pytest.approx([186.2e-6] * 4)
    assert ep_calls_host(hybrid, gb200) == pytest.approx([186.2e-6 * 37.08 / 13.48] * 4)
    assert block_time(load_model("qwen3-30b-a3b"), hybrid, h100, "E").calls_host_s == pytest.approx([186.2e-6] * 4)
    assert ep_calls_host(_lay(), gb200) == (gb200.kernels.launch_host_s,) * 4


def test_a_deepep_v1_call_is_deepseeks_traced_host_time_of_its_kind_times_the_hosts_factor():
    """deepseek-ai/profile-data@4496024 train.json (H800, rank 0 of EP64), DeepEP's C++ entries less the dispatch's
    busy-wait, medians over the 4 layers: forward dispatch 245 us (get_dispatch_layout 56 + dispatch 189), forward
    combine 67, the dispatch's backward 54, the combine's backward 88, each call at its own kind's figure (not
    their mean, 113.5 us) on the H800 catalog host (8480C, an assumption: DeepSeek names no CPU), on Grace times
    37.08 / 13.48 (TE #2053)."""
    h100, gb200 = gpu_compute("H100"), gpu_compute("GB200")
    v1 = _lay(ep_dispatcher="deepep", ep_flex_backend="deepep")
    traced = [245e-6, 67e-6, 54e-6, 88e-6]
    calls = ep_calls_host(v1, h100)
    assert calls == pytest.approx(traced)
    assert (calls.forward_s, calls.backward_s) == pytest.approx((312e-6, 142e-6))
    assert ep_calls_host(v1, gb200) == pytest.approx([t * 37.08 / 13.48 for t in traced])
    assert block_time(load_model("qwen3-30b-a3b"), v1, h100, "E").calls_host_s == pytest.approx(traced)
