"""The SMs Transformer Engine's userbuffers TP overlap takes from the GEMM beside it (issue 29, tpsm49).

A communicator with ``set_sm_margin`` launches its GEMM on ``sm_count - num_sm`` SMs with cuBLAS told so
(NVIDIA/TransformerEngine@d0067d0d ``comm_gemm_overlap.cpp`` line 143, ``cublaslt_gemm.cu`` lines 465-467): a
GEMM of ``T`` tiles of one SM each takes ``ceil(T / (sms - n))`` waves instead of ``ceil(T / sms)``, each wave the
same time. NeMo's configurations (NVIDIA/NeMo@6f2c6fda ``nemo/collections/llm/recipes/tp_overlap_configs/
userbuffers.py``): ``userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192`` lines 84-95, ``proj_fprop`` pipeline on 24
SMs and ``fc2_fprop`` on 16, both with the margin; TE's defaults since 2.0 (``pytorch/module/base.py`` lines
350-360, 384-386): ``pipeline`` and ``bulk`` on 16 SMs with the margin, ring exchanges on 1 SM without."""

import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import run_cli
from published_setups import published_setups
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.kernels import gemm_s
from topo.training.model import load_model
from topo.training.operators import block_ops, block_time, op_passes_s
from topo.training.parallel import make_layout
from topo.training.tp_overlap import (buffer_name, configs, margin_kernels, margin_sms, margins_note,
                                      pass_margins)

BF16_70B = "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192"
SHAPE = dict(tp=4, pp=4, dp=4, global_batch=64, seq_len=8192, overlap_tp=True)


def _one_tile_gpu(name="H100"):
    """``name`` with a single 128 x 256 one-SM BF16 tile, so the wave count is the closed form's."""
    gpu = gpu_compute(name)
    km = gpu.kernels
    return replace(gpu, kernels=replace(km, tile_shapes={**km.tile_shapes, "bf16": ((128, 256, 1),)}))


def test_a_gemm_on_sms_less_the_margin_takes_its_wave_count():
    gpu = _one_tile_gpu()
    M, N, K = 8192, 8192, 8192  # 64 x 32 = 2,048 tiles: 16 waves on 132 SMs, 19 on 108, 18 on 116
    tiles = math.ceil(M / 128) * math.ceil(N / 256)
    full = gemm_s(gpu.kernels, M, N, K)
    for n in (24, 16):
        ratio = math.ceil(tiles / (132 - n)) / math.ceil(tiles / 132)
        assert gemm_s(margin_kernels(gpu, n), M, N, K) == pytest.approx(full * ratio, rel=1e-9)
    assert margin_kernels(gpu, 0) is gpu.kernels


def test_one_partial_wave_loses_nothing_to_the_margin():
    gpu = _one_tile_gpu()
    M, N, K = 1024, 2048, 8192  # 8 x 8 = 64 tiles: one wave on 132 SMs and on 108
    assert gemm_s(margin_kernels(gpu, 24), M, N, K) == pytest.approx(gemm_s(gpu.kernels, M, N, K), rel=1e-12)


def test_the_tile_shape_is_chosen_for_the_sms_left():
    """cuBLAS is told the SM count (SM_COUNT_TARGET): the kernel model's launch SMs are the SMs left."""
    km = margin_kernels(gpu_compute("H100"), 24)
    assert (km.sms, km.launch_sms) == (108, 108)


def test_buffer_names_follow_transformer_engine():
    assert buffer_name("attention", "ag", "fprop") == "qkv_fprop"
    assert buffer_name("attention", "ag", "wgrad") == "qkv_wgrad"
    assert buffer_name("attention", "rs", "fprop") == "proj_fprop"
    assert buffer_name("attention", "rs", "dgrad") == "proj_dgrad"
    assert buffer_name("attention", "rs", "wgrad") is None  # the row-parallel wgrad's ``external`` overlap
    assert buffer_name("mlp", "rs", "fprop") == "fc2_fprop"
    assert buffer_name("mamba", "ag", "dgrad") == "fc1_dgrad"  # Megatron-Core's tp_comm_buffer_name "fc1"
    assert buffer_name("moe", "", "fprop") is None


