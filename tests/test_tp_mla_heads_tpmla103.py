"""The rest of the TP windows (tpmla103, issue 29): an MLA model's up projections and the heads' output layer /
MTP ``eh_proj`` hide their backward exchanges behind their own GEMMs; the SP-gathered MXFP8 operand is swizzled
under userbuffers too.

Sources:
- MLA's up projections are Transformer Engine column-parallel linears (NVIDIA/Megatron-LM@d98e8a64
  megatron/core/models/gpt/gpt_layer_specs.py lines 246-255: ``column_parallel_layer_norm_linear()`` with
  ``qk_layernorm``, else ``column_parallel_linear()``; multi_latent_attention.py lines 557-616), built without
  userbuffers (buffer names ``q_up_proj`` / ``kv_up_proj``: transformer_engine.py lines 1176-1187), so their
  backward gather and reduce-scatter run as any TE column linear's: ``async_op=True`` beside its dgrad / wgrad GEMM
  (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/linear.py lines 993-996, 1126-1132,
  1172-1174, 1347-1352; layernorm_linear.py 787-790, 904-907, 985-987, 1128-1130).
- ``k_pos_emb``'s gather is ``gather_from_sequence_parallel_region``, whose backward reduce-scatter is synchronous
  (megatron/core/tensor_parallel/mappings.py lines 159-186, 331-345).
- The output layer: ``LinearWithGradAccumulationAndAsyncCommunication.backward`` (tensor_parallel/layers.py lines
  674-687: the input gathered ``async_op=True`` beside ``grad_output.matmul(weight)``; 696 / 707-709: the input
  gradient all-reduced / reduce-scattered ``async_op=True`` beside the wgrad GEMM, 713-731, waited at 789). MTP's
  ``eh_proj``: a ``TEColumnParallelLinear`` (multi_token_prediction.py lines 780, 1174-1187), buffer ``mtp_eh_proj``.
- Userbuffers' MXFP8 gather (transformer_engine/pytorch/module/base.py ``fill_userbuffers_buffer_for_all_gather``,
  lines 714-715 "Userbuffers assumes MXFP8 tensors have unswizzled scales", line 747
  ``with_gemm_swizzled_scales=False``) and the GEMM swizzling both operands before the userbuffers branch
  (csrc/extensions/gemm.cpp lines 303-306, then ``if (comm_overlap)`` at 322).
"""

import pytest

import topo
from topo.training.gpus import gpu_compute
from topo.training.kernels import gemm_s
from topo.training.model import load_model
from topo.training.operators import block_ops, rank_computes, stage_compute
from topo.training.parallel import make_layout
from topo.training.result import DimensionComm
from topo.training.step import (GRAD_GATHER_PHASE, _nccl_hidden_tp, comm_windows, estimate_step, stage_tp_blocks,
                                step_traffic, tp_exposed_s)
from topo.training.tp_overlap import pass_margins
from topo.training.weight_swizzle import gathered_swizzles


@pytest.fixture(scope="module")
def fab():
    return topo.build_fabric(topo.load_spec("dgx-h100-superpod"))


def _dsv3(**kw):
    # DeepSeek-V3 at TP2 with sequence parallelism (the mb2509 H100 row's TP), one pipeline stage of a few layers
    return make_layout(tp=2, pp=16, dp=1, ep=1, global_batch=2, seq_len=4096, precision="bf16", **kw)


def _items(m, lay, what):
    return [it for it in step_traffic(m, lay) if it["dim"] == "tp" and it.get("what", "").endswith(what)]


def test_mla_up_projections_are_column_linears_without_userbuffers():
    """q_up / kv_up carry the column role and a pair of their own, but no communicator (no SM margin) even with
    ``overlap_tp``; their gathered input is an SP-gathered operand."""
    m = load_model("deepseek-v3-671b")
    lay = _dsv3(overlap_tp=True)
    ops = {o.name: o for o in block_ops(m, lay, "*")}
    for name in ("q_up", "kv_up"):
        op = ops[name]
        assert (op.tp_role, op.tp_pair, op.tp_overlap, op.sp_gather) == ("ag", name, "", "ag")
        assert pass_margins(op, lay) == {}
    assert ops["q_down"].tp_role == ops["kv_down"].tp_role == ""  # duplicated: no TP exchange


