"""MLA's tensor-parallel traffic (issue 29, findings section 365, mla78).

Under sequence parallelism Megatron-Core's MLA block gathers its latents over the sequence, not the ``h``-wide
hidden states: each rank's duplicated down projections make its own ``s / TP`` tokens' latents, the up projections
(column-parallel) all-gather them, ``k_pos_emb`` is gathered on its own (NVIDIA/Megatron-LM@d98e8a64
``megatron/core/transformer/multi_latent_attention.py`` lines 638-664, 757-763, 777-797). The output projection is
row-parallel as in every attention block (its reduce-scatter ``h`` wide). None of the latents' collectives is a
userbuffers one: Megatron-Core builds the up projections without userbuffers, their buffer names not being
Transformer Engine's (``megatron/core/extensions/transformer_engine.py`` lines 1176-1187).

DeepSeek-V3 (arXiv 2412.19437 sec. 4.2; its config.json): h 7,168, q_lora_rank 1,536, kv_lora_rank 512,
qk_rope_head_dim 64.
"""

import pytest

from topo.training import step
from topo.training.model import Block, load_model
from topo.training.parallel import make_layout

H, Q_LORA, KV_LORA, ROPE = 7168, 1536, 512, 64
S, BF16 = 4096, 2  # sequence, bytes an element
STAGE = 4  # a middle stage of PP 8: layers only, each an MLA attention block and an MoE block


def _layout(**kw):
    return make_layout(**{"tp": 2, "pp": 8, "dp": 8, "ep": 8, "global_batch": 64, "seq_len": S, **kw})


def _per_mla_layer(lay, test):
    """Bytes a micro-batch per MLA layer of the TP items ``test`` keeps: size x calls / (micro-batches x layers)."""
    m = load_model("deepseek-v3-671b")
    att = step._stage_counts(m, lay, STAGE)[Block.ATTENTION]
    items = [it for it in step.step_traffic(m, lay, STAGE) if it["dim"] == "tp" and test(it)]
    return sum(it["size_bytes"] * it["calls"] for it in items) / (lay.microbatches * att), items


def test_the_latents_are_gathered_not_the_hidden_states():
    """DeepSeek-V3 at TP 2, sequence 4,096, micro-batch 1, with SP, one MLA layer a micro-batch: forward the
    latents all-gathered, (1,536 + 512 + 64) x 4,096 x 2 B = 17,301,504 B (h wide it would be 58,720,256 B);
    backward the up projections' inputs gathered again for their weight gradient, (1,536 + 512) x 4,096 x 2 B,
    and all three gradients reduce-scattered, 17,301,504 B."""
    lay = _layout()
    mla = lambda it: it.get("what", "").startswith("MLA ")  # noqa: E731
    fwd, items = _per_mla_layer(lay, lambda it: mla(it) and it["phase"] == "microbatch")
    assert fwd == (Q_LORA + KV_LORA + ROPE) * S * BF16 == 17_301_504
    assert {it["collective"] for it in items} == {"all_gather"} and len(items) == 3
    again, _ = _per_mla_layer(lay, lambda it: mla(it) and it["what"].endswith("again, for wgrad"))
    assert again == (Q_LORA + KV_LORA) * S * BF16
    grads, items = _per_mla_layer(lay, lambda it: mla(it) and it["what"].endswith("gradient"))
    assert grads == (Q_LORA + KV_LORA + ROPE) * S * BF16 and {it["collective"] for it in items} == {"reduce_scatter"}
    # each up projection's backward pair is its own GEMMs' (tpmla103: TE column linears without userbuffers);
    # k_pos_emb's reduce-scatter, an autograd function's, none
    pairs = {it["what"]: it.get("pair") for it in step.step_traffic(load_model("deepseek-v3-671b"), lay, STAGE)
             if mla(it) and it["phase"] != "microbatch"}
    assert pairs == {"MLA query latent again, for wgrad": "q_up_dgrad", "MLA query latent gradient": "q_up_wgrad",
                     "MLA key-value latent again, for wgrad": "kv_up_dgrad",
                     "MLA key-value latent gradient": "kv_up_wgrad", "MLA k_pos_emb gradient": None}


def test_the_h_wide_input_items_are_the_shared_experts_only():
    """The h-wide input items (gather, gather again, input gradient) are now the shared experts' alone: 1 a layer,
    not 2; the output side (reduce-scatter forward, output gradient's gather) stays h wide in both blocks."""
    lay = _layout()
    h_wide = H * S * BF16
    for what, per_layer in (("input", 1), ("input again, for wgrad", 1), ("input gradient", 1), ("output", 2),
                            ("output gradient", 2)):
        got, items = _per_mla_layer(lay, lambda it, w=what: it.get("what") == w)
        assert got == per_layer * h_wide, what
    # the input items share their userbuffers pairs over the blocks they are for (the shared experts)
    att = step._stage_counts(load_model("deepseek-v3-671b"), lay, STAGE)[Block.ATTENTION]
    assert {it.get("tp_blocks") for it in step.step_traffic(load_model("deepseek-v3-671b"), lay, STAGE)
            if it.get("what", "").startswith("input")} == {att}


