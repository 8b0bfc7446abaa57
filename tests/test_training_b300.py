"""B300 (HGX/DGX B300, Blackwell Ultra, air-cooled 8-GPU boards): the catalog entry against its published figures,
and the Megatron-Bridge DGX-B300 rows against the table and presets they come from."""

import csv
import tomllib
from pathlib import Path

import pytest

from topo.fabric.hardware import host_link, lookup_gpu
from topo.resources import data_dir
from topo.training.gpus import gpu_compute
from topo.training.kernels import attention_rate_flops

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "data" / "reference"


def test_b300_compute_entry_is_the_hgx_b300_datasheet():
    # NVIDIA HGX B300 spec table (as quoted by fibermall.com/blog/?p=17161 and stas00/ml-engineering
    # compute/accelerator/README.md@744d01e): FP16/BF16 36 and FP8 72 PFLOP/s with sparsity per 8 GPUs -> 2,250 and
    # 4,500 TFLOP/s dense per GPU (B200's); 288 GB HBM3e at 8 TB/s (stas00 memory table; Inside NVIDIA Blackwell
    # Ultra, 2025); 158 SMs as the device reports them (openxla/xla@4336d12e0706 specs/b300.txtpb core_count; NVIDIA's
    # 160 is the whole chip)
    g = gpu_compute("B300")
    assert g.peak_bf16_flops == 36e15 / 8 / 2 and g.peak_fp8_flops == 72e15 / 8 / 2
    # HBM as the device reports it (the same b300.txtpb: memory_bandwidth 7,936,000,000,000), the page's 8 TB/s to 1%
    assert g.hbm_Bps == pytest.approx(7.936e12, rel=1e-3) and g.sms == 158 and g.generation == "blackwell"
    assert g.memory_bytes == gpu_compute("GB300").memory_bytes  # the same GPU and stacks (assumption, gpus.toml)
    m = lookup_gpu("b300")  # NVLink 5: 1.8 TB/s both directions = 900 GB/s per direction; 8 per HGX board
    assert (m.nvlink, m.nvlink_Bps, m.nvls, m.domain_gpus, m.host_gpus) == ("nvlink5", 900e9, True, 8, 8)
    assert host_link("B300", "ConnectX-8", 100e9).generation == "gen6"  # PCIe Gen6 (glennklockwood.com B300)


def test_b300_gemm_efficiency_is_its_published_mamf():
    # stas00/ml-engineering@744d01e MAMF table: B300 SXM 1,769.0 BF16 (12288x18432x1024) and 3,353.3 FP8
    # (3072x6144x7168) TFLOP/s against B200's 1,745.0 / 3,432.5: the kernel table carries B300's own row
    t = tomllib.loads((data_dir("compute") / "kernels.toml").read_text(encoding="utf-8"))
    assert t["mamf"]["B300"] == {"bf16": [1769.0, 12288, 18432, 1024], "fp8": [3353.3, 3072, 6144, 7168]}
    b300, b200 = gpu_compute("B300").kernels, gpu_compute("B200").kernels
    # burst efficiency: the fraction of peak that reproduces the published MAMF at its shape (not the B200's row)
    assert b300.burst["bf16"] != b200.burst["bf16"] and b300.burst["fp8"] != b200.burst["fp8"]
    assert 1769.0 / 2250 < b300.burst["bf16"] <= 1.0


def test_b300_reads_blackwell_ultra_attention():
    # HGX B300 "Attention Performance 2x" against HGX B200's 1x (NVIDIA's HGX table): the Blackwell Ultra die whose
    # cuDNN table was measured on GB300 (kernels.toml [attention.GB300], hdim 128 causal 4k forward 1,703 of 2,500);
    # read as a fraction of the B300's own peak and sustained rate
    b300, gb300, b200 = (gpu_compute(n).kernels for n in ("B300", "GB300", "B200"))
    assert b300.attention_table == "GB300" and b200.attention_table == "blackwell"
    r = attention_rate_flops(b300, 128, 4096, True, False)
    assert r == pytest.approx(1703 / 2500 * b300.attention_scale * b300.sustained * 2250e12, rel=1e-9)
    # the same fraction of its own peak at its own sustained clock (GB300's from its published sustained rates)
    assert r / 2250e12 / b300.sustained == pytest.approx(
        attention_rate_flops(gb300, 128, 4096, True, False) / 2500e12 / gb300.sustained, rel=1e-9)


