"""The region search ranks a share's layouts by the slowest site's step (regsearch66).

The sites of a region step in lockstep, so a layout's step is its slowest site's (regfail65). The search used to
rank the share's layouts on one site's fabric (the smallest, a failed one first) and only then time its best ``top``
on every site: with ``east:spine0`` and ``west:leaf0`` failed it ranked on east, whose best layouts (pp 1) suffer
most from west's failed leaf, and missed the layout that west's failure favours (pp 2, vpp 4: less data-parallel
traffic through the failed leaf). Now every distinct site fabric times each layout, a layout's bound is the largest
of its bounds on each, and a healthy region of alike sites is one fabric, searched as before.

The region: two sites of 2 DGX H100 scalable units (512 GPUs each, NVIDIA's DGX SuperPOD H100 reference
architecture, the bundled dgx-h100-superpod spec), 40 km apart (as tests/test_region_site_failures_regfail65.py).
The job: Llama 3 70B, 512 sequences a step, 512 GPUs a site.
"""

import pytest

from topo import build_fabric, load_spec
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_memory import JobForm
from topo.training.parallel import ParallelLayout
from topo.training.multisite_search import search_across_sites
from topo.training.search import search_layouts
from topo.training.step import estimate_step
from small_regions import built_region
from test_region_site_failures_regfail65 import REGION

FAILS = ("east:spine0", "west:leaf0")
KEY = ("tp", "cp", "pp", "dp", "vpp", "micro_batch", "recompute", "dp_sharding")


def _key(layout: dict) -> tuple:
    return tuple(layout[k] for k in KEY)


def _share(r) -> ParallelLayout:
    return ParallelLayout.model_validate({k: v for k, v in r.layout.items() if k in ParallelLayout.model_fields})


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, REGION)


@pytest.fixture(scope="module")
def model():
    return load_model("llama3-70b")


@pytest.fixture(scope="module")
def healthy(region, model):
    return search_across_sites(region, model, 512, top=3)


@pytest.fixture(scope="module")
def failed(region, model):
    return search_across_sites(region.with_failures(*FAILS), model, 512, top=3)


def test_a_failure_in_the_second_site_changes_the_best_layout(healthy, failed):
    """Healthy: TP 4, DP 128 a site, pp 1. West's failed leaf favours pp 2 with 4 virtual stages (half the DP
    traffic a step); ranked on east's fabric alone, the search never timed it (its best was TP 8, pp 1)."""
    assert _key(healthy.ranked[0].one_site["layout"]) == (4, 1, 1, 128, 1, 1, "none", "fsdp_grad_op")
    best = failed.ranked[0]
    assert _key(best.one_site["layout"]) == (4, 1, 2, 64, 4, 1, "none", "fsdp_grad_op")
    assert best.pacing_site == "west"
    assert best.site_step_s["west"] > best.site_step_s["east"]


def test_each_ranked_layout_is_its_step_timed_by_hand_on_each_site(region, model, failed):
    """The search's figures are estimate_across_sites' own for each layout (each site's share timed afresh)."""
    r = region.with_failures(*FAILS)
    for got in failed.ranked:
        share = ParallelLayout.model_validate({k: v for k, v in got.one_site["layout"].items()
                                               if k in ParallelLayout.model_fields})
        lay = share.model_copy(update={"dp": share.dp * 2, "global_batch": 512})
        want = estimate_across_sites(r, model, lay)
        assert want.site_step_s == got.site_step_s
        assert want.step_time_s == failed.step_time_s(got)
        assert want.pacing_site == got.pacing_site


def test_the_ranked_layouts_are_the_best_by_the_slowest_site(model, failed):
    """Exact: the three best shares by the slowest site's step, found by hand. West's ten best alone (its own
    search), each also timed on east; a layout outside them steps at least west's tenth alone there, so while the
    third best slowest step is below that, no layout outside can enter."""
    spec = load_spec("dgx-h100-superpod", ["cluster.num_units=2"])
    west = build_fabric(spec).with_failures("leaf0")
    east = build_fabric(spec).with_failures("spine0")
    ten = search_layouts(west, model, 512, 256, top=10).ranked
    slowest = sorted((max(w.step_time_s, estimate_step(east, model, _share(w)).step_time_s), w.memory_per_gpu_bytes,
                      _key(w.layout)) for w in ten)
    assert slowest[2][0] < ten[-1].step_time_s
    assert sorted(_key(x.one_site["layout"]) for x in failed.ranked) == sorted(k for _, _, k in slowest[:3])
    assert sorted(x.one_site_step_s for x in failed.ranked) == [t for t, _, _ in slowest[:3]]


def test_a_healthy_region_searches_one_site_as_before(region, model, healthy):
    """Alike healthy sites are one fabric: the search is the one-site search of a site's share, ranked by the step
    across the sites (regsearch67), to the last bit (the same layouts evaluated, the same engine calls), and each
    site's share steps as the one site's.

    The region's ``nccl.dp_reduction`` is auto, so its job may take NCCL's flat cross-DC ring, whose one optimizer
    instance shards the ZeRO state over both sites' replicas (regions77, section 370): the region search checks
    each share's memory with its state over ``2 dp`` ranks and keeps a share that does not fit alone where its job
    fits in the form it takes. The one-site search is given the same (``job_form``), so the two still agree to the
    last bit (without it the one-site search rejects more layouts by memory and its counts differ)."""
    fabric = build_fabric(load_spec("dgx-h100-superpod", ["cluster.num_units=2"]))

    def job(r, steps):
        share = _share(r)
        lay = share.model_copy(update={"dp": share.dp * 2, "global_batch": 512})
        return estimate_across_sites(region, model, lay, one_site=steps)

    form = JobForm(state_dp=lambda lay: lay.dp * 2, fits_by=lambda r, steps: job(r, steps).fits)
    one = search_layouts(fabric, model, 512, 256, top=3, rank_by=lambda r, steps: job(r, steps).step_time_s,
                         job_form=form)
    assert [len(s) for s in one.site_steps] == [1, 1, 1]
    assert healthy.search == {k: getattr(one, k) for k in healthy.search}
    assert sorted(x.one_site_step_s for x in healthy.ranked) == sorted(r.step_time_s for r in one.ranked)
    assert all(x.site_step_s == {"east": x.one_site_step_s, "west": x.one_site_step_s} for x in healthy.ranked)
