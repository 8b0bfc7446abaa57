"""The header's recomputation says what the step prices when ``--recompute full`` meets ``--recompute-modules``
(walk43, docs/calibration-findings.md section 440): every layer recomputed whole leaves the modules nothing to do
(Megatron-Core reads ``recompute_modules`` only under selective granularity, NVIDIA/Megatron-LM
megatron/core/transformer/transformer_config.py ``__post_init__``), and the header said "recompute full" with no word
of the modules given. With ``--recompute-num-layers N`` the layers past the first N recompute nothing either
(tidy121, section 443: Megatron-Core's block method runs them with no checkpoint and no module recomputation;
``topo.training.activation_bytes.modules_recomputed``)."""

from __future__ import annotations

import topo
from topo.cli.train import _recompute
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

NANO = "nemotron-3-nano-30b-a3b"


def _lay(**kw):
    return make_layout(tp=1, dp=8, ep=8, global_batch=8, recompute="full", **kw)


def test_the_header_names_the_modules_and_what_they_do():
    m = load_model(NANO)
    assert _recompute(_lay().model_dump(), m) == ", recompute full"
    assert _recompute(_lay(recompute_modules=("moe", "moe_act")).model_dump(), m) == (
        ", recompute full (recompute modules moe, moe_act: no effect, every layer is recomputed whole)")
    assert _recompute(_lay(recompute_num_layers=10, recompute_modules=("moe",)).model_dump(), m) == (
        ", recompute full (the first 10 layers of each stage; recompute modules moe: no effect, Megatron-Core "
        "recomputes no module under full recomputation, the other layers keep every activation)")  # tidy121
    assert _recompute(_lay(recompute_num_layers=10).model_dump(), m) == (
        ", recompute full (the first 10 layers of each stage)")


def test_the_words_match_the_step():
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model(NANO)

    def step(**kw):
        return estimate_step(fabric, m, _lay(**kw)).step_time_s

    assert step(recompute_modules=("moe",)) == step()  # no effect: every layer whole
    # tidy121: nor in the layers past the first N (tests/test_recompute_full_modules_tidy121.py)
    assert step(recompute_num_layers=10, recompute_modules=("moe",)) == step(recompute_num_layers=10)
