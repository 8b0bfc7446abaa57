"""Llama 4 Maverick as NeMo 25.04.01 ran it for NVIDIA's DGX Cloud benchmark (the hold-out rows
``nemo2504dgxc_*_llama4_maverick_*``), checked item by item against the code the rows ran (mav50,
docs/calibration-findings.md): NVIDIA/dgxc-benchmarking@1f6d9f40 ``llama4/launch.sh`` (the layouts, CUDA graphs only
for H100 FP8), NVIDIA/NeMo@7a8f1cc7 (the commit ``llama4/setup.sh`` line 56 pins: ``nemo/collections/llm/gpt/model/
llama.py`` ``Llama4Config`` lines 374-434, ``llama4_utils.py``, ``recipes/llama4_e128.py``,
``scripts/performance/llm/pretrain_llama4_e128.py``), Megatron-Core core_v0.12.0 and Transformer Engine v2.2.
Each test names the source lines it guards."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from topo.training.fp8_amax import amax_reduced  # noqa: E402
from topo.training.gpus import gpu_compute  # noqa: E402
from topo.training.model import Block, load_model  # noqa: E402
from topo.training.operators import layer_numbers, stage_compute  # noqa: E402
from topo.training.parallel import make_layout  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    """The Maverick rows of the hold-out file with the layout benchmarks/training_accuracy.py gives each."""
    import training_accuracy as ta
    out = {}
    for row, held in ta._published_rows():
        if row["model"] != "llama4-maverick":
            continue
        model = ta._row_model(row)
        kw = ta._recipe_layout_kw(row, model)
        ta._framework_kw(row, model, kw)
        ta._run_kw(row, model, kw)
        kw["tp_overlap_config"] = ta.tp_overlap_config(row, model)
        out[row["run_id"]] = (row, held, make_layout(**kw))
    return out


def _gb200(precision="bf16"):
    return make_layout(tp=1, pp=2, vpp=12, dp=64, ep=64, micro_batch=1, global_batch=1024, seq_len=8192,
                       precision=precision, flash_attention=True, moe_capacity_factor=1.0)


def test_maverick_rows_run_the_dgx_cloud_launch_layouts(rows):
    """dgxc-benchmarking@1f6d9f40 llama4/launch.sh lines 77-110: GB200 TP1 PP2 VP12 EP64 ETP1 MBS1, GBS 1024 at 128
    GPUs (README: weak-scaled to 2048 / 4096), no CUDA graphs; H100 TP4 PP1 EP128 ETP4 MBS1 GBS 1024 (VP1: the
    README's VP 12 is not what the script passes), CUDA graphs only for FP8 (NeMo's per-layer ``enable_cuda_graph``,
    scripts/performance/utils.py line 380). NeMo@7a8f1cc7: recompute_layers 0 (the script passes none,
    pretrain_llama4_e128.py lines 108-142), MegatronTokenDropCallback (capacity 1.0, padded: moe_token_drop.py
    defaults; recipes/llama4_e128.py lines 240-248), tp_comm_overlap True without a userbuffers configuration (line
    238: TE's defaults), grad_reduce_in_fp32 False (line 251; the FP8 plugin's too, pretrain_llama4_e128.py line 94),
    Llama4Config's alltoall dispatcher and moe_grouped_gemm (llama.py lines 395, 401), bf16_with_fp8_mixed for FP8
    (delayed scaling, fp8_param_gather: recipes/precision/mixed_precision.py lines 56-70); 64 of each NVL72 rack."""
    assert len(rows) == 8 and all(held for _, held, _ in rows.values())
    for run, (row, _, lay) in rows.items():
        n, fp8 = int(row["num_gpus"]), row["precision"] == "fp8"
        if row["gpu"] == "GB200":
            assert (lay.tp, lay.pp, lay.vpp, lay.ep, lay.etp, lay.micro_batch) == (1, 2, 12, 64, 1, 1), run
            assert lay.global_batch == 8 * n and lay.gpus_per_domain_used == 64, run
            assert lay.cuda_graph_scope == (), run
        else:
            assert (lay.tp, lay.pp, lay.vpp, lay.ep, lay.etp, lay.micro_batch) == (4, 1, 1, 128, 4, 1), run
            assert lay.global_batch == 1024 and n == 512, run
            assert bool(lay.cuda_graph_scope) == fp8, run
        assert lay.seq_len == 8192 and lay.recompute == "none" and lay.recompute_modules == (), run
        assert lay.ep_dispatcher == "alltoall" and not lay.overlap_ep and lay.moe_grouped_gemm, run
        assert lay.moe_capacity_factor == 1.0 and lay.moe_expert_kernels == "multi_stream", run
        assert lay.overlap_tp and lay.tp_overlap_config == "te_default", run
        assert lay.grad_bytes == 2.0 and lay.grad_reduce_bytes == 2.0, run
        assert lay.fp8_param_gather == fp8 and lay.fp8_recipe == ("delayed" if fp8 else None), run
        assert not lay.fp8_amax_pass and amax_reduced(lay) == fp8 == lay.fp8_scale_inverse_kernel, run
        assert lay.flash_attention and lay.pipeline_layout is None and not lay.pipeline_embedding, run


def test_each_gb200_chunk_is_one_dense_and_one_moe_layer():
    """Megatron-Core core_v0.12.0 transformer_layer.py lines 145-155: with 48 layers, PP2 and VP12, chunk ``v`` of
    pipeline rank ``p`` holds layers ``4 v + 2 p`` and ``4 v + 2 p + 1`` (no first/last-stage counts, no embedding
    or loss in the split: NeMo@7a8f1cc7 sets none for Llama 4). Llama4Experts128Config's ``moe_layer_freq = [0, 1] x
    24`` (llama.py line 433; gpt_layer_specs.py lines 384-393) makes the even layers dense and the odd ones MoE, so
    every chunk is one dense and one MoE layer and both stages hold 12 of each: no stage carries more experts. The
    NoPE layers (``(layer + 1) % 4 == 0``, llama4_utils.py line 137) all fall on rank 1, which changes no time at
    8,192 tokens (next test)."""
    model = load_model("llama4-maverick")
    stages = layer_numbers(model, _gb200())
    assert stages[0][0] == "embedding" and stages[1][-1] == "logits"
    for p, units in enumerate(stages):
        layers = [u for u in units if isinstance(u, int)]
        assert layers == [4 * v + 2 * p + i for v in range(12) for i in (0, 1)]
        blocks = [model.blocks[i] for i in layers]
        assert all(b.endswith(Block.MLP) for b in blocks[0::2]) and all(b.endswith(Block.MOE) for b in blocks[1::2])
        assert sum(b.endswith(Block.MOE) for b in blocks) == 12
        assert sum(b.startswith(Block.ATTENTION) for b in blocks) == (0 if p == 0 else 12)


def test_the_8k_chunk_runs_as_full_causal_attention():
    """NeMo@7a8f1cc7 llama4_utils.py lines 292-296: Llama4SelfAttention splits the sequence into chunks only when it
    is longer than ``attention_chunk_size`` (8,192, llama.py line 410), so at the rows' 8,192 tokens every layer runs
    Transformer Engine's plain causal attention: TE v2.2 prefers cuDNN's fused attention over flash-attn from sm90
    (pytorch/dot_product_attention/utils.py line 902) and takes sm100 at head dims <= 128 (common/fused_attn/
    fused_attn.cpp line 221; Maverick's is 128), with no window. topo prices the chunked layers at that length as
    the same model without a window, kernel for kernel."""
    model = load_model("llama4-maverick")
    full = type(model).model_validate({**model.model_dump(), "attention": {"head_dim": 128}})
    gpu = gpu_compute("GB200")
    for prec in ("bf16", "fp8"):
        a, b = stage_compute(model, _gb200(prec), gpu), stage_compute(full, _gb200(prec), gpu)
        assert a.by_module_s["core_attn"] == pytest.approx(b.by_module_s["core_attn"], rel=1e-12)
        assert a.microbatch_s == pytest.approx(b.microbatch_s, rel=1e-12)


def test_fp8_runs_the_linear_layers_in_fp8_and_keeps_core_attention_and_head_in_bf16():
    """Under NeMo's bf16_with_fp8_mixed (``fp8 = "hybrid"``) the Transformer Engine modules run FP8: QKV and output
    projections, the dense MLP, the shared expert (Megatron-Core core_v0.12.0 moe_module_specs.py lines 37-38:
    TEColumnParallelLinear / TERowParallelLinear) and the routed experts (lines 44-48: TE grouped linear). The router
    stays BF16 (``moe_router_dtype`` None in Llama4Config, llama.py line 402: router.py lines 66-71 run
    ``F.linear`` in the input's dtype), the output layer is Megatron-Core's own ColumnParallelLinear, and core
    attention stays BF16 (no ``fp8_dot_product_attention`` in the plugin)."""
    model, gpu = load_model("llama4-maverick"), gpu_compute("GB200")
    bf16, fp8 = (stage_compute(model, _gb200(p), gpu).by_module_s for p in ("bf16", "fp8"))
    for module in ("attention", "mlp", "moe", "shared_experts"):
        assert fp8[module] < 0.75 * bf16[module], module
    for module in ("core_attn", "logits"):
        assert fp8[module] == pytest.approx(bf16[module], rel=1e-9), module
