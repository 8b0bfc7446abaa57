"""tidy68: the first wave's leftovers (rev66, tidy67), each with a test seen failing before its fix."""

import json

import pytest

from conftest import run_cli
from small_regions import region_file, two_sites


@pytest.fixture(scope="module")
def one_su(tmp_path_factory):
    """Two sites (east, west) of one DGX H100 SU each (tests/small_regions.py)."""
    return region_file(tmp_path_factory, two_sites("one-su", "two sites of one DGX H100 SU", "dgx-h100-superpod", 1),
                       "one-su")


def test_a_region_searchs_failure_notes_name_the_failed_site(one_su):
    """rev66: --fail 1:leaf0 (west's leaf) gave "note: one site's share: with failures: leaf0" without the site;
    the step's path says west's share paces the job. The search's notes are of the share searched on west."""
    proc = run_cli("train", one_su, "--model", "llama3-8b", "--global-batch", "256", "--search", "--top", "1",
                   "--fail", "1:leaf0", check=True)
    notes = [n for n in proc.stdout.splitlines() + proc.stderr.splitlines() if "with failures: leaf0" in n]
    assert notes and all(n.startswith("note: one site's share (west's): ") for n in notes), notes
    got = json.loads(run_cli("train", one_su, "--model", "llama3-8b", "--global-batch", "256", "--search", "--top",
                             "1", "--fail", "1:leaf0", "--json", check=True).stdout)
    assert got["notes_sites"] == ["west"]


@pytest.mark.parametrize("where, flags, named", [
    ("dgx-h100-superpod", ("--set", "cluster.num_units=1", "--global-batch", "7", "--first-gpu", "3"), "--first-gpu"),
    ("REGION", ("--global-batch", "14", "--first-gpu", "3"), "--first-gpu"),
    ("dgx-h100-superpod", ("--set", "cluster.num_units=1", "--global-batch", "7", "--first-gpu", "3",
                           "--skip-domains", "5"), "--first-gpu and --skip-domains"),
])
def test_a_search_sized_by_its_placement_names_that_flag(one_su, where, flags, named):
    """rev66: a search whose GPUs --first-gpu (or --skip-domains) sized (253 = 256 - 3: 11 x 23, no tp x cp x pp
    of llama3-8b divides it with a batch of 7) said "error: --gpus: no layout ... satisfies the divisibility
    rules", a flag the user never gave."""
    proc = run_cli("train", one_su if where == "REGION" else where, "--model", "llama3-8b", "--search", *flags)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {named}: no layout of llama3-8b on "), err
    assert "--gpus" not in err


def _sharp_spec(folder) -> str:
    """dgx-h100-superpod (topologies/, InfiniBand NDR QM9700) with sharp = true on its leaf tier."""
    from topo.spec.load import resolve_spec_path
    text = resolve_spec_path("dgx-h100-superpod").read_text().replace('name = "leaf"\n', 'name = "leaf"\nsharp = true\n',
                                                                       1)
    (folder / "sharp.toml").write_text(text)
    return "sharp.toml"


def test_a_technology_axis_that_cannot_reduce_under_sharp_is_refused_before_the_sweep(tmp_path):
    """rev66: a fabric.technology axis over a spec with sharp = true gave an error row at the RoCE point after the
    others ran. The spec's own rule (spec.load: in_network_reduction, NVIDIA SHARP's device list) refuses it first,
    one line naming the axis, the value and the spec."""
    from topo.errors import TopoError
    from topo.sweep import study_from_dict
    spec = _sharp_spec(tmp_path)
    study = {"name": "t", "specs": [spec], "compute": ["estimate"],
             "axes": {"collective": ["all_reduce"], "size": ["1G"], "fabric.technology": ["infiniband_ndr", "roce"]}}
    with pytest.raises(TopoError) as got:
        study_from_dict(study, source="t.toml", folder=tmp_path)
    exc = got.value
    assert (exc.source, exc.key) == ("t.toml", "axes.fabric.technology"), (exc.source, exc.key)
    assert exc.message.startswith("'roce': fabric.tiers[0].sharp: true on the 'leaf' tier, but fabric.technology = "
                                  "roce, whose switches cannot reduce in the network"), exc.message
    assert "(in spec sharp.toml)" in exc.message
    ok = {**study, "axes": {**study["axes"], "fabric.technology": ["infiniband_ndr", "infiniband_xdr"]}}
    assert study_from_dict(ok, source="t.toml", folder=tmp_path).axes["fabric.technology"] == ["infiniband_ndr",
                                                                                                 "infiniband_xdr"]


