"""The report's figure builders: which traces exist, and that their data are the results they were given."""

import html
import json
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from conftest import spec_dict, tier
from topo import build_fabric, inventory, load_spec, spec_from_dict
from topo.engine.collectives import busbw_factor
from topo.engine.estimate import estimate
from topo.report import (build_spec_report, busbw_comparison, collective_curves, fabric_figure, inventory_figure,
                         link_load_distribution, link_load_heatmap, oversubscription_figure, render_page,
                         summarize_loads)
from topo.report.fabric_layers import layer_drawing, pick
from topo.report.style import level_color, tier_color

SIZES = [8, 1024, 2**20, 2**30]


@pytest.fixture(scope="module")
def superpod():
    return build_fabric(load_spec("dgx-h100-superpod"))


@pytest.fixture(scope="module")
def gb200():
    """A small 3-tier fabric with 4 pods."""
    return build_fabric(load_spec("gb200-nvl72-superpod"))


@pytest.fixture(scope="module")
def gb200_estimate(gb200):
    return estimate(gb200, "all_reduce", SIZES)


def names(fig):
    return [t.name for t in fig.data]


# --- fabric drawing ---------------------------------------------------------------------------------------

def test_pick_keeps_first_and_last():
    assert pick(5, 5) == [0, 1, 2, 3, 4]
    assert pick(56, 3) == [0, 1, None, 55]


def test_layer_drawing_of_the_100k_cluster_is_aggregated():
    fabric = build_fabric(load_spec("h100-100k"))
    d = layer_drawing(fabric, max_pods=3)
    L = fabric.layout
    by_layer = {k: [m for m in d.markers if m.layer == k] for k in range(4)}
    # 3 pods drawn, each 7 units, one leaf per rail; one spine group per pod; 32 core planes
    assert len(by_layer[0]) == 3 * L.units_per_pod
    assert len(by_layer[1]) == 3 * L.units_per_pod * L.leaves_per_unit
    assert len(by_layer[2]) == 3 and {m.count for m in by_layer[2]} == {L.tiers[1].switches_per_group}
    assert len(by_layer[3]) == L.tiers[2].num_groups == 32
    assert sum(len(v) for v in by_layer.values()) < 300  # not 200k dots
    assert any("53 more pods" in g.text for g in d.gaps)
    # every drawn bundle carries the cable counts of the layout
    nic = [b for b in d.bundles if b.level == 2]
    assert {b.cables for b in nic} == {L.servers_per_unit * L.nic_ports_per_server_per_leaf}
    core = [b for b in d.bundles if b.level == 4]
    assert len(core) == 3 * 32 and {b.cables for b in core} == {L.tiers[1].up_ports}


@pytest.mark.parametrize("name", ["h100-100k-islands", "rail_optimized-5", "rail_only-4"])
def test_layer_drawing_draws_every_tier_at_any_depth(name):
    # issue 19: the drawing stopped at the 3rd tier (no marker above the cores). Every tier has groups on its
    # layer and every level of cables has bundles; each bundle joins a drawn group below to one drawn above, with
    # the layout's cables per switch (the lower tier's up ports).
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from small_fabrics import small_fabric

    fabric = build_fabric(load_spec(name)) if name.startswith("h100") else small_fabric(name)
    L = fabric.layout
    d = layer_drawing(fabric)
    T = L.num_tiers
    assert T >= 4 and len(d.layer_names) == T + 1
    xs = {k: {m.x for m in d.markers if m.layer == k} for k in range(T + 1)}
    assert all(xs[k] for k in range(T + 1)), {k: len(v) for k, v in xs.items()}
    for ti in range(2, T):
        level = ti + 2  # the cables from tier ti - 1 up to tier ti
        bs = [b for b in d.bundles if b.level == level]
        assert bs and {b.cables for b in bs} == {L.tiers[ti - 1].up_ports}
        assert all(b.x0 in xs[ti] and b.x1 in xs[ti + 1] and (b.y0, b.y1) == (ti, ti + 1) for b in bs)
        assert {m.count for m in d.markers if m.layer == ti + 1} == {L.tiers[ti].switches_per_group}
    if name == "h100-100k-islands":
        # the 4th tier above the islands, its 7:1 in the cores' hover; the figure's right column has every tier
        assert any("oversubscription 6.86:1" in m.hover and "island 0" in m.hover for m in d.markers if m.layer == 3)
        fig = fabric_figure(fabric)
        layers = {t.name: t for t in fig.data if t.mode == "markers" and t.name and not t.name.endswith("bundles")}
        assert "super-spine planes" in layers and "core-super-spine cables" in names(fig)
        # tier73: 256 physical super-spines, each hosting 2 of the 512 planes' switches (28 ports each); rev73: the
        # plane's hover says its switch's 28 ports, not the physical switch's 56
        assert "256 switches, top tier" in [a.text for a in fig.layout.annotations]
        top = [m.hover for m in d.markers if m.layer == 4]
        assert top and all("28 ports down" in h and "hosts 2 of these (56 of its 64 ports)" in h for h in top)


