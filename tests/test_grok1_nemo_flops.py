"""Grok-1's shape as NeMo 25.04 trains it, checked through NeMo's own FLOP count (issue 29, grok138).

NVIDIA/NeMo@6f2c6fda scripts/performance/llm/pretrain_grok1_314b.py builds Grok-1 as MixtralConfig8x7B with 64
layers, hidden 6,144, 48 heads / 8 query groups, ffn 32,768, 8 experts (top-2 from MixtralConfig: gated, three
matrices an expert), and logs TFLOPs with the ``mixtral`` formula of nemo/utils/flops_formulas.py (line 128):
``gbs s l h^2 (12 + 12 g/n + 18 k f/h + 12 s/h + 6 V/(l h))`` with V = LLM_VOCAB_SIZE_MAP["mixtral"] = 32,000.
NVIDIA/dgxc-benchmarking@1f6d9f40 grok1/README.md's example log: 256 GPUs, GBS 512, 7.382 s, 1,192.94 TFLOPS a GPU.
"""

import pytest

from topo.training.flops import model_flop_per_step
from topo.training.model import load_model
from topo.training.parallel import ParallelLayout


def _nemo_mixtral_flops(gbs, s, l, h, g, n, k, f, vocab):
    return gbs * s * l * h * h * (12 + 12 * g / n + 18 * k * f / h + 12 * s / h + 6 * vocab / (l * h))


def test_nemo_formula_reproduces_the_published_log():
    flops = _nemo_mixtral_flops(512, 8192, 64, 6144, 8, 48, 2, 32768, 32000)
    assert flops / 256 / 7.382 / 1e12 == pytest.approx(1192.94, rel=2e-4)


def test_topo_counts_nemo_s_flops_for_the_shape_nemo_builds():
    # the 6n count (full attention square, as NeMo's 12 s/h) at the model file's vocabulary: the same FLOPs a token
    # within 0.1% (the router's 2 h E a layer is topo's only extra); gated experts of 32,768, 48 / 8 heads, 64 layers
    m = load_model("grok-1-314b")
    lay = ParallelLayout(tp=4, pp=1, dp=64, ep=8, etp=4, global_batch=512, seq_len=8192)
    got = model_flop_per_step(m, lay, "6n") / (512 * 8192)
    # NeMo's side at the script's own shape (lines 83-91 and MixtralConfig's top-2), only the vocabulary the model's
    nemo = _nemo_mixtral_flops(1, 8192, 64, 6144, 8, 48, 2, 32768, m.vocab) / 8192
    assert got == pytest.approx(nemo, rel=1e-3)
