"""rev104: tests for the mutations of sections 432-437 no test caught (docs/calibration-findings.md section 439).

- A memory operator's backward pass reads its kernel's backward share of HBM, and ``[memory.kernel_TBps.<kind>]``'s
  ``backward_TBps`` feeds it: with the shipped data (cuDNN's RMSNorm forward rate standing for the backward too,
  kernels.toml ``[memory.kernel_TBps.norm]``, an assumption) forward and backward are the same number, so swapping
  the two, or reading ``forward_TBps`` for both, changed nothing any test saw.
- A pod size given (``fabric.units_per_pod``) at or above the units the cluster has puts no pod rule on the
  nearest sizes of a two-tier spine that ``fabric.grow_tiers`` would not grow (the spine joins every unit): only a
  pod smaller than the cluster makes the core tier, and with it whole pods, necessary (tidy118, section 436).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import run_cli
from topo.training.gpus import gpu_compute
from topo.training.kernels import measured_share, memory_s, op_memory_efficiency

H100_HBM_TBPS = 3.35  # gpus.toml: H100 SXM 80GB HBM3


def test_a_kernels_backward_rate_prices_the_backward_pass():
    """A kind whose backward is published slower than its forward (figures made up for the closed form): the share
    of each is rate / measured HBM, and memory_s reads the backward's for ``backward=True``."""
    mem = {"kernel_TBps": {"k": {"ops": ["norm", "qk_norm"], "forward_TBps": 2.742, "backward_TBps": 2.0,
                                 "measured_hbm_TBps": H100_HBM_TBPS}}}
    shares = dict(op_memory_efficiency(mem))
    want = (2.742 / H100_HBM_TBPS, 2.0 / H100_HBM_TBPS)
    assert shares["norm"] == shares["qk_norm"] == pytest.approx(want, rel=1e-12)
    assert measured_share(2.0, H100_HBM_TBPS) == pytest.approx(want[1], rel=1e-12)
    km = replace(gpu_compute("H100").kernels, op_memory_efficiency=tuple(shares.items()))
    nbytes = 4.0 * 8192 * 4096
    assert memory_s(km, nbytes, "norm") == pytest.approx(nbytes / (km.hbm_Bps * want[0]), rel=1e-12)
    assert memory_s(km, nbytes, "norm", backward=True) == pytest.approx(nbytes / (km.hbm_Bps * want[1]), rel=1e-12)
    # an operator the table does not name keeps memory_efficiency both ways
    for backward in (False, True):
        assert memory_s(km, nbytes, "residual", backward=backward) == pytest.approx(
            nbytes / (km.hbm_Bps * km.memory_efficiency), rel=1e-12)


@pytest.mark.parametrize("pod", [14, 18])
def test_a_given_pod_the_cluster_fits_in_adds_no_pod_rule(pod):
    """GB300 NVL72 (topologies/gb300-nvl72-superpod.toml: racks of 18 trays of 4 GPUs, a two-tier Q3400 fabric with
    grow_tiers): 1,000 GPUs are 250 trays, 14 racks rounded up. A pod of 14 or 18 racks holds them all, so the spine
    stays the top tier and the nearest sizes are whole racks (72 GPUs): 936 or 1,008, as with no pod given
    (test_sizes_nearest.test_within_one_spine_group_no_pod_rule); each builds."""
    base = ("describe", "gb300-nvl72-superpod", "--unset", "cluster.num_units", "--set", f"fabric.units_per_pod={pod}")
    proc = run_cli(*base, "--set", "cluster.num_gpus=1000")
    assert proc.returncode == 2 and proc.stderr.rstrip().endswith("(nearest: 936 or 1,008 GPUs)"), proc.stderr
    for n in (936, 1008):
        run_cli(*base, "--set", f"cluster.num_gpus={n}", check=True)


def test_a_given_pod_smaller_than_the_cluster_fills_whole_pods():
    """The same 1,000 GPUs with pods of 9 racks (648 GPUs): the 14 racks need the core tier grow_tiers adds, so the
    nearest sizes fill whole pods, 648 or 1,296 GPUs; each builds."""
    base = ("describe", "gb300-nvl72-superpod", "--unset", "cluster.num_units", "--set", "fabric.units_per_pod=9")
    proc = run_cli(*base, "--set", "cluster.num_gpus=1000")
    assert proc.returncode == 2 and "also fill whole pods of 9 scalable units come in steps of 648 GPUs" in proc.stderr
    assert proc.stderr.rstrip().endswith("; nearest: 648 or 1,296 GPUs)"), proc.stderr
    for n in (648, 1296):
        run_cli(*base, "--set", f"cluster.num_gpus={n}", check=True)
