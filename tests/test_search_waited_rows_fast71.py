"""Issue 23's 100k search: a stage's row with the host's waits (:func:`.operators._waited_row`) kept across layouts
by what the waits read (:func:`.operators.stage_base_key`, the stage's units and the EP cover). Each part of the key
is checked where the cache could give a wrong answer: two inputs that differ only in it, the second asked after the
first with one ``blocks`` dict, must get the rows they get priced alone."""

from __future__ import annotations

import numpy as np
import pytest

from field_reads import (DSV3_LAYOUT, FIELDS, READ, deepseek_v3_on_h100, kept_block_times, other_pp_layouts,
                         recompute_pairs, recorded, same_rows as _same)
from topo.training import operators
from topo.training.operators import (BLOCK_TIME_UNREAD, STAGE_BASE_READS, bf16_layers, pipeline_units,
                                     rank_computes_at)
from topo.training.parallel import ParallelLayout


@pytest.fixture(scope="module")
def dsv3():
    return deepseek_v3_on_h100()


BASE = DSV3_LAYOUT
# pairs that differ in one field the host's waits read: the recomputation (a replayed MoE syncs again, a full
# replay waits as the forward, early stop ends it before the combine) and whether the router syncs (host_syncs)
PAIRS = recompute_pairs("moe") + [("moe_capacity_factor", dict(), dict(moe_capacity_factor=1.0))]


def _host(rows: list) -> list:
    return [[s.by_module_s.get("host", 0.0) for s in one] for one in rows]


@pytest.mark.parametrize("field,a,b", PAIRS, ids=[p[0] for p in PAIRS])
def test_a_layout_differing_only_in_a_field_the_waits_read_gets_its_own_waits(dsv3, field, a, b):
    """Two layouts alike but for ``field``, priced in turn with one ``blocks`` dict whose stage bases
    (``_shared_base``'s entries) are dropped between them, so that only the kept waited rows could carry the first's
    rows over: the second's rows equal its rows priced alone and differ from the first's. With the
    layout's part dropped from the waited rows' key the second is given the first's rows (seen failing)."""
    model, gpu = dsv3
    la, lb = ParallelLayout(**BASE, **a), ParallelLayout(**BASE, **b)
    assert {k for k in FIELDS if getattr(la, k) != getattr(lb, k)} == {field}
    blocks: dict = {}
    covers = (np.inf, 0.0)
    first = rank_computes_at(model, la, gpu, covers, blocks)
    assert any(k[0] == operators.WAITED_ROW for k in blocks)  # the waited rows are kept
    for k in [k for k in blocks if k[0] == operators.STAGE_BASE]:
        del blocks[k]
    second = rank_computes_at(model, lb, gpu, covers, blocks)
    assert _same(second, rank_computes_at(model, lb, gpu, covers))
    assert not _same(first, second)


def test_a_cover_asked_after_another_gets_its_own_waits(dsv3):
    """One layout priced at the search's lower cover (``math.inf``) and then at 0 with one ``blocks`` dict: the
    second's rows equal those priced alone, and a dropless MoE stage waits longer at 0 (its expert all-to-alls no
    longer cover the host's launches). With the cover dropped from the key the second is given the first's rows
    (seen failing)."""
    model, gpu = dsv3
    lay = ParallelLayout(**BASE)
    blocks: dict = {}
    inf = rank_computes_at(model, lay, gpu, (np.inf,), blocks)
    zero = rank_computes_at(model, lay, gpu, (0.0,), blocks)
    assert _same(zero, rank_computes_at(model, lay, gpu, (0.0,)))
    assert _same(inf, rank_computes_at(model, lay, gpu, (np.inf,)))
    assert sum(map(sum, _host(zero))) > sum(map(sum, _host(inf)))


def test_layouts_of_another_pp_share_the_waited_rows_and_time_alike(dsv3):
    """Layouts of another pp, dp and rank order whose stages hold the same units take the kept waited rows: fewer
    are kept than their stages at both covers, and each layout's compute is the one priced without any sharing."""
    model, gpu = dsv3
    blocks: dict = {}
    lays = other_pp_layouts()
    for lay in lays:
        assert _same(rank_computes_at(model, lay, gpu, (np.inf, 0.0), blocks),
                     rank_computes_at(model, lay, gpu, (np.inf, 0.0)))
    kept = [k for k in blocks if k[0] == operators.WAITED_ROW]
    assert 0 < len(kept) < 2 * sum(len(pipeline_units(model, lay)) for lay in lays)


@pytest.mark.parametrize("fixed", [dict(recompute="full", recompute_num_layers=1, recompute_early_stop=True),
                                   dict(recompute="selective", recompute_modules=["core_attn", "moe", "mlp"]),
                                   dict(moe_capacity_factor=1.25),
                                   dict(recompute="full", precision="fp8", fp8_recipe="blockwise",
                                        num_layers_at_start_in_bf16=1)])
def test_the_host_waits_read_only_the_stage_base_key(dsv3, fixed):
    """``_host_waits_s`` reads no layout field outside :func:`.operators.block_time_key` (every field but
    BLOCK_TIME_UNREAD) and STAGE_BASE_READS (the blocks' times are read through ``bt``, keyed apart), at both of the
    search's covers: what lets ``_shared_waited`` keep its rows by the stage base's key."""
    model, gpu = dsv3
    lay = ParallelLayout(**BASE, **fixed)
    rec, bt = recorded(lay), kept_block_times(model, lay, gpu)
    READ.clear()
    for units, flags in zip(pipeline_units(model, lay), bf16_layers(model, lay)):
        for cover in (np.inf, 0.0):
            operators._host_waits_s(rec, list(zip(units, flags)), bt, cover)
    assert {"moe_capacity_factor", "recompute"} <= READ  # the recorder sees reads
    assert READ <= (FIELDS - set(BLOCK_TIME_UNREAD)) | set(STAGE_BASE_READS)
