"""Every algorithm on uniform, non-blocking fabrics equals its closed form (Thakur, Rabenseifner, Gropp,
"Optimization of Collective Communication Operations in MPICH", IJHPCA 2005; the table in
../shared/design/cost-model.md), to floating-point precision, with the textbook ("ideal") profile.

Hand derivation of alpha and B for the single-switch fabric below: each of p servers has one GPU, one NIC of
400 Gb/s (B = 50e9 B/s; PCIe at 100 GB/s never binds) with 1 us NIC latency, under one switch of 0.5 us. A link's
latency is half of each end's, so a GPU-to-GPU path GPU-NIC-switch-NIC-GPU costs
0.5 + 0.75 + 0.75 + 0.5 = 2.5 us = alpha.
"""

import math

import pytest

from topo import build_fabric, spec_from_dict
from topo.engine.estimate import estimate

ALPHA = 2.5e-6
B = 50e9


def single_switch(p, sharp=False):
    return build_fabric(spec_from_dict({
        "name": "uniform", "gpu": "H100",
        "scale_up": {"gpus_per_domain": 1},
        "server": {"gpus": 1, "nics": 1, "nic_rate": "400 Gb/s", "nic_latency": "1 us",
                   "pcie_bandwidth": "100 GB/s"},
        "cluster": {"num_servers": p},
        "fabric": {"kind": "fat_tree", "tiers": [{"name": "switch", "radix": 64, "port_rate": "400 Gb/s",
                                                  "latency": "0.5 us", "sharp": sharp}]},
    }))


def t(fabric, coll, S, algo, **kw):
    r = estimate(fabric, coll, S, algorithm=algo, profile="ideal", **kw)
    return r.results[0].time_s


SIZES = [2**20, 2**30]
PS = [4, 8, 16]


def lg(p):
    return math.log2(p)


CASES = [
    # (collective, algorithm, closed form (p, S) -> seconds)
    ("all_reduce", "ring", lambda p, S: 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * S / B),
    ("all_reduce", "halving_doubling", lambda p, S: 2 * lg(p) * ALPHA + 2 * (p - 1) / p * S / B),
    ("all_reduce", "recursive_doubling", lambda p, S: lg(p) * ALPHA + lg(p) * S / B),
    ("all_gather", "ring", lambda p, S: (p - 1) * ALPHA + (p - 1) / p * S / B),
    ("reduce_scatter", "ring", lambda p, S: (p - 1) * ALPHA + (p - 1) / p * S / B),
    ("all_gather", "recursive_doubling", lambda p, S: lg(p) * ALPHA + (p - 1) / p * S / B),
    ("reduce_scatter", "recursive_halving", lambda p, S: lg(p) * ALPHA + (p - 1) / p * S / B),
    ("alltoall", "pairwise", lambda p, S: (p - 1) * ALPHA + (p - 1) / p * S / B),
    # all sends posted at once: one step, each rank's NIC carries (p-1)/p of its buffer
    ("alltoall", "direct", lambda p, S: ALPHA + (p - 1) / p * S / B),
]


@pytest.mark.parametrize("coll, algo, form", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("S", SIZES)
def test_closed_forms_single_switch(coll, algo, form, p, S):
    assert t(single_switch(p), coll, S, algo) == pytest.approx(form(p, S), rel=1e-12)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("k", [1, 4, 32])
def test_tree_pipelined_in_k_chunks(p, k):
    # Binary tree pipelined in k chunks: 2 (log2 p + k - 1) (alpha + S/(k B)); the double binary tree splits the
    # data over two trees so that the busiest link carries one chunk per step.
    S = 2**30
    d = math.floor(math.log2(p))
    assert t(single_switch(p), "all_reduce", S, "tree", chunks=k) == pytest.approx(
        2 * (d + k - 1) * (ALPHA + S / (k * B)), rel=1e-12)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("k", [1, 8, 64])
def test_broadcast_pipelined_chain(p, k):
    # Pipelined chain of k chunks: (p - 1 + k - 1) (alpha + S / (k B))
    S = 2**30
    for algo in ("ring", "chain"):
        assert t(single_switch(p), "broadcast", S, algo, chunks=k) == pytest.approx(
            (p - 1 + k - 1) * (ALPHA + S / (k * B)), rel=1e-12)


def test_point_to_point():
    S = 2**30
    # one pair, both directions at once: alpha + S/B
    assert t(single_switch(2), "sendrecv", S, "direct") == pytest.approx(ALPHA + S / B, rel=1e-12)
    # a pipeline boundary: ranks 0,1 send to 2,3 at once
    assert t(single_switch(4), "pipeline", S, "direct") == pytest.approx(ALPHA + S / B, rel=1e-12)


def test_in_network_reduction_single_switch():
    # SHARP: every rank sends S up and receives S reduced: alpha + S/B, whatever p
    for p in PS:
        assert t(single_switch(p, sharp=True), "all_reduce", 2**30, "sharp") == pytest.approx(
            ALPHA + 2**30 / B, rel=1e-12)


def two_level(g, D):
    """D NVLink domains of g GPUs (NVLink B1 = 100 GB/s, NVSwitch 2 us: alpha1 = 2 us), each GPU with its own
    400G NIC (B2 = 50 GB/s) on one rail-optimized leaf per rail (alpha2 = 2.5 us as above)."""
    return build_fabric(spec_from_dict({
        "name": "two-level", "gpu": "H100",
        "scale_up": {"gpus_per_domain": g, "bandwidth_per_gpu": "100 GB/s", "latency": "2 us"},
        "server": {"gpus": g, "nics": g, "nic_rate": "400 Gb/s", "nic_latency": "1 us",
                   "pcie_bandwidth": "100 GB/s"},
        "cluster": {"num_servers": D},
        "fabric": {"kind": "rail_optimized", "tiers": [{"name": "leaf", "radix": 64, "port_rate": "400 Gb/s",
                                                        "latency": "0.5 us"}]},
    }))


@pytest.mark.parametrize("g, D", [(2, 2), (4, 4), (8, 2), (8, 8)])
def test_hierarchical_all_reduce(g, D):
    a1, b1, a2, b2 = 2e-6, 100e9, 2.5e-6, 50e9
    S = 2**30
    expected = (2 * (g - 1) * a1 + 2 * (g - 1) / g * S / b1
                + 2 * (D - 1) * a2 + 2 * (D - 1) / D * (S / g) / b2)
    assert t(two_level(g, D), "all_reduce", S, "hierarchical") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("g", [2, 4, 8])
def test_nvls_and_ring_inside_one_domain(g):
    a1, b1, S = 2e-6, 100e9, 2**30
    f = two_level(g, 1)
    # in-switch reduction: every GPU moves S(1 + 1/g) each way, one switch traversal of latency
    assert t(f, "all_reduce", S, "nvls") == pytest.approx(a1 + (1 + 1 / g) * S / b1, rel=1e-12)
    assert t(f, "all_reduce", S, "ring") == pytest.approx(2 * (g - 1) * a1 + 2 * (g - 1) / g * S / b1, rel=1e-12)
