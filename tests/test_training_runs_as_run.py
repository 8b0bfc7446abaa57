"""Fine-MoE rows run as their sources ran them (issue 29, audit46): settings read from each run's own recipe at its
release, and the runs their publisher filed as regressed (docs/calibration-findings.md, "Audit of the furthest
fine-MoE rows")."""

import csv
import sys

import pytest

from conftest import ROOT

REF = ROOT / "data" / "reference"


def _rows() -> dict:
    out = {}
    for name in ("training_runs_published.csv", "training_runs_holdout.csv"):
        with open(REF / name, newline="") as f:
            out.update({r["run_id"]: r for r in csv.DictReader(f)})
    return out


@pytest.fixture(scope="module")
def ta():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy
    return training_accuracy


@pytest.fixture(scope="module")
def setups(ta):
    return {s["run"]: s for s in ta._setups()}


def test_b200_deepseekv3_of_25_11_runs_the_alltoall_dispatcher(setups):
    # Megatron-Bridge's 25.11 B200 DeepSeek-V3 preset sets no flex backend (NVIDIA-NeMo/Megatron-Bridge@97ad8cc6f
    # scripts/performance/configs/deepseek/deepseek_workload_base_configs.py lines 64-72; v0.2.0 workload_base_configs.py
    # lines 63-71), so DeepSeekModelProvider's moe_token_dispatcher_type = "alltoall" stands (v0.2.0
    # src/megatron/bridge/models/deepseek/deepseek_provider.py line 76); HybridEP reached B200 with PR #1888
    # (2026-01-23), whose preset the 26.02 row runs
    rows = _rows()
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
    r = _rows()["mb2511_b200_qwen3_235b"]
    assert float(r["step_time_s"]) == pytest.approx(20.1, abs=0.06)
    assert r["moe_a2a_overlap"] == "1" and setups["mb2511_b200_qwen3_235b"]["lay"].overlap_ep
    assert "#1705" in ta.REGRESSED["mb2511_b200_qwen3_235b"]
    assert "mb2511_b200_qwen3_235b" not in {s["run"] for s in ta.fitted(list(setups.values()))}
    # the fixed recipe's 16.9 s is 1024 x 4096 / (16.9 x 64) = 3,878 tokens/s/GPU, what 26.02 publishes for the
    # same PP8 EP8 preset without overlap (3,805): within 2%
    fixed_tps = 1024 * 4096 / (16.9 * 64)
    assert fixed_tps / float(_rows()["mb2602_b200_qwen3_235b"]["value"]) == pytest.approx(1.0, abs=0.02)


def test_b300_qwen3_235b_of_26_02_carried_the_regressed_settings(ta):
    # the B300 preset (PR #1721, 2026-01-07) copied B200's VP4 + EP overlap two days before PR #1760 removed them
    # from B200; v0.3.0 (26.02) ran them, PR #2669 (2026-03-10) matched B300 to B200: 26.04's row, MBS 2 and no
    # overlap on the same GPUs, runs 1.81 x the tokens per GPU
    rows = _rows()
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


def test_more_sms_held_slow_the_overlapped_compute(setups):
    # the one ModelZoo GB200 row with the EP overlap (A2A_OVERLAP=1): its hidden all-to-alls' kernels on 32 SMs
    # leave the compute beside them fewer SMs than 20 would, so the step is longer
    import topo
    from topo.training.step import estimate_step

    s = setups["mcore_gb200_qwen3_235b_mxfp8"]
    assert s["lay"].overlap_ep
    fabric = topo.build_fabric(topo.load_spec(s["spec"][0], list(s["spec"][1])))
    t32 = estimate_step(fabric, s["model"], s["lay"], check=False).step_time_s
    t20 = estimate_step(fabric, s["model"], s["lay"].model_copy(update={"ep_comm_sms": 20}), check=False).step_time_s
    assert t32 > t20 * 1.005
