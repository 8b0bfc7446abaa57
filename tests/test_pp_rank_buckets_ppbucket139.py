"""Pipeline ranks after the first reduce and gather each model chunk as one collective, inside their cooldown
(warm-up) window (ppbucket139, findings 476).

Megatron-Core buckets only pipeline rank 0's first chunk: ``DistributedDataParallel`` sets ``bucket_size = None`` on
pipeline ranks > 0 (NVIDIA/Megatron-LM@5d745a79cd, 2023-09-25, "all other communication calls ... are not on the
critical path"; @14346b65 ``megatron/core/distributed/distributed_data_parallel.py`` line 105). Rank ``r``'s last
backward of each chunk ends ``r`` chunk backwards before rank 0's (1F1B's cooldown), and its first forward starts
``r`` chunk forwards after rank 0's (the warm-up); the optimizer's grad-norm all-reduce waits for every rank, so the
step's exposure is the largest rank's. With ``R`` one later chunk's collective, ``c`` a chunk's pass of one
micro-batch, ``g`` micro-batches a group, ``d = R - g c``, ``v`` chunks:

- rank ``r > 0`` without ``align_grad_reduce``: ``max(0, R + max(d, (v - 1) d, 0) - r c)``;
- with it (``grad_sync_func`` ``r`` virtual micro-batches late, ``schedules.py`` @14346b65 lines 1427-1437; chunk 0
  at the loop's end, lines 2045-2051), ``r <= g``: ``max(0, max(d, (v - 1) d, -r c) + R)``;
- rank 0 (``k0`` buckets of ``b``): ``max(max(d, (v - 1) d, -c) + k0 b, b)``; with equal bytes (``k0 b >= R``)
  it is never below a later rank's.
"""

from types import SimpleNamespace

import pytest

import topo
from topo.training.comm import CommEngine
from topo.training.dp_overlap import interleaved_gather_exposed_s, interleaved_reduce_exposed_s
from topo.training.gpus import gpu_compute
from topo.training.mapping import map_layout
from topo.training.memory import busiest_stage, stage_params
from topo.training.model import load_model
from topo.training.operators import rank_computes, stage_compute
from topo.training.parallel import dp_bucket_calls, make_layout
from topo.training.step import (_binding_rank, _dp_exposed, behind_window_s, pp_cooldowns, pp_rank_shares,
                                step_traffic)


@pytest.mark.parametrize("R", [0.5, 3.0])  # a later chunk's collective shorter / longer than a group's backward
@pytest.mark.parametrize("rank", [1, 2])
def test_a_later_ranks_reduction_outlasts_only_its_cooldown(R, rank):
    v, g, c = 6, 2, 1.0
    d = R - g * c
    got = interleaved_reduce_exposed_s(R, 99.0, 7, v, g, c, lag=rank)  # rank > 0: chunk 0's buckets not read
    assert got == pytest.approx(max(0.0, R + max(d, (v - 1) * d, 0.0) - rank * c), rel=1e-12)
    got_a = interleaved_reduce_exposed_s(R, 99.0, 7, v, g, c, aligned=True, lag=rank)
    assert got_a == pytest.approx(max(0.0, max(d, (v - 1) * d, -rank * c) + R), rel=1e-12)
    # by hand, R 0.5: every chunk hides; chunk 0 alone from the rank's end, r before rank 0's: 0.5 - r <= 0
    if R == 0.5:
        assert (got, got_a) == (0.0, 0.0)
    # without interleaving: the whole reduction from the rank's end, r stage backwards before rank 0's
    assert interleaved_reduce_exposed_s(R, 99.0, 7, 1, g, c, lag=rank) == pytest.approx(max(0.0, R - rank * c))
    # rank 0 with the same bytes in four buckets (4 b >= R: each bucket pays its latency) ends no earlier
    b = R / 4 * 1.01
    for aligned in (False, True):
        zero = interleaved_reduce_exposed_s(R, b, 4, v, g, c, aligned=aligned)
        assert zero >= interleaved_reduce_exposed_s(R, b, 4, v, g, c, aligned=aligned, lag=rank)


def test_a_later_ranks_gather_waits_only_past_its_warm_up():
    # by hand: R 3, c 1, g 2, 3 chunks, rank 1. Its first forward would start at 1 and chunk 0's one gather ends
    # at 3: it waits 2; chunk 1's first forward would start at 5, its gather (behind chunk 0's) ends at 6: 1 more;
    # chunk 2's, dispatched when rank 0's chunk 1 starts its forwards (5, the DP stream busy to 6), ends at 9 and
    # its first forward would start at 8: 1 more. 4 in all; rank 0 with 4 buckets of 0.75 waits 2, 2 and 1
    assert interleaved_gather_exposed_s(3.0, 0.75, 4, 3, 2, 1.0, lag=1) == pytest.approx(4.0, rel=1e-12)
    assert interleaved_gather_exposed_s(3.0, 0.75, 4, 3, 2, 1.0) == pytest.approx(5.0, rel=1e-12)
    # without interleaving: the whole gather past the rank's first forward, r stage forwards after rank 0's
    assert interleaved_gather_exposed_s(3.0, 0.75, 4, 1, 2, 1.0, lag=2) == pytest.approx(1.0, rel=1e-12)
    assert interleaved_gather_exposed_s(3.0, 0.75, 4, 1, 2, 1.0, lead_s=2.5, lag=2) == 0.0


