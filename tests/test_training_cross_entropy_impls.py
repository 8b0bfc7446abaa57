"""The loss's bytes by implementation (topo/data/compute/cross_entropy.toml), against the kernel source counts:
Transformer Engine's Triton cross-entropy (NVIDIA/TransformerEngine transformer_engine/common/triton/
cross_entropy.py: online_softmax_kernel and cross_entropy_kernel read the BF16 row once each, the gradient is
stored over the logits in BF16 before v2.18, in FP32 from v2.18, PR #3193), Megatron-Core's native fused loss
(NVIDIA/Megatron-LM@d98e8a64 megatron/core/fusions/fused_cross_entropy.py) from Liger-Kernel's H100 timing of it
against the unfused loss in the same benchmark (linkedin/Liger-Kernel@ead96b61
benchmark/data/all_benchmark_data.csv)."""

import csv
import tomllib

import pytest

from conftest import ROOT
from topo.training.cross_entropy import cross_entropy_impls, cross_entropy_moves
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import block_ops, op_time_s
from topo.training.parallel import make_layout


def _ops(impl, tp=2):
    model = load_model("qwen3-30b-a3b")  # vocabulary 151,936
    lay = make_layout(tp=tp, dp=4, ep=8, global_batch=32, micro_batch=1, seq_len=4096, cross_entropy=impl)
    return model, {o.name: o for o in block_ops(model, lay, "logits")}


def test_each_implementation_counts_its_kernels_bytes():
    bf16, fp32 = 2, 4
    assert cross_entropy_moves("te") == ((bf16 + bf16 + bf16, 2), (bf16 + bf16, 1))
    # from 2.18: the gradient stored in FP32 (4), scaled in place (4 + 4), cast to BF16 by autograd (4 + 2)
    assert cross_entropy_moves("te_fp32_grad") == ((bf16 + bf16 + fp32, 2), (2 * fp32 + fp32 + bf16, 2))
    # native: Liger-Kernel's H100 timing (S 2048, B 4, V 131,072; "backward" includes the forward) in the unfused
    # loss's counted bytes (38 forward, 14 backward) timed in the same benchmark: fused 11.810 / 18.231 ms, unfused
    # 15.812 / 21.247 ms
    fused_ms, unfused_ms = (11.810, 18.231), (15.812, 21.247)
    (fwd, k_f), (bwd, k_b) = cross_entropy_moves("fused")
    assert fwd == pytest.approx(38 * fused_ms[0] / unfused_ms[0], abs=0.05)  # 28.4
    assert bwd == pytest.approx(14 * (fused_ms[1] - fused_ms[0]) / (unfused_ms[1] - unfused_ms[0]), abs=0.05)  # 16.5
    # more than the source's in-place count (upcast with max 2 + 4, exp in place with sum 4 + 4, div_ 4 + 4; mul_
    # 4 + 4 and the BF16 result 2), less than the unfused loss's op-by-op passes
    assert (bf16 + fp32) + 2 * fp32 + 2 * fp32 < fwd < 38 and 2 * fp32 + bf16 < bwd
    assert (k_f, k_b) == (3, 2)
    assert cross_entropy_moves("torch_bf16") == ((4 * bf16, 2), (5 * bf16, 3))
    assert set(cross_entropy_impls()) == {"fused", "te", "te_fp32_grad", "megatron_unfused", "torch_bf16"}


