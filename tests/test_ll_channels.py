"""LL's rate on the channels NCCL runs at small sizes (topo.engine.cost.ll_channels_rate_Bps; docs/calibration-
findings.md, section "33x").

NCCL runs a small ring or tree collective on fewer channels (NVIDIA/nccl src/enqueue.cc topoGetAlgoInfo at master
5067397c, 2.30.7: drop one channel while nBytes < nc x nThreads x threadThreshold; LL 512 threads x 8 bytes, ring
LL's x nRanks, src/graph/tuning.cc), and each channel moves LL lines at most at the profile's
``ll_channel_busbw_Bps``; the bus bandwidth becomes an algorithm bandwidth as tuning.cc converts it (ring all-gather
x p / (p - 1), ring all-reduce x p / (2 (p - 1)), tree x 0.5).
"""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from topo.engine.cost import bus_to_algorithm, ll_channels_rate_Bps, ll_threads
from topo.engine.profiles import Profile, profile_for

GB = 1e9
LL_PER_CHANNEL = 512 * 8  # NCCL_LL_MAX_NTHREADS x NCCL_LL_THREAD_THRESHOLD


def _profile(per_channel_GBps=20.0, channels=16):
    rule = {"ring": {"LL": LL_PER_CHANNEL}, "tree": {"LL": LL_PER_CHANNEL}}
    return Profile(name="bare", nvlink_efficiency=1.0, network_efficiency=1.0, channels=channels,
                   channel_min_bytes=rule, ll_channel_busbw_Bps=per_channel_GBps * GB)


def _sched(family, pinned=None):
    return SimpleNamespace(family=family, pinned_channels=pinned)


def test_ring_all_gather_on_16_ranks_runs_one_channel_to_64_kib():
    # 16 ranks: one channel while nBytes < 2 x 512 x 8 x 16 = 128 KiB (nc = 1 at 32 and 64 KiB), then 2 at 128 KiB;
    # at 32 KiB the channel runs 256 of its 512 threads (32 KiB < 1 x 512 x 128 B), so half its rate
    one = 20 * GB * 16 / 15
    assert ll_channels_rate_Bps(_sched("ring"), _profile(), "LL", 32768, "all_gather", 16) == pytest.approx(one / 2)
    assert ll_channels_rate_Bps(_sched("ring"), _profile(), "LL", 65536, "all_gather", 16) == pytest.approx(one)
    assert ll_channels_rate_Bps(_sched("ring"), _profile(), "LL", 131072, "all_gather", 16) == pytest.approx(2 * one)
    # from 16 x 64 KiB = 1 MiB every one of the 16 channels runs
    assert ll_channels_rate_Bps(_sched("ring"), _profile(), "LL", 1 << 20, "all_gather", 16) == pytest.approx(16 * one)


