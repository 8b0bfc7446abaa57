"""LatentMoE (super80): Nemotron 3 Super's MoE blocks project each token from ``hidden`` down to ``latent_size``
before the dispatch and back after the combine (NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/moe/
moe_layer.py lines 266-304, 466-491, 591-592), the routed experts run at the latent width (moe/experts.py lines 219,
241), the router and the shared expert at hidden (transformer/mlp.py lines 215-220). Each figure below is a closed
form of those shapes, or the model card's count."""

import pytest

from topo.errors import TopoError
from topo.training.model import Block, load_model, model_from_dict
from topo.training.operators import block_ops, latent_proj_ops
from topo.training.parallel import make_layout
from topo.training.step import _is_ep_a2a, step_traffic
from topo.training.unit_params import block_params_on_gpu

H, L, F, K, E, FS = 4096, 1024, 2688, 22, 512, 5376  # hidden, latent, expert FFN, top-k, experts, shared FFN


@pytest.fixture(scope="module")
def sup():
    return load_model("nemotron-3-super-120b-a12b")


@pytest.fixture(scope="module")
def unlatent(sup):
    """Nemotron 3 Super's shape without the latent: the experts at hidden."""
    data = sup.model_dump(exclude_none=True)
    data["moe"].pop("latent_size")
    return model_from_dict(data, "unlatent.toml")


def test_the_parameter_count_is_the_model_cards(sup):
    # Megatron-Bridge@067f987d examples/model_verification_cards/nemotron-3-super-120b-a12b/card.yaml
    # hf_to_megatron_gpu: "all 42,683 source tensors and 123,611,033,088 elements" (the MTP layer and the 41 FP32
    # router correction biases included)
    assert sup.total_params + sup.mtp_params == 123_611_033_088


def test_an_moe_blocks_weights_are_the_latent_shapes(sup):
    # routed experts 2 l f each (squared ReLU: fc1 l -> f, fc2 f -> l), the shared expert 2 h fs, the projections
    # 2 h l, the router h E and its E biases, the norm h (theoretical_memory_usage.py lines 104-126 at d98e8a64)
    assert sup.expert_params == 2 * L * F
    assert sup.latent_proj_params == 2 * H * L
    assert sup.block_params(Block.MOE) == E * 2 * L * F + 2 * H * FS + 2 * H * L + H * E + E + H


def test_latent_projections_are_held_whole_on_each_tp_rank(sup):
    lay = make_layout(tp=2, ep=64, etp=1, dp=32, global_batch=512, seq_len=8192, sequence_parallel=True)
    dense, expert = block_params_on_gpu(sup, lay, Block.MOE)
    # parallel_mode="duplicated": fc1/fc2_latent_proj whole, the shared expert split over TP, the router and norm whole
    assert dense == pytest.approx(2 * H * FS / 2 + 2 * H * L + H * E + H)
    assert expert == pytest.approx(E / 64 * 2 * L * F)


def test_moe_forward_flops_are_megatron_lms_latent_formula(sup, unlatent):
    # Megatron-LM@d98e8a64 training.py moe_layer_flops (lines 846-860): routed 4 T l f k, plus 4 T h l for the up
    # and down projections, shared 4 T h fs (forward, per token T = 1)
    lay = make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=8192, moe_routing="consecutive")
    ops = {op.name: op for op in block_ops(sup, lay, Block.MOE) if op.module == "moe"}  # not the shared expert's
    t = 8192  # the rank's tokens (TP 1)
    assert ops["fc1"].k == L and ops["fc2"].n == L and ops["fc1"].n == F  # the experts at the latent width
    assert ops["fc1_latent_proj"].m == t and (ops["fc1_latent_proj"].n, ops["fc1_latent_proj"].k) == (L, H)
    assert (ops["fc2_latent_proj"].n, ops["fc2_latent_proj"].k) == (H, L)
    routed = ops["fc1"].flops + ops["fc2"].flops
    assert routed == pytest.approx(4 * t * L * F * K)
    latent = sum(op.flops for op in latent_proj_ops(sup, t))
    assert latent == 4 * t * H * L
    assert not latent_proj_ops(unlatent, t)


def test_dispatch_bytes_are_the_latent_width(sup, unlatent):
    # the all-to-all carries the fc1_latent_proj output (moe_layer.py preprocess: project, then
    # dispatch_preprocess): l / h of the unprojected tokens' bytes
    lay = make_layout(ep=8, dp=8, global_batch=64, micro_batch=1, seq_len=8192, moe_routing="consecutive")

    def a2a_bytes(model):
        return sum(c["size_bytes"] * c["calls"] for c in step_traffic(model, lay) if _is_ep_a2a(c))

    assert a2a_bytes(sup) == pytest.approx(a2a_bytes(unlatent) * L / H)


@pytest.mark.parametrize("value", [0, -1024, 1024.5, "1024"])
def test_a_bad_latent_size_says_one_line(sup, value):
    data = sup.model_dump(exclude_none=True)
    data["moe"]["latent_size"] = value
    with pytest.raises(TopoError) as err:
        model_from_dict(data, "super.toml")
    text = str(err.value)
    assert "latent_size" in text and "super.toml" in text and "\n" not in text and "Traceback" not in text
