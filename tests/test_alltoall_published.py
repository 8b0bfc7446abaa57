"""NCCL's all-to-all on Hopper against published figures, at the sizes the expert all-to-all of the fine-grained
MoE rows sends (33-270 MB a rank, 2-12 MB a peer: docs/calibration-findings.md, the a2a44 section).

- NVIDIA's maintainers on the bound (NVIDIA/nccl-tests#130, sjeaugey, 2023-02-03): "On 2 nodes, 50% of the traffic
  is inter-node so you should see BusBW = 2x network bandwidth per GPU. As the number of nodes increases, it will go
  down to 1x the network bandwidth per GPU (general formula is N/(N-1)x the bandwidth per GPU, N being the number
  of nodes)"; NVIDIA/nccl-tests#267 (sjeaugey, 2024-11-19, six H100 nodes of 8 x 400G CX-7): "Alltoall cannot
  aggregate the bandwidth of multiple NICs, so the performance you should see is the performance of a single NIC";
  AddyLaddy in the same thread: "CX-7 NICs at NDR rate (400Gbps) should achieve up to 48-49GB/s per NIC".
- One H100 node, 4 GPUs (NVIDIA/nccl#2169, 2026-05-11, NCCL 2.28.3, nccl-tests 2.17.8): 524,288,000 bytes in
  1174.14 us out of place (busbw 334.90 GB/s), 1163.40 us in place.
- 64 H800 over 8 nodes (NVIDIA/nccl#1531, 2024-12-05): 8,388,608 bytes in 337.8 us out of place (busbw 24.44
  GB/s), 295.6 us in place. The issue does not give the nodes' NICs: 8 x 400G CX-7 InfiniBand, as DGX H100 and the
  H800 nodes of DeepSeek-V3's cluster (assumption).
"""

from __future__ import annotations

import pytest

from topo import build_fabric, spec_from_dict
from topo.engine.estimate import estimate

CX7_NDR_BUSBW_GBPS = 49.0  # per NIC, NVIDIA/nccl-tests#267 (AddyLaddy): "up to 48-49GB/s per NIC"


def _nodes(gpu: str, servers: int):
    """``servers`` HGX nodes of 8 GPUs, one 400G NDR NIC per GPU on a rail-optimized leaf."""
    return build_fabric(spec_from_dict({
        "name": "a2a", "gpu": gpu, "scale_up": {"gpus_per_domain": 8},
        "server": {"gpus": 8, "nics": 8, "nic_rate": "400 Gb/s"}, "cluster": {"num_servers": servers},
        "fabric": {"kind": "rail_optimized", "technology": "infiniband_ndr",
                   "tiers": [{"name": "leaf", "radix": 64, "port_rate": "400 Gb/s"}]}}))


def _one(fabric, size_bytes: float, gpus: int):
    return estimate(fabric, "alltoall", size_bytes, gpus=gpus).results[0]


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_alltoall_across_nodes_never_beats_one_nic_per_gpu(nodes):
    """busbw <= N/(N-1) x one NIC's 49 GB/s at every size from 1 MiB to 4 GiB (a rank's traffic to another node
    leaves by its own rail's NIC: PXN moves it over NVLink to the NIC of the destination's rail, it does not spread
    it over the node's NICs), and the bulk reaches at least 80% of it (nccl-tests#267: "the performance of a single
    NIC")."""
    f = _nodes("H100", nodes)
    bound = nodes / (nodes - 1) * CX7_NDR_BUSBW_GBPS
    busbw = {2**k: _one(f, 2**k, 8 * nodes).busbw_GBps for k in range(20, 33)}
    assert max(busbw.values()) <= bound, busbw
    assert busbw[2**30] >= 0.8 * bound, busbw


def test_alltoall_in_one_h100_node_against_nccl_2169():
    """4 H100 in one node, 524,288,000 bytes: 1174.14 us measured (NVIDIA/nccl#2169), within 10%."""
    t_us = _one(_nodes("H100", 1), 524_288_000, 4).time_s * 1e6
    assert t_us == pytest.approx(1174.14, rel=0.10)


def test_alltoall_over_eight_h800_nodes_not_faster_than_nccl_1531():
    """64 H800 over 8 nodes, 8 MiB (128 KiB a peer): 337.8 us measured out of place, 295.6 in place
    (NVIDIA/nccl#1531). topo is not faster than the faster of the two by more than 10%, nor slower than the slower
    by more than 30% (its 396 us: the whole 8 MiB at half speed while NCCL's buffers fill, and 21% of the time
    latency, as `topo estimate dgx-h100-superpod -c alltoall -g 64 --size 8MiB` explains it)."""
    t_us = _one(_nodes("H800", 8), 2**23, 64).time_s * 1e6
    assert 0.9 * 295.6 <= t_us <= 1.3 * 337.8, t_us