def test_nemos_and_transformer_engines_configurations_as_published():
    c = configs()
    assert c[BF16_70B]["proj_fprop"] == ("pipeline", 24, True)
    assert c[BF16_70B]["fc2_fprop"] == ("pipeline", 16, True)
    assert c[BF16_70B]["qkv_wgrad"] == ("bulk", 24, False)
    assert c["userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192"]["proj_fprop"] == ("ring_exchange", 1, True)
    assert c["userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192_nemo2502"]["proj_fprop"] == ("pipeline", 24, True)
    assert c["userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192"]["proj_fprop"] == ("pipeline", 32, True)
    assert c["userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096"]["fc2_fprop"] == ("pipeline", 24, True)
    assert {b: v for b, v in c["te_default"].items() if v[2]} == {
        b: ("pipeline" if b.endswith("fprop") else "bulk", 16, True)
        for b in ("qkv_dgrad", "qkv_wgrad", "proj_fprop", "fc1_dgrad", "fc1_wgrad", "fc2_fprop")}
    assert not any(v[2] for v in c["te_default_v1"].values())
    for name, cfg in c.items():
        assert len(cfg) == 10 and all(m in ("ring_exchange", "pipeline", "bulk") and n >= 1 for m, n, _ in
                                      cfg.values()), name


def _ops(model, lay, kind):
    return {(op.module, op.name): op for op in block_ops(model, lay, kind)}


def test_each_tp_gemm_pass_takes_its_buffers_margin():
    m = load_model("llama3-70b")
    lay = make_layout(**SHAPE, tp_overlap_config=BF16_70B)
    att, mlp = _ops(m, lay, "*"), _ops(m, lay, "-")
    assert pass_margins(att[("attention", "out_proj")], lay) == {"fprop": 24}
    assert pass_margins(att[("attention", "qkv")], lay) == {}
    assert pass_margins(mlp[("mlp", "fc2")], lay) == {"fprop": 16}
    default = make_layout(**SHAPE)
    assert default.tp_overlap_config == "te_default"
    assert pass_margins(_ops(m, default, "-")[("mlp", "fc1")], default) == {"dgrad": 16, "wgrad": 16}
    # no userbuffers, no margin: TP overlap off, TP 1, or no sequence parallelism
    for kw in (dict(overlap_tp=False), dict(tp=1, dp=16), dict(sequence_parallel=False)):
        lay2 = make_layout(**{**SHAPE, **kw}, tp_overlap_config=BF16_70B)
        assert pass_margins(_ops(m, lay2, "*")[("attention", "out_proj")], lay2) == {}


def _out_proj_under_margin():
    """The one-tile H100, Llama 3 70B, its layout under NeMo's BF16 70B configuration and under TE 1.x's (no
    margin), the output projection, its tile count and its forward GEMM's seconds on all 132 SMs."""
    gpu, m = _one_tile_gpu(), load_model("llama3-70b")
    lay = make_layout(**SHAPE, tp_overlap_config=BF16_70B)
    plain = make_layout(**SHAPE, tp_overlap_config="te_default_v1")
    op = _ops(m, lay, "*")[("attention", "out_proj")]
    tiles = math.ceil(op.m / 128) * math.ceil(op.n / 256)
    t = gemm_s(gpu.kernels, op.m, op.n, op.k)
    return gpu, m, lay, plain, op, tiles, t


def test_the_blocks_forward_grows_by_the_margined_gemms_waves():
    """The attention block's forward under NeMo's BF16 70B configuration less under TE 1.x's (no margin) is the
    output projection's forward GEMM on 108 SMs less on 132: ``t x (ceil(T/108) / ceil(T/132) - 1)``."""
    gpu, m, lay, plain, op, tiles, t = _out_proj_under_margin()
    want = t * (math.ceil(tiles / 108) / math.ceil(tiles / 132) - 1.0)
    assert want > 0
    got = block_time(m, lay, gpu, "*").forward_s - block_time(m, plain, gpu, "*").forward_s
    assert got == pytest.approx(want, rel=1e-9)
    assert op_passes_s(op, gpu, lay)[1] == pytest.approx(op_passes_s(op, gpu, plain)[1], rel=1e-12)  # no dgrad margin


