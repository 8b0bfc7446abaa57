"""Collectives across sites (issue 31): closed forms of the hierarchical all-reduce, the flat ring's latency, the DCI
named as the bottleneck when it binds."""

import json
import re

import numpy as np
import pytest

from conftest import run_cli
from test_region import build, region_dict
from topo import estimate
from topo.engine.algorithms.across_sites import Phase, hierarchical, pipeline_time_s, pipelined, window_s
from topo.engine.region_estimate import chain_hops_s, estimate_region
from topo.fabric.region import build_region
from topo.errors import TopoError
from topo.units import format_time

S = 2 ** 30


def _site(r, coll, **kw):
    x = estimate(r.fabrics[0], coll, [S], **kw).results[0]
    return x.latency_s, x.bandwidth_s


def test_hierarchical_all_reduce_is_in_site_rs_plus_cross_site_ar_plus_in_site_ag_when_the_dci_binds():
    # one 800G wave (100 GB/s) between two sites 1,000 km apart: the DCI binds
    r = build(region_dict(waves=1, equipment_latency="20 us"))
    row = estimate_region(r, "all_reduce", [S], "hierarchical").results[0]
    K, B = 2, 100e9
    hop = r.cross_site_latency_s(np.array([0]), np.array([r.gpus_per_site[0]]))[0]
    assert hop == pytest.approx(1000 * 4.9e-6 + 20e-6 + 2 * sum(t.latency_s for t in r.fabrics[0].layout.tiers))
    dci = 2 * (K - 1) * hop + 2 * (K - 1) / K * S / B  # an all-reduce across K sites of each GPU's 1/n shard
    rs, ag = sum(_site(r, "reduce_scatter")), sum(_site(r, "all_gather"))
    assert row.time_s == pytest.approx(rs + dci + ag, rel=1e-12)
    assert row.bottleneck_name == "dci:s-0-s-1"
    assert row.phases["dci"]["bandwidth_s"] == pytest.approx(S / B)
    # what crossed: 2(K-1)/K S each way on the one span
    np.testing.assert_allclose(row.span_bytes, [S, S])


def test_the_flat_ring_pays_the_long_link_once_per_ring_step():
    r = build(region_dict(waves=1))
    e = estimate_region(r, "all_reduce", [S])
    row = e.results[0]
    N = r.num_gpus
    hop = r.cross_site_latency_s(np.array([0]), np.array([r.gpus_per_site[0]]))[0]
    ring = estimate_region(r, "all_reduce", [S], "ring").results[0]
    assert ring.latency_s == pytest.approx(2 * (N - 1) * hop)
    # its bytes over the DCI: 2(N-1)/N S across each site boundary, twice the hierarchical's S
    assert ring.span_bytes[0] == pytest.approx(2 * (N - 1) / N * S)
    assert row.algorithm != "ring" and row.candidates["ring"] > row.candidates["hierarchical"]


def test_the_flat_ring_moves_one_nccl_buffer_per_channel_per_round_trip_across_the_long_link():
    # NCCL_BUFFSIZE 4 MiB (NVIDIA/nccl src/init.cc DEFAULT_BUFFSIZE (1 << 22)) in flight per channel, 16 channels
    # (the H100 profile's): 2(N-1)/N S across the boundary take at least R x chunks, R = 2 x the one-way hop
    r = build(region_dict(waves=16))
    N = r.num_gpus
    hop = r.cross_site_latency_s(np.array([0]), np.array([r.gpus_per_site[0]]))[0]
    ring = estimate_region(r, "all_reduce", [S], "ring").results[0]
    chunks = 2 * (N - 1) / N * S / (16 * 4 * 2 ** 20)
    assert ring.phases["window"]["bandwidth_s"] == pytest.approx(2 * hop * chunks, rel=1e-12)
    # 1,000 km: a 9.9 ms round trip over 32 chunks, far above the 16 waves' 1.3 ms: the window binds
    assert ring.bottleneck_name.startswith("window:16 channels x 4 MiB") and ring.phases["dci"]["bandwidth_s"] < 0.01
    assert ring.bandwidth_s == pytest.approx(2 * hop * chunks, rel=1e-12)
    assert window_s(8e9, 0.01, 16, 4e6) == pytest.approx(0.01 * 125)


