"""The runs CSVs' recipe columns (benchmarks/run_recipe_columns.py; tidy51, docs/calibration-findings.md sections
169-171): ``jax_mesh``, ``remat_policy``, ``dp_overlap_policy``, ``dp_all_reduce_combine_bytes``,
``tp_overlap_config``, ``moe_expert_kernels`` and ``moe_grouped_gemm`` (and tidy52's ``overlap_tp``,
``moe_router_fusion``, ``cross_entropy``, ``attention_fp8``, ``fp8_amax_reduction``, ``fp8_scale_inverse_kernel``,
and ``megatron_bridge_hybridep_sms.csv``; amax52's ``fp8_amax_pass``, ``fp8_param_gather``, ``ep_comm_sms``;
tidy53's memory, DP and pipeline columns, ``LAYOUT_COLUMNS``) reach every row's layout through the benchmark's one loader
(``_published_rows``), and a bad value is refused on one line naming the file, the run, the column, the value and what is allowed.

The values: AI-Hypercomputer/maxtext@efb6d9e4 MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh line 28
(``--xla_gpu_enable_latency_hiding_scheduler=true``) and line 31 (``--xla_gpu_all_reduce_combine_threshold_bytes``
134,217,728 / 67,108,864 / 536,870,912 / 1,073,741,824 / 1,073,741,824); NVIDIA/NeMo@6f2c6fda
scripts/performance/llm/pretrain_grok1_314b.py line 347 (``userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192``);
NVIDIA-NeMo/Megatron-Bridge@79308d0d recipes/deepseek/h100/deepseek_v3.py (``CommOverlapConfig(tp_comm_overlap=False)``);
yanring/Megatron-MoE-ModelZoo@8017e11 (the H100 Qwen3-235B 4k table: no --tp-comm-overlap, --moe-router-fusion or
--cross-entropy-loss-fusion); Megatron-Bridge v0.5.0 gpt_oss_workload_base_configs.py lines 209 and 219
(``fp8_dot_product_attention`` on GB300 / GB200 MXFP8)."""

import csv
import io
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from published_setups import published_rows, published_setups

sys.path.insert(0, str(ROOT / "benchmarks"))
import training_accuracy as ta  # noqa: E402
from run_recipe_columns import (COLUMNS, LAYOUT_COLUMNS, RunColumnError, check_recipe_columns,  # noqa: E402
                                hybridep_sms_table)

from topo.training.jax_mesh import layout_from_mesh  # noqa: E402

REF = ROOT / "data" / "reference"
PUBLISHED, HOLDOUT = "training_runs_published.csv", "training_runs_holdout.csv"
A3_THRESHOLDS = {8: 134_217_728, 16: 67_108_864, 32: 536_870_912, 64: 1_073_741_824, 128: 1_073_741_824}


def _tmp_reference(tmp_path, name: str, run: str, changes: dict):
    """A copy of data/reference under ``tmp_path`` with ``changes`` written into run ``run`` of file ``name``."""
    ref = tmp_path / "data" / "reference"
    shutil.copytree(REF, ref)
    with open(ref / name, newline="") as f:
        rows = list(csv.DictReader(f))
    assert any(r["run_id"] == run for r in rows)
    for r in rows:
        if r["run_id"] == run:
            r.update(changes)
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    (ref / name).write_text(out.getvalue())
    return tmp_path


def test_the_a3_rows_carry_their_scripts_thresholds_and_scheduler():
    rows = published_rows()
    for gpus, threshold in A3_THRESHOLDS.items():
        r = rows[f"maxtext_a3_llama2_7b_{gpus}"]
        assert (r["dp_all_reduce_combine_bytes"], r["dp_overlap_policy"]) == (str(threshold), "xla_lhs")
        assert r["jax_mesh"] == f"dcn_data={gpus // 8},ici_fsdp=8"
    assert {r["tp_overlap_config"] for r in rows.values() if r["model"] == "grok-1-314b"} == {
        "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192"}


