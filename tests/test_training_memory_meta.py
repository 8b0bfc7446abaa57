"""Meta's Llama 3 405B runs: the pipeline chunks arXiv 2407.21783 sec. 3.3.2 describes, and their memory.

Sec. 3.3.2: "To balance the pipeline, we reduce one Transformer layer each from the first and the last stages,
respectively. This means that the first model chunk on the first stage has only the embedding, and the last model
chunk on the last stage has only output projection and loss calculation. To reduce pipeline bubbles, we use an
interleaved schedule [...] with V pipeline stages on one pipeline rank." With chunks of n layers, a first stage of
the embedding plus V - 1 such chunks holds (V - 1) n layers, one fewer than a stage's V n only when n = 1: one
unit per chunk, V = (126 layers + embedding + loss) / pp = 8 at pp 16, Megatron-Core's layout ``E|(t|)*126L``.
"""

import sys

import pytest

from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.memory import memory_per_gpu
from topo.training.model import load_model
from topo.training.operators import pipeline_units
from topo.training.parallel import make_layout
from topo.training.pipeline_layout import layout_chunks

PP = 16
H100_BYTES = 81_559 * 2**20  # what the driver reports of an 80 GB H100 (topo/data/compute/gpus.toml)


def _meta_8k(**kw):
    # the 8K row of data/reference/training_runs.csv: TP8 PP16 DP64, 2,048 sequences of 8,192, micro-batch 1, no
    # recomputation, FSDP over optimizer states and gradients, the embedding and the loss as pipeline units
    return make_layout(tp=8, pp=PP, dp=64, global_batch=2048, seq_len=8192, dp_sharding="fsdp_grad_op",
                       recompute="none", flash_attention=True, **{"pipeline_embedding": True, **kw})


def _chunks_per_rank_from_the_paper(layers: int, pp: int) -> int:
    """The V that sec. 3.3.2's two sentences leave: for every V, n layers per chunk with the first and last chunk
    only the embedding resp. the loss, and the first stage one layer short of the others."""
    found = [v for v in range(1, layers + 1) for n in range(1, layers + 1)
             if (pp * v - 2) * n == layers and (v - 1) * n == v * n - 1]
    assert len(found) == 1, found
    return found[0]


def test_the_papers_chunks_are_one_unit_each():
    m = load_model("llama3-405b")
    v = _chunks_per_rank_from_the_paper(m.layers, PP)
    assert v == 8 == (m.layers + 2) // PP
    chunks = layout_chunks("E|(t|)*126L", chunks=PP * v, layers=m.layers, mtp_layers=0)
    assert chunks[0] == "E" and chunks[-1] == "L" and set(chunks[1:-1]) == {"t"}
    # at V = 4 the first chunk would hold a layer beside the embedding: that layout has 128 chunks, not 64
    with pytest.raises(TopoError):
        layout_chunks("E|(t|)*126L", chunks=PP * 4, layers=m.layers, mtp_layers=0)
    # topo's even split of the 128 units at V = 8 is that layout: 7 layers on the first and last stage, 8 elsewhere
    even = pipeline_units(m, _meta_8k(vpp=v))
    assert even == pipeline_units(m, _meta_8k(vpp=v, pipeline_embedding=False, pipeline_layout="E|(t|)*126L"))
    assert [sum(u not in ("embedding", "logits") for u in s) for s in even] == [7] + [8] * 14 + [7]


def test_meta_405b_8k_fits_with_the_papers_chunks():
    """Closed form: the second stage's in-flight chunk-micro-batches (Megatron-Core's warm-up 2 (p - i - 1) +
    (v - 1) p plus the one running, NVIDIA/Megatron-LM@d98e8a64 schedules.py lines 955-972) times a layer's saved
    tensors, 31.75 s b h / t for Llama 3 405B (no dropout, flash attention, SwiGLU, 8 KV heads; Korthikanti et al.
    2022 as topo.training.memory generalises it). No chunk's output is counted: Megatron-Core frees its data once
    sent (``deallocate_output_tensor``, schedules.py line 171; NeMo's GPTConfig and Megatron-LM's argument_utils set
    ``deallocate_pipeline_outputs`` true), and Meta "proactively deallocate[s] [...] the input and output tensors of
    each pipeline stage"."""
    m = load_model("llama3-405b")
    s, h, t = 8192, 16384, 8
    per_layer = 31.75 * s * h / t
    # attention: its input, the norm's output, Q, K and V, the projection's input; MLP: its input, the norm's output,
    # SwiGLU's 2f-wide input and f-wide output
    assert 2 + 2 + 2 + 4 * 8 * 128 / h + 2 + 2 + 2 + 6 * m.ffn_hidden / h == 31.75
    at8 = memory_per_gpu(m, _meta_8k(vpp=8), H100_BYTES)
    assert at8.stage == 1
    assert at8.activations_bytes == pytest.approx((2 * (PP - 2) + 7 * PP + 1) * 1 * per_layer)  # 141 one-layer chunks
    # its tensors 82.3 GB, the process's own 1.09 GB (memory_reserve.toml) and NCCL's buffers (mem57: the TP and DP
    # rings, 16 channels x 12 MiB each, and the pipeline sends' two 32 MiB network pools, 0.47 GB): 83.8 GB of 85.5
    assert at8.fits and at8.total_bytes - at8.reserved_bytes - at8.nccl_bytes == pytest.approx(82.3e9, abs=0.05e9)
    assert at8.nccl_bytes == 2 * 16 * 12 * 2**20 + 2 * 16 * 16 * 128 * 1024
    assert at8.total_bytes == pytest.approx(83.8e9, abs=0.05e9)
    at4 = memory_per_gpu(m, _meta_8k(vpp=4), H100_BYTES)
    assert at4.activations_bytes == pytest.approx((2 * (PP - 2) + 3 * PP + 1) * 2 * per_layer)  # 77 two-layer chunks
    assert not at4.fits
    assert at4.total_bytes - at8.total_bytes == pytest.approx((154 - 141) * per_layer)


