"""The bundled GB300 NVL72 topology and a published GB300 run's layout on it."""

import pytest

import topo
from topo.training.gpus import gpu_compute
from topo.training.memory import memory_per_gpu
from topo.training.model import load_model
from topo.training.parallel import make_layout


def test_gb300_topology_matches_its_sources():
    # NVIDIA Enterprise RA (NVL72 AI factory, components): 72 Blackwell Ultra GPUs per NVLink domain, compute trays
    # of 4 GPUs with 4 ConnectX-8 (800 Gb/s); gpus.toml [GB300]: 288 GB HBM3e
    inv = topo.inventory(topo.build_fabric(topo.load_spec("gb300-nvl72-superpod")))
    assert inv.gpus_per_server == 4 and inv.num_gpus == 32 * 72
    assert inv.nic_rate_Bps * 8 == pytest.approx(800e9)
    assert inv.tiers[0].oversubscription == 1.0
    # 288 GB HBM3e; the driver reports 284,208 MiB (nvidia-smi on GB300 NVL72 trays, public logs): what a job fills
    assert gpu_compute("GB300").memory_bytes == 284208 * 2**20


def _kimi_k2_gb300(mbs):
    # Megatron-Bridge's KIMI_K2_PRETRAIN_CONFIG_GB300 (zidanehuang001/Megatron-Bridge@8e0fe90
    # scripts/performance/configs/kimi/kimi_workload_base_configs.py): 256 GPUs, PP4 VP4 EP64, MBS 2, GBS 4096,
    # recompute mla_up_proj, bf16 gradients (grad_reduce_in_fp32 = False); the 26.02.01 table's Kimi_K2 row
    return make_layout(pp=4, vpp=4, dp=64, ep=64, etp=1, micro_batch=mbs, global_batch=4096, seq_len=4096,
                       precision="fp8", recompute_modules=("mla_up_proj",), grad_bytes=2.0, grad_reduce_bytes=2.0)


def test_kimi_k2_gb300_recipe_fits_only_in_gb300_memory():
    m = load_model("kimi-k2")
    gb300 = memory_per_gpu(m, _kimi_k2_gb300(2), gpu_compute("GB300").memory_bytes)
    gb200 = memory_per_gpu(m, _kimi_k2_gb300(2), gpu_compute("GB200").memory_bytes)
    # the run that ran fits in 288 GB; the same micro-batch of 2 does not in GB200's 186 GB (its recipe runs MBS 1)
    assert gb300.fits and not gb200.fits
    assert memory_per_gpu(m, _kimi_k2_gb300(1), gpu_compute("GB200").memory_bytes).fits