def test_every_rows_column_value_is_in_its_layout():
    rows = published_rows()
    setups = {s["run"]: s["lay"] for s in published_setups() if "row" in s}
    assert set(setups) == set(rows)
    for rid, r in rows.items():
        lay = setups[rid]
        if r["jax_mesh"]:
            mesh = layout_from_mesh(r["jax_mesh"])
            assert {k: getattr(lay, k) for k in mesh} == mesh, rid
            assert lay.remat_policy == r["remat_policy"], rid
        assert lay.dp_overlap_policy == (r["dp_overlap_policy"] or "hooks"), rid
        want = int(r["dp_all_reduce_combine_bytes"]) if r["dp_all_reduce_combine_bytes"] else None
        assert lay.dp_all_reduce_combine_bytes == want, rid
        if r["tp_overlap_config"]:
            assert lay.tp_overlap_config == r["tp_overlap_config"], rid
        assert lay.moe_expert_kernels == (r["moe_expert_kernels"] or "multi_stream"), rid
        assert lay.moe_grouped_gemm == (r["moe_grouped_gemm"] != "0"), rid
        assert (lay.overlap_tp, lay.moe_router_fusion) == (r["overlap_tp"] == "1", r["moe_router_fusion"] == "1"), rid
        if r["cross_entropy"] or not rid.startswith("automodel_"):  # AutoModel's loss is its code's
            assert lay.cross_entropy == (r["cross_entropy"] or "fused"), rid
        assert lay.attention_fp8 == r["attention_fp8"], rid
        assert lay.fp8_amax_reduction == ({"1": True, "0": False}.get(r["fp8_amax_reduction"])), rid  # "": default
        assert lay.fp8_scale_inverse_kernel == (r["fp8_scale_inverse_kernel"] == "1"), rid
        assert (lay.fp8_amax_pass, lay.fp8_param_gather) == (r["fp8_amax_pass"] == "1", r["fp8_param_gather"] == "1"), rid
        if r["ep_comm_sms"]:
            assert lay.ep_comm_sms == int(r["ep_comm_sms"]), rid
        for col, read in LAYOUT_COLUMNS.items():  # tidy53: applied after every rule, so the layout holds them
            if r[col]:
                assert getattr(lay, col) == read(r[col]), (rid, col)
    # runs56: PR #5728's 3 paged stash; data81: 26.08's GB300 DeepSeek-V3, GPT-OSS 120B, Qwen3 30B and 235B (4);
    # srelu83: the GB300 Nemotron 3 Nano model card's run (squared-ReLU experts, TE 2.18 dev); ultra85: 26.08's GB200
    # and GB300 Nemotron 3 Ultra (their @4ab94dfa functions set the op fuser and NVTE_CUTEDSL_FUSED_GROUPED_MLP)
    assert sum(r["moe_expert_kernels"] == "fused_mlp" for r in rows.values()) == 34
    assert {rid for rid, r in rows.items() if r["moe_grouped_gemm"] == "0"} == {
        rid for rid, r in rows.items() if rid.startswith("nemo") and r["model"].startswith(("mixtral", "grok"))}
    counts = {col: sum(bool(r[col]) and r[col] != "0" for r in rows.values()) for col in (
        "overlap_tp", "moe_router_fusion", "cross_entropy", "attention_fp8", "fp8_amax_reduction",
        "fp8_scale_inverse_kernel", "fp8_amax_pass", "fp8_param_gather", "ep_comm_sms")}
    # epov55 added Megatron-Bridge PR #5094's EP-overlap A/B pair (the model card's recipe: overlap_tp, router fusion,
    # the 128 MiB buckets); runs56 Megatron-LM PR #5728's nine Qwen3 rows (router fusion and the recipes' HybridEP SMs
    # on all; FP8 weights on the H100 FP8 and the three 235B MXFP8 rows); runs57 DGX Cloud's two later Nemotron-H 56B
    # runs (performance mode: TP overlap, TE's loss, FP8 weights; the H100 one delayed scaling under TE 2.5); runs68
    # Together AI's three B200 Nemotron-H 56B runs of Megatron-Bridge's recipe (TP overlap, TE's loss, FP8 weights);
    # runs69 its five DeepSeek-V3 / Qwen3 runs (TP overlap, router fusion, TE's loss; the DeepSeek pair's 32 HybridEP SMs);
    # fp8pg69 the 97 MXFP8 rows whose recipe sets fp8_param_gather (92 Megatron-Bridge, 3 MLPerf v6.0, 2 ModelZoo);
    # runs70 Megatron-Bridge's two GB200 Nemotron 3.5 Lightning runs (TP overlap, TE's loss; FP8 weights on the MXFP8 one);
    # dsv3gb73 the five DGX Cloud v25.05.04 DeepSeek-V3 rows (TE's loss; the count was left at 205); ce73 the 58 other
    # NeMo 25.04 / 25.07 performance-script rows, 36 published and 22 held out (TE's loss: set_primary_perf_configs
    # sets cross_entropy_fusion_impl = "te", NVIDIA/NeMo v2.3.0 scripts/performance/utils.py line 291, @6f2c6fda line
    # 374, v2.4.0 helpers.py line 311; test_training_runs_data.py::test_nemo2_performance_scripts_loss); super80
    # Megatron-Bridge's four Nemotron 3 Super runs (TE's loss, no TP overlap; FP8 weights on the two MXFP8 ones; the
    # H100 card recipe's moe_flex_dispatcher_num_sms = 32); data81 the 26.08 section's five GB300 MXFP8 rows (TP
    # overlap, TE's loss, FP8 weights on all; router fusion on the four but Nemotron 3 Nano; FP8 attention at head
    # dim 64 on GPT-OSS 120B's); ultra85 the 26.08 section's two Nemotron 3 Ultra MXFP8 rows (router fusion, the
    # native loss "fused", FP8 weights; no TP overlap); superarch86 the archive's 13 Nemotron 3 Super MXFP8 rows (TE's
    # loss, FP8 weights, no TP overlap: comm_overlap None); nvfp4 (section 397) 26.04.01's four dense NVFP4 Llama
    # rows, their MXFP8 / current-scaling twins' columns (TE's loss) without FP8 weights; nvfp4b (section 402): without
    # TP overlap (Megatron-Bridge@21d102f5 llama3{,1}_llm_pretrain.py: tp_comm_overlap False if precision == "nvfp4");
    # nvfp4c (section 405): the 15 Nemotron 3 Super NVFP4 rows, their MXFP8 twins' columns (TE's loss, no TP overlap)
    # without FP8 weights; data128 Together AI's five B200 Llama 3.1 runs of NVIDIA's v26.02 recipes (TE's loss; TP
    # overlap and FP8 weights on the two current-scaling ones, neither on the three NVFP4 ones) and its two Nemotron4
    # 340B runs of the NeMo 25.07.01 recipe (TE's loss, TP overlap; FP8 weights and TE 2.5's amax pass on the FP8 one)
    assert counts == {"overlap_tp": 323, "moe_router_fusion": 144, "cross_entropy": 318, "attention_fp8": 4,
                      "fp8_amax_reduction": 52, "fp8_scale_inverse_kernel": 33, "fp8_amax_pass": 13,
                      "fp8_param_gather": 251, "ep_comm_sms": 16}
    assert rows["mbvc_h100_deepseekv3"]["overlap_tp"] == "0"
    # tidy53: the rows each per-source rule set (data/reference/README.md), as the rules gave them
    filled = {col: sum(bool(r[col]) for r in rows.values()) for col in LAYOUT_COLUMNS}
    # runs56: PR #5728's dev recipes: bf16 moments (H100 30B FP8, the three 235B MXFP8), the router's quantisation
    # padding and 128 MiB buckets (235B MXFP8; the 235B H100 row buckets too), paged stash's rank capacity (3 rows)
    # runs57: the two later DGX Cloud Nemotron-H runs' bf16 gradient buffer, NeMo 2's 128Mi buckets, no aligned reduce;
    # the lead (2026-12-06e): the six DGX Cloud v25.05.04 Nemotron-H rows' bf16 gradients (their notes and
    # _dgxc2505_kw said grad_reduce_in_fp32 False, the column was empty: topo priced fp32); runs68: Together AI's three
    # B200 Nemotron-H runs' bf16 gradient buffer (set_nemotronh_common_configs) and 128Mi buckets; runs69: its five
    # DeepSeek-V3 / Qwen3 runs' bf16 gradient buffer and 128Mi buckets, the DeepSeek pair's PP16 layout_map entry;
    # runs70: the two GB200 Nemotron 3.5 Lightning runs' 128Mi buckets (as their Nano twins); super80: the four
    # Nemotron 3 Super runs' 128Mi buckets, the H100 card recipe's 6-byte optimizer state (fp16 main params, bf16
    # moments); data81: 26.08's five GB300 rows' 128Mi buckets and the four full-iteration graphs' rank capacity 1.5
    # (all but Nemotron 3 Nano's); ultra85: 26.08's two Nemotron 3 Ultra rows' 128Mi buckets (as the Super rows) and
    # moe_router_padding_for_quantization (their functions at @4ab94dfa set it); the lead: the two 26.08 Super MXFP8
    # rows' too (the same, test_nemotron_mxfp8_rows_pad_counts_as_their_recipes); superarch86: the archive's 13
    # Nemotron 3 Super rows' 128Mi buckets, and the H100 card recipe's DP collectives not overlapped (overlap_dp 0);
    # ultracol91: the two Nemotron 3 Ultra rows' HSDP (_apply_nemotron_3_ultra_fsdp_hsdp at @4ab94dfa: 4 optimizer
    # instances, outer_dp_sharding_strategy optim; test_nemotron3_ultra_ultra85's HSDP test); nvfp4 (section 397):
    # 26.04.01's four dense NVFP4 Llama rows' 128Mi buckets (as their twins); nvfp4c (section 405): the 15 Nemotron 3
    # Super NVFP4 rows' 128Mi buckets and the 26.08 pair's padding (as their twins), and each its recipe's last 14
    # layers in BF16 and te_quant.cfg's module recipes; pgather129 (findings 460): the six DGX Cloud v25.05.04
    # Nemotron-H rows' synchronous weight gather (NeMo@7a8f1cc7 nemotronh_56b.py lines 141-147, no callback);
    # data128: Together AI's five B200 Llama 3.1 runs' bf16 gradient buffer and 128Mi buckets (as the runs68 / runs69
    # rows), and its two Nemotron4 340B runs' too, with NeMo 2's unaligned gradient reduction (as their NeMo 25.04
    # GB200 twins); pgbridge130 (findings 462): four Megatron-Bridge rows' synchronous gather (v0.2.0's fp8_mx
    # branches, @21d102f5's disable_param_gather_overlap), the DeepSeek-V3 H100 card's gradient reduction alone not
    # overlapped and the three GB200 Qwen3 30B dev recipes' DP collectives not overlapped
    # (test_overlap_param_gather_pgbridge130.py); ogpos133 (findings 469): the 37 Megatron-Bridge interleaved runs whose
    # performance script or recipe function turns overlap_param_gather_with_optimizer_step on
    # (test_gather_with_step_ogpos133.py)
    assert filled == {"grad_bytes": 27, "grad_reduce_bytes": 18, "optimizer_bytes_per_param": 10, "moe_counts_aligned": 12,
                      "dp_bucket_params": 347, "dp_align_grad_reduce": 92, "pipeline_layout": 6,
                      "pipeline_schedule": 1, "moe_expert_rank_capacity_factor": 31, "overlap_dp": 5, "dp_shard": 2,
                      "expert_dp_shard": 2, "dp_outer_sharding": 2, "num_layers_at_end_in_bf16": 15,
                      "module_recipes": 15, "overlap_param_gather": 11,
                      "overlap_param_gather_with_optimizer_step": 37}
    assert {r["dp_bucket_params"] for r in rows.values()} == {"", "134217728", "768000000"}
    assert all(r["dp_align_grad_reduce"] == "0" for r in rows.values()
               if rid_is_nemo2(r["run_id"]) or r["run_id"].startswith("dgxc2505_") and "deepseek" in r["model"])
    # ultra85: Nemotron 3 Ultra's perf defaults set moe_router_fusion = True (Megatron-Bridge@4ab94dfa
    # perf_recipes/nemotronh/common.py _apply_nemotron_3_ultra_perf_defaults); Nano's and Super's do not
    assert not any(r["moe_router_fusion"] == "1" for r in rows.values() if not r["model"].startswith(
        ("qwen3", "deepseek", "gpt-oss", "mixtral", "nemotron-3-ultra")))


