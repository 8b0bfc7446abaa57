"""Fine-MoE rows run as their sources ran them (issue 29, audit46): settings read from each run's own recipe at its
release, and the runs their publisher filed as regressed (docs/calibration-findings.md, "Audit of the furthest
fine-MoE rows")."""

import csv
import sys

import pytest

from conftest import ROOT
from published_setups import published_rows, published_setups

REF = ROOT / "data" / "reference"
# Megatron-LM PR #5728's rows (runs56) ran Megatron-Bridge's dev recipes (perf_recipes/, Megatron-Bridge@1e3ced26f),
# not the release performance scripts the rules below read: their own HybridEP SMs (16) and DP settings, per row.
with open(REF / "training_runs_holdout.csv", newline="") as _f:
    _DEV_RECIPES = {r["run_id"] for r in csv.DictReader(_f) if r["software"].startswith("Megatron-Bridge dev recipes")}


@pytest.fixture(scope="module")
def ta():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    return training_accuracy


@pytest.fixture(scope="module")
def setups(ta):
    return {s["run"]: s for s in published_setups()}


def test_b200_deepseekv3_of_25_11_runs_the_alltoall_dispatcher(setups):
    # Megatron-Bridge's 25.11 B200 DeepSeek-V3 preset sets no flex backend (NVIDIA-NeMo/Megatron-Bridge@97ad8cc6f
    # scripts/performance/configs/deepseek/deepseek_workload_base_configs.py lines 64-72; v0.2.0 workload_base_configs.py
    # lines 63-71), so DeepSeekModelProvider's moe_token_dispatcher_type = "alltoall" stands (v0.2.0
    # src/megatron/bridge/models/deepseek/deepseek_provider.py line 76); HybridEP reached B200 with PR #1888
    # (2026-01-23), whose preset the 26.02 row runs
    rows = published_rows()
    old, new = rows["mb2511_b200_deepseekv3"], rows["mb2602_b200_deepseekv3"]
    assert (old["moe_dispatcher"], old["moe_flex_backend"]) == ("alltoall", "")
    assert (new["moe_dispatcher"], new["moe_flex_backend"]) == ("deepep", "hybridep")
    assert setups["mb2511_b200_deepseekv3"]["lay"].ep_dispatcher == "alltoall"
    assert setups["mb2602_b200_deepseekv3"]["lay"].ep_flex_backend == "hybridep"


def test_b200_qwen3_235b_of_25_11_is_the_run_pr_1760_fixed(ta, setups):
    # NVIDIA-NeMo/Megatron-Bridge PR #1760 (2025-12-17), the fix of issue #1705: "MXFP8 step time improved from
    # 20.1s to 16.9s ... Disable moe_a2a_overlap due to CPU overhead": the 25.11 row (64 B200, GBS 1024) is the 20.1 s
    # run, with the EP overlap the 25.11 preset sets (v0.2.0 scripts/performance/configs/qwen3/
    # workload_base_configs.py lines 109-117, moe_a2a_overlap=True)
    r = published_rows()["mb2511_b200_qwen3_235b"]
    assert float(r["step_time_s"]) == pytest.approx(20.1, abs=0.06)
    assert r["moe_a2a_overlap"] == "1" and setups["mb2511_b200_qwen3_235b"]["lay"].overlap_ep
    assert "#1705" in ta.REGRESSED["mb2511_b200_qwen3_235b"]
    assert "mb2511_b200_qwen3_235b" not in {s["run"] for s in ta.fitted(list(setups.values()))}
    # the fixed recipe's 16.9 s is 1024 x 4096 / (16.9 x 64) = 3,878 tokens/s/GPU, what 26.02 publishes for the
    # same PP8 EP8 preset without overlap (3,805): within 2%
    fixed_tps = 1024 * 4096 / (16.9 * 64)
    assert fixed_tps / float(published_rows()["mb2602_b200_qwen3_235b"]["value"]) == pytest.approx(1.0, abs=0.02)


