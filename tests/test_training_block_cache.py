"""The search's shared caches (issue 23's 100k search under a minute): each is keyed by what the cached function
reads, recorded here field by field, and a search with them gives the same full result list as without."""

from __future__ import annotations

import numpy as np
import pytest

import topo
from field_reads import READ, Recorded, h100_gpu, recorded
from topo.training import memory, operators
from topo.training import search as search_mod
from topo.training import mapping
from topo.training.mapping import _map, _widest_span, map_layout
from topo.training.model import load_model
from topo.training.parallel import ParallelLayout
from topo.training.search import candidate_layouts, search_layouts


def _recorded(lay: ParallelLayout) -> Recorded:
    return recorded(lay, gpus_per_domain_used=lay.gpus_per_domain_used)


VARIANTS = [{}, {"wgrad_output": "fsdp2", "dp_sharding": "zero3"}, {"precision": "fp8", "fp8_recipe": "blockwise"},
            {"cuda_graph_scope": ["attn", "moe_router"]}, {"pipeline_schedule": "dualpipe"},
            {"wgrad_output": "copied"}]


def _layouts(model, gpus, batch, **fixed):
    for i, (lay, _) in enumerate(candidate_layouts(model, gpus, batch, gpus_per_domain=8, **fixed)):
        if lay is not None and i % 5 == 0:
            yield lay.model_copy(update={"gpus_per_domain_used": 8})


@pytest.mark.parametrize("name", ["deepseek-v3-671b", "llama3-70b"])
def test_block_time_reads_only_its_key(name):
    """block_time reads none of BLOCK_TIME_UNREAD, but FSDP2's copies read the sharding and pp (kept in the key
    as copies_units and pp == 1): a field read and left out of the key would share a block time wrongly."""
    m = load_model(name)
    gpu = h100_gpu()
    kinds = ["embedding", "logits", *sorted(set("".join(m.blocks)))] + (["mtp_head"] if m.mtp_layers else [])
    seen = 0
    for fixed in VARIANTS:
        if fixed.get("pipeline_schedule") and name != "deepseek-v3-671b":
            continue
        for lay in _layouts(m, 1024, 1024, **fixed):
            rec = _recorded(lay)
            for kind in kinds:
                READ.clear()
                operators.block_time(m, rec, gpu, kind)
                leaked = READ & set(operators.BLOCK_TIME_UNREAD)
                if operators.copies_units(lay):
                    leaked -= {"dp_sharding", "pp"}  # read as copies_units and pp == 1, both in the key
                leaked -= {"dp_sharding"}  # read as whether DDP's per-parameter hooks run (ddp_hooks_run, in the key)
                assert not leaked, (kind, fixed, sorted(leaked))
                seen += 1
    assert seen > 100


def test_layouts_with_equal_block_keys_time_blocks_alike():
    """Two layouts that differ only in fields block_time does not read get one key and equal block times; the
    sharding under FSDP2, pp = 1 or not, and ZeRO-3 or below (whether Megatron-Core DDP's per-parameter hooks run,
    section 396) separate keys."""
    m = load_model("deepseek-v3-671b")
    gpu = h100_gpu()
    a = ParallelLayout(tp=2, pp=2, dp=32, ep=8, vpp=2, global_batch=256, recompute="none", dp_sharding="zero1")
    b = a.model_copy(update={"pp": 4, "dp": 16, "vpp": 1, "recompute": "full", "dp_sharding": "zero2",
                             "rank_order": "tp-cp-ep-pp-dp"})
    assert operators.block_time_key(a) == operators.block_time_key(b)
    for kind in ("*", "E", "-", "logits"):
        assert operators.block_time(m, a, gpu, kind) == operators.block_time(m, b, gpu, kind)
    f = a.model_copy(update={"wgrad_output": "fsdp2"})
    assert operators.block_time_key(f) != operators.block_time_key(f.model_copy(update={"dp_sharding": "zero3"}))
    assert operators.block_time_key(a) != operators.block_time_key(a.model_copy(update={"dp_sharding": "zero3"}))
    z = f.model_copy(update={"dp_sharding": "zero3"})
    assert operators.block_time_key(z) != operators.block_time_key(z.model_copy(update={"pp": 1, "vpp": 1,
                                                                                         "dp": 64}))


