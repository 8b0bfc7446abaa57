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


@pytest.mark.parametrize("bad", ["allreduc", "reduces", "gathers", "", "all__reduce__x", "scan"])
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


@pytest.mark.parametrize("collective, bytes_per_link, factor", [
    ("gather", 7 / 8, 7 / 8),     # the root receives S/p from each of the 7 others over its NVLink
    ("scatter", 7 / 8, 7 / 8),    # and sends as much
    ("reduce", 1.0, 1.0),         # NCCL's ring reduce: a chain towards the root, every edge carries S
])
def test_rooted_collectives_closed_forms_in_one_domain(collective, bytes_per_link, factor):
    """On one 8-GPU NVSwitch domain with the ideal profile: time = bytes on the root's link / 450 GB/s, and
    busbw as nccl-tests computes it (src/gather.cu, src/scatter.cu: (n-1)/n; PERFORMANCE.md: reduce 1)."""
    from topo import build_fabric, load_spec
    from topo.engine.estimate import estimate
    r = estimate(build_fabric(load_spec("dgx-h100-superpod")), collective, [2**30], gpus=8,
                 profile="ideal").results[0]
    assert r.time_s == pytest.approx(bytes_per_link * 2**30 / 450e9, rel=1e-12)
    assert r.busbw_GBps == pytest.approx(r.algbw_GBps * factor, rel=1e-12)
    assert r.root == 0 and r.redop == ("sum" if collective == "reduce" else "none")


def test_datatype_and_op_label_the_rows_as_nccl_tests():
    from topo import build_fabric, load_spec
    from topo.engine.estimate import estimate
    r = estimate(build_fabric(load_spec("dgx-h100-superpod")), "all_reduce", [1024], gpus=8)
    d = r.with_datatype("bfloat16", "max").results[0]
    assert (d.count, d.type, d.redop, d.time_s) == (512, "bfloat16", "max", r.results[0].time_s)
    with pytest.raises(ValueError, match="unknown data type 'float7'; allowed: int8"):
        r.with_datatype("float7")
