"""What describe states (issue 8): the GPU-to-NIC host link follows the GPU and the NIC (B200 + 800G NICs were
capped at 64 GB/s); what it does not know (power); what a tiny cluster does not use; singulars and plurals."""

import pytest

from conftest import run_cli, spec_dict, tier
from topo import build_fabric, inventory, spec_from_dict
from topo.engine.estimate import estimate


def b200_800g(**server):
    # HGX B200 with 8 x 800 Gb/s NICs under 800G leaves (Quantum-X800-like, 144 ports)
    return spec_dict(gpu="B200", server={"gpus": 8, "nics": 8, "nic_rate": "800 Gb/s", **server},
                     tiers=[tier("leaf", radix=144, rate="800 Gb/s", oversubscription=1),
                            tier("spine", radix=144, rate="800 Gb/s")], cluster={"num_servers": 4})


@pytest.mark.parametrize("gpu, nic, rate, expected_Bps", [
    # data/reference/hardware.md: PCIe Gen4 / Gen5 / Gen6 x16; topo/data/hardware/host_links.toml
    ("A100", "ConnectX-6", "200 Gb/s", 32e9),
    ("H100", "ConnectX-7", "400 Gb/s", 64e9),
    ("H100", "", "400 Gb/s", 64e9),          # no model: the first NIC fast enough, ConnectX-7
    ("B200", "", "800 Gb/s", 128e9),         # ConnectX-8, PCIe Gen6 at both ends
    ("B200", "ConnectX-7", "400 Gb/s", 64e9),  # the NIC's Gen5 is the slower end
    ("H100", "ConnectX-8", "800 Gb/s", 64e9),  # the GPU's Gen5 is the slower end
    ("GB200", "ConnectX-8 SuperNIC", "800 Gb/s", 128e9),  # a catalog name at the start of free text
])
def test_host_link_is_the_slower_pcie_generation_of_gpu_and_nic(gpu, nic, rate, expected_Bps):
    spec = spec_from_dict(spec_dict(gpu=gpu, server={"gpus": 4 if gpu == "GB200" else 8, "nics": 8,
                                                     "nic_rate": rate, "nic_model": nic}))
    assert spec.server.pcie_bandwidth_Bps == expected_Bps


def test_a_given_pcie_bandwidth_wins():
    spec = spec_from_dict(b200_800g(pcie_bandwidth="50 GB/s"))
    assert spec.server.pcie_bandwidth_Bps == 50e9 and spec.host_link is None


def test_b200_with_800g_nics_reaches_800_gbps_busbw_in_the_ideal_profile():
    # issue 8: 504 GB/s instead of about 800. 4 servers x 8 NICs of 100 GB/s, ring all_reduce, ideal alpha-beta:
    # each server sends and receives 8 x 100 GB/s per direction, so busbw tends to 8 x 100 = 800 GB/s
    f = build_fabric(spec_from_dict(b200_800g()))
    r = estimate(f, "all_reduce", [2**34], algorithm="ring", profile="ideal")
    assert r.results[0].busbw_GBps == pytest.approx(800, rel=0.02)
    assert not any("host link" in n for n in inventory(f).notes)


def test_describe_says_when_the_host_link_caps_the_nic():
    proc = run_cli("describe", "h100-100k", "--set", "server.nic_rate=800 Gb/s", *[
        f"--set=fabric.tiers[{i}].port_rate=800 Gb/s" for i in range(3)], check=True)
    assert ("note: the host link (PCIe gen5 x16: GPU gen5, ConnectX-7 gen5, 64 GB/s per direction) caps each "
            "800 Gb/s NIC at 64 GB/s") in proc.stdout


def test_plurals_and_a_one_server_cluster():
    # issue 8: "1 servers", "1 domains", "pod = 1 scalable units", and 8 leaves + 1 spine without a word
    out = run_cli("describe", "dgx-h100-superpod", "--set", "cluster.num_units=1", "--set",
                  "fabric.servers_per_unit=1", check=True).stdout
    assert "in 1 server of 8 GPUs" in out and "NVLink    1 domain of 8 GPUs" in out
    assert "scalable unit = 1 server (8 GPUs), 1 scalable unit" in out
    assert "note: the whole cluster is one NVLink domain (8 GPUs)" in out and "(9 switches) carries none" in out
    for bad in ("1 servers", "1 domains", "1 scalable units", "1 pods"):
        assert bad not in out
    pod = run_cli("describe", "h100-100k", "--set", "fabric.units_per_pod=1", "--set", "cluster.num_pods=2",
                  "--set", "fabric.tiers[spine].oversubscription=", check=True).stdout
    assert "pod = 1 scalable unit (256 GPUs), 2 pods" in pod


def test_a_single_unit_says_what_its_spine_carries():
    inv = inventory(build_fabric(spec_from_dict(spec_dict(cluster={"num_units": 1}))))
    assert any("a single scalable unit" in n and "between rails" in n for n in inv.notes)
    inv = inventory(build_fabric(spec_from_dict(spec_dict(kind="fat_tree", server={"nics": 1},
                                                          cluster={"num_units": 1}))))
    assert any("a single rack" in n and "carries no traffic" in n for n in inv.notes)
    assert not inventory(build_fabric(spec_from_dict(spec_dict()))).notes  # 2 units: nothing to say