def test_stage_rows_read_only_their_key():
    """memory._stage_rows is kept per model and ROWS_READ: it reads no other field."""
    for name in ("deepseek-v3-671b", "llama3-70b"):
        m = load_model(name)
        for fixed in VARIANTS:
            if fixed.get("pipeline_schedule") and name != "deepseek-v3-671b":
                continue
            for lay in _layouts(m, 1024, 1024, **fixed):
                READ.clear()
                memory._stage_rows_of(m, _recorded(lay))
                assert READ <= set(memory.ROWS_READ), sorted(READ - set(memory.ROWS_READ))
                assert memory._stage_rows(m, lay) == tuple(memory._stage_rows_of(m, lay))


def test_widest_span_skips_the_sort_only_where_rows_are_sorted():
    """The span of each row's NVLink domains equals the sorted count, on sorted and shuffled rows."""
    rng = np.random.default_rng(3)
    for D in (4, 8, 72):
        for _ in range(20):
            ids = rng.choice(4096, size=(16, 32), replace=False)
            want = max(len(set((row // D).tolist())) for row in ids)
            assert _widest_span(ids, D) == want
            assert _widest_span(np.sort(ids, axis=1), D) == want
    assert _widest_span(np.arange(8).reshape(8, 1), 8) == 1


def test_a_kept_mapping_is_read_only_and_equal_to_a_fresh_one():
    lay = ParallelLayout(tp=2, pp=2, dp=8, ep=4, global_batch=64, gpus_per_domain_used=8)
    a = map_layout(lay, 8, 1024)
    assert map_layout(lay, 8, 1024) is a
    fresh = _map(lay, 8, 1024)
    for dim in ("tp", "dp", "pp", "ep", "edp", "dpcp", "tpcp"):
        assert np.array_equal(a.groups(dim), fresh.groups(dim))
        assert a.domains_spanned(dim) == fresh.domains_spanned(dim)
        with pytest.raises(ValueError):
            a.groups(dim)[0, 0] = -1
    other = map_layout(lay.model_copy(update={"rank_order": "tp-cp-ep-pp-dp"}), 8, 1024)
    assert not np.array_equal(other.groups("dp"), a.groups("dp"))


def test_search_with_the_shared_caches_equals_the_search_without(monkeypatch):
    """The whole ranked list (every field), and what was considered, pruned and evaluated, with the block cache,
    the kept stage rows and the kept mappings, and without any of them."""
    fabric = topo.build_fabric(topo.load_spec("meta-llama3-24k"))
    m = load_model("mixtral-8x7b")

    def run():
        r = search_layouts(fabric, m, 512, 512, top=8, rank_orders=("tp-cp-ep-dp-pp", "tp-dp-cp-ep-pp"))
        return [repr(x) for x in r.ranked], (r.considered, r.evaluated, r.pruned, r.rejected_memory, r.rejected_invalid, r.engine_calls)

    with_caches = run()
    orig = search_mod.stage_compute
    monkeypatch.setattr(search_mod, "stage_compute", lambda model, lay, gpu, cover, blocks=None:
                        orig(model, lay, gpu, cover))
    monkeypatch.setattr(memory, "_stage_rows", lambda model, lay: tuple(memory._stage_rows_of(model, lay)))
    monkeypatch.setattr(mapping, "MAPS_KEPT", 0)
    monkeypatch.setattr(mapping, "_MAPS", {})
    assert run() == with_caches


def test_stage_activations_read_only_their_key():
    """memory._stage_activations reads no layout field outside ACTIVATIONS_READ and STAGES_READ (its layers kept in
    BF16 are placed as the stages are: :func:`operators.bf16_layers`), and pipeline_units (its stages) none outside
    STAGES_READ: a field read and left out of the key of memory_per_gpu's ``activations`` would share one layout's
    activations with another."""
    seen = 0
    mixed = {"precision": "fp8", "fp8_recipe": "mxfp8", "num_layers_at_start_in_bf16": 1,
             "num_layers_at_end_in_bf16": 2, "module_recipes": ("linear_proj=bf16",)}
    for name in ("deepseek-v3-671b", "llama3-70b"):
        m = load_model(name)
        for fixed in VARIANTS + [{"recompute_modules": ["core_attn", "moe_act"]}, {"recompute_num_layers": 1}, mixed]:
            if fixed.get("pipeline_schedule") and name != "deepseek-v3-671b":
                continue
            for lay in _layouts(m, 1024, 1024, **fixed):
                stages = operators.pipeline_units(m, lay)
                READ.clear()
                memory._stage_activations(m, _recorded(lay), stages)
                key = set(memory.ACTIVATIONS_READ + memory.STAGES_READ)
                assert READ <= key, sorted(READ - key)
                READ.clear()
                operators.pipeline_units(m, _recorded(lay))
                assert READ <= set(memory.STAGES_READ), sorted(READ - set(memory.STAGES_READ))
                seen += 1
    assert seen > 100


def test_kept_activations_follow_every_field_they_read():
    """One ``activations`` dict across layouts: a layout that changes a field the activations read (micro-batch,
    recomputation, sequence, context and tensor parallelism, pipeline split) gets its own, equal to memory_per_gpu
    without the dict; one that changes only its sharding or expert parallelism reuses the entry."""
    m = load_model("deepseek-v3-671b")
    cap = 80e9
    base = ParallelLayout(tp=2, pp=4, dp=16, ep=8, vpp=2, global_batch=256, recompute="none", dp_sharding="zero1")
    kept: dict = {}
    first = memory.memory_per_gpu(m, base, cap, activations=kept)
    assert first == memory.memory_per_gpu(m, base, cap) and len(kept) == 1
    for change in ({"micro_batch": 2}, {"recompute": "full"}, {"recompute_modules": ["moe_act"]}, {"seq_len": 2048},
                   {"cp": 2, "dp": 8}, {"tp": 4, "dp": 8}, {"pp": 8, "dp": 8}, {"vpp": 1}, {"precision": "fp8"},
                   {"recompute": "full", "recompute_num_layers": 1}, {"sequence_parallel": False}):
        lay = base.model_copy(update=change)
        got = memory.memory_per_gpu(m, lay, cap, activations=kept)
        assert got == memory.memory_per_gpu(m, lay, cap), change
        assert got.activations_bytes != first.activations_bytes, change
    fp8 = base.model_copy(update={"precision": "fp8", "fp8_recipe": "mxfp8"})
    at_fp8 = memory.memory_per_gpu(m, fp8, cap, activations=kept).activations_bytes
    for change in ({"module_recipes": ("linear_proj=bf16",)}, {"num_layers_at_start_in_bf16": 2},
                   {"num_layers_at_end_in_bf16": 30}):  # what the linears save: their modules' and layers' recipes
        lay = fp8.model_copy(update=change)
        got = memory.memory_per_gpu(m, lay, cap, activations=kept)
        assert got == memory.memory_per_gpu(m, lay, cap), change
        assert got.activations_bytes != at_fp8, change
    n = len(kept)
    for same in ({"dp_sharding": "zero3"}, {"ep": 16}, {"rank_order": "tp-cp-ep-pp-dp"}):
        lay = base.model_copy(update=same)
        assert memory.memory_per_gpu(m, lay, cap, activations=kept) == memory.memory_per_gpu(m, lay, cap), same
    assert len(kept) == n
