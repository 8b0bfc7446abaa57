"""tidy58: the flex dispatcher at ep 1 and etp > 1 calls its dispatch and combine over the experts' TP group.

NVIDIA/Megatron-LM@44151194 ``megatron/core/transformer/moe/token_dispatcher.py`` ``MoEFlexTokenDispatcher``: both
DeepEP's and HybridEP's managers are built over ``tp_ep_group`` with ``tp_size x`` the experts, so at ep 1 they still
exchange tokens among the ``etp`` ranks. topo had priced no host for those calls (``call_host_s`` needed ep > 1) and,
HybridEP's permutation being launched inside its calls, no host for the permutation either (rev62, section 239).
tidy59: the host line sees those calls' GPU time (the exchange priced as the etp all-gather and reduce-scatter) as it
sees the all-to-alls' at ep > 1 (``step._ep_cover_s``). cover64: so does the all-to-all dispatcher's, whose etp
all-gather and reduce-scatter run on the compute stream after its sync at ep 1 as well."""

import pytest

import topo

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import Block, EpCallsHost, block_time, ep_calls, ep_calls_host
from topo.training.parallel import check_layout, make_layout
from topo.training.step import _ep_cover_s, estimate_step

ETP2 = dict(tp=1, dp=8, ep=1, etp=2, micro_batch=1, global_batch=64, seq_len=4096)


def test_hybridep_at_ep_1_calls_at_the_measured_price():
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    lay = make_layout(**ETP2, ep_dispatcher="deepep", ep_flex_backend="hybridep")
    check_layout(m, lay, gpus=8)
    assert ep_calls(lay)
    # host_calls.toml [call.hybridep_dispatch_with_permute]: (4.253 - 3.109) s / 6,144 calls on DGX H100
    calls = block_time(m, lay, gpu, Block.MOE).calls_host_s
    assert calls == pytest.approx([(4.253 - 3.109) / 6144] * 4, rel=1e-3)  # one figure for each call kind
    assert ep_calls_host(lay, gpu) == calls


def test_the_all_to_all_dispatcher_at_ep_1_calls_no_all_to_all():
    """Megatron's all-to-all over an EP group of one rank returns its input: no call."""
    m, gpu = load_model("qwen3-30b-a3b"), gpu_compute("H100")
    lay = make_layout(**ETP2)
    assert not ep_calls(lay) and block_time(m, lay, gpu, Block.MOE).calls_host_s == EpCallsHost()
    assert ep_calls(make_layout(**{**ETP2, "etp": 1, "ep": 8}))


def test_the_host_line_sees_the_flex_exchange_at_ep_1():
    """At ep 1 the flex dispatcher's dispatch is priced as one etp all-gather and its combine as one etp
    reduce-scatter (``step._ep_traffic``): the forward's cover of the host's waits is those two calls' GPU time,
    each alone on the fabric, as it is the dispatch and combine all-to-alls' at ep > 1 (one rule:
    ``step._ep_cover_s``). Qwen3-30B-A3B, HybridEP at ep 1 etp 2 on one DGX H100. The all-to-all dispatcher at
    ep 1 calls no all-to-all, but it still syncs (``preprocess``: ``ep_size > 1 or tp_size > 1``) and then gathers
    over the experts' TP group and scatters back on the compute stream (NVIDIA/Megatron-LM@d98e8a64dd
    ``token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.dispatch_postprocess`` / ``combine_preprocess``), so the
    same two calls cover its host line (cover64; tidy59 had it at 0). Unit check: the gather and the scatter sum,
    whatever the dispatcher; none with the EP exchange overlapped."""
    from types import SimpleNamespace as NS
    gather = {"dim": "ep", "collective": "all_gather", "groups": "etp", "elem_bytes": 2.0}
    scatter = {"dim": "ep", "collective": "reduce_scatter", "groups": "etp", "elem_bytes": 2.0}
    timed = [(gather, NS(time_s=2e-4)), (scatter, NS(time_s=3e-4))]
    flex = NS(overlap_ep=False, ep=1, ep_dispatcher="deepep", cuda_graph_scope=())
    assert _ep_cover_s(flex, timed) == pytest.approx(5e-4, rel=1e-12)
    assert _ep_cover_s(NS(overlap_ep=False, ep=1, ep_dispatcher="alltoall", cuda_graph_scope=()),
                       timed) == pytest.approx(5e-4, rel=1e-12)
    assert _ep_cover_s(NS(overlap_ep=True, pipeline_schedule="dualpipe", ep=1, ep_dispatcher="deepep",
                          cuda_graph_scope=()), timed) == 0.0  # every pass paired
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    lay = make_layout(**ETP2, ep_dispatcher="deepep", ep_flex_backend="hybridep")
    r = estimate_step(fabric, m, lay, contention=False)
    ep = {c.collective: c for c in r.comm if c.dim == "ep"}
    assert set(ep) == {"all_gather", "reduce_scatter"}
    one = {k: c.time_s / c.calls_per_step for k, c in ep.items()}
    assert r.ep_cover_s == pytest.approx(one["all_gather"] + one["reduce_scatter"], rel=1e-9)
    assert r.ep_cover_s > 0
    r = estimate_step(fabric, m, make_layout(**ETP2), contention=False)
    ep = {c.collective: c for c in r.comm if c.dim == "ep"}
    assert set(ep) == {"all_gather", "reduce_scatter"}
    assert r.ep_cover_s == pytest.approx(sum(c.time_s / c.calls_per_step for c in ep.values()), rel=1e-9)
