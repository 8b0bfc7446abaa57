"""The degraded bisection (topo/bisection.py) against networkx as an oracle, with and without failures.

The oracle is the maximum flow (max-flow min-cut theorem: equal to ``networkx.minimum_cut``) on the *full* networkx
graph, GPU by GPU and NIC by NIC, from a source joined to every GPU of the first half to a sink joined to every GPU
of the second: network edges at the summed bandwidth of their working cables only, an edge whose cables all failed
removed, NVLink and PCIe unconstrained (the scale-out bisection, as inventory's closed form counts it). The library
computes it on a switch-level graph with scipy; both must agree on every small fabric of tests/small_fabrics.py and
every failure set below.
"""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from small_fabrics import SPECS, small_fabric

from topo import build_fabric, inventory, load_spec
from topo.fabric.bisection import bisection
from topo.fabric.failures import degraded

SMALL = sorted(SPECS)


def oracle(f, cut: bool = False) -> float:
    """networkx's max flow (or, with ``cut``, the capacity of its minimum cut) between the halves of ``f``."""
    g = nx.Graph()
    half = f.num_gpus // 2
    for u, v, a in f.graph.edges(data=True):
        working = a["num_links"] - a["num_failed"]
        if working == 0:
            continue  # every cable of the edge failed
        if a["level"] in ("nvlink", "pcie"):
            g.add_edge(u, v)  # no capacity attribute: unconstrained
        else:
            g.add_edge(u, v, capacity=working * a["link_bandwidth_Bps"])
    g.add_nodes_from(("SOURCE", "SINK"))
    for i, name in enumerate(f.node_names(np.arange(f.num_gpus))):
        if name in g:
            g.add_edge("SOURCE", name) if i < half else g.add_edge(name, "SINK")
    if cut:
        value, (a, b) = nx.minimum_cut(g, "SOURCE", "SINK")
        # the cut's capacity, summed by hand from the partition networkx returns
        crossing = sum(g[u][v]["capacity"] for u in a for v in g[u] if v in b)
        assert crossing == pytest.approx(value, rel=1e-12)
        return value
    return nx.maximum_flow_value(g, "SOURCE", "SINK")


def _first_uplink(f) -> str:
    """A single leaf-to-spine cable, named as describe/export name it (``leaf0-spine0#0``)."""
    k = f.link_offset["up:0"]
    a, b = f.node_names([f.links["src"][k], f.links["dst"][k]])
    return f"{a}-{b}#0"


def failure_sets(f) -> list[tuple[str, ...]]:
    spine = f.layout.tiers[1].name
    sets = [(f"{spine}0",), (_first_uplink(f),), ("nic0.0",), ("nic0.0", "nic1.1"), ("rail:1",),
            ("gpu0",), ("nvswitch0",), ("leaf0",), ("plane:0",),
            ("random:leaf-spine:0.3:1",), ("random:leaf-spine:0.5:7",), ("random:nic-leaf:0.25:2",),
            (f"random:{spine}:0.5:3",), (f"{spine}0", "random:leaf-spine:0.2:5")]
    if len(f.layout.tiers) > 2:
        sets += [("core0",), ("random:spine-core:0.4:11",), ("random:core:0.5:4",)]
    return sets


@pytest.mark.parametrize("name", SMALL)
def test_perfect_fabric_equals_the_closed_form_and_networkx(name):
    """No failure: the max flow is inventory's closed form (half the smallest boundary, topo/inventory.py) exactly,
    and networkx's."""
    f = small_fabric(name)
    b = bisection(f)
    assert b.exact and b.failures == ()
    assert b.bandwidth_Bps == inventory(f).bisection_bandwidth_Bps
    assert b.bandwidth_Bps == pytest.approx(oracle(f), rel=1e-9)
    assert b.bandwidth_per_gpu_Bps == inventory(f).bisection_bandwidth_per_gpu_Bps


@pytest.mark.parametrize("name", SMALL)
def test_degraded_bisection_is_networkx_max_flow(name):
    """With each failure set (a spine, one leaf uplink cable, NICs, a rail, a GPU, an NVSwitch, a leaf, a plane,
    random cables and switches with seeds), the switch-level flow equals networkx's on the full graph."""
    f = small_fabric(name)
    perfect = bisection(f).bandwidth_Bps
    lower = 0
    for fails in failure_sets(f):
        g = f.with_failures(*fails)
        got = bisection(g).bandwidth_Bps
        assert got == pytest.approx(oracle(g), rel=1e-9, abs=1e-3), fails
        assert got <= perfect, fails
        lower += got < perfect
    assert lower >= 3, "the failure sets must include several that cut the bisection"


