"""reg70: per-site profiles in a mixed-network region. A ``[[sites]]`` entry's ``profile`` key names the cost profile
of that site's in-site collectives (a bundled name or a file ``topo calibrate`` wrote, found beside the region file as
a site's ``spec`` is); each site's in-site collectives are priced by its own, never the DCI (regprof68's rule); a
command's ``--profile`` replaces every site's. A key of another network than its site's, or an unknown name, is one
line naming the site.

The region: east one DGX H100 scalable unit on InfiniBand NDR (the bundled dgx-h100-superpod spec at
cluster.num_units=1), west the same unit on RoCE (``fabric.technology=roce``), 40 km apart. The profile files are as
``topo calibrate`` writes them (kind user, a base, the network efficiency it overrides), as tests/test_prof66.py's.
"""

import pytest

from conftest import run_cli
from topo import build_fabric, load_spec
from topo.engine.estimate import estimate
from topo.engine.region_estimate import estimate_region
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_search import search_across_sites
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

GIB = 2 ** 30
SITES = {"east": ["cluster.num_units=1"], "west": ["cluster.num_units=1", "fabric.technology=roce"]}


def _profile(folder, name: str, base: str) -> str:
    (folder / f"{name}.toml").write_text(
        f'[profile]\nkind = "user"\nname = "{name}"\nbase = "{base}"\n[network_efficiency]\nvalue = 0.5\n'
        'source = "a test"\nfitted = true\nfitted_on = "a test log"\n')
    return f"{name}.toml"


def _region_file(folder, east: str | None, west: str | None) -> str:
    keys = {"east": east, "west": west}
    sites = "".join(f'[[sites]]\nname = "{n}"\nspec = "dgx-h100-superpod"\nset = {s!r}\n'.replace("'", '"')
                    + (f'profile = "{keys[n]}"\n' if keys[n] else "") for n, s in SITES.items())
    path = folder / f"mixnet-{east}-{west}.toml"
    path.write_text(f'name = "mixnet"\ndescription = "an InfiniBand site and a RoCE site (a test region)"\n{sites}'
                    '[interconnect]\ntopology = "mesh"\ndistance_km = 40\nlatency_per_km = "4.9 us"\n'
                    'equipment_latency = "50 us"\nwaves = 16\nwave_rate = "800 Gb/s"\nattach = "top"\n')
    return str(path)


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reg70")
    return {"folder": folder, "ib": _profile(folder, "ib-half", "hopper+infiniband_ndr"),
            "roce": _profile(folder, "roce-half", "hopper+roce")}


def _site(name):
    return build_fabric(load_spec("dgx-h100-superpod", SITES[name]))


def test_each_site_prices_its_in_site_phases_with_its_own_profile(d):
    """The hierarchical all-reduce's reduce-scatter is the slower site's, each site's timed with its own file, to
    the digit; the DCI phase is the one without the keys."""
    region = build_region(_region_file(d["folder"], d["ib"], d["roce"]))
    plain = estimate_region(build_region(_region_file(d["folder"], None, None)), "all_reduce", [GIB], "hierarchical")
    mine = estimate_region(region, "all_reduce", [GIB], "hierarchical")
    assert mine.profile == ["ib-half", "roce-half"] and plain.profile == ["hopper+infiniband_ndr", "hopper+roce"]
    own = [estimate(_site(n), "reduce_scatter", [GIB], profile=str(d["folder"] / d[k])).results[0]
           for n, k in (("east", "ib"), ("west", "roce"))]
    slower = max(own, key=lambda x: x.latency_s + x.bandwidth_s)
    got = mine.results[0].phases["rs"]
    assert (got["latency_s"], got["bandwidth_s"]) == (slower.latency_s, slower.bandwidth_s)
    assert got["bandwidth_s"] > 1.2 * plain.results[0].phases["rs"]["bandwidth_s"]
    assert mine.results[0].phases["dci"] == plain.results[0].phases["dci"]
    every = estimate_region(region, "all_reduce", [GIB], "hierarchical", profile="nccl")  # --profile: every site's
    assert every.profile == plain.profile and every.results[0].phases == plain.results[0].phases


def test_each_sites_share_steps_with_its_own_profile(d):
    """Across the sites, each share's step is its site's own step with its own file; the DCI phase is unchanged."""
    region = build_region(_region_file(d["folder"], d["ib"], d["roce"]))
    model, job = load_model("llama3-8b"), make_layout(tp=8, dp=64, global_batch=512, micro_batch=8)
    share = make_layout(tp=8, dp=32, global_batch=256, micro_batch=8)
    r = estimate_across_sites(region, model, job)
    assert r.site_profile == {"east": "ib-half", "west": "roce-half"}
    for n, k in (("east", "ib"), ("west", "roce")):
        assert r.site_step_s[n] == estimate_step(_site(n), model, share, profile=str(d["folder"] / d[k])).step_time_s
    plain = estimate_across_sites(build_region(_region_file(d["folder"], None, None)), model, job)
    assert r.strategies[0].dci_time_s == plain.strategies[0].dci_time_s
    found = search_across_sites(region, model, 512, gpus=512, top=1, micro_batches=(8,), cps=(1,), vpps=(1,),
                                recompute=("none",), dp_sharding=("zero1",))
    best = found.ranked[0]
    assert best.site_profile == r.site_profile  # the search prices each site with its own file, as the step does
    L = best.one_site["layout"]
    again = estimate_across_sites(region, model, make_layout(tp=L["tp"], pp=L["pp"], dp=2 * L["dp"], global_batch=512,
                                                             micro_batch=8))
    assert best.site_step_s == again.site_step_s


@pytest.mark.parametrize("west, said", [
    ("ib", ["site west", "sites[1].profile", "infiniband_ndr", "roce", "allowed:"]),
    ("hopper+infiniband_ndr", ["site west", "sites[1].profile", "infiniband_ndr", "roce", "allowed:"]),
    ("nosuch", ["site west", "sites[1].profile", "nosuch"]),
])
def test_a_site_profile_of_another_network_or_unknown_is_one_line(d, west, said):
    path = _region_file(d["folder"], d["ib"], d.get(west, west))
    for args in (("estimate", path, "-b", "1G", "-e", "1G"),
                 ("train", path, "--model", "llama3-8b", "--tp", "8", "--dp", "64", "--global-batch", "512")):
        proc = run_cli(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "Traceback" not in proc.stderr and all(s in proc.stderr for s in said), proc.stderr


def test_the_train_text_names_each_sites_profile(d):
    path = _region_file(d["folder"], d["ib"], d["roce"])
    out = run_cli("train", path, "--model", "llama3-8b", "--tp", "8", "--dp", "64", "--global-batch", "512",
                  check=True).stdout
    assert "priced with its own profile: east ib-half, west roce-half (--profile to change)" in out, out[-600:]
