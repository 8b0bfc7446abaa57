"""``benchmarks/residual_audit.py``: the features it reads from a run's step breakdown, checked by hand on a small
op table and step result, on a bundled model's block counts and rows per local expert, and its rank statistics on
runs whose answer is known."""

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import residual_audit as ra  # noqa: E402
from topo.training.model import load_model  # noqa: E402
from topo.training.parallel import make_layout  # noqa: E402


def _row(op, module, kind, fwd, bwd, host=0.0, kernels=1.0, captured=False):
    return {"op": op, "module": module, "kind": kind, "forward_s": fwd, "backward_s": bwd, "host_forward_s": host,
            "host_backward_s": 2 * host, "kernels_forward": kernels, "kernels_backward": 2 * kernels,
            "captured": captured}


OPS = {"*": [_row("qkv", "attention", "gemm", 1.0, 2.0, host=0.1),
             _row("core_attention", "core_attn", "attention", 2.0, 5.0, host=0.1)],
       "E": [_row("router", "moe", "gemm", 0.5, 0.5, host=0.1),
             _row("permute", "moe", "kernel", 1.0, 1.0, host=0.2, kernels=3.0),
             _row("fc1", "moe", "gemm", 3.0, 6.0, host=0.4, kernels=4.0, captured=True)],
       "logits": [_row("cross_entropy", "logits", "memory", 1.0, 1.0, host=0.1)]}
ACT = {"E": [_row("router_topk", "moe", "memory", 1.0, 1.0), _row("activation", "moe_act", "memory", 1.0, 3.0),
             _row("fc2", "moe", "gemm", 2.0, 4.0)]}
COUNTS = {"*": 2, "E": 2, "logits": 1}


def test_op_features_by_hand():
    f = ra.op_features(OPS, COUNTS)
    # GPU seconds, fwd + bwd times the block count: qkv 2 x 3 = 6, attention 2 x 7 = 14, router 2 x 1 = 2,
    # permute 2 x 2 = 4, fc1 2 x 9 = 18, cross_entropy 1 x 2 = 2: total 46
    assert f["gemm_share"] == pytest.approx((6 + 2 + 18) / 46)
    assert f["expert_gemm_share"] == pytest.approx(18 / 46)  # the router's GEMM is not an expert's
    assert f["attention_share"] == pytest.approx(14 / 46)
    assert f["memory_share"] == pytest.approx((4 + 2) / 46)  # kernel and memory operators
    assert f["permute_share"] == pytest.approx(4 / 46) and f["moe_memory_share"] == 0.0
    # memory-bound kernels (fwd + 2 fwd) x count: permute 2 x 9, cross_entropy 1 x 3 = 21 kernels for 6 s
    assert f["memory_s_per_kernel"] == pytest.approx(6 / 21)
    # host: (fwd + 2 fwd) x count, fc1 captured: 2 x 0.3 + 2 x 0.3 + 2 x 0.3 + 2 x 0.6 + 1 x 0.3 = 3.3
    assert f["host_over_gpu"] == pytest.approx(3.3 / 46)
    # kernels (fwd + 2 fwd) x count: 2 x 3 + 2 x 3 + 2 x 3 + 2 x 9 + 2 x 12 + 1 x 3 = 63 (captured still launched)
    assert f["kernels_per_gpu_s"] == pytest.approx(63 / 46)


def test_moe_memory_share_counts_the_router_and_activation_not_the_gemms():
    f = ra.op_features(ACT, {"E": 3})  # 3 x (2 + 4 + 6) = 36 s: router top-k 6, activation 12, fc2 18
    assert f["moe_memory_share"] == pytest.approx(18 / 36) and f["memory_share"] == pytest.approx(18 / 36)
    assert f["permute_share"] == 0.0 and f["expert_gemm_share"] == pytest.approx(18 / 36)


def test_step_features_by_hand():
    comm = [SimpleNamespace(dim="ep", domains_per_group=2), SimpleNamespace(dim="ep", domains_per_group=1),
            SimpleNamespace(dim="dp", domains_per_group=16)]
    res = SimpleNamespace(step_time_s=10.0, breakdown_s={"compute": 7.0, "ep": 2.0, "dp": 1.0}, comm=comm)
    f = ra.step_features(res)
    assert f["compute_share"] == pytest.approx(0.7) and f["ep_share"] == pytest.approx(0.2)
    assert f["tp_share"] == 0.0 and f["dp_share"] == pytest.approx(0.1)
    assert f["ep_domains"] == 2  # the widest EP collective's span, not DP's
    assert ra.step_features(SimpleNamespace(step_time_s=1.0, breakdown_s={}, comm=comm[2:]))["ep_domains"] == 0


def test_block_counts_and_rows_on_a_bundled_model():
    m = load_model("qwen3-30b-a3b")  # 48 layers, each attention then MoE; 128 experts, top-8
    c = ra.block_counts(m)
    assert c["*"] == 48 and c["E"] == 48 and c["embedding"] == 1 and c["logits"] == 1 and "mtp_head" not in c
    assert ra.block_counts(load_model("deepseek-v3-671b"))["mtp_head"] == 1
    lay = make_layout(tp=1, pp=1, dp=8, ep=8, global_batch=64, micro_batch=1, seq_len=4096, moe_routing="consecutive")
    f = ra.model_features(m, lay)
    # ep x tokens x top-k / experts, the consecutive gate's load 1: 8 x 4096 x 8 / 128 = 2048 rows per local expert
    assert f["rows_per_local_expert"] == pytest.approx(2048) and f["hidden"] == 2048 and f["ep"] == 8
    dense = ra.model_features(load_model("llama3-8b"), make_layout(tp=1, dp=8, global_batch=64))
    assert math.isnan(dense["rows_per_local_expert"])


def test_rank_statistics_on_known_runs():
    runs = [{"err": -0.01 * i, "x": float(i), "y": 1.0} for i in range(20)]  # the error falls as x grows
    rho, n = ra.spearman(runs, "x")
    assert rho == pytest.approx(-1.0) and n == 20
    assert math.isnan(ra.spearman(runs, "y")[0])  # a constant feature says nothing
    a, fast, ok = ra.auc(runs, "x", too_fast=0.08, right=0.04)  # too fast: i >= 9 (11 runs); right: i <= 4 (5 runs)
    assert (fast, ok) == (11, 5) and a == pytest.approx(1.0)  # every too-fast run has the larger x


def test_signed_error_out_of_family_and_hold_out():
    assert ra.signed_error({"holdout": False, "lofo": 0.9, "pred": 1.0, "step_s": 1.0}) == pytest.approx(-0.1)
    assert ra.signed_error({"holdout": True, "pred": 1.2, "step_s": 1.0}) == pytest.approx(0.2)  # no refit
    assert ra.signed_error({"holdout": False, "pred": 1.0, "step_s": 1.0}) is None