def test_power_is_unknown_rather_than_missing():
    # dgx-h100-superpod gives no power_W: its tiers' model, QM9700, is in the switch catalog the planner prices
    # (topo/data/catalog/switches.toml: 747 W, SemiAnalysis), so describe says what plan says: 48 x 747 W = 35.9 kW
    out = run_cli("describe", "dgx-h100-superpod", check=True).stdout
    assert "switches                    48 (35.9 kW, leaf, spine at the switch catalog's power per model)" in out
    out = run_cli("describe", "dgx-h100-superpod", "--set", "fabric.tiers[0].model=SomeSwitch", check=True).stdout
    assert ("switches                    48 (power unknown: the spec gives no power_W for leaf, and the switch "
            "catalog has no model 'SomeSwitch')") in out
    # no model at all: said so, and how to give one (a new user's spec, walk12, read "has no such model")
    out = run_cli("describe", "dgx-h100-superpod", "--unset", "fabric.tiers[0].model", "--unset",
                  "fabric.tiers[1].model", check=True).stdout
    assert ("switches                    48 (power unknown: the spec gives no power_W for leaf, spine, and no switch "
            "model is given (a tier's model, e.g. QM9700, takes its power from the switch catalog, "
            "topo/data/catalog/switches.toml))") in out
    # h100-100k gives 747 W per QM9700 (the DAC figure, data/reference/hardware.md): 5,184 x 747 W = 3.87 MW
    assert "5,184 (3.87 MW)" in run_cli("describe", check=True).stdout


def test_a_directory_given_as_a_spec_says_so(tmp_path):
    proc = run_cli("describe", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr == f"error: {tmp_path}: is a directory, not a spec file; give a .toml file or a bundled spec's name\n"


@pytest.mark.parametrize("sets, fragment", [
    (["cluster.num_gpus=1"], "cluster.num_gpus: 1 GPU does not fill whole servers of 8 GPUs"),
    (["cluster.num_servers=1", "fabric.servers_per_unit=2"],
     "cluster.num_servers: 1 server does not fill whole scalable units of 2 servers"),
])
def test_planner_messages_use_singulars(sets, fragment):
    proc = run_cli("describe", "dgx-h100-superpod", "--unset", "cluster.num_units",
                   *[x for s in sets for x in ("--set", s)])
    assert proc.returncode == 2 and fragment in proc.stderr


def test_the_report_summary_says_the_same():
    from topo.report import build_spec_report
    from topo.report.html import render_page

    page = render_page([build_spec_report("dgx-h100-superpod", ["cluster.num_units=1", "fabric.servers_per_unit=1"],
                                          sizes=("8", "1M", 4), load_size="1M")])
    assert "1 server of 8 GPUs" in page and "1 domain of 8 GPUs" in page
    assert "9 (6.72 kW, leaf, spine at the switch catalog&#x27;s power per model)" in page \
        or "9 (6.72 kW, leaf, spine at the switch catalog's power per model)" in page  # 9 QM9700 x 747 W
    assert "the whole cluster is one NVLink domain" in page
    assert "host link 64 GB/s (PCIe gen5 x16: GPU gen5, ConnectX-7 gen5)" in page


def test_describe_says_a_rack_scale_domains_switches_are_not_in_its_count():
    """walk10: describe counted 236 switches for gb200-nvl72-superpod and plan 524, with no word on the 288 NVLink
    switch trays (9 per NVL72 rack, NVIDIA's GB200 NVL72 datasheet; topo/data/catalog/servers.toml) in between."""
    text = run_cli("describe", "gb200-nvl72-superpod", check=True).stdout
    line = next(x for x in text.splitlines() if x.startswith("NVLink "))
    assert line.endswith("; a domain spans servers: its NVLink switches are not among the switches below (topo plan "
                         "adds them where the server's catalog entry has them, as the NVL72 trays')")
    racks = int(line.split()[1])
    described = int(next(x for x in text.splitlines() if x.startswith("switches ")).split()[1].replace(",", ""))
    plan = run_cli("plan", "gb200-nvl72-superpod", "--no-collectives", check=True).stdout
    total = int(next(x for x in plan.splitlines() if x.startswith("total: ")).split()[1].replace(",", ""))
    assert total == described + 9 * racks
    hgx = run_cli("describe", "dgx-h100-superpod", check=True).stdout  # the NVSwitches are inside the server
    assert "a domain spans servers" not in hgx


def test_overrides_are_named_under_the_file_s_own_header():
    """walk16: ``--set fabric.units_per_pod=6 --set 'fabric.tiers[spine].oversubscription=3'`` printed the file's
    "non-blocking pods of 1,792 GPUs, 7:1 between pods" above a table of 1,536-GPU pods at 3:1, and a region's
    "16 x 800G" assumption above 8 waves, with nothing saying that the header predates the overrides."""
    out = run_cli("describe", "--set", "fabric.units_per_pod=6", "--set", "fabric.tiers[spine].oversubscription=3",
                  check=True).stdout.splitlines()
    assert out[4] == ("  with --set fabric.units_per_pod=6 --set fabric.tiers[spine].oversubscription=3: the lines "
                      "above are the file's own, written before these overrides") and out[5] == ""
    assert "pod = 6 scalable units (1,536 GPUs)" in "\n".join(out)
    # json52 (walk17): only where a figure of the header that the file's own table shows is gone: 512 GPUs are
    # still "scalable units of 32 DGX H100", as one unit is (h100-100k's 1,792 and 7:1 above are gone: the line)
    for over in (["--unset", "cluster.num_units", "--set", "cluster.num_gpus=512"], ["--set", "cluster.num_units=1"]):
        out = run_cli("describe", "dgx-h100-superpod", *over, check=True).stdout
        assert "the file's own" not in out and "scalable unit = 32 servers" in out, over
    out = run_cli("describe", "two-site-h100", "--set", "interconnect.waves=8", check=True).stdout
    assert "  assumed: equipment latency 50 us one way" in out and ("  with --set interconnect.waves=8: the lines "
                                                                   "above are the file's own") in out
    assert "the file's own" not in run_cli("describe", "dgx-h100-superpod", check=True).stdout
