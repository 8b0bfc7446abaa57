"""The report of a region (issue 31): the sites and the DCI spans drawn with their loads, as a self-contained page."""

import html
import json
import re


from conftest import run_cli
from topo.engine.region_estimate import estimate_region
from topo.fabric.region import build_region
from topo.report.region import region_figure


def test_the_figure_draws_every_site_and_span_with_its_load():
    r = build_region("two-site-h100", ["interconnect.waves=1"])
    est = estimate_region(r, "all_reduce", [2 ** 30], "hierarchical")
    fig = region_figure(r, est)
    sites = [t for t in fig.data if t.mode == "markers+text"]
    assert len(sites) == 1 and list(sites[0].text) == ["east", "west"]
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == r.num_spans == 1
    # one 800G wave carries 1 GiB each way in the hierarchical all-reduce: its share of the whole time
    row = est.results[0]
    busy = 2 ** 30 / (100e9 * row.time_s)
    assert f"{busy:.0%} busy" in lines[0].text and "1 GiB / 1 GiB each way" in lines[0].text
    assert "dci:east-west" in fig.layout.title.text


def test_a_failed_span_is_drawn_dotted():
    r = build_region("region-1m").with_failures("dci:site-0-site-1")
    fig = region_figure(r, estimate_region(r, "all_reduce", [2 ** 20]))
    lines = [t for t in fig.data if t.mode == "lines"]
    assert sum(t.line.dash == "dot" for t in lines) == 1 and len(lines) == 10


def test_cli_report_of_a_region(tmp_path):
    out = tmp_path / "r.html"
    proc = run_cli("report", "two-site-h100", "-o", str(out), check=True)
    assert "wrote" in proc.stderr
    page = out.read_text()
    figs = json.loads(re.search(r'id="topo-figures">(.*?)</script>', page, flags=re.S).group(1).replace("<\\/", "</"))
    assert len(figs) == 1 and "dci:east-west" in page and "hierarchical" in page
    bad = run_cli("report", "two-site-h100", "--format", "png", "--figure", "capex", "-o", str(tmp_path / "x.png"))
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1


def test_a_region_report_says_what_it_shows(tmp_path):
    # walk6: the region's page had headings and bare tables: no caption said what the drawing's widths and colours
    # or the candidates' columns mean, nor the units, and a --fail was not mentioned anywhere on the page
    out = tmp_path / "r.html"
    run_cli("report", "two-site-h100", "--fail", "east:spine0", "-o", str(out), check=True)
    page = re.sub(r"<script.*?</script>", "", out.read_text(), flags=re.S)
    assert page.count('class="caption"') == 3
    assert "line width by capacity" in page and "colour by the busier direction&#x27;s utilization" in page
    assert "chosen: the fastest" in page and "units: GB = 1e9 bytes" in page
    # walk12: an in-site bound is named by its site as --fail names parts (east:...), and the caption says so
    assert "the slowest site&#x27;s busiest link, SITE:SRC-&gt;DST" in page and "site:..." not in page
    assert re.search(r"<td[^>]*>east:nic\d+\.\d+-&gt;leaf\d+</td>", page) and "site:nic" not in page
    assert "With failures: east:spine0." in page and "(38.4 TB/s without failures)" in page


def test_a_region_cut_apart_is_drawn_with_describes_note_and_no_collective(tmp_path):
    """walk16 (section 178): `report two-site-h100 --fail dci:east-west` refused ("no working DCI route") where
    describe draws the cut. The page now draws the sites and the failed span, says the cut in describe's words, and
    runs no collective (none reaches every GPU across the cut): exit 0, the note on stderr."""
    out = tmp_path / "cut.html"
    proc = run_cli("report", "two-site-h100", "--fail", "dci:east-west", "-o", str(out), check=True)
    cut = "no working DCI route joins these groups of sites: group 1: site east; group 2: site west"
    described = run_cli("describe", "two-site-h100", "--fail", "dci:east-west", check=True).stdout
    assert f"cut apart                   {cut}" in described
    assert f"note: {cut}: the page draws the sites and spans without a collective" in proc.stderr
    page = out.read_text()
    assert f"Cut apart: {cut}." in page and f"Not run: {cut}, so no collective reaches every GPU" in page
    assert "hierarchical_pipelined" not in page  # no candidates table


def test_a_region_report_carries_the_split_path_bound_note():
    """The estimate's notes (the DCI split's MAX_PATHS bound, small50 section 166) reach the page, as `estimate`
    prints them: the 10-site mesh whose ends' route runs a 1 km chain (test_region_chain's region)."""
    from test_region_chain import _mesh_with_a_short_chain
    from topo.fabric.region_inventory import region_inventory
    from topo.report.region import render_region_page
    r = _mesh_with_a_short_chain(10)
    est = estimate_region(r, "all_reduce", [2 ** 30])
    assert est.notes
    page = render_region_page(r, region_inventory(r), est)
    assert all(f"Note: {html.escape(n)}" in page for n in est.notes), est.notes
