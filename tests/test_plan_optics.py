"""NIC-side optics: twin-port cages as a server property; the job's first optics failure counted on both ends of
every GPU link (issue 32), with the NIC-side modules alone beside it (SemiAnalysis' definition,
data/reference/planner.md line 26; issue 22)."""

import pytest

import topo
from conftest import run_cli
from topo.plan import plan
from topo.plan.reliability import SECONDS_PER_YEAR

# SemiAnalysis' published design: four 24,576-GPU islands (98,304 GPUs) under a 4th tier (h100-100k-islands), with
# DGX H100 servers (twin-port NIC cages) as bundled; a generic HGX H100 has single-port cards
ISLANDS_SINGLE_PORT = ["plan.server_model=HGX H100"]


def _line26(reference):
    line = (reference / "planner.md").read_text().splitlines()[25]
    assert "26.28 minutes" in line and "42.05 minutes (4 years / 50,000)" in line
    return line


def test_dgx_h100_superpod_has_512_twin_port_nic_modules():
    # NVIDIA DGX H100 datasheet: 4 OSFP ports serving 8 single-port ConnectX-7 (catalog servers.toml, DGX H100)
    r = plan("dgx-h100-superpod", collectives=False)
    assert r.server_model == "DGX H100"
    nic = [t for t in r.bom.transceivers if t.at == "nic"]
    assert [(t.type, t.count, t.links) for t in nic] == [("2x400G-SR8", 512, 1024)]
    assert r.nic_modules == 512 == r.reliability.nic_optical_modules
    # a generic HGX H100 (single-port cards) keeps one module per NIC
    hgx = plan("dgx-h100-superpod", layers=[("t", {"server_model": "HGX H100"})], collectives=False)
    assert hgx.nic_modules == 1024


def test_98304_gpus_with_twin_port_nic_optics_reproduce_49152_modules(reference):
    # SemiAnalysis (planner.md line 26, issue 22): 98,304 NIC links -> 49,152 twin-port modules at a 4-year MTTF;
    # the article's 42.05 min is 4 years / 50,000 (its 100,000 GPUs halved); for 49,152 modules the same
    # arithmetic gives 4 x 525,600 / 49,152 = 42.77 min. Issue 32: the bundled spec builds it so, no override.
    _line26(reference)
    r = plan("h100-100k-islands", collectives=False)
    assert r.num_gpus == 98_304 == 4 * 24_576 and r.server_model == "DGX H100"
    assert r.nic_modules == 49_152
    rel = r.reliability
    assert rel.first_nic_optics_failure_s == pytest.approx(4 * SECONDS_PER_YEAR / 49_152, rel=1e-12)
    assert rel.first_nic_optics_failure_s / 60 == pytest.approx(42.77, abs=0.005)
    assert rel.first_nic_optics_failure_s / 60 == pytest.approx(42.05, abs=2)  # the article's figure, 42 +- 2 min
    # both ends of every GPU link: as many twin-port modules again on the leaves' down ports, half the time
    assert rel.job_optical_modules == 2 * 49_152
    assert rel.first_job_optics_failure_s == pytest.approx(rel.first_nic_optics_failure_s / 2, rel=1e-12)
    # the same design with single-port NIC modules at 5 years: SemiAnalysis' 26.28 min is 5 years / 100,000
    single = plan(topo.load_spec("h100-100k-islands", ISLANDS_SINGLE_PORT), collectives=False).reliability
    assert single.nic_optical_modules == 98_304
    assert single.first_nic_optics_failure_s == pytest.approx(5 * SECONDS_PER_YEAR / 98_304, rel=1e-12)


def test_first_nic_side_optics_failure_counts_nic_side_modules_only(reference):
    # issue 22: counting every module gave 8.6 min for the default, not the job-stopping ~26 min of the source
    _line26(reference)
    r = plan(collectives=False)
    rel = r.reliability
    nic = sum(t.count for t in r.bom.transceivers if t.at == "nic")
    assert nic == r.num_gpus == rel.nic_optical_modules  # one 400G-SR4 per NIC, 5-year MTTF
    assert rel.first_nic_optics_failure_s == pytest.approx(5 * SECONDS_PER_YEAR / 100_352, rel=1e-12)
    assert rel.first_nic_optics_failure_s / 60 == pytest.approx(26.28 * 100_000 / 100_352, rel=1e-3)
    assert rel.optical_modules == r.bom.num_transceivers > nic
    assert rel.first_optical_failure_s < rel.first_job_optics_failure_s < rel.first_nic_optics_failure_s


