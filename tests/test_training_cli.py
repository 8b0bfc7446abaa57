"""`topo train` bad input (issues 20 and 23): one line naming the option or field and what is allowed, exit 2."""

import json

import pytest

from conftest import run_cli
from topo.training.mapping import FEWER_GPUS

BASE = ["train", "dgx-h100-superpod", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8", "--pp", "4",
        "--dp", "32", "--global-batch", "256"]


def one_line(p):
    assert p.returncode == 2 and p.stdout == "", p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("extra, needle", [
    (["--efficiency", "1.5"], "--efficiency: must be a fraction of the GPU's peak in (0, 1], got 1.5"),
    (["--tokens", "-5"], "--tokens: must be a positive, finite number of tokens, got -5"),
    # walk6: inf printed "time to train inf tokens: inf days" (and nulls under --json)
    (["--tokens", "inf"], "--tokens: must be a positive, finite number of tokens, got inf"),
    (["--top", "-3", "--search"], "--top: must be a whole number >= 1, got -3"),
    (["--pp", "0"], "--pp: must be a whole number >= 1, got 0"),
])
def test_numbers_no_job_has(extra, needle):
    args = [a for a in BASE]
    if "--pp" in extra:
        args[args.index("--pp") + 1] = extra[1]
        extra = []
    assert needle in one_line(run_cli(*args, *extra))


def test_search_without_batch_names_the_flag():
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--search"))
    assert "--global-batch" in line and "required" in line


def test_model_that_is_not_a_regular_file():
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "/dev/zero", "--global-batch", "8"))
    assert "/dev/zero" in line and "not a regular file" in line and "no such" not in line


def test_layout_rules_name_the_field(tmp_path):
    # product != GPUs, experts not divisible by EP, layers < pp x vpp, a model file with a negative dimension
    line = one_line(run_cli(*BASE[:-2], "--global-batch", "256", "--dp", "64"))
    assert line.startswith("error: --dp: ") and "1,024" in line  # the flag the user gave, not 'layout: dp'

    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "deepseek-v3-671b", "--gpus", "1024",
                            "--pp", "16", "--dp", "64", "--ep", "48", "--global-batch", "1024"))
    assert line.startswith("error: --ep: ") and "256 experts" in line
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "1024", "--pp", "32",
                            "--vpp", "2", "--dp", "32", "--global-batch", "2048"))
    assert line.startswith("error: --pp: ") and "allowed: pp x vpp <= 32" in line
    bad = tmp_path / "m.toml"
    bad.write_text('name = "x"\nsource = "me"\nlayers = 4\nhidden = -8\nffn_hidden = 32\nheads = 2\n'
                   'vocab = 100\nseq_len = 64\n')
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", str(bad), "--global-batch", "8"))
    assert f"{bad}: hidden: must be >= 1, got -8" in line


@pytest.mark.parametrize("flag, value, needle", [
    ("--ep", "48", "48 does not divide the 128 experts"),
    ("--remat-policy", "bogus", "unknown remat policy 'bogus'; allowed: none, full"),
    ("--recompute-modules", "bogus", "must be one of 'core_attn'"),
    ("--rank-order", "bogus", "must name each of tp, cp, ep, dp, pp once"),
])
def test_a_flag_beside_layout_pairs_is_named_by_the_flag(flag, value, needle):
    # walk14: with --layout given, a flag's bad value was blamed on the layout ("error: --layout: ep: 48 does not
    # divide ..."), though the flag wins over the layout's field and the layout gave no ep
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "48",
                            "--layout", "dp=48,global_batch=96", flag, value))
    assert line.startswith(f"error: {flag}: ") and needle in line, line
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "48",
                            "--layout", f"dp=48,global_batch=96,{flag[2:].replace('-', '_')}={value}"))
    assert line.startswith("error: --layout: "), line  # the layout's own field: still named by --layout


def test_a_flag_beside_layout_pairs_across_sites_is_named_by_the_flag():
    # walk14: across sites the line began with the pairs themselves ("error: global_batch=96,tp=8: remat_policy: ...")
    line = one_line(run_cli("train", "two-site-h100", "--model", "llama3-8b", "--dp", "48",
                            "--layout", "global_batch=96,tp=8", "--remat-policy", "bogus"))
    assert line.startswith("error: --remat-policy: unknown remat policy 'bogus'; allowed: none"), line