def test_the_ranks_that_can_end_the_step():
    lay = make_layout(pp=4, dp=8, global_batch=64)

    def ranks(rows, kind=0):
        return [r for r, _, _ in pp_rank_shares(rows, kind, max(row[kind] for row in rows), lay)]
    # rank 0, then each later rank unless a rank between it and rank 0 holds no fewer of both kinds
    assert ranks([(4e9, 0), (5e9, 0), (3e9, 0), (6e9, 0)]) == [0, 1, 3]
    assert ranks([(4e9, 0), (5e9, 0), (5e9, 0), (2e9, 0)]) == [0, 1]
    # a rank with fewer dense but more expert parameters than rank 1 can still end last: both kinds list it
    moe = [(3e9, 1e9), (1e9, 5e9), (2e9, 4e9), (1e9, 5e9)]
    assert ranks(moe, 0) == ranks(moe, 1) == [0, 1, 2]
    (_, share, k), (_, _, one) = pp_rank_shares([(4e9, 0), (5e9, 0)], 0, 5e9, lay)
    assert share == 0.8 and k == dp_bucket_calls(lay, 4e9) and one == 1  # rank 0's own buckets; one a chunk
    # no pipeline, DualPipe (not Megatron-Core's 1F1B), or the collectives not overlapped: none
    assert pp_rank_shares([(4e9, 0)], 0, 4e9, make_layout(dp=8, global_batch=64)) == ()
    four = [(4e9, 0)] * 4
    assert pp_rank_shares(four, 0, 4e9, make_layout(pp=4, dp=8, global_batch=64, pipeline_schedule="dualpipe")) == ()
    assert pp_rank_shares(four, 0, 4e9, make_layout(pp=4, dp=8, global_batch=64, overlap_dp=False)) == ()


def test_the_step_takes_one_rank_for_all_its_dp_collectives():
    # the grad-norm all-reduce waits for the rank whose collectives, dense and experts together, end last: rank 1
    # here (2 + 5 = 7 against 1 + 3 and 3 + 0), not rank 2's dense beside rank 1's experts (3 + 5)
    assert _binding_rank({4: [1.0, 2.0, 3.0], 7: [3.0, 5.0, 0.0]}) == {4: 2.0, 7: 5.0}
    assert _binding_rank({}) == {}


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_a_pp4_layout_priced_on_rank_2(pod):
    """llama3-8b TP1 PP4 DP64 on DGX H100, ``Et*2|t*2|t*26|t*2L``: rank 2 holds 26 of the 32 layers (5.7e9
    parameters against rank 0's 0.96e9 with the embedding), so the step's DP traffic is rank 2's. Before, its
    gradients were priced as rank 0 buckets them, ending the step. As Megatron-Core runs it, rank 2 reduces and
    gathers in one collective each, 2 stage passes inside the step's ends; rank 0 buckets its own 0.96e9.

    At 256 tokens a micro-batch rank 2's gather outlasts its warm-up (two stage forwards) and binds; its reduction
    hides behind its cooldown (two stage backwards), so rank 0's last bucket is what the reduction exposes."""
    m = load_model("llama3-8b")
    lay = make_layout(tp=1, pp=4, dp=64, global_batch=512, seq_len=256, pipeline_layout="Et*2|t*2|t*26|t*2L")
    rows = stage_params(m, lay)
    assert busiest_stage(rows) == 2
    engine = CommEngine(pod)
    groups = map_layout(lay, pod.spec.gpus_per_domain, pod.layout.num_gpus).groups("dpcp")
    sc = stage_compute(m, lay, gpu_compute("H100"))
    t_f, t_b = sc.forward_s, sc.backward_s + sc.recompute_s
    items = [it for it in step_traffic(m, lay) if it["dim"] == "dp"]
    assert {it["phase"] for it in items} == {"reduce", "gather"}
    for item in items:
        window = t_f if item["phase"] == "gather" else t_b
        total = item["size_bytes"] * item["calls"]  # rank 2's
        assert item["calls"] == dp_bucket_calls(lay, rows[2][0])
        assert [r for r, _, _ in item["pp_ranks"]] == [0, 1, 2]
        k0 = dp_bucket_calls(lay, rows[0][0])
        b0 = engine.time(item["collective"], groups, total * rows[0][0] / rows[2][0] / k0).time_s
        rank0 = behind_window_s(k0 * b0, b0, window)  # rank 0's own buckets, ending the step
        whole2 = engine.time(item["collective"], groups, total).time_s
        rank2 = max(0.0, whole2 - 2 * window)  # rank 2's one collective, two stage passes inside the step
        whole1 = engine.time(item["collective"], groups, total * rows[1][0] / rows[2][0]).time_s
        rank1 = max(0.0, whole1 - window)
        one = engine.time(item["collective"], groups, item["size_bytes"]).time_s
        got = _dp_exposed(engine, item, groups, one, 1.0, t_f, t_b, sc.layers, lay)
        assert got == pytest.approx(max(rank0, rank1, rank2), rel=1e-12)
        old = behind_window_s(item["calls"] * one, one, window)  # rank 2's bytes in rank 0's buckets
        if item["phase"] == "gather":
            assert rank2 > rank0 > 0 and got == pytest.approx(rank2, rel=1e-12)
        else:
            assert rank2 == 0.0 and got == pytest.approx(b0, rel=1e-12)
        assert got != pytest.approx(old, rel=0.05)


