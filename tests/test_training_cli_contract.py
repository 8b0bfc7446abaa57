"""`topo train` end to end: the JSON contract, the library's numbers, one-line errors."""

import json

import pytest

import topo
from topo.training.parallel import make_layout
from topo.training.model import load_model
from topo.training.step import estimate_step
from topo.units import format_time

from conftest import run_cli

ARGS = ["train", "dgx-h100-superpod", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8", "--pp", "4",
        "--dp", "32", "--global-batch", "256"]


def test_json_contract_equals_library():
    p = run_cli(*ARGS, "--json", check=True)
    d = json.loads(p.stdout)
    for k in ("step_time_s", "tokens_per_s", "tflop_per_s_per_gpu", "mfu", "memory_per_gpu_bytes", "fits",
              "breakdown_s", "bound_by"):
        assert k in d
    lib = estimate_step(topo.build_fabric(topo.load_spec("dgx-h100-superpod")), load_model("llama3-70b"),
                   make_layout(tp=8, pp=4, dp=32, global_batch=256))
    assert d["step_time_s"] == pytest.approx(lib.step_time_s, rel=1e-9)
    assert set(d["breakdown_s"]) == {"compute", "bubble", "optimizer", "tp", "cp", "pp", "dp", "ep", "fp8_amax",
                                   "fp8_weight_cast"}  # findings 424


def test_text_table():
    p = run_cli(*ARGS, check=True)
    assert "step time" in p.stdout and "bound by tier" in p.stdout and "memory per GPU" in p.stdout


@pytest.mark.parametrize("precision, peak_TFLOPs", [("bf16", 989), ("fp8", 1979)])  # NVIDIA H100 SXM datasheet, dense
def test_the_text_says_which_peak_the_mfu_is_of(precision, peak_TFLOPs):
    # walk6: "MFU 19.0%" on an FP8 job did not say whether it was of the FP8 or the BF16 peak (conventions differ)
    d = json.loads(run_cli(*ARGS, "--precision", precision, "--json", check=True).stdout)
    assert d["peak_flop_per_s_per_gpu"] == peak_TFLOPs * 1e12
    assert d["mfu"] == pytest.approx(d["tflop_per_s_per_gpu"] * 1e12 / d["peak_flop_per_s_per_gpu"], rel=1e-9)
    line = run_cli(*ARGS, "--precision", precision, check=True).stdout.splitlines()[1]
    assert line.endswith(f"MFU {d['mfu']:.1%} of the {precision} peak ({peak_TFLOPs:,} TFLOP/s dense)"), line


def test_the_time_to_train_line_is_the_json_figure_in_days():
    # --tokens 15e12 (Llama 3's 15T tokens, Meta's model card): the text's days are the JSON's seconds / 86,400
    # and its tokens / tokens_per_s (rev38: the line converted in place; now through topo.units)
    d = json.loads(run_cli(*ARGS, "--tokens", "15e12", "--json", check=True).stdout)
    assert d["time_to_train_s"] == pytest.approx(15e12 / d["tokens_per_s"], rel=1e-9)
    (line,) = [x for x in run_cli(*ARGS, "--tokens", "15e12", check=True).stdout.splitlines()
               if x.startswith("time to train")]
    # walk20: a team sizing a run budgets GPU-hours (DeepSeek-V3's report gives 2.788M H800 GPU-hours) and asks how
    # sure the days are: the job's GPUs x the time, and the days at the uncertainty interval's steps
    t, lo, hi = d["time_to_train_s"], d["uncertainty"]["low_s"], d["uncertainty"]["high_s"]
    assert d["gpu_hours_to_train"] == pytest.approx(d["gpus"] * t / 3600, rel=1e-12)
    assert d["time_to_train_interval_s"] == pytest.approx([t * lo / d["step_time_s"], t * hi / d["step_time_s"]],
                                                          rel=1e-12)
    assert line == (f"time to train 15T tokens: {t / 86400:.1f} days, {d['gpu_hours_to_train'] / 1e6:.3g}M "
                    f"GPU-hours on {d['gpus']:,} GPUs; {t * lo / d['step_time_s'] / 86400:.1f} days - "
                    f"{t * hi / d['step_time_s'] / 86400:.1f} days at the uncertainty's ends (at the step, no "
                    f"failures or restarts: topo plan --model --layout --tokens gives the time with the plan's "
                    f"goodput)")


