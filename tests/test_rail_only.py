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
from topo.engine.estimate import estimate


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
    from topo.engine.estimate import default_profile

    slow = ["scale_up.bandwidth_per_gpu=\"50 GB/s\""]
    only = build_fabric(load_spec("rail-only-h100-16k", slow))
    opt = build_fabric(load_spec("rail-only-h100-16k", slow + ["fabric.kind=rail_optimized"]))
    a = estimate(only, "alltoall", "1GiB", gpus=256).results[0]
    b = estimate(opt, "alltoall", "1GiB", gpus=256, pxn=False).results[0]
    prof = default_profile(only)
    assert a.bottleneck.level == "nvlink" and b.bottleneck.level == "nic-leaf"
    assert a.bandwidth_s / b.bandwidth_s == pytest.approx((224 / prof.nvlink_efficiency)
                                                          / (248 / prof.network_efficiency), rel=1e-9)


@pytest.mark.parametrize("collective, algorithm", [("all_reduce", "ring"), ("all_reduce", "tree"),
                                                   ("alltoall", "auto")])
def test_a_failed_nic_in_a_rail_only_fabric_moves_both_ends_to_a_working_rail(collective, algorithm):
    # Review finding: with one NIC failed, a rail-only fabric refused every collective that left a server ("GPU 0
    # cannot reach GPU 4 in a rail-only fabric ... (pxn=True)", even with PXN on; `topo plan rail-only-h100-16k`
    # failed on its failed-NIC figure): the stand-in NIC sat on another rail than the receiving NIC. Both ends now
    # move to a rail that works at both servers (NVLink to and from it), which takes what rail-optimized takes:
    # there the failed NIC's stand-in also carries its traffic, and the spine is not the bottleneck.
    from small_fabrics import small_fabric
    from topo.engine.estimate import estimate

    # The tree differs (nccl51): in rail-optimized the other servers keep sending channel 0 to server 0's stand-in
    # nic0.1 from their own nic<s>.0 (NCCL picks a sender's NIC from its own server's graph, Paths.endpoints), and
    # the spines cross the rails; rail-only has no spine, so the two servers joined to server 0 in channel 0's
    # trees (4 channels x 2 trees: S / 8 an edge each way; a NIC sends on 4 edges) send it on their rail-1 NIC
    # too: 5 edges, 5 S / 8 against 4 S / 8, the bandwidth part 5/4 (topo/engine/paths.py Paths._common_rail).
    r = {kind: estimate(small_fabric(f"{kind}-2").with_failures("nic0.0"), collective, "1G", algorithm=algorithm,
                        profile="ideal").results[0] for kind in ("rail_only", "rail_optimized")}
    ratio = 5 / 4 if algorithm == "tree" else 1.0
    assert r["rail_only"].bandwidth_s == pytest.approx(ratio * r["rail_optimized"].bandwidth_s, rel=1e-9)
    t = {kind: estimate(small_fabric(f"{kind}-2").with_failures("nic0.0"), collective, "1G",
                        algorithm=algorithm).results[0].time_s for kind in ("rail_only", "rail_optimized")}
    assert (t["rail_only"] > 1.2 * t["rail_optimized"]) if algorithm == "tree" else (
        t["rail_only"] == pytest.approx(t["rail_optimized"], rel=1e-9))
    healthy = estimate(small_fabric("rail_only-2"), collective, "1G", algorithm=algorithm).results[0].time_s
    assert t["rail_only"] > 1.2 * healthy


def test_rail_only_with_no_rail_working_at_both_servers_is_one_error():
    from small_fabrics import small_fabric
    from topo.errors import TopoError
    from topo.engine.estimate import estimate

    f = small_fabric("rail_only-2")
    N = f.layout.nics_per_server
    broken = f.with_failures(*[f"nic0.{r}" for r in range(N // 2)], *[f"nic1.{r}" for r in range(N // 2, N)])
    with pytest.raises(TopoError) as e:
        estimate(broken, "all_reduce", "1G", ranks=list(range(2 * f.layout.gpus_per_server)))
    assert e.value.key == "fail" and "no rail has a working NIC at both servers" in e.value.message