def rid_is_nemo2(rid: str) -> bool:
    """A NeMo 2 performance-script row (NeMo 25.02-25.07: ``nemo25xx``), whose DDP has no aligned reduction."""
    return rid.startswith("nemo25") and rid[6:8].isdigit()


def test_every_overlap_off_row_says_why_in_its_note():
    # the column's value has its source in the note (the script's line, or "no tensor parallelism")
    for rid, r in published_rows().items():
        if r["overlap_tp"] == "0":
            assert "overlap" in r["note"].lower() or "TP_COMM" in r["note"], rid



def test_squared_relu_experts_run_the_fused_grouped_mlp_only_from_the_cutedsl_nemotron_recipes():
    """The rule for the squared-ReLU (Nemotron) MXFP8 rows: ``fused_mlp`` where the recipe function at the commit
    that published the figure turns on the op fuser and ``NVTE_CUTEDSL_FUSED_GROUPED_MLP`` and its Transformer
    Engine fuses ``ScaledSReLU``. NVIDIA-NeMo/Megatron-Bridge d0debd0bd (#5620, 2026-08-18, "perf(nemotron): enable
    CuteDSL fusion for GB MXFP8") first set both in the GB200 / GB300 Nemotron 3 Nano, Super and 3.5 Lightning
    MXFP8 functions: no earlier preset or function (v0.4.0-v0.5.1, @74695a06, @21d102f5, @381d0b82, @4ab94dfa, v0.6.0)
    sets them, and TE before 2.17 has no ``ScaledSReLU`` (v2.14-v2.16.1; the 26.06.01 lock's b9d690e0 on
    release_v2.16.post has it, @381d0b82's function does not ask). Of the rows only the GB300 Nano model card's run
    (bridge commit 04805868, which contains d0debd0bd; uv.lock TE 2.18.0+e7c550c5, cuDNN frontend 1.26.0 >= 1.24.0,
    ``GroupedMLP_CuTeGEMMUnary``) is published after it; the 26.08 section's figures (@4ab94dfa) are not. Nemotron 3
    Ultra's functions are the exception (ultra85): at @4ab94dfa itself ``_apply_nemotron_3_ultra_perf_defaults`` sets
    ``use_transformer_engine_op_fuser = True`` after ``_benchmark_common`` and both Ultra MXFP8 functions set
    ``NVTE_CUTEDSL_FUSED_GROUPED_MLP: 1`` (``perf_recipes/nemotronh/{common,gb200/nemotronh,gb300/nemotronh}.py``),
    on TE 2.17.1 (v0.6.0's lock), which fuses ``ScaledSReLU``."""
    rows = published_rows()
    relu2 = {rid: r for rid, r in rows.items()
             if r["fp8_recipe"] == "mxfp8" and ta._row_model(r).mlp == "relu2"}
    assert {"mb2608_gb200_nemotron3_super", "mb2608_gb300_nemotron3_super", "mb2608_gb300_nemotron3_nano",
            "mb2608_gb200_nemotron35_lightning", "mb260601_gb300_nemotron3_nano"} < set(relu2)
    assert {rid for rid, r in relu2.items() if r["moe_expert_kernels"] == "fused_mlp"} == {
        "mbvc_gb300_nemotron3_nano", "mb2608_gb200_nemotron3_ultra", "mb2608_gb300_nemotron3_ultra"}
    setups = {s["run"]: s["lay"] for s in published_setups() if "row" in s}
    assert setups["mb2608_gb300_nemotron3_super"].moe_expert_kernels == "multi_stream"


