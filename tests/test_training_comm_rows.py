"""The engine adapter routes a group matrix with its first row kept and the others sorted by their first GPU
(topo/training/comm.py, "Row order"): the groups run at once and their loads add on shared links, and the engine
reads the first group alone for the communicator's shape, so the order of the other rows cannot change a time
(moving the first row does: on an NVL72 fabric a first group over other racks times differently). Checked here
against the engine's own estimate of the matrix as given (rows shuffled), to 1e-9, on three bundled fabrics
(meta-llama3-24k, dgx-h100-superpod, gb200-nvl72-superpod), for groups inside and across pods."""

import numpy as np
import pytest

import topo
from topo.engine.estimate import estimate
from topo.training.comm import CommEngine

SIZES = (3000.0, 7 * 2**20 + 5, 1.5 * 2**30)


def _matrices(n):
    rng = np.random.default_rng(7)
    data = np.arange(n).reshape(8, -1).T.copy()  # n/8 groups of 8 across the fabric (data-parallel like)
    expert = np.arange(n).reshape(-1, 16)  # groups of 16 neighbours (expert-parallel like)
    spread = np.arange(n).reshape(-1, 64).T.copy()  # 64 groups of n/64 spanning every pod
    return [M[rng.permutation(M.shape[0])] for M in (data, expert, spread)]


@pytest.mark.parametrize("spec", ["meta-llama3-24k", "dgx-h100-superpod", "gb200-nvl72-superpod"])
@pytest.mark.parametrize("collective", ["all_gather", "all_reduce", "alltoall"])
def test_shuffled_rows_time_as_the_engine_routes_them(spec, collective):
    f = topo.build_fabric(topo.load_spec(spec))
    n = min(2048, f.layout.num_gpus)
    eng = CommEngine(f)
    for M in _matrices(n):
        assert not np.array_equal(CommEngine.canonical(M), M)  # the shuffle is undone by the adapter
        want = estimate(f, collective, [int(S) for S in SIZES], ranks=M.ravel(), groups=M.shape[0],
                        group_layout="blocked", rank_order="given").results
        calls = eng.engine_calls
        for S, w in zip(SIZES, want):
            got = eng.time(collective, M, int(S))
            assert got.time_s == pytest.approx(w.time_s, rel=1e-9, abs=0.0)
            assert got.algorithm == w.algorithm
            assert got.level == (w.bottleneck.level if w.bottleneck else None)
        # the same groups in their sorted order cost no further routing
        again = eng.time(collective, CommEngine.canonical(M), int(SIZES[-1]))
        assert again.time_s == got.time_s and eng.engine_calls <= calls + 1


def test_canonical_keeps_the_groups():
    M = np.array([[8, 9, 10], [0, 2, 1], [4, 3, 5]])
    C = CommEngine.canonical(M)
    assert C.tolist() == [[8, 9, 10], [0, 2, 1], [4, 3, 5]]  # first row kept, each row's ring order kept
    M4 = np.array([[8, 9], [6, 7], [0, 2], [4, 3]])
    assert CommEngine.canonical(M4).tolist() == [[8, 9], [0, 2], [4, 3], [6, 7]]
    shared = np.array([[3, 1], [3, 2]])  # not disjoint: left as given
    assert CommEngine.canonical(shared).tolist() == shared.tolist()


class _AsGiven(CommEngine):
    """The adapter without the row-order reduction (every matrix routed as given)."""

    @staticmethod
    def canonical(groups):
        return np.ascontiguousarray(groups, dtype=np.int64)


@pytest.mark.parametrize("spec, overrides, gpus", [("dgx-h100-superpod", ["cluster.num_units=1"], 256),
                                                    ("meta-llama3-24k", [], 1024)])
def test_search_top_unchanged_with_fewer_routings(spec, overrides, gpus):
    from topo.training.model import load_model
    from topo.training.search import search_layouts

    f = topo.build_fabric(topo.load_spec(spec, overrides))
    m = load_model("qwen3-30b-a3b")
    kw = dict(top=10, keep=20, contention=False, cps=(1,), micro_batches=(1,), recompute=("full",),
              rank_orders=("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-dp-cp-ep-pp"))
    fast = search_layouts(f, m, gpus, gpus, engine=CommEngine(f), **kw)
    slow = search_layouts(f, m, gpus, gpus, engine=_AsGiven(f), **kw)
    assert [r.step_time_s for r in fast.ranked] == pytest.approx([r.step_time_s for r in slow.ranked], rel=1e-9)
    assert [r.layout for r in fast.ranked] == [r.layout for r in slow.ranked]
    # measured: 23 vs 29 and 26 vs 32 routings
    assert fast.engine_calls < slow.engine_calls, (fast.engine_calls, slow.engine_calls)