def test_an_mla_latents_backward_exchanges_pair_with_its_own_up_projection():
    """Each latent's gather again (for wgrad) pairs with its up projection's dgrad GEMM, its gradient's
    reduce-scatter with its wgrad GEMM (bulk: ``max(0, c - g)`` a block); ``k_pos_emb``'s gradient blocks."""
    m = load_model("deepseek-v3-671b")
    lay, gpu = _dsv3(), gpu_compute("H100")
    sc = stage_compute(m, lay, gpu)
    km = gpu.kernels
    ops = {o.name: o for o in block_ops(m, lay, "*")}
    mla = sc.blocks.get("*", 0) if isinstance(sc.blocks, dict) else 0
    for latent, up in (("query latent", "q_up"), ("key-value latent", "kv_up")):
        o = ops[up]
        g_d, g_w = gemm_s(km, o.m, o.k, o.n, "bf16"), gemm_s(km, o.k, o.n, o.m, "bf16")
        assert sc.tp_pairs[f"{up}_dgrad"] == [pytest.approx((g_d, sc.tp_pairs[f"{up}_dgrad"][0][1]))]
        assert sc.tp_pairs[f"{up}_wgrad"][0][0] == pytest.approx(g_w)
        (again,) = _items(m, lay, f"MLA {latent} again, for wgrad")
        (grad,) = _items(m, lay, f"MLA {latent} gradient")
        assert (again["pair"], grad["pair"]) == (f"{up}_dgrad", f"{up}_wgrad")
        n = again["tp_blocks"]
        assert sc.tp_pairs[f"{up}_dgrad"][0][1] == n and (mla == 0 or mla == n)
        windows = comm_windows(lay, sc, ring=False, tp_hidden=False)
        for item, g in ((again, g_d), (grad, g_w)):
            one = g + 1e-4  # 100 us longer than its GEMM: that much exposed a call
            got = tp_exposed_s(item, one, sc, stage_tp_blocks(m, lay), windows, lay, ring=False, tp_hidden=False)
            assert got == pytest.approx(item["calls"] * 1e-4, rel=1e-9)
            short = tp_exposed_s(item, 0.5 * g, sc, stage_tp_blocks(m, lay), windows, lay, ring=False,
                                 tp_hidden=False)
            assert short == 0.0
    (kpe,) = _items(m, lay, "MLA k_pos_emb gradient")
    assert kpe["phase"] == GRAD_GATHER_PHASE and "pair" not in kpe
    # without sequence parallelism each up projection's input gradient is all-reduced beside its wgrad GEMM
    no_sp = lay.model_copy(update={"sequence_parallel": False})
    (ar,) = _items(m, no_sp, "MLA query latent gradient")
    assert (ar["collective"], ar["pair"]) == ("all_reduce", "q_up_wgrad")


def test_the_output_layers_exchanges_pair_with_its_own_gemms_with_or_without_userbuffers():
    """Llama 3 8B at TP4 SP: the output layer's input gathered again hides behind its dgrad GEMM (``T x h`` over
    ``V / tp``), its input gradient's reduce-scatter behind its wgrad GEMM (``h x V / tp`` over ``T``), each
    exposing ``max(0, c - g)``, the same whether the layers run userbuffers (``overlap_tp``) or not; the pooled
    window (the rest of the stage's wgrad GEMMs) would have hidden both. Their NCCL kernels are charged on that
    GEMM either way."""
    m = load_model("llama3-8b")
    gpu = gpu_compute("H100")
    km = gpu.kernels
    for ub in (False, True):
        lay = make_layout(tp=4, dp=1, global_batch=2, seq_len=4096, overlap_tp=ub)
        sc = stage_compute(m, lay, gpu)
        (o,) = [o for o in block_ops(m, lay, "logits") if o.name == "logits"]
        g = {"head_dgrad": gemm_s(km, o.m, o.k, o.n, "bf16"), "head_wgrad": gemm_s(km, o.k, o.n, o.m, "bf16")}
        items = [it for it in step_traffic(m, lay) if it.get("what", "").startswith("head: output layer input ")
                 and it["phase"] == "head_wgrad"]
        assert sorted(it["pair"] for it in items) == ["head_dgrad", "head_wgrad"]
        windows = comm_windows(lay, sc, ring=ub, tp_hidden=ub)
        for it in items:
            assert sc.tp_pairs[it["pair"]] == [pytest.approx((g[it["pair"]], 1))]
            got = tp_exposed_s(it, g[it["pair"]] + 2e-4, sc, stage_tp_blocks(m, lay), windows, lay, ring=ub,
                               tp_hidden=ub)
            assert got == pytest.approx(it["calls"] * 2e-4, rel=1e-9)
        comms = [DimensionComm(dim="tp", collective=it["collective"], size_bytes=1e6, calls_per_step=1, time_s=1.0,
                               exposed_s=0.0, algorithm="ring", level=None, link=None, utilization=None,
                               num_groups=1, group_size=4, domains_per_group=1, phase="backward") for it in items]
        assert _nccl_hidden_tp(m, lay, comms, items) == {i: it["pair"] for i, it in enumerate(items)}
        # the pool the unpaired items draw on: the stage's wgrad GEMMs less those the heads' exchanges hold
        held = g["head_wgrad"] + (0.0 if ub else sum(x * n for x, n in sc.tp_pairs["ag_wgrad"]))
        assert windows["tp_backward"] == pytest.approx(lay.microbatches * max(0.0, sc.wgrad_s - held))