@pytest.mark.parametrize("family, size, ranks, want", [
    ("ring", 1024, 16, 96),  # 512 -> 256 -> 128 -> 64 (1 KiB < nt x 8 x 16 B), then at least 3 warps
    ("ring", 8192, 16, 96),  # 8 KiB < 128 x 128 B: 64, then 3 warps
    ("ring", 16384, 16, 128),  # 16 KiB = 128 x 128 B: stops at 128
    ("ring", 65536, 16, 512),
    ("tree", 1024, 16, 128),  # tree: 8 B per thread, no x ranks
    ("tree", 4096, 16, 512),
])
def test_ll_threads_follow_nccl(family, size, ranks, want):
    nc = 1 if size <= 65536 and family == "ring" else max(1, size // LL_PER_CHANNEL)
    assert ll_threads(family, size, nc, ranks, _profile()) == want


def test_tree_all_reduce_one_channel_per_4_kib():
    # tree LL: 16 KiB runs 4 channels; a tree's algorithm bandwidth is half its bus bandwidth
    assert ll_channels_rate_Bps(_sched("tree"), _profile(), "LL", 16384, "all_reduce", 16) == pytest.approx(
        4 * 20 * GB * 0.5)
    # a pinned channel count is where NCCL starts: 4 pinned channels stay 4 at 1 MiB
    assert ll_channels_rate_Bps(_sched("tree", pinned=4), _profile(), "LL", 1 << 20, "all_reduce", 16) == \
        pytest.approx(4 * 20 * GB * 0.5)


def test_only_ll_ring_tree_and_only_with_rule_and_rate():
    assert ll_channels_rate_Bps(_sched("ring"), _profile(), "Simple", 1024, "all_gather", 16) == float("inf")
    assert ll_channels_rate_Bps(_sched("nvls"), _profile(), "LL", 1024, "all_reduce", 16) == float("inf")
    assert ll_channels_rate_Bps(_sched("ring"), replace(_profile(), channel_min_bytes={}), "LL", 1024, "all_gather",
                                16) == float("inf")
    assert ll_channels_rate_Bps(_sched("ring"), _profile(per_channel_GBps=float("inf")), "LL", 1024, "all_gather",
                                16) == float("inf")


def test_bus_to_algorithm_as_nccl():
    assert bus_to_algorithm("ring", "all_gather", 16) == pytest.approx(16 / 15)
    assert bus_to_algorithm("ring", "all_reduce", 16) == pytest.approx(16 / 30)
    assert bus_to_algorithm("tree", "all_reduce", 16) == 0.5


def test_bundled_profile_carries_the_rule_but_no_rate():
    # NCCL's rule is bundled; the per-channel rate is not (section 33x: it worsened the family-out and held-out
    # figures), so the bundled output is unchanged, and the proxy's per-channel cost stays off
    prof = profile_for("hopper", "infiniband_ndr")
    assert prof.channel_min_bytes["ring"]["LL"] == LL_PER_CHANNEL
    assert prof.channel_min_bytes["tree"]["Simple"] == 512 * 64
    assert prof.ll_max_threads == 512
    assert prof.ll_channel_busbw_Bps == float("inf")
    assert not prof.proxy_channel_messages


def test_a_two_node_ring_all_gather_moves_on_one_channel_at_32_kib():
    # 2 x 8 H100 on NDR, ring LL all-gather of 32 KiB: one channel (16 ranks x 4 KiB each = 64 KiB per channel), so
    # the bandwidth part is the message, doubled by the pipeline window (topo.engine.profiles: the first min(S, W)
    # bytes at half speed), over half (256 of 512 threads) of one channel's LL bus bandwidth x 16/15; NCCL's
    # two-node LL cap (39 GB/s) is above
    import topo
    from topo.calibrate.setup import node_spec

    fab = topo.build_fabric(topo.spec_from_dict(node_spec("H100", 8, "400 Gb/s", "infiniband_ndr", 2)))
    prof = replace(profile_for("hopper", "infiniband_ndr"), ll_channel_busbw_Bps=20 * GB)
    size = 32768
    r = topo.estimate(fab, "all_gather", size, algorithm="ring", protocol="LL", profile=prof).results[0]
    assert r.bandwidth_s == pytest.approx(2 * size / (prof.ll_channel_busbw_Bps / 2 * 16 / 15), rel=1e-6)
    # at 1 MiB all 16 channels run and the per-channel limit is far above NCCL's cap: the cap rules again
    big = topo.estimate(fab, "all_gather", 1 << 20, algorithm="ring", protocol="LL", profile=prof).results[0]
    # the bundled profile (no per-channel rate): NCCL's cap alone at 32 KiB too
    plain = topo.estimate(fab, "all_gather", size, algorithm="ring", protocol="LL").results[0]
    assert plain.bandwidth_s == pytest.approx(2 * size / (prof.busbw_cap("ring", "LL", 2) * 16 / 15), rel=1e-6)
    assert prof.busbw_cap("ring", "LL", 2) < 16 * prof.ll_channel_busbw_Bps
    assert big.bandwidth_s == pytest.approx(2 * (1 << 20) / (prof.busbw_cap("ring", "LL", 2) * 16 / 15), rel=1e-6)
