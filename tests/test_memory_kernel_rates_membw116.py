"""Memory operators at the achieved HBM rate of the kernels the runs use, where published (issue 29, membw116;
kernels.toml [memory.kernel_TBps]; docs/calibration-findings.md section 432)."""

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.operators import Op, op_time_s

# cuDNN 9.10.1 RMSNorm forward, BF16, 32K rows x 2K / 4K / 8K, one H100 SXM (HBM 3.35 TB/s): 2,738 / 2,742 /
# 2,840 GB/s, transcribed from Dao-AILab/quack@c8ec317 media/bf16_kernel_benchmarks_single_row.svg; median 2,742.
CUDNN_RMSNORM_FWD_H100_TBPS = 2.742
H100_HBM_TBPS = 3.35


def _norm(name="norm", nbytes=4.0 * 8192 * 4096):
    return Op(name, "layernorm", "memory", 0.0, nbytes)


def test_norm_runs_at_cudnns_published_share_of_hbm_on_every_gpu():
    for gpu in ("H100", "B200"):
        km = gpu_compute(gpu).kernels
        share = CUDNN_RMSNORM_FWD_H100_TBPS / H100_HBM_TBPS  # 0.819, not memory_efficiency's 0.90
        nbytes = 4.0 * 8192 * 4096
        for name in ("norm", "qk_norm", "final_norm", "mtp_norms"):
            assert abs(memory_s(km, nbytes, name) / (nbytes / (km.hbm_Bps * share)) - 1.0) < 1e-12
            # the op's backward (1.5 x the forward's bytes at TE's backward rate, section 446; the residual add's
            # twice at memory_efficiency) against a residual add of the same bytes: launch gaps cancel
            g = gpu_compute(gpu)
            diff = (op_time_s(_norm(name, nbytes), g, "bf16", backward=True)
                    - op_time_s(_norm("residual", nbytes), g, "bf16", backward=True))
            bwd_share = 2.572 / H100_HBM_TBPS
            want = nbytes / km.hbm_Bps * (1.5 / bwd_share - 2.0 / km.memory_efficiency)
            assert abs(diff / want - 1.0) < 1e-9


def test_operators_without_a_published_kernel_rate_keep_memory_efficiency():
    km = gpu_compute("H100").kernels
    nbytes = 6.0 * 8192 * 4096
    for name in ("residual", "activation", "rope", ""):
        assert abs(memory_s(km, nbytes, name) / (nbytes / (km.hbm_Bps * km.memory_efficiency)) - 1.0) < 1e-12
    assert km.memory_efficiency == 0.90
