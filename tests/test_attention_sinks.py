"""gpt-oss's attention sinks: the kernel Transformer Engine picks at a container's cuDNN, and its cost.

Sources: NVIDIA/TransformerEngine v2.9 (70f53666) transformer_engine/common/fused_attn/fused_attn.cpp lines 370-375
(cuDNN's sub-backend takes a sink from cuDNN 9.13.1) and dot_product_attention/utils.py "Filter: Softmax type"
(no FlashAttention; context parallelism only under a2a); the containers' cuDNN from cudnn_releases.toml (NeMo 25.09:
9.11.0.98, NeMo 25.11: 9.13.1.26, NVIDIA-NeMo/Megatron-Bridge@2075a5b8 docs/releases/software-versions.md).
"""

import pytest

from conftest import run_cli

from topo.errors import TopoError
from topo.training.attention_sinks import sink_backend
from topo.training.cudnn import release_cudnn
from topo.training.model import load_model, model_from_dict
from topo.training.operators import block_ops
from topo.training.parallel import make_layout


def test_the_backend_follows_the_container_s_cudnn():
    """NeMo 25.09's container (cuDNN 9.11) runs sink attention unfused, NeMo 25.11's (9.13.1) and later cuDNN's
    fused kernel; 9.13.0 is still below the 9.13.1 that TE's condition names (cudnn_runtime_version >= 91301)."""
    assert sink_backend("learnable", release_cudnn("NeMo 25.09")) == "unfused"
    assert sink_backend("learnable", release_cudnn("NeMo 25.11")) == "fused"
    assert sink_backend("learnable", release_cudnn("NeMo 26.02")) == "fused"
    assert sink_backend("learnable", "9.13.0") == "unfused"
    assert sink_backend("none", "9.11.0.98") == "none"
    assert sink_backend("learnable", "9.18.0.50", cp=2, cp_comm_type="a2a") == "fused"


def _ops(cudnn: str) -> dict:
    lay = make_layout(tp=1, dp=8, global_batch=8, micro_batch=1, seq_len=4096, cudnn_version=cudnn)
    return {o.name: o for o in block_ops(load_model("gpt-oss-120b"), lay, "*")}


def test_the_unfused_path_s_flops_and_bytes_at_one_shape():
    """Before cuDNN 9.13.1 gpt-oss's full layer runs the unfused path: QK^T and PV, each 2 b s^2 (a d) FLOPs
    (Narayanan et al. 2021, arXiv 2104.04473 sec. 5.1: 4 B s^2 h for both, h = a d), and the softmax reads and
    writes b a s^2 BF16 scores (2 + 2 bytes; no dropout). b 1, s 4096, a 64 heads of d 64."""
    b, s, a, d = 1, 4096, 64, 64
    ops = _ops("9.11.0.98")
    assert "core_attention" not in ops and "attention_sink_grad" not in ops
    assert ops["scores"].flops == pytest.approx(2 * b * s * s * a * d)
    assert ops["weighted_sum"].flops == pytest.approx(2 * b * s * s * a * d)
    assert ops["softmax_dropout"].bytes == pytest.approx(4 * b * a * s * s)


def test_the_fused_path_adds_the_sink_gradient_s_bytes():
    """From cuDNN 9.13.1 the fused kernel runs, plus the sink's gradient in its backward: FP32 LSE and
    rowsum(dO o O) read once more a (query, head) row, 8 b s a bytes, backward only."""
    ops = _ops("9.13.1.26")
    assert ops["core_attention"].kind == "attention"
    grad = ops["attention_sink_grad"]
    assert grad.passes == "backward" and grad.bytes == pytest.approx(8 * 1 * 4096 * 64)


def test_bad_values_are_one_line_naming_the_key():
    data = load_model("gpt-oss-20b").model_dump()
    data["attention"]["sinks"] = "maybe"
    with pytest.raises(TopoError) as exc:
        model_from_dict(data, "gpt-oss-20b.toml")
    assert "sinks" in str(exc.value) and "learnable" in str(exc.value) and "\n" not in str(exc.value)
    for kw, key in ((dict(cp=2, cp_comm_type="p2p"), "cp_comm_type"), (dict(attention_fp8="mxfp8"), "attention_fp8"),
                    (dict(cp=2, cp_comm_type="a2a", cudnn_version="9.11"), "cp")):
        cudnn = kw.pop("cudnn_version", "9.18.0.50")
        with pytest.raises(TopoError) as exc:
            sink_backend("learnable", cudnn, **kw)
        assert exc.value.key == key and "\n" not in str(exc.value)


def test_the_cli_names_the_flag_or_the_layout_field_rev73():
    """rev73: the layout errors are the layout's (``source="layout"``), so ``topo train`` names the flag the user
    gave (``--cp-comm-type``), or ``--layout``'s field, as every other layout rule does; they said a bare
    ``cp_comm_type:``."""
    job = ["train", "dgx-h100-superpod", "--model", "gpt-oss-120b", "--tp", "1", "--ep", "8", "--cp", "2",
           "--global-batch", "512"]
    for extra, head in ((["--cp-comm-type", "p2p"], "error: --cp-comm-type: 'p2p' with attention sinks"),
                        (["--layout", "cp_comm_type=p2p"], "error: --layout: cp_comm_type: 'p2p' with attention")):
        p = run_cli(*job, *extra)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith(head), p.stderr
