"""Each pipeline stage's own heads' tensor-parallel traffic and Megatron-LM's embedding-group all-reduce (issue 29,
stagetp73), at NVIDIA/Megatron-LM@7094270c:

- ``tensor_parallel/layers.py`` ``VocabParallelEmbedding.forward`` (lines 241-271): the looked-up rows
  reduce-scattered to the sequence shards (all-reduced without sequence parallelism); backward the gradient
  all-gathered (``mappings.py`` ``_ReduceScatterToSequenceParallelRegion``).
- ``LinearWithGradAccumulationAndAsyncCommunication`` (lines 403-510), the output layer: the input all-gathered
  forward, gathered again for the weight gradient and the input gradient reduce-scattered backward.
- ``transformer/multi_token_prediction.py`` lines 484-490: ``eh_proj`` (2h input) as a column-parallel linear, its
  output gathered along the hidden dimension (backward a reduce-scatter), split to the sequence shards (backward an
  all-gather).
- ``fusions/fused_cross_entropy.py`` lines 94, 112: two all-reduces, of one FP32 value a token and of two.
- ``distributed/finalize_model_grads.py`` ``_allreduce_word_embedding_grads`` (lines 119-150): with MTP or tied
  embeddings, the embedding shard's ``main_grad`` all-reduced between the first and last stage, once a step.

DeepSeek-V3 (V 129,280, h 7,168) at dgxc2505_h100_deepseekv3_bf16_512's layout: TP2 + SP, PP8, FP32 main_grad,
4,096-token micro-batches.
"""

from __future__ import annotations

import numpy as np
import pytest

from topo.training.mapping import map_layout
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import exposed_comm_s, step_traffic

V, H, T = 129_280, 7168, 4096
ACT = T * H * 2  # one micro-batch's [s, b, h] BF16 activation, the whole (gathered) tensor


def _dsv3(**kw):
    return make_layout(**{**dict(tp=2, pp=8, dp=32, ep=64, global_batch=4096, seq_len=T, sequence_parallel=True),
                          **kw})


def _heads(items):
    return [it for it in items if it.get("what", "").startswith("head")]


def test_the_last_stage_pays_its_own_heads_fourteen_sp_collectives_a_microbatch():
    m, lay = load_model("deepseek-v3-671b"), _dsv3()
    items = _heads(step_traffic(m, lay, stage=7))
    mb = lay.microbatches
    sp = [it for it in items if it["elem_bytes"] == 2]
    # per micro-batch: the MTP lookup (RS, AG), two output layers (AG, AG, RS each), eh_proj (AG, AG, RS of 2h),
    # its output's hidden gather and its gradient's RS, the sequence split's backward AG: 14, about 1.0 GB
    assert sum(it["calls"] for it in sp) == 14 * mb
    assert sum(it["calls"] * it["size_bytes"] for it in sp) == mb * (11 * ACT + 3 * 2 * ACT) == mb * 998_244_352
    # the fused loss: per head, an all-reduce of T FP32 values and one of 2 T
    loss = [it for it in items if it["elem_bytes"] == 4]
    assert sorted((it["collective"], it["size_bytes"], it["calls"]) for it in loss) == [
        ("all_reduce", T * 4, 2 * mb), ("all_reduce", 2 * T * 4, 2 * mb)]


def test_the_first_stage_pays_its_lookup_and_a_middle_stage_no_head():
    m, lay = load_model("deepseek-v3-671b"), _dsv3()
    first = _heads(step_traffic(m, lay, stage=0))
    assert sorted((it["collective"], it["phase"], it["size_bytes"]) for it in first) == [
        ("all_gather", "head_backward", ACT), ("reduce_scatter", "head", ACT)]
    assert not _heads(step_traffic(m, lay, stage=3))