@pytest.mark.parametrize("impl", ["fused", "te", "te_fp32_grad", "megatron_unfused", "torch_bf16"])
def test_the_loss_is_bytes_times_tokens_times_vocabulary_at_hbm_rate(impl):
    # closed form: bytes a logit x tokens x vocabulary / TP at the H100's HBM rate (kernels' launch gaps apart)
    (fwd, k_f), (bwd, k_b) = cross_entropy_moves(impl)
    model, ops = _ops(impl)
    logits = 4096 * model.vocab / 2
    assert ops["cross_entropy"].bytes == pytest.approx(fwd * logits)
    assert ops["cross_entropy_bwd"].bytes == pytest.approx(bwd * logits)
    assert (ops["cross_entropy"].launches, ops["cross_entropy_bwd"].launches) == (k_f, k_b)
    gpu = gpu_compute("H100")
    km = gpu.kernels
    t_f = op_time_s(ops["cross_entropy"], gpu, "bf16")
    t_b = op_time_s(ops["cross_entropy_bwd"], gpu, "bf16", backward=True)
    assert t_f == pytest.approx(fwd * logits / (km.hbm_Bps * km.memory_efficiency) + k_f * km.launch_gpu_s)
    assert t_b == pytest.approx(memory_s(km, bwd * logits) + k_b * km.launch_gpu_s)
    assert op_time_s(ops["cross_entropy"], gpu, "bf16", backward=True) == 0.0  # each a pass of its own


def test_the_te_loss_is_cheaper_than_the_native_one_on_pr_5094s_run():
    # Qwen3-30B at TP 1, 4,096 tokens a micro-batch: TE (before 2.18) moves 10 bytes a logit, native 44.9
    gpu = gpu_compute("H100")
    times = {}
    for impl in ("te", "fused"):
        _, ops = _ops(impl, tp=1)
        times[impl] = (op_time_s(ops["cross_entropy"], gpu, "bf16")
                       + op_time_s(ops["cross_entropy_bwd"], gpu, "bf16", backward=True))
    assert times["te"] / times["fused"] == pytest.approx(10 / 44.9, rel=0.1)


def test_an_unknown_implementation_is_one_line():
    with pytest.raises(ValueError, match=r"cross_entropy='liger' is not a known implementation; allowed: fused, te"):
        cross_entropy_moves("liger")


def test_nemo_26_08_rows_run_te_before_its_fp32_gradient():
    # NeMo 26.08 is Megatron-Bridge 0.6.0 (NVIDIA-NeMo/Megatron-Bridge v0.6.0 docs/versions1.json, "0.6.0 (latest) ·
    # 26.08"), whose uv.lock pins Transformer Engine 2.17.1+4329ff84 (d51ba9f39); v2.17.1 is cut from release_v2.17,
    # without 01bbe3eea (the FP32 gradient, first in v2.18): every 26.08 row runs `te`, not `te_fp32_grad`
    rows = [r for name in ("training_runs_published.csv", "training_runs_holdout.csv")
            for r in csv.DictReader(open(ROOT / "data" / "reference" / name, encoding="utf-8"))
            if r["run_id"].startswith("mb2608_")]
    # runs70 added mb2608_gb200_nemotron35_lightning (hold-out), a 26.08 row too; data81 the five GB300 rows (hold-out);
    # super80 the two Nemotron 3 Super rows (GB200 fitted, GB300 held out); ultra85 the two Nemotron 3 Ultra rows, whose
    # recipe calls _benchmark_common(cfg, cross_entropy_impl="native") (NVIDIA-NeMo/Megatron-Bridge@4ab94dfa
    # perf_recipes/nemotronh/common.py _apply_nemotron_3_ultra_perf_defaults): Megatron-Core's native fused loss;
    # nvfp4c the two Nemotron 3 Super NVFP4 rows (GB300, GB200; hold-out), their MXFP8 twins' recipe function: `te`
    assert len(rows) == 16
    assert {r["cross_entropy"] for r in rows if "nemotron3_ultra" not in r["run_id"]} == {"te"}
    assert {r["cross_entropy"] for r in rows if "nemotron3_ultra" in r["run_id"]} == {"fused"}


def test_no_loss_claims_published_bytes():
    """rev62: no source publishes a loss's bytes; each row is counted from kernel source (``derived``) or, the native
    fused loss, a published timing ratio times such a count (``secondary``, as host_calls.toml's HybridEP call).
    The fused row had said ``published``."""
    with open(ROOT / "topo" / "data" / "compute" / "cross_entropy.toml", "rb") as f:
        impls = tomllib.load(f)["impl"]
    assert {k: v["status"] for k, v in impls.items() if v["status"] not in ("derived", "secondary")} == {}
    assert impls["fused"]["status"] == "secondary"
