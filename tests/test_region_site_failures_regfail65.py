"""A failed part in any site of a region is timed (regfail65).

A job across sites runs in lockstep: each step's reduction across the sites waits for every site, so each site's
share is timed on its own fabric with its own failures and the slowest paces the step
(``multisite.estimate_across_sites`` over ``Region.site_groups``). Before, the share was timed on one fabric only
(the smallest site's, a failed one first): with ``east:spine0`` and ``west:leaf3`` failed, east's step (the healthy
one's, 657 ms) was printed and west's failed leaf (773 ms) was not timed.

The region: two sites of 2 DGX H100 scalable units (512 GPUs each, NVIDIA's DGX SuperPOD H100 reference
architecture, the bundled dgx-h100-superpod spec), 40 km apart. The job: Llama 3 8B, TP 8, DP 64 a site.
"""

import json

import pytest

from conftest import run_cli
from small_regions import built_region, two_sites
from topo import build_fabric, load_spec
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

REGION = two_sites("two-su", "two sites of 2 DGX H100 scalable units, 40 km apart (a test region)", "dgx-h100-superpod", 2)
JOB = dict(tp=8, dp=128, global_batch=512)  # the whole job: 64 data-parallel ranks a site


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, REGION)


@pytest.fixture(scope="module")
def model():
    return load_model("llama3-8b")


@pytest.fixture(scope="module")
def healthy(region, model):
    return estimate_across_sites(region, model, make_layout(**JOB))


@pytest.fixture(scope="module")
def one_site(model):
    """The share alone on one site's fabric (the same spec, built on its own): healthy, and with leaf3 failed."""
    fabric = build_fabric(load_spec("dgx-h100-superpod", ["cluster.num_units=2"]))
    share = make_layout(tp=8, dp=64, global_batch=256)
    return estimate_step(fabric, model, share), estimate_step(fabric.with_failures("leaf3"), model, share)


def test_alike_healthy_sites_are_one_fabric_timed_once(region):
    """Two ``[[sites]]`` entries of one spec build two fabrics, alike: one group; a failed part splits them; the
    same part failed in both joins them again."""
    assert [s for _, s in region.site_groups()] == [(0, 1)]
    assert [s for _, s in region.with_failures("west:leaf3").site_groups()] == [(0,), (1,)]
    assert [s for _, s in region.with_failures("east:leaf3", "west:leaf3").site_groups()] == [(0, 1)]
    assert [s for _, s in region.with_failures("east:leaf3", "west:leaf4").site_groups()] == [(0,), (1,)]


def test_a_healthy_region_is_the_share_on_one_site_to_the_last_bit(healthy, one_site):
    """A healthy region of alike sites: the share's step is one site's, bit for bit, and no site is singled out."""
    assert healthy.one_site_step_s == one_site[0].step_time_s
    assert healthy.site_step_s == {"east": one_site[0].step_time_s, "west": one_site[0].step_time_s}
    assert healthy.pacing_site == "east"
    assert not any("lockstep" in n for n in healthy.notes)


def test_a_failed_leaf_in_either_site_slows_the_step_alike(region, model, healthy, one_site):
    """Symmetric sites: leaf3 failed in west slows the region's step exactly as in east, and by what it slows the
    share on one site alone (the DCI's exposed part is the same: the failed leaf leaves the DP window as it was)."""
    east = estimate_across_sites(region.with_failures("east:leaf3"), model, make_layout(**JOB))
    west = estimate_across_sites(region.with_failures("west:leaf3"), model, make_layout(**JOB))
    assert west.step_time_s == east.step_time_s
    assert (east.pacing_site, west.pacing_site) == ("east", "west")
    assert west.one_site_step_s == one_site[1].step_time_s  # the failed site's share, as on one site alone
    assert west.site_step_s == {"east": one_site[0].step_time_s, "west": one_site[1].step_time_s}
    assert one_site[1].step_time_s > one_site[0].step_time_s * 1.1  # the failure matters here
    assert west.strategies[0].exposed_s == pytest.approx(healthy.strategies[0].exposed_s, rel=1e-9)
    assert west.step_time_s - healthy.step_time_s == pytest.approx(
        one_site[1].step_time_s - one_site[0].step_time_s, rel=1e-9)


