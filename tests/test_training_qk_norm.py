"""Qwen3's QK-Norm (issue 29): an RMSNorm over each query and each key head ("Qwen3 Technical Report", arXiv
2505.09388 sec. 2; Megatron-Core's ``qk_layernorm``, ``q_layernorm`` / ``k_layernorm`` in
``SelfAttention.get_query_key_value_tensors``, NVIDIA/Megatron-LM@c2d1a8f7e5), priced as every norm of topo: the
elements read and written once forward (2 + 2 bytes in BF16), twice that backward, one kernel for Q and one for K."""

import pytest

from topo.training.gpus import gpu_compute
from topo.training.kernels import memory_s
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, op_time_s
from topo.training.parallel import make_layout


def _qk(model, lay):
    return [op for op in block_ops(model, lay, "*") if op.name == "qk_norm"]


def test_qwen3_norms_each_query_and_key_head():
    """Qwen3-30B-A3B (32 query heads, 4 KV heads of 128), one 4,096-token sequence: 36 x 128 x 4,096 elements at
    4 bytes forward; under TP 4, 8 query heads and 1 KV head a rank."""
    qwen = load_model("qwen3-30b-a3b")
    assert qwen.attention.qk_norm and load_model("qwen3-235b-a22b").attention.qk_norm
    (op,) = _qk(qwen, make_layout(dp=8, ep=8, global_batch=64, seq_len=4096))
    assert op.bytes == pytest.approx(4 * 4096 * (32 + 4) * 128) and op.launches == 2
    (tp4,) = _qk(qwen, make_layout(tp=4, dp=2, ep=8, global_batch=64, seq_len=4096))
    assert tp4.bytes == pytest.approx(4 * 4096 * (8 + 1) * 128)
    g = gpu_compute("H100")
    fwd = op_time_s(op, g, "bf16")
    # at the norm kernel's published share of HBM (cuDNN's RMSNorm, kernels.toml [memory.kernel_TBps.norm], section 432)
    assert fwd == pytest.approx(memory_s(g.kernels, 4 * 4096 * 36 * 128, op="qk_norm") + 2 * g.kernels.launch_gpu_s)
    # backward: 1.5 x the bytes at TE's backward rate, 0.938 of the forward's (kernels.toml, section 446)
    assert op_time_s(op, g, "bf16", backward=True) == pytest.approx(
        1.5 * 2.742 / 2.572 * (fwd - 2 * g.kernels.launch_gpu_s) + 2 * g.kernels.launch_gpu_s)


def test_models_without_qk_norm_have_none_and_the_block_pays_it():
    """Llama 3 has no QK-Norm; Qwen3's attention block grows by the norm's time, forward and backward."""
    lay = make_layout(dp=8, global_batch=64, seq_len=4096)
    assert not _qk(load_model("llama3-8b"), lay)
    qwen = load_model("qwen3-30b-a3b")
    plain = qwen.model_copy(update={"attention": qwen.attention.model_copy(update={"qk_norm": False})})
    g = gpu_compute("H100")
    on, off = block_time(qwen, lay, g, "*"), block_time(plain, lay, g, "*")
    (op,) = _qk(qwen, lay)
    assert on.forward_s - off.forward_s == pytest.approx(op_time_s(op, g, "bf16"))
    assert on.backward_s - off.backward_s == pytest.approx(op_time_s(op, g, "bf16", backward=True))


def test_mla_norms_its_two_latents():
    """DeepSeek-V3 (q_lora_rank 1,536, kv_lora_rank 512): the latents' RMSNorms over every token the
    down-projections see, 4 bytes an element forward; Kimi-K2 alike. The down-projections are whole on each TP rank
    and take the block's input as it is (NVIDIA/Megatron-LM@d98e8a64 multi_latent_attention.py lines 638-664,
    "q_compressed: [s / TP, b, q_lora_rank]"): under TP 2 with sequence parallelism the rank's 4,096 / 2 tokens,
    without it all 4,096 (mla77)."""
    ds = load_model("deepseek-v3-671b")
    assert ds.attention.qk_norm and load_model("kimi-k2").attention.qk_norm
    (op,) = _qk(ds, make_layout(tp=2, dp=4, ep=8, global_batch=64, seq_len=4096))
    assert op.bytes == pytest.approx(4 * 4096 / 2 * (1536 + 512)) and op.launches == 2
    (whole,) = _qk(ds, make_layout(tp=2, dp=4, ep=8, global_batch=64, seq_len=4096, sequence_parallel=False))
    assert whole.bytes == pytest.approx(4 * 4096 * (1536 + 512))


@pytest.mark.parametrize("key, value", [("qk_norm", "yes"), ("qk_norm", 1), ("rope", "false"), ("rope", 0)])
def test_a_model_files_flag_is_true_or_false(key, value):
    """A model file's booleans take true or false only (rev39): ``qk_norm = "yes"`` or ``1`` was read as true."""
    from topo.errors import TopoError
    from topo.training.model import model_from_dict
    base = load_model("qwen3-30b-a3b").model_dump()
    with pytest.raises(TopoError) as e:
        model_from_dict({**base, "attention": {**base["attention"], key: value}}, "my.toml")
    assert str(e.value).splitlines() == [f"my.toml: attention.{key}: must be true or false, got {value!r}"]
    for top in ("tied_embeddings", "dropout"):
        with pytest.raises(TopoError, match=f"{top}: must be true or false"):
            model_from_dict({**base, top: value}, "my.toml")


def test_a_bad_qk_norm_exits_2_with_one_line(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT
    src = (ROOT / "topo" / "data" / "models" / "qwen3-30b-a3b.toml").read_text()
    assert src.count("qk_norm = true") == 1
    bad = tmp_path / "qwen3-bad.toml"
    bad.write_text(src.replace("qk_norm = true", 'qk_norm = "yes"'))
    p = subprocess.run([sys.executable, "-m", "topo", "train", "dgx-h100-superpod", "--model", str(bad), "--gpus", "8",
                        "--global-batch", "8", "--layout", "ep=8,dp=8"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [f"error: {bad}: attention.qk_norm: must be true or false, got 'yes'"]
