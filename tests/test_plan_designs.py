"""The planner on every bundled design, and one published figure per design whose parts the catalog gained
(H800 / HPN, DGX A100, GB200 NVL72, Meta's Llama 3 RoCE cluster)."""

import json

import pytest

import topo

from topo.plan import load_catalog, plan
from topo.spec.load import bundled_specs


def _figures(reference, cluster_id):
    data = json.loads((reference / "clusters.json").read_text())
    c = next(c for c in data["clusters"] if c["id"] == cluster_id)
    return {f["name"]: f for f in c["figures"]}


@pytest.mark.parametrize("name", bundled_specs())
def test_every_bundled_spec_plans(name):
    r = plan(name, collectives=False)
    assert r.num_gpus > 0
    assert r.power.it_power_W > r.power.gpu_W > 0
    assert r.power.facility_power_W >= r.power.it_power_W
    assert r.capex.capex_usd > r.capex.servers_usd > 0 and r.capex.network_capex_usd > 0
    assert r.bom.num_transceivers > 0 and r.bom.num_switches > 0
    assert r.floor.rack_load_W <= r.floor.rack_power_W
    assert r.compute.flop > 0


def test_dgx_a100_server_draws_its_published_6_5_kW():
    # NVIDIA DGX A100 datasheet / User Guide DU-09821-001, "Power Specifications": 6.5 kW max per system
    # (catalog servers.toml "DGX A100" max_power_W, status published); 8 x 400 W A100 + the rest of the server.
    cat = load_catalog()
    assert cat.servers["DGX A100"].max_power_W.status == "published"
    r = plan("dgx-a100-superpod", collectives=False)
    assert r.server_model == "DGX A100"
    assert r.floor.server_power_W == pytest.approx(6500.0, rel=1e-12)
    assert r.power.servers_W == pytest.approx(r.num_servers * 6500.0, rel=1e-12)


def test_gb200_nvl72_rack_power_and_nvlink_switch_trays(reference):
    # NVIDIA DGX SuperPOD GB200 RA (clusters.json nvidia_dgx_superpod_gb200): 18 compute trays and 9 NVLink switch
    # trays per rack, 1.2 MW TDP per SU of 8 racks; a rack is widely quoted at ~120-132 kW (servers.toml sources).
    f = _figures(reference, "nvidia_dgx_superpod_gb200")
    trays, nvsw, su_W = f["rack_compute_trays"]["value"], f["rack_nvlink_switch_trays"]["value"], f["su_power_tdp"]["value"] * 1e6
    r = plan("gb200-nvl72-superpod", collectives=False)
    racks = r.num_gpus // 72
    assert r.floor.servers_per_rack == trays and r.floor.server_racks == racks
    assert 120e3 - 1 <= r.floor.rack_load_W <= 132e3
    assert 8 * r.floor.rack_load_W <= su_W  # within the SU's published TDP
    # catalog assumption (servers.toml leaf_in_rack = false): no leaf fits a full NVL72 rack, so every tray NIC
    # (4 x 400G per tray, DGX GB200 User Guide) reaches a leaf in the SU's network racks over optics (issue 32)
    assert r.floor.leaf_placement == "with_spines"
    assert sum(t.count for t in r.bom.transceivers if t.at == "nic") == 4 * r.num_servers
    line = next(s for s in r.bom.switches if s.model == "NVLink switch tray")
    assert line.count == nvsw * racks
    # their power is counted once, with the switches: fabric switches + trays
    fabric_W = sum(s.count * s.power_W_each for s in r.bom.switches if s is not line)
    assert r.power.switches_W == pytest.approx(fabric_W + line.count * line.power_W_each, rel=1e-12)


def test_meta_llama3_rack_switches_match_the_paper(reference):
    # Llama 3 paper sec. 3.3.1 (clusters.json meta_llama3_24k_h100): one Minipack2 ToR per 16-GPU rack, 192 racks per
    # pod, 8 pods -> 1,536 rack switches.
    f = _figures(reference, "meta_llama3_24k_h100")
    r = plan("meta-llama3-24k", collectives=False)
    rtsw = next(s for s in r.bom.switches if s.model == "Minipack2")
    assert rtsw.count == f["pod_racks"]["value"] * f["pods_per_cluster"]["value"] == 1536
    assert r.num_gpus // rtsw.count == f["rack_gpus"]["value"]


def test_hpn_aggregation_switches_per_plane(reference):
    # Alibaba HPN (SIGCOMM'24; clusters.json alibaba_hpn_sigcomm24): 60 aggregation switches per plane in a pod of
    # 15,360 GPUs; the bundled spec is one plane.
    f = _figures(reference, "alibaba_hpn_sigcomm24")
    r = plan("alibaba-hpn-plane", collectives=False)
    agg = next(s for s in r.bom.switches if s.tier == "agg")
    pods = r.num_gpus // f["pod_gpus"]["value"]
    assert agg.count == f["agg_switches_per_plane"]["value"] * pods
    assert r.gpu == "H800" and r.server_model == "HGX H800"


def test_switch_counts_above_the_minimum_say_why():
    # issue 22: the default's core has 256 switches where ceil(14,336 spine uplinks / 64) = 224 would take them;
    # h100-100k-eth51t's 1,024 where ceil(100,352 / 128) = 784 would. The builder gives each plane the fewest
    # cores that every spine reaches over the same number of links (8 uplinks -> 8 cores of 56 ports used)
    from topo.plan.switch_counts import minimum_switches

    r = plan(collectives=False)
    assert minimum_switches(topo.build_fabric(topo.load_spec()))["core"] == 224
    note = next(n for n in r.notes if n.startswith("core: 256 switches"))
    assert "224 would take its 14,336 links" in note and "8 uplinks" in note
    eth = plan("h100-100k-eth51t", collectives=False)
    assert any(n.startswith("core: 1,024 switches") and "784 would take its 100,352 links" in n for n in eth.notes)
    # at the minimum, no note: the SuperPOD's 16 spines take 1,024 leaf uplinks at 64 ports each
    sp = plan("dgx-h100-superpod", collectives=False)
    assert not [n for n in sp.notes if "would take its" in n]


def test_surplus_switches_say_what_they_draw_and_cost():
    # issue 32: the islands' 512 plane super-spines use 28 of 64 ports where 224 would carry the 14,336 links;
    # tier73: one switch hosts 2 of them (56 ports), 256 switches: 32 extra QM9700 at 747 W and $36k
    # (switches.toml) = 24 kW and $1.2M
    r = plan("h100-100k-islands", collectives=False)
    note = next(n for n in r.notes if n.startswith("super-spine: 256 switches"))
    assert "56 of 64 ports" in note and f"32 above the minimum: {32 * 747 / 1e3:,.0f} kW and $" \
        f"{32 * 36_000 / 1e6:,.1f}M" in note and "hosts 2 of its 512 plane switches" in note
    # GB200's leaves: 18 down + 18 up of 64 ports (44% idle); 2,304 links x 2 ends / 64 = 72 would do
    gb = plan("gb200-nvl72-superpod", collectives=False)
    leaf = next(n for n in gb.notes if n.startswith("leaf: 128 switches"))
    assert "36 of 64 ports used on each (44% idle)" in leaf and "72 leaves with every port in use" in leaf
    assert not [n for n in plan(collectives=False).notes if n.startswith("leaf:")]  # full leaves: no note
