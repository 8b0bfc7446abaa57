"""NeMo 25.04's performance launcher exports NCCL_NVLS_ENABLE=0 (NVIDIA/NeMo@6f2c6fda scripts/performance/utils.py
slurm_executor: "Disable NVLink SHARP to save memory"): its rows' engines exclude NVLS, as NCCL_ALGO would."""

from topo.engine.collectives import algorithm_candidates
from topo.training.nvls_buffers import NO_NVLS, release_nvls_enabled


def test_nemo_2504_launcher_disables_nvls():
    assert not release_nvls_enabled("NeMo 25.04")
    assert not release_nvls_enabled("NeMo 25.04.01 (DGXC 25.05.04)")


def test_unlisted_releases_keep_nccl_default():
    # an MLPerf row is matched by its launcher (its results directory), not by the NeMo release it names
    assert release_nvls_enabled("MLPerf Training v5.0 (NeMo 25.04 container)")
    assert release_nvls_enabled("NeMo 25.09")
    assert release_nvls_enabled("")


MLPERF50 = "https://github.com/mlcommons/training_results_v5.0/blob/0fdc28f013256aea84fa36fdaf1e0fa46094b18c/"
MLPERF51 = "https://github.com/mlcommons/training_results_v5.1/blob/441d65f4445cd59687466533fd9f55399136e7a4/"


def test_mlperf_launchers_that_export_nvls_off():
    """mem64: training_results_v5.0@0fdc28f0 NVIDIA/benchmarks/llama31_405b/implementations/
    tyche_ngpu256_ngc25.04_nemo/config_common.sh:24 and carina_ngpu1024_ngc25.04_nemo/config_common.sh:24 export
    NCCL_NVLS_ENABLE=0; Nebius's v5.0 H200 config comments it out, University of Florida's v5.1 Llama 3.1 configs
    do not set it (NCCL's default)."""
    sw = "MLPerf Training v5.0 (NeMo 25.04 container)"
    assert not release_nvls_enabled(sw, MLPERF50 + "NVIDIA/results/tyche_ngpu256_ngc25.04_nemo/llama31_405b/result_0.txt")
    assert not release_nvls_enabled(
        sw, MLPERF50 + "IBM+CoreWeave+NVIDIA/results/carina_ngpu1024_ngc25.04_nemo/llama31_405b/result_0.txt")
    assert release_nvls_enabled("MLPerf Training v5.0 (NeMo 25.01 container)",
                                MLPERF50 + "Nebius/results/nebius_soperator_8xH200_n64_ngc25.01_nemo/llama31_405b/r.txt")
    assert release_nvls_enabled("MLPerf Training v5.1 (NeMo 25.09 container)",
                                MLPERF51 + "University-of-Florida/results/hpg.dgxb200x8.n32/llama31_405b/result_0.txt")


def test_model_zoo_launcher_exports_nvls_off():
    """yanring/Megatron-MoE-ModelZoo@798dfb50 model_configs/benchmarking/Qwen3-235B-A22B.yaml:5 NCCL_NVLS_ENABLE: 0,
    exported by sbatch_benchmarking.sh:46-52."""
    url = ("https://github.com/yanring/Megatron-MoE-ModelZoo/blob/798dfb503c6884a130fca8638e13da3bd0dd7ce0/"
           "best_practice/qwen3/readme.md")
    assert not release_nvls_enabled("Megatron-LM dev (commit not stated)", url)


def test_every_launcher_key_names_a_published_row():
    """A [launcher] key that matches no row's source address would be a dead entry (a typo in a commit or path)."""
    import csv
    import tomllib
    from conftest import ROOT
    keys = tomllib.loads((ROOT / "topo/data/compute/nccl_env_releases.toml").read_text())["launcher"]
    urls = [r["source_url"] for name in ("training_runs_published.csv", "training_runs_holdout.csv")
            for r in csv.DictReader(open(ROOT / "data/reference" / name, encoding="utf-8"))]
    assert [k for k in keys if not any(k in u for u in urls)] == []


def test_exclusion_applies_per_collective():
    # NCCL_NVLS_ENABLE=0 as an engine option: all_gather has no nvls_tree, which must not be an error
    assert algorithm_candidates("all_gather", NO_NVLS)[1] == ["ring", "pat"]
    assert "nvls" not in algorithm_candidates("all_reduce", NO_NVLS)[1]
    assert "nvls_tree" not in algorithm_candidates("all_reduce", NO_NVLS)[1]
