"""Memory per GPU against Korthikanti et al. 2022 and the planner's seed figures."""

import pytest

from topo.training.parallel import make_layout
from topo.training.memory import activation_bytes_per_layer, memory_per_gpu
from topo.training.model import load_model


def test_korthikanti_table2_gpt():
    # Korthikanti et al. 2022, Table 2: TP + SP, no recomputation: s b h (34 + 5 a s / h) / t
    m = load_model("megatron-gpt-18b")
    s, b, h, a = m.seq_len, 2, m.hidden, m.heads
    for t in (1, 2, 8):
        lay = make_layout(global_batch=2, micro_batch=2, tp=t, flash_attention=False)
        assert activation_bytes_per_layer(m, lay) == pytest.approx(s * b * h * (34 + 5 * a * s / h) / t)
        sel = make_layout(global_batch=2, micro_batch=2, tp=t, flash_attention=False, recompute="selective")
        assert activation_bytes_per_layer(m, sel) == pytest.approx(s * b * h * 34 / t)
        full = make_layout(global_batch=2, micro_batch=2, tp=t, recompute="full")
        assert activation_bytes_per_layer(m, full) == pytest.approx(2 * s * b * h / t)
    # tensor parallelism without SP: s b h (10 + 24/t + 5 a s/(h t))
    lay = make_layout(global_batch=2, micro_batch=2, tp=8, flash_attention=False, sequence_parallel=False)
    assert activation_bytes_per_layer(m, lay) == pytest.approx(s * b * h * (10 + 24 / 8 + 5 * a * s / (h * 8)))


def test_seed_pure_dp_state_of_a_1p8t_model():
    # data/reference/planner.md: "weights, optimizer state and activations can total 10.8 TB (for a
    # ~1.8T-parameter model that is 6 bytes per parameter)": pure data parallelism keeps it all on a replica
    m = load_model("gpt4-1.8t-moe")
    lay = make_layout(global_batch=8, dp=1, weight_bytes=2, grad_bytes=2, optimizer_bytes=2, dp_sharding="none",
                      recompute="full")
    mem = memory_per_gpu(m, lay, 80e9)
    state = mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes
    assert state / 1e12 == pytest.approx(10.8, rel=0.01)
    assert not mem.fits and mem.short_bytes > 10e12


def test_seed_tp8_divides_weights_by_8():
    # planner question: TP=8 over NVLink divides the weights per GPU by 8
    m = load_model("gpt4-1.8t-moe")
    one = memory_per_gpu(m, make_layout(global_batch=8), 80e9)
    tp8 = memory_per_gpu(m, make_layout(global_batch=8, tp=8), 80e9)
    assert one.weights_bytes / tp8.weights_bytes == pytest.approx(8, rel=2e-4)  # the tiny router stays whole


def test_zero_stages_shard_state():
    m = load_model("llama3-70b")
    kw = dict(global_batch=64, dp=64, tp=8)
    z = {s: memory_per_gpu(m, make_layout(dp_sharding=s, **kw), 80e9) for s in ("none", "zero1", "zero2", "zero3")}
    assert z["zero1"].optimizer_bytes == pytest.approx(z["none"].optimizer_bytes / 64)
    assert z["zero1"].gradients_bytes == z["none"].gradients_bytes
    assert z["zero2"].gradients_bytes == pytest.approx(z["none"].gradients_bytes / 64)
    assert z["zero3"].weights_bytes < z["none"].weights_bytes / 8


def test_pipeline_in_flight_interleaved():
    # Korthikanti sec. 4.2.3: the first stage holds L (1 + (p-1)/(p v)) layers' activations of one micro-batch
    m = load_model("megatron-gpt-146b")
    kw = dict(global_batch=64, pp=8, dp=1, recompute="full")
    per_layer = activation_bytes_per_layer(m, make_layout(**kw))
    plain = memory_per_gpu(m, make_layout(**kw), 80e9).activations_bytes
    inter = memory_per_gpu(m, make_layout(vpp=2, **kw), 80e9).activations_bytes
    assert plain == pytest.approx(m.layers * per_layer)
    assert inter == pytest.approx(m.layers * per_layer * (1 + 7 / 16))


def test_no_dropout_no_masks():
    # the same GPT layer without dropout: the two 1-byte masks go (34 -> 32) and the attention scores keep only
    # the softmax output (5 a s / h -> 2 a s / h)
    from topo.training.model import model_from_dict

    gpt = load_model("megatron-gpt-18b")
    plain = model_from_dict({**gpt.model_dump(), "dropout": False})
    s, b, h, a = gpt.seq_len, 1, gpt.hidden, gpt.heads
    lay = make_layout(global_batch=1, flash_attention=False)
    assert activation_bytes_per_layer(plain, lay) == pytest.approx(s * b * h * (32 + 2 * a * s / h))
