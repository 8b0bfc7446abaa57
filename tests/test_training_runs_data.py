"""The published training runs (data/reference/training_runs_published.csv) and the held-out runs no fit reads
(training_runs_holdout.csv) are well-formed: every row's layout multiplies out, its step time is the one its
throughput gives, its model file loads, and no run is in two files."""

import csv
import re
import sys
import tomllib

import pytest
import topo

from conftest import ROOT
from published_setups import assert_printed_row, published_setups
from topo.training.model import load_model
from topo.training.operators import block_ops, cast_kind

REF = ROOT / "data" / "reference"
PUBLISHED, HOLDOUT = REF / "training_runs_published.csv", REF / "training_runs_holdout.csv"
INTS = ("num_gpus", "seq_len", "global_batch_seqs", "micro_batch", "tp", "pp", "cp", "vpp", "ep")
# a GitHub file at a 40-hex commit, a versioned arXiv paper, or NVIDIA's docs page of a named release
SOURCE = re.compile(r"https://(github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+|arxiv\.org/abs/\d{4}\.\d{5}\S*"
                    r"|docs\.nvidia\.com/\S+)$")


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


ROWS = [(p.name, r) for p in (PUBLISHED, HOLDOUT) for r in _rows(p)]


def test_holdout_has_the_published_columns():
    with open(PUBLISHED) as a, open(HOLDOUT) as b:
        assert a.readline() == b.readline()
    assert len(_rows(HOLDOUT)) >= 10


def test_a_row_read_at_a_copy_of_the_mlcommons_results_is_secondary():
    """rev48 (c): MLPerf v6.0 rows cited a third party's fork (Richardyu114/training_results_v6.0@eabf23a0) as
    ``published``; the logs are the submitters', the copy is not MLCommons' (no mlcommons/training_results_v6.0 copy
    could be found or fetched on 2026-12-05), so such a row is ``secondary`` and says why. The v5.0 and v4.1 rows now
    cite MLCommons' own repositories (0fdc28f0, b87b9e39: the same git blobs as the forks first read)."""
    copies = [(name, r) for name, r in ROWS
              if re.match(r"https://github\.com/(?!mlcommons/)[^/]+/training_results_v", r["source_url"])]
    assert len(copies) == 6  # v6.0: 3 DeepSeek-V3 (published csv), 3 Cisco Llama 3.1 8B (2 + 1 hold-out)
    for name, r in copies:
        assert r["status"].startswith("secondary (MLPerf log read at a third-party fork"), (name, r["run_id"])


@pytest.mark.parametrize("name, row", ROWS, ids=[r["run_id"] for _, r in ROWS])
def test_row_is_well_formed(name, row):
    assert re.fullmatch(r"[a-z0-9_]+", row["run_id"])
    assert SOURCE.match(row["source_url"]), row["source_url"]
    if "docs.nvidia.com" in row["source_url"]:  # an undated page: the row names the release it reports
        assert re.search(r"\d\d\.\d\d", row["software"]) or row["software"].startswith("NeMo AutoModel")
    assert row["status"].startswith(("published", "secondary")) and row["precision"] in ("bf16", "fp8")
    n, seq, gbs, mbs, tp, pp, cp, vpp, ep = (int(row[k]) for k in INTS)
    assert min(n, seq, gbs, mbs, tp, pp, cp, vpp, ep) >= 1 and row["fsdp"] in ("0", "1")
    # tp x pp x cp x dp = GPUs with a whole dp; the global batch a whole number of micro-batches per replica
    assert n % (tp * pp * cp) == 0
    dp = n // (tp * pp * cp)
    assert gbs % (mbs * dp) == 0, (gbs, mbs, dp)
    model = load_model(row["model"])
    if model.moe is None:
        assert ep == 1
    else:  # the experts are spread over the data- and context-parallel ranks of one stage
        assert (dp * cp * tp) % ep == 0 and model.moe.experts % ep == 0
    if pp == 1:
        assert vpp == 1
    # the step time is the one the published throughput gives: tokens per step / (tokens/s per GPU x GPUs),
    # to the printed digits (three or four significant)
    assert row["metric"] == "tokens_per_s_per_gpu"
    step_s = gbs * seq / (float(row["value"]) * n)
    assert float(row["step_time_s"]) == pytest.approx(step_s, rel=6e-3)


def test_no_run_in_two_files():
    ids = [r["run_id"] for r in _rows(REF / "training_runs.csv")] + [r["run_id"] for _, r in ROWS]
    assert len(ids) == len(set(ids))


# data35 (issue 29, the thin groups): the new runs of families the fit already reads, in the order of their sources
# (NVIDIA/dgxc-benchmarking@1f6d9f40 deepseek_v3/pretraining/README.md: the H100 table, then the GB200 table; then
# NVIDIA/Megatron-LM@eb0783b6's GB200 study); every third of them (the 3rd, the 6th) is held out by that rule, fixed
# before any was scored, never by its error
DATA35_IN_FAMILY = ("dgxc2505_h100_deepseekv3_bf16_512", "dgxc2505_h100_deepseekv3_bf16_1024",
                    "dgxc2505_gb200_deepseekv3_bf16_128", "dgxc2505_gb200_deepseekv3_bf16_256",
                    "dgxc2505_gb200_deepseekv3_bf16_512", "mcore_gb200_deepseekv3_mxfp8")


# data44 (issue 29, the thin groups): the 25.09 table's token-drop Qwen3 rows whose layout is their perf_matrix preset
# (NVIDIA-NeMo/Megatron-Bridge@0a25f911 docs/performance-summary-archive.md, the GB200 table then the H100 table; the
# B200 and DeepSeek-V3 token-drop rows print layouts their presets at @1db19e64c do not have, and are left out); every
# third of them (the 3rd, the 6th) is held out by the same rule, fixed before any was scored
DATA44_IN_FAMILY = ("mb2509_gb200_qwen3_30b_tokendrop", "mb2509_gb200_qwen3_30b_tokendrop_mxfp8",
                    "mb2509_gb200_qwen3_235b_tokendrop", "mb2509_gb200_qwen3_235b_tokendrop_mxfp8",
                    "mb2509_h100_qwen3_30b_tokendrop", "mb2509_h100_qwen3_235b_tokendrop")
# b30044's DGX-B300 rows of fitted families (DeepSeek-V3, Qwen3; at 26.06 also GPT-OSS and Nemotron 3 Nano, whose
# 26.06 rows are fitted), in batch order (26.04.01, 26.04, 26.06, 26.02); their 26.04 / 26.04.01 GPT-OSS and Nemotron 3
# Nano rows are held out by family (tests/test_training_b300.py)
B30044_IN_FAMILY = ("mb260401_b300_deepseekv3", "mb260401_b300_qwen3_30b", "mb260401_b300_qwen3_235b",
                    "mb2604_b300_deepseekv3", "mb2604_b300_qwen3_30b", "mb2604_b300_qwen3_235b",
                    "mb2606_b300_deepseekv3", "mb2606_b300_gptoss_120b_mxfp8", "mb2606_b300_qwen3_30b",
                    "mb2606_b300_nemotron3_nano", "mb2602_b300_deepseekv3", "mb2602_b300_gptoss_120b",
                    "mb2602_b300_qwen3_30b", "mb2602_b300_qwen3_235b")
# data46's rows, all of fitted families (the 26.02.01 GB200 / H100 rows of GPT-OSS and Nemotron 3 Nano are fitted), in
# batch order: the 26.02.01 table's DGX-B300 rows (archive @067f987d, in the table's order), then MLPerf Training
# v5.1's Dell B300 Llama 3.1 8B run; every third held out, fixed before any was scored
DATA46_IN_FAMILY = ("mb260201_b300_deepseekv3", "mb260201_b300_gptoss_120b", "mb260201_b300_qwen3_30b",
                    "mb260201_b300_nemotron3_nano", "mlperf51_dell_b300_llama31_8b_8")
# data48's rows, all of a fitted family (Llama 3, whose MLPerf and Megatron-Bridge 8B runs are fitted), in batch order:
# MLPerf Training v6.0's Cisco H100 Llama 3.1 8B runs on 64 then 128 GPUs, then Cisco's 16-H200 run (found after the
# first two were scored, appended, its place fixed before it was scored); every third held out: the H200 run
DATA48_IN_FAMILY = ("mlperf60_cisco_h100_llama31_8b_64", "mlperf60_cisco_h100_llama31_8b_128",
                    "mlperf60_cisco_h200_llama31_8b_16")
# data49's rows, all of a fitted family (Llama 3), in batch order: MLPerf Training v5.1's Cisco H100 Llama 3.1 8B runs on
# 64 then 128 GPUs, then HPE's 64-H200 run (its place fixed before any of the three was scored); the third held out
DATA49_IN_FAMILY = ("mlperf51_cisco_h100_llama31_8b_64", "mlperf51_cisco_h100_llama31_8b_128",
                    "mlperf51_hpe_h200_llama31_8b_64")
# data50's rows: MaxText runs Google published on its own clouds. Those on setups no fitted run has are held out by
# setup, fixed before any was scored: FP8 through Flax's delayed scaling on A4 (B200, RoCE with the gIB plugin), and A3
# High's GPUDirect-TCPX network, whose profile rests on two third-party nccl-tests runs
# (topo/data/profiles/network/gcp_tcpx.toml);
# the one-VM A3 run (NVLink only; BF16 MaxText on H100, the fitted JAX-Toolbox row's setup) is fitted
DATA50_NEW_SETUP = ("maxtext_a4_llama31_70b_fp8_256", "maxtext_a4_llama31_405b_fp8_256", "maxtext_a3_llama2_7b_16",
                    "maxtext_a3_llama2_7b_32", "maxtext_a3_llama2_7b_64", "maxtext_a3_llama2_7b_128")
# runs56's rows: figures only an open (unmerged) pull request publishes, held out whatever their family, fixed before
# any was scored: Megatron-LM PR #5728's H100 Qwen3-30B-A3B pair (NVIDIA/Megatron-LM@7146484607, the PR's head)
# (the README's nine Qwen3 rows: 235B on H100, GB200 twice, GB300; 30B on H100 twice, GB200 three times)
OPEN_PR_RUNS = ("mb5728_h100_qwen3_30b_fp8_blockwise", "mb5728_h100_qwen3_30b_bf16", "mb5728_h100_qwen3_235b_bf16",
                "mb5728_gb200_qwen3_235b_mxfp8_fullcg", "mb5728_gb200_qwen3_235b_mxfp8_partialcg",
                "mb5728_gb300_qwen3_235b_mxfp8_fullcg", "mb5728_gb200_qwen3_30b_bf16",
                "mb5728_gb200_qwen3_30b_mxfp8_partialcg", "mb5728_gb200_qwen3_30b_mxfp8_pagedstash")
# runs69's rows, all of fitted families: Together AI's B200 runs of NVIDIA's v26.02 recipes
# (togethercomputer/together-dgxc-benchmarking@d275be99 tests/b200/slurm/OFFICIAL_BASELINES.md), in batch order: its
# consolidated table (DeepSeek V3 BF16, FP8; Qwen3 235B BF16, FP8: the 235B step times from
# tests/b200/scripts/qwen3_235b/report_bf16_fp8_baseline_2026-04-11.md), then its Qwen3 30B section (a run of a filed
# regression: scored, not fitted); every third held out, fixed before any was scored
RUNS69_IN_FAMILY = ("together2602_b200_deepseekv3_bf16_256", "together2602_b200_deepseekv3_mxfp8_256",
                    "together2602_b200_qwen3_235b_bf16_256", "together2602_b200_qwen3_235b_mxfp8_256",
                    "together2602_b200_qwen3_30b_bf16_64")
# data128's rows (issue 29, session 2026-12-07i): every run of the pass is held out, as its brief set before any was
# scored ("added as hold-out"), whatever its family: Together AI's B200 runs of NVIDIA's dgxc-benchmarking v26.02
# Llama 3.1 recipes (OFFICIAL_BASELINES.md at @d275be99, model TFLOP/s/GPU printed)
DATA128_HOLDOUT = ("together2602_b200_llama31_405b_fp8_256", "together2602_b200_llama3_70b_fp8_64",
                   "together2602_b200_llama3_70b_nvfp4_512", "together2602_b200_llama31_405b_nvfp4_256",
                   "together2602_b200_llama31_405b_nvfp4_pp8_256", "together2507_b200_nemotron4_340b_fp8_256",
                   "together2507_b200_nemotron4_340b_bf16_256")
ONE_IN_THREE = (DATA35_IN_FAMILY + DATA44_IN_FAMILY + B30044_IN_FAMILY + DATA46_IN_FAMILY + DATA48_IN_FAMILY
                + DATA49_IN_FAMILY + RUNS69_IN_FAMILY)


@pytest.mark.parametrize("batch", [DATA35_IN_FAMILY, DATA44_IN_FAMILY, B30044_IN_FAMILY, DATA46_IN_FAMILY,
                                   DATA48_IN_FAMILY, DATA49_IN_FAMILY, RUNS69_IN_FAMILY],
                         ids=["data35", "data44", "b30044", "data46", "data48", "data49", "runs69"])
def test_new_in_family_rows_are_held_out_one_in_three(batch):
    published, held = {r["run_id"]: r for r in _rows(PUBLISHED)}, {r["run_id"]: r for r in _rows(HOLDOUT)}
    for i, rid in enumerate(batch):
        assert rid in (held if (i + 1) % 3 == 0 else published), rid
    assert sum(rid in held for rid in batch) == len(batch) // 3


