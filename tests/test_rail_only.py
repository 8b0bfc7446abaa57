"""Rail-only fabrics forward cross-rail traffic over NVLink (PXN): the forwarded bytes are modelled, on NVLink.

Wang et al., "How to Build Low-cost Networks for Large Language Models (without Sacrificing Performance)" (the
rail-only design): traffic between GPUs on different rails has no switch path and is forwarded inside the server
over NVLink to the GPU on the right rail. That forwarding is what this checks: its bytes load NVLink, and its hop
adds NVLink latency. With 450 GB/s of NVLink per GPU against a 50 GB/s NIC the forwarding never becomes the
bottleneck of an all-to-all, so rail-only and rail-optimized (where NCCL forwards the same way by default, PXN)
take the same time there; the rail-only fabric simply has no spine-level path for it.
"""

import pytest

from topo import build_fabric, load_spec
from topo.estimate import estimate


def nvlink_bytes(r, gpu, S):
    frame = r.link_loads(S)
    sel = frame[(frame["level"] == "nvlink") & (frame["link"] == gpu)]
    return dict(zip(sel["direction"], sel["bytes"]))


@pytest.mark.parametrize("kind, pxn", [("rail_only", None), ("rail_optimized", None), ("rail_optimized", False)])
def test_all_to_all_forwarded_bytes_on_nvlink(kind, pxn):
    # 256 GPUs = 32 servers of 8. GPU 0 sends S/256 to each of its 255 peers: 7 in its server (over NVLink),
    # 31 remote on its own rail (straight out of its NIC) and 217 remote on other rails, which PXN first moves
    # over NVLink to the server's GPU on the destination's rail. Up its NVLink: (7 + 217) S/256. Down: its own 7
    # plus what the 7 other GPUs of its server forward to the 31 remote GPUs of its rail: 7 * 31 = 217.
    f = build_fabric(load_spec("rail-only-h100-16k", [f"fabric.kind={kind}"] if kind != "rail_only" else []))
    S = 2**30
    r = estimate(f, "alltoall", S, gpus=256, pxn=pxn)
    got = nvlink_bytes(r, 0, S)
    if pxn is False:  # each GPU uses its own NIC; cross-rail traffic goes up to the spines instead
        assert got["up"] == pytest.approx(7 * S / 256) and got["down"] == pytest.approx(7 * S / 256)
    else:
        assert got["up"] == pytest.approx(224 * S / 256) and got["down"] == pytest.approx(224 * S / 256)


def test_forwarding_costs_time_only_where_nvlink_is_the_bottleneck():
    only = build_fabric(load_spec("rail-only-h100-16k"))
    opt = build_fabric(load_spec("rail-only-h100-16k", ["fabric.kind=rail_optimized"]))
    a = estimate(only, "alltoall", "1GiB", gpus=256).results[0]
    b = estimate(opt, "alltoall", "1GiB", gpus=256).results[0]
    assert a.bottleneck.level == "nic-leaf" and a.time_s == pytest.approx(b.time_s, rel=1e-6)
    # a server whose NVLink is as slow as its NICs (50 GB/s): now the forwarded bytes bind, and rail-only pays
    # for them against a rail-optimized fabric whose spines carry the cross-rail traffic (no PXN): NVLink carries
    # 224/256 S at NVLink's usable rate, the NIC 248/256 S at the network's.
    from topo.estimate import default_profile

    slow = ["scale_up.bandwidth_per_gpu=\"50 GB/s\""]
    only = build_fabric(load_spec("rail-only-h100-16k", slow))
    opt = build_fabric(load_spec("rail-only-h100-16k", slow + ["fabric.kind=rail_optimized"]))
    a = estimate(only, "alltoall", "1GiB", gpus=256).results[0]
    b = estimate(opt, "alltoall", "1GiB", gpus=256, pxn=False).results[0]
    prof = default_profile(only)
    assert a.bottleneck.level == "nvlink" and b.bottleneck.level == "nic-leaf"
    assert a.bandwidth_s / b.bandwidth_s == pytest.approx((224 / prof.nvlink_efficiency)
                                                          / (248 / prof.network_efficiency), rel=1e-9)
