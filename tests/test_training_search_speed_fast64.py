"""Issue 23's 100k search (fast64): what the hot path now keeps or computes lazily gives what it gave.

``operators.pipeline_units`` keeps each placement by what it reads (the model's blocks and MTP modules, the
layout's pp, vpp, pipeline_embedding and pipeline_layout); ``step.group_degree`` computes only the group size a
traffic item asks for (it built all eight on each of ~1.4M items); the search's NVLS check keeps a shape's
communicators no expert dispatcher reads once, uniting them with each dispatcher's EP ones."""

import pytest

import topo.training.step as step_mod
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.operators import DISPATCHER_FIELDS, _placed, pipeline_units
from topo.training.parallel import make_layout
from topo.training.search import candidate_layouts, expert_dispatchers
from topo.training.step import ROUTER_PHASE, _counted, _stage_counts, group_degree, nvls_communicators, step_traffic
from field_reads import READ, recorded


def _unshared(model, lay):
    return _placed(model, lay, list(model.blocks), model.blocks[-1] if model.blocks else "")


def test_pipeline_units_kept_apart_by_every_field_they_read():
    """Layouts that differ in one field read by the placement each get their own (a key that dropped the field
    would hand the first one's stages to the second); each equals the placement computed afresh."""
    v3, hybrid = load_model("deepseek-v3-671b"), load_model("nemotron-3-nano-30b-a3b")
    lays = [make_layout(pp=4, dp=2, global_batch=64),
            make_layout(pp=4, vpp=2, dp=2, global_batch=64),
            make_layout(pp=4, dp=2, global_batch=64, pipeline_embedding=True),
            make_layout(pp=8, dp=1, global_batch=64),
            make_layout(pp=4, vpp=4, dp=2, global_batch=64, pipeline_layout="Et*4|(t*4|)*14tmL")]
    for model, asked in ((v3, lays), (hybrid, lays[:4])):  # the pipeline_layout string places V3's 61 layers
        got = [pipeline_units(model, lay) for lay in asked]
        for lay, units in zip(asked, got):
            assert units == _unshared(model, lay), (model.name, lay.pp, lay.vpp)
    # the hybrid's pattern (M, E, * layers) places differently under each of the four: the check above can fail
    hybrid_units = [_unshared(hybrid, lay) for lay in lays[:4]]
    assert all(a != b for i, a in enumerate(hybrid_units) for b in hybrid_units[i + 1:])
    # DeepSeek-V3, 61 layers over pp 4: 16, 15, 15, 15 layers; the embedding first, the MTP module and head last
    # (Megatron-Core's even split, the earlier chunks taking the extra layer)
    p4 = pipeline_units(v3, lays[0])
    assert [len(s) for s in p4] == [17, 15, 15, 15 + 1 + 2]
    assert p4[0][0] == "embedding" and p4[-1][-3:] == ["logits", v3.blocks[-1], "mtp_head"]
    # vpp 2: 8 chunks of 8, 8, 8, 8, 8, 7, 7, 7 layers, stage 0 holds chunks 0 (layers 0-7) and 4 (32-39)
    assert [len(s) for s in pipeline_units(v3, lays[1])] == [1 + 16, 15, 15, 15 + 1 + 2]
    # the hybrid's 52 over 8 chunks: 7, 7, 7, 7, 6, 6, 6, 6, stage 0 chunks 0 (layers 0-6) and 4 (28-33)
    assert pipeline_units(hybrid, lays[1])[0][1:] == list(hybrid.blocks[0:7] + hybrid.blocks[28:34])


def test_pipeline_units_lists_are_the_callers_own():
    """A caller that edits the stages it got does not change what the next caller gets."""
    model, lay = load_model("deepseek-v3-671b"), make_layout(pp=4, dp=2, global_batch=64)
    first = pipeline_units(model, lay)
    first[0].clear()
    first.append(["x"])
    assert pipeline_units(model, lay) == _unshared(model, lay)


def test_group_degree_is_each_groups_size():
    """Closed forms: dpcp = dp cp, tpcp = tp cp, edp = tp cp dp / (etp ep), etp, dps = dp_shard cp,
    dpr = dp / dp_shard, edps = expert_dp_shard, edpr = expert_dp / expert_dp_shard; a plain dimension its size."""
    lay = make_layout(tp=2, cp=2, pp=2, dp=16, ep=8, etp=1, global_batch=256, dp_sharding="fsdp", dp_shard=4,
                      expert_dp_shard=2)
    want = {"dpcp": 32, "tpcp": 4, "edp": 8, "etp": 1, "dps": 8, "dpr": 4, "edps": 2, "edpr": 4,
            "tp": 2, "cp": 2, "pp": 2, "dp": 16, "ep": 8}
    assert {g: group_degree(lay, g) for g in want} == want


def test_step_traffic_keeps_only_groups_of_more_than_one():
    """An item is kept where its group has more than one rank: with etp 1 no ETP item, with tp 2 TP items."""
    model = load_model("deepseek-v3-671b")
    lay = make_layout(tp=2, pp=2, dp=16, ep=8, etp=1, global_batch=256)
    groups = {it["groups"] for it in step_traffic(model, lay)}
    assert "etp" not in groups and "tp" in groups and "ep" in groups
    assert all(group_degree(lay, g) > 1 for g in groups)


