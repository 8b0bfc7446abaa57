"""The FP8 cast of the BF16 linear weights, once a step (topo/training/fp8_weight_cast.py, findings section 424).

Megatron-Core hands Transformer Engine ``is_first_microbatch`` (NVIDIA/Megatron-LM core_v0.12.0
``megatron/core/extensions/transformer_engine.py`` lines 251-255; ``disable_parameter_transpose_cache`` default
False, ``transformer_config.py`` line 510), so TE casts each weight into its cached FP8 workspace once a step
(NVIDIA/TransformerEngine@bee4649c ``pytorch/module/linear.py`` lines 183-202), row- and column-wise on Hopper: the
BF16 read (2), the FP8 copy and its transpose (1 + 1). Closed form on Llama 2 70B at TP 4, PP 4 (20 layers a GPU):
a layer's linear weights are ``h (h + 2 kv) + h^2 + 3 h ffn`` (QKV with 8 KV heads of 128, the output projection,
SwiGLU's three), a quarter of them on each TP rank. Each pipeline stage casts on its first forward, and the step's first
micro-batch passes every stage's first forward in turn (1F1B's fill), so the step waits for all four stages' casts.
"""

import pytest

import topo
from topo.training.fp8_weight_cast import weight_cast_params, weight_cast_s
from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

H, KV, FFN, TP, LAYERS_A_GPU = 8192, 8 * 128, 28672, 4, 80 // 4
PP = 4
LINEAR = (H * (H + 2 * KV) + H * H + 3 * H * FFN) / TP * LAYERS_A_GPU * PP  # every stage's, on the fill's path


def _lay(**kw):
    base = dict(tp=4, pp=4, dp=4, global_batch=128, seq_len=4096, precision="fp8", sequence_parallel=True)
    return make_layout(**{**base, **kw})


def test_the_gpu_casts_its_linear_weights_and_nothing_else():
    """Every stage's FP8 linear weights, summed along the fill: the closed form (norms, embedding and output layer
    left out); p = 4 times one stage's, the stages alike."""
    assert weight_cast_params(load_model("llama2-70b"), _lay()) == pytest.approx(LINEAR, rel=1e-9)


def test_a_step_casts_each_weight_once_at_a_quantisation_s_bytes():
    """Delayed scaling on Hopper: 4 bytes a parameter once a step; current scaling reads the weight once more for
    its amax (6); fp8_param_gather (weights already FP8) and BF16 cast nothing."""
    m, g = load_model("llama2-70b"), gpu_compute("H100")
    assert weight_cast_s(m, _lay(), g) == pytest.approx(memory_s(g.kernels, 4 * LINEAR), rel=1e-9)
    assert weight_cast_s(m, _lay(fp8_recipe="current"), g) == pytest.approx(memory_s(g.kernels, 6 * LINEAR),
                                                                             rel=1e-9)
    assert weight_cast_s(m, _lay(fp8_param_gather=True), g) == 0.0
    assert weight_cast_s(m, _lay(precision="bf16"), g) == 0.0


def test_the_step_carries_it_on_its_own_line():
    """The step's ``fp8_weight_cast`` line is the cast, and the lines still add up to the step."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))
    m, lay = load_model("llama2-70b"), _lay()
    r = estimate_step(fab, m, lay, contention=False)
    assert r.breakdown_s["fp8_weight_cast"] == pytest.approx(weight_cast_s(m, lay, gpu_compute("H100")), rel=1e-12)
    assert r.breakdown_s["fp8_weight_cast"] > 0
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-12)
