"""The word embedding's weight gradient, and the MTP stage's own embedding lookup (issue 29, dsv3last73).

PyTorch's ``F.embedding`` backward returns a dense gradient of the rank's whole vocabulary shard, zero-filled in
the weight's dtype, with the tokens' rows added (pytorch/pytorch@1c94016e ``aten/src/ATen/native/cuda/Embedding.cu``
``embedding_dense_backward_cuda``, @01b9dc56 ``EmbeddingBackwardKernel.cu``: ``at::zeros({num_weights, ...},
grad.options())``); Megatron-LM's DDP hook then adds it into ``main_grad`` (NVIDIA/Megatron-LM@7094270c
``megatron/core/distributed/distributed_data_parallel.py`` lines 412-416). Megatron-Core builds an embedding on the
MTP stage and looks up the shifted tokens there once per depth (@7094270c ``gpt_model.py`` lines 131-137,
``multi_token_prediction.py`` ``MultiTokenPredictionBlock.forward``). topo priced neither: the embedding's backward
was its lookup's bytes twice, and the MTP head had no lookup.
"""

from __future__ import annotations

import pytest

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_ops, op_passes_s
from topo.training.parallel import make_layout

V, H, T = 129_280, 7168, 4096  # DeepSeek-V3's vocabulary and hidden size, one 4,096-token micro-batch


def _dsv3_h100_layout(**kw):
    # dgxc2505_h100_deepseekv3_bf16_512's layout: TP2 + SP, PP8, EP64, FP32 main_grad (Megatron-LM's default)
    return make_layout(tp=2, pp=8, dp=32, ep=64, global_batch=4096, seq_len=T, sequence_parallel=True, **kw)


def _op(ops, name):
    (op,) = [o for o in ops if o.name == name]
    return op


def test_embedding_wgrad_bytes_are_the_dense_shard_and_the_token_rows():
    m, lay = load_model("deepseek-v3-671b"), _dsv3_h100_layout()
    assert lay.wgrad_output == "main_grad" and lay.grad_bytes == 4.0
    op = _op(block_ops(m, lay, "embedding"), "embedding_wgrad")
    # the V/2 x h shard: zero-filled in BF16 (2), read by main_grad.add_ (2), main_grad read and written (4 + 4);
    # the 4,096 tokens' rows: BF16 gradient read (2), FP32 partial sums written and read (4 + 4), rows written (2)
    assert op.bytes == V / 2 * H * (2 + 2 + 4 + 4) + T * H * (2 + 4 + 4 + 2) == 5_912_395_776
    assert op.passes == "backward" and op.launches == 10 + 1  # sort path's launch sites + the add


def test_a_gradient_written_once_is_filled_at_its_bytes_and_copied():
    # PyTorch FSDP2 (NeMo AutoModel, torchtitan): a BF16 dense gradient (2), then FSDP2's chunk_cat into the
    # reduce-scatter buffer (2 read, reduce_bytes written), as operators.wgrad_kw prices a weight-gradient GEMM's
    m = load_model("deepseek-v3-671b")
    lay = make_layout(tp=1, dp=8, global_batch=8, seq_len=T, wgrad_output="fsdp2", grad_reduce_bytes=4.0)
    op = _op(block_ops(m, lay, "embedding"), "embedding_wgrad")
    assert op.bytes == V * H * (2 + 2 + 4) + T * H * 12
    assert op.launches == 10  # no main_grad add


def test_the_mtp_head_looks_up_the_shifted_tokens_and_concatenates():
    m, lay = load_model("deepseek-v3-671b"), _dsv3_h100_layout()
    head = block_ops(m, lay, "mtp_head")
    names = [o.name for o in head]
    assert names[:2] == ["embedding", "embedding_wgrad"]
    assert _op(head, "embedding_wgrad") == _op(block_ops(m, lay, "embedding"), "embedding_wgrad")
    cat = _op(head, "mtp_concat")  # torch.cat of two [s/TP, b, h] BF16 tensors into [s/TP, b, 2h]
    assert cat.bytes == 2 * (T / 2) * H * 2 + (T / 2) * 2 * H * 2
    assert cat.passes == "forward"


@pytest.mark.parametrize("kind", ["embedding", "mtp_head"])
def test_the_weight_gradient_prices_backward_only(kind):
    m, lay = load_model("deepseek-v3-671b"), _dsv3_h100_layout()
    fwd, bwd = op_passes_s(_op(block_ops(m, lay, kind), "embedding_wgrad"), gpu_compute("H100"), lay)
    assert fwd == 0.0
    assert bwd > 5.9e9 / 3.35e12  # at least the bytes at H100 SXM's published 3.35 TB/s
