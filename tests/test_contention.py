"""Contention models on hand-made flows with hand-derived answers."""

import numpy as np
import pytest

from topo.engine.contention import drain_time, flow_classes, max_min_makespan
from topo.engine.maxmin import max_min_rates
from conftest import routed_flows


flows = routed_flows


def test_textbook_max_min_rates():
    # Link 0 (capacity 1) carries A; link 1 (capacity 10) carries A and B. A is held to 1 by link 0, and max-min
    # gives B the rest of link 1: 9 (Bertsekas & Gallager, Data Networks, progressive filling).
    r = flows([[0, 1], [1]], [1, 1])
    cap = np.array([1.0, 10.0])
    rates = max_min_rates(flow_classes(r), cap)
    assert rates == pytest.approx([1.0, 9.0])
    # With B of 18 bytes: A ends at t=1 (1 byte at 1/s), B has moved 9, then runs alone at 10/s: 0.9 s more.
    r = flows([[0, 1], [1]], [1, 18])
    assert max_min_makespan(r, cap) == pytest.approx(1.9)
    # which here is also the busiest link's drain time: 19 bytes on link 1 at 10/s
    t, busiest, loads = drain_time(r, cap, "equal")
    assert (t, busiest) == (pytest.approx(1.9), 1) and loads.tolist() == [1.0, 19.0]


def test_equal_share_is_the_bound():
    r = flows([[0], [0], [1]], [4, 4, 1])
    cap = np.array([2.0, 1.0])
    assert drain_time(r, cap, "equal")[0] == pytest.approx(4.0)  # 8 bytes on a 2/s link
    assert drain_time(r, cap, "maxmin")[0] == pytest.approx(4.0)


def test_a_failed_link_is_never_the_bottleneck():
    # Resource 0 is a failed link (capacity 0, no bytes); flows use 1 (capacity 2) and 2 (capacity 1).
    # 0/0 must not win the argmax: the bottleneck is resource 2 (3 bytes at 1/s = 3 s) under both models.
    r = flows([[1, 2], [2]], [2, 1])
    cap = np.array([0.0, 2.0, 1.0])
    for sharing in ("equal", "maxmin"):
        with np.errstate(all="raise"):
            t, busiest, _ = drain_time(r, cap, sharing)
        assert (t, busiest) == (pytest.approx(3.0), 2)


def test_maxmin_with_a_failed_spine_names_a_working_link():
    # estimate with --fail and max-min sharing: the bottleneck is the busiest working link, as with equal sharing
    # (it used to be the failed leaf -> spine0 link, 0 bytes and a NaN utilization)
    import warnings

    from small_fabrics import small_fabric
    from topo.engine.estimate import estimate

    broken = small_fabric("rail_optimized-2").with_failures("spine0")
    got = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for sharing in ("equal", "maxmin"):
            got[sharing] = estimate(broken, "alltoall", "1G", sharing=sharing, ecmp="hash").results[0]
    b = got["maxmin"].bottleneck
    assert b.dst != "spine0" and b.bytes > 0 and 0 < b.utilization <= 1
    assert b == got["equal"].bottleneck and got["maxmin"].time_s == pytest.approx(got["equal"].time_s)


def test_equal_shares_count_a_users_parts_on_one_resource_once():
    # user 0 crosses resource 0 in two parts (0.5 + 0.5 per unit), user 1 once: two users, not three
    from topo.engine.contention import rates
    from topo.engine.flow_classes import FlowClasses

    users = FlowClasses(np.ones(2), np.ones(2, dtype=np.int64), np.array([0, 0, 1]), np.array([0, 0, 0]),
                        np.array([0.5, 0.5, 1.0]))
    x, lim = rates(users, np.array([2.0]), "equal")
    assert x == pytest.approx([1.0, 1.0]) and lim.tolist() == [0, 0]
    x, _ = rates(users, np.array([2.0]), "maxmin")
    assert x == pytest.approx([1.0, 1.0])