def test_of_the_super_rows_only_the_h100_card_recipe_runs_its_dp_collectives_unoverlapped():
    """superarch86: NVIDIA-NeMo/Megatron-Bridge@ffeb5a7a (the card's bridge commit for pretrain_performance.H100)
    ``recipes/nemotronh/h100/nemotron_3_super.py`` ``_nemotron_3_super_pretrain_64gpu_h100_bf16_config`` lines
    232-233 set ``overlap_grad_reduce = overlap_param_gather = False``, and ``perf_recipes/nemotronh/h100/nemotronh.py``
    ``nemotron_3_super_pretrain_64gpu_h100_bf16_config`` sets ``overlap_param_gather = False`` again after
    ``_benchmark_common`` (the card: "ordered gradient reduction"). Megatron-Core then reduce-scatters the gradients
    after the last backward and all-gathers the weights after the optimizer step, nothing beside them: the step's DP
    time is both collectives whole. Every other Nemotron 3 Super recipe restores the overlap
    (``_apply_nemotron_3_super_perf_defaults``). The other Megatron-Bridge rows whose column says 0 are pgbridge130's
    (findings 462, test_overlap_param_gather_pgbridge130.py): the three GB200 Qwen3 30B dev recipes and the DeepSeek-V3
    H100 card's run (its gradient reduction alone)."""
    from topo.training.step import estimate_step

    rows = published_rows()
    assert {rid for rid, r in rows.items() if r["overlap_dp"] == "0" and "nemotron3_super" in rid} == {
        "mbvc_h100_nemotron3_super"}
    assert "ffeb5a7a" in rows["mbvc_h100_nemotron3_super"]["note"]
    setups = {s["run"]: s for s in published_setups() if "row" in s}
    s = setups["mbvc_h100_nemotron3_super"]
    assert s["lay"].overlap_dp is False
    assert all(setups[rid]["lay"].overlap_dp for rid in setups if "nemotron3_super" in rid and rid != s["run"])
    fabrics, engines = ta._engines([s])
    r = estimate_step(fabrics[s["spec"]], s["model"], s["lay"], engine=ta.engine_of(engines, s), convention="6n")
    dp = [c for c in r.comm if c.dim == "dp"]
    assert {c.collective for c in dp} == {"reduce_scatter", "all_gather"}
    assert all(c.exposed_s == pytest.approx(c.time_s) for c in dp)
    assert r.breakdown_s["dp"] == pytest.approx(sum(c.time_s * c.calls_per_step for c in dp), rel=1e-9)

