"""NCCL's channel count at small sizes and the network proxy's time on the channels it adds
(topo.engine.cost.small_channels, proxy_channels_s; docs/calibration-findings.md, section "small33g").

The rule is NCCL's (NVIDIA/nccl src/enqueue.cc at master 5067397c, 2.30.7, ring/tree channel tuning): start from
comm->nChannels and drop one channel while nBytes < nc x nt x threadThreshold, down to one; nt = 512 (LL), 640
(LL128), 512 (Simple) (src/include/device.h), threadThreshold 8 / 8 / 64 bytes (src/include/comm.h), Ring LL's x
nRanks (src/graph/tuning.cc). The bundled NCCL file carries ``channel_min_bytes`` (for LL's rate on those channels,
section "33x"), but no bundled network file sets ``proxy_channel_messages``, so the proxy term is off (it did not
lower leave-one-setup-out at <= 64 KiB); these tests set NCCL's products and the switch on a profile themselves.
"""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from topo.engine.cost import proxy_channels_s, small_channels
from topo.engine.profiles import Profile
from topo.engine.schedule import LatencyCounts

NCCL_PER_CHANNEL = {"LL": 512 * 8, "LL128": 640 * 8, "Simple": 512 * 64}  # nt x threadThreshold, NCCL 2.30.7
US = 1e-6


def _profile(peer_us=4.5):
    rule = {"ring": dict(NCCL_PER_CHANNEL), "tree": dict(NCCL_PER_CHANNEL)}
    return replace(_bare(), channel_min_bytes=rule, peer_overhead_s=peer_us * US, proxy_channel_messages=True)


def _bare(**kw):
    return Profile(name="bare", nvlink_efficiency=1.0, network_efficiency=1.0, **kw)


def _sched(family, channels=32, inter_hops=2.0, multi_domain=True):
    return SimpleNamespace(family=family, channels=channels,
                           latency=LatencyCounts(family, inter_hops=inter_hops, multi_domain=multi_domain))


@pytest.mark.parametrize("size, want", [(8, 1), (4096, 1), (8191, 1), (8192, 2), (16384, 4), (65536, 16),
                                        (1 << 20, 32)])
def test_tree_ll_channels_follow_nccl(size, want):
    # tree LL: one channel per 4 KiB of message (512 threads x 8 bytes), capped by the communicator's 32
    assert small_channels("tree", "LL", size, 32, 16, _profile()) == want


def test_ring_ll_threshold_scales_with_ranks():
    # Ring LL's threshold is x nRanks: 16 ranks keep one channel up to 64 KiB, 4 ranks run 4 there
    assert small_channels("ring", "LL", 65535, 32, 16, _profile()) == 1
    assert small_channels("ring", "LL", 65536, 32, 4, _profile()) == 4


def test_simple_and_no_rule():
    assert small_channels("tree", "Simple", 65536, 16, 16, _profile()) == 2  # 32 KiB per channel
    assert small_channels("tree", "LL", 8, 16, 16, _bare()) == 16  # no rule: every channel
    assert small_channels("nvls", "Simple", 8, 16, 16, _profile()) == 16


def test_proxy_time_tree_and_ring():
    # tree, 2 network steps, 16 channels at 64 KiB LL: 15 added channels x 2 steps x one message (4.5 / 2 us)
    assert proxy_channels_s(_sched("tree"), _profile(), "LL", 65536, 16) == pytest.approx(15 * 2 * 2.25 * US)
    # a ring sends and receives at each step: two messages per added channel per step (4 ranks: 4 channels)
    assert proxy_channels_s(_sched("ring"), _profile(), "LL", 65536, 4) == pytest.approx(3 * 2 * 2 * 2.25 * US)
    # one channel: nothing beyond the per-step latency
    assert proxy_channels_s(_sched("tree"), _profile(), "LL", 4096, 16) == 0.0


def test_proxy_time_only_across_domains_and_for_ring_tree():
    assert proxy_channels_s(_sched("tree", multi_domain=False), _profile(), "LL", 65536, 16) == 0.0
    assert proxy_channels_s(_sched("nvls_tree"), _profile(), "LL", 65536, 16) == 0.0
    assert proxy_channels_s(_sched("tree"), _profile(peer_us=0.0), "LL", 65536, 16) == 0.0


def test_no_rule_no_proxy_time():
    assert proxy_channels_s(_sched("tree"), _bare(peer_overhead_s=4.5 * US), "LL", 65536, 16) == 0.0


def test_proxy_time_off_without_the_switch():
    # NCCL's rule alone (the bundled NCCL file) does not turn the proxy's cost on: a network file must
    assert proxy_channels_s(_sched("tree"), replace(_profile(), proxy_channel_messages=False), "LL", 65536, 16) == 0.0