def _half_profile(tmp_path) -> str:
    """A profile file as ``topo calibrate`` writes it (tests/test_plan_profile_tidy67.py's): half the network
    efficiency over the nccl base."""
    path = tmp_path / "half-net.toml"
    path.write_text('[profile]\nkind = "user"\nname = "half-net"\nbase = "nccl"\n[network_efficiency]\nvalue = 0.5\n'
                    'source = "a test"\nfitted = true\nfitted_on = "a test log"\n')
    return str(path)


def test_the_plans_text_names_the_profile_it_priced_with(tmp_path):
    """tidy67: topo plan --profile priced its collectives with the file but its text said nothing of it (train's
    says "collectives priced with profile NAME (--profile to change)"); --json network.profile names it too."""
    spec = ("dgx-h100-superpod", "--set", "cluster.num_units=1")
    plain = run_cli("plan", *spec, check=True).stdout
    assert "collectives priced with profile hopper+infiniband_ndr (--profile to change)" in plain, plain[-800:]
    half = run_cli("plan", *spec, "--profile", _half_profile(tmp_path), check=True).stdout
    assert "collectives priced with profile half-net (--profile to change)" in half
    got = json.loads(run_cli("plan", *spec, "--json", "--profile", _half_profile(tmp_path), check=True).stdout)
    assert got["network"]["profile"] == "half-net"
    bare = run_cli("plan", *spec, "--no-collectives", check=True).stdout
    assert "priced with profile" not in bare


def test_the_reports_cut_names_every_gpu_the_failed_switch_cuts_off(tmp_path):
    """tidy67: the report's cut named the two GPUs the router found (GPU 143, GPU 72), where train's refusal names
    the failed NVLink switch's whole domain ("GPUs 72 to 143": gb200-nvl72-superpod, 72 GPUs a rack, nvswitch1 is
    rack 1's). One rule for both (topo.fabric.failures.nvswitch_domain_words)."""
    domain = "nvswitch1 failed: its NVLink domain (GPUs 72 to 143)"
    bad = run_cli("report", "gb200-nvl72-superpod", "--fail", "nvswitch1", "--format", "svg", "--figure", "curves",
                  "-o", str(tmp_path / "c.svg"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert (f"cut the cluster scope's GPUs apart ({domain}, whose GPUs reach each other only through it: GPU 143 "
            "cannot reach GPU 72") in bad.stderr, bad.stderr
    train = run_cli("train", "gb200-nvl72-superpod", "--model", "llama3-8b", "--tp", "8", "--global-batch", "144",
                    "--gpus", "144", "--fail", "nvswitch1")
    assert train.returncode == 2 and domain in train.stderr, train.stderr


def test_a_region_estimate_point_is_priced_with_its_profile(tmp_path, one_su):
    """tidy67: a region's estimate point refused the profile axis ("across sites, a point takes collective, size and
    algorithm; not profile") though its train point takes it. regprof68's rule: the profile prices each site's
    in-site collectives, never the DCI: the point equals estimate_region(..., profile=)."""
    from pathlib import Path

    from topo.engine.region_estimate import estimate_region
    from topo.fabric.region import build_region
    from topo.sweep.point import clear_cache, run_point
    half = _half_profile(tmp_path)
    specs = {"one-su": ("one-su.toml", Path(one_su).read_text())}
    clear_cache()
    rows = {p: run_point({"spec": "one-su", "collective": "all_reduce", "size": "1G", **({"profile": p} if p else {})},
                         ["estimate"], specs) for p in (None, half)}
    assert all(r["error"] is None for r in rows.values()), rows
    region = build_region(one_su, [])
    for p in (None, half):
        assert rows[p]["time_s"] == pytest.approx(estimate_region(region, "all_reduce", ["1G"], profile=p)
                                                  .results[0].time_s, rel=1e-12)
    assert rows[half]["time_s"] > rows[None]["time_s"] * 1.2  # half the network efficiency in each site


def test_a_regions_plan_refuses_the_profile_saying_it_prices_nothing(tmp_path, one_su):
    """tidy67: a region's plan refused --profile as "not wired for a region yet"; it prices no collective (its text
    and --json are the same with --no-collectives: the sites' power, capex and TCO and the DCI's bill), so a
    profile has nothing to price there: one line that says so and where a profile prices a region."""
    proc = run_cli("plan", one_su, "--profile", _half_profile(tmp_path))
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: --profile: ") and "prices no collective" in err, err
    assert "not wired" not in err
    same = [run_cli("plan", one_su, "--json", *extra, check=True).stdout for extra in ((), ("--no-collectives",))]
    assert same[0] == same[1]  # what the refusal says: nothing the plan shows depends on its collectives
