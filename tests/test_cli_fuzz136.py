"""Bad input found by fuzzing every command (issue 29's "bad input" clause; docs/calibration-findings.md section
472, fuzz136): each case was accepted, hung or crashed before its fix; each is now one line naming the flag or
file, the key, the value and what is allowed, with exit status 2."""

from __future__ import annotations

import pytest

from conftest import run_cli

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
