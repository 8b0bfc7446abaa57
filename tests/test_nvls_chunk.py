"""NVLSTree's chunk: NCCL's size rule and the bound its chunk steps put on the rate (topo.engine.nvls_chunk;
docs/calibration-findings.md section "33x. NVLSTree across racks").

The rule is NCCL's, read at NVIDIA/nccl v2.26.2-1 (the release of CoreWeave's GB200 runs), src/enqueue.cc, the
NVLS_TREE branch of the chunk computation: ``chunkSize = comm->nvlsChunkSize`` (NCCL_NVLS_CHUNKSIZE, 128 KiB,
src/transport/nvls.cc); ``maxChunkSize = comm->nNodes >= 4 ? 65536 : chunkSize``; then for (k, c) = (32, 256 KiB),
(16, 128 KiB), (4, 64 KiB), (1, 32 KiB): ``if nBytes < k x concurrentOps x chunkSize and chunkSize > c: chunkSize
= c``, ``concurrentOps = nChannels x nHeads``; NVLS channels 32 on Blackwell, 16 on Hopper (NVLS_NCHANNELS_SM100 /
_SM90, src/transport/nvls.cc).
"""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from topo import build_fabric, spec_from_dict
from topo.calibrate.setup import node_spec
from topo.engine.estimate import estimate
from topo.engine.nvls_chunk import nvls_tree_chunk_bytes, nvls_tree_chunk_rate_Bps
from topo.engine.profiles import profile_for

KIB, MIB, GIB = 2**10, 2**20, 2**30
GB200_OPS = 32 * 32  # 32 NVLS channels x 32 heads per NVL72 rack (NCCL_MAX_NVLS_ARITY)


def chunk(size, domains, ops=GB200_OPS):
    return nvls_tree_chunk_bytes(size, domains, ops, 128 * KIB, 64 * KIB, 4)


@pytest.mark.parametrize("size, domains, want", [
    (16 * GIB, 2, 128 * KIB),   # 2 racks: NCCL's 128 KiB
    (16 * GIB, 3, 128 * KIB),
    (16 * GIB, 4, 64 * KIB),    # from 4 nodes on: 64 KiB
    (16 * GIB, 20, 64 * KIB),   # CoreWeave's 20 racks
    (1 * GIB, 2, 128 * KIB),    # 1 GiB < 16 x 1024 x 128 KiB, but the chunk is not above 128 KiB
    (511 * MIB, 2, 64 * KIB),   # < 4 x 1024 x 128 KiB = 512 MiB
    (512 * MIB, 2, 128 * KIB),
    (63 * MIB, 20, 32 * KIB),   # < 1 x 1024 x 64 KiB = 64 MiB
    (64 * MIB, 20, 64 * KIB),
])
def test_chunk_follows_nccls_rule(size, domains, want):
    assert chunk(size, domains) == want


def test_small_operations_count_shrinks_the_thresholds():
    # a DGX H100 pair: 16 channels x 8 heads = 128 operations; 64 MiB is at 4 x 128 x 128 KiB, 16 MiB under it
    assert chunk(64 * MIB, 2, 16 * 8) == 128 * KIB
    assert chunk(63 * MIB, 2, 16 * 8) == 64 * KIB
    assert chunk(7 * MIB, 2, 16 * 8) == 32 * KIB  # < 1 x 128 x 64 KiB


def test_a_larger_chunk_setting_is_stepped_down():
    # NCCL_NVLS_CHUNKSIZE=1 MiB on 2 nodes: 256 KiB under 32 x ops x 1 MiB (32 GiB); the steps run in turn on the
    # new chunk, so 1 GiB also falls under 16 x ops x 256 KiB (4 GiB): 128 KiB
    assert nvls_tree_chunk_bytes(8 * GIB, 2, GB200_OPS, 1 * MIB, 1 * MIB, 4) == 256 * KIB
    assert nvls_tree_chunk_bytes(1 * GIB, 2, GB200_OPS, 1 * MIB, 1 * MIB, 4) == 128 * KIB
    assert nvls_tree_chunk_bytes(64 * GIB, 2, GB200_OPS, 1 * MIB, 1 * MIB, 4) == 1 * MIB


def _sched(heads, family="nvls_tree"):
    return SimpleNamespace(family=family, nvls_heads=heads)


