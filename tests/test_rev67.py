"""rev67's review of session 2026-12-06h's merges (sections 276-284): each fix's test, seen failing before it."""

import pytest

from conftest import run_cli
from small_regions import mixed_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout

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


# regdp67's tests pass on the code before it (its step is the old one by identity); its 95% need is what changed,
# and it moves only where the slowest share is not the last site ready: small_regions.MIXED_SITES (east the slowest
# share, west the last ready)
def test_region_dp_need_for_95pct_gives_95pct_where_the_slowest_site_is_not_the_last_ready(tmp_path):
    """At the DCI the dp row names for 95% of the pacing site (east, the slowest share), the step is that site's
    step / 0.95: the need is found against the last readiness R (the phase within E + T1 - R, regdp67's closed form).
    Before regdp67 it was found against east's own window (w 0.41 s, where west's is 0.02 s): a DCI that left the
    step well past east's / 0.95."""
    model, job = load_model("llama3-8b"), make_layout(tp=8, dp=128, global_batch=1024, micro_batch=8)
    fast = estimate_across_sites(mixed_region(tmp_path, 12800.0), model, job)
    T_east, T_west = fast.site_step_s["east"], fast.site_step_s["west"]
    assert fast.pacing_site == "east" and T_east > T_west  # the slowest share paces on a fast DCI
    need_Bps = fast.strategies[0].dci_Bps_for_95pct
    at_need = estimate_across_sites(mixed_region(tmp_path, need_Bps * 8 / 1e9), model, job).strategies[0]
    assert at_need.step_time_s == pytest.approx(T_east / 0.95, rel=1e-9)
