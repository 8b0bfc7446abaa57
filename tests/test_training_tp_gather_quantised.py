"""Every FP8 recipe's TP all-gathers without userbuffers at the bytes Transformer Engine sends
(docs/calibration-findings.md section 404). TE quantises before ``gather_along_first_dim`` and gathers through NCCL
the quantised copies' data and scales: NVIDIA/TransformerEngine@5671fd36 (v2.12), f031cf87 (v2.14), 4220403e (v2.16)
``transformer_engine/pytorch/distributed.py`` ``_all_gather_fp8`` (row-wise uint8 data only; the transpose made
after the gather: ``supports_only_rowwise_all_gather``, ``tensor/float8_tensor.py``), ``_all_gather_mxfp8`` and
``_start_all_gather_fp8_blockwise`` (each usage's data and scale inverses); ``module/base.py``
``grad_output_preprocess`` (the output gradient with usage row- and column-wise), ``module/layernorm_linear.py``
forward (row-wise) and backward (the input again: row-wise per tensor, else column-wise)."""

import pytest

from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import step_traffic

FP8_BYTES, BF16_BYTES = 1.0, 2.0
MXFP8_COPY = FP8_BYTES + 1 / 32  # an E8M0 scale per 32 elements (TE docs features/low_precision_training/mxfp8)
BLOCK_COPY = FP8_BYTES + 4 / 128  # an FP32 scale per 1x128 block (TE docs .../fp8_blockwise_scaling)
WHATS = ("input", "output gradient", "input again, for wgrad")


def _gathers(precision, recipe=None, **kw):
    m = load_model("llama3-8b")
    lay = make_layout(tp=4, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=8192, precision=precision,
                      fp8_recipe=recipe, sequence_parallel=True, **kw)
    return {it["what"]: it for it in step_traffic(m, lay) if it["dim"] == "tp" and it.get("what") in WHATS}


@pytest.mark.parametrize("recipe, per", [
    ("delayed", (FP8_BYTES, FP8_BYTES, FP8_BYTES)),
    ("current", (FP8_BYTES, FP8_BYTES, FP8_BYTES)),
    (None, (FP8_BYTES, FP8_BYTES, FP8_BYTES)),
    ("mxfp8", (MXFP8_COPY, 2 * MXFP8_COPY, MXFP8_COPY)),
    ("blockwise", (BLOCK_COPY, 2 * BLOCK_COPY, BLOCK_COPY)),
])
def test_fp8_tp_gathers_without_userbuffers_are_quantised(recipe, per):
    """Per-tensor FP8 gathers its row-wise data (1 byte) for all three; MXFP8 and block-wise a copy each of the input
    and two of the output gradient, each with its scales; the sizes the BF16 gathers' scaled by bytes / 2."""
    got, bf = _gathers("fp8", recipe), _gathers("bf16")
    for what, b in zip(WHATS, per):
        assert got[what]["elem_bytes"] == pytest.approx(b), what
        assert got[what]["size_bytes"] == pytest.approx(bf[what]["size_bytes"] * b / BF16_BYTES), what
        assert bf[what]["elem_bytes"] == BF16_BYTES


def test_fp8_tp_gathers_through_userbuffers_stay_one_byte():
    """Userbuffers gather one usage's FP8 data (base.py grad_output_preprocess: ``set_usage(columnwise=False)``
    under ``ub_overlap_ag``): 1 byte each, unchanged."""
    got = _gathers("fp8", "delayed", overlap_tp=True)
    assert [got[w]["elem_bytes"] for w in WHATS] == [FP8_BYTES] * 3


@pytest.mark.parametrize("recipe, copy", [("current", FP8_BYTES), ("mxfp8", MXFP8_COPY)])
def test_mla_up_projections_gather_their_quantised_latents(recipe, copy):
    """DeepSeek-V3's up projections are TE column-parallel linears (NVIDIA/Megatron-LM@d98e8a64
    ``multi_latent_attention.py`` lines 777-797), whose NCCL gather of the latent is quantised as any TE linear's
    (TE@5671fd36 ``module/linear.py`` forward ``gather_along_first_dim(inputmat, tp_group, quantizer=...)`` and its
    backward's column-wise regather); ``k_pos_emb``'s own gather (``gather_from_sequence_parallel_region``) stays
    BF16."""
    m = load_model("deepseek-v3-671b")
    kw = dict(tp=2, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=4096, sequence_parallel=True)
    fp8 = step_traffic(m, make_layout(precision="fp8", fp8_recipe=recipe, **kw))
    bf = step_traffic(m, make_layout(precision="bf16", **kw))
    for name, width, linear in m.mla_tp_latents:
        for what in (f"MLA {name}", f"MLA {name} again, for wgrad") if linear else (f"MLA {name}",):
            got = next(it for it in fp8 if it.get("what") == what)
            ref = next(it for it in bf if it.get("what") == what)
            b = copy if linear else BF16_BYTES
            assert got["elem_bytes"] == pytest.approx(b), what
            assert got["size_bytes"] == pytest.approx(ref["size_bytes"] * b / BF16_BYTES), what
            assert ref["size_bytes"] == 4096 * width * BF16_BYTES, what  # the whole sequence's latent, b s w x 2
