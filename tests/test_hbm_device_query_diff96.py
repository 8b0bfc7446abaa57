"""Blackwell's HBM rate is the one the device reports (docs/calibration-findings.md section 403, diff96).

The device queries XLA stores (openxla/xla@4336d12e0706 xla/backends/gpu/target_config/specs/*.txtpb,
``memory_bandwidth``, bytes/s; the same files gpus.toml already reads for ``sms``):
H100 SXM 3,352,320,000,000; B200 7,672,320,000,000 (3,996 MHz memory clock: a 7,680-bit bus, the figure
pytorch/ao PR #4002 took for torchao's B200 roofline from the driver); B300 7,936,000,000,000; GB200 and GB300
7,928,064,000,000. NVIDIA's pages print 3.35 TB/s for H100 and 8 TB/s for each Blackwell part."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s

XLA_MEMORY_BANDWIDTH_BPS = {"H100": 3_352_320_000_000, "B200": 7_672_320_000_000, "B300": 7_936_000_000_000,
                            "GB200": 7_928_064_000_000, "GB300": 7_928_064_000_000}


@pytest.mark.parametrize("name", sorted(XLA_MEMORY_BANDWIDTH_BPS))
def test_each_gpus_hbm_rate_is_its_device_query(name):
    # the catalog rounds to 1 GB/s; H100's datasheet 3.35 TB/s is its device query to 0.07%
    assert gpu_compute(name).hbm_Bps == pytest.approx(XLA_MEMORY_BANDWIDTH_BPS[name], rel=1e-3)


def test_b200s_bus_is_7680_bits():
    # bus width = rate / (memory clock 3.996 GHz x 2 transfers) x 8 bits: 7,680 (pytorch/ao PR #4002: the driver's
    # figure, corrected from the 8,192 it reported before, 8.18 TB/s); the page's 8 TB/s would need 8,008
    bits = gpu_compute("B200").hbm_Bps / (3.996e9 * 2) * 8
    assert bits == pytest.approx(7680, abs=2)
    assert bits < 8e12 / (3.996e9 * 2) * 8 - 300


def test_a_memory_bound_kernel_on_b200_against_h100_runs_at_the_device_queries_ratio():
    # the same bytes through HBM in an elementwise kernel (same memory_efficiency on both): 2.29x, not 8 / 3.35 = 2.39x
    h, b = gpu_compute("H100").kernels, gpu_compute("B200").kernels
    ratio = memory_s(h, 1e9) / memory_s(b, 1e9)
    assert ratio == pytest.approx(XLA_MEMORY_BANDWIDTH_BPS["B200"] / 3.35e12, rel=1e-3)
    assert ratio < 8.0 / 3.35 - 0.08
