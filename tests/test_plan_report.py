"""The planner's report section draws the plan's own numbers, escapes names, and joins `topo report --plan`."""

import pytest

import topo
from topo.plan import plan
from topo.report import plan_figures as P
from conftest import run_cli, spec_dict


@pytest.fixture(scope="module")
def two():
    return [plan("dgx-h100-superpod", collectives=False), plan("rail-only-h100-16k", collectives=False)]


def test_stacked_bars_hold_the_breakdowns(two):
    fig = P.power_figure(two)
    assert fig.layout.barmode == "stack"
    total = [sum(t.y[i] for t in fig.data) for i in range(2)]
    assert total == pytest.approx([r.power.facility_power_W / 1e6 for r in two])
    fig = P.capex_figure(two)
    assert [sum(t.y[i] for t in fig.data) for i in range(2)] == pytest.approx([r.capex.capex_usd / 1e6 for r in two])
    assert {t.name for t in fig.data} >= {"storage", "front-end network", "cooling equipment", "facility"}
    fig = P.ownership_figure(two)
    assert [sum(t.y[i] for t in fig.data) for i in range(2)] == pytest.approx([r.ownership.tco_usd / 1e6
                                                                                for r in two])


def test_every_part_of_a_stack_has_its_own_colour(two):
    # capex has 8 parts: with a palette shorter than that, servers and cooling were both blue
    for fig in (P.power_figure(two), P.capex_figure(two), P.ownership_figure(two)):
        colours = [t.marker.color for t in fig.data]
        assert len(set(colours)) == len(colours), [(t.name, t.marker.color) for t in fig.data]


def test_goodput_curve_peaks_at_youngs_interval(two):
    fig = P.goodput_figure(two[:1])
    line, mark = fig.data
    r = two[0].reliability
    assert max(line.y) == pytest.approx(r.goodput, abs=1e-3)
    assert mark.x[0] == pytest.approx(r.checkpoint_interval_s / 60)


def test_bom_table_and_escaping():
    d = spec_dict(name="<script>x</script>")
    d["fabric"]["tiers"][0]["model"] = "QM9700"
    d["fabric"]["tiers"][1]["model"] = "QM9700"
    r = plan(topo.spec_from_dict(d), collectives=False)
    out = P.plan_section([r], lambda fig, kind: f'<div data-figure="{kind}"></div>')
    assert "<script>x" not in out and "&lt;script&gt;x" in out
    for s in r.bom.switches:
        assert f"<td>{s.count:,}</td>" in out
    assert out.count('data-figure="plan-') == 6  # power, capex, ownership, goodput, price sensitivity, build (32)
    assert 'data-figure="plan-tornado"' in out
    # the side-by-side table and the sourced figures (each with its status and source)
    assert "cost per GPU-hour" in out and "first job-stopping optics failure" in out and "floor area" in out
    for f in r.inputs:
        assert f"<td class=\"l\">{f['key']}</td>" in out
    assert any(f["key"] == "economics.grid_kg_co2_per_kWh" for f in r.inputs)


def test_report_cli_includes_the_plan_section(tmp_path):
    out = tmp_path / "r.html"
    run_cli("report", "dgx-h100-superpod", "--plan", "-o", str(out), check=True)
    page = out.read_text()
    assert 'id="plan"' in page and 'href="#plan"' in page and page.count('data-figure="plan-') == 6


def test_the_report_shows_every_cost_range(two):
    # the total's error bar runs from every price at its low end to every price at its high end (issue 22)
    for fig, line in ((P.capex_figure(two), "capex_usd"), (P.ownership_figure(two), "tco_usd")):
        bars = [t.error_y for t in fig.data if t.error_y.array is not None]
        assert len(bars) == 1
        for i, r in enumerate(two):
            low, expected, high = r.costs.line(line)
            assert bars[0].array[i] == pytest.approx((high - expected) / 1e6)
            assert bars[0].arrayminus[i] == pytest.approx((expected - low) / 1e6)
    out = P.plan_section(two, lambda fig, kind: "")
    low, expected, high = two[0].costs.line("cost_per_gpu_hour_usd")
    assert f"${expected:,.2f} (${low:,.2f}-${high:,.2f})" in out
    table = P.price_ranges_table_html(two[0])
    assert "facility.capex_usd_per_W" in table and "Cushman &amp; Wakefield" in table
