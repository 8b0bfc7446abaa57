"""``topo report`` in a subprocess: the default 100k-GPU report within its size budget, one-line errors,
files written whole or not at all, single figures as SVG/PNG."""

import importlib.util

import pytest

from conftest import ROOT, run_cli
from topo.report.browser import find_chromium


def test_default_report_is_small_and_offline(tmp_path):
    # (its generation time is measured by benchmarks/bench_report.py, not here)
    proc = run_cli("report", cwd=tmp_path, check=True)  # no argument: the bundled 100k-GPU cluster
    out = tmp_path / "topo-report.html"
    assert out.is_file() and proc.stdout == ""
    assert proc.stderr.startswith("wrote topo-report.html (")
    size = out.stat().st_size
    assert size < 10e6, f"the default report is {size / 1e6:.1f} MB (budget 10 MB)"
    page = out.read_text()
    assert "<title>topo report: h100-100k</title>" in page and "100,352" in page
    assert "7:1" in page
    assert out.stat().st_mode & 0o044  # readable by others, as a plain file would be
    assert not list(tmp_path.glob(".*.tmp"))


def test_several_specs_and_overrides(tmp_path):
    out = tmp_path / "cmp.html"
    proc = run_cli("report", "dgx-h100-superpod", "rail-only-h100-16k", "--set", "cluster.num_units=2",
                   "-o", str(out), check=True)
    assert "wrote" in proc.stderr
    page = out.read_text()
    assert "topo report: dgx-h100-superpod vs rail-only-h100-16k" in page
    assert '<section id="comparison">' in page and "--set cluster.num_units=2" in page