def test_without_sequence_parallelism_the_up_projections_input_gradients_are_all_reduced():
    """Without SP the up projections' input gradients are all-reduced at the latents' widths, 2,048 a token,
    a layer a micro-batch (1,536 + 512) x 4,096 x 2 B; k_pos_emb moves nothing; the forward all-reduce stays
    h wide for both blocks."""
    lay = _layout(sequence_parallel=False)
    got, items = _per_mla_layer(lay, lambda it: it.get("what", "").startswith("MLA "))
    assert got == (Q_LORA + KV_LORA) * S * BF16 and {it["collective"] for it in items} == {"all_reduce"}
    h_back, _ = _per_mla_layer(lay, lambda it: it["phase"] == "backward" and "what" not in it)
    assert h_back == H * S * BF16  # the shared experts' only


def test_mla_up_proj_recomputation_gathers_the_latents_again():
    """Megatron's ``mla_up_proj`` recomputation replays the up projections (their gathers), not ``k_pos_emb``'s
    gather (an input of the checkpointed function, multi_latent_attention.py lines 787-797)."""
    mla = lambda it: it.get("what", "").startswith("MLA ") and it["phase"] == "microbatch"  # noqa: E731
    base, _ = _per_mla_layer(_layout(), mla)
    rec, _ = _per_mla_layer(_layout(recompute_modules=("mla_up_proj",)), mla)
    assert rec - base == (Q_LORA + KV_LORA) * S * BF16


def test_gqa_blocks_are_unchanged():
    """A model without MLA has no latent items and no per-item block counts (but the heads', tpmla103)."""
    m = load_model("llama3-8b")
    items = [it for it in step.step_traffic(m, make_layout(tp=4, dp=2, global_batch=8))
             if it["dim"] == "tp" and not it.get("what", "").startswith("head:")]
    assert items and not any("tp_blocks" in it or it.get("what", "").startswith("MLA") for it in items)
    assert m.mla_tp_latents == ()
    assert load_model("deepseek-v3-671b").mla_tp_latents == (("query latent", Q_LORA, True),
                                                             ("key-value latent", KV_LORA, True),
                                                             ("k_pos_emb", ROPE, False))



def test_every_blocks_norm_is_whole_on_each_tp_rank():
    """The one rule (Megatron-Core's norms, TENorm or the norm of a TELayerNormColumnParallelLinear, are not split
    over TP): a dense MLP block at TP 4 holds its h-wide norm whole and its matrices split. Llama 3 8B: h 4,096,
    ffn 14,336, SwiGLU (three matrices; Meta's params.json)."""
    from topo.training.unit_params import block_params_on_gpu
    llama = load_model("llama3-8b")
    dense, _ = block_params_on_gpu(llama, make_layout(tp=4, dp=2, global_batch=8), Block.MLP)
    assert dense == 3 * 4096 * 14336 / 4 + 4096
    assert llama.tp_whole_params(Block.MLP) == llama.tp_whole_params(Block.ATTENTION) == 4096


def test_the_latents_norms_are_counted():
    """DeepSeek-V3's q_a_layernorm (1,536) and kv_a_layernorm (512) on each of its 61 layers (NVIDIA/
    Megatron-LM@d98e8a64 multi_latent_attention.py lines 619-630): 61 x 2,048 = 124,928 more weights in the
    model's count, total and active, and whole on each TP rank."""
    m = load_model("deepseek-v3-671b")
    assert m.mla_norm_params == Q_LORA + KV_LORA
    assert m.tp_whole_params(Block.ATTENTION) == H + m.mla_down_params + Q_LORA + KV_LORA
    assert m.count(Block.ATTENTION) == 61
    assert m.block_params(Block.ATTENTION) == m.attention_params + H + Q_LORA + KV_LORA
    # still DeepSeek-V3's published 671B total, 37B active (arXiv 2412.19437 abstract), to 0.1%
    assert m.total_params == pytest.approx(671e9, rel=1e-3) and m.active_params == pytest.approx(37e9, rel=2e-2)


def test_the_final_and_mtp_norms_are_whole_on_each_tp_rank_too():
    """The same rule on the head units: the output layer is split over TP, the final norm (h) is not; an MTP
    depth's 2h -> h projection is split, its three norms (3h) are not. Llama 3 8B (vocabulary 128,256, untied) and
    DeepSeek-V3 (h 7,168, one MTP depth, the head's embedding copy held: arXiv 2412.19437 sec. 2.2)."""
    from topo.training.unit_params import unit_params
    llama = load_model("llama3-8b")
    lay = make_layout(tp=4, dp=2, global_batch=8)
    assert unit_params(llama, lay, "logits", False) == (128256 * 4096 / 4 + 4096, 0.0)
    m = load_model("deepseek-v3-671b")
    assert unit_params(m, _layout(), "mtp_head", True) == (2 * H * H / 2 + 3 * H, 0.0)