def test_b300_qwen3_235b_of_26_02_carried_the_regressed_settings(ta):
    # the B300 preset (PR #1721, 2026-01-07) copied B200's VP4 + EP overlap two days before PR #1760 removed them
    # from B200; v0.3.0 (26.02) ran them, PR #2669 (2026-03-10) matched B300 to B200: 26.04's row, MBS 2 and no
    # overlap on the same GPUs, runs 1.81 x the tokens per GPU
    rows = published_rows()
    r, later = rows["mb2602_b300_qwen3_235b"], rows["mb2604_b300_qwen3_235b"]
    assert (r["vpp"], r["moe_a2a_overlap"], r["moe_dispatcher"]) == ("4", "1", "alltoall")
    assert (later["vpp"], later["moe_a2a_overlap"]) == ("1", "0")
    assert float(later["value"]) / float(r["value"]) == pytest.approx(1.81, abs=0.01)
    assert "#1705" in ta.REGRESSED["mb2602_b300_qwen3_235b"]


def test_modelzoo_hybridep_holds_its_32_sms(setups):
    # DISPATCHER=hybridep: yanring/Megatron-MoE-ModelZoo@798dfb50 sbatch_benchmarking.sh line 81 adds
    # --moe-hybridep-num-sms 32; Megatron-LM's GB200 DeepSeek-V3 guide too (NVIDIA/Megatron-LM@eb0783b6
    # deepseek-v3-gb200-reproduce-guide.md lines 267-268), not DeepEP's default 20
    hyb = [k for k in setups if k.startswith("mcore_gb200_")]
    assert len(hyb) == 4
    assert all(setups[k]["lay"].ep_comm_sms == 32 for k in hyb)
    assert setups["mcore_h100_qwen3_235b_ep32_pp8_overlap"]["lay"].ep_comm_sms == 20  # DeepEP on H100: its default


@pytest.mark.parametrize("run, slower", [("mcore_gb200_qwen3_235b_mxfp8", 1.005), ("mb2608_gb200_qwen3_235b", 1.002)])
def test_32_sms_held_slow_the_overlapped_compute(setups, run, slower):
    # HybridEP's kernels on 32 SMs beside the hidden all-to-alls leave the compute fewer SMs than 20 would, so the
    # step is longer: the one ModelZoo GB200 row with the EP overlap (A2A_OVERLAP=1, audit46) and a Megatron-Bridge
    # row whose scripts set 32 (hep47)
    import topo
    from topo.training.step import estimate_step

    s = setups[run]
    assert s["lay"].overlap_ep and s["lay"].ep_comm_sms == 32
    fabric = topo.build_fabric(topo.load_spec(s["spec"][0], list(s["spec"][1])))
    t32 = estimate_step(fabric, s["model"], s["lay"], check=False).step_time_s
    t20 = estimate_step(fabric, s["model"], s["lay"].model_copy(update={"ep_comm_sms": 20}), check=False).step_time_s
    assert t32 > t20 * slower


