"""tidy70's fixes (walk29's and goodput69's leftovers, sections 302 and 294): each one rule in one place."""

import json

import pytest

from conftest import run_cli
from small_regions import region_file, two_sites


def _step(*flags):
    return json.loads(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "1", "--pp", "8",
                              "--dp", "1", *flags, "--json", check=True).stdout)


def test_a_large_pipeline_bubble_is_noted_with_the_steps_own_share():
    """walk29 Left 5: pp 8 with 2 micro-batches a replica printed a bubble of 72% and an MFU of 2.6% without a
    word. The note uses the step's own bubble (``step.bubble_s``: (pp - 1) / vpp micro-batch times) against its
    compute; GPipe (Huang et al. 2019, arXiv 1811.06965 sec. 2.3) found the bubble negligible from 4 micro-batches
    a stage (M >= 4K), where (K - 1) / M < 1/4 of the compute. Here 7 micro-batch times idle against 2 of compute:
    noted with the step's share; at 32 micro-batches (7 / 32 < 1/4) no note."""
    d = _step("--global-batch", "2")
    b = d["breakdown_s"]
    assert b["bubble"] / b["compute"] == pytest.approx(7 / 2, rel=0.02)  # no exposed TP/CP/EP on pp alone
    note = next(n for n in d["notes"] if n.startswith("pipeline bubble"))
    assert f"{b['bubble'] / d['step_time_s']:.0%} of the step" in note, note
    assert "--global-batch" in note and "--search" in note, note
    assert "28 micro-batches" in note, note  # 4 x (pp - 1) / vpp
    text = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "1", "--pp", "8", "--dp", "1",
                   "--global-batch", "2", check=True).stdout
    assert "note: pipeline bubble" in text
    quiet = _step("--global-batch", "32")
    assert not [n for n in quiet["notes"] if n.startswith("pipeline bubble")], quiet["notes"]


@pytest.fixture(scope="module")
def nvl_region(tmp_path_factory):
    """Two GB200 NVL72 sites, east 16 racks and west 8 (walk29's 448 + 448 + 224, scaled down)."""
    return region_file(tmp_path_factory, two_sites("tidy70", "two NVL72 sites", "gb200-nvl72-superpod", 16, 8),
                       "tidy70")


def test_a_failed_racks_skip_that_the_filled_dp_would_refuse_names_dp_in_its_first_line(nvl_region):
    """walk29 Left 6, under equal shares (its premise: every site runs the smallest site's share): `--fail
    east:nvswitch3` offered `--skip-domains [3]`, and with dp filled from the GPUs that was refused in turn (west's 8
    racks less rack 3: 7 x 72 = 504 GPUs, which tp 8 x pp 4 = 32 does not divide), naming `--dp N` only then. The
    first line now says `--dp 30` with it (2 sites x floor(504 / 32) = 2 x 15), and the pair runs. On one site (32
    racks, 31 x 72 = 2,232 past rack 3) alike: `--dp 69`; with --dp given, no dp named."""
    job = ("train", nvl_region, "--model", "llama3-8b", "--tp", "8", "--pp", "4", "--fail", "east:nvswitch3",
           "--shares", "equal", "--gpus-per-domain-used", "72")  # tidy122: every GPU of each rack by hint (the
    # fill without one is 64 of each, 7 x 64 = 448 past rack 3, which 32 divides: the skip alone then runs)
    err = run_cli(*job, "--global-batch", "144").stderr
    first = err.strip().splitlines()[0]
    assert "--skip-domains [3] (the job on the other domains, 72 of each) with --dp 30 (" in first, first
    assert "504" in first and "32 does not divide" in first, first
    run_cli(*job, "--skip-domains", "3", "--dp", "30", "--global-batch", "120", check=True)
    one = ("train", "gb200-nvl72-superpod", "--model", "llama3-8b", "--tp", "8", "--pp", "4", "--fail", "nvswitch3",
           "--gpus-per-domain-used", "72")
    err = run_cli(*one, "--global-batch", "4032").stderr
    assert "--skip-domains [3] with --dp 69 (" in err and "2,232" in err, err
    given = run_cli(*one, "--dp", "72", "--global-batch", "4032").stderr
    assert "--skip-domains [3]" in given and "with --dp" not in given, given