def test_ring_of_four_sites_moves_two_thirds_of_s_per_span_direction_on_a_ring_dci():
    r = build(region_dict(count=4, topology="ring", waves=1))
    row = estimate_region(r, "all_reduce", [S], "hierarchical").results[0]
    # the cross-site ring 0->1->2->3->0 uses each span once, in one direction: 2(K-1)/K S = 1.5 S
    b = np.array(row.span_bytes).reshape(-1, 2)
    assert sorted(b.max(axis=1)) == pytest.approx([1.5 * S] * 4) and b.min() == 0


def test_a_pipeline_of_three_equal_stages_over_c_chunks_takes_c_plus_two_chunk_times():
    # the slowest stage works C times; the other two add one chunk each (the fill and the drain)
    t = 3e-3
    for C in (1, 2, 7, 64):
        assert pipeline_time_s([t, t, t], C) == pytest.approx((C + 2) * t, rel=1e-15)
    C = np.arange(1, 9)
    np.testing.assert_allclose(pipeline_time_s(np.full((3, C.size), t), C, 1e-3), 1e-3 + (C + 2) * t, rtol=1e-15)


def test_pipelining_pays_each_phases_latency_once_and_the_call_cost_per_chunk():
    # T(C) = sum(l) + b_max + (sum(b) - b_max) / C + (C - 1) d when one phase is the slowest at every C: the best
    # C is sqrt((sum(b) - b_max) / d); here (0.02 / d) = 900: C = 30
    L, d = 5e-3, 0.02 / 900
    ph = {"rs": Phase(1e-3, 0.01), "dci": Phase(2 * L, 0.05), "ag": Phase(1e-3, 0.01)}
    t = pipelined(ph, per_chunk_s=d)
    assert t.phases["chunks"] == 30 and t.bottleneck == ph["dci"].bound
    assert t.time_s == pytest.approx(2e-3 + 2 * L + 0.05 + 0.02 / 30 + 29 * d, rel=1e-12)
    assert t.bandwidth_s == pytest.approx(0.07 / 30 + 29 * 0.05 / 30, rel=1e-12)
    # free calls: the more chunks the better, down to sum(l) + b_max + the rest / max_chunks
    free = pipelined(ph, per_chunk_s=0.0, max_chunks=64)
    assert free.phases["chunks"] == 64 and free.time_s == pytest.approx(2e-3 + 2 * L + 0.05 + 0.02 / 64, rel=1e-12)


def test_pipelined_is_never_slower_than_plain_hierarchical_and_equal_at_one_chunk():
    rng = np.random.default_rng(5)
    for _ in range(200):
        ph = {k: Phase(*(rng.random(2) * 10.0 ** rng.integers(-6, -1, 2))) for k in ("rs", "dci", "ag")}
        d = 10.0 ** rng.uniform(-7, -3)
        plain = hierarchical(ph).time_s
        assert pipelined(ph, d).time_s <= plain * (1 + 1e-12)
        assert pipelined(ph, d, max_chunks=1).time_s == pytest.approx(plain, rel=1e-12)


def test_pipelined_beats_plain_hierarchical_when_the_dci_binds_and_on_two_site_h100():
    # one 800G wave between two sites 1,000 km apart: the DCI's 10.7 ms bandwidth part overlaps the in-site phases
    r = build(region_dict(waves=1, equipment_latency="20 us"))
    row = estimate_region(r, "all_reduce", [S], "hierarchical_pipelined").results[0]
    plain = row.candidates["hierarchical"]
    assert row.bottleneck_name.startswith("dci:") and row.phases["chunks"] > 1
    rs, dci, ag = (row.phases[k] for k in ("rs", "dci", "ag"))
    assert dci["bandwidth_s"] > max(rs["bandwidth_s"], ag["bandwidth_s"])
    # what hides: most of the in-site bandwidth parts, less a call cost per chunk
    assert row.time_s < plain - 0.8 * (rs["bandwidth_s"] + ag["bandwidth_s"])
    from topo.fabric.region import build_region

    two = estimate_region(build_region("two-site-h100"), "all_reduce", [S]).results[0].candidates
    assert two["hierarchical_pipelined"] < 0.9 * two["hierarchical"]


