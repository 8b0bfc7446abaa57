"""The tree across sites chains the sites' roots in the job's rank order, as NCCL numbers its nodes (NVIDIA/nccl
src/init.cc ``initTransportsRank``: a node is numbered when its first rank appears, ``comm->rankToNode[r] = node``;
trees are built over those numbers, src/graph/connect.cc; the cross-DC branch chains one tree per DC, roots DC to DC,
../shared/data/multisite.md section 2). A region's ranks run site by site in its file's order, so two files that
list the same sites and spans differently chain them differently; ``--detail`` says the order and the rule.

Spans as three-site-chain's: a-b 25 km, b-c 80 km, one way distance x 4.9 us/km + 20 us (142.5 us and 412 us).
"""

import json

import pytest

from conftest import run_cli
from topo.engine.region_estimate import TREE_ROOT_RULE, chain_hops_s, estimate_region, tree_root_order
from topo.fabric.region import build_region

AB_S, BC_S = 25 * 4.9e-6 + 20e-6, 80 * 4.9e-6 + 20e-6
SPANS = """
[interconnect]
topology = "spans"
latency_per_km = "4.9 us"
equipment_latency = "20 us"
waves = 8
attach = "top"
[[interconnect.spans]]
sites = ["a", "b"]
distance_km = 25
[[interconnect.spans]]
sites = ["b", "c"]
distance_km = 80
"""


def _region(tmp_path, order):
    sites = "".join(f'[[sites]]\nname = "{s}"\nspec = "dgx-h100-superpod"\nset = ["cluster.num_units=3"]\n'
                    for s in order)
    f = tmp_path / f"{''.join(order)}.toml"
    f.write_text(f'name = "{"".join(order)}"\n' + sites + SPANS)
    return f


def test_two_files_listing_the_sites_differently_chain_the_roots_in_their_rank_order(tmp_path):
    abc, acb = (build_region(str(_region(tmp_path, o))) for o in ("abc", "acb"))
    assert [abc.site_names[i] for i in tree_root_order(abc)] == ["a", "b", "c"]
    assert [acb.site_names[i] for i in tree_root_order(acb)] == ["a", "c", "b"]
    up = abc.up_latency_s(0)  # alike sites: the same way up and down
    assert chain_hops_s(abc) == pytest.approx([up + AB_S + up, up + BC_S + up], rel=1e-12)
    # a - c goes through b (142.5 + 412 us), then c - b back over b-c: 412 us more than a - b - c
    assert chain_hops_s(acb) == pytest.approx([up + AB_S + BC_S + up, up + BC_S + up], rel=1e-12)
    S = [8]
    t_abc, t_acb = (estimate_region(r, "all_reduce", S, "tree").results[0] for r in (abc, acb))
    assert t_acb.phases["dci"]["latency_s"] - t_abc.phases["dci"]["latency_s"] == pytest.approx(2 * BC_S, rel=1e-9)
    h_abc, h_acb = (estimate_region(r, "all_reduce", S, "hierarchical").results[0] for r in (abc, acb))
    assert h_abc.time_s == pytest.approx(h_acb.time_s, rel=1e-12)  # the ring of sites' phases do not chain roots


def test_detail_says_the_chain_and_its_rule(tmp_path):
    f = _region(tmp_path, "acb")
    text = run_cli("estimate", str(f), "--size", "1GiB", "--detail", check=True).stdout
    (line,) = [ln for ln in text.splitlines() if ln.startswith("# tree across sites: ")]
    assert line.startswith(f"# tree across sites: a - c - b, {TREE_ROOT_RULE}; each hop one way: ")
    doc = json.loads(run_cli("estimate", str(f), "--size", "1GiB", "--detail", "--json", check=True).stdout)
    assert doc["tree_roots"]["order"] == ["a", "c", "b"] and doc["tree_roots"]["rule"] == TREE_ROOT_RULE
    assert doc["tree_roots"]["hop_s"] == pytest.approx(chain_hops_s(build_region(str(f))).tolist())
    assert doc["detail_size_bytes"] == 2**30 and doc["detail_algorithm"] == doc["results"][-1]["algorithm"]
    assert {p["phase"] for p in doc["phases"]} <= set(doc["results"][-1]["phases"])


def test_tree_roots_has_one_shape_with_or_without_detail(tmp_path):
    """rev56: `--json` gave tree_roots as a list of names (and tree_hop_s beside it) without --detail and as
    {order, hop_s, rule} with it: one key, two types by a flag. One shape now, the same document either way."""
    f = _region(tmp_path, "acb")
    plain, detail = (json.loads(run_cli("estimate", str(f), "--size", "1GiB", *extra, "--json", check=True).stdout)
                     for extra in ((), ("--detail",)))
    assert plain["tree_roots"] == detail["tree_roots"]
    assert plain["tree_roots"]["order"] == ["a", "c", "b"] and plain["tree_roots"]["rule"] == TREE_ROOT_RULE
    assert "tree_hop_s" not in plain and "tree_hop_s" not in detail
