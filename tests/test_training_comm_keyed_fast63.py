"""Two caches of the 100k search (fast63). A group matrix's signature kept by the mapping's key (fast63): a search remaps each layout it refines, so its
group matrices are new objects each time; :meth:`CommEngine.time` takes the mapping's key beside the matrix
(:meth:`topo.training.mapping.Mapping.group_key`) and does not sign a matrix it signed under that key before. The
key must tell apart two mappings whose matrices have the same shape but other groups. And a block's time shared
across the expert dispatchers where the block does not read them (every block but the MoE block)."""

import numpy as np
import pytest
import topo
from topo.training import mapping as mp
from topo.training.comm import CommEngine
from topo.training import operators
from topo.training.mapping import map_layout
from topo.training.model import Block, load_model
from topo.training.operators import rank_computes
from topo.training.parallel import make_layout
from topo.training.search import candidate_layouts, expert_dispatchers
from field_reads import READ, h100_gpu, recorded

ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")


@pytest.fixture(scope="module")
def fabric():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _mapping(order: str, fresh: bool = True):
    """TP 2, PP 4, DP 16 on 128 GPUs (domains of 8) in rank order ``order``; ``fresh``: built again (not the
    mapping map_layout kept), as a search's refinement meets it."""
    if fresh:
        mp._MAPS.clear()
    lay = make_layout(tp=2, pp=4, dp=16, global_batch=64, rank_order=order)
    return map_layout(lay, 8, 1024)


def test_same_shape_other_groups_do_not_share_a_signature(fabric):
    """The DP groups of the two rank orders have one shape (8 groups of 16) but other members (stride 2 or
    stride 8): routed for the first, the second's time is not known (cached_only None), and asked, it is its own."""
    a, b = _mapping(ORDERS[0]), _mapping(ORDERS[1])
    Ga, Gb = a.groups("dp"), b.groups("dp")
    assert Ga.shape == Gb.shape and not np.array_equal(np.sort(Ga, axis=None), Ga.ravel())  # the premise
    assert CommEngine.signature(CommEngine.canonical(Ga)) != CommEngine.signature(CommEngine.canonical(Gb))
    assert a.group_key("dp") != b.group_key("dp")
    eng = CommEngine(fabric)
    ta = eng.time("all_reduce", Ga, 64e6, key=a.group_key("dp"))
    assert eng.time("all_reduce", Gb.copy(), 64e6, cached_only=True, key=b.group_key("dp")) is None
    tb = eng.time("all_reduce", Gb.copy(), 64e6, key=b.group_key("dp"))
    alone = CommEngine(fabric).time("all_reduce", Gb, 64e6)  # no key: signed from the matrix
    assert tb == alone
    assert eng.engine_calls == 2 and ta.time_s != tb.time_s


def test_two_dimensions_of_one_mapping_do_not_share_a_signature(fabric):
    """rev65: the key names the dimension too. TP 8 x DP 8 on 64 GPUs of 8-GPU DGX H100 domains: both group
    matrices are 8 groups of 8 (one shape), TP's inside a node over NVLink, DP's across 8 nodes over InfiniBand.
    Timed under the mapping's keys, DP's all-reduce is its own (as the matrix signed alone gives it), not TP's."""
    mp._MAPS.clear()
    m = map_layout(make_layout(tp=8, dp=8, global_batch=64), 8, 1024)
    Gt, Gd = m.groups("tp"), m.groups("dp")
    assert Gt.shape == Gd.shape == (8, 8) and not np.array_equal(Gt, Gd)  # the premise
    eng = CommEngine(fabric)
    tt = eng.time("all_reduce", Gt, 64e6, key=m.group_key("tp"))
    td = eng.time("all_reduce", Gd.copy(), 64e6, key=m.group_key("dp"))
    assert td == CommEngine(fabric).time("all_reduce", Gd, 64e6) and td.time_s > tt.time_s


def test_a_remapped_layout_is_not_signed_again(fabric, monkeypatch):
    """The same layout mapped again (new matrices, the same key) gets the time routed for the first mapping, with
    no signature taken: the refinement's saving."""
    eng = CommEngine(fabric)
    a = _mapping(ORDERS[0])
    t = eng.time("all_reduce", a.groups("dp"), 64e6, key=a.group_key("dp"))
    floor = eng.time_floor("all_reduce", a.groups("dp"), 64e6, key=a.group_key("dp"))
    signed = []
    monkeypatch.setattr(CommEngine, "signature", staticmethod(lambda g: signed.append(g) or ("never",)))
    again = _mapping(ORDERS[0])
    assert again is not a and again.groups("dp") is not a.groups("dp")
    assert eng.time("all_reduce", again.groups("dp"), 64e6, cached_only=True, key=again.group_key("dp")) is t
    assert eng.time_floor("all_reduce", again.groups("dp"), 64e6, key=again.group_key("dp")) == floor
    assert signed == [] and eng.engine_calls == 1


def test_a_mapping_built_otherwise_has_no_key():
    """A Mapping not from map_layout names no key (its matrices are signed as before)."""
    a = _mapping(ORDERS[0])
    assert a.group_key("dp") is not None
    other = mp.Mapping(grid=a.grid, axes=a.axes, experts=a.experts, gpus_per_domain=8)
    assert other.group_key("dp") is None


@pytest.mark.parametrize("name", ["deepseek-v3-671b", "qwen3-30b-a3b"])
def test_only_an_moe_block_reads_the_dispatcher(name):
    """block_time of every block kind but the MoE block reads neither dispatcher field, whatever the dispatcher
    (the search's three): so rank_computes_at shares those blocks' times across dispatchers
    (block_time_key(lay, moe=False)); a block that read one would share a wrong time."""
    m = load_model(name)
    gpu = h100_gpu()
    kinds = ["embedding", "logits", *sorted(set("".join(m.blocks)))] + (["mtp_head"] if m.mtp_layers else [])
    seen = 0
    for i, (lay, _) in enumerate(candidate_layouts(m, 1024, 1024, gpus_per_domain=8)):
        if lay is None or i % 97:
            continue
        rec = recorded(lay)
        for kind in kinds:
            READ.clear()
            operators.block_time(m, rec, gpu, kind)
            # the MoE block reads them: the recorder sees reads (else every check above would pass unread)
            assert bool(READ & set(operators.DISPATCHER_FIELDS)) == (kind == Block.MOE), (kind, lay.describe())
            seen += 1
        if seen > 400:
            break
    assert seen > 100


def test_rank_computes_shares_dense_blocks_across_dispatchers():
    """Pricing one layout with each dispatcher prices its non-MoE blocks once (one shared entry each), its MoE
    block once per dispatcher, and gives the rows each dispatcher's own blocks give (no shared dict)."""
    m = load_model("deepseek-v3-671b")
    gpu = h100_gpu()
    base = make_layout(tp=2, pp=2, dp=256, ep=32, global_batch=512)
    blocks: dict = {}
    lays = [base.model_copy(update=f) for f in expert_dispatchers(m, {})]
    for lay in lays:
        assert repr(rank_computes(m, lay, gpu, 0.0, blocks)) == repr(rank_computes(m, lay, gpu, 0.0))
    # the block times' entries: (block_time_key, kind); the stage rows kept beside them start with their tags
    times = [k for k in blocks if k[0] not in (operators.STAGE_BASE, operators.WAITED_ROW)]
    kinds = {k for _, k in times}
    assert sum(1 for _, k in times if k == Block.MOE) == len(lays) >= 3
    assert all(sum(1 for _, k in times if k == kind) == 1 for kind in kinds - {Block.MOE})
