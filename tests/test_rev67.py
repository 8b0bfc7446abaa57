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


def test_plan_and_a_regions_report_name_an_unknown_profile_by_its_flag():
    """tidy67's ``topo plan --profile`` and regprof68's ``report REGION --profile`` said the library's key
    ('error: profile: ...'); rev66 had made train and report of one spec say --profile, as estimate does."""
    for argv in (("plan", "dgx-h100-superpod", "--profile", "nosuch"),
                 ("plan", "dgx-h100-superpod", "--profile", "nosuch", "--model", "llama3-8b", "--no-collectives"),
                 ("report", "two-site-h100", "--profile", "nosuch", "-o", "r.html")):
        bad = run_cli(*argv)
        assert bad.returncode == 2 and bad.stderr.startswith("error: --profile: 'nosuch': unknown profile"), \
            (argv, bad.stderr)


def test_plan_refuses_a_profile_that_prices_nothing():
    """``topo plan --no-collectives`` without --model prices no collective: --profile was silently unused."""
    bad = run_cli("plan", "dgx-h100-superpod", "--profile", "hopper+efa", "--no-collectives")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --profile: prices the plan's collectives and "
                                                         "--model's step; --no-collectives without --model"), bad.stderr