@pytest.mark.parametrize("name, run, changes, field, want", [
    (HOLDOUT, "maxtext_a3_llama2_7b_16", {"dp_all_reduce_combine_bytes": "1073741824"},
     "dp_all_reduce_combine_bytes", 1_073_741_824),
    (HOLDOUT, "maxtext_a3_llama2_7b_16", {"dp_overlap_policy": ""}, "dp_overlap_policy", "hooks"),
    (HOLDOUT, "maxtext_a3_llama2_7b_16", {"remat_policy": "full"}, "recompute", "full"),
    (HOLDOUT, "maxtext_a3_llama2_7b_16", {"jax_mesh": "dcn_fsdp=2,ici_fsdp=8"}, "dp_shard", None),
    (HOLDOUT, "nemo2504dgxc_gb200_grok1_bf16_128", {"tp_overlap_config": "te_default"}, "tp_overlap_config",
     "te_default"),
    (PUBLISHED, "nemo2502_h100_gpt3_175b", {"tp_overlap_config": ""}, "tp_overlap_config",
     "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048"),
    (PUBLISHED, "mb2606_gb200_qwen3_30b", {"moe_expert_kernels": ""}, "moe_expert_kernels", "multi_stream"),
    (PUBLISHED, "nemo2502_b200_mixtral_8x7b", {"moe_grouped_gemm": ""}, "moe_grouped_gemm", True),
    (PUBLISHED, "maxtext_h100_llama2_7b", {"dp_all_reduce_combine_bytes": "4096"}, "dp_all_reduce_combine_bytes", 4096),
    (PUBLISHED, "mbvc_h100_deepseekv3", {"overlap_tp": "1"}, "overlap_tp", True),
    (PUBLISHED, "mbvc_h100_nemotron3_super", {"overlap_dp": ""}, "overlap_dp", True),
    (PUBLISHED, "mcore_h100_qwen3_235b_ep32_pp8", {"moe_router_fusion": "1"}, "moe_router_fusion", True),
    (PUBLISHED, "mcore_h100_qwen3_235b_ep32_pp8", {"cross_entropy": ""}, "cross_entropy", "fused"),
    (PUBLISHED, "mb2606_gb200_gptoss_120b_mxfp8", {"attention_fp8": ""}, "attention_fp8", ""),
    (HOLDOUT, "nemo2504dgxc_gb200_grok1_fp8_128", {"fp8_amax_reduction": "0", "fp8_scale_inverse_kernel": ""},
     "fp8_amax_reduction", False),
    (HOLDOUT, "maxtext_a4_llama31_70b_fp8_256", {"fp8_amax_reduction": ""}, "fp8_amax_reduction", None),
    (HOLDOUT, "nemo2504dgxc_gb200_grok1_fp8_128", {"fp8_scale_inverse_kernel": "0"}, "fp8_scale_inverse_kernel",
     False),
    (PUBLISHED, "nemo2504_gb200_llama3_8b", {"fp8_amax_pass": ""}, "fp8_amax_pass", False),
    (HOLDOUT, "nemo2504dgxc_gb200_grok1_fp8_128", {"fp8_param_gather": ""}, "fp8_param_gather", False),
    (HOLDOUT, "mcore_gb200_deepseekv3_mxfp8", {"ep_comm_sms": "24"}, "ep_comm_sms", 24),
    (HOLDOUT, "mlperf60_cisco_h200_llama31_8b_16", {"grad_bytes": ""}, "grad_bytes", 4.0),
    (PUBLISHED, "deepseekv3_h800_2048", {"grad_reduce_bytes": "2"}, "grad_reduce_bytes", 2.0),
    (HOLDOUT, "mcore_gb200_deepseekv3_mxfp8", {"optimizer_bytes_per_param": ""}, "optimizer_bytes_per_param", 12.0),
    (HOLDOUT, "mcore_gb200_deepseekv3_mxfp8", {"moe_counts_aligned": "0"}, "moe_counts_aligned", False),
    (HOLDOUT, "mlperf60_cisco_h200_llama31_8b_16", {"dp_bucket_params": "134217728"}, "dp_bucket_params",
     134_217_728),
    (PUBLISHED, "nemo2502_h100_gpt3_175b", {"dp_align_grad_reduce": ""}, "dp_align_grad_reduce", True),
    (HOLDOUT, "mcore_gb200_deepseekv3_mxfp8", {"pipeline_layout": "Et*2|(tt|)*30t*2L"}, "pipeline_layout",
     "Et*2|(tt|)*30t*2L"),
    (PUBLISHED, "deepseekv3_h800_2048", {"pipeline_schedule": ""}, "pipeline_schedule", "1f1b"),
    (PUBLISHED, "mlperf60_gb200_deepseekv3_512", {"moe_expert_rank_capacity_factor": "2"},
     "moe_expert_rank_capacity_factor", 2.0),
    (PUBLISHED, "mb2608_gb200_nemotron3_ultra", {"dp_shard": "64"}, "dp_shard", 64),
    (HOLDOUT, "mb2608_gb300_nemotron3_ultra", {"expert_dp_shard": "2"}, "expert_dp_shard", 2),
    (PUBLISHED, "mb2608_gb200_nemotron3_ultra", {"dp_outer_sharding": "no_shard"}, "dp_outer_sharding", "no_shard"),
    (HOLDOUT, "dgxc2505_h100_nemotronh_56b_128", {"overlap_param_gather": ""}, "overlap_param_gather", None),
    (HOLDOUT, "dgxc2508_h100_nemotronh_56b_128", {"overlap_param_gather": "0"}, "overlap_param_gather", False),
])
def test_a_changed_value_reaches_the_layout(tmp_path, monkeypatch, name, run, changes, field, want):
    before = {s["run"]: s["lay"] for s in published_setups()}[run]  # the unchanged files, built once
    assert getattr(before, field) != want
    monkeypatch.setattr(ta, "ROOT", _tmp_reference(tmp_path, name, run, changes))
    after = {s["run"]: s["lay"] for s in ta._setups()}[run]
    assert getattr(after, field) == want