def test_every_figure_shows_every_tier_of_a_5_tier_fabric():
    # issue 19: the bill of materials, oversubscription, link-load and heatmap figures of a 5-tier fabric have one
    # bar, box or row for each of its 5 tiers and 7 link levels (nvlink, pcie, nic-leaf, and 4 tier boundaries), and
    # an all-to-all over every GPU loads every level (so each box has traffic)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from small_fabrics import small_fabric

    f = small_fabric("rail_optimized-5")
    inv = inventory(f)
    tiers = [t.name for t in f.layout.tiers]
    assert len(tiers) == 5 and len(f.level_names) == 7
    sw, cab = inventory_figure(inv).data
    assert list(sw.x) == tiers and list(cab.x) == f.level_names
    down = oversubscription_figure(inv).data[0]
    assert list(down.x) == tiers
    frame = estimate(f, "alltoall", "64M").link_loads(2**26)
    assert names(link_load_distribution(frame, f)) == f.level_names
    s = summarize_loads(frame, f)
    assert list(link_load_heatmap(s, f).data[0].y) == f.level_names
    assert all(r["loaded"] > 0 for r in s.percentiles.to_dict("records"))


def test_fabric_figure_traces(superpod):
    inv = inventory(superpod)
    fig = fabric_figure(superpod, inv)
    assert isinstance(fig, go.Figure)
    n = names(fig)
    assert "GPUs (by scalable unit)" in n and "leaf switches" in n and "spine groups" in n
    assert "nic-leaf cables" in n and "leaf-spine cables" in n
    leaves = next(t for t in fig.data if t.name == "leaf switches")
    assert len(leaves.x) == inv.tiers[0].num_switches  # small: every leaf drawn
    assert leaves.marker.color == tier_color(0)
    cables = next(t for t in fig.data if t.name == "leaf-spine cables")
    assert cables.line.color == tier_color(1) == level_color(3)  # a level takes the colour of the tier above
    assert "16 spine switches" in " ".join(next(t for t in fig.data if t.name == "spine groups").text)
    right = [a.text for a in fig.layout.annotations]
    assert "1,024 GPUs, 128 servers" in right and "16 switches, top tier" in right


def test_fabric_figure_flags_the_oversubscribed_tier():
    fabric = build_fabric(load_spec("h100-100k"))
    fig = fabric_figure(fabric)
    texts = [a.text for a in fig.layout.annotations]
    assert "1,792 switches, <b>7:1 up</b>" in texts
    assert sum("pod" in t for t in texts) >= 3


# --- inventory and oversubscription -----------------------------------------------------------------------

def test_inventory_figure_counts(superpod):
    inv = inventory(superpod)
    fig = inventory_figure(inv)
    sw, cab = fig.data
    assert list(sw.y) == [t.num_switches for t in inv.tiers]
    assert list(cab.x) == [x.name for x in inv.links] and list(cab.y) == [x.num_links for x in inv.links]


