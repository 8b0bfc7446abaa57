"""A NIC taken from the port rate alone is said to be an assumption (tidy124 Left 3, section 458).

A spec without ``server.nic_model`` gets the first catalog NIC whose port takes its rate
(topo/data/hardware/host_links.toml). Google Cloud's A3 Mega (8 x 200 Gb/s GPU NICs for GPUDirect-TCPXO, as
benchmarks/accuracy.py models it) thus resolved to "ConnectX-6 gen4", which no source says it is: Google announced
A3 with its own 200 Gbps IPUs and publishes no vendor for A3 Mega's."""

import json

from conftest import run_cli
from topo.calibrate.setup import node_spec
from topo.fabric.hardware import host_link


def test_a_nic_from_the_rate_alone_is_assumed():
    link = host_link("H100", "", 200e9 / 8)
    assert (link.nic, link.generation, link.nic_assumed) == ("ConnectX-6", "gen4", True)
    assert link.describe() == ("PCIe gen4 x16: GPU gen5, ConnectX-6 gen4, assumed from the port rate: the spec names "
                               "no server.nic_model")
    named = host_link("H100", "ConnectX-7", 400e9 / 8)
    assert not named.nic_assumed and named.describe() == "PCIe gen5 x16: GPU gen5, ConnectX-7 gen5"


def test_describe_of_an_a3_mega_spec_says_its_nic_is_assumed(tmp_path):
    spec = node_spec("H100", 8, "200 Gb/s", "gcp_tcpxo", 2, name="a3-mega")  # as benchmarks/accuracy.py's setups
    tier = spec["fabric"].pop("tiers")[0]
    toml = [f'{k} = {json.dumps(v)}' for k, v in spec.items() if not isinstance(v, dict)]
    for table, fields in spec.items():
        if isinstance(fields, dict):
            toml += [f"[{table}]"] + [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
    toml += ["[[fabric.tiers]]"] + [f"{k} = {json.dumps(v)}" for k, v in tier.items()]
    path = tmp_path / "a3-mega.toml"
    path.write_text("\n".join(toml) + "\n")
    out = run_cli("describe", str(path), check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("NICs"))
    # 16 x 16 GT/s / 8 = 32 GB/s a direction (PCI-SIG 4.0), the link the rate's NIC and Intel's IPU E2000 both have
    assert "host link 32 GB/s per direction" in line
    assert "ConnectX-6 gen4, assumed from the port rate: the spec names no server.nic_model" in line


def test_a_bundled_spec_naming_its_nic_is_not_assumed():
    out = run_cli("describe", "dgx-h100-superpod", check=True).stdout
    assert "(PCIe gen5 x16: GPU gen5, ConnectX-7 gen5)" in out and "assumed from the port rate" not in out