def test_a_small_jobs_gpu_hours_are_whole_hours_not_a_fraction_of_a_million():
    # rev60: 8 GPUs for 1e9 tokens printed "2.86e-05M GPU-hours"; under a million they are whole hours (the JSON's
    # gpu_hours_to_train, its GPUs x the time / 3,600 s), with separators
    args = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--global-batch", "64",
            "--tokens", "1e9"]
    d = json.loads(run_cli(*args, "--json", check=True).stdout)
    assert 1 < d["gpu_hours_to_train"] < 1e6
    (line,) = [x for x in run_cli(*args, check=True).stdout.splitlines() if x.startswith("time to train")]
    assert f", {round(d['gpu_hours_to_train']):,} GPU-hours on 8 GPUs" in line and "e-" not in line


def test_a_region_step_says_which_peak_its_mfu_is_of_as_train_does():
    # tidy11: the region line said "(MFU 18.1%)" without the peak; it goes through the one formatter `topo train`
    # uses. 1,979 TFLOP/s: NVIDIA H100 SXM datasheet, FP8 dense
    cmd = ["train", "two-site-h100", "--model", "llama3-8b", "--tp", "8", "--pp", "1", "--global-batch", "768",
           "--precision", "fp8"]
    one = json.loads(run_cli(*cmd, "--json", check=True).stdout)["one_site"]
    assert one["peak_flop_per_s_per_gpu"] == 1979e12 and one["precision"] == "fp8"
    line = run_cli(*cmd, check=True).stdout.splitlines()[0]
    assert line.endswith(f"steps in {format_time(one['step_time_s'])}, MFU {one['mfu']:.1%} of the fp8 "
                         "peak (1,979 TFLOP/s dense)"), line


def test_the_does_not_fit_note_gives_gb_and_the_gpus_gib():
    # tidy11: the note converts through topo.units.format_in; an H100's HBM is 85.5 GB = 79.6 GiB (GB = 1e9,
    # GiB = 2**30), the catalog's capacity
    cmd = ["train", "dgx-h100-superpod", "--model", "llama3-70b", "--gpus", "1024", "--tp", "1", "--pp", "1",
           "--global-batch", "1024"]
    d = json.loads(run_cli(*cmd, "--json", check=True).stdout)
    m = d["memory"]
    assert not d["fits"] and m["short_bytes"] == pytest.approx(m["total_bytes"] - m["capacity_bytes"])
    want = (f"does not fit: {m['total_bytes'] / 1e9:.1f} GB per GPU on stage 0, {m['short_bytes'] / 1e9:.1f} GB "
            f"more than the H100's {m['capacity_bytes'] / 1e9:.1f} GB ({m['capacity_bytes'] / 2**30:.1f} GiB)")
    assert want in d["notes"] and "the H100's 85.5 GB (79.6 GiB)" in want  # walk16: read "of a H100"
    assert f"note: {want}" in run_cli(*cmd, check=True).stdout.splitlines()


@pytest.mark.parametrize("extra, key", [
    (["--dp", "64"], "--dp"),  # product 8 x 4 x 64 != 1024: named by the flag given
    (["--tp", "16", "--dp", "16"], "--tp"),  # larger than the 8-GPU NVLink domain
    (["--model", "nope-7b"], "model"),
])
def test_bad_input_is_one_line(extra, key):
    args = list(ARGS)
    for i in range(0, len(extra), 2):
        j = args.index(extra[i])
        args[j + 1] = extra[i + 1]
    p = run_cli(*args)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and (f": {key}: " in lines[0]
                                                                    or lines[0].startswith(f"error: {key}: "))