# Megatron-Bridge's moe_hybridep_num_sms as each release's scripts set it (hep47; data/reference/
# megatron_bridge_hybridep_sms.csv): one row per source. Up to 26.06.01 the performance scripts' common overrides set 32 when the model
# config already names hybridep (NVIDIA-NeMo/Megatron-Bridge v0.2.0 scripts/performance/utils/helpers.py line 113;
# utils/overrides.py v0.3.0 line 69, zidanehuang001@8e0fe90 / v0.3.1 line 70, v0.4.0 line 71, v0.4.2 (26.04.01, the
# docs' version picker; auditho48) line 73, v0.5.0 /
# v0.5.1 line 75), which every Qwen3 / DeepSeek-V3 / GPT OSS 120B config of these releases does first; from 26.08
# the recipe functions (@4ab94dfa src/megatron/bridge/perf_recipes/_common.py line 89, deepseek/common.py line 59,
# gpt_oss/common.py line 32; the model cards' @3a9559f0 recipes/qwen/h100/qwen3_moe.py line 209)
@pytest.mark.parametrize("run,release,where", [
    ("mb2511_gb200_deepseekv3_fp8", "25.11", "helpers.py line 113"),
    ("mb2602_gb200_qwen3_235b", "26.02", "overrides.py line 69"),
    ("mb260201_gb200_gptoss_120b", "26.02.01", "overrides.py line 70"),
    ("mb2604_gb200_gptoss_120b", "26.04", "overrides.py line 71"),
    ("mb260401_gb200_qwen3_235b", "26.04.01", "overrides.py line 73"),
    ("mb2606_gb200_qwen3_235b", "26.06", "overrides.py line 75"),
    ("mb260601_gb200_qwen3_235b", "26.06.01", "overrides.py line 75"),
    ("mb2608_gb200_deepseekv3", "26.08", "deepseek/common.py line 59"),
    ("mb2608_gb200_gptoss_120b_mxfp8", "26.08", "gpt_oss/common.py line 32"),
    ("mbvc_h100_qwen3_30b", "26.08", "qwen3_moe.py line 209"),
    ("mb5094_h100_qwen3_30b_ep16_overlap_off", "26.08", "qwen3_moe.py line 209"),  # @7ded17dae the same line
    ("mb5094_h100_qwen3_30b_ep16_overlap_on", "26.08", "qwen3_moe.py line 209"),
])
def test_megatron_bridge_hybridep_runs_hold_their_releases_sms(ta, setups, run, release, where):
    row = published_rows()[run]
    assert row["software"].startswith(f"NeMo {release}")
    with open(REF / "megatron_bridge_hybridep_sms.csv", newline="") as f:  # tidy52: was MB_HYBRIDEP_SMS
        entry = {r["release"]: r for r in csv.DictReader(f)}[release]
    sms = int(entry["moe_hybridep_num_sms"])
    assert where in entry["source"] and entry["status"] == "published"
    assert (setups[run]["lay"].ep_dispatcher, setups[run]["lay"].ep_flex_backend) == ("deepep", "hybridep")
    assert setups[run]["lay"].ep_comm_sms == sms == 32


def test_every_overlapped_megatron_bridge_hybridep_run_holds_32_sms(setups):
    # audit46's 26 EP-overlapped HybridEP mb* rows are 25 here (13 fitted, 12 held out), with PR #5094's overlap-on
    # run (epov55) 26, with 26.08's four overlapped GB300 rows (data81, held out) 30: none took the scripts' 32
    runs = [s for k, s in setups.items() if k.startswith("mb") and s["lay"].overlap_ep and k not in _DEV_RECIPES
            and s["lay"].ep_dispatcher == "deepep" and s["lay"].ep_flex_backend == "hybridep"]
    with open(REF / "training_runs_holdout.csv", newline="") as f:
        held = {r["run_id"] for r in csv.DictReader(f)}
    assert len(runs) == 30 and sum(s["run"] in held for s in runs) == 16  # epov55: + PR #5094's overlap-on run
    assert all(s["lay"].ep_comm_sms == 32 for s in runs)


def test_rows_the_release_rule_does_not_cover_keep_the_default(setups):
    # the all-to-all dispatcher (25.11 B200 DeepSeek-V3), DeepEP V1 (25.09) and Nemotron 3 Nano (its recipes set their
    # own counts, not read here): ParallelLayout.ep_comm_sms's 20, DeepEP's default
    for run in ("mb2511_b200_deepseekv3", "mb2509_h100_deepseekv3", "mb2606_gb200_nemotron3_nano"):
        assert setups[run]["lay"].ep_comm_sms == 20, run


