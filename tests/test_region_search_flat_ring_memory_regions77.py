"""regions77 (section 370, item 1): a region's ``--search`` checks memory in the form its job takes across the sites.

Under NCCL's flat cross-DC ring Megatron-Core runs one distributed-optimizer instance over the job
(NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/distributed/distributed_data_parallel_config.py
line 34, ``num_distributed_optimizer_instances = 1``; parallel_state.py lines 927-929; distributed_data_parallel.py
lines 283-299), so the ZeRO state shards over every site's data-parallel ranks; the hierarchical form (NeMo's multi-DC
run, one instance a site) over a site's. The search's memory check now reads the same rule as ``topo train REGION``'s
memory (:func:`topo.training.multisite_memory.state_layout`), so a layout that fits only under the flat ring is ranked.

Closed form, Llama 3 8B (``N`` parameters) on two sites of one GPU each (dp 1 a site, 2 over the job), ZeRO-3:
BF16 weights (2 bytes), FP32 gradients (4) and Adam's FP32 main weights and moments (12) a parameter (Rajbhandari et
al. 2020), ``18 N / 2`` = 72 GB a GPU under the flat ring, ``18 N`` = 144 GB (over an H100's 80 GiB) under the
hierarchical form.
"""

import re

import pytest

from small_regions import built_region, two_sites
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.multisite import estimate_across_sites
from topo.training.multisite_search import search_across_sites
from topo.training.parallel import make_layout

MODEL = load_model("llama3-8b")
TEXT = two_sites("srch77", "two SUs", "dgx-h100-superpod", 1)
FORM = '[nccl]\ndp_reduction = "{}"\n'
SEARCH = dict(gpus=2, top=3, seq_len=4096, dp_sharding=("zero3",), cps=(1,), vpps=(1,), micro_batches=(1,))


def _search(tmp_path_factory, form: str, model=MODEL):
    region = built_region(tmp_path_factory, TEXT + FORM.format(form), f"srch77-{form}")
    return region, search_across_sites(region, model, 8, **SEARCH)


def test_a_layout_that_fits_only_under_the_flat_ring_is_ranked(tmp_path_factory):
    """Flat ring fixed: the ZeRO-3 layout (full recompute) is ranked, its state 18 N / 2 a GPU, its memory and fit the
    ones ``topo train REGION`` gives that layout, its share's too (regions82: one memory a job; the share alone, a
    site's instance, would not fit: ``test_the_hierarchical_form_fits_none``)."""
    region, got = _search(tmp_path_factory, "flat_ring")
    best = got.ranked[0]
    assert best.fits and best.one_site["fits"] and best.one_site["memory"] == best.memory
    state = sum(best.memory[k] for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes"))
    assert state == pytest.approx(18 * MODEL.total_params / 2, rel=1e-3)
    lay = best.one_site["layout"]
    same = estimate_across_sites(region, MODEL, make_layout(tp=lay["tp"], pp=lay["pp"], dp=2, global_batch=8,
                                                            seq_len=4096, dp_sharding=lay["dp_sharding"],
                                                            recompute=lay["recompute"]))
    assert same.fits and same.memory == best.memory
    assert "one optimizer instance over every site" in best.memory_sharding


def test_the_hierarchical_form_fits_none(tmp_path_factory):
    """Hierarchical fixed: a site's instance holds 18 N whatever the recompute; no layout fits, said as before."""
    with pytest.raises(TopoError, match="fits in no layout on 1 GPUs"):
        _search(tmp_path_factory, "hierarchical")


def test_in_auto_the_layout_that_fits_only_under_the_flat_ring_is_ranked(tmp_path_factory):
    """regions81 (section 378, item 3): auto takes the form the job fits in, so the layout that fits only under the
    ring is ranked in auto as with the ring fixed (before: dropped, the hierarchical form as fast and not fitting).
    regions82: auto compares the job's steps, and the ring's is the shorter here, so it is taken for its step, not
    for memory."""
    _, auto = _search(tmp_path_factory, "auto")
    _, ring = _search(tmp_path_factory, "flat_ring")
    assert auto.ranked[0].fits and auto.ranked[0].memory == ring.ranked[0].memory
    assert auto.ranked[0].dp_reduction == "flat_ring"


def test_in_auto_none_fitting_says_the_least_any_form_holds(tmp_path_factory):
    """regions78 (section 371): in auto the search's memory check reads the flat ring's state (the least any form
    holds), so where no layout fits (regions81: Llama 3 70B, which fits in neither form on two GPUs) its closest's
    memory is a lower bound, said as one: "needs at least", over the job's 2 ranks. That memory is the flat ring's for
    the layout (``estimate_across_sites`` with the ring fixed), and the hierarchical form (a site's instance, ``18 N``
    of state against the ring's ``18 N / 2``) holds more."""
    big = load_model("llama3-70b")
    with pytest.raises(TopoError) as got:
        _search(tmp_path_factory, "auto", big)
    m = re.search(r"the smallest \(dp=1 mb=1 (\w+) zero3\) needs at least ([\d.]+) GB per GPU \(its ZeRO state "
                  r"sharded over 2 data-parallel ranks, every site's, as NCCL's flat cross-DC ring's one optimizer "
                  r"instance shards it: the least any form the job may take holds\)", got.value.message)
    assert m, got.value.message
    lay = make_layout(tp=1, pp=1, dp=2, global_batch=8, seq_len=4096, dp_sharding="zero3", recompute=m.group(1))
    held = {}
    for form in ("flat_ring", "hierarchical"):
        region = built_region(tmp_path_factory, TEXT + FORM.format(form), f"least78-{form}")
        held[form] = estimate_across_sites(region, big, lay).memory["total_bytes"]
    assert float(m.group(2)) == pytest.approx(held["flat_ring"] / 1e9, abs=0.05)
    assert held["hierarchical"] - held["flat_ring"] == pytest.approx(18 * big.total_params / 2, rel=1e-3)


def test_one_site_none_fitting_is_said_as_before(tmp_path_factory):
    """Hierarchical fixed (no job form): the closest's memory is its need, said without "at least"."""
    with pytest.raises(TopoError, match=r"needs [\d.]+ GB per GPU, [\d.]+ GB more than"):
        _search(tmp_path_factory, "hierarchical")