def test_the_embedding_group_all_reduces_the_shard_once_a_step_on_the_end_stages():
    m, lay = load_model("deepseek-v3-671b"), _dsv3()
    for stage, paid in ((0, True), (3, False), (7, True)):
        emb = [it for it in step_traffic(m, lay, stage) if it["groups"] == "emb"]
        assert bool(emb) == paid
        if paid:  # V / TP x h x 4 bytes of FP32 main_grad: 1.85 GB (dsv3last73's figure)
            (it,) = emb
            assert (it["collective"], it["calls"], it["size_bytes"]) == ("all_reduce", 1, V / 2 * H * 4)
            assert it["size_bytes"] == 1_853_358_080
    # untied and no MTP (Llama 3 70B): none; tied (GPT-3 5B): one, of the padded vocabulary's shard (tidy76:
    # Megatron-LM pads 50,257 to a multiple of 128 x TP, 50,432 at TP 2: megatron/training/arguments.py@d98e8a64
    # --make-vocab-size-divisible-by); one stage: none
    lay = make_layout(tp=2, pp=4, dp=2, global_batch=16)
    assert not [it for it in step_traffic(load_model("llama3-70b"), lay, 0) if it["groups"] == "emb"]
    gpt = load_model("gpt3-5b")
    assert gpt.vocab == 50257
    assert [it["size_bytes"] for it in step_traffic(gpt, lay, 3) if it["groups"] == "emb"] == [
        50432 / 2 * gpt.hidden * lay.grad_bytes]
    assert not [it for it in step_traffic(gpt, make_layout(tp=2, dp=8, global_batch=16)) if it["groups"] == "emb"]


def test_without_sequence_parallelism_the_heads_all_reduce_and_te_gathers_the_loss():
    m = load_model("deepseek-v3-671b")
    lay = _dsv3(sequence_parallel=False, cross_entropy="te")
    items = _heads(step_traffic(m, lay, stage=7))
    mb = lay.microbatches
    got = sorted((it["collective"], it["phase"], it["size_bytes"], it["calls"] / mb) for it in items)
    assert got == sorted([
        ("all_reduce", "head", ACT, 1),              # the MTP lookup's rows
        ("all_reduce", "head_wgrad", ACT, 2),        # two output layers' input gradients
        ("all_reduce", "head_wgrad", 2 * ACT, 1),    # eh_proj's input gradient
        ("all_gather", "head", ACT, 1),              # eh_proj's output along the hidden dimension
        ("reduce_scatter", "head_backward", ACT, 1),  # and its gradient
        ("all_gather", "head", 2 * 3 * T * 4, 2)])   # TE: three FP32 values a row, gathered from both TP ranks


def test_the_embedding_group_pairs_the_first_and_last_stage_ranks():
    lay = make_layout(tp=2, pp=4, dp=2, global_batch=16)
    G = map_layout(lay, 8, 16).groups("emb")
    # rank order tp, dp, pp (pp slowest): rank g of stage 0 with g + tp dp (pp - 1) of stage 3
    assert G.shape == (4, 2)
    assert sorted(map(tuple, G.tolist())) == [(g, g + 2 * 2 * 3) for g in range(4)]
    assert np.all(G[:, 1] - G[:, 0] == 12)


def test_blocking_heads_stay_exposed_and_the_output_layers_backward_hides_beside_its_gemms():
    lay = make_layout(tp=8, pp=2, dp=1, global_batch=8, overlap_tp=True)
    windows = {"tp": 10.0, "tp_backward": 1.0}
    assert exposed_comm_s("tp", "head", 0.5, dict(windows), lay) == 0.5  # no userbuffers GEMM hides it
    assert exposed_comm_s("tp", "head_backward", 0.5, dict(windows), lay) == 0.5
    w = dict(windows)
    assert exposed_comm_s("tp", "head_wgrad", 0.5, w, lay) == 0.0 and w["tp_backward"] == pytest.approx(0.5)
    assert exposed_comm_s("tp", "head_wgrad", 0.75, w, lay) == pytest.approx(0.25)
