"""A selective replay of a module and of a tag inside it counts the tagged op once (tidy59's leftover 3, section
251): ``recompute_modules = ["mlp", "mlp_wi"]`` replays fc1 (module ``mlp``, tag ``mlp_wi``) once, as Megatron-Core's
checkpointing of the MLP already holds fc1; before, its forward was added twice."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, op_passes_s, stage_compute
from topo.training.parallel import make_layout


def _lay(mods):
    return make_layout(tp=1, dp=8, global_batch=64, recompute="selective", recompute_modules=mods)


def test_mlp_and_mlp_wi_replay_fc1_once():
    model, gpu = load_model("llama3-8b"), gpu_compute("H100")
    one = stage_compute(model, _lay(("mlp",)), gpu).recompute_s
    both = stage_compute(model, _lay(("mlp", "mlp_wi")), gpu).recompute_s
    assert both == pytest.approx(one, rel=1e-12)
    # and the replay is the MLP's forward: fc1, the activation, fc2 (closed form from the block's own ops)
    lay = _lay(("mlp",))
    mlp_fwd = sum(op_passes_s(op, gpu, lay)[0] for op in block_ops(model, lay, "-") if op.module in ("mlp", "mlp_act"))
    assert block_time(model, lay, gpu, "-").recompute_s["mlp"] + block_time(model, lay, gpu, "-").recompute_s.get(
        "mlp_act", 0.0) == pytest.approx(mlp_fwd, rel=1e-12)


def test_mlp_wi_alone_replays_fc1_and_the_activation():
    model, gpu = load_model("llama3-8b"), gpu_compute("H100")
    lay = _lay(("mlp_wi",))
    bt = block_time(model, lay, gpu, "-")
    fc1 = sum(op_passes_s(op, gpu, lay)[0] for op in block_ops(model, lay, "-") if op.tag == "mlp_wi")
    assert fc1 > 0 and bt.recompute_s[("mlp", "mlp_wi")] == pytest.approx(fc1, rel=1e-12)
    assert stage_compute(model, lay, gpu).recompute_s < stage_compute(model, _lay(("mlp",)), gpu).recompute_s