def test_data128_together_llama_rows_are_its_table():
    """Together AI's OFFICIAL_BASELINES.md (togethercomputer/together-dgxc-benchmarking@d275be99): 405B FP8 256 GPUs
    1,722, 70B FP8 64 GPUs (FSDP) 1,624, 70B NVFP4 512 GPUs 2,013 model TFLOP/s/GPU; NVIDIA/dgxc-benchmarking v26.02
    llama3.1 README, B200: GBS 6 x GPUs (405B), 4 x GPUs (70B). Tokens/s/GPU is the TFLOP/s over Megatron-LM's count
    (the Megatron-Bridge 25.09 table's 70B row, 1,791 TFLOP/s at 3,986 tokens/s, gives 449.3 GFLOP a token), the step
    GBS x 8,192 / (tokens/s x GPUs). All held out, none fitted."""
    from topo.training.flops import model_flop_per_step
    from topo.training.model import load_model
    from topo.training.parallel import make_layout
    held, published = {r["run_id"]: r for r in _rows(HOLDOUT)}, {r["run_id"] for r in _rows(PUBLISHED)}
    table = {"together2602_b200_llama31_405b_fp8_256": ("llama3-405b", 256, 1722, 6, "4 8 2 8 0", "current"),
             "together2602_b200_llama3_70b_fp8_64": ("llama3-70b", 64, 1624, 4, "1 1 1 1 1", "current"),
             "together2602_b200_llama3_70b_nvfp4_512": ("llama3-70b", 512, 2013, 4, "2 4 1 5 0", "nvfp4")}
    assert set(table) < set(DATA128_HOLDOUT)
    for rid, (model, gpus, tflops, per_gpu, lay, recipe) in table.items():
        r = held[rid]
        assert rid not in published
        assert (r["model"], r["gpu"], int(r["num_gpus"]), int(r["global_batch_seqs"])) == (model, "B200", gpus, per_gpu * gpus)
        assert " ".join(r[k] for k in ("tp", "pp", "cp", "vpp", "fsdp")) == lay and r["fp8_recipe"] == recipe
        per_token = model_flop_per_step(load_model(model), make_layout(tp=1, dp=1, global_batch=1, seq_len=8192),
                                        "megatron-lm") / 8192
        tokens = tflops * 1e12 / per_token
        assert float(r["value"]) == pytest.approx(tokens, abs=0.06)
        assert float(r["step_time_s"]) == pytest.approx(per_gpu * gpus * 8192 / (tokens * gpus), abs=6e-4)
        assert f"{tflops:,}" in r["note"]
    # tests/b200/scripts/llama31_405b_nvfp4/report_new_megatron_bridge_2026-04-11.md prints each iteration: jobs 80073
    # (PP16 VP8, recompute_num_layers 1: iterations 2-12, mean 79.10 s, ~1,568 TFLOP/s) and 80076 (PP8 VP4,
    # recompute_num_layers 8: iterations 2-8, 62.10 s, ~1,997); block recomputation of 1 / 8 layers a chunk over 1 / 4
    # layers a chunk recomputes every layer
    its = {"together2602_b200_llama31_405b_nvfp4_256": ((78.67, 78.74, 79.21, 78.27, 78.90, 79.43, 79.80, 78.66, 78.60,
                                                        79.53, 80.29), 16, 8, 1568),
           "together2602_b200_llama31_405b_nvfp4_pp8_256": ((61.91, 62.15, 62.12, 62.16, 62.14, 62.15, 62.15), 8, 4, 1997)}
    per_token = model_flop_per_step(load_model("llama3-405b"), make_layout(tp=1, dp=1, global_batch=1, seq_len=8192),
                                    "megatron-lm") / 8192
    for rid, (steps, pp, vpp, tflops) in its.items():
        r = held[rid]
        assert rid in DATA128_HOLDOUT and rid not in published
        # the report's printed mean (79.10, 62.10 s) against its printed iterations' (79.101, 62.111 s)
        assert float(r["step_time_s"]) == pytest.approx(sum(steps) / len(steps), abs=0.015)
        assert (r["tp"], r["pp"], r["vpp"], r["global_batch_seqs"], r["num_gpus"]) == ("4", str(pp), str(vpp), "1536", "256")
        assert (r["fp8_recipe"], r["recompute_granularity"]) == ("nvfp4", "full")
        tokens = 1536 * 8192 / (float(r["step_time_s"]) * 256)
        assert float(r["value"]) == pytest.approx(tokens, abs=0.06)
        assert tokens * per_token / 1e12 == pytest.approx(tflops, rel=2e-3)  # the report's own TFLOP/s
    # Nemotron4 340B on 256 B200 (NeMo 25.07.01; OFFICIAL_BASELINES.md: FP8 1,101.1, BF16 936.33 TFLOP/s/GPU, TP8 PP4
    # VP12, GBS 64): NeMo 2's nemotron count, 8.62124e15 FLOPs a 4,096-token sequence (NVIDIA/dgxc-benchmarking v26.02
    # nemotron4-340b/README.md, whose example line 1,600.74 TFLOP/s x 128 GPUs x 21.542 s / GBS 512 reproduces it):
    # s L h^2 (12 + 12 g / a + 12 f / h + 12 s / h + 6 V / (L h)), attention counted full
    s, n_l, h, a, g, f, v = 4096, 96, 18432, 96, 8, 73728, 256000
    per_seq = s * n_l * h * h * (12 + 12 * g / a + 12 * f / h + 12 * s / h + 6 * v / (n_l * h))
    assert per_seq == pytest.approx(8.62124e15, rel=1e-6)
    assert 1600.74e12 * 128 * 21.542 / 512 == pytest.approx(per_seq, rel=1e-4)
    nem = {"together2507_b200_nemotron4_340b_fp8_256": (1101.1, "current"),
           "together2507_b200_nemotron4_340b_bf16_256": (936.33, "")}
    for rid, (tflops, recipe) in nem.items():
        r = held[rid]
        assert rid not in published and r["fp8_recipe"] == recipe and r["model"] == "nemotron4-340b"
        assert (r["tp"], r["pp"], r["vpp"], r["global_batch_seqs"], r["num_gpus"]) == ("8", "4", "12", "64", "256")
        tokens = tflops * 1e12 * s / per_seq
        assert float(r["value"]) == pytest.approx(tokens, abs=0.06)
        assert float(r["step_time_s"]) == pytest.approx(64 * s / (tokens * 256), abs=6e-5)
    assert set(table) | set(its) | set(nem) == set(DATA128_HOLDOUT)


def test_data44_tokendrop_rows_are_the_2509_table():
    # Megatron-Bridge 25.09 table (@0a25f911 performance-summary-archive.md, "(tokendrop)" rows): tokens/s/GPU and
    # layout (GPUs, TP, PP, VP, EP, MBS, GBS) as printed, the parenthesised figure the MXFP8 run; every one token-drop
    # at capacity 1.0 on the alltoall dispatcher (apply_moe_token_drop, @1db19e64c), no EP overlap
    printed = {"mb2509_gb200_qwen3_30b_tokendrop": (22775, 8, 1, 1, 1, 8, 4, 512),
               "mb2509_gb200_qwen3_30b_tokendrop_mxfp8": (23723, 8, 1, 1, 1, 8, 4, 512),
               "mb2509_gb200_qwen3_235b_tokendrop": (4452, 64, 2, 1, 1, 64, 1, 1024),
               "mb2509_gb200_qwen3_235b_tokendrop_mxfp8": (4416, 64, 2, 1, 1, 64, 1, 1024),
               "mb2509_h100_qwen3_30b_tokendrop": (10494, 16, 1, 2, 24, 8, 2, 512),
               "mb2509_h100_qwen3_235b_tokendrop": (1204, 256, 2, 8, 4, 32, 1, 2048)}
    rows = {r["run_id"]: r for _, r in ROWS if r["run_id"] in printed}
    assert set(rows) == set(printed) == set(DATA44_IN_FAMILY)
    for rid, r in rows.items():
        keys = ("value", "num_gpus", "tp", "pp", "vpp", "ep", "micro_batch", "global_batch_seqs")
        assert tuple(int(float(r[k])) for k in keys) == printed[rid], rid
        assert (r["moe_capacity_factor"], r["moe_dispatcher"], r["moe_a2a_overlap"]) == ("1.0", "alltoall", "0")
        assert r["software"] == "NeMo 25.09" and ("current scaling" in r["note"]) != rid.endswith("_mxfp8")


def test_dgxc_deepseek_rows_are_their_readmes_step_times():
    # NVIDIA/dgxc-benchmarking@1f6d9f40 (v25.05.04) deepseek_v3/pretraining/README.md prints "Training step time
    # (seconds per step)": H100 48.948 (512 GPUs, TP2 PP8 EP64) and 52.04 (1,024, TP2 PP16 EP64); GB200 34.168 / 34.194
    # / 34.274 (128 / 256 / 512, TP2 PP4, EP32 / 64 / 64), GBS 8 per GPU (launch.sh); each layout from its table
    rows = {r["run_id"]: r for _, r in ROWS if r["run_id"].startswith("dgxc2505_") and "deepseek" in r["run_id"]}
    printed = {("H100", 512): (48.948, 8, 64), ("H100", 1024): (52.04, 16, 64), ("GB200", 128): (34.168, 4, 32),
               ("GB200", 256): (34.194, 4, 64), ("GB200", 512): (34.274, 4, 64)}
    assert {(r["gpu"], int(r["num_gpus"])) for r in rows.values()} == set(printed)
    for r in rows.values():
        step, pp, ep = printed[(r["gpu"], int(r["num_gpus"]))]
        assert float(r["step_time_s"]) == step and (int(r["pp"]), int(r["ep"]), int(r["tp"])) == (pp, ep, 2)
        assert int(r["global_batch_seqs"]) == 8 * int(r["num_gpus"]) and r["moe_capacity_factor"] == "1.0"
        assert "1f6d9f40e4117d7c71b726f86074ac01c29f87f5/deepseek_v3/pretraining/README.md" in r["source_url"]


def _megatron_mla_flops_per_token(model, seq):
    # Megatron-LM's num_floating_point_operations for an MLA model with dense, routed and shared experts and no MTP
    # (NVIDIA/Megatron-LM@effebd81 megatron/training/training.py, transformer_flops, MLA branch): per token
    # 12 l h (ffn 3/2 dense/l + moe_ffn k 3/2 moe/l + shared 3/2 moe/l) + 6 l (q_lora (h + n (d_nope + d_rope) + 1)
    # + kv_lora (h + n (d_nope + d_v) + 1) + h d_rope + n d_v h + s n (d_nope + d_rope) / 2 + s n d_v / 2) + 6 h V
    a, moe, l, h, n = model.attention, model.moe, model.layers, model.hidden, model.heads
    dense, sparse = moe.dense_layers, model.layers - moe.dense_layers
    mlp = 12 * h * 1.5 * (model.ffn_hidden * dense + moe.expert_ffn_hidden * (moe.active_experts + moe.shared_experts)
                          * sparse)
    attn = 6 * l * (a.q_lora_rank * (h + n * (a.qk_nope_head_dim + a.qk_rope_head_dim) + 1)
                    + a.kv_lora_rank * (h + n * (a.qk_nope_head_dim + a.v_head_dim) + 1) + h * a.qk_rope_head_dim
                    + n * a.v_head_dim * h + seq * n * (a.qk_nope_head_dim + a.qk_rope_head_dim) / 2
                    + seq * n * a.v_head_dim / 2)
    return mlp + attn + 6 * h * model.vocab


def test_megatron_deepseek_gb200_row_converts_with_megatrons_flop_count():
    # Megatron-LM's GB200 study prints 970.01 model TFLOP/s per GPU for DeepSeek-V3 on 256 GB200 (NVIDIA/Megatron-LM
    # @eb0783b6 docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md, sec. 3): with its
    # own count, 2.4981e11 FLOPs per token at 4,096 tokens (vocabulary 129,280, which --make-vocab-size-divisible-by
    # 3232 leaves unpadded), 3,883 tokens/s/GPU, 8.44 s per step of 2,048 x 4,096 tokens
    r = {row["run_id"]: row for _, row in ROWS}["mcore_gb200_deepseekv3_mxfp8"]
    per_token = _megatron_mla_flops_per_token(load_model(r["model"]), int(r["seq_len"]))
    assert per_token == pytest.approx(2.4981e11, rel=1e-4)
    assert float(r["value"]) == pytest.approx(970.01e12 / per_token, abs=0.06)
    assert "970.01 TFLOP/s" in r["note"] and (int(r["pp"]), int(r["vpp"]), int(r["ep"])) == (8, 4, 32)


def test_data35_deepseek_rows_take_their_recipes_settings(monkeypatch):
    # NeMo 25.04's DeepSeek-V3 script (NVIDIA/NeMo@7a8f1cc7 scripts/performance/llm/pretrain_deepseek_v3.py): first stage
    # 64/PP - 1 layers, last 64/PP - 2 with the recipe's MTP layer, TP overlap off, bf16_mixed's fp32 gradient
    # reduction, token drop at capacity 1.0, MLA unfused on GB200 (training_accuracy.attention_unfused_on_blackwell);
    # Megatron-LM's GB200 study (reproduce guide @eb0783b6): Et|(tt|)*30L
    # without MTP, router padding for quantization, bf16 moments
    from topo.training.pipeline_layout import expand_layout

    setups = {s["run"]: s for s in _fit_setups(monkeypatch)}
    for rid, pp in (("dgxc2505_h100_deepseekv3_bf16_512", 8), ("dgxc2505_h100_deepseekv3_bf16_1024", 16),
                    ("dgxc2505_gb200_deepseekv3_bf16_256", 4)):
        lay = setups[rid]["lay"]
        chunks = expand_layout(lay.pipeline_layout)
        mid = 64 // pp
        assert [c.count("t") for c in chunks] == [mid - 1] + [mid] * (pp - 2) + [mid - 2]
        assert chunks[0].startswith("E") and chunks[-1].endswith("mL") and setups[rid]["model"].mtp_layers == 1
        assert (lay.overlap_tp, lay.grad_reduce_bytes, lay.moe_capacity_factor) == (False, 4.0, 1.0)
        # its Transformer Engine (NVIDIA/TransformerEngine@bee4649c, NeMo@7a8f1cc7 requirements/manifest.json) takes
        # MLA (head_dim_qk 192, head_dim_v 128) into cuDNN's fused attention on H100, into neither kernel on sm100
        assert lay.flash_attention == (setups[rid]["gpu"] == "H100")
    # the script's loss (dsv3gb73): cross_entropy_fusion_impl = "te" (pretrain_deepseek_v3.py line 70, utils.py
    # line 374) over GPTConfig's cross_entropy_loss_fusion = True (llm/gpt/model/base.py line 290); Megatron-LM@7094270c
    # language_module.py lines 83-91 then calls Transformer Engine's parallel cross-entropy, present at bee4649c
    for rid in ("dgxc2505_h100_deepseekv3_bf16_512", "dgxc2505_h100_deepseekv3_bf16_1024",
                "dgxc2505_gb200_deepseekv3_bf16_128", "dgxc2505_gb200_deepseekv3_bf16_256",
                "dgxc2505_gb200_deepseekv3_bf16_512"):
        assert setups[rid]["lay"].cross_entropy == "te", rid
    s = setups["mcore_gb200_deepseekv3_mxfp8"]
    assert s["model"].mtp_layers == 0 and s["lay"].pipeline_layout == "Et|(tt|)*30L" and s["holdout"]
    assert s["lay"].moe_counts_aligned and s["lay"].optimizer_bytes_per_param == 8.0 and s["lay"].fp8_recipe == "mxfp8"


