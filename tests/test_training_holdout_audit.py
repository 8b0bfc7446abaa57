"""The hold-out rows' settings as their sources ran them (auditho48: every row of
data/reference/training_runs_holdout.csv read against its release's recipe), as benchmarks/training_accuracy.py
turns each row into topo's layout. Each test names the source line it guards."""

import sys
from pathlib import Path

import pytest
from published_setups import published_setups

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(scope="module")
def layouts():
    return {s["run"]: s["lay"] for s in published_setups()}


def test_grok1_fp8_rows_gather_their_fp8_weights(layouts):
    """NVIDIA/dgxc-benchmarking@1f6d9f40 grok1: container NeMo 25.04.00 (launch.sh line 13) with NVIDIA/NeMo@6f2c6fda
    (setup.sh line 55), whose FP8 runs take bf16_with_fp8_mixed (scripts/performance/llm/pretrain_grok1_314b.py line
    340), which sets fp8_param_gather (nemo/collections/llm/recipes/precision/mixed_precision.py line 70): the FP8
    rows gather 1-byte weights, the BF16 rows do not."""
    grok = {run: lay for run, lay in layouts.items() if run.startswith("nemo2504dgxc_") and "_grok1_" in run}
    assert len(grok) == 8
    for run, lay in grok.items():
        assert lay.fp8_param_gather == ("_fp8_" in run), run


def test_the_26_06_b300_qwen3_30b_row_runs_the_fused_grouped_mlp(layouts):
    """NVIDIA-NeMo/Megatron-Bridge v0.5.0 (26.06) qwen3_workload_base_configs.py line 437:
    QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1 sets cutedsl_fused_grouped_mlp = True (perf_plugins.py line 309
    exports NVTE_CUTEDSL_FUSED_GROUPED_MLP=1), as the GB200 / GB300 presets do; the same release's B300 DeepSeek-V3
    and GPT OSS presets do not, nor do the B300 Qwen3 30B presets before 26.06."""
    assert layouts["mb2606_b300_qwen3_30b"].moe_expert_kernels == "fused_mlp"
    for run in ("mb2606_b300_deepseekv3", "mb2606_b300_gptoss_120b_mxfp8", "mb260201_b300_qwen3_30b",
                "mb2606_gb200_qwen3_30b"):
        assert layouts[run].moe_expert_kernels == ("fused_mlp" if "gb200" in run else "multi_stream"), run


def test_a_72_gpu_gb300_job_fills_one_nvl72_rack(layouts):
    """mlcommons/training_results_v5.1@441d65f4 Lambda/systems/gb300_n18_ngc25.04_nemo.json: 18 nodes of 4 GB300,
    an NVL72 rack's 18 compute trays; benchmarks/training_accuracy.py keeps 64 of each rack's 72 for jobs that 64
    divides (the DGX GB200 assumption) and all 72 for whole racks of 72 that it does not."""
    assert layouts["mlperf51_lambda_gb300_llama31_8b_72"].gpus_per_domain_used is None
    assert layouts["mb260401_gb300_llama3_70b"].gpus_per_domain_used == 64


def test_dgx_cloud_deepseek_v3_rows_take_the_comm_overlap_callbacks_bucket(layouts):
    """NVIDIA/NeMo@7a8f1cc7 scripts/performance/llm/pretrain_deepseek_v3.py adds MegatronCommOverlapCallback, whose
    _get_optimizer_overlap_cfgs sets a 128Mi-parameter DDP bucket when dp > 1 (megatron_comm_overlap.py lines
    185-186); the Nemotron-H 56B script (no performance mode) adds no such callback: Megatron-Core's default."""
    dsv3 = {r: lay for r, lay in layouts.items() if r.startswith("dgxc2505_") and "deepseek" in r}
    assert len(dsv3) == 5 and all(lay.dp_bucket_params == 134_217_728 for lay in dsv3.values())
    assert all(lay.dp_bucket_params is None for r, lay in layouts.items() if r.startswith("dgxc2505_h100_nemotronh"))


def test_dgx_cloud_nemo_2504_fp8_rows_run_delayed_scaling(layouts):
    """NVIDIA/dgxc-benchmarking@1f6d9f40 llama3.1/launch.sh and nemotron/launch.sh pass no --fp8_recipe, so NeMo's
    set_primary_perf_configs (scripts/performance/utils.py lines 426-437 at @6f2c6fda and @b4148d21) takes
    bf16_with_fp8_mixed for the parser's default "ds" (argument_parser.py line 131): per-tensor delayed scaling, no
    current-scaling amax pass, FP8 weights gathered; the grok1 and llama4 scripts set bf16_with_fp8_mixed
    themselves."""
    fp8 = {r: lay for r, lay in layouts.items() if r.startswith("nemo2504dgxc_") and "_fp8_" in r}
    assert len(fp8) == 12 + 4 + 4  # Llama 3.1 405B and Nemotron-4 (fitted), Grok-1 and Llama 4 (held out)
    for run, lay in fp8.items():
        assert lay.fp8_recipe == "delayed" and not lay.fp8_amax_pass and lay.fp8_param_gather, run
        assert lay.fp8_amax_reduction and lay.fp8_scale_inverse_kernel, run  # TE@bee4649c (NeMo v2.3.0 manifest)


def test_grok1_bf16_and_fp8_rows_differ_only_in_precision(layouts):
    """grok49: the BF16 and FP8 Grok-1 runs take one layout a GPU type whatever the dtype
    (NVIDIA/dgxc-benchmarking@1f6d9f40 grok1/launch.sh lines 77-118: TP/PP/CP/EP/VP/ET/MBS/GBS and CUDA_GRAPH by
    GPU_TYPE only), and NVIDIA/NeMo@6f2c6fda scripts/performance/llm/pretrain_grok1_314b.py branches on the dtype only
    for the precision plugin (line 340: bf16_with_fp8_mixed, grad_reduce_in_fp32 False as the BF16 plugin's line 221)
    and gives both the same TP-overlap configuration (line 347, userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192)
    and CUDA graphs (line 352); scripts/performance/utils.py line 423 adds only the BF16 optimizer's
    use_precision_aware_optimizer (no time modelled). So a BF16 row's layout is its FP8 twin's but for the FP8 fields:
    the BF16 rows' larger error is not a setting one row carries and the other does not (delayed scaling's amax
    reduction and scale inverse kernel, fp8dl51's, are FP8 fields too)."""
    fp8_only = {"precision", "fp8_recipe", "fp8_param_gather", "fp8_amax_reduction", "fp8_scale_inverse_kernel"}
    pairs = 0
    for run, lay in layouts.items():
        if run.startswith("nemo2504dgxc_") and "_grok1_bf16_" in run:
            twin = layouts[run.replace("_bf16_", "_fp8_")].model_dump()
            diff = {k for k, v in lay.model_dump().items() if twin[k] != v}
            assert diff <= fp8_only and "precision" in diff, (run, diff)
            pairs += 1
    assert pairs == 4
