"""``topo plan`` / ``topo report`` with a failed NVLink switch that cuts a rack's GPUs apart (place64's Left 1): their
own collectives over every GPU cannot run; the line says what the user can run instead (plan: ``--no-collectives``;
report: tidy67 writes the page with the cut named on it), and the way out it names works."""

from conftest import run_cli

SPEC, FAIL = "gb200-nvl72-superpod", ["--fail", "nvswitch1"]


def test_plan_names_no_collectives_and_it_runs():
    bad = run_cli("plan", SPEC, *FAIL)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert bad.stderr.startswith("error: --fail: ") and "allowed: --no-collectives (the plan of the failed fabric " \
        "without them: its degraded bisection, power and cost)" in bad.stderr, bad.stderr
    ok = run_cli("plan", SPEC, *FAIL, "--no-collectives", check=True)
    assert "note: with failed parts (nvswitch1): nvswitch1 failed: its NVLink domain (GPUs 72 to 143), whose GPUs " \
        "reach each other only through it; the network figures (bisection, cross-pod collectives) are those of the " \
        "failed fabric" in ok.stdout  # tidy71: the cut named, as describe names it


def test_report_writes_the_page_with_the_cut_named(tmp_path):
    """tidy67: a user who asked for a page gets it, the cut named on it (which GPUs, which failed part): the fabric,
    its degraded bisection and what still runs are drawn, the all-reduce over every GPU is not (no route carries
    it); before, the report wrote no page and named commands to run instead."""
    out = tmp_path / "r.html"
    ok = run_cli("report", SPEC, *FAIL, "-o", str(out), check=True)
    cut = "nvswitch1 failed: its NVLink domain (GPUs 72 to 143), whose GPUs reach each other only through it: " \
          "GPU 143 cannot reach GPU 72: every path crosses failed parts (gpu143 -&gt; nvswitch1, nvlink; failures: " \
          "nvswitch1)"  # tidy68: the failed switch's whole domain, as train's refusal names it
    page = out.read_text()
    assert f"<b>{cut}</b>: no route carries a collective over the GPUs it names" in page
    # both scopes (every GPU; the first unit, whose rack 1 the failed switch cuts) are cut: no load cell, a cut cell
    assert "all_reduce of" not in page and "<h3>gb200-nvl72-superpod: cut apart</h3>" in page
    assert "<h3>gb200-nvl72-superpod</h3>" in page  # the summary, fabric and oversubscription cells are drawn
    assert "note: gb200-nvl72-superpod: nvswitch1 failed: its NVLink domain (GPUs 72 to 143)" in ok.stderr, ok.stderr


def test_report_of_two_designs_names_each_cut(tmp_path):
    """Two SPECs with a --set: one page, each design's cut in its own summary and the comparison's "-" where the
    whole cluster's all-reduce cannot run (rev65's commands are no longer needed: the page is written)."""
    specs = ["gb200-nvl72-superpod", "gb300-nvl72-superpod"]
    out = tmp_path / "r.html"
    ok = run_cli("report", *specs, "--set", "cluster.num_units=3", *FAIL, "-o", str(out), check=True)
    page = out.read_text()
    assert page.count("<th class=\"l\">cut apart</th>") == 2, ok.stderr
    assert ok.stderr.count(": the page names the cut") == 2, ok.stderr


def test_report_figure_of_a_cut_scope_is_one_line(tmp_path):
    """A png/svg figure of a collective the cut stops has nothing to draw: one line naming --fail and its value."""
    bad = run_cli("report", SPEC, *FAIL, "--format", "svg", "--figure", "curves", "-o", str(tmp_path / "c.svg"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert bad.stderr.startswith("error: --fail: nvswitch1 cut the cluster scope's GPUs apart (nvswitch1 failed: "
                                 "its NVLink domain (GPUs 72 to 143)"), bad.stderr
    assert not (tmp_path / "c.svg").exists()
