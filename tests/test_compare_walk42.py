"""walk42: a network team's own logs through ``topo calibrate`` and ``topo compare``.

- ``-c`` naming a collective whose nccl-tests bus factor the table contradicts is refused: nccl-tests prints busbw =
  algbw x 2(n-1)/n for all-reduce and x (n-1)/n for all-gather, reduce-scatter and all-to-all
  (NVIDIA/nccl-tests doc/PERFORMANCE.md), so a table at (n-1)/n is no all-reduce; it was modelled as one.
- ``compare`` prints its median error and says whether it is in sample (the calibrated profile was fitted on this
  log) or held out (fitted on other logs), in the text and in ``--json``.
"""

from __future__ import annotations

import json
import re
import statistics

from conftest import ROOT, run_cli

LOGS = ROOT / "tests" / "data" / "nccl_logs"
ALLGATHER = LOGS / "a3ultra_gib_allgather_2n.txt"  # no *_perf name in the log; busbw / algbw = 15/16
FIT_ON = LOGS / "dstack_nebius_h100_allreduce_2n.txt"  # 16 H100, all_reduce_perf
HELD_OUT = LOGS / "nccl1453_h100_allreduce_tagged.txt"  # 24 H100, another cluster's log


def test_c_contradicting_the_tables_bus_factor_is_one_line():
    for coll in ("all_reduce", "broadcast"):
        proc = run_cli("compare", str(ALLGATHER), "-c", coll)
        assert proc.returncode == 2, proc.stdout[-300:]
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "busbw/algbw = (n-1)/n" in proc.stderr and f"not of {coll}" in proc.stderr
        assert "all_gather or alltoall" in proc.stderr
    assert run_cli("compare", str(ALLGATHER), "-c", "all_gather").returncode == 0
    proc = run_cli("calibrate", str(ALLGATHER), "-c", "all_reduce")
    assert proc.returncode == 2 and "not of all_reduce" in proc.stderr


def _median_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("median error: "))


def _median_from_rows(doc: dict) -> float:
    return statistics.median(abs(s["model_s"] / s["measured_s"] - 1) * 100 for s in doc["sizes"])


def test_compare_says_in_sample_or_held_out(tmp_path):
    prof = tmp_path / "mine.toml"
    run_cli("calibrate", str(FIT_ON), "--gpu", "H100", "-o", str(prof), check=True)

    plain = run_cli("compare", str(FIT_ON), "--gpu", "H100", check=True)
    line = _median_line(plain.stdout)
    assert "sample" not in line and "held out" not in line  # a bundled profile: neither
    doc = json.loads(run_cli("compare", str(FIT_ON), "--gpu", "H100", "--json", check=True).stdout)
    assert doc["in_sample"] is None and doc["profile_fitted_on"] is None
    assert re.search(r"median error: ([\d.]+)%", line).group(1) == f"{_median_from_rows(doc):.1f}"

    inside = run_cli("compare", str(FIT_ON), "--gpu", "H100", "--profile", str(prof), check=True)
    assert _median_line(inside.stdout).endswith("in sample: profile mine was fitted on this log")
    doc = json.loads(run_cli("compare", str(FIT_ON), "--gpu", "H100", "--profile", str(prof), "--json", check=True).stdout)
    assert doc["in_sample"] is True and FIT_ON.name in doc["profile_fitted_on"]
    assert doc["mdape_pct"] == _median_from_rows(doc)

    out = run_cli("compare", str(HELD_OUT), "--gpu", "H100", "--profile", str(prof), check=True)
    line = _median_line(out.stdout)
    assert "held out: profile mine was fitted on dstack_nebius_h100_allreduce_2n.txt" in line
    assert line.endswith("not on this log")
    doc = json.loads(run_cli("compare", str(HELD_OUT), "--gpu", "H100", "--profile", str(prof), "--json", check=True).stdout)
    assert doc["in_sample"] is False
    assert re.search(r"median error: ([\d.]+)%", line).group(1) == f"{_median_from_rows(doc):.1f}"


def test_calibrate_points_at_the_held_out_check(tmp_path):
    proc = run_cli("calibrate", str(FIT_ON), "--gpu", "H100", "-o", str(tmp_path / "p.toml"), check=True)
    assert "in sample; topo compare of a log left out of the fit, with --profile, gives its held-out error" \
        in proc.stderr
