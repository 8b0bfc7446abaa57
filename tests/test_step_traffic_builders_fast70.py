"""``step_traffic`` with ``only`` runs no builder whose collectives (``BUILDER_COLLECTIVES``) ``only`` refuses all
of (fast70): the table must name every collective each builder adds, else a filtered list loses items. Recorded
here over layouts that reach each builder's every branch (TP with and without sequence parallelism and the
pipeline's scatter/gather, the three CP exchanges and Mamba's all-to-alls, ZeRO 0-3 with hybrid sharding, the
three expert dispatchers, dropless and padded, the router's reduction)."""

import pytest

import topo.training.step as step
from topo.training.model import load_model
from topo.training.nvls_buffers import may_run_nvls
from topo.training.parallel import make_layout
from topo.training.search import expert_dispatchers
from topo.training.step import BUILDER_COLLECTIVES, _PARTS, nvls_communicators, pace_stages, step_traffic

DENSE = [dict(tp=4, cp=2, pp=2, dp=8, global_batch=256, cp_comm_type=c) for c in ("p2p", "all_gather", "a2a")] + [
    dict(tp=2, pp=4, dp=8, global_batch=256, sequence_parallel=False, pp_scatter_gather=True),
    dict(tp=2, pp=2, dp=16, global_batch=256, dp_sharding="none"),
    dict(tp=2, pp=2, dp=16, global_batch=256, dp_sharding="fsdp", dp_shard=4),
    dict(tp=2, pp=2, dp=16, global_batch=256, dp_sharding="zero2", dp_shard=4)]
MOE = [dict(tp=2, pp=4, dp=64, ep=32, global_batch=1024),
       dict(tp=1, cp=2, pp=2, dp=32, ep=16, global_batch=512, recompute="full", recompute_num_layers=2),
       dict(tp=2, pp=2, dp=32, ep=8, etp=2, global_batch=512, dp_sharding="fsdp", expert_dp_shard=2),
       dict(tp=2, pp=2, dp=32, ep=8, global_batch=512, moe_capacity_factor=1.0)]


def _layouts():
    for name, kws in (("llama3-70b", DENSE), ("nemotron-h-56b", DENSE[:1]), ("deepseek-v3-671b", MOE),
                      ("qwen3-30b-a3b", MOE[:2])):
        m = load_model(name)
        for kw in kws:
            base = make_layout(**kw).model_copy(update={"gpus_per_domain_used": 8})
            for fields in (expert_dispatchers(m, {}) if m.moe else [{}]):
                yield m, base.model_copy(update=fields)


def _recorded(monkeypatch):
    """Each builder run through a wrapper that notes the collectives of the items it adds."""
    added: dict[str, set] = {name: set() for name in BUILDER_COLLECTIVES}
    for name in BUILDER_COLLECTIVES:
        def wrapped(t, _name=name, _f=getattr(step, name)):
            before = len(t.out)
            _f(t)
            added[_name].update(it["collective"] for it in t.out[before:])
        monkeypatch.setattr(step, name, wrapped)
    return added


def test_each_builder_adds_only_the_collectives_its_entry_names(monkeypatch):
    """Every item each builder adds, over every stage of the layouts above, has a collective of its entry; and each
    entry's every collective is added somewhere (the layouts reach each branch: a test that saw none would pass
    whatever the table said)."""
    added = _recorded(monkeypatch)
    for m, lay in _layouts():
        for stage in [None, *range(lay.pp)]:
            step_traffic(m, lay, stage)
    for name, colls in BUILDER_COLLECTIVES.items():
        assert added[name] <= set(colls), (name, added[name] - set(colls))
        assert added[name] == set(colls), (name, set(colls) - added[name])
    assert set(BUILDER_COLLECTIVES) == set(_PARTS["all"])


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "pipeline"])
def test_one_collective_filtered_equals_the_whole_list_filtered(coll):
    """Asking for one collective gives the whole list's items of it, item by item, for each part: a builder skipped
    that adds one (its entry missing it) loses them."""
    keep = lambda c: c == coll  # noqa: E731
    seen = 0
    for m, lay in _layouts():
        for stage in [None, *range(lay.pp)]:
            for parts in _PARTS:
                whole = [it for it in step_traffic(m, lay, stage, parts) if keep(it["collective"])]
                assert step_traffic(m, lay, stage, parts, only=keep) == whole, (m.name, lay.describe(), parts)
                seen += len(whole)
    assert seen > 0


def test_auto_dispatcher_part_is_empty_and_the_rest_as_the_whole():
    """Under NCCL's ``auto`` only the all-reduce may run NVLS (closed: may_run_nvls), and no EP builder adds one,
    so the dispatcher part's NVLS communicators are none, found without a stage; the dispatcher-free part equals
    the filtered whole list's of every pacing stage."""
    assert [c for c in ("all_reduce", "all_gather", "reduce_scatter", "alltoall") if may_run_nvls(c, "auto")] == \
        ["all_reduce"]
    for m, lay in _layouts():
        assert nvls_communicators(m, lay, "auto", "dispatcher") == set()
        want = {(step.comm_dim(it), it["groups"]) for s in pace_stages(m, lay)
                for it in step_traffic(m, lay, s, "dispatcher_free") if it["collective"] == "all_reduce"}
        got = nvls_communicators(m, lay, "auto", "dispatcher_free")
        assert want <= got and all(c[0] == step.AMAX_PHASE for c in got - want)
