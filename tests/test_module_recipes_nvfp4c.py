"""Per-module precision inside an NVFP4 layout, as Megatron-Core's ``quant_recipe`` runs it (docs/calibration-findings.md
section 405): Megatron-Bridge's Nemotron 3 Super NVFP4 recipes keep ``*.linear_qkv``, ``*.linear_proj``,
``*mlp.fc[12]_latent_proj`` and ``mtp.*`` in BF16 and ``*mixer.out_proj`` in MXFP8, the rest NVFP4
(NVIDIA-NeMo/Megatron-Bridge@4ab94dfa src/megatron/bridge/perf_recipes/nemotronh/te_quant.cfg), and the last 14
layers in BF16 (``mixed_precision.py`` ``nemotron_3_super_bf16_with_nvfp4_mixed``: ``num_layers_at_end_in_bf16 =
14``)."""

import subprocess
import sys
from pathlib import Path

import pytest

from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.model import Block, load_model
from topo.training.operators import bf16_layers, block_ops, kernels_launched, op_time_s
from topo.training.parallel import check_layout, make_layout

ROOT = Path(__file__).resolve().parents[1]
SUPER = "nemotron-3-super-120b-a12b"
TE_QUANT = ("linear_qkv=bf16", "linear_proj=bf16", "fc1_latent_proj=bf16", "fc2_latent_proj=bf16", "mtp=bf16",
            "mixer.out_proj=mxfp8")  # te_quant.cfg's five matchers at 4ab94dfa


def _lay(recipe="nvfp4", precision="fp8", **kw):
    return make_layout(tp=1, pp=1, dp=64, ep=64, etp=1, global_batch=512, micro_batch=1, seq_len=8192,
                       precision=precision, fp8_recipe=recipe, sequence_parallel=False, **kw)


def _op(lay, kind, module, name):
    return next(op for op in block_ops(load_model(SUPER), lay, kind) if (op.module, op.name) == (module, name))


@pytest.mark.parametrize("kind,module,name", [(Block.ATTENTION, "attention", "qkv"),
                                              (Block.ATTENTION, "attention", "out_proj"),
                                              (Block.MOE, "moe", "fc1_latent_proj"),
                                              (Block.MOE, "moe", "fc2_latent_proj")])
def test_a_bf16_module_runs_as_a_bf16_layouts(kind, module, name):
    """A module te_quant.cfg keeps in BF16 (its ``bf16`` config: ``training_recipe: {}``) is timed, and launches its
    kernels, as the same operator of a BF16 layout: no cast, the BF16 GEMM rate."""
    gpu = gpu_compute("GB300")
    mixed = _op(_lay(module_recipes=TE_QUANT), kind, module, name)
    bf16 = _op(_lay(None, "bf16"), kind, module, name)
    nvfp4 = _op(_lay(), kind, module, name)
    assert mixed.recipe == "bf16" and not (mixed.fp4_cast or mixed.mxfp8 or mixed.block_scaled)
    for backward in (False, True):
        t = op_time_s(mixed, gpu, "fp8", backward, fp8_recipe="nvfp4")
        assert t == pytest.approx(op_time_s(bf16, gpu, "bf16", backward), rel=1e-12)
        assert t != pytest.approx(op_time_s(nvfp4, gpu, "fp8", backward, fp8_recipe="nvfp4"), rel=1e-3)
        assert kernels_launched(mixed, "fp8", backward) == kernels_launched(bf16, "bf16", backward)


