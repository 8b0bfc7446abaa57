"""rev67's review of session 2026-12-06h's merges (sections 276-284): each fix's test, seen failing before it."""

from conftest import run_cli

# place64's cut: a failed NVLink switch of a GB200 NVL72 rack cuts its GPUs apart (tests/test_cut_apart_plan_report_
# tidy65.py's case)
CUT_SPEC, CUT = "gb200-nvl72-superpod", ["--fail", "nvswitch1"]


def test_report_plan_of_a_cut_fabric_writes_the_page(tmp_path):
    """tidy67 writes a cut fabric's page, the cut named on it; with --plan the planner's own collectives (which the
    page's plan section never draws: its network figures are the report's) stopped at the cut after the note that
    the page is written: 'error: --fail: GPU 143 cannot reach GPU 72' and no page."""
    out = tmp_path / "r.html"
    ok = run_cli("report", CUT_SPEC, *CUT, "--plan", "-o", str(out))
    assert ok.returncode == 0, ok.stderr
    page = out.read_text()
    assert "no route carries a collective over the GPUs it names" in page
    assert "goodput" in page.lower()  # the plan's section is on it
