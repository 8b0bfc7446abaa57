"""Regions whose sites are not all joined directly: a chain (topology line, the bundled three-site-chain: a-b 25 km,
b-c 80 km, no a-c span) and longer rings. Traffic between a and c transits b: both spans carry it and their
latencies add (one way per span: distance x 4.9 us/km + 20 us of equipment, multisite.md s.4's ~5 us/km). Checked
on the routes, the path split (ms48's linear programme, now with paths one hop longer than the route), `topo
estimate`'s hierarchical all-reduce and `topo train`'s data parallelism across the sites, against closed forms.
Impossible region files (sites no span joins, a span naming no site) are one line each.
"""

import numpy as np
import pytest

from conftest import run_cli
from small_regions import loss_crossing_s
from topo.engine.algorithms.across_sites import dci_phase_bytes
from topo.engine.region_estimate import estimate_region
from topo.fabric.region import build_region
from topo.fabric.region_split import split_paths
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import ParallelLayout

US_PER_KM = 4.9e-6
EQUIP_S = 20e-6
SPAN_Bps = 8 * 100e9  # 8 waves x 800 Gb/s per direction
AB_S, BC_S = 25 * US_PER_KM + EQUIP_S, 80 * US_PER_KM + EQUIP_S  # 142.5 us and 412 us


@pytest.fixture(scope="module")
def chain():
    return build_region("three-site-chain")


def test_a_to_c_takes_both_spans_and_their_latencies_add(chain):
    assert chain.num_spans == 2 and chain.span_names() == ["dci:a-b", "dci:b-c"]
    span, lat = chain.routes()
    assert span[0, 2].tolist() == [0, 1] and span[2, 0].tolist() == [1, 0]
    assert lat[0, 2] == pytest.approx(AB_S + BC_S) and lat[0, 1] == pytest.approx(AB_S)
    V = 1e9
    # a -> c: forward on both spans (2*span: lower site to higher); c -> a: back on both
    assert chain.route_loads(np.array([0]), np.array([2]), V).tolist() == [V, 0.0, V, 0.0]
    assert chain.route_loads(np.array([2]), np.array([0]), V).tolist() == [0.0, V, 0.0, V]
    # one path only: the split is the route
    assert [p.tolist() for p in split_paths(chain, 0, 2)] == [[0, 2]]
    loads, split_lat = chain.split_loads(np.array([0]), np.array([2]), V)
    assert loads.tolist() == [V, 0.0, V, 0.0] and split_lat[0] == pytest.approx(AB_S + BC_S)


def test_describe_names_the_farthest_gpus_across_both_spans():
    p = run_cli("describe", "three-site-chain", check=True)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("farthest GPUs"))
    # 142.5 + 412 us of spans plus a GPU's way up and down to the spine (NIC + leaf + spine, each end)
    assert "555.0 us" in line  # four significant digits (rev57b: one time format)


def test_the_hierarchical_all_reduce_across_a_chain(chain):
    """The cross-site ring a -> b -> c -> a: c -> a transits b, so each directed span carries one site's
    transfer, X = 2 (K-1)/K S: the phase's bandwidth part is X over one span (800 GB/s); its latency is 2 (K-1)
    steps of the slowest transfer, c -> a: the two spans' latencies and a GPU's way up and down."""
    S = 16 * 2**30
    row = estimate_region(chain, "all_reduce", S, algorithm="hierarchical").results[0]
    dci = row.phases["dci"]
    X = dci_phase_bytes("all_reduce", 3, S)
    assert row.span_bytes == pytest.approx([X] * 4)
    assert dci["bandwidth_s"] == pytest.approx(X / SPAN_Bps)
    up = chain.up_latency_s(0)
    assert dci["latency_s"] == pytest.approx(4 * (AB_S + BC_S + 2 * up))


def test_training_across_a_chain_loads_both_spans_and_pays_both_latencies(chain):
    """Data parallelism across the chain: the hierarchical reduction's ring carries 2 (K-1)/K V on every directed
    span (the busiest span's bytes are every span's); its latency is 4 x (a -> c one way + up and down); the DCI
    time also has the logged loss's all-reduce (regions76)."""
    lay = ParallelLayout(tp=8, dp=288, global_batch=288, seq_len=8192)
    r = estimate_across_sites(chain, load_model("llama3-8b"), lay)
    dp = next(s for s in r.strategies if s.strategy == "dp")
    up = chain.up_latency_s(0)
    assert dp.latency_s == pytest.approx(4 * (AB_S + BC_S + 2 * up))
    loss = loss_crossing_s(chain, r)  # regions76: the logged loss's all-reduce, in the DCI time
    assert dp.dci_time_s - dp.latency_s - loss == pytest.approx(dp.dci_bytes_per_step / SPAN_Bps)
    assert dp.bottleneck in ("dci:a-b", "dci:b-c", "border:a", "border:c")
    assert r.throughput_vs_one_site == pytest.approx(r.one_site_step_s / dp.step_time_s)
    assert 0 < r.throughput_vs_one_site < 1


