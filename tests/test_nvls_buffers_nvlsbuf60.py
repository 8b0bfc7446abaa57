"""nvlsbuf60: NCCL's NVLS buffer counts against a GPU's memory for each communicator whose collectives topo's own
algorithm choice runs as NVLS / NVLSTree (topo.training.nvls_buffers). The formula is NVIDIA/nccl v2.30.7-1
(master 5067397c) src/transport/nvls.cc ncclNvlsBufferSetup, lines 423-430: buffSize = nvlsChunkSize x NCCL_STEPS,
nvlsPerRankSize = nvlsChannels x 2 x buffSize, nvlsTotalSize = nvlsPerRankSize x nHeads."""

import json

import topo
from conftest import run_cli

from topo.engine.estimate import default_profile
from topo.training.comm import CommEngine
from topo.training.model import load_model
from topo.training.nvls_buffers import nvls_buffer_bytes
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

KiB, MiB = 2**10, 2**20


def _fabric(name, units=1):
    return topo.build_fabric(topo.load_spec(name, [f"cluster.num_units={units}"]))


def test_eight_h100_hold_ncclS_logged_256_mib():
    # NVLS_NCHANNELS_SM90 16 (nvls.cc line 155), NCCL_NVLS_CHUNKSIZE 128 KiB (line 160), NCCL_STEPS 8, 8 heads (one
    # per GPU inside a node, src/graph/search.cc "Force intra-node NVLS algorithm to pull evenly from all GPUs"):
    # a public NCCL_DEBUG log of 8 H100 prints "buffSize 1048576 nvlsPerRankSize 33554432 nvlsTotalSize 268435456"
    prof = default_profile(_fabric("dgx-h100-superpod"))
    assert 128 * KiB * 8 == 1048576 and 16 * 2 * 1048576 == 33554432
    assert nvls_buffer_bytes(prof, "hopper", 8, 1) == 16 * 2 * 128 * KiB * 8 * 8 == 268435456
    assert nvls_buffer_bytes(prof, "hopper", 4, 1) == 268435456 // 2  # 4 heads


def test_blackwell_runs_24_channels_in_one_nvlink_domain_and_32_across():
    # nvls.cc line 211: nChannels = nNodes > 1 ? NVLS_NCHANNELS_SM100 32 : NVLS_NCHANNELS_SM100_NVL 24; an NVL72
    # rack is one NCCL node (its MNNVL clique); heads at most NCCL_MAX_NVLS_ARITY 32
    prof = default_profile(_fabric("gb200-nvl72-superpod"))
    assert nvls_buffer_bytes(prof, "blackwell", 4, 1) == 24 * 2 * MiB * 4
    assert nvls_buffer_bytes(prof, "blackwell", 72, 1) == 24 * 2 * MiB * 32
    assert nvls_buffer_bytes(prof, "blackwell", 8, 2) == 32 * 2 * MiB * 8


def _dp8_allreduce(fabric, engine=None):
    m = load_model("llama3-8b")
    lay = make_layout(global_batch=64, micro_batch=1, dp=8, tp=1, pp=1, dp_sharding="none")
    return estimate_step(fabric, m, lay, engine=engine, contention=False)


def test_a_data_parallel_all_reduce_topo_runs_as_nvls_holds_the_buffer():
    fabric = _fabric("dgx-h100-superpod")
    r = _dp8_allreduce(fabric)
    assert {c.algorithm for c in r.comm if c.dim == "dp"} == {"nvls"}  # topo's own choice at this size
    assert r.memory.nvls_bytes == 268435456
    off = _dp8_allreduce(fabric, CommEngine(fabric, algorithm="^nvls,nvls_tree"))  # NCCL_NVLS_ENABLE=0
    assert off.memory.nvls_bytes == 0.0
    assert r.memory.total_bytes - off.memory.total_bytes == 268435456


def test_no_nvls_buffer_on_a100():
    r = _dp8_allreduce(_fabric("dgx-a100-superpod"))
    assert "nvls" not in {c.algorithm for c in r.comm} and r.memory.nvls_bytes == 0.0


def test_the_json_and_the_text_carry_it():
    args = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "1", "--gpus", "8", "--global-batch", "64",
            "--dp-sharding", "none"]
    out = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert out["memory"]["nvls_bytes"] == 268435456
    assert "NVLS 0.3 GB" in run_cli(*args, check=True).stdout
