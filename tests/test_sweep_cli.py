"""``topo sweep`` as a user runs it: bad input is one line and exit 2, the JSON is the library's summary, the
page and the CSV are written, and Ctrl-C leaves a readable partial output that a rerun completes."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from topo.sweep import load_study, summarize, sweep
from topo.units import format_time

ROOT = Path(__file__).resolve().parents[1]
STUDY = """spec = "dgx-h100-superpod"
seeds = 5
[axes]
"fabric.tiers[0].oversubscription" = 2
collective = "alltoall"
gpus = [64, 4096]
placement = "one_per_server"
size = ["64MiB", "256MiB"]
fail = "random:leaf-spine:0.2:{seed}"
"""


def topo(*args, cwd, timeout=120, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "topo", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


@pytest.mark.parametrize("axes, line", [
    ('"fabric.tiers[0].radx" = [64]',
     "error: study.toml: axes.fabric.tiers[0].radx: unknown key 'radx' in fabric.tiers[0]; allowed: "),
])
def test_bad_study_is_one_line_exit_2(tmp_path, axes, line):
    (tmp_path / "study.toml").write_text(f'spec = "dgx-h100-superpod"\n[axes]\n{axes}\n')
    r = topo("sweep", "study.toml", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith(line) and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert not (tmp_path / "study.parquet").exists()


@pytest.mark.parametrize("command", ["report", "describe", "plan"])
def test_a_study_given_where_a_spec_is_expected_points_to_sweep(tmp_path, command):
    # walk13: `topo report study.toml` said "unknown key 'spec'" (the study's keys read as a spec's).
    (tmp_path / "study.toml").write_text(STUDY)
    r = topo(command, "study.toml", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == ("error: study.toml: is a sweep study (axes, seeds), not a spec: run it with "
                        "'topo sweep study.toml' (add --report for its page)\n")
    assert not list(tmp_path.glob("topo-*"))



def test_the_library_refuses_a_study_as_a_spec_with_a_typed_error_that_names_no_flag(tmp_path):
    # fix49: load_spec named `topo sweep` and `--report`; the wording is the CLI's (checked above)
    from topo.errors import StudyNotSpec
    from topo.spec.load import load_spec
    (tmp_path / "study.toml").write_text(STUDY)
    with pytest.raises(StudyNotSpec) as err:
        load_spec(tmp_path / "study.toml")
    assert err.value.message == "is a sweep study (axes, seeds), not a spec"
    assert "topo " not in str(err.value) and "--" not in str(err.value)

def test_scheduler_that_does_not_answer(tmp_path):
    (tmp_path / "study.toml").write_text(STUDY)
    start = time.perf_counter()
    r = topo("sweep", "study.toml", "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1", cwd=tmp_path)
    assert time.perf_counter() - start < 15
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: --scheduler: no Dask scheduler answers at tcp://127.0.0.1:9 within 1 s")
    assert r.stderr.count("\n") == 1
    assert not (tmp_path / "study.parquet").exists()  # a run that cannot start leaves no output folder


def test_malformed_scheduler_leaves_no_output(tmp_path):
    (tmp_path / "study.toml").write_text(STUDY)
    r = topo("sweep", "study.toml", "--scheduler", "foo:1", "-o", "out.parquet", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: --scheduler: 'foo:1' is not a Dask scheduler address")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "out.parquet").exists()


def test_json_csv_report_and_error_rows(tmp_path):
    (tmp_path / "study.toml").write_text(STUDY)
    r = topo("sweep", "study.toml", "--scheduler", "serial", "-o", "out.parquet", "--json", "--csv", "rows.csv",
             "--report", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["points"], doc["computed"], doc["errors"]) == (20, 20, 10)  # 4096 GPUs: one error row per point
    df = pd.read_parquet(tmp_path / "out.parquet")
    bad = df[df["gpus"] == 4096]
    assert bad["error"].notna().all() and bad["time_s"].isna().all() and (bad["error_kind"] == "input").all()
    assert df[df["gpus"] == 64]["error"].isna().all()
    # the JSON's summaries are the library's
    lib = summarize(sweep(load_study(tmp_path / "study.toml"), scheduler="serial"))
    t = [s for s in doc["summaries"] if s["figure"] == "time_s" and "gpus=64 " in s["label"] + " "]
    want = lib[(lib["figure"] == "time_s") & lib["label"].str.contains("gpus=64 ")]
    assert [s["p99"] for s in t] == want["p99"].tolist() and [s["worst_seed"] for s in t] == want["worst_seed"].tolist()
    csv = pd.read_csv(tmp_path / "rows.csv", skiprows=1)
    assert len(csv) == 20 and set(csv["point"]) == set(df["point"])
    page = (tmp_path / "study-report.html").read_text()
    assert "written by topo" in page and page.count('class="plot"') >= 3
    assert 'data-figure="heatmap"' in page and 'data-figure="distribution"' in page
    # walk10: the page said which axes varied (its labels) but not what was fixed: not the spec, the collective or
    # the failure, so a page mailed on its own did not say what it measured
    assert "Each point computes estimate. Every point: spec = dgx-h100-superpod, " in page
    assert "collective = alltoall, placement = one_per_server, fail = random:leaf-spine:0.2:{seed}." in page
    assert "Varied: gpus (2 values), size (2 values); seeds 0 to 4 (5 draws" in page


@pytest.mark.parametrize("flags, line", [
    # rev38: the report replaced the CSV just written (exit 0, 'wrote rows.csv', the rows lost); a file named as
    # the output folder failed only after the sweep had run, as 'is a directory'
    (["--csv", "rows.csv", "--report", "rows.csv"],
     "error: rows.csv: --csv: is also --report's file; one would be written over the other; give another file"),
    (["-o", "out.parquet", "--csv", "./out.parquet"], "error: ./out.parquet: --csv: is also the sweep's output "
     "folder (-o); one would be written over the other; give another file"),
])
def test_no_output_is_written_over_another(tmp_path, flags, line):
    (tmp_path / "study.toml").write_text(STUDY)
    r = topo("sweep", "study.toml", "--scheduler", "serial", *flags, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == line + "\n", r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.toml"]  # refused before the sweep ran


def test_ctrl_c_leaves_readable_partial_output_and_a_rerun_completes(tmp_path):
    n = 60
    (tmp_path / "study.toml").write_text(f'spec = "dgx-h100-superpod"\nseeds = {n}\n[axes]\ncollective = "all_reduce"\n'
                                         'gpus = 256\nsize = "1GiB"\nfail = "random:leaf-spine:0.1:{seed}"\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # a local cluster of one worker, and SIGINT to the whole process group, as a terminal's Ctrl-C sends it
    p = subprocess.Popen([sys.executable, "-m", "topo", "sweep", "study.toml", "--workers", "1",
                          "--batch-size", "2", "-o", "out.parquet"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         # a terminal's SIGINT handling, also when the tests run in the background (a shell starts
                         # background jobs with SIGINT ignored, and the child would inherit that)
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out = tmp_path / "out.parquet"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(out.glob("part-*"))) < 2 and p.poll() is None:
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.startswith("interrupted: ") and "run the same command again" in err
    assert err.count("\n") == 1, err  # no worker's KeyboardInterrupt traceback
    partial = pd.read_parquet(out)
    assert 4 <= len(partial) < n and partial["error"].isna().all()
    assert not list(out.glob(".part-*"))  # no half-written part left behind
    from topo.sweep import SweepRun

    run = SweepRun()  # the rerun, in this process (the same code as the command's)
    sweep(load_study(tmp_path / "study.toml"), out, scheduler="serial", run=run)
    assert run.skipped == len(partial) and run.computed == n - len(partial)
    full = pd.read_parquet(out)
    assert len(full) == n and full["point"].is_unique


UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def test_summary_line_of_a_run_and_of_a_rerun_with_nothing_left(tmp_path):
    # the rerun's line read "0 computed on nothing to compute: every point is in the output" before
    (tmp_path / "study.toml").write_text('spec = "dgx-h100-superpod"\n[axes]\ncollective = "all_reduce"\n'
                                         'gpus = 16\nsize = ["1MiB", "1GiB"]\n')
    first = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert ("topo sweep: study: 2 points, 0 already in study.parquet, 2 computed on this process (serial) in "
            in first.stderr), first.stderr
    again = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    line = [s for s in again.stderr.splitlines() if s.startswith("topo sweep: ")]
    assert len(line) == 1 and line[0].startswith(
        "topo sweep: study: 2 points, 2 already in study.parquet, nothing to compute in "), again.stderr
    assert line[0].endswith("s; 0 error rows") and "computed on" not in line[0]
    for text in (first.stderr, line[0]):  # the run's own wall clock in the one format of a time (rev58's review)
        took = re.search(r"topo sweep: .* in (\S+) (s|ms|us|ns); ", text)
        assert took and format_time(float(took[1]) * UNIT_S[took[2]]) == f"{took[1]} {took[2]}", text


@pytest.mark.parametrize("args, line", [
    (["-o", "study.toml"], "error: study.toml: -o: is an input (study.toml); choose another output\n"),
    (["-o", "missing/out.parquet"], "error: missing/out.parquet: -o: the folder 'missing' does not exist\n"),
    (["-o", "mine.txt"], "error: mine.txt: -o: exists and is not a folder; a sweep writes a folder of Parquet parts: "
                         "choose another name\n"),
])
def test_a_bad_output_names_the_option_as_typed(tmp_path, args, line):
    # the key read "output:" (the library's argument), not the -o the user typed
    (tmp_path / "study.toml").write_text('spec = "dgx-h100-superpod"\n[axes]\ngpus = 16\nsize = "1MiB"\n')
    (tmp_path / "mine.txt").write_text("mine\n")
    r = topo("sweep", "study.toml", "--scheduler", "serial", *args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == line and r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt", "study.toml"]
    assert (tmp_path / "mine.txt").read_text() == "mine\n"


def test_a_traffic_file_beside_the_study_but_not_here_says_where_files_are_read(tmp_path):
    # walk10: a study's spec file is found beside the study, its traffic (model, profile) file only from the working
    # folder; run from elsewhere, the error said "no such traffic file" while the file sat beside the spec that worked
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "mix.toml").write_text((ROOT / "topo" / "data" / "traffic" / "3d-parallel.toml").read_text())
    (sub / "study.toml").write_text('spec = "dgx-h100-superpod"\n[axes]\ntraffic = "mix.toml"\n')
    r = topo("sweep", "sub/study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr == ("error: sub/study.toml: axes.traffic: 'mix.toml': no such file in the working folder, but "
                        "there is one beside the study: a traffic file is read where topo sweep runs (specs alone are "
                        "looked up beside the study); give its path from here, 'sub/mix.toml', or run in 'sub'\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]  # nothing written


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_scheduler_file_that_is_a_pipe_or_a_device_is_one_line_not_a_hang(tmp_path, kind):
    # walk10: --scheduler-file FIFO blocked for ever on the open, --scheduler-file /dev/zero read without end
    (tmp_path / "study.toml").write_text(STUDY)
    if kind == "fifo":
        os.mkfifo(tmp_path / "sched.json")
        path, what = "sched.json", "a named pipe"
    else:
        path, what = "/dev/zero", "a device"
    start = time.perf_counter()
    r = topo("sweep", "study.toml", "--scheduler-file", path, cwd=tmp_path, timeout=60)
    assert time.perf_counter() - start < 30
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == (f"error: {path}: --scheduler-file: is not a regular file ({what}); give a Dask scheduler "
                        "file (as dask scheduler --scheduler-file writes it)\n")


def test_a_study_of_more_than_a_million_points_is_refused_at_once(tmp_path):
    # walk10: up to 10,000,000 points were accepted, and keying them before the first ran took minutes and over 5 GB
    # (100,000 points: 2 s, 55 MB) with nothing on the screen; a million is the limit, refused before any point
    (tmp_path / "study.toml").write_text('spec = "dgx-h100-superpod"\nseeds = 600000\n[axes]\nsize = "1MiB"\n'
                                         'collective = ["all_reduce", "alltoall"]\n'
                                         'fail = "random:spine:0.1:{seed}"\n')
    start = time.perf_counter()
    r = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path, timeout=60)
    assert time.perf_counter() - start < 30
    assert r.returncode == 2 and r.stderr == ("error: study.toml: axes: 1,200,000 points; a study is limited to "
                                              "1,000,000 (each is keyed in memory before the first runs): split it\n")
    (tmp_path / "study.toml").write_text('spec = "dgx-h100-superpod"\nseeds = 1000001\n[axes]\nsize = "1MiB"\n'
                                         'fail = "random:spine:0.1:{seed}"\n')
    r = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stderr == "error: study.toml: seeds: must be 1 to 1,000,000, got 1000001\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.toml"]


def test_fractions_print_as_percentages_as_train_prints_them(tmp_path):
    """walk16: the summary printed a region's throughput_vs_one_site as 0.8008 beside mfu's 35.3%, where topo train
    and the README give 80.1%; the figure is the one ``topo train REGION --json`` gives."""
    (tmp_path / "study.toml").write_text('spec = "two-site-h100"\ncompute = ["train"]\n[axes]\nmodel = "llama3-8b"\n'
                                         'layout = "tp=8"\nglobal_batch = 768\n"interconnect.waves" = 4\n')
    r = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "topo sweep: study: 1 point, 0 already in study.parquet, 1 computed on" in r.stderr  # was "1 points"
    one = json.loads(topo("train", "two-site-h100", "--model", "llama3-8b", "--tp", "8", "--global-batch", "768",
                          "--set", "interconnect.waves=4", "--json", cwd=tmp_path).stdout)
    rows = {line.split()[1]: line.split()[4] for line in r.stdout.splitlines()[1:] if len(line.split()) > 4}
    assert rows["throughput_vs_one_site"] == f"{one['throughput_vs_one_site']:.1%}"
    assert rows["mfu"].endswith("%")


def test_seeds_after_an_edit_keep_the_later_draws_of_the_unchanged_designs(tmp_path):
    # Walk finding (walk18): after an edit to a study, `topo sweep STUDY --seeds 2` removed the rows of every seed
    # past the first 2, also of the designs the edit left alone (312 rows of a 324-point study, of which 152 the
    # whole study still had), and the next full run computed them again. 2 sizes x (1 intact + 4 draws) = 10
    # points; the edit replaces the 1 GiB size: its 5 rows go, the 1 MiB design's 5 stay.
    study = ('spec = "dgx-h100-superpod"\nseeds = 4\n[axes]\ncollective = "all_reduce"\ngpus = 16\n'
             'size = ["1MiB", "SIZE"]\nfail = ["", "random:leaf-spine:0.2:{seed}"]\n')
    (tmp_path / "study.toml").write_text(study.replace("SIZE", "1GiB"))
    first = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert first.returncode == 0 and "10 points, 0 already" in first.stderr, first.stderr
    (tmp_path / "study.toml").write_text(study.replace("SIZE", "2GiB"))
    few = topo("sweep", "study.toml", "--scheduler", "serial", "--seeds", "2", cwd=tmp_path)
    assert few.returncode == 0, few.stderr
    assert "removed 5 rows of an earlier version of study" in few.stderr, few.stderr
    assert "6 points, 3 already in study.parquet, 3 computed" in few.stderr, few.stderr
    whole = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert whole.returncode == 0 and "removed" not in whole.stderr, whole.stderr
    assert "10 points, 8 already in study.parquet, 2 computed" in whole.stderr, whole.stderr
    assert len(pd.read_parquet(tmp_path / "study.parquet")) == 10
