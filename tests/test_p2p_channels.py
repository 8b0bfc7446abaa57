"""Send/receive across the network runs on NCCL's p2p channels per network peer, each at a per-channel rate.

NCCL (src/graph/paths.cc ncclTopoGetNchannels and ncclTopoComputeP2pChannels, NCCL_NCHANNELS_PER_NET_PEER unset)
gives a network peer 2 channels, halved while 2 x ranks > 4 x p2pnChannels (down to 1), at least the NICs a GPU
drives, rounded up to a power of two. Measured (xxrjun/nccl-tests-cluster, data/measurements, H100 over 400G NDR,
the same hosts): send/receive reaches 43.8 GB/s busbw on 2 x 1 GPUs, 24.6 on 10 x 1 and 15.2 on 10 x 8.
"""

from __future__ import annotations

import csv

import pytest

from topo.errors import TopoError

from conftest import ROOT
from topo import build_fabric, spec_from_dict
from topo.engine.algorithms.p2p import net_peer_channels
from topo.calibrate.setup import node_spec
from topo.engine.estimate import estimate
from topo.engine.profiles import profile_for

EXTRA = ROOT / "data" / "measurements" / "extra_nccl_tests.csv"


def measured_busbw(setup: str, collective: str) -> dict[int, float]:
    rows = [r for r in csv.DictReader(EXTRA.open()) if r["setup_id"] == setup and r["collective"] == collective]
    assert rows, setup
    return {int(r["size_bytes"]): float(r["busbw_GBps"]) for r in rows}


@pytest.mark.parametrize("ranks, p2p_channels, nics_per_gpu, want", [
    (2, 2, 1, 2),     # 2 x 1 GPUs: 2 x 2 <= 4 x 2
    (10, 2, 1, 1),    # 10 x 1: 2 x 10 > 8, halved to 1
    (16, 16, 1, 2),   # 2 x 8 H100 with 8 NICs (16 channels): 32 <= 64
    (80, 16, 1, 1),   # 10 x 8: 160 > 64
    (16, 64, 4, 4),   # AWS p5, 4 EFA NICs per GPU: raised to the NICs it drives
    (1024, 16, 1, 1),
])
def test_channels_per_network_peer_follow_nccl(ranks, p2p_channels, nics_per_gpu, want):
    assert net_peer_channels(ranks, p2p_channels, nics_per_gpu) == want


# 10 x 8: 21.2 GB/s modelled against 15.2 (+39%; without the cap 46 GB/s, +200%): the ring shift's GPU 7 -> GPU 0
# pairs cross rails, which the one-leaf-group spec does not penalise
@pytest.mark.parametrize("setup, nodes, gpus, channels, tol", [("xxrjun_h100_2x1", 2, 1, 2, 0.30),
                                                               ("xxrjun_h100_10x1", 10, 1, 1, 0.30),
                                                               ("xxrjun_h100_10n", 10, 8, 1, 0.45)])
def test_sendrecv_across_nodes_is_capped_by_its_channels(setup, nodes, gpus, channels, tol):
    # infiniband_ndr.toml p2p_channel_GBps (fitted on these runs: in-sample) times the channels per peer, when
    # below the NIC; within ``tol`` of the measured busbw at 16 GiB (sendrecv: busbw = algbw)
    nics = 1 if gpus == 1 else 8
    fab = build_fabric(spec_from_dict(node_spec("H100", nics, "400 Gb/s", "infiniband_ndr", nodes, gpus)))
    per = profile_for("hopper", "infiniband_ndr").p2p_channel_Bps / 1e9
    r = estimate(fab, "sendrecv", [16 * 2**30], gpus=nodes * gpus).results[0]
    nic = 50.0 * profile_for("hopper", "infiniband_ndr").network_efficiency
    assert r.busbw_GBps == pytest.approx(min(channels * per, nic), rel=0.03)
    meas = measured_busbw(setup, "sendrecv")[16 * 2**30]
    assert abs(r.busbw_GBps / meas - 1) < tol, (r.busbw_GBps, meas)


def test_sendrecv_inside_a_server_has_no_network_peer_cap():
    fab = build_fabric(spec_from_dict(node_spec("H100", 8, "400 Gb/s", "infiniband_ndr", 1)))
    prof = profile_for("hopper", "infiniband_ndr")
    r = estimate(fab, "sendrecv", [2**30], gpus=8).results[0]
    assert r.busbw_GBps > 4 * prof.p2p_channel_Bps / 1e9  # NVLink, far above one channel's network rate


@pytest.fixture(scope="module")
def superpod():
    from topo import load_spec
    return build_fabric(load_spec("dgx-h100-superpod"))


def test_sendrecv_runs_nccls_protocols_ll_small_simple_large(superpod):
    """NCCL (src/enqueue.cc addP2pToPlan) runs send/receive on LL while one message is at most
    P2P_LL_THRESHOLD (16384) x the p2p channels per peer, on Simple above, and never on LL128."""
    r = estimate(superpod, "sendrecv", [1024, 8192, 65536, 2**20, 2**30, 2**33], gpus=1024)
    protos = [x.protocol for x in r.results]
    assert protos == ["LL", "LL", "Simple", "Simple", "Simple", "Simple"]  # 1 channel per peer at 1,024 ranks
    r16 = estimate(superpod, "sendrecv", [2**30], gpus=16)
    assert r16.results[0].protocol == "Simple"


def test_alltoall_protocol_reads_the_bytes_sent_to_one_peer(superpod):
    # 64 ranks x 4 KiB = 256 KiB per rank: each send of 4 KiB is under the LL threshold
    assert estimate(superpod, "alltoall", [64 * 4096], gpus=64).results[0].protocol == "LL"
    assert estimate(superpod, "alltoall", [64 * 2**20], gpus=64).results[0].protocol == "Simple"


def test_ll_carries_half_the_payload_under_a_per_channel_cap(superpod):
    """At 1,024 ranks the p2p channel cap binds: LL (half its line is flags) must still be half as fast."""
    got = {p: estimate(superpod, "sendrecv", [2**30], gpus=1024, protocol=p).results[0] for p in ("LL", "Simple")}
    assert got["LL"].bandwidth_s == pytest.approx(2 * got["Simple"].bandwidth_s, rel=1e-9)


@pytest.mark.parametrize("collective", ["sendrecv", "alltoall"])
def test_ll128_pinned_on_send_receive_is_refused(superpod, collective):
    # issue 30: NCCL never runs p2p on LL128 (src/enqueue.cc addP2pToPlan), so pinning it is an error, not a time
    with pytest.raises(TopoError) as err:
        estimate(superpod, collective, [2**20], gpus=16, protocol="LL128")
    assert err.value.key == "protocol" and "never LL128" in err.value.message
