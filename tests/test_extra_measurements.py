"""Integrity of data/measurements/extra_nccl_tests.csv, the out-of-sample set benchmarks/accuracy.py scores.

Rows are copied by hand from published nccl-tests output (each with its source_url, see the README next to the
file). These checks catch a transcription slip or a hardware description that disagrees with how accuracy.py
models the run: nccl-tests prints algbw = size / time and busbw = algbw x a factor of the collective and rank
count (NVIDIA/nccl-tests doc/PERFORMANCE.md), so the three printed columns must agree within their rounding.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict

import pytest

from conftest import ROOT
from topo.engine.collectives import COLLECTIVES, busbw_factor

EXTRA = ROOT / "data" / "measurements" / "extra_nccl_tests.csv"
sys.path.insert(0, str(ROOT / "benchmarks"))
import accuracy  # noqa: E402  (benchmarks/accuracy.py: EXTRA_SETUPS, how each setup is modelled)

ROWS = list(csv.DictReader(EXTRA.open(newline="")))


def test_every_row_has_a_source_a_known_collective_and_a_model():
    assert ROWS, EXTRA
    for r in ROWS:
        assert r["source_url"].startswith("https://"), r["setup_id"]
        assert r["collective"] in COLLECTIVES, (r["setup_id"], r["collective"])
        assert r["setup_id"] in accuracy.EXTRA_SETUPS, r["setup_id"]


def test_rank_counts_agree_with_the_model_of_the_run():
    for r in ROWS:
        total = int(r["total_gpus"])
        assert int(r["gpus_per_node"]) * int(r["nodes"]) == total, r["setup_id"]
        assert accuracy.EXTRA_SETUPS[r["setup_id"]].gpus == total, r["setup_id"]


def test_one_setup_is_one_cluster():
    """A setup_id names one run: its GPU, node count and source do not change between rows."""
    seen = defaultdict(set)
    for r in ROWS:
        seen[r["setup_id"]].add((r["gpu"], r["gpus_per_node"], r["nodes"], r["source_url"]))
    assert {s: v for s, v in seen.items() if len(v) > 1} == {}


@pytest.mark.parametrize("row", [r for r in ROWS if r["time_us"] and r["algbw_GBps"]],
                         ids=lambda r: f"{r['setup_id']}:{r['collective']}:{r['size_bytes']}")
def test_printed_algbw_is_size_over_time(row):
    algbw = float(row["algbw_GBps"])
    derived = int(row["size_bytes"]) / (float(row["time_us"]) * 1e-6) / 1e9
    assert derived == pytest.approx(algbw, rel=0.02, abs=0.006)  # 2 decimals printed, times to 4-5 digits


@pytest.mark.parametrize("row", [r for r in ROWS if r["algbw_GBps"] and r["busbw_GBps"] and float(r["algbw_GBps"]) > 1],
                         ids=lambda r: f"{r['setup_id']}:{r['collective']}:{r['size_bytes']}")
def test_printed_busbw_is_algbw_times_the_collective_factor(row):
    factor = busbw_factor(row["collective"], int(row["total_gpus"]))
    assert float(row["algbw_GBps"]) * factor == pytest.approx(float(row["busbw_GBps"]), rel=0.02, abs=0.011)