def test_cli_estimate_a_region_and_its_errors():
    out = run_cli("estimate", "two-site-h100", "--size", "1G", "--set", "interconnect.waves=1", "-a",
                  "hierarchical", check=True).stdout
    assert "dci:east-west" in out and "hierarchical" in out
    bad = run_cli("estimate", "two-site-h100", "--size", "1G", "-c", "alltoall")
    assert bad.returncode == 2 and "collective: across sites, topo models all_reduce" in bad.stderr
    # walk6: the line named neither the flag nor a key ("error: no working DCI route ..."); it is --fail's doing,
    # named as a GPU cut off by --fail is on one fabric
    for cmd in (["estimate", "two-site-h100", "--size", "1G"], ["train", "two-site-h100", "--model", "llama3-8b",
                                                                "--tp", "8", "--global-batch", "384"]):
        bad = run_cli(*cmd, "--fail", "dci:east-west")
        assert bad.returncode == 2 and bad.stderr == ("error: --fail: no working DCI route from site east to west "
                                                      "(failed: dci:east-west)\n"), bad.stderr


def test_cli_estimate_a_region_shows_every_candidate_s_time_and_names_a_refused_flag():
    """walk9: the header listed the candidates' names only (the README quotes their times), and --detail was refused
    as "not --csv"."""
    out = run_cli("estimate", "two-site-h100", "--size", "1GiB", check=True).stdout
    doc = json.loads(run_cli("estimate", "two-site-h100", "--size", "1GiB", "--json", check=True).stdout)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("# candidates across sites at 1 GiB: ")]
    shown = dict(part.split(" ", 1) for part in line.split(": ", 1)[1].split(", "))  # name -> "23.61 ms"
    assert set(shown) == set(doc["candidate_time_s"]) == {"hierarchical", "hierarchical_pipelined", "ring", "tree"}
    for name, (t,) in doc["candidate_time_s"].items():
        assert shown[name] == format_time(t)
    for flag in ("--csv", "--no-pxn"):  # --detail runs across sites (ms52: the phases and the tree's chain of roots)
        bad = run_cli("estimate", "two-site-h100", "--size", "1GiB", flag)
        assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith(f"error: {flag}: across sites, "), \
            bad.stderr
        assert bad.stderr.count("\n") == 1 and f"; not {flag} (it runs on one site's spec)" in bad.stderr


def test_a_failed_part_of_one_site_slows_that_site_only():
    from topo.fabric.region import build_region

    r = build_region("two-site-h100")
    hit = r.with_failures("east:leaf0")
    assert hit.fabrics[0] is not hit.fabrics[1] and hit.fabrics[1] is r.fabrics[1]
    assert hit.fabrics[0].failures == ("leaf0",)
    base = estimate_region(r, "all_reduce", [16 * S], "hierarchical").results[0]
    slow = estimate_region(hit, "all_reduce", [16 * S], "hierarchical").results[0]
    # a whole leaf down: its NICs fail over to the servers' other NICs, and the in-site phases slow down
    assert slow.phases["rs"]["bandwidth_s"] > base.phases["rs"]["bandwidth_s"]
    assert slow.phases["dci"] == base.phases["dci"]


def test_an_in_site_bottleneck_names_its_site_as_fail_takes_it():
    """The in-site phases' bound is named SITE:SRC->DST (the slowest site's busiest link, in the words
    ``--fail SITE:PART`` takes), not a bare ``site:`` that says nothing of which site: with a leaf of west down,
    west binds; without failures, the first of the alike sites is named."""
    args = ("estimate", "two-site-h100", "--size", "16G", "-a", "hierarchical", "--json")
    hit = json.loads(run_cli(*args, "--fail", "west:leaf0", check=True).stdout)["results"][0]
    assert hit["phases"]["rs"]["bound"].startswith("west:nic") and hit["bottleneck_name"] == hit["phases"]["rs"]["bound"]
    base = json.loads(run_cli(*args, check=True).stdout)["results"][0]
    assert base["phases"]["rs"]["bound"].startswith("east:")
    assert hit["phases"]["rs"]["bandwidth_s"] > base["phases"]["rs"]["bandwidth_s"]  # the failed site is slower