def test_the_tp_collective_hides_behind_the_margined_gemm():
    """The forward reduce-scatter of the output projection overlaps with that projection's forward GEMM as its
    communicator launches it, on 132 - 24 SMs (rev52: pricing the pair on all 132 SMs passed every test): the pair's
    seconds grow by ``t x (ceil(T/108) / ceil(T/132) - 1)`` as the block's forward does."""
    gpu, m, lay, plain, op, tiles, t = _out_proj_under_margin()
    assert block_time(m, plain, gpu, "*").tp_pairs_s["rs_fprop"] == pytest.approx(t, rel=1e-9)
    assert block_time(m, lay, gpu, "*").tp_pairs_s["rs_fprop"] == pytest.approx(
        t * math.ceil(tiles / 108) / math.ceil(tiles / 132), rel=1e-9)
    assert block_time(m, lay, gpu, "*").tp_pairs_s["rs_dgrad"] == pytest.approx(
        block_time(m, plain, gpu, "*").tp_pairs_s["rs_dgrad"], rel=1e-12)  # proj_dgrad: a ring exchange, no margin


def test_an_unknown_configuration_is_refused_naming_the_field():
    with pytest.raises(TopoError) as e:
        make_layout(**SHAPE, tp_overlap_config="userbuffers_bf16_h100")
    assert "tp_overlap_config" in str(e.value) and "te_default" in str(e.value)


def test_the_note_says_what_the_margin_takes():
    assert margins_note(make_layout(**SHAPE, tp_overlap_config=BF16_70B), load_model("llama3-70b"), 132) == (
        f"TP overlap ({BF16_70B}): the GEMMs of proj_fprop 24, fc2_fprop 16 run on the 132 SMs less that many "
        "(Transformer Engine's set_sm_margin)")
    assert margins_note(make_layout(**SHAPE, tp_overlap_config="te_default_v1"), load_model("llama3-70b"), 132) is None
    assert margins_note(make_layout(**{**SHAPE, "overlap_tp": False}), load_model("llama3-70b"), 132) is None
    assert margin_sms("te_default", None) == 0


CLI = ["train", "dgx-h100-superpod", "--model", "llama3-70b", "--tp", "4", "--pp", "4", "--dp", "4",
       "--global-batch", "64", "--seq", "8192"]


def test_cli_json_and_ops_show_the_default_and_its_margins():
    out = json.loads(run_cli(*CLI, "--layout", "overlap_tp=true", "--ops", "--json", check=True).stdout)
    assert out["layout"]["tp_overlap_config"] == "te_default"
    rows = {(r["module"], r["op"]): r for r in out["block_ops"]["-"]}
    assert rows[("mlp", "fc2")]["sm_margin"] == {"fprop": 16}
    assert rows[("mlp", "fc1")]["sm_margin"] == {"dgrad": 16, "wgrad": 16}
    assert any(n.startswith("TP overlap (te_default)") for n in out["notes"])
    text = run_cli(*CLI, "--layout", f"overlap_tp=true,tp_overlap_config={BF16_70B}", "--ops", check=True).stdout
    assert f"tp_overlap_config {BF16_70B}" in text and "SMs given up" in text


def test_cli_bad_configuration_is_one_line():
    p = run_cli(*CLI, "--layout", "overlap_tp=true,tp_overlap_config=ub_fast")
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.startswith("error: --layout: tp_overlap_config: unknown userbuffers configuration 'ub_fast'; "
                               "allowed: te_default, te_default_v1"), p.stderr


def _bench():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import training_accuracy as ta
    return ta