def test_copper_nic_links_have_no_job_stopping_optics():
    # middle-of-row leaves with active electrical cables: every NIC link of the default is within 7 m
    # (at most 4 racks x 0.6 m + 4 m of slack = 6.4 m), so no NIC-side module is left to fail; the two racks next to
    # the leaf rack are cabled through their sides (0.6 m + 2 m of slack) within the DAC's 3 m: passive copper
    r = plan(layers=[("t", {"floor": {"leaf_placement": "middle_of_row", "copper": "dac_aec"}})], collectives=False)
    assert r.floor.leaf_placement == "middle_of_row"
    assert r.floor.longest_m["nic-leaf"] == pytest.approx(4 * 0.6 + 4)
    links = r.bom.links_by_level["nic-leaf"]
    assert links["copper"] == r.num_gpus // 4 and links["active_copper"] == r.num_gpus * 3 // 4
    assert r.nic_modules == 0 and r.reliability.first_job_optics_failure_s == float("inf")
    aec = [c for c in r.bom.cables if c.type == "AEC" and c.level == "nic-leaf"]
    assert sum(c.count for c in aec) == r.num_gpus * 3 // 4
    assert sum(c.power_W for c in aec) == pytest.approx(12 * r.num_gpus * 3 // 4)  # cables.toml AEC power_W


def test_middle_of_row_leaves_take_a_quarter_of_nic_links_on_dac(reference):
    # issue 32: the 4 m slack exceeded the DAC's 3 m reach, so DAC was never chosen. SemiAnalysis (planner.md line
    # 28): 25-33% of GPU-to-leaf links can be copper DAC. A middle-of-row leaf rack's two neighbours (2 of a unit's 8
    # server racks) are 0.6 m + 2 m away through the racks' sides: 25%, with the catalog's copper = "dac"
    line = (reference / "planner.md").read_text().splitlines()[27]
    assert "25-33% of GPU-to-leaf links can be copper DAC" in line
    r = plan(layers=[("t", {"floor": {"leaf_placement": "middle_of_row"}})], collectives=False)
    links = r.bom.links_by_level["nic-leaf"]
    assert links["copper"] / r.num_gpus == pytest.approx(2 / 8)
    assert r.nic_modules == r.num_gpus * 6 // 8
    # end of row (the default) keeps every NIC link optical: its one neighbour is cabled through the tray
    assert plan(collectives=False).bom.links_by_level["nic-leaf"]["copper"] == 0


def test_first_failure_times_read_in_hours_past_two_and_none_without_modules():
    """walk16: a SuperPOD's first job-stopping optics failure read "2,053.12 min" beside "one per 49.5 h", a copper
    plan's read "none (no such modules) (0 modules ...)", and a small storage "-> 1 servers", "1 racks", "0.00 MW".
    DGX H100's 512 twin-port NIC-side modules and the leaves' 512 at the catalog's 4-year MTTF: 4 x 8,760 h / 1,024
    = 34.2 h, the NIC side alone 68.4 h."""
    out = run_cli("plan", "dgx-h100-superpod", "--no-collectives", "--set", "plan.storage.kind=ddn_ai400x2",
                  check=True).stdout
    assert "first job-stopping optics failure: 34.2 h (1,024 modules on GPU links, both ends); NIC-side alone: " \
           "68.4 h (512 modules)" in out
    assert "-> 1 server; a checkpoint in" in out and "(2 servers, 4.0 kW, 1 rack in a storage room)" in out
    out = run_cli("plan", "--no-collectives", "--set", "plan.floor.leaf_placement=middle_of_row", "--set",
                  "plan.floor.copper=dac_aec", check=True).stdout
    assert "first job-stopping optics failure: none (0 modules on GPU links, both ends); NIC-side alone: none " \
           "(0 modules)" in out
    assert "first job-stopping optics failure: 16.12 min" in run_cli("plan", "--no-collectives", check=True).stdout
