"""Every bundled spec loads, builds and matches the figures published for the design it reproduces.

Published figures come from data/reference/clusters.json, which carries each figure's source."""

import json

import pytest

from topo import build_fabric, bundled_specs, inventory, load_spec


def figures(reference, cluster_id):
    data = json.loads((reference / "clusters.json").read_text())
    cluster = next(c for c in data["clusters"] if c["id"] == cluster_id)
    return {f["name"]: f["value"] for f in cluster["figures"]}


@pytest.mark.parametrize("name", bundled_specs())
def test_every_bundled_spec_builds(name):
    spec = load_spec(name)
    assert spec.sources, f"{name} must cite its sources"
    inv = inventory(build_fabric(spec))
    assert inv.num_gpus > 0 and inv.bisection_bandwidth_Bps > 0


def test_dgx_superpod_matches_nvidia_table(reference):
    # NVIDIA DGX SuperPOD H100 RA, network-fabrics page, Table 4 (compute fabric).
    table = figures(reference, "nvidia_dgx_superpod_h100")["compute_fabric_table4_small"]
    for row in table:
        inv = inventory(build_fabric(load_spec("dgx-h100-superpod", [f"cluster.num_units={row['SUs']}"])))
        assert inv.tiers[0].num_switches == row["leaf"]
        assert inv.tiers[1].num_switches == row["spine"]
        assert inv.links[3].num_links == row["cables_spine_leaf"]
        # NVIDIA lists 31 DGX in the first SU: the 32nd slot holds the UFM appliance, which takes 4 of the
        # node-leaf cables. topo models all 32 slots as DGX (8 cables each), so it counts 4 cables more.
        assert inv.num_servers == row["nodes"] + 1
        assert inv.links[2].num_links == 8 * (row["nodes"] + 1) == row["cables_node_leaf"] + 4
    inv = inventory(build_fabric(load_spec("dgx-h100-superpod")))
    assert inv.num_gpus == 1024 and inv.tiers[0].oversubscription == 1.0  # default 4 SUs, non-blocking


def test_meta_llama3_cluster_matches_paper(reference):
    # Llama 3 paper (arXiv 2407.21783) Sec. 3.3.1; exact GPU count from Lockwood (secondary).
    fig = figures(reference, "meta_llama3_24k_h100")
    inv = inventory(build_fabric(load_spec("meta-llama3-24k")))
    assert inv.num_gpus == fig["cluster_size_exact"] == 24576
    assert inv.servers_per_unit * inv.gpus_per_server == fig["rack_gpus"] == 16
    assert inv.servers_per_unit == fig["rack_servers"]
    assert inv.units_per_pod == fig["pod_racks"] == 192
    assert inv.units_per_pod * 16 == fig["pod_gpus"] == 3072
    assert inv.num_pods == fig["pods_per_cluster"] == 8
    assert inv.nic_rate_Bps * 8 == fig["link_speed_gpu_to_gpu"] * 1e9
    assert inv.tiers[0].oversubscription == 1.0 and inv.tiers[1].oversubscription == pytest.approx(7, rel=0.01)
    assert fig["aggregation_oversubscription"] == "1:7"
    assert inv.largest_nonblocking_gpus == 3072  # "full bisection bandwidth" within a pod
    assert inv.tiers[1].oversubscription != 1


def test_default_is_a_100k_class_h100_cluster(reference):
    # SemiAnalysis (2024-06-17): a 3-tier non-blocking Quantum-2 fat tree tops out at 65,536 H100; the default
    # goes beyond by oversubscribing between pods.
    fig = figures(reference, "semianalysis_100k_h100")
    inv = inventory(build_fabric(load_spec()))
    assert inv.name == "h100-100k"
    assert inv.num_gpus >= 100_000 > fig["quantum2_max_fully_interconnected"]
    assert [t.name for t in inv.tiers] == ["leaf", "spine", "core"]
    assert inv.tiers[0].oversubscription == 1.0 and inv.tiers[1].oversubscription == 7.0
    assert inv.largest_nonblocking_group == "pod"
    assert fig["quantum2_ports"] == "64 x 400G" and all(t.radix == 64 for t in inv.tiers)
