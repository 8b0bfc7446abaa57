"""The engine adapter's shortcut: reduce-scatter and all-gather share one routed curve.

If the engine ever times them differently, this fails and ``SAME_CURVE`` in topo/workload/comm.py must go."""

import numpy as np
import pytest

import topo
from topo.engine.estimate import estimate
from topo.training.comm import SAME_CURVE, CommEngine


@pytest.mark.parametrize("spec", ["dgx-h100-superpod", "meta-llama3-24k", "dgx-a100-superpod",
                                  "gb200-nvl72-superpod"])
def test_reduce_scatter_times_as_all_gather(spec):
    f = topo.build_fabric(topo.load_spec(spec))
    n = min(1024, f.layout.num_gpus)
    for M in (np.arange(n).reshape(-1, 8), np.arange(n).reshape(-1, 8).T.copy()):
        kw = dict(ranks=M.ravel(), groups=M.shape[0], group_layout="blocked", rank_order="given")
        sizes = [1000, 2**20, 3 * 2**28]
        ag = estimate(f, "all_gather", sizes, **kw).results
        rs = estimate(f, "reduce_scatter", sizes, **kw).results
        assert [a.time_s for a in ag] == pytest.approx([r.time_s for r in rs], rel=1e-12)
        assert [a.bottleneck.level for a in ag] == [r.bottleneck.level for r in rs]
    assert SAME_CURVE == {"reduce_scatter": "all_gather"}


def test_shared_curve_costs_one_engine_call():
    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    eng = CommEngine(f)
    M = np.arange(1024).reshape(-1, 8)
    a = eng.time("all_gather", M, 5e8)
    r = eng.time("reduce_scatter", M, 5e8)
    assert eng.engine_calls == 1 and a.time_s == r.time_s and r.collective == "reduce_scatter"


def test_adapter_times_equal_the_engine_exactly():
    # the adapter evaluates once and reads every size from it: the same numbers as a full estimate call
    f = topo.build_fabric(topo.load_spec("meta-llama3-24k"))
    M = np.arange(2048).reshape(8, -1).T.copy()  # 256 data-parallel groups of 8 GPUs across the 8 pods
    eng = CommEngine(f)
    for S in (3000.0, 7 * 2**20 + 5, 1.5 * 2**30):
        got = eng.time("all_reduce", M, S)
        want = estimate(f, "all_reduce", int(S), ranks=M.ravel(), groups=M.shape[0], group_layout="blocked",
                        rank_order="given").results[0]
        assert got.time_s == pytest.approx(want.time_s, rel=1e-9) and got.algorithm == want.algorithm
        assert got.level == want.bottleneck.level
    assert eng.engine_calls == 1
    frame = eng.link_loads("all_reduce", M, 2**30)
    assert frame["bytes"].sum() > 0 and frame.attrs["algorithm"] == got.algorithm


def test_every_evaluation_shares_one_router(monkeypatch):
    # a search caches up to 64 evaluations; each holding its own router cost ~24 MiB at 100k GPUs (1.7 GB of the
    # 100k DeepSeek-V3 search's 5.1 GB peak, benchmarks/bench_train.py). The engine makes one and passes it on,
    # and its times are those of estimate(), which makes a router of its own.
    import topo.engine.estimate as est

    f = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    made = []
    real = est.Router

    def counting(*a, **kw):
        made.append(1)
        return real(*a, **kw)

    eng = CommEngine(f)
    M1 = np.arange(256).reshape(-1, 8)
    M2 = np.arange(256).reshape(8, -1).T.copy()
    monkeypatch.setattr(est, "Router", counting)
    t = [eng.time(c, M, 2**26).time_s for c in ("all_reduce", "all_gather") for M in (M1, M2)]
    assert made == [] and eng.engine_calls == 4
    monkeypatch.undo()
    ref = [estimate(f, c, 2**26, ranks=M.ravel(), groups=M.shape[0], group_layout="blocked",
                    rank_order="given").results[0].time_s for c in ("all_reduce", "all_gather") for M in (M1, M2)]
    assert t == pytest.approx(ref, rel=1e-12)


def test_signature_keys_the_ids_not_their_width():
    # the routing cache's key digests 32-bit ids when they fit (a third of the time of 64-bit ones at 100k GPUs);
    # the same matrix in either width is one key, and ids past 2**31 are never folded onto others
    M = np.arange(4096).reshape(8, -1).T.copy()
    assert CommEngine.signature(M) == CommEngine.signature(M.astype(np.int32))
    assert CommEngine.signature(M) != CommEngine.signature(M[::-1].copy())
    assert CommEngine.signature(M) != CommEngine.signature(M.reshape(8, -1))
    big = np.array([[0, 2**32 + 1]])
    assert CommEngine.signature(big) != CommEngine.signature(np.array([[0, 1]]))