def test_a_chain_costs_the_transit_over_a_mesh_of_the_same_sites(chain):
    """With an a-c span of 105 km (the chain's route length) the three sites form a ring of equal capacities: each
    pair splits its bytes 2/3 direct, 1/3 over the 2-hop path (ms48's closed form, 1.5x a span), so the bandwidth
    part is 2/3 of the chain's X / C, where every span carries one transfer and nothing can split."""
    mesh = build_region("three-site-chain", ['interconnect.topology="mesh"',
                                             'interconnect.spans=[{sites=["a","b"],distance_km=25},'
                                             '{sites=["b","c"],distance_km=80},{sites=["a","c"],distance_km=105}]'])
    S = 16 * 2**30
    c = estimate_region(chain, "all_reduce", S, algorithm="hierarchical").results[0]
    m = estimate_region(mesh, "all_reduce", S, algorithm="hierarchical").results[0]
    assert m.phases["dci"]["bandwidth_s"] == pytest.approx(2 / 3 * c.phases["dci"]["bandwidth_s"])
    assert m.phases["dci"]["bandwidth_s"] + m.phases["dci"]["latency_s"] < c.phases["dci"]["bandwidth_s"] + \
        c.phases["dci"]["latency_s"]


def test_pipeline_stages_across_a_chain_wrap_through_the_middle_site(chain):
    """gpt3-5b (24 layers) tp 8, pp 3 (a stage a site), vpp 2: the interleaved loop wraps from c back to a, which
    transits b, so a -> b carries a's activations to b (vpp = 2 a micro-batch) and the wrap's gradients to c
    (vpp - 1 = 1 a micro-batch; walk19: not vpp): 1.5x the busiest span of a mesh with an a-c span (one transfer
    a directed span). The fill and drain pay 2 (K-1) vpp = 8 crossings of the slowest transfer, c -> a: both spans
    and a GPU's way up and down."""
    lay = ParallelLayout(tp=8, pp=3, vpp=2, dp=96, global_batch=288, seq_len=2048)
    model = load_model("gpt3-5b")
    pp = next(s for s in estimate_across_sites(chain, model, lay, across="pp").strategies if s.strategy == "pp")
    assert pp.latency_s == pytest.approx(8 * (AB_S + BC_S + 2 * chain.up_latency_s(0)))
    mesh = build_region("three-site-chain", ['interconnect.topology="mesh"', "interconnect.distance_km=105"])
    pm = next(s for s in estimate_across_sites(mesh, model, lay, across="pp").strategies if s.strategy == "pp")
    assert pp.dci_bytes_per_step == pytest.approx(1.5 * pm.dci_bytes_per_step)


def _ring(n, extra=()):
    return build_region("three-site-chain", ['sites=[{name="s",spec="dgx-h100-superpod",count=%d,'
                                             'set=["cluster.num_units=1"]}]' % n, 'interconnect.topology="ring"',
                                             "interconnect.distance_km=100", "interconnect.spans=[]", *extra])


def test_a_pair_two_spans_apart_on_a_five_site_ring_also_takes_the_other_way_round():
    """ms48 tried the direct span, 2-hop paths and the route; a 5-site ring's pair two spans apart has one 2-hop
    path and a 3-hop path the other way round. Alone, max-flow sends half each way: the busiest span carries V/2
    (2x one span's rate, was 1x), and the transfer pays the 3-hop path's latency."""
    r = _ring(5)
    assert [len(p) for p in split_paths(r, 0, 2)] == [2, 3]
    V = 1e9
    loads, lat = r.split_loads(np.array([0]), np.array([2]), V)
    assert loads.max() == pytest.approx(V / 2)
    hop = 100 * US_PER_KM + EQUIP_S
    assert lat[0] == pytest.approx(3 * hop)
    # neighbours keep one path (route 1 hop, paths of at most 2 hops: none other on a ring of 5): no programme
    assert len(split_paths(r, 0, 1)) == 1


def test_cutting_a_span_leaves_the_chain_s_ends_unreachable_in_one_line():
    p = run_cli("estimate", "three-site-chain", "--size", "1GiB", "--fail", "dci:a-b")
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert "no working DCI route from site a to b" in p.stderr