def test_b300_host_is_the_dgx_b300_xeon():
    # DGX B300: 2 x Intel Xeon 6776P, 4.6 GHz Priority Core Turbo on 8 cores (heise.de/-10395118); the per-op time
    # the clock ratio to DGX H100's 8480C at 3.8 GHz (assumption, host_cpu.toml)
    k = gpu_compute("B300").kernels
    assert k.host_cpu == "xeon_6776p"
    t = tomllib.loads((data_dir("compute") / "host_cpu.toml").read_text(encoding="utf-8"))["cpu"]["xeon_6776p"]
    assert t["time_factor"] == pytest.approx(3.8 / 4.6, abs=5e-4) and t["vendor"] == "intel"
    assert k.launch_host_s == pytest.approx(gpu_compute("H100").kernels.launch_host_s * t["time_factor"])


def test_b300_planner_entries():
    cat = tomllib.loads((data_dir("catalog") / "gpus.toml").read_text(encoding="utf-8"))["B300"]
    assert cat["peak_flops"]["bf16"]["value"] == 2.25e15 and cat["peak_flops"]["fp8"]["value"] == 4.5e15
    assert cat["peak_flops"]["fp4"]["value"] == 108e15 / 8  # HGX B300: 108 PFLOP/s dense FP4 per 8 GPUs
    assert cat["tdp_W"]["value"] == 1000 and cat["hbm_bytes"]["value"] == 288e9  # DGX B300 max TGP (stas00)
    srv = tomllib.loads((data_dir("catalog") / "servers.toml").read_text(encoding="utf-8"))["HGX B300"]
    assert srv["gpu"] == "B300" and srv["gpus"]["value"] == 8 and srv["cooling"] == "air"
    # the HGX B200 entry's rule: a server draws its maximum = GPUs' TDP + non-GPU power
    assert 8 * (cat["tdp_W"]["value"] + srv["non_gpu_power_per_gpu_W"]["value"]) == srv["max_power_W"]["value"]


def _b300_rows():
    out = {}
    for name in ("training_runs_published.csv", "training_runs_holdout.csv"):
        for r in csv.DictReader((REF / name).open(encoding="utf-8")):
            if r["gpu"] == "B300":
                out[r["run_id"]] = (name, r)
    return out


