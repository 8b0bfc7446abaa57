"""FP8 parameters gathered at 1 byte (issue 29, Megatron-Core's ``fp8_param_gather``).

With ``fp8_param_gather`` the linear layers' weights are Transformer Engine ``Float8Tensor``s: the distributed
optimizer casts its updated fp32 shard into them (NVIDIA/Megatron-LM ``megatron/core/fp8_utils.py``
``quantize_param_shard``) and the data-parallel all-gather carries their 1-byte elements; the embedding and the
output layer are not FP8 modules and are gathered in BF16. NeMo 2's ``bf16_with_fp8_mixed`` and
``bf16_with_fp8_current_scaling_mixed`` set it (NVIDIA/NeMo@b4148d21
nemo/collections/llm/recipes/precision/mixed_precision.py), as do Megatron-Bridge's."""

import pytest

import topo
from topo.errors import TopoError
from topo.training.model import load_model, model_from_dict
from topo.training.parallel import check_layout, make_layout
from topo.training.step import estimate_step, gather_bytes_per_param, step_traffic
from topo.training.unit_params import unit_bf16_params


def _dp(traffic, coll):
    return [it for it in traffic if it["dim"] == "dp" and it["collective"] == coll]


def _bytes(traffic, coll):
    """A step's bytes of one DP collective: its per-bucket calls x their size."""
    (it,) = _dp(traffic, coll)
    return it["size_bytes"] * it["calls"]


def test_llama3_8b_gathers_its_linears_at_one_byte_and_the_rest_at_two():
    """Llama 3 8B, one stage, ZeRO-1 over 8 GPUs: the gather carries every parameter the reduce-scatter does
    (bf16 gradients: 2 bytes each), the linear layers' at 1 byte and the rest at 2: the embedding and the untied
    output layer (2 x 128,256 x 4,096, the vocabulary of Meta's config.json,
    https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json), the final norm's 4,096 and each of the 32
    layers' two norms (2 x 4,096; Transformer Engine quantizes only a linear's weight,
    ``topo.training.unit_params.unit_bf16_params``): by hand, 2 n - (n - kept) bytes."""
    m = load_model("llama3-8b")
    kw = dict(tp=1, dp=8, global_batch=64, seq_len=8192, precision="fp8", grad_reduce_bytes=2.0)
    on = step_traffic(m, make_layout(fp8_param_gather=True, **kw))
    off = step_traffic(m, make_layout(**kw))
    n = _bytes(on, "reduce_scatter") / 2.0
    ends = 2 * 128_256 * 4_096 + 4_096 + 32 * 2 * 4_096
    assert n == 8_030_261_248  # Llama 3.1 8B: the checkpoint's count (huggingface.co/meta-llama/Llama-3.1-8B: 8.03B)
    assert _bytes(on, "all_gather") == pytest.approx((n - ends) * 1 + ends * 2, rel=1e-12)
    assert _bytes(off, "all_gather") == pytest.approx(2 * n, rel=1e-12)
    # the reduction is unchanged: gradients stay in their reduce dtype
    assert _bytes(on, "reduce_scatter") == _bytes(off, "reduce_scatter")


def test_gather_bytes_per_param_closed_form():
    fp8 = make_layout(dp=8, global_batch=8, precision="fp8", fp8_param_gather=True)
    assert gather_bytes_per_param(fp8, 100.0, 25.0) == pytest.approx((75 * 1 + 25 * 2) / 100)
    assert gather_bytes_per_param(fp8, 100.0) == 1.0
    assert gather_bytes_per_param(make_layout(dp=8, global_batch=8, precision="fp8"), 100.0, 25.0) == 2.0
    # the parameters kept out of FP8 are gathered at the layout's gather bytes (``gather_bytes``, jaxmem48), not the
    # stored ``weight_bytes``: fp32 weights gathered in bf16 with FP8 layers, (75 x 1 + 25 x 2) / 100 (not 25 x 4)
    fp32 = make_layout(dp=8, global_batch=8, precision="fp8", fp8_param_gather=True, weight_bytes=4.0,
                       gather_bytes=2.0)
    assert gather_bytes_per_param(fp32, 100.0, 25.0) == pytest.approx((75 * 1 + 25 * 2) / 100)


def test_fp8_param_gather_needs_fp8():
    m = load_model("llama3-8b")
    check_layout(m, make_layout(tp=8, global_batch=8, precision="fp8", fp8_param_gather=True), gpus=8)
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=8, global_batch=8, fp8_param_gather=True), gpus=8)
    assert e.value.key == "fp8_param_gather" and "precision bf16" in str(e.value)


def test_a_network_bound_gather_is_exposed_less():
    """Nemotron-4 340B at TP8 PP4 VP12 over four DGX H100 nodes of DP (the gather crosses InfiniBand, longer than
    the forward it hides behind): 1-byte weights make its exposed part shorter, the reduction's unchanged."""
    fab = topo.build_fabric(topo.load_spec("dgx-h100-superpod", []))
    m = load_model("nemotron4-340b")
    kw = dict(tp=8, pp=4, vpp=12, dp=4, global_batch=32, seq_len=4096, precision="fp8", sequence_parallel=True,
              overlap_tp=True, overlap_pp=True, grad_reduce_bytes=2.0, grad_bytes=2.0)
    r = {g: estimate_step(fab, m, make_layout(fp8_param_gather=g, **kw), contention=False) for g in (False, True)}
    ex = {g: {c.collective: c.exposed_s for c in r[g].comm if c.dim == "dp"} for g in r}
    assert ex[True]["all_gather"] < 0.75 * ex[False]["all_gather"]
    assert ex[True]["reduce_scatter"] == pytest.approx(ex[False]["reduce_scatter"], rel=1e-9)
    assert r[True].step_time_s < r[False].step_time_s


