"""Input files: only regular files are read (a named pipe or a device is refused, never opened for a blocking read),
with a size limit, and ``-`` is standard input for nccl-tests logs (issue 23)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from topo import load_spec
from topo.errors import TopoError
from topo.inputs import check_input, read_input_bytes, read_input_text, read_toml

LOG = ROOT / "tests" / "data" / "nccl_logs" / "nccl1453_h100_allreduce_tagged.txt"


def topo(*args, cwd, stdin=None, timeout=120):
    """The real command line; a hang is a failure (TimeoutExpired), never a stuck test run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "topo", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout, stdin=stdin if stdin is not None else subprocess.DEVNULL)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "f.toml"
    os.mkfifo(path)
    return path


# every input path of every command, given a named pipe
FIFO_COMMANDS = [
    ("compare", "{f}"),
    ("calibrate", "{f}", "-o", "x.toml"),
    ("calibrate", str(LOG), "{f}", "--gpu", "H100"),
    ("compare", str(LOG), "--spec", "{f}"),
    ("compare", str(LOG), "--gpu", "H100", "--profile", "{f}"),
    ("describe", "{f}"),
    ("estimate", "--traffic", "{f}"),
    ("estimate", "dgx-h100-superpod", "-g", "8", "--size", "1G", "--profile", "{f}"),
    ("train", "--model", "{f}", "--tp", "8"),
    ("train", "--model", "llama3-8b", "--layout", "{f}"),
    ("plan", "--plan-file", "{f}"),
    ("plan", "--model", "llama3-8b", "--layout", "{f}"),
    ("profile", "show", "{f}"),
    ("sweep", "{f}"),
]