def test_oversubscription_figure_data_and_ratio():
    inv = inventory(build_fabric(load_spec("h100-100k")))
    fig = oversubscription_figure(inv)
    assert names(fig) == ["downlink capacity", "uplink capacity"]
    down, up = fig.data
    assert list(down.x) == [t.name for t in inv.tiers]
    assert np.allclose(down.y, [t.down_capacity_Bps / 1e12 for t in inv.tiers])
    assert np.allclose(up.y[:2], [t.up_capacity_Bps / 1e12 for t in inv.tiers[:2]]) and up.y[2] is None
    labels = [a.text for a in fig.layout.annotations]
    assert labels == ["1:1 non-blocking", "<b>7:1</b> oversubscribed", "top tier"]
    assert fig.layout.yaxis.title.text == "capacity per direction (TB/s)"


# --- link loads -------------------------------------------------------------------------------------------

def test_summarize_loads_matches_the_frame(gb200, gb200_estimate):
    frame = gb200_estimate.link_loads(2**30)
    s = summarize_loads(frame, gb200)
    assert s.group_name == "pod" and list(s.grid.index) == list(range(gb200.layout.num_pods))
    # percentiles of the loaded links of each level
    for _, row in s.percentiles.iterrows():
        u = frame.loc[frame["level"] == row["level"], "utilization"]
        assert row["links"] == len(u) and row["loaded"] == int((u > 0).sum())
        if row["loaded"]:
            assert row["p100"] == pytest.approx(u.max()) and row["p50"] == pytest.approx(u[u > 0].median())
    # the grid: the maximum per pod of the link's lower end
    pod = gb200.nodes["pod"][gb200.links["src"][frame["link"].to_numpy()]]
    want = frame.assign(pod=pod).query("pod >= 0").groupby(["pod", "level"], observed=True)["utilization"].max()
    for (p, lv), v in want.items():
        assert s.grid.loc[p, lv] == pytest.approx(v)
    # the hottest link per level is the frame's maximum, named
    for _, h in s.hottest.iterrows():
        u = frame.loc[frame["level"] == h["level"], "utilization"]
        assert h["utilization"] == pytest.approx(u.max())
        assert re.fullmatch(r"[a-z]+[\d.]+", h["src"]) and h["tied"] >= 1
    assert s.attrs["size_bytes"] == 2**30


def test_link_load_distribution_traces(gb200, gb200_estimate):
    frame = gb200_estimate.link_loads(2**30)
    fig = link_load_distribution(frame, gb200)
    assert names(fig) == gb200.level_names  # one box per level, in fabric order
    for t in fig.data:
        u = frame.loc[frame["level"] == t.name, "utilization"]
        busy = u[u > 0]
        assert t.type == "box" and t.marker.color == level_color(gb200.level_names.index(t.name))
        if len(busy):
            assert t.upperfence[0] == pytest.approx(100 * busy.max())
            assert t.median[0] == pytest.approx(100 * busy.median())


def test_link_load_heatmap_traces(gb200, gb200_estimate):
    frame = gb200_estimate.link_loads(2**30)
    s = summarize_loads(frame, gb200)
    fig = link_load_heatmap(s, gb200)
    (hm,) = fig.data
    assert hm.type == "heatmap" and list(hm.y) == gb200.level_names
    z = np.array([[np.nan if v is None else v for v in row] for row in hm.z])
    want = s.grid.T.to_numpy() * 100
    assert np.allclose(np.nan_to_num(z), np.where(want > 0, want, 0).round(2))
    with pytest.raises(ValueError):
        link_load_heatmap(frame)  # a raw frame needs its fabric


def test_a_pod_job_leaves_other_pods_blank(gb200):
    r = estimate(gb200, "all_reduce", [2**30], gpus=gb200.layout.units_per_pod * 72)
    s = summarize_loads(r.link_loads(2**30), gb200)
    assert (s.grid.loc[1:] == 0).all().all() and (s.grid.loc[0].drop("spine-core") > 0).all()
    fig = link_load_heatmap(s, gb200)
    assert all(v is None for row in fig.data[0].z for v in row[1:])  # idle pods: blank cells


# --- curves -----------------------------------------------------------------------------------------------

