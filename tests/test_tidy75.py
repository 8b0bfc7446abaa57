"""tidy75: walk32's and rev73's leftovers (docs/calibration-findings.md, sections 339 and 340), each through the
command line where the user meets it."""

from __future__ import annotations

import pytest

from conftest import run_cli


@pytest.mark.parametrize("text, said", [("", "no bytes"), ("  \n\n", "only blank lines")])
@pytest.mark.parametrize("command", ["compare", "calibrate"])
def test_an_empty_log_is_called_empty(tmp_path, command, text, said):
    """walk32 Left 6: an empty file was refused as "not an nccl-tests log: no result table ..."."""
    log = tmp_path / "empty.log"
    log.write_text(text)
    proc = run_cli(command, str(log))
    assert proc.returncode == 2
    assert proc.stderr == (f"error: {log}: the log is empty ({said}): paste the output of an nccl-tests *_perf "
                           "binary\n")