@pytest.mark.parametrize("name", ["rail_optimized-3-os2", "fat_tree-2", "rail_only-3"])
def test_degraded_bisection_is_networkx_minimum_cut(name):
    """The same against networkx.minimum_cut, whose partition's crossing capacity is summed by hand."""
    f = small_fabric(name)
    for fails in [(), ("spine0",), ("random:leaf-spine:0.4:9",)]:
        g = f.with_failures(*fails)
        assert bisection(g).bandwidth_Bps == pytest.approx(oracle(g, cut=True), rel=1e-9)


def test_losing_a_spine_costs_its_share_by_hand():
    """rail_optimized-2-os2 (2:1 leaves, tests/small_fabrics.py): the leaf uplinks are the bottleneck, so losing one
    of the spines takes exactly its share of the first half's leaf uplinks off the bisection."""
    f = small_fabric("rail_optimized-2-os2")
    L = f.layout
    t0 = L.tiers[0]
    spines = L.tiers[1].num_switches
    perfect = t0.up_capacity_Bps / 2
    assert bisection(f).bandwidth_Bps == perfect
    assert bisection(f.with_failures("spine0")).bandwidth_Bps == pytest.approx(perfect * (spines - 1) / spines)


def test_failed_cables_count_nothing():
    """Failing every leaf-spine cable leaves only the leaves' own NICs: on a 2-tier fabric with two units and one
    leaf per rail per unit, nothing crosses between the units' halves."""
    f = small_fabric("rail_optimized-2")
    assert bisection(f.with_failures("random:leaf-spine:1")).bandwidth_Bps == 0


NAMES = st.sampled_from(["spine0", "spine1", "leaf0", "leaf3", "core0", "core1", "nic0.0", "nic2.1", "rail:0",
                         "plane:1", "gpu1", "nvswitch1"])
FAILS = st.lists(st.one_of(NAMES, st.builds(lambda lv, fr, s: f"random:{lv}:{fr}:{s}",
                                            st.sampled_from(["leaf-spine", "spine-core", "nic-leaf"]),
                                            st.sampled_from([0.1, 0.25, 0.5]), st.integers(0, 50))),
                 min_size=1, max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fails=FAILS, name=st.sampled_from(["rail_optimized-3", "rail_optimized-3-os2", "fat_tree-3", "rail_only-3"]))
def test_a_failure_never_raises_the_bisection(fails, name):
    """Each extra failure can only lower the flow (or leave it), and networkx agrees on the result."""
    f = small_fabric(name)
    prev = bisection(f).bandwidth_Bps
    g = f
    for item in fails:
        g = g.with_failures(item)
        now = bisection(g).bandwidth_Bps
        assert now <= prev
        prev = now
    assert prev == pytest.approx(oracle(g), rel=1e-9, abs=1e-3)


def test_degraded_view_carries_the_bisection():
    """degraded() (what describe prints under --fail) reports the failed fabric's flow, per GPU of a half too."""
    f = small_fabric("rail_optimized-3-os2").with_failures("spine0")
    d = degraded(f)
    b = bisection(f)
    assert d.bisection_bandwidth_Bps == b.bandwidth_Bps
    assert d.bisection_bandwidth_per_gpu_Bps == b.bandwidth_Bps / (f.num_gpus / 2)
    assert d.to_dict()["bisection_bandwidth_Bps"] == b.bandwidth_Bps
    # the figure beside it is the same fabric with every link working: the closed form here (2 pods split evenly)
    assert d.bisection_without_failures_Bps == inventory(f).bisection_bandwidth_Bps > b.bandwidth_Bps
    assert bisection(f, ignore_failures=True).failures == () and b.failures == ("spine0",)
    assert b.to_frame().iloc[0]["bandwidth_Bps"] == b.bandwidth_Bps


def test_rates_without_a_common_unit_give_a_lower_bound():
    """NIC links at 50,000,000,001 B/s beside 50 GB/s switch links: the gcd (1 B/s) would overflow int32, so the unit
    is coarsened and capacities rounded down: not exact, never above networkx, within one unit per edge below."""
    import copy

    from topo import spec_from_dict

    d = copy.deepcopy(SPECS["rail_optimized-3-os2"])
    d["server"]["nic_rate"] = "400.000000008 Gb/s"
    f = build_fabric(spec_from_dict(d))
    assert 50_000_000_001 in f.links["bandwidth_Bps"]
    for g in (f, f.with_failures("spine0")):
        b = bisection(g)
        assert not b.exact and b.unit_Bps > 1
        want = oracle(g)
        assert want - b.unit_Bps * g.graph.number_of_edges() <= b.bandwidth_Bps <= want


def test_bundled_specs_equal_the_closed_form():
    """Every bundled spec, perfect: the flow is inventory's closed form exactly (all of them split evenly)."""
    from topo.spec.load import bundled_specs

    for name in bundled_specs():
        f = build_fabric(load_spec(name))
        assert bisection(f).bandwidth_Bps == inventory(f).bisection_bandwidth_Bps, name


