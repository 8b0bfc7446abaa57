"""mem65: the search's early memory check counts NCCL's NVLS buffers as the step's final check does
(topo.training.search._Search.nvls_checked). The buffer is NVIDIA/nccl v2.30.7-1 src/transport/nvls.cc
ncclNvlsBufferSetup lines 423-430: 16 channels x 2 x (128 KiB x 8 steps) x 8 heads = 268,435,456 B on 8 H100 (a
public NCCL_DEBUG log prints "nvlsTotalSize 268435456"), held by the DP all-reduce's communicator topo runs as NVLS."""

import topo

from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.memory import memory_per_gpu
from topo.training.model import load_model
from topo.training.nvls_buffers import NO_NVLS
from topo.training.parallel import make_layout
from topo.training.search import _Search, _keys, candidate_layouts, search_layouts
from topo.training.step import estimate_step

SEQ = 3008  # megatron-gpt-3.6b, dp 8 unsharded, micro-batch 2: 85.37 GB without NVLS, 85.63 with, 85.52 on an H100


def _setup(algorithm="auto"):
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    engine = CommEngine(fabric, algorithm=algorithm)
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    return fabric, engine, _Search(fabric, load_model("megatron-gpt-3.6b"), engine, gpu, 5, {}, None, None)


def _near():
    return make_layout(global_batch=64, micro_batch=2, dp=8, tp=1, pp=1, dp_sharding="none", seq_len=SEQ)


def test_a_layout_that_fits_only_without_its_nvls_buffer_is_dropped_before_pricing():
    fabric, engine, s = _setup()
    lay = s.placed(_near())
    old = memory_per_gpu(s.model, lay, s.gpu.memory_bytes, generation="hopper", gpus_per_domain=8)
    assert old.fits  # the early check without NVLS kept it
    r = estimate_step(fabric, s.model, lay, engine=engine, contention=False)
    assert not r.fits and r.memory.nvls_bytes == 268435456  # the final check refuses it
    bound, mem = s.bound_of(lay, _keys(lay))
    assert bound is None and mem.nvls_bytes == 268435456 and mem.total_bytes == r.memory.total_bytes


def test_nccl_nvls_enable_0_keeps_it():
    fabric, engine, s = _setup(NO_NVLS)
    lay = s.placed(_near())
    assert estimate_step(fabric, s.model, lay, engine=engine, contention=False).fits
    bound, mem = s.bound_of(lay, _keys(lay))
    assert bound is not None and mem.nvls_bytes == 0.0


def test_the_search_counts_it_as_too_big():
    fabric, engine, s = _setup()
    res = search_layouts(fabric, s.model, 8, 64, seq_len=SEQ, dp_sharding=("none",), micro_batches=(2,),
                         contention=False, engine=engine)
    assert all(r.fits for r in res.ranked)
    assert not any(r.layout["tp"] == 1 and r.layout["pp"] == 1 for r in res.ranked)
    assert res.rejected_memory >= 1


def test_no_layout_that_fits_is_dropped():
    fabric, engine, s = _setup()
    dropped = 0
    for lay, _ in candidate_layouts(s.model, 8, 64, gpus_per_domain=8, seq_len=SEQ, dp_sharding=("none", "zero1"),
                                    micro_batches=(1, 2, 4), recompute=("none",)):
        if lay is None:
            continue
        lay = s.placed(lay)
        bound, mem = s.bound_of(lay, _keys(lay))
        if bound is None and mem.nvls_bytes > 0:  # dropped for its NVLS buffers alone
            dropped += 1
            assert not estimate_step(fabric, s.model, lay, engine=engine, contention=False, check=False).fits
    assert dropped >= 1
