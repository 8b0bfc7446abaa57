"""tidy66 (rev65's Left): :func:`topo.training.step.least_nvls_bytes` is the least over the pipeline stages that
may pace the step, so the search's early memory drop (mem65) never drops a layout some stage's traffic lets fit.

Llama 3 8B, TP 8 without sequence parallelism, PP 2 with Megatron-Core's layout ``E|t*32L`` (the embedding alone
on stage 0). Stage 1's TP all-reduce in one DGX H100 runs NVLS (the all-reduce is the only collective NCCL may
run as NVLS under ``auto``) and holds NVIDIA/nccl v2.30.7-1 ``src/transport/nvls.cc`` ``ncclNvlsBufferSetup``'s
16 channels x 2 x (128 KiB x 8 steps) x 8 heads = 268,435,456 B per GPU (mem65's figure).

Since stagetp73 (findings section 341) stage 0 runs no TP block but does run its embedding's TP collective:
Megatron-LM@7094270c ``VocabParallelEmbedding.forward`` (``tensor_parallel/layers.py`` lines 241-271) all-reduces
the looked-up rows over TP without sequence parallelism, b s h x 2 B = 1 x 8,192 x 4,096 x 2 = 67,108,864 B a
micro-batch. That all-reduce runs NVLS by the same rule, so stage 0 now holds the same buffer and this layout no
longer tells the least from the most. The second test keeps the point by giving stage 0 its traffic without that
all-reduce (its traffic before section 341: one TP all-gather, ZeRO-1's DP reduce-scatter and all-gather, none of
which NCCL runs as NVLS): then the least is stage 0's 0 B, and the step, paced by stage 1, still counts its buffer."""

from unittest import mock

import topo

from topo.training import step
from topo.training.comm import CommEngine
from topo.training.gpus import gpu_compute
from topo.training.mapping import default_placement, map_layout
from topo.training.model import load_model
from topo.training.parallel import make_layout

ONE_BUFFER_BYTES = 16 * 2 * 128 * 1024 * 8 * 8
EMBEDDING_OUTPUT_BYTES = 1 * 8192 * 4096 * 2  # b s h x BF16, section 341


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


def _without_the_embedding_all_reduce(real):
    """``step.step_traffic`` with stage 0's embedding all-reduce taken out (stage 0's traffic before section 341)."""
    def traffic(model, lay, stage, *a, **kw):
        items = real(model, lay, stage, *a, **kw)
        return [it for it in items if stage != 0 or it["collective"] != "all_reduce"]
    return traffic


def test_the_stages_differ_in_their_nvls_communicators():
    fabric, engine, gpu, model, lay, mapping = _setup()
    assert step.pace_stages(model, lay) == [0, 1]
    assert step.pipeline_units(model, lay)[0] == ["embedding"]
    first = [it for it in step.step_traffic(model, lay, 0) if it["collective"] == "all_reduce"]
    assert [(it["dim"], it["phase"], it["size_bytes"]) for it in first] == [("tp", "head", EMBEDDING_OUTPUT_BYTES)]
    assert [it["dim"] for it in step.step_traffic(model, lay, 1) if it["collective"] == "all_reduce"] == ["tp"] * 5
    assert _one_stage(engine, model, lay, mapping, gpu, 0) == ONE_BUFFER_BYTES  # the embedding's all-reduce
    assert _one_stage(engine, model, lay, mapping, gpu, 1) == ONE_BUFFER_BYTES
    with mock.patch.object(step, "step_traffic", _without_the_embedding_all_reduce(step.step_traffic)):
        assert _one_stage(engine, model, lay, mapping, gpu, 0) == 0.0
        assert _one_stage(engine, model, lay, mapping, gpu, 1) == ONE_BUFFER_BYTES


def test_the_least_is_the_least_stage_and_bounds_the_step():
    fabric, engine, gpu, model, lay, mapping = _setup()
    assert step.least_nvls_bytes(engine, model, lay, mapping, gpu) == ONE_BUFFER_BYTES  # both stages hold one
    with mock.patch.object(step, "step_traffic", _without_the_embedding_all_reduce(step.step_traffic)):
        assert step.least_nvls_bytes(engine, model, lay, mapping, gpu) == 0.0  # max over the stages: stage 1's
        r = step.estimate_step(fabric, model, lay, engine=engine, contention=False, check=False)
    assert r.memory.nvls_bytes == ONE_BUFFER_BYTES  # the step paces by stage 1 (32 layers) and counts its buffer