@pytest.mark.parametrize("column, value, allowed", [
    ("jax_mesh", "ici_fsdp=eight", "allowed: a JAX mesh of ici_<axis>=n / dcn_<axis>=n pairs ("),
    ("remat_policy", "minimal_flashy", "allowed: one of topo/data/compute/remat_policies.toml's policies: "),
    ("dp_overlap_policy", "lhs", "allowed: one of hooks, xla_lhs, or empty"),
    ("dp_all_reduce_combine_bytes", "64MiB", "allowed: a whole number of bytes >= 1, or empty"),
    ("dp_all_reduce_combine_bytes", "0", "allowed: a whole number of bytes >= 1, or empty"),
    ("tp_overlap_config", "userbuffers_fp8_b200_h16384", "allowed: one of topo/data/compute/tp_overlap.toml's "),
    ("moe_expert_kernels", "fused", "allowed: one of multi_stream, fused_mlp, or empty"),
    ("moe_grouped_gemm", "false", "allowed: one of 0, 1, or empty"),
    ("overlap_tp", "yes", "allowed: one of 0, 1"),
    ("overlap_tp", "", "allowed: one of 0, 1 on every row (the recipe's setting; its source in the note or "),
    ("moe_router_fusion", "true", "allowed: one of 0, 1"),
    ("moe_router_fusion", "", "allowed: one of 0, 1 on every row"),
    ("cross_entropy", "unfused", "allowed: one of fused, te, te_fp32_grad, torch_bf16, megatron_unfused, or empty"),
    ("attention_fp8", "MXFP8", "allowed: one of fp8, mxfp8, or empty"),
    ("fp8_amax_reduction", "True", "allowed: one of 0, 1, or empty"),
    ("fp8_scale_inverse_kernel", "2", "allowed: one of 0, 1, or empty"),
    ("fp8_amax_pass", "yes", "allowed: one of 0, 1, or empty"),
    ("fp8_param_gather", "true", "allowed: one of 0, 1, or empty"),
    ("ep_comm_sms", "thirty-two", "allowed: a whole number of SMs >= 1, or empty"),
    ("ep_comm_sms", "0", "allowed: a whole number of SMs >= 1, or empty"),
    ("grad_bytes", "bf16", "allowed: a number of bytes > 0 and <= 8, or empty"),
    ("grad_reduce_bytes", "0", "allowed: a number of bytes > 0 and <= 8, or empty"),
    ("optimizer_bytes_per_param", "-1", "allowed: a number of bytes >= 0, or empty"),
    ("optimizer_bytes_per_param", "nan", "allowed: a number of bytes >= 0, or empty"),
    ("moe_counts_aligned", "yes", "allowed: one of 0, 1, or empty"),
    ("dp_bucket_params", "128Mi", "allowed: a whole number of parameters >= 1, or empty"),
    ("dp_align_grad_reduce", "false", "allowed: one of 0, 1, or empty"),
    ("overlap_dp", "off", "allowed: one of 0, 1, or empty"),
    ("overlap_param_gather", "false", "allowed: one of 0, 1, or empty"),
    ("dp_shard", "32.0", "allowed: a whole number of ranks >= 1, or empty"),
    ("expert_dp_shard", "0", "allowed: a whole number of ranks >= 1, or empty"),
    ("dp_outer_sharding", "full", "allowed: one of no_shard, optim, or empty"),
    ("pipeline_layout", "Et|(tt|*30L", "allowed: a pipeline layout in Megatron-Core's notation ("),
    ("pipeline_schedule", "zb", "allowed: one of 1f1b, dualpipe, or empty"),
    ("moe_expert_rank_capacity_factor", "0.5", "allowed: a number of tokens' shares >= 1, or empty"),
])
def test_the_loader_refuses_a_bad_value_on_one_line(tmp_path, monkeypatch, column, value, allowed):
    monkeypatch.setattr(ta, "ROOT", _tmp_reference(tmp_path, HOLDOUT, "maxtext_a3_llama2_7b_16", {column: value}))
    with pytest.raises(RunColumnError) as e:
        ta._published_rows()
    msg = str(e.value)
    assert msg.startswith(f"{HOLDOUT}: run maxtext_a3_llama2_7b_16: {column} = {value!r}; {allowed}")
    assert "\n" not in msg