def test_nemo2_performance_scripts_loss():
    """ce73: NeMo 2's performance scripts set ``cross_entropy_fusion_impl = "te"`` in ``set_primary_perf_configs``
    from NeMo 25.04 (NVIDIA/NeMo v2.3.0 scripts/performance/utils.py line 291, added by 96578928 on 2025-04-07, so not
    in v2.2.0 / v2.2.1; the llmb-nemo r2.3.0 commits 7a8f1cc7, b4148d21, 6f2c6fda line 374; v2.4.0 helpers.py line 311,
    called by set_primary_perf_configs), which every pretrain script of those releases calls, over
    ``cross_entropy_loss_fusion = True`` (llm/gpt/model/base.py line 290, nemotron.py line 57, ssm.py line 210; only
    the finetune recipes' LoRA branches set it False). Their Megatron-LM (3cdfd613, 7094270c, 64cb6bd7, 03f77931:
    language_module.py lines 83-91) then calls te_parallel_cross_entropy, which their Transformer Engine has
    (bee4649c, 2.2.0.dev0; f05f12c9, 2.5.0). NeMo 25.02's scripts (v2.2.x, and DGX Cloud v25.04's recipes at
    NeMo@d2b21556) do not set it: Megatron-Core's native fused loss, as NeMo 24.07's NeMo 1 runs."""
    rows = {r["run_id"]: r for _, r in ROWS}
    lays = {s["run"]: s["lay"] for s in published_setups()}
    te = [rid for rid, r in rows.items() if r["software"].startswith(("NeMo 25.04", "NeMo 25.07"))]
    native = [rid for rid, r in rows.items() if r["software"].startswith(("NeMo 25.02", "NeMo 24.07"))]
    # 58 set by ce73, 5 by dsv3gb73, DGX Cloud v25.08's Nemotron-H by runs57, Together's two NeMo 25.07.01 Nemotron4
    # 340B runs of dgxc v26.02 by data128 (NVIDIA/NeMo@9244b1ec helpers.py: the same set_primary_perf_configs loss)
    assert (len(te), len(native)) == (66, 42)
    for rid in te:
        assert rows[rid]["cross_entropy"] == "te" and lays[rid].cross_entropy == "te", rid
    for rid in native:
        assert rows[rid]["cross_entropy"] == "" and lays[rid].cross_entropy == "fused", rid


def test_head_dims_above_128_run_without_cudnn_on_blackwell_before_te_2_5(monkeypatch):
    # Transformer Engine 2.0-2.4 (NeMo 25.02 and 25.04 containers; NeMo@7a8f1cc7 pins TransformerEngine@bee4649c)
    # disables cuDNN's fused attention on sm100 for head dims above 128 (common/fused_attn/fused_attn.cpp:
    # !(sm_arch_ >= 100 && (head_dim_qk > 128 || head_dim_v > 128)); lifted by #1797, first in v2.5). Nemotron-4
    # 340B's heads are 18,432 / 96 = 192 wide: its Blackwell rows of those releases run without cuDNN, its H100 twins
    # (sm90: hdim <= 256) and the Llama rows of the same releases (hdim 128) with it
    setups = {s["run"]: s for s in _fit_setups(monkeypatch)}
    assert setups["nemo2504_gb200_nemotron4_340b"]["model"].qk_dim == 192
    for rid in ("nemo2504_gb200_nemotron4_340b", "nemo2502_b200_nemotron4_340b",
                "nemo2504dgxc_gb200_nemotron4_340b_fp8_128", "nemo2504dgxc_gb200_nemotron4_340b_bf16_512_gbs512"):
        assert setups[rid]["lay"].flash_attention is False, rid
    for rid in ("nemo2504dgxc_h100_nemotron4_340b_fp8_256", "nemo2504_gb200_llama31_405b", "nemo2502_b200_llama3_8b",
                "nemo2504_gb200_nemotron4_15b"):
        assert setups[rid]["lay"].flash_attention is True, rid


def test_unfused_core_attention_is_priced_as_flash_attention_2_on_blackwell(monkeypatch):
    # What those rows' attention costs without cuDNN: flash-attn 2 (where installed) runs Ampere's mma.sync on
    # Blackwell; on a B200 (bf16, flash_attn 2.7.4.post1) forward 307-381 and backward 243-334 TFLOP/s
    # (Dao-AILab/flash-attention issue #1589, 2025-04-13, hdim 64, 512-16k tokens; tritonbench PR #171 hdim 128
    # forward 352-362). topo prices the rows unfused (two batched GEMMs and the softmax): its core attention of one
    # step must lie in the band those rates give at Blackwell's sustained clock (kernels.toml [sustained], 0.815),
    # not at cuDNN's ~4x faster rate. Nemotron-4 340B, TP8 PP4: 12 heads, 24 layers and 8 micro-batches a stage;
    # causal forward 2 s (s / 2) (192 + 192) FLOP a head (FlashAttention's count), backward 2.5x
    from topo.training.step import estimate_step
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy

    s = next(x for x in _fit_setups(monkeypatch) if x["run"] == "nemo2504dgxc_gb200_nemotron4_340b_fp8_128")
    fabrics, engines = training_accuracy._engines([s])
    core = {}
    for fused in (False, True):
        lay = s["lay"].model_copy(update={"flash_attention": fused})
        r = estimate_step(fabrics[s["spec"]], s["model"], lay, engine=engines[s["spec"]], check=False)
        core[fused] = r.compute_by_module_s["core_attn"]
    seq, heads, stage_layers, micro = 4096, 96 / 8, 96 / 4, 32 / 4
    fwd = 2 * seq * (seq / 2) * heads * (192 + 192) * stage_layers * micro
    sustained = tomllib.loads((ROOT / "topo" / "data" / "compute" / "kernels.toml").read_text())["sustained"]["blackwell"]
    fastest = (fwd / (381e12 * sustained) + 2.5 * fwd / (334e12 * sustained))
    slowest = (fwd / (307e12 * sustained) + 2.5 * fwd / (243e12 * sustained))
    assert fastest < core[False] < slowest
    assert core[True] < fastest / 2.5  # cuDNN's fused kernel, what the rows were priced at before


def test_gpt_oss_megatron_rows_run_cudnn_fused_attention_with_their_sinks(monkeypatch):
    # GPT-OSS's learnable softmax sinks (Megatron-Bridge gpt_oss_provider.py / gpt_oss_bridge.py: softmax_type
    # "learnable", window (128, 0) on every other layer, attention_dropout 0) turn FlashAttention off in every
    # Transformer Engine from v2.8 ("Disabling FlashAttention for softmax_type = %s", pytorch/attention/
    # dot_product_attention/utils.py get_attention_backend), leaving cuDNN's fused attention or TE's unfused path.
    # cuDNN takes learnable sinks from 9.13.1 (common/fused_attn/fused_attn.cpp: cudnn_runtime_version >= 91301, at
    # TE 70f53666 = release_v2.9 and 5671fd36, the 26.02 pin), and the window under the causal mask without dropout
    # from 9.2; the rows' containers ship TE 2.9 / cuDNN 9.13.1.26 (NeMo 25.11), TE 2.12 / 9.18.0.50 (26.02, 26.02.01),
    # TE 2.16 / 9.21.1.3 (26.06) (NVIDIA-NeMo/Megatron-Bridge docs/releases/software-versions.md at v0.2.1, v0.3.1,
    # v0.6.0), and no performance recipe turns determinism on for GPT-OSS (TE 2.12+ drops cuDNN for deterministic
    # sinks). So every Megatron-Bridge GPT-OSS row ran cuDNN's fused attention: priced fused, not unfused.
    rows = [s for s in _fit_setups(monkeypatch) if s["model"].name.startswith("gpt-oss") and s["run"].startswith("mb")]
    # fitted and held-out rows alike; 26.04 / 26.04.01 ship TE 2.14 / cuDNN 9.20.0.48 (same file at v0.5.0); the
    # 26.08 rows and the 26.06 model cards run later pins (uv.lock: TE 2.17.1 at v0.6.0, 2.18 at 067f987d)
    assert {s["run"][:s["run"].index("_")] for s in rows} == {"mb2511", "mb2602", "mb260201", "mb2604", "mb260401",
                                                              "mb2606", "mb2608", "mbvc"}
    assert all(s["lay"].flash_attention is True for s in rows)
    # (the measured steps alone would not settle it on every row: priced unfused, the GB200, GB300, H100 and B300 EP8
    # rows overshoot their measured steps by 28-102%, but the B200 rows by 17-24%, about as far as they fall short
    # fused; docs/calibration-findings.md, "GPT-OSS's attention as each release runs it")


def test_holdout_is_whole_families_of_its_releases():
    # every held-out model's runs of the releases the hold-out draws on (Megatron-Bridge 26.04 and 26.04.01, see
    # data/reference/README.md) are all held out: none of them is in the file the fit reads
    # (GB300 runs are held out by GPU, whatever their model: test_every_gb300_run_is_held_out; data35's rows one in
    # three: test_new_in_family_rows_are_held_out_one_in_three)
    held = {r["model"] for r in _rows(HOLDOUT) if r["system"] != "DGX-GB300"
            and r["run_id"] not in ONE_IN_THREE + DATA50_NEW_SETUP + OPEN_PR_RUNS + DATA128_HOLDOUT and r["fp8_recipe"] != "nvfp4"}
    # nvfp4 (findings 397): NVFP4 rows are held out by precision, whatever their family: none is ever fitted
    assert not any(r["fp8_recipe"] == "nvfp4" for r in _rows(PUBLISHED))
    # runs70: Nemotron 3.5 Lightning (Nemotron 3 Nano's network plus two MTP depths, 26.08 stack) joins held out
    # whole, with the Nano family's 26.04-on releases, decided before its two rows were scored
    # superarch86: Nemotron 3 Super's archive rows (26.04-26.06.01, before the fitted 26.08 section and model card)
    # are held out by release, decided before any was scored; its fitted rows are of later releases, so it is checked
    # per model below, not against every held-out release
    assert held == {"gpt-oss-120b", "nemotron-3-nano-30b-a3b", "nemotron-h-56b", "grok-1-314b", "llama4-maverick",
                    "nemotron-3.5-lightning-30b-a3b", "nemotron-3-super-120b-a12b"}
    super_held = {r["software"] for r in _rows(HOLDOUT) if r["model"] == "nemotron-3-super-120b-a12b"}
    super_fitted = {r["software"] for r in _rows(PUBLISHED) if r["model"] == "nemotron-3-super-120b-a12b"}
    assert super_held == {"NeMo 26.04", "NeMo 26.04.01", "NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08"}  # 26.08: GB300
    assert super_fitted == {"NeMo 26.08", "NeMo 26.08 (Megatron-Bridge model card)"}
    assert not (super_held - {"NeMo 26.08"}) & super_fitted
    held.discard("nemotron-3-super-120b-a12b")
    # Grok-1 (issue 29's coarse-MoE class) and Llama 4 Maverick (its 128-expert top-1 class) are held out whole
    # too: no fitted run has them
    for whole in ("grok-1-314b", "llama4-maverick", "nemotron-3.5-lightning-30b-a3b"):
        assert not any(r["model"] == whole for r in _rows(PUBLISHED))
    releases = {r["software"] for r in _rows(HOLDOUT)
                if r["model"] not in ("grok-1-314b", "llama4-maverick", "nemotron-3-super-120b-a12b")
                and r["system"] != "DGX-GB300"
                and r["run_id"] not in ONE_IN_THREE + DATA50_NEW_SETUP + OPEN_PR_RUNS + DATA128_HOLDOUT}
    assert {"NeMo 26.04", "NeMo 26.04.01"} <= releases
    for r in _rows(PUBLISHED):
        assert not (r["model"] in held and r["software"] in releases), r["run_id"]
        # Nemotron-H (hybrid Mamba-2 / attention, no experts) is held out whole: no fitted run has it
        assert r["model"] != "nemotron-h-56b", r["run_id"]


def test_a_figure_only_an_open_pr_publishes_is_held_out():
    # runs56: a row whose status says its figure is in an open pull request is never fitted (its publisher has not
    # merged it); the hold-out holds exactly OPEN_PR_RUNS of them, and the fitted files none
    assert {r["run_id"] for r in _rows(HOLDOUT) if "open pull request" in r["status"]} == set(OPEN_PR_RUNS)
    assert not any("open pull request" in r["status"] for r in _rows(PUBLISHED))


