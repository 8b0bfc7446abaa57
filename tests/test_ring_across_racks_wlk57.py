"""A ring reduce-scatter across NVL72 racks is NVLink-bound, not NIC-bound (wlk57, walk20's leftover: DeepSeek-V3's
DP reduce-scatter over 4,096 GB200 ranks in 64 racks read "nvlink" where a NIC time of 183 ms was expected).

NCCL runs one ring channel per NIC when the ring leaves its NVLink domain, up to MAXCHANNELS = 64
(topo/engine/algorithms/ring.py's module doc; NCCL src/include/device.h MAXCHANNELS): each channel carries 1/C of
the data and leaves each rack through its own NIC. With p ranks and S bytes every GPU's NVLink port carries the whole
``S (p - 1) / p`` (all C channels pass through it) and each NIC ``S (p - 1) / (p C)``. A GB200 rack has 72 GPUs and
72 NICs (ConnectX-7, 400 Gb/s each: the fabric spec), so C = 64: per NIC 1/64 of the NVLink bytes at 50 / 900 of
NVLink 5's rate (900 GB/s a direction), 18 / 64 of the NVLink time. The 183 ms was one NIC carrying everything, a
single channel: ``channels=1`` (NCCL_MAX_NCHANNELS=1) prices exactly that. Bandwidth part = bytes / (line rate x the
link class's efficiency x the protocol's) / the share moved after the pipeline fill, as the bottleneck reports."""

from __future__ import annotations

import pytest

import topo
from topo.engine.estimate import estimate

S = 8 * 2**30  # 8 GiB
P = 576  # 8 racks of 72
FABRIC = topo.build_fabric(topo.load_spec("gb200-nvl72-superpod", ["cluster.num_units=8"]))


def _run(channels=None):
    r = estimate(FABRIC, "reduce_scatter", [S], gpus=P, algorithm="ring", channels=channels)
    loads = r.link_loads().groupby("level")
    return r.results[0], loads["bytes"].max().to_dict(), loads["bandwidth_Bps"].max().to_dict()


def _bandwidth_s(b, rate_Bps):
    return b.bytes / (rate_Bps * b.class_efficiency * b.protocol_efficiency) / b.fill_share


def test_every_nic_carries_one_channel_and_nvlink_bounds_the_ring():
    res, bytes_, rate = _run()
    assert bytes_["nvlink"] == pytest.approx(S * (P - 1) / P, rel=1e-9)
    assert bytes_["nic-leaf"] == pytest.approx(S * (P - 1) / P / 64, rel=1e-9)  # 64 channels, one a NIC
    assert rate["nvlink"] == 900e9 and rate["nic-leaf"] == 50e9
    b = res.bottleneck
    assert b.level == "nvlink" and b.bytes == pytest.approx(S * (P - 1) / P, rel=1e-9)
    assert res.bandwidth_s == pytest.approx(_bandwidth_s(b, 900e9), rel=1e-9)
    assert res.bandwidth_s < 0.02  # about 13.6 ms, where one NIC for all would take 186 ms


def test_one_channel_puts_the_whole_ring_through_one_nic():
    """walk20's 183 ms: the same bytes through one 50 GB/s NIC, which only NCCL_MAX_NCHANNELS=1 runs."""
    res, bytes_, _ = _run(channels=1)
    b = res.bottleneck
    assert b.level == "nic-leaf" and bytes_["nic-leaf"] == pytest.approx(S * (P - 1) / P, rel=1e-9)
    assert res.bandwidth_s == pytest.approx(_bandwidth_s(b, 50e9), rel=1e-9)
    assert 0.18 < res.bandwidth_s < 0.19