def test_gb200_bf16_ep8_launches_each_local_experts_gemms_from_the_host(setups):
    # ModelZoo's GB200 image runs Transformer Engine release_v2.9 (+ CPU patches; yanring/Megatron-MoE-ModelZoo@c700259d
    # dockers/GB200.Dockerfile, hxbai/TransformerEngine@7dd39147): BF16 GroupedLinear calls general_grouped_gemm ->
    # nvte_multi_tensor_gemm, whose CUTLASS grouped kernel is Hopper-only (NVIDIA/TransformerEngine v2.9
    # transformer_engine/common/gemm/cublaslt_gemm.cu lines 1014-1025), so multi_stream_cublas_gemm loops one cuBLASLt
    # GEMM per local expert on the host (fc1 and fc2 forward; dgrad and wgrad of each backward); the run's
    # --cuda-graph-scope attn moe_router moe_preprocess captures none of them. EP8: 16 local experts (128 / 8); the
    # EP32 twin 4
    from topo.training.operators import block_ops, captured, kernels_launched

    for run, local in (("mcore_gb200_qwen3_235b_bf16", 16), ("mb2511_gb200_qwen3_235b", 4)):
        s = setups[run]
        lay = s["lay"]
        assert lay.moe_expert_kernels == "multi_stream" and lay.precision == "bf16"
        experts = [op for op in block_ops(s["model"], lay, "E") if op.grouped]
        assert [op.name for op in experts] == ["fc1", "fc2"]
        assert not any(captured(op, lay.cuda_graph_scope) for op in experts)
        assert sum(kernels_launched(op, lay.precision) for op in experts) == 2 * local
        assert sum(kernels_launched(op, lay.precision, backward=True) for op in experts) == 4 * local


def test_megatron_bridge_runs_take_its_128mi_dp_bucket(setups):
    """Megatron-Bridge's CommOverlapConfig sets the DDP bucket to 128 x 1024 x 1024 parameters whenever dp > 1
    (NVIDIA-NeMo/Megatron-Bridge@aae82005 src/megatron/bridge/training/comm_overlap.py
    _get_optimizer_overlap_cfgs; rev48), not Megatron-Core's max(40M, 1M x dp x cp)."""
    mb = [s for s in setups.values() if s["run"].startswith("mb") and s["lay"].dp > 1 and s["run"] not in _DEV_RECIPES]
    assert len(mb) > 50
    assert all(s["lay"].dp_bucket_params == 134_217_728 for s in mb)


def test_megatron_bridge_fsdp_llama_rows_write_their_weight_gradients_unfused(ta):
    """Megatron-Bridge's FSDP Llama configs turn ``gradient_accumulation_fusion`` off from v0.2.0 (NeMo 25.11;
    NVIDIA-NeMo/Megatron-Bridge v0.2.0 ``scripts/performance/configs/llama3/llama3_llm_pretrain.py`` lines 74,
    109, 144, 267), NeMo 25.09's set it on (v0.2.0rc5 ``scripts/performance/utils/helpers.py`` line 78): the
    FSDP rows from 25.11 copy each weight gradient into the buffer (``wgrad_output = "copied"``), no other row.
    Nemotron 3 Ultra's 26.08 Megatron-FSDP functions set it off too (ultra85: NVIDIA-NeMo/Megatron-Bridge@4ab94dfa
    ``perf_recipes/nemotronh/common.py`` ``_apply_nemotron_3_ultra_fsdp_hsdp``, "incompatible with BF16 FSDP main
    grads")."""
    rows = published_rows()
    with open(REF / "training_runs_holdout.csv", newline="") as f:
        held = {r["run_id"]: r for r in csv.DictReader(f)}
    # Together AI's run of Megatron-Bridge@6b3b5ba7's B200 FSDP preset (data128): the same
    # ``llama3_70b_pretrain_config_b200`` lines 175-177 turn the fusion off
    assert ta.megatron_fsdp_unfused_wgrad(held["together2602_b200_llama3_70b_fp8_64"])
    assert not ta.megatron_fsdp_unfused_wgrad(held["together2602_b200_llama3_70b_nvfp4_512"])  # PP, not FSDP
    unfused = {rid for rid, r in rows.items() if ta.megatron_fsdp_unfused_wgrad(r)}
    assert unfused == {"mb2511_h100_llama3_8b", "mb2511_gb200_llama3_70b", "mb2602_gb200_llama3_70b",
                       "mb260201_gb200_llama3_70b", "mb2604_gb200_llama3_70b", "mb260401_gb200_llama3_70b",
                       "mb260401_gb300_llama3_70b", "mb2608_gb200_nemotron3_ultra", "mb2608_gb300_nemotron3_ultra",
                       "together2602_b200_llama3_70b_fp8_64"}
    assert not ta.megatron_fsdp_unfused_wgrad(rows["mb2509_gb200_llama3_70b"])  # 25.09: fused
    assert not ta.megatron_fsdp_unfused_wgrad(rows["mb260401_gb200_llama3_70b_mxfp8"])  # PP, not FSDP
    from topo.training.model import load_model
    kw = {}
    ta._run_kw(rows["mb260401_gb200_llama3_70b"], load_model("llama3-70b"), kw)
    assert kw.get("wgrad_output") == "copied"


