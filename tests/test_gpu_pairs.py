"""``benchmarks/gpu_pairs.py``: one layout on two GPUs (B200 / GB200, B300 / GB300), the table of the GB200 Qwen3-30B
question (docs/calibration-findings.md, gbb56). Pairs stay inside one model, release, precision, FP8 recipe, shape
and scale; a recipe column the two rows set differently is named."""

import sys
from pathlib import Path
from types import SimpleNamespace as NS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_pairs as gp  # noqa: E402

from topo.training.parallel import make_layout  # noqa: E402

QWEN = NS(name="qwen3-30b-a3b")


def _s(run, gpu, **kw):
    lay = make_layout(**{**dict(ep=8, dp=8, global_batch=512, seq_len=4096, etp=1, micro_batch=4,
                                precision="fp8"), **kw})
    return dict(run=run, gpu=gpu, model=QWEN, lay=lay)


def test_pairs_share_model_release_precision_shape_and_scale():
    b200 = _s("mb2604_b200_qwen3_30b", "B200", cuda_graph_scope=("attn", "moe_router", "moe_preprocess"))
    gb200 = _s("mb2604_gb200_qwen3_30b", "GB200", cuda_graph_scope=("moe_router", "moe_preprocess"))
    b300, gb300 = _s("mb2606_b300_qwen3_30b", "B300", micro_batch=8), _s("mb2606_gb300_qwen3_30b", "GB300", micro_batch=8)
    assert [(a["run"], b["run"]) for a, b in gp.gpu_pairs([b200, gb200, b300, gb300])] == [
        ("mb2604_b200_qwen3_30b", "mb2604_gb200_qwen3_30b"), ("mb2606_b300_qwen3_30b", "mb2606_gb300_qwen3_30b")]
    # the one recipe column the 26.04 Qwen3-30B presets set per GPU (Megatron-Bridge@74695a06
    # scripts/performance/configs/qwen/qwen3_workload_base_configs.py: B200 captures attn as well)
    assert gp.differing_fields(b200["lay"], gb200["lay"]) == ["cuda_graph_scope"]
    assert gp.differing_fields(b300["lay"], gb300["lay"]) == []
    unpaired = {  # each differs from b300 in one thing: none is its pair
        "release": _s("mb2604_gb300_qwen3_30b", "GB300", micro_batch=8),
        "shape": _s("mb2606_gb300_qwen3_30b", "GB300", micro_batch=4),
        "precision": _s("mb2606_gb300_qwen3_30b", "GB300", micro_batch=8, precision="bf16"),
        "scale": _s("mb2606_gb300_qwen3_30b", "GB300", micro_batch=8, dp=64, global_batch=4096),
        "recipe": _s("mb2606_gb300_qwen3_30b", "GB300", micro_batch=8, fp8_recipe="mxfp8"),
        "die": _s("mb2606_gb200_qwen3_30b", "GB200", micro_batch=8),
    }
    for why, other in unpaired.items():
        assert gp.gpu_pairs([b300, other]) == [], why