def test_an_algorithm_list_across_sites_picks_the_fastest_of_those_as_on_one_site():
    # as NCCL_ALGO reads a list, and `topo estimate -a ring,tree` on one site (algorithm_candidates)
    r = build(region_dict(waves=1, equipment_latency="20 us"))
    every = estimate_region(r, "all_reduce", [S]).results[0].candidates
    for asked, names in (("ring,tree", ("ring", "tree")), ("^tree", ("hierarchical", "hierarchical_pipelined", "ring")),
                         ("Hierarchical-Pipelined,RING", ("hierarchical_pipelined", "ring"))):
        out = estimate_region(r, "all_reduce", [S], asked)
        row = out.results[0]
        assert row.algorithm == min(names, key=every.get) and row.time_s == min(every[n] for n in names)
        assert out.algorithm == asked.lower().replace("-", "_")
    gather = estimate_region(r, "all_gather", [S], "ring,tree")  # NCCL's tree runs all_reduce only
    assert gather.results[0].algorithm == "ring"
    allowed = "allowed: auto, one of hierarchical, hierarchical_pipelined, ring, tree, a comma list of them"
    for asked, message in (("ring,nvls", "unknown algorithm across sites 'nvls' in 'ring,nvls'; " + allowed),
                           ("nvls", "unknown algorithm across sites 'nvls'; " + allowed),
                           ("^ring,tree,hierarchical,hierarchical_pipelined", "leaves no algorithm across sites")):
        with pytest.raises(TopoError, match=re.escape(message)) as exc:
            estimate_region(r, "all_reduce", [S], asked)
        assert exc.value.key == "algorithm"
    with pytest.raises(TopoError, match="tree does not run all_gather across sites: tree: NCCL's tree runs all_reduce"):
        estimate_region(r, "all_gather", [S], "tree")


def test_cli_estimate_across_sites_takes_an_algorithm_list():
    out = run_cli("estimate", "two-site-h100", "--size", "1G", "-a", "ring,tree", check=True).stdout
    assert out.startswith("# topo estimate: all_reduce on two-site-h100: 3,072 GPUs over 2 sites, every GPU, "
                          "algorithm ring,tree\n")
    bad = run_cli("estimate", "two-site-h100", "--size", "1G", "-a", "ring,nvls")
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: --algorithm: unknown algorithm across sites 'nvls' in 'ring,nvls'; allowed: ")


@pytest.mark.parametrize("spec", ["two-site-h100", "three-site-chain"])
def test_the_phases_charges_sum_to_the_rows_time_and_the_dci_carries_the_cross_site_latency(spec):
    """Region --json's phases: each phase's charged latency and bandwidth parts sum to the row's (walk16, section
    178: the tree's and the ring's dci latency was 0.0 while the row's latency was almost all cross-site). The
    tree's DCI latency is 2 x its chain's hops; the ring's 2(N-1) x one hop, and the whole row's latency when the
    hop is slower than a step inside a site."""
    r = build_region(spec)
    a = np.arange(r.num_sites)
    up = np.array([r.up_latency_s(i) for i in a])
    ring_hop = float(np.max(up + r.route_latency_s(a, (a + 1) % r.num_sites) + up[(a + 1) % r.num_sites]))
    for alg in ("hierarchical", "hierarchical_pipelined", "ring", "tree"):
        for S in (8, 2**30):
            row = json.loads(run_cli("estimate", spec, "--size", str(S), "-a", alg, "--json",
                                     check=True).stdout)["results"][0]
            ph = [p for p in row["phases"].values() if isinstance(p, dict)]
            assert sum(p["charged_latency_s"] for p in ph) == pytest.approx(row["latency_s"], rel=1e-9), (alg, S)
            assert sum(p["charged_bandwidth_s"] for p in ph) == pytest.approx(row["bandwidth_s"], rel=1e-9), (alg, S)
            assert sum(p["charged_latency_s"] + p["charged_bandwidth_s"] for p in ph) == pytest.approx(row["time_s"])
            dci = row["phases"]["dci"]
            if alg == "tree":
                assert dci["latency_s"] == pytest.approx(2 * chain_hops_s(r).sum(), rel=1e-12)
                assert dci["charged_latency_s"] == dci["latency_s"]
            if alg == "ring":
                assert dci["latency_s"] == pytest.approx(2 * (r.num_gpus - 1) * ring_hop, rel=1e-12)
                assert row["latency_s"] == pytest.approx(dci["charged_latency_s"])  # the long hop is the slower
    two = json.loads(run_cli("estimate", "two-site-h100", "--size", "8", "-a", "tree", "--json",
                             check=True).stdout)["results"][0]
    assert two["phases"]["dci"]["latency_s"] > 0.9 * two["latency_s"]  # almost all of it