def test_mamba_out_proj_runs_mxfp8_and_in_proj_keeps_nvfp4():
    """``*mixer.out_proj`` in MXFP8 (te_quant.cfg's ``mxfp8`` config) inside the NVFP4 layout: timed as an MXFP8
    layout's out_proj (one cast kernel, the weight-scale swizzle); in_proj, named by no matcher, stays NVFP4."""
    gpu = gpu_compute("GB300")
    lay = _lay(module_recipes=TE_QUANT)
    out, mx_out = _op(lay, Block.MAMBA, "mamba", "out_proj"), _op(_lay("mxfp8"), Block.MAMBA, "mamba", "out_proj")
    inp, nv_inp = _op(lay, Block.MAMBA, "mamba", "in_proj"), _op(_lay(), Block.MAMBA, "mamba", "in_proj")
    assert out.mxfp8 and out.block_scaled and not out.fp4_cast
    assert inp.fp4_cast and not inp.recipe
    for backward in (False, True):
        assert op_time_s(out, gpu, "fp8", backward, fp8_recipe="nvfp4") == pytest.approx(
            op_time_s(mx_out, gpu, "fp8", backward, fp8_recipe="mxfp8"), rel=1e-12)
        assert kernels_launched(out, "fp8", backward) == kernels_launched(mx_out, "fp8", backward)
        assert op_time_s(inp, gpu, "fp8", backward, fp8_recipe="nvfp4") == pytest.approx(
            op_time_s(nv_inp, gpu, "fp8", backward, fp8_recipe="nvfp4"), rel=1e-12)


def test_routed_experts_keep_the_layouts_recipe():
    """The routed experts' fc1 / fc2 are named by no matcher: NVFP4 as the layout."""
    lay = _lay(module_recipes=TE_QUANT)
    for name in ("fc1", "fc2"):
        op = _op(lay, Block.MOE, "moe", name)
        assert op.fp4_cast and not op.recipe


def test_mtp_bf16_keeps_the_mtp_layers_whole_in_bf16():
    """``mtp.*`` in BF16: the MTP depths' layers (None in layer_numbers) are BF16 layers, the decoder's are not
    (without ``num_layers_at_end_in_bf16``); the last 14 decoder layers with it (Megatron-Core's
    ``layer_no >= num_layers - num_layers_at_end_in_bf16``)."""
    m = load_model(SUPER)
    flags = [f for stage in bf16_layers(m, _lay(module_recipes=("mtp=bf16",))) for f in stage]
    assert sum(flags) == m.mtp_layers  # one unit a depth (its "*E" block)
    assert not any(f for stage in bf16_layers(m, _lay()) for f in stage)
    both = [f for stage in bf16_layers(m, _lay(module_recipes=("mtp=bf16",), num_layers_at_end_in_bf16=14))
            for f in stage]
    assert sum(both) == 14 + m.mtp_layers


@pytest.mark.parametrize("entries,precision,recipe,says", [
    (("linear_qkv",), "fp8", "nvfp4", "'linear_qkv' is not name=recipe"),
    (("linear_qvk=bf16",), "fp8", "nvfp4", "module 'linear_qvk' is not known; allowed: linear_qkv"),
    (("linear_qkv=fp8",), "fp8", "nvfp4", "recipe 'fp8' for linear_qkv is not allowed; allowed: bf16, mxfp8, nvfp4"),
    (("mtp=nvfp4",), "fp8", "nvfp4", "recipe 'nvfp4' for mtp is not allowed; allowed: bf16"),
    (("linear_qkv=bf16",), "bf16", None, "allowed: precision fp8 with an fp8_recipe"),
    (("linear_qkv=bf16",), "fp8", None, "allowed: precision fp8 with an fp8_recipe")])
def test_bad_module_recipes_are_one_line(entries, precision, recipe, says):
    with pytest.raises(TopoError) as err:
        check_layout(load_model(SUPER), _lay(recipe, precision, module_recipes=entries))
    text = str(err.value)
    assert "module_recipes" in text and says in text and "\n" not in text


def test_cli_refuses_an_mxfp8_module_on_hopper():
    """A module in MXFP8 needs Blackwell's block-scaled tensor cores, as ``fp8_recipe = "mxfp8"`` does: one line, no
    traceback, non-zero exit."""
    cmd = [sys.executable, "-c", "import sys; from topo.cli.main import main; sys.exit(main())", "train", "dgx-h100-superpod", "--model",
           "llama3-8b", "--tp", "1", "--dp", "8", "--global-batch", "8", "--precision", "fp8", "--layout",
           'fp8_recipe="current",module_recipes=["mlp.linear_fc2=mxfp8"]']
    got = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                               "PATH": "/usr/bin:/bin"})
    assert got.returncode != 0 and "Traceback" not in got.stderr
    assert "module_recipes" in got.stderr and "mlp.linear_fc2=mxfp8 needs Blackwell" in got.stderr