# Megatron-Bridge performance-summary-archive.md @067f987d, DGX-B300 rows: tokens/s/GPU, GPUs, PP, EP, MBS, GBS, as
# printed (26.04.01, 26.04, 26.06 and 26.02 sections; TP, CP 1 in every one, VP 4 in 26.02's Qwen3 235B only)
PRINTED = {"mb260401_b300_deepseekv3": (3456, 256, 8, 8, 2, 4096),
           "mb260401_b300_gptoss_120b": (15232, 64, 1, 8, 4, 1280),
           "mb260401_b300_qwen3_30b": (30720, 8, 1, 8, 8, 512),
           "mb260401_b300_qwen3_235b": (5936, 256, 8, 8, 2, 8192),
           "mb260401_b300_nemotron3_nano": (35840, 8, 1, 8, 4, 512),
           "mb2604_b300_deepseekv3": (3131, 256, 16, 8, 1, 4096),
           "mb2604_b300_gptoss_120b": (15114, 64, 1, 8, 4, 1280),
           "mb2604_b300_qwen3_30b": (30553, 8, 1, 8, 8, 512),
           "mb2604_b300_qwen3_235b": (4865, 256, 8, 8, 2, 8192),
           "mb2604_b300_nemotron3_nano": (35282, 8, 1, 8, 4, 512),
           "mb2606_b300_deepseekv3": (3541, 256, 8, 8, 2, 4096),
           "mb2606_b300_gptoss_120b_mxfp8": (18534, 64, 1, 8, 4, 1280),
           "mb2606_b300_qwen3_30b": (40769, 8, 1, 8, 8, 512),
           "mb2606_b300_nemotron3_nano": (37316, 8, 1, 8, 4, 512),
           "mb2602_b300_deepseekv3": (2983, 256, 16, 8, 1, 4096),
           "mb2602_b300_gptoss_120b": (8359, 64, 1, 64, 4, 1280),
           "mb2602_b300_qwen3_30b": (29521, 8, 1, 8, 8, 512),
           "mb2602_b300_qwen3_235b": (2691, 256, 8, 8, 1, 8192),
           # 26.02.01 section (data46; its Qwen3 235B row, PP8 VP4 EP8 MBS 1, matches no preset of that release)
           "mb260201_b300_deepseekv3": (3099, 256, 16, 8, 1, 4096),
           "mb260201_b300_gptoss_120b": (15031, 64, 1, 8, 4, 1280),
           "mb260201_b300_qwen3_30b": (29454, 8, 1, 8, 8, 512),
           "mb260201_b300_nemotron3_nano": (35861, 8, 1, 8, 4, 512)}
# superarch86: the archive's Nemotron 3 Super MXFP8 B300 rows (26.06, 26.04.01, 26.04; 64 GPUs, PP 1, EP 8, MBS 1,
# GBS 512), held out by release with the Super family's archive rows (tests/test_training_runs_data.py
# SUPER_ARCHIVE_TABLE), not by b30044's one-in-three rule
SUPER_PRINTED = {"mb2606_b300_nemotron3_super": (7867, 64, 1, 8, 1, 512),
                 "mb260401_b300_nemotron3_super": (7296, 64, 1, 8, 1, 512),
                 "mb2604_b300_nemotron3_super": (7009, 64, 1, 8, 1, 512),
                 # NVFP4 (nvfp4c, findings 405; held out): the same tables' DGX-B300 NVFP4 rows, Megatron-Bridge@381d0b82
                 # docs/performance-summary.md lines 117 (26.06: 8131), 237 (26.04.01: 7424), 324 (26.04: 7047)
                 "mb2606_b300_nemotron3_super_nvfp4": (8131, 64, 1, 8, 1, 512),
                 "mb260401_b300_nemotron3_super_nvfp4": (7424, 64, 1, 8, 1, 512),
                 "mb2604_b300_nemotron3_super_nvfp4": (7047, 64, 1, 8, 1, 512)}
# MLPerf Training v5.1 B300 runs (not the tables': their own test, tests/test_training_runs_data.py)
MLPERF_B300 = {"mlperf51_dell_b300_llama31_8b_8"}


