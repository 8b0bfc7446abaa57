"""PyTorch FSDP2's copies around each unit's all-gather and reduce-scatter (``wgrad_output = "fsdp2"``, ZeRO-3),
counted as kernels and HBM bytes from the implementation (pytorch/pytorch@010ae4a8
``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``: ``foreach_all_gather``'s one ``all_gather_copy_in``
``_foreach_copy_`` on the copy-in stream, ``foreach_all_gather_copy_out``'s one ``split_with_sizes_copy`` on the
compute stream, ``foreach_reduce``'s one ``chunk_cat``; ``_fsdp_param_group.py`` ``get_all_gather_streams``: the
copy-in runs on ``all_gather_copy_in_stream`` in the forward and pre-backward)."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, stage_compute
from topo.training.parallel import make_layout

H100 = gpu_compute("H100")


def _lay(**kw):
    base = dict(dp=64, global_batch=128, dp_sharding="fsdp", weight_bytes=2.0, grad_bytes=2.0)
    return make_layout(**{**base, **kw})


def _extra(model, kind, lay):
    """What FSDP2's copies add to one block of ``kind``: forward, backward GPU seconds; forward, backward host
    seconds (against the same layout without the ZeRO-3 gathers' copies: FSDP2's gradient writes kept)."""
    a = block_time(model, lay, H100, kind)
    b = block_time(model, lay.model_copy(update={"dp_sharding": "zero2"}), H100, kind)
    return (a.forward_s - b.forward_s, a.backward_s - b.backward_s, a.host_s - b.host_s,
            a.host_backward_s - b.host_backward_s)


def test_a_dense_layer_copies_out_its_gathered_weights_once_a_gather():
    # Llama 3 70B, dp 64, FSDP2: a layer (attention + MLP) is one unit. Its attention block's weights: Q and O 8,192
    # x 8,192, K and V 8,192 x 1,024 (GQA, 8 KV heads of 128) and its norm: 151,003,136 parameters; the MLP's
    # 3 x 8,192 x 28,672 + 8,192 = 704,651,264. split_with_sizes_copy reads the gathered bf16 and writes the bf16
    # parameters: 4 bytes a parameter, on the compute stream, before the forward and again before the backward
    # (reshard_after_forward, FSDP2's default); one copy-out, one copy-in and one chunk_cat per layer and
    # gather or reduce, the layer's two blocks carrying half each
    m = load_model("llama3-70b")
    lay = _lay(wgrad_output="fsdp2")
    km = H100.kernels
    attn, mlp = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 8192, 3 * 8192 * 28672 + 8192
    for kind, params in (("*", attn), ("-", mlp)):
        f, b, hf, hb = _extra(m, kind, lay)
        assert f == pytest.approx(memory_s(km, 4 * params) + 0.5 * km.launch_gpu_s, rel=1e-9)
        assert b == pytest.approx(memory_s(km, 4 * params) + (0.5 + 0.5) * km.launch_gpu_s, rel=1e-9)
        assert hf == pytest.approx((0.5 + 0.5) * km.launch_host_s, rel=1e-9)  # copy-out + copy-in
        assert hb == pytest.approx((0.5 + 0.5 + 0.5) * km.launch_host_s, rel=1e-9)  # + chunk_cat
    # kept from forward to backward (reshard_after_forward = False): no second gather, only the reduce's chunk_cat
    kept = lay.model_copy(update={"fsdp_reshard_after_forward": False})
    f, b, hf, hb = _extra(m, "-", kept)
    assert b == pytest.approx(0.5 * km.launch_gpu_s, rel=1e-9) and hb == pytest.approx(0.5 * km.launch_host_s)
    assert f == pytest.approx(memory_s(km, 4 * mlp) + 0.5 * km.launch_gpu_s, rel=1e-9)


def test_an_moe_block_copies_its_experts_unit_too_and_other_frameworks_none():
    # Qwen3 30B-A3B at EP 8: the MoE block carries half its layer's dense unit (router 2,048 x 128 and the norm)
    # and the experts' own unit (128 / 8 = 16 experts of 3 x 2,048 x 768): 1.5 copy-outs a gather
    m = load_model("qwen3-30b-a3b")
    lay = _lay(wgrad_output="fsdp2", ep=8)
    ops = {o.name: o for o in block_ops(m, lay, "E") if o.module == "fsdp"}
    experts, dense = 16 * 3 * 2048 * 768, 2048 * 128 + 2048
    assert ops["fsdp_copy_out"].bytes == pytest.approx(4 * (experts + dense))
    assert ops["fsdp_copy_out"].launches == ops["fsdp_copy_in"].launches == 1.5
    assert ops["fsdp_copy_in"].side_stream and ops["fsdp_copy_in"].bytes == 0
    assert ops["fsdp_copy_out_bwd"].launches == 3.0  # copy-out and chunk_cat, each 1.5
    # Megatron's gradient buffers (main_grad) and ZeRO-1/2 gather no units: no FSDP2 copies
    for other in (_lay(ep=8), _lay(ep=8, wgrad_output="fsdp2", dp_sharding="zero1")):
        assert not [o for o in block_ops(m, other, "E") if o.module == "fsdp"]


def test_full_recomputation_does_not_repeat_the_copies():
    # the backward's gather has its own copy-out; a recomputed forward runs on those weights, copying nothing
    m = load_model("llama3-70b")
    lay = _lay(wgrad_output="fsdp2", recompute="full")
    kept = lay.model_copy(update={"dp_sharding": "zero2"})
    sc, sc0 = stage_compute(m, lay, H100), stage_compute(m, kept, H100)
    assert sc.recompute_s == pytest.approx(sc0.recompute_s, rel=1e-12)
    assert sc.forward_s > sc0.forward_s


def test_the_copy_out_moves_the_gathered_dtype_not_the_stored_one():
    # rev49: fp32 shards gathered in bf16 (weight_bytes 4, gather_bytes 2, as FSDP2's MixedPrecisionPolicy
    # param_dtype = bf16 casts before the all-gather): split_with_sizes_copy reads and writes the gathered bf16
    # tensors, 2 x 2 bytes a parameter (the memory model's gathered units take the same gather_bytes); it took
    # the stored 4 bytes, 2 x 4, before
    m = load_model("qwen3-30b-a3b")
    lay = _lay(wgrad_output="fsdp2", ep=8, weight_bytes=4.0, gather_bytes=2.0)
    ops = {o.name: o for o in block_ops(m, lay, "E") if o.module == "fsdp"}
    experts, dense = 16 * 3 * 2048 * 768, 2048 * 128 + 2048
    assert ops["fsdp_copy_out"].bytes == pytest.approx(2 * 2 * (experts + dense))