# Megatron-LM PR #5728's recipe index (NVIDIA/Megatron-LM@7146484607 examples/moe_recipes/README.md), the Qwen3 rows
# as printed: recipe, GPUs, TP/PP/EP/CP/ETP, MBS/GBS/SL, median TFLOP/s/GPU of iterations 30-45
PR5728_TABLE = {
    "mb5728_h100_qwen3_235b_bf16": ("H100 BF16", 256, "2/8/32/1/1", "1/2048/4096", 302.0),
    "mb5728_gb200_qwen3_235b_mxfp8_fullcg": ("GB200 MXFP8 full CG", 128, "1/1/64/1/1", "1/8192/4096", 1208.3),
    "mb5728_gb200_qwen3_235b_mxfp8_partialcg": ("GB200 MXFP8 partial CG", 128, "1/1/64/1/1", "1/8192/4096", 876.2),
    "mb5728_gb300_qwen3_235b_mxfp8_fullcg": ("GB300 MXFP8 full CG", 128, "1/1/64/1/1", "1/8192/4096", 1396.1),
    "mb5728_h100_qwen3_30b_fp8_blockwise": ("H100 FP8", 32, "1/1/8/1/1", "1/256/4096", 242.9),
    "mb5728_h100_qwen3_30b_bf16": ("H100 BF16", 32, "1/1/8/1/1", "1/256/4096", 240.5),
    "mb5728_gb200_qwen3_30b_bf16": ("GB200 BF16", 16, "1/1/16/1/1", "4/512/4096", 504.2),
    "mb5728_gb200_qwen3_30b_mxfp8_partialcg": ("GB200 MXFP8 partial CG", 16, "1/1/16/1/1", "4/512/4096", 480.3),
    "mb5728_gb200_qwen3_30b_mxfp8_pagedstash": ("GB200 MXFP8 paged stash", 16, "1/1/16/1/1", "4/512/4096", 598.1),
}


def test_pr_5728_rows_are_its_tables_tflops():
    """Each mb5728_ row is its line of PR #5728's table (PR5728_TABLE): GPUs, layout tuple and batch as printed, and
    tokens/s/GPU = the printed TFLOP/s over Megatron-LM's count at 4,096 tokens, 2.3006e10 FLOPs per token for
    Qwen3-30B-A3B and 1.4803e11 for Qwen3-235B-A22B (the same count turns PR #5094's 244.039 TFLOP/s on 16 H100 at GBS
    1,024 into 24.7131 s, printed 24.7138 s; the ModelZoo's GB200 rows above quote 1.4803e11). The H100 FP8 row is
    block-wise (the table's "FP8 blockwise"), the GB200 / GB300 FP8 rows MXFP8."""
    from topo.training.flops_megatron_lm import megatron_lm_flops_per_token
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    rows = {r["run_id"]: r for r in _rows(HOLDOUT)}
    assert set(PR5728_TABLE) == set(OPEN_PR_RUNS)
    per_token = {m: megatron_lm_flops_per_token(load_model(m), 4096, 1) for m in ("qwen3-30b-a3b", "qwen3-235b-a22b")}
    assert per_token["qwen3-30b-a3b"] == pytest.approx(2.3006e10, rel=1e-4)
    assert per_token["qwen3-235b-a22b"] == pytest.approx(1.4803e11, rel=1e-4)
    assert 1024 * 4096 * per_token["qwen3-30b-a3b"] / (16 * 244.039e12) == pytest.approx(24.7138, rel=1e-4)
    for rid, (label, gpus, layout, batch, tflops) in PR5728_TABLE.items():
        r = rows[rid]
        assert f"'Qwen3-{'235B-A22B' if '235b' in rid else '30B-A3B'} {label}'" in r["note"], rid
        assert f"{tflops} TFLOP/s/GPU" in r["note"], rid
        assert float(r["value"]) == pytest.approx(tflops * 1e12 / per_token[r["model"]], rel=1e-6), rid
        assert int(r["num_gpus"]) == gpus and r["gpu"] == label.split()[0], rid
        assert "/".join(r[k] for k in ("tp", "pp", "ep", "cp", "etp")) == layout, rid
        assert "/".join(r[k] for k in ("micro_batch", "global_batch_seqs", "seq_len")) == batch, rid
        recipe = training_accuracy.fp8_recipe(r) if r["precision"] == "fp8" else None
        assert recipe == {"FP8": "blockwise", "MXFP8": "mxfp8"}.get(label.split()[1]), rid


def test_every_run_on_a_setup_no_fitted_run_has_is_held_out():
    # data50: every A4 run (MaxText FP8 on B200 over gIB) and every multi-VM A3 run (GPUDirect-TCPX) is in the hold-out
    # file, and only the one-VM A3 run (no network) of those systems is fitted
    gcp = {r["run_id"] for r in _rows(HOLDOUT) if r["system"] in ("GCP A4", "GCP A3")}
    assert gcp == set(DATA50_NEW_SETUP)
    fitted = [r for r in _rows(PUBLISHED) if r["system"] in ("GCP A4", "GCP A3")]
    assert [(r["run_id"], r["num_gpus"]) for r in fitted] == [("maxtext_a3_llama2_7b_8", "8")]


def test_every_gb300_run_is_held_out():
    # GB300 (Megatron-Bridge's model-card runs, data/reference/README.md): a GPU no fitted run has, whose catalog
    # entry takes GB200's dense rates (topo/data/compute/gpus.toml [GB300]); a fit on it would let that assumption
    # steer the Blackwell fractions, so every GB300 run is scored apart, never fitted
    gb300 = [r["run_id"] for r in _rows(HOLDOUT) if r["system"] == "DGX-GB300"]
    assert len(gb300) == 40  # 9 model cards, 5 + 4 of the 26.04.01 table (MoE, hybrid; dense), 3 of 26.06.01's, Lambda's MLPerf v5.1 8B,
    # Megatron-LM PR #5728's Qwen3 235B (runs56), 26.08's Nemotron 3 Super MXFP8 (super80), 5 of 26.08's (data81),
    # 26.08's Nemotron 3 Ultra MXFP8 (ultra85), the archive's four Nemotron 3 Super MXFP8 GB300 rows of 26.04,
    # 26.04.01, 26.06, 26.06.01 (superarch86), 26.04.01's two dense NVFP4 rows, Llama 3 70B and 3.1 405B (nvfp4),
    # the five Nemotron 3 Super NVFP4 GB300 rows of 26.04, 26.04.01, 26.06, 26.06.01, 26.08 (nvfp4c)
    assert not any(r["system"] == "DGX-GB300" for r in _rows(PUBLISHED))


# The 26.08 section's DGX-GB300 rows as printed (NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md,
# added by @4ab94dfa): GPUs, GBS, MBS, sequence, TP/PP/CP/VP/EP ("n/a" VP as 1), tokens/s/GPU, model TFLOP/s/GPU
MB2608_GB300_TABLE = {
    "mb2608_gb300_deepseekv3": ("deepseek-v3-671b", 256, 4096, 1, 4096, "1/2/1/8/32", 6288, 1635),
    "mb2608_gb300_gptoss_120b_mxfp8": ("gpt-oss-120b", 64, 1280, 4, 4096, "1/1/1/1/16", 33024, 1077),
    "mb2608_gb300_qwen3_30b": ("qwen3-30b-a3b", 8, 512, 8, 4096, "1/1/1/1/8", 44544, 1029),
    "mb2608_gb300_qwen3_235b": ("qwen3-235b-a22b", 256, 8192, 2, 4096, "1/4/1/12/32", 8816, 1306),
    "mb2608_gb300_nemotron3_nano": ("nemotron-3-nano-30b-a3b", 8, 512, 4, 8192, "1/1/1/1/8", 39936, 901),
    # super80's Nemotron 3 Super row of the same table
    "mb2608_gb300_nemotron3_super": ("nemotron-3-super-120b-a12b", 64, 512, 1, 8192, "1/1/1/1/64", 9856, 831),
    # ultra85's Nemotron 3 Ultra row of the same table
    "mb2608_gb300_nemotron3_ultra": ("nemotron-3-ultra-550b-a55b", 256, 256, 1, 8192, "1/1/1/1/64", 3552, 1281),
}


def test_megatron_bridge_2608_gb300_rows_are_the_tables():
    """data81: each of the 26.08 section's five GB300 rows (MB2608_GB300_TABLE) is held out with its printed layout
    and throughput, MXFP8 (modelled as FP8 with the ``mxfp8`` recipe), and its step time is GBS x sequence /
    (tokens/s/GPU x GPUs): DeepSeek-V3 4,096 x 4,096 / (6,288 x 256) = 10.42 s. The Nemotron 3 Nano row takes the
    recipe function as it was when the figure was published (@4ab94dfa: no fused grouped MLP)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    rows = {r["run_id"]: r for r in _rows(HOLDOUT)}
    # nvfp4c: the table's NVFP4 Super line is tests/test_module_recipes_nvfp4c.py's
    assert {k for k in rows if k.startswith("mb2608_gb300_") and not k.endswith("_nvfp4")} == set(MB2608_GB300_TABLE)
    assert 4096 * 4096 / (6288 * 256) == pytest.approx(10.42, abs=5e-3)
    for rid, (model, gpus, gbs, mbs, seq, layout, tokens, tflops) in MB2608_GB300_TABLE.items():
        r = rows[rid]
        assert_printed_row(r, rid, model, "DGX-GB300", "NeMo 26.08", (gpus, gbs, mbs, seq), layout, tokens, tflops,
                           6e-3)
        assert r["precision"] == "fp8" and training_accuracy.fp8_recipe(r) == "mxfp8", rid
    assert rows["mb2608_gb300_nemotron3_nano"]["moe_expert_kernels"] == ""



# The archive's Nemotron_3_Super MXFP8 rows as printed (NVIDIA-NeMo/Megatron-Bridge@067f987d
# docs/performance-summary-archive.md; each first in docs/performance-summary.md at the commit named in the row's
# published_date_source): release, system, TP, EP, tokens/s/GPU, model TFLOP/s/GPU. All on 64 GPUs, GBS 512, MBS 1,
# sequence 8,192, PP 1, CP 1. The NVFP4 rows of the same tables: tests/test_module_recipes_nvfp4c.py (nvfp4c).
SUPER_ARCHIVE_TABLE = {
    "mb260601_gb300_nemotron3_super": ("26.06.01", "GB300", 1, 64, 9728, 827),
    "mb260601_gb200_nemotron3_super": ("26.06.01", "GB200", 2, 64, 7040, 598),
    "mb2606_gb300_nemotron3_super": ("26.06", "GB300", 1, 64, 9652, 817),
    "mb2606_gb200_nemotron3_super": ("26.06", "GB200", 2, 64, 6742, 571),
    "mb2606_b300_nemotron3_super": ("26.06", "B300", 1, 8, 7867, 667),
    "mb260401_gb300_nemotron3_super": ("26.04.01", "GB300", 1, 64, 9344, 795),
    "mb260401_gb200_nemotron3_super": ("26.04.01", "GB200", 2, 64, 6656, 564),
    "mb260401_b300_nemotron3_super": ("26.04.01", "B300", 1, 8, 7296, 623),
    "mb260401_b200_nemotron3_super": ("26.04.01", "B200", 1, 64, 6400, 542),
    "mb2604_gb300_nemotron3_super": ("26.04", "GB300", 1, 64, 9243, 783),
    "mb2604_gb200_nemotron3_super": ("26.04", "GB200", 2, 64, 6674, 565),
    "mb2604_b300_nemotron3_super": ("26.04", "B300", 1, 8, 7009, 594),
    "mb2604_b200_nemotron3_super": ("26.04", "B200", 1, 64, 6302, 534),
}


def test_nemotron_3_super_archive_rows_are_the_tables():
    """superarch86: each archive Super MXFP8 row is held out with its printed layout and throughput, its step time is
    GBS x sequence / (tokens/s/GPU x GPUs) (26.04 B200: 512 x 8,192 / (6,302 x 64) = 10.40 s), its TFLOP/s over
    tokens/s is the model's FLOPs a token at 8,192 (the 26.08 GB200 row's 600 / 7,040 = 85.2 GFLOP, within 1%), and it
    takes its release's preset (NVIDIA-NeMo/Megatron-Bridge@74695a06 scripts/performance/configs/nemotronh/
    nemotron_3_workload_base_configs.py: B300 EP8; B200 eager with moe_act and layernorm recomputed; the others TE CUDA
    graphs of attn, mamba, moe_router, moe_preprocess) with no fused grouped MLP (srelu83's rule: none before
    d0debd0bd)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    rows = {r["run_id"]: r for r in _rows(HOLDOUT)}
    # nvfp4c: the NVFP4 lines of the same tables are tests/test_module_recipes_nvfp4c.py's
    assert {k for k, r in rows.items() if r["model"] == "nemotron-3-super-120b-a12b" and r["fp8_recipe"] != "nvfp4"} == (
        set(SUPER_ARCHIVE_TABLE) | {"mb2608_gb300_nemotron3_super"})
    assert 512 * 8192 / (6302 * 64) == pytest.approx(10.40, abs=5e-3)
    for rid, (release, gpu, tp, ep, tokens, tflops) in SUPER_ARCHIVE_TABLE.items():
        r = rows[rid]
        assert (r["software"], r["system"], r["gpu"]) == (f"NeMo {release}", f"DGX-{gpu}", gpu), rid
        assert [int(r[k]) for k in ("num_gpus", "global_batch_seqs", "micro_batch", "seq_len", "tp", "pp", "cp", "ep")
                ] == [64, 512, 1, 8192, tp, 1, 1, ep], rid
        assert float(r["value"]) == tokens and f"{tflops:,} model TFLOP/s/GPU" in r["note"], rid
        assert float(r["step_time_s"]) == pytest.approx(512 * 8192 / (tokens * 64), rel=6e-3), rid
        assert tflops * 1e3 / tokens == pytest.approx(600e3 / 7040, rel=0.01), rid
        assert r["precision"] == "fp8" and training_accuracy.fp8_recipe(r) == "mxfp8", rid
        assert r["moe_expert_kernels"] == "" and r["moe_flex_backend"] == "hybridep", rid
        eager = gpu == "B200"
        assert r["cuda_graph_scope"] == ("" if eager else "attn mamba moe_router moe_preprocess"), rid
        assert (r["recompute_granularity"], r["recompute_modules"]) == (
            ("selective", "moe_act layernorm") if eager else ("", "")), rid