@pytest.mark.parametrize("name", ["deepseek-v3-671b", "qwen3-30b-a3b"])
def test_dispatcher_free_traffic_reads_no_dispatcher(name):
    """The TP, CP, PP, DP and router collectives and the amax group (nvls_communicators' ``dispatcher_free``
    part) read neither dispatcher field, on every pacing stage of a sample of the search's layouts: the search
    keeps them per shape, whatever the dispatcher (a part that read one would hand one dispatcher's communicators
    to another)."""
    m = load_model(name)
    seen = ep_reads = 0
    for i, (lay, _) in enumerate(candidate_layouts(m, 1024, 1024, gpus_per_domain=8)):
        if lay is None or i % 53:
            continue
        for fields in expert_dispatchers(m, {}):
            rec = recorded(lay, **fields)
            READ.clear()
            nvls_communicators(m, rec, "nvls", "dispatcher_free")
            assert not READ & set(DISPATCHER_FIELDS), (lay.describe(), fields)
            READ.clear()  # the EP part reads them where it has traffic: the recorder sees reads
            nvls_communicators(m, rec, "nvls", "dispatcher")
            ep_reads += bool(READ & set(DISPATCHER_FIELDS))
            seen += 1
    assert seen > 60 and ep_reads > 0  # else the check above would pass with nothing read


def test_nvls_communicators_parts_unite_to_the_whole():
    """A shape's dispatcher-free set united with each dispatcher's EP set is the whole step's, for the
    three dispatchers, at an algorithm under which every collective may run NVLS (the EP parts differ then)."""
    m = load_model("deepseek-v3-671b")
    base = make_layout(tp=2, pp=4, dp=64, ep=32, global_batch=1024).model_copy(update={"gpus_per_domain_used": 8})
    free = nvls_communicators(m, base, "nvls", "dispatcher_free")
    wholes = []
    for fields in expert_dispatchers(m, {}):
        lay = base.model_copy(update=fields)
        whole = nvls_communicators(m, lay, "nvls")
        assert free | nvls_communicators(m, lay, "nvls", "dispatcher") == whole, fields
        wholes.append(whole)
    assert all(w - free for w in wholes)  # the EP part adds communicators: leaving it out fails the check


def test_stage_counts_kept_by_placement_and_stage():
    """The block counts of each stage (and of the busiest, stage None) under four pipeline settings of the hybrid
    model equal those counted afresh, and differ between settings where the placement does (a key without the
    placement's fields or the stage would hand one's counts to another); a caller's edit stays its own."""
    hybrid = load_model("nemotron-3-nano-30b-a3b")
    lays = [make_layout(pp=4, dp=2, global_batch=64), make_layout(pp=4, vpp=2, dp=2, global_batch=64),
            make_layout(pp=4, dp=2, global_batch=64, pipeline_embedding=True), make_layout(pp=8, dp=1, global_batch=64)]
    seen = set()
    for lay in lays:
        for stage in (None, *range(lay.pp)):
            got = _stage_counts(hybrid, lay, stage)
            assert got == _counted(_unshared(hybrid, lay), stage), (lay.pp, lay.vpp, stage)
            seen.add(tuple(sorted(got.items())))
    assert len(seen) > 4
    # pp 4: 13 layers a stage, stage 0 layers 0-12 "MEMEM*EMEMEM*": 6 M, 5 E, 2 attention
    first = _stage_counts(hybrid, lays[0], 0)
    assert (first["M"], first["E"], first["*"], first["layers"]) == (6, 5, 2, 13)
    first["E"] = -1
    assert _stage_counts(hybrid, lays[0], 0)["E"] == 5


@pytest.mark.parametrize("parts", ["all", "dispatcher_free"])
def test_step_traffic_runs_the_part_builders_the_module_holds_now(monkeypatch, parts):
    """Each of step_traffic's parts is looked up when called: a builder replaced in the module (as
    test_training_router_count_reduce replaces ``_router_traffic`` to time a step without the router's count
    reduction) is the one run, in every part that holds it (a table holding the functions themselves, bound at
    import, kept running the old one and the step time did not change)."""
    q = load_model("qwen3-235b-a22b")
    lay = make_layout(tp=2, pp=8, vpp=4, ep=32, etp=1, dp=16, global_batch=8192, micro_batch=1, seq_len=4096)
    assert any(it["phase"] == ROUTER_PHASE for it in step_traffic(q, lay, parts=parts))
    monkeypatch.setattr(step_mod, "_router_traffic", lambda t: None)
    assert not any(it["phase"] == ROUTER_PHASE for it in step_traffic(q, lay, parts=parts))


def test_step_traffic_names_an_unknown_part():
    with pytest.raises(TopoError, match="parts: 'ep' is not one of all, dispatcher_free, dispatcher"):
        step_traffic(load_model("qwen3-235b-a22b"), make_layout(tp=2, dp=4, global_batch=64), parts="ep")