@pytest.mark.parametrize("command", ["train", "plan", "report"])
def test_layout_given_twice_is_refused_not_the_first_dropped(command):
    # walk14: argparse kept the last --layout, so "--layout tp=8,global_batch=8 --layout fp8_recipe=mxfp8" ran
    # without the first and asked for a global batch the user had given
    line = one_line(run_cli(command, "dgx-h100-superpod", "--model", "llama3-8b", "--layout", "tp=8,global_batch=8",
                            "--layout", "fp8_recipe=mxfp8"))
    assert line.startswith(f"error: topo {command}: --layout: given twice ('tp=8,global_batch=8', then "
                           "'fp8_recipe=mxfp8'); give it once"), line


def test_a_first_gpu_too_late_is_named_by_first_gpu_not_gpus():
    # walk14: 8 GPUs from GPU 1,020 of 1,024 was "error: --gpus: the job needs GPUs 1,020 to 1,027 ...", though the
    # 8 GPUs fit and only the start was wrong
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "8", "--tp", "8",
                            "--global-batch", "8", "--first-gpu", "1020"))
    assert line == ("error: --first-gpu: the job needs GPUs 1,020 to 1,027 from this first GPU, but the fabric has "
                    "1,024; allowed: a first GPU from which its 8 GPUs fit (0 fits)")
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "2048", "--tp", "8",
                            "--global-batch", "256", "--first-gpu", "4"))
    assert line.startswith("error: --gpus: 2,048 GPUs asked, but the fabric has 1,024")  # too many: still --gpus


def test_uneven_pipeline_split_is_noted():
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-70b", "--gpus", "24", "--tp", "8", "--pp", "3",
                "--dp", "1", "--global-batch", "8", "--json", check=True)
    notes = json.loads(p.stdout)["notes"]
    assert any("uneven pipeline split: 80 layers over 3 chunks" in n for n in notes)


def test_expert_tensor_parallel_layout_runs():
    # issue 20: TP2 EP64 DP32 with etp 1 (EP over tensor x data ranks) was refused
    p = run_cli("train", "dgx-h100-superpod", "--model", "deepseek-v3-671b", "--gpus", "1024", "--tp", "2",
                "--pp", "16", "--dp", "32", "--ep", "64", "--etp", "1", "--global-batch", "1024", "--json",
                check=True)
    d = json.loads(p.stdout)
    ep = next(c for c in d["comm"] if c["dim"] == "ep")
    assert ep["group_size"] == 64 and d["layout"]["etp"] == 1


GB200_70B = ["train", "gb200-nvl72-superpod", "--model", "llama3-70b", "--gpus", "64", "--global-batch", "256",
             "--tp", "1", "--micro-batch", "2", "--dp-sharding", "zero3", "--precision", "fp8", "--grad-bytes", "2",
             "--gpus-per-domain-used", "64"]


def test_activation_offload_bad_values_one_line(tmp_path):
    # a negative count, offloading with pipeline stages (Megatron-Core refuses it), a layout file's key
    line = one_line(run_cli(*GB200_70B, "--pp", "1", "--dp", "64", "--activation-offload-layers", "-1"))
    assert "--activation-offload-layers: must be a whole number >= 0, got -1" in line
    line = one_line(run_cli(*GB200_70B, "--pp", "4", "--dp", "16", "--activation-offload-layers", "10"))
    assert "error: --activation-offload-layers: 10 needs pp = 1" in line and "got pp 4" in line
    f = tmp_path / "lay.toml"
    f.write_text('tp = 1\npp = 1\ndp = 64\nglobal_batch = 256\nactivation_offload_layers = 80\n')
    line = one_line(run_cli("train", "gb200-nvl72-superpod", "--model", "llama3-70b", "--gpus", "64", "--layout",
                            str(f)))
    assert f"{f}: activation_offload_layers: 80 is not fewer than the model's 80 layers; allowed: 0 to 79" in line