REGION = """name = "bad"
[[sites]]
name = "a"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=1"]
[[sites]]
name = "b"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=1"]
[[sites]]
name = "c"
spec = "dgx-h100-superpod"
set = ["cluster.num_units=1"]
[interconnect]
topology = "spans"
distance_km = 100
"""


@pytest.mark.parametrize("spans, message", [
    ('[[interconnect.spans]]\nsites = ["a", "b"]\n',
     "interconnect.spans: no DCI route joins site c to a (topology spans); allowed: spans that join every site"),
    ('[[interconnect.spans]]\nsites = ["b", "c"]\n', "no DCI route joins sites b, c to a (topology spans)"),
    ("", "no DCI route joins sites b, c to a"),
    ('[[interconnect.spans]]\nsites = ["a", "b"]\n[[interconnect.spans]]\nsites = ["b", "x"]\n',
     "interconnect.spans[1].sites: no site 'x'; allowed: two different of a, b, c"),
])
def test_impossible_region_files_are_one_line(tmp_path, spans, message):
    f = tmp_path / "bad.toml"
    f.write_text(REGION + spans)
    for cmd in (["describe"], ["estimate", "--size", "1GiB"], ["plan", "--no-collectives"]):
        p = run_cli(cmd[0], str(f), *cmd[1:])
        assert p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1, p.stderr
        assert message in p.stderr and "Traceback" not in p.stderr


def test_a_spans_region_joined_as_a_chain_is_the_line(tmp_path):
    f = tmp_path / "ok.toml"
    f.write_text(REGION + '[[interconnect.spans]]\nsites = ["c", "b"]\n[[interconnect.spans]]\nsites = ["a", "b"]\n')
    r = build_region(str(f))
    line = build_region(str(f), ['interconnect.topology="line"', "interconnect.spans=[]"])
    assert r.span_names() == line.span_names() == ["dci:a-b", "dci:b-c"]
    assert r.routes()[1] == pytest.approx(line.routes()[1])


def _mesh_with_a_short_chain(n):
    """A mesh of ``n`` one-unit sites whose spans are 1000 km but for a 1 km chain s-0 - s-1 - ... : the ends'
    route runs the whole chain (n - 1 hops), and a mesh has a path of every length up to n - 1 hops between them."""
    chain = ",".join('{sites=["s-%d","s-%d"],distance_km=1}' % (k, k + 1) for k in range(n - 1))
    return build_region("three-site-chain", ['sites=[{name="s",spec="dgx-h100-superpod",count=%d,'
                                             'set=["cluster.num_units=1"]}]' % n, 'interconnect.topology="mesh"',
                                             "interconnect.distance_km=1000", "interconnect.spans=[%s]" % chain])


def test_the_split_keeps_a_bounded_set_of_paths_on_a_dense_graph_with_long_routes():
    """Every simple path of up to h + 1 hops between a 10-site mesh's ends is 109,601 paths (1 + 8 + 8*7 + ...;
    986,410 at 11 sites, minutes and GB): the split keeps the direct span, the 8 two-hop paths, the 3-hop level
    (8 x 7 = 56 <= MAX_PATHS) and the route, and stops at the 4-hop level (336 paths, over the bound)."""
    from topo.fabric.region_split import MAX_PATHS
    r = _mesh_with_a_short_chain(10)
    paths = split_paths(r, 0, 9)
    assert [sum(len(p) == h for p in paths) for h in (1, 2, 3, 9)] == [1, 8, 56, 1] and len(paths) == 66
    assert 56 <= MAX_PATHS < 56 + 336
    route = r.routes()[0][0, 9]
    assert paths[-1].tolist() == [2 * int(s) for s in route]  # the chain, each span forward (lower site to higher)
    loads, lat = r.split_loads(np.array([0]), np.array([9]), 1e9)
    assert loads.sum() > 0 and lat[0] > 0
    # under the bound nothing changes: 5 sites have all 16 paths of up to 5 hops (1 + 3 + 6 + 6)
    assert [len(p) for p in split_paths(_mesh_with_a_short_chain(5), 0, 4)] == [1, 2, 2, 2, 3, 3, 3, 3, 3, 3,
                                                                                   4, 4, 4, 4, 4, 4]


def test_a_site_pair_listed_twice_is_one_line(tmp_path):
    """Two [[interconnect.spans]] entries for one pair (either order) were taken silently, the last one's distance
    winning (a-b at 10 km and b-a at 500 km described as 500 km): now one line naming both entries."""
    f = tmp_path / "twice.toml"
    f.write_text(REGION + '[[interconnect.spans]]\nsites = ["a", "b"]\ndistance_km = 10\n'
                 '[[interconnect.spans]]\nsites = ["b", "c"]\n[[interconnect.spans]]\nsites = ["b", "a"]\n'
                 'distance_km = 500\n')
    for topology in ("spans", "mesh"):
        p = run_cli("describe", str(f), "--set", f'interconnect.topology="{topology}"')
        assert p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1, p.stderr
        assert ("interconnect.spans[2].sites: b-a is listed already (spans[0]); allowed: one entry per site pair"
                in p.stderr)


