"""A traffic mix's equal-share solve on one resource per distinct column of demands (fast68): the same finish
times and limiters as the solve on every resource, bit for bit, the lowest resource of a tie kept."""

import numpy as np

from topo.engine.contention import finish_times
from topo.engine.traffic import _distinct_columns, _members_as_users, _mix_finish_times


def _whole(U, work):
    """The solve on every resource (no column dropped nor merged): the reference."""
    return finish_times(_members_as_users(U, work), np.ones(U.shape[1]), "equal", max_rate=1.0)


def test_equal_columns_closed_form():
    # two members, each 0.75 of four alike resources: each gets 1 / (2 x 0.75) = 2/3 of its speed alone;
    # member 0 (1 s of work) ends at 1.5 s, member 1 has 2 - 1.5 x 2/3 = 1 s left alone at speed 1: ends at 2.5 s;
    # both held back first by resource 0, the lowest of the four
    U = np.full((2, 4), 0.75)
    finish, limiter = _mix_finish_times(U, np.array([1.0, 2.0]), "equal")
    assert np.allclose(finish, [1.5, 2.5], rtol=1e-12) and limiter.tolist() == [0, 0]
    assert _distinct_columns(U).tolist() == [0]


def test_distinct_columns_are_the_first_of_each_set_increasing():
    U = np.array([[0.5, 0.2, 0.5, 0.2, 0.0, 0.5], [0.1, 0.3, 0.1, 0.3, 0.0, 0.2]])
    assert _distinct_columns(U).tolist() == [0, 1, 4, 5]
    assert _distinct_columns(U[:, :1]).tolist() == [0] and _distinct_columns(U[:, :0]).tolist() == []


def test_many_alike_columns_solve_as_the_whole():
    # demands from a few values: columns repeat (the fabric's alike links) and members tie across unlike columns
    rng = np.random.default_rng(68)
    chosen = 0
    for _ in range(60):
        m, n = int(rng.integers(2, 6)), int(rng.integers(5, 40))
        base = rng.choice([0.0, 0.25, 0.5, 0.6, 0.75, 1.0], size=(m, int(rng.integers(1, 6))))
        U = base[:, rng.integers(0, base.shape[1], n)]  # each column one of a few, in any order
        work = rng.choice([0.5, 1.0, 2.0, 3.0], size=m)
        whole = _whole(U, work)
        part = _mix_finish_times(U, work, "equal")
        assert np.array_equal(part[0], whole[0]) and np.array_equal(part[1], whole[1])
        # a limiter with an alike column after it: the merged solve had to keep the lowest of the set
        chosen += any((U[:, r + 1:] == U[:, [r]]).all(axis=0).any() for r in whole[1][whole[1] >= 0])
    assert chosen > 30