# NVIDIA's own runs of the recipe Together AI ran (dsv3b69): the same B200 preset at the same release, scored
# beside Together's. NVIDIA-NeMo/Megatron-Bridge@6b3b5ba7 (dgxc-benchmarking v26.02's pin)
# scripts/performance/configs/deepseek/deepseek_workload_base_configs.py: B200_FP8_MX_V2 = B200_FP8_CS_V2 = B200_V2
# = B200_BF16_V2 (PP16 EP8, hybridep, mla_up_proj, GBS 4096); qwen3_workload_base_configs.py line 259:
# B200_FP8_MX_V2 (PP8, no VP, EP8, GBS 8192). NVIDIA's table (Megatron-Bridge@0a25f911
# docs/performance-summary-archive.md, "26.02 NeMo Container", DGX-B200 rows: 2,689 and 3,805 tokens/s/GPU) ran
# them at 24.37 s and 34.45 s; Together AI's runs (together-dgxc-benchmarking@d275be99) took 42.01 s and 50.65 s.
_SAME_RECIPE = {"together2602_b200_deepseekv3_mxfp8_256": ("mb2602_b200_deepseekv3", 42.01 / 24.37),
                "together2602_b200_qwen3_235b_mxfp8_256": ("mb2602_b200_qwen3_235b", 50.65 / 34.45)}
_RECIPE_COLUMNS = ("num_gpus", "precision", "fp8_recipe", "seq_len", "global_batch_seqs", "micro_batch", "tp", "pp",
                   "cp", "vpp", "ep", "moe_a2a_overlap", "moe_dispatcher", "moe_flex_backend", "recompute_modules",
                   "cuda_graph_scope", "fp8_param_gather")


@pytest.mark.parametrize("together, nvidia", [(k, v[0]) for k, v in _SAME_RECIPE.items()])
def test_together_mxfp8_rows_run_nvidias_recipe_and_topo_prices_them_alike(setups, together, nvidia):
    # every recipe column topo reads agrees, so topo's step must too: the 1.47-1.72x between the two measured steps
    # is the cluster's (docs/calibration-findings.md, dsv3b69), not a setting topo could read from the recipe
    import topo
    from topo.training.step import estimate_step

    rows = published_rows()
    assert [rows[together][c] for c in _RECIPE_COLUMNS] == [rows[nvidia][c] for c in _RECIPE_COLUMNS]
    assert float(rows[together]["step_time_s"]) / float(rows[nvidia]["step_time_s"]) == pytest.approx(
        _SAME_RECIPE[together][1], rel=1e-3)
    steps = []
    for run in (together, nvidia):
        s = setups[run]
        fabric = topo.build_fabric(topo.load_spec(s["spec"][0], list(s["spec"][1])))
        steps.append(estimate_step(fabric, s["model"], s["lay"], check=False).step_time_s)
    assert steps[0] == pytest.approx(steps[1], rel=1e-9)