def test_activation_offload_through_the_cli():
    # Megatron-Bridge's GB200 recipe for Llama 3 70B offloads 40 layers' activations (tests/test_training_memory.py)
    # and runs; without it the same layout is reported over the GPU's 186 GB. Of the 40, one stays (in transit)
    from topo.training.memory import activation_bytes_per_layer
    from topo.training.model import load_model
    from topo.training.parallel import make_layout

    got = {n: json.loads(run_cli(*GB200_70B, "--pp", "1", "--dp", "64", "--activation-offload-layers", str(n),
                                 "--json", check=True).stdout) for n in (0, 40)}
    assert got[40]["fits"] and not got[0]["fits"]
    lay = make_layout(global_batch=256, dp=64, micro_batch=2, precision="fp8")
    saved = got[0]["memory"]["activations_bytes"] - got[40]["memory"]["activations_bytes"]
    assert saved == pytest.approx(39 * activation_bytes_per_layer(load_model("llama3-70b"), lay), rel=1e-9)


def test_search_errors_name_the_flag():
    # the library keys them gpus / model; on the command line they are --gpus / --model, with counts as counts
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "2048", "--search",
                            "--global-batch", "512"))
    assert line == "error: --gpus: 2,048 GPUs asked, but the fabric has 1,024" + FEWER_GPUS
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-405b", "--gpus", "8", "--search",
                            "--global-batch", "512"))
    assert line.startswith("error: --model: llama3-405b fits in no layout on 8 GPUs")
    assert line.endswith(" more than the H100's 85.5 GB (79.6 GiB)")  # walk16: "of a H100"


def test_layout_as_pairs_like_plan_and_report(tmp_path):
    # --layout takes tp=..,dp=.. pairs as topo plan and topo report do, a file as before; flags still win
    p = run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--layout", "tp=4,dp=8,global_batch=64",
                "--dp", "4", "--json", check=True)
    doc = json.loads(p.stdout)
    assert doc["layout"]["tp"] == 4 and doc["layout"]["dp"] == 4 and doc["gpus"] == 16
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--layout",
                            "tp=3,dp=8,global_batch=64"))
    assert line == "error: --layout: tp: 3 does not divide the 32 attention heads; allowed: a divisor of 32"
    f = tmp_path / "l.toml"
    f.write_text("tp = 3\ndp = 8\nglobal_batch = 64\n")
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--layout", str(f)))
    assert line == f"error: {f}: tp: 3 does not divide the 32 attention heads; allowed: a divisor of 32"


def test_a_step_larger_than_the_fabric_names_the_flag():
    # tidy13: a step (not --search) said "error: layout: gpus: the job needs GPUs 0 to 2047, but the fabric has 1024"
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "2048",
                            "--global-batch", "2048"))
    # walk8: --gpus beyond the fabric is named before the layout's rules, in --search's words
    assert line == "error: --gpus: 2,048 GPUs asked, but the fabric has 1,024" + FEWER_GPUS
    # walk7: the line says how to get there; the spec grown as it says runs the step
    # (at dp 2,048 it does not fit, which its first line says: the step's own line is the second)
    out = run_cli("train", "dgx-h100-superpod", "--set", "cluster.num_units=8", "--model", "llama3-8b",
                  "--gpus", "2048", "--global-batch", "2048", check=True).stdout.splitlines()
    assert out[0].startswith("DOES NOT FIT: ") and out[1].startswith("llama3-8b on ")


def test_gpus_fill_dp_beside_a_layout_that_gives_none():
    """``--gpus N`` with ``--layout`` pairs that give no dp sizes dp as it does without ``--layout`` (req48: dp stayed
    1 and the job was refused: "tp x cp x pp x dp = ... = 1, not the 32 GPUs of the job"); a layout's own dp is
    still checked against --gpus, and a tp x cp x pp that does not divide them is one line naming --dp."""
    base = ("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "32", "--json")
    got = json.loads(run_cli(*base, "--layout", "tp=2,pp=2", check=True).stdout)
    assert (got["gpus"], got["layout"]["tp"], got["layout"]["pp"], got["layout"]["dp"]) == (32, 2, 2, 8)
    flags = json.loads(run_cli(*base, "--tp", "2", "--pp", "2", check=True).stdout)
    assert got["step_time_s"] == pytest.approx(flags["step_time_s"], rel=1e-9)  # the same job either way
    line = one_line(run_cli(*base, "--layout", "dp=8"))
    assert line == "error: --layout: dp: tp x cp x pp x dp = 1 x 1 x 1 x 8 = 8, not the 32 GPUs of the job"
    line = one_line(run_cli(*base, "--layout", "tp=3"))
    assert line.startswith("error: --dp: not given, and tp x cp x pp = 3 does not divide the 32 GPUs")
