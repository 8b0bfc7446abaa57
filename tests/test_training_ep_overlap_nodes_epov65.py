"""``--overlap ep=on`` (Megatron-Core's combined 1F1B) hides an EP call only as the node that holds it pairs
(walk24's left item 1: a hybrid at TP2 CP2 PP2 VPP4 EP8 with 2 micro-batches, nothing paired, still hid 91% of its
etp all-gather and reduce-scatter behind the generic EP window).

What each node holds, NVIDIA/Megatron-LM@d98e8a64dd (the same at @6cd6ea530e and @01cf4fb5),
``megatron/core/models/gpt/fine_grained_callables.py`` ``build_transformer_layer_callables`` and
``megatron/core/transformer/moe/moe_layer.py`` / ``token_dispatcher.py``:
- ``attn`` node (compute stream): ``MoELayer.preprocess``, the all-to-all dispatcher's tokens-per-expert
  all-gather;
- ``moe_dispatch`` node (communication stream): ``token_dispatch``, the tokens' all-to-all and the probs'
  all-to-all (the flex dispatcher: its one call over the TP x EP group);
- ``mlp`` node (compute stream): ``routed_experts_compute``, whose ``dispatch_postprocess`` all-gathers and
  ``combine_preprocess`` reduce-scatters over the experts' TP group (the all-to-all dispatcher);
- ``moe_combine`` node (communication stream): ``token_combine``'s all-to-all.
"""

import pytest

import topo
from topo.training.ep_overlap import unpaired_share
from topo.training.mapping import FLEX_GROUP
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import _ep_node_passes, estimate_step, step_traffic  # the pass rule: private


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-30b-a3b")


@pytest.fixture(scope="module")
def h100():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))


def _layout(global_batch: int, dispatcher: str = "alltoall", overlap_ep: bool = True):
    extra = {"ep_flex_backend": "deepep"} if dispatcher == "deepep" else {}
    return make_layout(tp=2, pp=2, vpp=4, dp=64, ep=8, etp=2, global_batch=global_batch, seq_len=4096,
                       ep_dispatcher=dispatcher, overlap_ep=overlap_ep, **extra)


def _ep(r):
    return {(c.collective, c.size_bytes): c for c in r.comm if c.dim == "ep"}


def test_nothing_paired_hides_no_ep_call(qwen, h100):
    """Walk24's shape on Qwen3-30B-A3B: pp 2 x vpp 4 with 2 micro-batches, stage 0's warm-up holds all 8
    forwards ((2 - 1) x 2 + (4 - 1) x 2 + 1 = 9, NVIDIA/Megatron-LM@00611e6e schedules.py), so no node has a
    partner: every EP call, the etp all-gather and reduce-scatter, the probs' all-to-all and the counts' gather as
    well as the tokens' all-to-all, is exposed as without the overlap."""
    lay = _layout(128)
    assert lay.microbatches == 2 and unpaired_share(lay) == 1.0
    on = estimate_step(h100, qwen, lay, contention=False)
    off = estimate_step(h100, qwen, _layout(128, overlap_ep=False), contention=False)
    assert len(_ep(on)) == 5
    for key, c in _ep(on).items():
        assert c.exposed_s == pytest.approx(c.time_s, rel=1e-12), key
        assert c.exposed_s == pytest.approx(_ep(off)[key].exposed_s, rel=1e-12), key
    assert on.breakdown_s["ep"] == pytest.approx(off.breakdown_s["ep"], rel=1e-12)


def test_the_mlp_nodes_etp_calls_stay_exposed_when_paired(qwen, h100):
    """32 micro-batches: most forwards pair. The tokens' and the probs' all-to-alls (dispatch and combine nodes)
    hide in one share; the all-to-all dispatcher's etp all-gather and reduce-scatter run in the ``mlp`` node on the
    compute stream and its counts' gather in the ``attn`` node: the overlap hides none of them."""
    lay = _layout(2048)
    assert lay.microbatches == 32 and unpaired_share(lay) < 0.1
    ep = _ep(estimate_step(h100, qwen, lay, contention=False))
    a2a = [c for c in ep.values() if c.collective == "alltoall"]
    assert len(a2a) == 2
    share = a2a[0].exposed_s / a2a[0].time_s
    assert share < 0.5 and a2a[1].exposed_s / a2a[1].time_s == pytest.approx(share, rel=1e-12)
    rest = [c for c in ep.values() if c.collective != "alltoall"]
    assert len(rest) == 3  # the etp all-gather and reduce-scatter, the counts' gather
    for c in rest:
        assert c.exposed_s == pytest.approx(c.time_s, rel=1e-12), (c.collective, c.size_bytes)


def test_the_flex_dispatchers_etp_part_pairs_with_its_call(qwen, h100):
    """The flex dispatcher makes one call each way over the TP x EP group (``MoEFlexTokenDispatcher``:
    ``dispatch_postprocess`` and ``combine_preprocess`` only permute): its etp part, priced as the etp items, runs
    in the dispatch and combine nodes and hides in the all-to-all's share; with nothing paired it is all exposed."""
    ep = _ep(estimate_step(h100, qwen, _layout(2048, "deepep"), contention=False))
    a2a = next(c for c in ep.values() if c.collective == "alltoall")
    share = a2a.exposed_s / a2a.time_s
    assert 0 < share < 0.5
    for c in ep.values():
        assert c.exposed_s / c.time_s == pytest.approx(share, rel=1e-12), (c.collective, c.size_bytes)
    for c in _ep(estimate_step(h100, qwen, _layout(128, "deepep"), contention=False)).values():
        assert c.exposed_s == pytest.approx(c.time_s, rel=1e-12), (c.collective, c.size_bytes)


def test_each_pass_holds_its_own_calls_an_all_gathers_backward_a_reduce_scatter(qwen):
    """rev65: which of a paired layer's four passes each EP call runs in (step._ep_node_passes). The flex call at
    EP 8 x ETP 2 (MoEFlexTokenDispatcher over the TP x EP group, priced as the tokens' all-to-all and the etp
    all-gather / reduce-scatter): each pass runs one all-to-all and one etp collective; the forward dispatch
    gathers and the forward combine reduce-scatters (token_dispatcher.py dispatch_postprocess /
    combine_preprocess); a backward pass runs its forward's calls reversed, the gather's backward a
    reduce-scatter (megatron/core/tensor_parallel/mappings.py _GatherFromSequenceParallelRegion.backward), so the
    dispatch's backward reduce-scatters and the combine's backward gathers. Swapping them passed every test.
    HybridEP's routing-map gather (section 382), over the TP x EP group the flex dispatcher's buffer spans (section
    390: mapping.FLEX_GROUP), runs in the forward dispatch alone."""
    lay = make_layout(tp=2, ep=8, etp=2, dp=8, global_batch=64, ep_dispatcher="deepep", sequence_parallel=True)
    held: dict = {}
    for it in step_traffic(qwen, lay):
        if it["dim"] == "ep":
            name = "routing_map" if it["collective"] == "all_gather" and it["groups"] == FLEX_GROUP else "alltoall"
            for p in _ep_node_passes(it, fp8_dispatch=False):
                held.setdefault(p, []).append(it["collective"] if it["groups"] == "etp" else name)
    assert {p: sorted(c) for p, c in held.items()} == {
        "dispatch_fwd_s": ["all_gather", "alltoall", "routing_map"], "combine_fwd_s": ["alltoall", "reduce_scatter"],
        "dispatch_bwd_s": ["alltoall", "reduce_scatter"], "combine_bwd_s": ["all_gather", "alltoall"]}
