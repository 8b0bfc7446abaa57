"""NeMo 25.04's performance launcher exports NCCL_NVLS_ENABLE=0 (NVIDIA/NeMo@6f2c6fda scripts/performance/utils.py
slurm_executor: "Disable NVLink SHARP to save memory"): its rows' engines exclude NVLS, as NCCL_ALGO would."""

from topo.engine.collectives import algorithm_candidates
from topo.training.nvls_buffers import NO_NVLS, release_nvls_enabled


def test_nemo_2504_launcher_disables_nvls():
    assert not release_nvls_enabled("NeMo 25.04")
    assert not release_nvls_enabled("NeMo 25.04.01 (DGXC 25.05.04)")


def test_mlperf_and_unlisted_releases_keep_nccl_default():
    # MLPerf runs NVIDIA's own launch scripts, not NeMo's performance executors
    assert release_nvls_enabled("MLPerf Training v5.0 (NeMo 25.04 container)")
    assert release_nvls_enabled("NeMo 25.09")
    assert release_nvls_enabled("")


def test_exclusion_applies_per_collective():
    # NCCL_NVLS_ENABLE=0 as an engine option: all_gather has no nvls_tree, which must not be an error
    assert algorithm_candidates("all_gather", NO_NVLS)[1] == ["ring", "pat"]
    assert "nvls" not in algorithm_candidates("all_reduce", NO_NVLS)[1]
    assert "nvls_tree" not in algorithm_candidates("all_reduce", NO_NVLS)[1]