def test_mxfp8_weights_are_gathered_in_bf16_through_the_gradient_buffer():
    """Megatron-Core maps no param buffer onto an MXFP8Tensor: with the distributed optimizer its param buffer is
    the gradient buffer viewed as torch.bfloat16, the all-gather runs on that view and each weight is cast to MXFP8
    after it (NVIDIA/Megatron-LM@b0cc2706, the submodule of NVIDIA-NeMo/Megatron-Bridge@6b3b5ba7:
    megatron/core/distributed/param_and_grad_buffer.py lines 776-793 and 820, distributed_data_parallel.py line 488;
    topo/data/compute/fp8_params.toml). So Llama 3 8B's MXFP8 gather with ``fp8_param_gather`` carries 2 bytes a
    parameter, as without it, while per-tensor and blockwise scaling carry the layers' at 1."""
    m = load_model("llama3-8b")
    kw = dict(tp=1, dp=8, global_batch=64, seq_len=8192, precision="fp8", grad_reduce_bytes=2.0)
    mx_on = step_traffic(m, make_layout(fp8_param_gather=True, fp8_recipe="mxfp8", **kw))
    mx_off = step_traffic(m, make_layout(fp8_recipe="mxfp8", **kw))
    n = _bytes(mx_on, "reduce_scatter") / 2.0
    assert _bytes(mx_on, "all_gather") == pytest.approx(2 * n, rel=1e-12)
    assert _bytes(mx_on, "all_gather") == _bytes(mx_off, "all_gather")
    ends = 2 * 128_256 * 4_096 + 4_096 + 32 * 2 * 4_096  # the embedding, the output layer and the norms
    for recipe in ("current", "delayed", "blockwise"):
        on = step_traffic(m, make_layout(fp8_param_gather=True, fp8_recipe=recipe, **kw))
        assert _bytes(on, "all_gather") == pytest.approx((n - ends) * 1 + ends * 2, rel=1e-12), recipe
    mx = make_layout(dp=8, global_batch=8, precision="fp8", fp8_param_gather=True, fp8_recipe="mxfp8")
    assert gather_bytes_per_param(mx, 100.0, 25.0) == 2.0


def test_norms_router_and_mamba_scalars_are_gathered_in_bf16():
    """A small hybrid (Mamba-2, attention, MoE) over tp 2, ZeRO-1 over 8, per-tensor FP8 with ``fp8_param_gather``:
    Megatron-Core's DDP groups parameters by dtype (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/distributed/param_and_grad_buffer.py ``group_params_for_buffers`` lines 888-935: a quantized weight
    in a uint8 buffer), and only a Transformer Engine linear's weight is quantized (NVIDIA/TransformerEngine@d0067d0d
    transformer_engine/pytorch/module/base.py lines 1836-1838), so the dense gather carries 1 byte for the linears'
    weights and 2 for the rest, by hand per GPU: the embedding and the output layer 2 x 1,000 x 64 / 2, the final
    norm 64; the Mamba block's norm 64 and, over tp, its convolution (conv_dim 128 + 2 x 2 x 16 = 192 channels,
    kernel 4 and a bias: 192 x 5), A_log, D and dt_bias (3 x 8 heads) and gated norm (d_inner 128); the attention
    block's norm 64; the MoE block's norm 64 and router (4 experts x 64). The experts' gather (their own buffer) is
    all FP8: 1 byte."""
    m = model_from_dict({"name": "tiny", "source": "test", "layers": 3, "hidden": 64, "ffn_hidden": 32, "heads": 4,
                         "kv_heads": 2, "vocab": 1000, "seq_len": 128, "layer_pattern": "M*E",
                         "attention": {"head_dim": 16},
                         "mamba": {"d_state": 16, "head_dim": 16, "num_heads": 8, "groups": 2, "conv_kernel": 4},
                         "moe": {"experts": 4, "active_experts": 2, "shared_experts": 1, "expert_ffn_hidden": 32}},
                        "tiny.toml")
    kw = dict(tp=2, dp=8, ep=2, global_batch=16, seq_len=128, precision="fp8", grad_reduce_bytes=2.0,
              sequence_parallel=True)
    on = step_traffic(m, make_layout(fp8_param_gather=True, fp8_recipe="current", **kw))
    (dense_rs,) = [it for it in _dp(on, "reduce_scatter") if it["groups"] == "dpcp"]
    (dense_ag,) = [it for it in _dp(on, "all_gather") if it["groups"] == "dpcp"]
    (expert_rs,) = [it for it in _dp(on, "reduce_scatter") if it["groups"] == "edp"]
    (expert_ag,) = [it for it in _dp(on, "all_gather") if it["groups"] == "edp"]
    n = dense_rs["size_bytes"] * dense_rs["calls"] / 2.0
    kept = 2 * 1000 * 64 / 2 + 64 + (64 + (192 * 5 + 3 * 8 + 128) / 2) + 64 + (64 + 4 * 64)
    assert dense_ag["size_bytes"] * dense_ag["calls"] == pytest.approx((n - kept) * 1 + kept * 2, rel=1e-12)
    assert expert_ag["size_bytes"] * expert_ag["calls"] == pytest.approx(
        expert_rs["size_bytes"] * expert_rs["calls"] / 2.0, rel=1e-12)
    # an MLA layer's down projections are TE linears (FP8), its latents' norms are not: DeepSeek-V3's attention
    # block keeps its input norm (7,168) and q / kv latents' norms (1,536 + 512) in BF16
    ds = load_model("deepseek-v3-671b")
    assert unit_bf16_params(ds, make_layout(tp=2, dp=8, global_batch=8), "*", False) == 7168 + 1536 + 512
