"""An MoE router's load-balancing loss reduces the tokens per expert over the ranks that split the sequence: each MoE
block's forward all-reduces its ``experts`` int64 counts over Megatron-Core's TP x CP group, a blocking call on the
compute stream (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/moe_utils.py
``get_tokens_per_expert_and_token_count``: ``reduce_from_tensor_model_parallel_region(local_tokens_per_expert,
tp_cp_group)``, from router.py ``_apply_aux_loss`` / ``_apply_seq_aux_loss``; core_v0.14.0 and core_v0.15.0 alike;
@1e057005 ``switch_load_balancing_loss_func``: ``torch.distributed.all_reduce(tokens_per_expert,
group=sequence_partition_group)``). Megatron-LM's GB200 study names these reductions as what keeps the fused router
at 31 kernels (docs/discussions/deepseek-v3-gb200-optimization@1d9edcf8 sec. 2.1.4)."""

import pytest

import topo
import topo.training.step as step_mod
from topo.training.mapping import map_layout
from topo.training.model import Block, load_model
from topo.training.parallel import make_layout
from topo.training.step import AUX_LOSS_ROUTERS, ROUTER_PHASE, ROUTER_WHAT, estimate_step, step_traffic

COUNT_BYTES = 8  # routing_map.sum(dim=0) of a bool map is int64


def _qwen3_235b(**kw):
    """Megatron-Bridge's H100 Qwen3-235B-A22B performance layout (TP2 PP8 VP4 EP32, 256 GPUs, GBS 8192, MBS 1),
    with TP communication overlapped."""
    base = dict(tp=2, pp=8, vpp=4, ep=32, etp=1, dp=16, global_batch=8192, micro_batch=1, seq_len=4096, overlap_tp=True,
                pipeline_embedding=False)
    return make_layout(**{**base, **kw})


def _router_items(model, lay):
    return [it for it in step_traffic(model, lay) if it["phase"] == ROUTER_PHASE]


def _moe_blocks(model, lay):
    return step_mod._stage_counts(model, lay, None)[Block.MOE]


def test_one_count_all_reduce_per_moe_forward_over_tp_x_cp():
    q = load_model("qwen3-235b-a22b")
    assert q.moe.router in AUX_LOSS_ROUTERS  # Megatron-Bridge's Qwen3 bridge: the switch aux loss
    lay = _qwen3_235b()
    (item,) = _router_items(q, lay)
    assert (item["dim"], item["collective"], item["groups"]) == ("tp", "all_reduce", "tpcp")
    assert item["size_bytes"] == q.moe.experts * COUNT_BYTES == 128 * 8
    assert item["calls"] == lay.microbatches * _moe_blocks(q, lay)
    # a recomputed MoE module computes the loss, and so the reduction, again
    rec = _qwen3_235b(recompute_modules=("moe",))
    assert _router_items(q, rec)[0]["calls"] == 2 * lay.microbatches * _moe_blocks(q, rec)
    # context parallelism alone: the CP group (timed as CP), TP x CP together one group of tp x cp ranks
    (cp_item,) = _router_items(q, _qwen3_235b(tp=1, cp=2))
    assert (cp_item["dim"], cp_item["groups"]) == ("cp", "tpcp")


def test_nothing_to_reduce_without_a_split_sequence_a_loss_or_scores():
    q = load_model("qwen3-235b-a22b")
    assert _router_items(q, _qwen3_235b(tp=1, dp=32)) == []  # one rank holds the whole sequence
    assert _router_items(q, _qwen3_235b(moe_routing="consecutive")) == []  # the benchmark gate: no scores, no loss
    no_loss = q.model_copy(update={"moe": q.moe.model_copy(update={"router": "softmax_topk"})})  # gpt-oss's
    assert _router_items(no_loss, _qwen3_235b()) == []
    ds = load_model("deepseek-v3-671b")  # the sequence aux loss reduces the same counts
    assert ds.moe.router == "deepseek" and len(_router_items(ds, _qwen3_235b(ep=64, dp=16))) == 1


def test_the_tpcp_group_is_the_tensor_and_context_ranks_of_one_sequence():
    lay = _qwen3_235b(tp=2, cp=2, dp=8)
    m = map_layout(lay, 8, lay.gpus)
    tpcp = m.groups("tpcp")
    assert tpcp.shape == (lay.gpus // 4, 4)
    # every TP group and every CP group lies inside one TP x CP group
    owner = {int(g): i for i, row in enumerate(tpcp) for g in row}
    for dim in ("tp", "cp"):
        for row in m.groups(dim):
            assert len({owner[int(g)] for g in row}) == 1
    assert len(owner) == tpcp.size  # a partition of the GPUs


def test_the_reduction_is_exposed_whole_even_with_tp_overlap(monkeypatch):
    """The call blocks the compute stream (the loss's kernels wait for it): TP overlap hides none of it, and the
    step grows by at least its calls x one call's time."""
    fabric, q = topo.build_fabric(topo.load_spec("dgx-h100-superpod")), load_model("qwen3-235b-a22b")
    lay = _qwen3_235b()
    r = estimate_step(fabric, q, lay, check=False)
    (c,) = [c for c in r.comm if c.what == ROUTER_WHAT]  # ux107: labelled (it printed bare before)
    assert (c.dim, c.collective, c.size_bytes) == ("tp", "all_reduce", q.moe.experts * COUNT_BYTES)
    assert c.calls_per_step == lay.microbatches * _moe_blocks(q, lay)
    assert c.time_s > 0 and c.exposed_s == pytest.approx(c.time_s)
    # latency-bound over two NVLink ranks: microseconds a call, not the bandwidth of 1 KiB
    assert 2e-6 < c.time_s / c.calls_per_step < 5e-5
    monkeypatch.setattr(step_mod, "_router_traffic", lambda t: None)
    without = estimate_step(fabric, q, lay, check=False)
    assert r.step_time_s - without.step_time_s >= 0.99 * c.exposed_s


def test_the_sequence_aux_loss_reduces_one_row_of_counts_per_sequence():
    """DeepSeek's sequence aux loss sums ``routing_map.reshape(seq_length, -1)`` over the sequence: ``micro_batch x
    experts`` counts (Megatron-LM@d98e8a64dd router.py ``_apply_seq_aux_loss``); the switch aux loss (Qwen3) sums
    over every token of the micro-batch: ``experts`` counts whatever the micro-batch."""
    ds, q = load_model("deepseek-v3-671b"), load_model("qwen3-235b-a22b")
    for mb in (1, 4):
        (item,) = _router_items(ds, _qwen3_235b(ep=64, dp=16, micro_batch=mb))
        assert item["size_bytes"] == mb * ds.moe.experts * COUNT_BYTES == mb * 256 * 8
        (item,) = _router_items(q, _qwen3_235b(micro_batch=mb))
        assert item["size_bytes"] == q.moe.experts * COUNT_BYTES
