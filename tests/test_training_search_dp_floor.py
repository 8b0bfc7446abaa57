"""The layout search's DP floor (dpf56): before a layout's data-parallel collectives are routed, the refined bound
prices them at the engine's bound without routing (:meth:`topo.training.comm.CommEngine.time_floor`: each NCCL
candidate's schedule with its bandwidth part bounded from its transfers' ends and no routed latency, the least of
them) and lets the step's own DP overlap rule (:func:`topo.training.step.dp_floor_s`) say how much of them no window
can hide: each item's part that hides behind nothing, and the longest item's calls back to back beyond the step's
compute and other exposed seconds (its windows' most)."""

import math

import numpy as np
import pytest

import topo
from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.mapping import default_placement, map_layout
from topo.training.model import load_model
from topo.training.parallel import ParallelLayout
from topo.training.search import _Search
from topo.training.step import dp_floor_s, step_traffic

from search_bounds import bounded_layouts


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))


def test_the_engine_floor_is_at_or_below_the_routed_time(fabric):
    """The bound without routing never exceeds the routed time, for the DP collectives of three group shapes (in one
    node, one member a node, four a node) at a latency-bound and a bandwidth-bound size; a ring over 32 nodes
    at 64 KiB is mostly latency, which both count alike (NCCL's ring latency, no routed part in the bound)."""
    eng = CommEngine(fabric)
    ids = np.arange(256)
    shapes = [ids[:64].reshape(8, 8), ids.reshape(32, 8).T.copy(), ids.reshape(2, 32, 4).transpose(0, 2, 1)
              .reshape(8, 32)]
    close = 0
    for G in shapes:
        for coll in ("all_gather", "reduce_scatter", "all_reduce"):
            for S in (65536.0, 1 << 30):
                floor, routed = eng.time_floor(coll, G, S), eng.time(coll, G, S).time_s
                assert 0 < floor <= routed * (1 + 1e-12), (coll, G.shape, S)
                close += floor >= 0.9 * routed
    assert close >= 6


def test_dp_floor_closed_form():
    """A ZeRO-3 layout's DP items (a per-unit gather of each forward and backward and a per-unit reduction): each
    hides its first call of a micro-batch behind nothing (``m`` calls: the first unit's gather, the last unit's
    reduction), and the longest, ``calls x one`` back to back, is exposed beyond ``covered_s``; bucketed ZeRO-1
    items expose one call, and beyond ``covered_s`` all their calls but that one."""
    m3 = load_model("llama3-8b")
    lay = ParallelLayout(tp=8, dp=4, global_batch=16, micro_batch=1, dp_sharding="zero3")
    traffic = step_traffic(m3, lay)
    dp = [it for it in traffic if it["dim"] == "dp"]
    one = [0.001 * (i + 1) for i in range(len(dp))]
    m = lay.microbatches
    assert m == 4 and {it["phase"] for it in dp} == {"gather_unit", "reduce_unit"}
    least = sum(m * o for o in one)  # every item: one call of each micro-batch hides behind nothing
    longest = max(it["calls"] * o for it, o in zip(dp, one))
    assert dp_floor_s(traffic, lay, one, math.inf) == pytest.approx(least, rel=1e-12)
    assert dp_floor_s(traffic, lay, one, 0.5 * longest) == pytest.approx(least + 0.5 * longest, rel=1e-12)
    z1 = lay.model_copy(update={"dp_sharding": "zero1"})
    items = [it for it in step_traffic(m3, z1) if it["dim"] == "dp"]
    one1 = [0.002] * len(items)
    calls = max(it["calls"] for it in items)
    assert dp_floor_s(step_traffic(m3, z1), z1, one1, 0.0) == pytest.approx(
        0.002 * len(items) + 0.002 * (calls - 1), rel=1e-12)


def test_bound_and_dp_floor_stay_under_every_step_of_a_small_search(fabric):
    """Every layout of a small search with ZeRO-1 and ZeRO-3 (Llama 3 8B on 256 H100, a sequence a GPU, two rank
    orders, vpp 1 and 2), the search's engine left empty so no DP group is routed: the bound and its refinement
    with the DP floor are at or below the step. The floor raises most ZeRO-3 refinements, by up to most of the
    step's exposed DP."""
    m = load_model("llama3-8b")  # the search's engine stays empty (DP not routed): search_bounds.bounded_layouts
    kw = dict(cps=(1,), micro_batches=(1,), recompute=("none",), vpps=(1, 2), dp_sharding=("zero1", "zero3"),
              rank_orders=("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"))
    n = zero3 = raised = 0
    tightest = 0.0
    for _, lay, _, bound, refined, r in bounded_layouts(fabric, m, 256, **kw):
        n += 1
        assert bound <= refined <= r.step_time_s * (1 + 1e-12), lay.describe()
        if lay.dp_sharding == "zero3" and lay.dp > 1:
            zero3 += 1
            raised += refined > bound * (1 + 1e-9)
            tightest = max(tightest, (refined - bound) / r.breakdown_s["dp"])
    assert n >= 100 and zero3 >= 40 and raised >= 0.9 * zero3
    assert 0.5 <= tightest <= 1.0


def test_the_floor_counts_routed_dp_at_its_routed_time(fabric):
    """Once a layout's DP groups are routed, the floor reads their routed time, not the bound without routing."""
    m = load_model("llama3-8b")
    lay = ParallelLayout(tp=8, dp=32, global_batch=32, micro_batch=1, dp_sharding="zero3")
    lay, _ = default_placement(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    s = _Search(fabric, m, CommEngine(fabric), gpu, 5, dict(convention="6n", efficiency=None), None, None)
    mapping = map_layout(lay, fabric.spec.gpus_per_domain, fabric.layout.num_gpus)
    traffic = step_traffic(m, lay)
    before = s._dp_floor(lay, mapping, traffic, math.inf)
    for it in traffic:
        if it["dim"] == "dp":
            s.engine.time(it["collective"], mapping.groups(it["groups"]), it["size_bytes"])
    after = s._dp_floor(lay, mapping, traffic, math.inf)
    assert 0 < before <= after
