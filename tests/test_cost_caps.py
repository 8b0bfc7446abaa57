"""NCCL's per-protocol bus-bandwidth caps, turned into an algorithm bandwidth as NCCL's tuning.cc does
(``ncclTopoTuneModel``): busBw x ratio, ratio = 0.5 for a tree all-reduce (each byte goes up and down the tree),
nRanks / nSteps for a ring (nSteps = 2 (p - 1) for an all-reduce, p - 1 for all-gather and reduce-scatter)."""

import dataclasses

import pytest

import topo
from topo.engine.estimate import default_profile, estimate

CAP = 10e9  # far below what the routed links give: the cap binds


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _capped(pod, family):
    prof = default_profile(pod)
    caps = dict(prof.busbw_cap_Bps)
    caps[family] = {"Simple": CAP}
    return dataclasses.replace(prof, busbw_cap_Bps=caps)


@pytest.mark.parametrize("gpus", [16, 64])
def test_a_tree_all_reduce_runs_at_half_its_bus_bandwidth_cap(pod, gpus):
    prof = _capped(pod, "tree")
    S = 2**34
    r = estimate(pod, "all_reduce", S, gpus=gpus, algorithm="tree", protocol="Simple", profile=prof).results[0]
    # the first W bytes go at half speed while the pipeline fills (8 ranks per domain: the profile's reference)
    assert pod.layout.gpus_per_domain == prof.reference_ranks_per_domain
    W = prof.pipeline_window_bytes
    assert r.bandwidth_s == pytest.approx((S + W) / (0.5 * CAP), rel=1e-12)


@pytest.mark.parametrize("collective,steps", [("all_reduce", lambda p: 2 * (p - 1)),
                                              ("all_gather", lambda p: p - 1)])
def test_a_ring_runs_at_ranks_over_steps_of_its_cap(pod, collective, steps):
    prof = _capped(pod, "ring")
    S, p = 2**34, 64
    r = estimate(pod, collective, S, gpus=p, algorithm="ring", protocol="Simple", profile=prof).results[0]
    W = prof.pipeline_window_bytes
    assert r.bandwidth_s == pytest.approx((S + W) / (CAP * p / steps(p)), rel=1e-12)

