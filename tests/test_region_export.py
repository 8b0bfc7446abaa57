"""walk9: ``topo export REGION`` was refused ("name one of its sites' specs"); it now writes the sites' graphs, a DCI
node per site and one edge per span, which networkx reads back with the figures the region file gives."""

import json

import networkx as nx
import pytest

from conftest import ROOT, run_cli
from topo.fabric.region import build_region


@pytest.fixture(scope="module")
def two():
    return build_region("two-site-h100")


def _read(path, fmt):
    return nx.read_graphml(path) if fmt == "graphml" else nx.node_link_graph(json.loads(path.read_text()),
                                                                              edges="edges")


@pytest.mark.parametrize("fmt", ["graphml", "json"])
def test_a_region_exports_its_sites_and_its_dci(tmp_path, two, fmt):
    out = tmp_path / f"two.{fmt}"
    proc = run_cli("export", "two-site-h100", "--format", fmt, "-o", str(out), check=True)
    assert proc.stderr.startswith(f"wrote {out} (2 sites, 3,072 GPUs, 1 DCI span; ")
    g = _read(out, fmt)
    sites = [f for f in two.fabrics]
    attach = [int(((f.nodes["role"] == 3) & (f.nodes["tier"] == int(t))).sum()) for f, t in zip(sites, two.attach_tier)]
    assert g.number_of_nodes() == sum(f.num_nodes for f in sites) + 2  # + east:dci, west:dci
    assert g.number_of_edges() == sum(len(list(f.edge_records())) for f in sites) + sum(attach) + 1
    assert g.graph["name"] == "two-site-h100" and g.graph["num_gpus"] == 3072
    assert g.nodes["east:gpu0"]["site"] == "east" and g.nodes["west:dci"]["role"] == "dci"
    # the span as two-site-h100.toml gives it: 16 waves x 800 Gb/s, 1,000 km x 4.9 us/km + 50 us one way
    span = g.edges["east:dci", "west:dci"]
    assert (span["level"], span["num_links"], span["num_failed"]) == ("dci", 16, 0)
    assert span["bandwidth_Bps"] == pytest.approx(16 * 800e9 / 8) and span["link_bandwidth_Bps"] == 100e9
    assert span["latency_s"] == pytest.approx(1000 * 4.9e-6 + 50e-6) and span["distance_km"] == 1000
    # every spine of a site reaches its DCI node, their shares adding up to the site's DCI capacity (1.6 TB/s)
    shares = [a["bandwidth_Bps"] for _, _, a in g.edges("east:dci", data=True) if a["level"] == "dci_attach"]
    assert len(shares) == attach[0] and sum(shares) == pytest.approx(1.6e12)
    assert all(g.nodes[v]["tier"] == "spine" for _, v, a in g.edges("east:dci", data=True)
               if a["level"] == "dci_attach")


def test_a_cut_span_is_exported_failed_and_inputs_are_never_outputs(tmp_path):
    out = tmp_path / "cut.json"
    run_cli("export", "two-site-h100", "--format", "json", "-o", str(out), "--fail", "dci:east-west", check=True)
    assert _read(out, "json").edges["east:dci", "west:dci"]["num_failed"] == 16
    region = tmp_path / "r.toml"
    region.write_text((ROOT / "topologies" / "two-site-h100.toml").read_text())
    for target in ("r.toml", str(ROOT / "topologies" / "dgx-h100-superpod.toml")):  # the region, a site's spec
        bad = run_cli("export", "r.toml", "-o", target, cwd=tmp_path)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "is an input" in bad.stderr, bad.stderr
