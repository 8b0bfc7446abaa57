"""Max-min fair sharing is strictly slower than the bottleneck bound when a flow is held back elsewhere
(issue 7's hand-derived case)."""

import numpy as np
import pytest

from topo.contention import drain_time, max_min_makespan
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