def test_the_benchmark_reads_metas_rows_with_the_papers_chunks():
    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import training_accuracy

    rows = [r for r in training_accuracy._paper_setups() if r["run"].startswith("llama3_405b")]
    assert len(rows) == 3
    for r in rows:
        assert r["lay"].vpp == 8 and r["lay"].pipeline_embedding, r["run"]
        gpu = gpu_compute(r["gpu"])
        assert memory_per_gpu(r["model"], r["lay"], gpu.memory_bytes, generation=gpu.generation).fits, r["run"]


def _torchtitan_405b(tp: int, micro_batch: int):
    """torchtitan's Llama 3.1 405B preset on 128 GPUs (pytorch/torchtitan@9515a140b, the commit that published the
    run: train_configs/llama3_405b.toml ``seq_len = 8192``, ``batch_size = 2``, ``tensor_parallel_degree = 8``, the
    rest FSDP, activation checkpointing ``full``). Its state: an fp32 model (``--training.dtype`` absent, the model
    built in fp32) sharded by FSDP2 with ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``
    (``config_manager.py`` defaults, ``parallelize_llama.py`` ``apply_fsdp``): 4 + 4 + 8 bytes per parameter,
    gathers of 2; every layer but the last reshards after its forward."""
    return make_layout(tp=tp, dp=128 // tp, micro_batch=micro_batch, global_batch=micro_batch * 128 // tp,
                       seq_len=8192, dp_sharding="zero3", recompute="full", weight_bytes=4.0, grad_bytes=4.0,
                       optimizer_bytes_per_param=8.0, gather_bytes=2.0)


def test_torchtitan_405b_fits_as_it_ran_and_not_as_it_ran_out_of_memory():
    """pytorch/torchtitan@9515a140b docs/performance.md: "Llama 3.1 (405B) on 128 H100 (94GB memory) [...] We do
    see OOM for 1D parallelism (FSDP2), so we only tested 2D parallelism (FSDP2 + Tensor Parallel)", at local
    batch 2 and full activation checkpointing. The 2D run must fit; the 1D one must not, at the batch that ran in 2D
    and at the smallest (the page does not say which batch ran out of memory)."""
    m = load_model("llama3-405b")
    cap = 94e9
    ran = memory_per_gpu(m, _torchtitan_405b(8, 2), cap)
    assert ran.fits
    # 16 bytes of 405e9 parameters over 128 GPUs either way: the layouts differ in activations, not in state
    state = ran.weights_bytes + ran.gradients_bytes + ran.optimizer_bytes
    h, kv, f, v = 16384, 8 * 128, 53248, 128256  # vocab_size: huggingface.co/meta-llama/Llama-3.1-405B config.json
    n = 126 * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + 2 * v * h + h  # Q, O, K, V, SwiGLU, norms; two tables
    assert n == 405_853_388_800  # the checkpoint's count (Hugging Face's safetensors total for Llama-3.1-405B)
    # each of the 8 TP ranks holds the 2 x 126 + 1 norms whole (torchtitan's TP plan: SequenceParallel(), whose
    # parameters stay replicated, torch.distributed.tensor.parallel.style),
    # so a replica holds 7 x 253 h more than the checkpoint (mla78, findings 365)
    norms = (2 * 126 + 1) * h
    assert state == pytest.approx(16 * (n + 7 * norms) / 128, rel=1e-3)
    for b in (1, 2):
        oom = memory_per_gpu(m, _torchtitan_405b(1, b), cap)
        assert not oom.fits, b
        oom_state = oom.weights_bytes + oom.gradients_bytes + oom.optimizer_bytes
        assert oom_state == pytest.approx(16 * n / 128, rel=1e-3)
        assert state - oom_state == pytest.approx(16 * 7 * norms / 128, rel=1e-6)
