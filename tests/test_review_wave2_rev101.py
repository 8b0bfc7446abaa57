"""rev101 (docs/calibration-findings.md section 421): tests for what the review's mutations of sections 414-420
found uncaught.

- The rank's first MLA layer's ``linear_proj`` keeps userbuffers in a model built without them
  (:func:`topo.training.tp_overlap.first_proj_userbuffers`; NVIDIA/Megatron-LM@d98e8a64
  megatron/core/transformer/multi_latent_attention.py line 221, extensions/transformer_engine.py lines 1176-1218),
  so under MXFP8 its output gradient's userbuffers all-gather sends the scale-inverses apart by a synchronous NCCL
  all-gather (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/base.py lines 679-749, the gather
  at 727; ``grad_output_preprocess`` lines 1725-1744): one a micro-batch, 1/32 byte an element (one E8M0 scale a 32
  elements: OCP MX v1.0 section 5), blocking.
- A layer kept in BF16 (``num_layers_at_start_in_bf16``) prices the same operators at ``precision`` bf16: no FP8
  transpose of a gathered operand there (TE's ``_create_transpose`` is of an FP8 tensor; a BF16 gather has none:
  NVIDIA/TransformerEngine v2.12 transformer_engine/pytorch/distributed.py lines 961-1048), so its backward
  launches the dgrad and wgrad GEMMs alone.
- A norm-fed linear at a recipe of its own (``module_recipes``) is fused by its own recipe, not the layout's:
  under a delayed-scaling layout an MXFP8 QKV's norm writes BF16 and a cast follows (kernels.toml
  ``norm_writes_quantised``; TE v2.12 csrc/extensions/normalization.cpp lines 97-130: FULLY_FUSED for a
  ``Float8Quantizer`` only).
"""

import pytest

from topo.training.model import load_model
from topo.training.operators import block_ops, cast_kind, launch_calls
from topo.training.parallel import make_layout
from topo.training.step import UB_SCALE_PHASES, step_traffic

MXFP8_SCALE_BYTES = 1 / 32  # E8M0, one a 32 elements (OCP MX v1.0 sec. 5; TE MXFP8 block size 32)
FIRST_PROJ = "the first MLA layer's linear_proj (userbuffers)"


def _lay(**kw):
    return make_layout(**{"tp": 2, "pp": 8, "ep": 8, "dp": 8, "global_batch": 64, "seq_len": 4096,
                          "precision": "fp8", "fp8_recipe": "mxfp8", "overlap_tp": True, **kw})


def test_the_first_mla_linear_projs_output_gradient_scales_are_gathered_apart():
    m, lay = load_model("deepseek-v3-671b"), _lay()
    items = [it for it in step_traffic(m, lay) if it["dim"] == "tp" and FIRST_PROJ in it.get("what", "")]
    (data,) = [it for it in items if it["what"] == f"output gradient, {FIRST_PROJ}"]
    (scales,) = [it for it in items if it["phase"] in UB_SCALE_PHASES]
    assert scales["phase"] == "ub_scales_backward" and scales["collective"] == "all_gather"
    gathered = lay.micro_batch * lay.seq_len * m.hidden  # elements of the gathered output gradient
    assert scales["size_bytes"] == pytest.approx(gathered * MXFP8_SCALE_BYTES)
    assert data["size_bytes"] == pytest.approx(gathered * 1)  # its FP8 data, 1 byte an element, beside it
    assert scales["calls"] == data["calls"] == lay.microbatches  # one backward a micro-batch
    assert "pair" not in scales and "userbuffers" not in scales  # NCCL on the compute stream: nothing hides it


@pytest.mark.parametrize("kw", [dict(fp8_recipe="current"), dict(precision="bf16"), dict(overlap_tp=False)])
def test_no_first_proj_scale_gather_without_mxfp8_userbuffers(kw):
    items = step_traffic(load_model("deepseek-v3-671b"), _lay(**kw))
    assert not [it for it in items if it["dim"] == "tp" and it["phase"] in UB_SCALE_PHASES]


def _linears(lay, generation):
    m = load_model("llama3-8b")
    return {op.name: op for kind in ("*", "-") for op in block_ops(m, lay, kind, generation)
            if op.kind == "gemm" and op.linear}


def test_a_bf16_kept_layer_launches_no_gather_transpose():
    lay = make_layout(tp=8, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=8192, precision="fp8",
                      fp8_recipe="delayed")
    qkv = _linears(lay, "hopper")["qkv"]
    # per-tensor FP8 on Hopper: the gathered input transposed (section 414)
    assert qkv.sp_gather == "ag" and qkv.gather_transpose_elem_bytes == 2.0
    # FP8: dgrad and wgrad GEMMs, the output gradient's cast and the gathered input's transpose, a call each
    assert launch_calls(qkv, "fp8", backward=True) == (4.0, 0.0, 0.0)
    assert launch_calls(qkv, "bf16", backward=True) == (2.0, 0.0, 0.0)  # the two GEMMs alone


def test_a_module_recipe_decides_its_norm_fusion():
    lay = make_layout(tp=1, pp=1, dp=1, global_batch=1, micro_batch=1, seq_len=8192, precision="fp8",
                      fp8_recipe="delayed", module_recipes=("linear_qkv=mxfp8",))
    ops = _linears(lay, "blackwell")
    assert ops["qkv"].recipe == "mxfp8" and not ops["qkv"].norm_cast and cast_kind(ops["qkv"]) != "norm"
    assert ops["fc1"].norm_cast and cast_kind(ops["fc1"]) == "norm"  # the layout's delayed scaling: fused