@pytest.mark.parametrize("rid, column, value, allowed", [
    ("maxtext_a3_llama2_7b_16", "jax_mesh", "", "a value on every maxtext_ row"),
    ("maxtext_a3_llama2_7b_16", "remat_policy", "", "a value on every maxtext_ row"),
    ("nemo2504dgxc_gb200_grok1_bf16_128", "jax_mesh", "ici_fsdp=8",
     "empty on a row that is not maxtext_ (only the MaxText rule reads it)"),
])
def test_the_mesh_and_remat_columns_are_maxtexts_alone(rid, column, value, allowed):
    row = {**published_rows()[rid], column: value}
    with pytest.raises(RunColumnError) as e:
        check_recipe_columns([row], "runs.csv")
    assert str(e.value) == f"runs.csv: run {rid}: {column} = {value!r}; allowed: {allowed}"


def test_both_files_have_the_columns():
    for name in (PUBLISHED, HOLDOUT):
        with open(REF / name, newline="") as f:
            assert set(COLUMNS) <= set(csv.DictReader(f).fieldnames)


def test_the_benchmark_exits_with_the_line_and_no_traceback(tmp_path):
    root = _tmp_reference(tmp_path, PUBLISHED, "maxtext_h100_llama2_7b", {"dp_overlap_policy": "xla"})
    (root / "topo").symlink_to(ROOT / "topo")  # the benchmark reads ROOT/topo/data at import
    code = ("import sys, runpy, pathlib; sys.path.insert(0, sys.argv[1] + '/benchmarks'); import _results; "
            "_results.ROOT = pathlib.Path(sys.argv[2]); sys.argv = ['training_accuracy.py']; "
            "runpy.run_path(_results.__file__.replace('_results.py', 'training_accuracy.py'), run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT), str(root)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr == (f"{PUBLISHED}: run maxtext_h100_llama2_7b: dp_overlap_policy = 'xla'; allowed: one of hooks, "
                        "xla_lhs, or empty\n")


