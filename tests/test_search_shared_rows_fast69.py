"""Issue 23's 100k search: a stage's row before the host's waits (:func:`.operators._stage_base`) kept across layouts
by what it reads (:func:`.operators.stage_base_key`), and a job's placement and its TP span kept across mappings by
what they read (:func:`.mapping._job_ids`, :func:`.mapping._tp_span`). Each key is checked where a cache could give a
wrong answer: two layouts that differ only in one field the key must hold, the second asked after the first."""

from __future__ import annotations

import numpy as np
import pytest

from field_reads import (DSV3_LAYOUT, FIELDS, READ, deepseek_v3_on_h100, kept_block_times, other_pp_layouts,
                         recompute_pairs, recorded, same_rows as _same)
from topo.errors import TopoError
from topo.training import mapping, operators
from topo.training.mapping import _placed_ids, map_layout
from topo.training.operators import (BLOCK_TIME_UNREAD, STAGE_BASE_READS, bf16_layers, pipeline_units,
                                     rank_computes_at)
from topo.training.parallel import ParallelLayout


@pytest.fixture(scope="module")
def dsv3():
    return deepseek_v3_on_h100()


BASE = DSV3_LAYOUT
# pairs that differ in one field _stage_base reads beyond the blocks' times (STAGE_BASE_READS)
PAIRS = recompute_pairs("moe_act")


@pytest.mark.parametrize("field,a,b", PAIRS, ids=[p[0] for p in PAIRS])
def test_a_layout_differing_only_in_a_read_field_gets_its_own_rows(dsv3, field, a, b):
    """Two layouts alike but for ``field``, priced in turn with one ``blocks`` dict: the second's rows equal its
    rows priced alone (no ``blocks``), and differ from the first's. With ``field`` left out of the key the second
    is given the first's stage rows (seen failing, each field)."""
    model, gpu = dsv3
    la, lb = ParallelLayout(**BASE, **a), ParallelLayout(**BASE, **b)
    assert {k for k in FIELDS if getattr(la, k) != getattr(lb, k)} == {field}
    blocks: dict = {}
    covers = (np.inf, 0.0)
    first = rank_computes_at(model, la, gpu, covers, blocks)
    assert any(k[0] == operators.STAGE_BASE for k in blocks)  # the shared rows are kept
    second = rank_computes_at(model, lb, gpu, covers, blocks)
    assert _same(second, rank_computes_at(model, lb, gpu, covers))
    assert _same(first, rank_computes_at(model, la, gpu, covers))
    assert not _same(first, second)


def test_a_layout_of_another_pp_shares_the_rows_and_times_alike(dsv3):
    """Layouts of another pp, dp and rank order whose stages hold the same units take the kept rows: their step's
    compute is the one priced without any sharing."""
    model, gpu = dsv3
    blocks: dict = {}
    lays = other_pp_layouts()
    for lay in lays:
        assert _same(rank_computes_at(model, lay, gpu, (np.inf, 0.0), blocks),
                     rank_computes_at(model, lay, gpu, (np.inf, 0.0)))
    kept = [k for k in blocks if k[0] == operators.STAGE_BASE]
    assert 0 < len(kept) < sum(len(pipeline_units(model, lay)) for lay in lays)


@pytest.mark.parametrize("fixed", [dict(recompute="full", recompute_num_layers=1, recompute_early_stop=True),
                                   dict(recompute="selective", recompute_modules=["core_attn", "moe_act", "mlp"]),
                                   dict(recompute="full", precision="fp8", fp8_recipe="blockwise",
                                        num_layers_at_start_in_bf16=1)])
def test_stage_base_reads_only_its_key(dsv3, fixed):
    """``_stage_base`` reads no layout field outside :func:`.operators.block_time_key` (every field but
    BLOCK_TIME_UNREAD) and STAGE_BASE_READS (the blocks' times are read through ``bt``, keyed apart)."""
    model, gpu = dsv3
    lay = ParallelLayout(**BASE, **fixed)
    rec, bt = recorded(lay), kept_block_times(model, lay, gpu)
    READ.clear()
    for units, flags in zip(pipeline_units(model, lay), bf16_layers(model, lay)):
        operators._stage_base(rec, units, flags, bt)
    assert READ & set(STAGE_BASE_READS)
    assert READ <= (FIELDS - set(BLOCK_TIME_UNREAD)) | set(STAGE_BASE_READS)


@pytest.fixture
def fresh_maps(monkeypatch):
    for name in ("_MAPS", "_SCALARS", "_PLACEMENTS"):
        monkeypatch.setattr(mapping, name, {})


@pytest.mark.parametrize("other", [dict(first_gpu=64), dict(skip_domains=[1]), dict(gpus_per_domain_used=4)],
                         ids=["first_gpu", "skip_domains", "gpus_per_domain_used"])
def test_a_placement_differing_only_in_what_it_reads_is_placed_again(fresh_maps, other):
    """Two layouts alike but for one field the placement reads, mapped in turn: the second's GPU ids are its own
    (:func:`.mapping._placed_ids` of every rank), not the first's kept ones."""
    kw = dict(tp=2, pp=2, dp=16, ep=4, global_batch=64, gpus_per_domain_used=8)
    a, b = ParallelLayout(**kw), ParallelLayout(**{**kw, **other})
    grids = []
    for lay in (a, b):
        m = map_layout(lay, 8, 1024)
        used = lay.gpus_per_domain_used
        want = _placed_ids(np.arange(lay.gpus), used, 8, lay.first_gpu, tuple(lay.skip_domains))
        assert np.array_equal(m.grid.ravel(), want)
        grids.append(m.grid)
    assert not np.array_equal(grids[0], grids[1])
    assert len(mapping._PLACEMENTS) == 2


@pytest.mark.parametrize("kw,other", [(dict(tp=8, dp=8), dict(rank_order="dp-cp-tp-ep-pp")),
                                      (dict(tp=2, dp=16), dict(tp=16, dp=2))], ids=["axes", "sizes"])
def test_a_tp_span_differing_only_in_the_grid_is_checked_again(fresh_maps, kw, other):
    """One placement, TP inside a domain of 8 (span 1, kept), then TP across domains by rank order alone (dp
    fastest: the grid's sizes the same, each TP group's GPUs 8 ranks apart) or by size alone (TP 16): refused, not
    given the first's kept span (seen mapped with the key lacking the grid's axes, resp. sizes)."""
    kw = dict(pp=2, global_batch=64, gpus_per_domain_used=8, **kw)
    a, b = ParallelLayout(**kw), ParallelLayout(**{**kw, **other})
    assert map_layout(a, 8, 1024).domains_spanned("tp") == 1
    assert b.gpus == a.gpus
    with pytest.raises(TopoError, match="spans [0-9]+ NVLink domains"):
        map_layout(b, 8, 1024)
