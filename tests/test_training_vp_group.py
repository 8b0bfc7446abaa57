"""``microbatch_group_size_per_vp_stage`` (g): the interleaved warm-up, memory and bounds against Megatron-Core.

Closed form: NVIDIA/Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches
(lines 955-972): ``(p - i - 1) * 2 + (v - 1) * g`` warm-up forwards on rank i (``+ 1`` with
overlap_moe_expert_parallel_comm), capped at ``m v``; bounds: lines 1160-1180 (``pp <= g <= m``; ``m mod g`` 0 or
``>= pp``)."""

import pytest

from topo.errors import TopoError
from topo.training.ep_overlap import unpaired_share
from topo.training.memory import memory_per_gpu
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout
from topo.training.step import bubble_s

KEY = "microbatch_group_size_per_vp_stage"


def _meta(g=None, **kw):
    # Meta's Llama 3 405B 8K layout (arXiv 2407.21783 Table 4): TP8 PP16 DP64, 32 sequences per DP group
    base = dict(tp=8, pp=16, vpp=4, dp=64, global_batch=2048, micro_batch=1, seq_len=8192, pipeline_embedding=True,
                dp_sharding="fsdp_grad_op")
    base.update(kw)
    return make_layout(**base, **({KEY: g} if g else {}))


@pytest.mark.parametrize("p,v,m,g", [(16, 4, 32, 16), (16, 4, 32, 32), (4, 2, 10, 5), (8, 3, 24, 12), (4, 3, 4, 4)])
def test_warmup_is_megatron_cores_closed_form(p, v, m, g):
    lay = make_layout(pp=p, vpp=v, global_batch=m, **{KEY: g})
    for i in range(p):
        assert lay.warmup_chunks(i) == min(m * v, (p - i - 1) * 2 + (v - 1) * g)
        assert lay.warmup_chunks(i, extra=1) == min(m * v, (p - i - 1) * 2 + (v - 1) * g + 1)
    flat = make_layout(pp=p, global_batch=m)
    assert [flat.warmup_chunks(i) for i in range(p)] == [min(m, p - i - 1) for i in range(p)]


def test_default_group_is_pp():
    assert _meta().vp_group == 16 and _meta(32).vp_group == 32
    assert [_meta().warmup_chunks(i) for i in (0, 1, 15)] == [2 * 15 + 3 * 16, 2 * 14 + 3 * 16, 3 * 16]


def test_in_flight_activations_follow_g():
    # the second stage (8 layers; the first holds 7 and the embedding) holds the warm-up plus the one running:
    # 2 * 14 + 3 g + 1 chunk-micro-batches, 77 at g = 16 and 125 at g = 32; weights and optimizer do not move
    model = load_model("llama3-405b")
    cap = 1e15
    a, b = memory_per_gpu(model, _meta(), cap), memory_per_gpu(model, _meta(32), cap)
    assert a.stage == b.stage == 1
    assert b.activations_bytes / a.activations_bytes == pytest.approx((2 * 14 + 3 * 32 + 1) / (2 * 14 + 3 * 16 + 1))
    assert (a.weights_bytes, a.optimizer_bytes) == (b.weights_bytes, b.optimizer_bytes)


def test_unpaired_share_follows_g():
    lay = _meta(32)
    assert unpaired_share(lay) == pytest.approx((2 * 15 + 3 * 32 + 1) / (32 * 4))


def test_g_leaves_the_bubble():
    # Megatron's interleaved bubble (p - 1) / v of a micro-batch (Narayanan et al. 2021 sec. 2.2) whatever g in
    # [pp, m]: g reorders the same chunk-micro-batches; a last group under pp, which would add "dependency
    # bubbles", is refused (schedules.py lines 1172-1180)
    assert bubble_s(_meta(), 1.0, 2.0) == bubble_s(_meta(32), 1.0, 2.0) == pytest.approx(15 / 4 * 2.0)


@pytest.mark.parametrize("g,kw,says", [(5, {}, "[16, 32]"), (33, {}, "[16, 32]"), (20, {}, "last group of 12"),
                                       (16, {"vpp": 1}, "vpp > 1")])
def test_megatron_cores_bounds(g, kw, says):
    model = load_model("llama3-405b")
    with pytest.raises(TopoError) as e:
        check_layout(model, _meta(g, **kw))
    assert e.value.key == KEY and says in str(e.value) and "\n" not in str(e.value)
    check_layout(model, _meta(32))
    check_layout(model, _meta(16))