def test_the_hybridep_file_gives_each_release_its_sms_and_refuses_a_bad_one(tmp_path, monkeypatch):
    table = hybridep_sms_table(REF / "megatron_bridge_hybridep_sms.csv")
    assert set(table) == {"25.11", "26.02", "26.02.01", "26.04", "26.04.01", "26.06", "26.06.01", "26.08"}
    assert {v for v in table.values()} == {(32, ("qwen3", "deepseek-v3", "gpt-oss-120b"))}
    root = tmp_path
    shutil.copytree(REF, root / "data" / "reference")
    path = root / "data" / "reference" / "megatron_bridge_hybridep_sms.csv"
    text = path.read_text()
    path.write_text(text.replace("26.04,32,", "26.04,24,"))  # a changed value reaches the layout
    monkeypatch.setattr(ta, "ROOT", root)
    assert {s["run"]: s["lay"] for s in ta._setups()}["mb2604_gb200_gptoss_120b"].ep_comm_sms == 24
    path.write_text(text.replace("26.04,32,", "26.04,thirty-two,"))
    with pytest.raises(RunColumnError) as e:
        ta._published_rows()
    assert str(e.value) == ("megatron_bridge_hybridep_sms.csv: release 26.04: moe_hybridep_num_sms = 'thirty-two'; "
                            "allowed: a whole number of SMs >= 1")
    path.write_text(text.replace("26.04,32,qwen3 deepseek-v3 gpt-oss-120b,", "26.04,32,,"))
    with pytest.raises(RunColumnError) as e:
        ta._published_rows()
    assert str(e.value).startswith("megatron_bridge_hybridep_sms.csv: release 26.04: model_prefixes = ''; allowed: ")


def test_mxfp8_rows_keep_fp8_weights_as_their_recipes_set():
    """fp8pg69: every Megatron-Bridge MXFP8 run takes ``bf16_with_mxfp8_mixed`` through the performance scripts'
    ``fp8_mx`` (``scripts/performance/utils/helpers.py`` at v0.1.0rc3 / v0.2.0, ``utils/precision.py`` v0.3.0-v0.6.0,
    ``perf_recipes/_common.py`` ``_perf_precision`` at v0.6.0), which sets ``fp8_param_gather = True`` with
    ``reuse_grad_buf_for_mxfp8_param_ag`` at every release tag from v0.1.0rc3 (NeMo 25.09) to v0.6.0
    (NVIDIA-NeMo/Megatron-Bridge ``src/megatron/bridge/training/mixed_precision.py``; @6b3b5ba7 lines 242-253); no
    preset of these rows' families turns it off (GPT-OSS 20B's, Kimi K2's and two Qwen3 30B dev presets do). MLPerf
    v6.0's DeepSeek-V3 configs and the ModelZoo's PR=mxfp8 set it too (the rows' notes). The other MXFP8 rows (model
    cards, Megatron-LM's DeepSeek-V3 study, PR #5728's dev presets) keep what their own notes say."""
    rows = published_rows()
    ours = {rid for rid, r in rows.items() if r["fp8_recipe"] == "mxfp8"
            and rid.startswith(("mb25", "mb26", "together2602_", "mlperf60_", "mcore_gb200_qwen3_235b_mxfp8"))}
    assert len(ours) == 120  # runs70: + mb2608_gb200_nemotron35_lightning (_perf_precision("fp8_mx") at 067f987d);
    # super80: + 26.08's GB200 and GB300 Nemotron 3 Super (the same, perf_recipes/nemotronh/{gb200,gb300}/nemotronh.py);
    # data81: + the five mb2608_gb300_* rows (_perf_precision("fp8_mx") at 4ab94dfa); ultra85: + 26.08's GB200 and
    # GB300 Nemotron 3 Ultra (_perf_precision("fp8_mx") in both functions at 4ab94dfa); superarch86: + the archive's 13
    # Nemotron 3 Super MXFP8 rows (utils/precision.py fp8_mx at @74695a06-@8f341b04; _perf_precision at @381d0b82)
    assert {rid for rid in ours if rows[rid]["fp8_param_gather"] != "1"} == set()
    # PR #5728's Qwen3 30B dev presets set it False (perf_recipes/qwen/gb200/qwen3_moe.py at v0.6.0, lines 769, 831)
    assert rows["mb5728_gb200_qwen3_30b_mxfp8_partialcg"]["fp8_param_gather"] == ""


def test_nemotron_mxfp8_rows_pad_counts_as_their_recipes():
    """Megatron-Bridge's 26.08 Nemotron 3 Super and Ultra MXFP8 recipe functions set
    ``moe_router_padding_for_quantization = True`` (NVIDIA-NeMo/Megatron-Bridge@4ab94dfa, the commit that published
    the 26.08 figures: src/megatron/bridge/perf_recipes/nemotronh/gb200/nemotronh.py lines 140 and 255,
    gb300/nemotronh.py lines 136 and 244); the Nano MXFP8 and every BF16 function there do not: the column follows
    the recipe alone."""
    rows = published_rows()
    nemotron = {rid: r for rid, r in rows.items() if r["model"].startswith(("nemotron-3-", "nemotron-3.5-"))}
    padded = {rid for rid, r in nemotron.items() if r["moe_counts_aligned"] == "1"}
    # nvfp4c: the 26.08 Super NVFP4 pair too (@4ab94dfa's nvfp4 functions set it: gb300/nemotronh.py line 183)
    assert padded == {"mb2608_gb200_nemotron3_super", "mb2608_gb300_nemotron3_super",
                      "mb2608_gb200_nemotron3_super_nvfp4", "mb2608_gb300_nemotron3_super_nvfp4",
                      "mb2608_gb200_nemotron3_ultra", "mb2608_gb300_nemotron3_ultra"}
