"""MLA's down projections under tensor parallelism (issue 29, findings section 363, mla77).

Megatron-Core with Transformer Engine builds DeepSeek-V3's ``linear_q_down_proj`` and ``linear_kv_down_proj`` as
``TELinear(parallel_mode='duplicated')`` (NVIDIA/Megatron-LM@d98e8a64
``megatron/core/transformer/multi_latent_attention.py`` lines 526-527, 573-574; the TE spec's ``backend.linear()``,
``megatron/core/models/gpt/gpt_layer_specs.py`` lines 302-304): the whole weight on every TP rank (tp_size 1, no TE
parallel mode, ``extensions/transformer_engine.py`` lines 1253-1258), run on the block's input as it is, the
rank's ``s / TP`` tokens under sequence parallelism (``_qkv_down_projection``'s comments, lines 640-662)."""

import pytest

from topo.training.memory import stage_params
from topo.training.model import Block, load_model
from topo.training.operators import block_ops
from topo.training.parallel import make_layout
from topo.training.unit_params import block_params_on_gpu

H = 7168  # DeepSeek-V3: arXiv 2412.19437 sec. 4.2; config.json (hidden_size, q_lora_rank, kv_lora_rank, ...)
Q_LORA, KV_LORA, ROPE, NOPE, V, HEADS = 1536, 512, 64, 128, 128, 128
DOWN = H * Q_LORA + H * (KV_LORA + ROPE)  # q_down 7,168 x 1,536 and kv_down 7,168 x (512 + 64)
UP_AND_OUT = Q_LORA * HEADS * (NOPE + ROPE) + KV_LORA * HEADS * (NOPE + V) + HEADS * V * H


def _dsv3_layout(**kw):
    return make_layout(**{"tp": 2, "pp": 8, "dp": 8, "ep": 8, "global_batch": 64, "seq_len": 4096, **kw})


