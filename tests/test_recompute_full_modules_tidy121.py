"""Under ``recompute = "full"`` the layout's ``recompute_modules`` recompute nothing, also in the layers past
``recompute_num_layers`` (tidy121, docs/calibration-findings.md section 443; walk43's section 440, Left 3).

Megatron-Core gates every module's checkpoint on ``recompute_granularity == 'selective'`` (NVIDIA/Megatron-LM@d98e8a64
``megatron/core/transformer/transformer_layer.py`` line 473, ``attention.py`` lines 393-394, ``moe/moe_layer.py``
lines 248-255, ``moe/experts.py`` lines 270-271), and under full granularity with the ``block`` method runs the
layers past the first N with no checkpoint (``megatron/core/recompute.py`` lines 167-181). So those layers keep
every activation and replay nothing: the step, the memory and the header say the same with or without the modules.
Before, topo recomputed the modules there (Nemotron 3 Nano, 10 layers full, ``mamba``, since refused by tidy122:
699.65 ms and 23.41 GB of activations against 668.90 ms and 28.87 GB without it)."""

from __future__ import annotations

import pytest

import topo
from topo.training.activation_bytes import modules_recomputed
from topo.training.memory import memory_per_gpu
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

NANO = "nemotron-3-nano-30b-a3b"
H100_BYTES = 80e9


def _lay(**kw):
    return make_layout(tp=1, dp=8, ep=8, global_batch=8, **kw)


@pytest.fixture(scope="module")
def priced():
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    m = load_model(NANO)

    def run(**kw):
        lay = _lay(**kw)
        return estimate_step(fabric, m, lay).step_time_s, memory_per_gpu(m, lay, H100_BYTES).activations_bytes
    return run


@pytest.mark.parametrize("mods", [("layernorm",), ("moe",), ("moe_act", "layernorm")])  # tidy122: no mamba
def test_the_layers_past_n_recompute_no_module(priced, mods):
    assert priced(recompute="full", recompute_num_layers=10, recompute_modules=mods) == priced(
        recompute="full", recompute_num_layers=10)


def test_the_modules_still_recompute_without_full(priced):
    # the same modules without full recomputation (topo's "none" with modules: Megatron-Core's selective) do work:
    # the test above compares a priced difference, not two idle settings
    t_sel, act_sel = priced(recompute_modules=("moe",))
    t_none, act_none = priced()
    assert t_sel > t_none and act_sel < act_none


def test_early_stop_with_the_moe_module_is_early_stop(priced):
    # every layer whole: a checkpointed moe module does not keep the replay's combine (Megatron-Core builds none)
    assert priced(recompute="full", recompute_early_stop=True, recompute_modules=("moe",)) == priced(
        recompute="full", recompute_early_stop=True)


def test_the_rule():
    assert modules_recomputed(_lay(recompute="full", recompute_modules=("moe",))) == ()
    assert modules_recomputed(_lay(recompute="selective", recompute_modules=("moe",))) == ("moe",)
    assert modules_recomputed(_lay(recompute_modules=("mlp",))) == ("mlp",)