def test_describe_prints_the_smaller_bisection():
    """`topo describe --fail spine0` on a small bundled spec (dgx-h100-superpod, 1,024 GPUs): the installed figure
    stays in the inventory, the failures section prints the smaller one (and the installed one beside it), and
    --json equals the library."""
    from topo.units import format_bandwidth

    ok = run_cli("describe", "dgx-h100-superpod", check=True).stdout
    bad = run_cli("describe", "dgx-h100-superpod", "--fail", "spine0", check=True).stdout
    f = build_fabric(load_spec("dgx-h100-superpod"))
    perfect, hit = bisection(f), bisection(f.with_failures("spine0"))
    assert hit.bandwidth_Bps < perfect.bandwidth_Bps
    assert "with failures" not in ok
    installed, failed = bad.split("with failures")
    assert _bisection_line(ok) == _bisection_line(installed)
    line = _bisection_line(failed)
    assert format_bandwidth(hit.bandwidth_Bps) in line and format_bandwidth(perfect.bandwidth_Bps) in line
    assert format_bandwidth(hit.bandwidth_per_gpu_Bps) in line
    doc = json.loads(run_cli("describe", "dgx-h100-superpod", "--fail", "spine0", "--json", check=True).stdout)
    assert doc["failures"]["bisection_bandwidth_Bps"] == hit.bandwidth_Bps
    assert doc["failures"]["bisection_bandwidth_per_gpu_Bps"] == hit.bandwidth_per_gpu_Bps
    assert doc["bisection_bandwidth_Bps"] == perfect.bandwidth_Bps


def _bisection_line(text: str) -> str:
    return next(x for x in text.splitlines() if x.startswith("bisection"))


def test_plan_network_bisection_is_the_failed_fabrics():
    """topo plan --fail: its network figures run on the failed fabric, so its bisection is the degraded flow (and
    the installed closed form without failures); a note says which figures are the failed fabric's."""
    from topo.plan import plan

    f = build_fabric(load_spec("dgx-h100-superpod"))
    ok = plan(f, collectives=False)
    assert ok.network.bisection_bandwidth_Bps == inventory(f).bisection_bandwidth_Bps
    g = f.with_failures("spine0")
    hit = plan(g, collectives=False)
    assert hit.network.bisection_bandwidth_Bps == bisection(g).bandwidth_Bps < ok.network.bisection_bandwidth_Bps
    assert hit.network.bisection_bandwidth_per_gpu_Bps == bisection(g).bandwidth_per_gpu_Bps
    assert any("spine0" in n and "failed fabric" in n for n in hit.notes)


def test_report_shows_the_degraded_bisection():
    """topo report --fail: the summary and the comparison table show the failed fabric's bisection."""
    from topo.report import build_spec_report
    from topo.report.html import render_page
    from topo.units import format_bandwidth

    kw = {"sizes": ("8", "1M", 4), "load_size": "1M", "extra_algorithms": []}
    hit = build_spec_report("dgx-h100-superpod", failures=("spine0",), **kw)
    ok = build_spec_report("dgx-h100-superpod", **kw)
    b = bisection(hit.fabric)
    assert hit.degraded_bisection == b and ok.degraded_bisection is None
    assert hit.bisection_per_gpu_Bps == b.bandwidth_per_gpu_Bps < ok.bisection_per_gpu_Bps
    page = render_page([hit, ok])
    assert (f"<b>{format_bandwidth(b.bandwidth_Bps)}</b> per direction ({format_bandwidth(b.bandwidth_per_gpu_Bps)} "
            "per GPU) with the failed parts out") in page
    assert f"<td>{format_bandwidth(b.bandwidth_per_gpu_Bps)}</td>" in page  # the comparison table's column


def test_odd_pods_compare_with_the_unfailed_flow_not_the_closed_form():
    """Three pods (2:1 above them): the first half ends inside pod 1, whose halves talk through its own spines, so
    the flow (networkx agrees) exceeds the closed form (half of the spine uplinks, topo/inventory.py). The figure
    describe prints beside a degraded flow is therefore the unfailed flow, which a failure never exceeds."""
    from small_fabrics import _three

    from topo import spec_from_dict

    f = build_fabric(spec_from_dict(_three("rail_optimized", spine_os=2, radix=12, pods=3)))
    closed = inventory(f).bisection_bandwidth_Bps
    assert f.layout.num_pods == 3 and closed == f.layout.tiers[1].up_capacity_Bps / 2
    assert bisection(f).bandwidth_Bps == pytest.approx(oracle(f), rel=1e-9) and bisection(f).bandwidth_Bps > closed
    d = degraded(f.with_failures("spine0"))
    assert d.bisection_without_failures_Bps == bisection(f).bandwidth_Bps
    assert closed < d.bisection_bandwidth_Bps < d.bisection_without_failures_Bps