@pytest.mark.parametrize("args, message", [
    (["no-such-spec"], "error: no-such-spec: no such spec file or bundled spec"),
    (["dgx-h100-superpod", "--set", "cluster.num_units=0"], "cluster.num_units: must be >= 1, got 0"),
    (["dgx-h100-superpod", "-o", "missing/dir/r.html"], "error: missing/dir/r.html: the folder 'missing/dir' does "
                                                        "not exist"),
    (["dgx-h100-superpod", "h100-100k", "--format", "svg"], "error: --format: --format svg writes one figure of "
                                                             "one SPEC, got 2 SPECs"),
    (["dgx-h100-superpod", "--format", "png", "--figure", "comparison"],
     "error: --figure: the comparison figure needs two or more SPECs"),
    (["dgx-h100-superpod", "--format", "pdf"], "error: topo report: argument --format: invalid choice"),
    (["dgx-h100-superpod", "--format", "svg", "--figure", "power", "--fail", "spine0"],
     "error: --fail: --figure power shows the planner's power, cost and goodput, which failed parts do not change"),
    (["dgx-h100-superpod", "--format", "svg", "--figure", "fabric", "--plan-file", "p.toml"],
     "error: --plan-file: --plan-file applies to the planner's figures (power, capex, ownership, goodput)"),
    # --figure or --scenario that would be ignored: the HTML report (the default format) would be written instead
    # of the one figure asked for
    (["dgx-h100-superpod", "--figure", "capex"], "error: --figure: --figure capex picks the one figure of --format "
                                                 "png or svg; add --format png or --format svg"),
    (["dgx-h100-superpod", "--scenario", "pod"], "error: --scenario: --scenario applies to --format png|svg with "
                                                 "--figure loads|heatmap|curves"),
    (["dgx-h100-superpod", "--format", "svg", "--figure", "fabric", "--scenario", "pod"],
     "error: --scenario: --scenario applies to --format png|svg with --figure loads|heatmap|curves"),
    # --train, --layout and --plan with a single figure that does not use them (the figure was written without them)
    (["dgx-h100-superpod", "--format", "svg", "--figure", "inventory", "--train", "llama3-8b", "--layout",
      "tp=8,dp=16,global_batch=128"], "error: --train: --train and --layout add a section to the HTML report; "
                                      "--format svg writes one figure, which does not use them"),
    (["dgx-h100-superpod", "--format", "png", "--layout", "tp=8,dp=16,global_batch=128"],
     "error: --layout: --train and --layout add a section to the HTML report"),
    (["dgx-h100-superpod", "--format", "svg", "--figure", "inventory", "--plan"],
     "error: --plan: --plan adds the planner's section to the HTML report; --figure inventory does not use it"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = run_cli("report", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and message in proc.stderr and proc.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a partial file


@pytest.mark.skipif(importlib.util.find_spec("kaleido") is None or find_chromium() is None,
                    reason="--format svg needs kaleido and a Chromium (pip install kaleido; apt-get install chromium)")
def test_one_figure_as_svg(tmp_path):
    proc = run_cli("report", "dgx-h100-superpod", "--format", "svg", "--figure", "oversubscription",
                   cwd=tmp_path, check=True)
    out = tmp_path / "topo-oversubscription.svg"
    assert "wrote topo-oversubscription.svg" in proc.stderr
    svg = out.read_text()
    assert svg.startswith("<!-- written by topo -->\n<svg") and "downlink capacity" in svg and "1:1 non-blocking" in svg


@pytest.mark.skipif(importlib.util.find_spec("kaleido") is None or find_chromium() is None,
                    reason="--format svg needs kaleido and a Chromium (pip install kaleido; apt-get install chromium)")
def test_a_planner_figure_alone_for_several_specs(tmp_path):
    # the planner's figures are exported on their own, one bar per SPEC, with the plan file's overrides (a wrong
    # key in it is named as topo plan names it)
    (tmp_path / "p.toml").write_text("[workload]\ndays = 50\n")
    proc = run_cli("report", "dgx-h100-superpod", "h100-100k-islands", "--format", "svg", "--figure", "capex",
                   "--plan-file", "p.toml", cwd=tmp_path, check=True)
    assert "wrote topo-capex.svg" in proc.stderr
    svg = (tmp_path / "topo-capex.svg").read_text()
    assert "Capex by part" in svg and "dgx-h100-superpod" in svg and "h100-100k-islands" in svg
    (tmp_path / "bad.toml").write_text("[workload]\ndays = -1\n")
    proc = run_cli("report", "--format", "svg", "--figure", "goodput", "--plan-file", "bad.toml", "-o", "g.svg",
                   cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "bad.toml" in proc.stderr
    assert not (tmp_path / "g.svg").exists()


def test_report_is_listed_in_help():
    proc = run_cli("--help", check=True)
    assert "report" in proc.stdout
    proc = run_cli("report", "--help", check=True)
    assert "-o FILE" in proc.stdout and "--format" in proc.stdout
    assert (ROOT / "topo" / "cli" / "report.py").is_file()


def test_the_page_says_what_its_colours_mean(tmp_path):
    """The header's colour line names each tier in the colour its bars have in the oversubscription figure (so
    the key cannot drift from the figures), and says what red marks with the thresholds the tables use."""
    import json
    import re
    out = tmp_path / "r.html"
    run_cli("report", "dgx-h100-superpod", "--set", "fabric.tiers[leaf].oversubscription=2", "-o", str(out),
            check=True)
    page = out.read_text()
    legend = re.search(r'<p class="legend">(.*?)</p>', page).group(1)
    keyed = dict((label.strip(" ,"), colour) for colour, label in
                 re.findall(r'<span class="swatch" style="background:(#\w+)"></span>([^<:;]+)', legend))
    figs = json.loads(re.search(r'id="topo-figures">(.*?)</script>', page, flags=re.S).group(1))
    bars = next(f for f in figs.values() if any(t.get("name") == "downlink capacity" for t in f["data"]))
    down = next(t for t in bars["data"] if t["name"] == "downlink capacity")
    assert down["x"] == ["leaf", "spine"]
    assert [keyed[name] for name in down["x"]] == down["marker"]["color"]
    assert "GPUs and NVLink" in keyed and "PCIe" in keyed
    assert keyed["red marks what needs a look"] == "#B2182B" and 'class="hot">2:1' in page  # the 2:1 leaf, in red
    assert "a link at 80% utilization or more" in legend and "slowed 1.2x or more" in legend
