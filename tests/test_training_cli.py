"""`topo train` bad input (issues 20 and 23): one line naming the option or field and what is allowed, exit 2."""

import json

import pytest

from conftest import run_cli

BASE = ["train", "dgx-h100-superpod", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8", "--pp", "4",
        "--dp", "32", "--global-batch", "256"]


def one_line(p):
    assert p.returncode == 2 and p.stdout == "", p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("extra, needle", [
    (["--efficiency", "1.5"], "--efficiency: must be a fraction of the GPU's peak in (0, 1], got 1.5"),
    (["--tokens", "-5"], "--tokens: must be a positive number of tokens, got -5"),
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
    assert ": dp: " in line and "1,024" in line
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "deepseek-v3-671b", "--gpus", "1024",
                            "--pp", "16", "--dp", "64", "--ep", "48", "--global-batch", "1024"))
    assert ": ep: " in line and "256 experts" in line
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "1024", "--pp", "32",
                            "--vpp", "2", "--dp", "32", "--global-batch", "2048"))
    assert ": pp: " in line and "allowed: pp x vpp <= 32" in line
    bad = tmp_path / "m.toml"
    bad.write_text('name = "x"\nsource = "me"\nlayers = 4\nhidden = -8\nffn_hidden = 32\nheads = 2\n'
                   'vocab = 100\nseq_len = 64\n')
    line = one_line(run_cli("train", "dgx-h100-superpod", "--model", str(bad), "--global-batch", "8"))
    assert f"{bad}: hidden: must be >= 1, got -8" in line


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
