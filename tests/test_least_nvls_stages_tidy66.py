"""tidy66 (rev65's Left): :func:`topo.training.step.least_nvls_bytes` is the least over the pipeline stages that
may pace the step, so the search's early memory drop (mem65) never drops a layout some stage's traffic lets fit.

Llama 3 8B, TP 8 without sequence parallelism, PP 2 with Megatron-Core's layout ``E|t*32L`` (the embedding alone
on stage 0): stage 0 runs no TP block, so no TP all-reduce (the only collective NCCL may run as NVLS under
``auto``; its one TP collective is an all-gather, ZeRO-1's DP reduce-scatter and all-gather have none), and holds
no NVLS buffer; stage 1's TP all-reduce in one DGX H100 runs NVLS and holds NVIDIA/nccl v2.30.7-1
``src/transport/nvls.cc`` ``ncclNvlsBufferSetup``'s 16 channels x 2 x (128 KiB x 8 steps) x 8 heads =
268,435,456 B per GPU (mem65's figure)."""

from unittest import mock

import topo

from topo.training import step
from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.mapping import default_placement, map_layout
from topo.training.model import load_model
from topo.training.parallel import make_layout

ONE_BUFFER_BYTES = 16 * 2 * 128 * 1024 * 8 * 8


def _setup():
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))
    engine = CommEngine(fabric)
    gpu = gpu_compute(fabric.spec.gpu, host_cpu=fabric.spec.host_cpu[0])
    model = load_model("llama3-8b")
    lay = make_layout(global_batch=64, micro_batch=1, dp=2, tp=8, pp=2, dp_sharding="zero1", seq_len=8192,
                      sequence_parallel=False, pipeline_layout="E|t*32L")
    lay, _ = default_placement(lay, 8, fabric.layout.num_gpus)
    return fabric, engine, gpu, model, lay, map_layout(lay, 8, fabric.layout.num_gpus)


def _one_stage(engine, model, lay, mapping, gpu, stage):
    with mock.patch.object(step, "pace_stages", lambda mo, la: [stage]):
        return step.least_nvls_bytes(engine, model, lay, mapping, gpu)


def test_the_stages_differ_in_their_nvls_communicators():
    fabric, engine, gpu, model, lay, mapping = _setup()
    assert step.pace_stages(model, lay) == [0, 1]
    assert step.pipeline_units(model, lay)[0] == ["embedding"]
    assert not [it for it in step.step_traffic(model, lay, 0) if it["collective"] == "all_reduce"]
    assert [it["dim"] for it in step.step_traffic(model, lay, 1) if it["collective"] == "all_reduce"] == ["tp", "tp"]
    assert _one_stage(engine, model, lay, mapping, gpu, 0) == 0.0
    assert _one_stage(engine, model, lay, mapping, gpu, 1) == ONE_BUFFER_BYTES


def test_the_least_is_the_least_stage_and_bounds_the_step():
    fabric, engine, gpu, model, lay, mapping = _setup()
    assert step.least_nvls_bytes(engine, model, lay, mapping, gpu) == 0.0  # max over the stages would give stage 1's
    r = step.estimate_step(fabric, model, lay, engine=engine, contention=False, check=False)
    assert r.memory.nvls_bytes == ONE_BUFFER_BYTES  # the step paces by stage 1 (32 layers) and counts its buffer