def test_mtp_eh_proj_pairs_with_its_own_gemm():
    """DeepSeek-V3's MTP depth: ``eh_proj`` (``2h -> h / tp``) is a column linear of its own pair."""
    m = load_model("deepseek-v3-671b")
    lay = _dsv3()
    gpu = gpu_compute("H100")
    (o,) = [o for o in block_ops(m, lay, "mtp_head") if o.name == "mtp_proj"]
    assert (o.tp_role, o.tp_pair, o.m, o.n, o.k) == ("ag", "eh_proj", 4096, m.hidden / 2, 2 * m.hidden)
    items = {it["what"]: it for it in step_traffic(m, lay, stage=15)
             if it.get("what", "").startswith("head: MTP eh_proj input ")}
    assert {it["pair"] for it in items.values()} == {"eh_proj_dgrad", "eh_proj_wgrad"}
    sc = next(r for r in rank_computes(m, lay, gpu) if "eh_proj_wgrad" in r.tp_pairs)
    assert sc.tp_pairs["eh_proj_wgrad"][0][0] == pytest.approx(gemm_s(gpu.kernels, o.k, o.n, o.m, "bf16"))


def test_userbuffers_gather_mxfp8_with_compact_scales_so_the_gemm_swizzles_them():
    """With ``overlap_tp`` (userbuffers), the SP-gathered MXFP8 operand is swizzled each GEMM call as without:
    QKV's input (fprop and wgrad) and the output projection's output gradient (dgrad and wgrad), one kernel each."""
    m = load_model("llama3-8b")
    lay = make_layout(tp=2, dp=1, global_batch=2, seq_len=4096, precision="fp8", fp8_recipe="mxfp8",
                      overlap_tp=True)
    ops = {o.name: o for o in block_ops(m, lay, "*", "blackwell")}
    qkv, proj = ops["qkv"], ops["out_proj"]
    assert (qkv.tp_overlap, qkv.sp_gather, proj.tp_overlap, proj.sp_gather) == ("ag", "ag", "rs", "rs")
    assert (gathered_swizzles(qkv, "fp8"), gathered_swizzles(qkv, "fp8", True)) == (1, 1)
    assert (gathered_swizzles(proj, "fp8"), gathered_swizzles(proj, "fp8", True)) == (0, 2)


def test_the_search_bound_stays_below_the_step_for_mla_and_userbuffers(fab):
    """The search's TP floor by the same rules: DeepSeek-V3 TP2 (MLA, no userbuffers) and Llama 3 70B with
    userbuffers (the heads beside their own GEMMs either way) at most the step's exposed TP."""
    from topo.training.search import _comm_floor_s
    from topo.training.tp_overlap import tp_overlap_on
    gpu = gpu_compute("H100")
    for name, lay in (("deepseek-v3-671b", _dsv3()),
                      ("llama3-70b", make_layout(tp=8, pp=4, dp=2, global_batch=16, seq_len=4096, overlap_tp=True))):
        m = load_model(name)
        sc = stage_compute(m, lay, gpu)
        floor, _ = _comm_floor_s(fab.spec, lay, step_traffic(m, lay), sc, tp_overlap=tp_overlap_on(lay, m),
                                 tp_blocks=stage_tp_blocks(m, lay))
        assert 0.0 < floor <= estimate_step(fab, m, lay, contention=False).breakdown_s["tp"]