def test_search_json():
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64",
                "--search", "--top", "3", "--json", check=True)
    d = json.loads(p.stdout)
    assert len(d["ranked"]) == 3 and d["evaluated"] >= 3
    t = [r["step_time_s"] for r in d["ranked"]]
    assert t == sorted(t)


def test_fits_nowhere_is_one_line():
    p = run_cli("train", "dgx-h100-superpod", "--model", "gpt4-1.8t-moe", "--gpus", "8", "--global-batch", "8",
                "--search")
    assert p.returncode == 2 and "fits in no layout" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_layout_file_and_its_errors(tmp_path):
    good = tmp_path / "job.toml"
    good.write_text('tp = 8\npp = 4\ndp = 32\nglobal_batch = 256\nrecompute = "selective"\n')
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", str(good), "--json", check=True)
    d = json.loads(p.stdout)
    assert d["layout"]["pp"] == 4 and d["layout"]["recompute"] == "selective"
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", str(good), "--pp", "2",
                "--dp", "64", "--json", check=True)
    assert json.loads(p.stdout)["layout"]["pp"] == 2  # the command line wins
    bad = tmp_path / "bad.toml"
    bad.write_text('tp = 8\npp = 4\ndp = 32\nglobal_batch = 256\nrecompute = "some"\n')
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", str(bad))
    assert p.returncode == 2 and f"{bad}: recompute: must be one of" in p.stderr
    typo = tmp_path / "typo.toml"
    typo.write_text('tp = 8\npipeline = 4\nglobal_batch = 256\n')
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", str(typo))
    assert p.returncode == 2 and "pipeline: unknown key" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    # walk6: a typo'd key beside a missing one was said second: `--layout tpp=8` said "global_batch: is required
    # but missing", and only once that was given, that 'tpp' is unknown
    for layout in ("tpp=8", str(typo)):
        if layout == str(typo):
            typo.write_text("tpp = 8\n")
        p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", layout)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert p.stderr.startswith(f"error: {'--layout' if layout == 'tpp=8' else typo}: tpp: unknown key 'tpp'; "
                                   "allowed: tp, ") and p.stderr.endswith("; did you mean 'tp'?\n"), p.stderr


# --- a new user's walk (walk3): options that do not apply are errors, and every error names the flag given ----------

@pytest.mark.parametrize("extra, key, says", [
    (["--across", "pp"], "--across", "applies to a region of several sites"),  # was dropped silently on one site
    (["--outer-every", "5"], "--outer-every", "applies to a region of several sites"),
    (["--rank-orders", "tp-cp-ep-dp-pp"], "--rank-orders", "without --search"),  # was dropped without --search
    (["--top", "4"], "--top", "without --search there is one layout"),  # walk16: was dropped without --search
    (["--search", "--tokens", "1e12"], "--tokens", "not with --search"),  # walk16: no line, no key
    (["--overlap", "xx=on"], "--overlap", "write DIM=on or DIM=off"),  # was named 'overlap', not its flag
    (["--recompute", "selective", "--recompute-modules", "bogus"], "--recompute-modules",
     "got 'bogus'"),  # was named '--recompute-modules.0', no such flag
])
def test_an_option_that_does_not_apply_or_is_wrong_names_its_flag(extra, key, says):
    p = run_cli(*ARGS, *extra)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}: ") and says in lines[0], p.stderr


def test_region_options_still_apply_to_a_region():
    p = run_cli("train", "two-site-h100", "--model", "llama3-8b", "--dp", "8", "--global-batch", "8",
                "--outer-every", "5", "--json", check=True)
    assert any(s["outer_every"] == 5 for s in json.loads(p.stdout)["strategies"])