def test_model_card_rows_match_their_cards():
    # the cards print the mean step time and token-slot throughput of steps 41-50 (NVIDIA-NeMo/Megatron-Bridge@067f987d
    # examples/model_verification_cards/qwen3-30b-a3b/card.yaml, pretrain_performance.H100: 20,147.290 ms and
    # 13,011.378 tokens/s/GPU on 16 H100 at GBS 1,024 x 4,096 tokens): the rows keep both, and they agree
    rows = {r["run_id"]: r for _, r in ROWS}
    r = rows["mbvc_h100_qwen3_30b"]
    assert float(r["step_time_s"]) == pytest.approx(20.14729, rel=1e-4)
    assert 1024 * 4096 / (20.14729 * 16) == pytest.approx(float(r["value"]), rel=1e-6)
    # DeepSeek-V3 on 1,024 H100 (deepseek-v3/card.yaml): 61,756.130 ms, 1,061.206 tokens/s/GPU at GBS 16,384
    r = rows["mbvc_h100_deepseekv3"]
    assert (int(r["tp"]), int(r["pp"]), int(r["vpp"]), int(r["ep"])) == (2, 8, 4, 64)
    assert 16384 * 4096 / (61.75613 * 1024) == pytest.approx(float(r["value"]), rel=1e-6)


def test_grok_1_matches_its_release():
    # xai-org/grok-1@11b95e7a run.py: 6,144 wide, 64 layers, 48 query and 8 KV heads, 8 experts of 32,768
    # (int(8 x 6,144) x 2 // 3), 2 per token, vocabulary 131,072, one shared embedding: 314B published
    from topo.training.model import load_model
    m = load_model("grok-1-314b")
    assert (m.hidden, m.layers, m.heads, m.num_kv_heads, m.moe.experts, m.moe.active_experts) == (6144, 64, 48, 8, 8, 2)
    assert m.moe.expert_ffn_hidden == int(8 * 6144) * 2 // 3 and m.count("E") == 64
    assert m.total_params == pytest.approx(314e9, rel=0.01)


def _fit_setups(monkeypatch, tmp_path=None, runs_file=None):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy

    if runs_file is not None:  # the fit's own reading of the rows (its settings per source), of another file
        ref = tmp_path / "data" / "reference"
        ref.mkdir(parents=True)
        (ref / "training_runs.csv").write_text((REF / "training_runs.csv").read_text())
        (ref / "training_runs_published.csv").write_text(runs_file.read_text())
        for name in ("megatron_bridge_hybridep_sms.csv",):  # reference data the rows are read with (tidy52)
            (ref / name).write_text((REF / name).read_text())
        monkeypatch.setattr(training_accuracy, "ROOT", tmp_path)
    return training_accuracy._setups() if runs_file is not None else published_setups()


def test_every_run_fits_its_systems_fabric():
    # the fit maps each row's system to a bundled fabric (training_accuracy.SPECS); a run on more GPUs than that
    # fabric has cannot be placed (estimate_step: "the job needs GPUs 0 to N")
    import topo

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy

    size = {}
    for name, row in ROWS:
        assert row["system"] in training_accuracy.SPECS, (name, row["run_id"], row["system"])
        if row["system"] not in size:
            spec, over = training_accuracy.SPECS[row["system"]]
            size[row["system"]] = topo.build_fabric(topo.load_spec(spec, list(over))).layout.num_gpus
        assert int(row["num_gpus"]) <= size[row["system"]], (row["run_id"], size[row["system"]])


def test_the_fit_never_reads_the_holdout(monkeypatch):
    setups = _fit_setups(monkeypatch)
    import training_accuracy
    fitted = {s["run"] for s in training_accuracy.fitted(setups)}
    held = {r["run_id"] for r in _rows(HOLDOUT)}
    assert fitted and not fitted & held
    assert {s["run"] for s in setups if s["holdout"]} == held  # scored apart, never fitted
    assert {r["run_id"] for r in _rows(PUBLISHED)} <= fitted | set(training_accuracy.NOT_FITTED)


def test_runs_of_a_cluster_its_publishers_twin_outran_are_scored_not_fitted(monkeypatch):
    # dsv3b69 (docs/calibration-findings.md): Together AI ran Megatron-Bridge 26.02's B200 DeepSeek-V3 and Qwen3
    # 235B MXFP8 presets 1.72x / 1.47x slower than NVIDIA's own runs of the same preset and release
    # (togethercomputer/together-dgxc-benchmarking@d275be99; Megatron-Bridge 26.02 performance summary); topo prices
    # both alike (test_training_runs_as_run), so no fit may read the slower: a constant would absorb the cluster
    setups = _fit_setups(monkeypatch)
    import training_accuracy
    slow = _rows(REF / "training_runs_cluster_slow.csv")
    published = {r["run_id"]: r for r in _rows(PUBLISHED)}
    assert {r["run_id"] for r in slow} == set(training_accuracy.CLUSTER_SLOW) == {
        "together2602_b200_deepseekv3_mxfp8_256", "together2602_b200_qwen3_235b_mxfp8_256"}
    for r in slow:
        twin, run = published[r["twin_run_id"]], published[r["run_id"]]
        assert twin["metric"] == run["metric"] == "tokens_per_s_per_gpu"
        assert float(twin["value"]) / float(run["value"]) == pytest.approx(float(r["ratio"]), abs=0.005)
        assert float(r["ratio"]) > 1.4 and r["twin_run_id"] not in training_accuracy.NOT_FITTED
    fitted = {s["run"] for s in training_accuracy.fitted(setups)}
    assert not fitted & set(training_accuracy.CLUSTER_SLOW)
    assert set(training_accuracy.CLUSTER_SLOW) <= {s["run"] for s in training_accuracy.scored(setups)}


def test_runs_of_a_filed_regression_are_scored_not_fitted(monkeypatch):
    # Megatron-Bridge issue #1998: Qwen3-30B on H100 and B200 ran 2x slow in 25.11 (dropless), unfixed in 26.02;
    # those rows are scored like every run but steer no fitted constant (benchmarks/training_accuracy.REGRESSED)
    setups = _fit_setups(monkeypatch)
    import training_accuracy
    regressed = set(training_accuracy.REGRESSED)
    published = {r["run_id"]: r for r in _rows(PUBLISHED)}
    qwen3_30b = {"mb2511_h100_qwen3_30b", "mb2602_h100_qwen3_30b", "mb2511_b200_qwen3_30b", "mb2602_b200_qwen3_30b",
                 # runs69: Together AI's run of the same 26.02 recipe on 64 B200 (NeMo 26.02.00, dropless)
                 "together2602_b200_qwen3_30b_bf16_64"}
    # audit46: Megatron-Bridge issue #1705 (Qwen3-235B MXFP8 on B200, 25.11; fixed by disabling the EP overlap,
    # PR #1760) and the B300 preset that carried the same settings into 26.02
    qwen3_235b = {"mb2511_b200_qwen3_235b", "mb2602_b300_qwen3_235b"}
    assert regressed == qwen3_30b | qwen3_235b
    assert regressed <= set(published)  # a run id that names no row would exclude nothing
    assert all("#1998" in training_accuracy.REGRESSED[k] for k in qwen3_30b)
    assert all("#1705" in training_accuracy.REGRESSED[k] for k in qwen3_235b)
    assert not regressed & {s["run"] for s in training_accuracy.fitted(setups)}
    assert regressed <= {s["run"] for s in training_accuracy.scored(setups)}
    # what the issue says and the rows show: 26.02 publishes 25.11's throughput, 26.02.01 runs the same H100
    # layout 1.77 x faster
    tps = {k: float(published[k]["value"]) for k in ("mb2511_h100_qwen3_30b", "mb2602_h100_qwen3_30b",
                                                       "mb260201_h100_qwen3_30b")}
    assert tps["mb2602_h100_qwen3_30b"] / tps["mb2511_h100_qwen3_30b"] == pytest.approx(1.0, abs=0.05)
    assert tps["mb260201_h100_qwen3_30b"] / tps["mb2602_h100_qwen3_30b"] == pytest.approx(1.77, abs=0.01)


def test_the_regressed_runs_are_data_with_their_issue():
    # training_accuracy.REGRESSED is data/reference/training_runs_regressed.csv, one row per run: the issue's
    # address on GitHub, its name (the number the address ends in), the date it was filed and what ran slow
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    rows = _rows(REF / "training_runs_regressed.csv")
    assert rows and {r["run_id"] for r in rows} == set(training_accuracy.REGRESSED)
    assert len({r["run_id"] for r in rows}) == len(rows)  # a run listed twice
    published = {r["run_id"] for r in _rows(PUBLISHED)} | {r["run_id"] for r in _rows(HOLDOUT)}
    for r in rows:
        assert r["run_id"] in published, r["run_id"]
        m = re.fullmatch(r"https://github\.com/[\w.-]+/([\w.-]+)/issues/(\d+)", r["issue_url"])
        assert m and r["issue"] == f"{m.group(1)} issue #{m.group(2)}", r
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["filed"]) and r["regression"], r
        assert training_accuracy.REGRESSED[r["run_id"]] == f"{r['issue']}: {r['regression']}"


# held-out runs that do not fit by topo's accounting, and why (as tests/test_training_memory.py's STILL_OVER)
HOLDOUT_STILL_OVER: set = set()
# (Nemotron-H 56B on 32 H100, TP8 DP4, needs 83.0 GB with 2-byte weights: over 80e9 bytes, inside the 85.5 GB an H100
# holds (81,559 MiB, issue 30). Its recipe keeps FP8 weights too (fp8_param_gather = True, NVIDIA/NeMo@7a8f1cc7
# nemo/collections/llm/recipes/precision/mixed_precision.py nemotron_h_bf16_with_fp8_current_scaling_mixed): 76 GB)


def _domains(spec: tuple) -> dict:
    """A run's fabric's NVLink domain size (NCCL's node: its send/receive buffers read it, mem57, nvlsbuf60)."""
    sp = topo.load_spec(spec[0], list(spec[1]))
    return dict(gpus_per_domain=sp.gpus_per_domain)


def test_held_out_runs_fit_in_memory(monkeypatch, tmp_path):
    # runs that ran must fit (issue 20), the held-out ones too, read with the fit's settings for their source
    from topo.training.gpus import gpu_compute
    from topo.training.memory import memory_per_gpu

    setups = _fit_setups(monkeypatch, tmp_path, HOLDOUT)
    held = [s for s in setups if s["run"] in {r["run_id"] for r in _rows(HOLDOUT)}]
    assert len(held) == len(_rows(HOLDOUT))
    mems = {s["run"]: memory_per_gpu(s["model"], s["lay"], gpu_compute(s["gpu"]).memory_bytes,
                                     generation=gpu_compute(s["gpu"]).generation,
                                     **_domains(s["spec"])) for s in held}
    over = {run: round(mem.total_bytes / 1e9, 1) for run, mem in mems.items() if not mem.fits}
    assert set(over) == HOLDOUT_STILL_OVER, over


def test_nemotron_h_56b_matches_its_paper():
    # Nemotron-H (arXiv 2504.03624, sec. 2): the 56B model has 118 layers, 54 Mamba-2, 54 FFN and 10 attention,
    # hidden 8,192; the layer pattern from Megatron-Bridge's recipe (NVIDIA-NeMo/Megatron-Bridge@067f987d
    # src/megatron/bridge/recipes/nemotronh/h100/nemotronh.py)
    m = load_model("nemotron-h-56b")
    assert m.total_params / 1e9 == pytest.approx(56, rel=0.02)
    assert (m.layers, m.num_mamba_layers, m.num_attention_layers, m.hidden) == (118, 54, 10, 8192)
    assert m.layer_pattern.count("-") == 54 and m.moe is None


def test_mixtral_8x22b_matches_its_announcement():
    # Mistral AI, "Cheaper, Better, Faster, Stronger" (mistral.ai/news/mixtral-8x22b, 2024-04-17): 141B parameters,
    # 39B active; shapes from the released config.json (mistral-community/Mixtral-8x22B-v0.1@42a1ba7)
    m = load_model("mixtral-8x22b")
    assert m.total_params / 1e9 == pytest.approx(141, rel=0.01)
    assert m.active_params / 1e9 == pytest.approx(39, rel=0.01)
    assert (m.layers, m.hidden, m.moe.experts, m.moe.active_experts, m.moe.expert_ffn_hidden) == (
        56, 6144, 8, 2, 16384)


def test_the_fit_reads_each_runs_fp8_recipe(monkeypatch):
    """Megatron-Bridge's H100 FP8 runs are per-tensor current scaling (Megatron-Bridge@067f987d
    scripts/performance/dump_perf_configs.py: every H100 FP8 configuration is fp8_cs), as are rows whose note says
    so; MXFP8 rows say MXFP8; BF16 rows have no recipe."""
    lay = {s["run"]: s["lay"] for s in _fit_setups(monkeypatch)}
    import training_accuracy
    assert lay["mb2604_h100_qwen3_30b"].fp8_recipe == "current"  # note: "FP8 current scaling"
    assert lay["mb2602_h100_qwen3_30b"].fp8_recipe == "current"  # Megatron-Bridge on H100, note silent
    assert lay["mb2604_gb200_qwen3_30b"].fp8_recipe == "mxfp8"
    assert lay["mb2602_gb200_gptoss_120b"].fp8_recipe is None and lay["mb2602_gb200_gptoss_120b"].precision == "bf16"
    assert training_accuracy.fp8_recipe({"fp8_recipe": "unstated", "run_id": "nemo2407_llama2_7b", "gpu": "H100"}) is None


