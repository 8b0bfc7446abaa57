"""The region search places each site's share as that site's own step does, and names the site a failed part
refuses (tidy66, regsearch66's Left (a) and (b)): one rule with :func:`topo.training.multisite.estimate_across_sites`.

(a) East holds 3 GB200 NVL72 racks (216 GPUs), west 2 (144): a share of 144 GPUs runs at 64 a rack on east (3 racks
hold 192), as Megatron-Bridge's GB200 recipes run a rack, and at all 72 on west (2 x 64 = 128 < 144)
(:func:`topo.training.mapping.default_placement`). The search placed every layout on every site as on the first
(west: 72 a rack), while ``estimate_across_sites`` places each site apart, so east's step and the pacing site
differed from the layout timed afresh.

(b) With ``east:spine0`` and ``west:gpu5`` failed, the search ranks on east first (the smallest site, a failed one
first) and the job's GPUs 0-511 hold west's GPU 5: the refusal named east.
"""

import pytest

from topo import build_fabric, load_spec
from topo.errors import TopoError
from topo.fabric.region import build_region
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_search import search_across_sites
from topo.training.parallel import ParallelLayout
from topo.training.step import estimate_step
from test_region_site_failures_regfail65 import REGION as TWO_SU
from small_regions import two_sites

NVL = two_sites("nvl-3-2", "east: 3 GB200 NVL72 racks, west: 2, 40 km apart (a test region)", "gb200-nvl72-superpod", 3, 2)


@pytest.fixture(scope="module")
def nvl(tmp_path_factory):
    path = tmp_path_factory.mktemp("tidy66") / "nvl-3-2.toml"
    path.write_text(NVL)
    return build_region(path)


@pytest.fixture(scope="module")
def ranked(nvl):
    return search_across_sites(nvl, load_model("llama3-8b"), 288, top=3, shares="equal")  # regsearch72: its premise


def _share(got) -> ParallelLayout:
    """The share as a user gives it: no placement field (each site places it)."""
    return ParallelLayout.model_validate({k: v for k, v in got.one_site["layout"].items()
                                          if k in ParallelLayout.model_fields and k != "gpus_per_domain_used"})


def test_each_ranked_layout_is_estimate_across_sites_afresh(nvl, ranked):
    """The search ranks equal shares (regshare71's Left 1), so the layout afresh asks for them (share72: by-size,
    the default since regshare71, runs east's larger share and its steps differ)."""
    model = load_model("llama3-8b")
    for got in ranked.ranked:
        share = _share(got)
        want = estimate_across_sites(nvl, model, share.model_copy(update={"dp": share.dp * 2, "global_batch": 288}),
                                     shares="equal")
        assert want.site_step_s == got.site_step_s
        assert want.step_time_s == ranked.step_time_s(got)
        assert want.pacing_site == got.pacing_site


def test_east_steps_at_64_a_rack_as_its_own_step_places_it(ranked):
    model = load_model("llama3-8b")
    east = build_fabric(load_spec("gb200-nvl72-superpod", ["cluster.num_units=3"]))
    west = build_fabric(load_spec("gb200-nvl72-superpod", ["cluster.num_units=2"]))
    for got in ranked.ranked:
        share = _share(got).model_copy(update={"global_batch": 144})
        on_east, on_west = estimate_step(east, model, share), estimate_step(west, model, share)
        assert (on_east.layout["gpus_per_domain_used"], on_west.layout["gpus_per_domain_used"]) == (64, 72)
        assert got.site_step_s == {"east": on_east.step_time_s, "west": on_west.step_time_s}


def test_a_failed_gpu_on_the_second_site_names_that_site(tmp_path):
    path = tmp_path / "two-su.toml"
    path.write_text(TWO_SU)
    region = build_region(path).with_failures("east:spine0", "west:gpu5")
    model = load_model("llama3-70b")
    with pytest.raises(TopoError) as searched:
        search_across_sites(region, model, 512, top=3)
    with pytest.raises(TopoError) as timed:
        estimate_across_sites(region, model, ParallelLayout(tp=8, dp=128, global_batch=512))
    assert searched.value.message.startswith("site west: GPU 5 failed and is one of the job's GPUs (0 to 511)")
    assert searched.value.message == timed.value.message and searched.value.key == "fail"
