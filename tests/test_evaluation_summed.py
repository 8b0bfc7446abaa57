"""An evaluation kept with its loads summed over phases (``Evaluation.summed``), as ``CommEngine`` caches them.

The 100k-GPU layout search (benchmarks/bench_train.py) holds up to 64 fabrics' worth of routed evaluations; PAT's
all-gather keeps one loads vector per phase (13 at 100,352 GPUs) and its schedule's transfers, about 100 MiB per
evaluation: its peak was 3.5 GiB. Summed, the cache holds one vector per candidate (1.0 GiB peak), and every number
read from it is the same to the bit (docs/calibration-findings.md, section "23x. Search memory")."""

import gc
import tracemalloc

import numpy as np
import pytest

import topo
from topo.engine.estimate import default_profile, evaluate
from topo.training.comm import CommEngine

SIZES = (1000, 3 * 2**20 + 7, 2**30)


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("meta-llama3-24k"))


def _strided(n: int, groups: int = 8) -> np.ndarray:
    """``groups`` groups of ``n / groups`` GPUs, each across every pod (PAT: one phase per doubling)."""
    return np.arange(n).reshape(-1, groups).T.copy()


def _held_bytes(ev) -> int:
    """Bytes of the per-phase loads and of the schedule's transfers an evaluation holds."""
    out = 0
    for c in ev.costed.values():
        out += sum(p.res.nbytes + p.bytes.nbytes for p in c.loads.phases)
        for sp in c.schedule.phases:
            out += sum(a.nbytes for t in sp.parts for a in vars(t).values() if isinstance(a, np.ndarray))
    return out


@pytest.mark.parametrize("collective", ["all_gather", "all_reduce", "alltoall"])
def test_summed_reads_every_number_alike(fabric, collective):
    M = _strided(4096)
    ev = evaluate(fabric, collective, ranks=M.ravel(), groups=M.shape[0], group_layout="blocked",
                  rank_order="given")
    s = ev.summed()
    assert s.phases_summed and not ev.phases_summed and s.summed() is s
    for S in SIZES:
        t, name, proto, lat, bw = ev.time(S)
        assert tuple(s.time(S)) == (t, name, proto, lat, bw)
        assert s.bottleneck(S, name, t, lat, bw, proto) == ev.bottleneck(S, name, t, lat, bw, proto)
        assert np.array_equal(s.link_bytes(S, name), ev.link_bytes(S, name))
    for name, c in ev.costed.items():
        assert len(s.costed[name].loads.phases) == 1
        assert np.array_equal(s.costed[name].loads.total(), c.loads.total())  # what a traffic mix reads
        assert s.costed[name].phase_info == c.phase_info


def test_summed_holds_one_phase_of_memory(fabric):
    M = _strided(fabric.layout.num_gpus)
    ev = evaluate(fabric, "all_gather", ranks=M.ravel(), groups=M.shape[0], group_layout="blocked",
                  rank_order="given")
    assert len(ev.costed["pat"].loads.phases) == 12  # log2(3,072 ranks) rounded up: PAT's doublings
    s = ev.summed()
    nnz = sum(np.count_nonzero(c.loads.total()) for c in ev.costed.values())
    assert _held_bytes(s) == 12 * nnz  # an int32 resource id and a float64 of bytes per loaded resource
    assert _held_bytes(ev) > 5 * _held_bytes(s)


def test_summed_refuses_to_be_costed_again(fabric):
    M = _strided(1024)
    ev = evaluate(fabric, "all_gather", ranks=M.ravel(), groups=M.shape[0], group_layout="blocked",
                  rank_order="given")
    prof = default_profile(fabric)
    assert ev.with_profile(prof).time(2**20) == ev.time(2**20)
    with pytest.raises(ValueError, match="summed"):
        ev.summed().with_profile(prof)


def test_engine_keeps_its_evaluations_summed(fabric):
    # what the engine's cache retains per routed collective: the summed loads and the placement, not each phase
    eng = CommEngine(fabric)
    eng.router  # made before measuring: one per engine
    for table in ("_nic_table", "_nic_tables", "_aggregate_tables"):  # fast67: the router's index tables, filled
        getattr(eng.router.paths, table)  # once per router (4 MB at 100k GPUs), not per routed collective
    M = _strided(fabric.layout.num_gpus)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        eng.time("all_gather", M, 2**30)
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    (ev,) = eng._curves.values()
    assert ev.phases_summed
    nnz = sum(np.count_nonzero(c.loads.total()) for c in ev.costed.values())
    assert retained < 12 * nnz + 2 * M.nbytes + 2**18  # loads, the placement and the matrix's key, 256 KiB else