def test_pipeline_schedule_flag_runs_dualpipe_as_the_library_does():
    """``--pipeline-schedule dualpipe`` is the layout's ``pipeline_schedule`` (DeepSeek-V3's DualPipe, arXiv
    2412.19437 sec. 3.2.1): the CLI's step equals the library's, differs from 1F1B's, and an odd pp is one line
    naming the flag."""
    base = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "64", "--pp", "8", "--dp", "8",
            "--global-batch", "64", "--json"]
    dual = json.loads(run_cli(*base, "--pipeline-schedule", "dualpipe", check=True).stdout)
    one = json.loads(run_cli(*base, check=True).stdout)
    lib = estimate_step(topo.build_fabric(topo.load_spec("dgx-h100-superpod")), load_model("llama3-8b"),
                        make_layout(pp=8, dp=8, global_batch=64, pipeline_schedule="dualpipe"))
    assert dual["step_time_s"] == pytest.approx(lib.step_time_s, rel=1e-9)
    assert dual["breakdown_s"]["bubble"] < one["breakdown_s"]["bubble"]
    p = run_cli(*base[:6], "--pp", "4", "--vpp", "2", "--dp", "16", "--global-batch", "64",
                "--pipeline-schedule", "dualpipe")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--pipeline-schedule" in p.stderr


def test_step_checks_of_a_layout_are_named_by_its_file_or_flag(tmp_path):
    """The FP8 recipe is checked by the step (it needs the GPU): MXFP8's block scales need Blackwell's tensor cores
    (Megatron-LM megatron/core/transformer/moe/README.md, FP8 recipes). Its error names the layout file, or
    ``--layout`` for pairs, like every other layout error, not a bare ``layout``."""
    keys = "tp = 2\ndp = 8\nep = 4\nglobal_batch = 64\nprecision = \"fp8\"\nfp8_recipe = \"mxfp8\"\n"
    f = tmp_path / "mx.toml"
    f.write_text(keys)
    base = ("train", "dgx-h100-superpod", "--model", "mixtral-8x7b", "--gpus", "16", "--layout")
    pairs = "tp=2,dp=8,ep=4,global_batch=64,precision=fp8,fp8_recipe=mxfp8"
    for layout, source in ((str(f), str(f)), (pairs, "--layout")):
        p = run_cli(*base, layout)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and p.stdout == "" and len(lines) == 1
        assert lines[0].startswith(f"error: {source}: fp8_recipe: mxfp8 needs Blackwell"), lines[0]


def test_pipeline_schedule_choices_are_the_layouts():
    """``--pipeline-schedule`` offers exactly the schedules the layout takes (one list,
    :data:`topo.training.parallel.PIPELINE_SCHEDULES`)."""
    from typing import get_args

    from topo.cli.main import build_parser
    from topo.training.parallel import PIPELINE_SCHEDULES, ParallelLayout

    train = build_parser("train").commands["train"]
    flag = next(a for a in train._actions if "--pipeline-schedule" in a.option_strings)
    assert tuple(flag.choices) == PIPELINE_SCHEDULES
    assert get_args(ParallelLayout.model_fields["pipeline_schedule"].annotation) == PIPELINE_SCHEDULES


def test_help_describes_every_cp_comm_type():
    """walk16: ``--cp-comm-type {p2p,all_gather,a2a}``'s help described p2p and all_gather only."""
    text = " ".join(run_cli("train", "--help", check=True).stdout.split())
    assert "or a2a (Ulysses' all-to-alls: each TP rank's query and key/value heads divide by cp)" in text


def test_an_error_names_a_switch_by_its_flag():
    """walk16: ``--tp 16`` on 8-GPU domains said "allow it with tp_across_domains", a layout field the command line
    spells ``--tp-across-domains``; a ``--layout`` keeps the field's name."""
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--tp", "16", "--global-batch", "256")
    assert p.returncode == 2 and p.stderr == ("error: --tp: 16 is larger than the 8-GPU NVLink domain; allow it with "
                                              "--tp-across-domains\n"), p.stderr
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--layout", "tp=16,global_batch=256")
    assert p.returncode == 2 and p.stderr.endswith("allow it with tp_across_domains\n"), p.stderr
