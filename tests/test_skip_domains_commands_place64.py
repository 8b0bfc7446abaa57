"""``--skip-domains`` where users meet it (place64): a region's sites, ``topo plan`` and ``topo report`` (placement
fields in ``--layout``), and the spare rack a full cluster needs to skip one.

One rule for the indices: a domain index is one fabric's (``mapping._map`` refuses one the fabric lacks); a region
runs the same share on every site (``multisite.estimate_across_sites``), so its indices are within a site."""

import json

from conftest import run_cli
from small_regions import two_sites

REGION = two_sites("two-nvl", "two sites of 3 GB200 NVL72 racks, 40 km apart (a test region)", "gb200-nvl72-superpod", 3)
JOB = ["--model", "qwen3-30b-a3b", "--gpus", "256", "--global-batch", "256", "--ep", "128", "--layout",
       "ep_dispatcher=deepep", "--json"]
PLAN = ["gb200-nvl72-superpod", "--set", "cluster.num_units=3", "--model", "qwen3-30b-a3b"]
LAYOUT = "dp=128,ep=128,global_batch=128,ep_dispatcher=deepep"


def test_a_failed_rack_in_the_second_site_is_refused_and_skipped_there(tmp_path):
    """Each site runs a 128-GPU share (EP 128 over two racks at 64 a rack). A failed NVLink switch in west was
    timed on east's healthy fabric, unsaid; it is refused with the site named and --skip-domains [1] offered, and
    skipping it the share runs on racks 0 and 2, alike to racks 0 and 1 (one scalable unit, rail-optimized), so the
    step is the healthy region's to the last bit (place61's closed form, per site)."""
    region = tmp_path / "two-nvl.toml"
    region.write_text(REGION)
    bad = run_cli("train", str(region), *JOB[:-1], "--fail", "west:nvswitch1")
    assert bad.returncode == 2 and bad.stderr.startswith(
        "error: --fail: site west: nvswitch1 failed: its NVLink domain (GPUs 72 to 143) holds 64 of the job's GPUs "
        "(0 to 135), which reach each other only through it; allowed: --skip-domains [1] (the job on the other "
        "domains, 64 of each), or "), bad.stderr
    healthy = json.loads(run_cli("train", str(region), *JOB, check=True).stdout)
    skipped = json.loads(run_cli("train", str(region), *JOB, "--fail", "west:nvswitch1", "--skip-domains", "1",
                                 check=True).stdout)
    assert skipped["one_site_step_s"] == healthy["one_site_step_s"]
    assert skipped["one_site"]["layout"]["skip_domains"] == [1]


def test_a_region_takes_indices_within_a_site(tmp_path):
    region = tmp_path / "two-nvl.toml"
    region.write_text(REGION)
    out = run_cli("train", str(region), *JOB, "--skip-domains", "3")
    assert out.returncode == 2 and out.stderr == (
        "error: --skip-domains: 3: the fabric has 3 NVLink domains; allowed: domain indices 0 to 2 (in a region, "
        "indices within a site: every site's share is placed alike)\n")


def test_plan_takes_skip_domains_in_its_layout():
    """topo plan's MFU is topo train's step on the fabric as installed: the job skipping rack 1 runs on racks 0 and
    2, alike to 0 and 1, so the MFU is the same; a rack the fabric lacks is one line naming --layout."""
    plain = json.loads(run_cli("plan", *PLAN, "--layout", LAYOUT, "--no-collectives", "--json", check=True).stdout)
    skip = json.loads(run_cli("plan", *PLAN, "--layout", LAYOUT + ",skip_domains=[1]", "--no-collectives", "--json",
                              check=True).stdout)
    assert skip["compute"]["mfu"] == plain["compute"]["mfu"]
    bad = run_cli("plan", *PLAN, "--layout", LAYOUT + ",skip_domains=[0,3]", "--no-collectives")
    assert bad.returncode == 2 and bad.stderr == ("error: --layout: skip_domains: 3: the fabric has 3 NVLink domains; "
                                                  "allowed: domain indices 0 to 2\n")


def test_report_names_its_layout_flag_for_a_domain_the_fabric_lacks(tmp_path):
    bad = run_cli("report", "gb200-nvl72-superpod", "--set", "cluster.num_units=3", "--train", "qwen3-30b-a3b",
                  "--layout", LAYOUT + ",skip_domains=[7]", "-o", str(tmp_path / "r.html"))
    assert bad.returncode == 2 and bad.stderr == ("error: --layout: skip_domains: 7: the fabric has 3 NVLink domains; "
                                                  "allowed: domain indices 0 to 2\n")


def test_skipping_a_rack_of_a_full_cluster_says_the_spare_it_needs():
    """walk23's 7,168 GB200 at 64 a rack on exactly 112 racks, rack 5 skipped: 111 x 64 = 7,104 < 7,168, so the
    placement falls to 72 a rack; the note says ceil(7,168 / 64) - 111 = 1 more rack keeps 64 of each."""
    from topo.training.mapping import default_placement
    from topo.training.parallel import ParallelLayout
    lay = ParallelLayout(dp=7168, ep=64, global_batch=7168, skip_domains=(5,))
    placed, note = default_placement(lay, 72, 112 * 72)
    assert placed.gpus_per_domain_used == 72
    assert note.endswith("; at 64 of each it needs 1 more NVLink domain in the fabric (spare racks: the 111 left "
                         "hold 7,104 of the job's 7,168 GPUs at 64 of each; grow the spec's [cluster])")
    assert default_placement(lay, 72, 113 * 72)[0].gpus_per_domain_used == 64  # the spare: 112 x 64 >= 7,168