def _megatron_flops_per_token(model, seq):
    # Megatron-LM's num_floating_point_operations for a GQA, SwiGLU MoE model without shared experts (NVIDIA/
    # Megatron-LM@ff45bd42 megatron/training/training.py): 12 l h^2 (1 + g/n + s/(2h)) q + 12 l h ffn k 3/2 + 6 h V
    # per token (forward, wgrad and dgrad; causal attention halved; router and norms not counted), with q the query
    # projection's width over the hidden size (kv_channels x heads / hidden: 1 for Mixtral, 2 for Qwen3 235B)
    l, h, n, g = model.layers, model.hidden, model.heads, model.num_kv_heads
    q = model.head_dim * n / h
    moe = 12 * l * h * model.moe.expert_ffn_hidden * model.moe.active_experts * 1.5
    return moe + 12 * l * h * h * (1 + g / n + seq / h / 2) * q + 6 * h * model.vocab


def test_together_b200_rows_convert_with_megatron_bridges_flop_count():
    # runs69: Together AI's B200 runs of NVIDIA's v26.02 recipes (togethercomputer/together-dgxc-benchmarking@d275be99).
    # Megatron-Bridge@6b3b5ba7 src/megatron/bridge/training/utils/flop_utils.py transformer_flops counts the recipe's
    # MTP layer as one more MoE layer, plus 6 (3h + 2h^2) for its norms and projection and one more 6 h V logit
    rows = {row["run_id"]: row for _, row in ROWS}
    dsv3 = load_model("deepseek-v3-671b")
    one_more = _megatron_mla_flops_per_token(dsv3, 4096) - _megatron_mla_flops_per_token(
        dsv3.model_copy(update={"layers": dsv3.layers - 1}), 4096)  # one MoE layer (the last decoder layer is MoE)
    h = dsv3.hidden
    per_token = _megatron_mla_flops_per_token(dsv3, 4096) + one_more + 6 * (3 * h + 2 * h * h) + 6 * h * dsv3.vocab
    assert per_token == pytest.approx(2.59993e11, rel=1e-5)
    for rid, tflops in (("together2602_b200_deepseekv3_bf16_256", 500.22),
                        ("together2602_b200_deepseekv3_mxfp8_256", 405.59)):
        r = rows[rid]
        assert f"| {tflops}" in r["note"] and (int(r["pp"]), int(r["ep"])) == (16, 8)
        assert float(r["value"]) == pytest.approx(tflops * 1e12 / per_token, abs=0.06), rid
        assert float(r["step_time_s"]) == pytest.approx(4096 * 4096 / float(r["value"]) / 256, abs=0.006), rid
    # Qwen3 235B: the report prints step and TFLOP/s per iteration; their ratio is the same count (1.4803e11), so
    # GPUs, GBS and step belong together
    qwen = _megatron_flops_per_token(load_model("qwen3-235b-a22b"), 4096)
    for rid, tflops in (("together2602_b200_qwen3_235b_bf16_256", 513.8),
                        ("together2602_b200_qwen3_235b_mxfp8_256", 383.1)):
        r = rows[rid]
        tps = 8192 * 4096 / float(r["step_time_s"]) / 256
        assert float(r["value"]) == pytest.approx(tps, abs=0.06), rid
        assert tflops * 1e12 / tps == pytest.approx(qwen, rel=2e-3), rid
    # Qwen3 30B on 64 B200: 204 TFLOP/s at GBS 512 / 8 x 64 (set_post_overrides scales the recipe's GBS per GPU)
    r = rows["together2602_b200_qwen3_30b_bf16_64"]
    per_token = _megatron_flops_per_token(load_model("qwen3-30b-a3b"), 4096)
    assert per_token == pytest.approx(2.3006e10, rel=1e-4)
    assert int(r["global_batch_seqs"]) == 512 // 8 * 64
    assert float(r["value"]) == pytest.approx(204e12 / per_token, abs=0.06)
    assert float(r["step_time_s"]) == pytest.approx(4096 * 4096 / float(r["value"]) / 64, abs=0.006)


def test_megatron_tflops_rows_convert_with_megatrons_flop_count():
    # the Megatron-MoE-ModelZoo Mixtral 8x22B rows print model TFLOP/s per GPU (445 / 465 / 470, the note quotes
    # each): tokens/s/GPU = TFLOP/s x 1e12 / Megatron's FLOPs per token, to the stored digits
    rows = [r for _, r in ROWS if r["run_id"].startswith("mcore_h100_mixtral")]
    assert len(rows) == 4  # dropless, forced balance, token drop (BF16); block-wise FP8 (forced balance)
    for r in rows:
        tflops = float(re.search(r"; (\d+) TFLOP/s: ", r["note"])[1])
        per_token = _megatron_flops_per_token(load_model(r["model"]), int(r["seq_len"]))
        assert per_token == pytest.approx(2.4217e11, rel=1e-4)  # the figure the notes quote
        assert float(r["value"]) == pytest.approx(tflops * 1e12 / per_token, abs=0.06), r["run_id"]


def test_megatron_qwen3_gb200_row_converts_with_megatrons_flop_count():
    # Megatron-MoE-ModelZoo's GB200 table prints 750 model TFLOP/s per GPU for Qwen3 235B BF16 (yanring/
    # Megatron-MoE-ModelZoo@798dfb50 best_practice/qwen3/readme.md; kv_channels 128 x 64 heads = 2 x hidden 4,096,
    # model_configs/benchmarking/Qwen3-235B-A22B.yaml): 1.4803e11 FLOPs per token at 4,096 tokens
    # (and 919 for MXFP8 at 4,096 tokens; 1,150 for MXFP8 at 131,072 tokens, 7.347e11 FLOPs per token, attention dominant)
    rows = {row["run_id"]: row for _, row in ROWS}
    for rid, tflops, expected in (("mcore_gb200_qwen3_235b_bf16", 750, 1.4803e11),
                                  ("mcore_gb200_qwen3_235b_mxfp8", 919, 1.4803e11),
                                  ("mcore_gb200_qwen3_235b_mxfp8_128k", 1150, 7.3470e11)):
        r = rows[rid]
        per_token = _megatron_flops_per_token(load_model(r["model"]), int(r["seq_len"]))
        assert per_token == pytest.approx(expected, rel=1e-4)
        assert float(r["value"]) == pytest.approx(tflops * 1e12 / per_token, abs=0.06), rid
    # the H100 long-context table (TP4 PP8 VPP4 EP8, CP 1-8 at 16k-128k tokens): the forced-balance TFLOP/s each note
    # quotes, the same count at each row's length
    longctx = [r for r in rows.values() if r["run_id"].startswith("mcore_h100_qwen3_235b_longctx")]
    assert len(longctx) == 4
    for r in longctx:
        tflops = float(re.search(r", (\d+) TFLOP/s with forced balance", r["note"])[1])
        per_token = _megatron_flops_per_token(load_model(r["model"]), int(r["seq_len"]))
        assert float(r["value"]) == pytest.approx(tflops * 1e12 / per_token, abs=0.06), r["run_id"]


def test_nemo_mixtral_runs_loop_over_their_experts(monkeypatch):
    # NeMo 2's MixtralConfig leaves moe_grouped_gemm at Megatron-Core's default (False): SequentialMLP; Llama 4
    # (Llama4Config: True) and the Megatron-MoE-ModelZoo runs (--moe-grouped-gemm true) use the grouped kernel
    setups = {s["run"]: s for s in _fit_setups(monkeypatch)}
    nemo = [r for r in setups if r.startswith("nemo") and setups[r]["family"] == "mixtral"]
    assert len(nemo) >= 4 and not any(setups[r]["lay"].moe_grouped_gemm for r in nemo)
    assert setups["nemo2507_gb200_llama4_scout"]["lay"].moe_grouped_gemm
    assert setups["mcore_h100_mixtral_8x22b_balanced"]["lay"].moe_grouped_gemm
    assert not setups["mcore_h100_mixtral_8x22b_balanced"]["lay"].overlap_tp


# recipe columns topo reads from a Megatron-Bridge row (benchmarks/training_accuracy.py ``_setups``)
RECIPE_COLUMNS = ("moe_a2a_overlap", "moe_dispatcher", "cuda_graph_scope", "recompute_modules",
                  "recompute_granularity", "activation_offload_layers", "etp", "moe_capacity_factor")
LAYOUT_COLUMNS = ("system", "model", "precision", "num_gpus", "global_batch_seqs", "micro_batch", "tp", "pp", "cp",
                  "vpp", "ep", "fsdp")
# twin pairs whose recipes were not checked against their releases (GPT-OSS: the 26.04 GB200 recipe against the
# model card; another task's rows)
UNCHECKED_TWINS = {("mb2604_gb200_gptoss_120b", "mbvc_gb200_gptoss_120b")}
# twin pairs whose releases ran different recipes, each read at its own release (issue 29, audit31; Megatron-Bridge =
# NVIDIA-NeMo/Megatron-Bridge): they must differ, as their recipes do
RELEASE_CHANGED_TWINS = {
    # Llama 3 8B: 25.09's YAML perf matrix turns on per-layer graphs (v0.1.0rc3/rc4 llama3_8b_llm_pretrain.yaml
    # ``cuda_graphs: true``; GB200 FP8-CS differs between rc3 and rc4, so left empty); 25.11's starter pack
    # (Megatron-Bridge@97ad8cc6f llama3_workload_base_configs.py) captures the full iteration
    ("mb2511_gb200_llama3_8b", "mb2509_gb200_llama3_8b"),
    ("mb2511_gb200_llama3_8b_mxfp8", "mb2509_gb200_llama3_8b_mxfp8"),
    ("mb2511_b200_llama3_8b", "mb2509_b200_llama3_8b"),
    ("mb2511_b200_llama3_8b_mxfp8", "mb2509_b200_llama3_8b"),
    ("mb2511_b200_llama3_8b_mxfp8", "mb2509_b200_llama3_8b_mxfp8"),
    # GPT-OSS GB200: 26.02 (v0.3.0 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2) sets no flex backend and no EP
    # overlap; the 26.02.01 fork (zidanehuang001/Megatron-Bridge@8e0fe90) and 26.04 (v0.4.0) add hybridep + overlap
    ("mb2602_gb200_gptoss_120b", "mb260201_gb200_gptoss_120b"),
    ("mb2602_gb200_gptoss_120b", "mb2604_gb200_gptoss_120b"),
    # GPT-OSS B200 EP8: the 26.02.01 fork sets hybridep; 26.04.01 (v0.4.2 B200_BF16_V2) none (all-to-all)
    ("mb260201_b200_gptoss_120b", "mb260401_b200_gptoss_120b"),
    # Qwen3 30B GB200 MXFP8: 25.09's script applies token drop to every Qwen3 run (@1db19e64c run_script.py
    # apply_moe_token_drop, per-layer graphs of the whole layer); 25.11 runs dropless with hybridep and TE graphs
    # of the router (@97ad8cc6f qwen3_workload_base_configs.py; @013284246 "dropless on bw")
    ("mb2511_gb200_qwen3_30b", "mb2509_gb200_qwen3_30b_tokendrop_mxfp8"),
}


def test_twin_runs_carry_the_same_recipe():
    # Two Megatron-Bridge runs of one model, precision and layout on one system, measured within 3% of each other
    # across releases, ran the same recipe unless a release changed it: a recipe column recorded for one and not
    # the other is a transcription gap. Issue 29 (bw30) found eight: the 26.06 GB200 Qwen3 and DeepSeek-V3 rows
    # without the full-iteration CUDA graph their recipe sets (slikhite-1/Megatron-Bridge@7e5c47f, as
    # NVIDIA-NeMo/Megatron-Bridge v0.5.0), priced 24-48% slow against 26.06.01 twins measured within 1%; the
    # 26.02.01 rows without their TE graphs (zidanehuang001/Megatron-Bridge@8e0fe90), and the 26.02 / 26.02.01
    # DeepSeek-V3 rows with a later release's EP overlap
    import itertools
    rows = [r for _, r in ROWS if r["run_id"].startswith("mb")]
    twins = differing = changed = 0
    for a, b in itertools.combinations(rows, 2):
        if any(a[k] != b[k] for k in LAYOUT_COLUMNS):
            continue
        if (a["fp8_recipe"] == "nvfp4") != (b["fp8_recipe"] == "nvfp4"):  # nvfp4c: NVFP4 has presets of its own
            continue  # (Megatron-Bridge's B300_NVFP4_V1 = B300_BF16_V1, recomputing moe_act and layernorm)
        if abs(float(a["step_time_s"]) / float(b["step_time_s"]) - 1) >= 0.03:
            continue
        twins += 1
        diff = {k: (a[k], b[k]) for k in RECIPE_COLUMNS if (a[k] or "") != (b[k] or "")}
        pair = {(a["run_id"], b["run_id"]), (b["run_id"], a["run_id"])}
        if pair & UNCHECKED_TWINS:
            differing += bool(diff)
            continue
        if pair & RELEASE_CHANGED_TWINS:
            assert diff, (a["run_id"], b["run_id"], "their releases' recipes differ")
            changed += 1
            continue
        assert not diff, (a["run_id"], b["run_id"], diff)
    assert twins >= 80 and differing == len(UNCHECKED_TWINS) and changed == len(RELEASE_CHANGED_TWINS)


def _dense_mha_flops_per_token(model, seq):
    # Megatron's model FLOPs of a dense two-matrix-MLP transformer with multi-head attention (Narayanan et al.,
    # SC21, arXiv 2104.04473 eq. 3 without recomputation, per token): 6 l (4 h^2 + 2 h ffn) for the weights, 12 l s h
    # for the attention scores and values (not halved for causality), 6 h V for the output layer
    l, h = model.layers, model.hidden
    assert model.num_kv_heads == model.heads and model.mlp in ("gelu", "relu2")
    return 6 * l * (4 * h * h + 2 * h * model.ffn_hidden) + 12 * l * seq * h + 6 * h * model.vocab


