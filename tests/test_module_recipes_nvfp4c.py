"""Per-module precision inside an NVFP4 layout, as Megatron-Core's ``quant_recipe`` runs it (docs/calibration-findings.md
section 405): Megatron-Bridge's Nemotron 3 Super NVFP4 recipes keep ``*.linear_qkv``, ``*.linear_proj``,
``*mlp.fc[12]_latent_proj`` and ``mtp.*`` in BF16 and ``*mixer.out_proj`` in MXFP8, the rest NVFP4
(NVIDIA-NeMo/Megatron-Bridge@4ab94dfa src/megatron/bridge/perf_recipes/nemotronh/te_quant.cfg), and the last 14
layers in BF16 (``mixed_precision.py`` ``nemotron_3_super_bf16_with_nvfp4_mixed``: ``num_layers_at_end_in_bf16 =
14``)."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from published_setups import assert_printed_row
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
    (("linear_qkv=bf16",), "bf16", None, "allowed: precision fp8 (any fp8_recipe, unset is delayed)")])
def test_bad_module_recipes_are_one_line(entries, precision, recipe, says):
    with pytest.raises(TopoError) as err:
        check_layout(load_model(SUPER), _lay(recipe, precision, module_recipes=entries))
    text = str(err.value)
    assert "module_recipes" in text and says in text and "\n" not in text


def test_an_nvfp4_module_refuses_userbuffers():
    """TE's userbuffers take FP8 and MXFP8 quantizers only (NVIDIA/TransformerEngine@d0067d0d pytorch/module/base.py
    lines 607-754): an NVFP4 module under TP overlap is refused, as ``fp8_recipe = "nvfp4"`` is (section 402)."""
    lay = make_layout(tp=2, dp=1, global_batch=8, precision="fp8", fp8_recipe="mxfp8", overlap_tp=True,
                      module_recipes=("mlp.linear_fc1=nvfp4",))
    with pytest.raises(TopoError) as err:
        check_layout(load_model("llama3-8b"), lay)
    assert "mlp.linear_fc1=nvfp4 runs NVFP4 inputs, which Transformer Engine's userbuffers refuse" in str(err.value)
    check_layout(load_model("llama3-8b"), lay.model_copy(update={"module_recipes": ("mlp.linear_fc1=bf16",)}))


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


HOLDOUT = ROOT / "data" / "reference" / "training_runs_holdout.csv"
SUPER_NVFP4 = {  # run id: (release, system, TP/PP/CP/VP/EP, tokens/s/GPU, model TFLOP/s/GPU); 64 GPUs, GBS 512, MBS 1,
    # sequence 8,192 each: NVIDIA-NeMo/Megatron-Bridge@4ab94dfa docs/performance-summary.md (26.08) and
    # docs/performance-summary-archive.md (the others), the NVFP4 lines of each Nemotron_3_Super table
    "mb2608_gb300_nemotron3_super_nvfp4": ("26.08", "DGX-GB300", "1/1/1/1/64", 10240, 864),
    "mb2608_gb200_nemotron3_super_nvfp4": ("26.08", "DGX-GB200", "2/1/1/1/64", 7168, 610),
    "mb260601_gb300_nemotron3_super_nvfp4": ("26.06.01", "DGX-GB300", "1/1/1/1/64", 9984, 845),
    "mb260601_gb200_nemotron3_super_nvfp4": ("26.06.01", "DGX-GB200", "2/1/1/1/64", 7040, 598),
    "mb2606_gb300_nemotron3_super_nvfp4": ("26.06", "DGX-GB300", "1/1/1/1/64", 9900, 839),
    "mb2606_gb200_nemotron3_super_nvfp4": ("26.06", "DGX-GB200", "2/1/1/1/64", 6928, 587),
    "mb2606_b300_nemotron3_super_nvfp4": ("26.06", "DGX-B300", "1/1/1/1/8", 8131, 689),
    "mb260401_gb300_nemotron3_super_nvfp4": ("26.04.01", "DGX-GB300", "1/1/1/1/64", 9600, 817),
    "mb260401_gb200_nemotron3_super_nvfp4": ("26.04.01", "DGX-GB200", "2/1/1/1/64", 6784, 574),
    "mb260401_b300_nemotron3_super_nvfp4": ("26.04.01", "DGX-B300", "1/1/1/1/8", 7424, 634),
    "mb260401_b200_nemotron3_super_nvfp4": ("26.04.01", "DGX-B200", "2/1/1/1/64", 5632, 475),
    "mb2604_gb300_nemotron3_super_nvfp4": ("26.04", "DGX-GB300", "1/1/1/1/64", 9623, 815),
    "mb2604_gb200_nemotron3_super_nvfp4": ("26.04", "DGX-GB200", "2/1/1/1/64", 6777, 574),
    "mb2604_b300_nemotron3_super_nvfp4": ("26.04", "DGX-B300", "1/1/1/1/8", 7047, 597),
    "mb2604_b200_nemotron3_super_nvfp4": ("26.04", "DGX-B200", "2/1/1/1/64", 5606, 475),
}


def test_super_nvfp4_rows_are_the_tables():
    """The 15 Nemotron 3 Super NVFP4 lines are held out with their printed layout and throughput, the recipe's
    precision (``nemotron_3_super_bf16_with_nvfp4_mixed``: the last 14 layers BF16; te_quant.cfg's matchers), no
    FP8 / FP4 weight gather (``fp4_param_gather = False``; no such field at 26.04) and no TP overlap; B300 recomputes
    moe_act and layernorm (``B300_NVFP4_V1 = B300_BF16_V1``), B200 runs TP2 with TE graphs
    (``B200_NVFP4_V1``, Megatron-Bridge@74695a06 .. @8f341b04 nemotron_3_workload_base_configs.py)."""
    with open(HOLDOUT, newline="", encoding="utf-8") as f:
        rows = {r["run_id"]: r for r in csv.DictReader(f)}
    assert {k for k, r in rows.items() if r["fp8_recipe"] == "nvfp4" and r["model"] == SUPER} == set(SUPER_NVFP4)
    for rid, (release, system, layout, tokens, tflops) in SUPER_NVFP4.items():
        r = rows[rid]
        assert_printed_row(r, rid, SUPER, system, f"NeMo {release}", (64, 512, 1, 8192), layout, tokens, tflops, 6e-4)
        assert (r["precision"], r["fp8_param_gather"], r["overlap_tp"]) == ("fp8", "0", "0"), rid
        assert (r["num_layers_at_end_in_bf16"], tuple(r["module_recipes"].split())) == ("14", TE_QUANT), rid
        b300 = system == "DGX-B300"
        assert (r["recompute_granularity"], r["recompute_modules"]) == (("selective", "moe_act layernorm") if b300
                                                                      else ("", "")), rid
        assert r["cuda_graph_scope"] == "attn mamba moe_router moe_preprocess", rid


@pytest.mark.parametrize("value,allowed", [
    ("linear_qkv=bf16 mixer.outproj=mxfp8", "name=recipe entries (module 'mixer.outproj' is not known; allowed: "),
    ("mtp=mxfp8", "name=recipe entries (recipe 'mxfp8' for mtp is not allowed; allowed: bf16)")])
def test_a_bad_module_recipes_column_is_one_line(value, allowed):
    """The runs files' ``module_recipes`` column is checked as the layout's key is (benchmarks/run_recipe_columns.py)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from run_recipe_columns import RunColumnError, check_recipe_columns
    with open(HOLDOUT, newline="", encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["run_id"] == "mb2608_gb300_nemotron3_super_nvfp4")
    with pytest.raises(RunColumnError) as err:
        check_recipe_columns([{**row, "module_recipes": value}], "runs.csv")
    text = str(err.value)
    assert text.startswith(f"runs.csv: run mb2608_gb300_nemotron3_super_nvfp4: module_recipes = {value!r}; allowed: "
                           f"{allowed}") and "\n" not in text


def test_a_module_named_twice_is_refused():
    """``["linear_qkv=bf16", "linear_qkv=mxfp8"]`` ran at the last entry's recipe, silently (walk39, findings
    section 407): which of two matchers of one module Megatron-Core's ``quant_recipe`` applies is not modelled, so
    the layout is refused in one line naming both entries; a module named once with another beside it is not."""
    twice = ("linear_qkv=bf16", "mixer.out_proj=mxfp8", "linear_qkv = mxfp8")
    with pytest.raises(TopoError) as err:
        check_layout(load_model(SUPER), _lay(module_recipes=twice))
    text = str(err.value)
    assert "module_recipes" in text and "\n" not in text
    assert "linear_qkv=bf16 and linear_qkv = mxfp8 name one module more than once" in text
    check_layout(load_model(SUPER), _lay(module_recipes=twice[:2]))


def test_a_module_the_model_lacks_is_marked_no_effect():
    """te_quant.cfg's matchers on a dense Llama (no Mamba-2 mixer, no latent MoE, no MTP) match nothing there: the
    options line said ``module_recipes [...]`` as if it applied (walk39, findings section 407); now the entries
    that name no operator of the model are said, and on Nemotron 3 Super, which has each module, none is."""
    from topo.training.op_table import unmatched_module_recipes
    lay = _lay(module_recipes=TE_QUANT)
    assert unmatched_module_recipes(load_model(SUPER), lay) == ()
    llama = make_layout(tp=1, dp=8, global_batch=8, precision="fp8", fp8_recipe="nvfp4", module_recipes=TE_QUANT)
    assert unmatched_module_recipes(load_model("llama3-8b"), llama) == (
        "fc1_latent_proj", "fc2_latent_proj", "mtp", "mixer.out_proj")
    cmd = [sys.executable, "-c", "import sys; from topo.cli.main import main; sys.exit(main())", "train",
           "gb200-nvl72-superpod", "--model", "llama3-8b", "--tp", "1", "--dp", "8", "--global-batch", "8",
           "--precision", "fp8", "--layout", 'fp8_recipe="nvfp4",module_recipes=["linear_qkv=bf16","mtp=bf16"]']
    got = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                               "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr
    assert "(no effect on mtp: llama3-8b has no mtp)" in got.stdout
    whole = subprocess.run(cmd[:-1] + ['fp8_recipe="nvfp4",module_recipes=["mixer.out_proj=mxfp8"]'],
                           capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                          "PATH": "/usr/bin:/bin"})
    assert '["mixer.out_proj=mxfp8"] (no effect: llama3-8b has no mixer.out_proj)' in whole.stdout