def test_collective_curves_traces_match_the_result(superpod):
    r = estimate(superpod, "all_reduce", SIZES)
    extra = estimate(superpod, "all_reduce", SIZES, algorithm="hierarchical")
    fig = collective_curves(r, [extra])
    available = [k for k, v in r.candidates.items() if any(v)]
    legend = [t.name for t in fig.data if t.showlegend]
    assert legend == available + ["hierarchical", "auto (fastest)"]
    factor = busbw_factor("all_reduce", r.num_ranks)
    for name in available:
        time_tr, bw_tr = [t for t in fig.data if t.name == name]
        assert list(time_tr.x) == SIZES and time_tr.xaxis == "x" and bw_tr.xaxis == "x2"
        assert np.allclose(time_tr.y, np.array(r.candidates[name]) * 1e6)
        assert np.allclose(bw_tr.y, np.array(SIZES) / np.array(r.candidates[name]) / 1e9 * factor)
    auto_t, auto_bw = [t for t in fig.data if t.name == "auto (fastest)"]
    assert np.allclose(auto_t.y, [x.time_s * 1e6 for x in r.results])
    assert np.allclose(auto_bw.y, [x.busbw_GBps for x in r.results])
    h_time = next(t for t in fig.data if t.name == "hierarchical")
    assert np.allclose(h_time.y, [x.time_s * 1e6 for x in extra.results])
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.title.text == "time (us)"
    assert fig.layout.yaxis2.title.text == "busbw (GB/s)"
    assert list(fig.layout.xaxis.ticktext) == ["8 B", "1 KiB", "32 KiB", "1 MiB", "32 MiB", "1 GiB"]


def test_unavailable_algorithms_have_no_curve(superpod):
    r = estimate(superpod, "all_reduce", SIZES, gpus=16)
    fig = collective_curves(r)
    for name in r.unavailable:
        assert name not in names(fig)


def test_busbw_comparison_one_trace_per_entry(superpod, gb200_estimate):
    r = estimate(superpod, "all_reduce", SIZES)
    fig = busbw_comparison({"a": r, "b": gb200_estimate})
    assert names(fig) == ["a", "b"]
    assert list(fig.data[1].y) == [x.busbw_GBps for x in gb200_estimate.results]


# --- the page ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def superpod_report():
    return build_spec_report("dgx-h100-superpod")


def test_build_runs_the_default_scenarios(superpod_report):
    r = superpod_report
    assert [s.key for s in r.scenarios] == ["cluster", "unit"]  # one pod: the second scope is a unit
    cl, unit = r.scenarios
    assert cl.result.num_ranks == 1024 and unit.result.num_ranks == 256
    sizes = [x.size_bytes for x in cl.result.results]
    assert sizes[0] == 8 and sizes[-1] == 16 * 2**30 and len(sizes) == 32
    assert cl.loads.attrs["size_bytes"] == 2**30
    assert {e.algorithm for e in cl.extra} | set(cl.unavailable) | set(cl.result.candidates) >= {
        "ring", "tree", "hierarchical", "halving_doubling"}
    assert r.source == "bundled spec dgx-h100-superpod (topologies/dgx-h100-superpod.toml)"


def figure_json(page):
    m = re.search(r'<script type="application/json" id="topo-figures">(.*?)</script>', page, flags=re.S)
    return json.loads(m.group(1))


def test_page_is_self_contained(superpod_report):
    page = render_page([superpod_report])
    assert page.count("plotly.js v") == 1  # inlined once
    assert not re.search(r'<(script|img|link|iframe)[^>]+(src|href)=', page)  # nothing to fetch
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    figs = figure_json(page)
    assert len(figs) == len(re.findall(r'<div class="plot" id="fig\d+"', page)) == 9
    for section in ("summary", "fabric", "oversubscription", "loads", "curves"):
        assert f'<section id="{section}">' in page
    # rev75: the footer is where the page tells its reader it fetches nothing; no test read it
    footer = re.search(r"<footer>(.*?)</footer>", page, flags=re.S).group(1)
    assert "Self-contained" in footer and "makes no network request" in footer
    assert re.search(r"plotly\.js v?[\d.]+ is inlined", footer), footer