def test_nemo_2407_dense_rows_match_the_tables_flop_count():
    # NeMo 24.07's table (NVIDIA/NeMo@070a0bb1 docs/source/performance/performance_summary.md) prints tokens/s/GPU
    # and model TFLOP/s/GPU for GPT3-5B (736), GPT3-20B (750) and Nemotron-22B (554); their ratio is the table's
    # FLOPs per token, which the model files' shapes (NeMo's GPTConfig5B / 20B, Nemotron3Config22B, vocabulary
    # 50,257 and 256,000) must give to the printed three digits
    rows = {r["run_id"]: r for _, r in ROWS if r["run_id"] in ("nemo2407_gpt3_5b", "nemo2407_gpt3_20b",
                                                              "nemo2407_nemotron3_22b")}
    assert len(rows) == 3
    for r in rows.values():
        tflops = float(re.search(r"model TFLOP/s/GPU: (\d+)", r["note"])[1])
        per_token = _dense_mha_flops_per_token(load_model(r["model"]), int(r["seq_len"]))
        assert tflops * 1e12 / float(r["value"]) == pytest.approx(per_token, rel=2e-3), r["run_id"]


def test_mlperf_rows_are_their_logs_median_step(monkeypatch):
    # MLPerf Training v5.0 Llama 3.1 405B (mlcommons/training_results_v5.0 logs, fork prishajain1@d7e703fc): each
    # row's step time is the median of the three logged runs' median train_step_time, which its note quotes
    # (NVIDIA Eos 512 H100: 55.10 / 55.16 / 55.14 s at GBS 1,152 x 8,192 tokens)
    import statistics
    # (and GPT-3 175B of v4.1, fork swsok@8821c703, whose logs call it train_step_timing)
    rows = [r for _, r in ROWS if r["run_id"].startswith(("mlperf50_", "mlperf41_", "mlperf51_"))]
    assert len(rows) == 23 and {r["gpu"] for r in rows} == {"H100", "H200", "GB200", "B200", "GB300", "B300"}
    for r in rows:
        quoted = re.search(r"train_step_tim\w* .*?\): ([\d.]+) / ([\d.]+) / ([\d.]+) s", r["note"])
        if quoted is None:  # the 8B rows' ten runs are not quoted one by one (their note: within 1%)
            assert "_llama31_8b_" in r["run_id"] and "10 logged runs" in r["note"]
            continue
        runs = [float(x) for x in quoted.groups()]
        assert float(r["step_time_s"]) == pytest.approx(statistics.median(runs), abs=6e-3), r["run_id"]
    # the fit runs them as their configs say: weights gathered in FP8, Nebius's nodes with H200 GPUs
    setups = {s["run"]: s for s in _fit_setups(monkeypatch)}
    for r in rows:
        assert setups[r["run_id"]]["lay"].fp8_param_gather
        # MLPerf's GPT-3 trains without dropout (its conf/custom.yaml), the bundled GPT-3 file with it
        assert not setups[r["run_id"]]["model"].dropout
    import training_accuracy
    assert "gpu=H200" in training_accuracy.SPECS["Nebius H200"][1]
    # University of Florida's v5.1 B200 configs: per-tensor current scaling (FP8_RECIPE tensorwise) and no
    # userbuffer TP overlap (TP_COMM_OVERLAP unset); NVIDIA's own v5.0 configs set it
    uf = [r["run_id"] for r in rows if r["run_id"].startswith("mlperf51_uf_")]
    assert len(uf) == 8 and all(not setups[u]["lay"].overlap_tp and setups[u]["lay"].fp8_recipe == "current" for u in uf)
    # Lambda's v5.1 GB300 run (held out): its logs print the same settings (fp8_recipe tensorwise,
    # tp_comm_overlap=False, bucket_size=134217728, full-iteration graph)
    lam = setups["mlperf51_lambda_gb300_llama31_8b_72"]
    assert lam["holdout"] and not lam["lay"].overlap_tp and lam["lay"].fp8_recipe == "current"
    assert lam["lay"].dp_bucket_params == 134_217_728 and lam["lay"].cuda_graph_scope == ("full_iteration",)
    # Dell's v5.1 B300 run (data46): UF's single-node config with the system changed; its logs print the same
    # settings (tp_comm_overlap false, bucket_size=134217728, fp8_recipe tensorwise, fp4 false, full_iteration)
    dell = setups["mlperf51_dell_b300_llama31_8b_8"]
    assert not dell["holdout"] and not dell["lay"].overlap_tp and dell["lay"].fp8_recipe == "current"
    assert dell["lay"].dp_bucket_params == 134_217_728 and dell["lay"].cuda_graph_scope == ("full_iteration",)
    assert setups["mlperf50_h100_llama31_405b_512"]["lay"].overlap_tp


# recipe columns of rows whose record disagreed with their own release's recipe (issue 29, audit31): each value is
# what the release's scripts/performance config sets (Megatron-Bridge = NVIDIA-NeMo/Megatron-Bridge; the tag or
# commit that publishes the row's table). Empty dispatcher = the model provider's all-to-all.
RELEASE_RECIPES = {
    # v0.3.0 (= d8348845d, the 26.02 table): GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2 sets no flex backend, no
    # EP overlap; gpt_oss_provider.py moe_token_dispatcher_type = "alltoall"
    "mb2602_gb200_gptoss_120b": {"moe_dispatcher": "alltoall", "moe_a2a_overlap": "0",
                                 "recompute_modules": "layernorm moe_act"},
    # 97ad8cc6f (the 25.11 starter pack): GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_BASE_CONFIG, the table's PP4 EP8;
    # its recompute_modules ["layernorm", "moe_act"] take no effect (gptossb73): 97ad8cc6f's
    # scripts/performance/utils/overrides.py sets recompute_modules without recompute_granularity, which nothing
    # sets for GPT-OSS, and NVIDIA/Megatron-LM@92c8482e (its 3rdparty pin) recomputes layernorm / moe_act only
    # under recompute_granularity == "selective" (transformer_layer.py line 381, moe/experts.py line 803);
    # Megatron-Bridge@c9dd05869 (PR #1653, 2025-12-10, after the table) added the "selective"
    "mb2511_h100_gptoss_120b": {"recompute_modules": "", "moe_a2a_overlap": ""},
    # 97ad8cc6f: GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_BASE_CONFIG (since e59a57360, 2025-11-20): EP 64, MBS 4,
    # recompute layernorm + moe_act; the table's EP 8 is the H100 row's column (oss34; measured 8,213 tokens/s/GPU
    # against the 26.02 B200 EP 64 run's 8,047 and the 26.02.01 EP 8 run's 13,722)
    # (its recompute_modules take no effect either, as the H100 row's)
    "mb2511_b200_gptoss_120b": {"ep": "64", "micro_batch": "4", "recompute_modules": "",
                                "moe_dispatcher": "alltoall", "moe_a2a_overlap": "0"},
    # v0.3.0: QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1 sets no flex backend (qwen_provider.py: alltoall) and TE
    # graphs of moe_router + moe_preprocess; 25.11's B200 runs predate cb62f8620 (the 235B row's VP2 is only in
    # c8e34f71e, 2025-11-21), whose B200 30B recipe captures the full iteration (local graphs), also all-to-all
    "mb2511_b200_qwen3_30b": {"moe_dispatcher": "alltoall", "cuda_graph_scope": "full_iteration"},
    "mb2602_b200_qwen3_30b": {"moe_dispatcher": "alltoall", "cuda_graph_scope": "moe_router moe_preprocess"},
    # v0.3.0: QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1: deepep, moe_a2a_overlap=True (the table's PP2 VP12 EP8)
    "mb2602_h100_qwen3_30b": {"moe_dispatcher": "deepep", "moe_a2a_overlap": "1"},
    # 97ad8cc6f: LLAMA3_8B_PRETRAIN_CONFIG_{GB200,B200}_FP8_CS_BASE_CONFIG (FP8_MX its alias): cuda_graph_impl
    # "local", cuda_graph_scope "full_iteration"
    **{f"mb2511_{g}_llama3_8b{s}": {"cuda_graph_scope": "full_iteration"}
       for g in ("gb200", "b200") for s in ("", "_mxfp8")},
    # v0.1.0rc3/rc4 llama3_8b_llm_pretrain.yaml: ``cuda_graphs: true`` (Megatron-Core's per-layer graphs, the
    # whole layer: attn + mlp) on B200 for every precision and on GB200 for fp8_mx
    "mb2509_b200_llama3_8b": {"cuda_graph_scope": "attn mlp"},
    "mb2509_b200_llama3_8b_mxfp8": {"cuda_graph_scope": "attn mlp"},
    "mb2509_gb200_llama3_8b_mxfp8": {"cuda_graph_scope": "attn mlp"},
    # NVIDIA/NeMo@e1335c83 and v2.3.0 recommended_model_configs/model_configs_gb200.csv: mixtral 8x7b cuda_graphs 1
    # (per-layer enable_cuda_graph; the token-drop callback pads the MoE block to capacity, so it is captured)
    "nemo2504_gb200_mixtral_8x7b": {"cuda_graph_scope": "attn moe", "moe_capacity_factor": "1.0"},
    # the same CSV (and v2.4.0's for Llama 4 Scout): cuda_graphs 1 at the rows' layouts, per-layer graphs
    **{f"nemo2504_gb200_{m}": {"cuda_graph_scope": "attn mlp"} for m in ("gpt3_175b", "nemotron4_15b", "nemotron4_340b")},
    "nemo2507_gb200_llama4_scout": {"cuda_graph_scope": "attn moe", "moe_capacity_factor": "1.0"},
    # NVIDIA/dgxc-benchmarking@1f6d9f40 grok1/launch.sh: --cuda_graphs, CUDA_GRAPH true by default on GB200 (false on
    # H100); NVIDIA/NeMo@6f2c6fda pretrain_grok1_314b.py: per-layer enable_cuda_graph, token drop padded (hold-out)
    **{f"nemo2504dgxc_gb200_grok1_{p}_{n}": {"cuda_graph_scope": "attn moe", "moe_capacity_factor": "1.0"}
       for p in ("bf16", "fp8") for n in (128, 256, 512)},
    **{f"nemo2504dgxc_h100_grok1_{p}_512": {"cuda_graph_scope": ""} for p in ("bf16", "fp8")},
}


def test_audited_rows_carry_their_release_recipe():
    rows = {r["run_id"]: r for _, r in ROWS}
    for run_id, recipe in RELEASE_RECIPES.items():
        got = {k: rows[run_id][k] or "" for k in recipe}
        assert got == recipe, (run_id, got, recipe)
        # the note cites the recipe a changed value came from
        assert any(t in rows[run_id]["note"] for t in ("audit31", "oss34")) \
            or not set(recipe.values()) - {"", "1.0"}, run_id


def test_every_megatron_bridge_fp8_run_names_its_fp8_recipe():
    # Megatron-Bridge's tables print FP8 (the recipe's fp8_cs: per-tensor current scaling) beside MXFP8 and NVFP4
    # (e.g. NVIDIA-NeMo/Megatron-Bridge v0.3.0 docs/performance-summary.md, 26.02 GB200 Llama 3 70B: FP8 at FSDP 64,
    # MXFP8 at TP2 PP4, the layouts of LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_V2 and _FP8_MX_V2): every FP8 row's
    # note names which, and its fp8_recipe column holds it (col57; the fit reads the column). Five GB200
    # Llama rows (26.02, 26.02.01, 26.06) said neither and were priced without current scaling's amax pass
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    silent = [r["run_id"] for _, r in ROWS if r["run_id"].startswith("mb") and r["precision"] == "fp8"
              and training_accuracy.fp8_recipe(r) is None]
    assert not silent, silent


def test_flex_dispatch_on_nvl72_names_hybridep():
    # DeepEP does not run on GB200 / GB300: Megatron-Bridge applies the deepep backend only on Ampere, Hopper, B200
    # and B300 (NVIDIA-NeMo/Megatron-Bridge v0.3.0 src/megatron/bridge/training/flex_dispatcher_backend.py), and
    # every GB200 / GB300 recipe with the flex dispatcher sets hybridep. The fit read the backend from the note
    # ("hybridep" in it, else DeepEP; now the moe_flex_backend column): seven 25.11 / 26.02 GB200 rows named none
    # and were priced with DeepEP (issue 29, audit31)
    wrong = [r["run_id"] for _, r in ROWS if r["run_id"].startswith(("mb", "nemo")) and r["moe_dispatcher"] == "deepep"
             and r["gpu"] in ("GB200", "GB300") and "hybridep" not in r["note"].lower()]
    assert not wrong, wrong


def test_flex_rows_record_their_backend():
    # every flex-dispatcher row records its backend in moe_flex_backend (the fit reads that column,
    # benchmarks/training_accuracy.py; it read "hybridep" in the note, else DeepEP, issue 29), and the column agrees
    # with what the note cites from the recipe: HybridEP where the note names it, else DeepEP V1 named in the note
    # (enable_deepep, "DeepEP", AutoModel's te_deepep configs) or settled by a "flex backend" entry
    bad = []
    for _, r in ROWS:
        b, note = r.get("moe_flex_backend", ""), r["note"].lower()
        if r["moe_dispatcher"] != "deepep":
            if b:
                bad.append((r["run_id"], b, "no flex dispatcher"))
        elif b not in ("hybridep", "deepep") or (b == "hybridep") != ("hybridep" in note) \
                or (b == "deepep" and "deepep" not in note):
            bad.append((r["run_id"], b))
    assert not bad, bad


