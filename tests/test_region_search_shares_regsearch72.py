"""The region search ranks the by-size shares ``topo train REGION`` runs (regsearch72).

Before, ``topo train REGION --search`` searched one equal share on every site while ``train`` ran by-size shares
(regshare71), so its #1 was a job the default train did not run. Now, on sites of different sizes, the search
enumerates the whole job's layouts, splits each one's replicas as ``site_shares`` does and times each site's own
share on its own fabric; its ranking is checked against every layout timed with ``estimate_across_sites`` afresh.

The region: east one DGX H100 scalable unit (256 GPUs), west two (512) (the bundled dgx-h100-superpod spec, NVIDIA's
DGX SuperPOD H100 reference architecture), 40 km apart on one 100 Gb/s wave (tests/small_regions.py): a slow DCI,
so its phase weighs on the step. The job: Llama 3 8B on 96 GPUs (east 32, west 64 by size), 96 sequences a step,
no recomputation, ``fsdp_grad_op``.
"""

import json

import pytest

from small_regions import built_region, region_file, two_sites
from topo.cli.main import main
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_search import search_across_sites
from topo.training.search import candidate_layouts
from topo.errors import TopoError
from topo.units import format_time

GPUS, BATCH, TOP = 96, 96, 3
NARROW = dict(recompute=("none",), dp_sharding=("fsdp_grad_op",))
TEXT = two_sites("unlike", "256 + 512 GPUs on one 100 Gb/s wave", "dgx-h100-superpod", 1, 2).replace(
    "waves = 16", "waves = 1").replace('"800 Gb/s"', '"100 Gb/s"')


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, TEXT, "unlike")


@pytest.fixture(scope="module")
def model():
    return load_model("llama3-8b")


def _every_layout(region, model) -> list:
    """Every job layout whose by-size shares run, timed across the sites on its own."""
    out = []
    for lay, _ in candidate_layouts(model, GPUS, BATCH, gpus_per_domain=8, **NARROW):
        if lay is None:
            continue
        try:
            m = estimate_across_sites(region, model, lay, shares="by-size")
        except TopoError:
            continue
        if m.fits:
            out.append(m)
    return out


def test_the_search_ranks_by_size_shares_as_the_brute_force(region, model):
    every = _every_layout(region, model)
    assert len(every) > 10 and any(len(set(m.site_dp.values())) > 1 for m in every)
    res = search_across_sites(region, model, BATCH, gpus=GPUS, top=TOP, **NARROW)
    assert res.shares == "by-size" and res.gpus == GPUS
    want = sorted(m.step_time_s for m in every)[:TOP]
    assert [res.step_time_s(r) for r in res.ranked] == pytest.approx(want, rel=1e-12)
    for r in res.ranked:  # each the figure a fresh estimate_across_sites gives the same job with the same shares
        assert r.shares == "by-size" and r.site_dp["west"] > r.site_dp["east"]
        same = [m for m in every if m.site_dp == r.site_dp and m.one_site["layout"] == r.one_site["layout"]]
        assert len(same) == 1 and same[0].step_time_s == pytest.approx(res.step_time_s(r), rel=1e-12)


def test_equal_shares_still_searched_when_asked(region, model):
    res = search_across_sites(region, model, BATCH, gpus=GPUS, top=1, shares="equal", **NARROW)
    assert res.shares == "equal" and set(res.ranked[0].site_dp.values()) == {GPUS // 2 // 1 // (
        res.ranked[0].one_site["layout"]["tp"] * res.ranked[0].one_site["layout"]["cp"]
        * res.ranked[0].one_site["layout"]["pp"])}


def test_the_cli_s_first_reruns_to_its_figure(tmp_path_factory, capsys):
    path = region_file(tmp_path_factory, TEXT, "unlike")
    flags = ["--model", "llama3-8b", "--global-batch", str(BATCH), "--gpus", str(GPUS),
             "--recompute", "none", "--dp-sharding", "fsdp_grad_op"]
    assert main(["train", path, *flags, "--search", "--top", "2"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("#1 across sites: "))
    step = next(x for x in out.splitlines() if x.startswith("1 ")).split()
    argv = line.removeprefix("#1 across sites: topo ").split()
    assert main(argv + ["--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["shares"] == "by-size" and got["site_dp"]["west"] > got["site_dp"]["east"]
    chosen = next(s for s in got["strategies"] if s["strategy"] == got["chosen"])
    assert format_time(chosen["step_time_s"]) in " ".join(step)
