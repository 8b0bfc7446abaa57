"""The cost stage's contract (issue 30): named results, one limit vocabulary, schedules complete when built, and
the terms of NCCL's latency formula that no other test pins.

Hand figures are NCCL's own tuning model (NVIDIA/nccl src/graph/tuning.cc, v2.30.7; the constants are
/work/shared/data/kernels.md section 7 and topo/data/profiles/nccl/2.30.7.toml): Hopper Ring LL base 6.6 us,
NVLink hop 0.6 us, network hop 2.7 us, network overhead 1 us per step (x3 for Simple). topo adds the kernel launch
once (gpu/hopper.toml launch_us, 2.433 us: te42kyfo/gpu-benches @1c36d509ee71); NCCL's model (Profile.nccl_model) has
none, and the hand figures below are NCCL's.
"""

import dataclasses

import pytest

import topo
from topo.engine.algorithms import build_schedule
from topo.engine.cost import LIMITS, Limit, ProtocolTime, latency_s, rate_limit
from topo.engine.estimate import CollectiveTime, default_profile, estimate, evaluate
from topo.engine.placement import place
from topo.engine.schedule import NodeShape

US = 1e-6


@pytest.fixture(scope="module")
def pod():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def test_evaluate_with_no_sizes_routes_every_candidate(pod):
    # issue 30: at_sizes=[] raised UnboundLocalError; an empty list names no size to prune for
    ev = evaluate(pod, "all_reduce", gpus=16, at_sizes=[])
    full = evaluate(pod, "all_reduce", gpus=16)
    assert not ev.pruned and ev.sizes is None
    assert set(ev.costed) == set(full.costed) and len(ev.costed) > 1
    assert ev.time(2**20) == full.time(2**20)


def test_times_are_named(pod):
    ev = evaluate(pod, "all_reduce", gpus=16)
    t = ev.time(2**20)
    assert isinstance(t, CollectiveTime)
    assert t.time_s == pytest.approx(t.latency_s + t.bandwidth_s, rel=1e-12)
    assert t.algorithm in ev.costed and t.protocol in ev.protocols[t.algorithm]
    r = estimate(pod, "all_reduce", 2**20, gpus=16).results[0]
    assert (r.time_s, r.algorithm, r.protocol) == (t.time_s, t.algorithm, t.protocol)


def test_one_limit_vocabulary(pod):
    assert set(LIMITS) == set(Limit)  # every limit explained, no second spelling
    ev = evaluate(pod, "sendrecv", gpus=1024)
    c = ev.costed[next(iter(ev.costed))]
    r = rate_limit(c, ev.profile, "Simple", "sendrecv", 1024, ev.num_domains)
    assert isinstance(r.limit, Limit) and r.rate_Bps > 0
    # the name a report prints is the name rate_limit returns (was "p2p-channels" in one, "p2p-channel-cap" in the
    # other)
    res = estimate(pod, "sendrecv", "1G", gpus=1024).results[0]
    assert res.bottleneck.limit == str(Limit.P2P_CHANNELS) == r.limit


def test_build_schedule_carries_pinned_channels_and_mnnvl(pod):
    sh, pl = NodeShape.of(pod), place(pod, 16)
    s = build_schedule("ring", "all_reduce", sh, pl, channels=4, mnnvl=True)
    assert s.pinned_channels == 4 and s.latency.mnnvl
    s = build_schedule("ring", "all_reduce", sh, pl)
    assert s.pinned_channels is None and not s.latency.mnnvl


def _ring16(pod):
    return build_schedule("ring", "all_reduce", NodeShape.of(pod), place(pod, 16))


def test_ring_ll_steps_inside_nodes_cost_the_network_overhead_across_nodes(pod):
    """NCCL: Ring lat = base + (nsteps - nInterSteps) x max(intraLat, netOverhead) + nInterSteps x interLat.
    2 x 8 H100, all-reduce: nsteps = 2 x 15 = 30, nInterSteps = 2 x (nNodes - 1) = 2 (tuning.cc at NCCL 2.30.7, as
    since 2.23.4; 2 x nNodes from 2.12 to 2.22). LL: 6.6 + 28 x max(0.6, 1.0) + 2 x 2.7 = 40.0 us (with the bare
    NVLink hop it would be 29.8)."""
    prof = default_profile(pod).nccl_model()  # NCCL's own terms (no launch; InfiniBand has no net latency term)
    counts = _ring16(pod).latency
    assert counts.multi_domain and counts.intra_hops + counts.inter_hops == 30
    assert latency_s(counts, 0.0, prof, "LL") == pytest.approx(40.0 * US, rel=1e-9)
    # Simple: max(3.4 NVLink hop, 3 x 1.0 overhead) = 3.4 us per step inside, 14.0 per network step
    assert latency_s(counts, 0.0, prof, "Simple") == pytest.approx((8.4 + 28 * 3.4 + 2 * 14.0) * US, rel=1e-9)
    # one node: the NVLink hop alone (no network overhead): 6.6 + 14 x 0.6 = 15.0 us
    one = build_schedule("ring", "all_reduce", NodeShape.of(pod), place(pod, 8)).latency
    assert latency_s(one, 0.0, prof, "LL") == pytest.approx(15.0 * US, rel=1e-9)


def test_pinned_channels_scale_the_protocol_cap(pod):
    """NCCL's caps are per channel (tuning.cc: busBw = nChannels x per-channel bw): a ring pinned to 4 of the
    profile's channels runs at 4/channels of the cap, turned into an algorithm bandwidth x p / (2(p - 1))."""
    prof = default_profile(pod)
    CAP = 10e9
    caps = dict(prof.busbw_cap_Bps)
    caps["ring"] = {"Simple": CAP}
    prof = dataclasses.replace(prof, busbw_cap_Bps=caps)
    S, p, k = 2**34, 64, 4
    assert prof.channels != k
    r = estimate(pod, "all_reduce", S, gpus=p, algorithm="ring", protocol="Simple", profile=prof,
                 channels=k).results[0]
    W = prof.pipeline_window_bytes
    assert r.bandwidth_s == pytest.approx((S + W) / (CAP * k / prof.channels * p / (2 * (p - 1))), rel=1e-12)
    assert r.bottleneck.limit == "protocol-cap"


def test_best_protocol_is_named(pod):
    from topo.engine.cost import best_protocol
    ev = evaluate(pod, "all_reduce", gpus=16)
    c = ev.costed["ring"]
    t = best_protocol(c, ev.profile, ev.protocols["ring"], 1024, "all_reduce", 16, 2)
    assert isinstance(t, ProtocolTime) and t.protocol == "LL"