def test_rate_is_steps_channels_heads_chunk_per_step():
    """The bound: NCCL_STEPS (8, src/include/device.h) x channels x heads x chunk per NVLSTree network step (NCCL's
    hwLat[NET][NVLSTree] Simple, 20.9 us at 2.30.7, src/graph/tuning.cc; InfiniBand's network scale 1). On 20
    racks: 8 x 1,024 x 64 KiB / 20.9 us."""
    prof = profile_for("blackwell", "infiniband_ndr")
    step = prof.net_hop("nvls_tree", "Simple")
    assert step == pytest.approx(20.9e-6) and prof.steps_in_flight == 8
    assert nvls_tree_chunk_rate_Bps(_sched(32), prof, 16 * GIB, 20) == pytest.approx(8 * GB200_OPS * 64 * KIB / step)
    one = replace(prof, steps_in_flight=1)  # every step paid in full, none overlapped
    assert nvls_tree_chunk_rate_Bps(_sched(32), one, 16 * GIB, 20) == pytest.approx(GB200_OPS * 64 * KIB / step)
    # 3 racks keep NCCL's 128 KiB: twice the bound of 4 racks (the rule, not a constant)
    r3 = nvls_tree_chunk_rate_Bps(_sched(32), prof, 16 * GIB, 3)
    r4 = nvls_tree_chunk_rate_Bps(_sched(32), prof, 16 * GIB, 4)
    assert r3 == pytest.approx(2 * r4)


def test_no_bound_without_the_rule_or_off_nvls_tree():
    prof = profile_for("blackwell", "infiniband_ndr")
    assert nvls_tree_chunk_rate_Bps(_sched(32, "tree"), prof, GIB, 20) == float("inf")
    assert nvls_tree_chunk_rate_Bps(_sched(32), prof, GIB, 1) == float("inf")
    assert nvls_tree_chunk_rate_Bps(_sched(32), replace(prof, nvls_chunk_bytes=0), GIB, 20) == float("inf")
    assert nvls_tree_chunk_rate_Bps(_sched(32), replace(prof, nvls_channels=0), GIB, 20) == float("inf")
    # the Ampere file has no NVLS: no channels, no bound
    assert profile_for("ampere", "infiniband_hdr").nvls_channels == 0


def h100_nodes(n):
    return build_fabric(spec_from_dict(node_spec("H100", 8, "400 Gb/s", "infiniband_ndr", n)))


def test_estimate_takes_the_bound_where_it_binds():
    """With one NVLS channel (NCCL_NVLS_NCHANNELS=1) and one step in flight on 4 DGX H100: 8 heads x 64 KiB per
    20.9 us step, 25.1 GB/s, far under the routed rate: the estimate's bandwidth part is (S + fill) / that rate,
    and 3 nodes (128 KiB chunks) run twice as fast."""
    prof = replace(profile_for("hopper", "infiniband_ndr"), nvls_channels=1, steps_in_flight=1)
    size = 16 * GIB
    res4 = estimate(h100_nodes(4), "all_reduce", [size], gpus=32, algorithm="nvls_tree", profile=prof).results[0]
    bound = 8 * 64 * KIB / prof.net_hop("nvls_tree", "Simple")
    fill = prof.pipeline_window_bytes * 8 / prof.reference_ranks_per_domain * (1 + 2)  # 4 domains: depth 2
    assert res4.bandwidth_s == pytest.approx((size + fill) / bound, rel=1e-9)
    res3 = estimate(h100_nodes(3), "all_reduce", [size], gpus=24, algorithm="nvls_tree", profile=prof).results[0]
    assert res4.bandwidth_s / res3.bandwidth_s == pytest.approx(2 * (size + fill) / (size + fill * 2 / 3), rel=1e-3)


def test_bundled_bound_leaves_20_racks_unchanged():
    """The finding of section 33x: on CoreWeave's 20 GB200 racks (NCCL 2.26.2: 64 KiB chunks) the chunk steps allow
    25.7 TB/s of message (3.2 TB/s with no step overlapped), over 8x the routed NVLink rate either way, so NCCL's
    64 KiB chunk, priced at NCCL's own step latency, does not explain the run's 1.8x (its 16 GiB busbw, 405.7
    GB/s, is half the 2-rack 810.4)."""
    f = build_fabric(spec_from_dict(node_spec("GB200", 4, "400 Gb/s", "infiniband_ndr", 360, gpus=4, domain=72)))
    prof = profile_for("blackwell", "infiniband_ndr")
    res = estimate(f, "all_reduce", [16 * GIB], gpus=1440, algorithm="nvls_tree", profile=prof).results[0]
    off = estimate(f, "all_reduce", [16 * GIB], gpus=1440, algorithm="nvls_tree",
                   profile=replace(prof, nvls_chunk_bytes=0)).results[0]
    assert res.time_s == pytest.approx(off.time_s, rel=1e-12)
    assert GB200_OPS * 64 * KIB / prof.net_hop("nvls_tree", "Simple") > 8 * res.algbw_GBps * 1e9
