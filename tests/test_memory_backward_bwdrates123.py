"""The norms' backward at Transformer Engine's published backward-over-forward time (issue 29, bwdrates123;
kernels.toml [memory] backward_bytes_ratio, [memory.kernel_TBps.norm]; docs/calibration-findings.md section 446)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_backward_bytes
from topo.training.operators import Op, op_time_s

# Transformer Engine's tex.rmsnorm_fwd / tex.rmsnorm_bwd, fp16, 4,096 x 4,096, one GPU and harness (flagos-ai/FlagGems
# PR #4640, 2026-07-09; harness flagos-ai/FlagGems@2b9dbdf4 benchmark/test_te_rmsnorm.py), kernel times in ms.
TE_RMSNORM_FWD_MS = 0.031296
TE_RMSNORM_BWD_MS = 0.050048
# cuDNN's RMSNorm forward on H100 SXM (section 432), the rate the norms' forward runs at
CUDNN_RMSNORM_FWD_TBPS, H100_HBM_TBPS = 2.742, 3.35


def _op(name, nbytes=4.0 * 8192 * 4096):
    return Op(name, "layernorm", "memory", 0.0, nbytes)


def _body_s(op, g, backward):
    """The op's time less its launch gap (one launch: the gap is the forward's and the backward's alike)."""
    return op_time_s(op, g, "bf16", backward=backward) - op_time_s(Op("empty", "x", "memory", 0.0, 0.0), g, "bf16")


@pytest.mark.parametrize("gpu", ["H100", "B200"])
@pytest.mark.parametrize("name", ["norm", "qk_norm", "final_norm", "mtp_norms"])
def test_norm_backward_takes_tes_published_time_over_its_forward(gpu, name):
    """TE's kernel reads dz and x and writes dx (3 activations) against the forward's x and z (2), at the rate its
    published times give: backward / forward time = 0.050048 / 0.031296 = 1.599 on every GPU (was 2.0)."""
    g = gpu_compute(gpu)
    fwd, bwd = _body_s(_op(name), g, False), _body_s(_op(name), g, True)
    assert bwd / fwd == pytest.approx(TE_RMSNORM_BWD_MS / TE_RMSNORM_FWD_MS, rel=1e-3)
    # closed form: 1.5 x the bytes at cuDNN's forward share times TE's backward-over-forward rate
    te_rate_ratio = (3.0 / TE_RMSNORM_BWD_MS) / (2.0 / TE_RMSNORM_FWD_MS)
    share = CUDNN_RMSNORM_FWD_TBPS * te_rate_ratio / H100_HBM_TBPS
    assert bwd == pytest.approx(1.5 * 4.0 * 8192 * 4096 / (g.kernels.hbm_Bps * share), rel=1e-3)


def test_other_memory_ops_keep_twice_the_bytes_at_memory_efficiency():
    """No backward of the kernels the runs use is published for the residual add, the activation or RoPE
    (section 446): their backward stays twice the forward's bytes at memory_efficiency."""
    g = gpu_compute("H100")
    km = g.kernels
    for name in ("residual", "activation", "rope", "softmax_dropout"):
        assert memory_backward_bytes(km, name) == 2.0
        fwd, bwd = _body_s(_op(name), g, False), _body_s(_op(name), g, True)
        assert bwd == pytest.approx(2.0 * fwd, rel=1e-12)
        assert fwd == pytest.approx(4.0 * 8192 * 4096 / (km.hbm_Bps * km.memory_efficiency), rel=1e-12)
    assert memory_backward_bytes(km, "norm") == 1.5