@pytest.mark.parametrize("argv", FIFO_COMMANDS, ids=lambda a: " ".join(a).replace(str(LOG), "LOG"))
def test_a_named_pipe_is_refused_at_once_on_every_input_path(argv, fifo, tmp_path):
    proc = topo(*[a.format(f=fifo.name) for a in argv], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: f.toml: ")
    assert "not a regular file" in lines[0], lines[0]


@pytest.mark.parametrize("argv", [("compare", "/dev/zero"), ("estimate", "--traffic", "/dev/zero"),
                                  ("train", "--model", "/dev/zero", "--tp", "8")])
def test_a_device_is_said_to_be_no_regular_file_not_missing(argv, tmp_path):
    """``/dev/zero`` exists: not "no such file", and never read until memory runs out (a stat check refuses it)."""
    proc = topo(*argv, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: /dev/zero: is not a regular file (a device); give a " + {
        "compare": "log file", "estimate": "traffic file", "train": "model file"}[argv[0]]


def test_compare_reads_a_log_from_standard_input(tmp_path):
    with open(LOG) as fh:
        piped = topo("compare", "-", "--gpu", "H100", cwd=tmp_path, stdin=fh)
    assert piped.returncode == 0, piped.stderr
    named = topo("compare", str(LOG), "--gpu", "H100", cwd=tmp_path)
    assert piped.stdout.replace("<stdin>", "LOG") == named.stdout.replace(str(LOG), "LOG")
    assert piped.stdout.startswith("# <stdin>: all_reduce")


@pytest.mark.parametrize("command", ["compare", "calibrate"])
def test_a_named_pipe_given_as_a_log_points_to_standard_input(command, fifo, tmp_path):
    """A log path that is a named pipe is refused without being opened (nothing hangs), and the line says how
    to read it anyway: ``-`` with the pipe as standard input; a spec, which takes no ``-``, gets no such hint."""
    proc = topo(command, fifo.name, "--gpu", "H100", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == ("error: f.toml: is not a regular file (a named pipe); give a log file, or - to read "
                           "standard input (- < f.toml)\n")
    proc = topo("compare", str(LOG), "--spec", fifo.name, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "standard input" not in proc.stderr


def test_standard_input_is_one_log_for_calibrate(tmp_path):
    proc = topo("calibrate", "-", "-", "--gpu", "H100", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "standard input (-) is one log" in proc.stderr


def test_the_library_refuses_folders_pipes_and_files_over_the_limit(tmp_path, fifo):
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * 11)
    with pytest.raises(TopoError, match=r"big.log: is larger than the .* a log file may have"):
        read_input_bytes(big, "log file", limit=10)
    assert read_input_bytes(big, limit=11) == b"x" * 11
    with pytest.raises(TopoError, match=r"is not a regular file \(a directory\)"):
        check_input(tmp_path)
    with pytest.raises(TopoError, match=r"f.toml: is not a regular file \(a named pipe\); give a spec"):
        read_toml(fifo, "spec")
    with pytest.raises(TopoError, match=r"nope: no such traffic file"):
        read_input_text(tmp_path / "nope", "traffic file")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe = 1")
    with pytest.raises(TopoError, match=r"bad.toml: is not UTF-8 text"):
        read_toml(bad, "spec")
    bad.write_text("a = [")
    with pytest.raises(TopoError, match=r"bad.toml: invalid TOML"):
        read_toml(bad, "spec")


def test_a_log_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import topo.calibrate.parse as parse

    log = tmp_path / "huge.log"
    log.write_text(LOG.read_text())
    monkeypatch.setattr(parse, "MAX_LOG_BYTES", 100)
    with pytest.raises(TopoError, match="huge.log: is larger than the"):
        parse.parse_file(log)


def test_a_spec_that_is_a_pipe_or_a_device_is_said_as_every_other_input(tmp_path, fifo):
    """The spec path says what a named pipe or a device is in the same words as a log, plan or model file
    (topo.inputs), not a wording of its own."""
    for path, kind in ((fifo, "a named pipe"), ("/dev/zero", "a device")):
        with pytest.raises(TopoError) as info:
            load_spec(path)
        assert info.value.line() == (f"{path}: is not a regular file ({kind}); give a spec file (.toml) or a "
                                     "bundled spec's name")


# --- tidy9: a new user's walk -------------------------------------------------------------------------------------

def test_a_spec_saved_with_a_byte_order_mark_reads_as_without_it(tmp_path):
    # Windows Notepad saves UTF-8 with a leading BOM; TOML 1.0 takes it as part of a valid UTF-8 document
    # (toml-lang/toml#437), but tomllib stopped at it: "invalid TOML: Invalid statement (at line 1, column 1)"
    text = (ROOT / "topologies" / "dgx-h100-superpod.toml").read_text()
    plain, bom = tmp_path / "plain.toml", tmp_path / "bom.toml"
    plain.write_text(text)
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert read_toml(bom, "spec") == read_toml(plain, "spec")
    assert load_spec(str(bom)).model_dump() == load_spec(str(plain)).model_dump()
    proc = topo("describe", "bom.toml", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == topo("describe", "plain.toml", "--json", cwd=tmp_path).stdout.replace("plain.toml",
                                                                                                "bom.toml")
    bom.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf" + text.encode())  # only one mark is a mark; a second is text
    with pytest.raises(TopoError, match=r"bom.toml: invalid TOML"):
        read_toml(bom, "spec")


def test_a_file_nested_too_deep_is_one_line_not_an_internal_error(tmp_path):
    # found on the walk: 'name = [[[...]]]' 100,000 deep (tomllib recursing) or a dotted key of 3,000 parts (the
    # spec's deepcopy recursing) said "internal error (RecursionError ...); report it", exit 1
    from topo.inputs import MAX_TOML_DEPTH

    cases = {"arrays.toml": "name = " + "[" * 100_000 + "]" * 100_000,
             "tables.toml": "name = 'x'\ngpu = " + "{a = " * 50_000 + "1" + "}" * 50_000,
             "dotted.toml": "a" + ".a" * 3000 + " = 1"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text + "\n")
        proc = topo("describe", name, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr == (
            f"error: {name}: tables and arrays nest more than {MAX_TOML_DEPTH} levels deep (the bundled files "
            "nest 5 at most)\n"), proc.stderr
    # the limit: MAX_TOML_DEPTH levels are read (the document is one), one more is refused
    ok, deep = tmp_path / "ok.toml", tmp_path / "deep.toml"
    ok.write_text("a = " + "[" * (MAX_TOML_DEPTH - 1) + "]" * (MAX_TOML_DEPTH - 1) + "\n")
    deep.write_text("a = " + "[" * MAX_TOML_DEPTH + "]" * MAX_TOML_DEPTH + "\n")
    assert read_toml(ok, "spec")["a"]
    with pytest.raises(TopoError, match="nest more than"):
        read_toml(deep, "spec")


def test_a_set_value_or_a_study_nested_too_deep_is_one_line(tmp_path):
    deep = "[" * 50_000 + "]" * 50_000
    proc = topo("describe", "dgx-h100-superpod", "--set", f"name={deep}", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: --set name=[[")
    assert proc.stderr.endswith("nest more than 32 levels deep (the bundled files nest 5 at most)\n")
    (tmp_path / "study.toml").write_text(f"name = 's'\nx = {deep}\n")
    proc = topo("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == ("error: study.toml: tables and arrays nest more than 32 levels "
                                                    "deep (the bundled files nest 5 at most)\n"), proc.stderr


def test_a_long_dotted_key_is_refused_before_tomllib_reads_it(monkeypatch):
    # tomllib takes time and memory quadratic in a dotted key's parts: 20,000 took 5 s and 1.6 GB, a 200 kB file of
    # 100,000 was killed for memory on the walk; a key of more than MAX_TOML_DEPTH parts is refused unread
    import topo.inputs as inputs

    def read(text):
        pytest.fail("tomllib was given the long dotted key")

    monkeypatch.setattr(inputs.tomllib, "loads", read)
    for text in ("a" + ".a" * 100_000 + " = 1", "[" + "a . " * inputs.MAX_TOML_DEPTH + "b]"):
        with pytest.raises(TopoError, match="nest more than"):
            inputs.loads_toml(text, "x.toml")
    with pytest.raises(pytest.fail.Exception):  # a key of MAX_TOML_DEPTH parts is tomllib's to read
        inputs.loads_toml("a" + ".a" * (inputs.MAX_TOML_DEPTH - 1) + " = 1", "x.toml")


def test_a_layout_value_nested_too_deep_is_one_line(tmp_path):
    from topo.training.parallel import layout_pairs

    deep = "[" * 50_000 + "]" * 50_000
    with pytest.raises(TopoError, match=r"tp: tables and arrays nest more than 32 levels deep") as err:
        layout_pairs(f"tp={deep},dp=4")
    assert err.value.key == "layout"
    assert layout_pairs('tp=8,cuda_graph_scope=["attn","moe_router"]') == {"tp": 8, "cuda_graph_scope": ["attn",
                                                                                                      "moe_router"]}
    proc = topo("train", "dgx-h100-superpod", "--model", "llama3-8b", "--layout", f"tp={deep}", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "internal error" not in proc.stderr, proc.stderr