def test_the_slowest_site_paces_whatever_the_other_failed(region, model):
    """A failed spine in east (it slows nothing here: a rail-optimized fabric's spine carries only what PXN did not
    move to NVLink) and a failed leaf in west: west paces, as with west's failure alone. Before regfail65, east's
    failed fabric was the one timed and west's failure went unseen."""
    both = estimate_across_sites(region.with_failures("east:spine0", "west:leaf3"), model, make_layout(**JOB))
    west = estimate_across_sites(region.with_failures("west:leaf3"), model, make_layout(**JOB))
    assert both.pacing_site == "west"
    assert both.step_time_s == west.step_time_s
    assert both.site_step_s["west"] > both.site_step_s["east"]
    assert any(n.startswith("the sites step in lockstep, each share on its own fabric: east ") and
               "(failed: spine0)" in n and "(failed: leaf3); west's paces the job's step" in n for n in both.notes)


def test_the_command_names_the_pacing_site(tmp_path):
    path = tmp_path / "two-su.toml"
    path.write_text(REGION)
    args = ["train", str(path), "--model", "llama3-8b", "--tp", "8", "--dp", "128", "--global-batch", "512",
            "--fail", "east:spine0", "--fail", "west:leaf3"]
    doc = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert doc["pacing_site"] == "west" and doc["site_step_s"]["west"] == doc["one_site_step_s"]
    text = run_cli(*args, check=True).stdout
    assert "one site's share (512 GPUs, west's, the slowest site's) steps in" in text, text


def test_a_failure_the_region_lacks_is_one_line(tmp_path):
    path = tmp_path / "two-su.toml"
    path.write_text(REGION)
    job = ["--model", "llama3-8b", "--tp", "8", "--global-batch", "512"]
    p = run_cli("train", str(path), *job, "--fail", "nosuchsite:leaf3")
    assert p.returncode == 2 and p.stderr == (
        "error: --fail: no site 'nosuchsite'; a region fails DCI spans (dci:A-B with two site names or indices, e.g. "
        "dci:east-west or dci:0-1) or a site's parts (SITE:PART, e.g. east:leaf0 or 0:leaf0; sites: east, west, or 0 "
        "to 1), got "
        "'nosuchsite:leaf3' (on two-su)\n"), p.stderr
    p = run_cli("train", str(path), *job, "--fail", "west:core3")  # a 2-tier site: leaf and spine, no core
    assert p.returncode == 2 and p.stderr == (
        "error: --fail: site west: no such node 'core3'; names start with gpu, nvswitch, nic, leaf, spine "
        "(on two-su)\n"), p.stderr
    p = run_cli("estimate", str(path), "--size", "1G", "--fail", "west:leaf16")
    assert p.returncode == 2 and p.stderr == (
        "error: --fail: site west: no such node 'leaf16': leaf switches are numbered 0 to 15 (on two-su)\n"), p.stderr


def test_estimate_times_a_failed_leaf_in_either_site_alike(tmp_path):
    """``topo estimate REGION``: each distinct site fabric's in-site phases, the slowest (it did so before; alike
    healthy sites are now timed once): leaf3 failed in west gives east's time, its bottleneck named in west."""
    path = tmp_path / "two-su.toml"
    path.write_text(REGION)
    rows = {}
    for fail in ([], ["--fail", "east:leaf3"], ["--fail", "west:leaf3"]):
        doc = json.loads(run_cli("estimate", str(path), "--size", "1G", *fail, "--json", check=True).stdout)
        rows[tuple(fail)] = doc["results"][0]
    healthy, east, west = rows.values()
    assert west["time_s"] == east["time_s"] > healthy["time_s"] * 1.2
    assert west["bottleneck_name"].startswith("west:") and east["bottleneck_name"].startswith("east:")
