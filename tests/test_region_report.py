"""The report of a region (issue 31): the sites and the DCI spans drawn with their loads, as a self-contained page."""

import json
import re

import pytest

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
    row = est.rows[0]
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
