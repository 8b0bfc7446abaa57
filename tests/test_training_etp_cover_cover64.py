"""cover64: at ep > 1 with etp > 1 the host line's cover holds the experts' etp all-gather and reduce-scatter.

NVIDIA/Megatron-LM@d98e8a64dd (the same at @44151194 and @23e00ed0)
``megatron/core/transformer/moe/token_dispatcher.py``: ``MoEAlltoAllTokenDispatcher`` syncs its tokens per expert
``before_ep_alltoall`` (``preprocess``), then on the compute stream runs ``token_dispatch``'s all-to-all over the EP
group, ``dispatch_postprocess``'s ``gather_from_sequence_parallel_region`` over the experts' TP group, the experts,
``combine_preprocess``'s ``reduce_scatter_to_sequence_parallel_region`` and ``token_combine``'s all-to-all, launched
by the host in that order. ``MoEFlexTokenDispatcher`` makes one call each way over ``tp_ep_group``, which topo
prices as the same all-to-all and etp items (``step._ep_traffic``). So the GPU time the host launches behind
between two syncs (``step._ep_cover_s``) is the dispatch all-to-all + the etp all-gather + the etp reduce-scatter
+ the combine all-to-all, one call each; tidy59 had counted only the two all-to-alls there."""

from types import SimpleNamespace as NS

import pytest

import topo

from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import _ep_cover_s, estimate_step

A2A = {"dim": "ep", "collective": "alltoall", "groups": "ep", "elem_bytes": 2.0}
FP8 = {**A2A, "elem_bytes": 1.0}
PROBS = {**A2A, "elem_bytes": 4.0, "pair": "ep_probs"}
COUNTS = {"dim": "ep", "collective": "all_gather", "groups": "ep", "elem_bytes": 8.0}
GATHER = {"dim": "ep", "collective": "all_gather", "groups": "etp", "elem_bytes": 2.0}
SCATTER = {"dim": "ep", "collective": "reduce_scatter", "groups": "etp", "elem_bytes": 2.0}
EP8_ETP2 = dict(tp=1, dp=16, ep=8, etp=2, micro_batch=1, global_batch=64, seq_len=4096)


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_the_cover_sums_the_all_to_alls_and_the_etp_gather_and_scatter(dispatcher):
    """One dispatch (the FP8 all-to-all where there is one, else the BF16 one, and the etp all-gather) and one
    combine (the etp reduce-scatter and the BF16 all-to-all); the probs all-to-all and the counts' all-gather
    are no part of either; nothing under EP overlap."""
    lay = NS(overlap_ep=False, ep=8, ep_dispatcher=dispatcher, cuda_graph_scope=())
    timed = [(A2A, NS(time_s=3e-4)), (GATHER, NS(time_s=1e-4)), (SCATTER, NS(time_s=1.5e-4)),
             (PROBS, NS(time_s=1e-5)), (COUNTS, NS(time_s=2e-5))]
    assert _ep_cover_s(lay, timed) == pytest.approx(2 * 3e-4 + 1e-4 + 1.5e-4, rel=1e-12)
    assert _ep_cover_s(lay, [(FP8, NS(time_s=2e-4))] + timed) == pytest.approx(2e-4 + 1e-4 + 1.5e-4 + 3e-4,
                                                                              rel=1e-12)
    # every pass paired (tidy65: an unpaired one keeps its cover)
    assert _ep_cover_s(NS(overlap_ep=True, pipeline_schedule="dualpipe", ep=8, ep_dispatcher=dispatcher,
                          cuda_graph_scope=()), timed) == 0.0


@pytest.mark.parametrize("kw", [{}, dict(ep_dispatcher="deepep", ep_flex_backend="hybridep")],
                         ids=["alltoall", "hybridep"])
def test_the_step_covers_with_its_own_exchange_at_ep_8_etp_2(kw):
    """Qwen3-30B-A3B at ep 8 etp 2 on two DGX H100 nodes: the step's cover is its own forward exchange, one call
    each of the token all-to-all (twice: dispatch and combine, both BF16), the etp all-gather and the etp
    reduce-scatter, as the step prices them alone on the fabric; at etp 1 the two all-to-alls alone."""
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("qwen3-30b-a3b")
    for etp in (2, 1):
        r = estimate_step(fabric, m, make_layout(**{**EP8_ETP2, "etp": etp, **kw}), contention=False)
        one = {}
        for c in r.comm:
            if c.dim == "ep" and (c.collective != "all_gather" or c.group_size == etp):
                one[c.collective] = max(one.get(c.collective, 0.0), c.time_s / c.calls_per_step)  # not the probs'
        assert set(one) == ({"alltoall", "all_gather", "reduce_scatter"} if etp > 1 else {"alltoall"})
        expected = 2 * one["alltoall"] + one.get("all_gather", 0.0) + one.get("reduce_scatter", 0.0)
        assert r.ep_cover_s == pytest.approx(expected, rel=1e-9)
        assert one.get("all_gather", 1.0) > 0
