"""A calibrated profile across the sites of a region (regprof68): it prices each site's in-site collectives and
never the DCI phase (another network: its spans, borders and NICs price it), and a calibrated file of a network no
site is on is refused in one line.

The region: two sites of one DGX H100 scalable unit (the bundled dgx-h100-superpod spec at cluster.num_units=1,
InfiniBand NDR), 40 km apart (tests/small_regions.py). The profile files are as ``topo calibrate`` writes them
(kind user, a base, the network efficiency it overrides), as in tests/test_prof66.py.
"""

import json

import pytest

from conftest import run_cli
from small_regions import two_sites
from topo import build_fabric, load_spec
from topo.engine.estimate import estimate
from topo.engine.region_estimate import PROFILE_PRICES, estimate_region
from topo.fabric.region import build_region

REGION = two_sites("one-su", "two sites of 1 DGX H100 scalable unit, 40 km apart (a test region)",
                   "dgx-h100-superpod", 1)
GIB = 2 ** 30


def _profile(tmp_path, name: str, base: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[profile]\nkind = "user"\nname = "{name}"\nbase = "{base}"\n'
                    '[network_efficiency]\nvalue = 0.5\nsource = "a test"\nfitted = true\nfitted_on = "a test log"\n')
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("regprof68")
    (d / "one-su.toml").write_text(REGION)
    return {"region": str(d / "one-su.toml"), "half": _profile(d, "half-net", "nccl"),
            "ib": _profile(d, "ib-half", "hopper+infiniband_ndr"), "roce": _profile(d, "roce-half", "hopper+roce")}


def test_profile_prices_the_in_site_phases_not_the_dci(files):
    """The hierarchical all-reduce's in-site reduce-scatter and all-gather are one site's estimate with the same
    profile, to the digit; the DCI phase is the same with and without it (no profile term prices the spans)."""
    region = build_region(files["region"])
    site = build_fabric(load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    base = estimate_region(region, "all_reduce", [GIB], "hierarchical")
    mine = estimate_region(region, "all_reduce", [GIB], "hierarchical", profile=files["half"])
    assert (base.profile, mine.profile) == (["hopper+infiniband_ndr"], ["half-net"])
    assert mine.profile_prices == PROFILE_PRICES and "not the DCI phase" in PROFILE_PRICES
    for phase, coll in (("rs", "reduce_scatter"), ("ag", "all_gather")):
        one = estimate(site, coll, [GIB], profile=files["half"]).results[0]
        got = mine.results[0].phases[phase]
        assert (got["latency_s"], got["bandwidth_s"]) == (one.latency_s, one.bandwidth_s)
    assert mine.results[0].phases["rs"]["bandwidth_s"] > 1.2 * base.results[0].phases["rs"]["bandwidth_s"]
    assert mine.results[0].phases["dci"] == base.results[0].phases["dci"]


def test_estimate_region_cli_says_the_profile_and_what_it_priced(files):
    out = run_cli("estimate", files["region"], "-b", "1G", "-e", "1G", "--profile", files["ib"], check=True).stdout
    assert "collectives priced with profile ib-half (--profile to change)" in out
    assert "not the DCI phase" in out
    doc = json.loads(run_cli("estimate", files["region"], "-b", "1G", "-e", "1G", "--profile", files["half"],
                             "--json", check=True).stdout)
    assert doc["profile"] == ["half-net"] and doc["profile_prices"] == PROFILE_PRICES


def test_train_across_sites_profile_leaves_the_dci_phase(files):
    """The share's step moves with the profile; the dp strategy's cross-site phase does not."""
    job = ("train", files["region"], "--model", "llama3-8b", "--tp", "8", "--dp", "64", "--global-batch", "512",
           "--micro-batch", "8", "--json")
    base = json.loads(run_cli(*job, check=True).stdout)
    mine = json.loads(run_cli(*job, "--profile", files["half"], check=True).stdout)
    assert mine["one_site"]["profile"] == "half-net" and mine["profile_prices"] == PROFILE_PRICES
    assert mine["one_site_step_s"] > base["one_site_step_s"]
    assert mine["strategies"][0]["dci_time_s"] == base["strategies"][0]["dci_time_s"]


@pytest.mark.parametrize("command", ["estimate", "train", "report"])
def test_file_of_no_sites_network_refused_in_one_line(files, tmp_path, command):
    extra = {"estimate": ["-b", "1G", "-e", "1G"], "report": ["-o", str(tmp_path / "r.html")],
             "train": ["--model", "llama3-8b", "--tp", "8", "--dp", "64", "--global-batch", "512"]}[command]
    proc = run_cli(command, files["region"], *extra, "--profile", files["roce"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for said in (files["roce"], "profile", "calibrated on roce", "east (infiniband_ndr)", "never prices the DCI"):
        assert said in lines[0]


def test_report_region_takes_a_profile(files, tmp_path):
    """The region's report prices its all-reduce with the profile (was refused) and names it on the page."""
    page = tmp_path / "r.html"
    run_cli("report", files["region"], "--profile", files["half"], "-o", str(page), check=True)
    assert "Cost profile: half-net, which prices" in page.read_text()
    run_cli("estimate", files["region"], "-b", "1G", "-e", "1G", "--profile", "hopper+roce", check=True)  # a what-if
