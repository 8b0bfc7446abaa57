"""Max-min fair sharing is strictly slower than the bottleneck bound when a flow is held back elsewhere
(issue 7's hand-derived case)."""

import numpy as np
import pytest

from topo.engine.contention import drain_time, flow_classes, max_min_makespan
from conftest import routed_flows


flows = routed_flows


def test_max_min_is_slower_than_the_bound():
    # Capacities: link 0 = 1 B/s, link 1 = 2 B/s. Flows: A = 1 byte over [1], B = 2 bytes over [0, 1],
    # C = 1 byte over [1].
    # Bound ("equal"): link 0 carries 2 B at 1 B/s = 2.0 s; link 1 carries 1 + 2 + 1 = 4 B at 2 B/s = 2.0 s;
    # so 2.0 s.
    # Max-min (progressive filling): all three rates rise together; link 1 (3 flows, 2 B/s) saturates first at
    # 2/3 B/s each (link 0 would only saturate at 1 B/s). A and C end at 1 / (2/3) = 1.5 s; B has then moved
    # 1.5 * 2/3 = 1 B and has 1 B left, alone: link 0 caps it at 1 B/s, so it ends 1 s later: 2.5 s.
    r = flows([[1], [0, 1], [1]], [1, 2, 1])
    cap = np.array([1.0, 2.0])
    t_eq, busiest, loads = drain_time(r, cap, "equal")
    assert t_eq == pytest.approx(2.0)
    assert loads.tolist() == [2.0, 4.0]
    assert max_min_makespan(r, cap) == pytest.approx(2.5)
    t_mm, _, _ = drain_time(r, cap, "maxmin")
    assert t_mm == pytest.approx(2.5)
    assert t_mm > t_eq


def test_max_min_scales_linearly_and_never_beats_the_bound():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n, m = 8, 5
        paths = [sorted(rng.choice(m, size=rng.integers(1, 4), replace=False).tolist()) for _ in range(n)]
        sizes = rng.uniform(0.5, 3, n)
        cap = rng.uniform(0.5, 4, m)
        r = flows(paths, sizes)
        t_mm = max_min_makespan(r, cap)
        assert t_mm >= drain_time(r, cap, "equal")[0] * (1 - 1e-9)
        assert max_min_makespan(flows(paths, 3 * sizes), cap) == pytest.approx(3 * t_mm)


# --- the scalable solver (topo/maxmin.py) against a plain reference ------------------------------------------------

def _reference_makespan(paths, sizes, cap):
    """Max-min fair makespan the textbook way: every flow one by one, full progressive filling re-run from
    scratch at every completion (Bertsekas & Gallager 6.5.2). ``paths[i]`` lists flow i's resources."""
    sizes = np.asarray(sizes, float)
    remaining = sizes.copy()
    t = 0.0
    while np.any(remaining > 1e-12 * sizes):
        active = remaining > 1e-12 * sizes
        rate = np.zeros(len(paths))
        frozen = ~active
        cap_left = np.asarray(cap, float).copy()
        level = 0.0
        while not frozen.all():
            demand = np.zeros(len(cap))
            for i in np.flatnonzero(~frozen):
                for r in paths[i]:
                    demand[r] += 1
            used = demand > 0
            step = np.min(cap_left[used] / demand[used])
            level += step
            cap_left -= step * demand
            sat = used & (cap_left <= 1e-12 * np.asarray(cap))
            for i in np.flatnonzero(~frozen):
                if any(sat[r] for r in paths[i]):
                    rate[i], frozen[i] = level, True
        dt = np.min(remaining[active] / rate[active])
        t += dt
        remaining = np.where(active, remaining - rate * dt, remaining)
    return t