def test_the_down_projections_are_whole_on_each_tp_rank():
    """DeepSeek-V3 at TP 2: an attention block on one GPU holds both down projections whole (15,138,816
    weights), with its norm and the latents' norms (mla78), the up and output projections halved."""
    m = load_model("deepseek-v3-671b")
    assert m.mla_down_params == DOWN == 15_138_816
    # mla78 (findings 365): with the latents' norms (Q_LORA + KV_LORA), and the block's norm H whole on each rank
    assert m.block_params(Block.ATTENTION) == DOWN + UP_AND_OUT + H + Q_LORA + KV_LORA
    for tp in (1, 2, 4, 8):
        dense, expert = block_params_on_gpu(m, _dsv3_layout(tp=tp, dp=16 // tp), Block.ATTENTION)
        assert dense == pytest.approx(DOWN + H + Q_LORA + KV_LORA + UP_AND_OUT / tp) and expert == 0.0
    # GQA has none: Llama 3 8B's attention block is split over TP but for its norm
    llama = load_model("llama3-8b")
    assert llama.mla_down_params == 0
    assert block_params_on_gpu(llama, make_layout(tp=4, dp=2, global_batch=8), Block.ATTENTION)[0] == \
        pytest.approx((llama.block_params(Block.ATTENTION) - llama.hidden) / 4 + llama.hidden)


def test_a_stage_holds_its_layers_down_projections_whole():
    """A middle DeepSeek-V3 stage (PP 8, layers only) on one GPU: at TP 2 it holds half of TP 1's dense
    parameters plus half of what stays whole, each attention layer's down projections (DOWN / 2) and each MoE
    block's router and norm (7,168 x 256 + 7,168, halved): the weights, gradients and optimizer shards memory.py
    counts from them."""
    from topo.training import step
    m = load_model("deepseek-v3-671b")
    one, two = _dsv3_layout(tp=1, dp=16), _dsv3_layout()
    for stage in (3, 4):
        c = step._stage_counts(m, two, stage)
        assert c == step._stage_counts(m, one, stage) and c.get("logits", 0) == 0 and c[Block.ATTENTION] > 0
        d1, d2 = stage_params(m, one)[stage][0], stage_params(m, two)[stage][0]
        whole = DOWN + H + Q_LORA + KV_LORA  # mla78: the block's norm and the latents' norms whole too
        assert d2 - d1 / 2 == pytest.approx(c[Block.ATTENTION] * whole / 2 + c[Block.MOE] * (H * 256 + H) / 2)


def test_the_down_projections_run_on_the_ranks_sequence_shard():
    """Under sequence parallelism each TP rank's down projections take its 4,096 / 2 tokens, the whole weight:
    2 x 2,048 x 1,536 x 7,168 FLOPs (q) and 2 x 2,048 x 576 x 7,168 (kv); without it all 4,096 tokens on each rank.
    The up projections stay on the gathered sequence with their heads split."""
    m = load_model("deepseek-v3-671b")
    for sp, tokens in ((True, 2048), (False, 4096)):
        ops = {op.name: op for op in block_ops(m, _dsv3_layout(sequence_parallel=sp, micro_batch=1), "*")}
        q, kv = ops["q_down"], ops["kv_down"]
        assert (q.m, q.n, q.k) == (tokens, Q_LORA, H) and q.flops == pytest.approx(2 * tokens * Q_LORA * H)
        assert (kv.m, kv.n, kv.k) == (tokens, KV_LORA + ROPE, H)
        assert kv.flops == pytest.approx(2 * tokens * (KV_LORA + ROPE) * H)
        assert ops["q_up"].m == 4096 and ops["q_up"].n == HEADS / 2 * (NOPE + ROPE)


# --- `topo train --search --overlap pp=on`: held where the pipeline interleaves, off at vpp 1 ------------------

def _llama8b_candidates(**kw):
    from topo.training.search import candidate_layouts
    return list(candidate_layouts(load_model("llama3-8b"), 64, 64, gpus_per_domain=8, cps=(1,), vpps=(1, 2),
                                  micro_batches=(1,), recompute=("none",), dp_sharding=("zero1",), **kw))


def test_a_search_holding_pp_overlap_turns_it_off_at_vpp_1():
    """Megatron-LM's training script sets overlap_p2p_comm False without interleaving (NVIDIA/Megatron-LM@d98e8a64
    megatron/training/arguments.py lines 1010-1018): a search that holds overlap_pp true keeps every layout it keeps
    without the field, on where vpp > 1, off on vpp-1 pipelines; none is refused for it."""
    held, free = _llama8b_candidates(overlap_pp=True), _llama8b_candidates()
    built = [lay for lay, _ in held if lay is not None]
    assert len(built) == len([lay for lay, _ in free if lay is not None])
    assert not [why for lay, why in held if lay is None and "overlap_pp" in why]
    piped = [lay for lay in built if lay.pp > 1]
    assert {lay.vpp for lay in piped} == {1, 2}
    for lay in piped:
        assert lay.overlap_pp == (lay.vpp > 1)


def test_a_search_says_once_that_it_turned_pp_overlap_off():
    """The search's notes say it once; without the held field they do not, and it refuses no more layouts."""
    import topo
    from topo.training.search import PP_OVERLAP_NOTE, search_layouts
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    m = load_model("llama3-8b")
    kw = dict(top=2, contention=False, cps=(1,), vpps=(1, 2), micro_batches=(1,), recompute=("none",),
              dp_sharding=("zero1",))
    on = search_layouts(fabric, m, 64, 64, overlap_pp=True, **kw)
    assert on.notes.count(PP_OVERLAP_NOTE) == 1 and "overlap_pp" in PP_OVERLAP_NOTE
    off = search_layouts(fabric, m, 64, 64, **kw)
    assert PP_OVERLAP_NOTE not in off.notes and off.rejected_invalid == on.rejected_invalid


def test_the_cli_search_says_it_once(capsys):
    """`topo train --search --overlap pp=on` runs (it refused every vpp-1 pipeline) and says so once, by flag."""
    from topo.cli.main import main
    assert main(["train", "dgx-h100-superpod", "--set", "cluster.num_units=1", "--model", "llama3-8b", "--gpus", "64",
                 "--global-batch", "64", "--search", "--top", "2", "--overlap", "pp=on"]) == 0
    out = capsys.readouterr().out
    assert out.count("--overlap pp=off set on the vpp-1 layouts") == 1 and "overlap_pp" not in out
