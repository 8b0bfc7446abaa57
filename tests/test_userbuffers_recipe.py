"""TP overlap through userbuffers takes per-tensor FP8 (delayed, current) and MXFP8 inputs only: Transformer
Engine's ``fill_userbuffers_buffer_for_all_gather`` raises "Unsupported quantizer for Userbuffers" for any other
quantizer (NVIDIA/TransformerEngine@d0067d0d ``transformer_engine/pytorch/module/base.py`` lines 607-754), so
``fp8_recipe = "blockwise"`` (``Float8BlockQuantizer``) with ``overlap_tp`` is refused as NVFP4 is (section 441's
Left 1, rev105)."""

import subprocess
import sys
from pathlib import Path

import pytest

from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout

ROOT = Path(__file__).resolve().parents[1]


def _lay(recipe, overlap_tp=True, tp=2):
    lay = make_layout(tp=tp, dp=1, global_batch=8, precision="fp8", fp8_recipe=recipe, overlap_tp=overlap_tp,
                      sequence_parallel=tp > 1)
    check_layout(load_model("llama3-8b"), lay)
    return lay


@pytest.mark.parametrize("recipe", ["blockwise", "nvfp4"])
def test_userbuffers_refuse_block_scaled_recipes(recipe):
    with pytest.raises(TopoError) as err:
        _lay(recipe)
    assert "overlap_tp: true runs TP collectives through userbuffers, which Transformer Engine refuses" in str(err.value)


@pytest.mark.parametrize("recipe", ["delayed", "current", "mxfp8"])
def test_userbuffers_take_per_tensor_and_mxfp8(recipe):
    assert _lay(recipe).overlap_tp


def test_blockwise_without_userbuffers_is_allowed():
    """No TP overlap, or tp 1 (nothing to overlap): block-wise FP8 runs (Megatron-LM PR #5728's H100 Qwen3-30B
    row, tp 1)."""
    assert _lay("blockwise", overlap_tp=False).fp8_recipe == "blockwise"
    assert _lay("blockwise", tp=1).tp == 1


def test_topo_train_refuses_blockwise_userbuffers_in_one_line():
    out = subprocess.run([sys.executable, "-m", "topo", "train", "dgx-h100-superpod", "--model", "llama3-8b",
                          "--tp", "2", "--global-batch", "2048", "--precision", "fp8", "--layout",
                          'fp8_recipe="blockwise",sequence_parallel=true,overlap_tp=true'],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "block-wise FP8 inputs" in out.stderr and "allowed with fp8_recipe blockwise and tp > 1: false" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
