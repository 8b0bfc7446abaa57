"""Collective names and nccl-tests' bus-bandwidth factors.

nccl-tests doc/PERFORMANCE.md (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
AllReduce busbw = algbw * 2(n-1)/n; ReduceScatter and AllGather (n-1)/n; Broadcast and Reduce 1; AlltoAll
(n-1)/n; SendRecv 1."""

import pytest

from topo import TopoError
from topo.engine.collectives import (ALGORITHMS, COLLECTIVES, NCCL_ALGORITHMS, busbw_factor, normalize_algorithm,
                              normalize_collective)


@pytest.mark.parametrize("n", [2, 3, 8, 64, 1000])
def test_busbw_factors(n):
    assert busbw_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
    for c in ("all_gather", "reduce_scatter", "alltoall"):
        assert busbw_factor(c, n) == pytest.approx((n - 1) / n)
    for c in ("broadcast", "sendrecv", "pipeline"):
        assert busbw_factor(c, n) == 1.0


def test_busbw_factor_examples():
    # 8 ranks: all-reduce 1.75, all-gather 0.875 (PERFORMANCE.md's formulas with n = 8)
    assert busbw_factor("all_reduce", 8) == 1.75
    assert busbw_factor("all_gather", 8) == 0.875


@pytest.mark.parametrize("given, want", [
    ("all_reduce", "all_reduce"), ("all-reduce", "all_reduce"), ("allreduce", "all_reduce"), ("AllReduce", "all_reduce"),
    ("ar", "all_reduce"), (" All-Gather ", "all_gather"), ("allgather", "all_gather"), ("ag", "all_gather"),
    ("reduce-scatter", "reduce_scatter"), ("reducescatter", "reduce_scatter"), ("rs", "reduce_scatter"),
    ("alltoall", "alltoall"), ("all-to-all", "alltoall"), ("all_to_all", "alltoall"), ("a2a", "alltoall"),
    ("bcast", "broadcast"), ("broadcast", "broadcast"), ("send-recv", "sendrecv"), ("p2p", "sendrecv"),
    ("pp", "pipeline"), ("pipeline", "pipeline")])
def test_names_normalize(given, want):
    assert normalize_collective(given) == want


@pytest.mark.parametrize("bad", ["allreduc", "reduce", "gather", "", "all__reduce__x", "scan"])
def test_unknown_collective_is_a_clean_error(bad):
    with pytest.raises(TopoError) as e:
        normalize_collective(bad)
    assert e.value.key == "collective"
    assert repr(bad) in e.value.message
    for c in COLLECTIVES:
        assert c in e.value.message


def test_algorithm_names():
    assert normalize_algorithm("all_reduce", "NCCL") == "auto"
    assert normalize_algorithm("all_reduce", "Rabenseifner") == "halving_doubling"
    assert normalize_algorithm("all_reduce", "double-binary-tree") == "tree"
    assert normalize_algorithm("all_reduce", "collnet") == "sharp"
    with pytest.raises(TopoError) as e:
        normalize_algorithm("all_gather", "tree")  # NCCL has no tree all-gather
    assert e.value.key == "algorithm" and "ring" in e.value.message


def test_every_collective_has_algorithms_and_auto_chooses_among_them():
    assert set(ALGORITHMS) == set(COLLECTIVES) == set(NCCL_ALGORITHMS)
    for c in COLLECTIVES:
        assert set(NCCL_ALGORITHMS[c]) <= set(ALGORITHMS[c])
        for a in ALGORITHMS[c]:
            assert normalize_algorithm(c, a) == a
