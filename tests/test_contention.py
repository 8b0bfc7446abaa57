"""Contention models on hand-made flows with hand-derived answers."""

import numpy as np
import pytest

from topo.contention import drain_time, flow_classes, max_min_makespan
from topo.maxmin import max_min_rates
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
