"""Bad input found by fuzzing every command (issue 29's "bad input" clause; docs/calibration-findings.md section
472, fuzz136): each case was accepted, hung or crashed before its fix; each is now one line naming the flag or
file, the key, the value and what is allowed, with exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

SPEC = "dgx-h100-superpod"


def one_line_error(proc, *fragments):
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr)
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv", [
    ["train", SPEC, "--model", "llama3-8b", "--layout", "tp=8,tp=4,global_batch=512"],
    ["plan", SPEC, "--no-collectives", "--model", "llama3-8b", "--layout", "tp=8,global_batch=512,tp=8"],
])
def test_a_layout_key_given_twice_is_refused(argv):
    # Before: the last value won silently (tp=8,tp=4 ran at tp 4); a TOML layout file with tp twice is refused by
    # tomllib ("Cannot overwrite a value"), so the pairs now are too.
    one_line_error(run_cli(*argv), "layout", "tp is given twice")


@pytest.mark.parametrize("model, field", [
    ("llama3-8b", "optimizer_bytes_per_param"),  # printed "optimizer inf GB ... DOES NOT FIT by inf GB", exit 0
    ("gpt-oss-20b", "moe_imbalance"),
    ("gpt-oss-20b", "moe_capacity_factor"),
    ("gpt-oss-20b", "moe_expert_rank_capacity_factor"),
])
def test_a_layout_number_that_is_not_finite_is_refused(model, field):
    argv = ["train", SPEC, "--model", model, "--layout", f"global_batch=512,{field}=inf"]
    one_line_error(run_cli(*argv), f"--layout: {field}: must be a finite number, got inf")


@pytest.mark.parametrize("line, said", [
    ("published_params_B = nan", "published_params_B: must be a finite number, got nan"),
    ("published_params_B = -1", "published_params_B: must be > 0"),
    ("[attention]\nrope_concentration = inf", "attention.rope_concentration: must be a finite number, got inf"),
])
def test_a_model_file_number_that_is_not_finite_or_positive_is_refused(tmp_path, line, said):
    # Llama 3 8B's shape (topo/data/models/llama3-8b.toml) with one bad number appended
    model = tmp_path / "m.toml"
    model.write_text('name = "m"\nsource = "test"\nlayers = 32\nhidden = 4096\nffn_hidden = 14336\nheads = 32\n'
                     'kv_heads = 8\nvocab = 128256\nseq_len = 8192\nmlp = "swiglu"\n' + line + "\n")
    one_line_error(run_cli("train", SPEC, "--model", str(model), "--layout", "tp=8,global_batch=512"),
                   f"{model}: {said}")


@pytest.mark.parametrize("flag, said", [
    (["-o", ""], "-o: an empty folder name, got ''"),
    (["-o", " "], "-o: an empty folder name, got ' '"),
    (["--report", ""], "--report: is empty, got ''"),
    (["--report="], "--report: is empty, got ''"),
])
def test_a_sweep_output_given_empty_is_refused_not_the_default(tmp_path, flag, said):
    # Before: -o '' ran the study into STUDY-NAME.parquet (-o ' ': a folder named ' '), --report '' wrote
    # STUDY-NAME-report.html, exit 0; every other command's -o '' is refused. Nothing is computed or written now.
    proc = run_cli("sweep", "dci-two-site", "--scheduler", "serial", *flag, cwd=tmp_path)
    one_line_error(proc, said)
    assert list(tmp_path.iterdir()) == []


def test_a_spec_with_a_long_word_is_read_at_once(tmp_path):
    # A 1 MB word in a comment (a pasted hash or base64 blob; any file under MAX_TOML_BYTES): the guard against long
    # dotted keys (topo.inputs._LONG_DOTTED_KEY) backtracked through every tail of the word, time quadratic in its
    # length: 20,000 characters took 8 s, 5 MB ran for hours. The timeout keeps a regression from blocking the suite.
    spec = tmp_path / "spec.toml"
    spec.write_text((ROOT / "topologies" / f"{SPEC}.toml").read_text() + "\n# " + "a" * 2**20 + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run([sys.executable, "-m", "topo", "describe", str(spec)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("topo describe took over a minute on a spec with a 1 MB word")
    assert proc.returncode == 0 and proc.stdout.startswith(f"{SPEC}: "), proc.stderr


@pytest.mark.parametrize("argv", [
    ["describe", SPEC, "--set", "cluster..num_units=2"],  # before: 512 GPUs, as cluster.num_units=2, exit 0
    ["describe", SPEC, "--set", ".cluster.num_units=2"],
    ["describe", SPEC, "--unset", "cluster.num_units."],
    ["plan", SPEC, "--no-collectives", "--set", "plan..switches.QM9700.price_usd=1"],
])
def test_a_set_key_with_an_empty_part_is_refused(argv):
    one_line_error(run_cli(*argv), "cannot read the key", "an empty part between dots")


MESH = ("--jax-mesh", "ici_fsdp=8,dcn_data=128")  # 1,024 GPUs, dgx-h100-superpod's


@pytest.mark.parametrize("argv, said", [
    # before: internal error (OverflowError: int too large to convert to float), exit 1
    (["--tp", "8", "--global-batch", "512", "--seq", "9" * 40], f"--seq: must be <= {2**53}, got {'9' * 40}"),
    (["--layout", f"tp=8,global_batch={'9' * 40}"], f"--layout: global_batch: must be <= {2**53}"),
    # before: internal error (ValueError: cannot convert float NaN to integer) / (OverflowError ...)
    ([*MESH, "--per-device-batch", "1e300"], "--per-device-batch: 1e300 x 1,024 GPUs is more than "
                                             f"{2**53:,} sequences"),
    ([*MESH, "--per-device-batch", "1e400"], "--per-device-batch: 1e400 x 1,024 GPUs is more than"),
    # the largest per-device batch taken is 2**53 / 1,024 = 8,796,093,022,208
    ([*MESH, "--per-device-batch", str(2**53 // 1024 + 1)], f"allowed: up to {2**53 // 1024:,} per device"),
])
def test_a_count_past_what_a_float_holds_exactly_is_refused(argv, said):
    one_line_error(run_cli("train", SPEC, "--model", "llama3-8b", *argv), said)