def test_b300_rows_are_the_tables_and_presets():
    rows = {rid: v for rid, v in _b300_rows().items() if rid not in MLPERF_B300}
    printed = {**PRINTED, **SUPER_PRINTED}
    assert set(rows) == set(printed)
    for rid, (_, r) in rows.items():
        keys = ("value", "num_gpus", "pp", "ep", "micro_batch", "global_batch_seqs")
        assert tuple(int(r[k]) for k in keys) == printed[rid], rid
        assert (r["tp"], r["cp"], r["system"]) == ("1", "1", "DGX-B300")
        assert r["vpp"] == ("4" if rid == "mb2602_b300_qwen3_235b" else "1"), rid
        # step time = GBS x sequence / (tokens/s/GPU x GPUs)
        step = int(r["global_batch_seqs"]) * int(r["seq_len"]) / (int(r["value"]) * int(r["num_gpus"]))
        assert float(r["step_time_s"]) == pytest.approx(step, rel=5e-4), rid
        # 26.06: the release tag, or (the NVFP4 row) @8f341b04, the commit that published its B300 figures
        # ("perf summary b300 26.06 (#4435)")
        release, commits = {"mb260401": ("26.04.01", ("@21d102f5",)), "mb2604": ("26.04", ("@74695a06",)),
                            "mb2606": ("26.06", ("v0.5.0", "@8f341b04")), "mb2602": ("26.02", ("v0.3.0",)),
                            "mb260201": ("26.02.01", ("@7260d621",))}[rid.split("_")[0]]
        assert r["software"] == f"NeMo {release}" and any(c in r["note"] for c in commits), rid
        assert "_B300_" in r["note"], rid
    # the presets' recipe switches (resolved from the commits' workload_base_configs.py): 26.04's Qwen3 235B
    # B300 preset sets no flex backend (all-to-all), 26.04.01's adds hybridep; DeepSeek-V3's V2 graphs at 26.04.01 only
    assert rows["mb2604_b300_qwen3_235b"][1]["moe_dispatcher"] == "alltoall"
    assert rows["mb260401_b300_qwen3_235b"][1]["moe_flex_backend"] == "hybridep"
    assert rows["mb260401_b300_deepseekv3"][1]["cuda_graph_scope"] == "attn moe_router moe_preprocess"
    assert rows["mb2604_b300_deepseekv3"][1]["cuda_graph_scope"] == ""
    assert rows["mb260401_b300_nemotron3_nano"][1]["cuda_graph_scope"] == "attn mamba moe_router moe_preprocess"
    # v0.5.0 (26.06): Qwen3 30B's B300 preset captures the full iteration with EP overlap; the others keep 26.04.01's
    assert (rows["mb2606_b300_qwen3_30b"][1]["cuda_graph_scope"], rows["mb2606_b300_qwen3_30b"][1]["moe_a2a_overlap"]) \
        == ("full_iteration", "1")
    # v0.3.0 (26.02): Qwen3 235B's B300 preset runs VP4 MBS 1 with EP overlap on the all-to-all dispatcher
    assert (rows["mb2602_b300_qwen3_235b"][1]["moe_dispatcher"], rows["mb2602_b300_qwen3_235b"][1]["moe_a2a_overlap"]) \
        == ("alltoall", "1")
    assert all(r["moe_a2a_overlap"] == "0" for rid, (_, r) in rows.items()
               if rid not in ("mb2606_b300_qwen3_30b", "mb2602_b300_qwen3_235b"))


def test_b300_hold_out_rule():
    # fixed before scoring: GPT OSS 120B and Nemotron 3 Nano rows of the 26.04 / 26.04.01 tables are held out by
    # family (as their GB200, B200 and H100 rows); of the rows of fitted families (DeepSeek-V3, Qwen3, and at 26.06
    # GPT-OSS and Nano, whose 26.02 / 26.06 rows are fitted) in batch order (26.04.01, 26.04, 26.06, 26.02), every
    # third (data46's 26.02.01 rows are a later batch with its own count: tests/test_training_runs_data.py
    # DATA46_IN_FAMILY)
    rows = _b300_rows()
    b30044 = [rid for rid in PRINTED if not rid.startswith("mb260201_")]
    family = [rid for rid in b30044 if ("gptoss" in rid or "nemotron3" in rid)
              and rid.startswith(("mb260401_", "mb2604_"))]
    in_family = [rid for rid in b30044 if rid not in family]
    assert all(rows[rid][0] == "training_runs_holdout.csv" for rid in family)
    for i, rid in enumerate(in_family):
        assert rows[rid][0] == ("training_runs_holdout.csv" if (i + 1) % 3 == 0 else "training_runs_published.csv")
    assert [rid for rid in in_family if rows[rid][0] == "training_runs_holdout.csv"] == [
        "mb260401_b300_qwen3_235b", "mb2604_b300_qwen3_235b", "mb2606_b300_qwen3_30b", "mb2602_b300_gptoss_120b"]