def test_a_split_the_path_bound_cuts_is_said_in_the_result_and_a_bundled_one_is_not():
    """small50: MAX_PATHS cut the 10-site mesh-chain's ends' paths at the 4-hop level silently. The library now
    says so in its result (never printing): the pair, the paths kept (1 + 8 + 56 + the route = 66) and the hop
    count left out; a pair under the bound, and every bundled region (at most 2 paths a pair), gets no note."""
    from topo.engine.region_estimate import estimate_region
    from topo.fabric.region_split import MAX_PATHS, split_notes
    r = _mesh_with_a_short_chain(10)
    assert split_notes(r) == []
    split_paths(r, 0, 9)
    (note,) = split_notes(r)
    assert f"keeps at most {MAX_PATHS} paths of 3 hops or more a site pair" in note
    assert "1 pair had more (s-0->s-9 kept 66 paths (the route's among them), none other of 4 hops or more)" in note
    assert estimate_region(_mesh_with_a_short_chain(10), "all_reduce", ["1GiB"]).notes != []
    assert estimate_region(_mesh_with_a_short_chain(5), "all_reduce", ["1GiB"]).notes == []
    for name in ("two-site-h100", "three-site-chain", "region-1m"):
        b = build_region(name)
        for i in range(b.num_sites):
            for j in range(b.num_sites):
                if i != j:
                    assert len(split_paths(b, i, j)) <= 2
        assert split_notes(b) == []


def test_training_across_sites_carries_the_path_bounds_note():
    """The multisite step's notes carry split_notes as a region estimate's do (rev53: dropping them failed no test):
    the 10-site mesh-chain's cut pairs are named, a 5-site one's are none."""
    lay = ParallelLayout(tp=8, dp=40, global_batch=40, seq_len=4096)
    ten = estimate_across_sites(_mesh_with_a_short_chain(10), load_model("llama3-8b"), lay)
    bounds = [n for n in ten.notes if "kept" in n and "paths" in n]  # ms51a added the one-site share's notes
    assert len(bounds) == 1 and "s-9->s-0 kept 66 paths" in bounds[0]  # the ring's closing hop
    assert ten.to_dict()["notes"] == ten.notes
    five = estimate_across_sites(_mesh_with_a_short_chain(5), load_model("llama3-8b"), lay.model_copy(
        update={"dp": 20, "global_batch": 20}))
    assert not [n for n in five.notes if "kept" in n and "paths" in n]


def test_a_rule_the_region_checks_names_the_set_that_broke_it(tmp_path):
    """walk16: ``--set interconnect.topology=hub`` on the chain gave "bundled spec three-site-chain: interconnect.
    distance_km: required ..." without the override, where a field's own check names it."""
    p = run_cli("describe", "three-site-chain", "--set", "interconnect.topology=hub", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr == (
        "error: bundled spec three-site-chain (--set interconnect.topology=hub): interconnect.distance_km: "
        "required (> 0, in km) unless every span gives its own; none for a-c\n"), p.stderr
    p = run_cli("describe", "two-site-h100", "--set", 'sites[0].set=["cluster.num_units=0"]', cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith(
        "error: bundled spec two-site-h100: sites[0] (east): bundled spec dgx-h100-superpod (--set "
        "cluster.num_units=0): cluster.num_units: must be >= 1, got 0"), p.stderr  # smallb51: the site's own spec


def test_the_tree_across_a_chain_prices_each_hop_of_its_roots_on_its_own_span(chain):
    """NCCL's cross-DC tree chains the sites' roots a - b - c: the reduction climbs c -> b -> a and the broadcast
    comes back, each hop over its own span (a GPU's way up, the span, the way down), 2 (L_ab + L_bc) in all, not
    4 x the a -> c route through b (walk16, section 178: 2.49 ms where the hops give 1.11 ms)."""
    S = 2**30
    row = estimate_region(chain, "all_reduce", S, algorithm="tree").results[0]
    up = chain.up_latency_s(0)
    hops = (AB_S + 2 * up) + (BC_S + 2 * up)
    assert row.latency_s == pytest.approx(row.phases["site"]["latency_s"] + 2 * hops, rel=1e-12)
    assert 2 * hops == pytest.approx(1.11e-3, abs=0.01e-3)