def test_incremental_refill_equals_full_refill_on_random_flows():
    """The solver re-fills only the flows at or above the level of the slowest that finished; the reference
    re-fills everything. Equal on random flows with unlike sizes (many completion events)."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        n, m = int(rng.integers(3, 14)), int(rng.integers(2, 7))
        paths = [sorted(rng.choice(m, size=rng.integers(1, min(m, 4) + 1), replace=False).tolist())
                 for _ in range(n)]
        sizes = rng.choice([1.0, 2.0, 3.5], n) if rng.random() < 0.5 else rng.uniform(0.2, 4, n)
        cap = rng.uniform(0.5, 4, m)
        assert max_min_makespan(flows(paths, sizes), cap) == pytest.approx(_reference_makespan(paths, sizes, cap),
                                                                            rel=1e-9)


def _classes_and_flows(rng, big_partial: bool):
    """Random flow classes with shared templates, and the same traffic flow by flow."""
    from topo.engine.flow_classes import FlowClasses

    C, T, m_direct, m_tpl = int(rng.integers(2, 9)), int(rng.integers(1, 4)), 5, 4
    members = rng.integers(1, 4, C)
    tpl_of = rng.integers(-1, T, C)
    cap = np.r_[rng.uniform(0.5, 3, m_direct), np.full(m_tpl, 1e6) if big_partial else rng.uniform(0.3, 3, m_tpl)]
    size = np.where(rng.random(C) < 0.5, 1.0, rng.uniform(0.5, 3, C))
    # template t: which of the (at most 3) members cross which template resource
    tpl_cross = {t: [sorted(rng.choice(m_tpl, size=rng.integers(1, 3), replace=False) + m_direct)
                     for _ in range(3)] for t in range(T)}
    if not big_partial:  # every member crosses the same template resources: they may bind
        tpl_cross = {t: [v[0]] * 3 for t, v in tpl_cross.items()}
    # a template's incidences must be the same for all its classes: give its classes one member count
    for t in range(T):
        cs = np.flatnonzero(tpl_of == t)
        members[cs] = members[cs[0]] if cs.size else 1
    t_id, t_res, t_a, t_part = [], [], [], []
    cls, res, a, paths, sizes = [], [], [], [], []
    for c in range(C):
        direct = sorted(rng.choice(m_direct, size=2, replace=False).tolist())
        for r in direct:
            cls.append(c), res.append(r), a.append(float(members[c]))
        for k in range(members[c]):
            own = list(tpl_cross[tpl_of[c]][k]) if tpl_of[c] >= 0 else []
            paths.append(direct + own)
            sizes.append(size[c])
    for t in range(T):
        cs = np.flatnonzero(tpl_of == t)
        if cs.size == 0:
            continue
        k = int(members[cs[0]])
        count = {}
        for j in range(k):
            for r in tpl_cross[t][j]:
                count[r] = count.get(r, 0) + 1
        for r, n_cross in count.items():
            t_id.append(t), t_res.append(r), t_a.append(float(n_cross)), t_part.append(n_cross < k)
    fc = FlowClasses(size.astype(float), members.astype(np.int64), np.array(cls), np.array(res), np.array(a),
                     tpl_of.astype(np.int64), np.array(t_id, dtype=np.int64), np.array(t_res, dtype=np.int64),
                     np.array(t_a), np.array(t_part, dtype=bool))
    return fc, paths, sizes, cap


def test_classes_with_templates_equal_the_flows_they_stand_for():
    """A class of k flows with a shared template gives the makespan of its k flows routed one by one, as long
    as the template's partial resources (crossed by some members only) do not bind."""
    from topo.engine.maxmin import max_min_makespan_classes

    rng = np.random.default_rng(11)
    for _ in range(30):
        fc, paths, sizes, cap = _classes_and_flows(rng, big_partial=True)
        assert fc.num_flows == len(paths)
        assert max_min_makespan_classes(fc, cap) == pytest.approx(_reference_makespan(paths, sizes, cap),
                                                                  rel=1e-9)
    for _ in range(30):  # shared template resources that all members cross, and that bind
        fc, paths, sizes, cap = _classes_and_flows(rng, big_partial=False)
        assert not fc.t_partial.any()
        assert max_min_makespan_classes(fc, cap) == pytest.approx(_reference_makespan(paths, sizes, cap),
                                                                  rel=1e-9)


def test_a_binding_partial_resource_is_refused_not_answered():
    """When a resource only some members of a class cross binds first, the members would move at different
    speeds: the class model cannot say, so it refuses (never a silently wrong answer)."""
    from topo.errors import TopoError
    from topo.engine.flow_classes import FlowClasses
    from topo.engine.maxmin import max_min_makespan_classes

    # class 0: 2 members over resource 0 (capacity 10); member 0 also crosses resource 1 (capacity 1), member 1
    # does not. Flow by flow: member 0 gets 1, member 1 gets 9.
    fc = FlowClasses(np.array([1.0]), np.array([2]), np.array([0]), np.array([0]), np.array([2.0]),
                     np.array([0]), np.array([0]), np.array([1]), np.array([1.0]), np.array([True]))
    with pytest.raises(TopoError, match="only some flows of a merged group"):
        max_min_makespan_classes(fc, np.array([10.0, 1.0]))
    # the same with resource 1 wide: both members at 5, done at 0.2 s
    assert max_min_makespan_classes(fc, np.array([10.0, 100.0])) == pytest.approx(0.2)


def test_batched_filling_on_a_larger_random_fabric():
    """Enough flows and resources that the solver takes runs of saturating resources at once (and has to stop
    a run where two of them share a flow): still the reference's answer."""
    rng = np.random.default_rng(3)
    for _ in range(3):
        n, m = 150, 60
        paths = [sorted(rng.choice(m, size=rng.integers(1, 5), replace=False).tolist()) for _ in range(n)]
        sizes = rng.choice([1.0, 1.5, 4.0], n)
        cap = rng.choice([1.0, 2.0, 3.0, 5.0], m) * rng.uniform(0.9, 1.1, m)
        assert max_min_makespan(flows(paths, sizes), cap) == pytest.approx(_reference_makespan(paths, sizes, cap),
                                                                            rel=1e-9)


def test_levels_taken_together_charge_each_flow_from_its_own_level():
    """Links 0 (1 B/s) and 1 (2 B/s) saturate one after the other and are taken in one run; flows A (over 0 and
    2) and B (over 1 and 2) freeze at 1 and 2 B/s. Link 2 (100 B/s) is then left with 100 - 1 - 2 = 97 B/s for
    flow C, which crosses only it (progressive filling by hand)."""
    from topo.engine.maxmin import max_min_rates

    r = flows([[0, 2], [1, 2], [2]], [1, 1, 1])
    assert max_min_rates(flow_classes(r), np.array([1.0, 2.0, 100.0])) == pytest.approx([1.0, 2.0, 97.0])
