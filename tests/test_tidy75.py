"""tidy75: walk32's and rev73's leftovers (docs/calibration-findings.md, sections 339 and 340), each through the
command line where the user meets it."""

from __future__ import annotations

import pytest

from conftest import run_cli
from nccl_text import render

SIZES = [2**i for i in range(10, 31)]  # 1 KiB .. 1 GiB


def _log(tmp_path, collective="all_reduce", name="run.log", text=None):
    """A 2 x 8 H100 log as nccl-tests prints it (tests/nccl_text.py): hosts and GPU named, so --spec leaves
    nothing to assume."""
    log = tmp_path / name
    log.write_text(text if text is not None else render(collective, ["a", "b"], 8, "NVIDIA H100 80GB HBM3", SIZES,
                                                        [1e-4 * (1 + s / 2**24) for s in SIZES]))
    return log


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


@pytest.mark.parametrize("flags, assumed", [(("--spec", "dgx-h100-superpod"), False), ((), True)])
def test_calibrate_points_at_assumptions_only_when_it_printed_some(tmp_path, flags, assumed):
    """walk32 Left 5: with --spec nothing is assumed, yet the last line said "under the assumptions above"."""
    out = tmp_path / "fit.toml"
    proc = run_cli("calibrate", str(_log(tmp_path)), *flags, "-o", str(out), check=True)
    assert ("assumption (" in proc.stderr) == assumed
    assert ("under the assumptions above" in proc.stderr) == assumed
    spec = "dgx-h100-superpod" if flags else "H100-2x8-infiniband_ndr, under the assumptions above"
    assert f"it describes the cluster it was fitted on ({spec}): use it" in proc.stderr
