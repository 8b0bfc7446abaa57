"""Which Megatron-Bridge runs turned the distributed optimizer's parameter-gather overlap off (pgbridge130, issue 29,
docs/calibration-findings.md section 462): the recipe function at each row's own pin.

- NVIDIA-NeMo/Megatron-Bridge v0.2.0 (NeMo 25.11) ``scripts/performance/configs/``: ``if precision == "fp8_mx":
  # keeping this eanbled causes NaN grad norm`` sets ``comm_overlap`` / ``ddp`` / ``optimizer.overlap_param_gather =
  False`` in ``llama31/llama31_llm_pretrain.py`` ``llama31_405b_b200_config`` lines 140-143,
  ``deepseek/deepseek_llm_pretrain.py`` ``deepseek_v3_gb200_config`` lines 112-115 and ``qwen3/qwen3_llm_pretrain.py``
  ``qwen3_235b_a22b_b200_config`` lines 133-136: the 25.11 MXFP8 rows ``mb2511_b200_llama31_405b_mxfp8``,
  ``mb2511_gb200_deepseekv3_fp8``, ``mb2511_b200_qwen3_235b``.
- @21d102f5 (26.04.01) ``scripts/performance/configs/llama/llama31_llm_pretrain.py`` lines 123-124: GB200, NVFP4,
  variant v2 calls ``disable_param_gather_overlap`` (lines 46-54; Megatron-Bridge issue #3714):
  ``mb260401_gb200_llama31_405b_nvfp4``. No other 405B function at the rows' pins turns it off.
- @1e3ced26f ``perf_recipes/qwen/gb200/qwen3_moe.py`` lines 740-741, 801-802, 871-872: ``overlap_grad_reduce`` and
  ``overlap_param_gather`` both False with no ``CommOverlapConfig`` (the three GB200 Qwen3 30B dev rows: ``overlap_dp``
  0).
- @79308d0d ``perf_recipes/deepseek/h100/deepseek_v3.py`` lines 45-46: ``overlap_grad_reduce = False``, the gather
  left to ``CommOverlapConfig`` (on for dp > 1): ``mbvc_h100_deepseekv3`` ``overlap_dp`` 0, ``overlap_param_gather`` 1.

Megatron-Core with the gather off all-gathers every bucket synchronously after the optimizer step
(NVIDIA/Megatron-LM@7094270c ``megatron/core/optimizer/distrib_optimizer.py`` ``step_with_ready_grads`` lines
2088-2112): each row's all-gather calls are exposed whole, its reduce-scatter as before."""

import sys

import pytest

from conftest import ROOT
from published_setups import published_rows, published_setups

sys.path.insert(0, str(ROOT / "benchmarks"))
import training_accuracy as ta  # noqa: E402

from topo.training.step import estimate_step  # noqa: E402

GATHER_OFF = {"mb2511_b200_llama31_405b_mxfp8", "mb2511_gb200_deepseekv3_fp8", "mb2511_b200_qwen3_235b",
              "mb260401_gb200_llama31_405b_nvfp4"}
DP_OFF = {"mb5728_gb200_qwen3_30b_bf16", "mb5728_gb200_qwen3_30b_mxfp8_partialcg",
          "mb5728_gb200_qwen3_30b_mxfp8_pagedstash"}
NEMOTRONH_2505 = {f"dgxc2505_h100_nemotronh_56b_{n}" for n in (32, 64, 128, 256, 512, 1024)}  # pgather129


@pytest.fixture(scope="module")
def setups():
    return {s["run"]: s for s in published_setups() if "row" in s}


def _dp(s):
    fabrics, engines = ta._engines([s])
    r = estimate_step(fabrics[s["spec"]], s["model"], s["lay"], engine=ta.engine_of(engines, s), convention="6n")
    return [c for c in r.comm if c.dim == "dp"]


def test_the_columns_say_what_each_rows_recipe_sets():
    rows = published_rows()
    assert {rid for rid, r in rows.items() if r["overlap_param_gather"] == "0"} == GATHER_OFF | NEMOTRONH_2505
    assert {rid for rid, r in rows.items() if r["overlap_param_gather"] == "1"} == {"mbvc_h100_deepseekv3"}
    assert {rid for rid, r in rows.items() if r["overlap_dp"] == "0"} == DP_OFF | {
        "mbvc_h100_nemotron3_super", "mbvc_h100_deepseekv3"}
    for rid in GATHER_OFF | DP_OFF | {"mbvc_h100_deepseekv3"}:
        assert "findings 462" in rows[rid]["note"], rid


def test_the_twins_whose_recipes_keep_the_gather_overlapped_are_left_alone():
    # v0.2.0's fp8_mx branches are MXFP8 only (the current-scaling twins keep it); @21d102f5's only NVFP4 v2 on GB200
    rows = published_rows()
    for rid in ("mb2511_b200_llama31_405b", "mb2511_gb200_deepseekv3_bf16", "mb2511_b200_deepseekv3",
                "mb2511_gb200_qwen3_30b", "mb260401_gb200_llama31_405b", "mb260401_gb200_llama31_405b_mxfp8",
                "mb260401_gb300_llama31_405b_nvfp4"):
        assert rows[rid]["overlap_param_gather"] == "" and rows[rid]["overlap_dp"] == "", rid


@pytest.mark.parametrize("rid", sorted(GATHER_OFF))
def test_a_synchronous_gather_exposes_every_call_and_leaves_the_reduction_overlapped(setups, rid):
    s = setups[rid]
    assert s["lay"].overlap_param_gather is False and s["lay"].overlap_dp is True
    dp = _dp(s)
    gathers = [c for c in dp if c.collective == "all_gather"]
    assert gathers and all(c.exposed_s == pytest.approx(c.time_s, rel=1e-9) for c in gathers)
    assert any(c.exposed_s < c.time_s for c in dp if c.collective == "reduce_scatter")


@pytest.mark.parametrize("rid", sorted(DP_OFF))
def test_the_dev_recipes_expose_both_dp_collectives_whole(setups, rid):
    s = setups[rid]
    assert s["lay"].overlap_dp is False and s["lay"].overlap_param_gather is None
    dp = _dp(s)
    assert {c.collective for c in dp} == {"reduce_scatter", "all_gather"}
    assert all(c.exposed_s == pytest.approx(c.time_s, rel=1e-9) for c in dp)


def test_the_deepseek_card_exposes_its_reduction_and_overlaps_its_gather(setups):
    s = setups["mbvc_h100_deepseekv3"]
    assert s["lay"].overlap_dp is False and s["lay"].overlap_param_gather is True
    dp = _dp(s)
    red = [c for c in dp if c.collective == "reduce_scatter"]
    gat = [c for c in dp if c.collective == "all_gather"]
    assert red and all(c.exposed_s == pytest.approx(c.time_s, rel=1e-9) for c in red)
    assert gat and sum(c.exposed_s * c.calls_per_step for c in gat) < sum(c.time_s * c.calls_per_step for c in gat)
