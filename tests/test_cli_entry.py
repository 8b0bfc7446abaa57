"""Every command family through the real entry point (``python -m topo`` in a fresh interpreter): its exit status
and a stderr without a traceback, on a good call and on a bad one; and the in-process runner that most CLI tests
use (tests/cli_runner.py) gives the same exit status, stdout and stderr as the subprocess on each of them."""

import os
import re

import pytest

from cli_runner import in_process, prints_only
from conftest import ROOT, run_cli

LOG = ROOT / "tests" / "data" / "nccl_logs" / "nccl1453_h100_allreduce_tagged.txt"  # NVIDIA/nccl issue #1453

# (a good call, a bad call and the flag its one error line names): one per command that the runner may run
# in-process (report, export and sweep write files and always run as subprocesses, tests/test_outputs.py et al.)
FAMILIES = {
    "describe": (["describe", "dgx-h100-superpod", "--json"], ["describe", "no-such-spec"], "no-such-spec"),
    "estimate": (["estimate", "dgx-h100-superpod", "-c", "all_reduce", "-g", "64", "-b", "8", "-e", "1G", "-f", "8"],
                 ["estimate", "-c", "all_reduce", "-g", "64", "--size", "lots"], "--size"),
    "list": (["list"], ["list", "--nope"], "--nope"),
    "train": (["train", "dgx-h100-superpod", "--model", "llama3-8b", "--gpus", "64", "--tp", "8",
               "--global-batch", "64"], ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "three"],
              "--tp"),
    "plan": (["plan", "dgx-h100-superpod"], ["plan", "dgx-h100-superpod", "--set", "cluster.num_units=-1"],
             "cluster.num_units"),
    "compare": (["compare", str(LOG), "--gpu", "H100"], ["compare", str(LOG), "--gpu", "Z9"], "Z9"),
    "profile": (["profile", "show", "hopper+efa"], ["profile", "show", "no+such"], "no+such"),
    "calibrate": (["calibrate", str(LOG), "--gpu", "H100"], ["calibrate", str(LOG), "--gpu", "Z9"], "Z9"),
}


def _same(a, b):
    """Equal exit status and streams, but for the clock: when a calibrated profile was made, how long a fit took."""
    def text(stream):
        return re.sub(r"created_utc = .*|\d+\.\d s\)", "(clock)", stream)

    assert (a.returncode, text(a.stdout), text(a.stderr)) == (b.returncode, text(b.stdout), text(b.stderr))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_good_call_exits_0_without_a_traceback_and_in_process_alike(family):
    good = FAMILIES[family][0]
    assert prints_only(good, ROOT)  # the tests' run_cli takes it in-process
    proc = run_cli(*good, fresh=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout and "Traceback" not in proc.stderr
    _same(in_process(good, ROOT), proc)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bad_call_is_one_line_with_status_2_and_in_process_alike(family):
    _, bad, named = FAMILIES[family]
    proc = run_cli(*bad, fresh=True)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and named in proc.stderr
    assert "Traceback" not in proc.stderr
    _same(in_process(bad, ROOT), proc)


@pytest.mark.parametrize("args", [["report"], ["export"], ["sweep", "designs-405b"], ["train", "--debug"],
                                  ["calibrate", "log", "-o", "p.toml"], ["plan", "--bom-csv", "b.csv"],
                                  ["plan", "--output=x"], ["describe", "-"], ["describe", "/dev/stdin"],
                                  ["--version"]])
def test_calls_that_write_start_workers_read_devices_or_stdin_run_as_subprocesses(args):
    assert not prints_only(args, ROOT)


def test_estimates_o_is_an_operation_not_an_output():
    assert prints_only(["estimate", "-o", "all_reduce"], ROOT)


def test_a_fifo_argument_runs_as_a_subprocess(tmp_path):
    os.mkfifo(tmp_path / "log")
    assert not prints_only(["compare", "log"], tmp_path)
    assert prints_only(["compare", "log.txt"], tmp_path)  # a file that is not there: the command says so


def test_a_topo_variable_set_by_the_test_runs_as_a_subprocess(monkeypatch):
    monkeypatch.setenv("TOPO_DATA_DIR", str(ROOT))
    assert not prints_only(["list"], ROOT)


def test_in_process_runs_in_the_folder_given_and_restores_the_tests(tmp_path):
    here = os.getcwd()
    (tmp_path / "mine.toml").write_text((ROOT / "topologies" / "dgx-h100-superpod.toml").read_text())
    proc = in_process(["describe", "mine.toml", "--json"], tmp_path)
    assert proc.returncode == 0 and '"name"' in proc.stdout
    assert os.getcwd() == here


def test_a_usage_error_is_status_2_in_process():
    proc = in_process(["estimate", "--no-such-flag"], ROOT)
    assert proc.returncode == 2 and proc.stdout == "" and "--no-such-flag" in proc.stderr