def test_a_ranks_windows_are_the_passes_of_the_ranks_before_it():
    # rank r's first forward starts after one micro-batch's forward on ranks 0..r-1, its last backward ends their
    # backward (and recomputation) before rank 0's; counted in the pacing stage's passes
    rc = [SimpleNamespace(busiest=r, forward_s=f, backward_s=b, recompute_s=x)
          for r, f, b, x in ((2, 4.0, 8.0, 1.0), (0, 1.0, 2.0, 0.0), (3, 1.0, 2.0, 0.0), (1, 1.0, 2.0, 0.0))]
    pace = rc[0]
    assert pp_cooldowns(rc, pace) == ((0.0, 0.0), (1 / 4, 2 / 9), (2 / 4, 4 / 9), (6 / 4, 13 / 9))


def test_the_step_reports_its_dp_collectives_at_the_binding_rank(pod, monkeypatch):
    # the one-site step hands every bucketed DP item's per-rank exposures to _binding_rank, with each rank's own
    # windows (pp_cooldowns of every rank's compute)
    import topo.training.step as step
    seen, cool = [], []

    def spy(terms):
        seen.append(terms)
        return _binding_rank(terms)

    def spy_cool(ranks, sc):
        cool.append(len(ranks))
        return pp_cooldowns(ranks, sc)
    monkeypatch.setattr(step, "_binding_rank", spy)
    monkeypatch.setattr(step, "pp_cooldowns", spy_cool)
    m = load_model("llama3-8b")
    lay = make_layout(tp=1, pp=4, dp=64, global_batch=512, seq_len=256, pipeline_layout="Et*2|t*2|t*26|t*2L")
    r = step.estimate_step(pod, m, lay)
    assert seen and all(len(t) == 2 and all(len(x) == 3 for x in t.values()) for t in seen)  # reduce, gather
    assert cool and set(cool) == {4}
    assert all(c.exposed_s > 0 for c in r.comm if c.dim == "dp")


def test_rank_2s_reduction_binds_once_its_window_is_the_light_ranks_backward(pod):
    """The pp 4 layout above: rank 2's cooldown is ranks 0 and 1's backward (2 layers each, with the embedding on
    rank 0), not two of its own 26 layers', so its one reduction of 5.7e9 parameters outlasts it and binds."""
    m = load_model("llama3-8b")
    lay = make_layout(tp=1, pp=4, dp=64, global_batch=512, seq_len=256, pipeline_layout="Et*2|t*2|t*26|t*2L")
    gpu = gpu_compute("H100")
    ranks = sorted(rank_computes(m, lay, gpu), key=lambda rc: rc.busiest)
    sc = ranks[2]
    assert sc.backward_s > 5 * ranks[1].backward_s
    cool = pp_cooldowns(ranks, sc)
    engine = CommEngine(pod)
    groups = map_layout(lay, pod.spec.gpus_per_domain, pod.layout.num_gpus).groups("dpcp")
    (item,) = [it for it in step_traffic(m, lay) if it["dim"] == "dp" and it["phase"] == "reduce"]
    t_b = sc.backward_s + sc.recompute_s
    window2 = sum(rc.backward_s + rc.recompute_s for rc in ranks[:2])
    assert cool[2][1] * t_b == pytest.approx(window2, rel=1e-12)
    whole2 = engine.time(item["collective"], groups, item["size_bytes"] * item["calls"]).time_s
    one = engine.time(item["collective"], groups, item["size_bytes"]).time_s
    got = _dp_exposed(engine, item, groups, one, 1.0, sc.forward_s, t_b, sc.layers, lay, by_rank=True,
                      cooldowns=cool)
    assert got[2] == pytest.approx(whole2 - window2, rel=1e-12) and got[2] == max(got) > 0
    # with two of its own backwards as the window (equal stages) it hid whole
    assert _dp_exposed(engine, item, groups, one, 1.0, sc.forward_s, t_b, sc.layers, lay, by_rank=True)[2] == 0.0