def test_several_specs_side_by_side(superpod_report, gb200):
    other = build_spec_report("gb200-nvl72-superpod")
    page = render_page([superpod_report, other])
    assert '<section id="comparison">' in page
    assert "grid-template-columns: repeat(2, minmax(0, 1fr))" in page
    table = page[page.index('<section id="comparison">'):page.index('<section id="fabric">')]
    assert "dgx-h100-superpod" in table and "gb200-nvl72-superpod" in table
    assert f"{other.inventory.num_switches:,}" in table
    assert f"{superpod_report.scenarios[0].result.results[-1].busbw_GBps:.1f} GB/s" in table


def evil_spec():
    # a tier's name cannot hold markup (the spec refuses it: tests/test_tiers.py); its switch model can
    d = spec_dict(tiers=[tier("leaf", oversubscription=1, model="<b>leaf</b>"), tier("spine")],
                  name='<script>alert("x")</script>', description="a & b <i>c</i>",
                  source=["javascript:alert(1)", "https://example.org/?a=<x>"])
    return spec_from_dict(d)


def test_spec_strings_are_escaped():
    rep = build_spec_report(evil_spec())
    page = render_page([rep])
    assert '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;' in page
    assert "&lt;b&gt;leaf&lt;/b&gt;" in page and "a &amp; b &lt;i&gt;c&lt;/i&gt;" in page
    assert 'href="javascript' not in page and "javascript:alert(1)" in page
    # raw markup from the spec appears nowhere outside escaped text, in HTML or in the figures' JSON
    html_only = page[page.index("</head>"):page.index('id="topo-figures"')]
    assert "<script>alert" not in html_only and "<b>leaf</b>" not in html_only and "<i>c</i>" not in html_only
    figs = json.dumps(figure_json(page))
    assert "<script>alert" not in figs and "&lt;script&gt;" in figs and "&lt;b&gt;leaf&lt;/b&gt;" in figs


@pytest.mark.parametrize("d, keys", [
    (spec_dict(tiers=[tier("leaf")], cluster={"num_units": 1}), ["cluster"]),  # one switch tier, one unit
    (spec_dict(cluster={"num_units": 1}), ["cluster"]),
    (spec_dict(kind="fat_tree", cluster={"num_units": 3}), ["cluster", "unit"]),
])
def test_small_and_flat_clusters_render(d, keys):
    rep = build_spec_report(spec_from_dict(d))
    assert [s.key for s in rep.scenarios] == keys
    page = render_page([rep])
    assert len(figure_json(page)) == 3 + 3 * len(keys)


def test_bottleneck_caption_names_what_bounds_the_link(superpod_report):
    # tidy13: the caption said "82% utilized" alone, which reads as a link 18% short of saturation; it now gives the
    # factors whose product is the utilization, the same sentence as topo estimate's "# util" line
    # (topo.engine.bottleneck_text, checked against the closed form and the GB200 datasheet in test_cli_estimate.py)
    page = html.unescape(render_page([superpod_report]))
    cl = superpod_report.scenarios[0]
    x = next(r for r in cl.result.results if r.size_bytes == 2**30)
    b = x.bottleneck
    assert b.limit in ("link", "link+protocol")
    product = b.class_efficiency * b.protocol_efficiency * b.fill_share * b.bandwidth_share * b.other_share
    assert product == pytest.approx(b.utilization, rel=1e-9)
    caption = next(m for m in re.findall(r'<p class="caption">(util [^<]*)</p>', page))
    assert caption.startswith(f"util {b.utilization:.0%} at 1 GiB = {b.class_efficiency:.1%} of {b.src} -> {b.dst}'s "
                              f"line rate usable (network efficiency, the profile's) x {b.protocol_efficiency:.1%} "
                              f"carried by {x.algorithm} {x.protocol}"), caption
    assert f"x {b.fill_share:.1%} steady" in caption and f"x {b.bandwidth_share:.1%} of the time" in caption
