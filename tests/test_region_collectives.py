"""Collectives across sites (issue 31): closed forms of the hierarchical all-reduce, the flat ring's latency, the DCI
named as the bottleneck when it binds."""

import numpy as np
import pytest

from conftest import run_cli
from test_region import build, region_dict
from topo import estimate
from topo.engine.algorithms.across_sites import Phase, pipelined
from topo.engine.region_estimate import estimate_region

S = 2 ** 30


def _site(r, coll, **kw):
    x = estimate(r.fabrics[0], coll, [S], **kw).results[0]
    return x.latency_s, x.bandwidth_s


def test_hierarchical_all_reduce_is_in_site_rs_plus_cross_site_ar_plus_in_site_ag_when_the_dci_binds():
    # one 800G wave (100 GB/s) between two sites 1,000 km apart: the DCI binds
    r = build(region_dict(waves=1, equipment_latency="20 us"))
    row = estimate_region(r, "all_reduce", [S], "hierarchical").rows[0]
    K, B = 2, 100e9
    hop = r.cross_site_latency_s(np.array([0]), np.array([r.gpus_per_site[0]]))[0]
    assert hop == pytest.approx(1000 * 4.9e-6 + 20e-6 + 2 * sum(t.latency_s for t in r.fabrics[0].layout.tiers))
    dci = 2 * (K - 1) * hop + 2 * (K - 1) / K * S / B  # an all-reduce across K sites of each GPU's 1/n shard
    rs, ag = sum(_site(r, "reduce_scatter")), sum(_site(r, "all_gather"))
    assert row.time_s == pytest.approx(rs + dci + ag, rel=1e-12)
    assert row.bottleneck == "dci:s-0-s-1"
    assert row.phases["dci"]["bandwidth_s"] == pytest.approx(S / B)
    # what crossed: 2(K-1)/K S each way on the one span
    np.testing.assert_allclose(row.span_bytes, [S, S])


def test_the_flat_ring_pays_the_long_link_once_per_ring_step():
    r = build(region_dict(waves=1))
    e = estimate_region(r, "all_reduce", [S])
    row = e.rows[0]
    N = r.num_gpus
    hop = r.cross_site_latency_s(np.array([0]), np.array([r.gpus_per_site[0]]))[0]
    ring = estimate_region(r, "all_reduce", [S], "ring").rows[0]
    assert ring.latency_s == pytest.approx(2 * (N - 1) * hop)
    # its bytes over the DCI: 2(N-1)/N S across each site boundary, twice the hierarchical's S
    assert ring.span_bytes[0] == pytest.approx(2 * (N - 1) / N * S)
    assert row.algorithm != "ring" and row.candidates["ring"] > row.candidates["hierarchical"]


def test_ring_of_four_sites_moves_two_thirds_of_s_per_span_direction_on_a_ring_dci():
    r = build(region_dict(count=4, topology="ring", waves=1))
    row = estimate_region(r, "all_reduce", [S], "hierarchical").rows[0]
    # the cross-site ring 0->1->2->3->0 uses each span once, in one direction: 2(K-1)/K S = 1.5 S
    b = np.array(row.span_bytes).reshape(-1, 2)
    assert sorted(b.max(axis=1)) == pytest.approx([1.5 * S] * 4) and b.min() == 0


def test_pipelining_pays_the_dci_latency_once():
    L = 5e-3
    ph = {"rs": Phase(1e-4, 0.04), "dci": Phase(2 * L, 0.04), "ag": Phase(1e-4, 0.04)}
    t = pipelined(ph, max_chunks=64)
    C = t.phases["chunks"]
    per = 1e-4 + 0.04 / C
    assert t.time_s == pytest.approx(2 * L + 2 * per + 0.04 / C + (C - 1) * per)
    assert t.time_s < sum(p.time_s for p in ph.values())


def test_cli_estimate_a_region_and_its_errors():
    out = run_cli("estimate", "two-site-h100", "--size", "1G", "--set", "interconnect.waves=1", "-a",
                  "hierarchical", check=True).stdout
    assert "dci:east-west" in out and "hierarchical" in out
    bad = run_cli("estimate", "two-site-h100", "--size", "1G", "-c", "alltoall")
    assert bad.returncode == 2 and "collective: across sites, topo models all_reduce" in bad.stderr
    bad = run_cli("estimate", "two-site-h100", "--size", "1G", "--fail", "dci:east-west")
    assert bad.returncode == 2 and "no working DCI route from site east to west" in bad.stderr


def test_a_failed_part_of_one_site_slows_that_site_only():
    from topo.fabric.region import build_region

    r = build_region("two-site-h100")
    hit = r.with_failures("east:leaf0")
    assert hit.fabrics[0] is not hit.fabrics[1] and hit.fabrics[1] is r.fabrics[1]
    assert hit.fabrics[0].failures == ("leaf0",)
    base = estimate_region(r, "all_reduce", [16 * S], "hierarchical").rows[0]
    slow = estimate_region(hit, "all_reduce", [16 * S], "hierarchical").rows[0]
    # a whole leaf down: its NICs fail over to the servers' other NICs, and the in-site phases slow down
    assert slow.phases["rs"]["bandwidth_s"] > base.phases["rs"]["bandwidth_s"]
    assert slow.phases["dci"] == base.phases["dci"]
