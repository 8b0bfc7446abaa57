"""Every script of ``benchmarks/`` answers ``--help`` at once and refuses an unknown flag on one line naming it and the
flags allowed (task tidy53:
``benchmarks/accuracy.py --help`` used to read ``sys.argv`` by substring, ignore ``--help`` and run its whole
multi-process benchmark for minutes; an unknown flag was ignored the same way)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the scripts run as programs: those with an ``if __name__ == "__main__":`` block (the others are libraries)
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py")
                 if any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)
                        for n in ast.parse(p.read_text()).body))
TIMEOUT_S = 30  # a shared 2-core machine; the slowest --help (residual_audit's imports) takes ~4 s


def run(script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_every_script_is_covered():
    names = {p.name for p in SCRIPTS}
    assert {"accuracy.py", "training_accuracy.py", "bench_estimate.py", "host_ladder.py"} <= names
    assert "_results.py" not in names and "run_recipe_columns.py" not in names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_answers_at_once(script):
    r = run(script, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: "), r.stdout[:200]
    assert "--help" in r.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_an_unknown_flag_is_refused_in_one_line(script):
    r = run(script, "--no-such-flag")
    assert r.returncode == 2, (r.returncode, r.stderr[-400:])
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr  # one line: what was wrong and the flags allowed
    assert "unrecognized arguments: --no-such-flag; allowed: " in r.stderr and "--help" in r.stderr


def test_a_bad_value_is_refused_in_one_line():
    r = run(ROOT / "benchmarks" / "bench_train.py", "--timeout", "soon")
    assert r.returncode == 2 and r.stderr == ("bench_train.py: error: argument --timeout: invalid float value: "
                                              "'soon'; allowed: --help, --timeout, --write\n")
