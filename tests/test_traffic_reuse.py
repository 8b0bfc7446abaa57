"""A traffic mix that reads its members' evaluations instead of routing them again, and the equal-share solver on
the resources that can bind only (issue 31: one training step over region-1m in < 2 s)."""

from dataclasses import asdict

import numpy as np
import pytest

from topo import build_fabric, load_spec
from topo.engine.contention import finish_times
from topo.engine.estimate import evaluate
from topo.engine.options import EstimateOptions as O
from topo.engine.route import Router
from topo.engine.traffic import Member, _members_as_users, _mix_finish_times, run_mix


@pytest.fixture(scope="module")
def pod():
    return build_fabric(load_spec("dgx-h100-superpod"))


def _members(pod):
    tp = np.arange(256).reshape(32, 8)  # eight GPUs of a server each: NVLink
    dp = np.arange(256).reshape(8, 32).T.copy()  # one GPU of each of 32 servers: the network
    return [Member("tp", "all_reduce", "256MiB", O(ranks=tp.ravel(), groups=32, group_layout="blocked",
                                                    rank_order="given")),
            Member("dp", "reduce_scatter", "1GiB", O(ranks=dp.ravel(), groups=8, group_layout="blocked",
                                                      rank_order="given")),
            Member("dp2", "all_gather", "512MiB", O(ranks=dp.ravel(), groups=8, group_layout="blocked",
                                                     rank_order="given"))]


@pytest.mark.parametrize("sharing", ["equal", "maxmin"])
def test_members_given_their_evaluations_mix_exactly_as_routed_again(pod, sharing):
    plain = run_mix(pod, _members(pod), sharing=sharing)
    router = Router(pod)
    given = [Member(m.name, m.collective, m.size, m.options, evaluation=evaluate(pod, m.collective, m.options,
                                                                                 router=router))
             for m in _members(pod)]
    reused = run_mix(pod, given, sharing=sharing)
    assert [asdict(m) for m in reused.members] == [asdict(m) for m in plain.members]
    assert reused.contested == plain.contested and reused.makespan_s == plain.makespan_s
    assert np.array_equal(reused.bytes_per_direction, plain.bytes_per_direction)
    assert any(m.slowdown > 1.0 for m in plain.members)  # the dp members do fight: the comparison means something


def test_an_evaluation_routed_otherwise_is_refused(pod):
    m = _members(pod)[1]
    hashed = evaluate(pod, m.collective, m.options, router=Router(pod, ecmp="hash"))
    with pytest.raises(ValueError, match="routed or costed otherwise"):
        run_mix(pod, [Member(m.name, m.collective, m.size, m.options, evaluation=hashed)])


def test_no_contested_links_are_looked_for_when_none_are_asked(pod):
    assert run_mix(pod, _members(pod)).contested  # the dp members over-ask the network links
    r = run_mix(pod, _members(pod), max_contested=0)
    assert r.contested == [] and [m.slowdown for m in r.members] == [m.slowdown for m in run_mix(
        pod, _members(pod)).members]


def test_equal_shares_solved_on_the_resources_that_can_bind_equal_the_whole_solve():
    # random demands, many resources summed below 1 (never over-asked at speeds <= 1) and some above
    rng = np.random.default_rng(7)
    for _ in range(20):
        U = rng.random((4, 300)) * rng.choice([0.1, 0.4, 1.0], size=(1, 300))
        U[rng.random(U.shape) < 0.3] = 0.0
        work = rng.random(4) + 0.1
        whole = finish_times(_members_as_users(U, work), np.ones(U.shape[1]), "equal", max_rate=1.0)
        part = _mix_finish_times(U, work, "equal")
        assert np.array_equal(part[0], whole[0]) and np.array_equal(part[1], whole[1])
        assert (U.sum(axis=0) <= 1).any() and (whole[1] >= 0).any()  # both kinds of resources were there


def test_a_training_steps_mix_routes_nothing_again(pod, monkeypatch):
    # the step's collectives are routed once, by its CommEngine; its traffic mix reads those evaluations
    import topo.engine.traffic as traffic
    from topo.training.model import load_model
    from topo.training.parallel import make_layout
    from topo.training.step import estimate_step

    lay = make_layout(tp=8, pp=4, dp=8, global_batch=512)
    model = load_model("llama3-70b")
    before = estimate_step(pod, model, lay)
    monkeypatch.setattr(traffic, "evaluate", lambda *a, **k: pytest.fail("the mix routed a member again"))
    after = estimate_step(pod, model, lay)
    assert after.contention and after.contention == before.contention
    assert after.step_time_s == before.step_time_s
