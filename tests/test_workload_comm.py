"""The engine adapter's shortcut: reduce-scatter and all-gather share one routed curve.

If the engine ever times them differently, this fails and ``SAME_CURVE`` in topo/workload/comm.py must go."""

import numpy as np
import pytest

import topo
from topo.estimate import estimate
from topo.workload.comm import SAME_CURVE, CommEngine


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