def test_each_row_takes_its_recipes_configuration():
    ta = _bench()
    rows = {r["run_id"]: r for r, _ in ta._published_rows()}

    def cfg(rid):
        return ta.tp_overlap_config(rows[rid], ta._row_model(rows[rid]))

    assert cfg("nemo2502dgxc_h100_llama31_70b_bf16_64") == BF16_70B
    assert cfg("nemo2502dgxc_h100_llama31_70b_fp8_64") == "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192_nemo2502"
    assert cfg("nemo2504dgxc_h100_llama31_405b_bf16_512") == "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192"
    assert cfg("nemo2504dgxc_gb200_llama31_405b_bf16_128") == "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192"
    assert cfg("nemo2504dgxc_gb200_nemotron4_340b_bf16_128") == "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096"
    assert cfg("nemo2502_b200_nemotron4_340b") == "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096"
    assert cfg("nemo2504dgxc_h100_nemotron4_340b_bf16_256") == "te_default"
    assert cfg("nemo2504dgxc_gb200_grok1_bf16_128") == "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192"
    assert cfg("mb2511_h100_llama3_70b") == "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192"
    assert cfg("mb2602_gb200_llama31_405b") == "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192"
    assert cfg("mb2511_h100_qwen3_235b") == "te_default"
    assert cfg("nemo2407_gpt3_175b_128") == "te_default_v1"
    for rid in rows:  # every row's name is a configuration the layout takes
        assert cfg(rid) in configs(), rid


def test_nemo_mixtral_rows_run_without_tp_overlap():
    """NeMo 2's Mixtral 8x22B recipe leaves MegatronCommOverlapCallback's tp_comm_overlap unset, which the callback
    turns off (NVIDIA/NeMo@6f2c6fda megatron_comm_overlap.py lines 134-135)."""
    runs = {s["run"]: s["lay"] for s in published_setups()}
    assert not runs["nemo2504_gb200_mixtral_8x22b"].overlap_tp
    assert not runs["nemo2502_b200_mixtral_8x22b"].overlap_tp
    assert runs["nemo2504dgxc_gb200_grok1_bf16_128"].overlap_tp  # Grok's script sets it (line 206)


# A bad entry of the bundled tp_overlap.toml: one line naming the file, the key and what is allowed (rev52: the
# default configuration's path raised "internal error (ValueError ...)", exit 1; a named one blamed --layout's
# tp_overlap_config; sm_margin = "false" read as true, num_sm = 24.7 as 24 and a misspelt buffer took the default)
_GOOD = 'proj_fprop = { method = "pipeline", num_sm = 24, sm_margin = true }'  # the first with it: ub_cfg_h100_h12288
_UB = "ub_cfg_h100_h12288_tp4_mbs2_seqlen2048"


@pytest.fixture
def bundled_tp_overlap(tmp_path, monkeypatch):
    """Write a changed copy of tp_overlap.toml where :func:`configs` reads it (its cache cleared before and after)."""
    import topo.training.tp_overlap as tpo
    text = (Path(tpo.__file__).parent.parent / "data" / "compute" / "tp_overlap.toml").read_text(encoding="utf-8")
    assert _GOOD in text

    def write(old, new):
        (tmp_path / "tp_overlap.toml").write_text(text.replace(old, new, 1), encoding="utf-8")
        tpo.configs.cache_clear()

    monkeypatch.setattr(tpo, "data_dir", lambda *parts: tmp_path)
    yield write
    tpo.configs.cache_clear()