def test_mlperf60_cisco_h100_rows_are_their_logs_block_throughput(monkeypatch):
    # MLPerf Training v6.0 Llama 3.1 8B on Cisco's Zeus H100 (Richardyu114/training_results_v6.0@eabf23a0
    # Cisco/results/Zeus_{8,16}xH100_SXM_80GB/llama31_8b/result_1..5.txt): each log's block summary (MLLOG
    # tracked_stats throughput, samples/s) over steps 1792-2047 (64 GPUs, GBS 32) and 1344-1535 (128 GPUs, GBS 64);
    # the row's step time is GBS over their median: 32 / 91.1611 = 0.3510 s, 64 / 182.0548 = 0.3515 s (weak scaling
    # at 8,192 tokens: the same 0.35 s per step at twice the GPUs and twice the batch, within 0.2%)
    import statistics
    rows = {r["run_id"]: r for _, r in ROWS if r["run_id"].startswith("mlperf60_cisco_h100_")}
    assert set(rows) == set(DATA48_IN_FAMILY[:2])
    for r in rows.values():
        thr = [float(v) for v in re.search(r"block throughputs ([\d. /]+) samples/s", r["note"])[1].split(" / ")]
        assert len(thr) == 5 and max(thr) / min(thr) < 1.002  # the five runs within 0.2%
        gbs, n = int(r["global_batch_seqs"]), int(r["num_gpus"])
        assert gbs == n // 2 and (int(r["tp"]), int(r["micro_batch"])) == (2, 1)  # TP 2, MINIBS 1: GBS = DP
        assert float(r["step_time_s"]) == pytest.approx(gbs / statistics.median(thr), abs=6e-5)
    assert float(rows["mlperf60_cisco_h100_llama31_8b_128"]["step_time_s"]) / float(
        rows["mlperf60_cisco_h100_llama31_8b_64"]["step_time_s"]) == pytest.approx(1.0015, abs=5e-4)
    # the fit runs them as config_common.sh and the config say: FP8 weights gathered at 1 byte, TP overlap, the
    # full-iteration graph, the reference conf's 128Mi-parameter DP buckets, on the DGX H100 SuperPOD rail fabric
    setups = {s["run"]: s for s in _fit_setups(monkeypatch) if s["run"] in rows}
    import training_accuracy
    assert training_accuracy.SPECS["Cisco H100"] == ("dgx-h100-superpod", ())
    for s in setups.values():
        lay = s["lay"]
        assert lay.fp8_param_gather and lay.overlap_tp and lay.cuda_graph_scope == ("full_iteration",)
        assert lay.dp_bucket_params == 134_217_728 and lay.recompute == "none" and not s["holdout"]


def test_mlperf60_cisco_h200_row_is_its_logs_median_block_and_printed_settings(monkeypatch):
    # Cisco's MLPerf v6.0 Llama 3.1 8B on 2 x C885A (16 H200; Richardyu114/training_results_v6.0@eabf23a0
    # Cisco/results/2xC885A_M8-8xH200-SXM-141GB/llama31_8b/result_0..4.txt): each log's block train_step_time over steps
    # 1792-2047 (1.18235 / 1.18129 / 1.18290 / 1.18144 / 1.18179 s), median 1.1818 s; the log's Configuration Summary:
    # GBS 32, MBS 1, DP 16, tensorwise FP8 with FP8 weight gather, bucket_size 768000000, grad_reduce_in_fp32 False
    # with bf16 parameters, full-iteration CUDA graph. Held out (the third of data48's batch)
    import statistics
    r = {row["run_id"]: row for _, row in ROWS}["mlperf60_cisco_h200_llama31_8b_16"]
    blocks = [float(v) for v in re.search(r"block train_step_time ([\d. /]+) s", r["note"])[1].split(" / ")]
    assert len(blocks) == 5 and float(r["step_time_s"]) == pytest.approx(statistics.median(blocks), abs=6e-5)
    assert (int(r["num_gpus"]), int(r["global_batch_seqs"]), int(r["tp"])) == (16, 32, 1)
    s = {x["run"]: x for x in _fit_setups(monkeypatch)}["mlperf60_cisco_h200_llama31_8b_16"]
    lay = s["lay"]
    assert s["holdout"] and lay.fp8_recipe == "current" and lay.fp8_param_gather and lay.dp == 16
    assert lay.dp_bucket_params == 768_000_000 and lay.grad_bytes == 2.0 and lay.cuda_graph_scope == ("full_iteration",)
    import training_accuracy
    assert training_accuracy.SPECS["Cisco H200"] == ("dgx-h100-superpod", ("gpu=H200",))


def test_mlperf60_deepseek_rows_are_the_median_of_their_logged_runs():
    # MLPerf Training v6.0 DeepSeek-V3 on 256, 512 and 2,048 GB200 (Richardyu114/training_results_v6.0@eabf23a0
    # NVIDIA/results/tyche-hsg_ngpu{512,2048}_ngc26.04_nemo and Google/results/gb200_nvl72_n64_ngc26.04_nemo
    # deepseekv3_671b/result_*.txt): each note quotes each logged run's median block-level train_step_time; the row's
    # step time is their median. The same global batch (15,360 x 4,096 tokens) on 4x the GPUs runs 3.77x faster
    # (512 -> 2,048), and on 2x 1.81x (256 -> 512); the three 512-GPU runs differ by 7% (30.7 / 32.8 / 32.9 s)
    import statistics
    rows = {r["run_id"]: r for _, r in ROWS}
    steps = {}
    for n, rid in ((256, "mlperf60_google_gb200_deepseekv3_256"), (512, "mlperf60_gb200_deepseekv3_512"),
                   (2048, "mlperf60_gb200_deepseekv3_2048")):
        r = rows[rid]
        medians = [float(v) for v in re.search(r"run medians ([\d. /]+) s", r["note"])[1].split(" / ")]
        assert len(medians) == (1 if n == 256 else 3)
        assert float(r["step_time_s"]) == pytest.approx(statistics.median(medians), abs=5e-4)
        steps[n] = float(r["step_time_s"])
    assert steps[512] / steps[2048] == pytest.approx(3.77, abs=0.01)
    assert steps[256] / steps[512] == pytest.approx(1.81, abs=0.01)


def test_modelzoo_h100_qwen3_rows_run_their_tables_own_recipe(monkeypatch):
    # The Megatron-MoE-ModelZoo H100 Qwen3-235B table (TP2/TP4, EP8/EP32, GBS 2048, seq 4,096) was published at
    # yanring/Megatron-MoE-ModelZoo@8017e11 (2025-05-27, launch lines @31c5686 examples/qwen3/run_235b.sh): its
    # yaml and sbatch_benchmarking.sh had no --tp-comm-overlap (added @b09773a, 2025-12-16), no --moe-router-fusion
    # and no --cross-entropy-loss-fusion (added @274316a, 2025-08-20); the long-context table (@b0b92ff,
    # 2025-11-04) has both fusions but no TP overlap. No ModelZoo script sets --grad-reduce-in-bf16, so Megatron-LM
    # reduces bf16 runs' gradients in FP32 (mcore35; the rows said bf16 gradients)
    rows = {r["run_id"]: r for _, r in ROWS}
    may = [rid for rid, r in rows.items() if r["cross_entropy"] == "megatron_unfused"]  # tidy52: was a tuple
    assert len(may) == 5 and all(rid.startswith("mcore_h100_qwen3_235b_") for rid in may)
    setups = {s["run"]: s["lay"] for s in _fit_setups(monkeypatch) if s["run"].startswith("mcore_")}
    for rid in may:
        lay, note = setups[rid], rows[rid]["note"]
        assert (lay.overlap_tp, lay.moe_router_fusion, lay.cross_entropy) == (False, False, "megatron_unfused"), rid
        assert "mcore35" in note and "@8017e11" in note and "bf16 gradients" not in note, rid
        # the table prints the step time and model TFLOP/s per GPU; the row's tokens/s/GPU is the step time's and
        # agrees with the TFLOP/s at Megatron-LM's own FLOPs per token
        tflops = float(re.search(r"model TFLOP/s per GPU \((\d+)\)", note)[1])
        tokens = int(rows[rid]["global_batch_seqs"]) * int(rows[rid]["seq_len"]) / int(rows[rid]["num_gpus"])
        assert float(rows[rid]["value"]) == pytest.approx(tokens / float(rows[rid]["step_time_s"]), abs=0.06)
        per_token = _megatron_flops_per_token(load_model(rows[rid]["model"]), int(rows[rid]["seq_len"]))
        assert float(rows[rid]["value"]) == pytest.approx(tflops * 1e12 / per_token, rel=0.01), rid
    longctx = [r for r in setups if r.startswith("mcore_h100_qwen3_235b_longctx")]
    assert len(longctx) == 4
    for rid in longctx:
        lay = setups[rid]
        assert (lay.overlap_tp, lay.moe_router_fusion, lay.cross_entropy) == (False, True, "fused"), rid
        assert "@b0b92ff" in rows[rid]["note"] and "adds --tp-comm-overlap" not in rows[rid]["note"], rid
    qwen3 = [r for r in setups if "qwen3" in r]
    assert len(qwen3) == 12
    for rid in qwen3:
        assert setups[rid].reduce_bytes == 4.0 and "bf16 gradients" not in rows[rid]["note"], rid


def test_mlperf51_cisco_h100_rows_run_their_code_as_it_ran(monkeypatch):
    # MLPerf Training v5.1 Llama 3.1 8B on Cisco's hpf H100 cluster (mlcommons/training_results_v5.1@441d65f4
    # Cisco/results/hpf_n{8,16}/llama31_8b/result_0..9.txt): the median of the ten runs' median train_step_time,
    # 0.7205 s (64 GPUs, TP 1) and 0.4851 s (128 GPUs, TP 2), both at GBS 64 (one sequence a data-parallel rank).
    # Its code (Cisco/benchmarks/llama31_8b/implementations/nemo): pretrain.py comments out the
    # MegatronCommOverlapCallback (line 632), so no userbuffer TP overlap; DistributedDataParallelConfig
    # grad_reduce_in_fp32=False; conf/custom.yaml bucket_size 64 parameters (one bucket per parameter tensor: 6 a
    # Llama layer with TE's fused norms + embedding, final norm, output layer = 195); FP8 delayed scaling; no graphs
    import math
    rows = {r["run_id"]: r for _, r in ROWS if r["run_id"].startswith("mlperf51_cisco_h100_")}
    assert set(rows) == set(DATA49_IN_FAMILY[:2])
    assert [(int(r["num_gpus"]), int(r["tp"]), float(r["step_time_s"])) for r in rows.values()] == [
        (64, 1, 0.7205), (128, 2, 0.4851)]
    setups = {s["run"]: s for s in _fit_setups(monkeypatch) if s["run"] in rows}
    for s in setups.values():
        lay, model = s["lay"], s["model"]
        assert not s["holdout"] and not lay.overlap_tp and lay.grad_bytes == 2.0 and lay.fp8_param_gather
        assert lay.dp == 64 and lay.cuda_graph_scope == () and lay.recompute == "none"
        assert lay.fp8_recipe != "current"  # delayed scaling (custom.yaml fp8_recipe default), not tensorwise
        assert lay.dp_bucket_params == math.ceil(model.total_params / 195) and model.layers == 32


def test_mlperf51_hpe_h200_row_is_its_logs_median_and_printed_settings(monkeypatch):
    # HPE's MLPerf v5.1 Llama 3.1 8B on 8 Cray XD670 nodes (64 H200; mlcommons/training_results_v5.1@441d65f4
    # HPE/results/HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09/llama31_8b/result_1..10.txt): median 0.3530 s of the runs'
    # median train_step_time (0.3528-0.3532); the logs print GBS 32, MBS 1, TP 1, CP 2, fp8_recipe tensorwise with
    # fp8_param_gather, bucket_size 134217728, grad_reduce_in_fp32 False, tp_comm_overlap False, full-iteration graph
    r = {row["run_id"]: row for _, row in ROWS}["mlperf51_hpe_h200_llama31_8b_64"]
    assert (int(r["num_gpus"]), int(r["global_batch_seqs"]), int(r["cp"]), float(r["step_time_s"])) == (64, 32, 2, 0.3530)
    s = {x["run"]: x for x in _fit_setups(monkeypatch)}["mlperf51_hpe_h200_llama31_8b_64"]
    lay = s["lay"]
    assert s["holdout"] and lay.fp8_recipe == "current" and lay.fp8_param_gather and lay.dp == 32 and lay.cp == 2
    assert lay.dp_bucket_params == 134_217_728 and lay.grad_bytes == 2.0 and not lay.overlap_tp
    assert lay.cuda_graph_scope == ("full_iteration",)
    import training_accuracy
    assert training_accuracy.SPECS["HPE H200"] == ("dgx-h100-superpod", ("gpu=H200",))


def test_nemo_25_07_current_scaling_rows_cast_a_norms_output_after_an_amax_pass():
    """rev58's review: ``operators.cast_kind`` gives a norm-fed cast (QKV, a dense fc1) the norm's amax from TE 2.7
    and reads TE < 2.7 from ``fp8_amax_pass``: no run carries TE's version. NeMo 25.07 is NVIDIA/NeMo@v2.4.0, whose
    requirements/manifest.json pins NVIDIA/TransformerEngine f05f12c9 (2.5.0): its ``normalization.cpp`` runs
    ``nvte_compute_amax`` over a norm's output before the cast (lines 141-149, 302-310), where v2.7 (fedd9ddc) has the
    norm write the amax (``quantize_with_amax``, lines 147-151, 281-285). So each of the four NeMo 25.07 FP8 rows runs
    the amax pass, and its QKV forward cast is the four-kernel ``current``, not ``current_norm_amax``."""
    setups = {s["run"]: s for s in _fit_setups(None)}
    rows = [r for r in setups if r.startswith("nemo2507_")]
    assert len(rows) == 4
    for r in rows:
        lay, model = setups[r]["lay"], setups[r]["model"]
        assert lay.precision == "fp8" and lay.fp8_amax_pass, r
        (qkv,) = [op for op in block_ops(model, lay, "*") if op.name == "qkv"]
        assert qkv.norm_amax and cast_kind(qkv, amax_pass=lay.fp8_amax_pass) == "current", r
        assert cast_kind(qkv, amax_pass=False) == "current_norm_amax", r  # TE >= 2.7 (NeMo 25.09)