def test_a_failed_racks_skip_under_by_size_shares_needs_no_dp_and_refills_each_sites_share(nvl_region):
    """skip72: under the by-size default the same refusal offered tidy70's `--dp 30` (equal-share words), and the
    skip alone was refused ("needs GPUs 0 to 583, but the fabric has 576"): the split counted west's whole 576 GPUs,
    not the 7 x 72 = 504 its placement holds past rack 3. Each site's share is now capped by what the placement
    holds there (east 15 x 72 = 1,080, west 504: 33 + 15 = 48 replicas of 32 GPUs at most, and 144 / 48 = 3), so
    the skip alone is the way, said with the dp it refills (48, split 1,080 : 504, largest remainder: 32.7 -> 33,
    15.3 -> 15); the command runs at exactly those shares."""
    job = ("train", nvl_region, "--model", "llama3-8b", "--tp", "8", "--pp", "4", "--fail", "east:nvswitch3",
           "--global-batch", "144")
    first = run_cli(*job).stderr.strip().splitlines()[0]
    assert "--skip-domains [3] (a dp left to fill the GPUs is then 48, the replicas split by what each site holds " \
           "past the skipped domain: east 33, west 15)" in first, first
    assert "--dp" not in first and "smallest site" not in first, first
    d = json.loads(run_cli(*job, "--skip-domains", "3", "--json", check=True).stdout)
    assert d["site_dp"] == {"east": 33, "west": 15}, d["site_dp"]


def test_a_region_searchs_placement_notes_each_name_the_site_whose_fabric_places_the_share_so(nvl_region):
    """walk29 Left 3: a region search said two contradictory placement notes, both "(west's)": 64 of each rack and
    every GPU of the racks. Every row is the same share (576 GPUs here, west's 8 racks): west places it at all 72 of
    each rack (8 x 64 = 512 < 576), east (16 racks) at 64 of each (9 racks), so the notes differ by site, not by
    row. Each is now said as its own site's. (regsearch72: the search now ranks the by-size shares by default, so
    this premise, every site the same share, is asked for with `--shares equal`.)"""
    out = run_cli("train", nvl_region, "--model", "llama3-8b", "--global-batch", "1152", "--search", "--top", "2",
                  "--shares", "equal", "--gpus", "1152", check=True).stdout  # tidy122: west's 576 by --gpus
    notes = [line for line in out.splitlines() if "placement:" in line]
    assert len(notes) == 2, notes
    every = next(n for n in notes if "every GPU of the 72-GPU" in n)
    some = next(n for n in notes if "64 of each 72-GPU" in n)
    assert every.startswith("note: one site's share (west's): "), every
    assert some.startswith("note: one site's share (east's): "), some


def test_a_regions_report_attaches_its_plan_and_says_why_not_its_job(tmp_path):
    """walk29 Left 2: `topo report REGION --plan` was one error line, so the board's page had neither the costs nor
    the job. --plan now attaches the region's plan (`topo plan REGION`'s text, every site's power, capex, TCO and
    the DCI's bill) to the page. --train without --layout is refused, the line saying what is missing (report81: with
    both and --plan the job is planned across the sites, test_region_report_job_report81)."""
    out = tmp_path / "r.html"
    run_cli("report", "two-site-h100", "--plan", "-o", str(out), check=True)
    page = out.read_text()
    planned = run_cli("plan", "two-site-h100", check=True).stdout
    assert 'id="plan"' in page
    for line in ("DCI cost over 5 years", "facility power              6.5 MW (sites and DCI)"):
        assert line in planned and line in page, line
    bad = run_cli("report", "two-site-h100", "--train", "llama3-8b", "-o", str(tmp_path / "t.html"))
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert "--train with --layout L and --plan" in bad.stderr, bad.stderr


def test_train_with_a_failed_nic_says_the_stop_comes_first_and_where_it_is_priced():
    """goodput69: a failed NIC stops the job (Llama 3 Table 5 counts NIC failures among the interruptions, as
    `topo plan`'s failure impact says: "nic0.0 stops the job ..."), but `topo train --fail nic0.0` showed only the
    step after the restart. Its text and --json now say the stop, that the step shown is the one after the restart,
    and why train does not price the stop: the checkpoint's write and reload, which set it, are the plan's storage
    sizing (its goodput), with the command that gives it. No such note without a NIC failed."""
    job = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch", "256")
    d = json.loads(run_cli(*job, "--fail", "nic0.0", "--json", check=True).stdout)
    note = next(n for n in d["notes"] if n.startswith("nic0.0 stops the job"))
    assert "after the restart" in note and "topo plan dgx-h100-superpod --model llama3-8b" in note, note
    assert "storage" in note, note
    command = note[note.index("topo plan "):note.index(" gives the job's goodput")].split()[1:]
    planned = run_cli(*command, check=True).stdout
    assert "goodput" in planned and "stops the job" in planned
    text = run_cli(*job, "--fail", "nic0.0", check=True).stdout
    assert "note: nic0.0 stops the job" in text
    leaf = json.loads(run_cli(*job, "--fail", "leaf0", "--json", check=True).stdout)
    assert not [n for n in leaf["notes"] if "stops the job" in n]