@pytest.mark.parametrize("old, new, key, says", [
    (_GOOD, 'proj_fprop = { method = "pipeline", num_sm = 24, sm_margin = "false" }', f"config.{_UB}.proj_fprop",
     "sm_margin = true or false"),
    (_GOOD, 'proj_fprop = { method = "pipeline", num_sm = 24.7, sm_margin = true }', f"config.{_UB}.proj_fprop",
     "num_sm = a whole number >= 1"),
    (_GOOD, 'proj_fprop = { method = "pipeline", num_sm = "x", sm_margin = true }', f"config.{_UB}.proj_fprop",
     "num_sm = a whole number >= 1"),
    (_GOOD, 'proj_fprop = { method = "pipeline", num_sm = 24 }', f"config.{_UB}.proj_fprop", "sm_margin"),
    (_GOOD, "proj_fprop = 3", f"config.{_UB}.proj_fprop", "method = one of ring_exchange, pipeline, bulk"),
    (_GOOD, _GOOD.replace("proj_fprop", "proj_fprp"), f"config.{_UB}", "unknown key 'proj_fprp'; allowed: source"),
    ("source = \"NVIDIA/NeMo-Framework-Launcher", "# source = \"", f"config.{_UB}.source", "no source"),
    ("[config.te_default]", "[config.te_default_v2]", "config", "no [config.te_default] table"),
    ('qkv_fprop = { method = "ring_exchange", num_sm = 1, sm_margin = false }\n', "", "config.te_default",
     "no qkv_fprop"),
    ("[config.te_default]", "[config.te_default]\nx = [", None, "invalid TOML"),
])
@pytest.mark.parametrize("named", [False, True])
def test_a_bad_tp_overlap_toml_entry_is_one_line_naming_its_key(bundled_tp_overlap, capsys, old, new, key, says,
                                                                named):
    from topo.cli.main import main
    bundled_tp_overlap(old, new)
    pairs = "overlap_tp=true" + (f",tp_overlap_config={BF16_70B}" if named else "")
    assert main([*CLI, "--layout", pairs]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err, err
    assert err.startswith(f"error: tp_overlap.toml: {key + ': ' if key else ''}"), err
    assert says in err, err


def test_the_margins_the_note_and_the_tp_ring_read_one_rule():
    """Userbuffers run the TP collectives, and take their SMs, exactly where the TP ring runs (rev52: the rule was
    written three times): overlap_tp with sequence parallelism and tp > 1."""
    from topo.training.step import tp_ring_steps
    from topo.training.tp_overlap import userbuffers_on
    m = load_model("llama3-70b")
    for kw in ({}, dict(overlap_tp=False), dict(tp=1, dp=16), dict(sequence_parallel=False)):
        lay = make_layout(**{**SHAPE, **kw})
        on = userbuffers_on(lay, m)
        assert on == (kw == {})
        assert (tp_ring_steps(lay, m) > 1) == on
        assert (margins_note(lay, m, 132) is not None) == on
        assert bool(pass_margins(_ops(m, lay, "-")[("mlp", "fc1")], lay)) == on


# rev52: a num_sm the GPU does not have was clamped to 1 SM left (comm_sms.reduced_gpu), silently. H100 SXM has 132
# SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022; gpus.toml): with sm_margin the communicator may
# take 131 (the GEMM keeps one, _math_sms = sm_count - num_comm_sm), without it 132.
_BIG = "proj_fprop = {{ method = \"pipeline\", num_sm = {n}, sm_margin = {m} }}"


@pytest.mark.parametrize("n, margin, top", [(132, "true", 131), (133, "false", 132), (1000, "true", 131)])
@pytest.mark.parametrize("search", [False, True])
def test_a_num_sm_the_gpu_does_not_have_is_one_line(bundled_tp_overlap, capsys, n, margin, top, search):
    from topo.cli.main import main
    bundled_tp_overlap(_GOOD, _BIG.format(n=n, m=margin))
    if search:
        argv = ["train", "dgx-h100-superpod", "--model", "llama3-70b", "--gpus", "64", "--global-batch", "64",
                "--search", "--layout", f"tp_overlap_config={_UB}"]
    else:
        argv = [*CLI, "--layout", f"overlap_tp=true,tp_overlap_config={_UB}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    why = " less one for the GEMM beside it (sm_margin)" if margin == "true" else ""
    assert err == (f"error: tp_overlap.toml: config.{_UB}.proj_fprop.num_sm: {n}; allowed: 1 to {top} on H100 "
                   f"(132 SMs{why})\n")


def test_the_num_sm_bound_is_the_gpus_sms(bundled_tp_overlap):
    from topo.training.tp_overlap import check_num_sm
    h100, a100 = gpu_compute("H100"), gpu_compute("A100")
    assert (h100.sms, a100.sms) == (132, 108)  # whitepapers (gpus.toml sms_source)
    bundled_tp_overlap(_GOOD, _BIG.format(n=131, m="true"))
    check_num_sm(_UB, h100)
    with pytest.raises(TopoError, match=r"num_sm: 131; allowed: 1 to 107 on A100"):
        check_num_sm(_UB, a100)
    bundled_tp_overlap(_GOOD, _BIG.format(n=132, m="false"))
    check_num_sm(_UB, h100)
    check_num_sm("te_default", a100)  # the configuration the layout names: te_default's own entries fit
    check_num_sm("no_such_configuration", h100)  # left to the layout's validation


def test_the_named_configuration_of_each_recipe_is_data():
    """rev52: which named configuration each model's NeMo 2 / Megatron-Bridge recipe runs was a Python literal of
    the benchmark (``UB_NAMED``); now ``tp_overlap_recipes.toml`` with its sources, read once. NeMo@6f2c6fda
    scripts/performance/llm/pretrain_llama3_70b.py lines 92-110: H100 the ``h8192_tp4`` configurations, B200 and
    GB200 the ``b200_h8192_tp2`` ones; pretrain_llama31_405b.py lines 108-126 (``h16384_tp8_cp2`` / ``tp4_cp2``)."""
    import tomllib
    import topo.training.tp_overlap as tpo
    named = tpo.recipe_configs()
    assert named is tpo.recipe_configs()  # loaded once
    assert named["llama3-70b"][("h100", "bf16")] == BF16_70B
    assert named["llama3-70b"][("b200", "fp8")] == "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192"
    assert named["llama3-405b"][("h100", "fp8")] == "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192"
    assert named["gpt3-175b"][("b200", "bf16")] == "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048"
    assert all(n in configs() for m in named.values() for n in m.values())
    assert not hasattr(_bench(), "UB_NAMED")
    data = tomllib.loads((Path(tpo.__file__).parent.parent / "data" / "compute" / tpo.RECIPES).read_text())
    assert all(e["source"].startswith("NVIDIA/NeMo@") and e["status"] == "published" for e in data["named"].values())


@pytest.mark.parametrize("old, new, key, says", [
    ('b200 = "h8192_tp2_mbs1_seqlen8192"', 'b200 = "h8192_tp3_mbs1_seqlen8192"', "named.llama3-70b.b200",
     "'h8192_tp3_mbs1_seqlen8192' makes userbuffers_bf16_b200_h8192_tp3_mbs1_seqlen8192, not a configuration"),
    ('b200 = "h8192_tp2_mbs1_seqlen8192"\n', "", "named.llama3-70b", "allowed: a table of h100, b200, source, status"),
])
def test_a_bad_recipe_entry_is_one_line_naming_its_key(tmp_path, monkeypatch, old, new, key, says):
    import topo.training.tp_overlap as tpo
    data = Path(tpo.__file__).parent.parent / "data" / "compute"
    text = (data / tpo.RECIPES).read_text(encoding="utf-8")
    assert old in text
    (tmp_path / tpo.RECIPES).write_text(text.replace(old, new, 1), encoding="utf-8")
    (tmp_path / tpo.SOURCE).write_text((data / tpo.SOURCE).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(tpo, "data_dir", lambda *parts: tmp_path)
    tpo.recipe_configs.cache_clear()
    tpo.configs.cache_clear()
    try:
        with pytest.raises(TopoError) as e:
            tpo.recipe_configs()
    finally:
        tpo.recipe_configs.cache_clear()
        tpo.configs.cache_clear()
    line = str(e.value)
    assert line.startswith(f"tp_overlap_recipes.toml: {key}: ") and says in line and "\n" not in line, line
